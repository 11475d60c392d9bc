"""Reading an ONNX model for :func:`fusedrnn.onnx.load`: the ModelProto from a path, bytes or a proto (copied),
checked to be a model with outputs, its omitted node outputs named, and its signature (:class:`TensorInfo`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from ..errors import ConversionError, DTypeError
from .onnx_ops import subgraphs

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


def read_model(path_or_model: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """A ModelProto of its own from a path, serialized bytes or a ModelProto (copied), with its omitted node
    outputs named (:func:`name_unused_outputs`).

    A missing file raises FileNotFoundError; bytes or a file that do not decode, and a graph without outputs,
    raise ConversionError; any other argument DTypeError."""
    if isinstance(path_or_model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(path_or_model)
    elif isinstance(path_or_model, (bytes, bytearray)):
        try:
            proto = onnx.load_model_from_string(bytes(path_or_model))
        except DecodeError as exc:
            raise ConversionError(f"model: the bytes are not a serialized ONNX model ({exc})") from exc
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"model: no such file: {path}")
        try:
            proto = onnx.load(path)
        except DecodeError as exc:
            raise ConversionError(f"model: {path} is not an ONNX model ({exc})") from exc
    else:
        raise DTypeError(f"model: expected a path, bytes or an onnx.ModelProto, got {type(path_or_model).__name__}")
    if not proto.graph.output:
        raise ConversionError("model: the ONNX graph has no outputs (is it an ONNX model?)")
    name_unused_outputs(proto.graph)
    return proto


__all__ = ["Signature", "TensorInfo", "UNUSED_OUTPUT", "name_unused_outputs", "read_model", "signature",
           "value_info"]
