"""What runs a model's non-recurrent nodes: onnxruntime or onnx's reference evaluator.

* ``"onnxruntime"``: onnxruntime. In native precision, a model whose LSTM / GRU nodes the compiled kernel's
  batched path runs is one session with those nodes as the kernel library's custom operators
  (:mod:`fusedrnn.frontends.onnx_native`: no Python per node); otherwise it runs as segments around the
  recurrent nodes when they are all top-level (:mod:`fusedrnn.frontends.onnx_partition`), else with the
  recurrent nodes rewritten into onnxruntime-extensions Python ops that call back into the node function
  (:mod:`fusedrnn.frontends.onnx_ort`, which holds the measurements);
* ``"reference"``: onnx's :class:`onnx.reference.ReferenceEvaluator`, the recurrent nodes as ``new_ops``
  classes calling the node function;
* ``"auto"`` (default): onnxruntime when onnxruntime and onnxruntime-extensions import and the model loads in
  it, else reference. Chosen because it reproduces onnxruntime's own non-recurrent arithmetic (the ddddocr
  CRNN matches plain onnxruntime bit for bit, against 8.7e-2 on the reference route, whose quantized conv stack
  computes differently), is about 8x faster on conv-heavy and streaming models, and runs ``Loop`` nodes
  without a ``cond`` input (onnx 1.23's reference Loop reads it as false and skips the body). The
  reference route stays for environments without onnxruntime-extensions; where the Python-op bridge runs, it can
  be up to ~1.5x faster on small models whose recurrent outputs are large (the bridge copies outputs as Python
  lists).

On the reference route, an error of the evaluator's own operators on the model's values is an
:class:`~fusedrnn.errors.InputError` (as onnxruntime's are on the onnxruntime route) and one while building the
evaluator a ConversionError; what a recurrent node raises comes out unchanged.

The node function is ``(node, inputs, attributes) -> outputs``
(:func:`fusedrnn.frontends.onnx_emulation.node_function`); a runner is ``(output names, feeds) -> outputs``.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ..errors import AttributeValueError, ConversionError, InputError, UnsupportedFeatureError
from . import onnx_ort
from .onnx_ops import RECURRENT_OPS

EXECUTORS = ("auto", "onnxruntime", "reference")


def ort_graph(proto: onnx.ModelProto, overridable, shared: dict) -> onnx_ort.OrtGraph:
    """The model rewritten for onnxruntime, made once per proto and kept in ``shared["ort"]`` (a dict shared by
    a model and its ``to()`` copies); a failure (UnsupportedFeatureError) is remembered and raised again."""
    graph = shared.get("ort")
    if graph is None:
        try:
            graph = onnx_ort.OrtGraph(proto, overridable)
        except UnsupportedFeatureError as exc:
            graph = exc
        except Exception as exc:  # noqa: BLE001 -- whatever the rewrite trips on, "auto" falls back
            graph = UnsupportedFeatureError(f"model: cannot be prepared for onnxruntime: {exc}")
            graph.__cause__ = exc
        shared["ort"] = graph
    if isinstance(graph, Exception):
        raise graph
    return graph


def choose_executor(executor: str, proto: onnx.ModelProto, overridable, shared: dict) -> str:
    """The executor ``executor`` ("auto", "onnxruntime" or "reference") resolves to for this model: "auto" is
    onnxruntime when :func:`ort_graph` succeeds, else reference; an explicit "onnxruntime" raises its failure."""
    if executor not in EXECUTORS:
        raise AttributeValueError(f"executor: expected one of {EXECUTORS}, got {executor!r}")
    if executor == "reference":
        return executor
    try:
        ort_graph(proto, overridable, shared)
    except UnsupportedFeatureError:
        if executor == "onnxruntime":
            raise
        return "reference"
    return "onnxruntime"


class NodeRaised(Exception):
    """Carries what a recurrent node's function raised through the reference evaluator (which rewraps
    TypeErrors) to the runner of :func:`make_runner`, which raises it again as it was."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def reference_op_classes(run_node: Callable, how: str) -> list[type]:
    """``new_ops`` classes of the reference evaluator running every recurrent operator (``RECURRENT_OPS``)
    through ``run_node``; ``how`` says how, for their docstrings."""

    def _run(self, *inputs, **attributes):
        try:
            return run_node(self.onnx_node, inputs, attributes)
        except Exception as exc:  # noqa: BLE001 - carried out unchanged, see NodeRaised
            raise NodeRaised(exc) from None

    return [type(op.op_type, (OpRun,), {"op_domain": op.domain, "_run": _run,
                                        "__doc__": f"ONNX {op.op_type} on fusedrnn ({how})"})
            for op in RECURRENT_OPS.values()]


def make_runner(executor: str, proto: onnx.ModelProto, overridable, shared: dict, run_node: Callable,
                how: str) -> Callable:
    """A function ``(output names, feeds) -> outputs`` running the model on ``executor`` (a resolved one:
    "onnxruntime" or "reference"), its recurrent nodes through ``run_node``."""
    if executor == "onnxruntime":
        graph = ort_graph(proto, overridable, shared)
        return lambda names, feeds: graph.run(run_node, names, feeds)
    try:
        evaluator = ReferenceEvaluator(proto, new_ops=reference_op_classes(run_node, how))
    except NotImplementedError as exc:
        raise UnsupportedFeatureError(f"model: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - whatever the evaluator trips on in the model
        raise ConversionError(f"model: onnx's reference evaluator cannot load it: {_first_line(exc)}") from exc

    def run(names, feeds):
        try:
            return evaluator.run(names, feeds)
        except NodeRaised as carried:  # a recurrent node's own error, as it was raised
            raise carried.error from carried.error.__cause__
        except Exception as exc:  # noqa: BLE001 - the evaluator's operators on the model's values (as onnx_ort does)
            raise InputError(f"feeds: onnx's reference evaluator could not run the model on them: "
                             f"{_first_line(exc)}") from exc

    return run


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


__all__ = ["EXECUTORS", "NodeRaised", "choose_executor", "make_runner", "ort_graph", "reference_op_classes"]
