"""The compiled MLI loops (targets/mli/_kernel.c) against the NumPy loops they replace: bit-exact (``==``) on
randomised layers over every MLI target, cell, direction, sequence_lens, ROUND_MODE and FULL_ACCU. The NumPy
loops are themselves checked against the upstream conformance vectors (test_mli_conformance.py, which runs the
LSTM / GRU cases through both engines)."""

import numpy as np
import pytest

import fusedrnn
import fusedrnn.mli as mli
from fusedrnn.targets.mli import _compiled

pytestmark = pytest.mark.skipif(_compiled.load() is None, reason="compiled MLI kernel unavailable")

MLI2 = ("mli2-sa8", "mli2-fx16", "mli2-fx16_fx8_fx8")
MLI1 = ("mli1-fx16", "mli1-fx8", "mli1-fx8w16d")


def _random_layer(rng, cell):
    H, I = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D, G, sc = 2 if direction == "bidirectional" else 1, 4 if cell == "lstm" else 3, rng.uniform(0.2, 1.5)
    arrays = [rng.uniform(-sc, sc, s).astype(np.float32) for s in ((D, G * H, I), (D, G * H, H), (D, G * H),
                                                                     (D, G * H))]
    return (fusedrnn.LSTM if cell == "lstm" else fusedrnn.GRU)(*arrays, direction=direction), I


def _both_engines(layer, target, x, lens, h0):
    out = []
    for engine in ("numpy", "compiled"):
        with _compiled.use_engine(engine):
            em = layer.to(target, calibration=x)  # prepare inside: MLI 1.x binds its loop at prepare time
            kw = {} if lens is None else {"sequence_lens": lens}
            if h0 is not None:
                kw["initial_states"] = h0
            y, states = em(x, **kw)
        out.append([y, *states])
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_mli2_compiled_equals_numpy(seed, cell):
    rng = np.random.default_rng(1000 * seed + (cell == "gru"))
    layer, I = _random_layer(rng, cell)
    T, B = int(rng.integers(1, 10)), int(rng.integers(1, 8))
    x = (rng.uniform(-2, 2, (T, B, I)) * rng.uniform(0.1, 3)).astype(np.float32)
    lens = rng.integers(0, T + 1, B) if rng.random() < 0.5 else None
    for target in MLI2:
        rm, fa = str(rng.choice(["UP", "CONVERGENT"])), bool(rng.random() < 0.5)
        with mli.build(rm, fa):
            a, b = _both_engines(layer, target, x, lens, None)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v, err_msg=f"{target} {rm} FULL_ACCU={fa}")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_mli2_compiled_tiles_equal_numpy(cell):
    """Layers wide enough for several column tiles of the kernel's int32 GEMM (odd K, padded columns), batches
    that mix 4-row tiles with remainder rows, both rounding modes."""
    rng = np.random.default_rng(31 + (cell == "gru"))
    H, I, B, T = int(rng.integers(33, 60)) | 1, int(rng.integers(5, 20)), int(rng.integers(5, 10)), 4
    G = 4 if cell == "lstm" else 3
    arrays = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((1, G * H, I), (1, G * H, H), (1, G * H),
                                                                   (1, G * H))]
    layer = (fusedrnn.LSTM if cell == "lstm" else fusedrnn.GRU)(*arrays)
    x = rng.uniform(-2, 2, (T, B, I)).astype(np.float32)
    for target in ("mli2-sa8", "mli2-fx16_fx8_fx8"):
        for rm in ("UP", "CONVERGENT"):
            with mli.build(rm, False):
                a, b = _both_engines(layer, target, x, None, None)
            for u, v in zip(a, b, strict=True):
                np.testing.assert_array_equal(u, v, err_msg=f"{target} {rm}")


@pytest.mark.parametrize("seed", range(5))
def test_mli1_compiled_equals_numpy(seed):
    rng = np.random.default_rng(7000 + seed)
    layer, I = _random_layer(rng, "lstm")
    T, B = int(rng.integers(1, 10)), int(rng.integers(1, 8))
    x = (rng.uniform(-2, 2, (T, B, I)) * rng.uniform(0.1, 3)).astype(np.float32)
    lens = rng.integers(0, T + 1, B) if rng.random() < 0.5 else None
    for target in MLI1:
        a, b = _both_engines(layer, target, x, lens, None)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v, err_msg=target)


def test_engine_argument_is_validated():
    with pytest.raises(ValueError, match="engine"):
        with _compiled.use_engine("fast"):
            pass
