"""ExtendedLSTM / VitisLSTM nodes inside ONNX models, on :mod:`onnx.reference` (onnx is imported lazily).

``run_node(node, X, W, R, B)`` runs one node with its attributes read from the NodeProto (float attributes are
stored as float32 there, so the scales are exact). ``run_model(model, feeds)`` runs a whole model: the
ExtendedLSTM nodes on fusedrnn, every other node on ``onnx.reference.ReferenceEvaluator``.

Nodes as Quark's ``convert_lstm_to_customlstm`` tool writes them keep the replaced LSTM's inputs and outputs: a
PyTorch export gives 7 inputs (X, W, R, B, an empty sequence_lens, initial_h and initial_c, zeros behind
DequantizeLinear) and 3 outputs (Y, Y_h, Y_c). Quark's own kernel registers 4 inputs and 1 output, and computes
from h = Y's zero point and c = 0 over the whole sequence; here such a node runs that computation when its extra
inputs say the same thing (no or all-zero initial states, no or full-length sequence_lens, no or zero peepholes
P; otherwise UnsupportedFeatureError in faithful mode, while the corrected mode takes initial states), and its
Y_h / Y_c outputs are the kernel's final states (h dequantized as Y is, c its float32 cell), see
:func:`node_outputs`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops import op_dequantize_linear, op_quantize_linear

from ...errors import AttributeValueError, ConversionError, InputError, UnsupportedFeatureError
from .op import MODES, PreparedExtendedLSTM, prepare

# (domain, op_type) of the op and its legacy alias; both run the same kernel
OPS = (("com.amd.quark", "ExtendedLSTM"), ("com.vai.quantize", "VitisLSTM"))
SCALE_ATTRIBUTES = tuple(f"{n}_{k}" for n in "xwrby" for k in ("scale", "zero_point"))


def is_extended_lstm(node) -> bool:
    """Whether a NodeProto is an ExtendedLSTM (or legacy VitisLSTM) node."""
    return (node.domain, node.op_type) in OPS


def node_attributes(node) -> dict[str, Any]:
    """The node's attributes as Python values (floats exact: float32 in the proto)."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def op_arguments(attrs: dict) -> dict[str, Any]:
    """:func:`extended_lstm` keyword arguments from node attributes (what the kernel reads; missing required
    attributes raise AttributeValueError as the kernel does at load)."""
    missing = [n for n in ("hidden_size", *SCALE_ATTRIBUTES) if n not in attrs]
    if missing:
        raise AttributeValueError(f"ExtendedLSTM: missing attribute(s) {missing} (Quark's kernel requires them)")
    kw = {n: attrs[n] for n in SCALE_ATTRIBUTES}
    kw["hidden_size"] = attrs["hidden_size"]
    kw["direction"] = attrs.get("direction", "bidirectional")
    kw["layout"] = attrs.get("layout", 0)
    kw["input_forget"] = attrs.get("input_forget", 0)
    return kw


class PreparedCache:
    """Prepared ExtendedLSTMs (:func:`fusedrnn.quark.prepare`) for the weights that ONNX models feed their nodes,
    reused while a node is fed equal weights. Graph weights usually come out of DequantizeLinear nodes as new
    arrays every run, so entries are found by value: a key of the attributes, shapes, dtypes and a sample of the
    values, then a full ``array_equal`` against the cached copies (never array identity, arrays are mutable).
    At most ``size`` entries (least recently used dropped); thread-safe."""

    def __init__(self, size: int = 32):
        self.size = size
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(arrays, mode: str, kw: dict):
        sample = []
        for a in arrays:
            if a is None:
                sample.append(None)
                continue
            flat = a.reshape(-1)
            sample.append((a.shape, a.dtype.str, flat[:: max(1, flat.size // 32)].tobytes()))
        return mode, tuple(sorted(kw.items())), tuple(sample)

    def get(self, W, R, B=None, *, mode: str = "faithful", **kw) -> PreparedExtendedLSTM:
        """The prepared op for these weights and :func:`fusedrnn.quark.prepare` arguments (made on a miss)."""
        arrays = tuple(None if a is None else np.asarray(a) for a in (W, R, B))
        try:
            key = self._key(arrays, mode, kw)
            hash(key)
        except (TypeError, ValueError):  # unhashable attribute values, object arrays: no caching
            return prepare(*arrays, mode=mode, **kw)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(
                    (a is None) == (c is None) and (a is None or np.array_equal(a, c, equal_nan=True))
                    for a, c in zip(arrays, entry[0], strict=True)):
                self._entries.move_to_end(key)
                return entry[1]
        prepared = prepare(*arrays, mode=mode, **kw)  # validates; raises before anything is cached
        copies = tuple(None if a is None else a.copy() for a in arrays)
        with self._lock:
            self._entries[key] = (copies, prepared)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return prepared

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


NODE_CACHE = PreparedCache()
"""The cache :func:`run_node` and :mod:`fusedrnn.onnx` models use for their ExtendedLSTM nodes."""


def run_prepared(X, W, R, B=None, *, mode: str = "faithful", **kw) -> np.ndarray:
    """:func:`fusedrnn.quark.extended_lstm` through :data:`NODE_CACHE` (same result, the weights prepared once)."""
    return NODE_CACHE.get(W, R, B, mode=mode, **kw)(X)


MAX_INPUTS = 8
"""An ExtendedLSTM node keeps the inputs of the LSTM it replaced: X, W, R, B, sequence_lens, initial_h, initial_c,
P (Quark's kernel reads the first four)."""


def _zero(a) -> bool:
    return a is None or not np.any(np.asarray(a))


def node_outputs(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
                 mode: str = "faithful", **kw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y [T, D, B, H], Y_h, Y_c [D, B, H]) of an ExtendedLSTM node with the inputs of the ONNX LSTM it replaced
    (through :data:`NODE_CACHE`). Y is :func:`fusedrnn.quark.extended_lstm`'s; Y_h is h after each direction's
    last step, dequantized with Y's parameters (Y[T-1] forward, Y[0] backward), Y_c the kernel's float32 cell.

    Quark's kernel has no sequence_lens, initial states or peepholes: ``sequence_lens`` must be absent or equal T
    for every row and ``P`` absent or zero; in faithful mode ``initial_h`` / ``initial_c`` must be absent or
    zero, which is where the kernel starts (h at Y's zero point, c at 0); the corrected mode takes them.
    Otherwise UnsupportedFeatureError names the input."""
    X = np.asarray(X)
    T = X.shape[0] if X.ndim == 3 else 0
    if sequence_lens is not None and np.any(np.asarray(sequence_lens) != T):
        raise UnsupportedFeatureError(f"sequence_lens: ExtendedLSTM runs every sequence for all T={T} steps (Quark's "
                                      f"kernel has no sequence_lens), got {np.asarray(sequence_lens).tolist()}")
    if not _zero(P):
        raise UnsupportedFeatureError("P: ExtendedLSTM has no peepholes (Quark's kernel ignores P), got non-zero "
                                      "peephole weights")
    if mode == "faithful":
        for name, a in (("initial_h", initial_h), ("initial_c", initial_c)):
            if not _zero(a):
                raise UnsupportedFeatureError(f"{name}: Quark's kernel starts from h = Y's zero point and c = 0; a "
                                              f"non-zero {name} is not expressible in faithful mode (use "
                                              f"mode='corrected')")
        initial_h = initial_c = None
    prepared = NODE_CACHE.get(W, R, B, mode=mode, **kw)
    return prepared(X, initial_h=initial_h, initial_c=initial_c, return_state=True)


def run_node(node, X, W, R, B=None, *, mode: str = "faithful") -> np.ndarray:
    """Run one ExtendedLSTM / VitisLSTM NodeProto on its input arrays; returns Y float32 [T, D, B, H].

    In faithful mode the ``direction`` attribute is ignored (as by the kernel); in corrected mode it is used.
    A node with the optional LSTM inputs and outputs (as Quark's conversion tool leaves them) runs through
    :func:`run_node_outputs`.
    """
    _check_node(node)
    return run_prepared(X, W, R, B, mode=mode, **op_arguments(node_attributes(node)))


def _check_node(node) -> None:
    if not is_extended_lstm(node):
        raise AttributeValueError(f"node: expected an ExtendedLSTM node ({OPS}), got {node.domain}::{node.op_type}")
    if len(node.input) > MAX_INPUTS or len(node.output) > 3 or not node.output or not node.output[0]:
        raise UnsupportedFeatureError(f"{node.op_type}: expected at most {MAX_INPUTS} inputs (X, W, R, B, "
                                      f"sequence_lens, initial_h, initial_c, P) and the outputs (Y[, Y_h, Y_c]) "
                                      f"with Y present, got {len(node.input)} inputs and outputs "
                                      f"{list(node.output)}")


def run_node_outputs(node, *inputs, mode: str = "faithful") -> tuple[np.ndarray, ...]:
    """Every output the node names (Y, Y_h, Y_c; :func:`node_outputs`) from its input arrays (None or absent
    for omitted optional inputs)."""
    _check_node(node)
    outs = node_outputs(*inputs, mode=mode, **op_arguments(node_attributes(node)))
    return outs[: len(node.output)]


def op_classes(mode: str = "faithful") -> list[type]:
    """``onnx.reference`` ``new_ops`` classes for ExtendedLSTM and VitisLSTM in ``mode``."""
    if mode not in MODES:
        raise AttributeValueError(f"mode: expected one of {MODES}, got {mode!r}")

    def _run(self, X, W, R, *optional, **_attributes):
        return run_node_outputs(self.onnx_node, X, W, R, *optional, mode=mode)

    return [type(op_type, (OpRun,), {"op_domain": domain, "_run": _run,
                                     "__doc__": f"{domain}::{op_type} on fusedrnn.quark ({mode})"})
            for domain, op_type in OPS]


def contrib_qdq_classes() -> list[type]:
    """``com.microsoft`` QuantizeLinear / DequantizeLinear (onnxruntime's contrib Q/DQ, which its quantizer emits
    for 16-bit types below opset 21) with the standard operators' semantics, for ``onnx.reference``."""
    def latest(module, name):  # attributes are read from the newest ai.onnx schema: use its implementation
        versions = [int(n.rsplit("_", 1)[1]) for n in dir(module) if n.startswith(name + "_") and n[-1].isdigit()]
        return getattr(module, f"{name}_{max(versions)}")

    return [type(name, (latest(mod, name),), {"op_domain": "com.microsoft"})
            for mod, name in ((op_quantize_linear, "QuantizeLinear"), (op_dequantize_linear, "DequantizeLinear"))]


def load_model(model):
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes | bytearray):
        return onnx.load_model_from_string(bytes(model))
    if isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"model: no such file: {path}")
        return onnx.load(path)
    raise ConversionError(f"model: expected an ONNX ModelProto, serialized bytes or a path, got {type(model).__name__}")


def run_model(model, feeds: dict, *, mode: str = "faithful", outputs: list[str] | None = None
              ) -> dict[str, np.ndarray]:
    """Run an ONNX model holding ExtendedLSTM / VitisLSTM nodes: those on fusedrnn.quark (``mode``), the rest on
    ``onnx.reference`` (plus onnxruntime's ``com.microsoft`` QuantizeLinear / DequantizeLinear). ``model`` is a
    ModelProto, bytes or a path; ``feeds`` {input name: array}; returns {output name: array} for ``outputs``
    (default every graph output)."""
    proto = load_model(model)
    if not isinstance(feeds, dict):
        raise InputError(f"feeds: expected a dict {{input name: array}}, got {type(feeds).__name__}")
    inits = {i.name for i in proto.graph.initializer}
    need = [i.name for i in proto.graph.input if i.name not in inits]
    missing, unknown = [n for n in need if n not in feeds], [n for n in feeds if n not in need]
    if missing or unknown:
        raise InputError(f"feeds: missing {missing}, unknown {unknown}; the model's inputs are {need}")
    names = [o.name for o in proto.graph.output] if outputs is None else list(outputs)
    known = {o.name for o in proto.graph.output}
    if any(n not in known for n in names):
        raise AttributeValueError(f"outputs: unknown output(s) {[n for n in names if n not in known]}; the model's "
                                  f"outputs are {sorted(known)}")
    contrib = contrib_qdq_classes() if any(n.domain == "com.microsoft" for n in proto.graph.node) else []
    ev = ReferenceEvaluator(proto, new_ops=op_classes(mode) + contrib)
    results = ev.run(names, {k: np.asarray(v) for k, v in feeds.items()})
    return dict(zip(names, results, strict=True))
