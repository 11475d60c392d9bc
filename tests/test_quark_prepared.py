"""quark.prepare (weights quantized and packed once) and the ONNX nodes' PreparedCache: a prepared op reused on
many inputs is bit for bit Quark's own kernel (compiled from the amd-quark wheel) on each of them, carries no
state between calls, does not see later changes to the arrays it was prepared from, and the cache re-prepares
when a node's weights change value (never trusting array identity)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_quark_oracle import CATEGORIES, _config, kernel  # noqa: F401  (kernel: the oracle fixture)

import fusedrnn
import fusedrnn.quark as quark
from fusedrnn.targets.quark import _compiled, reference


def _other_x(rng, X):
    return (X * rng.uniform(0.5, 1.5) + rng.normal(size=X.shape) * 0.3).astype(np.float32)


@pytest.mark.parametrize("category", CATEGORIES)
def test_prepared_reused_matches_quarks_kernel(kernel, category):  # noqa: F811
    rng = np.random.default_rng(CATEGORIES.index(category) + 900)
    for _ in range(3):
        cfg = _config(rng, category)
        W, R, B, sc, H = cfg["W"], cfg["R"], cfg["B"], cfg["scales"], cfg["H"]
        try:
            prepared = quark.prepare(W, R, B, hidden_size=H, **sc)
        except fusedrnn.UnsupportedFeatureError:  # scales the kernel has undefined behaviour for
            continue
        for X in (cfg["X"], _other_x(rng, cfg["X"]), cfg["X"][:1], cfg["X"]):  # the same X again last
            y_ref, _ = reference.run(kernel, X, W, R, B, sc, H)
            np.testing.assert_array_equal(prepared(X).view(np.uint32), y_ref.view(np.uint32))


@pytest.mark.parametrize("mode", ["faithful", "corrected"])
def test_prepared_has_no_state_between_calls_and_engines_agree(mode):
    rng = np.random.default_rng(5 + (mode == "corrected"))
    for _ in range(4):
        cfg = _config(rng, "plain")
        W, R, B, sc, H = cfg["W"], cfg["R"], cfg["B"], cfg["scales"], cfg["H"]
        batch = 1 if mode == "faithful" else int(rng.integers(1, 4))
        X = np.concatenate([_other_x(rng, cfg["X"]) for _ in range(batch)], axis=1)
        kw = {}
        if mode == "corrected":
            kw = dict(initial_h=rng.uniform(-0.5, 0.5, size=(2, batch, H)),
                      initial_c=rng.normal(size=(2, batch, H)).astype(np.float32))
        prepared = quark.prepare(W, R, B, hidden_size=H, mode=mode, **sc)
        prepared(_other_x(rng, X), return_state=True, **kw)  # a call before must not change the next one
        got = prepared(X, return_state=True, **kw)
        with _compiled.use_engine("numpy"):  # the NumPy loop, a fresh preparation
            want = quark.prepare(W, R, B, hidden_size=H, mode=mode, **sc)(X, return_state=True, **kw)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))


def test_prepared_copies_the_weights():
    cfg = _config(np.random.default_rng(1), "plain")
    W, R, B, sc, H, X = cfg["W"].copy(), cfg["R"].copy(), cfg["B"].copy(), cfg["scales"], cfg["H"], cfg["X"]
    prepared = quark.prepare(W, R, B, hidden_size=H, **sc)
    y = prepared(X)
    W *= 0.5
    R[:] = 0
    B += 1
    np.testing.assert_array_equal(prepared(X), y)
    np.testing.assert_array_equal(quark.extended_lstm(X, cfg["W"], cfg["R"], cfg["B"], hidden_size=H, **sc), y)
    assert "PreparedExtendedLSTM(input_size=" in repr(prepared)


def test_prepared_checks_x():
    cfg = _config(np.random.default_rng(2), "plain")
    prepared = quark.prepare(cfg["W"], cfg["R"], cfg["B"], hidden_size=cfg["H"], **cfg["scales"])
    X = cfg["X"]
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="batch_size 1"):
        prepared(np.concatenate([X, X], axis=1))
    with pytest.raises(fusedrnn.ShapeError, match="X: .*input_size"):
        prepared(np.zeros((3, 1, X.shape[2] + 1), np.float32))
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="initial"):
        prepared(X, initial_c=np.zeros((2, 1, cfg["H"])))


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4), mode=st.sampled_from(["faithful", "corrected"]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.bool_, object]))
def test_fuzz_prepared_call_raises_only_fusedrnn_errors(shape, mode, dtype):
    rng = np.random.default_rng(0)
    H, I = 3, 2  # noqa: E741
    sc = dict(x_scale=1e-4, x_zero_point=32000, w_scale=2e-5, w_zero_point=33000, r_scale=3e-5,
              r_zero_point=32768, b_scale=1e-5, b_zero_point=32768, y_scale=3.1e-5, y_zero_point=32768)
    prepared = quark.prepare(rng.normal(size=(2, 4 * H, I)) * 0.3, rng.normal(size=(2, 4 * H, H)) * 0.3, None,
                             hidden_size=H, mode=mode, **sc)
    X = np.zeros(shape, dtype=dtype)
    try:
        y = prepared(X)
    except fusedrnn.FusedRNNError as e:
        assert str(e)
        return
    assert y.shape == (shape[0], 2, shape[1], H) and y.dtype == np.float32


def test_node_cache_finds_equal_weights_by_value_and_reprepares_on_change():
    cfg = _config(np.random.default_rng(3), "plain")
    W, R, B, sc, H, X = cfg["W"], cfg["R"], cfg["B"], cfg["scales"], cfg["H"], cfg["X"]
    cache = quark.PreparedCache(size=2)
    p1 = cache.get(W, R, B, hidden_size=H, **sc)
    assert cache.get(W.copy(), R.copy(), B.copy(), hidden_size=H, **sc) is p1  # new arrays, equal values
    W2 = W.copy()
    W2[0, 0, 0] += 0.25  # one value changes: not the cached op
    p2 = cache.get(W2, R, B, hidden_size=H, **sc)
    assert p2 is not p1
    np.testing.assert_array_equal(p2(X), quark.extended_lstm(X, W2, R, B, hidden_size=H, **sc))
    W3 = W.copy()
    W3.reshape(-1)[1::2] += 0.5  # values the sampled key skips: the full comparison catches it
    assert cache.get(W3, R, B, hidden_size=H, **sc) not in (p1, p2)
    assert cache.get(W, R, B, hidden_size=H, **sc) is not p1  # size 2: the oldest entry was dropped
    assert cache.get(W, R, B, hidden_size=H, mode="corrected", **sc) is not cache.get(W, R, B, hidden_size=H, **sc)
    with pytest.raises(fusedrnn.ShapeError):  # a failed preparation raises and caches nothing
        cache.get(W[:1], R, B, hidden_size=H, **sc)
    cache.clear()


def test_onnx_model_reuses_the_prepared_node():
    rng = np.random.default_rng(4)
    H, I, T = 6, 4, 7  # noqa: E741
    layer = fusedrnn.LSTM(rng.normal(size=(2, 4 * H, I)) * 0.4, rng.normal(size=(2, 4 * H, H)) * 0.4,
                          direction="bidirectional", merge="stack")
    x = rng.normal(size=(T, 1, I)).astype(np.float32)
    conv = quark.convert(layer, x)
    quark.NODE_CACHE.clear()
    y1 = quark.run_model(conv.model, {"X": x})["Y"]
    y2 = quark.run_model(conv.model, {"X": x[::-1].copy()})["Y"]
    assert len(quark.NODE_CACHE._entries) == 1  # the node's weights were prepared once
    W, R, B = (conv.weights[k] for k in "WRB")
    np.testing.assert_array_equal(y1, quark.extended_lstm(x, W, R, B, hidden_size=H, **conv.attributes))
    np.testing.assert_array_equal(y2, quark.extended_lstm(x[::-1], W, R, B, hidden_size=H, **conv.attributes))
