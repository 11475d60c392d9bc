"""fusedrnn.numerics.fixed_point against slow scalar references written with Python ints and Fractions.

Two references for the MLI rounding shift: ``ref_asr_rnd_mli`` models the C code of ``mli_math_asr_rnd_fx``
(``mli.md`` §2.1) on a W-bit type, and ``ref_round`` is the plain mathematical rounding of the Fraction x / 2^n;
a property test pins down exactly where the two differ (the saturating add of ROUND_UP and the n == W-1 rounding
constant of 32/64-bit types).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fusedrnn.errors import AttributeValueError, DTypeError, FusedRNNError, ShapeError
from fusedrnn.numerics import fixed_point as fp

MAIN_WIDTHS = (8, 16, 32, 40, 64)
FAST = settings(max_examples=150, deadline=None)
MODES = fp.ROUNDING_MODES


# ----------------------------------------------------------------------------------------------------------
# scalar references (Python ints: unbounded, >> is floor division by 2^n)
# ----------------------------------------------------------------------------------------------------------


def lims(w: int) -> tuple[int, int]:
    return -(2 ** (w - 1)), 2 ** (w - 1) - 1


def ref_sat(x: int, w: int) -> int:
    lo, hi = lims(w)
    return min(max(x, lo), hi)


def ref_wrap(x: int, w: int) -> int:
    m = x % 2**w
    return m - 2**w if m >= 2 ** (w - 1) else m


def ref_asl(x: int, n: int, w: int) -> int:
    """Saturating left shift; n < 0 floor right shift; n > W-1: ±max unless x == 0."""
    lo, hi = lims(w)
    if n < 0:
        return ref_asr(x, -n, w)
    if n > w - 1:
        return 0 if x == 0 else (hi if x > 0 else lo)
    return ref_sat(x * 2**n, w)


def ref_asr(x: int, n: int, w: int) -> int:
    if n < 0:
        return ref_asl(x, -n, w)
    if n > w - 1:
        return -1 if x < 0 else 0
    return x // 2**n


def ref_round(v: Fraction, mode: str) -> int:
    """Mathematical rounding of a Fraction."""
    fl = v.numerator // v.denominator
    d = v - fl
    if mode == "floor":
        return fl
    if mode == "trunc":
        return fl if v >= 0 or d == 0 else fl + 1
    if mode == "up":
        return fl + (d >= Fraction(1, 2))
    if mode == "convergent":
        return fl + (d > Fraction(1, 2) or (d == Fraction(1, 2) and fl % 2 == 1))
    if mode == "half_away":
        return fl + (d >= Fraction(1, 2)) if v >= 0 else fl + (d > Fraction(1, 2))
    raise AssertionError(mode)


def ref_asr_rnd_mli(x: int, n: int, w: int, mode: str) -> int:
    """mli_math_asr_rnd_fx on a W-bit C type T, statement by statement.

    The rounding constant is ``(T)((one << n) >> 1)`` with ``T one = 1``: C promotes types narrower than int to
    32-bit int before shifting, so the shift is evaluated in max(W, 32) bits (two's complement) and cast to T.
    """
    if n < 0:
        return ref_asl(x, -n, w)
    if n == 0:
        return x
    if n > w - 1:
        return 0
    cw = max(w, 32)
    const = ref_wrap(ref_wrap(1 << n, cw) >> 1, w)
    if mode == "up":
        return ref_asr(ref_sat(x + const, w), n, w)
    r = ref_asr(x, n, w)
    if (x & const) != 0 and ((r & 1) != 0 or (x & ref_wrap(const - 1, cw)) != 0):
        return ref_sat(r + 1, w)
    return r


def ref_asr_rnd(x: int, n: int, w: int, mode: str) -> int:
    if mode in ("up", "convergent"):
        return ref_asr_rnd_mli(x, n, w, mode)
    if n < 0:
        return ref_asl(x, -n, w)
    return ref_round(Fraction(x, 2**n), mode)


def ref_norm(x: int, w: int) -> int:
    if x == 0:
        return w - 1
    hi = -1 if x < 0 else 0
    r = 0
    while (x >> r) != hi:
        r += 1
    return w - 1 - r


# ----------------------------------------------------------------------------------------------------------
# strategies
# ----------------------------------------------------------------------------------------------------------

widths = st.one_of(st.sampled_from(MAIN_WIDTHS), st.integers(2, 64))


def value_in(w: int) -> st.SearchStrategy[int]:
    lo, hi = lims(w)
    edges = [v for v in (lo, lo + 1, hi, hi - 1, 0, 1, -1, 2, -2) if lo <= v <= hi]
    pows = [s * 2**k + d for k in range(w - 1) for s in (1, -1) for d in (-1, 0, 1)]
    pows = [v for v in pows if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.sampled_from(pows), st.integers(lo, hi))


shift_amounts = st.one_of(st.integers(-3, 3), st.integers(-70, 70), st.sampled_from([-200, 200, 10**6, -(10**6)]))


@st.composite
def shift_cases(draw, max_len: int = 40):
    """(w, xs, ns): values in range, shift amounts concentrated near 0, W-1, W and beyond, and ties."""
    w = draw(widths)
    size = draw(st.integers(1, max_len))
    xs, ns = [], []
    for _ in range(size):
        n = draw(st.one_of(shift_amounts, st.sampled_from([w - 2, w - 1, w, w + 1, 1 - w, -w, -w - 1])))
        kind = draw(st.sampled_from(["any", "tie", "tie+1", "tie-1"]))
        if kind == "any" or not 1 <= n <= 64:
            x = draw(value_in(w))
        else:
            k = draw(st.integers(-(2**64), 2**64))
            low = 2 ** (n - 1) + {"tie": 0, "tie+1": 1, "tie-1": -1}[kind]
            x = ref_wrap((k << n) + low, w)  # low n bits kept: an exact tie (or a neighbour) at this shift
        xs.append(x)
        ns.append(n)
    return w, xs, ns


def arr(values):
    return np.array(values, dtype=np.int64)


# ----------------------------------------------------------------------------------------------------------
# element-wise primitives against the references
# ----------------------------------------------------------------------------------------------------------


@FAST
@given(st.integers(1, 64), st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=30))
def test_saturate_wrap_match_reference(bits, xs):
    np.testing.assert_array_equal(fp.saturate(arr(xs), bits), arr([ref_sat(x, bits) for x in xs]))
    np.testing.assert_array_equal(fp.wrap(arr(xs), bits), arr([ref_wrap(x, bits) for x in xs]))
    expect_u = [min(max(x, 0), 2**bits - 1) for x in xs]
    got_u = fp.saturate_unsigned(arr(xs), bits)
    assert got_u.dtype == (np.uint64 if bits == 64 else np.int64)
    assert [int(v) for v in got_u] == expect_u


@FAST
@given(st.integers(1, 64), st.lists(st.integers(2**63, 2**64 - 1), min_size=1, max_size=10))
def test_saturate_wrap_uint64_inputs(bits, xs):
    u = np.array(xs, dtype=np.uint64)
    np.testing.assert_array_equal(fp.saturate(u, bits), arr([ref_sat(x, bits) for x in xs]))
    np.testing.assert_array_equal(fp.wrap(u, bits), arr([ref_wrap(x, bits) for x in xs]))
    assert [int(v) for v in np.atleast_1d(fp.saturate_unsigned(u, bits))] == [min(x, 2**bits - 1) for x in xs]


@st.composite
def add_cases(draw):
    w = draw(widths)
    pairs = draw(st.lists(st.tuples(value_in(w), value_in(w)), min_size=1, max_size=40))
    return w, [a for a, _ in pairs], [b for _, b in pairs]


@FAST
@given(add_cases())
def test_add_sub_sat_match_reference(case):
    w, a, b = case
    pairs = list(zip(a, b, strict=True))
    np.testing.assert_array_equal(fp.add_sat(arr(a), arr(b), width=w), arr([ref_sat(x + y, w) for x, y in pairs]))
    np.testing.assert_array_equal(fp.sub_sat(arr(a), arr(b), width=w), arr([ref_sat(x - y, w) for x, y in pairs]))


@pytest.mark.parametrize("w", MAIN_WIDTHS)
def test_add_sub_sat_limits(w):
    lo, hi = lims(w)
    assert fp.add_sat(hi, hi, width=w) == hi
    assert fp.add_sat(lo, lo, width=w) == lo
    assert fp.add_sat(lo, -1, width=w) == lo
    assert fp.add_sat(hi, lo, width=w) == -1
    assert fp.sub_sat(lo, 1, width=w) == lo
    assert fp.sub_sat(0, lo, width=w) == hi
    assert fp.sub_sat(-1, lo, width=w) == hi
    assert fp.sub_sat(hi, -1, width=w) == hi


@FAST
@given(shift_cases())
def test_asl_asr_match_reference(case):
    w, xs, ns = case
    np.testing.assert_array_equal(fp.asl_sat(arr(xs), arr(ns), width=w),
                                  arr([ref_asl(x, n, w) for x, n in zip(xs, ns, strict=True)]))
    np.testing.assert_array_equal(fp.asr(arr(xs), arr(ns), width=w),
                                  arr([ref_asr(x, n, w) for x, n in zip(xs, ns, strict=True)]))


@settings(max_examples=120, deadline=None)
@given(shift_cases(), st.sampled_from(MODES))
def test_asr_rnd_matches_reference(case, mode):
    w, xs, ns = case
    got = fp.asr_rnd(arr(xs), arr(ns), width=w, mode=mode)
    np.testing.assert_array_equal(got, arr([ref_asr_rnd(x, n, w, mode) for x, n in zip(xs, ns, strict=True)]))


@settings(max_examples=60, deadline=None)
@given(shift_cases(), st.sampled_from(["up", "convergent"]))
def test_mli_rounding_is_math_rounding_except_documented_cases(case, mode):
    """The C model equals true rounding of x/2^n except: the saturating ROUND_UP add, and n == W-1 for W >= 32."""
    w, xs, ns = case
    lo, hi = lims(w)
    for x, n in zip(xs, ns, strict=True):
        if n < 1:
            continue
        mli = ref_asr_rnd_mli(x, n, w, mode)
        math = ref_round(Fraction(x, 2**n), mode)
        if n == w - 1 and w >= 32:
            continue  # the rounding constant (one << n) >> 1 reaches the sign bit: see the quirk test
        if mode == "up" and n <= w - 1 and x + 2 ** (n - 1) > hi:
            assert mli == hi >> n  # the add saturated
            continue
        assert mli == math, (x, n, w, mode)


@pytest.mark.parametrize("w", [32, 64])
def test_mli_round_constant_quirk_at_w_minus_1(w):
    """(one << (W-1)) >> 1 is -2^(W-2) in a 32/64-bit type: the C code's results at that one shift."""
    lo, hi = lims(w)
    n = w - 1
    xs = [0, 1, 2 ** (w - 2) - 1, 2 ** (w - 2), 2 ** (w - 2) + 1, hi, -1, -(2 ** (w - 2)), -(2 ** (w - 2)) - 1, lo]
    up = fp.asr_rnd(arr(xs), n, width=w, mode="up")
    conv = fp.asr_rnd(arr(xs), n, width=w, mode="convergent")
    np.testing.assert_array_equal(up, arr([-1, -1, -1, 0, 0, 0, -1, -1, -1, -1]))
    np.testing.assert_array_equal(conv, arr([0, 0, 0, 0, 1, 1, 0, 0, 0, 0]))
    # narrower types are promoted to int first: no quirk
    for w2 in (8, 16):
        lo2, hi2 = lims(w2)
        assert fp.asr_rnd(1, w2 - 1, width=w2, mode="up") == 0
        assert fp.asr_rnd(lo2, w2 - 1, width=w2, mode="convergent") == -1


@pytest.mark.parametrize("w", MAIN_WIDTHS)
@pytest.mark.parametrize("mode", MODES)
def test_asr_rnd_edges(w, mode):
    lo, hi = lims(w)
    xs = [lo, lo + 1, -3, -2, -1, 0, 1, 2, 3, hi - 1, hi]
    for n in (-(w + 1), -w, -1, 0, 1, 2, w - 2, w - 1, w, w + 1, 64, 65, 1000):
        got = fp.asr_rnd(arr(xs), n, width=w, mode=mode)
        np.testing.assert_array_equal(got, arr([ref_asr_rnd(x, n, w, mode) for x in xs]), err_msg=f"n={n}")


@pytest.mark.parametrize("mode", MODES)
def test_fast_and_general_paths_agree(mode):
    """One quirk shift (n == W-1, W >= 32) or a 64-bit value near the maximum sends a call down the exact
    general path; the same elements without it take the fast path. Both must match the reference."""
    rng = np.random.default_rng(5)
    for w in (16, 32, 40, 64):
        lo, hi = lims(w)
        xs = [int(v) for v in rng.integers(lo, hi, size=200, endpoint=True)] + [lo, hi, 0, -1, 1]
        ns = [int(v) for v in rng.integers(-w - 2, w + 3, size=len(xs))]
        expect = [ref_asr_rnd(x, n, w, mode) for x, n in zip(xs, ns, strict=True)]
        for extra_x, extra_n in ((0, 3), (5, w - 1), (hi, 2)):  # plain, quirk shift, near-max value
            got = fp.asr_rnd(arr(xs + [extra_x]), arr(ns + [extra_n]), width=w, mode=mode)
            np.testing.assert_array_equal(got, arr(expect + [ref_asr_rnd(extra_x, extra_n, w, mode)]))
        for n in (1, 5, w - 1):  # scalar shift amounts
            np.testing.assert_array_equal(fp.asr_rnd(arr(xs), n, width=w, mode=mode),
                                          arr([ref_asr_rnd(x, n, w, mode) for x in xs]))


def test_asr_rnd_spec_examples():
    # mli.md §2.1: ROUND_UP rounds half toward +inf, ROUND_CONVERGENT half to even
    assert list(fp.asr_rnd(arr([-5, 5, 3, -3, 1, -1]), 1, width=16, mode="up")) == [-2, 3, 2, -1, 1, 0]
    assert list(fp.asr_rnd(arr([-5, 5, 3, -3, 1, -1]), 1, width=16, mode="convergent")) == [-2, 2, 2, -2, 0, 0]
    assert list(fp.asr_rnd(arr([-5, 5, 3, -3]), 1, width=16, mode="half_away")) == [-3, 3, 2, -2]
    assert fp.asr_rnd(32767, 2, width=16, mode="up") == 32767 >> 2  # saturating add: max >> n
    assert fp.asr_rnd(-7, 20, width=16, mode="up") == 0  # n > W-1 -> 0 even for negative x
    assert fp.asr(-7, 20, width=16) == -1
    assert fp.asl_sat(3, 20, width=16) == 32767 and fp.asl_sat(0, 20, width=16) == 0
    assert fp.asl_sat(-3, 20, width=16) == -32768


@FAST
@given(shift_cases(max_len=10), st.sampled_from(MODES))
def test_shift_amounts_broadcast(case, mode):
    w, xs, ns = case
    x = arr(xs)[:, None]
    n = arr(ns)[None, :]
    got = fp.asr_rnd(x, n, width=w, mode=mode)
    assert got.shape == (len(xs), len(ns))
    expect = [[ref_asr_rnd(a, b, w, mode) for b in ns] for a in xs]
    np.testing.assert_array_equal(got, np.array(expect, dtype=np.int64))
    # scalars in, NumPy scalar out
    s = fp.asr_rnd(int(xs[0]), int(ns[0]), width=w, mode=mode)
    assert np.ndim(s) == 0 and int(s) == ref_asr_rnd(xs[0], ns[0], w, mode)


@FAST
@given(st.data())
def test_norm_matches_reference(data):
    w = data.draw(widths)
    xs = data.draw(st.lists(value_in(w), min_size=1, max_size=40))
    np.testing.assert_array_equal(fp.norm(arr(xs), width=w), arr([ref_norm(x, w) for x in xs]))


def test_norm_edges():
    assert list(fp.norm(arr([0, -1, 1, -(2**31), 2**31 - 1, 2**30, -(2**30) - 1]), width=32)) == [31, 31, 30, 0, 0,
                                                                                                  0, 0]
    assert list(fp.norm(arr([2**63 - 1, -(2**63), 2**62, 2**53 + 1, 2**53 - 1]), width=64)) == [0, 0, 0, 9, 10]


@FAST
@given(shift_cases(max_len=20), st.sampled_from([8, 16, 32, 64]), st.sampled_from(MODES))
def test_cast_fx(case, out_bits, mode):
    w, xs, ns = case
    got = fp.cast_fx(arr(xs), arr(ns), in_width=w, out_bits=out_bits, mode=mode)
    expect = [ref_sat(ref_asr_rnd(x, n, w, mode), out_bits) for x, n in zip(xs, ns, strict=True)]
    np.testing.assert_array_equal(got, arr(expect))


def test_container_dtypes_skip_or_check_range():
    x16 = np.array([-32768, 32767, 5], dtype=np.int16)
    np.testing.assert_array_equal(fp.asr_rnd(x16, 1, width=16), [-16384, 16383, 3])  # the ROUND_UP add saturates
    with pytest.raises(AttributeValueError, match="x: expected values in the signed 8-bit range"):
        fp.asr_rnd(x16, 1, width=8)


# ----------------------------------------------------------------------------------------------------------
# quantize_fx / dequantize_fx
# ----------------------------------------------------------------------------------------------------------


def ref_quantize_fx(x: float, f: int, bits: int, mode: str) -> int:
    lo, hi = lims(bits)
    if x == np.inf:
        return hi
    if x == -np.inf:
        return lo
    return ref_sat(ref_round(Fraction(x) * Fraction(2) ** f, mode), bits)


finite_or_inf = st.one_of(
    st.floats(allow_nan=False, width=64),
    st.floats(allow_nan=False, width=32),
    st.integers(-(2**20), 2**20).map(lambda k: k / 2),  # exact halves: ties
    st.integers(-(2**20), 2**20).map(lambda k: k / 8),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 2.0**63, -(2.0**63), 2.0**62, 1e300, -1e300]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite_or_inf, st.integers(-40, 40)), min_size=1, max_size=30),
       st.sampled_from([1, 8, 16, 32, 40, 53, 63, 64]), st.sampled_from(MODES))
def test_quantize_fx_matches_reference(pairs, bits, mode):
    xs = [p[0] for p in pairs]
    fs = [p[1] for p in pairs]
    got = fp.quantize_fx(np.array(xs), arr(fs), bits=bits, mode=mode)
    np.testing.assert_array_equal(got, arr([ref_quantize_fx(x, f, bits, mode) for x, f in zip(xs, fs, strict=True)]))


@FAST
@given(st.lists(st.tuples(st.integers(-(2**53), 2**53), st.integers(-1100, 1100)), min_size=1, max_size=30))
def test_dequantize_fx_matches_reference(pairs):
    qs = [p[0] for p in pairs]
    fs = [p[1] for p in pairs]
    got = fp.dequantize_fx(arr(qs), arr(fs))
    assert got.dtype == np.float64
    expect = []
    for q, f in pairs:
        v = Fraction(q) / Fraction(2) ** f
        expect.append(float(v) if abs(v) < Fraction(2) ** 1024 else float(np.sign(q)) * np.inf)
    np.testing.assert_array_equal(got, np.array(expect))


@FAST
@given(st.integers(-(2**15), 2**15 - 1), st.integers(-20, 30))
def test_quantize_dequantize_fx_round_trip(q, f):
    assert fp.quantize_fx(fp.dequantize_fx(q, f), f, bits=16) == q


def test_quantize_fx_refuses_nan():
    with pytest.raises(AttributeValueError, match="x: expected no NaN"):
        fp.quantize_fx(np.array([1.0, np.nan]), 3, bits=8)


# ----------------------------------------------------------------------------------------------------------
# argument validation (fuzzed)
# ----------------------------------------------------------------------------------------------------------

bad_widths = st.one_of(st.integers(-100, 1), st.integers(65, 10**6), st.floats(allow_nan=True), st.booleans(),
                       st.text(max_size=3), st.none())


@settings(max_examples=80, deadline=None)
@given(bad_widths, st.sampled_from(["add_sat", "sub_sat", "asl_sat", "asr", "asr_rnd", "norm"]))
def test_bad_width_is_refused(width, fn):
    call = {
        "add_sat": lambda: fp.add_sat(1, 2, width=width),
        "sub_sat": lambda: fp.sub_sat(1, 2, width=width),
        "asl_sat": lambda: fp.asl_sat(1, 2, width=width),
        "asr": lambda: fp.asr(1, 2, width=width),
        "asr_rnd": lambda: fp.asr_rnd(1, 2, width=width),
        "norm": lambda: fp.norm(1, width=width),
    }[fn]
    with pytest.raises((AttributeValueError, DTypeError), match="width"):
        call()


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-100, 0), st.integers(65, 1000), st.floats(), st.booleans()))
def test_bad_bits_is_refused(bits):
    for call in (lambda: fp.saturate(1, bits), lambda: fp.wrap(1, bits), lambda: fp.saturate_unsigned(1, bits),
                 lambda: fp.quantize_fx(1.0, 0, bits=bits)):
        with pytest.raises((AttributeValueError, DTypeError), match="bits"):
            call()


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(), st.none()))
def test_bad_mode_is_refused(mode):
    assume(mode not in MODES)
    with pytest.raises(AttributeValueError, match="mode"):
        fp.asr_rnd(1, 1, width=16, mode=mode)
    with pytest.raises(AttributeValueError, match="mode"):
        fp.quantize_fx(1.0, 1, bits=16, mode=mode)


@settings(max_examples=80, deadline=None)
@given(widths, st.data())
def test_out_of_range_values_are_refused(w, data):
    lo, hi = lims(w)
    assume(w < 64)
    bad = data.draw(st.one_of(st.integers(hi + 1, 2**63 - 1), st.integers(-(2**63), lo - 1)))
    with pytest.raises(AttributeValueError, match=rf"x: expected values in the signed {w}-bit range"):
        fp.asr_rnd(arr([0, bad]), 1, width=w)
    with pytest.raises(AttributeValueError, match=r"b: expected values"):
        fp.add_sat(0, bad, width=w)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([np.float32, np.float64, np.bool_, np.complex64]))
def test_non_integer_dtypes_are_refused(dt):
    x = np.zeros(3, dtype=dt)
    with pytest.raises(DTypeError, match="x: expected an integer"):
        fp.asr_rnd(x, 1, width=16)
    with pytest.raises(DTypeError, match="n: expected an integer"):
        fp.asl_sat(np.zeros(3, np.int64), x, width=16)


def test_shape_mismatch_is_refused():
    with pytest.raises(ShapeError, match="x, n: shapes do not broadcast"):
        fp.asr_rnd(np.zeros(3, np.int64), np.zeros(4, np.int64), width=16)
    with pytest.raises(ShapeError):
        fp.add_sat(np.zeros(3, np.int64), np.zeros(2, np.int64), width=16)


def test_errors_are_fusedrnn_errors():
    with pytest.raises(FusedRNNError):
        fp.norm(1.5, width=16)
    with pytest.raises(ValueError):
        fp.norm(10**6, width=16)
    with pytest.raises(AttributeValueError):
        fp.saturate(2**70, 8)
