"""fusedrnn.quark corrected mode: within 1.5 LSB of y_scale of a float64 LSTM on the dequantized inputs, on
random cases where the faithful kernel breaks (power-of-two scales, y_zero_point < 32768, Y's range tighter than
h, batch > 1, one direction)."""

import numpy as np
import pytest

import fusedrnn
import fusedrnn.quark
from fusedrnn.numerics.affine import quark_quantize_uint16

CASES = ("pow2", "near_pow2", "y_pow2", "y_zp_low", "wrap", "batch", "forward", "reverse", "initial_state")
LSB_BOUND = 1.5


def _qparams(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    s = (hi - lo) / 65535.0
    return s, int(np.clip(round(-lo / s), 0, 65535))


def _deq(a, s, z):
    return (quark_quantize_uint16(a, s, z).astype(np.float64) - z) * float(np.float32(s))


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def float64_lstm(X, W, R, B, direction, h_range, h0=None, c0=None):
    """Plain float64 ONNX LSTM (gate order i, o, f, c), h limited to h_range (the interval Y can hold; the
    corrected kernel saturates there, wider than h in every case but "wrap")."""
    T, batch, _ = X.shape
    D, G, _ = W.shape
    H = G // 4
    Y = np.zeros((T, D, batch, H))
    for d in range(D):
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        h = np.zeros((batch, H)) if h0 is None else h0[d].copy()
        c = np.zeros((batch, H)) if c0 is None else c0[d].copy()
        for s in range(T):
            t = T - 1 - s if rev else s
            g = X[t] @ W[d].T + h @ R[d].T + B[d, :G] + B[d, G:]
            c = _sigmoid(g[:, 2 * H:3 * H]) * c + _sigmoid(g[:, :H]) * np.tanh(g[:, 3 * H:])
            h = np.clip(_sigmoid(g[:, H:2 * H]) * np.tanh(c), *h_range)
            Y[t, d] = h
    return Y


def _case(rng, kind):
    T, I, H = int(rng.integers(1, 14)), int(rng.integers(1, 24)), int(rng.integers(1, 24))
    batch = int(rng.integers(2, 5)) if kind in ("batch", "forward", "reverse", "initial_state") else 1
    direction = kind if kind in ("forward", "reverse") else "bidirectional"
    D = 1 if direction != "bidirectional" else 2
    # trained-like (contractive) weights; with chaotic random weights any rounding is amplified without bound
    X = rng.normal(size=(T, batch, I)).astype(np.float32)
    W = (rng.normal(size=(D, 4 * H, I)) * rng.uniform(0.2, 1.0) / np.sqrt(I)).astype(np.float32)
    R = (rng.normal(size=(D, 4 * H, H)) * rng.uniform(0.2, 1.0) / np.sqrt(H)).astype(np.float32)
    B = (rng.normal(size=(D, 8 * H)) * 0.3).astype(np.float32)
    sc = {}
    for n, a in zip("xwrb", (X, W, R, B), strict=True):
        m = rng.uniform(1.0, 1.5)
        sc[f"{n}_scale"], sc[f"{n}_zero_point"] = _qparams(float(a.min()) * m, float(a.max()) * m)
    sc["y_scale"], sc["y_zero_point"] = _qparams(-rng.uniform(1.0, 1.2), rng.uniform(1.0, 1.2))
    if kind in ("pow2", "near_pow2"):
        sc["x_scale"], sc["w_scale"] = 2.0 ** int(rng.integers(-15, -12)), 2.0 ** int(rng.integers(-16, -14))
        sc["r_scale"] = 2.0 ** int(rng.integers(-15, -13))
        sc["y_scale"] = 2.0**-15
        if kind == "near_pow2":
            sc["w_scale"] = float(np.nextafter(np.float32(sc["w_scale"]), np.float32(0)))
        for n, a in zip("xwr", (X, W, R), strict=True):  # power-of-two scales that still cover the data
            need = float(np.abs(a).max()) / 32000.0
            while sc[f"{n}_scale"] < need:
                sc[f"{n}_scale"] *= 2.0
    if kind == "y_pow2":
        sc["y_scale"] = 2.0**-15
    if kind == "y_zp_low":
        sc["y_scale"], sc["y_zero_point"] = 2.3 / 65535, int(rng.integers(30000, 32768))
    if kind == "wrap":
        sc["y_scale"], sc["y_zero_point"] = _qparams(-rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3))
    h0 = c0 = None
    if kind == "initial_state":
        h0 = rng.uniform(-0.5, 0.5, size=(D, batch, H)).astype(np.float32)
        c0 = rng.uniform(-1, 1, size=(D, batch, H)).astype(np.float32)
    return X, W, R, B, sc, H, direction, h0, c0


@pytest.mark.parametrize("kind", CASES)
def test_corrected_within_bound_where_faithful_breaks(kind):
    rng = np.random.default_rng(CASES.index(kind) + 100)
    broken = 0
    for _ in range(14):
        X, W, R, B, sc, H, direction, h0, c0 = _case(rng, kind)
        ys, yz = float(np.float32(sc["y_scale"])), sc["y_zero_point"]
        h_range = (-yz * ys, (65535 - yz) * ys)
        deq = [_deq(a, sc[f"{n}_scale"], sc[f"{n}_zero_point"]) for n, a in zip("xwrb", (X, W, R, B), strict=True)]
        h0d = None if h0 is None else _deq(h0, sc["y_scale"], yz)
        ref = float64_lstm(*deq, direction, h_range, h0d, None if c0 is None else c0.astype(np.float64))
        y = fusedrnn.quark.extended_lstm(X, W, R, B, hidden_size=H, direction=direction, mode="corrected",
                                         initial_h=h0, initial_c=c0, **sc)
        err = np.abs(y - ref).max() / ys
        assert err <= LSB_BOUND, (kind, err)
        try:
            yf = fusedrnn.quark.extended_lstm(X, W, R, B, hidden_size=H, direction=direction, initial_h=h0,
                                              initial_c=c0, **sc)
        except fusedrnn.UnsupportedFeatureError:  # batch > 1, one direction, initial states
            broken += 1
            continue
        broken += int(np.abs(yf - ref).max() / ys > LSB_BOUND)
    assert broken >= 5, (kind, broken)  # the cases do break the faithful kernel


def test_corrected_equals_faithful_when_no_defect_applies():
    """No power-of-two scale, y_zero_point >= 32768, Y wide enough: the two modes differ only by the corrected
    mode's wider mantissas, i.e. by at most one LSB here."""
    rng = np.random.default_rng(9)
    for _ in range(10):
        X, W, R, B, sc, H, _, _, _ = _case(rng, "plain")
        sc["y_zero_point"] = max(sc["y_zero_point"], 32768)
        a = fusedrnn.quark.extended_lstm(X, W, R, B, hidden_size=H, **sc)
        b = fusedrnn.quark.extended_lstm(X, W, R, B, hidden_size=H, mode="corrected", **sc)
        assert np.abs(a - b).max() <= 1.01 * np.float32(sc["y_scale"])
