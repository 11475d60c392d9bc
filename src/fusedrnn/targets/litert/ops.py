"""TFLite recurrent operators as callables with persistent state (litert.md sections 1, 3 and 7).

Each op holds its variable tensors (the LSTM's output and cell state, the RNN's hidden state) between calls,
exactly as the interpreter does: a second call continues from the state the first one left. ``reset()`` restores
the initial state (``reset_all_variables()``: int8 output state = its zero point, everything else 0).

Inputs and outputs use the op's own layout and dtype: ``time_major`` [T, B, ·] or batch-major [B, T, ·]; float32
for float and hybrid ops, int8 for the 8x8_16 LSTM.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import AttributeValueError, DTypeError, InputError, ShapeError, UnsupportedFeatureError
from .lstm_float import FloatLstmKernel
from .lstm_hybrid import HybridLstmKernel
from .lstm_integer import IntegerLstmKernel
from .lstm_integer8 import Integer8x8_8LstmKernel, N_INTERMEDIATES_8x8_8
from .slots import N_INTERMEDIATES, LstmOptions, LstmTensors


def make_lstm_kernel(t: LstmTensors, opts: LstmOptions, *, rounding: str = "double", lstm_op: bool = False):
    """The prepared kernel for one LSTM direction: float, hybrid or integer by the tensor types.

    ``lstm_op``: the one-step LSTM op, whose kernel also runs an integer LSTM with 12 intermediate tensors
    (8x8_8; the sequence ops, like LiteRT's, take 5: 8x8_16) and sparse hybrid weights (when
    input_to_output_weights is sparse, as LiteRT decides). Sparse weights anywhere else are refused: LiteRT's
    kernels would read their stored values as a dense matrix."""
    kind = t.kind()
    if kind == "hybrid":
        w = t["input_to_output_weights"]
        return HybridLstmKernel(t, opts, sparse_ok=lstm_op and w is not None and w.sparsity is not None)
    sparse = [k for k, v in enumerate(t.slots) if v is not None and v.sparsity is not None]
    if sparse:
        raise UnsupportedFeatureError(f"slot {sparse[0]}: sparse weights run in LiteRT's hybrid LSTM op only (the "
                                      f"{kind} kernel reads the stored values as a dense matrix)")
    if kind == "float":
        return FloatLstmKernel(t, opts)
    n = len(t.intermediates)
    if n == N_INTERMEDIATES_8x8_8 and lstm_op:
        return Integer8x8_8LstmKernel(t, opts, rounding=rounding, output=t.output)
    if n not in (0, N_INTERMEDIATES):
        raise AttributeValueError(f"intermediates: the integer LSTM takes {N_INTERMEDIATES} intermediate tensors "
                                  f"(8x8_16){f' or {N_INTERMEDIATES_8x8_8} (8x8_8)' if lstm_op else ''}, got {n}")
    return IntegerLstmKernel(t, opts, rounding=rounding)


def _check_input(x, name: str, dtype: np.dtype, rank: int, last: int, layout: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != dtype:
        if dtype == np.float32 and x.dtype.kind == "f":
            x = x.astype(np.float32)
        else:
            raise DTypeError(f"{name}: expected {dtype} data for this op, got {x.dtype}")
    if x.ndim != rank or x.shape[-1] != last or 0 in x.shape:
        raise ShapeError(f"{name}: expected a non-empty {layout} array with {last} features in the last axis, got "
                         f"shape {x.shape}")
    return x


class _Stateful:
    """Persistent state handling shared by the ops: ``state`` is None until the first call (or after reset)."""

    def __init__(self):
        self.state = None

    def reset(self) -> None:
        """Forget the carried state (``interpreter.reset_all_variables()``)."""
        self.state = None

    def _kernels(self) -> list:
        return [self.fw, self.bw] if hasattr(self, "bw") else [self.kernel]

    def set_state(self, *arrays) -> None:
        """Set the variable tensors the next call starts from, as ``SetInput`` on a state tensor (or
        ``interpreter.set_tensor`` on it) does: LSTM ``(h, c)``, bidirectional LSTM ``(fw_h, fw_c, bw_h, bw_c)``,
        RNN ``(h,)``, bidirectional RNN ``(fw_h, bw_h)``; each [batch, width] of the state's dtype (int8 h and int16
        c for the 8x8_16 LSTM). The batch size is the arrays'; ``reset()`` goes back to the initial state."""
        kernels = self._kernels()
        if not arrays:
            raise InputError("state: expected the op's state arrays, got none")
        B = np.shape(arrays[0])[0] if np.ndim(arrays[0]) else 0
        templates = [k.initial_state(B) for k in kernels]
        n = sum(len(t) for t in templates)
        if len(arrays) != n:
            raise InputError(f"state: this op holds {n} state tensor(s) ({self.name}), got {len(arrays)}")
        it = iter(arrays)
        state = []
        for tmpl in templates:
            parts = []
            for j, t in enumerate(tmpl):
                a = np.asarray(next(it))
                if a.shape != t.shape:
                    raise ShapeError(f"state[{len(parts) + j}]: expected shape {t.shape} [batch, width], got {a.shape}")
                if a.dtype != t.dtype:
                    if t.dtype.kind == "f" and a.dtype.kind in "fiu":
                        a = a.astype(t.dtype)
                    else:
                        raise DTypeError(f"state: expected {t.dtype} values, got {a.dtype}")
                parts.append(np.array(a, t.dtype))
            state.append(tuple(parts))
        self.state = state

    def _state_for(self, kernels, B: int):
        if self.state is None:
            return [k.initial_state(B) for k in kernels]
        have = self.state[0][0].shape[0]
        if have != B:
            raise ShapeError(f"x: the op carries state for batch size {have} from the previous call, got batch "
                             f"{B}; call reset() to start over with another batch size")
        return self.state


class SequenceLSTM(_Stateful):
    """UNIDIRECTIONAL_SEQUENCE_LSTM (``sequence=True``) or LSTM (one step, x [B, I]) with persistent state."""

    def __init__(self, tensors: LstmTensors, options: LstmOptions | None = None, *, sequence: bool = True,
                 rounding: str = "double", name: str = "UNIDIRECTIONAL_SEQUENCE_LSTM"):
        super().__init__()
        self.options = options or LstmOptions()
        if not sequence:  # the one-step LSTM op runs its whole batch at once, like the time-major sequence path
            self.options = replace(self.options, time_major=True)
        elif tensors["recurrent_to_forget_weights"] is not None:
            # the sequence op reads a recurrent matrix as diagonal when its tensor has rank 1 (whatever the option)
            self.options = replace(self.options, diagonal_recurrent_tensors=tensors.diagonal)
        self.tensors = tensors
        self.kernel = make_lstm_kernel(tensors, self.options, rounding=rounding, lstm_op=not sequence)
        self.sequence, self.name = sequence, name

    @property
    def kind(self) -> str:
        return self.kernel.kind

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int8) if self.kind == "integer" else np.dtype(np.float32)

    def __call__(self, x) -> np.ndarray:
        k = self.kernel
        if not self.sequence:
            x = _check_input(x, "x", self.dtype, 2, k.n_input, "[batch, input]")
            xt = x[None]
        else:
            tm = self.options.time_major
            x = _check_input(x, "x", self.dtype, 3, k.n_input, "[time, batch, input]" if tm else "[batch, time, input]")
            xt = x if tm else x.transpose(1, 0, 2)
        (st,) = self._state_for([k], xt.shape[1])
        y, st = k.run(np.ascontiguousarray(xt), st)
        self.state = [st]
        if not self.sequence:
            return y[0]
        return y if self.options.time_major else np.ascontiguousarray(y.transpose(1, 0, 2))

    def __repr__(self) -> str:
        k = self.kernel
        return (f"{self.name}({self.kind}, n_input={k.n_input}, n_cell={k.n_cell}, n_output={k.n_output}, "
                f"{self.options})")


class BidirectionalSequenceLSTM(_Stateful):
    """BIDIRECTIONAL_SEQUENCE_LSTM (float and hybrid): returns (fw_output, bw_output), or the merged output when
    ``merge_outputs``. The backward cell walks time in reverse and writes each output at its own time index.
    ``aux_input`` with aux weights is added to both cells ("stacking"); without aux weights the backward cell reads
    ``aux_input`` instead of the input."""

    name = "BIDIRECTIONAL_SEQUENCE_LSTM"

    def __init__(self, fw: LstmTensors, bw: LstmTensors, options: LstmOptions | None = None):
        super().__init__()
        self.options = options or LstmOptions(time_major=True)
        self.fw, self.bw = make_lstm_kernel(fw, self.options), make_lstm_kernel(bw, self.options)
        if "integer" in (self.fw.kind, self.bw.kind):
            raise UnsupportedFeatureError("input: BIDIRECTIONAL_SEQUENCE_LSTM has no integer kernel in TFLite "
                                          "(float and hybrid only)")
        self.kind = self.fw.kind
        self.stacking = self.fw.n_aux > 0

    def __call__(self, x, aux_input=None):
        tm = self.options.time_major
        layout = "[time, batch, input]" if tm else "[batch, time, input]"
        x = _check_input(x, "x", np.dtype(np.float32), 3, self.fw.n_input, layout)
        xt = x if tm else x.transpose(1, 0, 2)
        at = None
        if aux_input is not None:
            width = self.fw.n_aux if self.stacking else self.bw.n_input
            a = _check_input(aux_input, "aux_input", np.dtype(np.float32), 3, width, layout)
            at = a if tm else a.transpose(1, 0, 2)
            if at.shape[:2] != xt.shape[:2]:
                raise ShapeError(f"aux_input: expected the time and batch sizes of x {x.shape[:2]}, got {a.shape}")
        elif self.stacking:
            raise ShapeError("aux_input: this op has aux weights and needs aux_input, got None")
        if not tm and self.options.merge_outputs and xt.shape[1] > 1:
            raise UnsupportedFeatureError("merge_outputs: TFLite's batch-major kernel addresses batch row b's output "
                                          "state at b x (merged width), past the state buffer for the last rows "
                                          "(litert.md section 8); use time_major, separate outputs or batch 1")
        bw_x, aux = (xt, at) if self.stacking or at is None else (at, None)
        sf, sb = self._state_for([self.fw, self.bw], xt.shape[1])
        yf, sf = self.fw.run(np.ascontiguousarray(xt), sf, aux=aux if self.stacking else None)
        yb, sb = self.bw.run(np.ascontiguousarray(bw_x), sb, reverse=True, aux=aux if self.stacking else None)
        self.state = [sf, sb]
        if not tm:
            yf, yb = yf.transpose(1, 0, 2), yb.transpose(1, 0, 2)
        if self.options.merge_outputs:
            return np.ascontiguousarray(np.concatenate([yf, yb], axis=2))
        return np.ascontiguousarray(yf), np.ascontiguousarray(yb)
