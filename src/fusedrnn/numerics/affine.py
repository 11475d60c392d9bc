"""Affine (scale, zero point) quantization: generic per-tensor / per-axis, plus each SDK's exact recipe.

real = (q - zero_point) · scale. Generic functions: ``quantize``, ``dequantize``, ``choose_qparams``.
SDK recipes (bit-exact, float32 / float64 steps as the C++ code does them):

- embARC MLI sa8 / sa32 (``mli.md`` §1.1, §6): scale = int16 mantissa · 2^-scale_frac_bits
  (``mli_scale_from_float``, ``mli_scale_to_float``) and the user-test harness's float32 quantizer
  (``mli_zero_point_from_float``, ``mli_quantize``, ``mli_dequantize``; ``test_tensor_quantizer.cc``).
- AMD Quark ExtendedLSTM step 1 (``quark.md`` §3): ``quark_quantize_uint16``.
- TFLite / LiteRT hybrid kernels (``litert.md`` §5): ``tflite_symmetric_quantize`` (conversion time, per tensor),
  ``tflite_quantize_rows_symmetric`` / ``tflite_quantize_rows_asymmetric`` (``PortableSymmetricQuantizeFloats`` /
  ``PortableAsymmetricQuantizeFloats``, one scale per row).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AttributeValueError, DTypeError, ShapeError

INT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(np.int32): (-(2**31), 2**31 - 1),
}

_F32 = np.float32
_INT32_MIN = -(2**31)


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def _int_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except Exception as exc:  # TypeError, but odd strings can raise SyntaxError / ValueError inside NumPy
        raise DTypeError(f"dtype: expected one of {[str(d) for d in INT_RANGES]}, got {dtype!r}") from exc
    if dt not in INT_RANGES:
        raise DTypeError(f"dtype: expected one of {[str(d) for d in INT_RANGES]}, got {dt}")
    return dt


def _float_array(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        if arr.dtype.kind in "iu" and arr.dtype != np.bool_:
            return arr.astype(np.float64)
        raise DTypeError(f"{name}: expected a float array, got dtype {arr.dtype}")
    return arr


def _float32_array(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        raise DTypeError(f"{name}: expected a float array (the kernel's input is float32), got dtype {arr.dtype}")
    return arr.astype(_F32, copy=False)


def _int_values(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise DTypeError(f"{name}: expected integer values, got {arr!r}")
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise DTypeError(f"{name}: expected integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _check_axis(axis: Any, ndim: int) -> int | None:
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise DTypeError(f"axis: expected None or an int, got {type(axis).__name__} {axis!r}")
    if not -ndim <= int(axis) < ndim:
        raise AttributeValueError(f"axis: expected an int in [{-ndim}, {ndim - 1}] for a {ndim}-d array, got {axis}")
    return int(axis) % ndim


def _param(p: np.ndarray, name: str, shape: tuple[int, ...], axis: int | None) -> np.ndarray:
    """A per-tensor (scalar) or per-axis (1-d, length shape[axis]) parameter, reshaped to broadcast with x."""
    if axis is None:
        if p.size != 1:
            raise ShapeError(f"{name}: expected a scalar (per-tensor; pass axis= for per-axis), got shape {p.shape}")
        return p.reshape(())
    if p.ndim == 0 or p.size == 1:
        return p.reshape(())
    if p.ndim != 1 or p.shape[0] != shape[axis]:
        raise ShapeError(f"{name}: expected shape ({shape[axis]},) (one value per index of axis {axis}), "
                         f"got {p.shape}")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return p.reshape(view)


def _check_scale(s: np.ndarray, name: str = "scale") -> None:
    if not np.all(np.isfinite(s) & (s > 0)):
        raise AttributeValueError(f"{name}: expected finite values > 0, got {s!r}")


def _check_range(v: np.ndarray, name: str, lo: int, hi: int) -> None:
    if v.size and (int(v.min()) < lo or int(v.max()) > hi):
        raise AttributeValueError(f"{name}: expected values in [{lo}, {hi}], got values in [{int(v.min())}, "
                                  f"{int(v.max())}]")


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C ``round`` / ``roundf``: nearest, ties away from zero; exact in v's own float type."""
    t = np.trunc(v)
    with np.errstate(invalid="ignore"):
        d = np.abs(v - t)  # exact
    return t + np.copysign((d >= 0.5).astype(v.dtype), v)


def _c_round_to_int32(p: np.ndarray) -> np.ndarray:
    """``static_cast<int32_t>(round(p))`` on x86: NaN, ±inf and values outside int32 become INT32_MIN."""
    with np.errstate(invalid="ignore"):
        r = _round_half_away(p).astype(np.float64)
    return _c_int32(r)


def _clamp_to_int(r: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Integer-valued floats (no NaN) clamped to [lo, hi] as int64."""
    r = np.asarray(r, dtype=np.float64)
    return np.clip(r, float(lo), float(hi)).astype(np.int64)


def _out(a: np.ndarray) -> np.ndarray:
    return a[()] if a.ndim == 0 else a


# ----------------------------------------------------------------------------------------------------------
# generic affine quantization
# ----------------------------------------------------------------------------------------------------------


def quantize(x: Any, scale: Any, zero_point: Any, dtype: Any, *, axis: int | None = None,
             rounding: str = "half_even") -> np.ndarray:
    """q = clamp(round(x / scale) + zero_point) as ``dtype`` (int8, uint8, int16, uint16, int32).

    The division runs in the common float type of x and scale (float32 when both are float32, as in ONNX
    QuantizeLinear; float64 otherwise); rounding "half_even" (ONNX) or "half_away" (C ``round``), exact on the
    quotient. ``axis`` selects per-axis parameters (1-d, one per index of that axis). NaN is refused.
    """
    dt = _int_dtype(dtype)
    if rounding not in ("half_even", "half_away"):
        raise AttributeValueError(f"rounding: expected 'half_even' or 'half_away', got {rounding!r}")
    xa = _float_array(x, "x")
    ax = _check_axis(axis, xa.ndim) if axis is not None else None
    if axis is not None and xa.ndim == 0:
        raise ShapeError("x: per-axis quantization needs at least a 1-d array, got a scalar")
    s = _float_array(scale, "scale")
    _check_scale(s)
    zp = _int_values(zero_point, "zero_point")
    lo, hi = INT_RANGES[dt]
    _check_range(zp, "zero_point", lo, hi)
    s = _param(s, "scale", xa.shape, ax)
    zp = _param(zp, "zero_point", xa.shape, ax)
    ct = np.result_type(xa.dtype, s.dtype, np.float32)
    v = xa.astype(ct, copy=False) / s.astype(ct, copy=False)
    if np.isnan(v).any():
        raise AttributeValueError("x: expected no NaN values, got NaN")
    r = np.rint(v) if rounding == "half_even" else _round_half_away(v)
    r = r.astype(np.float64)
    q = np.clip(r, (lo - zp).astype(np.float64), (hi - zp).astype(np.float64)).astype(np.int64) + zp
    return _out(q.astype(dt))


def dequantize(q: Any, scale: Any, zero_point: Any, *, axis: int | None = None, dtype: Any = np.float32
               ) -> np.ndarray:
    """(q - zero_point) · scale, computed in ``dtype`` (float32 as ONNX DequantizeLinear, or float64).

    The integer difference is exact (int64) and converted once to ``dtype``; scale is converted to ``dtype``.
    """
    fdt = np.dtype(dtype)
    if fdt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise DTypeError(f"dtype: expected float32 or float64, got {fdt}")
    qa = _int_values(q, "q") if np.asarray(q).dtype.kind != "f" else None
    if qa is None:
        raise DTypeError(f"q: expected an integer array, got dtype {np.asarray(q).dtype}")
    ax = _check_axis(axis, qa.ndim) if axis is not None else None
    s = _float_array(scale, "scale")
    _check_scale(s)
    zp = _int_values(zero_point, "zero_point")
    s = _param(s, "scale", qa.shape, ax)
    zp = _param(zp, "zero_point", qa.shape, ax)
    return _out((qa - zp).astype(fdt) * s.astype(fdt))


def choose_qparams(rmin: Any, rmax: Any, dtype: Any, *, symmetric: bool = False) -> tuple[Any, Any]:
    """(scale float64, zero_point int) mapping [rmin, rmax] (widened to contain 0) onto ``dtype``'s range.

    Asymmetric: scale = (rmax - rmin) / (qmax - qmin), zero_point = clamp(round_half_even(qmin - rmin / scale)).
    Symmetric: a = max(|rmin|, |rmax|), scale = 2a / (qmax - qmin), zero_point 0 (signed) or (qmax + 1) / 2
    (unsigned), as ONNX Runtime's and PyTorch's symmetric observers. A zero range gives scale 1.0 and the
    zero point just described (0 for asymmetric). All steps in float64; vectorised over arrays of ranges
    (scalars in -> Python float and int out, arrays in -> float64 and int64 arrays).
    """
    dt = _int_dtype(dtype)
    lo, hi = INT_RANGES[dt]
    a = np.asarray(_float_array(rmin, "rmin"), dtype=np.float64)
    b = np.asarray(_float_array(rmax, "rmax"), dtype=np.float64)
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError as exc:
        raise ShapeError(f"rmin, rmax: shapes do not broadcast: {a.shape} and {b.shape}") from exc
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise AttributeValueError("rmin, rmax: expected finite values")
    if np.any(a > b):
        raise AttributeValueError(f"rmin, rmax: expected rmin <= rmax, got rmin {a!r} and rmax {b!r}")
    a = np.minimum(a, 0.0)
    b = np.maximum(b, 0.0)
    qrange = float(hi - lo)
    if symmetric:
        absmax = np.maximum(-a, b)
        scale = 2.0 * absmax / qrange
        zp = np.full(a.shape, 0 if lo < 0 else (hi + 1) // 2, dtype=np.int64)
    else:
        scale = (b - a) / qrange
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.rint(lo - a / scale)
        zp = np.where(scale > 0, _clamp_to_int(np.nan_to_num(z), lo, hi), 0).astype(np.int64)
    degenerate = ~(scale > 0)
    scale = np.where(degenerate, 1.0, scale)
    if scale.ndim == 0:
        return float(scale), int(zp)
    return scale, zp


# ----------------------------------------------------------------------------------------------------------
# embARC MLI
# ----------------------------------------------------------------------------------------------------------


def _mli_mantissa_raw(scale32: np.ndarray, frac_bits: np.ndarray) -> np.ndarray:
    """The harness's trunc(ldexpf(1, sfb) · scale_f + 0.5f), float32 steps, before the int16 saturation."""
    with np.errstate(over="ignore"):
        p = np.ldexp(_F32(1.0), frac_bits.astype(np.int32)).astype(_F32) * scale32
        return np.trunc(p + _F32(0.5)).astype(np.float64)


def _mli_mantissa(scale32: np.ndarray, frac_bits: np.ndarray) -> np.ndarray:
    """sat16((int32)(...)): a positive overflow (inf or >= 2^31) saturates to 32767."""
    return np.clip(_mli_mantissa_raw(scale32, frac_bits), -32768.0, 32767.0).astype(np.int64)


def mli_scale_from_float(scale: Any, *, mantissa_bits: int = 15, frac_bits: Any = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """MLI sa scale: (mantissa int16, scale_frac_bits int8) with scale ≈ mantissa · 2^-frac_bits.

    The mantissa follows the MLI user-test harness in float32:
    ``sat16((int32)(ldexpf(1, frac_bits) · float32(scale) + 0.5f))``. With ``frac_bits=None`` each scale gets the
    largest frac_bits whose mantissa fits ``mantissa_bits`` bits (so it lies in [2^(mb-1), 2^mb - 1]; the
    default 15 is how the upstream test vectors normalise their per-tensor scales); pass ``frac_bits`` (int or
    array) to reproduce a given choice, e.g. one shared value for all channels of a per-axis tensor.
    """
    mb = mantissa_bits
    if isinstance(mb, bool) or not isinstance(mb, (int, np.integer)) or not 1 <= int(mb) <= 15:
        raise AttributeValueError(f"mantissa_bits: expected an int in [1, 15], got {mantissa_bits!r}")
    s = _float_array(scale, "scale")
    _check_scale(s)
    with np.errstate(over="ignore", under="ignore"):
        s32 = s.astype(_F32)
    if not np.all(np.isfinite(s32) & (s32 > 0)):
        raise AttributeValueError(f"scale: expected values that are finite and > 0 in float32, got {s!r}")
    if frac_bits is None:
        e = np.frexp(s32.astype(np.float64))[1].astype(np.int64)  # s = f·2^e, f in [0.5, 1)
        fb = int(mb) - e  # s·2^fb in [2^(mb-1), 2^mb)
        fb = np.where(_mli_mantissa_raw(s32, fb) > (1 << int(mb)) - 1, fb - 1, fb)  # +0.5 rounded up to 2^mb
    else:
        fb = _int_values(frac_bits, "frac_bits")
        try:
            fb = np.broadcast_to(fb, np.broadcast_shapes(fb.shape, s32.shape))
        except ValueError as exc:
            raise ShapeError(f"frac_bits: shape {fb.shape} does not broadcast with scale {s32.shape}") from exc
    _check_range(np.asarray(fb), "frac_bits", -128, 127)
    m = _mli_mantissa(s32, np.asarray(fb))
    return _out(np.asarray(m).astype(np.int16)), _out(np.asarray(fb).astype(np.int8))


def mli_scale_to_float(mantissa: Any, frac_bits: Any) -> np.ndarray:
    """mantissa · 2^-frac_bits as float64 (exact)."""
    m = _int_values(mantissa, "mantissa")
    f = _int_values(frac_bits, "frac_bits")
    _check_range(m, "mantissa", -(2**31), 2**31 - 1)
    _check_range(f, "frac_bits", -1000, 1000)
    try:
        return _out(np.ldexp(m.astype(np.float64), (-f).astype(np.int32)))
    except ValueError as exc:
        raise ShapeError(f"mantissa, frac_bits: shapes do not broadcast: {m.shape} and {f.shape}") from exc


def mli_zero_point_from_float(zero_point: Any, scale: Any) -> np.ndarray:
    """The MLI harness's zero point: sat16((int32)(-zero_point_f / scale_f + 0.5f)) in float32, int16.

    C truncation toward zero, so negative values round differently from ``round`` (``mli.md`` §8 quirk 10).
    """
    z = _float_array(zero_point, "zero_point").astype(_F32)
    s = _float_array(scale, "scale")
    _check_scale(s)
    s = s.astype(_F32)
    try:
        with np.errstate(over="ignore"):
            t = np.trunc(-z / s + _F32(0.5))
    except ValueError as exc:
        raise ShapeError(f"zero_point, scale: shapes do not broadcast: {z.shape} and {s.shape}") from exc
    if np.isnan(t).any():
        raise AttributeValueError("zero_point: expected finite values")
    return _out(_c_int32(t).clip(-32768, 32767).astype(np.int16))


def _c_int32(t: np.ndarray) -> np.ndarray:
    """x86 ``(int32_t)`` of integer-valued floats: out of range or NaN gives INT32_MIN (cvttss2si)."""
    t = np.asarray(t, dtype=np.float64)
    bad = ~((t >= -(2.0**31)) & (t < 2.0**31))
    return np.where(bad, _INT32_MIN, np.where(bad, 0.0, t).astype(np.int64))


_MLI_CONTAINERS = {8: np.int8, 16: np.int16, 32: np.int32}


def mli_quantize(x: Any, *, bits: int, frac_bits: Any, scale: Any = 1, zero_point: Any = 0,
                 axis: int | None = None) -> np.ndarray:
    """The MLI user-test harness's quantizer (``test_tensor_quantizer.cc``), float32 steps, x86 casts.

    sv = ldexpf(1.f / float32(scale), frac_bits); q = sat_bits((int32)(sv·x ± 0.5f) + zero_point) with +0.5f for
    x > 0 and -0.5f otherwise. fx tensors: scale 1, zero_point 0, frac_bits = the tensor's frac bits; sa8 / sa32:
    the int16 scale mantissa, int16 zero point and scale_frac_bits, per-tensor or per-``axis``. ``bits`` is the
    container: 8 (int8), 16 (int16) or 32 (int32). An out-of-range float-to-int32 cast gives INT32_MIN (x86),
    and the int32 add wraps.
    """
    if bits not in _MLI_CONTAINERS:
        raise AttributeValueError(f"bits: expected 8, 16 or 32, got {bits!r}")
    xa = _float32_array(x, "x")
    ax = _check_axis(axis, xa.ndim) if axis is not None else None
    m = _int_values(scale, "scale")
    _check_range(m, "scale", 1, 32767)
    fb = _int_values(frac_bits, "frac_bits")
    _check_range(fb, "frac_bits", -128, 127)
    zp = _int_values(zero_point, "zero_point")
    _check_range(zp, "zero_point", -32768, 32767)
    m = _param(m, "scale", xa.shape, ax)
    fb = _param(fb, "frac_bits", xa.shape, ax)
    zp = _param(zp, "zero_point", xa.shape, ax)
    with np.errstate(over="ignore", under="ignore"):
        sv = np.ldexp(_F32(1.0) / m.astype(_F32), fb.astype(np.int32)).astype(_F32)
        v = sv * xa
        v = v + np.where(xa > 0, _F32(0.5), _F32(-0.5))
    t = _c_int32(np.trunc(v))
    s = (t + zp + 2**31) % 2**32 - 2**31  # int32 add, wrapping
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return _out(np.clip(s, lo, hi).astype(_MLI_CONTAINERS[bits]))


def mli_dequantize(q: Any, *, frac_bits: Any, scale: Any = 1, zero_point: Any = 0, axis: int | None = None
                   ) -> np.ndarray:
    """(q - zero_point) · ldexpf(scale, -frac_bits) in float32 (the MLI tests' dequantization)."""
    qa = _int_values(q, "q")
    ax = _check_axis(axis, qa.ndim) if axis is not None else None
    m = _param(_int_values(scale, "scale"), "scale", qa.shape, ax)
    fb = _param(_int_values(frac_bits, "frac_bits"), "frac_bits", qa.shape, ax)
    zp = _param(_int_values(zero_point, "zero_point"), "zero_point", qa.shape, ax)
    _check_range(fb, "frac_bits", -128, 127)
    with np.errstate(over="ignore", under="ignore"):
        sv = np.ldexp(m.astype(_F32), (-fb).astype(np.int32)).astype(_F32)
        return _out((qa - zp).astype(_F32) * sv)


# ----------------------------------------------------------------------------------------------------------
# AMD Quark
# ----------------------------------------------------------------------------------------------------------


def quark_quantize_uint16(a: Any, scale: Any, zero_point: Any) -> np.ndarray:
    """Quark ExtendedLSTM step 1: clamp(nearbyint(float32(a) / float32(scale)) + zero_point, 0, 65535), uint16.

    The division and the half-to-even rounding are float32; the int64 cast follows x86 (a quotient >= 2^63, +inf
    or NaN becomes INT64_MIN and so clamps to 0). Per tensor: scale a positive float, zero_point in [0, 65535].
    """
    x = _float32_array(a, "a")
    s = np.asarray(scale)
    if s.size != 1:
        raise ShapeError(f"scale: expected a scalar (Quark quantizes per tensor), got shape {s.shape}")
    with np.errstate(over="ignore"):
        s = _float_array(s, "scale").astype(_F32).reshape(())
    _check_scale(s)
    zp = _int_values(zero_point, "zero_point")
    if zp.size != 1:
        raise ShapeError(f"zero_point: expected a scalar, got shape {zp.shape}")
    _check_range(zp, "zero_point", 0, 65535)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        r = np.rint(x / s)
    bad = ~((r >= -(2.0**63)) & (r < 2.0**63))
    r = np.where(bad, -(2.0**63), r)
    # |r| < 2^63 as float; clamp before converting so the int64 add cannot overflow
    q = np.clip(r.astype(np.float64), -1.0e6, 1.0e6).astype(np.int64) + int(zp.reshape(()))
    return _out(np.clip(q, 0, 65535).astype(np.uint16))


# ----------------------------------------------------------------------------------------------------------
# TFLite / LiteRT
# ----------------------------------------------------------------------------------------------------------


def _rows(v: Any, name: str) -> np.ndarray:
    arr = _float32_array(v, name)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ShapeError(f"{name}: expected an array [..., n] with n >= 1 values per row, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise AttributeValueError(f"{name}: expected finite values (the TFLite kernel's min/max scan is undefined "
                                  f"on NaN / inf)")
    return arr


def _symmetric_rows(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.maximum(np.abs(v.min(axis=-1)), np.abs(v.max(axis=-1)))
    zero = rng == 0
    safe = np.where(zero, _F32(1), rng)
    with np.errstate(over="ignore", invalid="ignore"):
        scale = (safe / _F32(127)).astype(_F32)
        inv = (_F32(127) / safe).astype(_F32)  # inf for a subnormal range, as in C
        p = (v * inv[..., None]).astype(_F32)
    q = np.clip(_c_round_to_int32(p), -127, 127).astype(np.int8)
    q[zero] = 0
    scale = np.where(zero, _F32(1), scale).astype(_F32)
    return q, scale


def tflite_symmetric_quantize(w: Any) -> tuple[np.ndarray, np.float32]:
    """TFLite conversion-time symmetric int8 weights (``SymmetricQuantizeFloats``), one scale per tensor.

    range = max|w|; scale = float32(range / 127); q = clamp(round(w · float32(127 / range)), ±127) with C
    ``round`` (half away) on the float32 product; an all-zero tensor gives q = 0, scale 1.
    """
    arr = _rows(np.asarray(w).reshape(-1) if np.asarray(w).ndim else w, "w")
    q, s = _symmetric_rows(arr)
    return q.reshape(np.shape(w)), _F32(s)


def tflite_quantize_rows_symmetric(v: Any) -> tuple[np.ndarray, np.ndarray]:
    """``PortableSymmetricQuantizeFloats`` per row of v [..., n]: (q int8 [..., n], scale float32 [...]).

    Same arithmetic as ``tflite_symmetric_quantize``, one range per row (the hybrid kernels' per-batch
    quantization with ``asymmetric_quantize_inputs = false``).
    """
    return _symmetric_rows(_rows(v, "v"))


def tflite_quantize_rows_asymmetric(v: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``PortableAsymmetricQuantizeFloats`` per row of v [..., n]: (q int8, scale float32 [...], zp int32 [...]).

    rmin = double(min(0, min v)), rmax = double(max(0, max v)); rmin == rmax gives q = 0, scale 1, zp 0.
    Otherwise, in double: s = (rmax - rmin) / 255, zp from the smaller-error end (-128 - rmin/s if
    128 + |rmin/s| < 127 + |rmax/s| else 127 - rmax/s), nudged: <= -128 -> -128, >= 127 -> 127, else round half
    away. Then in float32: scale = float32(s), inv = 1 / scale, q = clamp(round(zp + v · inv), -128, 127).
    """
    arr = _rows(v, "v")
    rmin = np.minimum(arr.min(axis=-1), _F32(0)).astype(np.float64)
    rmax = np.maximum(arr.max(axis=-1), _F32(0)).astype(np.float64)
    degenerate = rmin == rmax
    s_d = np.where(degenerate, 1.0, (rmax - rmin) / 255.0)
    lo_ratio = rmin / s_d
    hi_ratio = rmax / s_d
    z_from_min = -128.0 - lo_ratio
    z_from_max = 127.0 - hi_ratio
    z = np.where(128.0 + np.abs(lo_ratio) < 127.0 + np.abs(hi_ratio), z_from_min, z_from_max)
    zp = np.where(z <= -128.0, -128.0, np.where(z >= 127.0, 127.0, _round_half_away(z)))
    zp = np.where(degenerate, 0.0, zp).astype(np.int32)
    scale = np.where(degenerate, _F32(1), s_d.astype(_F32)).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        inv = (_F32(1) / scale).astype(_F32)  # inf when float32(s) underflows or 1/s overflows, as in C
        p = (zp.astype(_F32)[..., None] + (arr * inv[..., None]).astype(_F32)).astype(_F32)
    q = np.clip(_c_round_to_int32(p), -128, 127).astype(np.int8)
    q[degenerate] = 0
    return q, scale, zp


__all__ = [
    "INT_RANGES",
    "quantize",
    "dequantize",
    "choose_qparams",
    "mli_scale_from_float",
    "mli_scale_to_float",
    "mli_zero_point_from_float",
    "mli_quantize",
    "mli_dequantize",
    "quark_quantize_uint16",
    "tflite_symmetric_quantize",
    "tflite_quantize_rows_symmetric",
    "tflite_quantize_rows_asymmetric",
]
