"""zDNN element-wise ops (add ... invsqrt) against NumPy float64 references on random shapes, values and
pre-transformed types, and every status the API reference lists for them. Also holds the helpers the other
test_zdnn_ops_* files share (the oracle's ztensor builders and the upstream tolerance rule)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_oracle import dlf16_round_ref, make_zt, read_out, to_pretype, tolerance_failures

import fusedrnn.zdnn as z
from fusedrnn.targets.zdnn import ops_elementwise as ew
from fusedrnn.targets.zdnn.machine import TELUM_II, Machine

S = z.Status
# upstream tolerances (conformance/zdnn/README.md, zdnn.md section 6)
TOL_DEFAULT = {"FP32": {"ulps": 131072, "abs_tol": 0.00244140625}, "FP16": {"ulps": 8, "abs_tol": 0.00390625},
               "BFLOAT": {"ulps": 8, "abs_tol": 0.03125}}
TOL_POOL_CONV = {"FP32": {"ulps": 1048576, "abs_tol": 0.1}, "FP16": {"ulps": 64, "abs_tol": 0.10009765625},
                 "BFLOAT": {"ulps": 64, "abs_tol": 0.1015625}}
PRETYPES = ["FP32", "FP16", "BFLOAT"]
NO_FUNCTIONS = Machine("none", TELUM_II.api_level, frozenset(), TELUM_II.parmblk_formats, TELUM_II.datatypes,
                       TELUM_II.layout_formats, TELUM_II.conversions)


@pytest.fixture(autouse=True)
def _precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def stored(x: np.ndarray, pretype: str) -> np.ndarray:
    """The float64 values a ztensor holds after transforming ``x`` given as ``pretype`` (the oracle's own
    conversions: FP16 via DLF16, BFLOAT truncated, then DLFLOAT16)."""
    p = to_pretype(np.asarray(x, np.float32), pretype)
    f = (p.astype(np.uint32) << 16).view(np.float32) if pretype == "BFLOAT" else p.astype(np.float32)
    return dlf16_round_ref(f).astype(np.float64)


def zin(layout, pretype: str, x: np.ndarray):
    return make_zt(layout, pretype, x.shape, np.asarray(x, np.float32))


def zout(layout, pretype: str, shape, typ=None):
    return make_zt(layout, typ if typ is not None else pretype, shape, transform=False)


def assert_close(out_zt, expected: np.ndarray, pretype: str, tol=TOL_DEFAULT):
    """The output, read back in ``pretype``, passes the upstream rule against the float reference."""
    bits = read_out(out_zt, pretype)
    exp32 = np.asarray(expected, np.float64).astype(np.float32)
    assert tolerance_failures(bits, exp32, pretype, tol[pretype]) == 0


def assert_exact(out_zt, expected: np.ndarray):
    """Bit-exact: the output equals DLF16(expected) (expected exact in float64)."""
    got = read_out(out_zt, "FP32").view(np.float32)
    want = dlf16_round_ref(np.asarray(expected, np.float64).astype(np.float32)).reshape(got.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def feature_tensors(shape=(2, 3, 4)):
    """A valid transformed 3DS input (ones) and output, plus wrong-shape / wrong-type / wrong-format tensors."""
    a = zin(z.ZDNN_3DS, "FP32", np.ones(shape, np.float32))
    out = zout(z.ZDNN_3DS, "FP32", shape)
    bad_shape = zin(z.ZDNN_3DS, "FP32", np.ones(shape[:-1] + (shape[-1] + 1,), np.float32))
    bad_type = make_zt(z.ZDNN_3DS, z.INT32, shape, np.ones(shape, np.int32))
    kshape = (shape[0], 1, shape[1], shape[2])  # the same transformed dims as the 3DS tensors
    bad_format = make_zt(z.ZDNN_HWCK, "FP32", kshape, np.ones(kshape, np.float32))
    return a, out, bad_shape, bad_type, bad_format


shapes = st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 70))
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(sorted(BINARY)), shape=shapes, pretype=st.sampled_from(PRETYPES),
       seed=st.integers(0, 2**32 - 1))
def test_binary_exact(op, shape, pretype, seed):
    """add/sub/mul/min/max of DLF16 values are exact in float64 here: the result is exactly DLF16(ref)."""
    rng = np.random.default_rng(seed)
    a, b = (rng.normal(0, 4, shape).astype(np.float32) for _ in range(2))
    b.reshape(-1)[::5] = a.reshape(-1)[::5]  # ties for min/max, exact zeros for sub
    out = zout(z.ZDNN_3DS, pretype, shape)
    assert getattr(ew, op)(zin(z.ZDNN_3DS, pretype, a), zin(z.ZDNN_3DS, pretype, b), out) == S.ZDNN_OK
    want = BINARY[op](stored(a, pretype), stored(b, pretype))
    if pretype == "FP32":
        assert_exact(out, want)
    assert_close(out, want, pretype)


UNARY = {"log": ((1e-3, 1e3), np.log), "exp": ((-12, 10), np.exp), "sqrt": ((0, 1e4), np.sqrt),
         "invsqrt": ((1e-2, 1e4), None), "div": (None, None)}


@settings(max_examples=30, deadline=None)
@given(op=st.sampled_from(sorted(UNARY)), shape=shapes, pretype=st.sampled_from(PRETYPES),
       eps=st.sampled_from([0.0, 1e-3, 0.5, -1e-3]), seed=st.integers(0, 2**32 - 1))
def test_unary_and_div_within_tolerance(op, shape, pretype, eps, seed):
    rng = np.random.default_rng(seed)
    if op == "div":
        a = rng.normal(0, 4, shape)
        b = rng.uniform(0.25, 8, shape) * rng.choice([-1, 1], shape)
        out = zout(z.ZDNN_3DS, pretype, shape)
        assert ew.div(zin(z.ZDNN_3DS, pretype, a), zin(z.ZDNN_3DS, pretype, b), out) == S.ZDNN_OK
        assert_close(out, stored(a, pretype) / stored(b, pretype), pretype)
        return
    lo, hi = UNARY[op][0]
    x = rng.uniform(lo, hi, shape)
    out = zout(z.ZDNN_3DS, pretype, shape)
    xin = zin(z.ZDNN_3DS, pretype, x)
    xs = stored(x, pretype)
    if op == "invsqrt":
        assert ew.invsqrt(xin, eps, out) == S.ZDNN_OK
        e = float(dlf16_round_ref(np.float32(eps)))
        assert_close(out, 1.0 / np.sqrt(xs + e), pretype)
    else:
        assert getattr(ew, op)(xin, out) == S.ZDNN_OK
        assert_close(out, UNARY[op][1](xs), pretype)


def test_range_violations():
    x = zin(z.ZDNN_2D, "FP32", np.array([[1.0, -2.0, 0.0, 30.0]], np.float32))
    zero = zin(z.ZDNN_2D, "FP32", np.zeros((1, 4), np.float32))
    out = zout(z.ZDNN_2D, "FP32", (1, 4))
    assert ew.div(x, zero, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION  # divide by zero
    assert ew.log(x, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION  # log(-2), log(0)
    assert ew.exp(x, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION  # e**30 > DLF16 max
    assert ew.sqrt(x, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert ew.invsqrt(x, 0.0, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert ew.mul(x, x, out) == S.ZDNN_OK
    assert out.is_transformed


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "min", "max", "log", "exp", "sqrt", "invsqrt"])
def test_statuses(op):
    a, out, bad_shape, bad_type, bad_format = feature_tensors()
    binary = op in ("add", "sub", "mul", "div", "min", "max")

    def call(x, o, y=None):
        if binary:
            return getattr(ew, op)(x, a if y is None else y, o)
        if op == "invsqrt":
            return ew.invsqrt(x, 1e-3 if y is None else y, o)
        return getattr(ew, op)(x, o)

    assert call(a, out) == S.ZDNN_OK
    assert call(bad_shape, out) == S.ZDNN_INVALID_SHAPE
    assert call(a, zout(z.ZDNN_3DS, "FP32", (2, 3, 5))) == S.ZDNN_INVALID_SHAPE
    assert call(bad_type, out) == S.ZDNN_INVALID_TYPE
    assert call(bad_format, out) == S.ZDNN_INVALID_FORMAT
    if binary:
        assert call(a, out, bad_type) == S.ZDNN_INVALID_TYPE
    if op == "invsqrt":
        for eps in (np.inf, -np.inf, np.nan, 1e10):
            assert call(a, out, eps) == S.ZDNN_INVALID_EPSILON
        assert call(a, out, -0.5) == S.ZDNN_OK  # negative epsilons are allowed
    z.set_machine(NO_FUNCTIONS)
    assert call(a, out) == S.ZDNN_UNAVAILABLE_FUNCTION
    z.set_machine("telum1")
    assert call(a, out) == (S.ZDNN_UNAVAILABLE_FUNCTION if op in ("sqrt", "invsqrt") else S.ZDNN_OK)


def test_buffer_state_and_precheck_off():
    a, out, bad_shape, _, _ = feature_tensors()
    fresh = zout(z.ZDNN_3DS, "FP32", (2, 3, 4))
    # libzdnn's operations never check the state: an input never transformed is read as its (zeroed) buffer holds
    assert ew.add(fresh, a, out) == S.ZDNN_OK
    assert_exact(out, np.ones((2, 3, 4)))
    nobuf = zout(z.ZDNN_3DS, "FP32", (2, 3, 4))
    nobuf.buffer = None
    assert ew.add(a, a, nobuf) == S.ZDNN_INVALID_BUFFER
    # the buffer is looked at where the NNPA touches it, after every libzdnn check: shape first, then the address
    nobuf_bad = zout(z.ZDNN_3DS, "FP32", (2, 3, 5))
    nobuf_bad.buffer = None
    assert ew.add(a, a, nobuf_bad) == S.ZDNN_INVALID_SHAPE
    raw = z.malloc_aligned_4k(2 * out.buffer_size)
    off = zout(z.ZDNN_3DS, "FP32", (2, 3, 4))
    off.buffer = raw[16:16 + off.buffer_size]
    assert ew.add(a, a, off) == S.ZDNN_MISALIGNED_TENSOR and not raw.any()
    with z.settings.override(precheck=False):
        with pytest.raises(z.NNPAProgramException) as ei:
            ew.add(bad_shape, a, out)
        assert ei.value.status == S.ZDNN_INVALID_SHAPE
