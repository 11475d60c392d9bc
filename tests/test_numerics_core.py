"""fusedrnn.numerics.core, the unchecked cores the integer targets call per timestep: each path (a scalar shift
with Python-int constants, an array of shifts, the fast forms with a stated precondition) against slow Python-int
references, and the validated public functions that call them (trunc_div, bit_length, rounding_divide_by_pot's
int64 headroom)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fixed_point import ref_round  # the Fraction rounding reference of the validated functions

from fusedrnn.errors import AttributeValueError
from fusedrnn.numerics import core, fixed_point, gemmlowp

MODES = ("up", "convergent", "half_away", "floor", "trunc")


def lims(w: int) -> tuple[int, int]:
    return -(2 ** (w - 1)), 2 ** (w - 1) - 1


def ref_wrap(x: int, w: int) -> int:
    m = x % 2**w
    return m - 2**w if m >= 2 ** (w - 1) else m


def arr(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@st.composite
def values_and_shift(draw, widths=(2, 8, 16, 31, 32, 40, 63, 64)):
    w = draw(st.sampled_from(widths))
    lo, hi = lims(w)
    xs = draw(st.lists(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1, lo + 1, hi - 1])),
                       min_size=1, max_size=12))
    n = draw(st.one_of(st.integers(-w - 2, w + 2), st.sampled_from([w - 1, w, 1 - w, 70, -70])))
    return w, arr(xs), n


@settings(max_examples=300, deadline=None)
@given(values_and_shift(), st.sampled_from(MODES))
def test_scalar_and_array_shift_paths_agree_with_the_public_functions(case, mode):
    """A Python-int shift, a NumPy-int shift and an array of the same shift give the validated result."""
    w, x, n = case
    want = fixed_point.asr_rnd(x, n, width=w, mode=mode)
    for shift in (n, np.int64(n), np.full(x.shape, n, np.int64)):
        np.testing.assert_array_equal(core.asr_rnd(x, shift, w, mode), want)
    np.testing.assert_array_equal(core.asl_sat(x, n, w), fixed_point.asl_sat(x, n, width=w))
    np.testing.assert_array_equal(core.asl_sat(x, np.full(x.shape, n), w), fixed_point.asl_sat(x, n, width=w))
    np.testing.assert_array_equal(core.asr(x, n, w), fixed_point.asr(x, n, width=w))
    np.testing.assert_array_equal(core.asr(x, np.full(x.shape, n), w), fixed_point.asr(x, n, width=w))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=10), st.integers(1, 62),
       st.sampled_from(["up", "convergent"]))
def test_asr_rnd_nosat_is_asr_rnd_where_the_add_cannot_saturate(xs, n, mode):
    x = arr(xs)
    got = core.asr_rnd_nosat(x, n, mode)
    np.testing.assert_array_equal(got, core.asr_rnd(x, n, 64, mode))
    np.testing.assert_array_equal(got, arr([ref_round(Fraction(v, 2**n), mode) for v in xs]))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=10))
def test_wrap_sat_clamp(bits, xs):
    x = arr(xs)
    np.testing.assert_array_equal(core.wrap(x, bits), arr([ref_wrap(v, bits) for v in xs]))
    lo, hi = lims(bits)
    want = arr([min(max(v, lo), hi) for v in xs])
    np.testing.assert_array_equal(core.sat(x, bits), want)
    y = x.copy()
    assert core.sat(y, bits, out=y) is y
    np.testing.assert_array_equal(y, want)
    y = x.copy()
    core.clamp(y, -5, 7, out=y)
    np.testing.assert_array_equal(y, arr([min(max(v, -5), 7) for v in xs]))
    if bits < 64:
        np.testing.assert_array_equal(core.sat_unsigned(x, bits), arr([min(max(v, 0), 2**bits - 1) for v in xs]))
    assert int(core.wrap(xs[0], bits)) == ref_wrap(xs[0], bits)  # Python ints are taken too


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=8), st.integers(0, 61))
def test_rdpot_scalar_and_array_exponents(xs, e):
    x = arr(xs)
    want = arr([ref_round(Fraction(v, 2**e), "half_away") for v in xs])
    np.testing.assert_array_equal(core.rdpot(x, e), want)
    np.testing.assert_array_equal(core.rdpot(x, np.full(x.shape, e)), want)
    np.testing.assert_array_equal(core.rdpot(x[:, None], arr([0, e])), np.stack([x, want], axis=1))
    # an int32 array keeps its dtype where x + 2^(e-1) fits
    small = np.clip(x, -(2**30), 2**30).astype(np.int32)
    if e <= 30:
        got = core.rdpot(small, e)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, core.rdpot(small.astype(np.int64), e))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(2**63 - 2**62, 2**63 - 1), min_size=1, max_size=6), st.integers(0, 62))
def test_rounding_divide_by_pot_near_the_int64_maximum(xs, e):
    """The public function covers all of int64: x + 2^(e-1) beyond int64 goes through RDPOT(x - 2^e) + 1."""
    got = gemmlowp.rounding_divide_by_pot(arr(xs), e)
    np.testing.assert_array_equal(got, arr([ref_round(Fraction(v, 2**e), "half_away") for v in xs]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=8), st.integers(-(2**31), 2**31 - 1))
def test_srdhm_saturation_is_one_clamp(xs, b):
    x = arr(xs + [-(2**31)])
    got = core.srdhm(x, b, 32)
    np.testing.assert_array_equal(got, gemmlowp.srdhm32(x, b))
    if b != -(2**31):
        np.testing.assert_array_equal(core.srdhm(x, b, 32, saturate=False), got)
    assert core.srdhm(np.int64(-(2**31)), -(2**31), 32) == 2**31 - 1
    assert core.srdhm(-32768, np.int64(-32768), 16) == 32767


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6), st.integers(-(2**31), 2**31 - 1),
       st.integers(-31, 30))
def test_requant_any_multiplier_equals_the_public_function(xs, q, shift):
    """Negative multipliers and INT32_MIN (which the kernels never prepare) go through the same core."""
    x = arr(xs + [-(2**31)])
    want = gemmlowp.multiply_by_quantized_multiplier(x.astype(np.int32), q, shift)
    np.testing.assert_array_equal(core.Requant(q, shift)(x), want)
    np.testing.assert_array_equal(core.Requant(np.full(x.shape, q), np.full(x.shape, shift))(x), want)


def test_requant_keeps_scalar_shapes_and_broadcasts():
    r = core.Requant(1 << 30, -1)
    assert np.ndim(r(np.int64(6))) == 0 and int(r(np.int64(6))) == 2  # 6 · 1/2 · 1/2 = 1.5 -> 2
    got = core.Requant(arr([[1 << 30], [1 << 30]]), arr([0, -1, -2]))(arr([8]))
    np.testing.assert_array_equal(got, [[4, 2, 1], [4, 2, 1]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)), min_size=1,
                max_size=10))
def test_trunc_div(pairs):
    pairs = [(a, b) for a, b in pairs if b != 0 and not (a == -(2**63) and b == -1)]
    if not pairs:
        return
    a, b = arr([p[0] for p in pairs]), arr([p[1] for p in pairs])
    want = arr([(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in pairs])
    np.testing.assert_array_equal(fixed_point.trunc_div(a, b), want)
    ok = (a != -(2**63)) & (b != -(2**63))
    np.testing.assert_array_equal(core.trunc_div(a[ok], b[ok]), want[ok])


def test_trunc_div_examples_and_refusals():
    np.testing.assert_array_equal(fixed_point.trunc_div([7, -7, 7, -7, 0], [2, 2, -2, -2, 3]), [3, -3, -3, 3, 0])
    assert fixed_point.trunc_div(-(2**63), -(2**63)) == 1
    assert fixed_point.trunc_div(-(2**63), 2) == -(2**62)
    assert fixed_point.trunc_div(2**63 - 1, -(2**63)) == 0
    with pytest.raises(AttributeValueError, match="b:"):
        fixed_point.trunc_div(1, 0)
    with pytest.raises(AttributeValueError, match="overflows"):
        fixed_point.trunc_div(-(2**63), -1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 1, 2**53 - 1, 2**53 + 1, 2**63 - 1])),
                min_size=1, max_size=10))
def test_bit_length(xs):
    np.testing.assert_array_equal(fixed_point.bit_length(arr(xs)), arr([v.bit_length() for v in xs]))
    np.testing.assert_array_equal(core.bit_length(arr(xs)), arr([v.bit_length() for v in xs]))


def test_bit_length_refuses_negative_values():
    with pytest.raises(AttributeValueError, match="non-negative"):
        fixed_point.bit_length([3, -1])


@pytest.mark.parametrize("k", [0, 1, 5, 31, 62, 63])
def test_trunc_div_pot(k):
    xs = [-(2**63), -(2**62) - 1, -5, -1, 0, 1, 5, 2**63 - 1]
    np.testing.assert_array_equal(core.trunc_div_pot(arr(xs), k),
                                  arr([(abs(v) >> k) * (1 if v >= 0 else -1) for v in xs]))
