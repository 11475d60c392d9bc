"""The non-recurrent ops of converted recurrent .tflite graphs, as the LiteRT interpreter's builtin kernels compute
them (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``: the optimized kernels without XNNPACK).

Integer arithmetic follows LiteRT's kernels (``tflite/kernels/*.cc`` and ``internal/reference``) with the shared
primitives of :mod:`fusedrnn.numerics`: ``MultiplyByQuantizedMultiplier`` (:class:`~fusedrnn.numerics.core.Requant`,
double rounding as in the pip wheels; its int64 form ``core.mbqm64``), ``QuantizeMultiplier``. Every kernel reads
the op's tensors (types, quantization, options) and its input arrays and returns its output arrays:

===========================================  ==================================================================
op                                           arithmetic
===========================================  ==================================================================
ADD, SUB (int8, uint8, general int16)        inputs shifted left by 20 (int16: 15), each rescaled to twice the
                                             larger input scale (MBQM, multipliers < 1), added / subtracted,
                                             rescaled to the output (MBQM), + zero point, clamped to the fused
                                             activation's range
MUL (int8, uint8, int16)                     (a - za)(b - zb), MBQM by sa·sb/so, + zero point, clamped
FULLY_CONNECTED (int8, int16 x int8)         exact integer dot products (float64 BLAS: every partial sum below
                                             2^53) + int32 / int64 bias; int8: the GEMM's requantization (SRDHM,
                                             then a right shift rounding ties up; per-tensor multiplier from the
                                             float32 product of the scales), int16: round(acc · si·sw/so) in
                                             double (the reference kernel the interpreter selects); clamped
SOFTMAX (int8 -> int8)                       the optimized kernel's float table exp(-s·beta·(max - x)), summed in
                                             float32 in order, round(p / (sum · so)) half away + zero point
TANH, LOGISTIC (int8, uint8)                 the kernels' 256-entry table of the float32 function
TANH, LOGISTIC (float)                       Eigen's float32 approximations (numerics.eigen, bit-exact)
QUANTIZE                                     float -> integer: the first 8·floor(n/8) values rint(x · float32(1 /
                                             scale)) (float32, half to even), the rest round(x / scale) half away
                                             in double; + zero point, saturated; integer -> integer: MBQM by si/so
                                             (8-bit to 8-bit: the first 16·floor(n/16) values with the SIMD
                                             multiplier, ties up)
DEQUANTIZE                                   the first 8·floor(n/8) values float32(q · scale) + float32(-zp ·
                                             scale) in float32, the rest float32(double(scale) · (q - zp))
float ADD, SUB, MUL                          float32, fused activation (bit-exact); float FULLY_CONNECTED,
                                             SOFTMAX, MEAN in float32 (the rounding of sums and of exp may
                                             differ in the last bits)
data movement                                CONCATENATION, REVERSE_V2, STRIDED_SLICE, SLICE, RESHAPE, SQUEEZE,
                                             EXPAND_DIMS, TRANSPOSE, SPLIT, SPLIT_V, PACK, UNPACK, GATHER copy
                                             values (quantized tensors keep their codes)
===========================================  ==================================================================

A case a kernel here does not compute (another type, power-of-two int16 ADD, hybrid FULLY_CONNECTED, int16
softmax / tanh / logistic, integer MEAN, STRIDED_SLICE with ellipsis or new-axis masks) raises
:class:`NotNative`; :class:`~fusedrnn.targets.litert.graph.Model` then runs that op on the interpreter (when
``ai-edge-litert`` is installed) or raises UnsupportedFeatureError naming the op.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import FileFormatError
from ...numerics import core, eigen
from ...numerics.gemmlowp import quantize_multiplier
from .reader import OpInfo, TensorInfo


class NotNative(Exception):  # noqa: N818 - a signal, caught by the graph runner
    """The op (with these tensors) is not computed by fusedrnn's kernels; the message says what."""


@dataclass
class OpCall:
    """One op's inputs (arrays, None where absent) and the TensorInfos of its inputs and outputs."""

    op: OpInfo
    ins: list
    in_t: list
    out_t: list

    @property
    def options(self) -> dict:
        return self.op.options

    def where(self) -> str:
        return f"op {self.op.index} ({self.op.name})"


_INT_TYPES = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16}


def _qparams(t: TensorInfo) -> tuple[float, int]:
    """(scale as a double of the float32 value, zero point) of a per-tensor quantized tensor."""
    if t is None or not t.quantized:
        raise NotNative(f"tensor {getattr(t, 'name', None)!r} has no quantization parameters")
    if t.scale.size != 1:
        raise NotNative(f"tensor {t.name!r} is quantized per axis")
    return float(t.scale[0]), int(t.zero_point[0])


def _quantized(t: TensorInfo | None) -> bool:
    return t is not None and t.type_name in _INT_TYPES


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise NotNative(what)


def _round_away_f32(v: np.ndarray) -> np.ndarray:
    """TfLiteRound (std::round: half away from zero) of float32 values, as float64."""
    v = np.asarray(v, np.float64)
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def _quantize_f32(f: float, scale: float) -> int:
    """zero-point-free ``TfLiteRound(f / scale)`` in float32."""
    return int(_round_away_f32(np.float32(f) / np.float32(scale)))


def activation_range(t: TensorInfo, activation: str) -> tuple[int, int]:
    """TFLite ``CalculateActivationRangeQuantized``: the integer output range of a fused activation."""
    info = np.iinfo(_INT_TYPES[t.type_name])
    lo, hi = int(info.min), int(info.max)
    if activation == "NONE":
        return lo, hi
    s, zp = _qparams(t)
    bounds = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(activation)
    if bounds is None:
        raise NotNative(f"fused activation {activation} on a quantized output")
    a, b = bounds
    lo = max(lo, zp + _quantize_f32(a, s))
    if b is not None:
        hi = min(hi, zp + _quantize_f32(b, s))
    return lo, hi


def _float_activation(y: np.ndarray, activation: str) -> np.ndarray:
    ranges = {"NONE": None, "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
    if activation not in ranges:
        raise NotNative(f"fused activation {activation}")
    r = ranges[activation]
    if r is not None:
        y = np.maximum(y, np.float32(r[0])) if r[1] is None else np.clip(y, np.float32(r[0]), np.float32(r[1]))
    return y.astype(np.float32, copy=False)


@functools.cache
def _multiplier(m: float) -> tuple[int, int]:
    """QuantizeMultiplier(m) as Python ints (Q, shift)."""
    q, s = quantize_multiplier(m)
    return int(q), int(s)


def _requant(x: np.ndarray, m: float) -> np.ndarray:
    """MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(m)) on int32 values (int64 array in and out)."""
    q, s = _multiplier(m)
    return core.Requant(q, s)(core.i64(x))


def _store(v: np.ndarray, t: TensorInfo, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    dt = _INT_TYPES[t.type_name]
    info = np.iinfo(dt)
    return np.clip(v, info.min if lo is None else lo, info.max if hi is None else hi).astype(dt)


def _same_types(c: OpCall) -> str:
    types = {t.type_name for t in c.in_t[:2] if t is not None}
    if len(types) != 1 or c.out_t[0].type_name not in types:
        raise NotNative(f"input/output types {sorted(types)} -> {c.out_t[0].type_name}")
    return types.pop()


# ---- element-wise arithmetic -----------------------------------------------------------------------------
def _add_sub(c: OpCall, sign: int) -> list:
    a, b = c.ins[0], c.ins[1]
    ta, tb, to = c.in_t[0], c.in_t[1], c.out_t[0]
    act = c.options.get("fused_activation_function", "NONE")
    kind = _same_types(c)
    if kind == "FLOAT32":
        y = np.add(a, b) if sign > 0 else np.subtract(a, b)
        return [_float_activation(y.astype(np.float32), act)]
    _require(kind in _INT_TYPES, f"{kind} tensors")
    (sa, za), (sb, zb), (so, zo) = _qparams(ta), _qparams(tb), _qparams(to)
    left = 20
    if kind == "INT16":
        _require(za == zb == zo == 0, "int16 with non-zero zero points")
        # pot_scale_int16 (default true) with power-of-two scales selects a separate int16 kernel
        pot = all(math.frexp(s)[0] == 0.5 for s in (sa, sb, so))
        _require(not (c.options.get("pot_scale_int16", True) and pot), "int16 with power-of-two scales")
        left = 15
    twice = 2 * max(sa, sb)
    ra = core.Requant(*_multiplier(sa / twice))(core.i64(a) - za << left)
    rb = core.Requant(*_multiplier(sb / twice))(core.i64(b) - zb << left)
    raw = ra + rb if sign > 0 else ra - rb
    y = core.Requant(*_multiplier(twice / ((1 << left) * so)))(raw) + zo
    return [_store(y, to, *activation_range(to, act))]


def _mul(c: OpCall) -> list:
    a, b = c.ins[0], c.ins[1]
    to = c.out_t[0]
    act = c.options.get("fused_activation_function", "NONE")
    kind = _same_types(c)
    if kind == "FLOAT32":
        return [_float_activation(np.multiply(a, b).astype(np.float32), act)]
    _require(kind in _INT_TYPES, f"{kind} tensors")
    (sa, za), (sb, zb), (so, zo) = _qparams(c.in_t[0]), _qparams(c.in_t[1]), _qparams(to)
    prod = (core.i64(a) - za) * (core.i64(b) - zb)
    y = _requant(prod, sa * sb / so) + zo
    return [_store(y, to, *activation_range(to, act))]


# ---- fully connected ---------------------------------------------------------------------------------------
def _fully_connected(c: OpCall) -> list:
    x, w = c.ins[0], c.ins[1]
    bias = c.ins[2] if len(c.ins) > 2 else None
    tx, tw, to = c.in_t[0], c.in_t[1], c.out_t[0]
    opts = c.options
    _require(opts.get("weights_format", "DEFAULT") in ("DEFAULT", 0), "shuffled weights")
    act = opts.get("fused_activation_function", "NONE")
    units, depth = w.shape
    if x.size % depth:
        raise FileFormatError(f"source: {c.where()}: input of {x.size} values does not split into rows of the "
                              f"weights' depth {depth}")
    rows = x.reshape(-1, depth)
    shape = (*x.shape[:-1], units) if opts.get("keep_num_dims", False) else (rows.shape[0], units)
    if tx.type_name == "FLOAT32" and tw.type_name == "FLOAT32":
        y = rows.astype(np.float32) @ w.T.astype(np.float32)
        if bias is not None:
            y = y + bias.astype(np.float32)
        return [_float_activation(y.astype(np.float32), act).reshape(shape)]
    pair = (tx.type_name, tw.type_name, to.type_name)
    _require(pair in (("INT8", "INT8", "INT8"), ("UINT8", "UINT8", "UINT8"), ("INT16", "INT8", "INT16")),
             f"types {pair} (hybrid or other fully connected kernels)")
    sx, zx = _qparams(tx)
    so, zo = _qparams(to)
    ws = np.asarray(tw.scale, np.float64)
    wz = np.asarray(tw.zero_point, np.int64)
    _require(ws.size in (1, units), "weights quantized along another axis")
    _require(not (ws.size > 1 and np.any(wz)), "per-channel weights with zero points")
    acc = (rows.astype(np.float64) - zx) @ (w.astype(np.float64) - (wz[0] if ws.size == 1 else 0)).T
    acc = acc.astype(np.int64)  # exact: |partial sums| < 2^53 for every depth below 2^31
    if bias is not None:
        acc += bias.astype(np.int64)
    if tx.type_name == "INT16":  # the reference kernel with float scales: round(acc · (si · sw / so)) in double
        eff = np.array([sx * float(s) / so for s in ws])
        y = _round_away_f32(acc.astype(np.float64) * eff).astype(np.int64)
    else:  # the optimized kernel's GEMM (ruy): per-tensor multiplier double(float32(si · sw)) / so
        eff = [float(np.float32(sx) * np.float32(ws[0])) / so] if ws.size == 1 else [sx * float(s) / so for s in ws]
        mult = [_multiplier(m) for m in eff]
        y = _gemm_requant(core.wrap(acc, 32), np.array([m[0] for m in mult], np.int64),
                          np.array([m[1] for m in mult], np.int64))
    return [_store(y + zo, to, *activation_range(to, act)).reshape(shape)]


def _gemm_requant(acc: np.ndarray, q: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The SIMD form of MultiplyByQuantizedMultiplier (the integer GEMM the optimized FULLY_CONNECTED runs on x86,
    NEON's vqrdmulh + vrshl emulated on SSE): acc shifted left by max(shift, 0) (int32), SaturatingRounding-
    DoublingHighMul by q, then a rounding right shift by max(-shift, 0) with ties toward +inf (TFLite's scalar
    RoundingDivideByPOT rounds ties away from zero)."""
    x = core.wrap(acc << np.maximum(shift, 0), 32)
    return core.asr_rnd(core.srdhm(x, q, 32), np.maximum(-shift, 0), 64, "up")


# ---- activations -------------------------------------------------------------------------------------------
def _f32(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """A libm-style float32 function: evaluated in double, rounded once to float32."""
    def apply(v: np.ndarray) -> np.ndarray:
        return np.array([fn(float(e)) for e in np.asarray(v, np.float32).reshape(-1)], np.float32).reshape(
            np.shape(v))
    return apply


_TANHF = _f32(math.tanh)
_EXPF = _f32(lambda v: math.exp(v) if v < 709 else math.inf)


def _logistic_f32(v: np.ndarray) -> np.ndarray:
    """``1.0f / (1.0f + expf(-v))`` in float32."""
    return (np.float32(1) / (np.float32(1) + _EXPF(-np.asarray(v, np.float32)))).astype(np.float32)


_LUT_FUNCTIONS = {"TANH": _TANHF, "LOGISTIC": _logistic_f32}


@functools.cache
def _lut(kind: str, type_name: str, si: float, zi: int, so: float, zo: int) -> np.ndarray:
    """LUTPopulate: for every input code q, round(f(float32(si · (q - zi))) · (1 / so)) half away, + zo,
    saturated (float32 throughout); indexed by q - min."""
    info = np.iinfo(_INT_TYPES[type_name])
    q = np.arange(info.min, info.max + 1, dtype=np.int64)
    deq = np.float32(si) * (q - zi).astype(np.float32)
    inv = np.float32(1) / np.float32(so)
    y = _round_away_f32(_LUT_FUNCTIONS[kind](deq) * inv) + zo
    return np.clip(y, info.min, info.max).astype(_INT_TYPES[type_name])


def _activation(c: OpCall) -> list:
    x, ti, to = c.ins[0], c.in_t[0], c.out_t[0]
    kind = c.op.name
    if ti.type_name == "FLOAT32":  # the interpreter's Eigen approximations, bit for bit (numerics.eigen)
        f = eigen.tanh if kind == "TANH" else eigen.logistic
        return [f(x.astype(np.float32)).astype(np.float32)]
    _require(ti.type_name in ("INT8", "UINT8") and to.type_name == ti.type_name, f"{ti.type_name} {kind}")
    lut = _lut(kind, ti.type_name, *_qparams(ti), *_qparams(to))
    return [lut[x.astype(np.int64) - int(np.iinfo(x.dtype).min)]]


@functools.cache
def _softmax_table(si: float, beta: float) -> np.ndarray:
    """PopulateSoftmaxLookupTable: table[255 - v] = expf(float32(-si · beta) · v), v = 0..255."""
    scale = np.float32(-np.float32(si) * np.float32(beta))
    v = np.arange(256, dtype=np.float32)
    return _EXPF((scale * v).astype(np.float32))[::-1].copy()


def _softmax(c: OpCall) -> list:
    x, ti, to = c.ins[0], c.in_t[0], c.out_t[0]
    beta = float(c.options.get("beta", 1.0))
    if ti.type_name == "FLOAT32":
        z = (x.astype(np.float32) - x.max(axis=-1, keepdims=True)) * np.float32(beta)
        e = np.exp(z).astype(np.float32)
        return [(e / e.sum(axis=-1, keepdims=True, dtype=np.float32)).astype(np.float32)]
    _require(ti.type_name == "INT8" and to.type_name == "INT8", f"{ti.type_name} -> {to.type_name} softmax")
    si, _ = _qparams(ti)
    so, zo = _qparams(to)
    table = _softmax_table(si, beta)
    xi = x.astype(np.int64)
    e = table[255 - xi.max(axis=-1, keepdims=True) + xi]  # float32 [..., n]
    total = np.zeros(e.shape[:-1], np.float32)
    for j in range(e.shape[-1]):  # the kernel's float32 sum, in order
        total = (total + e[..., j]).astype(np.float32)
    inv = (np.float32(1) / (total * np.float32(so)).astype(np.float32)).astype(np.float32)
    p = (e * inv[..., None]).astype(np.float32)
    return [_store(_round_away_f32(p) + zo, to)]


def _mean(c: OpCall) -> list:
    x, axes, ti = c.ins[0], c.ins[1], c.in_t[0]
    _require(ti.type_name == "FLOAT32", f"{ti.type_name} MEAN")
    ax = tuple(int(a) % max(x.ndim, 1) for a in np.atleast_1d(axes))
    return [x.astype(np.float32).mean(axis=ax, keepdims=bool(c.options.get("keep_dims", False)),
                                      dtype=np.float32)]


# ---- quantize / dequantize ---------------------------------------------------------------------------------
def _quantize(c: OpCall) -> list:
    x, ti, to = c.ins[0], c.in_t[0], c.out_t[0]
    _require(to.type_name in _INT_TYPES, f"QUANTIZE to {to.type_name}")
    so, zo = _qparams(to)
    if ti.type_name == "FLOAT32":
        if to.type_name == "UINT8":  # no vector path
            return [_store(_round_away_f32(x.astype(np.float64) / so) + zo, to)]
        v = x.astype(np.float32).reshape(-1)
        n = _vector_part(v.size)
        q = np.empty(v.size, np.int64)
        # 8 values at a time: x · float32(1 / scale) in float32, converted rounding half to even (an out-of-range
        # or NaN product converts to INT32_MIN, as the SSE conversion does)
        p = (v[:n] * np.float32(1.0 / so)).astype(np.float64)
        ok = np.abs(p) < 2.0**31
        q[:n] = np.where(ok, np.rint(np.where(ok, p, 0)), -(2**31)).astype(np.int64)
        q[n:] = _round_away_f32(v[n:].astype(np.float64) / so)  # the rest: x / scale in double, half away
        return [_store(np.clip(q + zo, -(2**31), 2**31 - 1), to).reshape(x.shape)]
    _require(ti.type_name in _INT_TYPES, f"QUANTIZE from {ti.type_name}")
    si, zi = _qparams(ti)
    v = core.i64(x).reshape(-1) - zi
    q, shift = _multiplier(si / so)
    y = core.Requant(q, shift)(v)
    if ti.type_name in ("INT8", "UINT8") and to.type_name in ("INT8", "UINT8"):
        n = v.size // 16 * 16  # 16 values at a time: the SIMD multiplier (SRDHM, right shift rounding ties up)
        y[:n] = _gemm_requant(v[:n], np.int64(q), np.int64(shift))
    return [_store(y + zo, to).reshape(x.shape)]


def _dequantize(c: OpCall) -> list:
    x, ti = c.ins[0], c.in_t[0]
    if ti.type_name == "FLOAT16":
        return [x.astype(np.float32)]
    _require(ti.type_name in _INT_TYPES, f"DEQUANTIZE from {ti.type_name}")
    s, zp = _qparams(ti)
    v = x.reshape(-1)
    n = _vector_part(v.size) if ti.type_name in ("INT8", "UINT8", "INT16") else 0
    y = np.empty(v.size, np.float32)
    # 8 values at a time: float32(q · float32(scale)) + float32(-zp · scale), in float32
    y[:n] = (v[:n].astype(np.float32) * np.float32(s)).astype(np.float32) + np.float32(-zp * s)
    y[n:] = (s * (v[n:].astype(np.float64) - zp)).astype(np.float32)  # the rest: double, rounded once
    return [y.reshape(x.shape)]


def _vector_part(size: int) -> int:
    """How many leading values the optimized QUANTIZE / DEQUANTIZE loops take 8 at a time (its SIMD path, which
    rounds differently from the scalar loop over the rest)."""
    return size // 8 * 8


# ---- data movement ---------------------------------------------------------------------------------------
def _same_quantization(c: OpCall, tensors) -> None:
    """Integer CONCATENATION / PACK copy codes: the interpreter refuses inputs whose parameters differ from the
    output's."""
    to = c.out_t[0]
    if not _quantized(to):
        return
    want = _qparams(to)
    for t in tensors:
        if t is not None and _qparams(t) != want:
            raise FileFormatError(f"source: {c.where()}: input {t.name!r} is quantized {_qparams(t)}, the output "
                                  f"{want}; the interpreter requires equal parameters")


def _copy(a) -> np.ndarray:
    """A C-contiguous copy that keeps a 0-d result 0-d (np.ascontiguousarray would make it 1-d)."""
    return np.array(a, order="C", copy=True)


def _axis(a, ndim: int) -> int:
    a = int(np.asarray(a).reshape(-1)[0])
    return a + ndim if a < 0 else a


def _concat(c: OpCall) -> list:
    _same_quantization(c, c.in_t)
    act = c.options.get("fused_activation_function", "NONE")
    _require(act == "NONE", f"CONCATENATION with fused activation {act}")
    ins = [a for a in c.ins if a is not None]
    return [np.concatenate(ins, axis=_axis(c.options.get("axis", 0), ins[0].ndim))]


def _reverse(c: OpCall) -> list:
    x, axes = c.ins[0], c.ins[1]
    return [np.flip(x, axis=tuple(_axis(a, x.ndim) for a in np.atleast_1d(axes))).copy()]


def _strided_slice(c: OpCall) -> list:
    x, begin, end, strides = c.ins[:4]
    o = c.options
    _require(not (o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or o.get("offset", False)),
             "STRIDED_SLICE with ellipsis / new-axis masks or offset")
    sl = []
    for d in range(len(begin)):
        b, e, s = int(begin[d]), int(end[d]), int(strides[d])
        if o.get("begin_mask", 0) >> d & 1:
            b = None
        if o.get("end_mask", 0) >> d & 1:
            e = None
        if o.get("shrink_axis_mask", 0) >> d & 1:
            _require(s > 0, "STRIDED_SLICE shrinking an axis with a negative stride")
            sl.append(b if b is not None else 0)
        else:
            sl.append(slice(b, e, s))
    return [_copy(x[tuple(sl)])]


def _slice(c: OpCall) -> list:
    x, begin, size = c.ins[:3]
    sl = tuple(slice(int(b), None if int(s) < 0 else int(b) + int(s)) for b, s in zip(begin, size, strict=True))
    return [_copy(x[sl])]


def _reshape(c: OpCall) -> list:
    x = c.ins[0]
    shape = c.ins[1] if len(c.ins) > 1 and c.ins[1] is not None else None
    if shape is None or np.ndim(shape) != 1:
        shape = c.options.get("new_shape") or c.out_t[0].shape
    return [x.reshape(tuple(int(s) for s in np.asarray(shape).reshape(-1)))]


def _squeeze(c: OpCall) -> list:
    x = c.ins[0]
    dims = c.options.get("squeeze_dims") or ()
    axes = tuple(_axis(d, x.ndim) for d in dims) if dims else None
    return [np.squeeze(x, axis=axes)]


def _expand_dims(c: OpCall) -> list:
    x, axis = c.ins[:2]
    a = int(np.asarray(axis).reshape(-1)[0])
    return [np.expand_dims(x, a + x.ndim + 1 if a < 0 else a)]


def _transpose(c: OpCall) -> list:
    x, perm = c.ins[:2]
    return [_copy(np.transpose(x, [int(p) for p in perm]))]


def _split(c: OpCall) -> list:
    axis, x = c.ins[:2]
    n = int(c.options.get("num_splits", len(c.out_t)))
    return [_copy(p) for p in np.split(x, n, axis=_axis(axis, x.ndim))]


def _split_v(c: OpCall) -> list:
    x, sizes, axis = c.ins[:3]
    ax = _axis(axis, x.ndim)
    sizes = [int(s) for s in sizes]
    if -1 in sizes:
        k = sizes.index(-1)
        sizes[k] = x.shape[ax] - (sum(sizes) + 1)
    cuts = np.cumsum(sizes)[:-1]
    return [_copy(p) for p in np.split(x, cuts, axis=ax)]


def _pack(c: OpCall) -> list:
    _same_quantization(c, c.in_t)
    ins = [a for a in c.ins if a is not None]
    return [np.stack(ins, axis=_axis(c.options.get("axis", 0), ins[0].ndim + 1))]


def _unpack(c: OpCall) -> list:
    x = c.ins[0]
    ax = _axis(c.options.get("axis", 0), x.ndim)
    return [_copy(np.take(x, k, axis=ax)) for k in range(x.shape[ax])]


def _gather(c: OpCall) -> list:
    x, idx = c.ins[:2]
    _require(int(c.options.get("batch_dims", 0)) == 0, "GATHER with batch_dims")
    ax = _axis(c.options.get("axis", 0), x.ndim)
    idx = np.asarray(idx, np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= x.shape[ax]):
        raise FileFormatError(f"source: {c.where()}: indices outside [0, {x.shape[ax]})")
    return [np.take(x, idx, axis=ax)]


KERNELS: dict[str, tuple[Callable[[OpCall], list], int, int | None]] = {
    "ADD": (lambda c: _add_sub(c, 1), 2, 2),
    "SUB": (lambda c: _add_sub(c, -1), 2, 2),
    "MUL": (_mul, 2, 2),
    "FULLY_CONNECTED": (_fully_connected, 2, 3),
    "SOFTMAX": (_softmax, 1, 1),
    "TANH": (_activation, 1, 1),
    "LOGISTIC": (_activation, 1, 1),
    "MEAN": (_mean, 2, 2),
    "QUANTIZE": (_quantize, 1, 1),
    "DEQUANTIZE": (_dequantize, 1, 1),
    "CONCATENATION": (_concat, 1, None),
    "REVERSE_V2": (_reverse, 2, 2),
    "STRIDED_SLICE": (_strided_slice, 4, 4),
    "SLICE": (_slice, 3, 3),
    "RESHAPE": (_reshape, 1, 2),
    "SQUEEZE": (_squeeze, 1, 1),
    "EXPAND_DIMS": (_expand_dims, 2, 2),
    "TRANSPOSE": (_transpose, 2, 2),
    "SPLIT": (_split, 2, 2),
    "SPLIT_V": (_split_v, 3, 3),
    "PACK": (_pack, 1, None),
    "UNPACK": (_unpack, 1, 1),
    "GATHER": (_gather, 2, 2),
}
"""op name -> (kernel, fewest inputs, most inputs (None: any number))."""


def run(c: OpCall) -> list:
    """The op's outputs; NotNative where this module does not compute it, FileFormatError where its tensors do
    not fit together (a wrong input count, shapes NumPy refuses)."""
    entry = KERNELS.get(c.op.name)
    if entry is None:
        raise NotNative(f"{c.op.name} has no kernel in fusedrnn")
    fn, lo, hi = entry
    present = [a for a in c.ins if a is not None]
    if len(present) < lo or (hi is not None and len(c.ins) > hi):
        want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
        raise FileFormatError(f"source: {c.where()}: expected {want} input tensor(s), got {len(present)}")
    try:
        return fn(c)
    except (NotNative, FileFormatError):
        raise
    except (ValueError, IndexError, TypeError) as e:  # numpy: AxisError, shape mismatch, bad slice values
        shapes = [tuple(np.shape(a)) for a in c.ins]
        raise FileFormatError(f"source: {c.where()}: its tensors do not fit together (input shapes {shapes}): "
                              f"{e}") from None
