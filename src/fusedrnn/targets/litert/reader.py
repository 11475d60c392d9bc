"""Read a .tflite flatbuffer into plain data: tensors (dtype, shape, constant data, quantization) and operators
(name, version, tensor indices, options as a dict). Only the main subgraph (0) is read.

Optional operator inputs are ``-1`` in ``OpInfo.inputs``, as in the flatbuffer.

A sparse constant (``SparsityParameters``) is read into its dense form, its metadata kept in
``TensorInfo.sparsity`` (the kernels that read sparse weights differently look at it).

A file is checked before anything is built from it: a damaged flatbuffer, an operator code, tensor or buffer index
out of range, a negative dimension, a constant whose buffer does not hold exactly its shape's elements (counted
in Python integers, so no product wraps), a quantization with a scale that is not finite and > 0, a zero point
outside its integer type or per-axis parameters that do not match the quantized dimension raise
:class:`~fusedrnn.errors.FileFormatError` naming the tensor or operator, what was expected and what the file holds.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from ...errors import DTypeError, FileFormatError
from .schema import enum_names, schema
from .sparsity import Sparsity, from_flatbuffer

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
    sparsity: Sparsity | None = None  # a sparse constant: ``data`` is its dense form, zeros where nothing is stored

    @property
    def dtype(self) -> np.dtype | None:
        t = _DTYPES.get(self.type_name)
        return None if t is None else np.dtype(t)

    @property
    def quantized(self) -> bool:
        return self.scale is not None and self.scale.size > 0

    @property
    def size(self) -> int:
        return math.prod(int(s) for s in self.shape)


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


def _text(v) -> str:
    """A flatbuffer string (bytes or None) as text; undecodable bytes become U+FFFD."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return "" if v is None else str(v)


def _op_name(code) -> tuple[str, bool]:
    names = enum_names("BuiltinOperator")
    b = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    name = names.get(b, f"BUILTIN_{b}")
    if name == "CUSTOM":
        return _text(code.customCode), True
    return name, False


def _ints(v) -> tuple[int, ...]:
    return tuple(int(i) for i in (v if v is not None else ()))


def _bad(what: str, expected: str, got) -> FileFormatError:
    return FileFormatError(f"source: {what}: expected {expected}, got {got}")


def _quantization(i: int, name: str, type_name: str, shape: tuple[int, ...], q):
    """(scale float32 [n], zero point int64 [n], quantized dimension) of a tensor, or (None, None, 0); checked."""
    if q is None or q.scale is None or not len(q.scale):
        return None, None, 0
    what = f"tensor {i} ({name!r}) quantization"
    scale = np.asarray(q.scale, np.float32).reshape(-1)
    zp = (np.zeros(scale.shape, np.int64) if q.zeroPoint is None or not len(q.zeroPoint)
          else np.asarray(q.zeroPoint, np.int64).reshape(-1))
    qdim = int(q.quantizedDimension)
    if zp.size != scale.size:
        raise _bad(f"{what} zero_point", f"{scale.size} value(s), one per scale", f"{zp.size}")
    if scale.size > 1 and not (0 <= qdim < len(shape) and shape[qdim] == scale.size):
        raise _bad(f"{what} quantized_dimension", f"a dimension of shape {shape} with {scale.size} entries (one "
                   f"per scale)", qdim)
    dt = _DTYPES.get(type_name)
    if dt is not None and np.dtype(dt).kind in "iu":  # a quantized integer tensor: the scales divide and multiply
        bad = scale[~(np.isfinite(scale) & (scale > 0))]
        if bad.size:
            raise _bad(f"{what} scale", "finite values > 0", f"{bad[:4].tolist()}")
        info = np.iinfo(dt)
        if zp.size and (zp.min() < info.min or zp.max() > info.max):
            raise _bad(f"{what} zero_point", f"values in the {type_name} range [{info.min}, {info.max}]",
                       f"[{int(zp.min())}, {int(zp.max())}]")
    return scale, zp, qdim


def _tensor(i: int, t, buffers, raw: bytes) -> TensorInfo:
    name = _text(t.name)
    types = enum_names("TensorType")
    if int(t.type) not in types:
        raise _bad(f"tensor {i} ({name!r}) type", f"a TensorType (0 to {max(types)})", int(t.type))
    type_name = types[int(t.type)]
    shape = _ints(t.shape)
    if any(s < 0 for s in shape):
        raise _bad(f"tensor {i} ({name!r}) shape", "dimensions >= 0", list(shape))
    if not 0 <= int(t.buffer) < max(len(buffers), 1):
        raise _bad(f"tensor {i} ({name!r}) buffer", f"an index in [0, {len(buffers)})", int(t.buffer))
    data = None
    sparsity = None if getattr(t, "sparsity", None) is None else from_flatbuffer(t.sparsity)
    buf = buffers[t.buffer] if 0 < t.buffer < len(buffers) else None
    if buf is not None:
        blob = None
        if buf.data is not None and len(buf.data):
            blob = np.asarray(buf.data, dtype=np.uint8).tobytes()
        elif getattr(buf, "offset", 0) > 1:
            off, size = int(buf.offset), int(buf.size)
            if size < 0 or off + size > len(raw):
                raise _bad(f"tensor {i} ({name!r}) buffer {t.buffer}", f"bytes inside the {len(raw)}-byte file",
                           f"offset {off} size {size}")
            blob = raw[off : off + size]
        if blob is not None:
            dt = _DTYPES.get(type_name)
            if dt is None:
                data = np.frombuffer(blob, np.uint8)
            elif sparsity is not None:
                item = np.dtype(dt).itemsize
                if len(blob) % item:
                    raise _bad(f"tensor {i} ({name!r}) buffer {t.buffer}", f"whole {type_name} elements",
                               f"{len(blob)} bytes")
                stored = np.frombuffer(blob, np.dtype(dt).newbyteorder("<")).astype(dt, copy=False)
                data = sparsity.densify(stored, shape, f"tensor {i} ({name!r})")
                data.flags.writeable = False
            else:
                n = math.prod(shape)  # Python ints: a product of huge dimensions cannot wrap to the buffer's size
                item = np.dtype(dt).itemsize
                if len(blob) != n * item:
                    raise _bad(f"tensor {i} ({name!r}) buffer {t.buffer}", f"{n} {type_name} elements ({n * item} "
                               f"bytes) for shape {shape}", f"{len(blob)} bytes")
                data = np.frombuffer(blob, np.dtype(dt).newbyteorder("<")).astype(dt, copy=False).reshape(shape)
                data.flags.writeable = False
    scale, zp, qdim = _quantization(i, name, type_name, shape, t.quantization)
    return TensorInfo(i, name, type_name, shape, data, scale, zp, qdim, bool(t.isVariable), sparsity)


def _indices(what: str, idx: tuple[int, ...], n: int, optional: bool = False) -> tuple[int, ...]:
    """``idx`` checked against ``n`` tensors (``-1`` allowed where the slot is ``optional``)."""
    for k, i in enumerate(idx):
        if not (0 <= i < n or (optional and i == -1)):
            raise _bad(f"{what}[{k}]", f"a tensor index in [0, {n}){' or -1' if optional else ''}", i)
    return idx


def read_model(source) -> ModelInfo:
    """Parse a .tflite file (path, bytes or bytearray) into a :class:`ModelInfo` (subgraph 0); a damaged or
    inconsistent file raises :class:`~fusedrnn.errors.FileFormatError` (see the module docstring)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            raw = f.read()
    else:
        raise DTypeError(f"source: expected a .tflite path or its bytes, got {type(source).__name__}")
    if len(raw) < 8 or raw[4:8] != b"TFL3":
        raise FileFormatError(f"source: not a TFLite flatbuffer (expected the identifier 'TFL3' at byte 4, "
                              f"got {raw[4:8]!r})")
    s = schema()
    try:
        model = s.ModelT.InitFromObj(s.Model.GetRootAs(raw, 0))
    except Exception as e:  # a corrupt flatbuffer makes the generated reader fail in many ways
        raise FileFormatError(f"source: not a valid TFLite flatbuffer ({type(e).__name__}: {e})") from None
    if not model.subgraphs:
        raise FileFormatError("source: subgraphs: expected at least one (the main graph), got none")
    g = model.subgraphs[0]
    buffers = model.buffers or []
    tensors = tuple(_tensor(i, t, buffers, raw) for i, t in enumerate(g.tensors or []))
    n = len(tensors)
    op_codes = model.operatorCodes or []
    codes = [_op_name(c) for c in op_codes]
    ops = []
    for k, op in enumerate(g.operators or []):
        if not 0 <= int(op.opcodeIndex) < len(codes):
            raise _bad(f"operator {k} opcode_index", f"an index in [0, {len(codes)}) (the operator codes)",
                       int(op.opcodeIndex))
        name, custom = codes[op.opcodeIndex]
        version = int(op_codes[op.opcodeIndex].version)
        opts = options_dict(op.builtinOptions)
        if custom and op.customOptions is not None:
            opts = {"custom_options": bytes(np.asarray(op.customOptions, np.uint8))}
        ops.append(OpInfo(k, name, version, _indices(f"operator {k} ({name}) inputs", _ints(op.inputs), n, True),
                          _indices(f"operator {k} ({name}) outputs", _ints(op.outputs), n),
                          _indices(f"operator {k} ({name}) intermediates", _ints(op.intermediates), n, True),
                          opts, custom))
    return ModelInfo(tensors, tuple(ops), _indices("subgraph inputs", _ints(g.inputs), n),
                     _indices("subgraph outputs", _ints(g.outputs), n), _text(model.description))
