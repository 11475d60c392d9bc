"""Write .tflite flatbuffers with the schema package's object API (no TensorFlow): a graph of tensors and
operators, and the one-op models fusedrnn exports (a fused LSTM with its 24 inputs, the RNN ops).

Tensors are :class:`~fusedrnn.targets.litert.reader.TensorInfo` (constant data, or a shape for activations,
variables and intermediates; a tensor with ``sparsity`` is stored compressed, with its metadata), so a model read
with :func:`~fusedrnn.targets.litert.reader.read_model` can be rewritten and written back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...errors import AttributeValueError
from .reader import TensorInfo
from .schema import enum_value, schema
from .slots import (
    BI_AUX_INPUT,
    BI_DIRECTION_SLOTS,
    BI_DIRECTIONS,
    BI_INPUTS,
    CELL_STATE,
    INPUT,
    OUTPUT_STATE,
    const,
)
from .sparsity import to_flatbuffer

# builtin op -> (options table name); the options are given as a dict of snake_case fields
OPTION_TABLES = {
    "LSTM": "LSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "RNN": "RNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "CONCATENATION": "ConcatenationOptions",
    "REVERSE_V2": "ReverseV2Options",
    "ADD": "AddOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "PACK": "PackOptions",
    "MUL": "MulOptions",
    "TRANSPOSE": "TransposeOptions",
    "QUANTIZE": "QuantizeOptions",
    "DEQUANTIZE": "DequantizeOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "SUB": "SubOptions",
    "SOFTMAX": "SoftmaxOptions",
    "SLICE": "SliceOptions",
    "RESHAPE": "ReshapeOptions",
    "SQUEEZE": "SqueezeOptions",
    "EXPAND_DIMS": "ExpandDimsOptions",
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "UNPACK": "UnpackOptions",
    "GATHER": "GatherOptions",
    "MEAN": "ReducerOptions",
}
_ENUM_FIELDS = {"fused_activation_function": "ActivationFunctionType", "kernel_type": "LSTMKernelType",
                "weights_format": "FullyConnectedOptionsWeightsFormat"}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


@dataclass
class OpSpec:
    """One operator to write: builtin name (or custom code with ``custom=True``), tensor indices (-1 = absent)."""

    name: str
    inputs: list
    outputs: list
    options: dict = field(default_factory=dict)
    intermediates: list = field(default_factory=list)
    version: int = 1
    custom: bool = False
    custom_options: bytes | None = None


@dataclass
class SignatureSpec:
    """A model signature: ``key`` (e.g. ``"serving_default"``) and name -> tensor index maps."""

    key: str
    inputs: dict
    outputs: dict


def _signature_t(s, sig: SignatureSpec):
    def maps(d):
        out = []
        for name, idx in d.items():
            m = s.TensorMapT()
            m.name, m.tensorIndex = str(name), int(idx)
            out.append(m)
        return out

    sd = s.SignatureDefT()
    sd.signatureKey = sig.key
    sd.subgraphIndex = 0
    sd.inputs, sd.outputs = maps(sig.inputs), maps(sig.outputs)
    return sd


def _tensor_t(s, t: TensorInfo, buffer: int):
    tt = s.TensorT()
    tt.shape = np.asarray(t.shape, np.int32)
    tt.type = enum_value("TensorType", t.type_name)
    tt.buffer = buffer
    tt.name = t.name
    tt.isVariable = t.is_variable
    if t.sparsity is not None:
        tt.sparsity = to_flatbuffer(s, t.sparsity)
    if t.scale is not None:
        q = s.QuantizationParametersT()
        q.scale = [float(v) for v in t.scale]
        q.zeroPoint = [int(v) for v in (t.zero_point if t.zero_point is not None else np.zeros(t.scale.size))]
        q.quantizedDimension = t.quantized_dimension
        tt.quantization = q
    return tt


def _options_t(s, op: OpSpec):
    table = OPTION_TABLES.get(op.name)
    if table is None:
        if op.options:
            raise AttributeValueError(f"options: writing options of {op.name} is not supported")
        return 0, None
    obj = getattr(s, table + "T")()
    for k, v in op.options.items():
        attr = _camel(k)
        if not hasattr(obj, attr):
            raise AttributeValueError(f"options: {op.name} has no option {k!r}")
        if k in _ENUM_FIELDS and isinstance(v, str):
            v = enum_value(_ENUM_FIELDS[k], v)
        setattr(obj, attr, v)
    return getattr(s.BuiltinOptions, table), obj


def write_model(tensors: list[TensorInfo], ops: list[OpSpec], inputs: list[int], outputs: list[int], *,
                description: str = "fusedrnn", shape_signatures: dict | None = None,
                signatures: list[SignatureSpec] = ()) -> bytes:
    """Serialize a one-subgraph model (file identifier TFL3).

    ``shape_signatures``: tensor index -> shape with -1 for the dimensions the interpreter may resize (written
    as the tensor's ``shape_signature``); ``signatures``: the model's SignatureDefs (all on subgraph 0)."""
    import flatbuffers

    s = schema()
    m = s.ModelT()
    m.version = 3
    m.description = description
    m.buffers = [s.BufferT()]
    sg = s.SubGraphT()
    sg.tensors = []
    for t in tensors:
        buf = 0
        if t.data is not None:
            b = s.BufferT()
            stored = t.data if t.sparsity is None else t.sparsity.compress(t.data)
            b.data = np.frombuffer(np.ascontiguousarray(stored, t.dtype.newbyteorder("<")).tobytes(), np.uint8)
            m.buffers.append(b)
            buf = len(m.buffers) - 1
        else:
            m.buffers.append(s.BufferT())
            buf = len(m.buffers) - 1
        tt = _tensor_t(s, t, buf)
        sig = (shape_signatures or {}).get(len(sg.tensors))
        if sig is not None:
            if len(sig) != len(t.shape):
                raise AttributeValueError(f"shape_signatures: tensor {t.name!r} has shape {t.shape}, got signature "
                                          f"{tuple(sig)}")
            tt.shapeSignature = np.asarray(sig, np.int32)
        sg.tensors.append(tt)
    codes: dict[tuple, int] = {}
    m.operatorCodes = []
    sg.operators = []
    for op in ops:
        key = (op.name, op.version, op.custom)
        if key not in codes:
            oc = s.OperatorCodeT()
            if op.custom:
                oc.builtinCode = oc.deprecatedBuiltinCode = enum_value("BuiltinOperator", "CUSTOM")
                oc.customCode = op.name
            else:
                code = enum_value("BuiltinOperator", op.name)
                oc.builtinCode = code
                oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = op.version
            codes[key] = len(m.operatorCodes)
            m.operatorCodes.append(oc)
        o = s.OperatorT()
        o.opcodeIndex = codes[key]
        o.inputs = [int(i) for i in op.inputs]
        o.outputs = [int(i) for i in op.outputs]
        o.intermediates = [int(i) for i in op.intermediates] or None
        o.builtinOptionsType, o.builtinOptions = _options_t(s, op)
        if op.custom_options is not None:
            o.customOptions = list(op.custom_options)
        sg.operators.append(o)
    sg.inputs = list(inputs)
    sg.outputs = list(outputs)
    m.subgraphs = [sg]
    if signatures:
        m.signatureDefs = [_signature_t(s, sig) for sig in signatures]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def single_op_model(op_name: str, inputs: list[TensorInfo | None], outputs: list[TensorInfo], options: dict, *,
                    intermediates: list[TensorInfo | None] = (), version: int = 1, custom: bool = False) -> bytes:
    """A model made of one op: graph inputs are the op inputs that have neither data nor the variable flag."""
    tensors: list[TensorInfo] = []

    def add(ts) -> list[int]:
        """Append the tensors; their indices (-1 for an omitted optional one)."""
        idx = []
        for t in ts:
            if t is not None:
                tensors.append(t)
            idx.append(-1 if t is None else len(tensors) - 1)
        return idx

    idx_in = add(inputs)
    graph_inputs = [i for i, t in zip(idx_in, inputs, strict=True)
                    if t is not None and t.data is None and not t.is_variable]
    idx_out = add(outputs)
    idx_mid = add(intermediates)
    op = OpSpec(op_name, idx_in, idx_out, options, idx_mid, version, custom)
    return write_model(tensors, [op], graph_inputs, idx_out)


def lstm_model(t, options: dict, *, batch: int, time: int = 1, version: int | None = None,
               op: str = "UNIDIRECTIONAL_SEQUENCE_LSTM", output: TensorInfo | None = None) -> bytes:
    """A model with one UNIDIRECTIONAL_SEQUENCE_LSTM (or, ``op="LSTM"``, one LSTM step): input x [B, T, I] (or
    [T, B, I] when ``time_major``; [B, I] for LSTM) of slot 0's type and quantization, output of the output
    state's type and quantization (``output`` gives its own; an INT16 output state, which the integer kernels read
    as int8 codes, gets an INT8 output), variable state tensors 18/19, the constant slots of ``t``
    (:class:`~fusedrnn.targets.litert.slots.LstmTensors`) and its intermediates."""
    tm = bool(options.get("time_major", False))
    n_in, n_out = t.n_input + 0, t.n_output
    shape_x = (time, batch, n_in) if tm else (batch, time, n_in)
    shape_y = (time, batch, n_out) if tm else (batch, time, n_out)
    if op == "LSTM":
        shape_x, shape_y = (batch, n_in), (batch, n_out)
        options = {k: v for k, v in options.items() if k not in ("time_major", "diagonal_recurrent_tensors")}
    kind = t.kind()
    x = replace(t["input"], shape=shape_x, data=None, is_variable=False, name="x")
    h = replace(t["output_state"], shape=(batch, n_out), data=None, is_variable=True, name="output_state")
    c = replace(t["cell_state"], shape=(batch, t.n_cell), data=None, is_variable=True, name="cell_state")
    if output is not None:  # the output's own type and quantization (an INT16 output state with an INT8 output)
        y = replace(output, shape=shape_y, data=None, is_variable=False, name="y")
    elif h.type_name == "INT16":  # the integer kernels write int8 codes: an INT8 output at the state's quantization
        y = replace(h, type_name="INT8", shape=shape_y, is_variable=False, name="y")
    else:
        y = replace(h, shape=shape_y, is_variable=False, name="y")
    slots = list(t.slots)
    slots[INPUT], slots[OUTPUT_STATE], slots[CELL_STATE] = x, h, c
    if version is None:
        version = 1
        if kind == "hybrid":
            version = 3 if options.get("asymmetric_quantize_inputs") else 2
        if options.get("diagonal_recurrent_tensors"):
            version = 4
    return single_op_model(op, slots, [y], options, intermediates=list(t.intermediates), version=version)


def bidirectional_lstm_model(fw, bw, options: dict, *, batch: int, time: int, aux_input_size: int = 0,
                             version: int | None = None) -> bytes:
    """A model with one BIDIRECTIONAL_SEQUENCE_LSTM (48 inputs): graph inputs x and, with ``aux_input_size``,
    aux_input; outputs fw_output and bw_output, or one merged output when ``merge_outputs``. ``fw.aux`` /
    ``bw.aux`` hold the aux weights (stacking mode) or are empty (the bw cell then reads aux_input)."""
    tm = bool(options.get("time_major", True))
    merge = bool(options.get("merge_outputs", False))

    def seq(n):
        return (time, batch, n) if tm else (batch, time, n)

    x = replace(fw["input"], shape=seq(fw.n_input), data=None, is_variable=False, name="x")
    inputs = [None] * BI_INPUTS
    inputs[INPUT] = x
    if aux_input_size:
        inputs[BI_AUX_INPUT] = const("aux_input", None, type_name="FLOAT32", shape=seq(aux_input_size))
    for d, (t, (offset, (h_slot, c_slot), aux)) in enumerate(zip((fw, bw), BI_DIRECTIONS, strict=True)):
        for k in BI_DIRECTION_SLOTS:
            inputs[k + offset] = t[k]
        inputs[h_slot] = const(f"h{d}", None, type_name="FLOAT32", shape=(batch, t.n_output), is_variable=True)
        inputs[c_slot] = const(f"c{d}", None, type_name="FLOAT32", shape=(batch, t.n_cell), is_variable=True)
        if aux_input_size:
            for slot, w in zip(aux, t.aux, strict=True):
                inputs[slot] = w
    if merge:
        outs = [const("y", None, type_name="FLOAT32", shape=seq(fw.n_output + bw.n_output))]
    else:
        outs = [const("y_fw", None, type_name="FLOAT32", shape=seq(fw.n_output)),
                const("y_bw", None, type_name="FLOAT32", shape=seq(bw.n_output))]
    if version is None:
        version = 3 if fw.kind() == "hybrid" and options.get("asymmetric_quantize_inputs") else \
            (2 if fw.kind() == "hybrid" else 1)
    return single_op_model("BIDIRECTIONAL_SEQUENCE_LSTM", inputs, outs, options, version=version)
