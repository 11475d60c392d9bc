"""onnxruntime as an oracle: run one ONNX LSTM / GRU / RNN node on given arrays.

``ort_lstm``, ``ort_gru`` and ``ort_rnn`` take the same arguments as ``fusedrnn.ops.lstm`` / ``gru`` / ``rnn``,
build a single-node float32 model (onnx.helper, opset 14 by default, or 22) with every present input as a graph
input (absent optional inputs as ``""``, trailing ones omitted), and run it in onnxruntime's CPU provider with
one intra-op thread. They return float32 arrays (Y, Y_h[, Y_c]).

onnxruntime limitations (onnx.md section 3): it needs ``hidden_size`` (taken from R when not given), runs float32
only (inputs are cast) and rejects ``layout=1`` (``NotImplementedError`` here; transpose to layout 0 instead).
RNN activation names are case-sensitive in onnxruntime, so names are passed in their canonical spelling.
"""

from __future__ import annotations

import numpy as np

_CANONICAL = {
    n.lower(): n
    for n in ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
              "Elu", "Softsign", "Softplus")
}

_INPUTS = {
    "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
    "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
}
_OUTPUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}


def build_model(op_type, arrays, attributes, opset=14):
    """A single-node ModelProto for ``op_type`` with inputs ``arrays`` (name -> array or None)."""
    import onnx
    from onnx import TensorProto, helper

    names = _INPUTS[op_type]
    node_inputs = [n if arrays.get(n) is not None else "" for n in names]
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    graph_inputs = []
    for n in node_inputs:
        if n:
            a = arrays[n]
            elem = TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT
            graph_inputs.append(helper.make_tensor_value_info(n, elem, list(a.shape)))
    outputs = _OUTPUTS[op_type]
    node = helper.make_node(op_type, node_inputs, outputs, **attributes)
    T, Bn = arrays["X"].shape[:2]
    D = 2 if attributes.get("direction") == "bidirectional" else 1
    H = attributes["hidden_size"]
    shapes = {"Y": [T, D, Bn, H], "Y_h": [D, Bn, H], "Y_c": [D, Bn, H]}
    graph = helper.make_graph(
        [node], f"single_{op_type.lower()}", graph_inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])
    model.ir_version = 8 if opset <= 18 else 10
    onnx.checker.check_model(model)
    return model


def run_model(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _run(op_type, args, *, hidden_size, direction, activations, activation_alpha, activation_beta, clip,
         layout, extra, opset):
    if layout not in (0, None):
        raise NotImplementedError("onnxruntime does not support layout=1 (batchwise) recurrent operators")
    arrays = dict(zip(_INPUTS[op_type], args, strict=False))
    feeds = {}
    for name, a in arrays.items():
        if a is None:
            continue
        a = np.asarray(a, dtype=np.int32 if name == "sequence_lens" else np.float32)
        arrays[name] = a
        feeds[name] = a
    attrs = {"hidden_size": int(hidden_size if hidden_size is not None else arrays["R"].shape[-1])}
    if direction is not None:
        attrs["direction"] = direction
    if activations is not None:
        attrs["activations"] = [_CANONICAL[a.lower()] for a in activations]
    # an empty list is the same as an absent attribute (onnx.helper cannot infer an empty list's type)
    if activation_alpha:
        attrs["activation_alpha"] = [float(a) for a in activation_alpha]
    if activation_beta:
        attrs["activation_beta"] = [float(b) for b in activation_beta]
    if clip is not None:
        attrs["clip"] = float(clip)
    for key, value in extra.items():
        if value is not None:
            attrs[key] = int(value)
    model = build_model(op_type, arrays, attrs, opset)
    return tuple(run_model(model, feeds))


def ort_lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *, hidden_size=None,
             direction=None, activations=None, activation_alpha=None, activation_beta=None, clip=None,
             input_forget=None, layout=0, opset=14):
    """onnxruntime LSTM -> (Y, Y_h, Y_c)."""
    return _run("LSTM", [X, W, R, B, sequence_lens, initial_h, initial_c, P], hidden_size=hidden_size,
                direction=direction, activations=activations, activation_alpha=activation_alpha,
                activation_beta=activation_beta, clip=clip, layout=layout,
                extra={"input_forget": input_forget}, opset=opset)


def ort_gru(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None, direction=None,
            activations=None, activation_alpha=None, activation_beta=None, clip=None, linear_before_reset=None,
            layout=0, opset=14):
    """onnxruntime GRU -> (Y, Y_h)."""
    return _run("GRU", [X, W, R, B, sequence_lens, initial_h], hidden_size=hidden_size, direction=direction,
                activations=activations, activation_alpha=activation_alpha, activation_beta=activation_beta,
                clip=clip, layout=layout, extra={"linear_before_reset": linear_before_reset}, opset=opset)


def ort_rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None, direction=None,
            activations=None, activation_alpha=None, activation_beta=None, clip=None, layout=0, opset=14):
    """onnxruntime RNN -> (Y, Y_h)."""
    return _run("RNN", [X, W, R, B, sequence_lens, initial_h], hidden_size=hidden_size, direction=direction,
                activations=activations, activation_alpha=activation_alpha, activation_beta=activation_beta,
                clip=clip, layout=layout, extra={}, opset=opset)


ORT = {"lstm": ort_lstm, "gru": ort_gru, "rnn": ort_rnn}
