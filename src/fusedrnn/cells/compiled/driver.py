"""Python side of the compiled recurrence: decides whether the kernel takes a call and which path it runs
(:func:`accepts`, cached per static configuration), then runs it (:func:`run`): on the general per-row path the
input projection is hoisted (one BLAS GEMM per direction and chunk of steps) and the kernel runs once per chunk; on
the float32 fused paths (batched GEMM, or per-row at batch 1-2: the kernel computes x·Wᵀ itself) it runs once.

:func:`accepts` takes a call of :func:`fusedrnn.cells.lstm_sequence`, :func:`~fusedrnn.cells.gru_sequence` or
:func:`~fusedrnn.cells.rnn_sequence` (its arguments by name) and returns None or the reason it declines: kernel
unavailable or switched off by the engine setting, a rounding policy other than EXACT, an ``h_feed`` or an
observer, a dtype other than float32/float64, more than ``max_rows`` rows of D·B (by default MAX_ROWS, or
BATCHED_MAX_ROWS where the batched path takes the call), an activation without kernel code, malformed lengths.
:func:`run` runs what it accepted. The dispatch (:mod:`fusedrnn.cells.dispatch`) calls the two; ``run_lstm`` /
``run_gru`` / ``run_rnn`` do both and return None where the kernel declines.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

import numpy as np

from ...validation import positive_int
from .. import setting
from ..activations import Activation
from ..kinds import DEFAULT_ACTIVATIONS, GATE_COUNT, LSTM_BLOCKS, LSTM_GATE_ORDERS
from ..recurrence import reverse_valid_prefix
from ..rounding import EXACT, RoundingPolicy
from . import _build

MAX_ROWS = 8
"""Default largest D·B the compiled loop takes for options outside the batched subset (its per-row GEMV): above
it the NumPy engines' per-step BLAS GEMM over all rows is as fast (measured in benchmarks/bench_compiled.py)."""

BATCH_MIN = 1
"""Least batch for the float32 batched path (below it the fused per-row path runs). 1: at batch 1 and 2 the
batched path (input part hoisted 16 steps at a time, two panels per micro-kernel call, R packed by 8x8
transposes) ran in 0.80x / 0.57x (LSTM) and 0.89x / 0.71x (GRU) the per-row path's time at T=50 I=64 H=128
(``python -m benchmarks.bench_compiled --quick --sweep``, two threads); the per-row path keeps the calls the
batched one declines (H a multiple of 8, not of 16, on AVX-512)."""

BATCHED_MAX_ROWS = 1 << 16
"""Default largest D·B for the float32 batched path (packed GEMM + fused gates per step; the LSTM without
peepholes, projection, layer norm, clips or coupling, and the GRU, with default activations, H a multiple of
the kernel's vector width): measured faster than the NumPy engine at every batch from 3 to 8192 rows (S2, S3,
``benchmarks/bench_load.py``: with row blocks that stay in L2, B = 4096 ran in about half the NumPy engine's
time)."""

PROJECTION_BUFFER_BYTES = 4 << 20
"""Input-projection buffer per kernel call; the projection of a chunk of steps is one GEMM per direction."""

ACTIVATION_CODES = {
    "Relu": 0, "Tanh": 1, "Sigmoid": 2, "Affine": 3, "LeakyRelu": 4, "ThresholdedRelu": 5, "ScaledTanh": 6,
    "HardSigmoid": 7, "Elu": 8, "Softsign": 9, "Softplus": 10,
}
_KIND = {"lstm": 0, "gru": 1, "rnn": 2}
_COUPLING = {None: 0, "input_forget": 1, "cifg": 2}
_ACT_SLOTS = {kind: len(acts) for kind, acts in DEFAULT_ACTIVATIONS.items()}

MAX_THREADS = 64
"""Most threads one call of the compiled loops uses (the caller and 63 pool helpers)."""


def _cgroup_cpus(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """CPUs' worth of time the cgroup (v2) quota allows, rounded up (``cpu.max``: "quota period" or "max ..."),
    or None where there is no quota or no such file."""
    try:
        with open(path) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        return None


def _default_threads() -> int:
    """``$FUSEDRNN_THREADS`` where set to a positive integer; else the CPUs this process may run on
    (``os.sched_getaffinity``: taskset, cgroup cpusets), fewer where a cgroup CPU quota allows less; at most
    MAX_THREADS."""
    env = os.environ.get("FUSEDRNN_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), MAX_THREADS)
    try:
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may run on (taskset, cgroup cpusets)
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cpus, quota or cpus, MAX_THREADS))


_switch = {"threads": _default_threads(), "last": None}
"""Thread count and the last path taken (whether the kernel may run at all is the engine setting's)."""
_local = threading.local()  # per Python thread: the pack buffer, a thread_limit

THREAD_MIN_MACS = 1 << 18
"""Least recurrent work (multiply-adds per direction and call) for which a bidirectional call runs its second
direction on a thread of its own (starting one costs ~10-20 µs)."""


class _Args(ctypes.Structure):
    """Mirror of ``rnn_args`` in _kernel.c (small tables inline: one pointer per array that is present)."""

    _fields_ = [
        ("kind", ctypes.c_int32), ("D", ctypes.c_int32), ("B", ctypes.c_int32), ("H", ctypes.c_int32),
        ("Hp", ctypes.c_int32), ("G", ctypes.c_int32),
        ("s0", ctypes.c_int32), ("s1", ctypes.c_int32), ("T", ctypes.c_int32), ("K", ctypes.c_int32),
        ("reverse", ctypes.c_int32 * 2), ("act", ctypes.c_int32 * 6),
        ("alpha", ctypes.c_double * 6), ("beta", ctypes.c_double * 6),
        ("diagonal", ctypes.c_int32), ("lbr", ctypes.c_int32), ("coupling", ctypes.c_int32),
        ("ln_on", ctypes.c_int32),
        ("clip", ctypes.c_double), ("cell_clip", ctypes.c_double), ("proj_clip", ctypes.c_double),
        ("lens", ctypes.c_void_p), ("xp", ctypes.c_void_p), ("R", ctypes.c_void_p),
        ("bh", ctypes.c_void_p), ("P", ctypes.c_void_p), ("projW", ctypes.c_void_p), ("projb", ctypes.c_void_p),
        ("ln", ctypes.c_void_p), ("h", ctypes.c_void_p), ("c", ctypes.c_void_p), ("Y", ctypes.c_void_p),
        ("threads", ctypes.c_int32), ("gperm", ctypes.c_int32 * 4), ("xb", ctypes.c_void_p),
        ("Rpk", ctypes.c_void_p), ("x", ctypes.c_void_p), ("W", ctypes.c_void_p), ("I", ctypes.c_int32),
        ("batch_min", ctypes.c_int32), ("prepacked", ctypes.c_int32),
    ]


_addressof, _c_char = ctypes.addressof, ctypes.c_char


def _ptr(a: np.ndarray) -> int:
    """Address of a C-contiguous array's data: through the buffer protocol (about 0.3 µs), else ``a.ctypes.data``
    (about 1 µs; read-only arrays, such as a loaded model's weights, go there directly: the buffer protocol's
    refusal cost 2 µs, an exception; empty arrays)."""
    if a.flags.writeable:
        try:
            return _addressof(_c_char.from_buffer(a))
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


def available() -> bool:
    """True when the engine setting lets the kernel run and it is loaded (loaded on the first call)."""
    return setting.allows("compiled") and _build.load() is not None


def set_enabled(flag: bool) -> None:
    """Deprecated: the engine setting ``"auto"`` (True) or ``"numpy"`` (False, also for the rounded loop), as
    :func:`fusedrnn.cells.dispatch.set_engine`."""
    setting.set_engine("auto" if flag else "numpy")


def is_enabled() -> bool:
    """True when the engine setting lets the kernel take calls ("auto" or "compiled")."""
    return setting.allows("compiled")


def set_threads(n: int) -> None:
    """Threads a call of the kernel may use, the caller's included (1: everything on the caller's thread). Each
    step's work is split into chunks that whichever of these threads is running takes, so a busy machine slows a
    call down but never makes it wait for a descheduled thread. Default: the CPUs the process may use
    (``os.sched_getaffinity``, a cgroup CPU quota), or ``$FUSEDRNN_THREADS``; at most :data:`MAX_THREADS`."""
    _switch["threads"] = max(1, min(int(n), MAX_THREADS))


def threads() -> int:
    return _switch["threads"]


def call_threads() -> int:
    """The threads a kernel call made now by this Python thread may use: :func:`threads`, or fewer inside a
    :func:`thread_limit` block."""
    limit = getattr(_local, "limit", None)
    return _switch["threads"] if limit is None else min(limit, _switch["threads"])


def last_path() -> str | None:
    """Which path the last call the kernel took ran: "batched" (packed GEMM, B >= BATCH_MIN), "rows" (fused
    per-row loop for batch 1-2 where the batched path declines, input projection in the kernel), "per-row"
    (every option; BLAS input projection); None before any (tests and benchmarks use it to check which code they
    exercised)."""
    return _switch["last"]


POOL_STATS = ("calls", "phases", "helper_chunks", "solo", "long_waits", "scans", "sleeps", "backoffs", "halved",
              "moved")


def pool_stats() -> dict[str, int] | None:
    """Counters of the kernel's thread pool since the process started (None without the kernel): calls that had
    helpers, phases (steps or passes, or a bidirectional call's two direction pipes) posted to them, chunks (or
    pipe steps) the helpers ran, calls that went on alone (no helper took a chunk for 5 ms, or one wait of 20 ms
    for a helper's chunk with three threads or fewer), waits over 20 µs for a chunk a helper held, phases the
    helpers looked at, times a helper went to sleep, calls that started with fewer threads (or alone) because one
    had backed off less than 10 ms before, calls that went on with half their threads (contention with many
    threads), helpers that moved off the caller's CPU."""
    lib = _build.load()
    if lib is None:
        return None
    out = (ctypes.c_long * len(POOL_STATS))()
    lib.fusedrnn_pool_stats(out, len(POOL_STATS))
    return dict(zip(POOL_STATS, out, strict=True))


def current_cpu() -> int:
    """The CPU the calling thread runs on (-1 without the kernel, or where the system does not say): a caller
    records it before it wakes helper threads, which then :func:`leave_cpu` it."""
    lib = _build.load()
    return -1 if lib is None else int(lib.fusedrnn_thread_cpu())


def leave_cpu(cpu: int) -> None:
    """Moves the calling thread to another of its CPUs when it runs on ``cpu`` (a helper thread just woken by a
    caller on that CPU: woken threads tend to start on their waker's CPU, where the two then take turns). As the
    kernel's own pool helpers do; counted in :func:`pool_stats` as ``moved``."""
    lib = _build.load()
    if lib is not None and cpu >= 0:
        lib.fusedrnn_leave_cpu(cpu)


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[None]:
    """Calls made by this Python thread inside the block use at most ``n`` threads: the compiled float loops, the
    DynamicQuantizeLSTM kernel and the SDK targets' row and direction splits (a partitioned model keeps its
    recurrent nodes on the caller's core while onnxruntime's segments take most of its time)."""
    n = positive_int(n, "thread_limit: n")
    old = getattr(_local, "limit", None)
    _local.limit = n
    try:
        yield
    finally:
        _local.limit = old


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Context in which the NumPy engines run every call: the engine setting "numpy" (so the rounded loop is off
    too; process-wide, not thread-safe)."""
    with setting.using("numpy"):
        yield


_act_cache: dict = {}


def _act_table(acts: Sequence[Sequence[Activation]], D: int):
    """(codes, alphas, betas) as flat [D*3] ctypes arrays, or the reason (str) for an activation the kernel
    lacks."""
    key = (D, tuple(tuple(a) for a in acts[:D]))
    hit = _act_cache.get(key)
    if hit is None:
        codes, alpha, beta = [0] * 6, [0.0] * 6, [0.0] * 6
        for d in range(D):
            for k, a in enumerate(acts[d]):
                if a.name not in ACTIVATION_CODES or k > 2:
                    return f"activation {a.name!r} has no kernel code"
                codes[3 * d + k], alpha[3 * d + k], beta[3 * d + k] = ACTIVATION_CODES[a.name], a.alpha, a.beta
        hit = ((ctypes.c_int32 * 6)(*codes), (ctypes.c_double * 6)(*alpha), (ctypes.c_double * 6)(*beta))
        if len(_act_cache) < 256:
            _act_cache[key] = hit
    return hit


_IDENTITY = LSTM_BLOCKS["canonical"]
GATE_ORDERS = LSTM_BLOCKS
"""LSTM gate orders the kernel accepts (``gate_order=``): for each gate of the canonical order (i, f, g, o), its
block in W, R and the biases (ONNX stores i, o, f, c). The kernel reorders while packing R and reads the
projection at per-gate offsets, so ONNX-order weights need no reordered copy."""


_templates: dict = {}
"""Per static configuration of a call (shapes, options, activations, which optional arrays are present): the
``_Args`` with every non-pointer field set, and the path the kernel takes; a call copies it and sets the pointers
(building the struct field by field cost about 5 µs of a batch-1 call)."""


def _template(lib, kind, dt, T, B, I, D, GH, Hp, reverse, acts, present, diagonal, lbr, coupling, clip, cell_clip,
              proj_clip, gperm):
    """(args bytes, path) for :func:`run`, path one of "batched", "rows", "per-row"; or the reason (str) the
    kernel declines."""
    G = GATE_COUNT[kind]
    H = GH // G
    if len(reverse) != D or D > 2 or len(acts) < D:
        return f"{D} directions with {len(reverse)} reverse flags and {len(acts)} activation lists"
    if H == 0 or B == 0:
        return f"an empty dimension (H = {H}, B = {B})"
    if any(len(acts[d]) != _ACT_SLOTS[kind] for d in range(D)):
        return f"{[len(a) for a in acts[:D]]} activations per direction, not {_ACT_SLOTS[kind]}"
    table = _act_table(acts, D)
    if isinstance(table, str):
        return table
    args = _Args()
    args.kind, args.D, args.B, args.H, args.Hp, args.G, args.T = _KIND[kind], D, B, H, Hp, G, T
    args.act, args.alpha, args.beta = table
    args.reverse[0], args.reverse[1] = bool(reverse[0]), bool(reverse[-1])
    args.gperm[:] = gperm
    args.clip = -1.0 if clip is None else float(clip)
    args.cell_clip = -1.0 if cell_clip is None else float(cell_clip)
    args.proj_clip = -1.0 if proj_clip is None else float(proj_clip)
    args.diagonal, args.lbr, args.coupling = int(diagonal), int(lbr), _COUPLING[coupling]
    args.ln_on = int("ln" in present)
    for name in present:  # the C checks look at which pointers are set; the call sets the real ones
        setattr(args, name, 1)
    path = "per-row"
    if dt == np.float32:  # the fused paths read x and W themselves (no hoisted projection)
        args.x, args.W, args.I, args.batch_min = 1, 1, I, max(1, BATCH_MIN)
        ref = ctypes.byref(args)
        path = "batched" if lib.f32_batched_ok(ref) else "rows" if lib.f32_rows_ok(ref) else "per-row"
        if path == "per-row":
            args.x = args.W = None
    return bytes(args), path


_OPTIONAL = ("lens", "xb", "bh", "P", "projW", "projb", "ln")
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _normal_lens(lens, B: int, T: int):
    """int64 lengths, None when every row runs T steps, or False when malformed (the NumPy engine reports it;
    the kernel must never index outside [0, T))."""
    lens = np.ascontiguousarray(lens, dtype=np.int64).reshape(-1)
    if lens.shape != (B,) or lens.size and (lens.min() < 0 or lens.max() > T):
        return False
    return None if np.all(lens == T) else lens


def accepts(call, max_rows: int | None = None) -> str | None:
    """Whether the kernel takes ``call`` (a :class:`fusedrnn.cells.dispatch.Call`: ``kind``, the engine
    function's arguments by name in ``args``): None, with what :func:`run` needs left in ``call.prepared`` (the
    library, the call's template and path of :func:`_template`, the normalised lengths, the output width Hp);
    else the reason it declines. ``max_rows`` overrides MAX_ROWS (per-row path) and
    BATCHED_MAX_ROWS."""
    kind, a = call.kind, call.args
    if not setting.allows("compiled"):
        return f"the engine setting is {setting.engine()!r}"
    if a.get("observer") is not None:
        return "observer given"
    if a.get("h_feed") is not None:
        return "h_feed given"
    policy = a["policy"]
    if not policy.is_exact:
        return f"rounding policy {policy.name!r} (the kernel computes EXACT only)"
    x, W, R = a["x"], a["W"], a["R"]
    dt = x.dtype
    if dt not in _DTYPES or x.ndim != 3:
        return f"x of dtype {dt} and rank {x.ndim} (float32 or float64, rank 3)"
    T, B, I = x.shape
    D, GH = W.shape[0], W.shape[1]
    if D * B > (BATCHED_MAX_ROWS if max_rows is None else max_rows):
        return f"{D}·{B} rows > {BATCHED_MAX_ROWS if max_rows is None else max_rows}"
    lib = _build.load()
    if lib is None:
        return f"kernel unavailable: {_build.unavailable_reason()}"
    lens = a["lens"]
    if lens is not None:
        lens = _normal_lens(lens, B, T)
        if lens is False:
            return "sequence_lens malformed (the NumPy engine reports it)"
    has_bias = a["b_x"] is not None or a["b_h"] is not None
    diagonal = lbr = False
    coupling = cell_clip = proj_clip = None
    gperm = _IDENTITY
    if kind == "lstm":
        coupling, ln, diagonal = a["coupling"], a["ln"], R.ndim == 2
        if coupling not in _COUPLING:
            return f"coupling {coupling!r}"
        gperm = GATE_ORDERS.get(a["gate_order"])
        if gperm is None:
            return f"gate_order {a['gate_order']!r} (one of {sorted(LSTM_GATE_ORDERS)})"
        proj_W = a["proj_W"]
        Hp = proj_W.shape[1] if proj_W is not None else GH // 4
        cell_clip, proj_clip = a["cell_clip"], a["proj_clip"]
        present = (lens is not None, has_bias and ln is None, has_bias and ln is not None, a["P"] is not None,
                   proj_W is not None, a["proj_b"] is not None, ln is not None)
    elif kind == "gru":
        lbr = bool(a["linear_before_reset"])
        Hp = GH // 3
        present = (lens is not None, has_bias, lbr and a["b_h"] is not None, False, False, False, False)
    else:
        Hp = GH
        present = (lens is not None, has_bias, False, False, False, False, False)
    acts, reverse, clip = a["acts"], a["reverse"], a["clip"]
    key = (kind, dt.char, T, B, I, D, GH, Hp, tuple(reverse), tuple(map(tuple, acts[:D])), len(acts), present,
           diagonal, lbr, coupling, clip, cell_clip, proj_clip, gperm, BATCH_MIN)
    hit = _templates.get(key)
    if hit is None:
        names = tuple(n for n, on in zip(_OPTIONAL, present, strict=True) if on)
        hit = _template(lib, kind, dt, T, B, I, D, GH, Hp, reverse, acts, names, diagonal, lbr, coupling, clip,
                        cell_clip, proj_clip, gperm)
        if len(_templates) >= 512:
            _templates.clear()
        _templates[key] = hit
    if isinstance(hit, str):
        return hit
    raw, path = hit
    limit = MAX_ROWS if max_rows is None else max_rows
    if path == "per-row" and D * B > limit:
        return f"{D}·{B} rows > {limit} on the per-row path (options outside the fused subset)"
    call.prepared = (lib, raw, path, lens, Hp)  # a plain tuple: the cheapest record (this runs on every call)
    return None


def run(call) -> tuple:
    """Run a call :func:`accepts` took: (Y, Y_h) or (Y, Y_h, Y_c), as the engine returns them."""
    return _run(call.prepared, *_operands(call))


def _operands(call) -> tuple:
    """The arrays of a call as the kernel reads them: (x, W, R, h0, c0, reverse, (xb, bh, P, projW, projb, ln)),
    the biases summed (xb: added to the input projection; bh: the part that stays apart)."""
    a, kind = call.args, call.kind
    x, W = a["x"], a["W"]
    dt = x.dtype
    b_x, b_h = a["b_x"], a["b_h"]
    c0 = P = proj_W = proj_b = ln = bh = None
    if kind == "lstm":
        c0, P, proj_W, proj_b, ln = a["c0"], a["P"], a["proj_W"], a["proj_b"], a["ln"]
        xbias = _sum(b_x, b_h, dt)
        if ln is not None:  # with layer norm the bias goes in after normalising: the kernel adds it there
            xbias, bh = None, xbias
    elif kind == "gru":
        if b_h is not None and a["linear_before_reset"]:  # the candidate's recurrent bias stays inside r ⊙ (...)
            H = W.shape[1] // 3
            bh = b_h[:, 2 * H :]
            b_h = np.concatenate([b_h[:, : 2 * H], np.zeros((W.shape[0], H), b_h.dtype)], axis=1)
        xbias = _sum(b_x, b_h, dt)
    else:
        xbias = _sum(b_x, b_h, dt)
    return x, W, a["R"], a["h0"], c0, a["reverse"], (xbias, bh, P, proj_W, proj_b, ln)


def native_plan(call) -> tuple | str:
    """What a kernel call made outside Python (the ONNX custom-op bridge, :mod:`fusedrnn.frontends.onnx_native`)
    needs of a call :func:`accepts` took: (the ``_Args`` template bytes, W, R, xb, bh as C-contiguous float32
    arrays, xb and bh None where absent); or the reason it cannot be made there: only the batched path, whose
    choice depends on the options and H alone (not on T or B), runs without Python."""
    if call.prepared is None:
        return "the compiled kernel did not take the call"
    path = call.prepared[2]
    if path != "batched":
        return f"the kernel runs it on its {path} path (the bridge runs the batched path only)"
    _x, W, R, _h0, _c0, _reverse, (xb, bh, *rest) = _operands(call)
    if any(v is not None for v in rest):
        return "peepholes, a projection or layer norm (the batched path takes none)"

    def f32(a):
        return None if a is None else np.ascontiguousarray(a, dtype=np.float32)

    return call.prepared[1], f32(W), f32(R), f32(xb), f32(bh)


def _run(prepared: tuple, x, W, R, h0, c0, reverse, optional):
    lib, raw, path, lens, Hp = prepared
    optional = (lens, *optional)
    dt = x.dtype
    T, B, I = x.shape
    D, GH = W.shape[0], W.shape[1]
    batched, fused = path == "batched", path != "per-row"
    _switch["last"] = path
    args = _Args.from_buffer_copy(raw)
    keep = []  # the arrays whose addresses the kernel holds
    for name, arr in zip(_OPTIONAL, optional, strict=True):
        if arr is not None:
            if name != "lens":
                arr = np.ascontiguousarray(arr, dtype=dt)
            keep.append(arr)
            setattr(args, name, _ptr(arr))
    Rc = np.ascontiguousarray(R, dtype=dt)
    keep.append(Rc)
    args.R = _ptr(Rc)
    if fused:
        xc, Wc = np.ascontiguousarray(x), np.ascontiguousarray(W, dtype=dt)
        keep += [xc, Wc]
        args.x, args.W = _ptr(xc), _ptr(Wc)
    steps = T if lens is None else int(lens.max(initial=0))
    h = np.array(h0, dtype=dt, order="C", copy=True)
    c = np.array(c0, dtype=dt, order="C", copy=True) if c0 is not None else None
    Y = np.zeros((T, D, B, Hp), dt) if lens is not None else np.empty((T, D, B, Hp), dt)
    args.h, args.Y = _ptr(h), _ptr(Y)
    if c is not None:
        args.c = _ptr(c)
    args.threads = call_threads() if steps * B * GH * Hp >= THREAD_MIN_MACS else 1
    if batched:  # the packed [W | R]: made once for weights that cannot change, else room the kernel fills
        args.Rpk, args.prepacked, made = _panels(Wc, Rc, args, D * GH * (I + Hp), keep)

    run = lib.f32_run if dt == np.float32 else lib.f64_run
    ref = ctypes.byref(args)
    if fused:  # the kernel computes the input projection itself: one call for all steps
        args.K, args.s0, args.s1 = 1, 0, steps
        if steps and run(ref) != 0:
            raise MemoryError("compiled recurrence: could not allocate its work buffer")
        if batched and made is not None and steps:  # the kernel filled the new panels: later calls reuse them
            _keep_panels(made)
    else:
        _run_chunks(run, ref, args, x, W, lens, [bool(r) for r in reverse], steps, D, B, I, GH, dt)
    del keep
    if lens is not None:
        h[:, lens == 0] = 0
        if c is not None:
            c[:, lens == 0] = 0
    return (Y, h) if c is None else (Y, h, c)



def immutable(a: np.ndarray) -> bool:
    """Whether nothing can change ``a``'s values: read-only views down to a ``bytes`` object (what onnx's
    ``numpy_helper.to_array`` returns for a model's initializers)."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return isinstance(a, bytes)


_PANELS: dict = {}
_PANELS_MAX = 32
_panels_lock = threading.RLock()
"""Guards the cache's changes; re-entrant: making the weak reference under it can run a collection whose callback
drops another entry (_drop_panels) on the same thread."""


def _panels(W: np.ndarray, R: np.ndarray, args, n: int, keep: list):
    """(address of the batched path's packed [W | R], 1 when it is already filled, what to keep once the call
    has filled it or None). For immutable W and R (a loaded model's initializers) the packed copy the first call
    makes is kept until W or R is freed (weak references: an entry leaves the cache before its arrays' addresses
    can be reused): packing a batch-1 LSTM's 393 KiB cost about 8 µs of each call. Other weights are packed into
    this thread's buffer by every call. The call holds the packed copy it uses (``keep``): another thread may
    drop the entry meanwhile."""
    key = (id(W), id(R), args.kind, args.lbr, tuple(args.gperm))
    hit = _PANELS.get(key)  # a dict lookup is atomic; the lock guards the changes
    if hit is not None and hit[0]() is W and hit[1]() is R:  # the same (immutable) arrays as when they were packed
        keep.append(hit[2])
        return hit[3], 1, None
    if not (immutable(W) and immutable(R)):
        return _pack_buffer(n), 0, None
    buf = np.empty(n + 16, np.float32)
    keep.append(buf)
    addr = buf.ctypes.data + 4 * ((-buf.ctypes.data % 64) // 4)
    return addr, 0, (key, W, R, buf, addr)


def _drop_panels(key) -> None:
    with _panels_lock:
        _PANELS.pop(key, None)


def _keep_panels(made) -> None:
    key, W, R, buf, addr = made
    gone = lambda _ref, key=key: _drop_panels(key)  # noqa: E731 -- W or R freed: the entry goes first
    with _panels_lock:
        if len(_PANELS) >= _PANELS_MAX:
            _PANELS.pop(next(iter(_PANELS)))
        _PANELS[key] = (weakref.ref(W, gone), weakref.ref(R, gone), buf, addr)


def _pack_buffer(n: int) -> int:
    """Address of n float32, 64-byte aligned, reused by the calls of this thread (its pages stay mapped: a fresh
    buffer of several MiB per call costs about as much as packing into it)."""
    got = getattr(_local, "pack", None)  # (buffer, its aligned address): reading .ctypes.data costs about 1 µs
    if got is None or got[0].size < n + 16:
        buf = np.empty(n + 16, np.float32)
        got = _local.pack = (buf, buf.ctypes.data + 4 * ((-buf.ctypes.data % 64) // 4))
    return got[1]


def _run_chunks(run, ref, args, x, W, lens, rev, steps, D, B, I, GH, dt) -> None:
    """Per-row path: the input projection hoisted (one BLAS GEMM per direction and chunk of steps), then the
    kernel once per chunk."""
    per_step = D * B * GH * dt.itemsize
    K = max(1, min(steps, max(PROJECTION_BUFFER_BYTES // max(per_step, 1), -(-256 // max(B, 1)))))
    args.K = K
    xr = reverse_valid_prefix(x, lens) if any(rev) and steps else None
    xp = np.empty((D, K, B, GH), dt)
    args.xp = _ptr(xp)
    for s0 in range(0, steps, K):
        m = min(K, steps - s0)
        for d in range(D):
            xs = xr if rev[d] else x
            # W[d].T is a transposed view: BLAS reads it in place (no per-call copy of W)
            np.matmul(xs[s0 : s0 + m].reshape(m * B, I), W[d].T, out=xp[d, :m].reshape(m * B, GH))
        args.s0, args.s1 = s0, s0 + m
        if run(ref) != 0:
            raise MemoryError("compiled recurrence: could not allocate its work buffer")


def _sum(a, b, dt) -> np.ndarray | None:
    if a is None or b is None:
        return None if a is None and b is None else np.asarray(a if b is None else b, dtype=dt)
    return np.add(a, b, dtype=dt)


def _run_or_none(kind: str, a: dict, max_rows: int | None):
    call = SimpleNamespace(kind=kind, args=a, prepared=None)
    return None if accepts(call, max_rows) is not None else run(call)


def run_lstm(x, W, R, b_x, b_h, h0, c0, *, reverse, acts, lens=None, P=None, clip=None, coupling=None,
             cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, ln=None, policy: RoundingPolicy = EXACT,
             h_feed=None, max_rows: int | None = None, gate_order: str = "canonical", observer=None):
    """:func:`fusedrnn.cells.lstm_sequence` in compiled code: (Y, Y_h, Y_c), or None when not handled.

    ``gate_order``: the gate order of W, R, b_x, b_h (a key of :data:`GATE_ORDERS`; P and ln stay canonical)."""
    return _run_or_none("lstm", locals(), max_rows)


def run_gru(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, linear_before_reset=False,
            policy: RoundingPolicy = EXACT, max_rows: int | None = None, observer=None):
    """:func:`fusedrnn.cells.gru_sequence` in compiled code: (Y, Y_h), or None when not handled."""
    return _run_or_none("gru", locals(), max_rows)


def run_rnn(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, policy: RoundingPolicy = EXACT,
            max_rows: int | None = None, observer=None):
    """:func:`fusedrnn.cells.rnn_sequence` in compiled code: (Y, Y_h), or None when not handled."""
    return _run_or_none("rnn", locals(), max_rows)
