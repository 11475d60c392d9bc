"""Whole ONNX models on fusedrnn: the recurrent nodes run on fusedrnn, everything else on onnxruntime (or on
``onnx.reference``).

::

    import fusedrnn
    model = fusedrnn.onnx.load("model.onnx")
    outputs = model.run({"x": x})            # {output name: array}
    fp16 = model.to("fp16")                  # every LSTM / GRU / RNN node emulated on the fp16 target
    outputs16 = fp16.run({"x": x})

ONNX ``LSTM``, ``GRU``, ``RNN`` and ``com.microsoft::DynamicQuantizeLSTM`` nodes call :func:`fusedrnn.ops.lstm`
/ ``gru`` / ``rnn`` / ``dynamic_quantize_lstm`` with the model's target (its compute ``dtype`` and rounding
policy) or run the node's calibrated layer on a quantized target. A model without a target (``load``'s default)
computes each recurrent node in its input's precision with exact rounding, like onnxruntime. A node's outputs
keep their declared ONNX element type: with the ``fp64`` target a float32 model's recurrent nodes compute in
float64 and round their outputs to float32.

The other nodes run on an executor (``load(..., executor=...)``, :attr:`Model.executor`): ``"onnxruntime"``,
``"reference"`` (onnx's ReferenceEvaluator) or ``"auto"`` (default: onnxruntime when it and
onnxruntime-extensions import and the model loads in it, else reference); why and how fast:
:mod:`fusedrnn.frontends.onnx_executors`.

This module is the facade; each job has its own module:

=============================================  ===================================================================
:mod:`~fusedrnn.frontends.onnx_load`           reading and checking the model, naming omitted outputs, signature
:mod:`~fusedrnn.frontends.onnx_ops`            the table of recurrent operators (``RECURRENT_OPS``), node facts
:mod:`~fusedrnn.frontends.onnx_executors`      executor choice; the reference evaluator's recurrent op classes
:mod:`~fusedrnn.frontends.onnx_ort`            onnxruntime with the recurrent nodes as Python ops
:mod:`~fusedrnn.frontends.onnx_record`         recording each recurrent node's inputs for calibration
:mod:`~fusedrnn.frontends.onnx_emulation`      running recurrent nodes on fusedrnn, float and quantized targets
=============================================  ===================================================================
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import onnx

from .. import targets as _targets
from ..cells.calibration import Calibration
from ..errors import AttributeValueError, DTypeError, InputError, ShapeError, UnsupportedFeatureError
from ..targets import Target
from .onnx_emulation import LazyEmulations, NodeFailure, calibrate_nodes, describe, node_function
from .onnx_executors import EXECUTORS, choose_executor, make_runner, ort_graph
from .onnx_load import TensorInfo, read_model, signature
from .onnx_ops import RECURRENT_OPS, RecurrentOp, node_attributes, node_key, node_label, recurrent_nodes, recurrent_op
from .onnx_record import Recorder, calibration_batches


class Model:
    """An ONNX model whose recurrent nodes run on fusedrnn. Build it with :func:`load`."""

    def __init__(self, proto: onnx.ModelProto, target: Target | str | None = None,
                 emulations: dict | None = None, executor: str = "auto", _shared: dict | None = None):
        self._proto = proto
        self._target = None if target is None else _targets.get(target)
        self._shared = {} if _shared is None else _shared  # state shared with to() copies (the ORT session)
        sig = signature(proto)
        self._inputs, self._optional_inputs, self._outputs = sig.inputs, sig.optional_inputs, sig.outputs
        self._input_info = {i.name: i for i in self._inputs}  # what run() checks feeds and outputs against
        self._feed_checks = {i.name: (i.dtype, None if i.shape is None else len(i.shape), _fixed_dims(i.shape))
                             for i in self._inputs}
        self._output_names = dict.fromkeys(o.name for o in self._outputs)
        self._executor = choose_executor(executor, proto, self._optional_inputs, self._shared)
        self._emulations = emulations
        self._runner = self._make_runner(self._target, emulations)

    def _ort_graph(self):
        """The model rewritten for onnxruntime, shared with every ``to()`` copy (its failure is raised again)."""
        return ort_graph(self._proto, self._optional_inputs, self._shared)

    def _make_runner(self, target: Target | None, emulations: dict | None = None, recorder: Recorder | None = None,
                     tap=None):
        """A function ``(output names, feeds) -> outputs`` running the model on this model's executor."""
        return make_runner(self._executor, self._proto, self._optional_inputs, self._shared,
                           node_function(target, emulations, recorder, tap), describe(target, emulations))

    def _runner_with(self, run_node, how: str):
        """A runner whose recurrent nodes go through ``run_node(node, inputs, attributes)`` (diagnosis mixes
        emulated and float nodes)."""
        return make_runner(self._executor, self._proto, self._optional_inputs, self._shared, run_node, how)

    @property
    def proto(self) -> onnx.ModelProto:
        """The ONNX ModelProto (shared with every ``to()`` copy; omitted node outputs carry generated names)."""
        return self._proto

    @property
    def executor(self) -> str:
        """What runs the non-recurrent nodes: "onnxruntime" or "reference" (onnx's ReferenceEvaluator)."""
        return self._executor

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
        """Names (or first output names) of the nodes that run on fusedrnn, subgraphs included."""
        return [n.name or node_key(n) for n in recurrent_nodes(self._proto.graph)]

    def to(self, target: Target | str | None, calibration=None, *, keep_float: Sequence[str] = ()) -> Model:
        """The same model with every LSTM / GRU / RNN node computed on ``target`` (a name, a
        :class:`~fusedrnn.targets.Target`, or None for native precision).

        Quantized targets need ``calibration``: feeds (a dict, or a list of dicts) that the float model is run
        on, or a :class:`~fusedrnn.Calibration` holding them with the method that chooses the quantized ranges
        (and per-node methods); each recurrent node is calibrated on the inputs it received there (its X, in the
        node's layout) and runs as its own layer on the target. Nodes that are already quantized for the target
        (ExtendedLSTM on ``quark`` / ``quark_corrected``) run their own parameters: a model of only such nodes
        needs none. ``keep_float``: names of recurrent nodes that stay in float (mixed precision). A node the
        target cannot express raises
        :class:`~fusedrnn.errors.UnsupportedFeatureError` listing every such node and why."""
        t = None if target is None else _targets.get(target)
        same = {"executor": self._executor, "_shared": self._shared}
        self._check_node_names(keep_float, "keep_float")
        settings = calibration if isinstance(calibration, Calibration) else None
        if settings is not None:
            self._check_node_names(settings.per_node, "calibration.per_node")
            calibration = settings.inputs
        if t is None or t.prepare is None:
            return Model(self._proto, t, **same)  # float targets ignore calibration data
        native = all(t.name in recurrent_op(n).native_targets for n in recurrent_nodes(self._proto.graph))
        if calibration is None and native:  # e.g. ExtendedLSTM nodes on "quark": already quantized, nothing to
            return Model(self._proto, t, {}, **same)  # calibrate
        if calibration is None:
            if t.needs_calibration:
                raise UnsupportedFeatureError(f"calibration: target {t.name!r} is quantized and needs calibration "
                                              f"feeds (a dict of input name -> array, or a list of such dicts)")
            return Model(self._proto, t, LazyEmulations(t), **same)  # each node prepared on its first run
        batches = calibration_batches(calibration)
        recorded = Recorder()
        recorder = self._make_runner(None, recorder=recorded)
        for feeds in batches:
            self._run_with(recorder, feeds, None)
        emulations = calibrate_nodes(self._proto, recorded, t, settings, keep_float)
        return Model(self._proto, t, emulations, **same)

    def _check_node_names(self, names, argument: str) -> None:
        known = set(self.recurrent_nodes) | {node_key(n) for n in recurrent_nodes(self._proto.graph)}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise AttributeValueError(f"{argument}: unknown recurrent node(s) {unknown}; the model's recurrent "
                                      f"nodes are {self.recurrent_nodes}")

    def _check_feeds(self, feeds) -> dict:
        if not isinstance(feeds, dict):
            raise DTypeError(f"feeds: expected a dict of input name -> array, got {type(feeds).__name__}")
        info = self._input_info
        if not _keys_fit(feeds, info, self._optional_inputs):
            missing = [n for n in info if n not in feeds]
            unknown = [k for k in feeds if k not in info and k not in self._optional_inputs]
            expected = ", ".join(str(i) for i in self._inputs) or "none"
            what = "; ".join(filter(None, [missing and f"missing {missing}", unknown and f"unknown {unknown}"]))
            raise InputError(f"feeds: {what}; the model's inputs are {expected}")
        out = {}
        for name, value in feeds.items():
            arr = value if type(value) is np.ndarray else np.asarray(value)
            check = self._feed_checks.get(name)
            if check is not None:
                dtype, rank, dims = check
                if dtype is not None and arr.dtype != dtype:
                    raise DTypeError(f"{name}: expected dtype {dtype}, got {arr.dtype} (cast the array first)")
                if rank is not None and (arr.ndim != rank or not _dims_fit(arr.shape, dims)):
                    raise ShapeError(f"{name}: expected shape {info[name]}, got {arr.shape}")
            out[name] = arr
        return out

    def run(self, feeds, outputs=None):
        """Run the model on ``feeds`` ({input name: array}); returns {output name: array} for ``outputs``
        (default: every graph output).

        onnxruntime's form works too: ``run(output_names, feeds)`` (``output_names`` a list of names or None
        for all) returns a list of arrays in the order of ``output_names``.

        Missing or unknown feed names raise :class:`~fusedrnn.errors.InputError`; a feed whose dtype or shape
        contradicts the model's declared input raises DTypeError / ShapeError; an unknown output name raises
        AttributeValueError."""
        if isinstance(outputs, dict) and (feeds is None or isinstance(feeds, (list, tuple))):
            names = None if feeds is None else list(feeds)
            result = self._run_with(self._runner, outputs, names)
            return list(result.values())
        return self._run_with(self._runner, feeds, outputs)

    def _run_with(self, runner, feeds: dict, outputs: list[str] | None) -> dict[str, np.ndarray]:
        feeds = self._check_feeds(feeds)
        known = self._output_names
        names = list(known) if outputs is None else list(outputs)
        bad = [] if outputs is None else [n for n in names if n not in known]
        if bad:
            raise AttributeValueError(f"outputs: unknown output(s) {bad}; the model's outputs are {sorted(known)}")
        try:
            results = runner(names, feeds)
        except NodeFailure as failure:
            node, err = failure.node, failure.error
            raise type(err)(f"{node_label(node)}: {err}") from err
        return dict(zip(names, results, strict=True))

    def __repr__(self) -> str:
        target = "native" if self._target is None else self._target.name
        ins = ", ".join(str(i) for i in self._inputs)
        outs = ", ".join(str(o) for o in self._outputs)
        return f"<fusedrnn.onnx.Model {self._proto.graph.name!r} on {target}: ({ins}) -> ({outs})>"


def _fixed_dims(shape: tuple | None) -> tuple:
    """(axis, size) of a declared shape's fixed dimensions, the ones a feed must match."""
    return tuple((k, d) for k, d in enumerate(shape or ()) if isinstance(d, int) and d > 0)


def _keys_fit(feeds: dict, inputs: dict, optional) -> bool:
    """Whether ``feeds`` holds every input and nothing but inputs and optional inputs (plain loops: this runs on
    every call)."""
    for name in inputs:
        if name not in feeds:
            return False
    for name in feeds:
        if name not in inputs and name not in optional:
            return False
    return True


def _dims_fit(shape: tuple, dims: tuple) -> bool:
    for k, d in dims:
        if shape[k] != d:
            return False
    return True


def load(path_or_model: str | os.PathLike | bytes | onnx.ModelProto, target: Target | str | None = None,
         executor: str = "auto") -> Model:
    """Load an ONNX model (a path, serialized bytes or a ModelProto, which is copied) as a :class:`Model`;
    ``target`` as in :meth:`Model.to`.

    ``executor`` runs the non-recurrent nodes: "onnxruntime" (in native precision the whole model as one session
    with the recurrent nodes as custom operators of fusedrnn's C libraries where they allow it,
    :mod:`fusedrnn.frontends.onnx_native`; else onnxruntime segments around the recurrent nodes or the recurrent
    nodes as onnxruntime-extensions Python ops, :mod:`fusedrnn.frontends.onnx_ort`), "reference" (onnx's
    ReferenceEvaluator) or "auto" (onnxruntime when onnxruntime and onnxruntime-extensions import and the model
    loads in it, else reference). Reading the model: :func:`fusedrnn.frontends.onnx_load.read_model`."""
    return Model(read_model(path_or_model), target, executor=executor)


__all__ = ["EXECUTORS", "Model", "RecurrentOp", "TensorInfo", "RECURRENT_OPS", "load", "node_attributes", "node_key"]

