"""Fixed-point (Q format) arithmetic on signed two's-complement containers of ``width`` bits (2..64).

Values live in int64 arrays; a ``width``-bit container holds integers in [-2^(width-1), 2^(width-1) - 1].
Every function is vectorised, broadcasts its array arguments (shift amounts included), returns int64
(a NumPy scalar for scalar inputs) and is exact for every width up to 64: overflow of adds and shifts is
detected with unsigned (modular) arithmetic, never by relying on signed wrap-around.

The MLI primitives follow the x86 reference build of embARC MLI 2.0 (``lib/src/pal/ref/mli_math.h``;
spec ``mli.md`` §2.1): ``asl_sat`` = ``mli_math_asl_fx``, ``asr`` = ``mli_math_asr_fx``,
``asr_rnd(mode="up" | "convergent")`` = ``mli_math_asr_rnd_fx`` built with ``ROUND_UP`` / ``ROUND_CONVERGENT``,
``add_sat`` / ``sub_sat`` = ``mli_math_add_fx`` / ``mli_math_sub_fx``, ``norm`` = ``mli_math_norm_fx``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AttributeValueError, DTypeError, ShapeError

ROUNDING_MODES = ("up", "convergent", "half_away", "floor", "trunc")

_I64 = np.int64
_U64 = np.uint64
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


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


def _limits(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


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
# exact int64 helpers (inputs already validated, int64 arrays)
# ----------------------------------------------------------------------------------------------------------


def _lsl_wrap(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """x << n modulo 2^64 (n in [0, 63]), computed in uint64 so no signed overflow happens."""
    return np.left_shift(x.view(_U64), n.astype(_U64)).view(_I64)


def _sat(x: np.ndarray, width: int) -> np.ndarray:
    if width >= 64:
        return x
    lo, hi = _limits(width)
    return np.clip(x, lo, hi)


def _add_sat(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    if width < 64:  # |a|, |b| <= 2^62: the int64 sum is exact
        r = np.add(a, b, dtype=_I64)
        return np.clip(r, *_limits(width), out=r) if r.ndim else _sat(r, width)
    s = (a.view(_U64) + b.view(_U64)).view(_I64)  # modular
    over = ((a ^ s) & (b ^ s)) < 0
    if not over.any():
        return s
    return np.where(over, np.where(a < 0, _I64(_INT64_MIN), _I64(_INT64_MAX)), s)


def _sub_sat(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    if width < 64:
        r = np.subtract(a, b, dtype=_I64)
        return np.clip(r, *_limits(width), out=r) if r.ndim else _sat(r, width)
    s = (a.view(_U64) - b.view(_U64)).view(_I64)
    over = ((a ^ b) & (a ^ s)) < 0
    if not over.any():
        return s
    return np.where(over, np.where(a < 0, _I64(_INT64_MIN), _I64(_INT64_MAX)), s)


def _limit_of(sign_src: np.ndarray, width: int) -> np.ndarray:
    lo, hi = _limits(width)
    return np.where(sign_src < 0, _I64(lo), _I64(hi))


def _asl_sat(x: np.ndarray, n: np.ndarray, width: int) -> np.ndarray:
    """mli_math_asl_fx: n < 0 floor right shift, n > W-1 -> x ? +-max : 0, else saturating left shift."""
    right = np.minimum(-n, 63).clip(0, 63)
    left = n.clip(0, width - 1)
    hi = x >> (width - 1 - left)
    fits = (hi == 0) | (hi == -1)
    res = np.where(fits, _lsl_wrap(x, left), _limit_of(hi, width))
    res = np.where(n > width - 1, np.where(x != 0, _limit_of(x, width), _I64(0)), res)
    return np.where(n < 0, x >> right, res)


def _mli_round_const(n: np.ndarray, width: int) -> np.ndarray:
    """MLI's ``(T)((one << n) >> 1)`` for 1 <= n <= W-1, in the C type (int promotion below 32 bits).

    For W >= 32 and n == W-1 the shift reaches the sign bit: the constant is -2^(W-2), not 2^(W-2).
    """
    c_width = max(width, 32)
    one_shl = _lsl_wrap(np.ones_like(n), n)  # exact: n <= 63
    if c_width < 64:
        one_shl = _wrap(one_shl, c_width)
    return one_shl >> 1


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    if bits >= 64:
        return x
    s = _U64(64 - bits)
    return (x.view(_U64) << s).view(_I64) >> _I64(64 - bits)


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Exact bit length of non-negative int64 values."""
    e = np.frexp(v.astype(np.float64))[1].astype(_I64)  # 2^(e-1) <= float(v) < 2^e; rounding may add one
    e = np.maximum(e, 1)
    return np.where(v == 0, _I64(0), e - ((v >> (e - 1)) == 0))


# ----------------------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------------------


def saturate(x: Any, bits: int) -> np.ndarray:
    """Clamp integers to the signed ``bits``-bit range [-2^(bits-1), 2^(bits-1) - 1] (bits 1..64); int64."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    lo, hi = _limits(bits)
    if arr.dtype == _U64:
        return _out(np.minimum(arr, _U64(hi)).astype(_I64))
    return _out(np.clip(arr, lo, hi))


def saturate_unsigned(x: Any, bits: int) -> np.ndarray:
    """Clamp integers to [0, 2^bits - 1] (bits 1..64); int64 for bits <= 63, uint64 for bits == 64."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    if bits == 64:
        if arr.dtype == _U64:
            return _out(arr.copy())
        return _out(np.maximum(arr, 0).astype(_U64))
    hi = (1 << bits) - 1
    if arr.dtype == _U64:
        return _out(np.minimum(arr, _U64(hi)).astype(_I64))
    return _out(np.clip(arr, 0, hi))


def wrap(x: Any, bits: int) -> np.ndarray:
    """Two's-complement wrap of integers to ``bits`` bits (bits 1..64): the signed value with the same low bits."""
    bits = _check_bits(bits, "bits", 1, 64)
    arr = _as_int_array(x, "x")
    return _out(_wrap(arr.view(_I64) if arr.dtype == _U64 else arr, bits))  # reinterpreting keeps the low bits


def add_sat(a: Any, b: Any, *, width: int) -> np.ndarray:
    """a + b saturated to the signed ``width``-bit range (MLI ``mli_math_add_fx``); exact up to width 64."""
    width = _check_bits(width, "width", 2, 64)
    a, b = _broadcast(("a", _container(a, "a", width)), ("b", _container(b, "b", width)))
    return _out(_add_sat(a, b, width))


def sub_sat(a: Any, b: Any, *, width: int) -> np.ndarray:
    """a - b saturated to the signed ``width``-bit range (MLI ``mli_math_sub_fx``); exact up to width 64."""
    width = _check_bits(width, "width", 2, 64)
    a, b = _broadcast(("a", _container(a, "a", width)), ("b", _container(b, "b", width)))
    return _out(_sub_sat(a, b, width))


def asl_sat(x: Any, n: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_asl_fx``: x·2^n saturated to ``width`` bits.

    n < 0 is a floor (arithmetic) right shift by -n (-1/0 once -n > W-1); n > W-1 gives ±max, 0 stays 0.
    """
    width = _check_bits(width, "width", 2, 64)
    xa, na = _container(x, "x", width), _shift(n)
    if _broadcast_shape(("x", xa), ("n", na)) == ():
        return _out(asl_sat(xa.reshape(1), na.reshape(1), width=width).reshape(()))
    if na.size and 0 <= int(na.min()) and int(na.max()) <= width - 1:
        return _out(_asl_sat_in_range(xa, na, width))
    x, n = _broadcast(("x", xa), ("n", na))
    return _out(_asl_sat(x, n, width))


def _asl_sat_in_range(x: np.ndarray, n: np.ndarray, width: int) -> np.ndarray:
    """Saturating x << n for shifts 0 <= n <= W-1 (n broadcasts with x; per-shift constants stay small)."""
    lo, hi = _limits(width)
    r = np.maximum(x, _I64(lo) >> n)  # (lo >> n) << n == lo exactly
    r <<= n  # in range now: |r| · 2^n fits the container
    big = x > (_I64(hi) >> n)
    if big.any():
        r[np.broadcast_to(big, r.shape)] = hi
    return r


def _asr_rnd_fast(x: np.ndarray, n: np.ndarray, width: int, mode: str) -> np.ndarray | None:
    """``asr_rnd`` with a few whole-array passes (shift constants computed on n's own, usually small, shape).

    Returns None where the exact general path is needed: the C rounding-constant quirk (n == W-1, W >= 32, MLI
    modes), n < 0 beyond the width, or a 64-bit container whose values could overflow the rounding add.
    """
    if not n.size:
        return None
    nmin, nmax = int(n.min()), int(n.max())
    mli = mode in ("up", "convergent")
    if nmin < -(width - 1) or (mli and width >= 32 and bool((n == width - 1).any())):
        return None
    nn = n.clip(1, width - 1)
    half = _I64(1) << (nn - 1)
    if width == 64 and mode != "floor" and nmax >= 1 and x.size and int(x.max()) > _INT64_MAX - int(half.max()):
        return None
    lo, hi = _limits(width)
    if mode == "floor":
        r = x >> n.clip(0, 63)
    elif mode == "up":
        r = x + half
        if width < 64:
            np.minimum(r, _I64(hi), out=r)  # the saturating add of ROUND_UP
        r >>= nn
    elif mode == "convergent":  # floor((x + half - 1 + odd(floor(x / 2^n))) / 2^n) rounds half to even
        r = (x >> nn) & _I64(1)
        r += x
        r += half - 1
        r >>= nn
    elif mode == "half_away":  # ties up for x >= 0, down for x < 0
        r = x + half
        r -= x < 0
        r >>= nn
    else:  # trunc: floor after adding 2^n - 1 to negative values
        r = (x >> _I64(63)) & ((_I64(1) << nn) - 1)
        r += x
        r >>= nn
    if nmax > width - 1 and mode != "floor":
        over = n > width - 1
        if mode == "half_away":  # x / 2^W is -1/2 only for x == min; beyond that |x / 2^n| < 1/2
            val = np.where((n == width) & (x == lo), _I64(-1), _I64(0))
        else:
            val = _I64(0)
        r = np.where(over, val, r)
    if nmin <= 0 and mode != "floor":
        r = np.where(n == 0, x, r)
    if nmin < 0:
        r = np.where(n < 0, _asl_sat_in_range(x, (-n).clip(0, width - 1), width), r)
    return r


def asr(x: Any, n: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_asr_fx``: floor(x / 2^n); n > W-1 gives -1 for x < 0 else 0; n < 0 is ``asl_sat``."""
    width = _check_bits(width, "width", 2, 64)
    x, n = _broadcast(("x", _container(x, "x", width)), ("n", _shift(n)))
    res = x >> n.clip(0, 63)
    if (n < 0).any():
        res = np.where(n < 0, _asl_sat(x, -n, width), res)
    return _out(res)


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
    xa, na = _container(x, "x", width), _shift(n)
    if _broadcast_shape(("x", xa), ("n", na)) == ():  # work on 1-element arrays: in-place ops need arrays
        return _out(asr_rnd(xa.reshape(1), na.reshape(1), width=width, mode=mode).reshape(()))
    fast = _asr_rnd_fast(xa, na, width, mode)
    if fast is not None:
        return _out(fast)
    x, n = _broadcast(("x", xa), ("n", na))
    if mode in ("up", "convergent"):
        nn = n.clip(1, width - 1)
        if mode == "up":
            res = _add_sat(x, _mli_round_const(nn, width), width) >> nn
        else:
            mask = _mli_round_const(nn, width)
            r = x >> nn
            bump = ((x & mask) != 0) & (((r & 1) != 0) | ((x & (mask - 1)) != 0))
            res = r + bump  # r <= max >> 1, so r + 1 cannot overflow
        res = np.where(n > width - 1, _I64(0), res)
    else:
        nc = np.minimum(n, width).clip(1, 64)  # n > W behaves like n == W except for nearest modes (fixed below)
        q = x >> np.minimum(nc, 63)
        ux = x.view(_U64)
        all_ones = _U64(2**64 - 1)
        mask = np.where(nc >= 64, all_ones, (_U64(1) << np.minimum(nc, 63).astype(_U64)) - _U64(1))
        rem = ux & mask  # x - q·2^nc, in [0, 2^nc)
        if mode == "floor":
            res = q
        elif mode == "trunc":
            res = q + ((x < 0) & (rem != 0))
        else:  # half_away
            half = _U64(1) << (nc - 1).astype(_U64)
            res = q + np.where(x < 0, rem > half, rem >= half)
            res = np.where(n > width, _I64(0), res)
    res = np.where(n == 0, x, res)
    if (n < 0).any():
        res = np.where(n < 0, _asl_sat(x, -n, width), res)
    return _out(res)


def cast_fx(x: Any, shift: Any, *, in_width: int, out_bits: int, mode: str = "up") -> np.ndarray:
    """MLI cast: ``saturate(asr_rnd(x, shift, width=in_width, mode), out_bits)`` (e.g. int32 -> int16 with shift)."""
    out_bits = _check_bits(out_bits, "out_bits", 1, 64)
    return _out(_sat(np.asarray(asr_rnd(x, shift, width=in_width, mode=mode)), out_bits))


def norm(x: Any, *, width: int) -> np.ndarray:
    """MLI ``mli_math_norm_fx``: redundant sign bits of x in a ``width``-bit container.

    W-1 - bitlen(x) for x >= 0, W-1 - bitlen(~x) for x < 0; x == 0 gives W-1 (so does x == -1); x == min gives 0.
    """
    width = _check_bits(width, "width", 2, 64)
    x = _container(x, "x", width)
    v = x ^ (x >> 63)  # x for x >= 0, ~x = -x-1 for x < 0
    return _out(_I64(width - 1) - _bit_length(v))


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
    "quantize_fx",
    "dequantize_fx",
]
