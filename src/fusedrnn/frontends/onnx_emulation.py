"""Running a model's recurrent nodes on fusedrnn: in native precision, on a float target's arithmetic, or as
calibrated layers on a quantized target.

:func:`node_function` makes the function ``(node, inputs, attributes) -> outputs`` that both executors call for
every recurrent node (:mod:`fusedrnn.frontends.onnx_executors`). Float targets (no ``prepare``) call
:mod:`fusedrnn.ops` with the target's compute dtype and rounding policy; a quantized target runs each node as
its own layer (:func:`fusedrnn.frontends.onnx_node.layer_from_onnx`) made by :func:`calibrate_nodes` from the
inputs recorded on the float model (:mod:`fusedrnn.frontends.onnx_record`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx

from .. import ops
from ..errors import FusedRNNError, UnsupportedFeatureError
from ..layers import GRU, LSTM, RNN
from ..targets import Target
from .onnx_load import UNUSED_OUTPUT
from .onnx_node import layer_from_onnx
from .onnx_ops import (
    float_attributes,
    node_attributes,
    node_key,
    node_label,
    proto_attributes,
    recurrent_nodes,
    recurrent_op,
)
from .onnx_record import Recorder

_LAYER_CLASSES = {"lstm": LSTM, "gru": GRU, "rnn": RNN}


class NodeFailure(Exception):
    """Carries a FusedRNNError out of a node (the reference evaluator rewraps TypeErrors); the model re-raises
    ``error`` with :func:`~fusedrnn.frontends.onnx_ops.node_label` in front."""

    def __init__(self, node, error: FusedRNNError):
        super().__init__(str(error))
        self.node = node
        self.error = error


@dataclass
class NodeEmulation:
    """A recurrent node's layer on an emulation target, with the weights it was calibrated for."""

    layer: object
    weights: tuple


class LazyEmulations(dict):
    """Per-node emulations of a target that needs no calibration, made on each node's first run (from the
    weights it is given then)."""

    def __init__(self, target: Target):
        super().__init__()
        self.target = target


def describe(target: Target | None, emulations: dict | None) -> str:
    """How :func:`node_function` runs the nodes, in words (for the executors' op classes)."""
    if emulations is not None:
        return f"emulated on target {target.name}"
    return "native precision" if target is None else "target " + target.name


def node_function(target: Target | None, emulations: dict | None = None, recorder: Recorder | None = None,
                  tap=None):
    """The function ``(node, inputs, attributes) -> outputs`` that runs a recurrent node on fusedrnn, for both
    executors. ``inputs`` holds one entry per ONNX input slot (None where omitted), ``attributes`` the node's
    attributes as onnx gives them; the outputs keep X's element type. A FusedRNNError leaves as NodeFailure.

    Float targets (no ``prepare``) call :mod:`fusedrnn.ops` with the target's compute dtype and rounding policy.
    With ``emulations`` ({node key: NodeEmulation}) each node runs its calibrated layer instead. With
    ``recorder`` every call's float inputs are recorded (for calibration); ``tap(node, outputs, X)`` sees every
    node's outputs and float input X (for diagnosis)."""
    options = {} if target is None or emulations is not None else {"dtype": target.dtype,
                                                                    "rounding": target.rounding}
    native = target is None and emulations is None and recorder is None  # a quantized node needs no float form

    def run_node(node, inputs, attributes) -> tuple:
        op = recurrent_op(node)
        try:
            if target is not None and target.name in op.native_targets:  # e.g. ExtendedLSTM on "quark"
                outputs = op.run(*inputs, **node_attributes(attributes, None), **op.native_targets[target.name])
                dtype = np.asarray(inputs[0]).dtype
                return tuple(np.asarray(o, dtype=dtype) for o in outputs[: len(node.output)])
            floats = inputs if op.as_float_inputs is None or native else op.as_float_inputs(*inputs)
            X, W, R, *optional = floats
            if recorder is not None:
                recorder.record(node, floats)
            float_attrs = float_attributes(op, attributes)
            if emulations is not None:
                outputs = run_emulated(node, emulations, X, W, R, optional, node_attributes(float_attrs, R))
            elif op.as_float_inputs is None:
                outputs = op.run(*inputs, **node_attributes(attributes, R), **options)
            elif target is None:  # a quantized operator in native precision runs its own arithmetic
                outputs = op.run(*inputs, **node_attributes(attributes, None), **_own_options(node, op))
            else:  # on a float target: its float form (dequantized weights) in the target's arithmetic
                outputs = getattr(ops, op.cell)(*floats, **node_attributes(float_attrs, R), **options)
        except FusedRNNError as exc:
            raise NodeFailure(node, exc) from exc
        dtype = np.asarray(inputs[0]).dtype
        result = tuple(np.asarray(o, dtype=dtype) for o in outputs[: len(node.output)])
        if tap is not None:
            tap(node, result, np.asarray(inputs[0] if recurrent_op(node).as_float_inputs is None
                                         else recurrent_op(node).as_float_inputs(*inputs)[0]))
        return result

    run_node.native = native and tap is None  # the ONNX semantics alone: onnx_native's operators compute them
    return run_node


def _own_options(node, op) -> dict:
    """Keywords of a quantized operator's own arithmetic that depend on the node: DynamicQuantizeLSTM computes
    differently when its Y output is omitted (onnxruntime then feeds a finished row's last h back)."""
    if op.op_type != "DynamicQuantizeLSTM":
        return {}
    return {"has_y": not node.output[0].startswith(UNUSED_OUTPUT.format(""))}


def run_emulated(node, emulations: dict, X, W, R, optional, attrs) -> tuple:
    """Run one node on its calibrated layer; ONNX outputs (Y, Y_h[, Y_c]) in the node's layout."""
    emu = emulations.get(node_key(node))
    if emu is None and isinstance(emulations, LazyEmulations):
        emu = emulations[node_key(node)] = calibrate_node(node, [(X, W, R, *optional)], emulations.target)
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
    if recurrent_op(node).cell == "lstm":  # LSTM and its quantized forms (DynamicQuantizeLSTM, ExtendedLSTM)
        state = None if h0 is None and c0 is None else (h0, c0)
        y, (h, c) = layer(X, state, lens)
        states = [h, c]
    else:
        y, h = layer(X, h0, lens)
        states = [h]
    if batch_major:
        states = [np.swapaxes(s, 0, 1) for s in states]
    return (y, *states)


def calibrate_node(node, calls: list, target: Target | None, calibration=None) -> NodeEmulation:
    """The node's layer (from the weights of its first call) emulated on ``target``, calibrated on the X of
    every recorded call (with the method of ``calibration``, a :class:`~fusedrnn.cells.calibration.Calibration`,
    when given); with ``target`` None the float layer itself (a node kept in float)."""
    X, W, R, *optional = calls[0]
    B = optional[0] if optional else None
    P = optional[4] if len(optional) > 4 else None
    op = recurrent_op(node)
    attrs = node_attributes(float_attributes(op, proto_attributes(node)), R)
    layer = layer_from_onnx(_LAYER_CLASSES[op.cell], W, R, B, P, attrs)
    if any(not np.array_equal(c[1], W) or not np.array_equal(c[2], R) for c in calls[1:]):
        raise UnsupportedFeatureError("W, R: the weights changed between calibration runs; a quantized target "
                                      "needs constant weights")
    if target is None:
        return NodeEmulation(layer, (W, R, B, P))
    xs = [np.asarray(c[0]) for c in calls]
    if calibration is not None:
        xs = replace(calibration.for_node(node.name or node_key(node)), inputs=xs)
    return NodeEmulation(layer.to(target, calibration=xs), (W, R, B, P))


def calibrate_nodes(proto: onnx.ModelProto, recorded: Recorder, target: Target, calibration=None,
                    keep_float=()) -> dict:
    """{node key: NodeEmulation} for every recorded node that does not run natively on ``target``; a node the
    target cannot express raises UnsupportedFeatureError listing every such node and why. ``calibration``: the
    :class:`~fusedrnn.cells.calibration.Calibration` settings (method, per node); ``keep_float``: names (or
    keys) of nodes that stay in float."""
    nodes = {node_key(n): n for n in recurrent_nodes(proto.graph)}
    floats = set(keep_float)
    emulations, problems = {}, []
    for key, calls in recorded.items():
        node = nodes[key]
        if node.name in floats or key in floats:
            emulations[key] = calibrate_node(node, calls, None)
            continue
        if target.name in recurrent_op(node).native_targets:
            continue  # runs its own quantized arithmetic on this target
        try:
            emulations[key] = calibrate_node(node, calls, target, calibration)
        except FusedRNNError as exc:
            problems.append(f"{node_label(node)}: {exc}")
    if problems:
        raise UnsupportedFeatureError(f"target: {target.name!r} cannot run {len(problems)} recurrent node(s) of "
                                      f"this model:\n  " + "\n  ".join(problems))
    return emulations


__all__ = ["LazyEmulations", "NodeEmulation", "NodeFailure", "calibrate_node", "calibrate_nodes", "describe",
           "node_function", "run_emulated"]
