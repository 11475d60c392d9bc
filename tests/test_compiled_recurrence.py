"""The compiled recurrence (fusedrnn.cells.compiled) against the NumPy engines it replaces.

Random configurations over the whole option space of lstm_sequence / gru_sequence / rnn_sequence (directions,
sequence lengths incl. 0 and T, peepholes, clip, cell_clip, input_forget / CIFG coupling, projection with bias
and clip, diagonal R, layer norm, the eleven ONNX activations with random alpha/beta, both GRU
linear_before_reset forms), float32 and float64; the NumPy engines are run with the compiled loop switched off.
Agreement per output tensor: max |Δ| ≤ rtol · max(1, max |NumPy|), rtol 1e-6 (float32) and 1e-12 (float64).
Configurations whose dynamics amplify rounding (unbounded gate activations such as Softplus or Relu as the
GRU update gate make the step map expansive) get, in float32, an extra 8·max |NumPy float32 - NumPy float64|:
the NumPy float32 engine's own distance from the float64 result, i.e. the conditioning of the problem.
The whole file is skipped where the kernel cannot be built (no C compiler).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.cells import Activation, compiled, gru_sequence, lstm_sequence, rnn_sequence
from fusedrnn.cells.compiled import _build
from fusedrnn.cells.rounding import FP16

pytestmark = pytest.mark.skipif(not compiled.available(),
                                reason=f"compiled kernel unavailable: {compiled.unavailable_reason()}")

RTOL = {np.float32: 1e-6, np.float64: 1e-12}

# (name, alpha range, beta range): ranges keep every activation contractive enough that 12 steps stay finite
ACTS = [
    ("Relu", None, None), ("Tanh", None, None), ("Sigmoid", None, None), ("Affine", (-0.9, 0.9), (-0.5, 0.5)),
    ("LeakyRelu", (0.01, 0.5), None), ("ThresholdedRelu", (0.0, 0.5), None), ("ScaledTanh", (0.2, 1.5), (0.2, 1.5)),
    ("HardSigmoid", (0.1, 0.5), (0.2, 0.8)), ("Elu", (0.1, 1.5), None), ("Softsign", None, None),
    ("Softplus", None, None),
]


BOUNDED = ("Tanh", "Sigmoid", "ScaledTanh", "HardSigmoid", "Softsign")


def rand_act(rng, common: bool, bounded: bool = False) -> Activation:
    """A random activation; ``bounded`` for gate slots (LSTM/GRU f): an unbounded gate (Relu, Softplus, ...)
    makes the recurrence blow up within a few steps, and an overflowing run compares nothing."""
    if common and rng.random() < 0.6:
        return Activation(["Sigmoid", "Tanh"][rng.integers(2)])
    choices = [a for a in ACTS if a[0] in BOUNDED] if bounded else ACTS
    name, ar, br = choices[rng.integers(len(choices))]
    a = float(rng.uniform(*ar)) if ar else 0.0
    b = float(rng.uniform(*br)) if br else 0.0
    return Activation(name, a, b)


def common_dims(rng, dt):
    T = int(rng.integers(0, 13)) if rng.random() < 0.95 else 0
    B = int(rng.integers(1, 5))
    I = int(rng.integers(1, 10))
    H = int(rng.choice([1, 3, 7, 8, 9, 16, 17, 24]))
    direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
    D = 2 if direction == "bidirectional" else 1
    reverse = [False, True] if D == 2 else [direction == "reverse"]
    lens = None
    if rng.random() < 0.5 and T > 0:
        lens = rng.integers(0, T + 1, size=B).astype(np.int64)
    x = rng.uniform(-1, 1, (T, B, I)).astype(dt)
    return T, B, I, H, D, reverse, lens, x


def u(rng, dt, *shape, scale=1.0):
    return (rng.uniform(-scale, scale, shape)).astype(dt)


def agree(got, want, dt, label, slack=None):
    assert got is not None, f"compiled path declined: {label}"
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        bound = RTOL[dt] * max(1.0, float(np.max(np.abs(w), initial=0.0)))
        if slack is not None:
            bound += 8 * slack[k]
        assert np.all(np.isfinite(g) == np.isfinite(w)), f"output {k}: finiteness differs; {label}"
        fin = np.isfinite(w)
        err = float(np.max(np.abs(g[fin].astype(np.float64) - w[fin]), initial=0.0))
        assert err <= bound, f"output {k}: max |Δ| {err:.3g} > {bound:.3g}; {label}"


def random_lstm(rng, dt):
    T, B, I, H, D, reverse, lens, x = common_dims(rng, dt)
    k = 1.0 / np.sqrt(H)
    proj = rng.random() < 0.25
    Hp = int(rng.integers(1, 12)) if proj else H
    diagonal = not proj and rng.random() < 0.15
    kw = dict(
        reverse=reverse,
        acts=[[rand_act(rng, True, k == 0) for k in range(3)] for _ in range(D)],
        lens=lens,
        P=u(rng, dt, D, 3, H, scale=0.5) if rng.random() < 0.4 else None,
        clip=float(rng.uniform(0.3, 3)) if rng.random() < 0.3 else None,
        coupling=[None, None, "input_forget", "cifg"][rng.integers(4)],
        cell_clip=float(rng.uniform(0.2, 2)) if rng.random() < 0.3 else None,
        ln=u(rng, dt, D, 4, H) + dt(1) if rng.random() < 0.2 else None,
    )
    if proj:
        kw["proj_W"] = u(rng, dt, D, Hp, H, scale=k)
        kw["proj_b"] = u(rng, dt, D, Hp, scale=0.2) if rng.random() < 0.5 else None
        kw["proj_clip"] = float(rng.uniform(0.1, 1)) if rng.random() < 0.4 else None
    W = u(rng, dt, D, 4 * H, I, scale=k)
    R = u(rng, dt, D, 4 * H, scale=0.8) if diagonal else u(rng, dt, D, 4 * H, Hp, scale=k)
    b_x = u(rng, dt, D, 4 * H, scale=k) if rng.random() < 0.7 else None
    b_h = u(rng, dt, D, 4 * H, scale=k) if rng.random() < 0.7 else None
    h0 = u(rng, dt, D, B, Hp, scale=0.5)
    c0 = u(rng, dt, D, B, H, scale=0.5)
    return (x, W, R, b_x, b_h, h0, c0), kw


def random_gru(rng, dt):
    T, B, I, H, D, reverse, lens, x = common_dims(rng, dt)
    k = 1.0 / np.sqrt(H)
    kw = dict(
        reverse=reverse, acts=[[rand_act(rng, True, k == 0) for k in range(2)] for _ in range(D)], lens=lens,
        clip=float(rng.uniform(0.3, 3)) if rng.random() < 0.3 else None,
        linear_before_reset=bool(rng.integers(2)),
    )
    args = (x, u(rng, dt, D, 3 * H, I, scale=k), u(rng, dt, D, 3 * H, H, scale=k),
            u(rng, dt, D, 3 * H, scale=k) if rng.random() < 0.7 else None,
            u(rng, dt, D, 3 * H, scale=k) if rng.random() < 0.7 else None, u(rng, dt, D, B, H, scale=0.5))
    return args, kw


def random_rnn(rng, dt):
    T, B, I, H, D, reverse, lens, x = common_dims(rng, dt)
    k = 1.0 / np.sqrt(H)
    kw = dict(reverse=reverse, acts=[[rand_act(rng, True)] for _ in range(D)], lens=lens,
              clip=float(rng.uniform(0.3, 3)) if rng.random() < 0.3 else None)
    args = (x, u(rng, dt, D, H, I, scale=k), u(rng, dt, D, H, H, scale=k),
            u(rng, dt, D, H, scale=k) if rng.random() < 0.7 else None,
            u(rng, dt, D, H, scale=k) if rng.random() < 0.7 else None, u(rng, dt, D, B, H, scale=0.5))
    return args, kw


CELLS = {
    "lstm": (random_lstm, compiled.run_lstm, lstm_sequence),
    "gru": (random_gru, compiled.run_gru, gru_sequence),
    "rnn": (random_rnn, compiled.run_rnn, rnn_sequence),
}


def check(cell: str, seed: int, dt) -> None:
    make, fast, engine = CELLS[cell]
    rng = np.random.default_rng(seed)
    args, kw = make(rng, dt)
    with compiled.disabled():
        want = engine(*args, **kw)
    got = fast(*args, **kw, max_rows=10**6)
    slack = None
    if dt == np.float32:  # the problem's conditioning: NumPy float32 against NumPy float64
        kw64 = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == dt else v) for k, v in kw.items()}
        with compiled.disabled():
            want64 = engine(*[None if a is None else a.astype(np.float64) for a in args], **kw64)
        slack = [float(np.max(np.abs(w.astype(np.float64) - w64), initial=0.0))
                 for w, w64 in zip(want, want64, strict=True)]
    label = f"{cell} seed={seed} {np.dtype(dt).name} x{args[0].shape} " + ", ".join(
        f"{k}={v if not isinstance(v, np.ndarray) else v.shape}" for k, v in kw.items())
    agree(got, want, dt, label, slack)


@settings(max_examples=120, deadline=None)
@given(cell=st.sampled_from(sorted(CELLS)), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]))
def test_random_configurations_agree_with_numpy(cell, seed, dt):
    check(cell, seed, dt)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_seeded_configurations(cell, seed):
    check(cell, 7919 * seed + 11, np.float32 if seed % 2 else np.float64)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_long_sequence_small_batch(dt):
    """The benchmark regime: T = 300, B = 1, H = 64 (several projection chunks of the input do not matter)."""
    rng = np.random.default_rng(3)
    T, I, H = 300, 40, 64
    k = 1 / np.sqrt(H)
    x = u(rng, dt, T, 1, I)
    for direction in ([False], [False, True]):
        D = len(direction)
        acts = [[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]] * D
        args = (x, u(rng, dt, D, 4 * H, I, scale=k), u(rng, dt, D, 4 * H, H, scale=k), u(rng, dt, D, 4 * H, scale=k),
                None, np.zeros((D, 1, H), dt), np.zeros((D, 1, H), dt))
        with compiled.disabled():
            want = lstm_sequence(*args, reverse=direction, acts=acts)
        agree(compiled.run_lstm(*args, reverse=direction, acts=acts), want, dt, f"T={T} D={D}")


def test_declines_outside_its_subset():
    """None (so the engine runs NumPy) for rounding policies, h_feed, large batches, integer dtypes, and when off."""
    rng = np.random.default_rng(0)
    (x, W, R, b_x, b_h, h0, c0), kw = random_lstm(rng, np.float32)
    args = (x, W, R, b_x, b_h, h0, c0)
    kw["lens"] = None
    assert compiled.run_lstm(*args, **kw, policy=FP16) is None
    assert compiled.run_lstm(*args, **kw, h_feed=lambda h: h) is None
    assert compiled.run_lstm(*args, **kw, max_rows=0) is None
    with compiled.disabled():
        assert compiled.run_lstm(*args, **kw) is None
        assert not compiled.available()
    assert compiled.available()
    xi = x.astype(np.int32)
    assert compiled.run_lstm(xi, W, R, b_x, b_h, h0, c0, **kw) is None
    T, B = x.shape[:2]
    for bad in (np.full(B, T + 1), np.full(B, -1)):  # never index outside the sequence: the engine reports it
        assert compiled.run_lstm(*args, **{**kw, "lens": bad}) is None
    assert compiled.run_lstm(*args, **{**kw, "acts": [a[:2] for a in kw["acts"]]}) is None


def test_inputs_not_modified():
    rng = np.random.default_rng(1)
    args, kw = random_lstm(rng, np.float32)
    copies = [None if a is None else a.copy() for a in args]
    compiled.run_lstm(*args, **kw, max_rows=10**6)
    for a, c in zip(args, copies, strict=True):
        if a is not None:
            np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("name", ["Sigmoid", "Tanh"])
def test_float32_transcendentals_accuracy(name):
    """The kernel's own float32 exp-based sigmoid/tanh, seen through a one-step RNN with R = 0, W = I:
    within 4 ulp of float64 libm over [-20, 20] and [-88, -20] (sigmoid down to its float32 underflow), plus exact
    saturation far out."""
    xs = np.concatenate([np.linspace(-20, 20, 40001), np.linspace(-88, -20, 6801), np.linspace(-1e-3, 1e-3, 2001),
                         [-1e-30, 0.0, 1e-30, -100.0, 100.0, -1e4, 1e4]])
    n = xs.size
    x = xs.astype(np.float32).reshape(1, n, 1)
    W = np.ones((1, 1, 1), np.float32)
    R = np.zeros((1, 1, 1), np.float32)
    y, _ = compiled.run_rnn(x, W, R, None, None, np.zeros((1, n, 1), np.float32), reverse=[False],
                            acts=[[Activation(name)]], max_rows=10**9)
    with np.errstate(over="ignore"):
        ref = np.tanh(x.astype(np.float64)) if name == "Tanh" else 1 / (1 + np.exp(-x.astype(np.float64)))
    y, ref, x = y.astype(np.float64).ravel(), ref.ravel(), x.ravel()
    normal = np.abs(ref) >= np.finfo(np.float32).tiny  # below it the kernel flushes to 0 (|error| < 1.2e-38)
    ulp = np.spacing(np.abs(ref[normal]).astype(np.float32)).astype(np.float64)
    err = np.abs(y[normal] - ref[normal]) / ulp
    assert err.max() <= 4, f"{name}: max error {err.max():.2f} ulp at x={x[normal][err.argmax()]}"
    assert np.max(np.abs(y[~normal] - ref[~normal]), initial=0.0) < 1.2e-38


EDGE_X = [-1e4, -30.0, -2.0, -1.0, -0.5, -1e-30, 0.0, 1e-30, 0.1, 0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 30.0, 1e4,
          np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name,alpha,beta", [(n, 0.7, 0.25) for n, _, _ in ACTS] + [("ThresholdedRelu", 0.5, 0.0),
                                                                                  ("LeakyRelu", 0.01, 0.0)])
def test_each_activation_on_edge_values(name, alpha, beta, dt):
    """Every activation on values at its kinks and limits (x = alpha for ThresholdedRelu, 0, ±inf, NaN),
    through a one-step RNN with W = 1, R = 0: equal to Activation.apply (NaN where it gives NaN)."""
    xs = np.array(EDGE_X + [alpha, -alpha], dt)
    n = xs.size
    act = Activation(name, alpha, beta)
    with np.errstate(all="ignore"):
        want = act(xs).astype(dt)
        y, _ = compiled.run_rnn(xs.reshape(1, n, 1), np.ones((1, 1, 1), dt), np.zeros((1, 1, 1), dt), None, None,
                                np.zeros((1, n, 1), dt), reverse=[False], acts=[[act]], max_rows=10**9)
    got = y.ravel()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name}: NaN pattern")
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=RTOL[dt] * 4, atol=np.finfo(dt).tiny * 2, err_msg=name)


@pytest.mark.parametrize("seed", range(60))
def test_lstm_against_naive_float64_reference(seed):
    """Outside oracle: tests/naive_lstm.py, an independent per-step float64 LSTM written from the specs
    (peepholes, CIFG / input_forget, cell_clip, projection, layer norm, diagonal R, clip, sequence_lens)."""
    from naive_lstm import naive_from_config, random_config

    from fusedrnn.cells import parse_activations

    cfg = random_config(np.random.default_rng(20000 + seed))
    D = 2 if cfg["direction"] == "bidirectional" else 1
    names = cfg.get("activations") or [("Sigmoid", "Tanh", "Tanh")] * D
    acts = [parse_activations(list(n)) for n in names]
    H = cfg["W"].shape[1] // 4
    Hp = H if cfg.get("proj_W") is None else cfg["proj_W"].shape[1]
    B = cfg["x"].shape[1]
    h0 = cfg.get("h0") if cfg.get("h0") is not None else np.zeros((D, B, Hp))
    c0 = cfg.get("c0") if cfg.get("c0") is not None else np.zeros((D, B, H))
    got = compiled.run_lstm(
        cfg["x"], cfg["W"], cfg["R"], cfg.get("b_x"), cfg.get("b_h"), h0, c0,
        reverse={"forward": [False], "reverse": [True], "bidirectional": [False, True]}[cfg["direction"]],
        acts=acts, lens=cfg.get("sequence_lens"), P=cfg.get("P"), clip=cfg.get("clip"), coupling=cfg.get("coupling"),
        cell_clip=cfg.get("cell_clip"), proj_W=cfg.get("proj_W"), proj_b=cfg.get("proj_b"),
        proj_clip=cfg.get("proj_clip"), ln=cfg.get("layer_norm"), max_rows=10**6)
    want = naive_from_config(cfg)
    for name, g, w in zip(("Y", "Y_h", "Y_c"), got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=name)


@settings(max_examples=30, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), seed=st.integers(0, 2**32 - 1))
def test_fused_fast_paths_agree_with_numpy(cell, seed):
    """The float32 fused paths (standard activations, no clip / peepholes / coupling / projection / layer norm,
    H a multiple of 8, R read in place): random sizes, directions, lengths, biases, both GRU forms."""
    rng = np.random.default_rng(seed)
    dt = np.float32
    make, fast, engine = CELLS[cell]
    args, kw = make(rng, dt)
    x, W, R = args[:3]
    H = int(rng.choice([8, 16, 24, 32, 64]))
    G = 4 if cell == "lstm" else 3
    D, I, k = W.shape[0], x.shape[2], 1 / np.sqrt(H)
    args = (x, u(rng, dt, D, G * H, I, scale=k), u(rng, dt, D, G * H, H, scale=k),
            *[None if a is None else u(rng, dt, D, G * H, scale=k) for a in args[3:5]],
            *[u(rng, dt, D, x.shape[1], H, scale=0.5) for _ in args[5:]])
    if cell == "lstm":
        kw = dict(reverse=kw["reverse"], lens=kw["lens"], acts=[[Activation("Sigmoid"), Activation("Tanh"),
                                                                  Activation("Tanh")]] * D)
    else:
        kw = dict(reverse=kw["reverse"], lens=kw["lens"], linear_before_reset=kw["linear_before_reset"],
                  acts=[[Activation("Sigmoid"), Activation("Tanh")]] * D)
    with compiled.disabled():
        want = engine(*args, **kw)
    agree(fast(*args, **kw, max_rows=10**6), want, dt, f"{cell} seed={seed} H={H} {kw}")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dt=st.sampled_from([np.float32, np.float64]))
def test_lstm_onnx_gate_order_equals_canonical(seed, dt):
    """run_lstm(gate_order="onnx") on ONNX-order W, R, b_x, b_h (i, o, f, c) is the canonical call (every option:
    the kernel reorders while packing R and reads the projection per gate).

    The kernel's reordering is exact: with x = 0 the two calls agree bit for bit. With random x they agree to
    float rounding only (relative to the outputs: seed 1987 differs by 2 ulps at |y| = 95), because the hoisted
    input projection is one BLAS GEMM whose result for a column can differ by an ulp with the column's position
    in the output (OpenBLAS edge vs main micro-kernels); the recurrence carries such an ulp on, so float32
    differences grow over the steps (seed 5180186: 3e-6 at step 9, |y| = 0.03). A wrong gate order differs by
    O(|y|)."""
    from fusedrnn import conventions

    rng = np.random.default_rng(seed)
    (x, W, R, b_x, b_h, h0, c0), kw = random_lstm(rng, dt)

    def onnx(a):
        return None if a is None else np.ascontiguousarray(conventions.from_canonical(a, "lstm", "onnx", axis=1))

    for xin in (np.zeros_like(x), x):
        want = compiled.run_lstm(xin, W, R, b_x, b_h, h0, c0, **kw, max_rows=10**6)
        got = compiled.run_lstm(xin, onnx(W), onnx(R), onnx(b_x), onnx(b_h), h0, c0, **kw, max_rows=10**6,
                                gate_order="onnx")
        assert want is not None and got is not None
        for g, w in zip(got, want, strict=True):
            if xin is x:  # float rounding only: relative to the output's magnitude (outputs reach |y| ~ 100)
                scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
                np.testing.assert_allclose(g, w, rtol=0, atol=(1e-6 if dt == np.float32 else 1e-13) * scale)
            else:
                np.testing.assert_array_equal(g, w)


def fused_call(rng, cell: str, T: int, B: int, I: int, H: int, direction: str, lens_p: float):
    """Random float32 arguments of a call with the fused options (sigmoid/tanh, nothing else): lengths with
    probability ``lens_p``, each bias with 0.7, random initial states, both GRU forms."""
    dt = np.float32
    D = 2 if direction == "bidirectional" else 1
    G = 4 if cell == "lstm" else 3
    k = 1 / np.sqrt(H)
    lens = rng.integers(0, T + 1, size=B).astype(np.int64) if rng.random() < lens_p else None
    args = [u(rng, dt, T, B, I), u(rng, dt, D, G * H, I, scale=k), u(rng, dt, D, G * H, H, scale=k),
            u(rng, dt, D, G * H, scale=k) if rng.random() < 0.7 else None,
            u(rng, dt, D, G * H, scale=k) if rng.random() < 0.7 else None, u(rng, dt, D, B, H, scale=0.5)]
    kw = dict(reverse=[False, True] if D == 2 else [direction == "reverse"], lens=lens)
    if cell == "lstm":
        args.append(u(rng, dt, D, B, H, scale=0.5))
        kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]] * D
    else:
        kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh")]] * D
        kw["linear_before_reset"] = bool(rng.integers(2))
    return args, kw


@contextlib.contextmanager
def using_threads(n: int):
    """The compiled loop's thread setting n inside the block."""
    old = compiled.threads()
    compiled.set_threads(n)
    try:
        yield
    finally:
        compiled.set_threads(old)


def random_batched(rng, cell: str):
    """A float32 call in the batched subset (packed GEMM with the input projection and gate math fused): B up to
    64, H a multiple of 16, random I, T, directions, lengths, biases, both GRU forms, both LSTM gate orders."""
    dt = np.float32
    T = int(rng.integers(1, 9))
    B = int(rng.choice([4, 5, 7, 9, 16, 31, 33, 64]))
    I = int(rng.integers(1, 40))
    H = int(rng.choice([16, 32, 48, 64]))
    direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
    D = 2 if direction == "bidirectional" else 1
    args, kw = fused_call(rng, cell, T, B, I, H, direction, lens_p=0.5)
    if rng.random() < 0.25:  # an option outside the batched subset: the per-row path must take the call
        if cell == "lstm" and rng.random() < 0.5:
            kw["P"] = u(rng, dt, D, 3, H, scale=0.5)
        else:
            kw["clip"] = float(rng.uniform(0.5, 3))
    return args, kw


@settings(max_examples=40, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), seed=st.integers(0, 2**32 - 1), threads=st.sampled_from([1, 2]))
def test_batched_path_agrees_with_numpy(cell, seed, threads):
    """Batches up to 64 rows through the batched kernel (taken by default: D·B may exceed MAX_ROWS), one or two
    threads (a unidirectional call may split its panels over two threads)."""
    rng = np.random.default_rng(seed)
    args, kw = random_batched(rng, cell)
    make, fast, engine = CELLS[cell]
    with compiled.disabled():
        want = engine(*args, **kw)
    with using_threads(threads):
        outside = "P" in kw or "clip" in kw
        got = fast(*args, **kw, max_rows=10**6 if outside or len(kw["reverse"]) * args[0].shape[1] <= compiled.MAX_ROWS
                   else None)
    agree(got, want, np.float32, f"{cell} seed={seed} threads={threads} x{args[0].shape} H={args[2].shape[2]} "
                                 f"lens={kw['lens']} rev={kw['reverse']} lbr={kw.get('linear_before_reset')}")


def _rows_of(out, rows):
    """The outputs of a call restricted to batch rows ``rows`` (Y [T, D, B, H]; states [D, B, H])."""
    return [o[:, :, rows] if o.ndim == 4 else o[:, rows] for o in out]


@settings(max_examples=30, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), seed=st.integers(0, 2**32 - 1), threads=st.sampled_from([1, 2]))
def test_small_batches_give_the_bits_of_the_same_rows_in_a_large_batch(cell, seed, threads):
    """At batch 1 and 2 the batched path computes the input part 16 steps ahead, runs two panels per micro-kernel
    call and walks the panels backwards on odd steps; none of that may change a bit. Each row (and pair of rows)
    of an 8-row call, run alone, equals that row of the 8-row call (whose tiles are full: nothing hoisted). T up
    to 40 crosses the 16-step blocks; lengths, both directions, both GRU forms; agrees with the NumPy engine."""
    from fusedrnn.cells.compiled import driver

    if _build.load() is not None and _build.KERNEL.isa == "portable":
        pytest.skip("the batched path needs vector code absent from the portable build")
    rng = np.random.default_rng(seed)
    T, I = int(rng.integers(1, 41)), int(rng.integers(1, 40))
    H = int(rng.choice([16, 32, 64, 128]))
    direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
    args, kw = fused_call(rng, cell, T, 8, I, H, direction, lens_p=0.5)
    make, fast, engine = CELLS[cell]
    with using_threads(threads):
        full = fast(*args, **kw)
        assert driver.last_path() == "batched"
    with compiled.disabled():
        agree(full, engine(*args, **kw), np.float32, f"{cell} seed={seed} B=8")
    for rows in ([0], [3], [7], [1, 2], [5, 6]):
        sub = [a[:, rows] if k in (0, 5, 6) else a for k, a in enumerate(args)]  # x, h0, c0 have a batch axis
        kw_rows = dict(kw, lens=None if kw["lens"] is None else kw["lens"][rows])
        with using_threads(threads):
            got = fast(*sub, **kw_rows)
            assert driver.last_path() == "batched"
        for k, (g, w) in enumerate(zip(got, _rows_of(full, rows), strict=True)):
            assert np.array_equal(g, w), (f"{cell} seed={seed} rows={rows} T={T} I={I} H={H} {direction} "
                                          f"lens={kw['lens']} threads={threads}: output {k} differs")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_immutable_weights_are_packed_once_with_the_same_bits(cell):
    """Weights nothing can change (read-only views of bytes, as a loaded model's initializers) are packed by the
    first call and reused by the next ones: every call gives the bits of the same call on writable copies, also
    after another call with other weights and another gate order; the cache entry leaves when the arrays do."""
    from fusedrnn.cells.compiled import driver

    rng = np.random.default_rng(11)
    for lbr in ([None] if cell == "lstm" else [False, True]):
        args, kw = fused_call(rng, cell, 20, 1, 12, 32, "bidirectional", lens_p=0.0)
        if lbr is not None:
            kw["linear_before_reset"] = lbr
        frozen = list(args)
        for k in (1, 2):  # W, R as read-only arrays over bytes
            a = args[k]
            frozen[k] = np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape)
            assert driver.immutable(frozen[k]) and not driver.immutable(a)
        make, fast, engine = CELLS[cell]
        want = fast(*args, **kw)
        for _ in range(3):
            got = fast(*frozen, **kw)
            assert driver.last_path() == "batched"
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g, w)
            other = fast(*fused_call(rng, cell, 5, 1, 12, 32, "forward", lens_p=0.0)[0], **dict(
                kw, reverse=[False]))
            assert other is not None
        assert any(entry[0]() is frozen[1] and entry[1]() is frozen[2] for entry in driver._PANELS.values())
        n = len(driver._PANELS)
        del frozen  # the arrays freed: their entry leaves the cache (their addresses may be reused)
        assert len(driver._PANELS) == n - 1


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cell,lbr", [("lstm", None), ("gru", False), ("gru", True)])
def test_batched_path_threads_split(cell, lbr, threads):
    """A unidirectional call large enough to split its panels over two threads (the barrier per step), and a
    bidirectional one running a direction per thread: equal to the NumPy engine, taken by default at B = 48."""
    rng = np.random.default_rng(5)
    dt, T, B, I, H = np.float32, 6, 48, 24, 64
    G = 4 if cell == "lstm" else 3
    for D in (1, 2):
        args = [u(rng, dt, T, B, I), u(rng, dt, D, G * H, I, scale=0.2), u(rng, dt, D, G * H, H, scale=0.2),
                u(rng, dt, D, G * H, scale=0.2), u(rng, dt, D, G * H, scale=0.2), u(rng, dt, D, B, H, scale=0.5)]
        kw = dict(reverse=[False, True][:D], lens=rng.integers(0, T + 1, size=B).astype(np.int64))
        if cell == "lstm":
            args.append(u(rng, dt, D, B, H, scale=0.5))
            kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]] * D
        else:
            kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh")]] * D
            kw["linear_before_reset"] = lbr
        make, fast, engine = CELLS[cell]
        with compiled.disabled():
            want = engine(*args, **kw)
        with using_threads(threads):
            got = fast(*args, **kw)
        agree(got, want, dt, f"{cell} D={D} lbr={lbr} threads={threads}")


def random_rows(rng, cell: str):
    """A float32 call for the fused per-row path (batch 1-2, or more when BATCH_MIN is raised): the input
    projection is computed in the kernel for blocks of 8 steps, the units may be split over two threads. Random T
    (crossing the 8-step blocks), I (tails of the 8-wide dot products), H a multiple of 8 up to 128, directions,
    lengths, biases, both GRU forms, both LSTM gate orders."""
    T = int(rng.integers(1, 21))
    B = int(rng.integers(1, 3))
    I = int(rng.choice([1, 5, 8, 13, 40, 64, 67]))
    H = int(rng.choice([8, 16, 24, 64, 72, 128]))
    direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
    return fused_call(rng, cell, T, B, I, H, direction, lens_p=0.4)


@settings(max_examples=60, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), seed=st.integers(0, 2**32 - 1), threads=st.sampled_from([1, 2]),
       batch_min=st.sampled_from([3, 3, 6]))
def test_rows_path_agrees_with_numpy(cell, seed, threads, batch_min):
    """Batch 1-2 (and 3-5 with BATCH_MIN raised) through the fused per-row path, one or two threads."""
    from fusedrnn import conventions
    from fusedrnn.cells.compiled import driver

    if _build.load() is not None and _build.KERNEL.isa == "portable":
        pytest.skip("the fused per-row path is AVX code, absent from the portable build")
    rng = np.random.default_rng(seed)
    args, kw = random_rows(rng, cell)
    if batch_min > 3:  # more rows than the default lets through: the kernel's multi-row dot products
        B = int(rng.integers(3, batch_min))
        x = u(rng, np.float32, args[0].shape[0], B, args[0].shape[2])
        args = [x, *args[1:5], *[u(rng, np.float32, a.shape[0], B, a.shape[2], scale=0.5) for a in args[5:]]]
        if kw["lens"] is not None:
            kw["lens"] = rng.integers(0, x.shape[0] + 1, size=B).astype(np.int64)
    make, fast, engine = CELLS[cell]
    with compiled.disabled():
        want = engine(*args, **kw)
    onnx_order = cell == "lstm" and rng.random() < 0.5
    call_args = list(args)
    if onnx_order:
        call_args[1:5] = [None if a is None else np.ascontiguousarray(conventions.from_canonical(a, "lstm", "onnx",
                                                                                              axis=1))
                          for a in args[1:5]]
    old = driver.BATCH_MIN
    driver.BATCH_MIN = batch_min
    try:
        with using_threads(threads):
            got = fast(*call_args, **kw, **({"gate_order": "onnx"} if onnx_order else {}))
            path = driver.last_path()
    finally:
        driver.BATCH_MIN = old
    label = (f"{cell} seed={seed} threads={threads} x{args[0].shape} H={args[2].shape[2]} lens={kw['lens']} "
             f"rev={kw['reverse']} lbr={kw.get('linear_before_reset')} onnx={onnx_order}")
    assert path == "rows", label
    agree(got, want, np.float32, label)
