"""Exact integer GEMM (fusedrnn.numerics.int_matmul) against a Python-integer oracle."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fusedrnn.errors import AttributeValueError, DTypeError, FusedRNNError, ShapeError, UnsupportedFeatureError
from fusedrnn.numerics.int_matmul import (
    EXACT_FLOAT32_LIMIT,
    EXACT_FLOAT64_LIMIT,
    IntegerOverflowError,
    IntMatrix,
    exact_float_dtype,
    int_matmul,
)

# the module itself (the package attribute fusedrnn.numerics.int_matmul is the function of that name)
im = importlib.import_module("fusedrnn.numerics.int_matmul")

INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ----------------------------------------------------------------------------------------------------------
# the oracle: Python integers, one explicit sum per output element


def _py(x) -> np.ndarray:
    """An object array of Python ints (exact, unbounded)."""
    x = np.asarray(x)
    out = np.empty(x.shape, object)
    out.flat[:] = [int(v) for v in x.flat]
    return out


def oracle(a, b) -> np.ndarray:
    """a @ b over the integers with np.matmul's shape rules, by explicit Python-int sums."""
    a, b = _py(a), _py(b)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = np.broadcast_to(b2, batch + b2.shape[-2:])
    M, K, N = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    res = np.empty(batch + (M, N), object)
    for idx in np.ndindex(*batch):
        for m in range(M):
            for n in range(N):
                res[idx + (m, n)] = sum(int(a2[idx + (m, k)]) * int(b2[idx + (k, n)]) for k in range(K))
    if a.ndim == 1:
        res = res[..., 0, :]
    if b.ndim == 1:
        res = res[..., 0]
    return res


def reduce(x, bits: int, mode: str) -> np.ndarray:
    """The exact results x (object array) as the int`bits` result of overflow mode ``mode``."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    flat = [int(v) for v in np.asarray(x, object).flat]
    if mode == "wrap":
        flat = [(v - lo) % 2**bits + lo for v in flat]
    elif mode == "saturate":
        flat = [min(max(v, lo), hi) for v in flat]
    else:
        assert all(lo <= v <= hi for v in flat)
    return np.array(flat, dtype=np.int64 if bits == 64 else np.int32).reshape(np.shape(x))


def check(a, b, *, out_dtype=np.int64, overflow="wrap", **kw):
    exact = oracle(a, b)
    got = int_matmul(a, b, out_dtype=out_dtype, overflow=overflow, **kw)
    bits = 64 if np.dtype(out_dtype) == np.int64 else 32
    assert got.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(got, reduce(exact, bits, overflow))
    return exact


def rand_int(rng, dtype, shape, small: bool = False):
    info = np.iinfo(dtype)
    if small:
        return rng.integers(max(info.min, -5), min(info.max, 5), shape, dtype=dtype, endpoint=True)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


# ----------------------------------------------------------------------------------------------------------
# the exactness bound


def test_exact_float_dtype_boundaries():
    assert exact_float_dtype(1024, 128, 128) is np.float32  # int8 x int8 up to K = 1024: no scan needed
    assert exact_float_dtype(1025, 128, 128) is np.float64
    assert exact_float_dtype(1, EXACT_FLOAT32_LIMIT, 1) is np.float32
    assert exact_float_dtype(1, EXACT_FLOAT32_LIMIT + 1, 1) is np.float64
    assert exact_float_dtype(2, 2**26, 2**26) is np.float64
    assert exact_float_dtype(1, EXACT_FLOAT64_LIMIT + 1, 1) is None
    assert exact_float_dtype(0, 2**63, 2**63) is np.float32
    assert exact_float_dtype(10**6, 0, 2**63) is np.float32
    with pytest.raises(AttributeValueError, match="k"):
        exact_float_dtype(-1, 1, 1)
    with pytest.raises(DTypeError, match="b_absmax"):
        exact_float_dtype(1, 1, 1.5)


def test_float32_would_round_so_float64_is_used():
    # 4096*4096 + 1 = 2^24 + 1 is not a float32: a float32 GEMM gives 2^24, the exact answer is odd
    a = np.array([[4096, 1]], np.int16)
    b = np.array([[4096], [1]], np.int16)
    assert int(np.matmul(a.astype(np.float32), b.astype(np.float32))[0, 0]) != 2**24 + 1
    assert int_matmul(a, b)[0, 0] == 2**24 + 1


def test_float64_would_round_so_limbs_are_used():
    a = np.array([[2**26, 1]], np.int32)
    b = np.array([[2**27], [1]], np.int32)
    assert int(np.matmul(a.astype(np.float64), b.astype(np.float64))[0, 0]) != 2**53 + 1
    assert int_matmul(a, b)[0, 0] == 2**53 + 1
    # 2^53 - 1 plus products that cancel: any order, still exact
    a = np.array([[2**31 - 1, -(2**31), 2**31 - 1, 1]], np.int64)
    b = np.array([[2**31 - 1], [2**31 - 1], [2**31], [2**53 - 1]], np.int64)
    check(a, b)


@pytest.mark.parametrize("k", [4096, 4097])
def test_int16_across_the_float32_bound(k):
    # K * 64 * 64 = 2^24 at K = 4096 (float32 path), just above at 4097 (float64 path); extreme-valued operands
    rng = np.random.default_rng(k)
    a = rng.choice(np.array([-64, 64, 63, -63], np.int16), size=(3, k))
    b = rng.choice(np.array([-64, 64, 1], np.int16), size=(k, 4))
    a[0] = -64
    b[:, 0] = 64
    exact = oracle(a, b)
    assert exact[0, 0] == -64 * 64 * k
    np.testing.assert_array_equal(int_matmul(a, b), reduce(exact, 64, "wrap"))


def test_int8_large_k_and_uint16_extremes():
    k = 70000  # 2^16 < K: int8 x int8 bound 1.1e9, float64 path
    a = np.full((2, k), -128, np.int8)
    b = np.full((k, 3), -128, np.int8)
    a[1, ::3] = 127
    r = int_matmul(a, b)
    assert r[0, 0] == 128 * 128 * k
    assert r[1, 2] == -128 * (-128 * (k - len(range(0, k, 3))) + 127 * len(range(0, k, 3)))
    a = np.full((2, 5), 65535, np.uint16)
    b = np.full((5, 2), 65535, np.uint16)
    check(a, b)
    check(a, b, out_dtype=np.int32, overflow="saturate")
    check(a, b, out_dtype=np.int32, overflow="wrap")


@pytest.mark.parametrize(
    "value_a, value_b, dtype",
    [
        (-128, -128, np.int8),
        (127, -128, np.int8),
        (-(2**15), -(2**15), np.int16),
        (INT32_MIN, INT32_MIN, np.int32),
        (INT32_MAX, INT32_MIN, np.int32),
        (INT32_MAX, INT32_MAX, np.int32),
        (2**32 - 1, 2**32 - 1, np.uint32),
    ],
)
@pytest.mark.parametrize("k", [0, 1, 2, 33])
def test_constant_extremes(value_a, value_b, dtype, k):
    a = np.full((2, k), value_a, dtype)
    b = np.full((k, 3), value_b, dtype)
    for mode in ("wrap", "saturate"):
        check(a, b, overflow=mode)
        check(a, b, out_dtype=np.int32, overflow=mode)


def test_int64_overflow_modes():
    # K * (2^63)^2 >= 2^63: the true result leaves int64
    a = np.full((2, 3), INT64_MIN, np.int64)
    b = np.full((3, 2), INT64_MIN, np.int64)
    b[:, 1] = 0
    b[0, 1] = 1
    exact = check(a, b, overflow="wrap")
    check(a, b, overflow="saturate")
    assert exact[0, 1] == INT64_MIN  # the in-range element is exact, not clamped
    with pytest.raises(IntegerOverflowError, match=r"index \(0, 0\)") as e:
        int_matmul(a, b, overflow="raise")
    assert isinstance(e.value, FusedRNNError) and isinstance(e.value, OverflowError)
    # results just inside / just outside the int64 range: -2^63 fits, 2^63 does not
    a = np.array([[2**62, 2**62], [2**62, 2**62 - 1], [-(2**62), -(2**62)], [-(2**62), -(2**62) - 1]], np.int64)
    b = np.array([[1], [1]], np.int64)
    for mode in ("wrap", "saturate"):
        check(a, b, overflow=mode)
        check(a, b, out_dtype=np.int32, overflow=mode)
    r = int_matmul(a[1:3], b, overflow="raise")
    np.testing.assert_array_equal(r, [[2**63 - 1], [-(2**63)]])
    with pytest.raises(IntegerOverflowError):
        int_matmul(a, b, overflow="raise")


def test_int32_out_modes():
    rng = np.random.default_rng(3)
    a = rand_int(rng, np.int16, (5, 40))
    b = rand_int(rng, np.int16, (40, 6))
    for mode in ("wrap", "saturate"):
        check(a, b, out_dtype=np.int32, overflow=mode)
    with pytest.raises(IntegerOverflowError, match="int32"):
        int_matmul(a, b, out_dtype=np.int32, overflow="raise")
    small = rand_int(rng, np.int16, (5, 40), small=True)
    check(small, b, out_dtype=np.int32, overflow="raise")


def test_limb_fallback_with_k_blocks():
    rng = np.random.default_rng(7)
    k = 300
    a = rng.integers(-(2**40), 2**40, (4, k), dtype=np.int64)
    b = rand_int(rng, np.int8, (k, 5))
    plan = im._LimbPlan.choose(k, 2**40, 128)
    assert plan.kb < k  # this case runs in several K blocks
    check(a, b, a_absmax=2**40)


@given(
    k=st.integers(0, 2**40),
    abits=st.integers(0, 63),
    bbits=st.integers(0, 63),
)
@settings(max_examples=200, deadline=None)
def test_limb_plan_invariants(k, abits, bbits):
    amax, bmax = 2**abits, 2**bbits
    if k * amax * bmax <= EXACT_FLOAT64_LIMIT:
        return
    p = im._LimbPlan.choose(k, amax, bmax)
    ma = im._LimbPlan.limb_absmax(amax, p.na, p.sa)
    mb = im._LimbPlan.limb_absmax(bmax, p.nb, p.sb)
    assert p.kb * ma * mb <= EXACT_FLOAT64_LIMIT
    assert k * ma * mb < 2**62
    assert p.sa * p.na >= abits and p.sb * p.nb >= bbits


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_limb_split_is_exact(dtype):
    rng = np.random.default_rng(1)
    x = rand_int(rng, dtype, (3, 50))
    x[0, :4] = [np.iinfo(dtype).min, np.iinfo(dtype).max, 0, -1 if dtype != np.uint32 else 1]
    amax = im.dtype_absmax(dtype)
    for n in range(1 if amax <= EXACT_FLOAT64_LIMIT else 2, 9):  # one limb is the operand itself in float64
        s = im._LimbPlan.width(amax, n)
        limbs = im._LimbPlan.split(x, n, s)
        m = im._LimbPlan.limb_absmax(amax, n, s)
        total = sum(_py(limb) * 2 ** (s * i) for i, limb in enumerate(limbs))
        assert (total == _py(x)).all()
        assert max(abs(int(v)) for limb in limbs for v in limb.flat) <= m
        if n > 1:
            assert all(float(v).is_integer() for limb in limbs for v in limb.flat)


@given(amax=st.integers(1, 2**63), n=st.integers(2, 8), seed=st.integers(0, 2**32 - 1))
@example(amax=2**12 - 1, n=2, seed=0)  # the top limb of -4095 is -64 = -2^s, one beyond 2^s - 1
@example(amax=2**63 - 3, n=3, seed=1)
@settings(max_examples=100, deadline=None)
def test_limb_split_any_bound(amax, n, seed):
    # caller-supplied bounds need not be powers of two: the top limb of -amax is -ceil(amax / 2^(s*(n-1)))
    rng = np.random.default_rng(seed)
    hi = min(amax, 2**63 - 1)
    x = np.array([-amax, hi, 0, -1, *rng.integers(-hi, hi, 6, endpoint=True)], dtype=np.int64)
    s = im._LimbPlan.width(amax, n)
    limbs = im._LimbPlan.split(x, n, s)
    assert sum(_py(limb) * 2 ** (s * i) for i, limb in enumerate(limbs)).tolist() == _py(x).tolist()
    assert max(abs(int(v)) for limb in limbs for v in limb.flat) <= im._LimbPlan.limb_absmax(amax, n, s)


# ----------------------------------------------------------------------------------------------------------
# shapes


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((5,), (5,)),
        ((5,), (5, 3)),
        ((4, 5), (5,)),
        ((2, 1, 4, 5), (3, 5, 2)),
        ((3, 4, 5), (5, 2)),
        ((4, 5), (2, 5, 3)),
        ((0, 5), (5, 3)),
        ((4, 0), (0, 3)),
        ((2, 4, 1), (1, 3)),
        ((1, 4, 5), (3, 5, 0)),
    ],
)
@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_broadcast_shapes(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a, b = rand_int(rng, dtype, sa), rand_int(rng, dtype, sb)
    exact = check(a, b)
    assert np.shape(exact) == np.matmul(np.zeros(sa), np.zeros(sb)).shape
    out = np.full(np.shape(exact), 99, np.int64)
    assert int_matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, reduce(exact, 64, "wrap"))
    if dtype == np.int32:  # the limb path with out
        out32 = np.zeros(np.shape(exact), np.int32)
        int_matmul(a, b, out=out32, overflow="saturate")
        np.testing.assert_array_equal(out32, reduce(exact, 32, "saturate"))


def test_out_may_be_a_strided_view():
    rng = np.random.default_rng(0)
    a, b = rand_int(rng, np.int8, (4, 16)), rand_int(rng, np.int8, (16, 6))
    buf = np.zeros((4, 12), np.int64)
    int_matmul(a, b, out=buf[:, ::2])
    np.testing.assert_array_equal(buf[:, ::2], reduce(oracle(a, b), 64, "wrap"))
    assert (buf[:, 1::2] == 0).all()


# ----------------------------------------------------------------------------------------------------------
# bounds: scans skipped


def _no_scan(monkeypatch):
    def boom(x):
        raise AssertionError("operand scanned")

    monkeypatch.setattr(im, "scan_absmax", boom)


def test_int8_k1024_needs_no_scan(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rand_int(rng, np.int8, (3, 1024)), rand_int(rng, np.int8, (1024, 4))
    a[0] = -128
    b[:, 0] = -128
    _no_scan(monkeypatch)
    np.testing.assert_array_equal(int_matmul(a, b), reduce(oracle(a, b), 64, "wrap"))
    with pytest.raises(AssertionError, match="scanned"):
        int_matmul(np.zeros((3, 1025), np.int8), np.zeros((1025, 4), np.int8))


def test_absmax_arguments_skip_scans(monkeypatch):
    rng = np.random.default_rng(0)
    a = rand_int(rng, np.int16, (3, 50), small=True)
    b = rand_int(rng, np.int32, (50, 4), small=True)
    _no_scan(monkeypatch)
    for amax, bmax in [(5, 5), (np.int16, 5), (2**15, np.int64(2**31))]:
        np.testing.assert_array_equal(int_matmul(a, b, a_absmax=amax, b_absmax=bmax), reduce(oracle(a, b), 64, "wrap"))


def test_scanned_bounds_pick_float32(monkeypatch):
    # int32 operands with small values: one scan each proves float32
    calls = []
    real = im.scan_absmax
    monkeypatch.setattr(im, "scan_absmax", lambda x: calls.append(x.shape) or real(x))
    a = np.full((2, 100), -7, np.int32)
    b = np.full((100, 9), 11, np.int32)
    np.testing.assert_array_equal(int_matmul(a, b), np.full((2, 9), -7700))
    assert calls == [(2, 100), (100, 9)]  # smaller operand first


# ----------------------------------------------------------------------------------------------------------
# randomised over the whole option space


@st.composite
def problems(draw):
    da, db = draw(st.sampled_from(INT_DTYPES)), draw(st.sampled_from(INT_DTYPES))
    k = draw(st.sampled_from([0, 1, 2, 3, 8, 17, 64]))
    m, n = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    batch_a = draw(st.sampled_from([(), (2,), (1,), (3, 1)]))  # every pair broadcasts
    batch_b = draw(st.sampled_from([(), (2,), (1,), (1, 2)]))
    one_d_a, one_d_b = draw(st.booleans()) and not batch_a, draw(st.booleans()) and not batch_b
    sa = (k,) if one_d_a else batch_a + (m, k)
    sb = (k,) if one_d_b else batch_b + (k, n)
    seed = draw(st.integers(0, 2**32 - 1))
    style = draw(st.sampled_from(["full", "small", "extreme"]))
    rng = np.random.default_rng(seed)

    def make(dt, shape):
        info = np.iinfo(dt)
        if style == "full":
            return rand_int(rng, dt, shape)
        if style == "small":
            return rand_int(rng, dt, shape, small=True)
        return rng.choice(np.array([info.min, info.max, 0, 1], dtype=dt), size=shape)

    out_dtype = draw(st.sampled_from([np.int64, np.int32]))
    overflow = draw(st.sampled_from(["wrap", "saturate", "raise"]))
    hint = draw(st.sampled_from(["none", "exact", "dtype"]))
    return make(da, sa), make(db, sb), out_dtype, overflow, hint


@given(problems())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_against_oracle(p):
    a, b, out_dtype, overflow, hint = p
    kw = {}
    if hint == "exact":
        kw = {
            "a_absmax": max([abs(int(v)) for v in a.flat] or [0]),
            "b_absmax": max([abs(int(v)) for v in b.flat] or [0]),
        }
    elif hint == "dtype":
        kw = {"a_absmax": a.dtype, "b_absmax": b.dtype}
    bits = 64 if out_dtype == np.int64 else 32
    exact = oracle(a, b)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if overflow == "raise" and any(not lo <= int(v) <= hi for v in np.asarray(exact, object).flat):
        with pytest.raises(IntegerOverflowError):
            int_matmul(a, b, out_dtype=out_dtype, overflow=overflow, **kw)
        return
    got = int_matmul(a, b, out_dtype=out_dtype, overflow=overflow, **kw)
    assert got.dtype == out_dtype and got.shape == np.shape(exact)
    np.testing.assert_array_equal(got, reduce(exact, bits, overflow))
    if b.ndim >= 2:
        m = IntMatrix(b, a_absmax=kw.get("a_absmax", a.dtype))
        got = m.matmul(a, out_dtype=out_dtype, overflow=overflow)
        np.testing.assert_array_equal(got, reduce(exact, bits, overflow))


# ----------------------------------------------------------------------------------------------------------
# IntMatrix


@pytest.mark.parametrize("bdt, adt, k", [(np.int8, np.int8, 256), (np.int8, np.uint8, 600), (np.int16, np.int16, 64),
                                          (np.int32, np.int32, 40), (np.int64, np.int8, 20),
                                          (np.int8, np.int8, 1500)])
def test_intmatrix_matches_oracle(bdt, adt, k):
    rng = np.random.default_rng(k)
    b = rand_int(rng, bdt, (k, 7))
    m = IntMatrix(b, a_absmax=adt)
    expected_dtype = exact_float_dtype(k, im.dtype_absmax(adt), max(abs(int(v)) for v in b.flat))
    assert m.dtype is expected_dtype
    for rows in (5, 1, 3):  # scratch buffers reused with fewer rows
        a = rand_int(rng, adt, (rows, k))
        exact = oracle(a, b)
        first = m.matmul(a)
        np.testing.assert_array_equal(first, reduce(exact, 64, "wrap"))
        m.matmul(rand_int(rng, adt, (rows, k)))  # a later call must not change an earlier result
        np.testing.assert_array_equal(first, reduce(exact, 64, "wrap"))
        out64 = np.empty((rows, 7), np.int64)
        assert m.matmul(a, out=out64) is out64
        np.testing.assert_array_equal(out64, reduce(exact, 64, "wrap"))
        out = np.empty((rows, 7), np.int32)
        assert m.matmul(a, out=out, overflow="saturate") is out
        np.testing.assert_array_equal(out, reduce(exact, 32, "saturate"))
        assert m.matmul(a, out=out, out_dtype=np.int32) is out
        np.testing.assert_array_equal(out, reduce(exact, 32, "wrap"))
        r32 = m.matmul(a, out_dtype=np.int32, overflow="saturate")
        assert r32.dtype == np.int32
        np.testing.assert_array_equal(r32, reduce(exact, 32, "saturate"))
    sums = np.array([sum(int(v) for v in b[:, j]) for j in range(7)], object)
    np.testing.assert_array_equal(m.column_sums, reduce(sums, 64, "wrap"))  # int64 b: documented to wrap
    a1 = rand_int(rng, adt, (k,))
    np.testing.assert_array_equal(m.matmul(a1), reduce(oracle(a1, b), 64, "wrap"))


@pytest.mark.parametrize("adt, bdt", [(np.int8, np.int8), (np.uint8, np.int16)])
def test_large_results(adt, bdt):
    # results of > 2^16 elements take other conversion paths; NumPy's int64 matmul (exact at these magnitudes,
    # |sum| < 2^40) is the independent reference here, the explicit-sum oracle being too slow at this size
    rng = np.random.default_rng(5)
    a, b = rand_int(rng, adt, (300, 40)), rand_int(rng, bdt, (40, 260))
    expected = np.matmul(a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(expected[:2, :3], reduce(oracle(a[:2], b[:, :3]), 64, "wrap"))
    np.testing.assert_array_equal(int_matmul(a, b), expected)
    m = IntMatrix(b, a_absmax=adt)
    np.testing.assert_array_equal(m.matmul(a), expected)
    out = np.empty((300, 260), np.int64)
    np.testing.assert_array_equal(m.matmul(a, out=out), expected)
    assert int_matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_intmatrix_a_beyond_a_absmax_is_still_exact():
    rng = np.random.default_rng(0)
    b = rand_int(rng, np.int8, (1024, 5))
    b[0] = -128
    m = IntMatrix(b, a_absmax=127)
    assert m.dtype is np.float32 and m.a_capacity == 2**24 // (1024 * 128)
    a = rand_int(rng, np.int16, (3, 1024))  # far beyond: the general exact path
    a[0, 0] = -(2**15)
    np.testing.assert_array_equal(m.matmul(a), reduce(oracle(a, b), 64, "wrap"))
    a_ok = rand_int(rng, np.int16, (3, 1024), small=True)  # int16 but within capacity: the fast path
    np.testing.assert_array_equal(m.matmul(a_ok, check=False), reduce(oracle(a_ok, b), 64, "wrap"))
    with pytest.raises(UnsupportedFeatureError, match="a_capacity"):
        m.matmul_float(a)


def test_intmatrix_stacked_and_float_results():
    rng = np.random.default_rng(2)
    b = rand_int(rng, np.int8, (2, 64, 512))  # [D, K, N]: rows of 2048 bytes get padded
    m = IntMatrix(b, a_absmax=np.int8)
    a = rand_int(rng, np.int8, (2, 3, 64))
    exact = oracle(a, b)
    np.testing.assert_array_equal(m.matmul(a), reduce(exact, 64, "wrap"))
    f = m.matmul_float(a)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.astype(np.int64), reduce(exact, 64, "wrap"))
    assert m.column_sums.shape == (2, 512)
    m2 = IntMatrix(b[0], a_absmax=np.int8)
    out = np.empty((3, 512), np.float32)
    assert m2.matmul_float(a[0], out=out) is out
    np.testing.assert_array_equal(out.astype(np.int64), reduce(oracle(a[0], b[0]), 64, "wrap"))
    with pytest.raises(ShapeError, match="out"):
        m2.matmul_float(a[0], out=np.empty((3, 512), np.float64))


def test_intmatrix_limb_operand():
    rng = np.random.default_rng(4)
    b = rand_int(rng, np.int64, (30, 4))
    b[0, 0] = INT64_MIN
    m = IntMatrix(b, a_absmax=np.int64)
    assert m.dtype is None
    a = rand_int(rng, np.int64, (3, 30))
    exact = oracle(a, b)
    for mode in ("wrap", "saturate"):
        np.testing.assert_array_equal(m.matmul(a, overflow=mode), reduce(exact, 64, mode))
    a1 = a[0]
    np.testing.assert_array_equal(m.matmul(a1, overflow="saturate"), reduce(oracle(a1, b), 64, "saturate"))
    with pytest.raises(UnsupportedFeatureError, match="2\\^53"):
        m.matmul_float(a)
    b_before = b.copy()
    b[:] = 0  # the IntMatrix holds its own copy
    np.testing.assert_array_equal(m.b, b_before)


def test_intmatrix_zero_operand_and_empty_k():
    m = IntMatrix(np.zeros((5, 3), np.int64), a_absmax=np.int64)
    assert m.dtype is np.float32 and m.a_capacity is None
    a = np.full((2, 5), INT64_MIN, np.int64)
    np.testing.assert_array_equal(m.matmul(a), np.zeros((2, 3)))
    m0 = IntMatrix(np.zeros((0, 3), np.int8), a_absmax=np.int8)
    np.testing.assert_array_equal(m0.matmul(np.zeros((2, 0), np.int8)), np.zeros((2, 3)))
    np.testing.assert_array_equal(m0.column_sums, [0, 0, 0])


# ----------------------------------------------------------------------------------------------------------
# validation


BAD_DTYPES = [np.float32, np.float64, np.bool_, np.uint64, np.complex64, np.float16]


@st.composite
def maybe_bad_calls(draw):
    da = draw(st.sampled_from(INT_DTYPES + BAD_DTYPES))
    db = draw(st.sampled_from(INT_DTYPES + BAD_DTYPES))
    sa = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)))
    sb = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)))
    kw = {}
    if draw(st.booleans()):
        kw["overflow"] = draw(st.sampled_from(["wrap", "saturate", "raise", "clip", "", None, 1]))
    if draw(st.booleans()):
        kw["out_dtype"] = draw(st.sampled_from([np.int64, np.int32, np.int16, np.float32, "int32", "nonsense", 3.5]))
    if draw(st.booleans()):
        kw["a_absmax"] = draw(st.sampled_from([0, 5, 2**70, -1, 1.5, True, np.int8, np.float32, "x", None]))
    return np.zeros(sa, da), np.zeros(sb, db), kw


def expected_errors(a, b, kw) -> set:
    errs = set()
    for x in (a, b):
        if x.dtype not in [np.dtype(d) for d in INT_DTYPES]:
            errs.add(DTypeError)
        elif x.ndim == 0:
            errs.add(ShapeError)
    if a.ndim and b.ndim:
        kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
        if a.shape[-1] != kb:
            errs.add(ShapeError)
        a2 = a.shape if a.ndim >= 2 else (1,) + a.shape
        b2 = b.shape if b.ndim >= 2 else b.shape + (1,)
        try:
            np.broadcast_shapes(a2[:-2], b2[:-2])
        except ValueError:
            errs.add(ShapeError)
    if "overflow" in kw and kw["overflow"] not in ("wrap", "saturate", "raise"):
        errs.add(AttributeValueError)
    od = kw.get("out_dtype")
    if od is not None and od not in (np.int64, np.int32, "int32"):
        errs.add(DTypeError)
    am = kw.get("a_absmax")
    if am is not None:
        if isinstance(am, bool) or am in (1.5, "x", np.float32):
            errs.add(DTypeError)
        elif isinstance(am, int) and am < 0:
            errs.add(AttributeValueError)
    return errs


@given(maybe_bad_calls())
@settings(max_examples=300, deadline=None)
def test_validation_fuzz(call):
    a, b, kw = call
    errs = expected_errors(a, b, kw)
    if not errs:
        got = int_matmul(a, b, **kw)
        assert got.shape == np.matmul(a.astype(float), b.astype(float)).shape
        return
    with pytest.raises(FusedRNNError) as e:
        int_matmul(a, b, **kw)
    assert type(e.value) in errs, (type(e.value), errs, str(e.value))
    assert isinstance(e.value, (ValueError, TypeError))
    # the message names an argument
    assert any(name in str(e.value) for name in ("a:", "b:", "a, b:", "overflow", "out_dtype", "a_absmax"))


@given(
    bdt=st.sampled_from(INT_DTYPES + BAD_DTYPES),
    shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
    a_absmax=st.sampled_from([0, 7, 2**80, -3, 2.0, False, np.int16, np.float64, None]),
    adt=st.sampled_from([np.int8, np.int64, np.float32]),
    k_extra=st.sampled_from([0, 0, 1]),
)
@settings(max_examples=150, deadline=None)
def test_intmatrix_validation_fuzz(bdt, shape, a_absmax, adt, k_extra):
    b = np.zeros(shape, bdt)
    errs = set()
    if b.dtype not in [np.dtype(d) for d in INT_DTYPES]:
        errs.add(DTypeError)
    elif b.ndim < 2:
        errs.add(ShapeError)
    if a_absmax is None or (isinstance(a_absmax, int) and not isinstance(a_absmax, bool) and a_absmax < 0):
        errs.add(AttributeValueError)
    elif isinstance(a_absmax, (bool, float)) or a_absmax is np.float64:
        errs.add(DTypeError)
    if errs:
        with pytest.raises(FusedRNNError) as e:
            IntMatrix(b, a_absmax=a_absmax)
        assert type(e.value) in errs and ("b:" in str(e.value) or "a_absmax" in str(e.value))
        return
    m = IntMatrix(b, a_absmax=a_absmax)
    a = np.zeros((2, shape[-2] + k_extra), adt)
    if adt == np.float32:
        with pytest.raises(DTypeError, match="a:"):
            m.matmul(a)
    elif k_extra:
        with pytest.raises(ShapeError, match="a:"):
            m.matmul(a)
    else:
        assert m.matmul(a).shape == np.matmul(a.astype(float), b.astype(float)).shape


def test_validation_messages():
    a, b = np.zeros((2, 3), np.int8), np.zeros((3, 4), np.int8)
    with pytest.raises(ShapeError, match=r"b: expected 3 rows.*\(4, 4\)"):
        int_matmul(a, np.zeros((4, 4), np.int8))
    with pytest.raises(DTypeError, match="a: expected an integer array.*float32"):
        int_matmul(a.astype(np.float32), b)
    with pytest.raises(ShapeError, match=r"out: expected shape \(2, 4\)"):
        int_matmul(a, b, out=np.zeros((4, 2), np.int64))
    with pytest.raises(DTypeError, match="out: expected dtype int32"):
        int_matmul(a, b, out=np.zeros((2, 4), np.int64), out_dtype=np.int32)
    with pytest.raises(DTypeError, match="out: expected a NumPy array"):
        int_matmul(a, b, out=[[0] * 4] * 2)
    with pytest.raises(DTypeError, match="out: expected dtype int64 or int32"):
        int_matmul(a, b, out=np.zeros((2, 4), np.float32))
    with pytest.raises(AttributeValueError, match="overflow: expected one of"):
        int_matmul(a, b, overflow="clamp")
    with pytest.raises(ShapeError, match="b: expected a matrix"):
        IntMatrix(np.zeros(3, np.int8), a_absmax=1)
    with pytest.raises(AttributeValueError, match="a_absmax: required"):
        IntMatrix(b, a_absmax=None)
    with pytest.raises(DTypeError, match="b_absmax"):
        IntMatrix(b, a_absmax=1, b_absmax=2.0)
    m = IntMatrix(b, a_absmax=np.int8)
    with pytest.raises(ShapeError, match="a: expected last dimension 3"):
        m.matmul(np.zeros((2, 4), np.int8))
    with pytest.raises(DTypeError, match="a: expected an integer array"):
        m.matmul(np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="out"):
        m.matmul(np.zeros((2, 3), np.int8), out=np.zeros((3, 4), np.int64))
    assert "IntMatrix(shape=(3, 4)" in repr(m)
