"""A loaded .tflite graph: the recurrent ops run on fusedrnn's kernels with persistent state, and the few ops
that Keras conversions put around them (REVERSE_V2, CONCATENATION, STRIDED_SLICE, float ADD) run as the
interpreter does: REVERSE_V2 and CONCATENATION copy int8 values without requantization (litert.md section 8).
Any other op raises UnsupportedFeatureError when the graph runs; the recurrent ops (``model.ops``) can always be
called on their own.

A damaged graph is refused with :class:`~fusedrnn.errors.FileFormatError` (the reader checks the file's structure):
a recurrent op reading a tensor of a type no recurrent kernel takes, a data-movement op with the wrong number of
inputs or with tensors that do not fit together, an op input that is neither a graph input, a constant, a variable
nor an earlier op's output, a graph output that no op produces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, FileFormatError, FusedRNNError, InputError, ShapeError, UnsupportedFeatureError
from .basic_lstm import build_basic_lstm
from .ops import BidirectionalSequenceLSTM, SequenceLSTM
from .reader import ModelInfo, OpInfo, TensorInfo, read_model
from .rnn import BidirectionalSequenceRNN, SequenceGRU, build_rnn_op
from .slots import (
    BI_AUX_INPUT,
    BI_BW_STATES,
    BI_DIRECTION_SLOTS,
    BI_DIRECTIONS,
    BI_FW_STATES,
    BI_INPUTS,
    BI_RNN_SLOTS,
    CELL_STATE,
    GRU_SLOTS,
    INPUT,
    N_SLOTS,
    OUTPUT_STATE,
    RNN_SLOTS,
    LstmOptions,
    LstmTensors,
    apply_fused_activation,
)

RECURRENT_OPS = ("LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "RNN",
                 "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "UNIDIRECTIONAL_SEQUENCE_GRU")


def _get(info: ModelInfo, idx: tuple[int, ...], k: int) -> TensorInfo | None:
    return info.tensors[idx[k]] if k < len(idx) and idx[k] >= 0 else None


def lstm_tensors(info: ModelInfo, op: OpInfo) -> LstmTensors:
    """The 24 slots (and intermediates) of an LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM node."""
    slots = [_get(info, op.inputs, k) for k in range(N_SLOTS)]
    inter = [info.tensors[i] if i >= 0 else None for i in op.intermediates]
    return LstmTensors(slots, inter, output=_get(info, op.outputs, 0))


def bidirectional_lstm_tensors(info: ModelInfo, op: OpInfo) -> tuple[LstmTensors, LstmTensors]:
    """fw and bw :class:`LstmTensors` of a 48-input BIDIRECTIONAL_SEQUENCE_LSTM node."""
    g = [_get(info, op.inputs, k) for k in range(BI_INPUTS)]

    def direction(offset: int, states: tuple[int, int], aux: tuple[int, ...]) -> LstmTensors:
        slots = [None] * N_SLOTS
        slots[INPUT] = g[INPUT]
        for k in BI_DIRECTION_SLOTS:
            slots[k] = g[k + offset]
        slots[OUTPUT_STATE], slots[CELL_STATE] = (g[k] for k in states)
        return LstmTensors(slots, aux=[g[k] for k in aux])

    fw, bw = (direction(*layout) for layout in BI_DIRECTIONS)
    return fw, bw


SLOT_TYPES = ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64")
"""The tensor types the recurrent kernels read (data, weights, biases, states, intermediates)."""


_LSTM_RUNTIME = frozenset({INPUT, OUTPUT_STATE, CELL_STATE})
_RUNTIME_SLOTS = {
    "LSTM": _LSTM_RUNTIME, "UNIDIRECTIONAL_SEQUENCE_LSTM": _LSTM_RUNTIME,
    "BIDIRECTIONAL_SEQUENCE_LSTM": frozenset({INPUT, *BI_FW_STATES, *BI_BW_STATES, BI_AUX_INPUT}),
    "RNN": frozenset({RNN_SLOTS["input"], RNN_SLOTS["hidden_state"]}),
    "UNIDIRECTIONAL_SEQUENCE_RNN": frozenset({RNN_SLOTS["input"], RNN_SLOTS["hidden_state"]}),
    "BIDIRECTIONAL_SEQUENCE_RNN": frozenset(BI_RNN_SLOTS[k] for k in ("input", "fw_hidden_state", "bw_hidden_state",
                                                                       "aux_input")),
    "UNIDIRECTIONAL_SEQUENCE_GRU": frozenset({GRU_SLOTS["input"], GRU_SLOTS["hidden_state"]}),
}
"""The inputs of each recurrent op that hold data or state when it runs; every other present input is a weight,
bias or coefficient the op reads from the file (a constant)."""


def check_slots(info: ModelInfo, op: OpInfo) -> None:
    """Every tensor a recurrent op reads or writes has a type of :data:`SLOT_TYPES` (FileFormatError otherwise:
    a weight of another type would be read as raw bytes), and its weights, biases and coefficients are constants
    (UnsupportedFeatureError: fusedrnn prepares them once)."""
    runtime = _RUNTIME_SLOTS.get(op.name, frozenset())
    for what, idx in (("input", op.inputs), ("intermediate", op.intermediates), ("output", op.outputs)):
        for k, i in enumerate(idx):
            if i < 0:
                continue
            t = info.tensors[i]
            where = f"op {op.index} ({op.name}) {what} {k} (tensor {i} {t.name!r})"
            if t.type_name not in SLOT_TYPES:
                raise FileFormatError(f"source: {where}: expected one of {', '.join(SLOT_TYPES)}, got "
                                      f"{t.type_name}")
            if what == "input" and k not in runtime and t.data is None:
                raise UnsupportedFeatureError(f"{where}: expected a constant (weights, biases and coefficients "
                                              f"come from the file), got a tensor without data")


def _check_kind_slots(t: LstmTensors, op: OpInfo, direction: str) -> None:
    """The slots an LSTM direction's kernel kind is read from (the input, input_to_forget_weights) are present,
    the weights constant (FileFormatError otherwise)."""
    w = t["input_to_forget_weights"]
    if t["input"] is None or w is None or w.data is None:
        raise FileFormatError(f"source: op {op.index} ({op.name}) {direction}input / input_to_forget_weights: "
                              f"expected the data input and a constant weight tensor, got "
                              f"{'no input' if t['input'] is None else 'no constant input_to_forget_weights'}")


def check_bidirectional_aux(op: OpInfo, x: TensorInfo, aux: TensorInfo | None, fw: LstmTensors,
                            bw: LstmTensors) -> None:
    """The aux-input checks of BIDIRECTIONAL_SEQUENCE_LSTM's Prepare (``CheckAuxInputTensorDimensions``): with aux
    weights the aux input is rank 3 with the input's first two dimensions and each aux weight is
    [n_cell, aux size]; without them a present aux input has the input's shape. ShapeError otherwise."""
    where = f"op {op.index} ({op.name}) aux_input"
    has_weights = fw.aux[1] is not None
    if aux is None:
        if has_weights:
            raise ShapeError(f"{where}: expected a tensor (the op has aux weights), got none")
        return
    if len(aux.shape) != 3 or tuple(aux.shape[:2]) != tuple(x.shape[:2]):
        raise ShapeError(f"{where}: expected rank 3 with the input's first dimensions {tuple(x.shape[:2])}, got "
                         f"shape {tuple(aux.shape)}")
    if not has_weights:
        if aux.shape[2] != x.shape[2]:
            raise ShapeError(f"{where}: expected the input's shape {tuple(x.shape)} (no aux weights: the backward "
                             f"cell reads it), got {tuple(aux.shape)}")
        return
    for d, t in (("fw", fw), ("bw", bw)):
        for j, w in enumerate(t.aux):
            if w is None:
                continue
            if tuple(w.shape) != (t.n_cell, aux.shape[2]):
                raise ShapeError(f"op {op.index} ({op.name}) {d}_aux_input_to_{'ifco'[j]}_weights: expected shape "
                                 f"{(t.n_cell, aux.shape[2])}, got {tuple(w.shape)}")


def build_op(info: ModelInfo, op: OpInfo, *, rounding: str = "double"):
    """The stateful fusedrnn op for a recurrent node of ``info``."""
    if op.name == "LSTM" and op.options.get("kernel_type", "FULL") == "BASIC":
        return build_basic_lstm(info, op, rounding=rounding)
    check_slots(info, op)
    if op.name in ("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM"):
        if op.name == "LSTM" and op.options.get("kernel_type", "FULL") != "FULL":
            raise UnsupportedFeatureError(f"op {op.index}: LSTM kernel_type {op.options['kernel_type']}: expected "
                                          f"FULL or BASIC")
        opts = LstmOptions.from_dict(op.options)
        t = lstm_tensors(info, op)
        _check_kind_slots(t, op, "")
        return SequenceLSTM(t, opts, sequence=op.name != "LSTM", rounding=rounding, name=op.name)
    if op.name == "BIDIRECTIONAL_SEQUENCE_LSTM":
        fw, bw = bidirectional_lstm_tensors(info, op)
        _check_kind_slots(fw, op, "forward ")
        _check_kind_slots(bw, op, "backward ")
        check_bidirectional_aux(op, _get(info, op.inputs, INPUT), _get(info, op.inputs, BI_AUX_INPUT), fw, bw)
        return BidirectionalSequenceLSTM(fw, bw, LstmOptions.from_dict(op.options, time_major=True))
    if op.name in ("RNN", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "UNIDIRECTIONAL_SEQUENCE_GRU"):
        return build_rnn_op(info, op)
    raise UnsupportedFeatureError(f"op {op.index}: {op.name} is not a recurrent op")


# ---- the small data-movement ops -------------------------------------------------------------------------
def _reverse(ins, op):
    x, axes = ins
    return [np.flip(x, axis=tuple(int(a) for a in np.atleast_1d(axes)))]


def _concat(ins, op):
    return [np.concatenate(ins, axis=int(op.options.get("axis", 0)))]


def _strided_slice(ins, op):
    x, begin, end, strides = ins
    o = op.options
    if o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or o.get("offset", False):
        raise UnsupportedFeatureError(f"op {op.index}: STRIDED_SLICE with ellipsis/new-axis masks or offset")
    sl = []
    for d in range(len(begin)):
        b, e, s = int(begin[d]), int(end[d]), int(strides[d])
        if o.get("begin_mask", 0) >> d & 1:
            b = None
        if o.get("end_mask", 0) >> d & 1:
            e = None
        if o.get("shrink_axis_mask", 0) >> d & 1:
            sl.append(b if b is not None else 0)
        else:
            sl.append(slice(b, e, s))
    return [np.ascontiguousarray(x[tuple(sl)])]


def _add(ins, op):
    a, b = ins
    if a.dtype != np.float32:
        raise UnsupportedFeatureError(f"op {op.index}: quantized ADD is not implemented")
    y = (a + b).astype(np.float32)
    act = op.options.get("fused_activation_function", "NONE")
    if act != "NONE":
        apply_fused_activation(y, act)
    return [y]


_SIMPLE = {
    "REVERSE_V2": _reverse,
    "CONCATENATION": _concat,
    "STRIDED_SLICE": _strided_slice,
    "ADD": _add,
}
_ARITY = {"REVERSE_V2": (2, 2), "CONCATENATION": (1, None), "STRIDED_SLICE": (4, 4), "ADD": (2, 2)}
"""(fewest, most) inputs of each data-movement op (None: any number)."""


def _run_simple(fn, ins: list, op: OpInfo) -> list:
    """``fn(ins, op)`` after checking the op's input count; NumPy's refusal of tensors that do not fit together
    (an axis beyond the rank, shapes that do not concatenate or broadcast) becomes FileFormatError."""
    lo, hi = _ARITY[op.name]
    if len(ins) < lo or (hi is not None and len(ins) > hi):
        want = f"{lo}" if lo == hi else f"at least {lo}"
        raise FileFormatError(f"source: op {op.index} ({op.name}): expected {want} input tensor(s), got {len(ins)}")
    try:
        return fn(ins, op)
    except FusedRNNError:
        raise
    except (ValueError, IndexError, TypeError) as e:  # numpy: AxisError, shape mismatch, bad slice values
        shapes = [tuple(np.shape(a)) for a in ins]
        raise FileFormatError(f"source: op {op.index} ({op.name}): its tensors do not fit together (input shapes "
                              f"{shapes}): {e}") from None


@dataclass
class Node:
    info: OpInfo
    op: object  # a stateful recurrent op or None
    fn: object = None  # simple ops: fn(inputs, info) -> outputs


class Model:
    """A .tflite model on fusedrnn: ``model(x)`` runs the graph (state persists between calls);
    ``model.ops`` are the recurrent ops (each callable on its own), ``reset_all_variables()`` resets them."""

    def __init__(self, info: ModelInfo, *, rounding: str = "double"):
        self.info = info
        self.nodes: list[Node] = []
        for op in info.ops:
            if op.name in RECURRENT_OPS:
                self.nodes.append(Node(op, build_op(info, op, rounding=rounding)))
            else:
                self.nodes.append(Node(op, None, _SIMPLE.get(op.name)))

    @property
    def ops(self) -> list:
        """The recurrent ops, in execution order (``ops[k]`` is the k-th recurrent node)."""
        return [n.op for n in self.nodes if n.op is not None]

    @property
    def op_indices(self) -> list[int]:
        """Graph operator index of each entry of ``ops``."""
        return [n.info.index for n in self.nodes if n.op is not None]

    def reset_all_variables(self) -> None:
        for op in self.ops:
            op.reset()

    def input_details(self) -> list[dict]:
        return [_details(self.info.tensors[i]) for i in self.info.inputs]

    def output_details(self) -> list[dict]:
        return [_details(self.info.tensors[i]) for i in self.info.outputs]

    def __call__(self, *inputs):
        """Run the graph on its inputs (raw dtype, e.g. int8 for a full-integer model); one output or a tuple."""
        if len(inputs) != len(self.info.inputs):
            raise InputError(f"inputs: the model takes {len(self.info.inputs)} input(s), got {len(inputs)}")
        vals: dict[int, np.ndarray] = {}
        for k, (i, x) in enumerate(zip(self.info.inputs, inputs, strict=True)):
            t = self.info.tensors[i]
            x = np.asarray(x)
            if t.dtype is not None and x.dtype != t.dtype:
                raise InputError(f"inputs[{k}] ({t.name}): expected dtype {t.dtype}, got {x.dtype}")
            vals[i] = x
        for n in self.nodes:
            ins = []
            for k, i in enumerate(n.info.inputs):
                if i < 0:
                    ins.append(None)
                elif i in vals:
                    ins.append(vals[i])
                else:
                    t = self.info.tensors[i]
                    if t.data is None and not t.is_variable and (n.op is None or k in _data_slots(n.op)):
                        raise FileFormatError(f"source: op {n.info.index} ({n.info.name}) input {k} (tensor {i} "
                                              f"{t.name!r}): expected a graph input, a constant, a variable or an "
                                              f"earlier op's output, got a tensor nothing has written")
                    ins.append(t.data)
            if n.op is not None:
                outs = self._run_recurrent(n, ins)
            elif n.fn is not None:
                outs = _run_simple(n.fn, [a for a in ins if a is not None], n.info)
            else:
                raise UnsupportedFeatureError(f"op {n.info.index}: {n.info.name} is not implemented by fusedrnn's "
                                              f"graph runner (run the recurrent ops in model.ops directly)")
            for i, v in zip(n.info.outputs, outs, strict=False):
                vals[i] = v
        for k, i in enumerate(self.info.outputs):
            if i not in vals:
                t = self.info.tensors[i]
                if t.data is None:
                    raise FileFormatError(f"source: graph output {k} (tensor {i} {t.name!r}): expected a tensor an "
                                          f"op writes, a graph input or a constant, got one nothing has written")
                vals[i] = t.data
        out = tuple(vals[i] for i in self.info.outputs)
        return out[0] if len(out) == 1 else out

    invoke = __call__

    @staticmethod
    def _run_recurrent(n: Node, ins):
        for k in _data_slots(n.op):  # the op's data inputs: present in the graph
            if k < len(ins) and ins[k] is None and k != _optional_data_slot(n.op):
                raise FileFormatError(f"source: op {n.info.index} ({n.info.name}) input {k}: expected its data "
                                      f"tensor, got none")
        op = n.op
        def slot(k: int):
            return ins[k] if len(ins) > k else None

        if isinstance(op, BidirectionalSequenceLSTM):
            y = op(ins[INPUT], slot(BI_AUX_INPUT))
        elif isinstance(op, BidirectionalSequenceRNN):
            y = op(ins[BI_RNN_SLOTS["input"]], slot(BI_RNN_SLOTS["aux_input"]))
        elif isinstance(op, SequenceGRU):
            y = op(ins[GRU_SLOTS["input"]], ins[GRU_SLOTS["hidden_state"]])
        else:
            y = op(ins[RNN_SLOTS["input"]])
        return [y] if isinstance(y, np.ndarray) else list(y)

    def __repr__(self) -> str:
        ops = ", ".join(f"{n.info.name}[{getattr(n.op, 'kind', '?')}]" if n.op is not None else n.info.name
                        for n in self.nodes)
        ins = ", ".join(f"{d['name']} {d['dtype']} {d['shape']}" for d in self.input_details())
        return f"Model(ops=[{ops}], inputs=[{ins}])"


def _data_slots(op) -> tuple[int, ...]:
    """The inputs a recurrent op takes from the graph when it runs (its weights and states are its own)."""
    if isinstance(op, BidirectionalSequenceLSTM):
        return (INPUT, BI_AUX_INPUT)
    if isinstance(op, BidirectionalSequenceRNN):
        return (BI_RNN_SLOTS["input"], BI_RNN_SLOTS["aux_input"])
    if isinstance(op, SequenceGRU):
        return (GRU_SLOTS["input"], GRU_SLOTS["hidden_state"])
    return (RNN_SLOTS["input"],)


def _optional_data_slot(op) -> int | None:
    """The data input a recurrent op may go without (the aux input; the GRU's state, zero when absent)."""
    if isinstance(op, BidirectionalSequenceLSTM):
        return BI_AUX_INPUT
    if isinstance(op, BidirectionalSequenceRNN):
        return BI_RNN_SLOTS["aux_input"]
    if isinstance(op, SequenceGRU):
        return GRU_SLOTS["hidden_state"]
    return None


def _details(t: TensorInfo) -> dict:
    q = (float(t.scale[0]), int(t.zero_point[0])) if t.quantized else (0.0, 0)
    return {"name": t.name, "index": t.index, "shape": t.shape, "dtype": t.dtype, "quantization": q}


def load(source, *, rounding: str = "double") -> Model:
    """Load a .tflite model (path or bytes) to run on fusedrnn.

    ``rounding``: the 8x8_16 kernel's MultiplyByQuantizedMultiplier, ``"double"`` (the pip wheels, default) or
    ``"single"`` (builds with TFLITE_SINGLE_ROUNDING)."""
    if not isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)):
        raise DTypeError(f"source: expected a .tflite path or bytes, got {type(source).__name__}")
    return Model(read_model(source), rounding=rounding)
