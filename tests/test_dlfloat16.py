"""DLFLOAT16 (``fusedrnn.numerics.dlfloat16`` and ``float_formats.round_to_dlfloat16``) against outside oracles.

Oracles, none of them produced by fusedrnn:
(a) the worked-values table of zdnn.md §1.2, hard-coded;
(b) slow scalar references written here with Python ints and ``fractions.Fraction``: decode by the formula
    (-1)^s 2^(e-31) (1 + f/512); encode by exact rational rounding, ties away from zero, flush below 2^-31, NINF
    above DLF16_MAX (code 0 is zero, so 2^-31 itself encodes as 0: the model quirk of §1.2);
(c) the IEEE formulas of float16 / bfloat16 for the BF16 / FP16 conversions (§1.4).
Inputs: exhaustive over all 65536 DLF16 / bfloat16 / float16 codes where that is cheap, and hypothesis over raw
float32/float64 bit patterns, exact halfway points (ties) and their neighbours, the saturation and underflow
limits, NaN, ±Inf, denormals and ±0. NaN is compared by NaN-ness and sign, never by payload.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.errors import AttributeValueError, DTypeError, FusedRNNError, ShapeError
from fusedrnn.numerics.dlfloat16 import (
    DLF16_BIAS,
    DLF16_MAX,
    DLF16_MIN,
    DLF16_NINF,
    FPFlags,
    bf16_to_dlf16,
    bf16_to_dlf16_flags,
    dlf16_from_bytes,
    dlf16_to_bf16,
    dlf16_to_bf16_flags,
    dlf16_to_bytes,
    dlf16_to_fp16,
    dlf16_to_fp32,
    dlf16_to_fp32_flags,
    fp16_to_dlf16,
    fp16_to_dlf16_flags,
    fp32_to_dlf16,
    fp32_to_dlf16_flags,
)
from fusedrnn.numerics.float_formats import round_to_dlfloat16

ALL_CODES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
SETTINGS = settings(max_examples=120, deadline=None)

# ---------------------------------------------------------------------------------------------------------------
# slow scalar references (Python ints and Fractions only)


@cache
def pow2(e: int) -> Fraction:
    return Fraction(2) ** e


def floor_log2(a: Fraction) -> int:
    """The exponent E with 2^E <= a < 2^(E+1), for a > 0."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while pow2(e) > a:
        e -= 1
    while pow2(e + 1) <= a:
        e += 1
    return e


REF_MAX = pow2(32) * (1 + Fraction(510, 512))
REF_MIN = pow2(-31) * (1 + Fraction(1, 512))


def ref_decode(code: int):
    """(sign, value): value a Fraction magnitude, or None for NINF."""
    s, e, f = code >> 15, (code >> 9) & 63, code & 511
    if code & 0x7FFF == 0x7FFF:
        return s, None
    if code & 0x7FFF == 0:
        return s, Fraction(0)
    return s, pow2(e - 31) * (1 + Fraction(f, 512))


def ref_encode(sign: int, a, *, saturate: bool = False):
    """(code, (overflow, invalid, underflow)) for the value (-1)^sign * a; a a Fraction >= 0, 'inf' or 'nan'."""
    s = 0x8000 if sign else 0
    if a == "nan":
        return s | 0x7FFF, (False, True, False)
    if a == "inf":
        return s | 0x7FFF, (True, False, False)
    underflow = 0 < a < REF_MIN
    if saturate and a > REF_MAX:
        a = REF_MAX
    if a == 0:
        return s, (False, False, underflow)
    big_e = floor_log2(a)
    n = math.floor(a / pow2(big_e) * 512 + Fraction(1, 2))  # RNA on the magnitude: 512 <= n <= 1024
    if n == 1024:
        n, big_e = 512, big_e + 1
    e = big_e + 31
    if e < 0:
        return s, (False, False, underflow)
    if e > 63 or (e == 63 and n - 512 == 511):
        return s | 0x7FFF, (True, False, underflow)
    return s | (e << 9) | (n - 512), (False, False, underflow)


def float_parts(x: float):
    """(sign, magnitude as Fraction / 'inf' / 'nan') of a Python float."""
    sign = 1 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign, "nan"
    if math.isinf(x):
        return sign, "inf"
    return sign, abs(Fraction(x))


def ieee_parts(code: int, exp_bits: int, frac_bits: int):
    """(sign, magnitude Fraction / 'inf' / 'nan') of an IEEE binary code (float16: 5, 10; bfloat16: 8, 7)."""
    bias = (1 << (exp_bits - 1)) - 1
    s = code >> (exp_bits + frac_bits)
    e = (code >> frac_bits) & ((1 << exp_bits) - 1)
    f = code & ((1 << frac_bits) - 1)
    if e == (1 << exp_bits) - 1:
        return s, ("inf" if f == 0 else "nan")
    if e == 0:
        return s, f * pow2(1 - bias - frac_bits)
    return s, pow2(e - bias) * (1 + Fraction(f, 1 << frac_bits))


def combine(flag_tuples) -> FPFlags:
    flags = [False, False, False]
    for t in flag_tuples:
        flags = [a or b for a, b in zip(flags, t, strict=True)]
    return FPFlags(*flags)


def ref_codes_of(values, *, saturate=False):
    """Reference codes (np.uint16) and flags for an array of float32/float64 values."""
    out = [ref_encode(*float_parts(float(v)), saturate=saturate) for v in np.asarray(values).ravel()]
    codes = np.array([c for c, _ in out], dtype=np.uint16).reshape(np.shape(values))
    return codes, combine(f for _, f in out)


def assert_float_equal_or_nan(got: np.ndarray, expected_sign_value) -> None:
    """``got`` (float array) against a list of (sign, Fraction | None) pairs: exact value and sign; None = NaN."""
    for g, (s, v) in zip(np.asarray(got, dtype=np.float64).ravel(), expected_sign_value, strict=True):
        assert bool(np.signbit(g)) == bool(s), (g, s, v)
        if v is None:
            assert math.isnan(g), (g, s, v)
        else:
            assert Fraction(float(g)) == (-v if s else v), (g, s, v)


# ---------------------------------------------------------------------------------------------------------------
# input strategies: raw bit patterns, ties and their neighbours, edge constants

F32_EDGES = [
    0x00000000, 0x00000001, 0x007FFFFF, 0x00800000,  # ±0, fp32 denormals, smallest normal
    0x30000000, 0x30001FFF, 0x30002000, 0x30003FFF, 0x30004000, 0x30005FFF, 0x30006000,  # 2^-31 quirk, 0x0001
    0x2FFFFFFF, 0x2FFFE000, 0x2FFFDFFF,  # just below 2^-31: rounds up to 2^-31, still zero
    0x3F800000, 0x3F802000, 0x3F801FFF, 0x3F806000,  # 1.0 and ties around it
    0x4FFF8000, 0x4FFF9FFF, 0x4FFFA000, 0x4FFFBFFF, 0x4FFFC000, 0x4FFFFFFF, 0x50000000,  # NMAX / overflow edge
    0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF,  # FLT_MAX, Inf, NaNs
]
F64_EDGES = [
    float(np.float64(2.0**-31)), 2.0**-31 * (1 + 2.0**-10), np.nextafter(2.0**-31 * (1 + 2.0**-10), 0),
    DLF16_MIN, np.nextafter(DLF16_MIN, 0), DLF16_MAX, 8577351680.0, np.nextafter(8577351680.0, 0), 5e-324,
    2.0**-1022, 1.7976931348623157e308, math.inf, math.nan, 0.0, 1 + 2.0**-10, np.nextafter(1 + 2.0**-10, 2),
]


def tie_bits(total_bits: int, frac: int, bias: int):
    """Bit patterns at, just below and just above the rounding boundaries of DLF16 (and at DLF16 values)."""
    shift = frac - 9
    rebias = (bias - 31) << 9

    def make(m, at_half, delta, sign):
        base = (m + rebias) << shift
        bits = base + (1 << (shift - 1) if at_half else 0) + delta
        return (sign << (total_bits - 1)) | (bits & ((1 << (total_bits - 1)) - 1))

    return st.builds(make, st.integers(0, 0x7FFE), st.booleans(), st.integers(-3, 3), st.integers(0, 1))


F32_BITS = st.one_of(
    st.integers(0, (1 << 32) - 1),
    tie_bits(32, 23, 127),
    st.builds(lambda b, s: b | (s << 31), st.sampled_from(F32_EDGES), st.integers(0, 1)),
)
F64_BITS = st.one_of(
    st.integers(0, (1 << 64) - 1),
    tie_bits(64, 52, 1023),
    st.builds(lambda v, s: struct.unpack("<Q", struct.pack("<d", -v if s else v))[0],
              st.sampled_from(F64_EDGES), st.integers(0, 1)),
)


def f32_array(bits_list) -> np.ndarray:
    return np.array(bits_list, dtype=np.uint32).view(np.float32)


def f64_array(bits_list) -> np.ndarray:
    return np.array(bits_list, dtype=np.uint64).view(np.float64)


# ---------------------------------------------------------------------------------------------------------------
# (a) the worked values of zdnn.md §1.2 and the constants of §1.1

WORKED = [  # input, DLF16 code, decoded value (None = NINF -> NaN)
    (1.0, 0x3E00, 1.0),
    (0.5, 0x3C00, 0.5),
    (3.0, 0x4100, 3.0),
    (0.1, 0x3733, 0.0999755859375),
    (1 + 2**-10, 0x3E01, 1.001953125),
    (65504.0, 0x5E00, 65536.0),
    (8577350656.0, 0x7FFE, 8573157376.0),
    (8577351680.0, 0x7FFF, None),
    (math.inf, 0x7FFF, None),
    (math.nan, 0x7FFF, None),
    (-0.0, 0x8000, -0.0),
    (2.0**-31, 0x0000, 0.0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_worked_values_of_the_spec(dtype):
    x = np.array([w[0] for w in WORKED], dtype=dtype)
    np.testing.assert_array_equal(fp32_to_dlf16(x), np.array([w[1] for w in WORKED], dtype=np.uint16))
    decoded = dlf16_to_fp32(np.array([w[1] for w in WORKED], dtype=np.uint16))
    rounded = round_to_dlfloat16(x.copy())
    for got in (decoded, rounded):
        for g, (_, _, v) in zip(got.tolist(), WORKED, strict=True):
            if v is None:
                assert math.isnan(g)
            else:
                assert g == v and math.copysign(1, g) == math.copysign(1, v)


def test_constants():
    assert DLF16_MAX == 8573157376.0 == float(REF_MAX)
    assert DLF16_MIN == float(REF_MIN) == 2.0**-31 * (1 + 1 / 512)
    assert (DLF16_NINF, DLF16_BIAS) == (0x7FFF, 31)
    assert dlf16_to_fp32(0x7FFE) == DLF16_MAX and dlf16_to_fp32(0x0001) == DLF16_MIN
    assert -dlf16_to_fp32(0xFFFE) == DLF16_MAX


# ---------------------------------------------------------------------------------------------------------------
# (b) exhaustive decode and re-encode of all 65536 codes


def test_decode_all_codes_exhaustively():
    got = dlf16_to_fp32(ALL_CODES)
    assert got.dtype == np.float32 and got.shape == (1 << 16,)
    assert_float_equal_or_nan(got, [ref_decode(c) for c in range(1 << 16)])
    got64, flags = dlf16_to_fp32_flags(ALL_CODES)
    np.testing.assert_array_equal(got64.view(np.uint32), got.view(np.uint32))
    assert flags == FPFlags(invalid=True)
    finite = ALL_CODES[(ALL_CODES & 0x7FFF) != 0x7FFF]
    assert dlf16_to_fp32_flags(finite)[1] == FPFlags()


def test_every_code_reencodes_to_itself():
    values = dlf16_to_fp32(ALL_CODES)
    np.testing.assert_array_equal(fp32_to_dlf16(values), ALL_CODES)
    np.testing.assert_array_equal(fp32_to_dlf16(values.astype(np.float64)), ALL_CODES)
    np.testing.assert_array_equal(fp32_to_dlf16(values, saturate=True), ALL_CODES)
    for dtype in (np.float32, np.float64):  # rounding a DLF16 value is the identity (NaN stays NaN)
        x = values.astype(dtype)
        round_to_dlfloat16(x)
        np.testing.assert_array_equal(x, values.astype(dtype))  # NaNs compare equal in assert_array_equal
        np.testing.assert_array_equal(np.signbit(x), np.signbit(values))


# ---------------------------------------------------------------------------------------------------------------
# (b) encode against the exact rational reference


def check_encode(x: np.ndarray, saturate: bool) -> None:
    expected, expected_flags = ref_codes_of(x, saturate=saturate)
    np.testing.assert_array_equal(fp32_to_dlf16(x, saturate=saturate), expected)
    codes, flags = fp32_to_dlf16_flags(x, saturate=saturate)
    np.testing.assert_array_equal(codes, expected)
    assert flags == expected_flags, (x, flags, expected_flags)
    # in-place rounding gives the value of the reference code
    y = x.copy()
    assert round_to_dlfloat16(y, saturate=saturate) is y
    assert_float_equal_or_nan(y, [ref_decode(int(c)) for c in expected.ravel()])


@SETTINGS
@given(st.lists(F32_BITS, min_size=1, max_size=24), st.booleans())
def test_fp32_encode_matches_reference(bits, saturate):
    check_encode(f32_array(bits), saturate)


@SETTINGS
@given(st.lists(F64_BITS, min_size=1, max_size=24), st.booleans())
def test_fp64_encode_matches_reference(bits, saturate):
    check_encode(f64_array(bits), saturate)


def test_encode_sweep_of_random_bits_and_all_edges():
    rng = np.random.default_rng(3)
    edges = np.array(F32_EDGES, dtype=np.uint32)
    bits = np.concatenate([rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32), edges,
                           edges | np.uint32(0x80000000)])
    for saturate in (False, True):
        check_encode(bits.view(np.float32), saturate)
    x64 = np.array(F64_EDGES + [-v for v in F64_EDGES], dtype=np.float64)
    for saturate in (False, True):
        check_encode(x64, saturate)


def test_rounding_is_ties_away_not_to_even():
    ulp = 2.0**-9
    for k in range(0, 512, 7):  # every tie k + 1/2 ULP rounds up in magnitude, odd or even k
        x = np.array([1 + (k + 0.5) * ulp, -(1 + (k + 0.5) * ulp)], dtype=np.float32)
        assert fp32_to_dlf16(x).tolist() == [0x3E00 + k + 1, 0xBE00 + k + 1]


def test_saturation_edges():
    x = np.array([8577350656.0, 8577351680.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 3.4e38], dtype=np.float32)
    codes, flags = fp32_to_dlf16_flags(x, saturate=True)
    assert codes.tolist() == [0x7FFE, 0x7FFE, 0x7FFE, 0xFFFE, 0x7FFF, 0xFFFF, 0x7FFF, 0x7FFE]
    assert flags == FPFlags(overflow=True, invalid=True)  # Inf / NaN pass the clamp and still raise
    codes, flags = fp32_to_dlf16_flags(x[:4], saturate=True)
    assert flags == FPFlags()
    codes, flags = fp32_to_dlf16_flags(x[:4])
    assert codes.tolist() == [0x7FFE, 0x7FFF, 0x7FFF, 0xFFFF] and flags == FPFlags(overflow=True)
    y = x.copy()
    round_to_dlfloat16(y, saturate=True)
    assert y[:4].tolist() == [DLF16_MAX, DLF16_MAX, DLF16_MAX, -DLF16_MAX] and np.isnan(y[4:7]).all()


def test_underflow_flag_is_tiny_before_rounding():
    def flags_of(v):
        return fp32_to_dlf16_flags(np.array([v], dtype=np.float32))

    assert flags_of(1e-45)[1] == FPFlags(underflow=True)  # an fp32 denormal
    assert flags_of(2.0**-31)[1] == FPFlags(underflow=True)  # encodes as zero (quirk)
    c, f = flags_of(2.0**-31 * (1 + 2.0**-10))  # the tie just below DLF16_MIN rounds up to it: tiny
    assert c.tolist() == [1] and f == FPFlags(underflow=True)
    c, f = flags_of(DLF16_MIN)
    assert c.tolist() == [1] and f == FPFlags()
    assert flags_of(0.0)[1] == FPFlags() and flags_of(-0.0)[0].tolist() == [0x8000]


# ---------------------------------------------------------------------------------------------------------------
# (c) bfloat16 and float16 conversions (§1.4)


def test_bf16_to_dlf16_all_codes():
    parts = [ieee_parts(c, 8, 7) for c in range(1 << 16)]
    for saturate in (False, True):
        expected = np.array([ref_encode(s, a, saturate=saturate)[0] for s, a in parts], dtype=np.uint16)
        np.testing.assert_array_equal(bf16_to_dlf16(ALL_CODES, saturate=saturate), expected)
        np.testing.assert_array_equal(bf16_to_dlf16(ALL_CODES.view(ml_dtypes.bfloat16), saturate=saturate), expected)
    # exact inside the DLF16 range: 7 fraction bits fit in 9
    inside = [c for c, (_, a) in enumerate(parts) if isinstance(a, Fraction) and REF_MIN <= a <= REF_MAX]
    back = dlf16_to_fp32(bf16_to_dlf16(np.array(inside, dtype=np.uint16)))
    assert_float_equal_or_nan(back, [parts[c] for c in inside])


@SETTINGS
@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=16), st.booleans())
def test_bf16_to_dlf16_flags(codes, saturate):
    ref = [ref_encode(*ieee_parts(c, 8, 7), saturate=saturate) for c in codes]
    got, flags = bf16_to_dlf16_flags(np.array(codes, dtype=np.uint16), saturate=saturate)
    np.testing.assert_array_equal(got, np.array([c for c, _ in ref], dtype=np.uint16))
    assert flags == combine(f for _, f in ref)


def ref_truncate_to_bf16(code: int):
    """bfloat16 code of a DLF16 code by truncation toward zero; None for NINF."""
    s, v = ref_decode(code)
    if v is None:
        return None
    if v == 0:
        return s << 15
    big_e = floor_log2(v)
    n = math.floor(v / pow2(big_e) * 128)
    return (s << 15) | ((big_e + 127) << 7) | (n - 128)


def test_dlf16_to_bf16_truncates_all_codes():
    got = dlf16_to_bf16(ALL_CODES)
    assert got.dtype == np.uint16
    ref = [ref_truncate_to_bf16(c) for c in range(1 << 16)]
    numeric = np.array([r is not None for r in ref])
    np.testing.assert_array_equal(got[numeric], np.array([r for r in ref if r is not None], dtype=np.uint16))
    ninf = got[~numeric]
    assert ((ninf & 0x7F80) == 0x7F80).all() and ((ninf & 0x7F) != 0).all()  # NaN
    np.testing.assert_array_equal(ninf >> 15, ALL_CODES[~numeric] >> 15)
    assert dlf16_to_bf16_flags(ALL_CODES[numeric])[1] == FPFlags()
    assert dlf16_to_bf16_flags(np.array([0x3E00, 0xFFFF], dtype=np.uint16))[1] == FPFlags(invalid=True)
    # truncation, not rounding: 1 + 255/512 is 1.498..., truncated to 1 + 63/64 = 1.4921875
    assert dlf16_to_bf16(0x3E00 + 255).view(ml_dtypes.bfloat16).astype(float) == 1 + 63 / 128


def test_fp16_to_dlf16_all_codes():
    parts = [ieee_parts(c, 5, 10) for c in range(1 << 16)]
    ref = [ref_encode(s, a) for s, a in parts]
    expected = np.array([c for c, _ in ref], dtype=np.uint16)
    np.testing.assert_array_equal(fp16_to_dlf16(ALL_CODES), expected)
    np.testing.assert_array_equal(fp16_to_dlf16(ALL_CODES.view(np.float16)), expected)
    # float16 subnormals (and zeros) are exact in DLF16
    sub = [c for c in range(1 << 16) if (c >> 10) & 31 == 0]
    assert_float_equal_or_nan(dlf16_to_fp32(fp16_to_dlf16(np.array(sub, dtype=np.uint16))), [parts[c] for c in sub])
    # a float16 tie rounds away from zero: 1 + 1/1024 -> 1 + 1/512
    assert fp16_to_dlf16(np.float16(1 + 2**-10)).tolist() == 0x3E01


@SETTINGS
@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=16))
def test_fp16_to_dlf16_flags(codes):
    ref = [ref_encode(*ieee_parts(c, 5, 10)) for c in codes]
    got, flags = fp16_to_dlf16_flags(np.array(codes, dtype=np.uint16))
    np.testing.assert_array_equal(got, np.array([c for c, _ in ref], dtype=np.uint16))
    assert flags == combine(f for _, f in ref)
    assert not flags.underflow


def ref_dlf16_to_fp16(code: int):
    """(float16 code or None for NaN, (overflow, invalid, underflow)); RNA onto the subnormal grid."""
    s, v = ref_decode(code)
    if v is None:
        return None, (False, True, False)
    sign = s << 15
    if v == 0:
        return sign, (False, False, False)
    if v < pow2(-14):
        n = math.floor(v / pow2(-24) + Fraction(1, 2))
        return sign | n, (False, False, True)
    big_e = floor_log2(v)
    if big_e > 15:
        return sign | 0x7C00, (True, False, False)
    frac = v / pow2(big_e) * 1024 - 1024
    assert frac.denominator == 1  # exact: 9 fraction bits fit in 10
    return sign | ((big_e + 15) << 10) | int(frac), (False, False, False)


def test_dlf16_to_fp16_all_codes():
    got, flags = dlf16_to_fp16(ALL_CODES)
    assert got.dtype == np.float16 and flags == FPFlags(True, True, True)
    ref = [ref_dlf16_to_fp16(c)[0] for c in range(1 << 16)]
    numeric = np.array([r is not None for r in ref])
    np.testing.assert_array_equal(got.view(np.uint16)[numeric], np.array([r for r in ref if r is not None],
                                                                         dtype=np.uint16))
    assert np.isnan(got[~numeric]).all()
    np.testing.assert_array_equal(np.signbit(got[~numeric]), ALL_CODES[~numeric] >= 0x8000)
    # the spec's bad values: 0x7E00 / 0xFE00 overflow, NINF is invalid
    assert dlf16_to_fp16(np.array([0x7E00, 0xFE00], dtype=np.uint16))[1] == FPFlags(overflow=True)
    assert dlf16_to_fp16(0x7FFF)[1] == FPFlags(invalid=True)
    assert dlf16_to_fp16(0x3E00)[1] == FPFlags()


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 0xFFFF), st.sampled_from([0x0001, 0x2000, 0x21FF, 0x5DFF, 0x5E00, 0x7FFE])),
                min_size=1, max_size=16))
def test_dlf16_to_fp16_flags(codes):
    ref = [ref_dlf16_to_fp16(c) for c in codes]
    got, flags = dlf16_to_fp16(np.array(codes, dtype=np.uint16))
    assert flags == combine(f for _, f in ref)


# ---------------------------------------------------------------------------------------------------------------
# byte order (§1.7)


@SETTINGS
@given(st.lists(st.integers(0, 0xFFFF), max_size=40), st.sampled_from([np.uint16, np.int64, np.uint32]))
def test_bytes_big_endian(codes, dtype):
    expected = b"".join(c.to_bytes(2, "big") for c in codes)
    assert dlf16_to_bytes(np.array(codes, dtype=dtype)) == expected
    back = dlf16_from_bytes(expected)
    assert back.dtype == np.uint16 and back.tolist() == codes
    assert dlf16_from_bytes(bytearray(expected)).tolist() == codes
    assert dlf16_from_bytes(np.frombuffer(expected, dtype=np.uint8)).tolist() == codes


def test_bytes_of_a_2d_array_are_c_order():
    codes = np.array([[0x3E00, 0x0001], [0x7FFF, 0x8000]], dtype=np.uint16)
    assert dlf16_to_bytes(codes) == bytes([0x3E, 0x00, 0x00, 0x01, 0x7F, 0xFF, 0x80, 0x00])
    assert dlf16_to_bytes(codes.T) == bytes([0x3E, 0x00, 0x7F, 0xFF, 0x00, 0x01, 0x80, 0x00])


# ---------------------------------------------------------------------------------------------------------------
# shapes, dtypes and argument validation


def test_shapes_scalars_and_strided_inputs():
    assert fp32_to_dlf16(1.0).shape == () and int(fp32_to_dlf16(1.0)) == 0x3E00
    assert fp32_to_dlf16(np.float32(0.5)).tolist() == 0x3C00
    assert float(dlf16_to_fp32(0x3E00)) == 1.0 and dlf16_to_fp32(np.int16(-0x8000)).tolist() == -0.0
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(fp32_to_dlf16(x[:, ::2, 1:]), fp32_to_dlf16(x)[:, ::2, 1:])
    np.testing.assert_array_equal(fp32_to_dlf16(x.astype(">f4")), fp32_to_dlf16(x))
    np.testing.assert_array_equal(fp32_to_dlf16(np.array([3, -7, 1 << 40])), [0x4100, 0xC380, 0x7FFF])
    np.testing.assert_array_equal(fp32_to_dlf16(x.astype(np.float16)), fp32_to_dlf16(x.astype(np.float16)
                                                                                     .astype(np.float32)))
    y = x.copy()
    view = y[:, ::2, 1:]
    round_to_dlfloat16(view)  # strided in-place rounding writes through the view only
    np.testing.assert_array_equal(y[:, ::2, 1:], dlf16_to_fp32(fp32_to_dlf16(x[:, ::2, 1:])))
    np.testing.assert_array_equal(y[:, 1, :], x[:, 1, :])
    z = np.array(0.1)
    round_to_dlfloat16(z)
    assert z.tolist() == 0.0999755859375
    h, flags = dlf16_to_fp16(np.array([[0x3E00]], dtype=np.uint16))
    assert h.shape == (1, 1) and dlf16_to_fp16(0x3E00)[0].shape == ()


BAD_FLOATS = [np.array([1 + 1j]), np.array([True]), np.array(["a"]), np.array([None], dtype=object)]


@pytest.mark.parametrize("bad", BAD_FLOATS, ids=lambda a: str(a.dtype))
def test_bad_float_dtypes(bad):
    for fn in (fp32_to_dlf16, fp32_to_dlf16_flags):
        with pytest.raises(DTypeError, match="x: expected"):
            fn(bad)


def test_bad_round_to_dlfloat16_arguments():
    with pytest.raises(DTypeError, match="x: expected a NumPy float32/float64 array"):
        round_to_dlfloat16([1.0, 2.0])
    with pytest.raises(DTypeError, match="got dtype int64"):
        round_to_dlfloat16(np.arange(3))
    with pytest.raises(DTypeError, match="saturate"):
        round_to_dlfloat16(np.ones(3), saturate="yes")
    with pytest.raises(DTypeError, match="saturate"):
        fp32_to_dlf16(1.0, saturate=1)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-(1 << 63), -1), st.integers(1 << 16, (1 << 63) - 1)))
def test_out_of_range_codes_are_rejected(value):
    a = np.array([0x3E00, value], dtype=np.int64)
    for fn in (dlf16_to_fp32, dlf16_to_bf16, dlf16_to_fp16, dlf16_to_bytes, bf16_to_dlf16, fp16_to_dlf16):
        with pytest.raises(AttributeValueError, match=r"codes in \[0, 65535\]"):
            fn(a)


@pytest.mark.parametrize("bad", [np.array([1.0]), np.array([True]), np.array(["x"])], ids=str)
def test_bad_code_dtypes(bad):
    for fn in (dlf16_to_fp32, dlf16_to_bf16, dlf16_to_fp16, dlf16_to_bytes, bf16_to_dlf16, fp16_to_dlf16):
        with pytest.raises(DTypeError, match="codes as a uint16"):
            fn(bad)


def test_bad_byte_buffers():
    with pytest.raises(ShapeError, match="even number of bytes"):
        dlf16_from_bytes(b"\x00\x01\x02")
    with pytest.raises(DTypeError, match="buf: expected bytes"):
        dlf16_from_bytes([1, 2])
    with pytest.raises(DTypeError, match="uint8 array"):
        dlf16_from_bytes(np.zeros(2, dtype=np.uint16))
    assert issubclass(ShapeError, FusedRNNError)


ANY_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
              np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128, ml_dtypes.bfloat16,
              ml_dtypes.float8_e4m3fn, "M8[s]", "m8[s]", "U3", "S3", object, ">f4", ">u2", "<i8"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(ANY_DTYPES), st.lists(st.integers(0, 5), max_size=4))
def test_any_dtype_either_converts_or_raises_a_fusedrnn_error(dtype, values):
    a = np.array(values).astype(dtype)
    for fn in (fp32_to_dlf16, dlf16_to_fp32, dlf16_to_fp16, bf16_to_dlf16, fp16_to_dlf16, dlf16_to_bytes):
        try:
            fn(a)
        except FusedRNNError:
            pass


def test_flags_combine():
    assert (FPFlags(overflow=True) | FPFlags(underflow=True)) == FPFlags(True, False, True)
    assert FPFlags(invalid=True).is_error and FPFlags(overflow=True).is_error and not FPFlags(underflow=True).is_error
    with pytest.raises(AttributeError):
        FPFlags().overflow = True  # frozen


# ---------------------------------------------------------------------------------------------------------------
# the fast paths (table lookup for small float32 arrays, integer add-and-mask with range checks for large ones,
# the exact fallback when NaN / Inf / overflow / flushing occurs) against an independent vectorised oracle

from fusedrnn.numerics.dlfloat16 import _TABLE_MAX  # noqa: E402  (array sizes on both sides of the table path)


def oracle_round_f32(bits: np.ndarray, saturate: bool) -> np.ndarray:
    """Rounded values (float64) of float32 bit patterns, from the definition, in exact float64 arithmetic.

    a = m * 2^e with 0.5 <= m < 1 (frexp); m * 1024 has at most 24 significant bits, so m * 1024 + 1/2 is exact
    and its floor is the RNA-rounded 10-bit significand n (1024 when it carries into the next binade).
    """
    with np.errstate(invalid="ignore"):  # NaN payloads
        x = bits.view(np.float32).astype(np.float64)
    a = np.abs(x)
    finite = np.isfinite(x)
    m, e = np.frexp(np.where(finite & (a > 0), a, 1.0))
    v = np.ldexp(np.floor(m * 1024 + 0.5), e - 10)
    if saturate:
        v = np.minimum(v, DLF16_MAX)  # rounding is monotone and DLF16_MAX is on the grid: clamp-then-round
    v[v > DLF16_MAX] = np.nan
    v[v < DLF16_MIN] = 0.0  # 2^-31 itself included (code 0 is zero)
    v[a == 0] = 0.0
    v[~finite] = np.nan
    return np.copysign(v, x)


def oracle_codes(values: np.ndarray) -> np.ndarray:
    """DLF16 codes of oracle values (float64 on the DLF16 grid, ±0, NaN)."""
    a = np.abs(values)
    m, e = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
    codes = ((e - 1 + 31) << 9) | (m * 1024 - 512).astype(np.int64)
    codes[a == 0] = 0
    codes[np.isnan(a)] = 0x7FFF
    return (codes | np.where(np.signbit(values), 0x8000, 0)).astype(np.uint16)


def assert_same_values(got: np.ndarray, expected: np.ndarray) -> None:
    got = np.asarray(got, dtype=np.float64)
    np.testing.assert_array_equal(got, expected)  # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# the result depends on the top 19 bits of a float32 only (sign, exponent, 9 kept bits, the rounding bit): the
# lowest and highest member of every one of the 2^19 classes, and a random one, cover all float32 behaviour
def all_f32_classes(low_bits: int | None, rng) -> np.ndarray:
    base = np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)
    low = rng.integers(0, 1 << 13, base.size, dtype=np.uint32) if low_bits is None else np.uint32(low_bits)
    return base | low


@pytest.mark.parametrize("low_bits", [0, 0x1FFF, None], ids=["lowest", "highest", "random"])
@pytest.mark.parametrize("saturate", [False, True])
def test_every_float32_class_rounds_and_encodes_on_every_path(low_bits, saturate):
    bits = all_f32_classes(low_bits, np.random.default_rng(11))
    expected = oracle_round_f32(bits, saturate)
    np.testing.assert_array_equal(fp32_to_dlf16(bits.view(np.float32), saturate=saturate), oracle_codes(expected))
    # whole array (NaN and overflow inside: the exact fallback)
    x = bits.view(np.float32).copy()
    round_to_dlfloat16(x, saturate=saturate)
    assert_same_values(x, expected)
    # table-sized chunks
    y = bits.view(np.float32).copy()
    for k in range(0, y.size, _TABLE_MAX):
        round_to_dlfloat16(y[k : k + _TABLE_MAX], saturate=saturate)
    assert_same_values(y, expected)
    # large arrays with no NaN / Inf / overflow: the add-and-mask path, with values to flush (fixed up) and without
    with np.errstate(invalid="ignore"):
        a = np.abs(bits.view(np.float32).astype(np.float64))
    for keep in (a < 8577351680.0, (a < 8577351680.0) & ((a == 0) | (a >= 2.0**-31 * (1 + 2.0**-9)))):
        z = bits.view(np.float32)[keep].copy()
        assert z.size > _TABLE_MAX
        round_to_dlfloat16(z, saturate=saturate)
        assert_same_values(z, expected[keep])


def f64_pool(rng, n: int, *, tiny: bool) -> np.ndarray:
    """n distinct-ish float64 values inside the DLF16 range: ties and their neighbours, random values, zeros."""
    code = rng.integers(1, 0x7FFE, n)
    e, f = code >> 9, code & 511
    mant = (1 << 52) | (f << 43)
    tie = mant + (1 << 42) + rng.integers(-2, 3, n)  # at, just below and just above the rounding boundary
    rand = mant | rng.integers(0, 1 << 43, n)
    m = np.where(rng.random(n) < 0.5, tie, rand)
    bits = ((e + 1023 - 31) << 52) | (m & ((1 << 52) - 1))
    bits = np.where(rng.random(n) < 0.05, 0, bits) | (rng.integers(0, 2, n) << 63)
    if tiny:
        bits[: n // 50] = rng.integers(1, 992 << 52, n // 50) | (rng.integers(0, 2, n // 50) << 63)
    return bits.astype(np.uint64).view(np.float64)


@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("special", [None, np.nan, -np.inf, 1e12, -8577351680.0])
def test_large_arrays_against_the_rational_reference(tiny, special):
    rng = np.random.default_rng(7 + tiny)
    pool64 = f64_pool(rng, 700, tiny=tiny)
    for dtype in (np.float64, np.float32):
        pool = pool64.astype(dtype)
        if special is not None:
            pool[rng.integers(pool.size)] = special
        for saturate in (False, True):
            ref_codes, _ = ref_codes_of(pool, saturate=saturate)
            ref_values = [ref_decode(int(c)) for c in ref_codes]
            pick = rng.integers(0, pool.size, 3 * _TABLE_MAX)
            pick[: pool.size] = np.arange(pool.size)  # every pool value at least once
            x = pool[pick]
            np.testing.assert_array_equal(fp32_to_dlf16(x, saturate=saturate), ref_codes[pick])
            codes, flags = fp32_to_dlf16_flags(x, saturate=saturate)
            np.testing.assert_array_equal(codes, ref_codes[pick])
            assert flags == ref_codes_of(pool, saturate=saturate)[1]
            for view in (x.copy(), x.copy().reshape(-1, 3)[:, ::2].copy(), None):
                y = x.copy().reshape(-1, 3)[:, ::2] if view is None else view  # None: a strided in-place view
                src = pick.reshape(-1, 3)[:, ::2].ravel() if y.ndim == 2 else pick
                np.testing.assert_array_equal(fp32_to_dlf16(y, saturate=saturate).ravel(), ref_codes[src])
                round_to_dlfloat16(y, saturate=saturate)
                got = y.ravel()
                sample = rng.integers(0, got.size, 400)
                assert_float_equal_or_nan(got[sample], [ref_values[i] for i in src[sample]])
                np.testing.assert_array_equal(got, dlf16_to_fp32(ref_codes[src]).astype(dtype))


def test_sizes_around_the_table_path_and_0d():
    rng = np.random.default_rng(5)
    for n in (1, 2, _TABLE_MAX - 1, _TABLE_MAX, _TABLE_MAX + 1):
        bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        bits[: n // 2] = (bits[: n // 2] & np.uint32(0x87FFFFFF)) | np.uint32(0x38000000)  # in range
        for saturate in (False, True):
            for sel in (slice(None), slice(0, max(1, n // 2))):  # with and without NaN / Inf / overflow
                b = bits[sel]
                x = b.view(np.float32).copy()
                round_to_dlfloat16(x, saturate=saturate)
                assert_same_values(x, oracle_round_f32(b, saturate))
    for v in (0.1, -3e-10, 1e10, np.nan, -0.0):
        for dtype in (np.float32, np.float64):
            z = np.array(v, dtype=dtype)
            assert round_to_dlfloat16(z) is z and z.shape == ()
            assert_same_values(z.reshape(1), oracle_round_f32(np.array([v], np.float32).view(np.uint32), False))
    empty = np.zeros((0, 3), np.float32)
    assert round_to_dlfloat16(empty) is empty and fp32_to_dlf16(empty).shape == (0, 3)
    assert fp32_to_dlf16_flags(np.zeros(0))[1] == FPFlags()
