"""The ``zdnn`` registry target: float LSTM/GRU layers run zDNN's DLFLOAT16 arithmetic through the float engines,
agree with the ztensor API and the conformance data, and refuse what zDNN cannot express."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_dir
from test_zdnn_ops import rnn_params, run_zdnn_rnn
from test_zdnn_oracle import expected_in_pretype, tolerance_failures

import fusedrnn
import fusedrnn.zdnn as z
from fusedrnn import targets
from fusedrnn.errors import UnsupportedFeatureError

FICO = (1, 0, 2, 3)  # canonical i, f, g, o from zDNN's f, i, c, o


def canonical(p, kind):
    """zDNN per-gate (D, G, in, h) arrays (x @ W) -> fusedrnn canonical [D, G*h, in] (out x in) arrays."""
    order = FICO if kind == "lstm" else (0, 1, 2)
    D, G, _, h = p["W"].shape

    def mat(a):
        return np.ascontiguousarray(a[:, list(order)].transpose(0, 1, 3, 2)).reshape(D, G * h, -1)

    def vec(a):
        return np.ascontiguousarray(a[:, list(order)]).reshape(D, G * h)

    return mat(p["W"]), mat(p["R"]), vec(p["Wb"]), vec(p["Rb"])


def layer_for(kind, p, direction):
    W, R, bx, bh = canonical(p, kind)
    d = {"FWD": "forward", "BWD": "reverse", "BIDIR": "bidirectional"}[direction]
    if kind == "lstm":
        return fusedrnn.LSTM(W, R, bx, bh, direction=d, merge="stack")
    return fusedrnn.GRU(W, R, bx, bh, direction=d, merge="stack", linear_before_reset=True)


def test_registered():
    t = targets.get("zdnn")
    assert t.family == "zdnn" and not t.needs_calibration and "zdnn" in targets.names()
    assert t.summary()["rounding"] == "dlf16-zdnn"
    assert {"lstm", "gru", "bidirectional"} <= t.features and "peepholes" not in t.features


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("direction", ["FWD", "BWD", "BIDIR"])
def test_layer_target_equals_ztensor_api(kind, direction):
    """layer.to("zdnn") and zdnn_lstm/zdnn_gru on ztensors are the same arithmetic, bit for bit."""
    D = 2 if direction == "BIDIR" else 1
    p = rnn_params(kind, D, 7, 3, 20, 70, np.random.default_rng(11))
    status, hn, cf = run_zdnn_rnn(kind, p, direction, True)
    assert status == z.ZDNN_OK
    want = np.zeros(hn.pre_transformed_desc.shape(), np.float32)
    assert z.transform_origtensor(hn, want) == z.ZDNN_OK
    layer = layer_for(kind, p, direction).to("zdnn")
    state = (p["h0"], p["c0"]) if kind == "lstm" else p["h0"]
    y, st_ = layer(p["x"], state)
    np.testing.assert_array_equal(y, want)
    if kind == "lstm":
        c_want = np.zeros((1, D) + p["h0"].shape[1:], np.float32)
        assert z.transform_origtensor(cf, c_want) == z.ZDNN_OK
        np.testing.assert_array_equal(st_[1], c_want[0])


def test_layer_target_passes_conformance_cases():
    d = shared_dir("conformance", "zdnn")
    for case in sorted(d.glob("testDriver_zdnn_*_rnn__*_hn_all.json")):
        meta = json.loads(case.read_text())
        a = dict(np.load(case.with_suffix(".npz")))
        kind = "lstm" if meta["op"] == "zdnn_lstm" else "gru"
        layer = layer_for(kind, a, meta["direction"]).to("zdnn")
        y, st_ = layer(a["x"], (a["h0"], a["c0"]) if kind == "lstm" else a["h0"])
        tol = meta["tolerance"]["fp32"]
        assert tolerance_failures(y.view(np.int32), a["expected_hn"], "FP32", tol) == 0
        assert expected_in_pretype(a["expected_hn"], "FP32").shape == y.shape


def test_differs_from_fp32_by_dlfloat16_rounding():
    p = rnn_params("lstm", 1, 20, 4, 16, 32, np.random.default_rng(3))
    layer = layer_for("lstm", p, "FWD")
    y32, _ = layer(p["x"])
    yz, _ = layer.to("zdnn")(p["x"])
    err = np.abs(y32 - yz).max()
    assert 0 < err < 2e-2
    v = yz.view(np.uint32)
    assert np.all((v & 0x3FFF) == 0)  # outputs are DLFLOAT16 values: 9 fraction bits


def test_unsupported_features():
    rng = np.random.default_rng(0)
    H, I = 4, 3
    W, R = rng.standard_normal((1, 4 * H, I)), rng.standard_normal((1, 4 * H, H))
    with pytest.raises(UnsupportedFeatureError, match="peepholes"):
        fusedrnn.LSTM(W, R, P=np.zeros((1, 3, H))).to("zdnn")
    with pytest.raises(UnsupportedFeatureError, match="clip"):
        fusedrnn.LSTM(W, R, clip=3.0).to("zdnn")
    with pytest.raises(UnsupportedFeatureError, match="custom_activations"):
        fusedrnn.LSTM(W, R, activations=["HardSigmoid", "Tanh", "Tanh"]).to("zdnn")
    with pytest.raises(UnsupportedFeatureError, match="projection"):
        fusedrnn.LSTM(W, R[:, :, :2], proj_W=np.zeros((1, 2, H))).to("zdnn")
    Wg, Rg = rng.standard_normal((1, 3 * H, I)), rng.standard_normal((1, 3 * H, H))
    with pytest.raises(UnsupportedFeatureError, match="linear_before_reset"):
        fusedrnn.GRU(Wg, Rg).to("zdnn")
    with pytest.raises(UnsupportedFeatureError, match="rnn"):
        fusedrnn.RNN(rng.standard_normal((1, H, I)), rng.standard_normal((1, H, H))).to("zdnn")
    layer = fusedrnn.LSTM(W, R).to("zdnn")
    x = rng.standard_normal((5, 2, I)).astype(np.float32)
    with pytest.raises(UnsupportedFeatureError, match="sequence_lens"):
        layer(x, sequence_lens=[5, 3])
    y, _ = layer(x, sequence_lens=[5, 5])  # full lengths are no lengths
    np.testing.assert_array_equal(y, layer(x)[0])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_split_rounding_points_with_sequence_lens(kind):
    """The engines' xproj/hproj split (used by the zdnn policy) under sequence_lens: each row equals that row run
    alone over its own length (forward and reverse directions)."""
    from fusedrnn.cells.activations import Activation
    from fusedrnn.cells.gru import gru_sequence
    from fusedrnn.cells.lstm import lstm_sequence
    from fusedrnn.targets.zdnn.policy import DLF16_OP_BOUNDARIES

    rng = np.random.default_rng(4)
    G, H, I, T, B = (4 if kind == "lstm" else 3), 6, 5, 7, 4
    W = rng.uniform(-0.5, 0.5, (2, G * H, I)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (2, G * H, H)).astype(np.float32)
    bx, bh = (rng.uniform(-0.5, 0.5, (2, G * H)).astype(np.float32) for _ in range(2))
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    h0 = rng.standard_normal((2, B, H)).astype(np.float32)
    lens = np.array([7, 3, 5, 1])
    acts = [(Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh"))[: G - 1 if kind == "gru" else 3]] * 2

    def run(xx, hh, ll):
        if kind == "lstm":
            return lstm_sequence(xx, W, R, bx, bh, hh, hh, reverse=(False, True), acts=acts, lens=ll,
                                 policy=DLF16_OP_BOUNDARIES)
        return gru_sequence(xx, W, R, bx, bh, hh, reverse=(False, True), acts=acts, lens=ll, linear_before_reset=True,
                            policy=DLF16_OP_BOUNDARIES)

    full = run(x, h0, lens)
    for b, n in enumerate(lens):
        alone = run(np.ascontiguousarray(x[:n, b : b + 1]), np.ascontiguousarray(h0[:, b : b + 1]), None)
        np.testing.assert_array_equal(full[0][:n, :, b], alone[0][:, :, 0])
        np.testing.assert_array_equal(full[1][:, b], alone[1][:, 0])
