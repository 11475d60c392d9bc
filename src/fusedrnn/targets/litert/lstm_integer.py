"""Full-integer "8x8_16" LSTM kernel (litert.md section 6), bit-exact with the LiteRT interpreter.

int8 input, output state and weights (per-tensor symmetric), int32 biases, int16 gates (Q3.12 pre-activations
without layer norm) and an int16 cell with a power-of-two scale. Vectorised over the batch and the gate columns:
the input term of every time step is one exact GEMM before the recurrence, the recurrent term one GEMM per step
(both exact through float BLAS, :class:`fusedrnn.numerics.int_matmul.IntMatrix`); sigmoid and tanh are table
look-ups of gemmlowp's fixed-point functions. Batch rows are independent in the kernel, so running them together
gives the interpreter's per-row results (the one exception, the peephole quirk of section 8 with
n_output != n_cell, is reproduced).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import AttributeValueError, UnsupportedFeatureError
from ...numerics import core, gemmlowp
from ...numerics.core import Requant
from ...numerics.int_matmul import IntMatrix
from . import _compiled
from ._arith import activation_lut, apply_lut, saturating_lut
from .lstm_integer8 import initial_output_state
from .slots import (
    C_GATE,
    F_GATE,
    GATE,
    GATE_BIASES,
    GATES,
    HIDDEN_INTERMEDIATE,
    I_GATE,
    INPUT_WEIGHTS,
    LAYER_NORM,
    N_INTERMEDIATES,
    O_GATE,
    PEEPHOLE_GATES,
    PEEPHOLES,
    PROJECTION_WEIGHTS,
    RECURRENT_WEIGHTS,
    LstmOptions,
    LstmTensors,
    per_tensor,
)

ROUNDINGS = ("double", "single")
_F32 = np.float32


def checked_log2(x: float) -> int | None:
    """LiteRT's ``CheckedLog2`` in float32: n = round(log(x) · (1 / log 2)) when the fractional part is below 1e-3
    (the kernel then uses 2^n, e.g. 2^-15 for a cell scale of 2/65535), else None (the kernel refuses)."""
    x32 = np.float32(x)
    if not (np.isfinite(x32) and x32 > 0):
        return None
    v = np.float32(np.log(x32)) * np.float32(np.float32(1.0) / np.float32(np.log(np.float32(2.0))))
    r = np.float32(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)))  # TfLiteRound: half away from zero
    return int(r) if abs(float(np.float32(v - r))) < 1e-3 else None


def _qm(m: float, rounding: str) -> tuple[int, int]:
    q, s = gemmlowp.quantize_multiplier(float(m), rounding=rounding)
    return int(q), int(s)


def _exact_product(M: IntMatrix, a: np.ndarray, out: np.ndarray, fbuf: np.ndarray | None) -> None:
    """out (int64) = a @ M exactly; through the prepared float type into ``fbuf`` (no allocation) when there is one."""
    if fbuf is None:
        out[...] = M.matmul(a, check=False)
    else:
        M.matmul_float(a, out=fbuf, check=False)
        np.copyto(out, fbuf, casting="unsafe")


_LITERT_GATE = {"i": "input", "f": "forget", "g": "cell", "o": "output"}
"""Canonical gate letter -> the gate's name in LiteRT's parameter fields (the cell candidate is "cell")."""


@dataclass(frozen=True)
class IntegerLstmParameter:
    """LiteRT's ``lstm_eval::IntegerLstmParameter`` for the 8x8_16 kernel, as the kernel's Prepare computes it (or
    a test sets it by hand): per gate ("i", "f", "g", "o") the (a, b) multipliers ``effective_input_to_<gate>_scale``,
    ``effective_recurrent_to_<gate>_scale``, the peepholes' ``effective_cell_to_<gate>_scale``, the layer norms'
    ``layer_norm_<gate>_scale`` and ``<gate>_variance_guard``, the effective biases ``input_to_<gate>_effective_bias``
    / ``recurrent_to_<gate>_effective_bias`` ([n_cell] or one value for all), the hidden state's
    ``effective_hidden_scale`` and ``hidden_zp``, ``effective_proj_scale`` and ``projection_effective_bias``,
    ``cell_scale`` (log2 of the cell state's scale) and the quantized clips."""

    input_scale: dict
    recurrent_scale: dict
    input_effective_bias: dict
    recurrent_effective_bias: dict
    hidden_scale: tuple
    cell_scale: int
    hidden_zp: int = 0
    layer_norm_scale: dict = field(default_factory=dict)
    variance_guard: dict = field(default_factory=dict)
    cell_to_gate_scale: dict = field(default_factory=dict)
    proj_scale: tuple = (0, 0)
    projection_effective_bias: object = None
    quantized_cell_clip: int = 0
    quantized_proj_clip: int = 0

    @classmethod
    def from_fields(cls, fields: dict) -> IntegerLstmParameter:
        """From LiteRT's field names: ``effective_input_to_forget_scale_a``, ``layer_norm_cell_scale_b``,
        ``output_variance_guard``, ``input_to_input_effective_bias``, ``cell_scale`` ... (absent ones: none)."""
        def ab(name):
            return (int(fields[name + "_a"]), int(fields[name + "_b"])) if name + "_a" in fields else None

        def per_gate(fmt, pair=True):
            out = {}
            for g, n in _LITERT_GATE.items():
                v = ab(fmt.format(n)) if pair else fields.get(fmt.format(n))
                if v is not None:
                    out[g] = v
            return out

        return cls(input_scale=per_gate("effective_input_to_{}_scale"),
                   recurrent_scale=per_gate("effective_recurrent_to_{}_scale"),
                   input_effective_bias=per_gate("input_to_{}_effective_bias", False),
                   recurrent_effective_bias=per_gate("recurrent_to_{}_effective_bias", False),
                   hidden_scale=ab("effective_hidden_scale") or (0, 0), cell_scale=int(fields["cell_scale"]),
                   hidden_zp=int(fields.get("hidden_zp", 0)), layer_norm_scale=per_gate("layer_norm_{}_scale"),
                   variance_guard=per_gate("{}_variance_guard", False),
                   cell_to_gate_scale=per_gate("effective_cell_to_{}_scale"),
                   proj_scale=ab("effective_proj_scale") or (0, 0),
                   projection_effective_bias=fields.get("projection_effective_bias"),
                   quantized_cell_clip=int(fields.get("quantized_cell_clip", 0)),
                   quantized_proj_clip=int(fields.get("quantized_proj_clip", 0)))


class IntegerLstmKernel:
    """A prepared 8x8_16 LSTM direction: ``run(x int8 [T, B, I], (h int8 [B, n_output], c int16 [B, n_cell]))``.

    ``rounding``: MultiplyByQuantizedMultiplier with ``"double"`` rounding (pip wheels) or ``"single"``."""

    kind = "integer"

    def __init__(self, t: LstmTensors, opts: LstmOptions, *, rounding: str = "double"):
        if rounding not in ROUNDINGS:
            raise AttributeValueError(f"rounding: expected one of {ROUNDINGS}, got {rounding!r}")
        if opts.diagonal_recurrent_tensors:
            raise UnsupportedFeatureError("diagonal_recurrent_tensors: the 8x8_16 kernel has no diagonal recurrence")
        t.validate()
        if t.n_aux_input:
            raise UnsupportedFeatureError("aux_input: the 8x8_16 kernel takes no auxiliary input")
        self.rounding, self.opts, self.t = rounding, opts, t
        H, I, Hp = t.n_cell, t.n_input, t.n_output
        self.n_cell, self.n_input, self.n_output, self.n_aux = H, I, Hp, 0
        for k in INPUT_WEIGHTS + RECURRENT_WEIGHTS + (PROJECTION_WEIGHTS,):
            if t[k] is not None and t[k].type_name != "INT8":
                raise UnsupportedFeatureError(f"slot {k}: the 8x8_16 kernel needs int8 weights, got {t[k].type_name}")
        if t["input"] is None or t["output_state"] is None or t["cell_state"] is None:
            raise AttributeValueError("input / output_state / cell_state: the 8x8_16 kernel needs their quantization")
        s_x, zp_x = per_tensor(t["input"], "input")
        s_h, zp_h = per_tensor(t["output_state"], "output_state")
        s_c, _ = per_tensor(t["cell_state"], "cell_state")
        cs = checked_log2(s_c)
        if cs is None:
            raise AttributeValueError(f"cell_state: the int16 cell scale must be a power of two (log2 within 1e-3 of "
                                      f"an integer, as LiteRT's CheckedLog2 asks), got {s_c!r}")
        if not 0 <= 15 + cs <= 6:
            raise UnsupportedFeatureError(f"cell_state: scale 2^{cs} needs tanh with {15 + cs} integer bits; TFLite "
                                          f"supports 0..6 (cell scales 2^-15 .. 2^-9)")
        inter = list(t.intermediates) + [None] * (N_INTERMEDIATES - len(t.intermediates))
        hid = HIDDEN_INTERMEDIATE
        if inter[hid] is None or not inter[hid].quantized:
            raise AttributeValueError(f"intermediates[{hid}]: the 8x8_16 kernel needs the effective-hidden scale and "
                                      f"zero point (intermediate {hid})")
        s_hid, zp_hid = per_tensor(inter[hid], f"intermediates[{hid}]")
        self.cifg, self.ln, self.peephole, self.proj = t.cifg, t.layer_norm, t.peephole, t.projection
        # column blocks: the sigmoid gates (i, f, o) first, then the cell gate c, so one look-up covers each kind
        gates = [GATE[g] for g in ("fog" if self.cifg else "ifog")]  # indices into the per-gate slots
        self.gates = gates
        inter_scale = []
        for g in range(len(GATES)):
            if self.ln:
                if g in gates:
                    if inter[g] is None or not inter[g].quantized:
                        raise AttributeValueError(f"intermediates[{g}]: layer norm needs the gate's int16 scale")
                    inter_scale.append(_F32(per_tensor(inter[g], f"intermediates[{g}]")[0]))
                else:
                    inter_scale.append(_F32(1.0))
            else:
                inter_scale.append(_F32(2.0**-12))
        # ---- effective multipliers (float32 as in C++ except where the C++ uses double) ------------------
        q_in, s_in, q_rec, s_rec, in_bias, rec_bias = [], [], [], [], [], []
        Wcols, Rcols = [], []
        for g in gates:
            W = t[INPUT_WEIGHTS[g]]
            R = t[RECURRENT_WEIGHTS[g]]
            sw, _ = per_tensor(W, f"input weights {g}")
            sr, _ = per_tensor(R, f"recurrent weights {g}")
            qi = _qm(_F32(_F32(sw) * _F32(s_x)) / inter_scale[g], rounding)
            qr = _qm(_F32(_F32(sr) * _F32(s_h)) / inter_scale[g], rounding)
            q_in += [qi[0]] * H
            s_in += [qi[1]] * H
            q_rec += [qr[0]] * H
            s_rec += [qr[1]] * H
            Wd = W.data.astype(np.int64)
            Rd = R.data.astype(np.int64)
            bias = np.zeros(H, np.int64)
            b = t[GATE_BIASES[g]]
            if b is not None and not self.ln:
                bias = b.data.astype(np.int64)
            in_bias.append(bias + (-zp_x) * Wd.sum(axis=1))
            rec_bias.append((-zp_h) * Rd.sum(axis=1))
            Wcols.append(W.data.T)
            Rcols.append(R.data.T)
        self._set_matrices(q_in, s_in, q_rec, s_rec, in_bias, rec_bias, Wcols, Rcols)
        # peepholes (int16, symmetric): i, f use the old cell, o the new one
        self.P = {}
        if self.peephole:
            if Hp > H:
                raise UnsupportedFeatureError("cell_to_*_weights: with n_output > n_cell the TFLite 8x8_16 peephole "
                                              "reads past its weights (litert.md section 8); not emulated")
            for g, k in ((GATE[p], k) for p, k in zip(PEEPHOLE_GATES, PEEPHOLES, strict=True)):
                if g not in gates or t[k] is None:
                    continue
                sp, _ = per_tensor(t[k], f"cell_to_gate weights {k}")
                q, s = _qm(np.float64(2.0**cs) * np.float64(_F32(sp)) / np.float64(inter_scale[g]), rounding)
                self.P[g] = (t[k].data.astype(np.int64), Requant(q, s, rounding))
        # layer norm
        self.ln_params = {}
        if self.ln:
            # TFLite's variance (2^20 // n) is exact only for power-of-two n_cell; its arithmetic is reproduced
            for g in gates:
                L = t[LAYER_NORM[g]]
                sl, _ = per_tensor(L, f"layer_norm_coefficients {g}")
                qa, qb = _qm(_F32(sl), rounding)
                guard = max(1, int(_F32(10000) * _F32(sl)))
                b = t[GATE_BIASES[g]]
                bias = np.zeros(H, np.int64) if b is None else b.data.astype(np.int64)
                self.ln_params[g] = (L.data.astype(np.int64), bias, Requant(qa, qb + 12, rounding), guard)
        # hidden and projection
        hq = _F32(np.float64(2.0**-15) / np.float64(_F32(s_hid)) * np.float64(2.0**-15))
        self.hid_req = Requant(*_qm(hq, rounding), rounding)
        self.zp_hid, self.zp_h = zp_hid, zp_h
        if self.proj:
            Wp = t["projection_weights"]
            sp, _ = per_tensor(Wp, "projection_weights")
            self.proj_req = Requant(*_qm(_F32(_F32(sp) * _F32(s_hid)) / _F32(s_h), rounding), rounding)
            pb = t["projection_bias"]
            pb = np.zeros(Hp, np.int64) if pb is None else pb.data.astype(np.int64)
            self.proj_bias = pb + zp_hid * Wp.data.astype(np.int64).sum(axis=1)
            self.Wp = IntMatrix(np.ascontiguousarray(Wp.data.T), a_absmax=128)
        s_out = s_h
        self.qcell_clip = 0
        if opts.cell_clip > 0:
            self.qcell_clip = int(np.clip(_F32(opts.cell_clip) / _F32(s_c), -32768.0, 32767.0))
        self.qproj_clip = 0
        if opts.proj_clip > 0 and self.proj:
            self.qproj_clip = int(np.clip(_F32(opts.proj_clip) / _F32(s_out), -128.0, 127.0))
        self._set_tables(cs)


    @classmethod
    def from_parameters(cls, t: LstmTensors, params: IntegerLstmParameter, opts: LstmOptions | None = None, *,
                        rounding: str = "double") -> IntegerLstmKernel:
        """The kernel with LiteRT's integer parameters given directly (``EvalInteger8x8_16`` with a hand-set
        ``IntegerLstmParameter``, as lstm_eval_test.cc calls it) instead of derived from the tensors' scales: ``t``
        gives the int8 weights, layer-norm coefficients and gate biases (layer norm adds them), the projection
        weights and the output state's zero point; ``params`` everything else."""
        if rounding not in ROUNDINGS:
            raise AttributeValueError(f"rounding: expected one of {ROUNDINGS}, got {rounding!r}")
        t.validate()
        k = cls.__new__(cls)
        k.rounding, k.opts, k.t = rounding, opts or LstmOptions(time_major=True), t
        H, I, Hp = t.n_cell, t.n_input, t.n_output
        k.n_cell, k.n_input, k.n_output, k.n_aux = H, I, Hp, 0
        k.cifg, k.ln, k.peephole, k.proj = t.cifg, t.layer_norm, t.peephole, t.projection
        k.gates = [GATE[g] for g in ("fog" if k.cifg else "ifog")]
        cs = int(params.cell_scale)
        if not 0 <= 15 + cs <= 6:
            raise UnsupportedFeatureError(f"cell_scale: 2^{cs} needs tanh with {15 + cs} integer bits; TFLite "
                                          f"supports 0..6")

        def col(v, n):
            return np.broadcast_to(np.asarray(0 if v is None else v, np.int64), (n,)).copy()

        q_in, s_in, q_rec, s_rec, in_bias, rec_bias, Wcols, Rcols = [], [], [], [], [], [], [], []
        for g in k.gates:
            letter = GATES[g]
            (qa, qb), (ra, rb) = params.input_scale[letter], params.recurrent_scale[letter]
            q_in += [qa] * H
            s_in += [qb] * H
            q_rec += [ra] * H
            s_rec += [rb] * H
            in_bias.append(col(params.input_effective_bias.get(letter), H))
            rec_bias.append(col(params.recurrent_effective_bias.get(letter), H))
            Wcols.append(t[INPUT_WEIGHTS[g]].data.T)
            Rcols.append(t[RECURRENT_WEIGHTS[g]].data.T)
        k._set_matrices(q_in, s_in, q_rec, s_rec, in_bias, rec_bias, Wcols, Rcols)
        k.P = {}
        for g, slot in ((GATE[p], sl) for p, sl in zip(PEEPHOLE_GATES, PEEPHOLES, strict=True)):
            if g in k.gates and t[slot] is not None:
                k.P[g] = (t[slot].data.astype(np.int64), Requant(*params.cell_to_gate_scale[GATES[g]], rounding))
        k.ln_params = {}
        if k.ln:
            for g in k.gates:
                a, b = params.layer_norm_scale[GATES[g]]
                bt = t[GATE_BIASES[g]]
                k.ln_params[g] = (t[LAYER_NORM[g]].data.astype(np.int64),
                                  np.zeros(H, np.int64) if bt is None else bt.data.astype(np.int64),
                                  Requant(a, b + 12, rounding), int(params.variance_guard[GATES[g]]))
        k.hid_req = Requant(*params.hidden_scale, rounding)
        k.zp_hid = int(params.hidden_zp)
        k.zp_h = per_tensor(t["output_state"], "output_state")[1]
        if k.proj:
            k.proj_req = Requant(*params.proj_scale, rounding)
            k.proj_bias = col(params.projection_effective_bias, Hp)
            k.Wp = IntMatrix(np.ascontiguousarray(t["projection_weights"].data.T), a_absmax=128)
        k.qcell_clip, k.qproj_clip = int(params.quantized_cell_clip), int(params.quantized_proj_clip)
        k._set_tables(cs)
        return k

    def _set_matrices(self, q_in, s_in, q_rec, s_rec, in_bias, rec_bias, Wcols, Rcols) -> None:
        """The per-column multipliers, effective biases and weight matrices (gate blocks side by side), and the
        fast paths they allow."""
        Hp, I = self.n_output, self.n_input  # noqa: N806
        self.in_req = Requant(q_in, s_in, self.rounding)
        self.rec_req = Requant(q_rec, s_rec, self.rounding)
        self.in_bias = np.concatenate(in_bias)
        self.rec_bias = np.concatenate(rec_bias)
        self.W = IntMatrix(np.concatenate(Wcols, axis=1), a_absmax=128)  # [I, G*H]
        self._rec_cols = np.concatenate(Rcols, axis=1)  # int8 [Hp, G*H] (the compiled loop's copy)
        self.R = IntMatrix(self._rec_cols, a_absmax=128)
        # the accumulators need no int32 wrap when their bounds stay below 2^31
        self.rec_fits = Hp * 128 * 128 + int(np.abs(self.rec_bias).max(initial=0)) < 2**31
        self.in_fits = I * 128 * 128 + int(np.abs(self.in_bias).max(initial=0)) < 2**31
        self.in_bias_q = self.in_req.with_bias(self.in_bias) if self.in_fits and self.in_req.one_pass else None
        self.rec_bias_q = self.rec_req.with_bias(self.rec_bias) if self.rec_fits and self.rec_req.one_pass else None
        self.G = len(self.gates)
        # the requantized recurrent term is not saturated on its own (TFLite adds it to the saturated input term
        # and saturates the sum); the saturating tables of the fast path cover sums in [-2^16, 2^16), so models
        # whose recurrent term can leave the int16 range (|acc| <= Hp·128·128 + |bias|, times the multiplier)
        # saturate explicitly instead
        acc_max = Hp * 128 * 128 + int(np.abs(self.rec_bias).max(initial=0))
        mult = np.asarray(q_rec, np.float64) * np.exp2(np.asarray(s_rec, np.float64) - 31)
        self.rec_wide = bool(acc_max * float(mult.max(initial=0)) + 2 > 32767)

    def _set_tables(self, cs: int) -> None:
        """The cell scale exponent ``cs`` and the activation tables it implies: the gates' sigmoid / tanh on Q3.12
        inputs (plain and saturating) and the cell's tanh on Q(15+cs) inputs."""
        self.cell_scale = cs
        self.sig = activation_lut("logistic", 3)
        self.tanh3 = activation_lut("tanh", 3)
        self.sig_sat = saturating_lut("logistic", 3)
        self.tanh3_sat = saturating_lut("tanh", 3)
        self.tanh_c = activation_lut("tanh", 15 + cs)

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        """The state after ``reset_all_variables()``: output state = its zero point (zero bytes for an INT16
        output-state tensor, which the kernel reads as int8 codes), cell = 0."""
        return initial_output_state(self.t, self.zp_h, self.n_output, B), np.zeros((B, self.n_cell), np.int16)

    # ---- pieces ----------------------------------------------------------------------------------------------
    def _layer_norm(self, x: np.ndarray, g: int) -> np.ndarray:
        """PortableApplyLayerNorm over the last axis (n_cell) of int16-valued x [B, H]."""
        L, bias, req, guard = self.ln_params[g]
        n = x.shape[-1]
        s = x.sum(axis=-1, keepdims=True)
        ssq = (x * x).sum(axis=-1, keepdims=True)
        mean = core.wrap(core.trunc_div(s * 1024, n), 32)
        var = ssq * ((1 << 20) // n) - mean * mean
        var2 = core.wrap(core.trunc_div(var, 1 << 20), 32)
        var2 = np.where(var2 < 1, guard, var2)
        a, b = gemmlowp.get_inv_sqrt_quantized_multiplier_exp(var2.astype(np.int32), -1)
        shifted = core.wrap(1024 * x - mean, 32)
        rescaled = Requant(a.astype(np.int64), b.astype(np.int64), self.rounding)(shifted)
        v3 = rescaled * L + bias  # int64 (TFLite's "TODO: saturate"; the int32 product never overflows in range)
        v4 = core.wrap(core.trunc_div(np.where(v3 > 0, v3 + 512, v3 - 512), 1024), 32)
        return core.sat(req(v4), 16)

    def _peephole(self, gate: np.ndarray, c: np.ndarray, g: int, time_major: bool) -> None:
        P, req = self.P[g]
        Hp, H = self.n_output, self.n_cell
        if Hp == H:
            gate += req(P * c)
            core.sat(gate, 16, out=gate)
            return
        # the kernel walks n_output elements per batch row of the flat [n_batch * n_cell] buffers
        B = gate.shape[0]
        nb = B if time_major else 1
        gf = gate.reshape(B // nb, nb * H)
        cf = c.reshape(B // nb, nb * H)
        m = nb * Hp
        Pf = np.tile(P[:Hp], nb)
        upd = gf[:, :m] + req(Pf * cf[:, :m])
        gf[:, :m] = core.sat(upd, 16)

    def _input_term(self, x: np.ndarray) -> np.ndarray:
        """sat16(MBQM(in_bias + Σ x·W)) of every step as int16 [T, B, G*H], in cache-sized chunks of steps."""
        T, B, I = x.shape
        GH = self.G * self.n_cell
        out = np.empty((T, B, GH), np.int16)
        xf = np.ascontiguousarray(x).reshape(T * B, I)
        step = max(1, (1 << 17) // max(1, B * GH))  # about 1 MiB of int64 per chunk
        acc = np.empty((step * B, GH), np.int64)
        mask = np.empty((step * B, GH), np.int64)
        fbuf = None if self.W.dtype is None else np.empty((step * B, GH), self.W.dtype)
        for t0 in range(0, T, step):
            n = (min(T, t0 + step) - t0) * B
            a, m = acc[:n], mask[:n]
            _exact_product(self.W, xf[t0 * B:t0 * B + n], a, None if fbuf is None else fbuf[:n])
            if self.in_fits:
                self.in_req.inplace(a, m, self.in_bias_q, self.in_bias)
            else:
                a += self.in_bias
                a[...] = core.wrap(a, 32)
                self.in_req.inplace(a, m)
            core.sat(a, 16, out=a)
            out[t0:t0 + n // B] = a.reshape(-1, B, GH)
        return out

    def run(self, x: np.ndarray, state, *, reverse: bool = False, aux=None, engine: str = "auto", probe=None):
        """x int8 [T, B, n_input]; returns (y int8 [T, B, n_output], (h int8, c int16)).

        ``engine``: "auto" (the compiled loop of :mod:`._compiled` when it loads, else NumPy), "numpy" or
        "compiled" (RuntimeError when unavailable); both give the same bits. ``probe`` (a
        :meth:`SaturationCounter.probe <fusedrnn.cells.observers.SaturationCounter.probe>` function) sees each
        step's int16 gate pre-activations (before they saturate), cell and h, on the NumPy loop."""
        lib = _compiled.library("numpy" if probe is not None else engine)
        if lib is not None and self.W.dtype is not None and x.shape[0] > 0:
            out = _compiled.run(lib, self, x, state, reverse)
            if out is not None:
                return out
            if engine == "compiled":
                raise RuntimeError(f"engine: the compiled LiteRT loop cannot run this kernel: {self._cplan_reason}")
        T, B, I = x.shape
        H, G = self.n_cell, self.G
        h0, c0 = state
        gin = self._input_term(x)
        h8 = np.ascontiguousarray(h0, np.int8)
        c = np.asarray(c0, np.int32).copy()  # int16 values; products with Q0.15 gates fit int32
        y = np.empty((T, B, self.n_output), np.int8)
        gi = {g: j for j, g in enumerate(self.gates)}
        nsig = (G - 1) * H  # sigmoid columns (i, f, o or f, o)
        fast = not self.P and not self.ln and not self.rec_wide
        tm = self.opts.time_major
        fcol = slice(gi[F_GATE] * H, (gi[F_GATE] + 1) * H)
        icol = None if self.cifg else slice(gi[I_GATE] * H, (gi[I_GATE] + 1) * H)
        ocol = slice(gi[O_GATE] * H, (gi[O_GATE] + 1) * H)
        sh_ig = 30 + self.cell_scale
        gate = np.empty((B, G * H), np.int64)
        mask = np.empty((B, G * H), np.int64)
        sig = np.empty((B, nsig), np.int32)
        g = np.empty((B, H), np.int32)
        fbuf = None if self.R.dtype is None else np.empty((B, G * H), self.R.dtype)
        letters = "".join(GATES[k] for k in self.gates)  # the gate columns' canonical letters
        c_lim = self.qcell_clip if self.qcell_clip > 0 else 32767
        h_lim = (-self.qproj_clip, self.qproj_clip) if self.proj and self.qproj_clip > 0 else (-128, 127)
        for step, s in enumerate(range(T - 1, -1, -1) if reverse else range(T)):
            _exact_product(self.R, h8, gate, fbuf)
            if self.rec_fits:
                self.rec_req.inplace(gate, mask, self.rec_bias_q, self.rec_bias)
            else:
                gate += self.rec_bias
                gate[...] = core.wrap(gate, 32)
                self.rec_req.inplace(gate, mask)
            gate += gin[s]  # the sum of two saturated int16 terms; saturated below (look-up or clip)
            if probe is not None:
                probe("preact", step, gate.reshape(B, G, H), -32768, 32767, letters)
            if fast:
                np.take(self.sig_sat, gate[:, :nsig], out=sig, mode="wrap")
                np.take(self.tanh3_sat, gate[:, nsig:], out=g, mode="wrap")
                f, o = sig[:, fcol], sig[:, ocol]
                i = (32767 - f) if self.cifg else sig[:, icol]
            else:
                core.sat(gate, 16, out=gate)
                acts = {}
                for gg in self.gates:
                    if gg == O_GATE and O_GATE in self.P:
                        continue  # the output gate waits for the new cell
                    v = np.ascontiguousarray(gate[:, gi[gg] * H:(gi[gg] + 1) * H])
                    if gg in self.P:
                        self._peephole(v, c, gg, tm)
                    if self.ln:
                        v = self._layer_norm(v, gg)
                    acts[gg] = apply_lut(self.tanh3 if gg == C_GATE else self.sig, v)
                f, g = acts[F_GATE], acts[C_GATE]
                i = (32767 - f) if self.cifg else acts[I_GATE]
            # CwiseMul16 results always fit int16 here (|f·c| >> 15 and |i·g| >> (30 + cs) with 30 + cs >= 15 are
            # <= 32767), so the int16 wrap of the C++ code is a no-op; the add saturates.
            c = core.rdpot(f * c, 15)
            c += core.rdpot(i * g, sh_ig)
            core.sat(c, 16, out=c)
            if self.qcell_clip > 0:
                core.clamp(c, -self.qcell_clip, self.qcell_clip, out=c)
            if not fast:
                if O_GATE in acts:
                    o = acts[O_GATE]
                else:
                    v = np.ascontiguousarray(gate[:, gi[O_GATE] * H:(gi[O_GATE] + 1) * H])
                    self._peephole(v, c, O_GATE, tm)
                    if self.ln:
                        v = self._layer_norm(v, O_GATE)
                    o = apply_lut(self.sig, v)
            m = self.hid_req(o * apply_lut(self.tanh_c, c))
            if self.proj:
                m -= self.zp_hid
                core.sat(m, 8, out=m)
                a = self.Wp.matmul(m.astype(np.int8), check=False)
                a += self.proj_bias
                h = self.proj_req(core.wrap(a, 32))
                h += self.zp_h
                core.sat(h, 8, out=h)
                if self.qproj_clip > 0:
                    core.clamp(h, -self.qproj_clip, self.qproj_clip, out=h)
            else:
                m += self.zp_hid
                h = core.sat(m, 8, out=m)
            h8 = h.astype(np.int8)
            if probe is not None:
                probe("cell", step, c, -c_lim - (c_lim == 32767), c_lim)
                probe("hidden", step, h8, *h_lim)
            y[s] = h8
        return y, (h8, c.astype(np.int16))
