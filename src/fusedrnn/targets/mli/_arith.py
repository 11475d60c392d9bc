"""MLI integer primitives on int64 arrays (``lib/src/pal/ref/mli_math.h`` semantics, spec mli.md §2.1).

Values live in int64 arrays whatever their C container; ``width`` names the container (8, 16, 32 or 64).
Shift counts may be Python ints or int arrays (broadcast). Rounding mode ``"up"`` is MLI ROUND_UP (half toward
+inf, the add saturates), ``"convergent"`` is ROUND_CONVERGENT (half to even).

These are the hot-loop forms used by the MLI kernels: no argument validation (the kernels pass int64 arrays
whose values already fit ``width``). The validated, general versions live in :mod:`fusedrnn.numerics`.
Private to this package; ``norm``/``cdiv``/``wrap`` with int64-safe 64-bit handling are candidates for numerics.
"""

from __future__ import annotations

import numpy as np

from ...numerics.int_matmul import IntMatrix

_I64 = np.int64


def lim(width: int) -> tuple[int, int]:
    """(min, max) of a signed ``width``-bit container."""
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def i64(x) -> np.ndarray:
    return np.asarray(x, dtype=_I64)


def sat(x, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range."""
    lo, hi = lim(bits)
    return np.clip(i64(x), lo, hi)


def wrap(x, bits: int) -> np.ndarray:
    """Two's-complement wrap to ``bits`` bits (``bits`` < 64)."""
    x = i64(x)
    m = 1 << bits
    h = 1 << (bits - 1)
    return ((x + h) & (m - 1)) - h


def add_sat(a, b, width: int) -> np.ndarray:
    """a + b saturated to the ``width``-bit container (64-bit safe)."""
    a = i64(a)
    if width < 64:
        return sat(a + b, width)
    if isinstance(b, (int, np.integer)):  # scalar b: one compare, no wrap-around possible
        b = int(b)
        lo, hi = lim(64)
        return np.where(a > hi - b, hi, a + b) if b >= 0 else np.where(a < lo - b, lo, a + b)
    b = i64(b)
    with np.errstate(over="ignore"):
        r = a + b
    over = (a > 0) & (b > 0) & (r < 0)
    under = (a < 0) & (b < 0) & (r >= 0)
    return np.where(over, np.iinfo(_I64).max, np.where(under, np.iinfo(_I64).min, r))


def _scalar_or_array(n):
    return n if isinstance(n, (int, np.integer)) else i64(n)


def asl(x, n, width: int) -> np.ndarray:
    """``mli_math_asl_fx``: saturating left shift; n < 0 floor-shifts right; n > width-1 gives ±max (0 stays 0)."""
    x = i64(x)
    n = _scalar_or_array(n)
    lo, hi = lim(width)
    if isinstance(n, (int, np.integer)):
        n = int(n)
        if n < 0:
            return x >> min(-n, 63)
        if n > width - 1:
            return np.where(x > 0, hi, np.where(x < 0, lo, 0)).astype(_I64)
        if width <= 32:  # |x| < 2^31 and n <= 31: x << n cannot overflow int64
            return np.clip(x << n, lo, hi)
        return np.where(x > (hi >> n), hi, np.where(x < (lo >> n), lo, x << n))
    nc = np.clip(n, 0, width - 1)
    left = np.where(x > (hi >> nc), hi, np.where(x < (lo >> nc), lo, x << nc))
    big = np.where(x > 0, hi, np.where(x < 0, lo, 0))
    right = x >> np.clip(-n, 0, 63)
    return np.where(n < 0, right, np.where(n > width - 1, big, left))


def asr(x, n, width: int) -> np.ndarray:
    """``mli_math_asr_fx``: floor shift; n > width-1 gives -1/0; n < 0 is :func:`asl`."""
    x = i64(x)
    if isinstance(n, (int, np.integer)):
        if n < 0:
            return asl(x, -int(n), width)
        return x >> min(int(n), 63) if n <= width - 1 else np.where(x < 0, -1, 0).astype(_I64)
    n = i64(n)
    return np.where(n < 0, asl(x, -n, width), np.where(n > width - 1, np.where(x < 0, -1, 0),
                                                        x >> np.clip(n, 0, 63)))


def _round_const(n, width: int):
    """MLI's rounding constant ``(T)((one << n) >> 1)`` in the C type: 2^(n-1), except that for width >= 32 and
    n == width-1 the shift reaches the sign bit and the constant is -2^(width-2) (as in numerics.fixed_point)."""
    if isinstance(n, int):
        return -(1 << (width - 2)) if (width >= 32 and n == width - 1) else 1 << (n - 1)
    c = (i64(1) << (n - 1))
    return np.where(n == width - 1, -(1 << (width - 2)), c) if width >= 32 else c


def _rnd_pos(x, n, width: int, mode: str):
    """Rounding right shift for 1 <= n <= width-1 (n scalar or array)."""
    c = _round_const(n, width)
    if mode == "up":
        return add_sat(x, c, width) >> n
    r = x >> n
    return r + (((x & c) != 0) & (((r & 1) != 0) | ((x & (c - 1)) != 0)))


def rnd(x, n, width: int, mode: str) -> np.ndarray:
    """``mli_math_asr_rnd_fx<intW>``: n < 0 -> :func:`asl`; n == 0 -> x; n > width-1 -> 0; else rounded shift."""
    x = i64(x)
    if isinstance(n, (int, np.integer)):
        n = int(n)
        if n < 0:
            return asl(x, -n, width)
        if n == 0:
            return x
        if n > width - 1:
            return np.zeros_like(x)
        return _rnd_pos(x, n, width, mode)
    n = i64(n)
    nc = np.clip(n, 1, width - 1)
    pos = _rnd_pos(x, nc, width, mode)
    return np.where(n < 0, asl(x, -n, width), np.where(n == 0, x, np.where(n > width - 1, 0, pos)))


def rnd_nosat(x, n: int, mode: str) -> np.ndarray:
    """:func:`rnd` for a Python int 1 <= n <= 62 when the caller guarantees |x| <= 2^62 (so the ROUND_UP add
    cannot saturate): equal to ``rnd(x, n, 64, mode)`` with fewer passes."""
    if mode == "up":
        return (x + (1 << (n - 1))) >> n
    r = x >> n
    low = x & ((1 << n) - 1)
    half = 1 << (n - 1)
    return r + ((low > half) | ((low == half) & ((r & 1) == 1)))


def bitlen(x) -> np.ndarray:
    """Number of significant bits of non-negative int64 values (exact, no float rounding)."""
    x = i64(x)
    out = np.zeros(x.shape, _I64)
    v = x.copy()
    for s in (32, 16, 8, 4, 2, 1):
        m = v >= (i64(1) << s)
        out += np.where(m, s, 0)
        v = np.where(m, v >> s, v)
    return out + (v > 0)


def norm(x, width: int) -> np.ndarray:
    """``mli_math_norm_fx``: redundant sign bits of a ``width``-bit value; 0 -> width-1."""
    x = i64(x)
    m = np.where(x < 0, ~x, x)
    return np.where(x == 0, width - 1, width - 1 - bitlen(m))


def cdiv(a, b) -> np.ndarray:
    """C integer division (truncation toward zero)."""
    a, b = i64(a), i64(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)




def int_matrix(b, a_absmax: int):
    """A prepared exact integer right operand (``numerics.int_matmul.IntMatrix``): ``.matmul(a) -> int64``,
    ``.column_sums``."""
    return IntMatrix(np.ascontiguousarray(b), a_absmax=int(a_absmax))
