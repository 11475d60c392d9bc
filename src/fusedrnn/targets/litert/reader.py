"""Read a .tflite flatbuffer into plain data: tensors (dtype, shape, constant data, quantization) and operators
(name, version, tensor indices, options as a dict). Only the main subgraph (0) is read.

Optional operator inputs are ``-1`` in ``OpInfo.inputs``, as in the flatbuffer.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from ...errors import AttributeValueError, DTypeError, ShapeError
from .schema import enum_names, schema

# TensorType name -> NumPy dtype (the types a recurrent graph uses; others read as raw bytes)
_DTYPES = {
    "FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT32": np.int32, "UINT8": np.uint8,
    "INT64": np.int64, "INT16": np.int16, "INT8": np.int8, "BOOL": np.bool_, "UINT16": np.uint16,
    "UINT32": np.uint32,
}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the graph. ``scale``/``zero_point`` are float32 / int64 arrays (per tensor: one element)
    or None; ``data`` is the constant contents (read-only) or None (activations, variables, zero-size)."""

    index: int
    name: str
    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray | None = None
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    quantized_dimension: int = 0
    is_variable: bool = False

    @property
    def dtype(self) -> np.dtype | None:
        t = _DTYPES.get(self.type_name)
        return None if t is None else np.dtype(t)

    @property
    def quantized(self) -> bool:
        return self.scale is not None and self.scale.size > 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


@dataclass(frozen=True)
class OpInfo:
    """One operator: builtin name (e.g. ``"UNIDIRECTIONAL_SEQUENCE_LSTM"``) or custom code."""

    index: int
    name: str
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...] = ()
    options: dict = field(default_factory=dict)
    custom: bool = False


@dataclass(frozen=True)
class ModelInfo:
    tensors: tuple[TensorInfo, ...]
    ops: tuple[OpInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    description: str = ""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# option fields whose integer value is an enum of the schema
_ENUM_OPTIONS = {"fused_activation_function": "ActivationFunctionType", "kernel_type": "LSTMKernelType"}


def options_dict(obj) -> dict:
    """The fields of a generated ``*OptionsT`` object as {snake_case: value}, enums by name."""
    if obj is None:
        return {}
    out = {}
    for k, v in vars(obj).items():
        key = _snake(k)
        if key in _ENUM_OPTIONS and isinstance(v, int):
            v = enum_names(_ENUM_OPTIONS[key]).get(v, v)
        elif isinstance(v, np.ndarray):
            v = v.tolist()
        out[key] = v
    return out


def _op_name(code) -> tuple[str, bool]:
    names = enum_names("BuiltinOperator")
    b = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    name = names.get(b, f"BUILTIN_{b}")
    if name == "CUSTOM":
        cc = code.customCode
        return (cc.decode() if isinstance(cc, bytes) else str(cc)), True
    return name, False


def _tensor(i: int, t, buffers, raw: bytes) -> TensorInfo:
    type_name = enum_names("TensorType").get(int(t.type), f"TYPE_{t.type}")
    shape = tuple(int(s) for s in (t.shape if t.shape is not None else ()))
    name = t.name.decode() if isinstance(t.name, bytes) else (t.name or "")
    data = None
    buf = buffers[t.buffer] if 0 < t.buffer < len(buffers) else None
    if buf is not None:
        blob = None
        if buf.data is not None and len(buf.data):
            blob = np.asarray(buf.data, dtype=np.uint8).tobytes()
        elif getattr(buf, "offset", 0) > 1:
            blob = raw[buf.offset : buf.offset + buf.size]
        if blob is not None:
            dt = _DTYPES.get(type_name)
            if dt is None:
                data = np.frombuffer(blob, np.uint8)
            else:
                n = int(np.prod(shape)) if shape else 1
                arr = np.frombuffer(blob, np.dtype(dt).newbyteorder("<"))
                if arr.size != n:
                    raise ShapeError(f"tensor {name!r}: expected {n} elements for shape {shape}, "
                                     f"its buffer holds {arr.size}")
                data = arr.astype(dt, copy=False).reshape(shape)
                data.flags.writeable = False
    scale = zp = None
    qdim = 0
    q = t.quantization
    if q is not None and q.scale is not None and len(q.scale):
        scale = np.asarray(q.scale, np.float32).reshape(-1)
        zp = (np.zeros(scale.shape, np.int64) if q.zeroPoint is None or not len(q.zeroPoint)
              else np.asarray(q.zeroPoint, np.int64).reshape(-1))
        qdim = int(q.quantizedDimension)
    return TensorInfo(i, name, type_name, shape, data, scale, zp, qdim, bool(t.isVariable))


def read_model(source) -> ModelInfo:
    """Parse a .tflite file (path, bytes or bytearray) into a :class:`ModelInfo` (subgraph 0)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            raw = f.read()
    else:
        raise DTypeError(f"source: expected a .tflite path or its bytes, got {type(source).__name__}")
    if len(raw) < 8 or raw[4:8] != b"TFL3":
        raise AttributeValueError(f"source: not a TFLite flatbuffer (expected the identifier 'TFL3' at byte 4, "
                                  f"got {raw[4:8]!r})")
    s = schema()
    try:
        model = s.ModelT.InitFromObj(s.Model.GetRootAs(raw, 0))
    except Exception as e:  # a corrupt flatbuffer makes the generated reader fail in many ways
        raise AttributeValueError(f"source: not a valid TFLite flatbuffer ({type(e).__name__}: {e})") from None
    if not model.subgraphs:
        raise AttributeValueError("source: the model has no subgraph")
    g = model.subgraphs[0]
    buffers = model.buffers or []
    try:
        tensors = tuple(_tensor(i, t, buffers, raw) for i, t in enumerate(g.tensors or []))
    except (TypeError, ValueError, IndexError) as e:
        if isinstance(e, (ShapeError, AttributeValueError)):
            raise
        raise AttributeValueError(f"source: corrupt tensor table ({type(e).__name__}: {e})") from None
    codes = [_op_name(c) for c in (model.operatorCodes or [])]
    ops = []
    for k, op in enumerate(g.operators or []):
        name, custom = codes[op.opcodeIndex]
        version = int(model.operatorCodes[op.opcodeIndex].version)
        opts = options_dict(op.builtinOptions)
        if custom and op.customOptions is not None:
            opts = {"custom_options": bytes(np.asarray(op.customOptions, np.uint8))}
        ops.append(OpInfo(k, name, version, tuple(int(i) for i in (op.inputs if op.inputs is not None else ())),
                          tuple(int(i) for i in (op.outputs if op.outputs is not None else ())),
                          tuple(int(i) for i in (op.intermediates if op.intermediates is not None else ())),
                          opts, custom))
    desc = model.description.decode() if isinstance(model.description, bytes) else (model.description or "")
    return ModelInfo(tensors, tuple(ops), tuple(int(i) for i in g.inputs), tuple(int(i) for i in g.outputs), desc)
