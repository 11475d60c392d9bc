"""Arm CMSIS-NN's integer LSTM, ``arm_lstm_unidirectional_s8`` and ``arm_lstm_unidirectional_s16`` (the portable C
path: no DSP or MVE extension), bit-exact with CMSIS-NN's unit-test vectors and its C source.

The parameters are CMSIS-NN's structures (:class:`LstmParams` = ``cmsis_nn_lstm_params``, :class:`LstmGate` =
``cmsis_nn_lstm_gate``): per gate the int8 input and hidden weights [H, I] / [H, H] with their *effective biases*
(the bias plus ``lhs_offset · Σ_j w[r, j]``, from ``arm_vector_sum_s8`` / ``_s8_s64``) and requantization
multipliers, the cell multipliers, the quantized cell clip, the cell scale power and the output multiplier and
offset. Per step (``arm_nn_lstm_step_s8`` / ``_s16``), gates f, i, c, o (``arm_nn_lstm_calculate_gate_*``):

    gate = clamp16(requant(x·Wᵀ + eff_in))                       # arm_nn_vec_mat_mul_result_acc_*, dst = 0
    gate = clamp16(requant(h·Rᵀ + eff_h) + gate)                 # skipped while there is no hidden state; the
                                                                 # recurrent term is NOT saturated before the add
    gate = table sigmoid / tanh of gate                          # arm_nn_activation_s16, left shift 0
    c    = clamp16(requant(f·c, ftc))                            # arm_elementwise_mul_s16
    c    = clamp(requant(i·g, itc) + c, ±cell_clip)              # arm_elementwise_mul_acc_s16 (int16 range when
                                                                 # cell_clip <= 0)
    h    = clamp_out(requant(o·tanh(c; cell_scale_power + 12), out) + output_offset)

``requant`` is ``arm_nn_requantize`` (s8: int32 accumulators; the same double rounding as TFLite's
``MultiplyByQuantizedMultiplier``) and, for the s16 matrix products (int64 accumulators),
``arm_nn_requantize_s64`` with ``REDUCE_MULTIPLIER``: ``r = int32((acc · Qr) >> (14 − shift)); (r + 1) >> 1``.
With ``hidden_state == NULL`` the cell state starts at 0 and the first step has no recurrent term; this is how
TFLM's CMSIS-NN kernel calls it, so there the state does not carry over between invocations.

The one arithmetic difference from TFLM's reference kernel is the unsaturated recurrent term (TFLM saturates
each FullyConnected output before adding), plus ``cell_clip`` of 0 meaning "no clip" here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import AttributeValueError, ShapeError
from ...numerics import core
from ...numerics.int_matmul import IntMatrix, scan_absmax
from ...numerics.sigmoid_lut import Lut16
from .. import micro_lstm
from ..tflite_quant import QuantizedLstm, TflmLstmParams

ARM_CMSIS_NN_SUCCESS = 0
ARM_CMSIS_NN_ARG_ERROR = -1
ARM_CMSIS_NN_NO_IMPL_ERROR = -2
ARM_CMSIS_NN_FAILURE = -3
ARM_SIGMOID = 0
ARM_TANH = 1
VARIANTS = ("s8", "s16")
_ACT_DTYPE = {"s8": np.int8, "s16": np.int16}
_BIAS_DTYPE = {"s8": np.int32, "s16": np.int64}


@dataclass
class LstmGate:
    """``cmsis_nn_lstm_gate``: one gate's weights, effective biases, multipliers and activation."""

    input_multiplier: int
    input_shift: int
    input_weights: np.ndarray
    input_effective_bias: np.ndarray
    hidden_multiplier: int
    hidden_shift: int
    hidden_weights: np.ndarray
    hidden_effective_bias: np.ndarray
    bias: np.ndarray | None = None
    activation_type: int = ARM_SIGMOID


@dataclass
class LstmParams:
    """``cmsis_nn_lstm_params``: sizes, the input offset (-zero point), the cell and output requantization, the
    quantized cell clip, the cell scale power (log2 of the cell scale) and the four gates."""

    time_major: bool
    batch_size: int
    time_steps: int
    input_size: int
    hidden_size: int
    input_offset: int
    forget_to_cell_multiplier: int
    forget_to_cell_shift: int
    input_to_cell_multiplier: int
    input_to_cell_shift: int
    cell_clip: int
    cell_scale_power: int
    output_multiplier: int
    output_shift: int
    output_offset: int
    forget_gate: LstmGate
    input_gate: LstmGate
    cell_gate: LstmGate
    output_gate: LstmGate


@dataclass
class LstmContext:
    """``cmsis_nn_lstm_context`` less its scratch buffers: the int16 cell state [B·H] (updated in place) and the
    hidden state [B·H] or None (NULL)."""

    cell_state: np.ndarray
    hidden_state: np.ndarray | None = None


def vector_sum_s8(vector_cols: int, vector_rows: int, vector_data: np.ndarray, lhs_offset: int, rhs_offset: int = 0,
                  bias_data: np.ndarray | None = None) -> np.ndarray:
    """``arm_vector_sum_s8``: per row r of the int8 [rows, cols] matrix, bias[r] + lhs_offset · (Σ_j w[r, j] +
    cols · rhs_offset) (int32, wrapping)."""
    w = np.asarray(vector_data, np.int64).reshape(vector_rows, vector_cols)
    out = np.zeros(vector_rows, np.int64) if bias_data is None else np.asarray(bias_data, np.int64).copy()
    if lhs_offset:
        out += (w.sum(axis=1) + (vector_cols * rhs_offset if rhs_offset else 0)) * lhs_offset
    return core.wrap(out, 32).astype(np.int32)


def vector_sum_s8_s64(vector_cols: int, vector_rows: int, vector_data: np.ndarray, lhs_offset: int,
                      bias_data: np.ndarray | None = None) -> np.ndarray:
    """``arm_vector_sum_s8_s64``: bias[r] + lhs_offset · Σ_j w[r, j] as int64."""
    w = np.asarray(vector_data, np.int64).reshape(vector_rows, vector_cols)
    out = np.zeros(vector_rows, np.int64) if bias_data is None else np.asarray(bias_data, np.int64).copy()
    if lhs_offset:
        out += w.sum(axis=1) * lhs_offset
    return out




def requantize(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """``arm_nn_requantize`` (portable C, double rounding; TFLite's MultiplyByQuantizedMultiplier) of int32 values
    held in int64; int64 results (int32 values, wrapped as the C cast). Unchecked: the kernel's own parameters."""
    return core.wrap(core.Requant(multiplier, shift)(np.asarray(x, np.int64)), 32)


def reduce_multiplier(multiplier) -> np.ndarray:
    """``REDUCE_MULTIPLIER``: a Q31 multiplier rounded to Q15 (0x7FFF at the top)."""
    m = np.asarray(multiplier, np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def requantize_s64(x: np.ndarray, reduced_multiplier, shift) -> np.ndarray:
    """``arm_nn_requantize_s64``: ``r = int32((x · Qr) >> (14 − shift)); (r + 1) >> 1`` (int32 wraps as in C);
    x within ±2^47, shift <= 14."""
    shift = np.asarray(shift, np.int64)
    if np.any(shift > 14):
        raise AttributeValueError(f"shift: arm_nn_requantize_s64 takes shifts <= 14, got {int(np.max(shift))}")
    r = core.wrap((np.asarray(x, np.int64) * np.asarray(reduced_multiplier, np.int64)) >> (14 - shift), 32)
    return core.wrap(r + 1, 32) >> 1


class CmsisLstm:
    """A prepared ``arm_lstm_unidirectional_s8`` / ``_s16``: ``run(x [T, B, I], h [B, H] or None, c [B, H])`` ->
    ``(y [T, B, H], (h, c))``, batch rows at once (they are independent sequences in both layouts)."""

    def __init__(self, params: LstmParams, variant: str):
        if variant not in VARIANTS:
            raise AttributeValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
        self.p, self.variant = params, variant
        H, I = params.hidden_size, params.input_size
        self.H, self.I = H, I
        gates = (params.input_gate, params.forget_gate, params.cell_gate, params.output_gate)  # columns i, f, c, o
        for name, g in zip("ifco", gates, strict=True):
            if np.size(g.input_weights) != H * I or np.size(g.hidden_weights) != H * H:
                raise ShapeError(f"{name} gate: expected input weights of {H}x{I} and hidden weights of {H}x{H} "
                                 f"elements, got {np.size(g.input_weights)} and {np.size(g.hidden_weights)}")
            if np.size(g.input_effective_bias) != H or np.size(g.hidden_effective_bias) != H:
                raise ShapeError(f"{name} gate: expected effective biases of {H} elements")
        amax = 128 if variant == "s8" else 32768
        self.W = IntMatrix(np.concatenate([np.reshape(g.input_weights, (H, I)).T for g in gates], axis=1),
                           a_absmax=amax)
        self.R = IntMatrix(np.concatenate([np.reshape(g.hidden_weights, (H, H)).T for g in gates], axis=1),
                           a_absmax=amax)
        self.eff_in = np.concatenate([np.asarray(g.input_effective_bias, np.int64) for g in gates])
        self.eff_h = np.concatenate([np.asarray(g.hidden_effective_bias, np.int64) for g in gates])
        self.in_m = np.repeat([g.input_multiplier for g in gates], H)
        self.in_s = np.repeat([g.input_shift for g in gates], H)
        self.h_m = np.repeat([g.hidden_multiplier for g in gates], H)
        self.h_s = np.repeat([g.hidden_shift for g in gates], H)
        if variant == "s16":
            self.in_m, self.h_m = reduce_multiplier(self.in_m), reduce_multiplier(self.h_m)
        bound = lambda K, b: K * 128 * 128 + scan_absmax(b)  # noqa: E731 - int32 accumulators (s8)
        self.wrap_in = variant == "s8" and bound(I, self.eff_in) >= 2**31
        self.wrap_h = variant == "s8" and bound(H, self.eff_h) >= 2**31
        self.tables = [Lut16("tanh" if g.activation_type == ARM_TANH else "logistic", 0) for g in gates]
        self.tanh_cell = Lut16("tanh", params.cell_scale_power + 12)
        self.out_lo, self.out_hi = (-128, 127) if variant == "s8" else (-32768, 32767)
        clip = params.cell_clip
        self.cell_lo, self.cell_hi = (-clip, clip) if clip > 0 else (-32768, 32767)

    def _fc(self, M: IntMatrix, v: np.ndarray, bias: np.ndarray, m, s, wrap: bool) -> np.ndarray:
        acc = M.matmul(v, check=False) + bias
        if self.variant == "s16":
            return requantize_s64(acc, m, s)
        return requantize(core.wrap(acc, 32) if wrap else acc, m, s)

    def micro_spec(self) -> micro_lstm.MicroLstmSpec:
        """This kernel as the compiled loop reads it (:mod:`fusedrnn.targets.micro_lstm`)."""
        p, H = self.p, self.H
        cells = (self.cell_lo, self.cell_hi)
        return micro_lstm.MicroLstmSpec(
            wide=self.variant == "s16", fc_kind="mbqm" if self.variant == "s8" else "requantize_s64", sat_rec=False,
            sat_ig=False, W=self.W.b, R=self.R.b, in_bias=self.eff_in, rec_bias=self.eff_h,
            in_req=tuple((self.in_m[g * H], self.in_s[g * H]) for g in range(4)),
            rec_req=tuple((self.h_m[g * H], self.h_s[g * H]) for g in range(4)),
            fc_req=(p.forget_to_cell_multiplier, p.forget_to_cell_shift),
            ic_req=(p.input_to_cell_multiplier, p.input_to_cell_shift), hid_req=(p.output_multiplier, p.output_shift),
            tables=tuple(t.table for t in self.tables), tanh_c=self.tanh_cell.table, zp_h=p.output_offset,
            act_range=(self.out_lo, self.out_hi), cell_ranges=(cells, cells))

    def run(self, x: np.ndarray, h: np.ndarray | None, c: np.ndarray, *, engine: str = "auto") -> tuple[np.ndarray,
                                                                                                      tuple]:
        """``engine``: "auto" (the compiled loop where it loads and takes the parameters), "numpy" or
        "compiled"."""
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[2] != self.I:
            raise ShapeError(f"x: expected [T, B, {self.I}], got {x.shape}")
        T, B, _ = x.shape
        H, p = self.H, self.p
        dt = _ACT_DTYPE[self.variant]
        plan = micro_lstm.plan_of(self, engine) if T else None
        if plan is not None:  # h in its type as below; x and c as given (run declines values beyond their types)
            out = micro_lstm.run(micro_lstm.library(engine), plan, x, None if h is None else np.asarray(h, dt),
                                 np.asarray(c).reshape(B, H))
            if out is not None:
                return out
        gin = core.clamp(self._fc(self.W, x.reshape(T * B, self.I), self.eff_in, self.in_m, self.in_s, self.wrap_in),
                     -32768, 32767).reshape(T, B, 4 * H)
        c = np.asarray(c, np.int64).reshape(B, H)
        hq = None if h is None else np.asarray(h, dt).reshape(B, H)
        y = np.empty((T, B, H), dt)
        for t in range(T):
            pre = gin[t]
            if hq is not None:
                pre = core.clamp(self._fc(self.R, hq, self.eff_h, self.h_m, self.h_s, self.wrap_h) + pre, -32768, 32767)
            i, f, g, o = (self.tables[k](pre[:, k * H:(k + 1) * H])
                          for k in range(4))
            c = core.clamp(requantize(f * c, p.forget_to_cell_multiplier, p.forget_to_cell_shift), -32768, 32767)
            c = core.clamp(requantize(i * g, p.input_to_cell_multiplier, p.input_to_cell_shift) + c, self.cell_lo,
                       self.cell_hi)
            th = self.tanh_cell(c)
            hq = core.clamp(requantize(o * th, p.output_multiplier, p.output_shift) + p.output_offset, self.out_lo,
                        self.out_hi).astype(dt)
            y[t] = hq
        return y, (hq, c.astype(np.int16))


def params_from_quantized(q: QuantizedLstm, *, time_major: bool = True, batch_size: int = 1,
                          time_steps: int = 1) -> LstmParams:
    """What TFLM's CMSIS-NN kernel (``CMSIS_NN_PortOpData``) passes to CMSIS-NN for a .tflite LSTM's tensors: TFLM's
    multipliers (:class:`~fusedrnn.targets.tflite_quant.TflmLstmParams`), effective biases from
    ``arm_vector_sum_s8`` (s8) / ``_s8_s64`` (s16) with the input offset -zp_x and the hidden offset -zp_h."""
    tp = TflmLstmParams.prepare(q)
    H, I = q.hidden_size, q.input_size
    s16 = q.activation == "int16"
    vsum = vector_sum_s8_s64 if s16 else (lambda c, r, w, off, b: vector_sum_s8(c, r, w, off, 0, b))
    gates = []
    for g in range(4):
        W, R = np.ascontiguousarray(q.W[g]), np.ascontiguousarray(q.R[g])
        act = ARM_SIGMOID if g != 2 or q.cell_activation == "SIGMOID" else ARM_TANH
        gates.append(LstmGate(tp.input_fc[g][0], tp.input_fc[g][1], W, vsum(I, H, W, -q.x_zp, q.b[g]),
                              tp.recurrent_fc[g][0], tp.recurrent_fc[g][1], R, vsum(H, H, R, -q.h_zp, None),
                              np.asarray(q.b[g]), act))
    i, f, c, o = gates
    return LstmParams(bool(time_major), int(batch_size), int(time_steps), I, H, -q.x_zp, *tp.forget_cell,
                      *tp.input_cell, tp.quantized_cell_clip, tp.cell_state_scale_power, *tp.hidden, q.h_zp,
                      f, i, c, o)
