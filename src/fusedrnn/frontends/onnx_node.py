"""Single ONNX recurrent nodes <-> fusedrnn layers (the weights and attributes of one LSTM / GRU / RNN node)."""

from __future__ import annotations

import os

from .. import conventions
from ..cells.kinds import GATE_COUNT
from ..errors import AttributeValueError, ConversionError, ShapeError
from ..ops import ONNX_ATTRIBUTES, onnx_activations
from ..validation import as_float_array, check_rank

_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}


def node_weights(model, op_types=tuple(_OPS)) -> tuple[str, dict, dict]:
    """(op_type, {input name: array}, attributes) of the single recurrent node of ``model`` (weights must be
    initializers)."""
    import onnx
    from onnx import helper, numpy_helper

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
    if _batch_major_wrapped(model, node):  # Transposes around a time-major node: a batch-first layer
        attrs["layout"] = 1
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        attrs[a.name] = v
    return node.op_type, arrays, attrs


def _batch_major_wrapped(model, node) -> bool:
    """True when the node's X is a graph input transposed [batch, seq, I] -> [seq, batch, I] (perm 1, 0, 2),
    the form ``to_onnx_model`` gives a batch-first layer so that onnxruntime can run it."""
    from onnx import helper

    graph_inputs = {i.name for i in model.graph.input}
    for producer in model.graph.node:
        if node.input and producer.output and producer.output[0] == node.input[0]:
            perm = next((helper.get_attribute_value(a) for a in producer.attribute if a.name == "perm"), None)
            return producer.op_type == "Transpose" and list(perm or []) == [1, 0, 2] and \
                producer.input[0] in graph_inputs
    return False


def layer_from_onnx(cls, W, R, B, P, attributes: dict):
    """Build ``cls`` (LSTM/GRU/RNN or the base class) from ONNX arrays or a single-node model."""
    from ..layers import GRU, LSTM, RNN, RecurrentLayer

    by_cell = {"lstm": LSTM, "gru": GRU, "rnn": RNN}
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
            Pc = P.reshape(D, 3, H)[:, [0, 2, 1]]  # i, o, f -> i, f, o
        coupling = "input_forget" if int(attrs.get("input_forget", 0)) else None
        return LSTM(Wc, Rc, b_x, b_h, P=Pc, coupling=coupling, **common)
    if cell == "gru":
        return GRU(Wc, Rc, b_x, b_h, linear_before_reset=bool(int(attrs.get("linear_before_reset", 0))), **common)
    return by_cell[cell](Wc, Rc, b_x, b_h, **common)
