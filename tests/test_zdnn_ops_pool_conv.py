"""zDNN avgpool2d / maxpool2d / conv2d against PyTorch float64 on random geometries (SAME / VALID, strides 0 and
> 0), values and pre-transformed types, and every status the API reference lists for them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_ops_elementwise import (
    NO_FUNCTIONS,
    PRETYPES,
    TOL_DEFAULT,
    TOL_POOL_CONV,
    assert_close,
    stored,
    zin,
    zout,
)
from test_zdnn_oracle import dlf16_round_ref, make_zt

import fusedrnn.zdnn as z
from fusedrnn.targets.zdnn import ops_pool_conv as pc

torch = pytest.importorskip("torch")
F = torch.nn.functional
S = z.Status
NHWC = z.ZDNN_NHWC
VALID, SAME = 0, 1  # zdnn.h: VALID_PADDING = 0, SAME_PADDING = 1


@pytest.fixture(autouse=True)
def _precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def tf_geometry(n, k, s, same):
    """TensorFlow's output size and (before, after) padding, written here independently of the library."""
    if not same:
        return (n - k) // s + 1, (0, 0)
    out = math.ceil(n / s)
    total = max((out - 1) * s + k - n, 0)
    return out, (total // 2, total - total // 2)


@st.composite
def geometries(draw, max_kernel=5):
    n, h, w, c = draw(st.integers(1, 2)), draw(st.integers(1, 12)), draw(st.integers(1, 12)), draw(st.integers(1, 9))
    if draw(st.integers(0, 4)) == 0:  # zero strides: kernel = the whole plane
        return n, h, w, c, h, w, 0, 0, VALID
    same = draw(st.booleans())
    kh = draw(st.integers(1, max_kernel if same else min(max_kernel, h)))
    kw = draw(st.integers(1, max_kernel if same else min(max_kernel, w)))
    return n, h, w, c, kh, kw, draw(st.integers(1, 4)), draw(st.integers(1, 4)), SAME if same else VALID


def torch_pool(xs, kh, kw, sh, sw, pad, kind):
    t = torch.from_numpy(xs).permute(0, 3, 1, 2)
    if sh == 0:
        sh, sw = kh, kw
    oh, (pt, pb) = tf_geometry(t.shape[2], kh, sh, pad == SAME)
    ow, (pl, pr) = tf_geometry(t.shape[3], kw, sw, pad == SAME)
    if kind == "max":
        y = F.max_pool2d(F.pad(t, (pl, pr, pt, pb), value=-math.inf), (kh, kw), (sh, sw))
    else:
        total = F.avg_pool2d(F.pad(t, (pl, pr, pt, pb)), (kh, kw), (sh, sw), divisor_override=1)
        count = F.avg_pool2d(F.pad(torch.ones_like(t), (pl, pr, pt, pb)), (kh, kw), (sh, sw), divisor_override=1)
        y = total / count
    assert y.shape[2:] == (oh, ow)
    return y.permute(0, 2, 3, 1).numpy()


@settings(max_examples=40, deadline=None)
@given(g=geometries(), kind=st.sampled_from(["avg", "max"]), pretype=st.sampled_from(PRETYPES),
       seed=st.integers(0, 2**32 - 1))
def test_pool_against_torch(g, kind, pretype, seed):
    n, h, w, c, kh, kw, sh, sw, pad = g
    x = np.random.default_rng(seed).normal(0, 3, (n, h, w, c))
    want = torch_pool(stored(x, pretype), kh, kw, sh, sw, pad, kind)
    out = zout(NHWC, pretype, want.shape)
    fn = pc.avgpool2d if kind == "avg" else pc.maxpool2d
    assert fn(zin(NHWC, pretype, x), pad, kh, kw, sh, sw, out) == S.ZDNN_OK
    assert_close(out, want, pretype, TOL_POOL_CONV)
    assert_close(out, want, pretype, TOL_DEFAULT)  # stricter than zDNN's own pool tolerance
    if kind == "max" and pretype == "FP32":  # a maximum of stored values is exact
        got = np.zeros(want.shape, np.float32)
        assert z.transform_origtensor(out, got) == S.ZDNN_OK
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_avgpool_same_upstream_values():
    """testDriver_zdnn_avgpool2d_maxpool2d_pool.c: SAME, 2x2 kernel, stride 2 on a 3x3 plane."""
    x = np.array([1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60, 7, 70, 8, 80, 9, 90], np.float32).reshape(1, 3, 3, 2)
    for fn, want in ((pc.avgpool2d, [3, 30, 4.5, 45, 7.5, 75, 9, 90]), (pc.maxpool2d, [5, 50, 6, 60, 8, 80, 9, 90])):
        out = zout(NHWC, "FP32", (1, 2, 2, 2))
        assert fn(zin(NHWC, "FP32", x), SAME, 2, 2, 2, 2, out) == S.ZDNN_OK
        got = np.zeros((1, 2, 2, 2), np.float32)
        assert z.transform_origtensor(out, got) == S.ZDNN_OK
        np.testing.assert_array_equal(got.reshape(-1), want)


@settings(max_examples=40, deadline=None)
@given(g=geometries(), k=st.integers(1, 9), pretype=st.sampled_from(PRETYPES),
       act=st.sampled_from([0, 1]), clip=st.sampled_from([None, 0.0, 1.5]), seed=st.integers(0, 2**32 - 1))
def test_conv2d_against_torch(g, k, pretype, act, clip, seed):
    n, h, w, c, kh, kw, sh, sw, pad = g
    rng = np.random.default_rng(seed)
    x, wt, b = rng.normal(0, 1, (n, h, w, c)), rng.normal(0, 0.5, (kh, kw, c, k)), rng.normal(0, 1, k)
    t = torch.from_numpy(stored(x, pretype)).permute(0, 3, 1, 2)
    ssh, ssw = (sh, sw) if sh else (1, 1)
    oh, (pt, pb) = tf_geometry(h, kh, ssh, pad == SAME)
    ow, (pl, pr) = tf_geometry(w, kw, ssw, pad == SAME)
    y = F.conv2d(F.pad(t, (pl, pr, pt, pb)), torch.from_numpy(stored(wt, pretype)).permute(3, 2, 0, 1),
                 torch.from_numpy(stored(b, pretype)), stride=(ssh, ssw)).permute(0, 2, 3, 1).numpy()
    if act == 1:
        y = np.maximum(y, 0)
        if clip:
            y = np.minimum(y, float(dlf16_round_ref(np.float32(clip))))
    out = zout(NHWC, pretype, (n, oh, ow, k))
    kern = make_zt(z.ZDNN_HWCK, pretype, wt.shape, wt.astype(np.float32))
    assert pc.conv2d(zin(NHWC, pretype, x), kern, zin(z.ZDNN_1D, pretype, b), pad, sh, sw, act, clip, out) \
        == S.ZDNN_OK
    assert_close(out, y, pretype, TOL_POOL_CONV)
    assert_close(out, y, pretype, TOL_DEFAULT)


def test_conv2d_im2col_blocks():
    """Several im2col blocks (tiny block size) give the same result as one."""
    rng = np.random.default_rng(3)
    x, k, b = rng.normal(size=(2, 9, 7, 3)), rng.normal(size=(3, 2, 3, 4)), rng.normal(size=4)
    one = pc.conv2d_values(x, k, b, SAME, 2, 1)
    saved = pc.IM2COL_BLOCK_ELEMENTS
    pc.IM2COL_BLOCK_ELEMENTS = 1
    try:
        np.testing.assert_array_equal(pc.conv2d_values(x, k, b, SAME, 2, 1), one)
    finally:
        pc.IM2COL_BLOCK_ELEMENTS = saved


# ---- statuses -----------------------------------------------------------------------------------------------------
def ones(shape, layout=NHWC):
    return zin(layout, "FP32", np.ones(shape, np.float32))


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_pool_statuses(kind):
    fn = pc.avgpool2d if kind == "avg" else pc.maxpool2d
    x = ones((1, 6, 6, 3))

    def call(i=x, pad=VALID, kh=2, kw=2, sh=2, sw=2, o=None):
        o = o if o is not None else zout(NHWC, "FP32", (1, 3, 3, 3))
        return fn(i, pad, kh, kw, sh, sw, o)

    o11 = zout(NHWC, "FP32", (1, 1, 1, 3))
    assert call() == S.ZDNN_OK
    assert call(o=zout(NHWC, "FP32", (1, 3, 3, 4))) == S.ZDNN_INVALID_SHAPE  # C differs
    assert call(o=zout(NHWC, "FP32", (1, 2, 3, 3))) == S.ZDNN_INVALID_SHAPE  # output H != formula
    assert call(pad=SAME, o=zout(NHWC, "FP32", (1, 2, 3, 3))) == S.ZDNN_INVALID_SHAPE
    assert call(kh=7, sh=1, o=zout(NHWC, "FP32", (1, 1, 5, 3))) == S.ZDNN_INVALID_SHAPE  # VALID kernel > input
    assert call(kh=6, kw=5, sh=0, sw=0, o=o11) == S.ZDNN_INVALID_SHAPE  # zero strides: kernel != plane
    assert call(kh=6, kw=6, sh=0, sw=0, o=zout(NHWC, "FP32", (1, 2, 1, 3))) == S.ZDNN_INVALID_SHAPE
    assert call(kh=6, kw=6, sh=0, sw=0, o=o11) == S.ZDNN_OK
    assert call(kh=6, kw=6, sh=0, sw=0, pad=SAME, o=o11) == S.ZDNN_INVALID_STRIDE_PADDING
    assert call(sh=0) == S.ZDNN_INVALID_STRIDES
    assert call(sw=0) == S.ZDNN_INVALID_STRIDES
    assert call(i=make_zt(NHWC, z.INT32, (1, 6, 6, 3), np.ones((1, 6, 6, 3), np.int32))) == S.ZDNN_INVALID_TYPE
    assert call(i=make_zt(z.ZDNN_HWCK, "FP32", (1, 6, 6, 3), np.ones(108, np.float32))) == S.ZDNN_INVALID_FORMAT
    # hardware
    assert call(pad=SAME, sh=40000, sw=1, o=zout(NHWC, "FP32", (1, 1, 6, 3))) == S.ZDNN_EXCEEDS_MDIS
    assert call(pad=SAME, kh=0, o=zout(NHWC, "FP32", (1, 3, 3, 3))) == S.ZDNN_EXCEEDS_MDIS
    assert call(pad=2) == S.ZDNN_FUNC_RC_F000
    tall = ones((1, 1025, 1, 1))
    assert call(i=tall, kh=1025, kw=1, sh=0, sw=0, o=zout(NHWC, "FP32", (1, 1, 1, 1))) == S.ZDNN_FUNC_RC_F001
    assert call(pad=SAME, kh=65, sh=1, sw=1, o=zout(NHWC, "FP32", (1, 6, 6, 3))) == S.ZDNN_FUNC_RC_F002
    assert call(pad=SAME, sh=31, sw=1, o=zout(NHWC, "FP32", (1, 1, 6, 3))) == S.ZDNN_FUNC_RC_F003
    assert call(i=tall, pad=SAME, kh=1, kw=1, sh=1, sw=1, o=zout(NHWC, "FP32", (1, 1025, 1, 1))) \
        == S.ZDNN_FUNC_RC_F004
    z.set_machine(NO_FUNCTIONS)
    assert call() == S.ZDNN_UNAVAILABLE_FUNCTION
    z.set_machine("telum1")
    assert call() == S.ZDNN_OK


def test_conv2d_statuses():
    x, kern, bias = ones((1, 6, 6, 3)), make_zt(z.ZDNN_HWCK, "FP32", (2, 2, 3, 4), np.ones(48, np.float32)), \
        ones((4,), z.ZDNN_1D)

    def call(i=x, k=kern, b=bias, pad=VALID, sh=2, sw=2, act=0, clip=None, o=None):
        o = o if o is not None else zout(NHWC, "FP32", (1, 3, 3, 4))
        return pc.conv2d(i, k, b, pad, sh, sw, act, clip, o)

    def kernel(*shape):
        return make_zt(z.ZDNN_HWCK, "FP32", shape, np.ones(shape, np.float32))

    assert call() == S.ZDNN_OK
    assert call(b=ones((2, 4), z.ZDNN_2D)) == S.ZDNN_INVALID_SHAPE  # bias not (1, 1, 1, K)
    assert call(o=zout(NHWC, "FP32", (2, 3, 3, 4))) == S.ZDNN_INVALID_SHAPE  # N
    assert call(b=ones((5,), z.ZDNN_1D)) == S.ZDNN_INVALID_SHAPE  # K
    assert call(k=kernel(2, 2, 2, 4)) == S.ZDNN_INVALID_SHAPE  # C
    assert call(o=zout(NHWC, "FP32", (1, 3, 2, 4))) == S.ZDNN_INVALID_SHAPE  # output W != formula
    assert call(pad=SAME, o=zout(NHWC, "FP32", (1, 2, 3, 4))) == S.ZDNN_INVALID_SHAPE
    assert call(k=kernel(7, 2, 3, 4), sh=1, o=zout(NHWC, "FP32", (1, 1, 3, 4))) == S.ZDNN_INVALID_SHAPE
    o11 = zout(NHWC, "FP32", (1, 1, 1, 4))
    assert call(k=kernel(6, 6, 3, 4), sh=0, sw=0, o=o11) == S.ZDNN_OK
    assert call(k=kernel(5, 6, 3, 4), sh=0, sw=0, o=o11) == S.ZDNN_INVALID_SHAPE
    assert call(k=kernel(6, 6, 3, 4), sh=0, sw=0, o=zout(NHWC, "FP32", (1, 1, 2, 4))) == S.ZDNN_INVALID_SHAPE
    assert call(k=kernel(6, 6, 3, 4), sh=0, sw=0, pad=SAME, o=o11) == S.ZDNN_INVALID_STRIDE_PADDING
    assert call(sh=0) == S.ZDNN_INVALID_STRIDES
    assert call(sw=0) == S.ZDNN_INVALID_STRIDES
    assert call(b=make_zt(z.ZDNN_1D, z.INT32, (4,), np.ones(4, np.int32))) == S.ZDNN_INVALID_TYPE
    assert call(k=make_zt(NHWC, "FP32", (2, 2, 3, 4), np.ones(48, np.float32))) == S.ZDNN_INVALID_FORMAT
    assert call(i=make_zt(z.ZDNN_HWCK, "FP32", (1, 6, 6, 3), np.ones(108, np.float32))) == S.ZDNN_INVALID_FORMAT
    for clip in (-1.0, np.inf, np.nan, 1e11):
        assert call(act=1, clip=clip) == S.ZDNN_INVALID_CLIPPING_VALUE
        assert call(act=0, clip=clip) == S.ZDNN_OK  # ignored without RELU
    # hardware
    assert call(pad=3) == S.ZDNN_FUNC_RC_F000
    assert call(act=2) == S.ZDNN_FUNC_RC_F001
    wide = ones((1, 1, 449, 1))
    assert call(i=wide, k=kernel(1, 449, 1, 4), sh=0, sw=0, o=o11) == S.ZDNN_FUNC_RC_F002
    assert call(i=ones((1, 1, 65, 1)), k=kernel(1, 65, 1, 4), sh=1, sw=1, o=o11) == S.ZDNN_FUNC_RC_F003
    assert call(pad=SAME, sh=14, sw=1, o=zout(NHWC, "FP32", (1, 1, 6, 4))) == S.ZDNN_FUNC_RC_F004
    z.set_machine(NO_FUNCTIONS)
    assert call() == S.ZDNN_UNAVAILABLE_FUNCTION


def test_conv2d_range_violation():
    x = zin(NHWC, "FP32", np.full((1, 2, 2, 1), 8e9, np.float32))
    k = make_zt(z.ZDNN_HWCK, "FP32", (2, 2, 1, 1), np.full(4, 8e9, np.float32))
    out = zout(NHWC, "FP32", (1, 1, 1, 1))
    assert pc.conv2d(x, k, zin(z.ZDNN_1D, "FP32", np.zeros(1, np.float32)), VALID, 1, 1, 0, None, out) \
        == S.ZDNN_ELEMENT_RANGE_VIOLATION
