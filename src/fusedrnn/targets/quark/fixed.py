"""Quark's kernel integer helpers (``lstm.h``), emulated exactly, vectorised over int64 / float64 arrays.

All functions model x86-64 gcc semantics of the C++ kernel: ``static_cast`` of a double to ``short`` /
``unsigned short`` keeps the low 16 bits of the truncated value, ``1 << 31`` is INT_MIN, right shifts of
negative ``long long`` are arithmetic. Undefined-behaviour inputs (shift counts the kernel cannot execute)
are rejected by the callers, not emulated.
"""

from __future__ import annotations

import math

import numpy as np

from ...numerics import core

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
KERNEL_INT16_MIN, KERNEL_INT16_MAX = -(2**16), 2**16 - 1  # the kernel's "INT16" limits (defect 2)


def c_one_shl(n: int) -> int:
    """The C ``int`` expression ``1 << n`` for 0 <= n <= 31 (``1 << 31`` is INT_MIN on gcc/x86-64)."""
    if not 0 <= n <= 31:
        raise ValueError(f"1 << {n} is undefined behaviour")
    return INT32_MIN if n == 31 else 1 << n


def _rounded_shift(x: np.ndarray, shift: int, half: int) -> np.ndarray:
    """sign(x) * ((|x| + half) >> shift) for int64 x, without branches:
    x >= 0: (x + half) >> shift;  x < 0: -((-x + half) >> shift) = (x - half + 2^shift - 1) >> shift (floor/ceil
    identity, valid for any integer half, including the kernel's negative INT_MIN at shift 32). The usual half
    2^(shift-1) is gemmlowp's RoundingDivideByPOT (round half away from zero)."""
    if half == 1 << (shift - 1):
        return core.rdpot(x, shift)
    delta = half - ((1 << shift) - 1 - half)  # off_pos - off_neg (1 for the usual half)
    return (x + np.int64(half) - (x < 0) * np.int64(delta)) >> np.int64(shift)


def srs(x: np.ndarray, shift: int, *, faithful: bool = True, bound: int | None = None) -> np.ndarray:
    """``srs_int``: round half away from zero of x / 2^shift (x int64 array, result int64).

    Faithful: saturated to int32, with the kernel's rounding constant ``1 << (shift - 1)`` computed in ``int``
    (so shift 32 adds INT_MIN). Corrected: exact for shifts in [0, 62], no saturation (int64 has the headroom).
    ``bound`` (a bound on |x|) lets the saturation be skipped when it cannot act.
    """
    x = np.asarray(x, dtype=np.int64)
    if shift == 0:
        r = x
    else:
        half = c_one_shl(shift - 1) if faithful else 1 << (shift - 1)
        r = _rounded_shift(x, shift, half)
    if not faithful or (bound is not None and ((bound + abs(half if shift else 0)) >> shift) <= INT32_MAX):
        return r
    return core.sat(r, 32)


def srs_fn(shift: int, *, faithful: bool = True, bound: int | None = None):
    """:func:`srs` with its constants computed once: a function of x alone (for the per-step hot loop)."""
    if shift == 0:
        half = 0
    else:
        half = c_one_shl(shift - 1) if faithful else 1 << (shift - 1)
    saturate = faithful and not (bound is not None and ((bound + abs(half)) >> shift) <= INT32_MAX)
    if shift == 0:
        def shifted(x):
            return x
    elif half == 1 << (shift - 1):
        def shifted(x):
            return core.rdpot(x, shift)
    else:
        def shifted(x):
            return _rounded_shift(x, shift, half)
    if not saturate:
        return shifted
    return lambda x: core.sat(shifted(x), 32)


def srs_hidden(x: np.ndarray, shift: int) -> np.ndarray:
    """``srs_short`` (the faithful hidden-state requantisation), result int16: round half away, clamp to the
    kernel's [-65536, 65535] and keep the low 16 bits (defect 2: values outside int16 wrap to the other end)."""
    return srs_hidden_fn(shift)(np.asarray(x, dtype=np.int64))


def srs_hidden_fn(shift: int):
    """:func:`srs_hidden` with its constants computed once."""
    shifted = srs_fn(shift, faithful=True, bound=0)  # bound=0: no int32 saturation here

    def f(x):
        return core.clamp(shifted(x), KERNEL_INT16_MIN, KERNEL_INT16_MAX).astype(np.int16)

    return f


def round_int_c(d: np.ndarray) -> np.ndarray:
    """``round_int``: round half away from zero of float64 values, clamped to int32 (result int64).

    The kernel tests the sign on the value truncated to ``long long`` (defect 6), so values in (-1, 0) give
    0 whatever their fraction; the ``0.5 + |x|`` addition is done in float64 as in C.
    """
    d = np.asarray(d, dtype=np.float64)
    neg = d <= -1.0  # trunc(d) < 0
    r = 0.5 + np.where(neg, -d, d)
    r = np.minimum(np.maximum(np.where(neg, -r, r), float(INT32_MIN)), float(INT32_MAX))
    return np.trunc(r).astype(np.int64)


def round_int_c_small(d: np.ndarray) -> np.ndarray:
    """:func:`round_int_c` for |d| <= 2^24 (no clamping needed): trunc(0.5 + |d|) with the sign of d for
    d <= -1, trunc(0.5 + d) = 0 for -1 < d < 0, trunc(0.5 + d) for d >= 0 (the float64 add as in C)."""
    r = np.trunc(np.abs(d) + 0.5)
    return (r * ((d >= 0.0).astype(np.float64) - (d <= -1.0))).astype(np.int64)


def round_half_away(d: np.ndarray) -> np.ndarray:
    """Correct round half away from zero of float64 values to int64 (the corrected mode's ``round_int``)."""
    d = np.asarray(d, dtype=np.float64)
    r = np.trunc(np.abs(d) + 0.5)
    return np.where(d < 0, -r, r).astype(np.int64)


def round_short_c(v: float) -> int:
    """``round_short`` of one double: round half away (sign tested after truncation), clamp to the kernel's
    [-65536, 65535], low 16 bits as a signed short."""
    neg = math.trunc(v) < 0
    r = 0.5 + (-v if neg else v)
    r = -r if neg else r
    if r < KERNEL_INT16_MIN:
        q = KERNEL_INT16_MIN
    elif r > KERNEL_INT16_MAX:
        q = KERNEL_INT16_MAX
    else:
        q = math.trunc(r)
    return int(core.wrap(q, 16))


def ceil_log2(v: float) -> float:
    """``std::ceil(std::log2(v))`` with the C library's log2 (Python's math.log2); -inf for 0."""
    if v == 0:
        return -math.inf
    return float(math.ceil(math.log2(v)))


def fix_faithful(v: float) -> tuple[int, int]:
    """``params_float_to_fix``: (exponent a, 16-bit mantissa m) with m ~ v * 2^a, a = 15 - ceil(log2|v|).

    Reproduces defect 1 (|m| rounding to 2^15 wraps to -32768) and, for v == 0, what x86-64 does with
    ``log2(0)`` (defect 4): m = 0, a = 0 (the exponent's low byte). Raises ValueError where the kernel's shift
    ``1 << a`` is undefined (a outside [0, 31]).
    """
    if v == 0:
        return 0, 0
    a = 15 - int(ceil_log2(abs(v)))
    s = float(c_one_shl(a)) * v
    return a, round_short_c(s)


def fix_corrected(v: float, bits: int = 30) -> tuple[int, int]:
    """Exponent a and mantissa m of v with |m| in [2^(bits-1), 2^bits) and m ~ v * 2^a, round half away;
    (0, 0) for v == 0. A mantissa rounding up to 2^bits becomes 2^(bits-1) with a - 1 (no wrap)."""
    if v == 0:
        return 0, 0
    _, e = math.frexp(abs(v))  # |v| = f * 2^e, f in [0.5, 1)
    a = bits - e
    m = int(round_half_away(np.float64(math.ldexp(abs(v), a))))
    if m >= 2**bits:
        m //= 2
        a -= 1
    return a, (-m if v < 0 else m)
