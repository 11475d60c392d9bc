"""Whole int8 graphs of Keras recurrent models through ``litert.load``, bit for bit against the LiteRT interpreter:
Bidirectional LSTMs with every merge mode (CONCATENATION, quantized ADD, MUL, ADD + MUL by 0.5), stacked LSTMs
(go_backwards, a summed bidirectional layer feeding another), an LSTM with a Dense + softmax head and a sequence
Dense + tanh head — the graphs ``litert.from_keras`` writes as the TF converter does (TensorFlow itself is not
needed). Every op runs on fusedrnn's kernels (``model.delegated`` stays empty)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
pytest.importorskip("ai_edge_litert")
keras = pytest.importorskip("keras")

from test_litert_graph_ops import interpreter_outputs  # noqa: E402

from fusedrnn import litert  # noqa: E402

B, T, I = 2, 6, 5  # noqa: E741


def _models() -> dict:
    L = keras.layers
    bi = {m: [L.Bidirectional(L.LSTM(8, return_sequences=True), merge_mode=m)] for m in ("concat", "sum", "mul",
                                                                                          "ave")}
    return {
        **{f"bidirectional_{m}": layers for m, layers in bi.items()},
        "stacked": [L.LSTM(8, return_sequences=True), L.LSTM(6, return_sequences=True, go_backwards=True),
                    L.LSTM(7, return_sequences=False)],
        "bidirectional_sum_stacked": [L.Bidirectional(L.LSTM(6, return_sequences=True), merge_mode="sum"),
                                      L.Bidirectional(L.LSTM(5, return_sequences=True), merge_mode="concat")],
        "lstm_dense_softmax": [L.LSTM(12, return_sequences=False), L.Dense(10, activation="softmax")],
        "sequence_dense_tanh": [L.Bidirectional(L.LSTM(6, return_sequences=True), merge_mode="ave"),
                                L.Dense(4, activation="relu"), L.Dense(3, activation="tanh")],
    }


@pytest.fixture(scope="session")
def converted():
    """{name: (keras model, int8 graph, float graph)}: converted once per session."""
    rng = np.random.default_rng(19)
    keras.utils.set_random_seed(19)
    out = {}
    for name, layers in _models().items():
        km = keras.Sequential([keras.Input((T, I), batch_size=B), *layers])
        cal = [rng.normal(size=(B, T, I)).astype(np.float32) for _ in range(3)]
        out[name] = (km, litert.from_keras(km, mode="int8", calibration=cal, batch_size=B),
                     litert.from_keras(km, batch_size=B, time_steps=T))
    return out


def _quantize(x, model):
    d = model.input_details()[0]
    s, zp = d["quantization"]
    return np.clip(np.rint(x / s) + zp, -128, 127).astype(np.int8)


@pytest.mark.parametrize("name", list(_models()))
def test_int8_graph_is_bit_exact_with_the_interpreter(converted, name):
    km, model, fmodel = converted[name]
    rng = np.random.default_rng(len(name))
    names = [op.name for op in model.info.ops]
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in names
    for _ in range(2):  # the second call from a reset state: the LSTMs' variables are reset
        x = rng.normal(size=(B, T, I)).astype(np.float32)
        xq = _quantize(x, model)
        model.reset_all_variables()
        y = model(xq)
        ref = interpreter_outputs(model.content, [xq])[0]
        assert y.dtype == np.int8 and y.shape == ref.shape
        np.testing.assert_array_equal(y, ref)
        assert model.delegated == set(), model.delegated  # every op on fusedrnn's kernels
        s, zp = model.output_details()[0]["quantization"]
        yk = keras.ops.convert_to_numpy(km(x))
        assert np.abs((y.astype(np.float64) - zp) * s - yk).max() < 0.15, name  # close to Keras
        fmodel.reset_all_variables()
        yf = fmodel(x)
        np.testing.assert_allclose(yf, interpreter_outputs(fmodel.content, [x])[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(yf, yk, rtol=1e-4, atol=1e-4)


def test_merge_ops_are_the_converters(converted):
    last = {m: [op.name for op in converted[f"bidirectional_{m}"][1].info.ops][-1] for m in ("concat", "sum", "mul",
                                                                                              "ave")}
    assert last == {"concat": "CONCATENATION", "sum": "ADD", "mul": "MUL", "ave": "MUL"}
    head = [op.name for op in converted["lstm_dense_softmax"][1].info.ops][-3:]
    assert head == ["STRIDED_SLICE", "FULLY_CONNECTED", "SOFTMAX"]
    t = converted["lstm_dense_softmax"][1].info.tensors
    out = t[converted["lstm_dense_softmax"][1].info.outputs[0]]
    assert out.type_name == "INT8" and float(out.scale[0]) == 1 / 256 and int(out.zero_point[0]) == -128
