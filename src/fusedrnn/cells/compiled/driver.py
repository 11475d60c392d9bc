"""Python side of the compiled recurrence: checks the options are in the compiled subset and which path the
kernel takes (cached per static configuration); on the general per-row path hoists the input projection (one BLAS
GEMM per direction and chunk of steps) and runs the kernel once per chunk; on the float32 fused paths (batched
GEMM, or per-row at batch 1-2: the kernel computes x·Wᵀ itself) runs the kernel once.

The ``run_*`` functions take exactly the arguments of :func:`fusedrnn.cells.lstm_sequence`,
:func:`~fusedrnn.cells.gru_sequence` and :func:`~fusedrnn.cells.rnn_sequence` and return the same tuple, or
``None`` when they do not handle the call (kernel unavailable or switched off, a rounding policy other than
EXACT, an ``h_feed``, a dtype other than float32/float64, or more than ``max_rows`` rows of D·B; by default
MAX_ROWS, or BATCHED_MAX_ROWS where the batched path takes the call), in which case
the caller runs its NumPy loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator, Sequence

import numpy as np

from ..activations import Activation
from ..kinds import DEFAULT_ACTIVATIONS, GATE_COUNT
from ..recurrence import reverse_valid_prefix
from ..rounding import EXACT, RoundingPolicy
from . import _build

MAX_ROWS = 8
"""Default largest D·B the compiled loop takes for options outside the batched subset (its per-row GEMV): above
it the NumPy engines' per-step BLAS GEMM over all rows is as fast (measured in benchmarks/bench_compiled.py)."""

BATCH_MIN = 3
"""Least batch for the float32 batched path (below it the per-row GEMV path runs; measured in
benchmarks/bench_compiled.py --sweep)."""

BATCHED_MAX_ROWS = 1024
"""Default largest D·B for the float32 batched path (packed GEMM + fused gates per step; the LSTM without
peepholes, projection, layer norm, clips or coupling, and the GRU, with default activations, H a multiple of
the kernel's vector width): it was measured faster than the NumPy engine at every batch up to 64 (S2, S3)."""

PROJECTION_BUFFER_BYTES = 4 << 20
"""Input-projection buffer per kernel call; the projection of a chunk of steps is one GEMM per direction."""

ACTIVATION_CODES = {
    "Relu": 0, "Tanh": 1, "Sigmoid": 2, "Affine": 3, "LeakyRelu": 4, "ThresholdedRelu": 5, "ScaledTanh": 6,
    "HardSigmoid": 7, "Elu": 8, "Softsign": 9, "Softplus": 10,
}
_KIND = {"lstm": 0, "gru": 1, "rnn": 2}
_COUPLING = {None: 0, "input_forget": 1, "cifg": 2}
_GATES = GATE_COUNT
_ACT_SLOTS = {kind: len(acts) for kind, acts in DEFAULT_ACTIVATIONS.items()}

def _default_threads() -> int:
    env = os.environ.get("FUSEDRNN_THREADS", "").strip()
    n = int(env) if env.isdigit() else 2
    try:
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may run on (taskset, cgroup cpusets)
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(n, 2, cpus))


_switch = {"enabled": True, "threads": _default_threads(), "last": None}

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
        ("batch_min", ctypes.c_int32),
    ]


_addressof, _c_char = ctypes.addressof, ctypes.c_char


def _ptr(a: np.ndarray) -> int:
    """Address of a C-contiguous array's data: through the buffer protocol (about 0.3 µs), else ``a.ctypes.data``
    (about 1 µs; read-only or empty arrays)."""
    try:
        return _addressof(_c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def available() -> bool:
    """True when the kernel is loaded (compiling it on the first call) and not switched off."""
    return _switch["enabled"] and _build.load() is not None


def set_enabled(flag: bool) -> None:
    """Switch the compiled loop on or off for this process (the NumPy engines then run every call)."""
    _switch["enabled"] = bool(flag)


def is_enabled() -> bool:
    return _switch["enabled"]


def set_threads(n: int) -> None:
    """Threads the kernel may use: 2 runs the two directions of a bidirectional call at once, 1 runs them one
    after the other (default: 2 where the machine has 2 cores; ``$FUSEDRNN_THREADS``)."""
    _switch["threads"] = max(1, int(n))


def threads() -> int:
    return _switch["threads"]


def last_path() -> str | None:
    """Which path the last call the kernel took ran: "batched" (packed GEMM, B >= BATCH_MIN), "rows" (fused
    per-row loop, input projection in the kernel), "per-row" (every option; BLAS input projection); None before
    any (tests and benchmarks use it to check which code they exercised)."""
    return _switch["last"]


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Context in which the ``run_*`` functions return None, so the engines run their NumPy loops."""
    old = _switch["enabled"]
    _switch["enabled"] = False
    try:
        yield
    finally:
        _switch["enabled"] = old


def _lib_for(x: np.ndarray, policy: RoundingPolicy, h_feed, D: int, max_rows: int | None):
    if not _switch["enabled"] or h_feed is not None or not policy.is_exact:
        return None
    if x.dtype not in (np.float32, np.float64) or x.ndim != 3:
        return None
    if D * x.shape[1] > (BATCHED_MAX_ROWS if max_rows is None else max_rows):
        return None
    return _build.load()


_act_cache: dict = {}


def _act_table(acts: Sequence[Sequence[Activation]], D: int):
    """(codes, alphas, betas) as flat [D*3] ctypes arrays, or None for an activation the kernel lacks."""
    key = (D, tuple(tuple(a) for a in acts[:D]))
    hit = _act_cache.get(key)
    if hit is None:
        codes, alpha, beta = [0] * 6, [0.0] * 6, [0.0] * 6
        for d in range(D):
            for k, a in enumerate(acts[d]):
                if a.name not in ACTIVATION_CODES or k > 2:
                    return None
                codes[3 * d + k], alpha[3 * d + k], beta[3 * d + k] = ACTIVATION_CODES[a.name], a.alpha, a.beta
        hit = ((ctypes.c_int32 * 6)(*codes), (ctypes.c_double * 6)(*alpha), (ctypes.c_double * 6)(*beta))
        if len(_act_cache) < 256:
            _act_cache[key] = hit
    return hit


_IDENTITY = (0, 1, 2, 3)
GATE_ORDERS = {"canonical": _IDENTITY, "onnx": (0, 2, 3, 1)}
"""LSTM gate orders run_lstm accepts: for each gate of the canonical order (i, f, g, o), its block in W, R and the
biases (ONNX stores i, o, f, c). The kernel reorders while packing R and reads the projection at per-gate offsets,
so ONNX-order weights need no reordered copy."""


_templates: dict = {}
"""Per static configuration of a call (shapes, options, activations, which optional arrays are present): the
``_Args`` with every non-pointer field set, and the path the kernel takes; a call copies it and sets the pointers
(building the struct field by field cost about 5 µs of a batch-1 call)."""


def _template(lib, kind, dt, T, B, I, D, GH, Hp, reverse, acts, present, diagonal, lbr, coupling, clip, cell_clip,
              proj_clip, gperm):
    """(args bytes, path) for :func:`_run`, path one of "batched", "rows", "per-row"; None when not handled."""
    G = _GATES[kind]
    H = GH // G
    if len(reverse) != D or D > 2 or H == 0 or B == 0 or len(acts) < D:
        return None
    if any(len(acts[d]) != _ACT_SLOTS[kind] for d in range(D)):
        return None
    table = _act_table(acts, D)
    if table is None:
        return None
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


def _run(lib, kind: str, x, W, R, xbias, h0, c0, reverse, acts, lens, *, Hp: int, diagonal=False, lbr=False,
         coupling=None, bh=None, P=None, proj_W=None, proj_b=None, ln=None, clip=None, cell_clip=None,
         proj_clip=None, gperm=_IDENTITY, max_rows=None):
    dt = x.dtype
    T, B, I = x.shape
    D, GH = W.shape[0], W.shape[1]
    if lens is not None:
        lens = np.ascontiguousarray(lens, dtype=np.int64).reshape(-1)
        if lens.shape != (B,) or lens.size and (lens.min() < 0 or lens.max() > T):
            return None  # the engine reports it; the kernel must never index outside [0, T)
        if np.all(lens == T):
            lens = None
    optional = (lens, xbias, bh, P, proj_W, proj_b, ln)
    present = tuple(n for n, a in zip(_OPTIONAL, optional, strict=True) if a is not None)
    key = (kind, dt.char, T, B, I, D, GH, Hp, tuple(reverse), tuple(map(tuple, acts[:D])), len(acts), present,
           diagonal, lbr, coupling, clip, cell_clip, proj_clip, gperm, BATCH_MIN)
    hit = _templates.get(key)
    if hit is None:
        hit = _template(lib, kind, dt, T, B, I, D, GH, Hp, reverse, acts, present, diagonal, lbr, coupling, clip,
                        cell_clip, proj_clip, gperm)
        if len(_templates) >= 512:
            _templates.clear()
        _templates[key] = hit
    if hit is None:
        return None
    raw, path = hit
    batched, fused = path == "batched", path != "per-row"
    if D * B > (MAX_ROWS if max_rows is None else max_rows) and not fused:
        return None
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
    rev = [bool(r) for r in reverse]
    h = np.array(h0, dtype=dt, order="C", copy=True)
    c = np.array(c0, dtype=dt, order="C", copy=True) if c0 is not None else None
    Y = np.zeros((T, D, B, Hp), dt) if lens is not None else np.empty((T, D, B, Hp), dt)
    args.h, args.Y = _ptr(h), _ptr(Y)
    if c is not None:
        args.c = _ptr(c)
    args.threads = _switch["threads"] if steps * B * GH * Hp >= THREAD_MIN_MACS else 1
    if batched:  # room for the packed [W | R], filled by the kernel
        args.Rpk = _pack_buffer(D * GH * (I + Hp))

    run = lib.f32_run if dt == np.float32 else lib.f64_run
    ref = ctypes.byref(args)
    if fused:  # the kernel computes the input projection itself: one call for all steps
        args.K, args.s0, args.s1 = 1, 0, steps
        if steps and run(ref) != 0:
            raise MemoryError("compiled recurrence: could not allocate its work buffer")
    else:
        _run_chunks(run, ref, args, x, W, lens, rev, steps, D, B, I, GH, dt)
    del keep
    if lens is not None:
        h[:, lens == 0] = 0
        if c is not None:
            c[:, lens == 0] = 0
    return (Y, h) if c is None else (Y, h, c)


_local = threading.local()


def _pack_buffer(n: int) -> int:
    """Address of n float32, 64-byte aligned, reused by the calls of this thread (its pages stay mapped: a fresh
    buffer of several MiB per call costs about as much as packing into it)."""
    buf = getattr(_local, "pack", None)
    if buf is None or buf.size < n + 16:
        buf = _local.pack = np.empty(n + 16, np.float32)
    return buf.ctypes.data + 4 * ((-buf.ctypes.data % 64) // 4)


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


def run_lstm(x, W, R, b_x, b_h, h0, c0, *, reverse, acts, lens=None, P=None, clip=None, coupling=None,
             cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, ln=None, policy: RoundingPolicy = EXACT,
             h_feed=None, max_rows: int | None = None, gate_order: str = "canonical"):
    """:func:`fusedrnn.cells.lstm_sequence` in compiled code: (Y, Y_h, Y_c), or None when not handled.

    ``gate_order``: the gate order of W, R, b_x, b_h (a key of :data:`GATE_ORDERS`; P and ln stay canonical)."""
    D, H4 = W.shape[0], W.shape[1]
    lib = _lib_for(x, policy, h_feed, D, max_rows)
    if lib is None or coupling not in _COUPLING:
        return None
    Hp = proj_W.shape[1] if proj_W is not None else H4 // 4
    bias = _sum(b_x, b_h, x.dtype)
    return _run(lib, "lstm", x, W, R, None if ln is not None else bias, h0, c0, reverse, acts, lens, Hp=Hp,
                diagonal=R.ndim == 2, coupling=coupling, bh=bias if ln is not None else None, P=P, proj_W=proj_W,
                proj_b=proj_b, ln=ln, clip=clip, cell_clip=cell_clip, proj_clip=proj_clip,
                gperm=GATE_ORDERS[gate_order], max_rows=max_rows)


def run_gru(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, linear_before_reset=False,
            policy: RoundingPolicy = EXACT, max_rows: int | None = None):
    """:func:`fusedrnn.cells.gru_sequence` in compiled code: (Y, Y_h), or None when not handled."""
    D, H3 = W.shape[0], W.shape[1]
    lib = _lib_for(x, policy, None, D, max_rows)
    if lib is None:
        return None
    dt, H = x.dtype, H3 // 3
    b_hn = None
    if b_h is not None and linear_before_reset:
        b_hn = b_h[:, 2 * H :]
        b_h = np.concatenate([b_h[:, : 2 * H], np.zeros((D, H), b_h.dtype)], axis=1)
    bias = _sum(b_x, b_h, dt)
    return _run(lib, "gru", x, W, R, bias, h0, None, reverse, acts, lens, Hp=H, lbr=bool(linear_before_reset),
                bh=b_hn, clip=clip, max_rows=max_rows)


def run_rnn(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, policy: RoundingPolicy = EXACT,
            max_rows: int | None = None):
    """:func:`fusedrnn.cells.rnn_sequence` in compiled code: (Y, Y_h), or None when not handled."""
    D, H = W.shape[0], W.shape[1]
    lib = _lib_for(x, policy, None, D, max_rows)
    if lib is None:
        return None
    bias = _sum(b_x, b_h, x.dtype)
    return _run(lib, "rnn", x, W, R, bias, h0, None, reverse, acts, lens, Hp=H, clip=clip, max_rows=max_rows)
