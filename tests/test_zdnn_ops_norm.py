"""zDNN normalization ops (meanreduce2d, batchnorm, norm, moments, layernorm, reduce) against NumPy / PyTorch
float64 references on random shapes, values and pre-transformed types, and every status the API reference lists
for them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_ops_elementwise import NO_FUNCTIONS, PRETYPES, assert_close, stored, zin, zout
from test_zdnn_oracle import dlf16_round_ref, make_zt

import fusedrnn.zdnn as z
from fusedrnn.errors import ShapeError
from fusedrnn.targets.zdnn import ops_norm as nm
from fusedrnn.targets.zdnn import ztensor as zmod

torch = pytest.importorskip("torch")
S = z.Status
NHWC = z.ZDNN_NHWC
nhwc = st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6), st.integers(1, 70))


@pytest.fixture(autouse=True)
def _precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def dlf(v: float) -> float:
    return float(dlf16_round_ref(np.float32(v)))


def ones(shape, layout=NHWC):
    return zin(layout, "FP32", np.ones(shape, np.float32))


def i32(shape, layout=NHWC):
    return make_zt(layout, z.INT32, shape, np.ones(shape, np.int32))


def hwck(shape):
    return make_zt(z.ZDNN_HWCK, "FP32", shape, np.ones(shape, np.float32))


# ---- values ------------------------------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(shape=nhwc, pretype=st.sampled_from(PRETYPES), seed=st.integers(0, 2**32 - 1))
def test_meanreduce2d_batchnorm_norm(shape, pretype, seed):
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    x = rng.normal(1, 3, shape)
    xs = stored(x, pretype)
    out = zout(NHWC, pretype, (n, 1, 1, c))
    assert nm.meanreduce2d(zin(NHWC, pretype, x), out) == S.ZDNN_OK
    assert_close(out, torch.from_numpy(xs).mean(dim=(1, 2), keepdim=True).numpy(), pretype)

    scale, bias = rng.normal(0, 2, c), rng.normal(0, 2, c)
    out = zout(NHWC, pretype, shape)
    assert nm.batchnorm(zin(NHWC, pretype, x), zin(z.ZDNN_1D, pretype, scale), zin(z.ZDNN_1D, pretype, bias),
                        out) == S.ZDNN_OK
    assert_close(out, stored(scale, pretype) * xs + stored(bias, pretype), pretype)

    a, b = rng.normal(0, 2, (n, w, c)), rng.normal(0, 2, (n, w, c))
    out = zout(z.ZDNN_3DS, pretype, (n, w, 1))
    assert nm.norm(zin(z.ZDNN_3DS, pretype, a), zin(z.ZDNN_3DS, pretype, b), out) == S.ZDNN_OK
    want = np.linalg.norm(stored(b, pretype) - stored(a, pretype), axis=-1, keepdims=True)
    assert_close(out, want, pretype)


@settings(max_examples=20, deadline=None)
@given(shape=nhwc, pretype=st.sampled_from(PRETYPES), bessel=st.sampled_from([0, 1]),
       beta=st.sampled_from([0.0, 0.5, -1.25]), gamma=st.sampled_from([0.0, 1.0, 2.5]),
       eps=st.sampled_from([0.0, 1e-3, 1e-5]), seed=st.integers(0, 2**32 - 1))
def test_moments_then_layernorm_against_torch(shape, pretype, bessel, beta, gamma, eps, seed):
    n, h, w, c = shape
    if bessel and h * w * c == 1:
        bessel = 0
    x = np.random.default_rng(seed).normal(0.5, 2, shape)
    xs = stored(x, pretype)
    xin = zin(NHWC, pretype, x)
    mean, var = zout(NHWC, pretype, (n, 1, 1, 1)), zout(NHWC, pretype, (n, 1, 1, 1))
    assert nm.moments(xin, bessel, mean, var) == S.ZDNN_OK
    t = torch.from_numpy(xs)
    want_var = torch.var(t, dim=(1, 2, 3), keepdim=True, correction=bessel).numpy()
    assert_close(mean, t.mean(dim=(1, 2, 3), keepdim=True).numpy(), pretype)
    assert_close(var, want_var, pretype)

    out = zout(NHWC, pretype, shape)
    if eps == 0 and np.any(want_var == 0):  # 0 / sqrt(0)
        assert nm.layernorm(xin, mean, var, beta, gamma, eps, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION
        return
    assert nm.layernorm(xin, mean, var, beta, gamma, eps, out) == S.ZDNN_OK
    # exact formula on the stored mean/variance ...
    m = stored(t.mean(dim=(1, 2, 3), keepdim=True).numpy(), "FP32")
    v = stored(want_var, "FP32")
    if pretype == "FP32":
        assert_close(out, (xs - m) / np.sqrt(v + dlf(eps)) * dlf(gamma) + dlf(beta), pretype)
    # ... and end to end against torch's layer_norm (population variance) when the moments are well conditioned
    if bessel == 0 and h * w * c > 1:
        ln = torch.nn.functional.layer_norm(t, (h, w, c), eps=dlf(eps) if eps else 0.0).numpy()
        want = ln * dlf(gamma) + dlf(beta)
        # only where the moments are well conditioned: the stored (DLFLOAT16, 9-bit) mean is off by up to
        # |mean|·2^-10, which the normalisation divides by the standard deviation (found: mean -2.1, std 0.19 gave
        # a 10-ulp FP16 error against torch's float64-accurate result)
        mu = np.abs(t.mean(dim=(1, 2, 3), keepdim=True).numpy())
        if (eps or np.all(want_var > 1e-3)) and np.all(np.sqrt(want_var) >= mu / 2):
            assert_close(out, want, pretype)


@settings(max_examples=20, deadline=None)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 90)), op=st.integers(0, 3),
       aligned_area=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_reduce_against_numpy(shape, op, aligned_area, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-8, 9, shape) / 4  # small integers: ties for the index ops
    idx = op in (1, 3)
    out = zout(z.ZDNN_3DS, "FP32", shape[:2] + (1,), typ=z.INT32 if idx else None)
    area = zmod.aligned_buffer(8192) if aligned_area else None
    assert nm.reduce(zin(z.ZDNN_3DS, "FP32", x), area, op, out) == S.ZDNN_OK
    if idx:
        got = np.zeros(shape[:2] + (1,), np.int32)
        assert z.transform_origtensor(out, got) == S.ZDNN_OK
        want = (np.argmin if op == 1 else np.argmax)(x, axis=-1)[..., None]  # first occurrence
        np.testing.assert_array_equal(got, want)
    else:
        got = np.zeros(shape[:2] + (1,), np.float32)
        assert z.transform_origtensor(out, got) == S.ZDNN_OK
        np.testing.assert_array_equal(got, (np.min if op == 0 else np.max)(x, axis=-1, keepdims=True))


def test_range_violations():
    nan = zout(z.ZDNN_3DS, "FP32", (1, 1, 3))
    assert z.transform_ztensor_with_saturation(nan, np.array([[[1.0, np.nan, 2.0]]], np.float32)) \
        == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert nm.reduce(nan, None, 2, zout(z.ZDNN_3DS, "FP32", (1, 1, 1))) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert nm.reduce(nan, None, 3, zout(z.ZDNN_3DS, z.INT32, (1, 1, 1))) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    big = zin(NHWC, "FP32", np.full((1, 1, 2, 2), 8e9, np.float32))
    assert nm.norm(big, zin(NHWC, "FP32", -np.full((1, 1, 2, 2), 8e9, np.float32)),
                   zout(NHWC, "FP32", (1, 1, 2, 1))) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    zero = zin(NHWC, "FP32", np.zeros((1, 1, 1, 1), np.float32))
    x = ones((1, 2, 2, 2))
    assert nm.layernorm(x, zero, zero, 0.0, 1.0, 0.0, zout(NHWC, "FP32", (1, 2, 2, 2))) \
        == S.ZDNN_ELEMENT_RANGE_VIOLATION  # (1 - 0) / sqrt(0)


# ---- statuses -----------------------------------------------------------------------------------------------------
def _common(call, good: dict, bad: dict, format1: bool):
    """OK with the good tensors; each (name -> tensor, expected status) replacement gives its status; then the
    machine checks."""
    assert call(**good) == S.ZDNN_OK
    for name, (tensor, status) in bad.items():
        args = dict(good)
        args[name.split("#")[0]] = tensor
        assert call(**args) == status, name
    z.set_machine(NO_FUNCTIONS)
    assert call(**good) == S.ZDNN_UNAVAILABLE_FUNCTION
    z.set_machine("telum1")
    assert call(**good) == (S.ZDNN_UNAVAILABLE_FUNCTION if format1 else S.ZDNN_OK)
    z.set_machine("telum2")


def test_meanreduce2d_statuses():
    good = {"i": ones((2, 3, 4, 5)), "o": zout(NHWC, "FP32", (2, 1, 1, 5))}
    bad = {"o#c": (zout(NHWC, "FP32", (2, 1, 1, 4)), S.ZDNN_INVALID_SHAPE),
           "o#hw": (zout(NHWC, "FP32", (2, 1, 2, 5)), S.ZDNN_INVALID_SHAPE),
           "i#type": (i32((2, 3, 4, 5)), S.ZDNN_INVALID_TYPE),
           "i#fmt": (hwck((2, 3, 4, 5)), S.ZDNN_INVALID_FORMAT),
           "i#big": (ones((2, 1025, 1, 5)), S.ZDNN_FUNC_RC_F001)}
    _common(lambda i, o: nm.meanreduce2d(i, o), good, bad, False)


def test_batchnorm_statuses():
    good = {"a": ones((2, 3, 4, 5)), "b": ones((5,), z.ZDNN_1D), "c": ones((5,), z.ZDNN_1D),
            "o": zout(NHWC, "FP32", (2, 3, 4, 5))}
    bad = {"o": (zout(NHWC, "FP32", (2, 3, 4, 6)), S.ZDNN_INVALID_SHAPE),
           "b#dim1": (ones((6,), z.ZDNN_1D), S.ZDNN_INVALID_SHAPE),
           "c#notbias": (ones((2, 5), z.ZDNN_2D), S.ZDNN_INVALID_SHAPE),
           "b#type": (i32((5,), z.ZDNN_1D), S.ZDNN_INVALID_TYPE),
           "a#fmt": (hwck((2, 3, 4, 5)), S.ZDNN_INVALID_FORMAT)}
    _common(lambda a, b, c, o: nm.batchnorm(a, b, c, o), good, bad, False)


def test_norm_statuses():
    good = {"a": ones((2, 1, 4, 5)), "b": ones((2, 1, 4, 5)), "o": zout(NHWC, "FP32", (2, 1, 4, 1))}
    bad = {"b#dim4": (ones((3, 1, 4, 5)), S.ZDNN_INVALID_SHAPE),
           "a#dim3": (ones((2, 2, 4, 5)), S.ZDNN_INVALID_SHAPE),
           "o#dim2": (zout(NHWC, "FP32", (2, 1, 3, 1)), S.ZDNN_INVALID_SHAPE),
           "b#dim1": (ones((2, 1, 4, 6)), S.ZDNN_INVALID_SHAPE),
           "o#dim1": (zout(NHWC, "FP32", (2, 1, 4, 5)), S.ZDNN_INVALID_SHAPE),
           "b#type": (i32((2, 1, 4, 5)), S.ZDNN_INVALID_TYPE),
           "a#fmt": (hwck((2, 1, 4, 5)), S.ZDNN_INVALID_FORMAT)}
    _common(lambda a, b, o: nm.norm(a, b, o), good, bad, True)


def test_moments_statuses():
    good = {"i": ones((2, 3, 4, 5)), "bessel": 1, "m": zout(NHWC, "FP32", (2, 1, 1, 1)),
            "v": zout(NHWC, "FP32", (2, 1, 1, 1))}
    bad = {"m#dim1": (zout(NHWC, "FP32", (2, 1, 1, 2)), S.ZDNN_INVALID_SHAPE),
           "v#dim4": (zout(NHWC, "FP32", (3, 1, 1, 1)), S.ZDNN_INVALID_SHAPE),
           "bessel": (2, S.ZDNN_INVALID_BESSEL_CORRECTION),
           "i#single": (ones((2, 1, 1, 1)), S.ZDNN_INVALID_BESSEL_CORRECTION),  # SAMPLE of one element
           "i#type": (i32((2, 3, 4, 5)), S.ZDNN_INVALID_TYPE),
           "v#fmt": (hwck((2, 1, 1, 1)), S.ZDNN_INVALID_FORMAT)}
    _common(lambda i, bessel, m, v: nm.moments(i, bessel, m, v), good, bad, True)
    one = ones((2, 1, 1, 1))
    assert nm.moments(one, 0, good["m"], good["v"]) == S.ZDNN_OK  # POPULATION of one element is fine


def test_layernorm_statuses():
    good = {"a": ones((2, 3, 4, 5)), "b": ones((2, 1, 1, 1)), "c": ones((2, 1, 1, 1)), "beta": 0.5,
            "gamma": 2.0, "eps": 1e-3, "o": zout(NHWC, "FP32", (2, 3, 4, 5))}
    bad = {"beta": (np.inf, S.ZDNN_INVALID_BETA), "beta#nan": (np.nan, S.ZDNN_INVALID_BETA),
           "gamma": (1e12, S.ZDNN_INVALID_GAMMA), "eps": (-np.inf, S.ZDNN_INVALID_EPSILON),
           "b#dim4": (ones((3, 1, 1, 1)), S.ZDNN_INVALID_SHAPE),
           "o#dim1": (zout(NHWC, "FP32", (2, 3, 4, 6)), S.ZDNN_INVALID_SHAPE),
           "c#mismatch": (ones((2, 1, 1, 5)), S.ZDNN_INVALID_SHAPE),
           "c#type": (i32((2, 1, 1, 1)), S.ZDNN_INVALID_TYPE),
           "a#fmt": (hwck((2, 3, 4, 5)), S.ZDNN_INVALID_FORMAT)}
    _common(lambda a, b, c, beta, gamma, eps, o: nm.layernorm(a, b, c, beta, gamma, eps, o), good, bad, True)


def test_reduce_statuses():
    x = ones((2, 3, 4), z.ZDNN_3DS)
    good = {"i": x, "area": None, "op": 0, "o": zout(z.ZDNN_3DS, "FP32", (2, 3, 1))}
    area = zmod.aligned_buffer(8192 + 64)
    bad = {"o#dim1": (zout(z.ZDNN_3DS, "FP32", (2, 3, 2)), S.ZDNN_INVALID_SHAPE),
           "o#dim2": (zout(z.ZDNN_3DS, "FP32", (2, 2, 1)), S.ZDNN_INVALID_SHAPE),
           "o#idxtype": (zout(z.ZDNN_3DS, z.INT32, (2, 3, 1)), S.ZDNN_INVALID_TYPE),  # MINIMUM wants DLFLOAT16
           "i#type": (i32((2, 3, 4), z.ZDNN_3DS), S.ZDNN_INVALID_TYPE),
           "o#fmt": (hwck((2, 1, 3, 1)), S.ZDNN_INVALID_FORMAT),
           "op": (7, S.ZDNN_FUNC_RC_F000),
           "area": (area[16:16 + 8192], S.ZDNN_MISALIGNED_SAVEAREA)}
    _common(lambda i, area, op, o: nm.reduce(i, area, op, o), good, bad, True)
    assert nm.reduce(x, None, 1, good["o"]) == S.ZDNN_INVALID_TYPE  # MINIMUM_IDX wants INT32
    with pytest.raises(ShapeError):
        nm.reduce(x, area[:100], 0, good["o"])

    def fail(n):
        raise MemoryError

    saved = zmod._allocator[0]
    zmod._allocator[0] = fail
    try:
        assert nm.reduce(x, None, 0, good["o"]) == S.ZDNN_ALLOCATION_FAILURE
    finally:
        zmod._allocator[0] = saved


def test_precheck_off_raises():
    with z.settings.override(precheck=False):
        with pytest.raises(z.NNPAProgramException):
            nm.batchnorm(ones((2, 3, 4, 5)), ones((6,), z.ZDNN_1D), ones((6,), z.ZDNN_1D),
                         zout(NHWC, "FP32", (2, 3, 4, 5)))
        # statuses without * are returned without precheck too
        assert nm.moments(ones((2, 3, 4, 5)), 5, zout(NHWC, "FP32", (2, 1, 1, 1)),
                          zout(NHWC, "FP32", (2, 1, 1, 1))) == S.ZDNN_INVALID_BESSEL_CORRECTION
