"""The integer dense arithmetic shared by fully_connected, rnn_dense and the cells (spec mli.md §2.2, §2.3,
§2.6), vectorised over leading (batch, gate) axes; exact dot products through the numerics core's integer GEMM.

Flavours: ``fx16`` (int16 data/weights/bias, 64-bit accumulator that never wraps), ``fx16_fx8_fx8`` (int16 data,
int8 weights and bias, int32 wrapping accumulator), ``fx8`` (int8 everything, int32), ``sa8`` (int8 asymmetric
data, int8 symmetric weights, int32 bias, int32 wrapping accumulator, multiplier + shift requantization).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _arith as A

ACC_WIDTH = {"fx16": 64, "fx16_fx8_fx8": 32, "fx8": 32, "sa8": 32}
"""The accumulator's width: MACs wrap at it (``wrap(acc, 64)`` is the exact 64-bit accumulator of fx16)."""
IO_BITS = {"fx16": 16, "fx16_fx8_fx8": 16, "fx8": 8, "sa8": 8}


@dataclass
class Pair:
    """Requantization of one (input, weights) pair towards an output (or IR) format.

    fx: ``shift`` = f_in + f_w - f_out, ``bias_shift`` = f_in + f_w - f_b. sa8: ``out_mul``/``out_shift``
    (int64, broadcastable over output columns or gates), ``zp_in`` the input zero point."""

    flavor: str
    shift: int = 0
    bias_shift: int = 0
    out_mul: np.ndarray | int = 0
    out_shift: np.ndarray | int = 0
    zp_in: int = 0
    blocks: int = 0  # > 0: out_mul/out_shift hold one value per block of columns (per gate), not per column


def fx_pair(flavor: str, f_in: int, f_w: int, f_out: int, f_b: int = 0) -> Pair:
    return Pair(flavor, shift=f_in + f_w - f_out, bias_shift=f_in + f_w - f_b)


def sa8_pair(p_in: tuple, s_w, f_w, p_out: tuple, full_accu: bool, mode: str) -> Pair:
    """``define_quant_params`` + ``adjust_quant_params`` (§2.3) for scale mantissas ``s_w`` and frac bits
    ``f_w`` (scalars or arrays over weight channels); p = (scale, zero_point, scale_frac_bits)."""
    s_in, z_in, sfb_in = p_in
    s_out, _, sfb_out = p_out
    n_in = int(A.norm(s_in, 32))
    su = int(A.cdiv(s_in << n_in, s_out))
    n2 = int(A.norm(su, 32))
    ratio = int(A.sat(A.rnd(su, 16 - n2, 32, mode), 16))
    sh0 = sfb_in + n_in - sfb_out - (16 - n2)
    out_mul = ratio * A.i64(s_w)
    out_shift = sh0 + A.i64(f_w)
    if not full_accu:
        m = A.norm(out_mul, 32)
        out_mul = out_mul << m
        out_shift = out_shift + m
    return Pair("sa8", out_mul=_scalarize(out_mul), out_shift=_scalarize(out_shift), zp_in=int(z_in))


def _scalarize(a):
    a = A.i64(a)
    if a.ndim == 0 or (a.size and np.all(a == a.flat[0])):
        return int(a.flat[0])
    return a


def sa32_bias(b, full_accu: bool) -> np.ndarray:
    """The sa32 bias as added: with FULL_ACCU=OFF only its top 16 significant bits survive (floor)."""
    b = A.i64(b)
    if full_accu:
        return b
    k = np.maximum(16 - A.norm(b, 32), 0)
    return A.asl(b >> k, k, 32)


def bias_term(b, pair: Pair, full_accu: bool, mode: str) -> np.ndarray:
    """The value the bias contributes to the accumulator (§2.2, §2.3)."""
    f = pair.flavor
    if f == "sa8":
        return sa32_bias(b, full_accu)
    if f == "fx16":  # (int64)(int32) rnd64(b, -bias_shift): truncated through int32
        return A.wrap(A.rnd(b, -pair.bias_shift, 64, mode), 32)
    return A.rnd(b, -pair.bias_shift, 32, mode)


def dot(x, mat, pair: Pair) -> np.ndarray:
    """Σ x·W (exact) minus the input zero-point term zp_in·Σ_j W[j] for sa8; int64, not yet wrapped."""
    acc = mat.matmul(x)
    if pair.flavor == "sa8" and pair.zp_in:
        acc = acc - pair.zp_in * mat.column_sums
    return acc


def requant_partial(acc, pair: Pair, mode: str) -> np.ndarray:
    """r_i of §2.6 (the per-input requantization to the output scale, before the saturating sum)."""
    f = pair.flavor
    if f == "fx16":
        return A.rnd(acc, min(pair.shift, 39), 64, mode)
    if f == "sa8":
        if pair.blocks:  # one (multiplier, shift) per gate block
            n = pair.blocks
            w = acc.shape[-1] // n
            r = np.empty(acc.shape, np.int64)
            for g in range(n):
                sl = slice(g * w, (g + 1) * w)
                r[..., sl] = _sa8_scale(acc[..., sl], int(pair.out_mul[g]), int(pair.out_shift[g]), mode)
            return A.sat(r, 32)
        if isinstance(pair.out_mul, int) and isinstance(pair.out_shift, int):
            return A.sat(_sa8_scale(acc, pair.out_mul, pair.out_shift, mode), 32)
        return A.sat(A.rnd(acc * pair.out_mul, np.minimum(pair.out_shift, 63), 64, mode), 32)
    return A.rnd(acc, pair.shift, 32, mode)


def _sa8_scale(acc, mul: int, shift: int, mode: str) -> np.ndarray:
    """rnd64(acc·mul, min(shift, 63)) for an int32-range accumulator; |acc·mul| <= 2^62 since |mul| <= 2^31,
    so for 1 <= shift <= 62 the rounding add cannot saturate."""
    if 1 <= shift <= 62 and abs(mul) <= 2**31:
        return A.rnd_nosat(A.i64(acc) * mul, shift, mode)
    return A.rnd(A.i64(acc) * mul, min(shift, 63), 64, mode)


def finish(R, flavor: str, zp_out: int = 0) -> np.ndarray:
    """rnn_dense output: fx sat16(R) (sat8 for fx8); sa8 sat8(sat16(sat16(R) + zp_out))."""
    if flavor == "sa8":
        return A.sat(A.sat(A.sat(R, 16) + zp_out, 16), 8)
    return A.sat(R, IO_BITS[flavor])


def rnn_dense(xs, mats, pairs, b, flavor: str, full_accu: bool, mode: str, zp_out: int = 0) -> np.ndarray:
    """``rnn_dense_op``: bias once with pair 0, each input requantized separately, saturating sum (§2.6).
    ``xs`` / ``mats`` / ``pairs`` per input (``mats`` prepared integer GEMM operands)."""
    R = None
    for i, (x, mat, pair) in enumerate(zip(xs, mats, pairs, strict=True)):
        acc = dot(x, mat, pair)
        if i == 0:
            acc = acc + bias_term(b, pair, full_accu, mode)
        r = requant_partial(A.wrap(acc, ACC_WIDTH[flavor]), pair, mode)
        R = r if R is None else A.add_sat(R, r, 64 if flavor == "fx16" else 32)
    return finish(R, flavor, zp_out)


def first_partial(x, mat, pair: Pair, b, flavor: str, full_accu: bool, mode: str) -> np.ndarray:
    """r_0 of :func:`rnn_dense` (input 0 with the bias), for precomputing the input projection of a sequence."""
    acc = dot(x, mat, pair) + bias_term(b, pair, full_accu, mode)
    return requant_partial(A.wrap(acc, ACC_WIDTH[flavor]), pair, mode)


def fc_result(acc, pair: Pair, flavor: str, full_accu: bool, mode: str, zp_out: int = 0) -> np.ndarray:
    """fully_connected ``result_cast`` (§2.2, §2.3) of the biased accumulator (before the ReLU clamp)."""
    if flavor == "fx16":
        return A.sat(A.rnd(acc, pair.shift, 64, mode), 16)
    if flavor in ("fx16_fx8_fx8", "fx8"):
        return A.sat(A.rnd(acc, pair.shift, 32, mode), IO_BITS[flavor])
    if full_accu:
        v = A.sat(A.rnd(acc * pair.out_mul, np.minimum(pair.out_shift, 63), 64, mode), 16)
    else:
        mul16 = A.rnd(pair.out_mul, 16, 32, mode)
        sh = A.i64(pair.out_shift) - 16
        pre = np.clip(sh - 21, 0, 8)
        a = A.sat(A.rnd(acc, pre, 32, mode), 16)
        v = A.sat(A.rnd(a * mul16, np.minimum(sh - pre, 63), 64, mode), 16)
    return A.sat(A.sat(v + zp_out, 16), 8)


def fc_bias_add(acc, b, pair: Pair, flavor: str, full_accu: bool, mode: str) -> np.ndarray:
    """FC adds the bias last, with saturation at the accumulator width."""
    return A.add_sat(acc, bias_term(b, pair, full_accu, mode), ACC_WIDTH[flavor])


def relu_limits(relu: int, bits: int, zero: int, scale: int, shift: int) -> tuple[int, int]:
    """``mli_prv_get_relu_limits`` (§2.4): relu 0 NONE, 1 GEN, 2 RELU_1, 3 RELU_6; fx: zero 0, scale 1,
    shift = frac bits."""
    lo, hi = A.lim(bits)
    if relu == 1:
        return max(zero, lo), hi
    if relu == 3:
        if shift >= 0:
            six = int(A.cdiv(6 << shift, scale)) if shift < 28 else hi
        else:
            six = int(A.cdiv(6 >> -shift, scale)) if shift > -3 else 0
        return max(zero, lo), min(six + zero, hi)
    if relu == 2:
        one = (int(A.cdiv(1 << shift, scale)) if shift < 30 else hi) if shift >= 0 else 0
        return max(-one + zero, lo), min(one + zero, hi)
    return lo, hi
