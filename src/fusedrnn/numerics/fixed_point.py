"""Fixed-point (Q format) arithmetic on signed two's-complement containers of ``width`` bits (2..64).

Values live in int64 arrays; a ``width``-bit container holds integers in [-2^(width-1), 2^(width-1) - 1].
Every function is vectorised, broadcasts its array arguments (shift amounts included), returns int64
(a NumPy scalar for scalar inputs) and is exact for every width up to 64: overflow of adds and shifts is
detected with unsigned (modular) arithmetic, never by relying on signed wrap-around.

The MLI primitives follow the x86 reference build of embARC MLI 2.0 (``lib/src/pal/ref/mli_math.h``;
spec ``mli.md`` §2.1): ``asl_sat`` = ``mli_math_asl_fx``, ``asr`` = ``mli_math_asr_fx``,
``asr_rnd(mode="up" | "convergent")`` = ``mli_math_asr_rnd_fx`` built with ``ROUND_UP`` / ``ROUND_CONVERGENT``,
``add_sat`` / ``sub_sat`` = ``mli_math_add_fx`` / ``mli_math_sub_fx``, ``norm`` = ``mli_math_norm_fx``.

Each function checks and broadcasts its arguments, then calls its unchecked core in :mod:`.core` (which the
targets' per-timestep loops call directly).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AttributeValueError, DTypeError, ShapeError
from . import core

ROUNDING_MODES = ("up", "convergent", "half_away", "floor", "trunc")

_I64 = np.int64
_U64 = np.uint64
_INT64_MIN = core.INT64_MIN
_INT64_MAX = core.INT64_MAX


# ----------------------------------------------------------------------------------------------------------
# argument handling
# ----------------------------------------------------------------------------------------------------------


def _check_bits(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DTypeError(f"{name}: expected a Python int in [{lo}, {hi}], got {type(value).__name__} {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise AttributeValueError(f"{name}: expected an int in [{lo}, {hi}], got {value}")
    return value


def _as_int_array(x: Any, name: str) -> np.ndarray:
    """``x`` as an integer array (int64, or uint64 when it holds values >= 2^63); floats and bools are refused."""
    if isinstance(x, bool) or isinstance(x, np.bool_):
        raise DTypeError(f"{name}: expected an integer array or int, got bool")
    if isinstance(x, int):
        if not _INT64_MIN <= x <= 2**64 - 1:
            raise AttributeValueError(f"{name}: expected an integer in [-2^63, 2^64 - 1], got {x}")
        return np.asarray(x, dtype=_U64 if x > _INT64_MAX else _I64)
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        if arr.dtype == object:  # a list holding huge Python ints, or mixed content
            try:
                arr = np.asarray(x, dtype=_I64)
            except (OverflowError, TypeError, ValueError) as exc:
                raise DTypeError(f"{name}: expected integers representable in int64, got {x!r}") from exc
        else:
            raise DTypeError(f"{name}: expected an integer array or int, got dtype {arr.dtype}")
    if arr.dtype == _U64:
        return arr
    return arr.astype(_I64, copy=False)


_limits = core.limits


def _container(x: Any, name: str, width: int) -> np.ndarray:
    """``x`` as int64, checked to lie in the signed ``width``-bit range (skipped when its dtype guarantees it)."""
    arr = _as_int_array(x, name)
    lo, hi = _limits(width)
    info = np.iinfo(arr.dtype)
    if info.min >= lo and info.max <= hi:
        return arr.astype(_I64, copy=False)
    if arr.size:
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            raise AttributeValueError(f"{name}: expected values in the signed {width}-bit range [{lo}, {hi}], "
                                      f"got values in [{amin}, {amax}]")
    return arr.astype(_I64, copy=False)


def _shift(n: Any, name: str = "n") -> np.ndarray:
    """Shift amounts as int64, clipped to [-200, 200] (every result is already decided beyond +-65)."""
    arr = _as_int_array(n, name)
    if arr.dtype == _U64:
        arr = np.minimum(arr, _U64(200)).astype(_I64)
    return np.clip(arr, -200, 200)


def _exponent(frac_bits: Any) -> np.ndarray:
    """Power-of-two exponents clipped to +-3000: beyond that every float64 result is already inf or 0."""
    f = _as_int_array(frac_bits, "frac_bits")
    if f.dtype == _U64:
        f = np.minimum(f, _U64(3000)).astype(_I64)
    return np.clip(f, -3000, 3000)


def _broadcast_shape(*pairs: tuple[str, np.ndarray]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(a.shape for _, a in pairs))
    except ValueError as exc:
        desc = ", ".join(f"{n} {a.shape}" for n, a in pairs)
        raise ShapeError(f"{', '.join(n for n, _ in pairs)}: shapes do not broadcast: {desc}") from exc


def _broadcast(*pairs: tuple[str, np.ndarray]) -> list[np.ndarray]:
    try:
        return list(np.broadcast_arrays(*(a for _, a in pairs)))
    except ValueError as exc:
        desc = ", ".join(f"{n} {a.shape}" for n, a in pairs)
        raise ShapeError(f"{', '.join(n for n, _ in pairs)}: shapes do not broadcast: {desc}") from exc


def _out(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a[()] if a.ndim == 0 else a


def _check_mode(mode: Any) -> str:
    if mode not in ROUNDING_MODES:
        raise AttributeValueError(f"mode: expected one of {ROUNDING_MODES}, got {mode!r}")
    return mode


# ----------------------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------------------


def saturate(x: Any, bits: int) -> np.ndarray:
    """Clamp integers to the signed ``bits``-bit range [-2^(bits-1), 2^(bits-1) - 1] (bits 1..64); int64."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    if arr.dtype == _U64:
        arr = np.minimum(arr, _U64(_limits(bits)[1])).astype(_I64)
    return _out(core.sat(arr, bits))


def saturate_unsigned(x: Any, bits: int) -> np.ndarray:
    """Clamp integers to [0, 2^bits - 1] (bits 1..64); int64 for bits <= 63, uint64 for bits == 64."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    if bits == 64:
        if arr.dtype == _U64:
            return _out(arr.copy())
        return _out(np.maximum(arr, 0).astype(_U64))
    if arr.dtype == _U64:
        arr = np.minimum(arr, _U64((1 << bits) - 1)).astype(_I64)
    return _out(core.sat_unsigned(arr, bits))


def wrap(x: Any, bits: int) -> np.ndarray:
    """Two's-complement wrap of integers to ``bits`` bits (bits 1..64): the signed value with the same low bits."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    return _out(core.wrap(arr.view(_I64) if arr.dtype == _U64 else arr, bits))  # reinterpreting keeps the low bits


def add_sat(a: Any, b: Any, *, width: int) -> np.ndarray:
    """a + b saturated to the signed ``width``-bit range (MLI ``mli_math_add_fx``); exact up to width 64."""
    width = _check_bits(width, "width", 2, 64)
    a, b = _broadcast(("a", _container(a, "a", width)), ("b", _container(b, "b", width)))
    return _out(core.add_sat(a, b, width))


def sub_sat(a: Any, b: Any, *, width: int) -> np.ndarray:
    """a - b saturated to the signed ``width``-bit range (MLI ``mli_math_sub_fx``); exact up to width 64."""
    width = _check_bits(width, "width", 2, 64)
    a, b = _broadcast(("a", _container(a, "a", width)), ("b", _container(b, "b", width)))
    return _out(core.sub_sat(a, b, width))


def _shift_pair(x: Any, n: Any, width: int) -> tuple[np.ndarray, np.ndarray | int]:
    """(x as a checked int64 container, n as an int when it is a scalar else an int64 array), shapes checked."""
    xa, na = _container(x, "x", width), _shift(n)
    _broadcast_shape(("x", xa), ("n", na))
    return xa, (int(na) if na.ndim == 0 else na)


def asl_sat(x: Any, n: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_asl_fx``: x·2^n saturated to ``width`` bits.

    n < 0 is a floor (arithmetic) right shift by -n (-1/0 once -n > W-1); n > W-1 gives ±max, 0 stays 0.
    """
    width = _check_bits(width, "width", 2, 64)
    xa, n = _shift_pair(x, n, width)
    return _out(core.asl_sat(xa, n, width))


def asr(x: Any, n: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_asr_fx``: floor(x / 2^n); n > W-1 gives -1 for x < 0 else 0; n < 0 is ``asl_sat``."""
    width = _check_bits(width, "width", 2, 64)
    xa, n = _shift_pair(x, n, width)
    return _out(core.asr(xa, n, width))


def asr_rnd(x: Any, n: Any, *, width: int, mode: str = "up") -> np.ndarray:
    """x / 2^n rounded to an integer, in a ``width``-bit container.

    mode "up" / "convergent": MLI ``mli_math_asr_rnd_fx`` built with ROUND_UP / ROUND_CONVERGENT, exactly:
    n < 0 -> ``asl_sat(x, -n)``; n == 0 -> x; n > W-1 -> 0 (even for negative x). "up" adds 2^(n-1) with
    saturation and floors (half toward +inf; x near the maximum gives max >> n); "convergent" floors and adds 1
    above the half and at odd ties (half to even). Like the C code, the rounding constant is ``(one << n) >> 1``
    in the container type: for W >= 32 and n == W-1 it is -2^(W-2), which makes "up" return -1 for
    0 <= x < 2^(W-2) and "convergent" return 0 for x < -2^(W-2) at that single shift.

    mode "half_away" / "floor" / "trunc": the exact value x / 2^n rounded half away from zero / toward -inf /
    toward zero, for every n >= 0 (n < 0 is ``asl_sat`` as well).
    """
    width = _check_bits(width, "width", 2, 64)
    mode = _check_mode(mode)
    xa, n = _shift_pair(x, n, width)
    res = core.asr_rnd(xa, n, width, mode)
    return _out(res.copy() if res is xa else res)  # n == 0 gives x itself


def cast_fx(x: Any, shift: Any, *, in_width: int, out_bits: int, mode: str = "up") -> np.ndarray:
    """MLI cast: ``saturate(asr_rnd(x, shift, width=in_width, mode), out_bits)`` (e.g. int32 -> int16 with shift)."""
    out_bits = _check_bits(out_bits, "out_bits", 1, 64)
    return _out(core.sat(asr_rnd(x, shift, width=in_width, mode=mode), out_bits))


def norm(x: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_norm_fx``: redundant sign bits of x in a ``width``-bit container.

    W-1 - bitlen(x) for x >= 0, W-1 - bitlen(~x) for x < 0; x == 0 gives W-1 (so does x == -1); x == min gives 0.
    """
    width = _check_bits(width, "width", 2, 64)
    return _out(core.norm(_container(x, "x", width), width))


def bit_length(x: Any) -> np.ndarray:
    """Number of significant bits of non-negative integers (Python's ``int.bit_length``); 0 for 0; int64."""
    arr = _as_int_array(x, "x")
    if arr.dtype == _U64:
        raise AttributeValueError(f"x: expected values in [0, 2^63 - 1], got max {int(arr.max())}")
    if arr.size and int(arr.min()) < 0:
        raise AttributeValueError(f"x: expected non-negative values, got {int(arr.min())}")
    return _out(core.bit_length(arr))


def trunc_div(a: Any, b: Any) -> np.ndarray:
    """C integer division a / b, truncating toward zero (``-7 / 2 == -3``); int64, a and b broadcast.

    b must be non-zero; a == -2^63 with b == -1 (whose quotient overflows int64) is refused."""
    a, b = _broadcast(("a", _as_int_array(a, "a")), ("b", _as_int_array(b, "b")))
    for name, v in (("a", a), ("b", b)):
        if v.dtype == _U64:
            raise AttributeValueError(f"{name}: expected values in the int64 range, got max {int(v.max())}")
    if b.size and not b.all():
        raise AttributeValueError("b: expected non-zero divisors, got 0")
    if a.size and bool(((a == _INT64_MIN) & (b == -1)).any()):
        raise AttributeValueError("a, b: -2^63 / -1 overflows int64")
    amin, bmin = a == _INT64_MIN, b == _INT64_MIN
    if not (amin.any() or bmin.any()):
        return _out(core.trunc_div(a, b))
    # |-2^63| overflows: trunc(a / b) = trunc((a + |b|) / b) - sign(b) for a == -2^63; a / -2^63 is 0 or 1
    b1 = np.where(bmin, _I64(1), b)
    q = core.trunc_div(np.where(amin, a + np.abs(b1), a), b1) - amin * np.sign(b1)
    return _out(np.where(bmin, amin.astype(_I64), q))


def quantize_fx(x: Any, frac_bits: Any, *, bits: int, mode: str = "half_away") -> np.ndarray:
    """Round x·2^frac_bits to an integer with ``mode`` and saturate to signed ``bits`` bits; int64.

    ``x`` is taken as float64 (float16/32 inputs convert exactly); ``frac_bits`` may be negative and may be an
    array (broadcast). Modes: "up" (half toward +inf), "convergent" (half to even), "half_away", "floor",
    "trunc" — all exact on the float64 value. NaN is refused; ±inf saturates.
    """
    bits = _check_bits(bits, "bits", 1, 64)
    mode = _check_mode(mode)
    xa = np.asarray(x)
    if xa.dtype.kind not in "fiu" or xa.dtype == np.bool_:
        raise DTypeError(f"x: expected a float or integer array, got dtype {xa.dtype}")
    xa = xa.astype(np.float64, copy=False)
    xa, f = _broadcast(("x", xa), ("frac_bits", _exponent(frac_bits)))
    if np.isnan(xa).any():
        raise AttributeValueError("x: expected no NaN values, got NaN")
    with np.errstate(over="ignore"):
        v = np.ldexp(xa, f.astype(np.int32))  # exact unless it overflows (inf) or underflows (|v| < 2^-1022)
    fl = np.floor(v)
    with np.errstate(invalid="ignore"):
        d = v - fl  # exact fractional part in [0, 1) for finite v
        odd = np.fmod(fl, 2.0) != 0
    if mode == "floor":
        r = fl
    elif mode == "trunc":
        r = np.trunc(v)
    elif mode == "up":
        r = fl + (d >= 0.5)
    elif mode == "convergent":
        r = fl + ((d > 0.5) | ((d == 0.5) & odd))
    else:  # half_away
        r = np.where(v < 0, fl + (d > 0.5), fl + (d >= 0.5))
    r = np.where(np.isfinite(v), r, v)
    lo, hi = _limits(bits)
    over = r >= float(2 ** (bits - 1))
    under = r < float(lo)
    safe = np.where(over | under, 0.0, r)
    q = safe.astype(_I64)
    q = np.where(over, _I64(hi), np.where(under, _I64(lo), q))
    return _out(q)


def dequantize_fx(q: Any, frac_bits: Any) -> np.ndarray:
    """q·2^-frac_bits as float64 (exact whenever |q| <= 2^53 and the result is a normal float64)."""
    qa = _as_int_array(q, "q")
    qa, f = _broadcast(("q", qa), ("frac_bits", _exponent(frac_bits)))
    with np.errstate(over="ignore"):
        return _out(np.ldexp(qa.astype(np.float64), (-f).astype(np.int32)))


__all__ = [
    "ROUNDING_MODES",
    "saturate",
    "saturate_unsigned",
    "wrap",
    "add_sat",
    "sub_sat",
    "asl_sat",
    "asr",
    "asr_rnd",
    "cast_fx",
    "norm",
    "bit_length",
    "trunc_div",
    "quantize_fx",
    "dequantize_fx",
]
