"""The LSTM op with ``kernel_type = BASIC`` (LiteRT's ``lstm::basic``, the legacy cell): five inputs (input,
previous activation, weights, biases, previous state), four outputs (activation, state, the concatenation
[input, previous activation] and the gates' pre-activations); the op copies its activation and state back into its
previous-activation and previous-state tensors, so the state persists across calls.

``[i, g, f, o] = W·[x, h] + b`` (gate blocks in that order: input, input modulation, forget, output),
``c = i·tanh(g) + f·c_prev`` (sigmoids on i, f, o), ``h = o·tanh(c)``. Two type combinations run:

* float32 throughout (``1 / (1 + exp(-x))``, ``tanh``);
* quantized (``LstmCell<4>``): uint8 input and activation at scale 1/128, zero point 128 (the kernel assumes it),
  uint8 weights with their zero point, int32 biases, int16 state with a power-of-two scale of 4 integer bits
  (2^-11; ``CheckedLog2``). Accumulators are requantized with ``4096 · s_bias`` to int16 Q3.12 as the
  interpreter's GEMM output stage does (its final rounding shift sends ties up); gemmlowp's
  fixed-point logistic / tanh, SaturatingRoundingDoublingHighMul products, ``Rescale`` and a final rounding
  division by 2^8 give the uint8 activation. Bit-exact with the interpreter.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeValueError, DTypeError, ShapeError, UnsupportedFeatureError
from ...numerics import core, gemmlowp
from ...numerics.int_matmul import IntMatrix
from ._arith import activation_lut, apply_lut
from .lstm_integer import checked_log2
from .ops import _check_input, _Stateful
from .reader import TensorInfo

_F32 = np.float32
BASIC_INPUTS = {"input": 0, "prev_activation": 1, "weights": 2, "biases": 3, "prev_state": 4}
BASIC_OUTPUTS = ("activation", "state", "concat_temp", "activation_temp")
STATE_INTEGER_BITS = 4


class BasicLstmKernel:
    """The prepared BASIC cell: ``step(x, (h, c)) -> (activation, state, concat, activation_temp)``."""

    def __init__(self, x: TensorInfo, h: TensorInfo, W: TensorInfo, b: TensorInfo, c: TensorInfo,  # noqa: N803
                 state_out: TensorInfo | None = None, *, rounding: str = "double"):
        for name, t, rank in (("input", x, 2), ("prev_activation", h, 2), ("weights", W, 2), ("biases", b, 1),
                              ("prev_state", c, 2)):
            if t is None:
                raise AttributeValueError(f"{name}: the BASIC LSTM needs its five inputs, got none in this slot")
            if len(t.shape) != rank:
                raise ShapeError(f"{name}: expected rank {rank}, got shape {tuple(t.shape)}")
        if W.data is None or b.data is None:
            raise UnsupportedFeatureError("weights / biases: expected constant tensors")
        B, I = x.shape
        H = h.shape[1]
        checks = (("prev_activation", h.shape[0], B), ("weights", W.shape[0], 4 * H), ("weights", W.shape[1], I + H),
                  ("biases", b.shape[0], 4 * H), ("prev_state", c.shape[0], B), ("prev_state", c.shape[1], H))
        for name, got, want in checks:
            if got != want:
                raise ShapeError(f"{name}: expected {want} in shape (batch {B}, input {I}, units {H}), got "
                                 f"{got}")
        self.n_batch, self.n_input, self.n_cell, self.n_output = B, I, H, H
        types = (x.type_name, h.type_name, W.type_name, b.type_name, c.type_name)
        if types == ("FLOAT32",) * 5:
            self.kind = "float"
            self.W = np.asarray(W.data, _F32)
            self.b = np.asarray(b.data, _F32)
            self.dtypes = (np.dtype(_F32), np.dtype(_F32))
            return
        if types != ("UINT8", "UINT8", "UINT8", "INT32", "INT16"):
            raise DTypeError(f"input / prev_activation / weights / biases / prev_state: the BASIC LSTM runs float32 "
                             f"throughout or UINT8 / UINT8 / UINT8 / INT32 / INT16, got {' / '.join(types)}")
        self.kind = "uint8"
        st = state_out if state_out is not None else c
        if st.type_name != "INT16" or not st.quantized:
            raise DTypeError(f"state output: expected a quantized INT16 tensor, got {st.type_name}")
        e = checked_log2(float(st.scale[0]))
        if e is None:
            raise AttributeValueError(f"state: the internal state of a LSTM cell must have a power-of-two scale, got "
                                      f"{float(st.scale[0])!r}")
        if 15 + e != STATE_INTEGER_BITS:
            raise UnsupportedFeatureError(f"state: the quantized BASIC LSTM runs with {STATE_INTEGER_BITS} integer "
                                          f"bits (scale 2^-11) only, got 2^{e}")
        if not W.quantized or not b.quantized:
            raise AttributeValueError("weights / biases: the quantized BASIC LSTM needs their scale and zero point")
        zp_w = int(W.zero_point[0])
        q, s = gemmlowp.quantize_multiplier(4096.0 * float(b.scale[0]), rounding=rounding)
        self.mult, self.shift = int(q), int(s)
        self.Wm = IntMatrix(np.ascontiguousarray((W.data.astype(np.int64) - zp_w).T), a_absmax=128)
        self.b = b.data.astype(np.int64)
        self.sig = activation_lut("logistic", 3)
        self.tanh = activation_lut("tanh", 3)
        self.dtypes = (np.dtype(np.uint8), np.dtype(np.int16))

    def _requant(self, acc: np.ndarray) -> np.ndarray:
        """The interpreter's GEMM output stage (ruy, x86): SaturatingRoundingDoublingHighMul by the multiplier, then a
        rounding right shift whose ties go up (floor((v + 2^(r-1)) / 2^r)), not away from zero as
        MultiplyByQuantizedMultiplier's."""
        left, right = max(self.shift, 0), max(-self.shift, 0)
        v = core.srdhm(core.wrap(acc << left, 32), self.mult, 32)
        return (v + (1 << (right - 1))) >> right if right else v

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        """The variable tensors after ``ResetVariableTensors``: zero bytes."""
        return np.zeros((B, self.n_output), self.dtypes[0]), np.zeros((B, self.n_cell), self.dtypes[1])

    def step(self, x: np.ndarray, state):
        h, c = state
        H = self.n_cell
        concat = np.concatenate([x, h], axis=1)
        if self.kind == "float":
            a = (concat.astype(_F32) @ self.W.T + self.b).astype(_F32)

            def sig(v):
                return (_F32(1) / (_F32(1) + np.exp(-v.astype(np.float64)).astype(_F32))).astype(_F32)

            i, g, f, o = (a[:, k * H:(k + 1) * H] for k in range(4))
            new_c = (sig(i) * np.tanh(g).astype(_F32) + sig(f) * c).astype(_F32)
            act = (sig(o) * np.tanh(new_c.astype(np.float64)).astype(_F32)).astype(_F32)
            return act, new_c, concat, a
        acc = self.Wm.matmul(concat.astype(np.int64) - 128, check=False) + self.b
        a = core.sat(self._requant(core.wrap(acc, 32)), 16)
        i, g, f, o = (a[:, k * H:(k + 1) * H] for k in range(4))
        ig = core.srdhm(apply_lut(self.sig, i), apply_lut(self.tanh, g), 16)
        fc = core.srdhm(apply_lut(self.sig, f), c.astype(np.int64), 16)
        new_c = core.sat(core.rdpot(ig, STATE_INTEGER_BITS) + fc, 16)
        c3 = core.srmpot(new_c, STATE_INTEGER_BITS - 3, 16)
        out = core.srdhm(apply_lut(self.sig, o), apply_lut(self.tanh, c3), 16)
        act = (core.clamp(core.rdpot(out, 8), -128, 127) + 128).astype(np.uint8)
        return act, new_c.astype(np.int16), concat, a.astype(np.int16)


class BasicLSTM(_Stateful):
    """The LSTM op with ``kernel_type = BASIC``: ``op(x [batch, input]) -> (activation, state, concat_temp,
    activation_temp)``; activation and state persist as the next call's previous activation and state
    (``set_state(h, c)`` sets them, ``reset()`` zeroes them)."""

    name = "LSTM"

    def __init__(self, kernel: BasicLstmKernel):
        super().__init__()
        self.kernel = kernel
        self.kind = f"basic-{kernel.kind}"

    def __call__(self, x):
        k = self.kernel
        x = _check_input(x, "x", np.dtype(_F32) if k.kind == "float" else np.dtype(np.uint8), 2, k.n_input,
                         "[batch, input]")
        (st,) = self._state_for([k], x.shape[0])
        act, new_c, concat, a = k.step(x, st)
        self.state = [(act, new_c)]
        return act, new_c, concat, a


def build_basic_lstm(info, op, *, rounding: str = "double") -> BasicLSTM:
    """The BASIC LSTM of node ``op`` of a read model ``info`` (:class:`~.reader.ModelInfo`)."""
    if len(op.inputs) != len(BASIC_INPUTS) or len(op.outputs) != len(BASIC_OUTPUTS):
        raise AttributeValueError(f"op {op.index} (LSTM, kernel_type BASIC): expected {len(BASIC_INPUTS)} inputs and "
                                  f"{len(BASIC_OUTPUTS)} outputs, got {len(op.inputs)} and {len(op.outputs)}")
    ins = [info.tensors[i] if i >= 0 else None for i in op.inputs]
    k = BasicLstmKernel(*ins, state_out=info.tensors[op.outputs[1]], rounding=rounding)
    return BasicLSTM(k)
