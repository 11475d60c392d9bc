"""Shared pieces of the fusedrnn benchmarks: problems, peer runners, interleaved timing, machine facts.

Every implementation is wrapped as a *runner*: a zero-argument callable that does exactly the work being
timed (one full sequence) and returns its raw outputs, plus a ``normalize`` function that turns those raw
outputs into the ONNX layout ``(Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H] or None)`` for the agreement
check. Layout conversions needed only for the check are never timed.
"""

from __future__ import annotations

import gc
import importlib
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

# --------------------------------------------------------------------------------------------------------
# problems


@dataclass(frozen=True)
class Shape:
    name: str
    T: int
    B: int
    I: int  # noqa: E741 (ONNX's name for the input size)
    H: int

    def label(self) -> str:
        return f"{self.name} T{self.T} B{self.B} I{self.I} H{self.H}"


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("S1", 50, 1, 64, 128),
        Shape("S2", 100, 32, 128, 256),
        Shape("S3", 200, 64, 256, 512),
        Shape("S4", 1000, 1, 40, 64),
    )
}

# (cell, direction) pairs in table order; GRU runs with linear_before_reset=1 (PyTorch's formulation)
VARIANTS: tuple[tuple[str, str], ...] = (
    ("lstm", "forward"),
    ("lstm", "bidirectional"),
    ("gru", "forward"),
)

GATES = {"lstm": 4, "gru": 3, "rnn": 1}


@dataclass
class Problem:
    """One benchmark case with its inputs in ONNX layout (layout 0, ONNX gate order), float32."""

    cell: str
    direction: str
    shape: Shape
    X: np.ndarray  # [T, B, I]
    W: np.ndarray  # [D, G*H, I]
    R: np.ndarray  # [D, G*H, H]
    B: np.ndarray  # [D, 2*G*H]

    @property
    def D(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def G(self) -> int:
        return GATES[self.cell]

    def flops(self) -> float:
        """Multiply-add FLOPs of the two GEMM families per call (2 * MACs); elementwise work is ignored."""
        s = self.shape
        return 2.0 * self.D * s.T * s.B * self.G * s.H * (s.I + s.H)


def make_problem(cell: str, direction: str, shape: Shape, seed: int = 0) -> Problem:
    """Random weights in PyTorch's init range U(-1/sqrt(H), 1/sqrt(H)), inputs U(-1, 1): gates stay unsaturated."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G, T, B, I, H = GATES[cell], shape.T, shape.B, shape.I, shape.H
    k = 1.0 / np.sqrt(H)

    def u(*dims, scale=k):
        return rng.uniform(-scale, scale, size=dims).astype(np.float32)

    return Problem(
        cell, direction, shape, X=u(T, B, I, scale=1.0), W=u(D, G * H, I), R=u(D, G * H, H), B=u(D, 2 * G * H)
    )


Outputs = tuple  # (Y, Y_h, Y_c | None) in ONNX layout


@dataclass
class Runner:
    name: str
    run: Callable[[], object]
    normalize: Callable[[object], Outputs]
    info: dict = field(default_factory=dict)


class PeerUnavailable(Exception):
    """The peer library is not installed (or cannot run this case); the benchmark skips it."""


# --------------------------------------------------------------------------------------------------------
# fusedrnn

# --threads: None = each library's default (all cores); the threadpoolctl limiter is kept alive here
THREADS: dict = {"n": None, "limiter": None}


def fusedrnn_runner(p: Problem) -> Runner:
    try:
        from fusedrnn import ops
    except ImportError as e:  # the library under test: say clearly what is missing
        raise PeerUnavailable(f"fusedrnn.ops not importable ({e}); run `pip install -e .`") from e
    X, W, R, B, H = p.X, p.W, p.R, p.B, p.shape.H
    if p.cell == "lstm":

        def run():
            return ops.lstm(X, W, R, B, hidden_size=H, direction=p.direction)

        def normalize(out):
            Y, Y_h, Y_c = out
            return Y, Y_h, Y_c

    elif p.cell == "gru":

        def run():
            return ops.gru(X, W, R, B, hidden_size=H, direction=p.direction, linear_before_reset=1)

        def normalize(out):
            Y, Y_h = out
            return Y, Y_h, None

    else:
        raise ValueError(p.cell)
    return Runner("fusedrnn", run, normalize)


# --------------------------------------------------------------------------------------------------------
# onnxruntime


def ort_session_options_facts(so) -> dict:
    import onnxruntime as ort

    return {
        "intra_op_num_threads": so.intra_op_num_threads,
        "inter_op_num_threads": so.inter_op_num_threads,
        "execution_mode": str(so.execution_mode).split(".")[-1],
        "graph_optimization_level": str(so.graph_optimization_level).split(".")[-1],
        "providers": ["CPUExecutionProvider"],
        "available_providers": ort.get_available_providers(),
    }


def onnx_model_bytes(p: Problem, opset: int = 17) -> bytes:
    """A single-node LSTM/GRU model: X is the graph input, W/R/B are initializers (so ORT may prepack them)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    s, D = p.shape, p.D
    attrs = {"hidden_size": s.H, "direction": p.direction}
    outputs = ["Y", "Y_h"] + (["Y_c"] if p.cell == "lstm" else [])
    if p.cell == "gru":
        attrs["linear_before_reset"] = 1
    node = helper.make_node(p.cell.upper(), ["X", "W", "R", "B"], outputs, **attrs)
    out_shapes = {"Y": [s.T, D, s.B, s.H], "Y_h": [D, s.B, s.H], "Y_c": [D, s.B, s.H]}
    graph = helper.make_graph(
        [node],
        f"{p.cell}_{p.direction}_{s.name}",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [s.T, s.B, s.I])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shapes[o]) for o in outputs],
        initializer=[numpy_helper.from_array(a, n) for a, n in ((p.W, "W"), (p.R, "R"), (p.B, "B"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def ort_session_options(threads: int | None = None):
    """Default session options (intra_op_num_threads=0: one thread per physical core), or ``threads``."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads is not None:
        so.intra_op_num_threads = threads
    return so


def ort_runner(p: Problem) -> Runner:
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise PeerUnavailable("onnxruntime not installed") from e
    so = ort_session_options(THREADS["n"])
    sess = ort.InferenceSession(onnx_model_bytes(p), so, providers=["CPUExecutionProvider"])
    feed = {"X": p.X}

    def run():
        return sess.run(None, feed)

    def normalize(out):
        return out[0], out[1], (out[2] if len(out) > 2 else None)

    info = ort_session_options_facts(so)
    info["providers"] = sess.get_providers()
    return Runner("ORT", run, normalize, info)


# --------------------------------------------------------------------------------------------------------
# PyTorch

# ONNX gate blocks -> PyTorch gate blocks: LSTM ONNX (i, o, f, c) -> torch (i, f, g, o); GRU (z, r, h) -> (r, z, n)
_TORCH_ORDER = {"lstm": (0, 2, 3, 1), "gru": (1, 0, 2)}


def _regate(a: np.ndarray, G: int, order: Sequence[int]) -> np.ndarray:
    H = a.shape[0] // G
    return np.ascontiguousarray(a.reshape((G, H) + a.shape[1:])[list(order)].reshape(a.shape))


def torch_runner(p: Problem) -> Runner:
    try:
        import torch
    except ImportError as e:
        raise PeerUnavailable("torch not installed") from e
    s, D, G = p.shape, p.D, p.G
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[p.cell]
    m = cls(s.I, s.H, num_layers=1, bias=True, batch_first=False, bidirectional=D == 2).float().eval()
    order = _TORCH_ORDER[p.cell]
    GH = G * s.H
    with torch.no_grad():
        for d in range(D):
            sfx = "_reverse" if d == 1 else ""
            getattr(m, f"weight_ih_l0{sfx}").copy_(torch.from_numpy(_regate(p.W[d], G, order)))
            getattr(m, f"weight_hh_l0{sfx}").copy_(torch.from_numpy(_regate(p.R[d], G, order)))
            getattr(m, f"bias_ih_l0{sfx}").copy_(torch.from_numpy(_regate(p.B[d, :GH], G, order)))
            getattr(m, f"bias_hh_l0{sfx}").copy_(torch.from_numpy(_regate(p.B[d, GH:], G, order)))
    x = torch.from_numpy(p.X)

    def run():
        with torch.inference_mode():
            return m(x)

    def normalize(out):
        y, hc = out
        Y = y.numpy().reshape(s.T, s.B, D, s.H).transpose(0, 2, 1, 3)
        if p.cell == "lstm":
            h, c = hc
            return Y, h.numpy(), c.numpy()
        return Y, hc.numpy(), None

    return Runner("torch", run, normalize, {"num_threads": torch.get_num_threads()})


def set_threads(n: int) -> str:
    """Limit every implementation to ``n`` threads: numpy's BLAS (threadpoolctl), torch, ORT sessions.

    Returns a description. Raises RuntimeError when threadpoolctl is missing (numpy's BLAS pool cannot be
    resized after import without it; set OPENBLAS_NUM_THREADS / MKL_NUM_THREADS instead).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as e:
        raise RuntimeError(
            "--threads needs threadpoolctl (pip install threadpoolctl), or set OPENBLAS_NUM_THREADS=N "
            "and OMP_NUM_THREADS=N in the environment instead"
        ) from e
    THREADS["n"] = n
    THREADS["limiter"] = threadpool_limits(limits=n)  # every BLAS and OpenMP pool loaded so far
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass
    try:  # fusedrnn's own compiled loops (FUSEDRNN_THREADS)
        from fusedrnn.cells import compiled

        compiled.set_threads(n)
    except (ImportError, AttributeError):
        pass
    return f"{n} thread(s) for numpy BLAS, fusedrnn's compiled loops, ORT intra-op and torch intra-op"


def add_threads_option(ap) -> None:
    """The suites' ``--threads N`` option (apply it with :func:`set_threads`)."""
    ap.add_argument("--threads", type=int, default=None,
                    help="limit numpy BLAS and fusedrnn's own threads (the compiled float loops and the SDK "
                         "targets' row split use 2 by default) to N threads")


PEER_FACTORIES: dict[str, Callable[[Problem], Runner]] = {"ORT": ort_runner, "torch": torch_runner}


# --------------------------------------------------------------------------------------------------------
# agreement


def max_abs_diff(a: Outputs, b: Outputs) -> float:
    """max |a - b| over Y, Y_h (and Y_c when both have it); inf on a shape mismatch or a non-finite value."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return float("inf")
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        if d.size:
            m = float(d.max())
            if not np.isfinite(m):
                return float("inf")
            worst = max(worst, m)
    return worst


# --------------------------------------------------------------------------------------------------------
# timing


@dataclass
class Timing:
    samples: dict[str, list[float]]  # seconds of every timed call, per implementation
    blocks: dict[str, list[float]]  # per round: the median call of that round's block
    warm_calls: dict[str, int]  # untimed calls before each block
    block_calls: dict[str, int]  # timed calls per block
    rounds: int
    wall_s: float

    def median(self, name: str) -> float | None:
        xs = self.samples.get(name)
        return statistics.median(xs) if xs else None

    def summary(self, name: str) -> dict | None:
        xs = self.samples.get(name)
        if not xs:
            return None
        q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
        return {
            "median_ms": 1e3 * statistics.median(xs),
            "min_ms": 1e3 * min(xs),
            "q1_ms": 1e3 * q[0],
            "q3_ms": 1e3 * q[2],
            "n": len(xs),
            "warm_calls": self.warm_calls[name],
            "block_calls": self.block_calls[name],
        }

    def paired_ratio(self, a: str, b: str) -> float | None:
        """Median over rounds of block_a / block_b (both timed in the same round)."""
        xa, xb = self.blocks.get(a), self.blocks.get(b)
        if not xa or not xb:
            return None
        return statistics.median(x / y for x, y in zip(xa, xb, strict=True))


# No untimed warm call before a block of calls at least this long (its own pool wakes within microseconds).
LONG_CALL_S = 0.25


def interleaved_timing(
    fns: dict[str, Callable[[], object]],
    *,
    min_rounds: int,
    max_rounds: int,
    budget_s: float,
    gap_s: float = 0.15,
    warm_s: float = 0.01,
    block_s: float = 0.05,
    max_block: int = 25,
    estimates: dict[str, float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Round-robin blocks: each round gives every implementation one turn, rotating the start each round.

    A turn is an idle *gap* of ``gap_s`` seconds, untimed warm calls (about ``warm_s`` seconds; none for calls
    longer than ``LONG_CALL_S``) and a *block* of timed calls (about ``block_s`` seconds, 1 to ``max_block``
    calls). The gap exists because NumPy's OpenBLAS, onnxruntime and PyTorch each keep worker threads that
    keep spinning after a call (OpenBLAS for about 0.1 s): measured on 2 cores, a library called right after
    another ran up to 2x slower for the first ~100 ms, and alternating single calls of small problems made
    them 2-10x slower, which times the thread pools' fight rather than the implementations. After the gap the
    previous library's threads are asleep; the warm calls wake this library's own pool.

    Rounds continue until ``max_rounds``, or until ``budget_s`` seconds have passed and at least
    ``min_rounds`` rounds are done. ``estimates`` (seconds per call) size the turns; missing ones are
    measured with one call. The garbage collector is off during a turn (as ``timeit`` does). ``clock`` times the
    calls (``time.process_time``: the CPU time of the whole process, less sensitive to other processes than wall
    time, and meaningful for one-thread calls).
    """
    names = list(fns)
    est = dict(estimates or {})
    for n in names:
        if not est.get(n):
            t0 = time.perf_counter()
            fns[n]()
            est[n] = time.perf_counter() - t0
    warm = {n: 0 if est[n] >= LONG_CALL_S else max(2, math.ceil(warm_s / est[n])) for n in names}
    block = {n: min(max_block, max(1, round(block_s / est[n]))) for n in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    blocks: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    rounds = 0
    gc_was_enabled = gc.isenabled()
    try:
        while rounds < max_rounds:
            k = rounds % len(names)
            for name in names[k:] + names[:k]:
                fn = fns[name]
                if gap_s > 0 and len(names) > 1:
                    time.sleep(gap_s)
                gc.disable()
                for _ in range(warm[name]):
                    fn()
                ts = []
                for _ in range(block[name]):
                    t0 = clock()
                    fn()
                    ts.append(clock() - t0)
                if gc_was_enabled:
                    gc.enable()
                samples[name] += ts
                blocks[name].append(statistics.median(ts))
            rounds += 1
            if rounds >= min_rounds and time.perf_counter() - start >= budget_s:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return Timing(samples, blocks, warm, block, rounds, time.perf_counter() - start)


# --------------------------------------------------------------------------------------------------------
# machine facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _numpy_blas() -> str:
    try:
        cfg = np.show_config(mode="dicts")  # numpy >= 1.26
        blas = cfg["Build Dependencies"]["blas"]
        desc = f"{blas.get('name')} {blas.get('version')}"
        extra = blas.get("openblas configuration")
        return f"{desc} ({extra})" if extra else desc
    except Exception:  # older numpy, or a config layout we do not know: not worth failing over
        return "unknown"


def _blas_threads() -> str | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    pools = [f"{p.get('internal_api')} {p.get('version')}: {p.get('num_threads')} threads" for p in threadpool_info()]
    return "; ".join(pools) or None


def _version(mod: str) -> str | None:
    try:
        return importlib.import_module(mod).__version__
    except Exception:
        return None


def machine_facts() -> dict:
    facts = {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numpy_blas": _numpy_blas(),
        "threadpools": _blas_threads(),
        "fusedrnn": None,
        "onnxruntime": _version("onnxruntime"),
        "torch": _version("torch"),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "env": {
            k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ
        },
    }
    try:
        from importlib.metadata import version

        facts["fusedrnn"] = version("fusedrnn")
    except Exception:
        pass
    if facts["torch"]:
        import torch

        facts["torch_threads"] = torch.get_num_threads()
        facts["torch_mkldnn"] = torch.backends.mkldnn.is_available()
    return facts


# --------------------------------------------------------------------------------------------------------
# foreign CPU load: CPU time other processes used while we were timing (a noise indicator)


class ForeignLoad:
    """CPU-seconds used by *other* processes between construction and :meth:`stop` (Linux /proc/stat).

    System-wide busy time minus this process's own user+system time. ``None`` where /proc/stat is missing.
    """

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        guest = sum(v[8:10]) if len(v) > 9 else 0  # guest time is already counted in user
        return (sum(v) - idle - guest) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system

    def stop(self) -> dict | None:
        busy = self._busy()
        if busy is None or self.busy0 is None:
            return None
        wall = time.perf_counter() - self.t0
        # /proc/stat counts in clock ticks (10 ms): ignore two ticks' worth of rounding per CPU
        slack = 2 * (os.cpu_count() or 1) / os.sysconf("SC_CLK_TCK")
        foreign = max(0.0, (busy - self.busy0) - (self._own() - self.own0) - slack)
        return {"foreign_cpu_s": foreign, "wall_s": wall, "foreign_cores": foreign / wall if wall > 0 else 0.0}
