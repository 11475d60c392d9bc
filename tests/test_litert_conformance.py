"""The LiteRT interpreter's stored outputs in conformance/tflite (README there): every model, run by fusedrnn from
the .tflite file, reproduces y and, without a reset, y_second_invoke_no_reset (bit for bit for int8, 1e-6 for float
and hybrid); the importer recovers exactly the slot tensors and quantization parameters stored in the .npz."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_dir

pytest.importorskip("ai_edge_litert")

from fusedrnn import litert  # noqa: E402
from fusedrnn.targets.litert.graph import lstm_tensors  # noqa: E402
from fusedrnn.targets.litert.reader import read_model  # noqa: E402

MODELS = ["k2_lstm_float", "k2_lstm_dynamic", "k2_lstm_int8", "k2_bilstm_float", "k2_bilstm_dynamic",
          "k2_bilstm_int8", "k2_lstm_backwards_int8", "k2_lstm_last_int8"]


def _load(name):
    d = shared_dir("conformance", "tflite")
    return d / f"{name}.tflite", np.load(d / f"{name}.npz")


@pytest.mark.parametrize("name", MODELS)
def test_fixture_outputs_and_state_carry(name):
    path, ref = _load(name)
    model = litert.load(path)
    y1 = model(ref["x"])
    y2 = model(ref["x"])
    if ref["y"].dtype == np.int8:
        assert y1.dtype == np.int8
        np.testing.assert_array_equal(y1, ref["y"])
        np.testing.assert_array_equal(y2, ref["y_second_invoke_no_reset"])
    else:
        np.testing.assert_allclose(y1, ref["y"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(y2, ref["y_second_invoke_no_reset"], rtol=0, atol=1e-6)
    assert not np.array_equal(y1, y2)  # the state really was carried over
    model.reset_all_variables()
    y3 = model(ref["x"])
    np.testing.assert_array_equal(y3, y1)


@pytest.mark.parametrize("name", MODELS)
def test_importer_recovers_npz_tensors(name):
    path, ref = _load(name)
    index = json.loads((shared_dir("conformance", "tflite") / "index.json").read_text())["models"][name]
    info = read_model(path)
    lstm_ops = [op for op in index["ops"] if "array_prefix" in op]
    ours = [op for op in info.ops if op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert len(ours) == len(lstm_ops)
    checked = 0
    for meta, op in zip(lstm_ops, ours, strict=True):
        assert list(op.inputs) == meta["inputs"]
        assert op.options["cell_clip"] == pytest.approx(10.0) and op.options["fused_activation_function"] == "TANH"
        t = lstm_tensors(info, op)
        p = meta["array_prefix"]
        for k in range(24):
            key = f"{p}_in{k:02d}"
            if key in ref.files:
                np.testing.assert_array_equal(t[k].data, ref[key])
                assert t[k].data.dtype == ref[key].dtype
                checked += 1
            if key + "_scale" in ref.files:
                np.testing.assert_array_equal(t[k].scale, ref[key + "_scale"])
                np.testing.assert_array_equal(t[k].zero_point, ref[key + "_zero_point"])
                checked += 1
        if f"{p}_intermediate4_scale" in ref.files:
            np.testing.assert_array_equal(t.intermediates[4].scale, ref[f"{p}_intermediate4_scale"])
            np.testing.assert_array_equal(t.intermediates[4].zero_point, ref[f"{p}_intermediate4_zero_point"])
        assert t[18].is_variable and t[19].is_variable
    assert checked >= 12


def test_recurrent_ops_run_alone_with_their_own_state():
    path, ref = _load("k2_lstm_int8")
    model = litert.load(path)
    (op,) = model.ops
    assert op.kind == "integer" and model.op_indices == [0]
    y1 = op(ref["x"])
    np.testing.assert_array_equal(y1, ref["y"])
    h, c = op.state[0]
    assert h.dtype == np.int8 and c.dtype == np.int16 and h.shape == (1, 64)
    np.testing.assert_array_equal(op(ref["x"]), ref["y_second_invoke_no_reset"])
    op.reset()
    np.testing.assert_array_equal(op(ref["x"]), ref["y"])
