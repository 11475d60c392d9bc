"""fusedrnn.numerics.gemmlowp against slow scalar references, exact rational arithmetic and upstream golden values.

Oracles, none of them our vectorised code:
  * scalar references below, written with Python ints from the C++ semantics of litert.md §6.1/§6.4/§6.5
    (``/`` truncates toward zero, ``>>`` floors, raw adds wrap) one element at a time;
  * exact rational arithmetic (``fractions.Fraction``) for what the primitives mean (rounding rules);
  * golden values from TFLite's own unit tests (tensor_utils_test.cc, quantization_util_test.cc);
  * float sigmoid / tanh / exp / 1/sqrt for accuracy.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.errors import AttributeValueError, DTypeError
from fusedrnn.numerics import gemmlowp as g

I16 = (-(1 << 15), (1 << 15) - 1)
I32 = (-(1 << 31), (1 << 31) - 1)
ALL_I16 = np.arange(-32768, 32768, dtype=np.int16)


# ---------------------------------------------------------------------------------------------------------------
# scalar references (Python ints, one value at a time)


def c_div(a: int, b: int) -> int:
    """C++ integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def wrap(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >= 1 << (bits - 1) else x


def sat(x: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, x))


def round_half_up(v: Fraction) -> int:
    return math.floor(v + Fraction(1, 2))


def round_half_away(v: Fraction) -> int:
    r = math.floor(abs(v) + Fraction(1, 2))
    return r if v >= 0 else -r


def ref_srdhm(a: int, b: int, bits: int) -> int:
    lo = -(1 << (bits - 1))
    if a == lo and b == lo:
        return -lo - 1
    ab = a * b
    nudge = (1 << (bits - 2)) if ab >= 0 else 1 - (1 << (bits - 2))
    return c_div(ab + nudge, 1 << (bits - 1))


def ref_rdpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def ref_srmpot(x: int, e: int, bits: int) -> int:
    if e == 0:
        return x
    if e < 0:
        return ref_rdpot(x, -e)
    thr = (1 << (bits - 1 - e)) - 1
    if x > thr:
        return (1 << (bits - 1)) - 1
    if x < -thr:
        return -(1 << (bits - 1))
    return wrap(x * (1 << e), bits)


def k(v32: int, bits: int) -> int:
    """gemmlowp constant: an int32 raw constant rescaled to the raw width."""
    return ref_rdpot(v32, 32 - bits)


def ref_exp_on_interval(a: int, bits: int) -> int:
    c = k(1895147668, bits)
    third = k(715827883, bits)
    x = wrap(a + (1 << (bits - 4)), bits)
    x2 = ref_srdhm(x, x, bits)
    x3 = ref_srdhm(x2, x, bits)
    x4 = ref_srdhm(x2, x2, bits)
    t = wrap(ref_srmpot(x4, -2, bits) + x3, bits)
    p = ref_srmpot(wrap(ref_srdhm(t, third, bits) + x2, bits), -1, bits)
    s = c + ref_srdhm(c, wrap(x + p, bits), bits)
    return sat(s, bits) if bits == 16 else wrap(s, bits)


BARREL = [(-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242)]


def ref_exp_neg(a: int, ib: int, bits: int) -> int:
    fb = bits - 1 - ib
    quarter = 1 << (fb - 2)
    amq = wrap((a & (quarter - 1)) - quarter, bits)
    r = ref_exp_on_interval(ref_srmpot(amq, ib, bits), bits)
    rem = wrap(amq - a, bits)
    for e, m in BARREL:
        if ib > e and (rem >> (fb + e)) & 1:
            r = ref_srdhm(r, k(m, bits), bits)
    if ib > 5 and a < k(-(1 << (36 - ib)), bits):
        r = 0
    if a == 0:
        r = (1 << (bits - 1)) - 1
    return r


def ref_newton(a: int, bits: int) -> int:
    s = a + (1 << (bits - 1)) - 1
    hd = wrap(c_div(s + (1 if s >= 0 else -1), 2), bits)
    one = 1 << (bits - 3)
    x = wrap(k(1515870810, bits) + ref_srdhm(hd, k(-1010580540, bits), bits), bits)
    for _ in range(3):
        x = wrap(x + ref_srmpot(ref_srdhm(x, wrap(one - ref_srdhm(hd, x, bits), bits), bits), 2, bits), bits)
    return x


def ref_one_over(a: int, bits: int) -> int:
    return ref_srmpot(ref_newton(a, bits), 1, bits)


def ref_one_minus_over(a: int, bits: int) -> int:
    return ref_srmpot(wrap(ref_newton(a, bits) - (1 << (bits - 3)), bits), 2, bits)


def ref_logistic(a: int, ib: int, bits: int) -> int:
    if a == 0:
        return k(1 << 30, bits)
    if a > 0:
        return ref_one_over(ref_exp_neg(wrap(-a, bits), ib, bits), bits)
    return wrap((1 << (bits - 1)) - 1 - ref_one_over(ref_exp_neg(a, ib, bits), bits), bits)


def ref_tanh(a: int, ib: int, bits: int) -> int:
    if a == 0:
        return 0
    n = wrap(-abs(a), bits)
    t = ref_one_minus_over(ref_exp_neg(n, ib + 1, bits), bits)
    return wrap(-t, bits) if a < 0 else t


def ref_mbqm_double(x: int, q: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rdpot(ref_srdhm(wrap(x * (1 << left), 32), q, 32), right)


def ref_inv_sqrt(x: int, reverse_shift: int) -> tuple[int, int]:
    if x <= 1:
        return (1 << 31) - 1, 0
    shift = 11
    while x >= 1 << 29:
        x = c_div(x, 4)
        shift += 1
    clz = 32 - x.bit_length()
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    assert (1 << 27) <= x < (1 << 29)
    half_input = ref_srmpot(x >> 1, -1, 32)
    half_three = 3 << 27
    est = 1 << 28
    for _ in range(5):
        cube = ref_srmpot(ref_srdhm(ref_srdhm(est, est, 32), est, 32), 6, 32)
        est = ref_srmpot(wrap(ref_srdhm(half_three, est, 32) - ref_srdhm(half_input, cube, 32), 32), 3, 32)
    est = ref_srdhm(est, 1518500250, 32)
    if shift < 0:
        est = wrap(est << -shift, 32)
        shift = 0
    return est, shift * reverse_shift


def ref_quantize_multiplier(m: float, single: bool = False) -> tuple[int, int]:
    """Exact: e with 2**(e-1) <= |m| < 2**e, Q = round_half_away(m · 2**(31-e)) (no frexp involved)."""
    if m == 0:
        return 0, 0
    v = Fraction(m)
    e = math.floor(math.log2(abs(m))) + 1
    while abs(v) >= Fraction(2) ** e:
        e += 1
    while abs(v) < Fraction(2) ** (e - 1):
        e -= 1
    q = round_half_away(v * Fraction(2) ** (31 - e))
    if q == 1 << 31:
        q, e = q // 2, e + 1
    if e < -31:
        return 0, 0
    if single and e > 30:
        return (1 << 31) - 1, 30
    return q, e


def edges(bits: int) -> list[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    pots = [1 << n for n in range(bits - 1)]
    return [lo, lo + 1, hi, hi - 1, 0, 1, -1] + pots + [-p for p in pots] + [p - 1 for p in pots] + \
        [1 - p for p in pots]


def ints(bits: int):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.one_of(st.sampled_from(edges(bits)), st.integers(lo, hi))


BITS = st.sampled_from([16, 32])


# ---------------------------------------------------------------------------------------------------------------
# §6.1 primitives


@settings(max_examples=400, deadline=None)
@given(data=st.data(), bits=BITS)
def test_srdhm_matches_reference_and_rounds_half_up(data, bits):
    a = data.draw(ints(bits))
    b = data.draw(st.one_of(st.just(a), ints(bits)))
    got = int(g.srdhm(a, b, bits=bits))
    assert got == ref_srdhm(a, b, bits)
    lo = -(1 << (bits - 1))
    if a == lo and b == lo:
        assert got == -lo - 1
    else:  # the nudge-then-truncate recipe is round(a·b / 2**(bits-1)), ties toward +inf
        assert got == round_half_up(Fraction(a * b, 1 << (bits - 1)))


def test_srdhm_saturation_and_dtypes():
    assert g.srdhm32(-(1 << 31), -(1 << 31)) == (1 << 31) - 1
    assert g.srdhm16(-32768, -32768) == 32767
    assert g.srdhm16(-32768, 32767) == -32767
    assert g.srdhm16(np.int16(-32768), np.int16(-32767)) == 32767
    out = g.srdhm16(ALL_I16, ALL_I16[::-1])
    assert out.dtype == np.int16 and out.shape == (65536,)
    assert g.srdhm32(np.zeros((2, 3), np.int32), 5).dtype == np.int32


@settings(max_examples=400, deadline=None)
@given(x=st.one_of(ints(32), st.integers(-(1 << 62), (1 << 62))), e=st.integers(0, 31))
def test_rounding_divide_by_pot(x, e):
    got = int(g.rounding_divide_by_pot(x, e))
    assert got == ref_rdpot(x, e)
    assert got == round_half_away(Fraction(x, 1 << e))


def test_rounding_divide_by_pot_ties_and_broadcast():
    x = np.array([5, -5, 6, -6, 7, -7, 3, -3], dtype=np.int32)
    np.testing.assert_array_equal(g.rounding_divide_by_pot(x, 1), [3, -3, 3, -3, 4, -4, 2, -2])
    np.testing.assert_array_equal(g.rounding_divide_by_pot(x, 0), x)
    assert g.rounding_divide_by_pot(x, 1).dtype == np.int32
    e = np.arange(4)
    np.testing.assert_array_equal(g.rounding_divide_by_pot(np.array([[-12], [12]]), e),
                                  [[-12, -6, -3, -2], [12, 6, 3, 2]])


@settings(max_examples=300, deadline=None)
@given(x=ints(16), e=st.integers(-15, 15))
def test_srmpot16(x, e):
    got = int(g.saturating_rounding_multiply_by_pot(x, e, bits=16))
    assert got == ref_srmpot(x, e, 16)
    if e >= 0:  # saturating left shift
        assert got == sat(x * (1 << e), 16)
    else:
        assert got == round_half_away(Fraction(x, 1 << -e))


@settings(max_examples=300, deadline=None)
@given(x=ints(32), e=st.integers(-31, 31))
def test_srmpot32(x, e):
    got = int(g.saturating_rounding_multiply_by_pot(x, e, bits=32))
    assert got == ref_srmpot(x, e, 32)
    assert g.saturating_rounding_multiply_by_pot(np.int32(x), e, bits=32).dtype == np.int32


def test_srmpot_threshold_edges():
    # e = 2: threshold 8191; 8191·4 = 32764 fits, 8192 saturates, -8191 fits, -8192 saturates (to -32768)
    got = g.saturating_rounding_multiply_by_pot(np.array([8191, 8192, -8191, -8192, 0]), 2)
    np.testing.assert_array_equal(got, [32764, 32767, -32764, -32768, 0])
    # e = 15: threshold 0; every nonzero value saturates
    np.testing.assert_array_equal(g.saturating_rounding_multiply_by_pot(np.array([1, -1, 0]), 15), [32767, -32768, 0])


@settings(max_examples=400, deadline=None)
@given(x=ints(32), q=st.one_of(st.sampled_from([0, 1, (1 << 30), (1 << 31) - 1, -(1 << 31)]), st.integers(*I32)),
       shift=st.integers(-31, 30))
def test_mbqm_double_rounding(x, q, shift):
    got = int(g.multiply_by_quantized_multiplier(x, q, shift))
    assert got == ref_mbqm_double(x, q, shift)
    if shift <= 0 and not (x == q == -(1 << 31)):  # exact meaning: two nested roundings
        first = round_half_up(Fraction(x * q, 1 << 31))
        assert got == round_half_away(Fraction(first, 1 << -shift))


@settings(max_examples=400, deadline=None)
@given(x=ints(32), q=st.one_of(st.sampled_from([0, 1, (1 << 30), (1 << 31) - 1]), st.integers(0, I32[1])),
       shift=st.integers(-31, 30))
def test_mbqm_single_rounding(x, q, shift):
    got = int(g.multiply_by_quantized_multiplier(x, q, shift, rounding="single"))
    assert got == wrap(round_half_up(Fraction(x * q, 1 << (31 - shift))), 32)


@settings(max_examples=300, deadline=None)
@given(x=st.integers(-(1 << 47), (1 << 47) - 1),
       q=st.one_of(st.sampled_from([0, 1, 1 << 15, 1 << 30, 0x7FFF0000, 0x7FFF7FFF, 0x7FFF8000, I32[1]]),
                   st.integers(0, I32[1])), shift=st.integers(-31, 7),
       rounding=st.sampled_from(["double", "single"]))
def test_mbqm_int64_overload(x, q, shift, rounding):
    reduced = (q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF
    got = int(g.multiply_by_quantized_multiplier(x, q, shift, rounding=rounding, x_bits=64))
    assert got == wrap(round_half_up(Fraction(x * reduced, 1 << (15 - shift))), 32)


def test_mbqm_double_vs_single_differ_where_expected():
    # x·Q/2**31 = 0.5 rounds up to 1 first, then 1/2 rounds up again: double gives 1, the exact 0.25 gives 0
    assert g.multiply_by_quantized_multiplier(1, 1 << 30, -1) == 1
    assert g.multiply_by_quantized_multiplier(1, 1 << 30, -1, rounding="single") == 0
    # random multipliers: the two builds differ by at most 1, on a small nonzero fraction of inputs, and never
    # without a right shift (then both are round-half-up of x·Q / 2**31)
    rng = np.random.default_rng(3)
    x = rng.integers(*I32, size=20000, endpoint=True)
    q = rng.integers(1 << 30, 1 << 31, size=20000)
    shift = rng.integers(-12, 1, size=20000)
    d = g.multiply_by_quantized_multiplier(x, q, shift).astype(np.int64)
    s = g.multiply_by_quantized_multiplier(x, q, shift, rounding="single").astype(np.int64)
    assert np.abs(d - s).max() == 1
    differ = d != s
    assert 0 < differ.mean() < 0.2
    assert np.all(differ[shift == 0] == 0)


def test_mbqm_broadcasts_per_channel():
    rng = np.random.default_rng(7)
    x = rng.integers(-(1 << 20), 1 << 20, size=(3, 5)).astype(np.int32)
    q = rng.integers(1 << 30, 1 << 31, size=5).astype(np.int32)
    shift = rng.integers(-20, 3, size=5).astype(np.int32)
    got = g.multiply_by_quantized_multiplier(x, q, shift)
    assert got.shape == (3, 5) and got.dtype == np.int32
    want = [[ref_mbqm_double(int(x[i, j]), int(q[j]), int(shift[j])) for j in range(5)] for i in range(3)]
    np.testing.assert_array_equal(got, want)


def test_mbqm_upstream_golden():
    # TFLite quantization_util_test.cc: MultiplyByQuantizedMultiplierInt32 / Int64 (double rounding build)
    def qm(x, m, **kw):
        q, s = g.quantize_multiplier(m)
        return int(g.multiply_by_quantized_multiplier(x, q, s, **kw))
    assert qm(0, 0.1) == 0 and qm(1, 0.0) == 0
    assert qm(10000, 0.00097656) == 10 and qm(-10000, 0.00097656) == -10
    assert qm(I32[0], 0.00001) == -21475 and qm(I32[1], 0.00001) == 21475
    assert qm(10000, -0.00097656) == -10 and qm(-10000, -0.00097656) == 10
    assert qm(I32[0], -0.00001) == 21475 and qm(I32[1], -0.00001) == -21475
    want = round_half_away(Fraction(I32[1] * I32[1], 1 << 34))
    assert g.multiply_by_quantized_multiplier(I32[1], I32[1], -3) == want
    assert g.multiply_by_quantized_multiplier(-I32[1], I32[1], -3) == -want
    assert qm(-(1 << 47), 0.00001, x_bits=64) == -1407385600
    assert qm((1 << 47) - 1, 0.00001, x_bits=64) == 1407385600
    assert g.multiply_by_quantized_multiplier((1 << 47) - 1, I32[1], -31, x_bits=64) == 65534
    assert g.multiply_by_quantized_multiplier(-(1 << 47) + 1, I32[1], -31, x_bits=64) == -65534


def test_cwise_mul_upstream_golden():
    # TFLite tensor_utils_test.cc QuantMul16bitOut15Shift / 19Shift: int16(RDPOT(a·b, shift)) (wraps),
    # and QuantMul8bitArbitraryScale: clamp(MBQM(a·b, 1970324837, -15) - 3, -128, 127) (that test dates from
    # kernels that subtracted output_zp = 3; current LiteRT PortableCwiseMul adds it)
    a = np.array([2491, 32767, -32768, 32767, -32768, 32767, 32767, -32768, -32768, 2157,
                  4545, 14835, 1285, 29498, 26788, 2907, 7877, 6331, 8775, 3001,
                  1399, 4683, 1437, 1853, 12163, 4927, 7977, 3001, 16612, 4791], dtype=np.int64)
    b = np.array([-1156, 32767, -32768, -32768, 32767, 2308, 64, 220, -288, -10132,
                  -964, 1016, -120, 844, 2944, -4640, -2392, 736, -4352, 4352,
                  5180, -232, -428, 8276, -412, -1308, -1196, -5044, 1612, -10044], dtype=np.int64)
    out15 = g.rounding_divide_by_pot(a * b, 15).astype(np.int16)
    np.testing.assert_array_equal(out15, [-88, 32766, -32768, -32767, -32767, 2308, 64, -220, 288, -667,
                                          -134, 460, -5, 760, 2407, -412, -575, 142, -1165, 399,
                                          221, -33, -19, 468, -153, -197, -291, -462, 817, -1469])
    out19 = g.rounding_divide_by_pot(a * b, 19).astype(np.int16)
    np.testing.assert_array_equal(out19, [-5, 2048, 2048, -2048, -2048, 144, 4, -14, 18, -42,
                                          -8, 29, 0, 47, 150, -26, -36, 9, -73, 25,
                                          14, -2, -1, 29, -10, -12, -18, -29, 51, -92])
    out8 = np.clip(g.multiply_by_quantized_multiplier(a * b, 1970324837, -15).astype(np.int64) - 3, -128, 127)
    np.testing.assert_array_equal(out8, [-84, 127, 127, -128, -128, 127, 56, -128, 127, -128,
                                         -126, 127, -7, 127, 127, -128, -128, 127, -128, 127,
                                         127, -33, -20, 127, -128, -128, -128, -128, 127, -128])


# ---------------------------------------------------------------------------------------------------------------
# QuantizeMultiplier

_M_EDGES = ([0.0, -0.0, 1.0, -1.0, 0.5, 0.75, 2.0**-31, 2.0**-32, 2.0**-33, 0.99 * 2.0**-32, 5e-324, 1e300, -1e300,
             float(np.nextafter(1.0, 0.0)), 1 - 2.0**-32, 1 - 2.0**-33, 1 - 2.0**-31, 1 + 2.0**-32, 0.5 - 2.0**-33,
             0.5 + 2.0**-33, -(0.5 + 2.0**-33), 0.5 + 3 * 2.0**-33, 0.75 + 2.0**-33]  # exact ties of Q's rounding
            + [2.0**e for e in range(-40, 41)] + [-(2.0**e) for e in range(-35, 35, 3)])


@settings(max_examples=400, deadline=None)
@given(m=st.one_of(st.sampled_from(_M_EDGES), st.floats(allow_nan=False, allow_infinity=False),
                   st.floats(-4.0, 4.0, allow_nan=False),
                   st.builds(lambda n, e: math.ldexp(2 * n + 1, e), st.integers(1 << 30, (1 << 31) - 1),
                             st.integers(-70, 10))),
       rounding=st.sampled_from(["double", "single"]))
def test_quantize_multiplier(m, rounding):
    q, s = g.quantize_multiplier(m, rounding=rounding)
    assert (int(q), int(s)) == ref_quantize_multiplier(m, single=rounding == "single")
    assert q.dtype == np.int32 and s.dtype == np.int32


def test_quantize_multiplier_edges_and_vectorised():
    q, s = g.quantize_multiplier(np.array(_M_EDGES))
    want = [ref_quantize_multiplier(m) for m in _M_EDGES]
    np.testing.assert_array_equal(np.stack([q, s], axis=1), want)
    # powers of two are exactly 2**30 with shift log2(m) + 1; just below 1 rounds up to (2**30, 1)
    assert g.quantize_multiplier(2.0**-5) == (1 << 30, -4)
    assert g.quantize_multiplier(1 - 2.0**-33) == (1 << 30, 1)
    assert g.quantize_multiplier(1 - 2.0**-31) == ((1 << 31) - 1, 0)
    assert g.quantize_multiplier(1e-12) == (0, 0)  # e < -31 flushes
    assert g.quantize_multiplier(2.0**40) == (1 << 30, 41)
    assert g.quantize_multiplier(2.0**40, rounding="single") == ((1 << 31) - 1, 30)


def test_quantize_multiplier_upstream_golden():
    # TFLite quantization_util_test.cc
    sm = g.quantize_multiplier_smaller_than_one
    assert sm(0.25) == (1073741824, -1)
    assert sm(0.50 - 5e-9) == (2147483627, -1)
    assert sm(0.50 - 1e-10) == (1073741824, 0)
    assert sm(0.50) == (1073741824, 0)
    assert sm(0.75) == (1610612736, 0)
    assert sm(1 - 1e-9) == (2147483646, 0)
    for bad in (-0.1, 1 - 1e-15, 1 - 1e-17, 1.0):
        with pytest.raises(AttributeValueError, match="m:"):
            sm(bad)
    gt = g.quantize_multiplier_greater_than_one
    assert gt(1 + 1e-11) == (1073741824, 1)
    assert gt(1.25) == (1342177280, 1)
    assert gt(1.50) == (1610612736, 1)
    assert gt(1.75) == (1879048192, 1)
    assert gt(2 - 1e-9) == (2147483647, 1)
    assert gt(2 - 1e-11) == (1073741824, 2)
    assert gt(2) == (1073741824, 2)
    with pytest.raises(AttributeValueError, match="m:"):
        gt(1 + 1e-16)
    f32 = float(np.float32(0.99))
    assert g.quantize_multiplier(math.ldexp(1.0, -31)) == (1073741824, -30)
    assert g.quantize_multiplier(math.ldexp(1.0, -32)) == (1073741824, -31)
    assert g.quantize_multiplier(math.ldexp(f32, -32)) == (0, 0)
    assert g.quantize_multiplier(math.ldexp(1.0, -33)) == (0, 0)
    w = np.array([-4, -2, -1, -0.5, -0.25, -0.125, 0, 0.125, 0.25, 0.5, 1, 2, 4])
    q, s = g.quantize_multiplier(w)
    np.testing.assert_array_equal(q, [-1073741824] * 6 + [0] + [1073741824] * 6)
    np.testing.assert_array_equal(s, [3, 2, 1, 0, -1, -2, 0, -2, -1, 0, 1, 2, 3])


# ---------------------------------------------------------------------------------------------------------------
# §6.5 fixed-point exp / logistic / tanh


def _subset(rng, n):
    extra = rng.integers(-32768, 32768, size=n)
    return sorted(set(edges(16)) | set(int(v) for v in extra))


@pytest.mark.parametrize("ib", range(7))
def test_logistic_tanh_exhaustive_int16(ib):
    lo, th = g.logistic(ALL_I16, ib), g.tanh(ALL_I16, ib)
    assert lo.dtype == np.int16 and th.dtype == np.int16
    assert lo.flags.writeable and not np.shares_memory(lo, g.logistic(ALL_I16, ib))  # never the cached table
    np.testing.assert_array_equal(g.tanh(ALL_I16.astype(np.int32)[::-1], ib), th[::-1])  # other dtypes, strides
    rng = np.random.default_rng(100 + ib)
    for a in _subset(rng, 1500):
        assert lo[a + 32768] == ref_logistic(a, ib, 16), (ib, a)
        assert th[a + 32768] == ref_tanh(a, ib, 16), (ib, a)
    # outside oracle: float sigmoid / tanh; gemmlowp's int16 arithmetic is good to a few Q0.15 LSB
    # (measured max: logistic 6.7, tanh 12.0 LSB; tanh's last Newton step is scaled by 4)
    xf = ALL_I16.astype(np.float64) / 2 ** (15 - ib)
    assert np.abs(lo - 32768 / (1 + np.exp(-xf))).max() <= 8
    assert np.abs(th - 32768 * np.tanh(xf)).max() <= 13
    # structure: odd tanh, logistic(a) + logistic(-a) = 1 (raw 32767), both away from -32768
    a = ALL_I16[1:]
    nz = a != 0
    np.testing.assert_array_equal(th[1:], -g.tanh(-a, ib))
    np.testing.assert_array_equal(lo[1:][nz].astype(np.int32) + g.logistic(-a[nz], ib), 32767)
    assert lo[32768] == 16384 and th[32768] == 0


def test_logistic_tanh_upstream_golden():
    # TFLite tensor_utils_test.cc: QuantTanh0Test, QuantTanh3Test, QuantTanh4Test, QuantSigmoidTest
    x = np.array([-145, 899, -176, -35, 264, 289, 8, 27, -37, -1310, -120, 127, -16, 106, 370, -583, -299, 93,
                  -548, 548, 653, -29, -53, 1058, -52, -164, -149, -635, 201, -1297], dtype=np.int16)
    np.testing.assert_array_equal(g.tanh(x, 0), [
        -136, 904, -176, -40, 260, 292, 8, 28, -44, -1304, -120, 120, -24, 112, 376, -576, -308, 88,
        -544, 544, 652, -32, -60, 1056, -56, -156, -144, -636, 192, -1300])
    np.testing.assert_array_equal(g.tanh(x, 3), [
        -1156, 7076, -1412, -276, 2104, 2308, 64, 220, -288, -10132, -964, 1016, -120, 844, 2944, -4640, -2392,
        736, -4352, 4352, 5180, -232, -428, 8276, -412, -1308, -1196, -5044, 1612, -10044])
    x4 = np.array([-5, 163, -31, -5, 54, 90, 1, 2, -4, -42, -8, 29, 0, 47, 150,
                   -26, -36, 9, -73, 25, 14, -2, -1, 29, -10, -12, -18, -29, 51, -92], dtype=np.int16)
    np.testing.assert_array_equal(g.tanh(x4, 4), [
        -76, 2596, -496, -76, 856, 1436, 24, 36, -64, -672, -120, 456, 0, 752, 2400,
        -412, -576, 148, -1168, 400, 216, -36, -24, 456, -164, -192, -292, -456, 820, -1476])
    xs = np.array([-10500, 1398, -6963, -7404, 485, -5401, -1757, -7668, -19248, -9692, -24249, -17923, -15840,
                   -10026, 5249, -89, 1787, -16178, -6691, -19524, -13439, -24048, -1123, 32767, -17267, -3378,
                   823, 11482, -11139, 7508], dtype=np.int16)
    np.testing.assert_array_equal(g.logistic(xs, 3), [
        2339, 19152, 5063, 4617, 17350, 6917, 12921, 4371, 299, 2813, 89, 409, 673, 2605, 25646, 16207, 19904,
        615, 5353, 273, 1187, 91, 14153, 32756, 475, 9983, 18026, 30898, 2023, 28246])


@settings(max_examples=150, deadline=None)
@given(data=st.data(), bits=BITS)
def test_logistic_tanh_all_integer_bits(data, bits):
    ib = data.draw(st.integers(0, bits - 4))
    a = data.draw(ints(bits))
    assert int(g.logistic(a, ib, bits=bits)) == ref_logistic(a, ib, bits)
    assert int(g.tanh(a, ib, bits=bits)) == ref_tanh(a, ib, bits)
    ib_exp = data.draw(st.integers(0, bits - 3))
    assert int(g.logistic(a, ib_exp, bits=bits)) == ref_logistic(a, ib_exp, bits)
    assert int(g.exp_on_negative_values(a, ib_exp, bits=bits)) == ref_exp_neg(a, ib_exp, bits)


@settings(max_examples=200, deadline=None)
@given(a=ints(16) | ints(32), bits=BITS)
def test_exp_interval_and_newton_pieces(a, bits):
    a = wrap(a, bits)
    assert int(g.exp_on_interval_between_negative_one_quarter_and_0_excl(a, bits=bits)) == \
        ref_exp_on_interval(a, bits)
    assert int(g.one_over_one_plus_x(a, bits=bits)) == ref_one_over(a, bits)
    assert int(g.one_minus_x_over_one_plus_x(a, bits=bits)) == ref_one_minus_over(a, bits)
    assert int(g.rounding_half_sum(a, a // 3, bits=bits)) == wrap(c_div(a + a // 3 + (1 if a + a // 3 >= 0 else -1),
                                                                        2), bits)


def test_int32_fixed_point_accuracy():
    # bounds in Q0.31 LSB, about twice the measured maxima (logistic 152, tanh 300, exp 492, 1/(1+x) 6.6)
    rng = np.random.default_rng(11)
    a = rng.integers(*I32, size=50000, endpoint=True)
    for ib in (0, 3, 5, 6, 12):
        xf = np.clip(a / 2.0 ** (31 - ib), -700, 700)
        assert np.abs(g.logistic(a, ib, bits=32) - 2.0**31 / (1 + np.exp(-xf))).max() <= 256
        assert np.abs(g.tanh(a, ib, bits=32) - 2.0**31 * np.tanh(xf)).max() <= 512
        neg = -np.abs(a)
        assert np.abs(g.exp_on_negative_values(neg, ib, bits=32) - 2.0**31 * np.exp(neg / 2.0 ** (31 - ib))).max() \
            <= 1024
    x = rng.integers(0, 1 << 31, size=50000)
    assert np.abs(g.one_over_one_plus_x(x, bits=32) - 2.0**31 / (1 + x / 2.0**31)).max() <= 16


def test_exp_on_negative_values_int16_accuracy_and_clamp():
    for ib in range(14):
        neg = ALL_I16[:32769]  # -32768 .. 0
        got = g.exp_on_negative_values(neg, ib)
        assert np.abs(got - 32768 * np.exp(neg / 2.0 ** (15 - ib))).max() <= 3, ib  # measured <= 1.95
    # below -32 the result is clamped to exactly 0 (integer_bits > 5)
    assert g.exp_on_negative_values(-32 * 2**9 - 1, 6) == 0
    assert g.exp_on_negative_values(0, 6) == 32767


# ---------------------------------------------------------------------------------------------------------------
# §6.4 GetInvSqrtQuantizedMultiplierExp


@settings(max_examples=300, deadline=None)
@given(x=st.one_of(st.sampled_from([0, 1, 2, 3, 4, (1 << 27) - 1, 1 << 27, (1 << 29) - 1, 1 << 29, I32[1]]),
                   st.integers(0, I32[1]), st.integers(0, 1 << 12)),
       reverse_shift=st.sampled_from([-1, 1]))
def test_inv_sqrt_matches_reference(x, reverse_shift):
    q, s = g.get_inv_sqrt_quantized_multiplier_exp(x, reverse_shift)
    assert (int(q), int(s)) == ref_inv_sqrt(x, reverse_shift)


def test_inv_sqrt_upstream_golden_and_accuracy():
    # TFLite quantization_util_test.cc GetInvSqrtQuantizedMultiplierExp (reverse_shift = 1)
    xs = [0, 1, 2, 3, 4, 100, 10000, 1000000, 100000000, 1 << 30, I32[1]]
    want = [(I32[1], 0), (I32[1], 0), (1518498372, 0), (1239850284, 0), (1073741828, 0), (214748363, 0),
            (343597361, 4), (274877901, 7), (219902323, 10), (268435457, 12), (189812531, 12)]
    q, s = g.get_inv_sqrt_quantized_multiplier_exp(np.array(xs), 1)
    np.testing.assert_array_equal(np.stack([q, s], axis=1), want)
    rng = np.random.default_rng(5)
    x = np.concatenate([np.arange(2, 5000), rng.integers(2, 1 << 31, size=20000)])
    q, s = g.get_inv_sqrt_quantized_multiplier_exp(x, -1)
    approx = q / 2.0**31 * 2.0 ** s.astype(np.float64)
    assert np.abs(approx * np.sqrt(x) - 1).max() < 2e-6


def test_layer_norm_upstream_golden():
    # TFLite tensor_utils_test.cc QuantApplyLayerNormTest, computed per litert.md §6.4 with our primitives
    x = np.array([-310, 596, 34, -68, 475, 92, 672, -54, -913, -200, -1194, -836, -620, -237, 991,
                  533, 721, -736, -8, -941, -372, -1084, 591, 2557, -779, 175, 582, 956, -287, 944]).reshape(2, 15)
    w = np.array([21849, 22882, 20626, 23854, 24779, 26354, 12980, 26231, 23716, 27271, 24937, 22647, 24715, 22854,
                  19646])
    bias = np.array([-14175520, -13805465, -16027609, -13786809, -13321033, -14399810, -15055368, -14536623,
                     -14508746, -13784007, -15206609, -15125830, -14996304, -14847597, -12814379])
    out = []
    for row in x:
        n = row.size
        mean = c_div(int(row.sum()) * 1024, n)
        var = c_div(int((row * row).sum()) * c_div(1 << 20, n) - mean * mean, 1 << 20)
        a, b = g.get_inv_sqrt_quantized_multiplier_exp(var if var >= 1 else 1, -1)  # variance_guard = 1
        y = g.multiply_by_quantized_multiplier(1024 * row - mean, a, b).astype(np.int64)
        v = [c_div(int(t) + (512 if t > 0 else -512), 1024) for t in y * w + bias]
        out += np.clip(g.multiply_by_quantized_multiplier(np.array(v), 1895840000, -13 + 12), *I16).tolist()
    assert out == [-9407, 5846, -4802, -5295, 4822, -2390, 930, -5283, -20352, -7846, -26539, -18704, -15829,
                   -8627, 10313, -2522, -132, -16058, -8206, -19158, -13296, -14407, -1235, 20612, -18591, -6738,
                   -2274, 2602, -11622, 1565]


# ---------------------------------------------------------------------------------------------------------------
# argument validation


def test_validation_messages():
    with pytest.raises(DTypeError, match="a: expected an integer"):
        g.logistic(np.array([0.5]), 3)
    with pytest.raises(AttributeValueError, match=r"a: expected int16 values .* got 32768"):
        g.tanh(np.array([32768]), 3)
    with pytest.raises(AttributeValueError, match="integer_bits"):
        g.tanh(0, 13)
    with pytest.raises(AttributeValueError, match="integer_bits"):
        g.logistic(0, -1)
    with pytest.raises(DTypeError, match="integer_bits"):
        g.logistic(0, 3.0)
    with pytest.raises(AttributeValueError, match="bits"):
        g.logistic(0, 3, bits=8)
    with pytest.raises(AttributeValueError, match="shift"):
        g.multiply_by_quantized_multiplier(1, 1 << 30, 31)
    with pytest.raises(AttributeValueError, match="Q"):
        g.multiply_by_quantized_multiplier(1, -5, 0, rounding="single")
    with pytest.raises(AttributeValueError, match="rounding"):
        g.multiply_by_quantized_multiplier(1, 5, 0, rounding="nearest")
    with pytest.raises(AttributeValueError, match="x:"):
        g.multiply_by_quantized_multiplier(1 << 47, 5, 0, x_bits=64)
    with pytest.raises(AttributeValueError, match="e:"):
        g.rounding_divide_by_pot(5, -1)
    with pytest.raises(AttributeValueError, match="m:"):
        g.quantize_multiplier(float("nan"))
    with pytest.raises(DTypeError, match="m:"):
        g.quantize_multiplier("0.5")
    with pytest.raises(AttributeValueError, match="x:"):
        g.get_inv_sqrt_quantized_multiplier_exp(-1)


_BAD = st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.integers(-(1 << 70), 1 << 70),
                 st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=3), st.booleans())


@settings(max_examples=200, deadline=None)
@given(a=_BAD, ib=st.one_of(st.integers(-5, 40), st.floats(0, 5)), bits=st.sampled_from([8, 16, 32, 64]),
       fn=st.sampled_from(["logistic", "tanh", "exp_on_negative_values"]))
def test_validation_fuzz(a, ib, bits, fn):
    """Bad input raises a fusedrnn error (never a bare NumPy error or a silent garbage result)."""
    try:
        out = getattr(g, fn)(a, ib, bits=bits)
    except (AttributeValueError, DTypeError):
        return
    # accepted: it must have been a valid call
    assert bits in (16, 32) and isinstance(ib, int) and isinstance(a, int) and not isinstance(a, bool)
    assert -(1 << (bits - 1)) <= a < (1 << (bits - 1))
    assert np.asarray(out).dtype == (np.int16 if bits == 16 else np.int32)
