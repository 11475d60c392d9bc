"""Quark's ExtendedLSTM nodes inside models run through ``fusedrnn.onnx.load`` (both executors), natively on the
``quark`` targets and as their float LSTM form elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

import fusedrnn
import fusedrnn.quark as quark


@pytest.fixture(scope="module")
def converted():
    rng = np.random.default_rng(3)
    H, I, T = 8, 5, 12
    layer = fusedrnn.LSTM(rng.normal(size=(2, 4 * H, I)) * 0.4, rng.normal(size=(2, 4 * H, H)) * 0.4,
                          direction="bidirectional", merge="stack")
    x = rng.normal(size=(T, 3, I)).astype(np.float32)
    return layer, quark.convert(layer, x), x


@pytest.mark.parametrize("executor", ["reference", "auto"])
def test_extended_lstm_runs_like_quarks_own_runner(converted, executor):
    layer, conv, x = converted
    model = fusedrnn.onnx.load(conv.model, executor=executor)
    assert len(model.recurrent_nodes) == 1
    feeds = {"X": x[:, :1]}
    y = model.run(feeds)["Y"]
    np.testing.assert_array_equal(y, quark.run_model(conv.model, feeds)["Y"])  # native: faithful kernel
    np.testing.assert_array_equal(model.to("quark", calibration=feeds).run(feeds)["Y"], y)
    corrected = model.to("quark_corrected", calibration=feeds).run(feeds)["Y"]
    np.testing.assert_array_equal(corrected, quark.run_model(conv.model, feeds, mode="corrected")["Y"])
    # float targets run the node's float form: an ONNX LSTM on the dequantized tensors
    y32 = model.to("fp32").run(feeds)["Y"]
    ref, _ = layer.to("fp64")(x[:, :1].astype(np.float64))
    assert np.max(np.abs(y32 - ref)) < 5e-3  # within the uint16 quantization of X, W, R, B
    assert not np.array_equal(y32, y)
