"""TensorFlow Lite for Microcontrollers' own LSTM kernel tests, ported (``lstm_eval_test.cc``,
``unidirectional_sequence_lstm_test.cc``; their numbers in ``tests/data/tflm/lstm_test_data.json``, extracted by
``scripts/extract_tflm_vectors.py``).

The 2-batch, 3-step, 2-input, 2-unit LSTM of ``lstm_test_data.cc`` is quantized as the tests' helpers do
(``CreateIntegerNodeContents``: weights and biases with the given scales, symmetric and clamped to [min + 1, max];
inputs and states asymmetric; zero points not folded into the biases) and each piece of the kernel is checked
against the float goldens with the tests' tolerances: the gate outputs (``CheckGateOutput*``), the cell update
(``CheckCellStateUpdate*``), the hidden update (``CheckHiddenStateUpdate*``), one step (``CheckOneStepLSTM*``),
the whole sequence (``TestLSTMEval*``) and the op through its Prepare (``TestUnidirectionalLSTM*``; here also
bit-exact against the tflite-micro interpreter when it is installed). The float variants run fusedrnn's fp32
engine. Where TFLM's checks compare only the first batch x state values of an output, these compare all of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tflm_cases import run_tflm, tflite_model

import fusedrnn
from fusedrnn.targets.tflite_quant import QuantizedLstm
from fusedrnn.targets.tflm import TflmLstm

DATA = json.loads((Path(__file__).parent / "data" / "tflm" / "lstm_test_data.json").read_text())
B, T, I, H = 2, 3, 2, 2
GATES = ("input_gate", "forget_gate", "cell_gate", "output_gate")  # TFLite order i, f, c, o
_INFO = {"int8": (np.int8, np.int32), "int16": (np.int16, np.int64)}
_F32 = np.float32


def _symmetric(v, scale: float, dtype) -> np.ndarray:
    """``SymmetricQuantize``: round(v / float scale) in float, half away from zero, clamped to [min + 1, max]."""
    r = np.asarray(v, _F32) / _F32(scale)
    r = np.sign(r) * np.floor(np.abs(r).astype(np.float64) + 0.5)
    info = np.iinfo(dtype)
    return np.clip(r, info.min + 1, info.max).astype(dtype)


def _quantize(v, p: dict, dtype) -> np.ndarray:
    """``Quantize``: round(v / float scale) + zero point, clamped to the type."""
    r = np.asarray(v, _F32) / _F32(p["scale"])
    r = np.sign(r) * np.floor(np.abs(r).astype(np.float64) + 0.5) + p["zero_point"]
    info = np.iinfo(dtype)
    return np.clip(r, info.min, info.max).astype(dtype)


def _dequantize(q, p: dict) -> np.ndarray:
    return ((np.asarray(q, np.float64) - p["zero_point"]) * _F32(p["scale"])).astype(_F32)


def quantized_node(variant: str) -> tuple[QuantizedLstm, dict]:
    """``Create2x3x2X2Int{8,16}NodeContents``: the integer tensors of the test LSTM and its settings."""
    qs = DATA[f"{variant}_quantization"]
    act, bias_t = _INFO[variant]
    W, R, b, Ws, Rs = [], [], [], [], []
    for name in GATES:
        g, s = DATA["float_gates"][f"{name}_data"], qs[name]
        W.append(_symmetric(g["activation_weight"], s["activation_weight"]["scale"], np.int8).reshape(H, I))
        R.append(_symmetric(g["recurrent_weight"], s["recurrent_weight"]["scale"], np.int8).reshape(H, H))
        b.append(_symmetric(g["fused_bias"], s["bias"]["scale"], bias_t))
        Ws.append(s["activation_weight"]["scale"])
        Rs.append(s["recurrent_weight"]["scale"])
    bd = DATA["builtin_data"]
    q = QuantizedLstm(variant, tuple(W), tuple(R), tuple(b), tuple(Ws), tuple(Rs), qs["input"]["scale"],
                      qs["input"]["zero_point"], qs["hidden_state"]["scale"], qs["hidden_state"]["zero_point"],
                      qs["cell_state"]["scale"], bd["cell_clip"], "TANH")
    return q, qs


def helper_kernel(variant: str) -> tuple[TflmLstm, QuantizedLstm, dict]:
    """The kernel with the parameters the tests' helpers make (``CreateLstmOpData``: double products, the
    settings' own gate scales)."""
    q, qs = quantized_node(variant)
    scales = (qs["nonlinear_activation_input_scale"], qs["nonlinear_activation_output_scale"])
    return TflmLstm(q, products="double", gate_scales=scales), q, qs


def _gate_q15(v, qs) -> np.ndarray:
    return _quantize(v, {"scale": qs["nonlinear_activation_output_scale"], "zero_point": 0}, np.int16)


def _assert_near(got, expected, tol: float) -> None:
    np.testing.assert_allclose(np.ravel(got), np.asarray(expected, np.float64), rtol=0, atol=tol)


def _test_gates(variant: str) -> dict:
    k, q, qs = helper_kernel(variant)
    act = _INFO[variant][0]
    gd = DATA["gate_output_check"]
    x = _quantize(gd["input_data"], qs["input"], act).reshape(B, I)
    h = _quantize(gd["hidden_state"], qs["hidden_state"], act).reshape(B, H)
    out = {}
    for gate, key in (("f", "forget"), ("i", "input"), ("o", "output"), ("c", "cell")):
        out[key] = _dequantize(k.gate(x, h, gate), {"scale": qs["nonlinear_activation_output_scale"],
                                                    "zero_point": 0})
    return out


# ---- lstm_eval_test.cc --------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant, tolerances", [
    ("int8", {"forget": 1e-1, "input": 1e-1, "output": 1e-2, "cell": 1e-2}),  # "performs badly ... overflow"
    ("int16", {"forget": 1e-1, "input": 1e-1, "output": 1e-4, "cell": 1e-4}),
])
def test_check_gate_output(variant, tolerances):
    got = _test_gates(variant)
    gd = DATA["gate_output_check"]
    for key, tol in tolerances.items():
        _assert_near(got[key], gd[f"expected_{key}_gate_output"], tol)


@pytest.mark.parametrize("variant", ["int8", "int16"])
def test_check_cell_state_update(variant):
    k, q, qs = helper_kernel(variant)
    gd = DATA["gate_output_check"]
    c = _quantize(gd["cell_state"], qs["cell_state"], np.int16).reshape(B, H)
    f, i, g = (_gate_q15(gd[f"expected_{n}_gate_output"], qs).reshape(B, H) for n in ("forget", "input", "cell"))
    new = k.update_cell(c, f, i, g)
    _assert_near(_dequantize(new, qs["cell_state"]), gd["expected_updated_cell"], 1e-3)
    assert new.min() == -k.params.quantized_cell_clip  # -6.806 clipped to -6 (cell_clip 6)


@pytest.mark.parametrize("variant, tol", [("int8", 1e-2), ("int16", 1e-4)])
def test_check_hidden_state_update(variant, tol):
    k, q, qs = helper_kernel(variant)
    gd = DATA["gate_output_check"]
    c = _quantize(gd["expected_updated_cell"], qs["cell_state"], np.int16).reshape(B, H)
    o = _gate_q15(gd["expected_output_gate_output"], qs).reshape(B, H)
    _assert_near(_dequantize(k.update_hidden(c, o), qs["hidden_state"]), gd["expected_updated_hidden"], tol)


@pytest.mark.parametrize("variant, h_tol, c_tol", [("int8", 1e-2, 1e-1), ("int16", 1e-3, 1e-1)])
def test_check_one_step(variant, h_tol, c_tol):
    k, q, qs = helper_kernel(variant)
    act = _INFO[variant][0]
    gd = DATA["gate_output_check"]
    x = _quantize(gd["input_data"], qs["input"], act).reshape(1, B, I)
    h = _quantize(gd["hidden_state"], qs["hidden_state"], act).reshape(B, H)
    c = _quantize(gd["cell_state"], qs["cell_state"], np.int16).reshape(B, H)
    _, (h1, c1) = k.run(x, (h, c))
    _assert_near(_dequantize(h1, qs["hidden_state"]), gd["expected_updated_hidden"], h_tol)
    _assert_near(_dequantize(c1, qs["cell_state"]), gd["expected_updated_cell"], c_tol)


def _eval(k: TflmLstm, q: QuantizedLstm, qs: dict, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    act = _INFO[variant][0]
    ev = DATA["eval_check"]
    x = _quantize(ev["input_data"], qs["input"], act).reshape(B, T, I).transpose(1, 0, 2)  # batch-major data
    h0 = _quantize(ev["hidden_state"], qs["hidden_state"], act).reshape(B, H)
    y, (h, c) = k.run(x, (h0, np.zeros((B, H), np.int16)))
    return y, h, c


def _check_eval(y, h, c, qs, h_tol: float, c_tol: float) -> None:
    ev = DATA["eval_check"]
    _assert_near(_dequantize(y.transpose(1, 0, 2), qs["output"]), ev["expected_output"], h_tol)
    _assert_near(_dequantize(h, qs["hidden_state"]), ev["expected_hidden_state"], h_tol)
    _assert_near(_dequantize(c, qs["cell_state"]), ev["expected_cell_state"], c_tol)


@pytest.mark.parametrize("variant, h_tol, c_tol", [("int8", 1e-2, 1e-2), ("int16", 1e-3, 1e-2)])
def test_lstm_eval(variant, h_tol, c_tol):
    k, q, qs = helper_kernel(variant)
    _check_eval(*_eval(k, q, qs, variant), qs, h_tol, c_tol)


# ---- unidirectional_sequence_lstm_test.cc: the op, parameters from its Prepare ---------------------------------
@pytest.mark.parametrize("variant, h_tol, c_tol", [("int8", 1e-2, 1e-2), ("int16", 1e-3, 1e-2)])
def test_unidirectional_lstm(variant, h_tol, c_tol):
    q, qs = quantized_node(variant)
    k = TflmLstm(q)
    y, h, c = _eval(k, q, qs, variant)
    _check_eval(y, h, c, qs, h_tol, c_tol)
    # and bit for bit what the tflite-micro interpreter computes for the same model (batch-major, as in the test)
    act = _INFO[variant][0]
    xq = _quantize(DATA["eval_check"]["input_data"], qs["input"], act).reshape(B, T, I)
    (yi,) = run_tflm(tflite_model(q, batch=B, time=T, time_major=False), xq)
    np.testing.assert_array_equal(yi, y.transpose(1, 0, 2))


def test_float_goldens_on_the_fp32_engine():
    """``TestLSTMEvalFloat`` / ``TestUnidirectionalLSTMFloat``: the float LSTM (cell_clip 6, batch-major)."""
    g = DATA["float_gates"]
    W = np.concatenate([np.reshape(g[f"{n}_data"]["activation_weight"], (H, I)) for n in GATES])
    R = np.concatenate([np.reshape(g[f"{n}_data"]["recurrent_weight"], (H, H)) for n in GATES])
    b = np.concatenate([g[f"{n}_data"]["fused_bias"] for n in GATES])
    layer = fusedrnn.LSTM(W[None], R[None], b[None], batch_first=True, cell_clip=DATA["builtin_data"]["cell_clip"])
    ev = DATA["eval_check"]
    y, (h, c) = layer(np.reshape(ev["input_data"], (B, T, I)).astype(np.float32))
    _assert_near(y, ev["expected_output"], 1e-6)
    _assert_near(h, ev["expected_hidden_state"], 1e-6)
    _assert_near(c, ev["expected_cell_state"], 1e-6)
