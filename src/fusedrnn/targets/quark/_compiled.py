"""The compiled ExtendedLSTM recurrence (``_kernel.c``): loading, ctypes structure, and the driver :func:`run`
that :meth:`.kernel.Recurrence.run` calls instead of its NumPy loop.

The library is the ``quark`` one of :mod:`fusedrnn._native` (built when the package was installed, the variant for
this CPU; the engine setting, ``$FUSEDRNN_ENGINE``, says which loop runs), compiled with ``-ffp-contract=off``
(float32 tanhf must not be fused into FMAs) and ``-fwrapv`` (int64 wrap-around as in NumPy). When it is
unavailable, :func:`load` returns None and the NumPy loop runs. The kernel parameters come from the NumPy code (packed
once per set of weights by :func:`pack`); the C code re-does exactly the per-step arithmetic of the NumPy loop
(tests/test_quark_compiled.py checks ``==``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ... import _native
from ...cells.compiled import _build, driver
from .fixed import c_one_shl

ABI = 6
X_BLOCK_ROWS = 64  # rows (time steps x batch) of each input-projection GEMM in the loop
SPLIT_MIN_MACS = 1 << 21
"""Least multiply-adds of a call (steps x rows x both directions' products) for which its two directions run on two
threads: handing one to the helper costs some tens of microseconds."""

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64


class Srs(ctypes.Structure):
    _fields_ = [("shift", I64), ("half", I64), ("delta", I64), ("sat", I64)]


class QuarkArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("T", "B", "I", "H", "G", "D", "Ip", "Hp", "Gp", "faithful", "rev0", "rev1",
                                   "has_qb", "ts")] + [
        (n, I64) for n in ("qx", "qh", "qa", "qb", "ohs", "ohz", "ohz_term")] + [
        (n, Srs) for n in ("xw", "xwq", "hr", "hrq", "xss", "hss", "oh")] + [
        ("y_scale", ctypes.c_float), ("y_zp", I32)] + [
        (n, P) for n in ("x", "xh", "xl", "qc", "W", "R", "h", "c", "y", "yf", "acc", "accx", "gf", "hn", "hs")] + [
        ("xlo", I32 * 2), ("d0", I32), ("d1", I32)]


def _bind(lib) -> None:
    lib.quark_run.argtypes = [ctypes.POINTER(QuarkArgs)]
    lib.quark_run.restype = ctypes.c_int
    lib.quark_tanhf_array.argtypes = [P, P, I64]
    lib.quark_tanhf_array.restype = None
    lib.quark_tanhf_vec.argtypes = [P, P, I64]
    lib.quark_tanhf_vec.restype = None


_LOOP = _build.CompiledLoop("Quark", _native.Library("quark", ABI, _bind))
# the module-level API of this target's compiled loop (load, engine choice, library for an engine)
load, unavailable_reason = _LOOP.load, _LOOP.unavailable_reason
default_engine, use_engine, library = _LOOP.default_engine, _LOOP.use_engine, _LOOP.library


def _tanhf_on(kernel: str, x: np.ndarray) -> np.ndarray:
    lib = load()
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    getattr(lib, kernel)(x.ctypes.data, out.ctypes.data, x.size)
    return out


def tanhf_array(x: np.ndarray) -> np.ndarray:
    """The C kernel's tanhf on a float32 array (for tests)."""
    return _tanhf_on("quark_tanhf_vec", x)


def tanhf_scalar(x: np.ndarray) -> np.ndarray:
    """The C kernel's scalar (branching) tanhf on a float32 array (for tests)."""
    return _tanhf_on("quark_tanhf_array", x)


# ---- driver -------------------------------------------------------------------------------------------------
def _even(k: int) -> int:
    return k + (k & 1)


def _pack(w: np.ndarray, gp: int) -> np.ndarray:
    """int16-domain weights [D, G, K] -> int16 panels [D, Gp / 16, Kp / 2, 16, 2] (zero padded; the layout of the
    kernel's ``gemm``)."""
    D, G, K = w.shape
    p = np.zeros((D, _even(K), gp), np.int16)
    p[:, :K, :G] = np.swapaxes(w, 1, 2)
    return np.ascontiguousarray(p.reshape(D, -1, 2, gp // 16, 16).transpose(0, 3, 1, 4, 2))


def _srs(shift: int, faithful: bool, sat: bool) -> Srs:
    half = 0 if shift == 0 else (c_one_shl(shift - 1) if faithful else 1 << (shift - 1))
    delta = half - ((1 << shift) - 1 - half)
    return Srs(shift, half, delta, int(sat))


@dataclass(frozen=True)
class Packed:
    """A recurrence's weights and constants in the C kernel's layout, made once per set of weights."""

    D: int
    G: int
    I: int  # noqa: E741
    H: int
    W: np.ndarray
    R: np.ndarray
    qc: np.ndarray
    args: QuarkArgs  # the constant fields; pointers and sizes are set per call


def pack(wq: np.ndarray, rq: np.ndarray, p, *, reverse: tuple[bool, ...], faithful: bool, y_scale: float,
         y_zero_point: int) -> Packed:
    """wq [D, 4H, I], rq [D, 4H, H] int16-domain weights, p the KernelParams -> :class:`Packed`."""
    D, G, I = wq.shape  # noqa: E741
    H = G // 4
    Ip, Hp, Gp = _even(I), _even(H), -(-G // 16) * 16
    W, R = _pack(wq, Gp), _pack(rq, Gp)
    qc = np.ascontiguousarray(p.qc, dtype=np.int64)
    rev = tuple(bool(r) for r in reverse) + (False,)
    ohz_term = (p.ohz << p.oh) if faithful else 0
    a = QuarkArgs(0, 0, I, H, G, D, Ip, Hp, Gp, int(faithful), int(rev[0]), int(rev[1]), int(p.qb != 0), 0,
                  p.qx, p.qh, p.qa, p.qb, p.ohs, p.ohz, ohz_term,
                  _srs(p.xw, faithful, faithful), _srs(p.xwq, faithful, faithful), _srs(p.hr, faithful, faithful),
                  _srs(p.hrq, faithful, faithful), _srs(p.xss, faithful, faithful), _srs(p.hss, faithful, faithful),
                  _srs(p.oh, faithful, False), float(y_scale), int(y_zero_point))
    a.qc, a.W, a.R = qc.ctypes.data, W.ctypes.data, R.ctypes.data
    return Packed(D, G, I, H, W, R, qc, a)


_helper: dict = {"pool": None}
_helper_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _helper_lock:
        if _helper["pool"] is None:
            _helper["pool"] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusedrnn-quark")
        return _helper["pool"]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _helper.update(pool=None))  # its thread did not survive the fork


def _run_claimed(lib, calls: list) -> None:
    """Run every call, the caller and one helper thread each claiming the next unclaimed one: a helper that is
    late (its core busy) leaves the work to the caller, which then waits only for calls the helper has started."""
    lock, state = threading.Lock(), {"next": 0}
    done = [threading.Event() for _ in calls]

    def claim() -> None:
        while True:
            with lock:
                i = state["next"]
                if i >= len(calls):
                    return
                state["next"] = i + 1
            try:
                lib.quark_run(ctypes.byref(calls[i]))
            finally:
                done[i].set()

    def helper() -> None:
        driver.leave_cpu(cpu)  # off the caller's CPU, where the scheduler tends to wake it
        claim()

    cpu = driver.current_cpu()
    _pool().submit(helper)
    claim()
    for e in done:
        e.wait()


def run(lib, pk: Packed, x16: np.ndarray, h0: np.ndarray, c0: np.ndarray, *, dequantize: bool):
    """The recurrence in C: x16 [T, B, I] int16-domain int16, h0 [D, B, H] int16-domain, c0 float32 [D, B, H].
    Returns (Y's uint16 codes [T, D, B, H], h int16 [D, B, H], c float32 [D, B, H], Y float32 or None)."""
    T, B, I = x16.shape  # noqa: E741
    D, G, H = pk.D, pk.G, pk.H
    a = pk.args
    Ip, Hp, Gp = a.Ip, a.Hp, a.Gp
    ts = max(1, min(T, X_BLOCK_ROWS // B))
    if Ip == I and x16.dtype == np.int16 and x16.flags.c_contiguous:
        x = x16
    else:
        x = np.zeros((T, B, Ip), np.int16)
        x[..., :I] = x16
    if Hp == H:
        h = np.array(h0, dtype=np.int16, order="C")
    else:
        h = np.zeros((D, B, Hp), np.int16)
        h[..., :H] = h0
    c = np.array(c0, dtype=np.float32, order="C")
    y = np.empty((T, D, B, H), np.uint16)
    yf = np.empty((T, D, B, H), np.float32) if dequantize else None
    accx = np.empty((D, ts, B, Gp), np.int64)
    # a batch-1 call of both directions runs them on two threads (larger batches are split by rows, RowSplitter)
    split = D == 2 and B == 1 and driver.call_threads() >= 2 and T * G * (I + H) * D >= SPLIT_MIN_MACS
    calls, keep = [], []
    for d0, d1 in ([(0, 1), (1, 2)] if split else [(0, D)]):
        acc = np.empty((B, Gp), np.int64)
        gf = np.empty(2 * G + 2 * H, np.float32)
        hn = np.empty((B, H), np.int16)
        hs = np.empty((2, B, Hp), np.int16)
        xs = np.empty((2, T, B, Ip), np.int16)
        keep.append((acc, gf, hn, hs, xs))
        call = QuarkArgs.from_buffer_copy(a)
        call.T, call.B, call.ts, call.d0, call.d1 = T, B, ts, d0, d1
        call.x, call.h, call.c, call.y = x.ctypes.data, h.ctypes.data, c.ctypes.data, y.ctypes.data
        call.yf = None if yf is None else yf.ctypes.data
        call.acc, call.accx, call.gf, call.hn = acc.ctypes.data, accx.ctypes.data, gf.ctypes.data, hn.ctypes.data
        call.hs, call.xh, call.xl = hs.ctypes.data, xs[0].ctypes.data, xs[1].ctypes.data
        calls.append(call)
    if split:
        _run_claimed(lib, calls)
    else:
        lib.quark_run(ctypes.byref(calls[0]))
    return y, h[..., :H], c, yf
