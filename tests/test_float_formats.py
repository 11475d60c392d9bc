"""float16 / bfloat16 storage formats (``fusedrnn.numerics.float_formats``) against outside oracles.

Oracles: (a) a slow scalar reference written here with ``fractions.Fraction`` (IEEE round to nearest even with
subnormals and overflow to ±inf; codes built from sign, exponent and fraction) and (b) NumPy's float16 and
ml_dtypes' bfloat16 casts. Inputs: hypothesis over raw float32 / float64 bit patterns, exact halfway points of the
target format and their float neighbours, subnormals, the overflow edge, ±Inf, NaN and ±0; all 65536 codes for
the decoders. NaN is compared by NaN-ness and sign only (the payload is NumPy's / ml_dtypes' business).
bfloat16 from float64 rounds to float32 first, as ml_dtypes does; the reference does the same two roundings.
(DLFLOAT16 rounding, ``round_to_dlfloat16``, is tested in test_dlfloat16.py.)
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.errors import AttributeValueError, DTypeError
from fusedrnn.numerics.float_formats import (
    decode_bfloat16,
    decode_float16,
    encode_bfloat16,
    encode_float16,
    round_to_bfloat16,
    round_to_float16,
)

SETTINGS = settings(max_examples=120, deadline=None)
ALL_CODES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)

# ---------------------------------------------------------------------------------------------------------------
# slow scalar reference


@cache
def pow2(e: int) -> Fraction:
    return Fraction(2) ** e


def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while pow2(e) > a:
        e -= 1
    while pow2(e + 1) <= a:
        e += 1
    return e


class Fmt:
    def __init__(self, exp_bits: int, frac_bits: int):
        self.exp_bits, self.frac_bits = exp_bits, frac_bits
        self.bias = (1 << (exp_bits - 1)) - 1
        self.emin, self.emax = 1 - self.bias, self.bias
        self.max_finite = (2 - pow2(-frac_bits)) * pow2(self.emax)

    def round(self, a):
        """RNE of a magnitude (Fraction, 'inf' or 'nan') to the format: Fraction, 'inf' or 'nan'."""
        if not isinstance(a, Fraction) or a == 0:
            return a
        q = pow2(max(floor_log2(a), self.emin) - self.frac_bits)
        n = a / q
        fl = math.floor(n)
        rem = n - fl
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
            fl += 1
        r = fl * q
        return "inf" if r > self.max_finite else r

    def code(self, sign: int, r) -> int | None:
        """Code of a representable magnitude (None for NaN)."""
        s = sign << (self.exp_bits + self.frac_bits)
        if r == "nan":
            return None
        if r == "inf":
            return s | (((1 << self.exp_bits) - 1) << self.frac_bits)
        if r == 0:
            return s
        e = floor_log2(r)
        if e < self.emin:
            f = r / pow2(self.emin - self.frac_bits)
            assert f.denominator == 1
            return s | int(f)
        f = r / pow2(e - self.frac_bits) - (1 << self.frac_bits)
        assert f.denominator == 1
        return s | ((e + self.bias) << self.frac_bits) | int(f)

    def parts(self, code: int):
        """(sign, magnitude Fraction / 'inf' / 'nan') of a code."""
        s = code >> (self.exp_bits + self.frac_bits)
        e = (code >> self.frac_bits) & ((1 << self.exp_bits) - 1)
        f = code & ((1 << self.frac_bits) - 1)
        if e == (1 << self.exp_bits) - 1:
            return s, ("inf" if f == 0 else "nan")
        if e == 0:
            return s, f * pow2(self.emin - self.frac_bits)
        return s, pow2(e - self.bias) * (1 + Fraction(f, 1 << self.frac_bits))


FP16, BF16, FP32 = Fmt(5, 10), Fmt(8, 7), Fmt(8, 23)


def float_parts(x: float):
    sign = 1 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign, "nan"
    if math.isinf(x):
        return sign, "inf"
    return sign, abs(Fraction(x))


def ref_encode(x: np.ndarray, fmt: Fmt, *, via_fp32: bool = False) -> list:
    """Reference codes (None = NaN) of every element of ``x``."""
    out = []
    for v in x.ravel().tolist():
        s, a = float_parts(v)
        if via_fp32:
            a = FP32.round(a)
        out.append((s, fmt.code(s, fmt.round(a))))
    return out


def assert_codes(got: np.ndarray, ref: list, fmt: Fmt) -> None:
    """uint16 codes against (sign, code | None) pairs; a None reference needs a NaN code of that sign."""
    assert got.dtype == np.uint16
    sign_bit = 1 << (fmt.exp_bits + fmt.frac_bits)
    for g, (s, c) in zip(got.ravel().tolist(), ref, strict=True):
        if c is None:
            assert fmt.parts(g) == (s, "nan"), (hex(g), s)
        else:
            assert g == c, (hex(g), hex(c))
        assert bool(g & sign_bit) == bool(s)


def assert_same_as_library(got_codes: np.ndarray, lib_values: np.ndarray) -> None:
    """Equal to a NumPy / ml_dtypes result bit for bit, except NaN payloads (NaN-ness and sign must agree)."""
    lib = lib_values.view(np.uint16)
    nan = np.isnan(lib_values.astype(np.float32))
    np.testing.assert_array_equal(got_codes[~nan], lib[~nan])
    np.testing.assert_array_equal(np.isnan(got_codes.view(np.float16)) if lib_values.dtype == np.float16 else
                                  np.isnan(got_codes.view(ml_dtypes.bfloat16).astype(np.float32)), nan)
    np.testing.assert_array_equal(got_codes >> 15, lib >> 15)


# ---------------------------------------------------------------------------------------------------------------
# inputs: raw bits, halfway points of the target format and their neighbours, edges


def fp16_ties(dtype):
    """Exact float16 halfway points (incl. subnormal ones and the overflow edge 65520) and their neighbours."""

    def make(k, step, sign):
        lo = FP16.parts(k)[1]
        hi = FP16.parts(k + 1)[1] if k + 1 < 0x7C00 else pow2(16)
        mid = np.array(float((lo + hi) / 2), dtype=dtype)
        v = mid
        for _ in range(abs(step)):
            v = np.nextafter(v, dtype(np.inf) if step > 0 else dtype(0))
        return float(-v if sign else v)

    return st.builds(make, st.integers(0, 0x7BFF), st.integers(-2, 2), st.integers(0, 1))


def bits_strategy(total_bits: int):
    return st.integers(0, (1 << total_bits) - 1)


def as_f32(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def as_f64(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).view(np.float64)


F32_EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 65504.0, 65519.99, 65520.0, 65536.0, 2.0**-24, 2.0**-25,
             2.0**-25 * 3, 2.0**-26, 2.0**-14, 1e-45, 3.4028234663852886e38, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11]
BF16_TIES_F32 = st.builds(lambda c, d: (c << 16) + 0x8000 + d, st.integers(0, 0xFFFF), st.integers(-2, 2)).filter(
    lambda b: 0 <= b < 1 << 32)


# ---------------------------------------------------------------------------------------------------------------
# float16


@SETTINGS
@given(st.lists(st.one_of(bits_strategy(32).map(lambda b: float(as_f32(b))), fp16_ties(np.float32),
                          st.sampled_from(F32_EDGES)), min_size=1, max_size=24))
def test_encode_float16_from_float32(values):
    x = np.array(values, dtype=np.float32)
    got = encode_float16(x)
    assert_codes(got, ref_encode(x, FP16), FP16)
    with np.errstate(over="ignore"):
        assert_same_as_library(got, x.astype(np.float16))


@SETTINGS
@given(st.lists(st.one_of(bits_strategy(64).map(lambda b: float(as_f64(b))), fp16_ties(np.float64),
                          st.sampled_from(F32_EDGES)), min_size=1, max_size=24))
def test_encode_float16_from_float64_rounds_once(values):
    x = np.array(values, dtype=np.float64)
    got = encode_float16(x)
    assert_codes(got, ref_encode(x, FP16), FP16)
    with np.errstate(over="ignore"):
        assert_same_as_library(got, x.astype(np.float16))


def test_float16_edges():
    x = np.array([65519.0, 65520.0, -65520.0, 2.0**-25, 3 * 2.0**-25, 2.0**-26, 1 + 2.0**-11, 1 + 3 * 2.0**-11])
    assert encode_float16(x).tolist() == [0x7BFF, 0x7C00, 0xFC00, 0x0000, 0x0002, 0x0000, 0x3C00, 0x3C02]
    assert encode_float16(np.float16(-2.5)).tolist() == 0xC100
    np.testing.assert_array_equal(encode_float16(np.array([3, -7])), [0x4200, 0xC700])
    assert encode_float16(np.array([1.0], dtype=ml_dtypes.bfloat16)).tolist() == [0x3C00]


def test_decode_float16_all_codes():
    got = decode_float16(ALL_CODES)
    assert got.dtype == np.float32
    for g, c in zip(got.tolist(), range(1 << 16), strict=True):
        s, a = FP16.parts(c)
        assert math.copysign(1, g) == (-1 if s else 1)
        if a == "nan":
            assert math.isnan(g)
        else:
            assert abs(g) == (math.inf if a == "inf" else a)
    np.testing.assert_array_equal(got, ALL_CODES.view(np.float16).astype(np.float32))
    np.testing.assert_array_equal(encode_float16(got)[~np.isnan(got)], ALL_CODES[~np.isnan(got)])


# ---------------------------------------------------------------------------------------------------------------
# bfloat16


@SETTINGS
@given(st.lists(st.one_of(bits_strategy(32), BF16_TIES_F32), min_size=1, max_size=24))
def test_encode_bfloat16_from_float32(bits):
    x = as_f32(bits)
    got = encode_bfloat16(x)
    assert_codes(got, ref_encode(x, BF16), BF16)
    assert_same_as_library(got, x.astype(ml_dtypes.bfloat16))


def bf16_near_ties_f64():
    """float64 values just off a bfloat16 halfway point (float32 rounding lands on the tie) and random bits."""

    def make(c, rel, sign):
        lo, hi = BF16.parts(c)[1], BF16.parts(c + 1)[1]
        v = float((lo + hi) / 2 * (1 + rel * pow2(-30)))
        return -v if sign else v

    return st.builds(make, st.integers(1, 0x7F7E), st.sampled_from([-1, 0, 1]), st.integers(0, 1))


@SETTINGS
@given(st.lists(st.one_of(bits_strategy(64).map(lambda b: float(as_f64(b))), bf16_near_ties_f64()),
                min_size=1, max_size=24))
def test_encode_bfloat16_from_float64_rounds_through_float32(values):
    x = np.array(values, dtype=np.float64)
    got = encode_bfloat16(x)
    assert_codes(got, ref_encode(x, BF16, via_fp32=True), BF16)
    assert_same_as_library(got, x.astype(ml_dtypes.bfloat16))


def test_bfloat16_double_rounding_is_documented_behaviour():
    x = np.array([1 + 2.0**-8 + 2.0**-30])  # above the tie in float64, exactly the tie in float32
    assert encode_bfloat16(x).tolist() == [0x3F80]  # ties-to-even from the float32 value: 1.0
    assert encode_bfloat16(x.astype(np.float32)).tolist() == [0x3F80]
    assert encode_bfloat16(np.array([1 + 2.0**-8 + 2.0**-20])).tolist() == [0x3F81]  # off the tie in float32 too


def test_decode_bfloat16_all_codes():
    got = decode_bfloat16(ALL_CODES)
    assert got.dtype == np.float32
    for g, c in zip(got.tolist(), range(1 << 16), strict=True):
        s, a = BF16.parts(c)
        assert math.copysign(1, g) == (-1 if s else 1)
        if a == "nan":
            assert math.isnan(g)
        else:
            assert abs(g) == (math.inf if a == "inf" else a)
    lib = ALL_CODES.view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), lib.view(np.uint32))
    np.testing.assert_array_equal(encode_bfloat16(got)[~np.isnan(got)], ALL_CODES[~np.isnan(got)])


# ---------------------------------------------------------------------------------------------------------------
# in-place rounding keeps its behaviour: the value of the code, written into x


@SETTINGS
@given(st.lists(st.one_of(bits_strategy(64).map(lambda b: float(as_f64(b))), fp16_ties(np.float64),
                          bf16_near_ties_f64(), st.sampled_from(F32_EDGES)), min_size=1, max_size=16),
       st.sampled_from([np.float32, np.float64]))
def test_round_in_place(values, dtype):
    with np.errstate(over="ignore"):
        x = np.array(values).astype(dtype)
    for rounder, fmt, via in ((round_to_float16, FP16, False), (round_to_bfloat16, BF16, dtype == np.float64)):
        y = x.copy()
        assert rounder(y) is y and y.dtype == dtype
        ref = ref_encode(x, fmt, via_fp32=via)
        for g, (s, c) in zip(y.tolist(), ref, strict=True):
            assert math.copysign(1, g) == (-1 if s else 1)
            if c is None:
                assert math.isnan(g)
            else:
                a = fmt.parts(c)[1]
                assert abs(g) == (math.inf if a == "inf" else a)


def test_round_in_place_strided_and_0d():
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    y = x.copy()
    round_to_float16(y[:, ::2])
    np.testing.assert_array_equal(y[:, ::2], x[:, ::2].astype(np.float16).astype(np.float64))
    np.testing.assert_array_equal(y[:, 1::2], x[:, 1::2])
    z = np.array(1 / 3, dtype=np.float32)
    round_to_bfloat16(z)
    assert z.tolist() == float(BF16.round(Fraction(float(np.float32(1 / 3)))))


# ---------------------------------------------------------------------------------------------------------------
# argument validation


@pytest.mark.parametrize("bad", [np.array([1 + 1j]), np.array([True]), np.array(["a"])], ids=str)
def test_encode_rejects_non_real_dtypes(bad):
    for fn in (encode_float16, encode_bfloat16):
        with pytest.raises(DTypeError, match="x: expected a real float or integer array"):
            fn(bad)


@pytest.mark.parametrize("bad", [[1.0], np.arange(3), np.ones(2, dtype=np.complex64)], ids=str)
def test_round_rejects_non_float_arrays(bad):
    for fn in (round_to_float16, round_to_bfloat16):
        with pytest.raises(DTypeError, match="x: expected a NumPy float"):
            fn(bad)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(-(1 << 63), -1), st.integers(1 << 16, (1 << 63) - 1)))
def test_decode_rejects_out_of_range_codes(value):
    for fn, what in ((decode_float16, "float16"), (decode_bfloat16, "bfloat16")):
        with pytest.raises(AttributeValueError, match=rf"codes: expected {what} codes in \[0, 65535\]"):
            fn(np.array([0, value], dtype=np.int64))
    with pytest.raises(DTypeError, match="codes: expected float16 codes as a uint16"):
        decode_float16(np.array([1.5]))
