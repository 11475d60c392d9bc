"""Every float backend against the readable reference steps (fusedrnn.cells.reference), and the observers.

Random configurations over the whole option space of lstm_sequence / gru_sequence / rnn_sequence (directions,
sequence lengths incl. 0 and T, peepholes, clip, cell_clip, input_forget / CIFG coupling, projection with bias
and clip, diagonal R, layer norm, the eleven ONNX activations with random alpha/beta, both GRU
linear_before_reset forms), float64 and float32, run on each backend of the dispatch that accepts them (NumPy
always; compiled where it takes the call) and compared with the float64 reference:
max |Δ| ≤ rtol · max(1, max |reference|) + 8 · slack, rtol 1e-12 (float64) and 1e-5 (float32). ``slack`` is
the conditioning of the configuration: how far the reference itself moves when its weights and inputs are
perturbed by one rounding error of the dtype (large only where the dynamics amplify rounding, e.g. unbounded
candidate activations, or a value next to ThresholdedRelu's jump).

The rounded backend (fp16 / bf16 / DLFLOAT16 policies) is compared with the NumPy engine under the same policy in
tests/test_rounded_recurrence.py; here only the dispatch's routing of it is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.cells import RangeObserver, compiled, dispatch, gru_sequence, lstm_sequence, reference, rnn_sequence
from fusedrnn.cells.activations import Activation
from fusedrnn.cells.observers import GATE_POINTS, POINTS
from fusedrnn.errors import UnsupportedFeatureError

RTOL = {np.float32: 1e-5, np.float64: 1e-12}
EPS = {np.float32: 2.0**-24, np.float64: 2.0**-53}

# (name, alpha range, beta range): ranges keep every activation contractive enough for a few steps
ACTS = [
    ("Relu", None, None), ("Tanh", None, None), ("Sigmoid", None, None), ("Affine", (-0.9, 0.9), (-0.5, 0.5)),
    ("LeakyRelu", (0.01, 0.5), None), ("ThresholdedRelu", (0.0, 0.5), None), ("ScaledTanh", (0.2, 1.5), (0.2, 1.5)),
    ("HardSigmoid", (0.1, 0.5), (0.2, 0.8)), ("Elu", (0.1, 1.5), None), ("Softsign", None, None),
    ("Softplus", None, None),
]
BOUNDED = ("Tanh", "Sigmoid", "ScaledTanh", "HardSigmoid", "Softsign")
ENGINES = {"lstm": lstm_sequence, "gru": gru_sequence, "rnn": rnn_sequence}
REFERENCES = {"lstm": reference.lstm_sequence, "gru": reference.gru_sequence, "rnn": reference.rnn_sequence}


def rand_act(rng, gate: bool) -> Activation:
    """A random activation (often the default pair); a gate slot gets a bounded one: an unbounded gate (Relu,
    Softplus, ...) makes the recurrence blow up within a few steps, and an overflowing run compares nothing."""
    if rng.random() < 0.5:
        return Activation("Sigmoid" if gate else "Tanh")
    choices = [a for a in ACTS if a[0] in BOUNDED] if gate else ACTS
    name, ar, br = choices[rng.integers(len(choices))]
    return Activation(name, float(rng.uniform(*ar)) if ar else 0.0, float(rng.uniform(*br)) if br else 0.0)


def u(rng, dt, *shape, scale=1.0):
    return rng.uniform(-scale, scale, shape).astype(dt)


def random_call(rng, cell: str, dt) -> tuple[tuple, dict]:
    """(args, keywords) of a random call of the cell's engine, every option drawn."""
    T = int(rng.integers(0, 9)) if rng.random() < 0.95 else 0
    B, I = int(rng.integers(1, 5)), int(rng.integers(1, 8))
    H = int(rng.choice([1, 3, 8, 9, 16]))
    direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
    D = 2 if direction == "bidirectional" else 1
    reverse = [False, True] if D == 2 else [direction == "reverse"]
    lens = rng.integers(0, T + 1, size=B).astype(np.int64) if rng.random() < 0.5 and T > 0 else None
    x = u(rng, dt, T, B, I)
    k = 1.0 / np.sqrt(H)
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    slots = {"lstm": (True, False, False), "gru": (True, False), "rnn": (False,)}[cell]
    kw = dict(reverse=reverse, lens=lens, acts=[[rand_act(rng, gate) for gate in slots] for _ in range(D)],
              clip=float(rng.uniform(0.3, 3)) if rng.random() < 0.3 else None)
    b_x = u(rng, dt, D, G * H, scale=k) if rng.random() < 0.7 else None
    b_h = u(rng, dt, D, G * H, scale=k) if rng.random() < 0.7 else None
    W = u(rng, dt, D, G * H, I, scale=k)
    if cell == "gru":
        kw["linear_before_reset"] = bool(rng.integers(2))
    if cell != "lstm":
        return (x, W, u(rng, dt, D, G * H, H, scale=k), b_x, b_h, u(rng, dt, D, B, H, scale=0.5)), kw
    proj = rng.random() < 0.25
    Hp = int(rng.integers(1, 12)) if proj else H
    diagonal = not proj and rng.random() < 0.15
    kw.update(P=u(rng, dt, D, 3, H, scale=0.5) if rng.random() < 0.4 else None,
              coupling=[None, None, "input_forget", "cifg"][rng.integers(4)],
              cell_clip=float(rng.uniform(0.2, 2)) if rng.random() < 0.3 else None,
              ln=u(rng, dt, D, 4, H) + dt(1) if rng.random() < 0.2 else None)
    if proj:
        kw.update(proj_W=u(rng, dt, D, Hp, H, scale=k), proj_b=u(rng, dt, D, Hp, scale=0.2) if rng.random() < 0.5
                  else None, proj_clip=float(rng.uniform(0.1, 1)) if rng.random() < 0.4 else None)
    R = u(rng, dt, D, 4 * H, scale=0.8) if diagonal else u(rng, dt, D, 4 * H, Hp, scale=k)
    return (x, W, R, b_x, b_h, u(rng, dt, D, B, Hp, scale=0.5), u(rng, dt, D, B, H, scale=0.5)), kw


def perturbed(rng, args, kw, eps):
    """The call with every float array multiplied by (1 + eps·U(-1, 1)) elementwise, in float64."""
    def p(a):
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            return a
        return a.astype(np.float64) * (1 + eps * rng.uniform(-1, 1, a.shape))
    return tuple(p(a) for a in args), {k: p(v) for k, v in kw.items()}


def label(cell, seed, dt, args, kw) -> str:
    return f"{cell} seed={seed} {np.dtype(dt).name} x{args[0].shape} " + ", ".join(
        f"{k}={v.shape if isinstance(v, np.ndarray) else v}" for k, v in kw.items())


def agree(got, want, dt, slack, what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != {w.shape}; {what}"
        assert g.dtype == dt, f"output {k}: dtype {g.dtype}, expected {np.dtype(dt)}; {what}"
        bound = RTOL[dt] * max(1.0, float(np.max(np.abs(w), initial=0.0))) + 8 * slack[k]
        assert np.array_equal(np.isfinite(g), np.isfinite(w)), f"output {k}: finiteness differs; {what}"
        fin = np.isfinite(w)
        err = float(np.max(np.abs(g[fin].astype(np.float64) - w[fin]), initial=0.0))
        assert err <= bound, f"output {k}: max |Δ| {err:.3g} > {bound:.3g}; {what}"


def reference_with_slack(cell, seed, args, kw, dt):
    """The reference outputs and, per output, how far one rounding error of ``dt`` in the inputs moves them."""
    want = REFERENCES[cell](*args, **kw)
    p_args, p_kw = perturbed(np.random.default_rng(seed), args, kw, EPS[dt])
    moved = REFERENCES[cell](*p_args, **p_kw)
    slack = [float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(want, moved, strict=True)]
    return want, slack


def run_on(backend: str, cell, args, kw, **extra):
    """The engine call with the engine setting ``backend``: its outputs, or None when that backend declines."""
    with dispatch.using(backend):
        try:
            out = ENGINES[cell](*args, **kw, **extra)
        except UnsupportedFeatureError:
            decision = dispatch.last_decision()
            assert decision.backend is None and decision.reason(backend), decision
            return None
    assert dispatch.last_decision().backend == backend
    return out


def run_numpy(cell, args, kw, **extra):
    return run_on("numpy", cell, args, kw, **extra)


def check_backends(cell: str, seed: int, dt) -> list[str]:
    """Every backend that takes the call agrees with the reference; returns the backends that ran."""
    rng = np.random.default_rng(seed)
    args, kw = random_call(rng, cell, dt)
    want, slack = reference_with_slack(cell, seed, args, kw, dt)
    what = label(cell, seed, dt, args, kw)
    ran = []
    for backend in ("numpy", "compiled"):
        got = run_on(backend, cell, args, kw)
        if got is not None:
            agree(got, want, dt, slack, f"{backend}: {what}")
            ran.append(backend)
    return ran


@settings(max_examples=150, deadline=None)
@given(cell=st.sampled_from(sorted(ENGINES)), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]))
def test_random_configurations_every_backend(cell, seed, dt):
    check_backends(cell, seed, dt)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("cell", sorted(ENGINES))
def test_seeded_configurations_every_backend(cell, seed):
    check_backends(cell, 104729 * seed + 17, np.float64 if seed % 2 else np.float32)


def test_compiled_backend_is_exercised():
    """Where the kernel builds, most random configurations (batch <= 4) run on it too: the comparison above is
    not NumPy's alone."""
    if not compiled.available():
        pytest.skip(f"compiled kernel unavailable: {compiled.unavailable_reason()}")
    ran = [check_backends(cell, seed, np.float64) for cell in sorted(ENGINES) for seed in range(20)]
    assert sum("compiled" in r for r in ran) >= 50, ran


# ---- observers -------------------------------------------------------------------------------------------------
def reference_ranges(cell, args, kw) -> dict:
    """Per point, (min, max, max |.|) of the reference's step values, per direction (and gate): the ranges a
    RangeObserver on the engine must record."""
    D = len(kw["reverse"])
    seen: dict = {}

    def record(d, step):
        for point in POINTS:
            v = getattr(step, point)
            if v is None:
                continue
            axes = (0, 2) if point in GATE_POINTS else (0, 1)
            lo, hi = v.min(axis=axes), v.max(axis=axes)
            old = seen.setdefault(point, [None] * D)[d]
            seen[point][d] = (lo, hi) if old is None else (np.minimum(old[0], lo), np.maximum(old[1], hi))

    REFERENCES[cell](*args, **kw, observer=record)
    out = {}
    for point, per_d in seen.items():
        if all(r is not None for r in per_d):
            lo, hi = np.stack([r[0] for r in per_d]), np.stack([r[1] for r in per_d])
            out[point] = (lo, hi, np.maximum(np.abs(lo), np.abs(hi)))
    return out


def check_observed_ranges(cell: str, seed: int, dt) -> None:
    rng = np.random.default_rng(seed)
    args, kw = random_call(rng, cell, dt)
    what = label(cell, seed, dt, args, kw)
    plain = run_numpy(cell, args, kw)
    obs = RangeObserver()
    seen = run_numpy(cell, args, kw, observer=obs)
    for a, b in zip(seen, plain, strict=True):  # observing changes nothing, to the bit
        np.testing.assert_array_equal(a, b, err_msg="observed run differs; " + what)
    want = reference_ranges(cell, args, kw)
    moved = reference_ranges(cell, *perturbed(np.random.default_rng(seed), args, kw, EPS[dt]))
    assert set(obs.observed()) == set(want), what
    for point, (lo, hi, am) in want.items():
        got = obs.ranges(point)
        for name, g, w, m in zip(("min", "max", "absmax"), (got.min, got.max, got.absmax), (lo, hi, am),
                                 moved[point], strict=True):
            assert g.shape == w.shape and g.dtype == np.float64, f"{point}.{name}: {g.shape} vs {w.shape}; {what}"
            slack = float(np.max(np.abs(w - m), initial=0.0))
            bound = RTOL[dt] * max(1.0, float(np.max(np.abs(w), initial=0.0))) + 8 * slack
            err = float(np.max(np.abs(g - w), initial=0.0))
            assert err <= bound, f"{point}.{name}: max |Δ| {err:.3g} > {bound:.3g}; {what}"


@settings(max_examples=80, deadline=None)
@given(cell=st.sampled_from(sorted(ENGINES)), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]))
def test_range_observer_matches_reference(cell, seed, dt):
    check_observed_ranges(cell, seed, dt)


@pytest.mark.parametrize("cell", sorted(ENGINES))
def test_observer_points_shapes_and_order(cell):
    """Each step reports the wanted points once, in order, shaped [D, n, G, H] / [D, n, H] / [D, n, Hp] for the n
    rows still running (sequence_lens 3, 1, 0: n = 2, 1, 1); an observer's ``points`` limits what it is given."""
    rng = np.random.default_rng(3)
    for seed in range(200):  # a bidirectional call with lengths (and a projection for the LSTM)
        args, kw = random_call(np.random.default_rng(seed), cell, np.float64)
        if len(kw["reverse"]) == 2 and (cell != "lstm" or kw.get("proj_W") is not None) and args[0].shape[0] >= 3:
            break
    x = u(rng, np.float64, 3, 3, args[0].shape[2])
    args = (x, *args[1:5], *[u(rng, np.float64, a.shape[0], 3, a.shape[2]) for a in args[5:]])
    kw["lens"] = np.array([3, 0, 1])
    calls = []
    run_numpy(cell, args, kw, observer=lambda p, v: calls.append((p, v.shape, v.dtype)))
    D, G = 2, {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    H = args[1].shape[1] // G
    Hp = args[5].shape[2]
    points = [p for p in POINTS if cell == "lstm" or p != "cell"]
    shapes = {"preact": (G, H), "gates": (G, H), "cell": (H,), "hidden": (H,), "output": (Hp,)}
    assert calls == [(p, (D, n, *shapes[p]), np.dtype(np.float64)) for n in (2, 1, 1) for p in points]
    some = []

    def only(p, v):
        some.append(p)

    only.points = ("gates",)
    run_numpy(cell, args, kw, observer=only)
    assert some == ["gates"] * 3


def test_observed_values_are_true_values():
    """The default (sigmoid-folded) LSTM and GRU report true pre-activations and gates: one step with h0 = 0,
    c0 = 0 and no biases gives preact = x·Wᵀ and gates = σ / tanh of it, exactly as computed here."""
    rng = np.random.default_rng(7)
    x, W = rng.uniform(-1, 1, (1, 2, 3)), rng.uniform(-1, 1, (1, 8, 3))
    got = {}
    run_numpy("lstm", (x, W, np.zeros((1, 8, 2)), None, None, np.zeros((1, 2, 2)), np.zeros((1, 2, 2))),
              dict(reverse=[False], acts=[[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]]),
              observer=lambda p, v: got.setdefault(p, v))
    pre = (x[0] @ W[0].T).reshape(1, 2, 4, 2)
    np.testing.assert_allclose(got["preact"], pre, rtol=1e-14, atol=1e-15)
    sig = 1 / (1 + np.exp(-pre))
    np.testing.assert_allclose(got["gates"][:, :, [0, 1, 3]], sig[:, :, [0, 1, 3]], rtol=1e-14)
    np.testing.assert_allclose(got["gates"][:, :, 2], np.tanh(pre[:, :, 2]), rtol=1e-14)
    got = {}
    run_numpy("gru", (x, W[:, :6], np.zeros((1, 6, 2)), None, None, np.zeros((1, 2, 2))),
              dict(reverse=[False], acts=[[Activation("Sigmoid"), Activation("Tanh")]], linear_before_reset=True),
              observer=lambda p, v: got.setdefault(p, v))
    pre = (x[0] @ W[0, :6].T).reshape(1, 2, 3, 2)
    np.testing.assert_allclose(got["preact"], pre, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(got["gates"][:, :, :2], 1 / (1 + np.exp(-pre[:, :, :2])), rtol=1e-14)
    np.testing.assert_allclose(got["gates"][:, :, 2], np.tanh(pre[:, :, 2]), rtol=1e-14)


def test_range_observer_api():
    obs = RangeObserver(points=("cell", "gates"))
    with pytest.raises(ValueError, match="points"):
        RangeObserver(points=("preact", "bogus"))
    with pytest.raises(ValueError, match="no values seen"):
        obs.ranges("cell")
    with pytest.raises(ValueError, match="not among"):
        obs.ranges("preact")
    obs("cell", np.array([[[1.0, -3.0]], [[0.5, 0.25]]]))  # [D=2, n=1, H=2]
    obs("cell", np.array([[[2.0, 0.0]], [[-0.5, 0.25]]]))
    obs("preact", np.ones((2, 1, 4, 2)))  # not recorded
    r = obs.ranges("cell")
    np.testing.assert_array_equal(r.min, [-3.0, -0.5])
    np.testing.assert_array_equal(r.max, [2.0, 0.5])
    np.testing.assert_array_equal(r.absmax, [3.0, 0.5])
    gates = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2) - 20
    obs("gates", gates)
    g = obs.ranges("gates")
    assert g.min.shape == (2, 4) and g.min.dtype == np.float64
    np.testing.assert_array_equal(g.min, gates.min(axis=(1, 3)))
    np.testing.assert_array_equal(g.absmax, np.abs(gates).max(axis=(1, 3)))
    assert obs.observed() == ("cell", "gates")
    obs.reset()
    assert obs.observed() == ()


# ---- the dispatch ----------------------------------------------------------------------------------------------
@pytest.fixture
def auto_engine():
    """The engine setting "auto" during the test, whatever $FUSEDRNN_ENGINE says."""
    with dispatch.using("auto"):
        yield


def small_lstm(dt=np.float32, B=1):
    args, kw = random_call(np.random.default_rng(1), "lstm", dt)
    rng = np.random.default_rng(2)
    x = u(rng, dt, 4, B, 3)
    H = 8
    args = (x, u(rng, dt, 1, 4 * H, 3), u(rng, dt, 1, 4 * H, H), None, None, np.zeros((1, B, H), dt),
            np.zeros((1, B, H), dt))
    return args, dict(reverse=[False], acts=[[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]])


def test_engine_setting_and_validation(auto_engine):
    assert dispatch.engine() == "auto"
    assert dispatch.ENGINES == ("auto", "compiled", "rounded", "numpy")
    with dispatch.using("numpy"):
        assert dispatch.engine() == "numpy"
        with dispatch.using("rounded"):
            assert dispatch.engine() == "rounded"
        assert dispatch.engine() == "numpy"
    assert dispatch.engine() == "auto"
    for bad in ("fast", "NumPy", None):
        with pytest.raises(ValueError, match="engine: expected one of"):
            dispatch.set_engine(bad)
        with pytest.raises(ValueError, match="engine"):
            with dispatch.using(bad):
                pass
    dispatch.set_engine("numpy")
    try:
        assert dispatch.engine() == "numpy" and not compiled.is_enabled()
    finally:
        dispatch.set_engine("auto")


def test_observer_routes_to_numpy_and_is_logged(caplog, auto_engine):
    args, kw = small_lstm()
    with caplog.at_level("DEBUG", logger="fusedrnn"):
        lstm_sequence(*args, **kw, observer=RangeObserver())
    decision = dispatch.last_decision()
    assert decision.backend == "numpy" and decision.kind == "lstm" and decision.engine == "auto"
    assert decision.reason("compiled") == "observer given" and decision.reason("rounded")
    assert "compiled declined: observer given" in caplog.text
    with dispatch.using("compiled"), pytest.raises(UnsupportedFeatureError, match="observer given"):
        lstm_sequence(*args, **kw, observer=RangeObserver())
    assert dispatch.last_decision().backend is None


def test_forced_backend_that_declines_raises_with_the_reason():
    args, kw = small_lstm()
    with dispatch.using("rounded"), pytest.raises(UnsupportedFeatureError, match="EXACT"):
        lstm_sequence(*args, **kw)
    if compiled.available():
        from fusedrnn.cells.rounding import FP16

        with dispatch.using("compiled"), pytest.raises(UnsupportedFeatureError, match="rounding policy 'fp16'"):
            lstm_sequence(*args, **kw, policy=FP16)
        with dispatch.using("compiled"), pytest.raises(UnsupportedFeatureError, match="h_feed"):
            lstm_sequence(*args, **kw, h_feed=lambda h: h.copy())
    with dispatch.using("rounded"), pytest.raises(UnsupportedFeatureError, match="no rounded RNN loop"):
        rnn_sequence(*random_call(np.random.default_rng(0), "rnn", np.float32)[0],
                     **random_call(np.random.default_rng(0), "rnn", np.float32)[1])


def test_auto_takes_the_first_backend_that_accepts(auto_engine):
    from fusedrnn.cells import rounded
    from fusedrnn.cells.compiled import driver
    from fusedrnn.cells.rounding import FP16

    args, kw = small_lstm()
    want = {"compiled": compiled.available(), "rounded": rounded.available()}
    lstm_sequence(*args, **kw)
    assert dispatch.last_decision().backend == ("compiled" if want["compiled"] else "numpy")
    if want["compiled"]:
        assert driver.last_path() in ("rows", "batched", "per-row")
    lstm_sequence(*args, **kw, policy=FP16)
    d = dispatch.last_decision()
    assert d.backend == ("rounded" if want["rounded"] else "numpy")
    assert "rounding policy 'fp16'" in d.reason("compiled") or not want["compiled"]
    with compiled.disabled():  # the deprecated switch: the NumPy engines run everything
        assert dispatch.engine() == "numpy" and not compiled.available() and not rounded.available()
        lstm_sequence(*args, **kw, policy=FP16)
        assert dispatch.last_decision().backend == "numpy"
    big, kwb = small_lstm(B=64)
    kwb["clip"] = 1.0  # outside the batched subset: the per-row path takes at most MAX_ROWS rows
    lstm_sequence(*big, **kwb)
    d = dispatch.last_decision()
    assert d.backend == "numpy"
    assert "per-row path" in d.reason("compiled") or not want["compiled"]


def test_onnx_gate_order_on_every_backend():
    """gate_order="onnx" (W, R, biases in ONNX's i, o, f, c) equals the canonical call, to the bit on the NumPy
    loop (it reorders while it copies the weights into its compute order anyway); also under a rounding policy
    (the rounded backend reorders its copies)."""
    from fusedrnn import conventions
    from fusedrnn.cells.rounding import FP16

    ran = {"numpy": 0, "compiled": 0, "rounded": 0}
    for seed in range(24):
        args, kw = random_call(np.random.default_rng(seed), "lstm", np.float32)
        if seed % 2:  # in the rounded loop's subset: default activations, no projection, layer norm, diagonal R
            args, kw = list(args), dict(kw, policy=FP16, ln=None, proj_W=None, proj_b=None, proj_clip=None,
                                        acts=[[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]]
                                        * len(kw["reverse"]))
            D, H, B = args[1].shape[0], args[1].shape[1] // 4, args[0].shape[1]
            if args[2].ndim != 3 or args[2].shape[2] != H:  # R and h0 without the projection
                rng = np.random.default_rng(seed)
                args[2], args[5] = u(rng, np.float32, D, 4 * H, H, scale=0.3), u(rng, np.float32, D, B, H)
        onnx = [None if a is None else np.ascontiguousarray(conventions.from_canonical(a, "lstm", "onnx", axis=1))
                for a in args[1:5]]
        for backend in ran:
            want = run_on(backend, "lstm", args, kw)
            if want is None:
                continue
            ran[backend] += 1
            got = run_on(backend, "lstm", (args[0], *onnx, *args[5:]), kw, gate_order="onnx")
            for g, w in zip(got, want, strict=True):
                if backend == "numpy":
                    np.testing.assert_array_equal(g, w)
                else:
                    np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * max(1.0, float(np.abs(w).max(initial=0))))
    assert ran["numpy"] == 24, ran
    from fusedrnn.cells import rounded

    assert ran["compiled"] >= 8 or not compiled.available(), ran
    assert ran["rounded"] >= 6 or not rounded.available(), ran
    with pytest.raises(ValueError, match="gate_order"):
        run_on("numpy", "lstm", args, kw, gate_order="keras")


def test_environment_sets_the_engine(monkeypatch):
    from fusedrnn.cells import setting

    for env, want in (({}, "auto"), ({"FUSEDRNN_ENGINE": "numpy"}, "numpy"), ({"FUSEDRNN_ENGINE": " Compiled "},
                                                                             "compiled")):
        monkeypatch.delenv("FUSEDRNN_ENGINE", raising=False)
        monkeypatch.delenv("FUSEDRNN_COMPILED", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert setting.from_environment() == want
    monkeypatch.delenv("FUSEDRNN_ENGINE")
    monkeypatch.setenv("FUSEDRNN_COMPILED", "0")  # the deprecated alias
    with pytest.warns(DeprecationWarning, match="FUSEDRNN_ENGINE=numpy"):
        assert setting.from_environment() == "numpy"
    monkeypatch.setenv("FUSEDRNN_ENGINE", "rounded")  # the new variable wins
    assert setting.from_environment() == "rounded"
    monkeypatch.setenv("FUSEDRNN_ENGINE", "fast")
    with pytest.warns(RuntimeWarning, match="FUSEDRNN_ENGINE"):
        assert setting.from_environment() == "auto"


def test_targets_read_the_one_setting(auto_engine):
    """The SDK targets' engine choices read the same setting; a target's own use_engine block overrides it for
    that target only."""
    from fusedrnn.targets.litert import _compiled as litert_c
    from fusedrnn.targets.mli import _compiled as mli_c
    from fusedrnn.targets.quark import _compiled as quark_c

    loops = (mli_c, litert_c, quark_c)
    assert [c.default_engine() for c in loops] == ["auto"] * 3
    for engine, target_engine in (("numpy", "numpy"), ("compiled", "compiled"), ("rounded", "auto")):
        with dispatch.using(engine):
            assert [c.default_engine() for c in loops] == [target_engine] * 3
    with dispatch.using("numpy"):
        assert [c.library("auto") for c in loops] == [None] * 3
    with mli_c.use_engine("numpy"):
        assert mli_c.default_engine() == "numpy" and mli_c.library() is None
        assert litert_c.default_engine() == "auto" and dispatch.engine() == "auto"
        with dispatch.using("compiled"):
            assert mli_c.default_engine() == "numpy" and quark_c.default_engine() == "compiled"
    assert mli_c.default_engine() == "auto"
    with pytest.raises(ValueError, match="engine"):
        with mli_c.use_engine("rounded"):  # not a target loop
            pass


def test_ops_run_through_the_dispatch(auto_engine):
    from fusedrnn import ops

    rng = np.random.default_rng(0)
    X, W, R = rng.uniform(-1, 1, (3, 2, 4)), rng.uniform(-1, 1, (1, 9, 4)), rng.uniform(-1, 1, (1, 9, 3))
    ops.gru(X, W, R)
    assert dispatch.last_decision().kind == "gru"
    with dispatch.using("numpy"):
        y_np = ops.lstm(X.astype(np.float32), *(rng.uniform(-1, 1, (1, 16, s)).astype(np.float32) for s in (4, 4)))
        assert dispatch.last_decision().backend == "numpy"
    assert y_np[0].shape == (3, 1, 2, 4)
