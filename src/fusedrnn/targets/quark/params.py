"""The kernel's derived constants (quark.md section 3, step 2): scale mantissas, shifts, per-channel offsets.

``S = 2^24`` is the fixed-point scale of the gate accumulators. Values primed in quark.md (int16 domain,
q - 32768) are plain int64 here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedFeatureError
from ...numerics import core
from .fixed import c_one_shl, ceil_log2, fix_corrected, fix_faithful, round_half_away, round_int_c, round_short_c

S = float(2**24)
CORRECTED_MANTISSA_BITS = 30  # corrected mode: scale mantissas of 30 bits (the kernel's 16 cost up to ~2 LSB)
CORRECTED_OUTPUT_BITS = 31  # corrected mode: the output multiplier ohs in (2^30, 2^31]
MAX_SHIFT = 32  # faithful: ``1 << (shift - 1)`` is computed in int; shift 33+ is undefined behaviour


@dataclass(frozen=True)
class Scales:
    """Per-tensor quantisation parameters as the kernel holds them: float32 scales, uint16 zero points."""

    x_scale: np.float32
    x_zero_point: int
    w_scale: np.float32
    w_zero_point: int
    r_scale: np.float32
    r_zero_point: int
    b_scale: np.float32
    b_zero_point: int
    y_scale: np.float32
    y_zero_point: int


@dataclass(frozen=True)
class KernelParams:
    """Everything ``get_params`` derives. qc is int64 [D, 4H]; shifts are ints; mantissas signed ints."""

    qx: int
    qh: int
    qa: int
    qb: int
    qc: np.ndarray
    ohs: int
    ohz: int
    xw: int
    xwq: int
    hr: int
    hrq: int
    xss: int
    hss: int
    oh: int


def _ub(what: str, detail: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        f"{what}: {detail}; Quark's kernel has undefined behaviour here (quark.md section 4, defect 7), so "
        f"mode='faithful' cannot reproduce it; use mode='corrected' or less extreme scales")


def _uchar_shift(value: int, what: str) -> int:
    """A shift the kernel stores in ``unsigned char`` and then uses in ``1 << (shift - 1)``."""
    if not 0 <= value <= MAX_SHIFT:
        raise _ub(what, f"shift {value} outside [0, {MAX_SHIFT}]")
    return value


def _fix(v: float, what: str, faithful: bool) -> tuple[int, int]:
    if not faithful:
        return fix_corrected(v, CORRECTED_MANTISSA_BITS)
    try:
        a, m = fix_faithful(v)
    except ValueError:
        raise _ub(what, f"the value {v!r} needs a mantissa exponent outside [0, 31]") from None
    return a, m


def kernel_params(sc: Scales, w_sums: np.ndarray, r_sums: np.ndarray, bx: np.ndarray, bh: np.ndarray,
                  input_size: int, hidden_size: int, *, faithful: bool) -> KernelParams:
    """The kernel's constants.

    w_sums [D, 4H] = sum_j W'[d, k, j], r_sums [D, 4H] = sum_j R'[d, k, j], bx, bh [D, 4H] the int16-domain
    biases (all int64). ``faithful`` reproduces the kernel's arithmetic with defects 1, 3, 4 and 6; otherwise
    mantissas are exact ([2^14, 2^15)), ``ohs`` may be 2^16, y's zero point is exact and rounding is correct.
    """
    xzp, wzp = float(sc.x_zero_point - 32768), float(sc.w_zero_point - 32768)
    rzp, bzp, yzp = float(sc.r_zero_point - 32768), float(sc.b_zero_point - 32768), float(sc.y_zero_point - 32768)
    qxf = float(np.float32(sc.x_scale) * np.float32(sc.w_scale)) * S  # float * float -> float, then double
    qhf = float(np.float32(sc.y_scale) * np.float32(sc.r_scale)) * S
    qaf = qxf * wzp
    qbf = qhf * rzp
    if faithful:
        xw = int(math.ceil(math.log2(input_size)))
        hr = int(math.ceil(math.log2(hidden_size)))
    else:
        xw = (input_size - 1).bit_length()
        hr = (hidden_size - 1).bit_length()
    ax, qx = _fix(qxf, "x_scale * w_scale", faithful)
    ah, qh = _fix(qhf, "y_scale * r_scale", faithful)
    xss, qa = _fix(qaf, "x_scale * w_scale * (w_zero_point - 32768)", faithful)
    hss, qb = _fix(qbf, "y_scale * r_scale * (r_zero_point - 32768)", faithful)
    xwq, hrq = ax - xw, ah - hr
    if faithful:
        xwq = _uchar_shift(xwq, "x_scale * w_scale")
        hrq = _uchar_shift(hrq, "y_scale * r_scale")
        xss = _uchar_shift(xss, "x_scale * w_scale * (w_zero_point - 32768)")
        hss = _uchar_shift(hss, "y_scale * r_scale * (r_zero_point - 32768)")
    else:
        for value, what in ((xwq, "x_scale * w_scale"), (hrq, "y_scale * r_scale"),
                            (xss, "x_scale * w_scale * (w_zero_point - 32768)"),
                            (hss, "y_scale * r_scale * (r_zero_point - 32768)")):
            if not 0 <= value <= 62:
                raise UnsupportedFeatureError(f"{what}: scale product too large or too small for the kernel's "
                                              f"2^24 fixed point (shift {value} outside [0, 62])")

    # per-channel offsets, the double operations in the kernel's order
    q_cc = float(input_size) * qaf * xzp
    q_cc += float(hidden_size) * qbf * yzp
    qc = q_cc - (qxf * xzp) * w_sums.astype(np.float64)
    qc = qc - (qhf * yzp) * r_sums.astype(np.float64)
    qc = qc + (float(np.float32(sc.b_scale)) * S) * ((bx.astype(np.float64) + bh.astype(np.float64)) - 2.0 * bzp)
    if not np.all(np.abs(qc) < 2.0**62):
        raise UnsupportedFeatureError("b_scale: the bias and zero-point terms overflow the kernel's accumulator")
    qc = round_int_c(qc) if faithful else round_half_away(qc)

    qo = 1.0 / float(np.float32(sc.y_scale))
    a2 = 16 - int(ceil_log2(qo))
    if faithful:
        if not -31 <= a2 <= 31:
            raise _ub("y_scale", f"output mantissa exponent {a2} outside [-31, 31]")
        s = float(c_one_shl(a2)) if a2 >= 0 else 1.0 / float(c_one_shl(-a2))
        ohs = round_short_c(s * qo) & 0xFFFF  # unsigned short: 2^16 saturates to 65535 (defect 1)
        ohz = int(core.wrap(math.trunc(yzp + 1e-9), 16))  # a short; truncation: +1 for yzp < 0 (defect 3)
        oh = _uchar_shift(24 + a2, "y_scale")
    else:
        a2 += CORRECTED_OUTPUT_BITS - 16
        ohs = int(round_half_away(np.float64(math.ldexp(qo, a2))))
        ohz = int(yzp)
        oh = 24 + a2
        if not 0 <= oh <= 62:
            raise UnsupportedFeatureError(f"y_scale: {float(sc.y_scale)!r} is outside the kernel's range "
                                          f"(output shift {oh} outside [0, 62])")
    return KernelParams(qx=qx, qh=qh, qa=qa, qb=qb, qc=qc, ohs=ohs, ohz=ohz, xw=xw, xwq=xwq, hr=hr, hrq=hrq,
                        xss=xss, hss=hss, oh=oh)
