"""A loaded .tflite graph: the recurrent ops run on fusedrnn's kernels with persistent state, every other op of a
converted recurrent model (ADD, SUB, MUL, FULLY_CONNECTED, SOFTMAX, TANH, LOGISTIC, QUANTIZE, DEQUANTIZE and the
data-movement ops, float and integer) on :mod:`fusedrnn.targets.litert.graph_ops`, bit-exact with the interpreter's
integer kernels. An op (or an op's type combination) that module does not compute runs on the LiteRT interpreter
itself when ``ai-edge-litert`` is installed: a one-op model cut from the file (its tensors, options and subgraphs,
e.g. a WHILE loop's bodies) is invoked on the op's current inputs; without the package it raises
UnsupportedFeatureError naming the op. ``model.delegated`` lists the ops that ran on the interpreter. The recurrent
ops (``model.ops``) can always be called on their own.

A damaged graph is refused with :class:`~fusedrnn.errors.FileFormatError` (the reader checks the file's structure):
a recurrent op reading a tensor of a type no recurrent kernel takes, an op with the wrong number of inputs or with
tensors that do not fit together, an op input that is neither a graph input, a constant, a variable nor an earlier
op's output, a graph output that no op produces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, FileFormatError, InputError, ShapeError, UnsupportedFeatureError
from . import graph_ops
from .basic_lstm import build_basic_lstm
from .ops import BidirectionalSequenceLSTM, SequenceLSTM
from .reader import ModelInfo, OpInfo, TensorInfo, read_model
from .rnn import BidirectionalSequenceRNN, SequenceGRU, build_rnn_op
from .schema import schema
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


@dataclass
class Node:
    info: OpInfo
    op: object  # a stateful recurrent op or None
    delegate: object = None  # the interpreter running this op on its own (made on first need)


class Model:
    """A .tflite model on fusedrnn: ``model(x)`` runs the graph (state persists between calls);
    ``model.ops`` are the recurrent ops (each callable on its own), ``reset_all_variables()`` resets them."""

    def __init__(self, info: ModelInfo, *, rounding: str = "double", content: bytes | None = None):
        self.info = info
        self.content = content  # the file's bytes: the interpreter runs the ops graph_ops does not compute
        self.delegated: set[str] = set()
        self.nodes: list[Node] = []
        for op in info.ops:
            if op.name in RECURRENT_OPS:
                self.nodes.append(Node(op, build_op(info, op, rounding=rounding)))
            else:
                self.nodes.append(Node(op, None))

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
            else:
                outs = self._run_other(n, ins)
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

    def _run_other(self, n: Node, ins: list) -> list:
        """A non-recurrent op: graph_ops' kernel, else the interpreter (else UnsupportedFeatureError)."""
        t = self.info.tensors
        call = graph_ops.OpCall(n.info, ins, [t[i] if i >= 0 else None for i in n.info.inputs],
                                [t[i] for i in n.info.outputs])
        try:
            return graph_ops.run(call)
        except graph_ops.NotNative as why:
            if n.delegate is None:
                n.delegate = _Delegate.make(self, n.info, str(why))
            self.delegated.add(n.info.name)
            return n.delegate(ins)

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


class _Delegate:
    """One non-recurrent op on the LiteRT interpreter: a model holding only that op (the file's tensors, buffers,
    options and subgraphs, its non-constant inputs as graph inputs), resized to the inputs' shapes when they
    change. Interpreter errors become UnsupportedFeatureError naming the op."""

    def __init__(self, interpreter_cls, content: bytes, op: OpInfo, inputs: list[int]):
        self._cls, self._content, self.op, self._inputs = interpreter_cls, content, op, inputs
        self._it = None
        self._shapes: tuple | None = None

    @staticmethod
    def make(model: Model, op: OpInfo, why: str) -> _Delegate:
        where = f"op {op.index} ({op.name})"
        try:
            from ai_edge_litert import interpreter as litert_interpreter
        except ImportError:
            raise UnsupportedFeatureError(f"{where}: {why}; fusedrnn runs it on the LiteRT interpreter, which is not "
                                          f"installed (pip install ai-edge-litert)") from None
        if model.content is None:
            raise UnsupportedFeatureError(f"{where}: {why}, and this model has no file contents to give the "
                                          f"interpreter (load it with litert.load)")
        if op.custom:
            raise UnsupportedFeatureError(f"{where}: custom op {op.name!r} is not implemented")
        tensors = model.info.tensors
        inputs = [i for i in op.inputs if i >= 0 and tensors[i].data is None]
        s = schema()
        m = s.ModelT.InitFromObj(s.Model.GetRootAs(model.content, 0))
        g = m.subgraphs[0]
        g.operators = [g.operators[op.index]]
        g.inputs, g.outputs = list(inputs), list(op.outputs)
        m.signatureDefs = None
        import flatbuffers

        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return _Delegate(litert_interpreter, bytes(b.Output()), op, inputs)

    def __call__(self, ins: list) -> list:
        where = f"op {self.op.index} ({self.op.name})"
        by_index = dict(zip(self.op.inputs, ins, strict=False))
        arrays = [np.asarray(by_index[i]) for i in self._inputs]
        shapes = tuple(a.shape for a in arrays)
        try:
            if self._it is None or shapes != self._shapes:
                it = self._cls.Interpreter(model_content=self._content, experimental_op_resolver_type=(
                    self._cls.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
                for d, a in zip(it.get_input_details(), arrays, strict=True):
                    if tuple(d["shape"]) != a.shape:
                        it.resize_tensor_input(d["index"], list(a.shape), strict=False)
                it.allocate_tensors()
                self._it, self._shapes = it, shapes
            it = self._it
            for d, a in zip(it.get_input_details(), arrays, strict=True):
                it.set_tensor(d["index"], a.astype(d["dtype"], copy=False))
            it.invoke()
            return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
        except (ValueError, RuntimeError) as e:
            self._it = None
            raise UnsupportedFeatureError(f"{where}: the LiteRT interpreter could not run it: "
                                          f"{str(e).strip().splitlines()[0] if str(e).strip() else e}") from None


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
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            source = f.read()
    content = bytes(source)
    return Model(read_model(content), rounding=rounding, content=content)
