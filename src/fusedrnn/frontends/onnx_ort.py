"""onnxruntime as the executor of a whole model's non-recurrent nodes; its recurrent nodes call back into fusedrnn.

A model whose recurrent nodes are all in its top-level graph or in the branches of top-level ``If`` nodes runs as
onnxruntime segments around them (:mod:`fusedrnn.frontends.onnx_partition`, no Python op); the rewrite below serves
the others (recurrent nodes in ``Loop`` / ``Scan`` bodies) and is what the measurements below are of.

:func:`fusedrnn.onnx.load` (``executor="onnxruntime"``, or ``"auto"`` when onnxruntime and onnxruntime-extensions
import) rewrites a copy of the model: every recurrent node (``RECURRENT_OPS``, top level and inside ``If`` /
``Loop`` / ``Scan`` bodies) becomes a node ``ai.fusedrnn.ort::Recurrent<n>x<m>`` (n passed inputs, m outputs)
that onnxruntime-extensions runs as a Python op, with ``Cast`` nodes around it: inputs cross as float64 (exact
for every ONNX float and integer type a recurrent node takes) and outputs are cast back to the node's element
type. The op receives only the node's identity (a string attribute ``key``, "<graph token>:<node index>"); the
node, its exact attributes, its constant inputs (initializers, read once from the proto) and the element types
of the others stay on our side, so the op calls the very same per-node function as the reference route
(:func:`fusedrnn.frontends.onnx_emulation.node_function`: target dtype and rounding, calibrated layers, the
calibration recorder, native DynamicQuantizeLSTM). One rewritten session serves a model and every ``to()`` copy
of it; each ``run`` installs its own node function under a lock, so several models and targets coexist in one
process.

onnxruntime-extensions' pitfalls, and what this module does about them:

* the Python-op registry is process-global, and declaring an op after a session that uses the extensions
  library exists crashed the process (SIGSEGV, checked with 0.15.2): the op types are a fixed set (n = 1..12,
  m = 1..3, all float64) declared once, before our first session, together with ``fusedrnn.quark``'s ops;
* float attributes arrive as strings with about 6 significant digits: none are passed;
* an exception raised inside a Python op aborts the process: the op never raises; it records the exception,
  returns empty outputs, and :meth:`OrtGraph.run` re-raises it after onnxruntime returns (or fails);
* outputs cross as Python lists (about 70 ns per element) and float16 outputs are unsupported: hence float64.

Measured (ORT 1.31.1, onnxruntime-extensions 0.15.2, onnx 1.23.2) on a shared 2-core machine with other jobs
running, so timings are noisy (min of 5-50 runs; the least loaded of three sessions): ms per ``run``, and max
|Δ| of all model outputs against plain onnxruntime (single-threaded session) and between the two executors.

==========================================  =========  ========  =========  ==========  ==========  ==========
model, input                                reference  ort exec  plain ORT  Δ ref/ORT   Δ exec/ORT  Δ exec/ref
==========================================  =========  ========  =========  ==========  ==========  ==========
bundled example digits_lstm, batch 360      2.8        4.1       1.9        4.3e-6      4.3e-6      0
silero_vad_v6 (faster-whisper), 64 frames   2.9        4.5       3.5        1.5e-5      1.1e-5      3.8e-6
silero_vad (LSTMs in If), 512-sample chunk  3.1        0.37      0.11       6.0e-8      6.0e-8      4.4e-8
silero_vad_half (float16), one chunk        2.9        0.36      0.10       1.4e-6      2.4e-7      1.4e-6
silero_vad_16k_sequence, 200 frames         7.5        14        11         4.8e-6      3.3e-6      4.8e-6
ddddocr common_old (DynamicQuantizeLSTM)    844        94        8.7        8.7e-2      0           8.7e-2
==========================================  =========  ========  =========  ==========  ==========  ==========

Fidelity: the onnxruntime executor is never further from plain onnxruntime than the reference route and is
bit-identical on ddddocr, whose dynamically quantized conv stack (DynamicQuantizeLinear, ConvInteger, ...) on
the reference evaluator already feeds the LSTM an X up to 0.19 away from onnxruntime's (|X| <= 10). Speed: 8-9x
faster on streaming VAD chunks and on the conv-heavy CRNN (its remaining ~85 ms is fusedrnn's own
DynamicQuantizeLSTM kernel); up to ~1.5-2x slower where the recurrent outputs are large and the rest is cheap
(outputs cross the bridge as Python lists, ~70 ns per value).
Recurrent nodes get identical inputs on both routes whenever the non-recurrent nodes are exact, so their outputs
are then equal bit for bit (tests/test_onnx_ort_executor.py). The first load in a process also pays the
onnxruntime-extensions import (about 1-2 s when torch is installed: the package imports torch).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from itertools import count

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import InputError, UnsupportedFeatureError
from ..targets.quark import ort_extensions as quark_ops
from ..targets.quark.onnx_op import OPS as QUARK_OPS
from .onnx_native import NativeGraph, native_graph
from .onnx_ops import node_label, proto_attributes, recurrent_op, subgraphs
from .onnx_partition import Partition, partition

DOMAIN = "ai.fusedrnn.ort"
MAX_INPUTS = 12   # DynamicQuantizeLSTM has 12 inputs
MAX_OUTPUTS = 3   # LSTM: Y, Y_h, Y_c
_PREFIX = "_fusedrnn_ort_"
_PACKAGE_OPS = {"ArgSort"}  # declared by onnxruntime_extensions itself when it is imported

_declared = False
_declare_lock = threading.Lock()
_GRAPHS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # token -> OrtGraph
_tokens = count()


available = quark_ops.available
"""Whether onnxruntime and onnxruntime-extensions import (the Python-op executor needs both)."""


def op_type(n_inputs: int, n_outputs: int) -> str:
    """The Python op type of a recurrent node with ``n_inputs`` passed inputs and ``n_outputs`` outputs."""
    return f"Recurrent{n_inputs}x{n_outputs}"


def _dispatch(n_outputs: int):
    def compute(*arrays, key):
        graph = None
        try:
            token, index = key.rsplit(":", 1)
            graph = _GRAPHS[token]
            return graph._call(int(index), arrays)
        except BaseException as exc:  # noqa: BLE001 -- an exception escaping a Python op aborts the process
            if graph is not None:
                graph._fail(exc)
            empty = np.zeros(0, np.float64)
            return empty if n_outputs == 1 else (empty,) * n_outputs

    return compute


def declare_ops() -> None:
    """Declare this module's op types (and ``fusedrnn.quark``'s) with onnxruntime-extensions, once per process.

    Declaring Python ops while a session that uses the extensions library is open can crash the process, so
    this refuses (UnsupportedFeatureError; ``executor="auto"`` then falls back to the reference executor) when
    other code declared Python ops first or ``fusedrnn.quark`` has opened sessions: call it before any other
    use of onnxruntime-extensions in the process."""
    global _declared
    with _declare_lock:
        if _declared:
            return
        from onnxruntime_extensions import Opdef, PyCustomOpDef, onnx_op

        ours = {f"{domain}::{name}" for domain, name in QUARK_OPS} | _PACKAGE_OPS
        foreign = sorted({od.op_type for od in getattr(Opdef, "_odlist", {}).values()} - ours)
        if foreign or quark_ops.has_sessions():
            who = f"Python ops {foreign}" if foreign else "fusedrnn.quark sessions"
            raise UnsupportedFeatureError(
                f"executor: onnxruntime-extensions {who} exist already; declaring fusedrnn's ops now could crash "
                f"open sessions (an onnxruntime-extensions defect): call fusedrnn.frontends.onnx_ort.declare_ops() "
                f"before other onnxruntime-extensions use, or use executor='reference'")
        quark_ops.declare_ops()  # declared together: neither family declares after the other's sessions exist
        for n in range(1, MAX_INPUTS + 1):
            for m in range(1, MAX_OUTPUTS + 1):
                onnx_op(op_type=f"{DOMAIN}::{op_type(n, m)}", inputs=[PyCustomOpDef.dt_double] * n,
                        outputs=[PyCustomOpDef.dt_double] * m, attrs={"key": PyCustomOpDef.dt_string})(_dispatch(m))
        _declared = True


@dataclass
class NodePlan:
    """How one rewritten node's Python op rebuilds the recurrent node's inputs."""

    node: object          # the original NodeProto
    attributes: dict      # its attributes, as onnx.helper.get_attribute_value gives them
    slots: list           # per ONNX input slot: None (omitted), ("const", array) or ("passed", position, dtype)
    outputs: list         # the output slots onnxruntime receives (those some node or graph output uses)


@dataclass
class _Scope:
    initializers: dict = field(default_factory=dict)  # name -> TensorProto, this graph and its ancestors


def _input_types(proto) -> dict:
    """The declared tensor types (element type and shape) of the graph's inputs, by name. Only those: onnxruntime
    enforces a session input's shape, and an exported model's value_info may be stale (a batch-1 export run at
    batch 2), which a whole model tolerates."""
    return {vi.name: vi.type for vi in proto.graph.input
            if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type}


def _dtype_map(proto) -> dict:
    """Element types (numpy dtypes) of the values onnx's shape inference can type, subgraphs included."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 -- inference is a best effort; initializers type most recurrent inputs
        inferred = proto
    out: dict = {}

    def visit(graph):
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            t = vi.type
            if t.WhichOneof("value") == "tensor_type" and t.tensor_type.elem_type:
                out.setdefault(vi.name, np.dtype(helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)))
        for t in graph.initializer:
            out.setdefault(t.name, np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)))
        for node in graph.node:
            for g in subgraphs(node):
                visit(g)

    visit(inferred.graph)
    return out


def _used_names(graph, out: set | None = None) -> set:
    """Every value name a node or a graph output of ``graph`` or its subgraphs reads."""
    out = set() if out is None else out
    out.update(o.name for o in graph.output)
    for node in graph.node:
        out.update(node.input)
        for g in subgraphs(node):
            _used_names(g, out)
    return out


def _input_dtype(op, slot: int, name: str, dtypes: dict, x_dtype) -> np.dtype | None:
    """The element type a passed input had before it was cast to float64."""
    if name in dtypes:
        return dtypes[name]
    if slot == 4:
        return np.dtype(np.int32)  # sequence_lens
    if op.as_float_inputs is None:
        return x_dtype  # LSTM / GRU / RNN: every other input shares X's type T
    return np.dtype(np.float32) if slot in (0, 3, 5, 6, 7, 8, 10) else None  # DynamicQuantizeLSTM: T is float


def _rewrite(proto, token: str, overridable: set):
    """A copy of ``proto`` with its recurrent nodes as Python-op nodes; returns (copy, [NodePlan])."""
    dtypes = _dtype_map(proto)
    used = _used_names(proto.graph)
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    plans: list[NodePlan] = []
    constants: dict = {}

    def constant(tensor):
        # keyed by identity, holding the TensorProto: protobuf may hand out short-lived wrapper objects, and the
        # id of a freed one can be reused by another tensor (that made nodes read each other's weights)
        key = id(tensor)
        if key not in constants:
            constants[key] = (tensor, numpy_helper.to_array(tensor))
        return constants[key][1]

    def rewrite_graph(graph, scope: _Scope):
        inner = _Scope({**scope.initializers, **{t.name: t for t in graph.initializer}})
        for name in [i.name for i in graph.input] if graph is not model.graph else []:
            inner.initializers.pop(name, None)  # a subgraph's formal input shadows outer names
        new_nodes = []
        for node in graph.node:
            for g in subgraphs(node):
                rewrite_graph(g, inner)
            op = recurrent_op(node)
            if op is None:
                new_nodes.append(node)
                continue
            index = len(plans)
            original = onnx.NodeProto()
            original.CopyFrom(node)
            if op.as_float_inputs is not None:  # DynamicQuantizeLSTM: T is float
                x_dtype = np.dtype(np.float32)
            else:  # X, or W, which has X's type T
                x_dtype = next((dtypes[n] for n in node.input[:2] if n in dtypes), None)
            if x_dtype is None:
                raise UnsupportedFeatureError(f"{node_label(node)}: the element type of its input X cannot be "
                                              f"inferred, so onnxruntime cannot be told its output type")
            slots, passed, casts = [], [], []
            for slot, name in enumerate(node.input):
                if name == "":
                    slots.append(None)
                elif name in inner.initializers and name not in overridable:
                    slots.append(("const", constant(inner.initializers[name])))
                else:
                    dtype = _input_dtype(op, slot, name, dtypes, x_dtype)
                    if dtype is None:
                        raise UnsupportedFeatureError(f"{node_label(node)}: the element type of input {slot} "
                                                      f"({name!r}) cannot be inferred")
                    cast_name = f"{_PREFIX}{token}_{index}_in{slot}"
                    casts.append(helper.make_node("Cast", [name], [cast_name], to=onnx.TensorProto.DOUBLE,
                                                  name=cast_name))
                    slots.append(("passed", len(passed), dtype))
                    passed.append(cast_name)
            if not passed:  # the op needs an input; X is passed even when constant
                slots[0] = ("passed", 0, x_dtype)
                cast_name = f"{_PREFIX}{token}_{index}_in0"
                casts.append(helper.make_node("Cast", [node.input[0]], [cast_name], to=onnx.TensorProto.DOUBLE,
                                              name=cast_name))
                passed.append(cast_name)
            out_type = helper.np_dtype_to_tensor_dtype(x_dtype)
            outputs = [k for k, name in enumerate(node.output) if name in used] or [0]  # outputs cost ~70 ns/value
            raw = [f"{_PREFIX}{token}_{index}_out{k}" for k in outputs]
            custom = helper.make_node(op_type(len(passed), len(raw)), passed, raw, domain=DOMAIN,
                                      name=f"{_PREFIX}{token}_{index}", key=f"{token}:{index}")
            outs = [helper.make_node("Cast", [r], [node.output[k]], to=out_type, name=f"{r}_cast")
                    for r, k in zip(raw, outputs, strict=True)]
            new_nodes.extend([*casts, custom, *outs])
            plans.append(NodePlan(original, proto_attributes(node), slots, outputs))
        del graph.node[:]
        graph.node.extend(new_nodes)

    rewrite_graph(model.graph, _Scope())
    if plans:
        model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return model, plans


class OrtGraph:
    """A model rewritten for onnxruntime, its session and its node plans; shared by a model and its ``to()``
    copies. :meth:`run` executes it with a given node function ``(node, inputs, attributes) -> outputs``."""

    def __init__(self, proto, overridable: set = frozenset()):
        if not available():
            raise UnsupportedFeatureError("executor: 'onnxruntime' needs onnxruntime and onnxruntime-extensions "
                                          "(pip install onnxruntime onnxruntime-extensions)")
        import onnxruntime as ort
        from onnxruntime_extensions import get_library_path

        declare_ops()
        self.token = f"g{next(_tokens)}"
        rewritten, self.plans = _rewrite(proto, self.token, set(overridable))
        so = ort.SessionOptions()
        so.register_custom_ops_library(get_library_path())
        so.log_severity_level = 3
        # idle onnxruntime workers must not spin while the Python op (NumPy, BLAS) holds the cores
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(rewritten.SerializeToString(), so,
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 -- onnxruntime's own error types
            raise UnsupportedFeatureError(f"model: onnxruntime cannot load it: {_first_line(exc)}") from exc
        self._proto, self._dtypes, self._overridable = proto, _dtype_map(proto), set(overridable)
        self._partition: Partition | None | bool = False  # not made yet: most models run on the native route
        self._native: NativeGraph | None | bool = False  # not tried yet
        self._lock = threading.Lock()
        self._node_function = None
        self._failure: BaseException | None = None
        _GRAPHS[self.token] = self

    @property
    def partition(self) -> Partition | None:
        """The model as onnxruntime segments around its recurrent nodes (made at first use: a model whose recurrent
        nodes are all top-level, or in top-level ``If`` branches, runs so where the native route does not take
        it), or None where it cannot be cut."""
        if self._partition is False:
            with self._lock:
                if self._partition is False:
                    try:
                        self._partition = partition(self._proto, self._overridable, self._dtypes,
                                                    _input_types(self._proto))
                    except Exception:  # noqa: BLE001 -- whatever the cut trips on, the Python-op bridge runs it
                        self._partition = None
        return self._partition

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc

    def _call(self, index: int, arrays) -> tuple | np.ndarray:
        if self._failure is not None or self._node_function is None:
            raise RuntimeError("skipped after a failure")
        plan = self.plans[index]
        inputs = []
        for slot in plan.slots:
            if slot is None:
                inputs.append(None)
            elif slot[0] == "const":
                inputs.append(slot[1])
            else:
                inputs.append(arrays[slot[1]].astype(slot[2]))
        results = self._node_function(plan.node, inputs, plan.attributes)
        outputs = tuple(np.ascontiguousarray(results[k], dtype=np.float64) for k in plan.outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def run(self, node_function, names: list[str], feeds: dict) -> list[np.ndarray]:
        """onnxruntime's outputs ``names`` for ``feeds``, recurrent nodes computed by ``node_function``; an
        exception raised by it is re-raised here. The native node function runs the model with the recurrent nodes
        as compiled custom operators where :mod:`fusedrnn.frontends.onnx_native` takes it, else (and for a call
        that route declines) the partition, else the Python ops."""
        if getattr(node_function, "native", False):
            if self._native is False:
                with self._lock:
                    if self._native is False:
                        try:
                            self._native = native_graph(self._proto, self._dtypes, node_function)
                        except Exception:  # noqa: BLE001 -- whatever the rewrite trips on, the other routes run it
                            self._native = None
            if self._native is not None:
                out = self._native.run(names, feeds)
                if out is not None:
                    return out
        if self.partition is not None:
            return self.partition.run(node_function, names, feeds)
        with self._lock:
            self._node_function, self._failure = node_function, None
            try:
                results = self.session.run(names, feeds)
                error = None
            except Exception as exc:  # noqa: BLE001 -- onnxruntime's own error types
                results, error = None, exc
            finally:
                failure, self._failure, self._node_function = self._failure, None, None
        if failure is not None:
            raise failure
        if error is not None:
            raise InputError(f"feeds: onnxruntime could not run the model on them: {_first_line(error)}") from error
        return results


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["DOMAIN", "NodePlan", "OrtGraph", "available", "declare_ops", "op_type"]
