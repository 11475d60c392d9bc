"""The compiled 8x8_16 LSTM time loop (``_kernel.c``): loading, the ctypes argument structure, and the driver
behind ``IntegerLstmKernel.run(engine="compiled")``.

The library is the ``litert`` one of :mod:`fusedrnn._native` (built when the package was installed, the variant for
this CPU; the engine setting, ``$FUSEDRNN_ENGINE``, says which loop runs). When it is unavailable, :func:`load`
returns None and the kernel keeps its NumPy loop. The input products of each chunk of steps come
from one exact float GEMM (:meth:`IntMatrix.matmul_float`); every table and constant is the NumPy kernel's own, so
the C code only re-does the per-step integer arithmetic (same results to the bit: tests/test_litert_compiled.py).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ... import _native
from ...cells.compiled import _build
from .slots import PROJECTION_WEIGHTS

ABI = 3
CHUNK_VALUES = 1 << 18  # input products per chunk of steps (1 MiB of float32)

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64


class LstmArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("B", "I", "H", "Hp", "G", "cifg", "ln", "proj", "single", "nb", "sh_ig",
                                   "qcell_clip", "qproj_clip", "zp_hid", "zp_h", "in_f64", "in_ld", "Kr", "Nr",
                                   "Kp", "Np")] + [
        ("col", I32 * 4), ("has_p", I32 * 4), ("p_q", I64 * 4), ("p_s", I64 * 4), ("ln_q", I64 * 4),
        ("ln_s", I64 * 4), ("ln_guard", I64 * 4), ("hid_q", I64), ("hid_s", I64), ("proj_q", I64),
        ("proj_s", I64), ("in_req", P), ("rec_req", P), ("in_bias", P), ("rec_bias", P),
        ("R", P), ("Wp", P), ("proj_bias", P), ("P", P * 4), ("L", P * 4), ("Lb", P * 4), ("sig", P),
        ("tanh3", P), ("tanhc", P), ("h", P), ("c", P), ("gate", P), ("m", P), ("acc", P)]


def _bind(lib) -> None:
    lib.litert_lstm.argtypes = [ctypes.POINTER(LstmArgs), P, P, I32, I32, I32]
    lib.litert_lstm.restype = ctypes.c_int


_LOOP = _build.CompiledLoop("LiteRT", _native.Library("litert", ABI, _bind))
# the module-level API of this target's compiled loop (load, engine choice, library for an engine)
load, unavailable_reason = _LOOP.load, _LOOP.unavailable_reason
default_engine, use_engine, library = _LOOP.default_engine, _LOOP.use_engine, _LOOP.library


# ---- the prepared constants of one kernel ----------------------------------------------------------------------
def _req_cols(req, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-column (Q, shift) int64 arrays of a :class:`._arith.Requant` broadcast to n columns."""
    q = np.broadcast_to(req.Q, (n,))
    if req.rounding == "single":
        s = 31 - np.broadcast_to(req.total, (n,))
    else:
        left = 0 if req.left is None else np.broadcast_to(req.left, (n,))
        s = left - np.broadcast_to(req.right, (n,))
    return np.ascontiguousarray(q, np.int64), np.ascontiguousarray(s, np.int64)


class PlanUnsupported(Exception):
    """A kernel whose constants the compiled loop cannot take (its NumPy loop runs it)."""


def _req_table(req, G: int, H: int) -> np.ndarray:
    """int64 [5, G] of the C ``preact``, one column per gate block (the constants are per gate): Q, left shift
    (single rounding: the shift), right shift, its nudge and [right > 0]. The double-rounding form skips SRDHM's
    INT32_MIN·INT32_MIN case, impossible for Q > 0."""
    q, s = _req_cols(req, G * H)
    q, s = q.reshape(G, H), s.reshape(G, H)
    if (q != q[:, :1]).any() or (s != s[:, :1]).any() or (req.rounding != "single" and (q <= 0).any()):
        raise PlanUnsupported("the compiled requantization needs one positive multiplier per gate (an effective "
                              "multiplier underflowed to 0, or differs within a gate)")
    q, s = q[:, 0], s[:, 0]
    right = np.maximum(-s, 0)
    left = s if req.rounding == "single" else np.maximum(s, 0)
    nudge = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
    return np.ascontiguousarray(np.stack([q, left, right, nudge, (right > 0).astype(np.int64)]), np.int64)


def _pairs(w: np.ndarray, n_pad: int) -> np.ndarray:
    """Integer matrix [K, N] -> int16 [ceil(K/2), n_pad, 2] (rows k in pairs, zero padded) for the C ``gemv``."""
    K, N = w.shape
    p = np.zeros((K + (K & 1), n_pad), np.int16)
    p[:K, :N] = w
    return np.ascontiguousarray(p.reshape(-1, 2, n_pad).transpose(0, 2, 1))


def _scalar_req(req) -> tuple[int, int]:
    q, s = _req_cols(req, 1)
    return int(q[0]), int(s[0])


def _round64(n: int) -> int:
    return -(-n // 64) * 64


def _table(lut: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(lut, np.int32)


class Plan:
    """Everything the C loop reads, prepared once per kernel (weights as int16, per-column requantization)."""

    def __init__(self, k):
        H, Hp, G = k.n_cell, k.n_output, k.G
        GH = G * H
        self.keep = []
        a = self.args = LstmArgs()
        a.I, a.H, a.Hp, a.G = k.n_input, H, Hp, G
        a.cifg, a.ln, a.proj, a.single = int(k.cifg), int(k.ln), int(k.proj), int(k.rounding == "single")
        a.sh_ig, a.qcell_clip, a.qproj_clip = 30 + k.cell_scale, k.qcell_clip, k.qproj_clip
        a.zp_hid, a.zp_h = int(k.zp_hid), int(k.zp_h)
        for g in range(4):
            a.col[g] = k.gates.index(g) if g in k.gates else -1
        a.in_req, a.rec_req = self._ptr(_req_table(k.in_req, G, H)), self._ptr(_req_table(k.rec_req, G, H))
        a.in_bias, a.rec_bias = self._ptr(np.asarray(k.in_bias, np.int64)), self._ptr(np.asarray(k.rec_bias, np.int64))
        a.Kr, a.Nr, a.Kp, a.Np = Hp + (Hp & 1), _round64(GH), H + (H & 1), _round64(Hp)
        a.R = self._ptr(_pairs(k._rec_cols, a.Nr))
        for g, (Pw, req) in k.P.items():
            a.has_p[g] = 1
            a.P[g] = self._ptr(np.asarray(Pw, np.int64))
            a.p_q[g], a.p_s[g] = _scalar_req(req)
        for g, (L, bias, req, guard) in k.ln_params.items():
            a.L[g], a.Lb[g] = self._ptr(np.asarray(L, np.int64)), self._ptr(np.asarray(bias, np.int64))
            a.ln_q[g], a.ln_s[g] = _scalar_req(req)
            a.ln_guard[g] = int(guard)
        a.hid_q, a.hid_s = _scalar_req(k.hid_req)
        if k.proj:
            a.proj_q, a.proj_s = _scalar_req(k.proj_req)
            a.Wp = self._ptr(_pairs(np.asarray(k.t[PROJECTION_WEIGHTS].data).T, a.Np))
            a.proj_bias = self._ptr(np.asarray(k.proj_bias, np.int64))
        a.sig, a.tanh3, a.tanhc = (self._ptr(_table(k.sig)), self._ptr(_table(k.tanh3)),
                                   self._ptr(_table(k.tanh_c)))
        a.in_f64 = int(k.W.dtype == np.float64)

    def _ptr(self, arr: np.ndarray) -> int:
        arr = np.ascontiguousarray(arr)
        self.keep.append(arr)
        return arr.ctypes.data

    def call_args(self, B: int, time_major: bool) -> tuple[LstmArgs, dict]:
        """A copy of the arguments with fresh state and scratch buffers for a call with batch B (so concurrent
        calls on one kernel do not share buffers)."""
        a, H = LstmArgs.from_buffer_copy(self.args), self.args.H
        bufs = {"h": np.zeros((B, a.Kr), np.int16), "c": np.empty((B, H), np.int32),
                "gate": np.empty((B, a.G * H), np.int32), "m": np.zeros((B, a.Kp), np.int16),
                "acc": np.empty((B, max(a.Nr, a.Np)), np.int32)}
        a.B, a.nb = B, (B if time_major else 1)
        a.h, a.c, a.gate, a.m, a.acc = (bufs[n].ctypes.data for n in ("h", "c", "gate", "m", "acc"))
        return a, bufs


def run(lib, k, x: np.ndarray, state, reverse: bool):
    """The compiled time loop of :meth:`IntegerLstmKernel.run` (same arguments and results), or None when the
    kernel's constants are outside what the loop takes (the reason is kept in ``k._cplan_reason``)."""
    plan = getattr(k, "_cplan", None)
    if plan is None:
        try:
            plan = k._cplan = Plan(k)
        except PlanUnsupported as exc:
            plan = k._cplan = False
            k._cplan_reason = str(exc)
    if plan is False:
        return None
    T, B, I = x.shape
    a, bufs = plan.call_args(B, k.opts.time_major)
    h0, c0 = state
    bufs["h"][:, :k.n_output] = np.asarray(h0)
    bufs["c"][...] = np.asarray(c0)
    GH = k.G * k.n_cell
    y = np.empty((T, B, k.n_output), np.int8)
    xf = np.ascontiguousarray(x, np.int8).reshape(T * B, I)
    step = max(1, min(T, CHUNK_VALUES // max(1, B * GH)))
    fbuf = np.empty((step * B, GH), k.W.dtype)
    a.in_ld = GH
    args = ctypes.byref(a)
    starts = range(0, T, step)
    for t0 in (reversed(starts) if reverse else starts):
        t1 = min(T, t0 + step)
        prod = fbuf[:(t1 - t0) * B]
        k.W.matmul_float(xf[t0 * B:t1 * B], out=prod, check=False)
        lib.litert_lstm(args, prod.ctypes.data, y.ctypes.data, t0, t1, int(reverse))
    return y, (bufs["h"][:, :k.n_output].astype(np.int8), bufs["c"].astype(np.int16))
