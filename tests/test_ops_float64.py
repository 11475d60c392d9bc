"""The float64 path of fusedrnn.ops against the naive float64 reference (``reference.py``) to 1e-12.

onnxruntime runs neither float64 nor layout=1, so here the reference is the oracle: random configurations over
the whole option space (directions, sequence_lens with 0 / T / mixtures, initial states, B, clip, all 11
activations with full / too short / empty alpha and beta lists, input_forget, peepholes, linear_before_reset,
layout 0 and 1), long sequences, and the alternative ``activation_defaults="onnx"`` when fusedrnn offers it.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

try:
    import reference as ref
except ImportError:  # tests/ imported as a package
    from tests import reference as ref

TOL = 1e-12  # relative and absolute
N_SEEDS = {"lstm": 150, "gru": 100, "rnn": 100}
SEED_BASE = {"lstm": 110_000, "gru": 120_000, "rnn": 130_000}
OUT_NAMES = {"lstm": ("Y", "Y_h", "Y_c"), "gru": ("Y", "Y_h"), "rnn": ("Y", "Y_h")}


@pytest.fixture(scope="module")
def ops():
    from fusedrnn import ops

    return ops


def _seeds(counts):
    return [pytest.param(cell, seed, id=f"{cell}-{seed}") for cell, n in counts.items() for seed in range(n)]


def assert_outputs_close(actual, expected, cell, what, tol=TOL):
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for name, a, e in zip(OUT_NAMES[cell], actual, expected, strict=True):
        assert a.dtype == np.float64, f"{name} dtype {a.dtype}; {what}"
        assert a.shape == e.shape, f"{name} shape {a.shape} != {e.shape}; {what}"
        err = np.max(np.abs(a - e), initial=0.0)
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=f"{name} (max abs err {err:.3g}); {what}")


def _mixed_case(names, rng):
    """Activation names in random letter case (LSTM and GRU names are case-insensitive)."""
    out = []
    for n in names:
        k = rng.integers(3)
        out.append(n if k == 0 else n.lower() if k == 1 else n.upper())
    return out


@pytest.mark.parametrize("cell,seed", _seeds(N_SEEDS))
def test_random_float64_vs_reference(ops, cell, seed):
    rng = np.random.default_rng(SEED_BASE[cell] + seed)
    layout = int(rng.random() < 0.5)
    args, kw, expected = ref.stable_case(cell, rng, layout=layout, dtype=np.float64, max_abs=1e3)
    ops_kw = dict(kw)
    if cell != "rnn" and "activations" in kw and rng.random() < 0.3:
        ops_kw["activations"] = _mixed_case(kw["activations"], rng)
    actual = getattr(ops, cell)(*args, **ops_kw)
    assert_outputs_close(actual, expected, cell, f"seed={seed} ops attrs={ops_kw}; {ref.describe(cell, args, kw)}")


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_long_sequence_float64(ops, cell, layout):
    rng = np.random.default_rng(500 + 10 * layout + {"lstm": 1, "gru": 2, "rnn": 3}[cell])
    args, kw = ref.random_case(cell, rng, layout=layout, dtype=np.float64, shape=(520, 3, 3, 2), tame=True)
    kw["direction"] = "bidirectional" if layout else "reverse"
    D = 2 if layout else 1
    G = ref.GATES[cell]
    # redraw the direction-dependent arrays for the chosen direction
    args[1] = rng.uniform(-0.8, 0.8, (D, G * 2, 3))
    args[2] = rng.uniform(-0.8, 0.8, (D, G * 2, 2))
    args[3] = rng.uniform(-0.5, 0.5, (D, 2 * G * 2))
    args[4] = np.array([520, 261, 0 if layout else 1], np.int32)
    state = (3, D, 2) if layout else (D, 3, 2)
    args[5] = rng.uniform(-1, 1, state)
    if cell == "lstm":
        args[6] = rng.uniform(-1, 1, state)
        args[7] = rng.uniform(-0.5, 0.5, (D, 6))
    n_act = {"lstm": 3, "gru": 2, "rnn": 1}[cell] * D
    kw["activations"] = [str(rng.choice(ref.TAME_ACTIVATIONS)) for _ in range(n_act)]
    kw.pop("activation_alpha", None)
    kw.pop("activation_beta", None)
    expected = ref.REFERENCE[cell](*args, **kw)
    actual = getattr(ops, cell)(*args, **kw)
    assert_outputs_close(actual, expected, cell, ref.describe(cell, args, kw))


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_compute_dtype_follows_input(ops, cell):
    rng = np.random.default_rng(3)
    args, kw = ref.random_case(cell, rng, dtype=np.float32)
    assert all(a.dtype == np.float32 for a in getattr(ops, cell)(*args, **kw))
    args64 = [None if a is None else a.astype(np.float64) if a.dtype.kind == "f" else a for a in args]
    out64 = getattr(ops, cell)(*args64, **kw)
    assert all(a.dtype == np.float64 for a in out64)
    assert_outputs_close(out64, ref.REFERENCE[cell](*args64, **kw), cell, ref.describe(cell, args, kw))


# --------------------------------------------------------------------- activation_defaults="onnx" option

ALPHA_USERS = ("Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu")


def _accepts_onnx_defaults(ops, cell):
    """Whether ops.<cell> takes ``activation_defaults``: a named parameter, or ``**attributes`` that accept it."""
    fn = getattr(ops, cell)
    params = inspect.signature(fn).parameters
    if "activation_defaults" in params:
        return True
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return False
    G = ref.GATES[cell]
    probe = [np.zeros((1, 1, 1)), np.zeros((1, G, 1)), np.zeros((1, G, 1))]
    try:
        fn(*probe, activation_defaults="onnx")
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.parametrize("cell,seed", _seeds({"lstm": 40, "gru": 30, "rnn": 30}))
def test_onnx_activation_defaults(ops, cell, seed):
    if not _accepts_onnx_defaults(ops, cell):
        pytest.skip(f"ops.{cell} has no activation_defaults option")
    rng = np.random.default_rng(150_000 + 1000 * list(N_SEEDS).index(cell) + seed)
    layout = int(rng.random() < 0.5)
    # activation lists drawn mostly from the alpha/beta users, with short or empty lists, so defaults matter
    pool = ALPHA_USERS + ("Sigmoid", "Tanh")
    for _ in range(100):
        args, kw = ref.random_case(cell, rng, layout=layout, dtype=np.float64, activation_pool=pool)
        if "activations" not in kw:
            continue
        kw["activation_defaults"] = "onnx"
        with np.errstate(all="ignore"):
            expected = ref.REFERENCE[cell](*args, **kw)
        if all(np.all(np.isfinite(e)) and np.max(np.abs(e)) <= 1e3 for e in expected):
            break
    actual = getattr(ops, cell)(*args, **kw)
    assert_outputs_close(actual, expected, cell, f"seed={seed}; {ref.describe(cell, args, kw)}")


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_onnx_defaults_differ_from_ort_defaults(ops, cell):
    """With every alpha/beta left to its default, "onnx" (Affine = 1*x + 0) differs from "ort" (Affine = 0)
    exactly as the reference says."""
    if not _accepts_onnx_defaults(ops, cell):
        pytest.skip(f"ops.{cell} has no activation_defaults option")
    rng = np.random.default_rng(11)
    args, _ = ref.random_case(cell, rng, dtype=np.float64, shape=(4, 3, 2, 3))
    args[1], args[2] = (rng.uniform(-1, 1, (1,) + a.shape[1:]) for a in args[1:3])
    for k in range(3, len(args)):
        args[k] = None
    acts = {"lstm": ["Sigmoid", "Affine", "Affine"], "gru": ["Sigmoid", "Affine"],
            "rnn": ["Affine"]}[cell]
    outs = {}
    for defaults in ("ort", "onnx"):
        kw = {"activations": acts, "activation_defaults": defaults}
        outs[defaults] = getattr(ops, cell)(*args, **kw)
        assert_outputs_close(outs[defaults], ref.REFERENCE[cell](*args, **kw), cell, f"defaults={defaults}")
    assert not np.allclose(outs["ort"][0], outs["onnx"][0])
