"""The compiled 8x8_16 LSTM time loop (``_kernel.c``): loading, the ctypes argument structure, and the driver
behind ``IntegerLstmKernel.run(engine="compiled")``.

The library is the ``litert`` one of :mod:`fusedrnn._native` (built when the package was installed, the variant for
this CPU; the engine setting, ``$FUSEDRNN_ENGINE``, says which loop runs). When it is unavailable, :func:`load`
returns None and the kernel keeps its NumPy loop. Every table and constant is the NumPy kernel's own; the C code
re-does the per-step integer arithmetic, input and recurrent products included, in int32 (int8 products summed
modulo 2^32 as the C++ accumulators are), so results are the same to the bit (tests/test_litert_compiled.py).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ... import _native
from ...cells.compiled import _build
from ..int8_dot import in_int8, quad_offsets, row_groups
from .slots import PROJECTION_WEIGHTS

ABI = 6

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64


class Mat(ctypes.Structure):
    """A weight matrix in the layouts of the C ``dots`` (see :func:`_mat`)."""
    _fields_ = [("w16", P), ("w8", P), ("off", P)]


class LstmArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("B", "I", "H", "Hp", "G", "cifg", "ln", "proj", "single", "nb", "sh_ig",
                                   "qcell_clip", "qproj_clip", "zp_hid", "zp_h", "Ki", "Ni", "Kr", "Nr",
                                   "Kp", "Np")] + [
        ("col", I32 * 4), ("has_p", I32 * 4), ("p_q", I64 * 4), ("p_s", I64 * 4), ("ln_q", I64 * 4),
        ("ln_s", I64 * 4), ("ln_guard", I64 * 4), ("hid_q", I64), ("hid_s", I64), ("proj_q", I64),
        ("proj_s", I64), ("in_req", P), ("rec_req", P), ("in_bias", P), ("rec_bias", P),
        ("W", Mat), ("R", Mat), ("Wp", Mat), ("proj_bias", P), ("P", P * 4), ("L", P * 4), ("Lb", P * 4), ("sig", P),
        ("tanh3", P), ("tanhc", P), ("h", P), ("c", P), ("gate", P), ("m", P), ("acc", P), ("acc_in", P),
        ("xs", P), ("xu", P), ("gin", P), ("ts", I32), ("pad_ts", I32)]


def _bind(lib) -> None:
    lib.litert_lstm.argtypes = [ctypes.POINTER(LstmArgs), P, P, I32, I32, I32]
    lib.litert_lstm.restype = ctypes.c_int
    lib.litert_quantize_i8.argtypes = [P, I64, ctypes.c_double, I32, P]
    lib.litert_quantize_i8.restype = ctypes.c_int
    lib.litert_lookup_f32.argtypes = [P, I64, I64, P, P, I64]
    lib.litert_lookup_f32.restype = None


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
    if (q != q[:, :1]).any() or (s != s[:, :1]).any() or (req.rounding != "single" and (q <= 0).any()) \
            or (np.abs(q) >= 1 << 31).any():
        raise PlanUnsupported("the compiled requantization needs one positive multiplier below 2^31 per gate (an "
                              "effective multiplier underflowed to 0, or differs within a gate)")
    q, s = q[:, 0], s[:, 0]
    right = np.maximum(-s, 0)
    left = s if req.rounding == "single" else np.maximum(s, 0)
    nudge = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
    return np.ascontiguousarray(np.stack([q, left, right, nudge, (right > 0).astype(np.int64)]), np.int64)


def _mat(plan, w: np.ndarray, n_pad: int) -> Mat:
    """int8 matrix [K, N] in the layouts of the C ``dots``: int16 pairs of rows (vpmaddwd), int8 quads of rows
    (vpdpbusd) and off[j] = -128 * sum_k w[k, j], the start of the accumulators that undoes the +128 offset of the
    unsigned operand (see _kernel.c)."""
    w = np.asarray(w)
    if not in_int8(w):
        raise PlanUnsupported("the compiled loop takes weights in the int8 range")
    return Mat(plan._ptr(row_groups(w, n_pad, 2, np.int16)), plan._ptr(row_groups(w, n_pad, 4, np.int8)),
               plan._ptr(quad_offsets(w, n_pad)))  # |off| <= 128 * 128 * K < 2^31 (K < 2^17: checked)


def _scalar_req(req) -> tuple[int, int]:
    q, s = _req_cols(req, 1)
    return int(q[0]), int(s[0])


def _round64(n: int) -> int:
    return -(-n // 64) * 64


def _table(lut: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(lut, np.int32)


INPUT_BLOCK_ROWS = 256
"""Rows (steps x batch) of one block of input terms: the loop computes x W and its requantization for that many
rows at once, before their steps."""


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
        I = k.n_input  # noqa: E741
        if max(I, Hp, H) >= 1 << 17:
            raise PlanUnsupported("the compiled loop takes at most 2^17 - 1 inputs, cells and outputs")
        a.Ki, a.Ni, a.Kr, a.Nr, a.Kp, a.Np = I + (I & 1), _round64(GH), Hp + (Hp & 1), _round64(GH), H + (H & 1), \
            _round64(Hp)
        a.W = _mat(self, k.W.b, a.Ni)
        a.R = _mat(self, k._rec_cols, a.Nr)
        for g, (Pw, req) in k.P.items():
            a.has_p[g] = 1
            a.P[g] = self._ptr(np.asarray(Pw, np.int64))
            a.p_q[g], a.p_s[g] = _scalar_req(req)
        for g, (L, bias, req, guard) in k.ln_params.items():
            a.L[g], a.Lb[g] = self._ptr(np.asarray(L, np.int64)), self._ptr(np.asarray(bias, np.int64))
            a.ln_q[g], a.ln_s[g] = _scalar_req(req)
            a.ln_guard[g] = int(guard)
        a.hid_q, a.hid_s = _scalar_req(k.hid_req)
        if not (0 <= a.sh_ig <= 31 and -(1 << 31) < a.hid_q < 1 << 31):
            raise PlanUnsupported("the compiled loop takes cell scales 2^-30..2^1 and int32 hidden multipliers")
        if k.proj:
            a.proj_q, a.proj_s = _scalar_req(k.proj_req)
            a.Wp = _mat(self, np.asarray(k.t[PROJECTION_WEIGHTS].data).T, a.Np)
            a.proj_bias = self._ptr(np.asarray(k.proj_bias, np.int64))
        a.sig, a.tanh3, a.tanhc = (self._ptr(_table(k.sig)), self._ptr(_table(k.tanh3)),
                                   self._ptr(_table(k.tanh_c)))

    def _ptr(self, arr: np.ndarray) -> int:
        arr = np.ascontiguousarray(arr)
        self.keep.append(arr)
        return arr.ctypes.data

    def call_args(self, T: int, B: int, time_major: bool) -> tuple[LstmArgs, dict]:
        """A copy of the arguments with fresh state and scratch buffers for a call of T steps with batch B (so
        concurrent calls on one kernel do not share buffers)."""
        a, H = LstmArgs.from_buffer_copy(self.args), self.args.H
        k4 = -(-max(a.Ki, a.Kr, a.Kp) // 4) * 4
        ts = max(1, min(T, INPUT_BLOCK_ROWS // max(B, 1)))
        bufs = {"h": np.zeros((B, a.Kr), np.int16), "c": np.empty((B, H), np.int32),
                "gate": np.empty((B, a.G * H), np.int32), "m": np.zeros((B, a.Kp), np.int16),
                "acc": np.empty((B, max(a.Nr, a.Np)), np.int32), "acc_in": np.empty((ts * B, a.Ni), np.int32),
                "xs": np.zeros((ts * B, a.Ki), np.int16), "xu": np.empty((ts * B, k4), np.uint8),
                "gin": np.empty((ts * B, a.G * H), np.int32)}
        a.B, a.nb, a.ts = B, (B if time_major else 1), ts
        a.h, a.c, a.gate, a.m, a.acc, a.acc_in, a.xs, a.xu, a.gin = (bufs[n].ctypes.data for n in (
            "h", "c", "gate", "m", "acc", "acc_in", "xs", "xu", "gin"))
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
    T, B, _ = x.shape
    a, bufs = plan.call_args(T, B, k.opts.time_major)
    h0, c0 = state
    bufs["h"][:, :k.n_output] = np.asarray(h0)
    bufs["c"][...] = np.asarray(c0)
    y = np.empty((T, B, k.n_output), np.int8)
    x8 = np.ascontiguousarray(x, np.int8)
    lib.litert_lstm(ctypes.byref(a), x8.ctypes.data, y.ctypes.data, 0, T, int(reverse))
    return y, (bufs["h"][:, :k.n_output].astype(np.int8), bufs["c"].astype(np.int16))


def quantize_i8(lib, x: np.ndarray, scale: float, zp: int) -> np.ndarray | None:
    """:func:`fusedrnn.targets.tflite_quant.quantize_values` of float32 ``x`` to int8 in the compiled library (the
    same values), or None where it does not take the call (not float32, or a value not finite)."""
    if lib is None or x.dtype != np.float32:
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, np.int8)
    if lib.litert_quantize_i8(x.ctypes.data, x.size, float(scale), int(zp), out.ctypes.data) != 0:
        return None
    return out


def lookup_f32(lib, y: np.ndarray, lut: np.ndarray, out: np.ndarray) -> bool:
    """``out[...] = lut[y + 128]`` for int8 ``y`` [T, ...] and float32 ``out`` of the same shape whose rows (first
    axis) are contiguous blocks (a direction's slice of Y); False (nothing written) where it does not apply."""
    if lib is None or out.dtype != np.float32 or lut.dtype != np.float32 or out.shape != y.shape or not out.size:
        return False
    rows, n = y.shape[0], y.size // y.shape[0]
    inner = out[0] if out.ndim > 1 else out
    if not (inner.flags.c_contiguous and (rows == 1 or out.strides[0] % 4 == 0)):
        return False
    y = np.ascontiguousarray(y)
    lib.litert_lookup_f32(y.ctypes.data, rows, n, np.ascontiguousarray(lut).ctypes.data, out.ctypes.data,
                          out.strides[0] // 4 if rows > 1 else n)
    return True
