"""zDNN activations (relu ... gelu) against NumPy / PyTorch float64 references on random shapes, values,
parameters and pre-transformed types, and every status the API reference lists for them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_ops_elementwise import NO_FUNCTIONS, PRETYPES, assert_close, feature_tensors, stored, zin, zout
from test_zdnn_oracle import dlf16_round_ref

import fusedrnn.zdnn as z
from fusedrnn.errors import ShapeError
from fusedrnn.targets.zdnn import ops_activation as act
from fusedrnn.targets.zdnn import ztensor as zmod

torch = pytest.importorskip("torch")
S = z.Status
shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 70))


@pytest.fixture(autouse=True)
def _precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def dlf(v: float) -> float:
    return float(dlf16_round_ref(np.float32(v)))


@settings(max_examples=30, deadline=None)
@given(shape=shapes, pretype=st.sampled_from(PRETYPES), clip=st.sampled_from([None, 0.0, 0.7, 3.0, 1e-12]),
       adj=st.sampled_from([None, 0.0, 0.01, 0.3, 1.0]), seed=st.integers(0, 2**32 - 1))
def test_relu_and_leaky_relu(shape, pretype, clip, adj, seed):
    x = np.random.default_rng(seed).normal(0, 3, shape)
    xs = stored(x, pretype)
    out = zout(z.ZDNN_3DS, pretype, shape)
    if adj is None:
        assert act.relu(zin(z.ZDNN_3DS, pretype, x), clip, out) == S.ZDNN_OK
        want = np.maximum(xs, 0)
    else:
        assert act.leaky_relu(zin(z.ZDNN_3DS, pretype, x), clip, adj, out) == S.ZDNN_OK
        want = np.where(xs >= 0, xs, dlf(adj) * xs)
    if clip and dlf(clip):  # a clipping value that rounds to DLF16 0 means no clipping
        want = np.minimum(want, dlf(clip))
    assert_close(out, want, pretype)


REF = {
    "tanh": lambda t: torch.tanh(t),
    "sigmoid": lambda t: torch.sigmoid(t),
    "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
}


@settings(max_examples=30, deadline=None)
@given(op=st.sampled_from(sorted(REF)), shape=shapes, pretype=st.sampled_from(PRETYPES),
       scale=st.sampled_from([0.5, 3.0, 20.0]), seed=st.integers(0, 2**32 - 1))
def test_tanh_sigmoid_gelu_against_torch(op, shape, pretype, scale, seed):
    x = np.random.default_rng(seed).normal(0, scale, shape)
    out = zout(z.ZDNN_3DS, pretype, shape)
    assert getattr(act, op)(zin(z.ZDNN_3DS, pretype, x), out) == S.ZDNN_OK
    want = REF[op](torch.from_numpy(stored(x, pretype))).numpy()
    assert_close(out, want, pretype)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, pretype=st.sampled_from(PRETYPES), log=st.booleans(), masked=st.booleans(),
       scale=st.sampled_from([0.5, 4.0, 30.0]), aligned_area=st.booleans(), data=st.data())
def test_softmax_and_mask_against_torch(shape, pretype, log, masked, scale, aligned_area, data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    mask = data.draw(st.integers(0, shape[-1])) if masked else 0
    x = np.random.default_rng(seed).normal(0, scale, shape)
    out = zout(z.ZDNN_3DS, pretype, shape)
    area = zmod.aligned_buffer(8192) if aligned_area else None
    a = act.SOFTMAX_ACT_LOG if log else act.SOFTMAX_ACT_NONE
    xin = zin(z.ZDNN_3DS, pretype, x)
    if masked:
        assert act.softmax_mask(xin, area, a, mask, out) == S.ZDNN_OK
    else:
        assert act.softmax(xin, area, a, out) == S.ZDNN_OK
    xs = torch.from_numpy(stored(x, pretype))
    m = mask or shape[-1]
    want = np.zeros(shape)
    f = torch.log_softmax if log else torch.softmax
    want[..., :m] = f(xs[..., :m], dim=-1).numpy()
    assert_close(out, want, pretype)


def test_softmax_mask_upstream_values():
    """zDNN's testDriver_zdnn_softmax_mask values (mask 2 of 8, NONE and LOG); the tail is 0."""
    x = np.array([[[-1.4, -2.8, -3.12, -4.16, -5.20, -6.24, -7.28, -8.32]]], np.float32)
    for a, want in ((act.SOFTMAX_ACT_NONE, [0.802184, 0.197816, 0, 0, 0, 0, 0, 0]),
                    (act.SOFTMAX_ACT_LOG, [-0.220417, -1.620417, 0, 0, 0, 0, 0, 0])):
        out = zout(z.ZDNN_3DS, "FP32", x.shape)
        assert act.softmax_mask(zin(z.ZDNN_3DS, "FP32", x), None, a, 2, out) == S.ZDNN_OK
        assert_close(out, np.array(want).reshape(x.shape), "FP32")


def test_range_violation():
    x = zin(z.ZDNN_2D, "FP32", np.array([[1.0, -2.0]], np.float32))
    out = zout(z.ZDNN_2D, "FP32", (1, 2))
    nan_in = zout(z.ZDNN_2D, "FP32", (1, 2))
    assert z.transform_ztensor_with_saturation(nan_in, np.array([[np.nan, 1.0]], np.float32)) \
        == S.ZDNN_ELEMENT_RANGE_VIOLATION  # a NINF element
    for call in (lambda i: act.relu(i, None, out), lambda i: act.tanh(i, out), lambda i: act.sigmoid(i, out),
                 lambda i: act.gelu(i, out), lambda i: act.leaky_relu(i, None, 0.1, out)):
        assert call(x) == S.ZDNN_OK
        assert call(nan_in) == S.ZDNN_ELEMENT_RANGE_VIOLATION


ELEMENTWISE = {
    "relu": lambda i, o, clip=None, adj=None: act.relu(i, clip, o),
    "leaky_relu": lambda i, o, clip=None, adj=0.1: act.leaky_relu(i, clip, 0.1 if adj is None else adj, o),
    "tanh": lambda i, o, **_: act.tanh(i, o),
    "sigmoid": lambda i, o, **_: act.sigmoid(i, o),
    "gelu": lambda i, o, **_: act.gelu(i, o),
    "softmax": lambda i, o, **_: act.softmax(i, None, act.SOFTMAX_ACT_NONE, o),
    "softmax_mask": lambda i, o, **_: act.softmax_mask(i, None, act.SOFTMAX_ACT_LOG, 2, o),
}
FORMAT1 = ("leaky_relu", "gelu", "softmax_mask")


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_statuses(op):
    a, out, bad_shape, bad_type, bad_format = feature_tensors()
    call = ELEMENTWISE[op]
    assert call(a, out) == S.ZDNN_OK
    assert call(bad_shape, out) == S.ZDNN_INVALID_SHAPE
    assert call(bad_type, out) == S.ZDNN_INVALID_TYPE
    assert call(bad_format, out) == S.ZDNN_INVALID_FORMAT
    if op in ("relu", "leaky_relu"):
        for clip in (-1.0, np.inf, np.nan, 1e11):
            assert call(a, out, clip=clip) == S.ZDNN_INVALID_CLIPPING_VALUE
        assert call(a, out, clip=-0.0) == S.ZDNN_OK  # -0.0 == 0: no clipping
    if op == "leaky_relu":
        for adj in (-0.1, 1.01, np.inf, np.nan):
            assert call(a, out, adj=adj) == S.ZDNN_INVALID_ADJUSTMENT_FACTOR
        assert call(a, out, adj=1.0002) == S.ZDNN_OK  # rounds to DLF16 1.0
    z.set_machine(NO_FUNCTIONS)
    assert call(a, out) == S.ZDNN_UNAVAILABLE_FUNCTION
    z.set_machine("telum1")
    assert call(a, out) == (S.ZDNN_UNAVAILABLE_FUNCTION if op in FORMAT1 else S.ZDNN_OK)


@pytest.mark.parametrize("masked", [False, True])
def test_softmax_hardware_statuses(masked):
    def call(i, o, area=None, a=act.SOFTMAX_ACT_NONE, mask=0):
        return act.softmax_mask(i, area, a, mask, o) if masked else act.softmax(i, area, a, o)

    a, out, *_ = feature_tensors()
    assert call(a, out, a=2) == S.ZDNN_FUNC_RC_F001
    nhwc = zin(z.ZDNN_NHWC, "FP32", np.ones((1, 2, 3, 4), np.float32))  # dim3 = 2
    assert call(nhwc, zout(z.ZDNN_NHWC, "FP32", (1, 2, 3, 4))) == S.ZDNN_FUNC_RC_F000
    area = zmod.aligned_buffer(8192 + 64)
    assert call(a, out, area=area[8:8 + 8192]) == S.ZDNN_MISALIGNED_SAVEAREA
    with pytest.raises(ShapeError):
        call(a, out, area=area[:4096])
    if masked:
        assert call(a, out, mask=5) == S.ZDNN_FUNC_RC_F002  # dim1 is 4
        assert call(a, out, mask=4) == S.ZDNN_OK

    def fail(n):
        raise MemoryError

    saved = zmod._allocator[0]
    zmod._allocator[0] = fail
    try:
        assert call(a, out) == S.ZDNN_ALLOCATION_FAILURE
        assert call(a, out, area=area[:8192]) == S.ZDNN_OK  # a caller's save area needs no allocation
    finally:
        zmod._allocator[0] = saved
