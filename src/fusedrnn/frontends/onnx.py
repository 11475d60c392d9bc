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

The other nodes run on an executor (``load(..., executor=...)``, :attr:`Model.executor`):

* ``"onnxruntime"``: onnxruntime, with the recurrent nodes rewritten into onnxruntime-extensions Python ops that
  call back into the same per-node code (:mod:`fusedrnn.frontends.onnx_ort`, which holds the measurements);
* ``"reference"``: onnx's :class:`onnx.reference.ReferenceEvaluator`, the recurrent nodes as ``new_ops`` classes;
* ``"auto"`` (default): onnxruntime when onnxruntime and onnxruntime-extensions import and the model loads in
  it, else reference. Chosen because it reproduces onnxruntime's own non-recurrent arithmetic (the ddddocr
  CRNN matches plain onnxruntime bit for bit, against 8.7e-2 on the reference route, whose quantized conv stack
  computes differently), is about 8x faster on conv-heavy and streaming models, and runs ``Loop`` nodes
  without a ``cond`` input (onnx 1.23's reference Loop reads it as false and skips the body). The
  reference route stays for environments without onnxruntime-extensions and is up to ~1.5x faster on small
  models whose recurrent outputs are large (the Python-op bridge copies outputs as Python lists).

onnx is imported on first use, so ``import fusedrnn`` stays light.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .. import ops
from .. import targets as _targets
from ..errors import (
    AttributeValueError,
    ConversionError,
    DTypeError,
    FusedRNNError,
    InputError,
    ShapeError,
    UnsupportedFeatureError,
)
from ..ops import ONNX_ATTRIBUTES

if TYPE_CHECKING:
    import onnx as onnx_lib

    from ..targets import Target

def _dequantized_lstm_inputs(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                             W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None):
    """DynamicQuantizeLSTM inputs as a float ONNX LSTM's (X, W, R, B, sequence_lens, initial_h, initial_c, P):
    weights dequantized and transposed back to [D, 4H, K]."""
    R = np.asarray(R)
    D, rows = R.shape[0], R.shape[-1]
    Wf = ops.dequantized_weights(W, W_scale, W_zero_point, D, rows, "W").astype(np.float32)
    Rf = ops.dequantized_weights(R, R_scale, R_zero_point, D, rows, "R").astype(np.float32)
    return X, Wf, Rf, B, sequence_lens, initial_h, initial_c, P


def _extended_lstm(X, W, R, B=None, *, mode: str = "faithful", **attributes):
    """AMD Quark's ExtendedLSTM (or the legacy VitisLSTM) node on :func:`fusedrnn.quark.extended_lstm`, its
    weights prepared once while the node is fed equal weights (:class:`fusedrnn.quark.PreparedCache`)."""
    from ..targets.quark.onnx_op import op_arguments, run_prepared

    return (run_prepared(X, W, R, B, mode=mode, **op_arguments(attributes)),)


def _float_node_inputs(X, W, R, B=None):
    """ExtendedLSTM's inputs are already float (the graph dequantizes them): its float form is an ONNX LSTM."""
    return X, W, R, B


@dataclass(frozen=True)
class RecurrentOp:
    """A recurrent ONNX operator fusedrnn runs: its native function, the fusedrnn cell it is a form of, and
    (for quantized forms) how its inputs map to a float node's, which a quantized target is calibrated from.
    ``native_targets`` names targets on which the quantized operator runs its own arithmetic instead (with the
    given extra keywords), such as Quark's ExtendedLSTM on the ``quark`` targets."""

    domain: str
    op_type: str
    run: object
    cell: str
    as_float_inputs: object = None
    native_targets: dict = field(default_factory=dict)


_QUARK_MODES = {"quark": {"mode": "faithful"}, "quark_corrected": {"mode": "corrected"}}

RECURRENT_OPS = {
    ("", "LSTM"): RecurrentOp("", "LSTM", ops.lstm, "lstm"),
    ("", "GRU"): RecurrentOp("", "GRU", ops.gru, "gru"),
    ("", "RNN"): RecurrentOp("", "RNN", ops.rnn, "rnn"),
    ("com.microsoft", "DynamicQuantizeLSTM"): RecurrentOp("com.microsoft", "DynamicQuantizeLSTM",
                                                          ops.dynamic_quantize_lstm, "lstm", _dequantized_lstm_inputs),
    ("com.amd.quark", "ExtendedLSTM"): RecurrentOp("com.amd.quark", "ExtendedLSTM", _extended_lstm, "lstm",
                                                   _float_node_inputs, _QUARK_MODES),
    ("com.vai.quantize", "VitisLSTM"): RecurrentOp("com.vai.quantize", "VitisLSTM", _extended_lstm, "lstm",
                                                   _float_node_inputs, _QUARK_MODES),
}
"""(ONNX domain, op type) -> how fusedrnn runs it."""


def _float_attributes(op: RecurrentOp, attributes: dict) -> dict:
    """The attributes of a quantized operator's float form: those an ONNX node of its cell has."""
    if op.as_float_inputs is None:
        return attributes
    return {k: v for k, v in attributes.items() if k in ONNX_ATTRIBUTES[op.cell]}


def _recurrent_op(node) -> RecurrentOp | None:
    domain = "" if node.domain == "ai.onnx" else node.domain
    return RECURRENT_OPS.get((domain, node.op_type))

_UNUSED_OUTPUT = "_fusedrnn_unused_output_{}"
EXECUTORS = ("auto", "onnxruntime", "reference")
_OPTIONS = ("dtype", "rounding", "activation_defaults")  # fusedrnn.ops keywords that are not ONNX attributes


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: ``shape`` holds ints for fixed dimensions, strings for symbolic ones and None
    for unknown ones (``shape`` is None when the rank is unknown); ``dtype`` is None for non-tensor values."""

    name: str
    shape: tuple | None
    dtype: np.dtype | None

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name} [{dims}] {self.dtype if self.dtype is not None else '(non-tensor)'}"


class _NodeFailure(Exception):
    """Carries a FusedRNNError out of a node (the reference evaluator rewraps TypeErrors)."""

    def __init__(self, node, error: FusedRNNError):
        super().__init__(str(error))
        self.node = node
        self.error = error


def _text(value):
    """ONNX string attributes as str (bytes decoded), lists element-wise."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return value


def node_attributes(attributes: dict, R) -> dict:
    """ONNX node attributes as keyword arguments of ``fusedrnn.ops``: bytes strings decoded, numpy scalars made
    Python numbers, absent (None) and empty-list attributes dropped, ``hidden_size`` taken from R when missing."""
    out = {}
    for key, value in attributes.items():
        if key in _OPTIONS:
            raise AttributeValueError(f"{key}: not an ONNX attribute (a fusedrnn option, set by the target)")
        if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
            continue
        value = _text(value)
        if isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, list):
            value = [v.item() if isinstance(v, np.generic) else v for v in value]
        out[key] = value
    if "hidden_size" not in out and R is not None and np.ndim(R) == 3:
        out["hidden_size"] = int(np.shape(R)[-1])
    return out


def node_key(node) -> str:
    """A recurrent node's identity in a model: its first output's name (unique; omitted outputs are named by
    :func:`load`)."""
    return node.output[0]


def _node_label(node) -> str:
    return f"node {node.name or node_key(node)!r} ({node.op_type})"


@dataclass
class _NodeEmulation:
    """A recurrent node's layer on an emulation target, with the weights it was calibrated for."""

    layer: object
    weights: tuple


class _LazyEmulations(dict):
    """Per-node emulations of a target that needs no calibration, made on each node's first run (from the
    weights it is given then)."""

    def __init__(self, target: Target):
        super().__init__()
        self.target = target


def _node_function(target: Target | None, emulations: dict | None = None, recorder: dict | None = None):
    """The function ``(node, inputs, attributes) -> outputs`` that runs a recurrent node on fusedrnn, for both
    executors. ``inputs`` holds one entry per ONNX input slot (None where omitted), ``attributes`` the node's
    attributes as onnx gives them; the outputs keep X's element type. A FusedRNNError leaves as _NodeFailure.

    Float targets (no ``prepare``) call :mod:`fusedrnn.ops` with the target's compute dtype and rounding policy.
    With ``emulations`` ({node key: _NodeEmulation}) each node runs its calibrated layer instead. With
    ``recorder`` every call's inputs are appended to ``recorder[node key]`` (for calibration)."""
    options = {} if target is None or emulations is not None else {"dtype": target.dtype,
                                                                    "rounding": target.rounding}
    native = target is None and emulations is None and recorder is None  # a quantized node needs no float form

    def run_node(node, inputs, attributes) -> tuple:
        op = _recurrent_op(node)
        try:
            if target is not None and target.name in op.native_targets:  # e.g. ExtendedLSTM on "quark"
                outputs = op.run(*inputs, **node_attributes(attributes, None), **op.native_targets[target.name])
                dtype = np.asarray(inputs[0]).dtype
                return tuple(np.asarray(o, dtype=dtype) for o in outputs[: len(node.output)])
            floats = inputs if op.as_float_inputs is None or native else op.as_float_inputs(*inputs)
            X, W, R, *optional = floats
            if recorder is not None:
                recorder.setdefault(node_key(node), []).append(tuple(floats))
            float_attrs = _float_attributes(op, attributes)
            if emulations is not None:
                outputs = _run_emulated(node, emulations, X, W, R, optional, node_attributes(float_attrs, R))
            elif op.as_float_inputs is None:
                outputs = op.run(*inputs, **node_attributes(attributes, R), **options)
            elif target is None:  # a quantized operator in native precision runs its own arithmetic
                outputs = op.run(*inputs, **node_attributes(attributes, None))
            else:  # on a float target: its float form (dequantized weights) in the target's arithmetic
                outputs = getattr(ops, op.cell)(*floats, **node_attributes(float_attrs, R), **options)
        except FusedRNNError as exc:
            raise _NodeFailure(node, exc) from exc
        dtype = np.asarray(inputs[0]).dtype
        return tuple(np.asarray(o, dtype=dtype) for o in outputs[: len(node.output)])

    return run_node


def _op_classes(target: Target | None, emulations: dict | None = None, recorder: dict | None = None) -> list[type]:
    """``new_ops`` classes running the recurrent nodes (``RECURRENT_OPS``) on fusedrnn through
    :func:`_node_function` (same arguments)."""
    from onnx.reference.op_run import OpRun

    run_node = _node_function(target, emulations, recorder)

    def _run(self, *inputs, **attributes):
        return run_node(self.onnx_node, inputs, attributes)

    if emulations is not None:
        how = f"emulated on target {target.name}"
    else:
        how = "native precision" if target is None else "target " + target.name
    return [type(op.op_type, (OpRun,), {"op_domain": op.domain, "_run": _run,
                                        "__doc__": f"ONNX {op.op_type} on fusedrnn ({how})"})
            for op in RECURRENT_OPS.values()]


def _run_emulated(node, emulations: dict, X, W, R, optional, attrs) -> tuple:
    """Run one node on its calibrated layer; ONNX outputs (Y, Y_h[, Y_c]) in the node's layout."""
    emu = emulations.get(node_key(node))
    if emu is None and isinstance(emulations, _LazyEmulations):
        emu = emulations[node_key(node)] = _calibrate_node(node, [(X, W, R, *optional)], emulations.target)
    if emu is None:
        raise UnsupportedFeatureError("calibration: this node was not reached while running the calibration "
                                      "feeds, so it has no quantization parameters; calibrate with feeds that "
                                      "execute it")
    B_in, P_in = (optional[0] if optional else None), (optional[4] if len(optional) > 4 else None)
    for name, given, calibrated in zip(("W", "R", "B", "P"), (W, R, B_in, P_in), emu.weights, strict=True):
        if given is calibrated:
            continue
        if given is None or calibrated is None or not np.array_equal(given, calibrated):
            raise UnsupportedFeatureError(f"{name}: the node's weights differ from those it was calibrated with "
                                          f"(weights computed at run time must stay constant on a quantized target)")
    lens = optional[1] if len(optional) > 1 else None
    h0 = optional[2] if len(optional) > 2 else None
    c0 = optional[3] if len(optional) > 3 else None
    batch_major = int(attrs.get("layout", 0)) == 1
    if batch_major:  # ONNX layout=1 states are [B, D, H]; layer states are [D, B, H]
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    layer = emu.layer
    if node.op_type == "LSTM":
        state = None if h0 is None and c0 is None else (h0, c0)
        y, (h, c) = layer(X, state, lens)
        states = [h, c]
    else:
        y, h = layer(X, h0, lens)
        states = [h]
    if batch_major:
        states = [np.swapaxes(s, 0, 1) for s in states]
    return (y, *states)


def _name_unused_outputs(graph, count: int = 0) -> int:
    """Give every omitted node output ("") a unique name, in place, subgraphs included; returns the count.

    ``onnx.reference`` stores each node output under its name, so an omitted output would overwrite the
    evaluator's slot for omitted *inputs* ("" -> None) and feed a later node's optional input with garbage."""
    import onnx

    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == "":
                node.output[k] = _UNUSED_OUTPUT.format(count)
                count += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                count = _name_unused_outputs(attr.g, count)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    count = _name_unused_outputs(g, count)
    return count


def _is_recurrent(node) -> bool:
    return _recurrent_op(node) is not None


def _recurrent_nodes(graph):
    """Every recurrent node of ``graph``, subgraphs (If / Loop / Scan bodies) included."""
    import onnx

    for node in graph.node:
        if _is_recurrent(node):
            yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _recurrent_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _recurrent_nodes(g)


def _calibrate_node(node, calls: list, target: Target) -> _NodeEmulation:
    """The node's layer (from the weights of its first call) emulated on ``target``, calibrated on the X of
    every recorded call."""
    from onnx import helper

    from ..layers import GRU, LSTM, RNN
    from .onnx_node import layer_from_onnx

    X, W, R, *optional = calls[0]
    B = optional[0] if optional else None
    P = optional[4] if len(optional) > 4 else None
    op = _recurrent_op(node)
    attrs = node_attributes(_float_attributes(op, {a.name: helper.get_attribute_value(a) for a in node.attribute}),
                            R)
    cls = {"lstm": LSTM, "gru": GRU, "rnn": RNN}[op.cell]
    layer = layer_from_onnx(cls, W, R, B, P, attrs)
    if any(not np.array_equal(c[1], W) or not np.array_equal(c[2], R) for c in calls[1:]):
        raise UnsupportedFeatureError("W, R: the weights changed between calibration runs; a quantized target "
                                      "needs constant weights")
    return _NodeEmulation(layer.to(target, calibration=[np.asarray(c[0]) for c in calls]), (W, R, B, P))


def _value_info(vi) -> TensorInfo:
    from onnx import helper

    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        return TensorInfo(vi.name, None, None)
    tt = t.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)) if tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
        )
    return TensorInfo(vi.name, shape, dtype)


class Model:
    """An ONNX model whose recurrent nodes run on fusedrnn. Build it with :func:`load`."""

    def __init__(self, proto: onnx_lib.ModelProto, target: Target | str | None = None,
                 emulations: dict | None = None, executor: str = "auto", _shared: dict | None = None):
        self._proto = proto
        self._target = None if target is None else _targets.get(target)
        self._emulations = emulations
        self._shared = {} if _shared is None else _shared  # state shared with to() copies (the ORT session)
        initializers = {t.name for t in proto.graph.initializer}
        self._inputs = tuple(_value_info(v) for v in proto.graph.input if v.name not in initializers)
        self._optional_inputs = {v.name for v in proto.graph.input if v.name in initializers}
        self._outputs = tuple(_value_info(v) for v in proto.graph.output)
        self._executor = self._resolve_executor(executor)
        self._runner = self._make_runner(self._target, emulations)

    def _resolve_executor(self, executor: str) -> str:
        if executor not in EXECUTORS:
            raise AttributeValueError(f"executor: expected one of {EXECUTORS}, got {executor!r}")
        if executor == "reference":
            return executor
        try:
            self._ort_graph()
        except UnsupportedFeatureError:
            if executor == "onnxruntime":
                raise
            return "reference"
        return "onnxruntime"

    def _ort_graph(self):
        """The model rewritten for onnxruntime (made once per proto; a failure is remembered too)."""
        graph = self._shared.get("ort")
        if graph is None:
            from . import onnx_ort

            try:
                graph = onnx_ort.OrtGraph(self._proto, self._optional_inputs)
            except UnsupportedFeatureError as exc:
                graph = exc
            except Exception as exc:  # noqa: BLE001 -- whatever the rewrite trips on, "auto" falls back
                graph = UnsupportedFeatureError(f"model: cannot be prepared for onnxruntime: {exc}")
                graph.__cause__ = exc
            self._shared["ort"] = graph
        if isinstance(graph, Exception):
            raise graph
        return graph

    def _make_runner(self, target: Target | None, emulations: dict | None = None, recorder: dict | None = None):
        """A function ``(output names, feeds) -> outputs`` running the model on this model's executor."""
        if self._executor == "onnxruntime":
            graph, run_node = self._ort_graph(), _node_function(target, emulations, recorder)
            return lambda names, feeds: graph.run(run_node, names, feeds)
        from onnx.reference import ReferenceEvaluator

        try:
            return ReferenceEvaluator(self._proto, new_ops=_op_classes(target, emulations, recorder)).run
        except NotImplementedError as exc:
            raise UnsupportedFeatureError(f"model: {exc}") from exc

    @property
    def proto(self) -> onnx_lib.ModelProto:
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
        return [n.name or node_key(n) for n in _recurrent_nodes(self._proto.graph)]

    def to(self, target: Target | str | None, calibration=None) -> Model:
        """The same model with every LSTM / GRU / RNN node computed on ``target`` (a name, a
        :class:`~fusedrnn.targets.Target`, or None for native precision).

        Quantized targets need ``calibration``: feeds (a dict, or a list of dicts) that the float model is run
        on; each recurrent node is calibrated on the inputs it received there (its X, in the node's layout) and
        runs as its own layer on the target. A node the target cannot express raises
        :class:`~fusedrnn.errors.UnsupportedFeatureError` listing every such node and why."""
        t = None if target is None else _targets.get(target)
        same = {"executor": self._executor, "_shared": self._shared}
        if t is None or t.prepare is None:
            return Model(self._proto, t, **same)  # float targets ignore calibration data
        if calibration is None:
            if t.needs_calibration:
                raise UnsupportedFeatureError(f"calibration: target {t.name!r} is quantized and needs calibration "
                                              f"feeds (a dict of input name -> array, or a list of such dicts)")
            return Model(self._proto, t, _LazyEmulations(t), **same)  # each node prepared on its first run
        batches = calibration if isinstance(calibration, (list, tuple)) else [calibration]
        if not batches or not all(isinstance(b, dict) for b in batches):
            raise DTypeError(f"calibration: expected a dict of input name -> array or a non-empty list of such "
                             f"dicts, got {type(calibration).__name__}")
        recorded: dict = {}
        recorder = self._make_runner(None, recorder=recorded)
        for feeds in batches:
            self._run_with(recorder, feeds, None)
        nodes = {node_key(n): n for n in _recurrent_nodes(self._proto.graph)}
        emulations, problems = {}, []
        for key, calls in recorded.items():
            node = nodes[key]
            if t.name in _recurrent_op(node).native_targets:
                continue  # runs its own quantized arithmetic on this target
            try:
                emulations[key] = _calibrate_node(node, calls, t)
            except FusedRNNError as exc:
                problems.append(f"{_node_label(node)}: {exc}")
        if problems:
            raise UnsupportedFeatureError(f"target: {t.name!r} cannot run {len(problems)} recurrent node(s) of "
                                          f"this model:\n  " + "\n  ".join(problems))
        return Model(self._proto, t, emulations, **same)

    def _check_feeds(self, feeds) -> dict:
        if not isinstance(feeds, dict):
            raise DTypeError(f"feeds: expected a dict of input name -> array, got {type(feeds).__name__}")
        expected = ", ".join(str(i) for i in self._inputs) or "none"
        missing = [i.name for i in self._inputs if i.name not in feeds]
        unknown = [k for k in feeds if k not in {i.name for i in self._inputs} | self._optional_inputs]
        if missing or unknown:
            what = "; ".join(filter(None, [missing and f"missing {missing}", unknown and f"unknown {unknown}"]))
            raise InputError(f"feeds: {what}; the model's inputs are {expected}")
        out = {}
        info = {i.name: i for i in self._inputs}
        for name, value in feeds.items():
            arr = np.asarray(value)
            spec = info.get(name)
            if spec is not None and spec.dtype is not None and arr.dtype != spec.dtype:
                raise DTypeError(f"{name}: expected dtype {spec.dtype}, got {arr.dtype} (cast the array first)")
            if spec is not None and spec.shape is not None:
                if arr.ndim != len(spec.shape) or any(
                    isinstance(d, int) and d > 0 and d != n for d, n in zip(spec.shape, arr.shape, strict=False)
                ):
                    raise ShapeError(f"{name}: expected shape {spec}, got {arr.shape}")
            out[name] = arr
        return out

    def run(self, feeds: dict, outputs: list[str] | None = None) -> dict[str, np.ndarray]:
        """Run the model on ``feeds`` ({input name: array}); returns {output name: array} for ``outputs``
        (default: every graph output).

        Missing or unknown feed names raise :class:`~fusedrnn.errors.InputError`; a feed whose dtype or shape
        contradicts the model's declared input raises DTypeError / ShapeError; an unknown output name raises
        AttributeValueError."""
        return self._run_with(self._runner, feeds, outputs)

    def _run_with(self, runner, feeds: dict, outputs: list[str] | None) -> dict[str, np.ndarray]:
        feeds = self._check_feeds(feeds)
        names = [o.name for o in self._outputs] if outputs is None else list(outputs)
        known = {o.name for o in self._outputs}
        bad = [n for n in names if n not in known]
        if bad:
            raise AttributeValueError(f"outputs: unknown output(s) {bad}; the model's outputs are {sorted(known)}")
        try:
            results = runner(names, feeds)
        except _NodeFailure as failure:
            node, err = failure.node, failure.error
            raise type(err)(f"{_node_label(node)}: {err}") from err
        return dict(zip(names, results, strict=True))

    def __repr__(self) -> str:
        target = "native" if self._target is None else self._target.name
        ins = ", ".join(str(i) for i in self._inputs)
        outs = ", ".join(str(o) for o in self._outputs)
        return f"<fusedrnn.onnx.Model {self._proto.graph.name!r} on {target}: ({ins}) -> ({outs})>"


def load(path_or_model: str | os.PathLike | bytes | onnx_lib.ModelProto, target: Target | str | None = None,
         executor: str = "auto") -> Model:
    """Load an ONNX model (a path, serialized bytes or a ModelProto, which is copied) as a :class:`Model`;
    ``target`` as in :meth:`Model.to`.

    ``executor`` runs the non-recurrent nodes: "onnxruntime" (onnxruntime with the recurrent nodes as
    onnxruntime-extensions Python ops, :mod:`fusedrnn.frontends.onnx_ort`), "reference" (onnx's
    ReferenceEvaluator) or "auto" (onnxruntime when onnxruntime and onnxruntime-extensions import and the model
    loads in it, else reference)."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(path_or_model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(path_or_model)
    elif isinstance(path_or_model, (bytes, bytearray)):
        try:
            proto = onnx.load_model_from_string(bytes(path_or_model))
        except DecodeError as exc:
            raise ConversionError(f"model: the bytes are not a serialized ONNX model ({exc})") from exc
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"model: no such file: {path}")
        try:
            proto = onnx.load(path)
        except DecodeError as exc:
            raise ConversionError(f"model: {path} is not an ONNX model ({exc})") from exc
    else:
        raise DTypeError(f"model: expected a path, bytes or an onnx.ModelProto, got {type(path_or_model).__name__}")
    if not proto.graph.output:
        raise ConversionError("model: the ONNX graph has no outputs (is it an ONNX model?)")
    _name_unused_outputs(proto.graph)
    return Model(proto, target, executor=executor)


__all__ = ["EXECUTORS", "Model", "RecurrentOp", "TensorInfo", "RECURRENT_OPS", "load", "node_attributes", "node_key"]

