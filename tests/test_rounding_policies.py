"""Storage-rounding policies (``fusedrnn.cells.rounding``): fp16 / bf16 emulation through the float engines.

(a) A policy rounding at chosen points, run by the engine in float64, against ``tests/naive_lstm.py`` with
    ``np.float16`` / ``ml_dtypes.bfloat16`` casts at the same points (an independent emulation): equal to 1e-12
    (both compute in float64 between the rounding points, so the rounded values agree bit for bit).
(b) The registered ``fp16`` / ``bf16`` targets (float32 arithmetic): outputs differ from fp32 by an amount
    consistent with the format's precision, agree with the float64 emulation to a few units of roundoff, and
    are exactly representable in the format.
(c) ``RoundingPolicy`` rejects unknown rounding points.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from naive_lstm import describe, layer_kwargs, naive_from_config, random_config

import fusedrnn
from fusedrnn.cells.rounding import BF16, EXACT, FP16, POINTS, RoundingPolicy
from fusedrnn.errors import AttributeValueError, FusedRNNError
from fusedrnn.targets import Target

FORMATS = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}
UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8}


def inplace_rounder(fmt):
    """The engine-side rounding function (in place), written here rather than taken from fusedrnn."""
    dt = FORMATS[fmt]

    def rnd(a: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            a[...] = a.astype(dt)

    return rnd


def emulation_rounder(fmt):
    """The reference-side rounding function (returns a float64 array)."""
    dt = FORMATS[fmt]

    def rnd(a: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return a.astype(dt).astype(np.float64)

    return rnd


def run_layer(cfg: dict, target):
    layer = fusedrnn.LSTM(cfg["W"], cfg["R"], cfg.get("b_x"), cfg.get("b_h"), **layer_kwargs(cfg)).to(target)
    state = (cfg["h0"], cfg["c0"]) if cfg.get("h0") is not None else None
    y, (h, c) = layer(cfg["x"], state, sequence_lens=cfg.get("sequence_lens"))
    return y, h, c


def f64_target(fmt: str, points) -> Target:
    policy = RoundingPolicy(f"{fmt}@{'+'.join(points)}", {p: inplace_rounder(fmt) for p in points})
    return Target(policy.name, "float64 arithmetic, rounding at chosen points", dtype=np.dtype(np.float64),
                  rounding=policy)


# ------------------------------------------------------------------------------------------------ (a)
POINT_SETS = [(p,) for p in POINTS] + [
    ("preact", "gates"), ("cell", "hidden"), ("inputs", "hidden"), ("weights", "cell"), ("gates", "outputs"),
    ("weights", "preact", "hidden"), tuple(POINTS),
]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("points", POINT_SETS, ids=["+".join(p) for p in POINT_SETS])
def test_chosen_points_match_emulation(fmt, points):
    """Rounding at the chosen points only, against the independent emulation (12 random configs each)."""
    target = f64_target(fmt, points)
    em = emulation_rounder(fmt)
    rounding = {p: em for p in points}
    rng = np.random.default_rng([list(FORMATS).index(fmt), POINT_SETS.index(points)])
    exact = f64_target(fmt, ())
    n_differ = 0
    for _ in range(12):
        cfg = random_config(rng)
        # a stored single bias; the double-bias case is test_weights_point_rounds_each_bias_tensor
        cfg["b_h"] = None
        got = run_layer(cfg, target)
        want = naive_from_config(cfg, rounding=rounding)
        for name, g, w in zip(("Y", "Y_h", "Y_c"), got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"{name} {fmt} {points}; "
                                                                             f"{describe(cfg)}")
        plain = run_layer(cfg, exact)
        n_differ += any(not np.array_equal(g, p) for g, p in zip(got, plain, strict=True))
    # the rounding points are really in the loop (outputs alone changes only the final arrays, still visible)
    assert n_differ >= 6, f"rounding at {points} changed only {n_differ}/12 results"


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_chosen_points_through_ops(fmt):
    """The functional ONNX form with ``rounding=`` and ``dtype=float64``, against the emulation (peepholes,
    input_forget, clip, bidirectional, sequence_lens)."""
    rng = np.random.default_rng(4)
    T, B, I, H = 6, 3, 3, 4
    X = rng.standard_normal((T, B, I))
    W_c = rng.standard_normal((2, 4 * H, I)) * 0.6
    R_c = rng.standard_normal((2, 4 * H, H)) * 0.6
    b_c = rng.standard_normal((2, 4 * H)) * 0.3
    P_c = rng.standard_normal((2, 3, H)) * 0.4  # canonical i, f, o
    lens = np.array([6, 2, 5], np.int32)
    onnx_order = [0, 3, 1, 2]  # ONNX blocks i, o, f, c from canonical i, f, g, o

    def to_onnx(a):
        return a.reshape(a.shape[0], 4, H, *a.shape[2:])[:, onnx_order].reshape(a.shape)

    B_onnx = np.concatenate([to_onnx(b_c), np.zeros_like(b_c)], axis=1)
    P_onnx = P_c[:, [0, 2, 1]].reshape(2, 3 * H)
    for points in (("preact", "cell"), ("gates", "hidden", "inputs"), tuple(POINTS)):
        policy = RoundingPolicy("p", {p: inplace_rounder(fmt) for p in points})
        got = fusedrnn.ops.lstm(X, to_onnx(W_c), to_onnx(R_c), B_onnx, lens, None, None, P_onnx,
                                direction="bidirectional", input_forget=1, clip=1.5, dtype=np.float64,
                                rounding=policy)
        want = naive_from_config(
            dict(x=X, W=W_c, R=R_c, b_x=b_c, direction="bidirectional", P=P_c, coupling="input_forget", clip=1.5,
                 sequence_lens=lens), rounding={p: emulation_rounder(fmt) for p in points})
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"{fmt} {points}")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_weights_point_rounds_each_bias_tensor(fmt):
    """rounding.py: "weights: W, R, biases, ... once before the run" -- the stored tensors b_x and b_h are
    each rounded (a target stores both), then added in the compute precision."""
    rng = np.random.default_rng(8)
    cfg = random_config(rng, T=3, B=2, H=4, I=3, direction="forward")
    cfg.update(b_x=rng.standard_normal((1, 16)) * 0.7, b_h=rng.standard_normal((1, 16)) * 0.7, layer_norm=None)
    got = run_layer(cfg, f64_target(fmt, ("weights",)))
    want = naive_from_config(cfg, rounding={"weights": emulation_rounder(fmt)})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------ (b)
def _representable(a: np.ndarray, fmt: str) -> bool:
    return bool(np.array_equal(a, a.astype(FORMATS[fmt]).astype(a.dtype), equal_nan=True))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_registered_target_sanity(fmt):
    """fp16 / bf16 targets: differ from fp32, within a bound consistent with the format, close to the float64
    emulation, every returned value representable in the format."""
    u = UNIT_ROUNDOFF[fmt]
    em = emulation_rounder(fmt)
    n_differ = 0
    worst_fp32 = worst_emul = 0.0
    for seed in range(60):
        cfg = random_config(np.random.default_rng(300 + seed), allow_custom_acts=False)
        cfg["b_h"] = None
        got = run_layer(cfg, fmt)
        ref32 = run_layer(cfg, "fp32")
        emul = naive_from_config(cfg, rounding={p: em for p in POINTS})
        scale = max(1.0, max(float(np.abs(a).max()) for a in emul))
        for g, r, e in zip(got, ref32, emul, strict=True):
            assert g.dtype == np.float32
            assert _representable(g, fmt), f"{fmt} output not representable; {describe(cfg)}"
            worst_fp32 = max(worst_fp32, float(np.abs(g - r).max()) / scale)
            worst_emul = max(worst_emul, float(np.abs(g - e).max()) / scale)
        n_differ += any(not np.array_equal(g, r) for g, r in zip(got, ref32, strict=True))
    assert n_differ >= 50, f"{fmt}: only {n_differ}/60 results differ from fp32"
    # T <= 8: a few dozen roundings per value at most
    assert worst_fp32 <= 40 * u, f"{fmt}: |y - y_fp32| = {worst_fp32:.3g} > 40 u"
    assert worst_fp32 >= u / 2, f"{fmt}: |y - y_fp32| = {worst_fp32:.3g} suspiciously small"
    # float32 instead of float64 between rounding points: occasional one-ulp flips only
    assert worst_emul <= 8 * u, f"{fmt}: |y - emulation| = {worst_emul:.3g} > 8 u"


def test_fp16_error_smaller_than_bf16():
    cfg = random_config(np.random.default_rng(12), T=8, B=3, H=6, I=4, direction="bidirectional",
                        allow_custom_acts=False)
    ref = run_layer(cfg, "fp64")
    err = {fmt: max(float(np.abs(g - r).max()) for g, r in zip(run_layer(cfg, fmt), ref, strict=True))
           for fmt in FORMATS}
    assert 0 < err["fp16"] < err["bf16"]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("cell", ["gru", "rnn"])
def test_gru_rnn_targets_representable(fmt, cell):
    rng = np.random.default_rng(5)
    G = 3 if cell == "gru" else 1
    H, I = 5, 3
    cls = fusedrnn.GRU if cell == "gru" else fusedrnn.RNN
    layer = cls(rng.standard_normal((2, G * H, I)) * 0.5, rng.standard_normal((2, G * H, H)) * 0.5,
                rng.standard_normal((2, G * H)) * 0.2, rng.standard_normal((2, G * H)) * 0.2,
                direction="bidirectional", merge="stack")
    x = rng.standard_normal((7, 3, I))
    y, h = layer.to(fmt)(x, sequence_lens=np.array([7, 3, 0]))
    y32, h32 = layer(x, sequence_lens=np.array([7, 3, 0]))
    for a, b in ((y, y32), (h, h32)):
        assert _representable(a, fmt)
        assert not np.array_equal(a, b)
        assert np.abs(a - b).max() <= 40 * UNIT_ROUNDOFF[fmt]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("merge", ["stack", "concat", "sum", "ave", "mul"])
def test_merged_outputs_representable(fmt, merge):
    """Whatever the direction merge, a reduced-precision target returns values of its format."""
    cfg = random_config(np.random.default_rng(21), T=5, B=2, H=4, I=3, direction="bidirectional",
                        allow_custom_acts=False)
    kw = layer_kwargs(cfg)
    kw["merge"] = merge
    layer = fusedrnn.LSTM(cfg["W"], cfg["R"], cfg.get("b_x"), cfg.get("b_h"), **kw).to(fmt)
    y, (h, c) = layer(cfg["x"])
    assert _representable(y, fmt) and _representable(h, fmt) and _representable(c, fmt)


# ------------------------------------------------------------------------------------------------ (c)
@pytest.mark.parametrize("bad", ["bogus", "preactivation", "Weights", "cell_state", ""])
def test_unknown_points_rejected(bad):
    with pytest.raises(AttributeValueError) as ei:
        RoundingPolicy("x", {"preact": inplace_rounder("fp16"), bad: inplace_rounder("fp16")})
    assert isinstance(ei.value, FusedRNNError) and isinstance(ei.value, ValueError)
    assert repr(bad) in str(ei.value) and "rounders" in str(ei.value)


def test_policy_basics():
    assert POINTS == ("weights", "inputs", "preact", "gates", "cell", "hidden", "outputs")
    assert EXACT.is_exact and not FP16.is_exact and not BF16.is_exact
    for p in POINTS:
        assert FP16.get(p) is not None and BF16.get(p) is not None and EXACT.get(p) is None
    a = np.array([1.0 + 2.0**-12, 1.0 + 2.0**-9, 65520.0, -3.14159265], np.float32)
    FP16.apply("gates", a)
    assert a.tolist() == [1.0, 1.0 + 2.0**-9, np.inf, float(np.float16(-3.14159265))]
    b = np.array([1.0 + 2.0**-9, 1.0 + 3 * 2.0**-9], np.float64)
    BF16.apply("cell", b)  # ties to even
    assert b.tolist() == [1.0, 1.0 + 2.0**-7]
    c = np.array([0.1])
    EXACT.apply("cell", c)
    assert c[0] == 0.1
    for combo in itertools.combinations(POINTS, 2):
        assert set(RoundingPolicy("ok", dict.fromkeys(combo, inplace_rounder("fp16"))).rounders) == set(combo)


def test_float16_input_through_ops():
    """ops: float16 input is computed in float32 and returned as float16."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 2, 2)).astype(np.float16)
    W = rng.standard_normal((1, 8, 2)).astype(np.float16)
    R = rng.standard_normal((1, 8, 2)).astype(np.float16)
    Y, Y_h, Y_c = fusedrnn.ops.lstm(X, W, R)
    assert Y.dtype == Y_h.dtype == Y_c.dtype == np.float16
    Y32, *_ = fusedrnn.ops.lstm(X.astype(np.float32), W.astype(np.float32), R.astype(np.float32))
    np.testing.assert_array_equal(Y, Y32.astype(np.float16))
