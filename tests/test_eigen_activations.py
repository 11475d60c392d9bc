"""fusedrnn.numerics.eigen against the LiteRT interpreter itself: the LOGISTIC and TANH ops (Eigen's
``logistic()`` / ``tanh()``, the functions the recurrent kernels apply) compared with ``==`` over random and edge
float32 inputs, at vector lengths that put elements in packets and in the scalar tail."""

from __future__ import annotations

import numpy as np
import pytest

from fusedrnn.numerics import eigen
from fusedrnn.targets.litert.reader import TensorInfo
from fusedrnn.targets.litert.writer import single_op_model

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, 1e-30, -1e-30, 1e-45, -1e-45, 88.7, -88.7, 103.9, -104.0, -104.5,
                  -87.0, 9.0, -9.0, 7.90738964, -7.90738964, 7.9074, 8.0, 16.6355324, 16.6355, 16.64, 20.0, -20.0,
                  0.5, -0.5, 1e-4, -1e-4, 3.4e38, -3.4e38], np.float32)


def _interpret(op: str, x: np.ndarray) -> np.ndarray:
    mod = pytest.importorskip("ai_edge_litert.interpreter")
    n = x.size
    m = single_op_model(op, [TensorInfo(0, "x", "FLOAT32", (n,))], [TensorInfo(1, "y", "FLOAT32", (n,))], {})
    it = mod.Interpreter(model_content=m,
                         experimental_op_resolver_type=mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _inputs(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = rng.choice([0.3, 2.0, 6.0, 30.0], size=n)
    x = (rng.normal(size=n) * scale).astype(np.float32)
    k = min(n, EDGES.size)
    x[rng.choice(n, size=k // 3, replace=False)] = rng.choice(EDGES, size=k // 3)
    return x


def _same(got: np.ndarray, want: np.ndarray) -> None:
    both_nan = np.isnan(got) & np.isnan(want)
    bad = ~((got.view(np.uint32) == want.view(np.uint32)) | both_nan)
    assert not bad.any(), f"{int(bad.sum())} differ, e.g. {got[bad][:3]} vs {want[bad][:3]}"


@pytest.mark.parametrize("op", ["TANH", "LOGISTIC"])
def test_bulk_random_and_edges(op):
    x = np.concatenate([EDGES, _inputs(0, 60_000)])
    x = np.concatenate([x, np.zeros(-x.size % 4, np.float32)])  # whole packets: the vector path only
    fn = eigen.tanh if op == "TANH" else eigen.logistic
    _same(fn(x), _interpret(op, x))


@pytest.mark.parametrize("op", ["TANH", "LOGISTIC"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 9, 13, 4099])
def test_scalar_tail(op, n):
    fn = eigen.tanh if op == "TANH" else eigen.logistic
    for seed in range(3 if n < 100 else 1):
        x = _inputs(100 + 10 * n + seed, n)
        _same(fn(x), _interpret(op, x))


def test_scalar_and_packet_paths_differ():
    """The test above can tell the two logistic paths apart: they disagree on about half of these inputs."""
    x = _inputs(7, 4000)
    assert (eigen.logistic_scalar(x) != eigen.logistic_packet(x)).mean() > 0.2
    assert eigen.scalar_mask(7, 0).tolist() == [False] * 4 + [True] * 3
    assert eigen.scalar_mask(7, 3).tolist() == [True] + [False] * 4 + [True] * 2
