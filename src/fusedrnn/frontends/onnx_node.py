"""Single ONNX recurrent nodes <-> fusedrnn layers (the weights and attributes of one LSTM / GRU / RNN node).

Registers the layer converters ``from_onnx`` (:func:`layer_from_onnx`) and ``to_onnx_model``
(:func:`to_onnx_model`) when imported.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import conventions
from ..cells.kinds import GATE_COUNT
from ..errors import AttributeValueError, ConversionError, ShapeError
from ..layers import GRU, LSTM, RNN, RecurrentLayer, register_converter
from ..ops import ONNX_ATTRIBUTES, onnx_activations
from ..validation import as_float_array, check_rank

ONNX_OP_TYPES = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}
"""Cell kind -> the ONNX operator of that kind."""
_OPS = {op: cell for cell, op in ONNX_OP_TYPES.items()}
_LAYERS = {"lstm": LSTM, "gru": GRU, "rnn": RNN}


def node_weights(model, op_types=tuple(_OPS)) -> tuple[str, dict, dict]:
    """(op_type, {input name: array}, attributes) of the single recurrent node of ``model`` (weights must be
    initializers)."""
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    nodes = [n for n in model.graph.node if n.op_type in op_types and n.domain in ("", "ai.onnx")]
    if len(nodes) != 1:
        raise ConversionError(f"model: expected exactly one {'/'.join(op_types)} node, found {len(nodes)}")
    node = nodes[0]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    slots = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    arrays = {}
    for slot, name in zip(slots, node.input, strict=False):
        if name and slot in ("W", "R", "B", "P"):
            if name not in inits:
                raise ConversionError(f"model: the {slot} input {name!r} of node {node.name!r} is not an "
                                      f"initializer; only constant weights can be imported")
            arrays[slot] = inits[name]
    attrs = {}
    if batch_major_wrapped(model, node):  # Transposes around a time-major node: a batch-first layer
        attrs["layout"] = 1
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        attrs[a.name] = v
    return node.op_type, arrays, attrs


def batch_major_wrapped(model, node) -> bool:
    """True when the node's X is a graph input transposed [batch, seq, I] -> [seq, batch, I] (perm 1, 0, 2),
    the form ``to_onnx_model`` gives a batch-first layer so that onnxruntime can run it."""
    graph_inputs = {i.name for i in model.graph.input}
    for producer in model.graph.node:
        if node.input and producer.output and producer.output[0] == node.input[0]:
            perm = next((helper.get_attribute_value(a) for a in producer.attribute if a.name == "perm"), None)
            return producer.op_type == "Transpose" and list(perm or []) == [1, 0, 2] and \
                producer.input[0] in graph_inputs
    return False


def layer_from_onnx(cls, W, R, B, P, attributes: dict):
    """Build ``cls`` (LSTM/GRU/RNN or the base class) from ONNX arrays or a single-node model."""
    if R is None:  # a model or path
        op, arrays, attrs = node_weights(W)
        cell = _OPS[op]
        attrs.update(attributes)
        W, R, B, P = arrays.get("W"), arrays.get("R"), arrays.get("B"), arrays.get("P")
    else:
        cell = cls.cell
        attrs = dict(attributes)
    if cls is not RecurrentLayer and cls.cell != cell:
        raise ConversionError(f"model: expected an ONNX {cls.cell.upper()} node, got {cell.upper()}")
    unknown = sorted(set(attrs) - set(ONNX_ATTRIBUTES[cell]))
    if unknown:
        raise AttributeValueError(f"{', '.join(unknown)}: unknown attribute(s) of ONNX {cell.upper()}")
    G = GATE_COUNT[cell]
    W = as_float_array(W, "W")
    R = as_float_array(R, "R")
    check_rank(W, 3, "W", f"[num_directions, {G}*hidden_size, input_size]")
    check_rank(R, 3, "R", f"[num_directions, {G}*hidden_size, hidden_size]")
    H = int(attrs.get("hidden_size", R.shape[-1]))
    if R.shape[-1] != H or W.shape[1] != G * H:
        raise ShapeError(f"W, R: expected {G}*hidden_size = {G * H} rows and R of width {H}, got W {W.shape}, "
                         f"R {R.shape}")
    D = W.shape[0]
    direction = attrs.get("direction", "forward")
    acts = None
    if attrs.get("activations") is not None:
        acts = onnx_activations(cell, attrs["activations"], attrs.get("activation_alpha"),
                                attrs.get("activation_beta"), D)
    Wc = conventions.to_canonical(W, cell, "onnx", axis=1, argument="W")
    Rc = conventions.to_canonical(R, cell, "onnx", axis=1, argument="R")
    b_x = b_h = None
    if B is not None:
        B = as_float_array(B, "B")
        if B.shape != (D, 2 * G * H):
            raise ShapeError(f"B: expected shape ({D}, {2 * G * H}) [num_directions, {2 * G}*hidden_size], "
                             f"got {B.shape}")
        b_x = conventions.to_canonical(B[:, : G * H], cell, "onnx", axis=1)
        b_h = conventions.to_canonical(B[:, G * H :], cell, "onnx", axis=1)
    common = dict(direction=direction, activations=acts, clip=attrs.get("clip"),
                  batch_first=int(attrs.get("layout", 0)) == 1, merge="stack")
    if cell == "lstm":
        Pc = None
        if P is not None:
            P = as_float_array(P, "P")
            if P.shape != (D, 3 * H):
                raise ShapeError(f"P: expected shape ({D}, {3 * H}) [num_directions, 3*hidden_size], got {P.shape}")
            Pc = conventions.peepholes_to_canonical(P.reshape(D, 3, H), "onnx", axis=1)
        coupling = "input_forget" if int(attrs.get("input_forget", 0)) else None
        return LSTM(Wc, Rc, b_x, b_h, P=Pc, coupling=coupling, **common)
    if cell == "gru":
        return GRU(Wc, Rc, b_x, b_h, linear_before_reset=bool(int(attrs.get("linear_before_reset", 0))), **common)
    return _LAYERS[cell](Wc, Rc, b_x, b_h, **common)


def to_onnx_model(layer, *, opset: int = 14, ir_version: int = 8, name: str | None = None, state_inputs: bool = True,
                  layout: int = 0) -> onnx.ModelProto:
    """The single-node ONNX model of ``layer`` (:meth:`fusedrnn.LSTM.to_onnx_model`): inputs X [, sequence_lens,
    initial_h(, initial_c)], weights as initializers, outputs Y, Y_h (, Y_c) in ONNX's stacked-direction form;
    a ``batch_first`` layer keeps a batch-major signature (Transposes around a time-major node for ``layout=0``,
    the node's ``layout`` attribute for ``layout=1``)."""
    if isinstance(layout, bool) or layout not in (0, 1):
        raise AttributeValueError(f"layout: expected 0 or 1, got {layout!r}")
    if layout == 1 and not layer.batch_first:
        raise AttributeValueError("layout: 1 (a batch-major node) needs a batch_first layer")
    spec = layer.to_onnx()
    attrs = spec["attributes"]
    transpose = layer.batch_first and layout == 0
    if transpose:
        attrs.pop("layout", None)
    op = ONNX_OP_TYPES[layer.cell]
    elem = TensorProto.DOUBLE if layer.W.dtype == np.float64 else TensorProto.FLOAT
    D, H, I, Hp = layer.num_directions, layer.hidden_size, layer.input_size, layer.output_size
    bf = layer.batch_first
    shapes = {  # graph signature
        "X": ["batch", "seq", I] if bf else ["seq", "batch", I],
        "initial_h": ["batch", D, Hp] if bf else [D, "batch", Hp],
        "initial_c": ["batch", D, H] if bf else [D, "batch", H],
        "Y": ["batch", "seq", D, Hp] if bf else ["seq", D, "batch", Hp],
        "Y_h": ["batch", D, Hp] if bf else [D, "batch", Hp],
        "Y_c": ["batch", D, H] if bf else [D, "batch", H],
    }
    # batch-major graph value -> (perm into the time-major node, perm out of it)
    perms = {"X": [1, 0, 2], "initial_h": [1, 0, 2], "initial_c": [1, 0, 2], "Y": [2, 0, 1, 3],
             "Y_h": [1, 0, 2], "Y_c": [1, 0, 2]}
    nodes, state_names = [], ["initial_h"] + (["initial_c"] if layer.cell == "lstm" else [])
    inputs = [helper.make_tensor_value_info("X", elem, shapes["X"])]
    if state_inputs:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["batch"]))
        inputs += [helper.make_tensor_value_info(n, elem, shapes[n]) for n in state_names]

    def node_input(n):
        if not transpose:
            return n
        nodes.append(helper.make_node("Transpose", [n], [f"{n}_time_major"], perm=perms[n]))
        return f"{n}_time_major"

    node_in = [node_input("X"), "W", "R", "B"]
    if state_inputs:
        node_in += ["sequence_lens"] + [node_input(n) for n in state_names]
    inits = [numpy_helper.from_array(spec[k], k) for k in ("W", "R", "B")]
    if "P" in spec:
        node_in += [""] * (7 - len(node_in))
        node_in.append("P")
        inits.append(numpy_helper.from_array(spec["P"], "P"))
    outs = ["Y", "Y_h"] + (["Y_c"] if layer.cell == "lstm" else [])
    node_out = [f"{o}_time_major" if transpose else o for o in outs]
    nodes.insert(len(nodes), helper.make_node(op, node_in, node_out, **attrs))
    if transpose:
        nodes += [helper.make_node("Transpose", [t], [o], perm=perms[o]) for t, o in zip(node_out, outs,
                                                                                          strict=True)]
    out_info = [helper.make_tensor_value_info(o, elem, shapes[o]) for o in outs]
    graph = helper.make_graph(nodes, name or f"fusedrnn_{layer.cell}", inputs, out_info, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    onnx.checker.check_model(model)
    return model


register_converter("from_onnx", layer_from_onnx)
register_converter("to_onnx_model", to_onnx_model)

__all__ = ["ONNX_OP_TYPES", "batch_major_wrapped", "layer_from_onnx", "node_weights", "to_onnx_model"]
