"""The 8x8_16 kernel's activation tables: the int16 gemmlowp logistic / tanh of every int16 input, looked up
(exact by construction: a table is the reference function of :mod:`fusedrnn.numerics.gemmlowp` evaluated at every
input). The integer primitives (``MultiplyByQuantizedMultiplier`` prepared as ``Requant``, RoundingDivideByPOT,
wraps, C division) are the unchecked cores of :mod:`fusedrnn.numerics.core`.

* :func:`activation_lut` — 65536 entries, indexed by the raw int16 value;
* :func:`saturating_lut` — the same over the sum of two saturated int16 terms, saturating on the way;
* :func:`apply_lut` — the look-up.
"""

from __future__ import annotations

import functools

import numpy as np

from ...numerics import gemmlowp


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
