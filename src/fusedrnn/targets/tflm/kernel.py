"""TensorFlow Lite for Microcontrollers' integer UNIDIRECTIONAL_SEQUENCE_LSTM (``micro/kernels/lstm_eval.h``,
``lstm_eval_common.cc``, the reference kernels), bit-exact with the ``tflite-micro`` interpreter.

Two variants, chosen by the activation type: int8 activations with int32 biases ("8x8_16", ``EvalLstm<int8_t,
int8_t, int16_t, int32_t>``) and int16 activations with int64 biases ("16x8", ``EvalLstm<int16_t, int8_t, int16_t,
int64_t>``); weights int8, cell state int16, gates int16. Only the standard LSTM (no CIFG, peepholes, projection,
layer norm). Per step, for the gates in the order f, i, c, then (after the cell update) o:

    in   = clamp16(MBQM(Σ W·(x − zp_x) + b,  M_in))           # FullyConnected, output scale 2^-12 (Q3.12)
    rec  = clamp16(MBQM(Σ R·(h − zp_h),        M_rec))         # no bias; each FC saturates on its own
    gate = act(clamp16(in + rec))                              # sigmoid, or the fused activation (cell gate);
                                                               # int16 table interpolation (numerics.sigmoid_lut)
    c    = clamp16(MBQM(f·c, M_fc));  c = clamp16(c + clamp16(MBQM(i·g, M_ic)))
    c    = clamp(c, ±qclip)   if cell_clip > 0                 # qclip = int16(trunc(clip / s_c))
    h    = clamp_act(MBQM(tanh(c; 2^p)·o, M_h) + zp_h)         # p = round(log2 s_c); tanh left shift p + 12

MBQM is TFLite's double-rounding ``MultiplyByQuantizedMultiplier`` (int32 x; the int64-x form for the int64
accumulators of the 16x8 variant). The multipliers (``PrepareGateParametersInteger``): M_in =
QM(double(float32(s_x · s_W)) / 2^-12), M_rec = QM(double(float32(s_h · s_R)) / 2^-12), M_fc = QM(2^-15 · s_c / s_c),
M_ic = QM(2^-30 / s_c), M_h = QM(2^-30 / s_h) with QM = ``QuantizeMultiplier``. The state lives in the op's
variable tensors and persists across invocations; a reset sets h to its zero point and c to 0.

Vectorised: the input term of every step is one exact GEMM before the recurrence, the recurrent term one GEMM per
step (:class:`~fusedrnn.numerics.int_matmul.IntMatrix`); batch rows are independent (time-major and batch-major
inputs give the same per-row results).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedFeatureError
from ...numerics import core
from ...numerics.int_matmul import IntMatrix, scan_absmax
from ...numerics.sigmoid_lut import Lut16
from .. import micro_lstm
from ..tflite_quant import QuantizedLstm, TflmLstmParams

_F32 = np.float32
_GATE_INDEX = {"i": 0, "f": 1, "c": 2, "o": 3}
_ACT_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}


class _Mbqm:
    """TFLite ``MultiplyByQuantizedMultiplier`` with a fixed (Q, shift) (ints, or per-column arrays) as the kernel
    calls it: the int32 overload (``x_bits`` 32) or the int64 one (64, the 16x8 variant); int64-held values in,
    int64-held int32 values out (wrapped as the C++ cast). Prepared once: the unchecked numerics cores, no
    argument validation per step."""

    def __init__(self, Q, shift, x_bits: int):  # noqa: N803
        self.Q, self.shift, self.x_bits = np.asarray(Q, np.int64), np.asarray(shift, np.int64), x_bits
        self._requant = core.Requant(self.Q, self.shift) if x_bits == 32 else None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self._requant is None:
            return core.wrap(core.mbqm64(np.asarray(x, np.int64), self.Q, self.shift), 32)
        if self._requant.one_pass:  # the double rounding in one pass (numerics.core.Requant.inplace); in int32 range
            r = np.array(x, np.int64)
            return self._requant.inplace(r, np.empty_like(r))
        return core.wrap(self._requant(np.asarray(x, np.int64)), 32)

    def columns(self, cols: slice) -> _Mbqm:
        """The same multipliers for a slice of the columns."""
        if cols == slice(None) or self.Q.ndim == 0:
            return self
        return _Mbqm(self.Q[cols], self.shift[cols], self.x_bits)




class TflmLstm:
    """One prepared TFLM integer LSTM direction.

    ``run(x [T, B, I], (h [B, H], c [B, H]))`` -> ``(y [T, B, H], (h, c))`` in the activation dtype (int8 or
    int16) with an int16 cell. The pieces :meth:`gate`, :meth:`update_cell` and :meth:`update_hidden` are the
    kernel's ``CalculateLstmGate``, ``UpdateLstmCell`` and ``UpdateLstmHidden`` over [B, H] rows."""

    def __init__(self, q: QuantizedLstm, *, products: str = "float32", gate_scales: tuple = (2.0**-12, 2.0**-15)):
        H, I = q.hidden_size, q.input_size
        for g in range(4):
            if q.W[g].shape != (H, I) or q.R[g].shape != (H, H) or q.b[g].shape != (H,):
                raise ShapeError(f"gate {'ifco'[g]}: expected W [{H}, {I}], R [{H}, {H}] and b [{H}], got "
                                 f"{q.W[g].shape}, {q.R[g].shape}, {q.b[g].shape}")
        self.q = q
        self.params = p = TflmLstmParams.prepare(q, products, gate_scales=gate_scales)
        if not -27 <= p.cell_state_scale_power <= 0:
            raise UnsupportedFeatureError(f"cell_state: scale {q.c_scale!r} (2^{p.cell_state_scale_power}) is "
                                          f"outside the int16 tanh's range 2^-27 .. 2^0")
        self.H, self.I = H, I
        self.x_bits = 32 if q.activation == "int8" else 64
        self.act_lo, self.act_hi = _ACT_RANGE[q.activation]
        amax = 128 if q.activation == "int8" else 32768
        # columns: the four gates side by side (i, f, c, o), with the zero points folded into the bias
        W = [np.asarray(q.W[g], np.int64) for g in range(4)]
        R = [np.asarray(q.R[g], np.int64) for g in range(4)]
        self.in_bias = np.concatenate([np.asarray(q.b[g], np.int64) - q.x_zp * W[g].sum(1) for g in range(4)])
        self.rec_bias = np.concatenate([-q.h_zp * R[g].sum(1) for g in range(4)])
        self.W = IntMatrix(np.concatenate([q.W[g].T for g in range(4)], axis=1), a_absmax=amax)
        self.R = IntMatrix(np.concatenate([q.R[g].T for g in range(4)], axis=1), a_absmax=amax)
        self.in_q = (np.repeat([m for m, _ in p.input_fc], H), np.repeat([s for _, s in p.input_fc], H))
        self.rec_q = (np.repeat([m for m, _ in p.recurrent_fc], H), np.repeat([s for _, s in p.recurrent_fc], H))
        self._in_mbqm = _Mbqm(*self.in_q, self.x_bits)
        self._rec_mbqm = _Mbqm(*self.rec_q, self.x_bits)
        self._forget_cell, self._input_cell, self._hidden = (_Mbqm(*qs, 32) for qs in (p.forget_cell, p.input_cell,
                                                                                       p.hidden))
        # int32 accumulators of the 8-bit variant wrap (C++ int32) only beyond this bound
        bound = lambda K, bias: K * 128 * 255 + scan_absmax(bias)  # noqa: E731
        self.wrap_in = self.x_bits == 32 and bound(I, self.in_bias) >= 2**31
        self.wrap_rec = self.x_bits == 32 and bound(H, self.rec_bias) >= 2**31
        self.sigmoid = Lut16("logistic", 0)
        self.cell_act = Lut16("tanh" if q.cell_activation == "TANH" else "logistic", 0)
        self.tanh_cell = Lut16("tanh", p.cell_state_scale_power + 12)

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        """The state after a reset (``ResetVariableTensors``): h = its zero point, c = 0."""
        return np.full((B, self.H), self.q.h_zp, self.q.dtype), np.zeros((B, self.H), np.int16)

    # ---- pieces ---------------------------------------------------------------------------------------------
    def _input_fc(self, x: np.ndarray, cols: slice = slice(None)) -> np.ndarray:
        acc = self.W.matmul(np.asarray(x), check=False)[..., cols] + self.in_bias[cols]
        if self.wrap_in:
            acc = core.wrap(acc, 32)
        return core.clamp(self._in_mbqm.columns(cols)(acc), -32768, 32767)

    def _recurrent_fc(self, h: np.ndarray, cols: slice = slice(None)) -> np.ndarray:
        acc = self.R.matmul(np.asarray(h), check=False)[..., cols] + self.rec_bias[cols]
        if self.wrap_rec:
            acc = core.wrap(acc, 32)
        return core.clamp(self._rec_mbqm.columns(cols)(acc), -32768, 32767)

    def gate(self, x: np.ndarray, h: np.ndarray, gate: str) -> np.ndarray:
        """``CalculateLstmGate`` of gate "i", "f", "c" or "o": the Q0.15 int16 gate output [B, H] for x [B, I] and
        h [B, H] (the activation codes)."""
        k = _GATE_INDEX[gate]
        cols = slice(k * self.H, (k + 1) * self.H)
        pre = core.clamp(self._input_fc(x, cols) + self._recurrent_fc(h, cols), -32768, 32767)
        table = self.cell_act if gate == "c" else self.sigmoid
        return table(pre).astype(np.int16)

    def update_cell(self, c: np.ndarray, f: np.ndarray, i: np.ndarray, g: np.ndarray) -> np.ndarray:
        """``UpdateLstmCell``: the new int16 cell from the old one and the Q0.15 gates f, i, g."""
        p = self.params
        c = np.asarray(c, np.int64)
        fc = core.clamp(self._forget_cell(np.asarray(f, np.int64) * c), -32768, 32767)
        ig = core.clamp(self._input_cell(np.asarray(i, np.int64) * np.asarray(g, np.int64)), -32768, 32767)
        c = core.clamp(fc + ig, -32768, 32767)
        if p.cell_clip > 0:
            c = core.clamp(c, -p.quantized_cell_clip, p.quantized_cell_clip)
        return c.astype(np.int16)

    def update_hidden(self, c: np.ndarray, o: np.ndarray) -> np.ndarray:
        """``UpdateLstmHidden``: the new hidden state (activation codes) from the cell and the Q0.15 output gate."""
        th = self.tanh_cell(c)
        h = self._hidden(th * np.asarray(o, np.int64)) + self.q.h_zp
        return core.clamp(h, self.act_lo, self.act_hi).astype(self.q.dtype)

    # ---- the sequence ---------------------------------------------------------------------------------------
    def micro_spec(self) -> micro_lstm.MicroLstmSpec:
        """This kernel as the compiled loop reads it (:mod:`fusedrnn.targets.micro_lstm`)."""
        p, H = self.params, self.H
        clip = (-p.quantized_cell_clip, p.quantized_cell_clip) if p.cell_clip > 0 else (-32768, 32767)
        per_gate = lambda m: tuple((m.Q[g * H], m.shift[g * H]) for g in range(4))  # noqa: E731
        return micro_lstm.MicroLstmSpec(
            wide=self.x_bits == 64, fc_kind="mbqm" if self.x_bits == 32 else "mbqm64", sat_rec=True, sat_ig=True,
            W=self.W.b, R=self.R.b, in_bias=self.in_bias, rec_bias=self.rec_bias, in_req=per_gate(self._in_mbqm),
            rec_req=per_gate(self._rec_mbqm), fc_req=(self._forget_cell.Q, self._forget_cell.shift),
            ic_req=(self._input_cell.Q, self._input_cell.shift), hid_req=(self._hidden.Q, self._hidden.shift),
            tables=(self.sigmoid.table, self.sigmoid.table, self.cell_act.table, self.sigmoid.table),
            tanh_c=self.tanh_cell.table, zp_h=self.q.h_zp, act_range=(self.act_lo, self.act_hi),
            cell_ranges=((-32768, 32767), clip))

    def run(self, x: np.ndarray, state=None, *, reverse: bool = False, engine: str = "auto") -> tuple[np.ndarray,
                                                                                                     tuple]:
        """x [T, B, I] activation codes; ``state`` (h [B, H], c [B, H]) or None (the reset state). Returns
        (y [T, B, H], (h, c)); ``reverse`` walks time backwards (each output at its own time index). ``engine``:
        "auto" (the compiled loop where it loads and takes the kernel's constants), "numpy" or "compiled"."""
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[2] != self.I:
            raise ShapeError(f"x: expected [T, B, {self.I}], got {x.shape}")
        T, B, _ = x.shape
        h, c = self.initial_state(B) if state is None else state
        H = self.H
        p = self.params
        plan = micro_lstm.plan_of(self, engine) if T else None
        if plan is not None:  # h in its type as below; x and c as given (run declines values beyond their types)
            out = micro_lstm.run(micro_lstm.library(engine), plan, x, np.asarray(h, self.q.dtype), c, reverse)
            if out is not None:
                return out
        gin = self._input_fc(x.reshape(T * B, self.I)).reshape(T, B, 4 * H) if T else None
        hq = np.asarray(h, self.q.dtype)
        c = np.asarray(c, np.int64)
        y = np.empty((T, B, H), self.q.dtype)
        sig_cols = np.r_[0:2 * H, 3 * H:4 * H]  # i, f, o
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            pre = core.clamp(gin[t] + self._recurrent_fc(hq), -32768, 32767)
            s = self.sigmoid(pre[:, sig_cols])
            i, f, o = s[:, :H], s[:, H:2 * H], s[:, 2 * H:]
            g = self.cell_act(pre[:, 2 * H:3 * H])
            fc = core.clamp(self._forget_cell(f * c), -32768, 32767)
            c = core.clamp(fc + core.clamp(self._input_cell(i * g), -32768, 32767), -32768, 32767)
            if p.cell_clip > 0:
                c = core.clamp(c, -p.quantized_cell_clip, p.quantized_cell_clip)
            th = self.tanh_cell(c)
            hq = core.clamp(self._hidden(th * o) + self.q.h_zp, self.act_lo, self.act_hi).astype(self.q.dtype)
            y[t] = hq
        return y, (hq, c.astype(np.int16))
