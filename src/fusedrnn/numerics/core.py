"""The unchecked integer cores: every primitive of the exact integer arithmetic, defined once.

A core takes int64 values (ndarrays; Python ints and NumPy integer scalars are accepted where the docstring says
so), checks nothing and is written for the per-timestep loops of the integer targets (MLI, LiteRT 8x8_16, Quark):
a scalar shift amount takes a path whose constants are Python ints, an array of shift amounts a vectorised one.
Each core states its preconditions; outside them the result is unspecified. The validated public functions,
which check and broadcast their arguments and then call these, are :mod:`.fixed_point` (MLI's ``mli_math.h``)
and :mod:`.gemmlowp` (TFLite / gemmlowp).

Sections: containers (saturate, wrap, saturating add, C division, bit length); MLI shifts and rounding
(``mli_math_asl_fx`` / ``asr_fx`` / ``asr_rnd_fx`` / ``norm_fx``, spec mli.md §2.1, plus half-away, floor and
truncating rounding); gemmlowp (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT,
SaturatingRoundingMultiplyByPOT, RoundingHalfSum, MultiplyByQuantizedMultiplier, litert.md §6.1).
"""

from __future__ import annotations

import numpy as np

_I64 = np.int64
_U64 = np.uint64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

try:  # the clip ufunc itself: np.clip's Python wrapper costs about 2 µs more per call than the clipping of a
    _clip = np._core.umath.clip  # small array
except AttributeError:  # a NumPy without that (private) path: the public wrapper, same results
    _clip = np.clip

_SIGN, _ONE = _I64(63), _I64(1)  # shift amounts: x >> _SIGN is -1 for x < 0, else 0
_MIN64, _MAX64 = _I64(INT64_MIN), _I64(INT64_MAX)
_LIMITS = tuple((-(1 << (b - 1)), (1 << (b - 1)) - 1) if b else (0, 0) for b in range(65))


# ----------------------------------------------------------------------------------------------------------
# containers
# ----------------------------------------------------------------------------------------------------------


def limits(bits: int) -> tuple[int, int]:
    """(min, max) of a signed ``bits``-bit container: (-2^(bits-1), 2^(bits-1) - 1), 1 <= bits <= 64."""
    return _LIMITS[bits]


def i64(x) -> np.ndarray:
    """``x`` as an int64 array (no copy when it already is one)."""
    return np.asarray(x, dtype=_I64)


def clamp(x, lo, hi, out: np.ndarray | None = None) -> np.ndarray:
    """min(max(x, lo), hi) element-wise; x int64 (an array for ``out``), lo/hi ints or broadcastable arrays."""
    return _clip(x, lo, hi, out=out)


def sat(x, bits: int, out: np.ndarray | None = None) -> np.ndarray:
    """x clamped to the signed ``bits``-bit range [-2^(bits-1), 2^(bits-1) - 1] (1 <= bits <= 64).

    x: any integer array or int without ``out`` (the result is int64); with ``out``, an integer array (usually
    ``out`` itself) whose dtype holds the limits, clamped in place."""
    lo, hi = _LIMITS[bits]
    if out is None:
        return _clip(i64(x), lo, hi)
    return _clip(x, lo, hi, out=out)


def sat_unsigned(x, bits: int) -> np.ndarray:
    """x clamped to [0, 2^bits - 1] (1 <= bits <= 63)."""
    return _clip(i64(x), 0, (1 << bits) - 1)


def wrap(x, bits: int) -> np.ndarray:
    """The signed ``bits``-bit value with the low ``bits`` bits of x (two's complement wrap), 1 <= bits <= 64.

    Computed as (x << (64 - bits)) >> (64 - bits) with the left shift in uint64, so no signed overflow happens."""
    x = i64(x)
    if bits >= 64:
        return x
    su, si = _WRAP_SHIFTS[bits]
    r = np.left_shift(x.view(_U64), su).view(_I64)
    r >>= si
    return r


_WRAP_SHIFTS = tuple((_U64(64 - b), _I64(64 - b)) for b in range(65))


def add_sat(a, b, width: int) -> np.ndarray:
    """a + b saturated to the signed ``width``-bit range (MLI ``mli_math_add_fx``); a, b in that range.

    b may be a Python int (one compare at width 64)."""
    a = i64(a)
    if width < 64:  # |a|, |b| <= 2^62: the int64 sum is exact
        return _clip(a + b, *_LIMITS[width])
    if isinstance(b, (int, np.integer)):
        b = int(b)
        if b >= 0:
            return np.where(a > INT64_MAX - b, _MAX64, a + b)
        return np.where(a < INT64_MIN - b, _MIN64, a + b)
    b = i64(b)
    s = (a.view(_U64) + b.view(_U64)).view(_I64)  # modular
    over = ((a ^ s) & (b ^ s)) < 0
    if not over.any():
        return s
    return np.where(over, np.where(a < 0, _MIN64, _MAX64), s)


def sub_sat(a, b, width: int) -> np.ndarray:
    """a - b saturated to the signed ``width``-bit range (MLI ``mli_math_sub_fx``); a, b in that range."""
    a, b = i64(a), i64(b)
    if width < 64:
        return _clip(a - b, *_LIMITS[width])
    s = (a.view(_U64) - b.view(_U64)).view(_I64)
    over = ((a ^ b) & (a ^ s)) < 0
    if not over.any():
        return s
    return np.where(over, np.where(a < 0, _MIN64, _MAX64), s)


def trunc_div(a, b) -> np.ndarray:
    """C integer division a / b (truncation toward zero); b != 0, and neither is INT64_MIN (|.| overflows)."""
    a, b = i64(a), i64(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def trunc_div_pot(x, k: int) -> np.ndarray:
    """C integer division x / 2^k (truncation toward zero), 0 <= k <= 63: floor after adding 2^k - 1 to negative x
    (which cannot overflow)."""
    x = i64(x)
    return (x + ((x >> _SIGN) & ((1 << k) - 1))) >> k


def bit_length(v) -> np.ndarray:
    """Number of significant bits of non-negative int64 values (0 for 0), exact."""
    v = i64(v)
    e = np.frexp(v.astype(np.float64))[1].astype(_I64)  # 2^(e-1) <= float(v) < 2^e; rounding may add one
    e = np.maximum(e, 1)
    return np.where(v == 0, _I64(0), e - ((v >> (e - 1)) == 0))


# ----------------------------------------------------------------------------------------------------------
# MLI shifts and rounding (mli_math.h); x holds values of a signed width-bit container, 2 <= width <= 64
# ----------------------------------------------------------------------------------------------------------


def _lsl_wrap(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """x << n modulo 2^64 (n in [0, 63]), computed in uint64 so no signed overflow happens."""
    return np.left_shift(x.view(_U64), n.astype(_U64)).view(_I64)


def _limit_of(sign_src: np.ndarray, width: int) -> np.ndarray:
    lo, hi = _LIMITS[width]
    return np.where(sign_src < 0, _I64(lo), _I64(hi))


def _asl_sat_general(x: np.ndarray, n: np.ndarray, width: int) -> np.ndarray:
    """:func:`asl_sat` for any array of shift amounts (|n| <= 2^62)."""
    right = np.minimum(-n, 63).clip(0, 63)
    left = n.clip(0, width - 1)
    hi = x >> (width - 1 - left)
    fits = (hi == 0) | (hi == -1)
    res = np.where(fits, _lsl_wrap(x, left), _limit_of(hi, width))
    res = np.where(n > width - 1, np.where(x != 0, _limit_of(x, width), _I64(0)), res)
    return np.where(n < 0, x >> right, res)


def _asl_sat_in_range(x: np.ndarray, n: np.ndarray, width: int) -> np.ndarray:
    """Saturating x << n for an array of shifts 0 <= n <= W-1 (n broadcasts with x; per-shift constants stay
    small)."""
    lo, hi = _LIMITS[width]
    r = np.maximum(x, _I64(lo) >> n)  # (lo >> n) << n == lo exactly
    r <<= n  # in range now: |r| · 2^n fits the container
    big = x > (_I64(hi) >> n)
    if big.any():
        r[np.broadcast_to(big, r.shape)] = hi
    return r


def asl_sat(x, n, width: int) -> np.ndarray:
    """MLI ``mli_math_asl_fx``: x·2^n saturated to ``width`` bits.

    n < 0 is a floor (arithmetic) right shift by -n (-1/0 once -n > W-1); n > W-1 gives ±max, 0 stays 0.
    n: a Python / NumPy int or an int64 array broadcasting with x (|n| <= 2^62)."""
    x = i64(x)
    if not isinstance(n, (int, np.integer)):
        n = i64(n)
        if n.ndim:
            if n.size and 0 <= int(n.min()) and int(n.max()) <= width - 1:
                return _asl_sat_in_range(x, n, width)
            return _asl_sat_general(x, n, width)
    n = int(n)
    lo, hi = _LIMITS[width]
    if n < 0:
        return x >> min(-n, 63)
    if n > width - 1:
        return np.where(x > 0, _I64(hi), np.where(x < 0, _I64(lo), _I64(0)))
    if width <= 32:  # |x| < 2^31 and n <= 31: x << n cannot overflow int64
        return _clip(x << n, lo, hi)
    return np.where(x > (hi >> n), _I64(hi), np.where(x < (lo >> n), _I64(lo), x << n))


def asr(x, n, width: int) -> np.ndarray:
    """MLI ``mli_math_asr_fx``: floor(x / 2^n); n > W-1 gives -1 for x < 0 else 0; n < 0 is :func:`asl_sat`.

    n: a Python / NumPy int or an int64 array broadcasting with x."""
    x = i64(x)
    if isinstance(n, (int, np.integer)):
        n = int(n)
        return asl_sat(x, -n, width) if n < 0 else x >> min(n, 63)
    n = i64(n)
    res = x >> n.clip(0, 63)
    if (n < 0).any():
        res = np.where(n < 0, _asl_sat_general(x, -n, width), res)
    return res


def _mli_round_const(n: np.ndarray, width: int) -> np.ndarray:
    """MLI's ``(T)((one << n) >> 1)`` for 1 <= n <= W-1, in the C type (int promotion below 32 bits).

    For W >= 32 and n == W-1 the shift reaches the sign bit: the constant is -2^(W-2), not 2^(W-2).
    """
    c_width = max(width, 32)
    one_shl = _lsl_wrap(np.ones_like(n), n)  # exact: n <= 63
    if c_width < 64:
        one_shl = wrap(one_shl, c_width)
    return one_shl >> 1


def _mli_round_const_int(n: int, width: int) -> int:
    """:func:`_mli_round_const` for a Python int n."""
    return -(1 << (width - 2)) if (width >= 32 and n == width - 1) else 1 << (n - 1)


def asr_rnd(x, n, width: int, mode: str = "up") -> np.ndarray:
    """x / 2^n rounded to an integer, for x in a ``width``-bit container (mode "up" | "convergent" | "half_away" |
    "floor" | "trunc"; see :func:`fusedrnn.numerics.fixed_point.asr_rnd` for each mode's exact meaning).

    "up" / "convergent" are MLI's ``mli_math_asr_rnd_fx`` (n < 0 -> :func:`asl_sat`, n == 0 -> x itself, n > W-1
    -> 0, the rounding constant ``(one << n) >> 1`` in the C type); the other modes are exact roundings of x / 2^n.
    n: a Python / NumPy int or an int64 array broadcasting with x (|n| <= 2^62).
    """
    x = i64(x)
    if not isinstance(n, (int, np.integer)):
        n = i64(n)
        if n.ndim:
            return _asr_rnd_array(x, n, width, mode)
    n = int(n)
    if n < 0:
        return asl_sat(x, -n, width)
    if n == 0:
        return x
    if mode == "floor":
        return x >> min(n, 63)
    if n > width - 1:
        if mode == "half_away" and n == width:  # x / 2^W is -1/2 only for x == min
            return np.where(x == _LIMITS[width][0], _I64(-1), _I64(0))
        return np.zeros_like(x)
    if mode == "up":
        return add_sat(x, _mli_round_const_int(n, width), width) >> n
    if mode == "convergent":
        if width < 64 and not (width >= 32 and n == width - 1):
            return asr_rnd_nosat(x, n, mode)
        c = _mli_round_const_int(n, width)
        r = x >> n
        return r + (((x & c) != 0) & (((r & 1) != 0) | ((x & (c - 1)) != 0)))
    if mode == "trunc":
        return trunc_div_pot(x, n)
    if width < 64:  # half_away: x + 2^(n-1) cannot overflow
        return rdpot(x, n)
    return _asr_rnd_array(x, i64(n), width, mode)


def asr_rnd_nosat(x, n: int, mode: str) -> np.ndarray:
    """:func:`asr_rnd` ("up" or "convergent") for a Python int 1 <= n <= 62 where |x| <= 2^62, so that the
    ROUND_UP add cannot saturate and the rounding constant is 2^(n-1): the result of every container width
    >= bitlen(|x|) + 1 (64 included) with the fewest passes. Convergent: floor((x + 2^(n-1) - 1 + odd) / 2^n) with
    odd the lowest bit of floor(x / 2^n) rounds half to even."""
    x = i64(x)
    if mode == "up":
        return (x + (1 << (n - 1))) >> n
    return (x + ((1 << (n - 1)) - 1) + ((x >> n) & 1)) >> n


def _asr_rnd_fast(x: np.ndarray, n: np.ndarray, width: int, mode: str) -> np.ndarray | None:
    """:func:`asr_rnd` for arrays x, n with a few whole-array passes (shift constants computed on n's own, usually
    small, shape).

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
    if width == 64 and mode != "floor" and nmax >= 1 and x.size and int(x.max()) > INT64_MAX - int(half.max()):
        return None
    lo, hi = _LIMITS[width]
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
        r = (x >> _SIGN) & ((_I64(1) << nn) - 1)
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


def _asr_rnd_array(x: np.ndarray, n: np.ndarray, width: int, mode: str) -> np.ndarray:
    """:func:`asr_rnd` for an array of shift amounts: the fast passes, else the exact general path."""
    if x.ndim == 0 and n.ndim == 0:  # in-place steps need arrays
        return _asr_rnd_array(x.reshape(1), n.reshape(1), width, mode).reshape(())
    fast = _asr_rnd_fast(x, n, width, mode)
    if fast is not None:
        return fast
    x, n = np.broadcast_arrays(x, n)
    if mode in ("up", "convergent"):
        nn = n.clip(1, width - 1)
        if mode == "up":
            res = add_sat(x, _mli_round_const(nn, width), width) >> nn
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
        res = np.where(n < 0, _asl_sat_general(x, -n, width), res)
    return res


def norm(x, width: int) -> np.ndarray:
    """MLI ``mli_math_norm_fx``: redundant sign bits of x in a ``width``-bit container.

    W-1 - bitlen(x) for x >= 0, W-1 - bitlen(~x) for x < 0; x == 0 gives W-1 (so does x == -1); x == min gives 0.
    """
    x = i64(x)
    return _I64(width - 1) - bit_length(x ^ (x >> _SIGN))  # x for x >= 0, ~x = -x-1 for x < 0


# ----------------------------------------------------------------------------------------------------------
# gemmlowp / TFLite (raw fixed-point values of a bits-wide container, bits 16 or 32, held in int64)
# ----------------------------------------------------------------------------------------------------------


def srdhm(a, b, bits: int, saturate: bool = True) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul of raw ``bits``-wide values: a·b / 2^(bits-1) rounded to nearest, ties
    toward +inf; ``a == b == min`` gives max.

    gemmlowp adds a nudge of ±2^(bits-2) (+2^(bits-2) for a·b >= 0, 1 - 2^(bits-2) below) and divides with C++
    truncation; both cases equal floor((a·b + 2^(bits-2)) / 2^(bits-1)), which exceeds the maximum (by one)
    only for min·min: one clamp saturates it (``saturate=False`` skips it where a caller knows that a and b are
    never both min, e.g. a non-negative multiplier)."""
    p = i64(a) * b
    if not isinstance(p, np.ndarray):  # scalar operands
        p = (p + (1 << (bits - 2))) >> (bits - 1)
        return np.minimum(p, (1 << (bits - 1)) - 1) if saturate else p
    p += 1 << (bits - 2)
    p >>= bits - 1
    return np.minimum(p, (1 << (bits - 1)) - 1, out=p) if saturate else p


def rdpot(x, e) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2^e rounded to nearest, ties away from zero, for 0 <= e <= 62 (an int
    or an int64 array broadcasting with x) and x + 2^(e-1) <= INT64_MAX (always true for int32 values and |x| <=
    2^62 with e <= 61).

    floor((x + 2^(e-1) - [x < 0]) / 2^e): the floor form of gemmlowp's mask-and-threshold recipe. With an int e,
    an integer array x of a narrower signed dtype that holds x + 2^(e-1) keeps its dtype (no int64 pass)."""
    if not isinstance(x, np.ndarray):
        x = i64(x)
    if isinstance(e, (int, np.integer)):
        e = int(e)
        if e == 0:
            return x
        r = x >> (8 * x.dtype.itemsize - 1)  # -1 for x < 0, else 0
        r += x
        r += 1 << (e - 1)
        r >>= e
        return r
    x, e = np.broadcast_arrays(i64(x), i64(e))
    return _rdpot_pow2(x, e, _I64(1) << e)


def _rdpot_pow2(x: np.ndarray, e: np.ndarray, pow2: np.ndarray) -> np.ndarray:
    """:func:`rdpot` for an int64 array x of the broadcast shape, exponents e and ``pow2`` = 2^e computed
    beforehand."""
    t = x >> _SIGN
    t += pow2
    t >>= _ONE  # 2^(e-1) - [x < 0], and 0 for e == 0
    t += x
    t >>= e
    return t


def srmpot(x, e: int, bits: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` on raw ``bits``-wide values: e == 0 -> x; e < 0 ->
    :func:`rdpot` (x, -e); e > 0 -> x·2^e saturated when x > 2^(bits-1-e) - 1 or x < -(2^(bits-1-e) - 1)."""
    if e == 0:
        return i64(x)
    if e < 0:
        return rdpot(x, -e)
    x = i64(x)
    threshold = (1 << (bits - 1 - e)) - 1
    out = wrap(x << e, bits)
    out = np.where(x > threshold, _I64((1 << (bits - 1)) - 1), out)
    return np.where(x < -threshold, _I64(-(1 << (bits - 1))), out)


def rounding_half_sum(a, b, bits: int) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum``: (a + b + sign(a + b)) / 2 with C++ truncating division, wrapped to ``bits``."""
    s = i64(a) + b
    return wrap(trunc_div_pot(s + np.where(s >= 0, _I64(1), _I64(-1)), 1), bits)


def mbqm64(x, Q, shift) -> np.ndarray:  # noqa: N803
    """TFLite ``MultiplyByQuantizedMultiplier(int64_t x, Q, shift)``: Q reduced to 16 bits
    (``Q < 0x7FFF0000 ? (Q + 2^15) >> 16 : 0x7FFF``), then (x·Qr + 2^(14 - shift)) >> (15 - shift) wrapped to
    int32; x in [-2^47, 2^47), shift in [-31, 7], Q >= 0 (all broadcasting)."""
    Q = i64(Q)  # noqa: N806
    reduced = np.where(Q < 0x7FFF0000, (Q + (1 << 15)) >> 16, _I64(0x7FFF))
    total = 15 - i64(shift)
    return wrap((i64(x) * reduced + (_I64(1) << (total - 1))) >> total, 32)


def _contiguous(a) -> np.ndarray:
    """``a`` as a C-contiguous array of its own shape (0-d stays 0-d)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy()


class Requant:
    """TFLite ``MultiplyByQuantizedMultiplier(int32_t x, Q, shift)`` ≈ x · Q · 2^(shift - 31), prepared for fixed
    (Q, shift) (ints, or arrays broadcasting over x's trailing axes: per-column multipliers).

    ``rounding="double"`` (the default build, pip wheels): ``rdpot(srdhm(wrap(x · 2^max(shift, 0), 32), Q, 32),
    max(-shift, 0))``, shift in [-31, 30]; ``"single"`` (``TFLITE_SINGLE_ROUNDING=1``): ``wrap((x·Q +
    2^(30 - shift)) >> (31 - shift), 32)``, Q >= 0. x: int64 holding int32 values; results int64."""

    def __init__(self, Q, shift, rounding: str = "double"):  # noqa: N803
        Q, shift = np.broadcast_arrays(i64(Q), i64(shift))  # noqa: N806
        self.rounding = rounding
        self.Q = _contiguous(Q)
        self.one_pass = False
        if rounding == "single":
            total = 31 - shift
            self.total = _contiguous(total)
            self.nudge = _contiguous(_I64(1) << (total - 1))
            return
        left = np.maximum(shift, 0)
        right = np.maximum(-shift, 0)
        self.left = None if not left.any() else _contiguous(left)
        # a shift shared by every column is a Python int (rdpot's scalar path), else 2^right is kept
        self.right = int(right.flat[0]) if right.size and np.all(right == right.flat[0]) else _contiguous(right)
        self.pow2_right = None if isinstance(self.right, int) else _contiguous(_I64(1) << right)

        # one-pass form of the double rounding, used by ``inplace`` when no left shift is needed:
        # RDPOT(SRDHM(x, Q), r) = (x·Q + N − C·[x·Q < −2^30]) >> (31 + r) with N = 2^30 + [r > 0]·2^(30+r) and
        # C = [r > 0]·2^31 (floor(floor(a/m) + k)/n) = floor((a + k·m)/(m·n)) applied to both roundings; the
        # bracket is the sign of the SRDHM result). No int64 overflow: |x·Q| <= 2^62, N <= 2^30 + 2^61.
        # SRDHM saturates only for x = Q = INT32_MIN, which a non-negative multiplier never is.
        self.n2 = _contiguous(np.where(right > 0, _I64(1) << (30 + right), 0))  # N - 2^30
        self.corr = _contiguous(np.where(right > 0, _I64(1) << 31, 0))
        self.total_shift = _contiguous(31 + right)
        self.q_min = bool((self.Q == -(1 << 31)).any())
        self.one_pass = self.left is None and not self.q_min

    def with_bias(self, bias: np.ndarray) -> np.ndarray:
        """The per-column constant ``bias·Q + 2^30`` for :meth:`inplace` (MBQM(x + bias) with the bias folded in;
        exact in int64 while |x + bias| < 2^31)."""
        return _contiguous(i64(bias) * self.Q + (1 << 30))

    def inplace(self, acc: np.ndarray, scratch: np.ndarray, bias_q: np.ndarray | None = None,
                bias: np.ndarray | None = None) -> np.ndarray:
        """``acc = self(acc + bias)`` in place (``scratch``: an int64 array of acc's shape; ``bias_q`` =
        ``with_bias(bias)``, ``bias`` itself for the general path); returns acc."""
        if not self.one_pass:
            if bias is not None:
                acc += bias
            acc[...] = self(acc)
            return acc
        np.multiply(acc, self.Q, out=acc)
        acc += (1 << 30) if bias_q is None else bias_q  # u = (x + b)·Q + 2^30; SRDHM < 0 exactly when u < 0
        np.right_shift(acc, 63, out=scratch)  # -1 where u < 0, else 0
        np.bitwise_and(scratch, self.corr, out=scratch)  # C·[u < 0]
        acc += self.n2
        acc -= scratch
        np.right_shift(acc, self.total_shift, out=acc)
        return acc

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.rounding == "single":
            return wrap((i64(x) * self.Q + self.nudge) >> self.total, 32)
        if self.left is not None:
            x = wrap(i64(x) << self.left, 32)
        p = srdhm(x, self.Q, 32, saturate=self.q_min)
        if self.pow2_right is None:
            return rdpot(p, self.right)
        return _rdpot_pow2(p, self.right, self.pow2_right)
