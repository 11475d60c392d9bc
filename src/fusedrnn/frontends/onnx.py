"""Whole ONNX models on fusedrnn: the recurrent nodes run on fusedrnn, everything else on ``onnx.reference``.

::

    import fusedrnn
    model = fusedrnn.onnx.load("model.onnx")
    outputs = model.run({"x": x})            # {output name: array}
    fp16 = model.to("fp16")                  # every LSTM / GRU / RNN node emulated on the fp16 target
    outputs16 = fp16.run({"x": x})

The non-recurrent nodes run on onnx's reference evaluator (:class:`onnx.reference.ReferenceEvaluator`); ONNX
``LSTM``, ``GRU`` and ``RNN`` nodes are replaced, through the evaluator's ``new_ops`` mechanism, by classes that
call :func:`fusedrnn.ops.lstm` / ``gru`` / ``rnn`` with the model's target (its compute ``dtype`` and rounding
policy). A model without a target (``load``'s default) computes each recurrent node in its input's precision
with exact rounding, like onnxruntime. A node's outputs keep their declared ONNX element type: with the ``fp64``
target a float32 model's recurrent nodes compute in float64 and round their outputs to float32.

onnx is imported on first use, so ``import fusedrnn`` stays light.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import ops
from .. import targets as _targets
from ..errors import (
    AttributeValueError,
    ConversionError,
    DTypeError,
    FusedRNNError,
    InputError,
    ShapeError,
    UnsupportedFeatureError,
)

if TYPE_CHECKING:
    import onnx as onnx_lib

    from ..targets import Target

RECURRENT_OPS = {"LSTM": ops.lstm, "GRU": ops.gru, "RNN": ops.rnn}
"""ONNX op type (default domain) -> the fusedrnn function that runs it."""

_UNUSED_OUTPUT = "_fusedrnn_unused_output_{}"
_OPTIONS = ("dtype", "rounding", "activation_defaults")  # fusedrnn.ops keywords that are not ONNX attributes


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


class _NodeFailure(Exception):
    """Carries a FusedRNNError out of a node (the reference evaluator rewraps TypeErrors)."""

    def __init__(self, node, error: FusedRNNError):
        super().__init__(str(error))
        self.node = node
        self.error = error


def _text(value):
    """ONNX string attributes as str (bytes decoded), lists element-wise."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return value


def node_attributes(attributes: dict, R) -> dict:
    """ONNX node attributes as keyword arguments of ``fusedrnn.ops``: bytes strings decoded, numpy scalars made
    Python numbers, absent (None) and empty-list attributes dropped, ``hidden_size`` taken from R when missing."""
    out = {}
    for key, value in attributes.items():
        if key in _OPTIONS:
            raise AttributeValueError(f"{key}: not an ONNX attribute (a fusedrnn option, set by the target)")
        if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
            continue
        value = _text(value)
        if isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, list):
            value = [v.item() if isinstance(v, np.generic) else v for v in value]
        out[key] = value
    if "hidden_size" not in out and R is not None and np.ndim(R) == 3:
        out["hidden_size"] = int(np.shape(R)[-1])
    return out


def _op_classes(target: Target | None) -> list[type]:
    """``new_ops`` classes running LSTM / GRU / RNN nodes on fusedrnn with ``target``'s arithmetic."""
    from onnx.reference.op_run import OpRun

    options = {} if target is None else {"dtype": target.dtype, "rounding": target.rounding}

    def _run(self, X, W, R, *optional, **attributes):
        fn = RECURRENT_OPS[self.onnx_node.op_type]
        try:
            outputs = fn(X, W, R, *optional, **node_attributes(attributes, R), **options)
        except FusedRNNError as exc:
            raise _NodeFailure(self.onnx_node, exc) from exc
        dtype = np.asarray(X).dtype
        return tuple(np.asarray(o, dtype=dtype) for o in outputs[: len(self.onnx_node.output)])

    doc = f"ONNX {{}} on fusedrnn ({'native precision' if target is None else 'target ' + target.name})"
    return [type(op, (OpRun,), {"op_domain": "", "_run": _run, "__doc__": doc.format(op)}) for op in RECURRENT_OPS]


def _name_unused_outputs(graph, count: int = 0) -> int:
    """Give every omitted node output ("") a unique name, in place, subgraphs included; returns the count.

    ``onnx.reference`` stores each node output under its name, so an omitted output would overwrite the
    evaluator's slot for omitted *inputs* ("" -> None) and feed a later node's optional input with garbage."""
    import onnx

    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == "":
                node.output[k] = _UNUSED_OUTPUT.format(count)
                count += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                count = _name_unused_outputs(attr.g, count)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    count = _name_unused_outputs(g, count)
    return count


def _value_info(vi) -> TensorInfo:
    from onnx import helper

    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        return TensorInfo(vi.name, None, None)
    tt = t.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)) if tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
        )
    return TensorInfo(vi.name, shape, dtype)


class Model:
    """An ONNX model whose recurrent nodes run on fusedrnn. Build it with :func:`load`."""

    def __init__(self, proto: onnx_lib.ModelProto, target: Target | str | None = None):
        from onnx.reference import ReferenceEvaluator

        self._proto = proto
        self._target = None if target is None else _targets.get(target)
        initializers = {t.name for t in proto.graph.initializer}
        self._inputs = tuple(_value_info(v) for v in proto.graph.input if v.name not in initializers)
        self._optional_inputs = {v.name for v in proto.graph.input if v.name in initializers}
        self._outputs = tuple(_value_info(v) for v in proto.graph.output)
        try:
            self._evaluator = ReferenceEvaluator(proto, new_ops=_op_classes(self._target))
        except NotImplementedError as exc:
            raise UnsupportedFeatureError(f"model: {exc}") from exc

    @property
    def proto(self) -> onnx_lib.ModelProto:
        """The ONNX ModelProto (shared with every ``to()`` copy; omitted node outputs carry generated names)."""
        return self._proto

    @property
    def target(self) -> Target | None:
        """The target the recurrent nodes run on, or None for native precision."""
        return self._target

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        """The inputs a caller feeds (graph inputs that are not initializers)."""
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        return self._outputs

    @property
    def recurrent_nodes(self) -> list[str]:
        """Names (or op types) of the top-level nodes that run on fusedrnn."""
        return [n.name or n.op_type for n in self._proto.graph.node
                if n.op_type in RECURRENT_OPS and n.domain in ("", "ai.onnx")]

    def to(self, target: Target | str | None, calibration=None) -> Model:
        """The same model with every LSTM / GRU / RNN node computed on ``target`` (a name, a
        :class:`~fusedrnn.targets.Target`, or None for native precision)."""
        if calibration is not None:
            raise UnsupportedFeatureError("calibration: the float targets take no calibration data")
        return Model(self._proto, target)

    def _check_feeds(self, feeds) -> dict:
        if not isinstance(feeds, dict):
            raise DTypeError(f"feeds: expected a dict of input name -> array, got {type(feeds).__name__}")
        expected = ", ".join(str(i) for i in self._inputs) or "none"
        missing = [i.name for i in self._inputs if i.name not in feeds]
        unknown = [k for k in feeds if k not in {i.name for i in self._inputs} | self._optional_inputs]
        if missing or unknown:
            what = "; ".join(filter(None, [missing and f"missing {missing}", unknown and f"unknown {unknown}"]))
            raise InputError(f"feeds: {what}; the model's inputs are {expected}")
        out = {}
        info = {i.name: i for i in self._inputs}
        for name, value in feeds.items():
            arr = np.asarray(value)
            spec = info.get(name)
            if spec is not None and spec.dtype is not None and arr.dtype != spec.dtype:
                raise DTypeError(f"{name}: expected dtype {spec.dtype}, got {arr.dtype} (cast the array first)")
            if spec is not None and spec.shape is not None:
                if arr.ndim != len(spec.shape) or any(
                    isinstance(d, int) and d > 0 and d != n for d, n in zip(spec.shape, arr.shape, strict=False)
                ):
                    raise ShapeError(f"{name}: expected shape {spec}, got {arr.shape}")
            out[name] = arr
        return out

    def run(self, feeds: dict, outputs: list[str] | None = None) -> dict[str, np.ndarray]:
        """Run the model on ``feeds`` ({input name: array}); returns {output name: array} for ``outputs``
        (default: every graph output).

        Missing or unknown feed names raise :class:`~fusedrnn.errors.InputError`; a feed whose dtype or shape
        contradicts the model's declared input raises DTypeError / ShapeError; an unknown output name raises
        AttributeValueError."""
        feeds = self._check_feeds(feeds)
        names = [o.name for o in self._outputs] if outputs is None else list(outputs)
        known = {o.name for o in self._outputs}
        bad = [n for n in names if n not in known]
        if bad:
            raise AttributeValueError(f"outputs: unknown output(s) {bad}; the model's outputs are {sorted(known)}")
        try:
            results = self._evaluator.run(names, feeds)
        except _NodeFailure as failure:
            node, err = failure.node, failure.error
            raise type(err)(f"node {node.name or node.op_type!r} ({node.op_type}): {err}") from err
        return dict(zip(names, results, strict=True))

    def __repr__(self) -> str:
        target = "native" if self._target is None else self._target.name
        ins = ", ".join(str(i) for i in self._inputs)
        outs = ", ".join(str(o) for o in self._outputs)
        return f"<fusedrnn.onnx.Model {self._proto.graph.name!r} on {target}: ({ins}) -> ({outs})>"


def load(path_or_model: str | os.PathLike | bytes | onnx_lib.ModelProto, target: Target | str | None = None) -> Model:
    """Load an ONNX model (a path, serialized bytes or a ModelProto, which is copied) as a :class:`Model`;
    ``target`` as in :meth:`Model.to`."""
    import onnx
    from google.protobuf.message import DecodeError

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
    _name_unused_outputs(proto.graph)
    return Model(proto, target)


__all__ = ["Model", "TensorInfo", "RECURRENT_OPS", "load", "node_attributes"]

