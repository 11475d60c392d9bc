"""Python side of the rounded recurrence: decides whether the C loop takes a call (:func:`accepts`), then
(:func:`run`) rounds weights and inputs with the policy's NumPy rounders, computes the input projection with
BLAS (rounded at ``xproj``), and runs the C loop (``_rounded.c``) once per call.

:func:`accepts` takes a call of :func:`fusedrnn.cells.lstm_sequence` / :func:`~fusedrnn.cells.gru_sequence` (its
arguments by name) and returns None or the reason it declines: library unavailable or switched off by the engine setting
(``FUSEDRNN_ENGINE``, :func:`disabled`), the EXACT policy (the ``compiled`` kernel's job), a rounder other than
fp16 / bf16 / DLFLOAT16, a dtype other than float32, more than :data:`MAX_ROWS` rows of D·B, or an option outside
the subset (``h_feed``, an observer, projection, layer norm, diagonal R, activations other than the default
sigmoid/tanh, a policy with neither pre-activation/gate rounding nor split points, the RNN). ``run_lstm`` /
``run_gru`` do both and return None where the loop declines.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np

from ... import _native
from ...numerics.float_formats import round_to_bfloat16, round_to_dlfloat16, round_to_float16
from .. import setting
from ..kinds import DEFAULT_ACTIVATIONS, GATE_COUNT, lstm_canonical
from ..recurrence import stored_biases
from ..rounding import EXACT, RoundingPolicy

MAX_ROWS = 8
"""Largest D·B the loop takes; above it the NumPy engine's per-step BLAS GEMM over all rows pays."""

ABI_VERSION = 1
MODES = {round_to_float16: 1, round_to_bfloat16: 2, round_to_dlfloat16: 3}
_LOOP_POINTS = ("preact", "gates", "cell", "hidden", "hproj")  # order of rr_args.mode
_COUPLING = {None: 0, "input_forget": 1, "cifg": 2}
_KINDS = ("lstm", "gru")  # with their default activations (sigmoid gates, tanh candidate) only


class _Args(ctypes.Structure):
    """Mirror of ``rr_args`` in _rounded.c."""

    _fields_ = [(n, ctypes.c_int32) for n in ("kind", "D", "B", "H", "T", "lbr", "coupling", "split",
                                               "split_bias", "peep")] + [
        ("mode", ctypes.c_int32 * 5), ("reverse", ctypes.c_int32 * 2),
        ("clip", ctypes.c_double), ("cell_clip", ctypes.c_double),
        ("lens", ctypes.c_void_p), ("xp", ctypes.c_void_p), ("RT", ctypes.c_void_p), ("hb", ctypes.c_void_p),
        ("P", ctypes.c_void_p), ("h", ctypes.c_void_p), ("c", ctypes.c_void_p), ("Y", ctypes.c_void_p),
    ]


def _bind(lib: ctypes.CDLL) -> None:
    lib.fusedrnn_rounded_run.argtypes = [ctypes.c_void_p]
    lib.fusedrnn_rounded_run.restype = ctypes.c_int
    lib.fusedrnn_rounded_round.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
    lib.fusedrnn_rounded_round.restype = None


LIBRARY = _native.Library("rounded", ABI_VERSION, _bind)


def available() -> bool:
    """True when the engine setting lets the loop run and the library is loaded (loaded on the first call)."""
    return setting.allows("rounded") and LIBRARY.load() is not None


def unavailable_reason() -> str | None:
    return LIBRARY.reason


def set_enabled(flag: bool) -> None:
    """Deprecated: the engine setting ``"auto"`` (True) or ``"numpy"`` (False, also for the compiled loop), as
    :func:`fusedrnn.cells.dispatch.set_engine`."""
    setting.set_engine("auto" if flag else "numpy")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Context in which the NumPy engines run every call: the engine setting "numpy" (process-wide, not
    thread-safe)."""
    with setting.using("numpy"):
        yield


def round_with(mode: str, x: np.ndarray) -> np.ndarray:
    """Round a float32 array in place with the C rounder ``mode`` ("fp16", "bf16", "dlf16"); for tests."""
    lib = LIBRARY.load()
    if lib is None:
        raise RuntimeError(f"rounded recurrence library unavailable: {LIBRARY.reason}")
    if x.dtype != np.float32 or not x.flags.c_contiguous:
        raise TypeError("x: expected a C-contiguous float32 array")
    lib.fusedrnn_rounded_round({"fp16": 1, "bf16": 2, "dlf16": 3}[mode], x.ctypes.data, x.size)
    return x


def _modes(policy: RoundingPolicy) -> list[int] | None:
    """The C rounder code of every point (0 = none), or None when a rounder has no C version."""
    out = {}
    for p, fn in policy.rounders.items():
        code = MODES.get(fn)
        if code is None:
            return None
        out[p] = code
    return out


class Plan:
    """What :func:`run` needs of a call the loop takes: the library, the C rounder of each point, the lengths."""

    __slots__ = ("lib", "modes", "lens")

    def __init__(self, lib, modes, lens):
        self.lib, self.modes, self.lens = lib, modes, lens


def accepts(call) -> str | None:
    """Whether the loop takes ``call`` (a :class:`fusedrnn.cells.dispatch.Call`: ``kind``, the engine function's
    arguments by name in ``args``): None, with the :class:`Plan` of :func:`run` left in ``call.prepared``; else
    the reason it declines."""
    kind, a = call.kind, call.args
    if not setting.allows("rounded"):
        return f"the engine setting is {setting.engine()!r}"
    if kind not in _KINDS:
        return f"no rounded {kind.upper()} loop"
    if a.get("observer") is not None:
        return "observer given"
    if a.get("h_feed") is not None:
        return "h_feed given"
    policy, x, W = a["policy"], a["x"], a["W"]
    if policy.is_exact:
        return "the EXACT policy (the compiled backend's)"
    if x.dtype != np.float32 or x.ndim != 3:
        return f"x of dtype {x.dtype} and rank {x.ndim} (float32, rank 3)"
    D, B = W.shape[0], x.shape[1]
    if D * B > MAX_ROWS:
        return f"{D}·{B} rows > MAX_ROWS {MAX_ROWS}"
    acts, reverse = a["acts"], a["reverse"]
    if len(reverse) != D or D > 2 or len(acts) < D:
        return f"{D} directions with {len(reverse)} reverse flags and {len(acts)} activation lists"
    if any(tuple(act.name for act in acts[d]) != DEFAULT_ACTIVATIONS[kind] for d in range(D)):
        return f"activations other than {DEFAULT_ACTIVATIONS[kind]}"
    if kind == "lstm":
        for name, off in (("proj_W", "a projection"), ("ln", "layer norm")):
            if a[name] is not None:
                return off
        if a["R"].ndim != 3:
            return "diagonal R"
        if a["coupling"] not in _COUPLING:
            return f"coupling {a['coupling']!r}"
    modes = _modes(policy)
    if modes is None:
        return f"policy {policy.name!r} has a rounder without C code"
    if not (policy.splits_biases or "preact" in modes or "gates" in modes):
        # without these the NumPy engine folds ½ into sigmoid's argument: a different operation order
        return f"policy {policy.name!r} rounds neither pre-activations nor gates"
    lib = LIBRARY.load()
    if lib is None:
        return f"library unavailable: {LIBRARY.reason}"
    lens = _lens(a["lens"], B, x.shape[0])
    if lens is False:
        return "sequence_lens malformed (the NumPy engine reports it)"
    call.prepared = Plan(lib, modes, lens)
    return None


def _lens(lens, B: int, T: int):
    """int64 lengths, None when every row runs T steps, or False when they are malformed (engine reports it)."""
    if lens is None:
        return None
    lens = np.ascontiguousarray(lens, dtype=np.int64).reshape(-1)
    if lens.shape != (B,) or (lens.size and (lens.min() < 0 or lens.max() > T)):
        return False
    return None if np.all(lens == T) else lens


def _rounded_copy(a, fn):
    if a is None:
        return None
    a = np.array(a, dtype=np.float32, order="C", copy=True)
    if fn is not None:
        fn(a)
    return a


def _run(lib, modes, policy, kind, x, W, R, xbias, hb, h0, c0, reverse, lens, *, lbr=0, split=False, P=None,
         clip=None, cell_clip=None, coupling=None):
    T, B, I = x.shape
    D, GH = W.shape[0], W.shape[1]
    H = GH // GATE_COUNT[kind]
    ri, rw, rx = policy.get("inputs"), policy.get("weights"), policy.get("xproj") if split else None
    x = _rounded_copy(x, ri) if ri is not None else np.ascontiguousarray(x, dtype=np.float32)
    h = _rounded_copy(h0, ri)
    c = _rounded_copy(c0, ri)
    Wr = W if rw is None else _rounded_copy(W, rw)
    RT = _rounded_copy(np.asarray(R).transpose(0, 2, 1), rw)  # [D, H, GH]
    P = _rounded_copy(P, rw)
    xp = np.empty((D, T, B, GH), np.float32)
    for d in range(D):  # one GEMM per direction, original time order (the loop reads reversed steps itself)
        out = xp[d].reshape(T * B, GH)
        np.matmul(x.reshape(T * B, I), Wr[d].T, out=out)
        if xbias is not None:
            out += xbias[d]
    if rx is not None:
        rx(xp)
    Y = np.zeros((T, D, B, H), np.float32) if lens is not None else np.empty((T, D, B, H), np.float32)
    args = _Args()
    args.kind, args.D, args.B, args.H, args.T = (0 if kind == "lstm" else 1), D, B, H, T
    args.lbr, args.coupling, args.split, args.peep = int(lbr), _COUPLING[coupling], int(split), int(P is not None)
    args.mode[:] = [modes.get(p, 0) if p != "hproj" or split else 0 for p in _LOOP_POINTS]
    args.reverse[0], args.reverse[1] = bool(reverse[0]), bool(reverse[-1])
    args.clip = -1.0 if clip is None else float(clip)
    args.cell_clip = -1.0 if cell_clip is None else float(cell_clip)
    keep = [a for a in (lens, hb) if a is not None]
    args.lens = None if lens is None else lens.ctypes.data
    args.hb = None if hb is None else hb.ctypes.data
    args.xp, args.RT, args.h, args.Y = xp.ctypes.data, RT.ctypes.data, h.ctypes.data, Y.ctypes.data
    args.P = None if P is None else P.ctypes.data
    args.c = None if c is None else c.ctypes.data
    if T and lib.fusedrnn_rounded_run(ctypes.byref(args)) != 0:
        raise MemoryError("rounded recurrence: could not allocate its work buffer")
    del keep
    if lens is not None:
        h[:, lens == 0] = 0
        if c is not None:
            c[:, lens == 0] = 0
    outs = (Y, h) if c is None else (Y, h, c)
    r_out = policy.get("outputs")
    if r_out is not None:
        for arr in outs:
            r_out(arr)
    return outs


def run(call) -> tuple:
    """Run a call :func:`accepts` took: (Y, Y_h) or (Y, Y_h, Y_c), as the engine returns them."""
    return (_run_lstm if call.kind == "lstm" else _run_gru)(call.prepared, **call.args)


def _run_lstm(p: Plan, x, W, R, b_x, b_h, h0, c0, *, reverse, P=None, clip=None, coupling=None,
                  cell_clip=None, policy: RoundingPolicy = EXACT, gate_order="canonical", **_):
    W, R, b_x, b_h = (lstm_canonical(a, gate_order) for a in (W, R, b_x, b_h))
    split = policy.splits_biases
    sb_x, sb_h = stored_biases(b_x, b_h, policy.get("weights"))
    bias = _sum(sb_x, None if split else sb_h)
    hb = np.ascontiguousarray(sb_h, dtype=np.float32) if split and sb_h is not None else None
    return _run(p.lib, p.modes, policy, "lstm", x, W, R, bias, hb, h0, c0, reverse, p.lens, split=split, P=P,
                clip=clip, cell_clip=cell_clip, coupling=coupling)


def _run_gru(p: Plan, x, W, R, b_x, b_h, h0, *, reverse, clip=None, linear_before_reset=False,
                 policy: RoundingPolicy = EXACT, **_):
    D, H = W.shape[0], W.shape[1] // 3
    lbr = bool(linear_before_reset)
    split = policy.splits_biases and lbr
    sb_x, sb_h = stored_biases(b_x, b_h, policy.get("weights"))
    hb = None
    bias = _sum(sb_x, None)
    if sb_h is not None:
        if split:
            hb = np.ascontiguousarray(sb_h, dtype=np.float32)
        elif lbr:
            bias = np.zeros((D, 3 * H), np.float32) if bias is None else bias
            bias[:, : 2 * H] += sb_h[:, : 2 * H]
            hb = np.ascontiguousarray(sb_h[:, 2 * H :], dtype=np.float32)
        else:
            bias = _sum(bias, sb_h)
    return _run(p.lib, p.modes, policy, "gru", x, W, R, bias, hb, h0, None, reverse, p.lens, lbr=lbr, split=split,
                clip=clip)


def _run_or_none(kind: str, a: dict):
    call = SimpleNamespace(kind=kind, args=a, prepared=None)
    return None if accepts(call) is not None else run(call)


def run_lstm(x, W, R, b_x, b_h, h0, c0, *, reverse, acts, lens=None, P=None, clip=None, coupling=None,
             cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, ln=None, policy: RoundingPolicy = EXACT,
             h_feed=None, observer=None, gate_order: str = "canonical"):
    """:func:`fusedrnn.cells.lstm_sequence` under a rounding policy in compiled code: (Y, Y_h, Y_c), or None."""
    return _run_or_none("lstm", locals())


def run_gru(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, linear_before_reset=False,
            policy: RoundingPolicy = EXACT, observer=None):
    """:func:`fusedrnn.cells.gru_sequence` under a rounding policy in compiled code: (Y, Y_h), or None."""
    return _run_or_none("gru", locals())


def _sum(a, b):
    """a + b in float32 (0 + a + b, the NumPy engine's order; exact either way), or None when both are None."""
    if a is None and b is None:
        return None
    out = np.zeros(np.shape(a if a is not None else b), np.float32)
    for v in (a, b):
        if v is not None:
            out += v
    return out
