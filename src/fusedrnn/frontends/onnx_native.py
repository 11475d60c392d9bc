"""onnxruntime runs the whole model, its recurrent nodes included: they become custom operators of fusedrnn's C
libraries that run their compiled kernels with no Python per call. ONNX's LSTM and GRU are operators of the float
kernel's library (``cells/compiled/_ort_bridge.h``, domain ``ai.fusedrnn.native``: the batched float32 path),
``com.microsoft::DynamicQuantizeLSTM`` of its kernel's library (``cells/compiled/_ortq.c``, domain
``ai.fusedrnn.native.ortq``); ``cells/compiled/_ort_api.h`` holds what both share.

The other onnxruntime routes call back into Python for every recurrent node: the segments of
:mod:`fusedrnn.frontends.onnx_partition` (an onnxruntime session per segment, the node's call through
:mod:`fusedrnn.ops` in between: about 35 µs of Python per LSTM call, 10-20 µs per segment), and the Python ops of
:mod:`fusedrnn.frontends.onnx_ort`. Here a model costs onnxruntime's own time for its other nodes plus the kernels'
for the recurrent ones (the measurements are in the README's performance section).

A model takes this route (:func:`native_graph`) where its recurrent nodes run in native precision (no target,
emulation, recording or tap: :func:`fusedrnn.frontends.onnx_emulation.node_function` marks that function
``native``) and every one of them, at any depth (``If`` / ``Loop`` / ``Scan`` bodies), is one of
:data:`OPERATORS` with layout 0 and float32 X whose weights are constants: initializers no graph input overrides,
or the values of constant nodes (exporters build an LSTM's weights with ``Slice`` / ``Concat`` of ``Constant``
weights), computed once by onnxruntime; and whose options its kernel runs outside Python (the float kernel's
batched path, whose choice depends on the options and H alone: sigmoid / tanh activations, no clip, peepholes or
input_forget, H a multiple of the vector width).

Each node's plan comes from running the node once, through the same node function as the other routes, on a probe
input of one step and one row: the kernel's own call (:func:`fusedrnn.cells.dispatch.recording`,
:func:`fusedrnn.cells.ort_qlstm.recording`) gives the arguments and the weights the C operator copies, so both
routes make the same kernel call and give the same bits. A run goes to the other routes instead (``run`` returns
None) where the engine setting excludes a kernel, inside :func:`disabled`, and where onnxruntime reports an error:
the other routes then raise the error they always raised for such feeds.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..cells import dispatch, ort_qlstm, setting
from ..cells.compiled import _build, driver
from .onnx_ops import proto_attributes, recurrent_op, subgraphs
from .onnx_partition import ThreadShare, constant_node, constant_values

DOMAIN = "ai.fusedrnn.native"
"""The domain of the compiled kernel's operators (``LSTM``, ``GRU``); the DynamicQuantizeLSTM kernel's is
``DOMAIN + ".ortq"``."""


LSTM_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
"""ONNX LSTM's input slots, in order (GRU's are the first six; DynamicQuantizeLSTM's add the weights' scales and
zero points)."""


@dataclass(frozen=True)
class Operator:
    """How a recurrent operator becomes a custom operator: its input slots (names, in ONNX's order), its outputs
    (all of them, always computed), the inputs its plan holds (constants of the model), the inputs the operator
    takes after X (in its input order), W's axis of input_size, the library that holds it and that library's
    domain."""

    inputs: tuple
    outputs: int
    weights: tuple
    states: tuple
    input_axis: int
    library: str
    domain: str

    def slots(self, names: tuple) -> tuple:
        return tuple(self.inputs.index(n) for n in names)


OPERATORS = {
    ("", "LSTM"): Operator(LSTM_INPUTS, 3, ("W", "R", "B", "P"), ("sequence_lens", "initial_h", "initial_c"), 2,
                           "kernel", DOMAIN),
    ("", "GRU"): Operator(LSTM_INPUTS[:6], 2, ("W", "R", "B"), ("sequence_lens", "initial_h"), 2, "kernel", DOMAIN),
    ("com.microsoft", "DynamicQuantizeLSTM"): Operator(
        LSTM_INPUTS + ("W_scale", "W_zero_point", "R_scale", "R_zero_point"), 3,
        ("W", "R", "B", "P", "W_scale", "W_zero_point", "R_scale", "R_zero_point"),
        ("sequence_lens", "initial_h", "initial_c"), 1, "ortq", DOMAIN + ".ortq"),
}
"""The operators this route runs, by (domain, op_type) of the ONNX node (``ai.onnx`` is "")."""

_state = {"enabled": True, "threads": {}}  # threads: the setting each library holds
_names = itertools.count()


def _float_plan(lib: ctypes.CDLL, call) -> int:
    """The float kernel's plan of a recorded engine call (-1 where the compiled batched path did not take it)."""
    decision = dispatch.last_decision()
    made = driver.native_plan(call) if decision is not None and decision.backend == "compiled" else "not compiled"
    if isinstance(made, str):
        return -1
    template, *arrays = made
    raw = ctypes.create_string_buffer(template, len(template))
    return lib.fusedrnn_bridge_add(raw, *(None if a is None else a.ctypes.data for a in arrays),
                                   driver.BATCHED_MAX_ROWS)


def _ortq_plan(lib: ctypes.CDLL, call) -> int:
    """The DynamicQuantizeLSTM kernel's plan of a recorded call: (its arguments, the arrays they point into, kept
    alive by the record while the plan copies them)."""
    return lib.ortq_bridge_add(ctypes.byref(call[0]))


@dataclass(frozen=True)
class Library:
    """A C library holding operators: how to load it and find its file, whether the engine setting lets its
    kernel run now (else the other routes run the NumPy engines), the log of its kernel calls and how a plan is
    made from one, and the prefix of its plan functions (``<prefix>_drop``, ``_live``, ``_threads``, ``_ns``)."""

    load: Callable[[], ctypes.CDLL | None]
    path: Callable[[], object]
    allowed: Callable[[], bool]
    recording: Callable
    plan: Callable[[ctypes.CDLL, object], int]
    prefix: str

    def call(self, lib: ctypes.CDLL, name: str, *args):
        return getattr(lib, f"{self.prefix}_{name}")(*args)


LIBRARIES = {
    "kernel": Library(_build.load, _build.library_path, lambda: setting.allows("compiled"), dispatch.recording,
                      _float_plan, "fusedrnn_bridge"),
    "ortq": Library(ort_qlstm.KERNEL.load, lambda: ort_qlstm.KERNEL.path,
                    lambda: setting.engine("ortq") != "numpy", ort_qlstm.recording, _ortq_plan, "ortq_bridge"),
}


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Context in which models run on the other onnxruntime routes (tests and benchmarks compare the routes;
    process-wide, not thread-safe)."""
    old = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = old


class NativeGraph:
    """A model rewritten with the custom operators, its session and the plans its operators hold."""

    def __init__(self, session, libs: dict, plans: list[tuple[str, int]]):
        self.session = session
        self.libs = {name: libs[name] for name in sorted({name for name, _ in plans})}
        self.plans = list(plans)  # (library, id), in the order of the model's recurrent nodes
        self.share = ThreadShare()
        self.runs = 0  # runs this route completed (tests check that the operators ran)
        weakref.finalize(self, _drop_plans, self.libs, self.plans)

    def _kernel_ns(self) -> int:
        return sum(LIBRARIES[name].call(lib, "ns") for name, lib in self.libs.items())

    def run(self, names: list[str], feeds: dict) -> list[np.ndarray] | None:
        """onnxruntime's outputs ``names`` for ``feeds``; None where this route does not run the call (see the
        module's docstring)."""
        if not _state["enabled"] or not all(LIBRARIES[name].allowed() for name in self.libs):
            return None
        threads = 1 if self.share.one_thread else driver.call_threads()
        for name, lib in self.libs.items():  # the C side keeps the last setting
            if _state["threads"].get(name) != threads:
                _state["threads"][name] = threads
                LIBRARIES[name].call(lib, "threads", threads, driver.THREAD_MIN_MACS)
        ns = self._kernel_ns()
        t0 = time.perf_counter()
        try:
            out = self.session.run(names, feeds)
        except Exception:  # noqa: BLE001 -- onnxruntime's own error types: the other routes raise ours
            return None
        self.share.update((self._kernel_ns() - ns) * 1e-9, time.perf_counter() - t0)
        self.runs += 1
        return out


def _drop_plans(libs: dict, plans: list[tuple[str, int]]) -> None:
    for name, plan in plans:
        LIBRARIES[name].call(libs[name], "drop", plan)


def _operator(node) -> Operator | None:
    return OPERATORS.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))


def native_graph(proto: onnx.ModelProto, dtypes: dict, run_node) -> NativeGraph | None:
    """The model on this route, or None where it cannot take it (see the module's docstring). ``dtypes``: the
    numpy dtype of the model's values (subgraphs included); ``run_node``: the native node function."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    constants, initializers, nodes = [], {}, []
    if not _collect(model.graph, set(), constants, initializers, nodes) or not nodes or not _unique_names(model.graph):
        return None
    used = sorted({_operator(n).library for n in nodes})
    libs = {name: LIBRARIES[name].load() for name in used}
    if any(lib is None or not LIBRARIES[name].allowed() for name, lib in libs.items()):
        return None
    values = _weights(model, nodes, constants, initializers, dtypes)
    if values is None:
        return None
    plans: list[tuple[str, int]] = []
    try:
        for node in nodes:
            op = _operator(node)
            plan = _plan(libs[op.library], op, node, values, dtypes, run_node)
            if plan is None:
                _drop_plans(libs, plans)
                return None
            plans.append((op.library, plan))
            _rewrite(node, op, plan)
        so = ort.SessionOptions()
        so.log_severity_level = 4  # a failed run is not an error to print: the other routes run it and raise theirs
        for name in used:
            model.opset_import.append(helper.make_opsetid(_DOMAINS[name], 1))
            so.register_custom_ops_library(str(LIBRARIES[name].path()))
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 -- whatever onnxruntime refuses, the other routes run the model
        _drop_plans(libs, plans)
        return None
    return NativeGraph(session, libs, plans)


_DOMAINS = {op.library: op.domain for op in OPERATORS.values()}


def _collect(graph, known: set, constants: list, initializers: dict, nodes: list) -> bool:
    """Walk ``graph`` and its subgraphs: the constant nodes (in order), every initializer by name and the recurrent
    nodes; False where a node rules the route out (a recurrent node this route does not run, or whose weights are
    not constants; a node of the route's own domains, which only fusedrnn writes)."""
    initializers.update((t.name, t) for t in graph.initializer)
    known = (known | {t.name for t in graph.initializer}) - {i.name for i in graph.input}
    for node in graph.node:
        if node.domain.startswith(DOMAIN):
            return False
        if recurrent_op(node) is not None:
            op = _operator(node)
            if op is None or any(node.input[k] not in known for k in op.slots(op.weights)
                                 if k < len(node.input) and node.input[k]):
                return False
            nodes.append(node)
        elif constant_node(node, known):
            constants.append(node)
            known.update(o for o in node.output if o)
        for g in subgraphs(node):
            if not _collect(g, known, constants, initializers, nodes):
                return False
    return True


def _unique_names(graph) -> bool:
    """Whether no value name is defined twice in the model (initializers and node outputs, subgraphs included):
    the weights are looked up by name across scopes, and the branches of an ``If`` may each define their own ``W``
    (legal ONNX, but this route then declines)."""
    seen: set = set()

    def visit(g) -> bool:
        for name in [t.name for t in g.initializer] + [o for n in g.node for o in n.output if o]:
            if name in seen:
                return False
            seen.add(name)
        return all(visit(s) for n in g.node for s in subgraphs(n))

    return visit(graph)


def _weight_names(node) -> set:
    op = _operator(node)
    return {node.input[k] for k in op.slots(op.weights) if k < len(node.input)} - {""}


def _weights(model, nodes: list, constants: list, initializers: dict, dtypes: dict) -> dict | None:
    """{name: array} of every recurrent node's weights: initializers as they are, the other values computed by the
    constant nodes they depend on (one onnxruntime run); None where they cannot be computed."""
    names = set().union(*(_weight_names(n) for n in nodes))
    values = {n: numpy_helper.to_array(initializers[n]) for n in names if n in initializers}
    wanted = sorted(names - set(values))
    if wanted:
        producer = {o: n for n in constants for o in n.output if o}
        needed, stack = set(), list(wanted)
        while stack:
            node = producer.get(stack.pop())
            if node is not None and id(node) not in needed:
                needed.add(id(node))
                stack.extend(i for i in node.input if i)
        chosen = [n for n in constants if id(n) in needed]
        got = constant_values(model, chosen, list(initializers.values()), wanted, dtypes)
        if got is None:
            return None
        values.update(zip(wanted, got, strict=True))
    return values


def _plan(lib, op: Operator, node, values: dict, dtypes: dict, run_node) -> int | None:
    """The id of the C plan of a recurrent node (its weights copied), or None where its kernel does not run it
    outside Python (the batched path declines it, or layout 1)."""
    attributes = proto_attributes(node)
    if int(attributes.get("layout", 0)) != 0 or dtypes.get(node.input[0]) != np.float32:
        return None
    inputs: list = [None] * len(node.input)
    for k in op.slots(op.weights):
        if k < len(node.input) and node.input[k]:
            inputs[k] = values[node.input[k]]
    W = inputs[op.inputs.index("W")] if len(inputs) > 1 else None
    if W is None or W.ndim != 3 or 0 in W.shape:
        return None
    inputs[0] = np.zeros((1, 1, W.shape[op.input_axis]), np.float32)  # the probe: one step of one row
    library = LIBRARIES[op.library]
    try:
        with library.recording() as calls:
            run_node(node, inputs, attributes)
    except Exception:  # noqa: BLE001 -- a node the other routes reject (NodeFailure) or cannot run: they raise it
        return None
    plan = library.plan(lib, calls[0]) if len(calls) == 1 else -1
    return plan if plan >= 0 else None


def _rewrite(node, op: Operator, plan: int) -> None:
    """``node`` (in the model's copy) as the route's operator: X and its state inputs, every output (names made
    up for those the node omits), the plan's id."""
    given = list(node.input)
    inputs = [given[0]] + [given[k] if k < len(given) else "" for k in op.slots(op.states)]
    while inputs[-1] == "":
        inputs.pop()
    outputs = list(node.output) + [f"_fusedrnn_native_{next(_names)}" for _ in range(op.outputs - len(node.output))]
    node.CopyFrom(helper.make_node(node.op_type, inputs, outputs, name=node.name, domain=op.domain, plan=plan))


__all__ = ["DOMAIN", "LIBRARIES", "LSTM_INPUTS", "OPERATORS", "Library", "NativeGraph", "Operator", "disabled",
           "native_graph"]
