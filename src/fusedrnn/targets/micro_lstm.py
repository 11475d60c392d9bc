"""The compiled time loop of the microcontroller integer LSTMs (``_micro_lstm.c``): TFLM's reference kernel
(:mod:`fusedrnn.targets.tflm.kernel`, int8x16 and int16x8) and CMSIS-NN's ``arm_lstm_unidirectional_s8`` / ``_s16``
(:mod:`fusedrnn.targets.cmsis_nn.kernel`) take the same step up to four switches, so one loop runs both.

Each kernel describes itself once as a :class:`MicroLstmSpec` (its weights, biases, requantizations, the tables of
its activations over every int16 input, its ranges); :class:`Plan` checks that the loop computes exactly what the
NumPy loop does for those constants (else :class:`PlanUnsupported`, and the NumPy loop runs) and packs the weights.
The library is the ``micro`` one of :mod:`fusedrnn._native`; the engine setting (``$FUSEDRNN_ENGINE``) says which
loop runs. Results are the NumPy loops' to the bit (tests/test_micro_lstm.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .. import _native
from ..cells.compiled import _build
from ..numerics.int_matmul import scan_absmax
from . import scratch
from .int8_dot import in_int8, quad_offsets, row_groups

ABI = 1
INPUT_BLOCK_ROWS = 256
"""Rows (steps x batch) of one block of input terms, computed before their steps."""

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64
FC_KINDS = {"mbqm": 0, "mbqm64": 1, "requantize_s64": 2}
"""The FC requantization of each kernel (see _micro_lstm.c): TFLite's MBQM of the int32 sum, its int64 form (TFLM
16x8), CMSIS-NN's ``arm_nn_requantize_s64`` (s16)."""


class MicroArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("T", "B", "I", "H", "wide", "fc_kind", "sat_rec", "sat_ig", "first_rec", "zp_h",
                                   "act_lo", "act_hi", "c_lo1", "c_hi1", "c_lo2", "c_hi2", "Ki", "Kh", "N", "ts")] + [
        ("in_q", I64 * 4), ("in_s", I64 * 4), ("rec_q", I64 * 4), ("rec_s", I64 * 4)] + [
        (n, I64) for n in ("fc_q", "fc_s", "ic_q", "ic_s", "hid_q", "hid_s")] + [
        (n, P) for n in ("in_bias", "rec_bias", "Wp", "Rp", "W8", "R8", "Woff", "Roff")] + [
        ("tab", P * 4), ("tanh_c", P), ("h", P), ("c", P), ("xs", P), ("xu", P), ("acc32", P), ("acc64", P),
        ("gin", P), ("pre", P)]


def _bind(lib) -> None:
    lib.micro_lstm.argtypes = [ctypes.POINTER(MicroArgs), P, P, I32]
    lib.micro_lstm.restype = ctypes.c_int
    lib.micro_requant.argtypes = [I32, I64, I64, I64]
    lib.micro_requant.restype = I64


_LOOP = _build.CompiledLoop("TFLM / CMSIS-NN", _native.Library("micro", ABI, _bind))
load, unavailable_reason = _LOOP.load, _LOOP.unavailable_reason
default_engine, use_engine, library = _LOOP.default_engine, _LOOP.use_engine, _LOOP.library


@dataclass(frozen=True)
class MicroLstmSpec:
    """One prepared direction, as the loop reads it. Gate blocks in the order i, f, c, o (H columns each).

    ``W`` int [I, 4H] and ``R`` int [H, 4H] (int8 values), ``in_bias`` / ``rec_bias`` int [4H] (zero points folded
    in); ``in_req`` / ``rec_req``: per gate block (Q, shift) of the ``fc_kind`` requantization (a key of
    :data:`FC_KINDS`); ``fc_req`` / ``ic_req`` / ``hid_req``: (Q, shift) of the MBQMs of f·c, i·g and tanh(c)·o;
    ``tables``: the activation of each gate block over every int16 input (int [65536], input + 32768 indexes it),
    ``tanh_c`` the cell's; ``sat_rec`` / ``sat_ig``: the recurrent FC output and the i·g term saturated to int16
    (TFLM) or not (CMSIS-NN); the cell clamped to ``cell_ranges[0]`` then ``[1]``; the hidden output offset by
    ``zp_h`` and clamped to ``act_range``; ``wide``: int16 activations."""

    wide: bool
    fc_kind: str
    sat_rec: bool
    sat_ig: bool
    W: np.ndarray
    R: np.ndarray
    in_bias: np.ndarray
    rec_bias: np.ndarray
    in_req: tuple
    rec_req: tuple
    fc_req: tuple
    ic_req: tuple
    hid_req: tuple
    tables: tuple
    tanh_c: np.ndarray
    zp_h: int
    act_range: tuple
    cell_ranges: tuple


class PlanUnsupported(Exception):
    """Constants the compiled loop does not reproduce exactly (the NumPy loop runs the kernel)."""


def _int(v, lo: int, hi: int, what: str) -> int:
    v = int(v)
    if not lo <= v <= hi:
        raise PlanUnsupported(f"{what} {v} outside [{lo}, {hi}]")
    return v


class Plan:
    """A :class:`MicroLstmSpec` checked and packed for the C loop (made once per kernel)."""

    def __init__(self, s: MicroLstmSpec):
        W, R = np.asarray(s.W), np.asarray(s.R)
        I, G4 = W.shape  # noqa: E741
        H = G4 // 4
        if G4 != 4 * H or R.shape != (H, G4) or max(I, H) >= 1 << 16 or min(I, H) == 0:
            raise PlanUnsupported(f"weights [{I}, {G4}] / {R.shape}")
        for name, m in (("W", W), ("R", R)):
            if not in_int8(m):
                raise PlanUnsupported(f"{name}: weights outside int8")
        kind = FC_KINDS[s.fc_kind]
        amax = 32768 if s.wide else 128
        biases = [np.asarray(b, np.int64).reshape(G4) for b in (s.in_bias, s.rec_bias)]
        a = self.args = MicroArgs()
        a.H, a.I, a.wide, a.fc_kind, a.sat_rec, a.sat_ig = H, I, int(s.wide), kind, int(s.sat_rec), int(s.sat_ig)
        for k, (req, bias, K) in enumerate(((s.in_req, biases[0], I), (s.rec_req, biases[1], H))):
            qs, ss = (a.in_q, a.in_s) if k == 0 else (a.rec_q, a.rec_s)
            bound = K * amax * 128 + scan_absmax(bias)  # |sum + bias|
            if kind == 0 and bound >= 1 << 62:
                raise PlanUnsupported("FC bias beyond int64 sums")
            if kind != 0 and bound >= 1 << 47:
                raise PlanUnsupported("FC sums beyond the int64 requantization's 2^47")
            for g in range(4):
                q, sh = req[g]
                if kind == 0:
                    qs[g], ss[g] = _int(q, -(1 << 31), (1 << 31) - 1, "multiplier"), _int(sh, -62, 62, "shift")
                elif kind == 1:
                    qs[g], ss[g] = _int(q, 0, (1 << 31) - 1, "multiplier"), _int(sh, -47, 14, "shift")
                else:
                    qs[g], ss[g] = _int(q, 0, 1 << 15, "reduced multiplier"), _int(sh, -49, 14, "shift")
        for name, req in (("fc", s.fc_req), ("ic", s.ic_req), ("hid", s.hid_req)):
            setattr(a, f"{name}_q", _int(req[0], -(1 << 31), (1 << 31) - 1, "multiplier"))
            setattr(a, f"{name}_s", _int(req[1], -62, 62, "shift"))
        a.zp_h = _int(s.zp_h, -(1 << 31), (1 << 31) - 1, "zero point")
        a.act_lo, a.act_hi = (_int(v, -32768, 32767, "activation range") for v in s.act_range)
        (a.c_lo1, a.c_hi1), (a.c_lo2, a.c_hi2) = ((_int(v, -(1 << 31), (1 << 31) - 1, "cell range") for v in r)
                                                  for r in s.cell_ranges)
        # the cell must stay in int16 (its table index and the int32 products f·c): the two clamps keep it there
        for x in (-(1 << 40), 1 << 40, -32768, 32767):
            v = min(max(min(max(x, a.c_lo1), a.c_hi1), a.c_lo2), a.c_hi2)
            if not -32768 <= v <= 32767:
                raise PlanUnsupported("a cell clip beyond int16")
        a.Ki, a.Kh, a.N = I + (I & 1), H + (H & 1), -(-G4 // 16) * 16
        self.keep = []
        a.in_bias, a.rec_bias = self._ptr(biases[0]), self._ptr(biases[1])
        a.Wp, a.Rp = self._ptr(row_groups(W, a.N, 2, np.int16)), self._ptr(row_groups(R, a.N, 2, np.int16))
        if not s.wide:  # vpdpbusd quads and offsets (used where the build has VNNI; K < 2^16)
            for m, qn, on in ((W, "W8", "Woff"), (R, "R8", "Roff")):
                setattr(a, qn, self._ptr(row_groups(m, a.N, 4, np.int8)))
                setattr(a, on, self._ptr(quad_offsets(m, a.N)))
        tables = [np.asarray(t) for t in (*s.tables, s.tanh_c)]
        if any(t.shape != (65536,) or t.min() < -32768 or t.max() > 32767 for t in tables):
            raise PlanUnsupported("activation tables of 65536 int16 values expected")
        for g in range(4):
            a.tab[g] = self._ptr(tables[g].astype(np.int32))
        a.tanh_c = self._ptr(tables[4].astype(np.int32))

    def _ptr(self, arr: np.ndarray) -> int:
        arr = np.ascontiguousarray(arr)
        self.keep.append(arr)
        return arr.ctypes.data


def plan_of(kernel, engine: str = "auto") -> Plan | None:
    """The compiled loop's plan of ``kernel`` (an object with ``micro_spec()``, kept on it as ``_micro_plan``) when
    ``engine`` runs the compiled loop and it takes the kernel's constants; None: the NumPy loop (the reason is kept
    as ``kernel._micro_reason``). RuntimeError for ``engine="compiled"`` when the library is unavailable."""
    if library(engine) is None:
        return None
    plan = getattr(kernel, "_micro_plan", None)
    if plan is None:
        try:
            if min(kernel.I, kernel.H) == 0:
                raise PlanUnsupported("no inputs or no units")
            plan = Plan(kernel.micro_spec())
        except PlanUnsupported as exc:
            plan, kernel._micro_reason = False, str(exc)
        kernel._micro_plan = plan
    return plan or None


def _holds(a, dtype) -> bool:
    """Whether every value of ``a`` is a ``dtype`` value (the loop reads the codes in their own type)."""
    a = np.asarray(a)
    if a.dtype == dtype:
        return True
    if a.dtype.kind not in "iu":
        return False
    info = np.iinfo(dtype)
    return a.size == 0 or (info.min <= int(a.min()) and int(a.max()) <= info.max)


def run(lib, plan: Plan, x: np.ndarray, h0: np.ndarray | None, c0: np.ndarray, reverse: bool = False):
    """The loop over x [T, B, I] (T >= 1) (int8 / int16 activation codes) from h0 [B, H] (None: no recurrent term at the
    first step, CMSIS-NN's NULL hidden state) and the int16 cell c0 [B, H]; ``reverse`` walks time backwards (each
    output at its own time index). Returns (y [T, B, H], (h [B, H], c int16 [B, H])), y and h in the activation
    dtype: what the kernel's NumPy loop returns; None (nothing run) where x, h0 or c0 hold values outside their
    types."""
    a = MicroArgs.from_buffer_copy(plan.args)
    T, B, _ = x.shape
    H, dt = a.H, (np.int16 if a.wide else np.int8)
    if not (_holds(x, dt) and (h0 is None or _holds(h0, dt)) and _holds(c0, np.int16)):
        return None  # codes outside their type (a wider array): the NumPy loop uses them as given
    if h0 is not None:
        h0 = np.asarray(h0).reshape(B, H)
    ts = max(1, min(T, INPUT_BLOCK_ROWS // max(B, 1)))
    k4 = -(-max(a.Ki, a.Kh) // 4) * 4
    h = np.zeros((B, a.Kh), np.int16)
    if h0 is not None:
        h[:, :H] = h0
    c = np.array(c0, np.int32, order="C").reshape(B, H)
    R = ts * B
    sizes = (2 * R * a.Ki, R * k4, 4 * R * a.N, 8 * R * a.N, 16 * R * H, 16 * B * H)
    buf, (a.xs, a.xu, a.acc32, a.acc64, a.gin, a.pre) = scratch.areas("micro", sizes)
    ctypes.memset(a.xs, 0, sizes[0])  # the rows' padding column stays 0
    a.h, a.c = h.ctypes.data, c.ctypes.data
    a.T, a.B, a.ts, a.first_rec = T, B, ts, int(h0 is not None)
    xc = np.ascontiguousarray(x, dt)
    y = np.empty((T, B, H), dt)
    lib.micro_lstm(ctypes.byref(a), xc.ctypes.data, y.ctypes.data, int(reverse))
    del buf  # held until the loop returned
    return y, (h[:, :H].astype(dt), c.astype(np.int16))
