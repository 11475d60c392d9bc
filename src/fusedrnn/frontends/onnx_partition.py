"""onnxruntime around the recurrent nodes: the model's graph cut at its top-level recurrent nodes into segments of
other nodes, each an onnxruntime session of its own, run in order with the recurrent nodes called in between.

The Python-op bridge (:mod:`fusedrnn.frontends.onnx_ort`) sends every recurrent node's inputs through ``Cast`` to
float64 and its outputs back as Python lists (about 70 ns a value), and its session has to leave spinning off so
that onnxruntime's idle workers do not take the cores from the node; a model whose recurrent nodes are all in the
top-level graph is run here instead: values cross between segments as the arrays onnxruntime returns, the
recurrent nodes get them in their own element types, and each segment's session has onnxruntime's default
options. Measured (``python -m benchmarks.bench_models``) this removed most of the executor's cost over plain
onnxruntime; the numbers are in the README's performance section.

:func:`partition` returns None (the bridge then runs the model) when a recurrent node sits inside an ``If`` /
``Loop`` / ``Scan`` body, when the model has initializers a caller may override (graph inputs of the same name),
or when the element type of a value crossing a cut cannot be inferred. Segments are the nodes between two
recurrent nodes in the graph's (topological) order; a segment's inputs are the values it reads that earlier
stages or the caller produce (outer-scope names its subgraphs read included), its outputs those that later stages
or the graph's outputs read.
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


def _nested(graph) -> bool:
    """Whether a recurrent node sits inside a subgraph of ``graph``'s nodes (at any depth)."""
    def inside(g) -> bool:
        return any(recurrent_op(n) is not None or any(inside(s) for s in subgraphs(n)) for n in g.node)
    return any(inside(s) for n in graph.node for s in subgraphs(n))


class Partition:
    """The stages of a partitioned model; :meth:`run` as :meth:`fusedrnn.frontends.onnx_ort.OrtGraph.run`.

    The recurrent nodes run on the compiled loops' threads, or on the caller's thread alone where they take a
    small share of the call: a helper thread on another core evicts the onnxruntime segments' data from that
    core's cache, which costs more than it saves there (Silero VAD v6: its LSTM 0.17 ms on two threads, 0.21 ms on
    one, but the encoder segment after it 1.66 ms instead of 1.39 ms), while a recurrent node that is most of the
    call gains from it (the bundled example's LSTM: 0.5 ms against 1.0 ms). The share is measured on every call,
    with hysteresis (ONE_BELOW on threads, THREADS_ABOVE on one thread, where the node takes up to twice as long);
    both modes give the same bits."""

    ONE_BELOW = 0.2
    THREADS_ABOVE = 0.4

    def __init__(self, stages: list):
        self.stages = stages
        self.one_thread = False

    def run(self, node_function, names: list[str], feeds: dict) -> list[np.ndarray]:
        one = self.one_thread
        t0 = time.perf_counter()
        with thread_limit(1) if one else contextlib.nullcontext():
            out, recurrent = self._run(node_function, names, feeds)
        share = recurrent / max(time.perf_counter() - t0, 1e-9)
        self.one_thread = share < self.THREADS_ABOVE if one else share < self.ONE_BELOW
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
            else:
                t0 = time.perf_counter()
                inputs = [None if s is None else s[1] if s[0] == "const" else env[s[1]] for s in stage.slots]
                outputs = node_function(stage.node, inputs, stage.attributes)
                env.update(zip(stage.node.output, outputs, strict=False))
                recurrent += time.perf_counter() - t0
        return [env[n] for n in names], recurrent


def partition(proto: onnx.ModelProto, overridable, dtypes: dict, types: dict | None = None) -> Partition | None:
    """The model cut at its recurrent nodes (see the module's docstring), or None where it cannot be. ``dtypes``:
    the numpy dtype of every value a segment reads or writes; ``types``: their inferred ``TypeProto`` (with shapes)
    where known, so that onnxruntime optimises a segment as it does the whole model."""
    import onnxruntime as ort

    graph = proto.graph
    if overridable or _nested(graph) or not any(recurrent_op(n) is not None for n in graph.node):
        return None
    inits = {t.name: t for t in graph.initializer}
    if any(o.name in inits for o in graph.output):
        return None
    groups: list = [[]]
    for node in graph.node:
        if recurrent_op(node) is not None:
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
            so = ort.SessionOptions()
            so.log_severity_level = 3
            # the workers spin between the segment's own operators but stop when it ends: spinning into the
            # recurrent node's turn took the cores its threads wanted (the bundled example: median 1.42 ms with
            # spinning, 0.60 ms without); without any spinning a convolution encoder's operators each wait for a
            # sleeping worker (Silero VAD v6's encoder: 1.84 ms, 1.39 ms with spinning stopped at the end)
            so.add_session_config_entry("session.force_spinning_stop", "1")
            try:
                session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            except Exception:  # noqa: BLE001 -- a segment onnxruntime refuses: the bridge runs the whole model
                return None
            stages.append(_Segment(session, inputs, outputs))
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


__all__ = ["Partition", "partition"]
