"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN (float and hybrid) and the custom float
UNIDIRECTIONAL_SEQUENCE_GRU (litert.md section 1).

RNN step (``RnnBatchStep``): ``h = act(b + W·x [+ A·aux] + R·h_prev)`` accumulated in float32 in that order; the
hybrid form quantizes x, aux and h_prev per batch row (symmetric or asymmetric) and adds
``float32(dot) · float32(s_row · s_w)`` as the hybrid LSTM does. The hidden state is a variable tensor that
persists across calls. GRU (time-major, float): ``[r u] = σ([x, h]·Wgᵀ + bg)``, ``c = tanh([x, r⊙h]·Wcᵀ + bc)``,
``h' = (1 − u)⊙c + u⊙h``; its state comes from input 1 on every call (it is not persisted by the kernel).
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeValueError, DTypeError, ShapeError, UnsupportedFeatureError
from ...numerics.affine import tflite_quantize_rows_asymmetric, tflite_quantize_rows_symmetric
from .lstm_hybrid import _QuantMatrix
from .ops import _check_input, _Stateful
from .slots import BI_RNN_SLOTS, FUSED_ACTIVATIONS, GRU_SLOTS, RNN_SLOTS, apply_fused_activation, dequantized

_F32 = np.float32


class RnnKernel:
    """One RNN direction: weights W [units, input], R [units, units], bias [units], optional aux weights."""

    def __init__(self, W, R, b, aux=None, *, activation: str = "TANH", asymmetric: bool = False):
        if W is None or R is None or W.data is None or R.data is None:
            raise AttributeValueError("weights / recurrent_weights: required constant tensors are missing")
        if activation not in FUSED_ACTIVATIONS:
            raise AttributeValueError(f"fused_activation_function: expected one of {FUSED_ACTIVATIONS}, got "
                                      f"{activation!r}")
        for name, t in (("weights", W), ("recurrent_weights", R), ("aux_weights", aux)):
            if t is not None and t.sparsity is not None:
                raise UnsupportedFeatureError(f"{name}: sparse weights: LiteRT's RNN kernels read the stored values "
                                              f"as a dense matrix")
        H, I = W.shape
        if tuple(R.shape) != (H, H):
            raise ShapeError(f"recurrent_weights: expected shape {(H, H)}, got {tuple(R.shape)}")
        if b is not None and tuple(b.shape) != (H,):
            raise ShapeError(f"bias: expected shape {(H,)}, got {tuple(b.shape)}")
        self.n_cell = self.n_output = H
        self.n_input = I
        self.n_aux = 0 if aux is None else aux.shape[1]
        self.act, self.asym = activation, asymmetric
        self.kind = "hybrid" if W.type_name in ("INT8", "UINT8") else "float"
        if self.kind == "hybrid":
            self.W, self.R = _QuantMatrix([W], "weights"), _QuantMatrix([R], "recurrent_weights")
            self.A = None if aux is None else _QuantMatrix([aux], "aux_weights")
        else:
            self.Wt = np.ascontiguousarray(dequantized(W).T)
            self.Rt = np.ascontiguousarray(dequantized(R).T)
            self.At = None if aux is None else np.ascontiguousarray(dequantized(aux).T)
        self.b = np.zeros(H, _F32) if b is None else dequantized(b)

    def initial_state(self, B: int):
        return (np.zeros((B, self.n_output), _F32),)

    def _quantize(self, v):
        if self.asym:
            return tflite_quantize_rows_asymmetric(v)
        q, s = tflite_quantize_rows_symmetric(v)
        return q, s, None

    def run(self, x, state, *, reverse: bool = False, aux=None):
        T, B, I = x.shape
        H = self.n_cell
        xf = np.ascontiguousarray(x, _F32).reshape(T * B, I)
        if self.kind == "hybrid":
            acc_in = self.b + self.W.term(*self._quantize(xf))
            if self.n_aux:
                acc_in = acc_in + self.A.term(*self._quantize(np.ascontiguousarray(aux, _F32).reshape(T * B, -1)))
        else:
            acc_in = self.b + xf @ self.Wt
            if self.n_aux:
                acc_in = acc_in + np.ascontiguousarray(aux, _F32).reshape(T * B, -1) @ self.At
        acc_in = acc_in.astype(_F32).reshape(T, B, H)
        (h,) = state
        h = np.array(h, _F32)
        y = np.empty((T, B, H), _F32)
        for s in (range(T - 1, -1, -1) if reverse else range(T)):
            acc = acc_in[s].copy()
            if self.kind == "hybrid":
                if h.any():
                    acc += self.R.term(*self._quantize(h))
            else:
                acc += h @ self.Rt
            h = apply_fused_activation(acc, self.act)
            y[s] = h
        return y, (h,)


class SequenceRNN(_Stateful):
    """RNN (one step, x [B, I]) or UNIDIRECTIONAL_SEQUENCE_RNN with a persistent hidden state."""

    def __init__(self, kernel: RnnKernel, *, sequence: bool = True, time_major: bool = False,
                 name: str = "UNIDIRECTIONAL_SEQUENCE_RNN"):
        super().__init__()
        self.kernel, self.sequence, self.time_major, self.name = kernel, sequence, time_major, name
        self.kind = kernel.kind

    def __call__(self, x):
        k = self.kernel
        if not self.sequence:
            xt = _check_input(x, "x", np.dtype(np.float32), 2, k.n_input, "[batch, input]")[None]
        else:
            x = _check_input(x, "x", np.dtype(np.float32), 3, k.n_input,
                             "[time, batch, input]" if self.time_major else "[batch, time, input]")
            xt = x if self.time_major else x.transpose(1, 0, 2)
        (st,) = self._state_for([k], xt.shape[1])
        y, st = k.run(xt, st)
        self.state = [st]
        if not self.sequence:
            return y[0]
        return y if self.time_major else np.ascontiguousarray(y.transpose(1, 0, 2))


class BidirectionalSequenceRNN(_Stateful):
    """BIDIRECTIONAL_SEQUENCE_RNN: (fw_output, bw_output), or merged when ``merge_outputs``; aux input as in the
    bidirectional LSTM (stacking with aux weights, else the backward cell reads the aux input)."""

    name = "BIDIRECTIONAL_SEQUENCE_RNN"

    def __init__(self, fw: RnnKernel, bw: RnnKernel, *, time_major: bool = True, merge_outputs: bool = False):
        super().__init__()
        self.fw, self.bw, self.time_major, self.merge = fw, bw, time_major, merge_outputs
        self.kind = fw.kind
        self.stacking = fw.n_aux > 0

    def __call__(self, x, aux_input=None):
        tm = self.time_major
        layout = "[time, batch, input]" if tm else "[batch, time, input]"
        x = _check_input(x, "x", np.dtype(np.float32), 3, self.fw.n_input, layout)
        xt = x if tm else x.transpose(1, 0, 2)
        T, B, I = xt.shape
        aux = None
        bw_x = xt
        if aux_input is not None:
            a = np.asarray(aux_input, np.float32)
            if a.ndim != 3 or a.shape[:2] != x.shape[:2]:
                raise ShapeError(f"aux_input: expected the time and batch sizes of x {x.shape[:2]} and 3 axes, got "
                                 f"{a.shape}")
            if self.stacking:
                if a.shape[2] != self.fw.n_aux:
                    raise ShapeError(f"aux_input: expected {self.fw.n_aux} features, got shape {a.shape}")
                aux = self._aux_as_read(a, T, B, I)
            elif tm:  # non-stacking: the backward cell reads aux_input (batch-major: the kernel reads x anyway)
                a = _check_input(a, "aux_input", np.dtype(np.float32), 3, self.bw.n_input, layout)
                bw_x = a
        elif self.stacking:
            raise ShapeError("aux_input: this op has aux weights and needs aux_input, got None")
        sf, sb = self._state_for([self.fw, self.bw], B)
        # the time-major hybrid kernel runs its whole sequence loop once per time step (an extra outer loop)
        reps = T if tm and self.kind == "hybrid" else 1
        for _ in range(reps):
            yf, sf = self.fw.run(xt, sf, aux=aux)
            yb, sb = self.bw.run(bw_x, sb, reverse=True, aux=aux)
        self.state = [sf, sb]
        if not tm:
            yf, yb = yf.transpose(1, 0, 2), yb.transpose(1, 0, 2)
        if self.merge:
            return np.ascontiguousarray(np.concatenate([yf, yb], axis=2))
        return np.ascontiguousarray(yf), np.ascontiguousarray(yb)

    def _aux_as_read(self, a: np.ndarray, T: int, B: int, I: int) -> np.ndarray:
        """The aux rows [T, B, n_aux] the kernel reads: its time-major paths (and the batch-major hybrid one) step
        through aux_input with input_size strides (reproduced); reads past the buffer are undefined (raise)."""
        n = a.shape[2]
        s = np.arange(T)[:, None]
        b = np.arange(B)[None, :]
        if self.time_major:
            off = s * I * B + b * n
        elif self.kind == "hybrid":
            off = b * I * T + s * I
        else:
            off = b * n * T + s * n
        idx = off[:, :, None] + np.arange(n)
        if idx.max() >= a.size:
            raise UnsupportedFeatureError(f"aux_input: with {n} aux features and input_size {I} the TFLite kernel "
                                          f"reads past the aux input buffer (it strides by input_size; undefined)")
        return a.reshape(-1)[idx]


class SequenceGRU:
    """The custom UNIDIRECTIONAL_SEQUENCE_GRU (float, time-major): ``op(x [T, B, I], h0 [B, H]) -> (y, h_T)``."""

    name = "UNIDIRECTIONAL_SEQUENCE_GRU"
    kind = "float"

    def __init__(self, gate_weight, gate_bias, candidate_weight, candidate_bias, h0=None):
        Wg, bg, Wc, bc = (dequantized(t) for t in (gate_weight, gate_bias, candidate_weight, candidate_bias))
        if any(v is None for v in (Wg, bg, Wc, bc)):
            raise AttributeValueError("gate_weight / gate_bias / candidate_weight / candidate_bias: required "
                                      "constant tensors are missing")
        H = Wc.shape[0]
        I = Wc.shape[1] - H
        if Wg.shape != (2 * H, I + H) or bg.shape != (2 * H,) or bc.shape != (H,) or I < 1:
            raise ShapeError(f"gate_weight: expected shape {(2 * H, I + H)} with gate_bias {(2 * H,)} and "
                             f"candidate_bias {(H,)}, got {Wg.shape}, {bg.shape}, {bc.shape}")
        self.n_input, self.n_cell, self.n_output = I, H, H
        self.Wgx, self.Wgh = np.ascontiguousarray(Wg[:, :I].T), np.ascontiguousarray(Wg[:, I:].T)
        self.Wcx, self.Wch = np.ascontiguousarray(Wc[:, :I].T), np.ascontiguousarray(Wc[:, I:].T)
        self.bg, self.bc = bg, bc
        self.h0 = None if h0 is None else np.asarray(h0, _F32)

    def reset(self) -> None:  # the kernel keeps no state of its own
        pass

    def __call__(self, x, h0=None):
        x = _check_input(x, "x", np.dtype(np.float32), 3, self.n_input, "[time, batch, input]")
        T, B, _ = x.shape
        h = h0 if h0 is not None else (self.h0 if self.h0 is not None else np.zeros((B, self.n_cell), _F32))
        h = np.asarray(h, _F32)
        if h.shape != (B, self.n_cell):
            raise ShapeError(f"h0: expected shape {(B, self.n_cell)} [batch, units], got {h.shape}")
        gx = (x.reshape(T * B, -1) @ self.Wgx + self.bg).astype(_F32).reshape(T, B, -1)
        cx = (x.reshape(T * B, -1) @ self.Wcx + self.bc).astype(_F32).reshape(T, B, -1)
        y = np.empty((T, B, self.n_cell), _F32)
        H = self.n_cell
        for t in range(T):
            g = gx[t] + h @ self.Wgh
            g = (1.0 / (1.0 + np.exp(-g.astype(np.float64)))).astype(_F32)
            r, u = g[:, :H], g[:, H:]
            c = np.tanh(cx[t] + (r * h) @ self.Wch).astype(_F32)
            h = (u * h + (_F32(1) - u) * c).astype(_F32)
            y[t] = h
        return y, h


RNN_WEIGHT_TYPES = ("FLOAT32", "INT8", "UINT8")
"""The weight types the RNN kernels evaluate (the interpreter prepares others, e.g. FLOAT16, and fails to run)."""


def check_rnn_prepare(op, x, W, R, b, h, *, time_major: bool) -> None:
    """The checks of the RNN kernels' Prepare (basic_rnn.cc, unidirectional_sequence_rnn.cc): ranks (input 2 or 3,
    weights 2, recurrent weights 2, bias 1, hidden state 2), input size = weights' columns, units = weights' rows
    = bias = both recurrent dimensions, hidden state [batch, units], float32 input, equal weight types, and a
    weight type the kernels evaluate. A model the interpreter refuses raises ShapeError / DTypeError /
    UnsupportedFeatureError naming the tensor."""
    where = f"op {op.index} ({op.name})"
    need = {"input": (x, 2 if op.name == "RNN" else 3), "weights": (W, 2), "recurrent_weights": (R, 2),
            "bias": (b, 1), "hidden_state": (h, 2)}
    for name, (t, rank) in need.items():
        if t is None:
            raise AttributeValueError(f"{where} {name}: required tensor is missing")
        if len(t.shape) != rank:
            raise ShapeError(f"{where} {name}: expected rank {rank}, got shape {tuple(t.shape)}")
    units = b.shape[0]
    if op.name == "RNN":
        batch = x.shape[0]
    else:
        batch = x.shape[1] if time_major else x.shape[0]
    checks = (("input", x.shape[-1], W.shape[1], "the weights' columns"),
              ("weights", W.shape[0], units, "the bias size (units)"),
              ("recurrent_weights", R.shape[0], units, "the bias size (units)"),
              ("recurrent_weights", R.shape[1], units, "the bias size (units)"),
              ("hidden_state", h.shape[0], batch, "the batch size"),
              ("hidden_state", h.shape[1], units, "the units"))
    for name, got, want, what in checks:
        if got != want:
            raise ShapeError(f"{where} {name}: expected {what} ({want}), got shape {tuple(need[name][0].shape)}")
    if x.type_name != "FLOAT32":
        raise DTypeError(f"{where} input: expected FLOAT32, got {x.type_name}")
    if W.type_name != R.type_name:
        raise DTypeError(f"{where} recurrent_weights: expected the weights' type {W.type_name}, got {R.type_name}")
    if W.type_name not in RNN_WEIGHT_TYPES:
        raise UnsupportedFeatureError(f"{where} weights: expected one of {', '.join(RNN_WEIGHT_TYPES)} (the types the "
                                      f"kernel evaluates), got {W.type_name}")


def build_rnn_op(info, op):
    """The fusedrnn op of an RNN-family or GRU node of a read model."""
    def get(k):
        return info.tensors[op.inputs[k]] if k < len(op.inputs) and op.inputs[k] >= 0 else None

    o = op.options
    act = o.get("fused_activation_function", "TANH")
    asym = bool(o.get("asymmetric_quantize_inputs", False))
    if op.name == "UNIDIRECTIONAL_SEQUENCE_GRU":
        s = GRU_SLOTS
        h0 = get(s["hidden_state"])
        return SequenceGRU(get(s["gate_weight"]), get(s["gate_bias"]), get(s["candidate_weight"]),
                           get(s["candidate_bias"]), None if h0 is None else h0.data)
    if op.name in ("RNN", "UNIDIRECTIONAL_SEQUENCE_RNN"):
        s = RNN_SLOTS
        check_rnn_prepare(op, *(get(s[k]) for k in ("input", "weights", "recurrent_weights", "bias",
                                                     "hidden_state")), time_major=bool(o.get("time_major", False)))
        k = RnnKernel(get(s["weights"]), get(s["recurrent_weights"]), get(s["bias"]), activation=act, asymmetric=asym)
        return SequenceRNN(k, sequence=op.name != "RNN", time_major=bool(o.get("time_major", False)), name=op.name)
    if op.name == "BIDIRECTIONAL_SEQUENCE_RNN":
        s = BI_RNN_SLOTS
        fw, bw = (RnnKernel(get(s[f"{d}_weights"]), get(s[f"{d}_recurrent_weights"]), get(s[f"{d}_bias"]),
                            get(s[f"{d}_aux_weights"]), activation=act, asymmetric=asym) for d in ("fw", "bw"))
        return BidirectionalSequenceRNN(fw, bw, time_major=bool(o.get("time_major", True)),
                                        merge_outputs=bool(o.get("merge_outputs", False)))
    raise UnsupportedFeatureError(f"op {op.index}: {op.name} is not an RNN-family op")
