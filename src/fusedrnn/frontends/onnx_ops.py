"""The recurrent ONNX operators fusedrnn runs, in one table, and the node facts every ONNX module shares.

``RECURRENT_OPS`` maps (ONNX domain, op type) to a :class:`RecurrentOp`: ``LSTM``, ``GRU``, ``RNN``,
``com.microsoft::DynamicQuantizeLSTM``, AMD Quark's ``com.amd.quark::ExtendedLSTM`` and its legacy alias
``com.vai.quantize::VitisLSTM``. The onnxruntime executor (:mod:`fusedrnn.frontends.onnx_ort`), the reference
executor (:mod:`fusedrnn.frontends.onnx_executors`) and the node runner (:mod:`fusedrnn.frontends.onnx_emulation`)
all read it through :func:`recurrent_op`, so a recurrent operator is added here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import onnx

from .. import ops
from ..errors import AttributeValueError
from ..ops import ONNX_ATTRIBUTES
from ..targets.quark import onnx_op as quark_onnx_op


def _dequantized_lstm_inputs(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                             W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None):
    """DynamicQuantizeLSTM inputs as a float ONNX LSTM's (X, W, R, B, sequence_lens, initial_h, initial_c, P):
    weights dequantized and transposed back to [D, 4H, K]."""
    R = np.asarray(R)
    D, rows = R.shape[0], R.shape[-1]
    Wf = ops.dequantized_weights(W, W_scale, W_zero_point, D, rows, "W").astype(np.float32)
    Rf = ops.dequantized_weights(R, R_scale, R_zero_point, D, rows, "R").astype(np.float32)
    return X, Wf, Rf, B, sequence_lens, initial_h, initial_c, P


def _extended_lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
                   mode: str = "faithful", **attributes):
    """AMD Quark's ExtendedLSTM (or the legacy VitisLSTM) node on :func:`fusedrnn.quark.extended_lstm`, its
    weights prepared once while the node is fed equal weights (:class:`fusedrnn.quark.PreparedCache`); the
    optional inputs and outputs of the LSTM it replaced as :func:`fusedrnn.targets.quark.onnx_op.node_outputs`
    takes and gives them: (Y, Y_h, Y_c)."""
    return quark_onnx_op.node_outputs(X, W, R, B, sequence_lens, initial_h, initial_c, P, mode=mode,
                                      **quark_onnx_op.op_arguments(attributes))


def _float_node_inputs(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
    """ExtendedLSTM's inputs are already float (the graph dequantizes them): its float form is an ONNX LSTM with
    the inputs the node kept."""
    return X, W, R, B, sequence_lens, initial_h, initial_c, P


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
    **{(domain, op_type): RecurrentOp(domain, op_type, _extended_lstm, "lstm", _float_node_inputs, _QUARK_MODES)
       for domain, op_type in quark_onnx_op.OPS},  # ExtendedLSTM and its legacy alias VitisLSTM
}
"""(ONNX domain, op type) -> how fusedrnn runs it."""

OPTIONS = ("dtype", "rounding", "activation_defaults")
"""fusedrnn.ops keywords that are not ONNX attributes (a target sets them, never a node)."""


def recurrent_op(node) -> RecurrentOp | None:
    """The :class:`RecurrentOp` of a NodeProto, or None when fusedrnn does not run it (``ai.onnx`` is "")."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    return RECURRENT_OPS.get((domain, node.op_type))


def float_attributes(op: RecurrentOp, attributes: dict) -> dict:
    """The attributes of a quantized operator's float form: those an ONNX node of its cell has."""
    if op.as_float_inputs is None:
        return attributes
    return {k: v for k, v in attributes.items() if k in ONNX_ATTRIBUTES[op.cell]}


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
        if key in OPTIONS:
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


def proto_attributes(node) -> dict:
    """A NodeProto's attributes as ``onnx.helper.get_attribute_value`` gives them (what the executors pass)."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def node_key(node) -> str:
    """A recurrent node's identity in a model: its first output's name (unique; omitted outputs are named by
    :func:`fusedrnn.frontends.onnx_load.read_model`)."""
    return node.output[0]


def node_label(node) -> str:
    """How error messages name a node: ``node 'name' (op type)``, the first output's name when it has none."""
    return f"node {node.name or node_key(node)!r} ({node.op_type})"


def subgraphs(node) -> Iterator:
    """The GraphProtos a node holds (the bodies of ``If`` / ``Loop`` / ``Scan``)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def recurrent_nodes(graph) -> Iterator:
    """Every recurrent node of ``graph``, subgraphs (If / Loop / Scan bodies) included."""
    for node in graph.node:
        if recurrent_op(node) is not None:
            yield node
        for g in subgraphs(node):
            yield from recurrent_nodes(g)


__all__ = ["OPTIONS", "RECURRENT_OPS", "RecurrentOp", "float_attributes", "node_attributes", "node_key",
           "node_label", "proto_attributes", "recurrent_nodes", "recurrent_op", "subgraphs"]
