"""Element-wise MUL / ADD / SUB as the MLI 2.0 cells use them (spec mli.md §2.5): the output keeps the
quantization the caller gives it; every op requantizes and saturates. Vectorised, int64 arrays in and out."""

from __future__ import annotations

import functools

import numpy as np

from . import _arith as A

# ---- fx16 --------------------------------------------------------------------------------------------------


def fx16_mul(x1, f1: int, x2, f2: int, fo: int, mode: str) -> np.ndarray:
    """y = sat16(rnd64(x1·x2, min(f1 + f2 - fo, 31)))."""
    return A.sat(A.rnd(A.i64(x1) * A.i64(x2), min(f1 + f2 - fo, 31), 64, mode), 16)


def fx16_addsub(x1, f1: int, x2, f2: int, fo: int, mode: str, sub: bool = False) -> np.ndarray:
    """Align to the larger frac (saturating left shift in 32 bits), add/sub with 32-bit saturation, then
    y = sat16(rnd64(., min(max(f1, f2) - fo, 31)))."""
    a = A.rnd(x1, min(f1 - f2, 0), 32, mode)
    b = A.rnd(x2, min(f2 - f1, 0), 32, mode)
    s = A.sat(a - b if sub else a + b, 32)
    return A.sat(A.rnd(s, min(max(f1, f2) - fo, 31), 64, mode), 16)


# ---- sa8 ---------------------------------------------------------------------------------------------------


def _scale_ratio(s: int, f: int, so: int, fo: int, max_shift: int, mode: str) -> tuple[int, int]:
    """(m16, shift): s·2^-f / (so·2^-fo) as a 16-bit multiplier m16 and a right shift, m16 normalised then rounded
    down as far as the shift must come into [-31, max_shift]."""
    n = int(A.norm(s, 32))
    q = int(A.cdiv(s << n, so))
    shift = f - fo + n
    n2 = int(A.norm(q, 32))
    m16 = int(A.sat(A.rnd(q, 16 - n2, 32, mode), 16))
    shift -= 16 - n2
    k = max(shift - max_shift, 0) + min(31 + shift, 0)
    return int(A.rnd(m16, k, 16, mode)), shift - k


def sa8_mul_params(s1: int, f1: int, s2: int, f2: int, so: int, fo: int, mode: str) -> tuple[int, int]:
    """(m16, post): the output multiplier and shift of an sa8 MUL (the product scale over the output's)."""
    return _scale_ratio(s1 * s2, f1 + f2, so, fo, 31, mode)


def sa8_mul(x1, p1: tuple, x2, p2: tuple, po: tuple, mode: str) -> np.ndarray:
    """sa8 MUL; p = (scale, zero_point, scale_frac_bits) per tensor."""
    s1, z1, f1 = p1
    s2, z2, f2 = p2
    so, zo, fo = po
    m16, post = sa8_mul_params(s1, f1, s2, f2, so, fo, mode)
    p = A.sat(A.i64(x1) - z1, 16) * A.sat(A.i64(x2) - z2, 16)
    pre = min(max(post - 21, 0), 3)
    p16 = A.sat(A.rnd(p, pre, 32, mode), 16)
    t = A.sat(A.rnd(p16 * m16, post - pre, 32, mode), 16)
    return A.sat(A.sat(t + zo, 16), 8)


def sa8_add_params(s: int, f: int, so: int, fo: int, mode: str) -> tuple[int, int]:
    """(m, pre) of one ADD/SUB operand (its scale over the output's)."""
    return _scale_ratio(s, f, so, fo, 23, mode)


def sa8_addsub(x1, p1: tuple, x2, p2: tuple, po: tuple, mode: str, sub: bool = False) -> np.ndarray:
    """sa8 ADD / SUB: each operand rescaled to the output separately, then summed with saturation."""
    s1, z1, f1 = p1
    s2, z2, f2 = p2
    so, zo, fo = po
    m1, pre1 = sa8_add_params(s1, f1, so, fo, mode)
    m2, pre2 = sa8_add_params(s2, f2, so, fo, mode)
    v1 = A.rnd(A.sat(A.i64(x1) - z1, 16) * m1, pre1, 32, mode)
    v2 = A.rnd(A.sat(A.i64(x2) - z2, 16) * m2, pre2, 32, mode)
    s = A.sat(A.sat(v1 - v2 if sub else v1 + v2, 32), 16)
    return A.sat(A.sat(s + zo, 16), 8)


# ---- precomputed tables (exact: the functions above evaluated on every int8 operand pair) ---------------------
@functools.lru_cache(maxsize=256)
def _sa8_table(op: str, p1: tuple, p2: tuple, po: tuple, mode: str) -> np.ndarray:
    a = np.repeat(np.arange(-128, 128, dtype=np.int64), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int64), 256)
    if op == "mul":
        t = sa8_mul(a, p1, b, p2, po, mode)
    else:
        t = sa8_addsub(a, p1, b, p2, po, mode, op == "sub")
    t = t.astype(np.int16)  # int8 / int16 values: a small table stays in cache
    t.flags.writeable = False
    return t


def sa8_fast_params(op: str, p1: tuple, p2: tuple, po: tuple, mode: str) -> tuple | None:
    """Cached :func:`_sa8_fast_params` (p = (scale, zero_point, scale_frac_bits) per tensor)."""
    return _sa8_fast_params(op, tuple(map(int, p1)), tuple(map(int, p2)), tuple(map(int, po)), mode)


@functools.lru_cache(maxsize=256)
def _sa8_fast_params(op: str, p1: tuple, p2: tuple, po: tuple, mode: str) -> tuple | None:
    """The compiled kernel's direct evaluation of an sa8 MUL / ADD / SUB (``ew_t`` in _kernel.c): (kind, z1, z2,
    zo, m1, m2, s1, s2), or None where a shift could saturate (then the kernel reads the table). MUL: m1 = m16,
    s1 = the pre-shift, s2 = post - pre, valid for 1 <= s2 <= 30; ADD/SUB: (m_i, s_i) per operand, valid for
    0 <= s_i <= 30. In these ranges every product fits int32 and no rounding add saturates."""
    s1, z1, f1 = p1
    s2, z2, f2 = p2
    so, zo, fo = po
    if op == "mul":
        m16, post = sa8_mul_params(s1, f1, s2, f2, so, fo, mode)
        pre = min(max(post - 21, 0), 3)
        if not 1 <= post - pre <= 30:
            return None
        return 0, z1, z2, zo, m16, 0, pre, post - pre
    m1, pre1 = sa8_add_params(s1, f1, so, fo, mode)
    m2, pre2 = sa8_add_params(s2, f2, so, fo, mode)
    if not (0 <= pre1 <= 30 and 0 <= pre2 <= 30):
        return None
    return 1 if op == "add" else 2, z1, z2, zo, m1, m2, pre1, pre2


def sa8_binary(op: str, x1, p1: tuple, x2, p2: tuple, po: tuple, mode: str) -> np.ndarray:
    """``sa8_mul`` / ``sa8_addsub`` through a 64K-entry table of all int8 operand pairs (one gather)."""
    t = _sa8_table(op, tuple(map(int, p1)), tuple(map(int, p2)), tuple(map(int, po)), mode)
    return t[((A.i64(x1) + 128) << 8) + (A.i64(x2) + 128)]
