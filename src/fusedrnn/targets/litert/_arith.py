"""Hot-loop integer helpers of the 8x8_16 kernel, specialised from :mod:`fusedrnn.numerics.gemmlowp` (which
validates every argument and is the reference these are tested against).

* :class:`Requant` — ``MultiplyByQuantizedMultiplier`` with fixed per-column (Q, shift), prepared once; no
  argument checks, int64 in and out.
* :func:`rdpot_const` — gemmlowp ``RoundingDivideByPOT`` by a constant exponent.
* :func:`activation_lut` — the int16 gemmlowp logistic / tanh of every int16 input as a 65536-entry table
  (exact by construction: the table is the reference function evaluated at every input).

All functions take and return int64 arrays holding the C++ int16/int32 values.
"""

from __future__ import annotations

import functools

import numpy as np

from ...numerics import gemmlowp

_I32 = 1 << 32


def wrap32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (C++ int32 arithmetic), as int64."""
    return ((x + (1 << 31)) & (_I32 - 1)) - (1 << 31)


def wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def rdpot_const(x: np.ndarray, e: int) -> np.ndarray:
    """RoundingDivideByPOT(x, e) for a constant e >= 0: x / 2^e rounded to nearest, ties away from zero.
    (x + 2^(e-1) - [x < 0]) >> e, the floor form of gemmlowp's mask/threshold formulation."""
    if e == 0:
        return x
    return (x + ((1 << (e - 1)) - (x < 0))) >> e


class Requant:
    """``MultiplyByQuantizedMultiplier(x, Q, shift)`` for fixed (Q, shift) broadcast over the last axis.

    ``rounding="double"`` (the pip wheels): RDPOT(SRDHM32(wrap32(x << left), Q), right);
    ``"single"`` (TFLITE_SINGLE_ROUNDING): (x·Q + 2^(30-shift)) >> (31-shift). x holds int32 values in int64."""

    def __init__(self, Q, shift, rounding: str = "double"):  # noqa: N803
        Q = np.asarray(Q, np.int64)
        shift = np.asarray(shift, np.int64)
        Q, shift = np.broadcast_arrays(Q, shift)
        self.rounding = rounding
        self.Q = np.ascontiguousarray(Q)
        self.one_pass = False
        if rounding == "single":
            total = 31 - shift
            self.total = np.ascontiguousarray(total)
            self.nudge = np.ascontiguousarray(np.int64(1) << (total - 1))
            return
        left = np.maximum(shift, 0)
        right = np.maximum(-shift, 0)
        self.left = None if not left.any() else np.ascontiguousarray(left)
        self.right = np.ascontiguousarray(right)
        self.r_nudge = np.ascontiguousarray(np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0))
        self.r_pos = np.ascontiguousarray((right > 0).astype(np.int64))
        # SRDHM32 saturates only for a = b = INT32_MIN; Q is never INT32_MIN for a positive multiplier
        self.q_min = bool((self.Q == -(1 << 31)).any())

        # one-pass form of the double rounding, used by ``inplace`` when no left shift is needed:
        # RDPOT(SRDHM(x, Q), r) = (x·Q + N − C·[x·Q < −2^30]) >> (31 + r) with N = 2^30 + [r > 0]·2^(30+r) and
        # C = [r > 0]·2^31 (floor(floor(a/m) + k)/n) = floor((a + k·m)/(m·n)) applied to both roundings; the
        # bracket is the sign of the SRDHM result). No int64 overflow: |x·Q| <= 2^62, N <= 2^30 + 2^61.
        self.n2 = np.ascontiguousarray(np.where(right > 0, np.int64(1) << (30 + right), 0))  # N - 2^30
        self.corr = np.ascontiguousarray(np.where(right > 0, np.int64(1) << 31, 0))
        self.total_shift = np.ascontiguousarray(31 + right)
        self.one_pass = self.left is None and not self.q_min

    def with_bias(self, bias: np.ndarray) -> np.ndarray:
        """The per-column constant ``bias·Q + 2^30`` for :meth:`inplace` (MBQM(x + bias) with the bias folded in;
        exact in int64 while |x + bias| < 2^31)."""
        return np.ascontiguousarray(np.asarray(bias, np.int64) * self.Q + (1 << 30))

    def inplace(self, acc: np.ndarray, scratch: np.ndarray, bias_q: np.ndarray | None = None,
                bias: np.ndarray | None = None) -> np.ndarray:
        """``acc = self(acc + bias)`` in place (``scratch``: an int64 array of acc's shape; ``bias_q`` =
        ``with_bias(bias)``, ``bias`` itself for the general path); returns acc."""
        if self.rounding == "single" or not self.one_pass:
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
            return wrap32((x * self.Q + self.nudge) >> self.total)
        if self.left is not None:
            x = wrap32(x << self.left)
        p = x * self.Q
        if self.q_min:
            sat = (x == -(1 << 31)) & (self.Q == -(1 << 31))
            p = np.where(sat, 0, p)
        p += 1 << 30
        p >>= 31  # SRDHM32: (a·b + 2^30) >> 31 equals gemmlowp's nudge-and-truncate (ties away from zero)
        if self.q_min:
            p = np.where(sat, (1 << 31) - 1, p)
        p += self.r_nudge - ((p < 0) * self.r_pos)
        p >>= self.right
        return p


@functools.cache
def activation_lut(kind: str, integer_bits: int) -> np.ndarray:
    """int64[65536]: gemmlowp ``logistic``/``tanh`` (raw int16 input in F(integer_bits) -> Q0.15) at every int16
    input, stored at index ``raw mod 65536`` (so NumPy's negative indexing looks a raw int16 value up directly)."""
    a = np.arange(-32768, 32768, dtype=np.int64)
    fn = gemmlowp.logistic if kind == "logistic" else gemmlowp.tanh
    lut = np.roll(np.asarray(fn(a, integer_bits), dtype=np.int64), 32768)
    lut.flags.writeable = False
    return lut


@functools.cache
def saturating_lut(kind: str, integer_bits: int) -> np.ndarray:
    """int32[131072]: the activation of ``clamp(v, -32768, 32767)`` for every v in [-65536, 65535] (the sum of two
    saturated int16 terms), stored at ``v mod 131072``: the look-up also performs the int16 saturation. int32
    keeps the table small (cache) and products of two table values exact (< 2^30)."""
    base = np.roll(activation_lut(kind, integer_bits), -32768)  # index v + 32768
    v = np.arange(-65536, 65536)
    lut = np.roll(base[np.clip(v, -32768, 32767) + 32768], 65536).astype(np.int32)
    lut.flags.writeable = False
    return lut


def apply_lut(lut: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The table value of every int16-valued x (int64 array in -32768..32767); ``mode="wrap"`` reads negative
    values at ``x mod 65536`` (and is faster than fancy indexing)."""
    return np.take(lut, x, mode="wrap")


def trunc_div(x: np.ndarray, d: int) -> np.ndarray:
    """C++ integer division x / d (truncation toward zero), d > 0."""
    q = np.abs(x) // d
    return np.where(x < 0, -q, q)
