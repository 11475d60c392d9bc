"""Reading an ONNX model for :func:`fusedrnn.onnx.load`: the ModelProto from a path, bytes or a proto (copied),
checked to be a well-formed model with outputs (:func:`check_model`), its omitted node outputs named, and its
signature (:class:`TensorInfo`).

A damaged or hostile file is refused when it is read, with a ConversionError naming what is wrong, rather than
deep inside an executor: :func:`check_model` checks what the executors rely on (text fields that are text,
attributes of a known type, tensors whose data matches their dims and type before anything is allocated from
them, every node input produced by a graph input, an initializer or an earlier node, each name assigned once,
every graph output computed, attribute names an operator's ONNX schema knows and string attributes of standard
and recurrent operators in UTF-8) and runs ONNX's shape inference in strict mode (ranks, axes and broadcastable
shapes consistent), on a view of the model whose large initializers are typed inputs, so that the check costs
little memory; declared shapes of intermediate values and outputs are left out of that check, as onnxruntime
merges them leniently.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import onnx
from google.protobuf.message import DecodeError, Message
from onnx import AttributeProto, TensorProto

from ..errors import ConversionError, DTypeError
from ..validation import brief
from .onnx_ops import RECURRENT_OPS, subgraphs

UNUSED_OUTPUT = "_fusedrnn_unused_output_{}"
"""The name :func:`name_unused_outputs` gives the k-th omitted node output."""


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: ``shape`` holds ints for fixed dimensions, strings for symbolic ones and None
    for unknown ones (``shape`` is None when the rank is unknown); ``dtype`` is None for non-tensor values."""

    name: str
    shape: tuple | None
    dtype: np.dtype | None

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name} [{dims}] {self.dtype if self.dtype is not None else '(non-tensor)'}"


def value_info(vi: onnx.ValueInfoProto) -> TensorInfo:
    """The :class:`TensorInfo` of a graph input or output."""
    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        return TensorInfo(vi.name, None, None)
    tt = t.tensor_type
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)) if tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
        )
    return TensorInfo(vi.name, shape, dtype)


@dataclass(frozen=True)
class Signature:
    """What a caller of a model sees: the inputs it must feed (graph inputs that are not initializers), the names
    of the inputs it may feed to override an initializer, and the outputs."""

    inputs: tuple[TensorInfo, ...]
    optional_inputs: frozenset[str]
    outputs: tuple[TensorInfo, ...]


def signature(proto: onnx.ModelProto) -> Signature:
    """The :class:`Signature` of a model."""
    initializers = {t.name for t in proto.graph.initializer}
    return Signature(tuple(value_info(v) for v in proto.graph.input if v.name not in initializers),
                     frozenset(v.name for v in proto.graph.input if v.name in initializers),
                     tuple(value_info(v) for v in proto.graph.output))


def name_unused_outputs(graph: onnx.GraphProto, count: int = 0) -> int:
    """Give every omitted node output ("") a unique name, in place, subgraphs included; returns the count.

    ``onnx.reference`` stores each node output under its name, so an omitted output would overwrite the
    evaluator's slot for omitted *inputs* ("" -> None) and feed a later node's optional input with garbage."""
    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == "":
                node.output[k] = UNUSED_OUTPUT.format(count)
                count += 1
        for g in subgraphs(node):
            count = name_unused_outputs(g, count)
    return count


# ---- checking a model ----------------------------------------------------------------------------------------
_ATTRIBUTE_TYPES = frozenset(AttributeProto.AttributeType.values()) - {AttributeProto.UNDEFINED}
_TENSOR_TYPES = frozenset(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
_SUB_BYTE_BITS = {TensorProto.UINT4: 4, TensorProto.INT4: 4, TensorProto.FLOAT4E2M1: 4}
_SUB_BYTE_BITS.update({getattr(TensorProto, n): b for n, b in (("UINT2", 2), ("INT2", 2), ("FLOAT6E2M3", 6),
                                                               ("FLOAT6E3M2", 6)) if hasattr(TensorProto, n)})
INFERENCE_VIEW_LIMIT = 1024
"""Initializers with more elements than this are typed inputs in the view that shape inference checks."""


def _text(value, what: str) -> str:
    """A string field of the proto, which must hold text (a damaged file can hold bytes that are not UTF-8)."""
    try:
        ok = isinstance(value, str)
    except UnicodeDecodeError:
        ok = False
    if not ok:
        raise ConversionError(f"model: {what}: expected UTF-8 text, got {brief(value)}")
    return value


def _string(msg: Message, field: str, what: str) -> str:
    try:
        value = getattr(msg, field)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConversionError(f"model: {what}: expected UTF-8 text ({brief(str(exc), 80)})") from None
    return _text(value, what)


MAX_ELEMENTS = 2**48
"""The most elements a tensor's dims may claim (zero dims left out of the product)."""


def _count(dims, what: str) -> int:
    if any(d < 0 for d in dims) or math.prod(d for d in dims if d) > MAX_ELEMENTS:
        raise ConversionError(f"model: {what}: expected non-negative dims of at most {MAX_ELEMENTS} elements, got "
                              f"{brief(list(dims))}")
    return math.prod(dims)


def check_tensor(t: TensorProto, what: str) -> None:
    """Raise ConversionError unless the TensorProto ``t`` has a known element type and holds exactly the data its
    dims claim (raw bytes or the typed field; sub-byte types packed), checked before any array is made from it.
    Data in an external file that was not loaded is refused (bytes and ModelProtos cannot reach it)."""
    name = _string(t, "name", what)
    where = f"{what} {brief(name)}" if name else what
    if t.data_type not in _TENSOR_TYPES:
        raise ConversionError(f"model: {where}: unknown element type {t.data_type}")
    n = _count(t.dims, where)
    if t.data_location == TensorProto.EXTERNAL:
        raise ConversionError(f"model: {where}: its data is in an external file that was not loaded; load the "
                              f"model from its path (onnx.load loads external data next to it)")
    bits = _SUB_BYTE_BITS.get(t.data_type)
    if t.data_type == TensorProto.STRING:
        have, want = len(t.string_data), (n, n)
    elif t.HasField("raw_data"):
        have = len(t.raw_data)
        size = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        want = (-(-n * bits // 8), n) if bits else (n * size, n * size)
    else:
        field = onnx.helper.tensor_dtype_to_field(t.data_type)
        have = len(getattr(t, field))
        pair = t.data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128)
        want = (-(-n * bits // 32), n) if bits else ((2 * n, 2 * n) if pair else (n, n))
    if not want[0] <= have <= want[1]:
        amount = f"{want[0]}" if want[0] == want[1] else f"{want[0]} to {want[1]}"
        raise ConversionError(f"model: {where}: dims {brief(list(t.dims))} of "
                              f"{TensorProto.DataType.Name(t.data_type)} need {amount} data "
                              f"{'bytes' if t.HasField('raw_data') else 'values'}, it holds {have}")


def _check_attribute(att: AttributeProto, node: str, defined: set[str], depth: int, opsets: dict,
                     known: frozenset | None, textual: bool) -> None:
    name = _string(att, "name", f"an attribute of node {node}")
    where = f"attribute {brief(name)} of node {node}"
    if att.ref_attr_name:
        return  # inside a function body: the value comes from the call
    if known is not None and name not in known:
        raise ConversionError(f"model: {where}: the operator has no such attribute (it has "
                              f"{brief(', '.join(sorted(known)) or 'none', 80)})")
    if att.type not in _ATTRIBUTE_TYPES:
        raise ConversionError(f"model: {where}: unknown attribute type {att.type}")
    if textual:
        for value in [att.s] if att.type == AttributeProto.STRING else list(att.strings):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise ConversionError(f"model: {where}: expected UTF-8 text, got {brief(value)}") from None
    for t in ([att.t] if att.type == AttributeProto.TENSOR else list(att.tensors)):
        check_tensor(t, f"tensor of {where}")
    for g in ([att.g] if att.type == AttributeProto.GRAPH else list(att.graphs)):
        _check_graph(g, defined, opsets, depth + 1)


def _attribute_names(op: str, domain: str, opsets: dict) -> frozenset | None:
    """The attribute names of a standard ONNX operator at the model's opset, or None when onnx has no schema."""
    domain = "" if domain == "ai.onnx" else domain
    version = opsets.get(domain)
    if version is None or not onnx.defs.has(op, domain):
        return None
    try:
        return frozenset(onnx.defs.get_schema(op, version, domain).attributes)
    except onnx.defs.SchemaError:
        return None


def _check_nodes(nodes, defined: set[str], depth: int, where: str, opsets: dict | None) -> set[str]:
    """Check ``nodes`` in order against the names ``defined`` so far (extended in place) and the model's
    ``opsets`` ({domain: version}; None in a function body, whose imports are its own); returns their outputs."""
    produced: set[str] = set()
    for k, node in enumerate(nodes):
        op = _string(node, "op_type", f"op_type of node #{k}{where}")
        domain = _string(node, "domain", f"domain of node #{k}{where}")
        label = brief(_string(node, "name", f"name of node #{k}{where}") or f"{op}#{k}")
        for i in node.input:
            _text(i, f"an input name of node {label}")
            if i and i not in defined:
                raise ConversionError(f"model: node {label} ({brief(op, 30)}) reads {brief(i)}, which no graph "
                                      f"input, initializer or earlier node provides (nodes must be in topological "
                                      f"order){where}")
        if opsets is not None and ("" if domain == "ai.onnx" else domain) not in opsets:
            raise ConversionError(f"model: node {label} ({brief(op, 30)}) is of domain {brief(domain or 'ai.onnx')}, "
                                  f"which the model's opset_import does not list{where}")
        known = _attribute_names(op, domain, opsets or {})
        textual = known is not None or ("" if domain == "ai.onnx" else domain, op) in RECURRENT_OPS
        for att in node.attribute:
            _check_attribute(att, label, defined, depth, opsets or {}, known, textual)
        for o in node.output:
            _text(o, f"an output name of node {label}")
            if o and o in produced:
                raise ConversionError(f"model: node {label} writes {brief(o)}, which an earlier node wrote too (each "
                                      f"name is assigned once){where}")
            if o:
                produced.add(o)
                defined.add(o)
    return produced


def _check_graph(graph: onnx.GraphProto, outer: set[str], opsets: dict, depth: int = 0) -> None:
    where = "" if depth == 0 else f" (in the subgraph {brief(graph.name)})"
    defined = set(outer)
    for vi in graph.input:
        defined.add(_text(vi.name, f"a graph input name{where}"))
    for t in graph.initializer:
        check_tensor(t, f"initializer{where}")
        defined.add(t.name)
    for st in graph.sparse_initializer:
        defined.add(_text(st.values.name, f"a sparse initializer name{where}"))
    _check_nodes(graph.node, defined, depth, where, opsets)
    for vi in graph.output:
        name = _text(vi.name, f"a graph output name{where}")
        if name not in defined:
            raise ConversionError(f"model: graph output {brief(name)}{where} is not computed by any node, input or "
                                  f"initializer")


def _inference_view(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model as shape inference checks it: large initializers as typed inputs (no data copied), no
    declared value_info, outputs without declared shapes."""
    view = onnx.ModelProto()
    view.ir_version = proto.ir_version
    view.opset_import.extend(proto.opset_import)
    view.functions.extend(proto.functions)
    g, src = view.graph, proto.graph
    g.name = src.name
    g.node.extend(src.node)
    g.sparse_initializer.extend(src.sparse_initializer)
    large = {}
    for t in src.initializer:
        if math.prod(t.dims) <= INFERENCE_VIEW_LIMIT:
            g.initializer.append(t)
        else:
            large[t.name] = onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
    for vi in src.input:
        g.input.append(large.pop(vi.name, vi))
    g.input.extend(large.values())
    for vi in src.output:
        out = g.output.add()
        out.CopyFrom(vi)
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    return view


def check_model(proto: onnx.ModelProto) -> None:
    """Raise ConversionError where ``proto`` is malformed in a way that would trip an executor (module
    docstring): its structure first, then ONNX shape inference in strict mode."""
    opsets = {}
    for k, op in enumerate(proto.opset_import):
        domain = _string(op, "domain", f"domain of opset import #{k}")
        if op.version < 1:
            raise ConversionError(f"model: opset import of domain {brief(domain or 'ai.onnx')}: expected a version of "
                                  f"at least 1, got {op.version}")
        opsets["" if domain == "ai.onnx" else domain] = op.version
    for f in proto.functions:
        fname = brief(_string(f, "name", "a function name"))
        _check_nodes(f.node, {_text(i, f"an input of function {fname}") for i in f.input}, 1,
                     f" (in the function {fname})", None)
    _check_graph(proto.graph, set(), opsets)
    try:
        onnx.shape_inference.infer_shapes(_inference_view(proto), check_type=True, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError) as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ConversionError(f"model: ONNX shape inference finds it inconsistent: {brief(first, 300)}") from exc


# ---- reading a model -----------------------------------------------------------------------------------------
_LOAD_ERRORS = (DecodeError, onnx.checker.ValidationError, ValueError, RuntimeError, UnicodeDecodeError,
                RecursionError)
"""What onnx.load raises on damaged bytes or unreachable external data (besides OSError)."""


def read_model(path_or_model: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """A ModelProto of its own from a path, serialized bytes or a ModelProto (copied), checked
    (:func:`check_model`), with its omitted node outputs named (:func:`name_unused_outputs`).

    A missing file raises FileNotFoundError; bytes or a file that do not decode, a graph without outputs and a
    malformed model raise ConversionError; any other argument DTypeError."""
    if isinstance(path_or_model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(path_or_model)
    elif isinstance(path_or_model, (bytes, bytearray)):
        try:
            proto = onnx.load_model_from_string(bytes(path_or_model))
        except _LOAD_ERRORS as exc:
            raise ConversionError(f"model: the bytes are not a serialized ONNX model ({brief(str(exc), 200)})") \
                from exc
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"model: no such file: {path}")
        try:
            proto = onnx.load(path)
        except _LOAD_ERRORS + (OSError,) as exc:
            raise ConversionError(f"model: {path} is not a readable ONNX model ({type(exc).__name__}: "
                                  f"{brief(str(exc), 200)})") from exc
    else:
        raise DTypeError(f"model: expected a path, bytes or an onnx.ModelProto, got {type(path_or_model).__name__}")
    if not proto.graph.output:
        raise ConversionError("model: the ONNX graph has no outputs (is it an ONNX model?)")
    check_model(proto)
    name_unused_outputs(proto.graph)
    return proto


__all__ = ["INFERENCE_VIEW_LIMIT", "Signature", "TensorInfo", "UNUSED_OUTPUT", "check_model", "check_tensor",
           "name_unused_outputs", "read_model", "signature", "value_info"]
