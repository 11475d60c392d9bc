"""fusedrnn.quark argument checking, contract limits of the faithful mode, helpers and tanhf backends."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusedrnn
import fusedrnn.quark as quark
from fusedrnn.targets.quark import fixed, tanhf

H, I, T = 3, 2, 4
SC = dict(x_scale=1e-4, x_zero_point=32000, w_scale=2e-5, w_zero_point=33000, r_scale=3e-5, r_zero_point=32768,
          b_scale=1e-5, b_zero_point=32768, y_scale=3.1e-5, y_zero_point=32768)


def _arrays(D=2, batch=1, rng=None):
    rng = rng or np.random.default_rng(0)
    return (rng.normal(size=(T, batch, I)).astype(np.float32), rng.normal(size=(D, 4 * H, I)) * 0.3,
            rng.normal(size=(D, 4 * H, H)) * 0.3, rng.normal(size=(D, 8 * H)) * 0.1)


def test_faithful_contract_limits():
    X, W, R, B = _arrays()
    y = quark.extended_lstm(X, W, R, B, hidden_size=H, **SC)
    assert y.shape == (T, 2, 1, H) and y.dtype == np.float32
    # the direction attribute is ignored, as by the kernel
    np.testing.assert_array_equal(quark.extended_lstm(X, W, R, B, hidden_size=H, direction="forward", **SC), y)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="batch_size 1"):
        quark.extended_lstm(np.concatenate([X, X], axis=1), W, R, B, hidden_size=H, **SC)
    with pytest.raises(fusedrnn.ShapeError, match="read past the end"):
        quark.extended_lstm(X, W[:1], R[:1], B[:1], hidden_size=H, **SC)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="initial"):
        quark.extended_lstm(X, W, R, B, hidden_size=H, initial_h=np.zeros((2, 1, H)), **SC)
    # B omitted means zeros
    np.testing.assert_array_equal(quark.extended_lstm(X, W, R, None, hidden_size=H, **SC),
                                  quark.extended_lstm(X, W, R, np.zeros_like(B), hidden_size=H, **SC))
    assert quark.extended_lstm(X[:0], W, R, B, hidden_size=H, **SC).shape == (0, 2, 1, H)


def test_corrected_batch_rows_are_independent_and_directions_split():
    X, W, R, B = _arrays(batch=3)
    y = quark.extended_lstm(X, W, R, B, hidden_size=H, mode="corrected", **SC)
    for b in range(3):
        np.testing.assert_array_equal(y[:, :, b: b + 1],
                                      quark.extended_lstm(X[:, b: b + 1], W, R, B, hidden_size=H, mode="corrected",
                                                          **SC))
    fw = quark.extended_lstm(X, W[:1], R[:1], B[:1], hidden_size=H, mode="corrected", direction="forward", **SC)
    bw = quark.extended_lstm(X, W[1:], R[1:], B[1:], hidden_size=H, mode="corrected", direction="reverse", **SC)
    np.testing.assert_array_equal(np.concatenate([fw, bw], axis=1), y)


def test_undefined_scales_raise_clear_errors():
    X, W, R, B = _arrays()
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="undefined behaviour"):
        quark.extended_lstm(X, W, R, B, hidden_size=H, **(SC | {"x_scale": 0.5, "w_scale": 0.5,
                                                                  "w_zero_point": 40000}))
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="undefined behaviour"):
        quark.extended_lstm(X, W, R, B, hidden_size=H, **(SC | {"y_scale": 0.1}))


BAD = [
    ({"hidden_size": 0}, fusedrnn.AttributeValueError, "hidden_size"),
    ({"hidden_size": True}, fusedrnn.AttributeValueError, "hidden_size"),
    ({"mode": "exact"}, fusedrnn.AttributeValueError, "mode"),
    ({"direction": "both"}, fusedrnn.AttributeValueError, "direction"),
    ({"layout": 1}, fusedrnn.AttributeValueError, "layout"),
    ({"input_forget": 1}, fusedrnn.AttributeValueError, "input_forget"),
    ({"x_scale": 0.0}, fusedrnn.AttributeValueError, "x_scale"),
    ({"w_scale": float("nan")}, fusedrnn.AttributeValueError, "w_scale"),
    ({"y_scale": "1e-5"}, fusedrnn.DTypeError, "y_scale"),
    ({"r_scale": [1e-5, 2e-5]}, fusedrnn.DTypeError, "r_scale"),
    ({"b_zero_point": 65536}, fusedrnn.AttributeValueError, "b_zero_point"),
    ({"x_zero_point": -1}, fusedrnn.AttributeValueError, "x_zero_point"),
    ({"y_zero_point": 1.5}, fusedrnn.DTypeError, "y_zero_point"),
]


@pytest.mark.parametrize("change, error, name", BAD)
def test_bad_arguments_name_themselves(change, error, name):
    X, W, R, B = _arrays()
    kw = {"hidden_size": H, **SC} | change
    with pytest.raises(error, match=name):
        quark.extended_lstm(X, W, R, B, **kw)


@settings(max_examples=60, deadline=None)
@given(x_shape=st.lists(st.integers(0, 4), min_size=1, max_size=4),
       d=st.integers(1, 3), h=st.integers(-1, 4), mode=st.sampled_from(["faithful", "corrected"]),
       direction=st.sampled_from(["forward", "reverse", "bidirectional", "sideways"]),
       scale=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(1e-4)),
       zp=st.one_of(st.integers(-10, 70000), st.just(32768)))
def test_fuzz_validation_raises_only_fusedrnn_errors(x_shape, d, h, mode, direction, scale, zp):
    rng = np.random.default_rng(0)
    X = rng.normal(size=x_shape).astype(np.float32)
    hh = max(h, 1)
    W = rng.normal(size=(d, 4 * hh, x_shape[-1])) * 0.2
    R = rng.normal(size=(d, 4 * hh, hh)) * 0.2
    kw = SC | {"x_scale": scale, "w_zero_point": zp}
    try:
        y = quark.extended_lstm(X, W, R, None, hidden_size=h, mode=mode, direction=direction, **kw)
    except fusedrnn.FusedRNNError as e:
        assert str(e)
        return
    assert y.dtype == np.float32 and y.ndim == 4 and np.all(np.isfinite(y))


def test_y_range_and_dequantize():
    lo, hi = quark.y_range(3.1e-5, 32768)
    assert lo == pytest.approx(-32768 * 3.1e-5) and hi == pytest.approx(32767 * 3.1e-5)
    y = quark.dequantize_output(np.array([0, 32768, 65535], np.uint16), np.float32(0.5), 32768)
    np.testing.assert_array_equal(y, np.float32([-16384, 0, 16383.5]))


def test_fix_corrected_never_wraps_and_is_accurate():
    for v in [2.0**k for k in range(-20, 20)] + [3.0, -0.75, 1e-7, 12345.678, float(np.float32(2**-8 * (1 - 2**-24)))]:
        a, m = fixed.fix_corrected(v, 30)
        assert 2**29 <= abs(m) < 2**30 and math.copysign(1, m) == math.copysign(1, v)
        assert abs(m * 2.0**-a - v) <= 2.0**-a * 0.5
    assert fixed.fix_faithful(2.0**-3) == (18, -32768)  # defect 1: 2^15 wraps to -32768


def test_tanhf_backends_agree_on_a_sample():
    rng = np.random.default_rng(1)
    x = (rng.normal(size=3000) * rng.choice([1e-6, 0.1, 1, 5, 20], 3000)).astype(np.float32)
    ref = tanhf.tanhf_libm(x) if tanhf.libm_available() else None
    fd = tanhf.tanhf_fdlibm(x)
    cr = tanhf.tanhf_correctly_rounded(x)
    # the two algorithms differ by at most two ulp (glibc documents 2 ulp for tanhf)
    assert np.all(np.abs(fd.view(np.int32).astype(np.int64) - cr.view(np.int32).astype(np.int64)) <= 2)
    if ref is not None and tanhf.backend() == "fdlibm":
        np.testing.assert_array_equal(fd.view(np.uint32), ref.view(np.uint32))
    old = tanhf.backend()
    try:
        tanhf.set_backend("correctly_rounded")
        assert tanhf.backend() == "correctly_rounded"
        np.testing.assert_array_equal(tanhf.tanhf(x), cr)
    finally:
        tanhf.set_backend("auto")
    assert tanhf.backend() == old
    with pytest.raises(fusedrnn.AttributeValueError, match="backend"):
        tanhf.set_backend("fast")
