"""onnxruntime runs the whole model, its LSTM and GRU nodes included: they become custom operators of the compiled
kernel's library (``cells/compiled/_ort_bridge.h``, domain ``ai.fusedrnn.native``) that call the batched float32
path with no Python per call.

The other onnxruntime routes call back into Python for every recurrent node: the segments of
:mod:`fusedrnn.frontends.onnx_partition` (an onnxruntime session per segment, the node's call through
:mod:`fusedrnn.ops` in between: about 35 µs of Python per LSTM call, 10-20 µs per segment), and the Python ops of
:mod:`fusedrnn.frontends.onnx_ort`. Here a model costs onnxruntime's own time for its other nodes plus the kernel's
for the recurrent ones (the measurements are in the README's performance section).

A model takes this route (:func:`native_graph`) where its recurrent nodes run in native precision (no target,
emulation, recording or tap: :func:`fusedrnn.frontends.onnx_emulation.node_function` marks that function
``native``) and every one of them, at any depth (``If`` / ``Loop`` / ``Scan`` bodies), is an ONNX LSTM or GRU
with layout 0 and float32 X whose W, R and B are constants: initializers no graph input overrides, or the values of
constant nodes (exporters build an LSTM's weights with ``Slice`` / ``Concat`` of ``Constant`` weights), computed
once by onnxruntime; and whose options the kernel's batched path runs (its choice depends on the options and H
alone: sigmoid / tanh activations, no clip, peepholes or input_forget, H a multiple of the vector width).

Each node's plan comes from running the node once, through the same node function as the other routes, on a probe
input of one step and one row: the compiled kernel's own call (:func:`fusedrnn.cells.dispatch.recording`) gives the
template and the weights the C operator copies (:func:`fusedrnn.cells.compiled.driver.native_plan`), so both routes
make the same kernel call and give the same bits. A run goes to the other routes instead (``run`` returns None)
where the engine setting excludes the compiled kernel, inside :func:`disabled`, and where onnxruntime reports an
error: the other routes then raise the error they always raised for such feeds.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import time
import weakref
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..cells import dispatch, setting
from ..cells.compiled import _build, driver
from .onnx_ops import proto_attributes, recurrent_op, subgraphs
from .onnx_partition import ThreadShare, constant_node, constant_values

DOMAIN = "ai.fusedrnn.native"
OUTPUTS = {"LSTM": 3, "GRU": 2}
"""The operators of the domain and their outputs (Y, Y_h[, Y_c]: all of them, always computed)."""
WEIGHT_SLOTS = {"LSTM": (1, 2, 3, 7), "GRU": (1, 2, 3)}
"""The input slots (W, R, B, P) a plan holds: constants of the model."""
STATE_SLOTS = {"LSTM": (4, 5, 6), "GRU": (4, 5)}
"""The input slots the operator takes after X (sequence_lens, initial_h[, initial_c]), in its input order."""

_state = {"enabled": True, "threads": None}
_names = itertools.count()


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

    def __init__(self, session, lib, plans: list[int]):
        self.session = session
        self.lib = lib
        self.plans = list(plans)  # their ids, in the order of the model's recurrent nodes
        self.share = ThreadShare()
        weakref.finalize(self, _drop_plans, lib, self.plans)

    def run(self, names: list[str], feeds: dict) -> list[np.ndarray] | None:
        """onnxruntime's outputs ``names`` for ``feeds``; None where this route does not run the call (see the
        module's docstring)."""
        if not _state["enabled"] or not setting.allows("compiled"):
            return None
        threads = 1 if self.share.one_thread else driver.call_threads()
        if _state["threads"] != (threads, driver.THREAD_MIN_MACS):
            _state["threads"] = (threads, driver.THREAD_MIN_MACS)
            self.lib.fusedrnn_bridge_threads(threads, driver.THREAD_MIN_MACS)
        ns = self.lib.fusedrnn_bridge_ns()
        t0 = time.perf_counter()
        try:
            out = self.session.run(names, feeds)
        except Exception:  # noqa: BLE001 -- onnxruntime's own error types: the other routes raise ours
            return None
        self.share.update((self.lib.fusedrnn_bridge_ns() - ns) * 1e-9, time.perf_counter() - t0)
        return out


def _drop_plans(lib, plans: list[int]) -> None:
    for plan in plans:
        lib.fusedrnn_bridge_drop(plan)


def native_graph(proto: onnx.ModelProto, dtypes: dict, run_node) -> NativeGraph | None:
    """The model on this route, or None where it cannot take it (see the module's docstring). ``dtypes``: the
    numpy dtype of the model's values (subgraphs included); ``run_node``: the native node function."""
    lib = _build.load()
    if lib is None or not setting.allows("compiled"):
        return None
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    constants, initializers, nodes = [], {}, []
    if not _collect(model.graph, set(), constants, initializers, nodes) or not nodes:
        return None
    values = _weights(model, nodes, constants, initializers, dtypes)
    if values is None:
        return None
    plans: list[int] = []
    try:
        for node in nodes:
            plan = _plan(lib, node, values, dtypes, run_node)
            if plan is None:
                return None
            plans.append(plan)
            _rewrite(node, plan)
        model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
        so = ort.SessionOptions()
        so.log_severity_level = 4  # a failed run is not an error to print: the other routes run it and raise theirs
        so.register_custom_ops_library(_build.library_path())
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 -- whatever onnxruntime refuses, the other routes run the model
        _drop_plans(lib, plans)
        return None
    return NativeGraph(session, lib, plans)


def _collect(graph, known: set, constants: list, initializers: dict, nodes: list) -> bool:
    """Walk ``graph`` and its subgraphs: the constant nodes (in order), every initializer by name and the recurrent
    nodes; False where a node rules the route out (a recurrent node other than an ONNX LSTM / GRU, or whose
    weights are not constants; a node of the bridge's own domain, which only fusedrnn writes)."""
    initializers.update((t.name, t) for t in graph.initializer)
    known = (known | {t.name for t in graph.initializer}) - {i.name for i in graph.input}
    for node in graph.node:
        if node.domain == DOMAIN:
            return False
        if recurrent_op(node) is not None:
            if node.domain not in ("", "ai.onnx") or node.op_type not in OUTPUTS:
                return False
            weights = [node.input[k] for k in WEIGHT_SLOTS[node.op_type] if k < len(node.input)]
            if any(n and n not in known for n in weights):
                return False
            nodes.append(node)
        elif constant_node(node, known):
            constants.append(node)
            known.update(o for o in node.output if o)
        for g in subgraphs(node):
            if not _collect(g, known, constants, initializers, nodes):
                return False
    return True


def _weights(model, nodes: list, constants: list, initializers: dict, dtypes: dict) -> dict | None:
    """{name: array} of every recurrent node's weights: initializers as they are, the other values computed by the
    constant nodes they depend on (one onnxruntime run); None where they cannot be computed."""
    names = {node.input[k] for node in nodes for k in WEIGHT_SLOTS[node.op_type] if k < len(node.input)} - {""}
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


def _plan(lib, node, values: dict, dtypes: dict, run_node) -> int | None:
    """The id of the C plan of a recurrent node (its weights copied), or None where the kernel's batched path does
    not run it."""
    attributes = proto_attributes(node)
    if int(attributes.get("layout", 0)) != 0 or dtypes.get(node.input[0]) != np.float32:
        return None
    inputs: list = [None] * len(node.input)
    for k in WEIGHT_SLOTS[node.op_type]:
        if k < len(node.input) and node.input[k]:
            inputs[k] = values[node.input[k]]
    W = inputs[1]
    if W is None or W.dtype != np.float32 or W.ndim != 3 or W.shape[2] == 0:
        return None
    inputs[0] = np.zeros((1, 1, W.shape[2]), np.float32)  # the probe: one step of one row
    try:
        with dispatch.recording() as calls:
            run_node(node, inputs, attributes)
    except Exception:  # noqa: BLE001 -- a node the other routes reject (NodeFailure) or cannot run: they raise it
        return None
    decision = dispatch.last_decision()
    if len(calls) != 1 or decision is None or decision.backend != "compiled":
        return None
    made = driver.native_plan(calls[0])
    if isinstance(made, str):
        return None
    template, *arrays = made
    raw = ctypes.create_string_buffer(template, len(template))
    plan = lib.fusedrnn_bridge_add(raw, *(None if a is None else a.ctypes.data for a in arrays))
    return plan if plan >= 0 else None


def _rewrite(node, plan: int) -> None:
    """``node`` (in the model's copy) as the bridge's operator: X and its state inputs, every output (names made
    up for those the node omits), the plan's id."""
    op = node.op_type
    inputs = [node.input[0]] + [node.input[k] if k < len(node.input) else "" for k in STATE_SLOTS[op]]
    while inputs[-1] == "":
        inputs.pop()
    outputs = list(node.output) + [f"_fusedrnn_native_{next(_names)}" for _ in range(OUTPUTS[op] - len(node.output))]
    node.CopyFrom(helper.make_node(op, inputs, outputs, name=node.name, domain=DOMAIN, plan=plan))


__all__ = ["DOMAIN", "NativeGraph", "disabled", "native_graph"]
