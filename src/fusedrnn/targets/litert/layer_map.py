"""fusedrnn layers <-> TFLite fused-op tensors (litert.md sections 2 and 9.3).

Canonical LSTM gate order (i, f, g, o) is TFLite's (i, f, c, o); matrices are already out x in. A layer direction
becomes the 24 slots of an UNIDIRECTIONAL_SEQUENCE_LSTM: per-gate W, R and bias (b_x + b_h), peepholes, projection,
layer norm; coupling "cifg" leaves the input-gate slots empty. The fused activation is the layer's g and h
activation (Tanh -> TANH, Relu -> RELU, Sigmoid -> SIGMOID, identity Affine -> NONE).

Quantization follows the TF converter's 8x8_16 recipe (``operator_property.cc``): int8 symmetric per-tensor weights
(``max|w| / 127``), int32 biases at ``s_x · s_w`` (``s_LN · 2^-10`` with layer norm), int16 symmetric peepholes and
layer-norm coefficients, int8 asymmetric input / output / effective hidden from calibration ranges, an int16 cell
at the power-of-two scale ``2^ceil(log2 max|c|) / 32768`` and int16 gate intermediates (layer norm only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedFeatureError
from ...numerics.affine import choose_qparams, tflite_symmetric_quantize
from ..tflite_quant import LstmStats, cell_scale_exponent, round_away
from .slots import CELL_STATE, INPUT, OUTPUT_STATE, PROJECTION_BIAS, PROJECTION_WEIGHTS, LstmOptions, LstmTensors, const

_ACT_TO_FUSED = {"Tanh": "TANH", "Relu": "RELU", "Sigmoid": "SIGMOID"}


def fused_activation(layer, d: int = 0) -> str:
    """The TFLite fused activation of direction d (its g and h activations, which must agree; f must be Sigmoid)."""
    acts = layer.activations[d]
    names = [a.name for a in acts]
    if layer.cell == "lstm":
        f, g, h = acts
        if f.name != "Sigmoid" or (g.name, g.alpha, g.beta) != (h.name, h.alpha, h.beta):
            raise UnsupportedFeatureError(f"activations: TFLite's LSTM uses sigmoid gates and one fused activation "
                                          f"for the cell input and output, got {names}")
        a = g
    else:
        a = acts[0]
    if a.name == "Affine" and a.alpha == 1.0 and a.beta == 0.0:
        return "NONE"
    if a.name not in _ACT_TO_FUSED:
        raise UnsupportedFeatureError(f"activations: TFLite has no fused activation for {a.name}")
    return _ACT_TO_FUSED[a.name]


def check_lstm_expressible(layer) -> None:
    if layer.clip is not None:
        raise UnsupportedFeatureError("clip: TFLite's LSTM has no pre-activation clip (only cell_clip / proj_clip)")
    if layer.coupling == "input_forget":
        raise UnsupportedFeatureError("coupling: TFLite couples the gates the other way (CIFG, i = 1 - f); "
                                      "'input_forget' (f = 1 - i) cannot be expressed")


@dataclass
class FloatDirection:
    """One LSTM direction's float tensors in TFLite layout (gate lists in i, f, c, o order)."""

    W: list
    R: list
    b: list
    P: list | None
    L: list | None
    proj_W: np.ndarray | None
    proj_b: np.ndarray | None
    cifg: bool


def float_direction(layer, d: int) -> FloatDirection:
    H = layer.hidden_size

    def split(a):
        return [np.asarray(a[k * H:(k + 1) * H], np.float32) for k in range(4)]

    W = split(layer.W[d])
    R = split(layer.R[d])
    b = split(layer.bias_sum(d))
    P = None if layer.P is None else [np.asarray(layer.P[d, k], np.float32) for k in range(3)]
    L = None if layer.layer_norm is None else [np.asarray(layer.layer_norm[d, k], np.float32) for k in range(4)]
    pW = None if layer.proj_W is None else np.asarray(layer.proj_W[d], np.float32)
    pb = None if layer.proj_b is None else np.asarray(layer.proj_b[d], np.float32)
    return FloatDirection(W, R, b, P, L, pW, pb, layer.coupling == "cifg")


def lstm_options(layer, d: int = 0, *, asymmetric: bool = False) -> LstmOptions:
    return LstmOptions(fused_activation_function=fused_activation(layer, d), cell_clip=layer.cell_clip or 0.0,
                       proj_clip=layer.proj_clip or 0.0, time_major=True, asymmetric_quantize_inputs=asymmetric,
                       diagonal_recurrent_tensors=layer.diagonal)


def _hyb(name: str, w: np.ndarray, hybrid: bool):
    if not hybrid:
        return const(name, np.asarray(w, np.float32))
    q, s = tflite_symmetric_quantize(np.asarray(w, np.float32))
    return const(name, q, float(s))


def float_tensors(fd: FloatDirection, *, hybrid: bool = False, diagonal: bool = False) -> LstmTensors:
    """Float (or hybrid: int8 symmetric per-tensor weights, peepholes and projection) tensors of a direction."""
    s: list = [None] * 24
    H, I = fd.W[0].shape
    Hp = H if fd.proj_W is None else fd.proj_W.shape[0]
    s[INPUT] = const("x", None, type_name="FLOAT32", shape=(1, 1, I))
    for g in range(4):
        if g == 0 and fd.cifg:
            continue
        s[1 + g] = _hyb(f"input_to_{'ifco'[g]}_weights", fd.W[g], hybrid)
        s[5 + g] = _hyb(f"recurrent_to_{'ifco'[g]}_weights", fd.R[g], hybrid and not diagonal)
        s[12 + g] = const(f"{'ifco'[g]}_gate_bias", fd.b[g].astype(np.float32))
        if fd.L is not None:
            s[20 + g] = const(f"{'ifco'[g]}_layer_norm", fd.L[g])
    if fd.P is not None:
        for g, k in ((0, 9), (1, 10), (2, 11)):
            if g == 0 and fd.cifg:
                continue
            s[k] = _hyb(f"cell_to_{'ifo'[g]}_weights", fd.P[g], hybrid)
    if fd.proj_W is not None:
        s[PROJECTION_WEIGHTS] = _hyb("projection_weights", fd.proj_W, hybrid)
        if fd.proj_b is not None:
            s[PROJECTION_BIAS] = const("projection_bias", fd.proj_b)
    s[OUTPUT_STATE] = const("output_state", None, type_name="FLOAT32", shape=(1, Hp), is_variable=True)
    s[CELL_STATE] = const("cell_state", None, type_name="FLOAT32", shape=(1, H), is_variable=True)
    return LstmTensors(s)


# ---- 8x8_16 ----------------------------------------------------------------------------------------------------
def _sym16(name: str, v: np.ndarray):
    a = float(np.abs(v).max())
    s = a / 32767 if a > 0 else 1.0
    return const(name, np.clip(round_away(v / s), -32767, 32767).astype(np.int16), s)


def _bias32(name: str, v: np.ndarray, scale: float):
    q = np.clip(round_away(np.asarray(v, np.float64) / scale), -(2**31), 2**31 - 1).astype(np.int32)
    return const(name, q, scale)


def integer_tensors(fd: FloatDirection, st: LstmStats) -> LstmTensors:
    """The converter's 8x8_16 quantization of a float direction from its calibration statistics."""
    s: list = [None] * 24
    H, I = fd.W[0].shape
    Hp = H if fd.proj_W is None else fd.proj_W.shape[0]
    s_x, zp_x = choose_qparams(st.x_min, st.x_max, np.int8)
    s_h, zp_h = choose_qparams(st.h_min, st.h_max, np.int8)
    s_m, zp_m = (s_h, zp_h) if fd.proj_W is None else choose_qparams(st.m_min, st.m_max, np.int8)
    s[INPUT] = const("x", None, float(s_x), int(zp_x), type_name="INT8", shape=(1, 1, I))
    inter = []
    for g in range(4):
        if fd.L is not None:  # (the interpreter reads all four scales, also the unused CIFG input gate's)
            a = max(st.gate_absmax[g], 1e-6) if not (g == 0 and fd.cifg) else 2.0**-12 * 32767
            inter.append(const(f"intermediate{g}", None, a / 32767, 0, type_name="INT16", shape=(0,)))
        else:
            inter.append(const(f"intermediate{g}", None, type_name="FLOAT32", shape=(0,)))
    inter.append(const("effective_hidden", None, float(s_m), int(zp_m), type_name="INT8", shape=(0,)))
    for g in range(4):
        if g == 0 and fd.cifg:
            continue
        qw, sw = tflite_symmetric_quantize(fd.W[g])
        qr, sr = tflite_symmetric_quantize(fd.R[g])
        s[1 + g] = const(f"input_to_{'ifco'[g]}_weights", qw, float(sw))
        s[5 + g] = const(f"recurrent_to_{'ifco'[g]}_weights", qr, float(sr))
        if fd.L is not None:
            ln = _sym16(f"{'ifco'[g]}_layer_norm", fd.L[g])
            s[20 + g] = ln
            s[12 + g] = _bias32(f"{'ifco'[g]}_gate_bias", fd.b[g], float(ln.scale[0]) * 2.0**-10)
        else:
            s[12 + g] = _bias32(f"{'ifco'[g]}_gate_bias", fd.b[g], float(np.float32(sw) * np.float32(s_x)))
    if fd.P is not None:
        for g, k in ((0, 9), (1, 10), (2, 11)):
            if not (g == 0 and fd.cifg):
                s[k] = _sym16(f"cell_to_{'ifo'[g]}_weights", fd.P[g])
    if fd.proj_W is not None:
        qp, sp = tflite_symmetric_quantize(fd.proj_W)
        s[PROJECTION_WEIGHTS] = const("projection_weights", qp, float(sp))
        if fd.proj_b is not None:
            s[PROJECTION_BIAS] = _bias32("projection_bias", fd.proj_b, float(sp) * float(s_m))
    s[OUTPUT_STATE] = const("output_state", None, float(s_h), int(zp_h), type_name="INT8", shape=(1, Hp),
                            is_variable=True)
    s[CELL_STATE] = const("cell_state", None, 2.0 ** cell_scale_exponent(st.c_absmax), 0, type_name="INT16",
                          shape=(1, H), is_variable=True)
    return LstmTensors(s, inter)
