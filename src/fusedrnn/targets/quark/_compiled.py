"""The compiled ExtendedLSTM recurrence (``_kernel.c``): build at first use, ctypes structure, and the driver
:func:`run` that :func:`.kernel.run_kernel` calls instead of its NumPy loop.

The library is compiled with the machine's C compiler into the cache directory of
:mod:`fusedrnn.cells.compiled._build` (same compiler search, flags, CPU key and ``FUSEDRNN_COMPILED=0`` switch),
under its own file name, with ``-ffp-contract=off`` (float32 tanhf must not be fused into FMAs) and ``-fwrapv``
(int64 wrap-around as in NumPy). When no compiler is found or compilation fails, :func:`load` returns None and
the NumPy loop runs. The kernel parameters and the per-sequence input sums come from the NumPy code; the C code
re-does exactly the per-step arithmetic of the NumPy loop (tests/test_quark_compiled.py checks ``==``).
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from ...cells.compiled import _build
from .fixed import c_one_shl

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_kernel.c"
ABI = 4
X_BLOCK_ROWS = 64  # rows (time steps x batch) of each input-projection GEMM in the loop
EXTRA_FLAGS = ("-ffp-contract=off", "-fwrapv", "-fno-fast-math", "-fno-trapping-math")

_lock = threading.Lock()
_state: dict = {"tried": False, "lib": None, "reason": None}

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64


class Srs(ctypes.Structure):
    _fields_ = [("shift", I64), ("half", I64), ("delta", I64), ("sat", I64)]


class QuarkArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("T", "B", "I", "H", "G", "D", "Ip", "Hp", "Gp", "faithful", "rev0", "rev1",
                                   "has_qb", "pad")] + [
        (n, I64) for n in ("qx", "qh", "qb", "ohs", "ohz", "ohz_term")] + [
        (n, Srs) for n in ("xw", "xwq", "hr", "hrq", "hss", "oh")] + [
        (n, P) for n in ("x", "xs", "qc", "Wh", "Wl", "Rh", "Rl", "h", "c", "y", "acc", "accx", "gf")] + [
        ("ts", I32), ("xlo", I32 * 2)]


def _bind(lib) -> None:
    lib.quark_run.argtypes = [ctypes.POINTER(QuarkArgs)]
    lib.quark_run.restype = ctypes.c_int
    lib.quark_tanhf_array.argtypes = [P, P, I64]
    lib.quark_tanhf_array.restype = None
    lib.quark_tanhf_vec.argtypes = [P, P, I64]
    lib.quark_tanhf_vec.restype = None


_LIBRARY = _build.KernelLibrary(SOURCE, "quark", "quark_abi_version", ABI, _bind, extra_flags=EXTRA_FLAGS)


def load():
    """The kernel library (compiled or loaded from the cache on the first call), or None."""
    return _LIBRARY.load()


def unavailable_reason() -> str | None:
    """Why :func:`load` returned None (None when loaded or not tried yet)."""
    return _LIBRARY.reason


_ENGINE = _build.EngineChoice()


def default_engine() -> str:
    """What the kernel runs: "auto" (compiled when available), or what :func:`use_engine` set."""
    return _ENGINE.default


def use_engine(engine: str):
    """Make the kernel run ``engine`` ("auto", "numpy" or "compiled") inside the block (tests, benchmarks;
    process-wide, not thread-safe)."""
    return _ENGINE.use(engine)


def tanhf_array(x: np.ndarray) -> np.ndarray:
    """The C kernel's tanhf on a float32 array (for tests)."""
    lib = load()
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    lib.quark_tanhf_vec(x.ctypes.data, out.ctypes.data, x.size)
    return out


def tanhf_scalar(x: np.ndarray) -> np.ndarray:
    """The C kernel's scalar (branching) tanhf on a float32 array (for tests)."""
    lib = load()
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    lib.quark_tanhf_array(x.ctypes.data, out.ctypes.data, x.size)
    return out


# ---- driver -------------------------------------------------------------------------------------------------
def _even(k: int) -> int:
    return k + (k & 1)


def _pack(w: np.ndarray, gp: int) -> tuple[np.ndarray, np.ndarray]:
    """int16-domain weights [D, G, K] -> high and low bytes (w = 256 hi + lo, lo in [0, 255]) as int16 panels
    [D, Gp / 16, Kp / 2, 16, 2] (zero padded; the layout of the kernel's ``gemm``)."""
    D, G, K = w.shape
    w = np.asarray(w, dtype=np.int64)
    out = []
    for part in (w >> 8, w & 255):
        p = np.zeros((D, _even(K), gp), np.int16)
        p[:, :K, :G] = np.swapaxes(part, 1, 2)
        out.append(np.ascontiguousarray(p.reshape(D, -1, 2, gp // 16, 16).transpose(0, 3, 1, 4, 2)))
    return out[0], out[1]


def _srs(shift: int, faithful: bool, sat: bool) -> Srs:
    half = 0 if shift == 0 else (c_one_shl(shift - 1) if faithful else 1 << (shift - 1))
    delta = half - ((1 << shift) - 1 - half)
    return Srs(shift, half, delta, int(sat))


def run(lib, xq, wq, rq, p, xs, h0, c0, *, reverse, faithful):
    """The recurrence in C: xq [T, B, I], wq [D, 4H, I], rq [D, 4H, H] int16-domain; xs [D, T, B] int64 (the
    x-sum term in processing order); h0 int16 [D, B, H], c0 float32 [D, B, H]. Returns (y int16 [T, D, B, H],
    h int16 [D, B, H], c float32 [D, B, H])."""
    T, B, I = xq.shape  # noqa: E741
    D, G, _ = wq.shape
    H = G // 4
    Ip, Hp, Gp = _even(I), _even(H), -(-G // 16) * 16
    ts = max(1, min(T, X_BLOCK_ROWS // B))
    x = np.zeros((T, B, Ip), np.int16)
    x[..., :I] = xq
    Wh, Wl = _pack(wq, Gp)
    Rh, Rl = _pack(rq, Gp)
    h = np.zeros((D, B, Hp), np.int16)
    h[..., :H] = h0
    c = np.ascontiguousarray(c0, dtype=np.float32).copy()
    y = np.empty((T, D, B, H), np.int16)
    acc, accx = np.empty((B, Gp), np.int64), np.empty((D, ts, B, Gp), np.int64)
    gf = np.empty(2 * G + 2 * H, np.float32)
    xs = np.ascontiguousarray(xs, dtype=np.int64)
    qc = np.ascontiguousarray(p.qc, dtype=np.int64)
    rev = tuple(bool(r) for r in reverse) + (False,)
    ohz_term = (p.ohz << p.oh) if faithful else 0
    a = QuarkArgs(T, B, I, H, G, D, Ip, Hp, Gp, int(faithful), int(rev[0]), int(rev[1]), int(p.qb != 0), 0,
                  p.qx, p.qh, p.qb, p.ohs, p.ohz, ohz_term,
                  _srs(p.xw, faithful, faithful), _srs(p.xwq, faithful, faithful), _srs(p.hr, faithful, faithful),
                  _srs(p.hrq, faithful, faithful), _srs(p.hss, faithful, faithful), _srs(p.oh, faithful, False),
                  x.ctypes.data, xs.ctypes.data, qc.ctypes.data, Wh.ctypes.data, Wl.ctypes.data, Rh.ctypes.data,
                  Rl.ctypes.data, h.ctypes.data, c.ctypes.data, y.ctypes.data, acc.ctypes.data, accx.ctypes.data,
                  gf.ctypes.data, ts)
    lib.quark_run(ctypes.byref(a))
    return y, h[..., :H], c
