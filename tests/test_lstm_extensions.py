"""The extended (TFLite / PyTorch) LSTM options of ``fusedrnn.LSTM`` against outside references.

* ``tests/naive_lstm.py``: an independent per-step float64 LSTM written from litert.md section 4 (CIFG,
  peepholes, projection with bias and proj_clip, cell_clip, layer norm, diagonal recurrence) plus ONNX double
  bias, clip, activations and sequence_lens; compared over hundreds of random option combinations in float64
  (to 1e-12) and float32 (to 1e-5).
* PyTorch ``nn.LSTM(proj_size=...)`` as an outside oracle for the projection (weights copied through the
  canonical arrays: PyTorch's gate order i, f, g, o is the canonical one; ``weight_hr`` is ``proj_W``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from naive_lstm import describe, layer_kwargs, naive_from_config, random_config

import fusedrnn

N_F64 = 300
N_F32 = 150


def run_fused(cfg: dict, target: str | None):
    layer = fusedrnn.LSTM(cfg["W"], cfg["R"], cfg.get("b_x"), cfg.get("b_h"), **layer_kwargs(cfg))
    if target is not None:
        layer = layer.to(target)
    state = (cfg["h0"], cfg["c0"]) if cfg.get("h0") is not None else None
    y, (h, c) = layer(cfg["x"], state, sequence_lens=cfg.get("sequence_lens"))
    return y, h, c


def compare(cfg: dict, target: str | None, tol: float, expect_dtype) -> None:
    got = run_fused(cfg, target)
    want = naive_from_config(cfg)
    for name, g, w in zip(("Y", "Y_h", "Y_c"), got, want, strict=True):
        assert g.dtype == expect_dtype, f"{name}: dtype {g.dtype}, expected {expect_dtype}; {describe(cfg)}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}; {describe(cfg)}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{name}; {describe(cfg)}")


@pytest.mark.parametrize("seed", range(N_F64))
def test_random_configs_float64(seed):
    cfg = random_config(np.random.default_rng(1000 + seed))
    compare(cfg, "fp64", 1e-12, np.float64)


@pytest.mark.parametrize("seed", range(N_F32))
def test_random_configs_float32(seed):
    cfg = random_config(np.random.default_rng(5000 + seed), dtype=np.float32)
    compare(cfg, None, 1e-5, np.float32)  # float32 weights: the default fp32 target


EDGE = list(itertools.product((1, 3), (1, 2), (1, 3), ("forward", "reverse", "bidirectional")))


@pytest.mark.parametrize("T,B,H,direction", EDGE)
def test_small_sizes_all_options(T, B, H, direction):
    """T = 1, B = 1, H = 1 with several option sets each (float64 and float32)."""
    for k in range(4):
        rng = np.random.default_rng([T, B, H, len(direction), k])
        cfg = random_config(rng, T=T, B=B, H=H, direction=direction)
        compare(cfg, "fp64", 1e-12, np.float64)
        cfg32 = random_config(np.random.default_rng(rng.integers(2**32)), T=T, B=B, H=H, direction=direction,
                              dtype=np.float32)
        compare(cfg32, None, 1e-5, np.float32)


@pytest.mark.parametrize("seed", range(3))
def test_long_sequence(seed):
    """T >= 500: errors must not accumulate (every option on in turn). H = 8: float32 layer norm over very few
    units is ill-conditioned (a gate whose units nearly agree has a tiny variance), which is not what this
    test is about."""
    rng = np.random.default_rng(77 + seed)
    cfg = random_config(rng, T=520, B=2, H=8, I=3, direction="bidirectional", dtype=np.float32)
    # force the interesting options on
    D = 2
    cfg["layer_norm"] = (rng.standard_normal((D, 4, 8)) * 0.5 + 1).astype(np.float32) if seed != 1 else None
    cfg["P"] = (rng.standard_normal((D, 3, 8)) * 0.5).astype(np.float32)
    cfg["coupling"] = ("cifg", None, "input_forget")[seed]
    cfg["cell_clip"] = 1.5
    cfg["sequence_lens"] = np.array([520, 333], np.int32)
    compare(cfg, "fp64", 1e-12, np.float64)
    compare(cfg, None, 1e-5, np.float32)


def test_random_configs_cover_every_option():
    """The random generator really exercises every option and their pairings."""
    seen = set()
    for seed in range(N_F64):
        cfg = random_config(np.random.default_rng(1000 + seed))
        flags = {
            "peephole": cfg["P"] is not None, "cifg": cfg["coupling"] == "cifg",
            "input_forget": cfg["coupling"] == "input_forget", "ln": cfg["layer_norm"] is not None,
            "proj": cfg["proj_W"] is not None, "proj_b": cfg["proj_b"] is not None,
            "proj_clip": cfg["proj_clip"] is not None, "cell_clip": cfg["cell_clip"] is not None,
            "diag": cfg["R"].ndim == 2, "lens": cfg.get("sequence_lens") is not None,
            "bi": cfg["direction"] == "bidirectional", "acts": cfg.get("activations") is not None,
            "clip": cfg["clip"] is not None,
        }
        on = [k for k, v in flags.items() if v]
        seen.update(itertools.combinations(on, 2))
        seen.update((k,) for k in on)
    for single in ("peephole", "cifg", "input_forget", "ln", "proj", "proj_b", "proj_clip", "cell_clip", "diag",
                   "lens", "bi", "acts", "clip"):
        assert (single,) in seen
    for pair in (("peephole", "ln"), ("cifg", "ln"), ("peephole", "cifg"), ("ln", "proj"), ("diag", "ln"),
                 ("cell_clip", "peephole"), ("proj", "lens"), ("bi", "lens"), ("diag", "cifg")):
        assert pair in seen or pair[::-1] in seen, pair


@pytest.mark.parametrize("coupling", ["cifg", "input_forget"])
def test_coupled_gate_ignores_its_weights(coupling):
    """CIFG never reads the input gate's weights, biases, peephole or LN coefficients (TFLite: they are
    absent); ONNX input_forget never reads the forget gate's. NaN there must not leak."""
    rng = np.random.default_rng(3)
    cfg = random_config(rng, T=4, B=2, H=3, I=2, direction="bidirectional")
    cfg.update(coupling=coupling, P=rng.standard_normal((2, 3, 3)), layer_norm=rng.standard_normal((2, 4, 3)),
               b_x=rng.standard_normal((2, 12)), proj_W=None, proj_b=None, proj_clip=None)
    if cfg["R"].ndim == 3:
        cfg["R"] = rng.standard_normal((2, 12, 3)) * 0.5
    k = 0 if coupling == "cifg" else 1
    want = naive_from_config(cfg)
    blk = slice(3 * k, 3 * k + 3)
    for key in ("W", "R", "b_x"):
        cfg[key] = cfg[key].copy()
        cfg[key][:, blk] = np.nan
    cfg["P"] = cfg["P"].copy()
    cfg["P"][:, k] = np.nan
    cfg["layer_norm"] = cfg["layer_norm"].copy()
    cfg["layer_norm"][:, k] = np.nan
    got = run_fused(cfg, "fp64")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------- PyTorch oracle
def _torch_case(seed: int, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(900 + seed)
    I = int(rng.integers(1, 5))
    H = int(rng.integers(2, 7))
    Hp = int(rng.integers(1, H))  # PyTorch requires proj_size < hidden_size
    B = int(rng.integers(1, 4))
    T = int(rng.choice([1, 4, 9]))
    bi = bool(seed % 2)
    bias = seed % 3 != 0
    batch_first = seed % 4 >= 2
    torch.manual_seed(seed)
    m = torch.nn.LSTM(I, H, proj_size=Hp, bidirectional=bi, bias=bias, batch_first=batch_first)
    m = m.double() if dtype == np.float64 else m.float()
    D = 2 if bi else 1
    sfx = ["", "_reverse"][:D]

    def param(name):
        return np.stack([getattr(m, f"{name}_l0{s}").detach().numpy() for s in sfx])

    W, R, PW = param("weight_ih"), param("weight_hh"), param("weight_hr")
    assert W.shape == (D, 4 * H, I) and R.shape == (D, 4 * H, Hp) and PW.shape == (D, Hp, H)
    b_x = param("bias_ih") if bias else None
    b_h = param("bias_hh") if bias else None
    layer = fusedrnn.LSTM(W, R, b_x, b_h, proj_W=PW, direction="bidirectional" if bi else "forward",
                          merge="concat", batch_first=batch_first)
    x = rng.standard_normal((B, T, I) if batch_first else (T, B, I)).astype(dtype)
    h0 = rng.standard_normal((D, B, Hp)).astype(dtype) * 0.5
    c0 = rng.standard_normal((D, B, H)).astype(dtype) * 0.5
    with torch.no_grad():
        yt, (ht, ct) = m(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
    return layer, x, (h0, c0), (yt.numpy(), ht.numpy(), ct.numpy())


@pytest.mark.parametrize("seed", range(16))
def test_projection_vs_pytorch_float64(seed):
    layer, x, state, want = _torch_case(seed, np.float64)
    y, (h, c) = layer.to("fp64")(x, state)
    for g, w in zip((y, h, c), want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(16))
def test_projection_vs_pytorch_float32(seed):
    layer, x, state, want = _torch_case(seed, np.float32)
    y, (h, c) = layer(x, state)
    for g, w in zip((y, h, c), want, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_naive_reference_matches_pytorch_projection():
    """The naive reference itself agrees with PyTorch on a projected bidirectional LSTM (so the two oracles
    are consistent)."""
    layer, x, (h0, c0), want = _torch_case(5, np.float64)
    Y, Y_h, Y_c = naive_from_config(dict(
        x=x, W=layer.W, R=layer.R, b_x=layer.b_x, b_h=layer.b_h, h0=h0, c0=c0, direction="bidirectional",
        proj_W=layer.proj_W))
    y = Y.transpose(0, 2, 1, 3).reshape(Y.shape[0], Y.shape[2], -1)
    np.testing.assert_allclose(y, want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Y_h, want[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Y_c, want[2], rtol=1e-12, atol=1e-12)


def test_float64_weights_make_a_float64_layer():
    cfg = random_config(np.random.default_rng(0), T=3, B=2, H=2, I=2)
    y, h, c = run_fused(cfg, None)
    assert y.dtype == h.dtype == c.dtype == np.float64
