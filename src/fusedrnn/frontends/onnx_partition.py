"""onnxruntime around the recurrent nodes: the model's graph cut at its top-level recurrent nodes into segments of
other nodes, each an onnxruntime session of its own, run in order with the recurrent nodes called in between.

The Python-op bridge (:mod:`fusedrnn.frontends.onnx_ort`) sends every recurrent node's inputs through ``Cast`` to
float64 and its outputs back as Python lists (about 70 ns a value), and its session has to leave spinning off so
that onnxruntime's idle workers do not take the cores from the node; a model whose recurrent nodes are all in the
top-level graph is run here instead: values cross between segments as the arrays onnxruntime returns, the
recurrent nodes get them in their own element types, and each segment's session has onnxruntime's default
options. Measured (``python -m benchmarks.bench_models``) this removed most of the executor's cost over plain
onnxruntime; the numbers are in the README's performance section.

A top-level ``If`` whose branches hold recurrent nodes is a stage of its own: each branch is partitioned the same
way (a model whose inputs are the outer values the branch reads), and the condition chooses which one runs (Silero
VAD's LSTMs sit in the branches of an ``If`` on the sample rate). :func:`partition` returns None (the bridge then
runs the model) when a recurrent node sits inside a ``Loop`` / ``Scan`` body (or an ``If`` below the top level of
a graph being cut), when the model has initializers a caller may override (graph inputs of the same name), or
when the element type of a value crossing a cut cannot be inferred. Segments are the nodes between two
recurrent nodes in the graph's (topological) order; a segment's inputs are the values it reads that earlier
stages or the caller produce (outer-scope names its subgraphs read included), its outputs those that later stages
or the graph's outputs read.

Before a graph is cut, the nodes that compute constants (``Constant`` nodes, and nodes whose inputs are all
initializers or such constants: exporters often build an LSTM's W, R and B from ``Constant`` weights with
``Slice`` / ``Concat`` / ``Unsqueeze`` inside the graph) are run once, by onnxruntime, and their values become
initializers: onnxruntime folds the same nodes when it loads a model, with the same kernels. A recurrent node
then gets its weights as constants (packed once, not per call) instead of from a segment on every call: Silero
VAD's LSTM-in-``If`` model copied 0.5 MiB of weights out of a segment per 512-sample chunk.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..cells.compiled import thread_limit
from ..errors import InputError
from .onnx_ops import proto_attributes, recurrent_op, subgraphs


@dataclass
class _Segment:
    session: object
    inputs: list
    outputs: list


@dataclass
class _Recurrent:
    node: object
    attributes: dict
    slots: list           # per ONNX input slot: None, ("const", array) or ("value", name)


@dataclass
class _Copies:
    """A segment of ``Identity`` nodes only: copies of arrays (an onnxruntime session would cost 10-20 µs)."""
    pairs: list           # (input name, output name)


@dataclass
class _Switch:
    """A top-level ``If`` whose branches hold recurrent nodes: each branch is a partition of its own, run with the
    outer values it reads (``inputs``) on the branch the condition names."""
    node: object
    branches: dict        # True / False -> (Partition, its input names, its output names)
    cond: object = None   # the condition's value where it is an initializer, else None (read from the values)


def _reads(node) -> set:
    """The names ``node`` reads: its inputs and the names its subgraphs read from outside themselves."""
    out = {n for n in node.input if n}
    for g in subgraphs(node):
        out |= _outer_reads(g)
    return out


def _outer_reads(graph) -> set:
    inner = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    reads: set = set()
    for node in graph.node:
        reads |= _reads(node) - inner
        inner.update(node.output)
    reads |= {o.name for o in graph.output} - inner
    return reads


NEVER_FOLDED = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                          "Bernoulli", "Dropout", "QuantizeLinear", "DequantizeLinear"})
"""Operators never folded into constants: random ones (a new value on every run; Dropout in training mode), and the
quantization pair, which onnxruntime leaves in place so that it can fuse ``DequantizeLinear`` of int8 weights into
integer kernels (``QLinearMatMul``): folding it to float weights changed a QDQ model's results."""
FOLD_MAX_BYTES = 64 << 20
"""Most bytes of folded values per graph (more: nothing is folded; each is held in several copies while loading)."""


def constant_node(node, known: set) -> bool:
    """Whether ``node`` computes a constant: deterministic (not in NEVER_FOLDED), no subgraph, not a recurrent
    node, an operator of the default domain, and every input in ``known`` (constant names) or omitted."""
    return (node.op_type not in NEVER_FOLDED and recurrent_op(node) is None and not any(subgraphs(node))
            and node.domain in ("", "ai.onnx") and all(i == "" or i in known for i in node.input))


def constant_values(proto: onnx.ModelProto, nodes: list, initializers: list, wanted: list,
                    dtypes: dict) -> list | None:
    """The values ``wanted`` (names) that constant ``nodes`` compute from ``initializers`` (TensorProtos), run once by
    onnxruntime with ``proto``'s opsets; None where a value's type is unknown, onnxruntime cannot run the nodes, or
    the values hold more than FOLD_MAX_BYTES."""
    if any(n not in dtypes for n in wanted):
        return None
    made = {o for n in nodes for o in n.output if o}
    reads = set().union(*(_reads(n) for n in nodes)) - made
    body = helper.make_graph(nodes, "constants", [],
                             [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(dtypes[n]), None)
                              for n in wanted], [t for t in initializers if t.name in reads])
    model = helper.make_model(body, opset_imports=proto.opset_import, ir_version=proto.ir_version)
    session = _session(model)
    if session is None:
        return None
    try:
        values = [np.asarray(v) for v in session.run(wanted, {})]
    except Exception:  # noqa: BLE001 -- onnxruntime's own error types: the caller goes on without the values
        return None
    return None if sum(v.nbytes for v in values) > FOLD_MAX_BYTES else values


def _fold_constants(proto: onnx.ModelProto, dtypes: dict) -> onnx.ModelProto:
    """``proto`` with the values of its top-level constant nodes (see the module's docstring) as initializers and
    those nodes removed; ``proto`` itself where there is nothing to fold, where onnxruntime cannot run the constant
    nodes, or where a folded value's type is unknown. A node is constant when it is deterministic, holds no
    subgraph, is not a recurrent node, writes no graph output and reads only initializers (that no graph input
    overrides) and earlier constant nodes' outputs."""
    graph = proto.graph
    fed = {i.name for i in graph.input}
    known = {t.name for t in graph.initializer} - fed
    outputs = {o.name for o in graph.output}
    folded, kept = [], []
    for node in graph.node:
        if constant_node(node, known) and not outputs.intersection(node.output):
            folded.append(node)
            known.update(o for o in node.output if o)
        else:
            kept.append(node)
    made = {o for n in folded for o in n.output if o}
    wanted = sorted(set().union(*(_reads(n) for n in kept)) & made)
    values = constant_values(proto, folded, list(graph.initializer), wanted, dtypes) if wanted else None
    if values is None:
        return proto
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(v, n) for n, v in zip(wanted, values, strict=True))
    return out


def _holds_recurrent(g) -> bool:
    """Whether a recurrent node sits in graph ``g`` or a subgraph of its nodes (at any depth)."""
    return any(recurrent_op(n) is not None or any(_holds_recurrent(s) for s in subgraphs(n)) for n in g.node)


def _switch_node(node) -> bool:
    """An ``If`` whose branches hold recurrent nodes: partitioned branch by branch."""
    return node.op_type == "If" and any(_holds_recurrent(s) for s in subgraphs(node))


def _nested(graph) -> bool:
    """Whether a recurrent node sits inside a subgraph of a node of ``graph`` other than an ``If`` (at any
    depth; an ``If``'s branches are partitioned on their own)."""
    return any(_holds_recurrent(s) for n in graph.node if not _switch_node(n) for s in subgraphs(n))


class ThreadShare:
    """Whether a model run's recurrent nodes use the compiled loops' threads or the caller's thread alone.

    They run on one thread where they take a small share of the call: a helper thread on another core evicts
    onnxruntime's data from that core's cache, which costs more than it saves there (Silero VAD v6: its LSTM
    0.17 ms on two threads, 0.21 ms on one, but the encoder segment after it 1.66 ms instead of 1.39 ms), while a
    recurrent node that is most of the call gains from them (the bundled example's LSTM: 0.5 ms against 1.0 ms).
    The share is measured on every call, with hysteresis (ONE_BELOW on threads, THREADS_ABOVE on one thread,
    where the node takes up to twice as long); both modes give the same bits."""

    ONE_BELOW = 0.2
    THREADS_ABOVE = 0.4

    def __init__(self):
        self.one_thread = False

    def update(self, recurrent_s: float, total_s: float) -> None:
        share = recurrent_s / max(total_s, 1e-9)
        self.one_thread = share < self.THREADS_ABOVE if self.one_thread else share < self.ONE_BELOW


class Partition:
    """The stages of a partitioned model; :meth:`run` as :meth:`fusedrnn.frontends.onnx_ort.OrtGraph.run`. The
    recurrent nodes run on the compiled loops' threads or on the caller's alone (:class:`ThreadShare`)."""

    def __init__(self, stages: list):
        self.stages = stages
        self.share = ThreadShare()

    def run(self, node_function, names: list[str], feeds: dict) -> list[np.ndarray]:
        t0 = time.perf_counter()
        with thread_limit(1) if self.share.one_thread else contextlib.nullcontext():
            out, recurrent = self._run(node_function, names, feeds)
        self.share.update(recurrent, time.perf_counter() - t0)
        return out

    def _run(self, node_function, names: list[str], feeds: dict) -> tuple[list[np.ndarray], float]:
        """The outputs, and the seconds the recurrent nodes took."""
        env = dict(feeds)
        recurrent = 0.0
        for stage in self.stages:
            if isinstance(stage, _Segment):
                try:
                    values = stage.session.run(stage.outputs, {n: env[n] for n in stage.inputs})
                except Exception as exc:  # noqa: BLE001 -- onnxruntime's own error types
                    text = str(exc).strip()
                    raise InputError(f"feeds: onnxruntime could not run the model on them: "
                                     f"{text.splitlines()[0] if text else type(exc).__name__}") from exc
                env.update(zip(stage.outputs, values, strict=True))
            elif isinstance(stage, _Copies):
                env.update((o, np.array(env[i])) for i, o in stage.pairs)
            elif isinstance(stage, _Switch):
                cond = np.asarray(env[stage.node.input[0]] if stage.cond is None else stage.cond)
                if cond.size != 1:
                    raise InputError(f"feeds: the condition {stage.node.input[0]!r} of node {stage.node.name!r} "
                                     f"(If) must hold one value, got shape {cond.shape}")
                part, inputs, outputs = stage.branches[bool(cond.reshape(-1)[0])]
                values, rec = part._run(node_function, outputs, {n: env[n] for n in inputs})
                env.update(zip(stage.node.output, values, strict=False))
                recurrent += rec
            else:
                t0 = time.perf_counter()
                inputs = [None if s is None else s[1] if s[0] == "const" else env[s[1]] for s in stage.slots]
                outputs = node_function(stage.node, inputs, stage.attributes)
                env.update(zip(stage.node.output, outputs, strict=False))
                recurrent += time.perf_counter() - t0
        return [env[n] for n in names], recurrent


def _session(model: onnx.ModelProto):
    """An onnxruntime session of a segment, or None where onnxruntime refuses it."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    # the workers spin between the segment's own operators but stop when it ends: spinning into the recurrent
    # node's turn took the cores its threads wanted (the bundled example: median 1.42 ms with spinning, 0.60 ms
    # without); without any spinning a convolution encoder's operators each wait for a sleeping worker (Silero VAD
    # v6's encoder: 1.84 ms, 1.39 ms with spinning stopped at the end)
    so.add_session_config_entry("session.force_spinning_stop", "1")
    try:
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 -- onnxruntime's own error types
        return None


def _one_segment(model: onnx.ModelProto, inputs: list, outputs: list) -> Partition | None:
    session = _session(model)
    return None if session is None else Partition([_Segment(session, inputs, outputs)])


def partition(proto: onnx.ModelProto, overridable, dtypes: dict, types: dict | None = None) -> Partition | None:
    """The model cut at its recurrent nodes (see the module's docstring), or None where it cannot be. ``dtypes``:
    the numpy dtype of every value a segment reads or writes; ``types``: the declared ``TypeProto`` (with shapes) of
    the graph's inputs, which a segment reading them declares too."""
    if overridable or _nested(proto.graph) or not _holds_recurrent(proto.graph):
        return None
    proto = _fold_constants(proto, dtypes)
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    if any(o.name in inits for o in graph.output):
        return None
    groups: list = [[]]
    for node in graph.node:
        if recurrent_op(node) is not None or _switch_node(node):
            groups += [node, []]
        else:
            groups[-1].append(node)
    # what each stage reads, and which values later stages (or the graph's outputs) read
    reads = [(set().union(*(_reads(n) for n in g)) if isinstance(g, list) else _reads(g)) for g in groups]
    later: list = [set() for _ in groups]
    wanted = {o.name for o in graph.output}
    for k in range(len(groups) - 1, -1, -1):
        later[k] = set(wanted)
        wanted |= reads[k]
    consts: dict = {}
    stages = []
    for k, g in enumerate(groups):
        if isinstance(g, list):
            produced = [o for n in g for o in n.output if o]
            outputs = [o for o in dict.fromkeys(produced) if o in later[k]]
            if not g or not outputs:
                continue
            needed = sorted(reads[k] - set(produced))
            if all(n.op_type == "Identity" and n.input[0] not in inits and n.input[0] in dtypes for n in g):
                stages.append(_Copies([(n.input[0], n.output[0]) for n in g]))
                continue
            inputs = [n for n in needed if n not in inits]
            if any(n not in dtypes for n in inputs + outputs):
                return None
            def info(n):
                t = (types or {}).get(n)
                return (helper.make_value_info(n, t) if t is not None else
                        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(dtypes[n]), None))

            seg = helper.make_graph(g, f"{graph.name}_segment{k}", [info(n) for n in inputs],
                                    [info(n) for n in outputs], [inits[n] for n in needed if n in inits])
            model = helper.make_model(seg, opset_imports=proto.opset_import, ir_version=proto.ir_version)
            model.functions.extend(proto.functions)
            session = _session(model)
            if session is None:  # a segment onnxruntime refuses: the bridge runs the whole model
                return None
            stages.append(_Segment(session, inputs, outputs))
        elif _switch_node(g):
            branches = {}
            for attr in g.attribute:
                if attr.name not in ("then_branch", "else_branch"):
                    continue
                made = _branch(proto, attr.g, inits, dtypes, types)
                if made is None:
                    return None
                branches[attr.name == "then_branch"] = made
            if len(branches) != 2:
                return None
            cond = g.input[0]
            stages.append(_Switch(g, branches, numpy_helper.to_array(inits[cond]) if cond in inits else None))
        else:
            slots = []
            for name in g.input:
                if name == "":
                    slots.append(None)
                elif name in inits:
                    if name not in consts:
                        consts[name] = numpy_helper.to_array(inits[name])
                    slots.append(("const", consts[name]))
                else:
                    slots.append(("value", name))
            stages.append(_Recurrent(g, proto_attributes(g), slots))
    return Partition(stages)


def _branch(proto, body, inits: dict, dtypes: dict, types: dict | None):
    """(Partition, input names, output names) of an ``If`` branch: a model of its own whose inputs are the outer
    values the branch reads (outer initializers it reads become its own), or None where it cannot be cut. A branch
    without recurrent nodes is one segment."""
    reads = sorted(_outer_reads(body))
    outer_inits = [inits[n] for n in reads if n in inits]
    inputs = [n for n in reads if n not in inits]
    if any(n not in dtypes for n in inputs) or any(o.name not in dtypes for o in body.output):
        return None
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(dtypes[n]), None) for n in inputs]
    outs = [helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(dtypes[o.name]), None)
            for o in body.output]
    graph = helper.make_graph(body.node, body.name or "branch", ins, outs, [*body.initializer, *outer_inits])
    model = helper.make_model(graph, opset_imports=proto.opset_import, ir_version=proto.ir_version)
    model.functions.extend(proto.functions)
    part = partition(model, set(), dtypes, types)
    if part is None and not _holds_recurrent(body):  # no recurrent node: the branch is one onnxruntime segment
        part = _one_segment(model, inputs, [o.name for o in body.output])
    return None if part is None else (part, inputs, [o.name for o in body.output])


__all__ = ["NEVER_FOLDED", "Partition", "ThreadShare", "constant_node", "constant_values", "partition"]
