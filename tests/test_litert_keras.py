"""``fusedrnn.litert.from_keras``: the converter's graph of a Keras LSTM (litert.md section 9.1) — tensors split
i, f, c, o and transposed, cell_clip = 10, go_backwards as REVERSE_V2, return_sequences=False as STRIDED_SLICE,
Bidirectional as two ops + CONCATENATION / ADD — matches Keras, and the LiteRT interpreter running the written
bytes matches fusedrnn (bit for bit in int8)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")
keras = pytest.importorskip("keras")

from test_litert_random import run_interpreter  # noqa: E402

from fusedrnn import litert  # noqa: E402
from fusedrnn.errors import ConversionError  # noqa: E402

T, I, U = 5, 12, 8


def _keras_model(layer, n_in=I):
    inp = keras.Input((T, n_in), batch_size=2)
    return keras.Model(inp, layer(inp))


def _quant(x, k):
    s, zp = float(k.t[0].scale[0]), int(k.t[0].zero_point[0])
    return np.clip(np.rint(x / s) + zp, -128, 127).astype(np.int8)


@pytest.mark.parametrize("kw", [{}, {"return_sequences": False}, {"go_backwards": True}], ids=["seq", "last", "back"])
@pytest.mark.parametrize("mode", ["float", "hybrid", "int8"])
def test_lstm_graphs(kw, mode):
    rng = np.random.default_rng(0)
    n = 32 if mode == "hybrid" else U  # the converter keeps an LSTM float when a weight has < 1024 elements
    layer = keras.layers.LSTM(n, return_sequences=kw.get("return_sequences", True),
                              go_backwards=kw.get("go_backwards", False))
    km = _keras_model(layer, n)
    x = rng.standard_normal((2, T, n)).astype(np.float32)
    yk = keras.ops.convert_to_numpy(km(x))
    cal = [rng.standard_normal((2, T, n)) for _ in range(8)] + [x]
    model = litert.from_keras(layer, mode=mode, calibration=cal, batch_size=2, time_steps=T)
    names = [op.name for op in model.info.ops]
    assert names.count("UNIDIRECTIONAL_SEQUENCE_LSTM") == 1
    assert ("REVERSE_V2" in names) == kw.get("go_backwards", False)
    assert ("STRIDED_SLICE" in names) == (kw.get("return_sequences", True) is False)
    op = next(o for o in model.info.ops if o.name == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    assert op.options["cell_clip"] == 10.0 and op.options["fused_activation_function"] == "TANH"
    assert op.options["time_major"] is False and op.options["asymmetric_quantize_inputs"] == (mode == "hybrid")
    k = model.ops[0].kernel
    if mode == "float":  # the gate split: slot 1 + g is kernel[:, g*U:(g+1)*U] transposed
        kernel, rec, bias = (keras.ops.convert_to_numpy(w) for w in layer.weights)
        for g in range(4):
            np.testing.assert_array_equal(k.t[1 + g].data, kernel[:, g * n:(g + 1) * n].T)
            np.testing.assert_array_equal(k.t[5 + g].data, rec[:, g * n:(g + 1) * n].T)
            np.testing.assert_array_equal(k.t[12 + g].data, bias[g * n:(g + 1) * n])
    assert k.kind == {"float": "float", "hybrid": "hybrid", "int8": "integer"}[mode]
    xin = _quant(x, k) if mode == "int8" else x
    y = model(xin)
    yi = run_interpreter(model.content, [xin])[0]
    if mode == "int8":
        np.testing.assert_array_equal(y, yi)
        y = (y.astype(np.float64) - int(k.t[18].zero_point[0])) * float(k.t[18].scale[0])
    else:
        np.testing.assert_allclose(y, yi, rtol=1e-6, atol=1e-6)
    tol = {"float": 1e-5, "hybrid": 0.05, "int8": 0.05}[mode]
    assert np.abs(y - yk).max() < tol


@pytest.mark.parametrize("merge_mode", ["concat", "sum"])
def test_bidirectional_graph(merge_mode):
    rng = np.random.default_rng(1)
    layer = keras.layers.Bidirectional(keras.layers.LSTM(U, return_sequences=True), merge_mode=merge_mode)
    km = _keras_model(layer)
    x = rng.standard_normal((2, T, I)).astype(np.float32)
    model = litert.from_keras(layer, batch_size=2, time_steps=T)
    names = [op.name for op in model.info.ops]
    assert names.count("REVERSE_V2") == 2 and names[-1] == ("CONCATENATION" if merge_mode == "concat" else "ADD")
    y = model(x)
    np.testing.assert_allclose(y, keras.ops.convert_to_numpy(km(x)), rtol=0, atol=1e-5)
    np.testing.assert_allclose(y, run_interpreter(model.content, [x])[0], rtol=1e-6, atol=1e-6)


def test_small_lstm_stays_float_in_hybrid_mode():
    layer = keras.layers.LSTM(U)
    _keras_model(layer)
    model = litert.from_keras(layer, mode="hybrid")
    assert model.ops[0].kind == "float"


def test_not_fusable():
    with pytest.raises(ConversionError, match="fuses only LSTMs"):
        litert.from_keras(_gru())
    layer = keras.layers.LSTM(U, activation="relu")
    _keras_model(layer)
    with pytest.raises(ConversionError, match="activation tanh"):
        litert.from_keras(layer)


def _gru():
    layer = keras.layers.GRU(U)
    _keras_model(layer)
    return layer
