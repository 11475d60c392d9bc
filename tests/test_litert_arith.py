"""The 8x8_16 kernel's hot-loop helpers (the unchecked cores of fusedrnn.numerics.core and the kernel's tables)
against slow Python-int references of litert.md section 6.1 and the contract's gemmlowp functions:
MultiplyByQuantizedMultiplier (double and single rounding, ``core.Requant``), RoundingDivideByPOT, wraps, C
division, the activation tables."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.numerics import gemmlowp
from fusedrnn.numerics.core import Requant, rdpot, trunc_div, wrap
from fusedrnn.targets.litert._arith import activation_lut, apply_lut


def _srdhm32(a: int, b: int) -> int:
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    v = ab + nudge
    q = abs(v) // 2**31
    return q if v >= 0 else -q  # C++ truncating division


def _rdpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def _wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def mbqm_double(x: int, q: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return _rdpot(_srdhm32(_wrap32(x * (1 << left)), q), right)


def mbqm_single(x: int, q: int, shift: int) -> int:
    total = 31 - shift
    return _wrap32((x * q + (1 << (total - 1))) >> total)


int32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=300, deadline=None)
@given(xs=st.lists(int32, min_size=1, max_size=8), q=st.integers(2**30, 2**31 - 1), shift=st.integers(-31, 12))
def test_requant_matches_scalar_reference(xs, q, shift):
    x = np.array(xs, np.int64)
    np.testing.assert_array_equal(Requant(q, shift, "double")(x), [mbqm_double(v, q, shift) for v in xs])
    np.testing.assert_array_equal(Requant(q, shift, "double")(x),
                                  gemmlowp.multiply_by_quantized_multiplier(x.astype(np.int32), q, shift))
    np.testing.assert_array_equal(Requant(q, shift, "single")(x), [mbqm_single(v, q, shift) for v in xs])


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(int32, min_size=4, max_size=4), qs=st.lists(st.integers(0, 2**31 - 1), min_size=4, max_size=4),
       shifts=st.lists(st.integers(-31, 8), min_size=4, max_size=4))
def test_requant_per_column(xs, qs, shifts):
    x = np.array([xs, xs[::-1]], np.int64)
    got = Requant(qs, shifts)(x)
    want = [[mbqm_double(v, q, s) for v, q, s in zip(row, qs, shifts, strict=True)] for row in x.tolist()]
    np.testing.assert_array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-(2**40), 2**40), e=st.integers(0, 30))
def test_rdpot_and_wraps(x, e):
    assert int(rdpot(np.int64(x), e)) == _rdpot(x, e)
    assert int(wrap(np.int64(x), 32)) == _wrap32(x)
    assert int(wrap(np.int64(x), 16)) == ((x + 2**15) % 2**16) - 2**15
    q = abs(x) // (1 + e)
    assert int(trunc_div(np.int64(x), 1 + e)) == (q if x >= 0 else -q)


def test_activation_tables_are_the_reference_functions():
    a = np.arange(-32768, 32768, dtype=np.int64)
    for kind, ib in (("logistic", 3), ("tanh", 3), ("tanh", 0), ("tanh", 6)):
        fn = gemmlowp.logistic if kind == "logistic" else gemmlowp.tanh
        np.testing.assert_array_equal(apply_lut(activation_lut(kind, ib), a), fn(a, ib))
    sig = apply_lut(activation_lut("logistic", 3), np.array([0, 4096, -4096, 32767], np.int64))
    assert sig[0] == 16384 and abs(sig[1] / 32768 - 1 / (1 + np.exp(-1))) < 1e-3 and sig[3] > 32700


@settings(max_examples=200, deadline=None)
@given(xs=st.lists(int32, min_size=3, max_size=3), qs=st.lists(st.integers(1, 2**31 - 1), min_size=3, max_size=3),
       shifts=st.lists(st.integers(-31, 0), min_size=3, max_size=3))
def test_requant_one_pass_form(xs, qs, shifts):
    x = np.array([xs], np.int64)
    rq = Requant(qs, shifts)
    assert rq.one_pass
    got = rq.inplace(x.copy(), np.empty(x.shape, np.int64))
    np.testing.assert_array_equal(got, [[mbqm_double(v, q, s) for v, q, s in zip(xs, qs, shifts, strict=True)]])


def test_saturating_lut():
    from fusedrnn.targets.litert._arith import saturating_lut

    v = np.arange(-65536, 65536, dtype=np.int64)
    for kind in ("logistic", "tanh"):
        np.testing.assert_array_equal(saturating_lut(kind, 3)[v],
                                      apply_lut(activation_lut(kind, 3), np.clip(v, -32768, 32767)))


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(st.integers(-(2**29), 2**29), min_size=3, max_size=3),
       bs=st.lists(st.integers(-(2**29), 2**29), min_size=3, max_size=3),
       qs=st.lists(st.integers(1, 2**31 - 1), min_size=3, max_size=3),
       shifts=st.lists(st.integers(-31, 0), min_size=3, max_size=3))
def test_requant_with_folded_bias(xs, bs, qs, shifts):
    rq = Requant(qs, shifts)
    got = rq.inplace(np.array([xs], np.int64), np.empty((1, 3), np.int64), rq.with_bias(np.array(bs)), np.array(bs))
    want = [[mbqm_double(v + b, q, s) for v, b, q, s in zip(xs, bs, qs, shifts, strict=True)]]
    np.testing.assert_array_equal(got, want)
