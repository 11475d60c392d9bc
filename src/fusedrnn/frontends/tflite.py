"""Recurrent ops of a .tflite model as fusedrnn layers (``fusedrnn.LSTM.from_tflite``, litert.md section 9.3).

Weights are dequantized to float32 (``(q - zp) · scale``); the op's own tensors are kept on the layer so that
``layer.to("litert-int8x16", calibration="tflite")`` (or ``"litert-hybrid"``) runs exactly the stored model.
Gate order i, f, c, o is fusedrnn's canonical (i, f, g, o); a missing input gate is CIFG (``coupling="cifg"``);
the fused activation becomes the g and h activations; ``cell_clip``/``proj_clip`` of 0 mean none; a batch-major
op gives a ``batch_first`` layer. An op fed by REVERSE_V2 on the time axis (Keras ``go_backwards``) becomes a
``direction="reverse"`` layer with ``output_order="processing"``, or ``"time"`` when a second REVERSE_V2 flips its
output back (the backward half of a Keras ``Bidirectional``). Registers the layer converter ``from_tflite``
(:func:`layer_from_tflite`) when imported.
"""

from __future__ import annotations

import numpy as np

from ..cells.activations import Activation
from ..errors import AttributeValueError, ConversionError, UnsupportedFeatureError
from ..layers import GRU, LSTM, RNN, RecurrentLayer, register_converter
from ..targets.litert.graph import Model, bidirectional_lstm_tensors, load, lstm_tensors
from ..targets.litert.lstm_float import direction_arrays
from ..targets.litert.slots import LstmOptions

_FUSED_TO_ACT = {"TANH": "Tanh", "RELU": "Relu", "SIGMOID": "Sigmoid"}


def _act(name: str):
    if name == "NONE":
        return Activation("Affine", 1.0, 0.0)
    if name not in _FUSED_TO_ACT:
        raise ConversionError(f"fused_activation_function: {name} has no fusedrnn activation")
    return Activation(_FUSED_TO_ACT[name])


def _producer(model: Model, tensor: int):
    for n in model.nodes:
        if tensor in n.info.outputs:
            return n.info
    return None


def _consumers(model: Model, tensor: int):
    return [n.info for n in model.nodes if tensor in n.info.inputs]


def _is_time_reverse(model: Model, op, time_axis: int) -> bool:
    if op is None or op.name != "REVERSE_V2" or len(op.inputs) != 2 or op.inputs[1] < 0:
        return False
    axis = model.info.tensors[op.inputs[1]].data
    return axis is not None and [int(a) for a in np.atleast_1d(axis)] == [time_axis]


def layer_from_tflite(cls, source, op_index: int = 0):
    """The fusedrnn layer of the ``op_index``-th recurrent op (``load(source).ops[op_index]``) of a .tflite model
    (path, bytes or a loaded :class:`~fusedrnn.targets.litert.graph.Model`)."""
    model = source if isinstance(source, Model) else load(source)
    if isinstance(op_index, bool) or not isinstance(op_index, (int, np.integer)):
        raise AttributeValueError(f"op_index: expected an int, got {op_index!r}")
    ops = model.ops
    if not 0 <= op_index < len(ops):
        raise AttributeValueError(f"op_index: the model has {len(ops)} recurrent op(s), got {op_index}")
    node = [n for n in model.nodes if n.op is not None][op_index]
    info = node.info
    if info.name in ("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM"):
        expected = LSTM
    elif info.name in ("RNN", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN"):
        expected = RNN
    else:
        expected = GRU
    if cls is not None and cls is not expected and cls is not RecurrentLayer:
        raise ConversionError(f"op_index: op {op_index} is {info.name}, which imports as {expected.__name__}, not "
                              f"{cls.__name__}")
    if expected is not LSTM:
        return _rnn_layer(model, node, expected)
    if info.name == "BIDIRECTIONAL_SEQUENCE_LSTM":
        fw, bw = bidirectional_lstm_tensors(model.info, info)
        if fw.n_aux_input or bw.n_aux_input:
            raise UnsupportedFeatureError("aux weights: a bidirectional op with aux inputs has no layer equivalent")
        opts = LstmOptions.from_dict(info.options, time_major=True)
        dirs = [fw, bw]
        extra = {"direction": "bidirectional", "batch_first": not opts.time_major}
    else:
        t = lstm_tensors(model.info, info)
        opts = LstmOptions.from_dict(info.options)
        dirs = [t]
        time_axis = 0 if (opts.time_major or info.name == "LSTM") else 1
        extra = {"batch_first": info.name != "LSTM" and not opts.time_major}
        if info.name != "LSTM" and _is_time_reverse(model, _producer(model, info.inputs[0]), time_axis):
            back = any(_is_time_reverse(model, c, time_axis) for c in _consumers(model, info.outputs[0]))
            extra.update(direction="reverse", output_order="time" if back else "processing")
    arrs = [direction_arrays(t, opts.diagonal_recurrent_tensors) for t in dirs]

    def stack(key):
        return None if arrs[0][key] is None else np.stack([a[key] for a in arrs])

    act = _act(opts.fused_activation_function)
    layer = LSTM(stack("W"), stack("R"), stack("b"), P=stack("P"),
                        coupling="cifg" if dirs[0].cifg else None, cell_clip=opts.cell_clip or None,
                        proj_W=stack("proj_W"), proj_b=stack("proj_b"),
                        proj_clip=(opts.proj_clip or None) if dirs[0].projection else None, layer_norm=stack("ln"),
                        activations=[Activation("Sigmoid"), act, act], **extra)
    kinds = {t.kind() for t in dirs}
    layer.kept = {"litert": {"kind": kinds.pop(), "tensors": dirs, "options": opts, "op": info.name}}
    return layer


def _rnn_layer(model: Model, node, cls):
    op, info = node.op, node.info
    if cls.cell == "gru":
        H, I = op.n_cell, op.n_input
        r, u = slice(0, H), slice(H, 2 * H)
        Wg = np.concatenate([op.Wgx.T, op.Wgh.T], axis=1)
        Wc = np.concatenate([op.Wcx.T, op.Wch.T], axis=1)
        W = np.concatenate([Wg[u, :I], Wg[r, :I], Wc[:, :I]])[None]
        R = np.concatenate([Wg[u, I:], Wg[r, I:], Wc[:, I:]])[None]
        b = np.concatenate([op.bg[u], op.bg[r], op.bc])[None]
        return cls(W, R, b, linear_before_reset=False)
    kernels = [op.kernel] if hasattr(op, "kernel") else [op.fw, op.bw]
    Ws, Rs, bs = [], [], []
    for k in kernels:
        if k.kind == "hybrid":
            Ws.append(np.asarray(k.W.M.b, np.float32).T * k.W.scale[:, None])
            Rs.append(np.asarray(k.R.M.b, np.float32).T * k.R.scale[:, None])
        else:
            Ws.append(k.Wt.T)
            Rs.append(k.Rt.T)
        bs.append(k.b)
        if k.n_aux:
            raise UnsupportedFeatureError("aux weights: a bidirectional RNN with aux inputs has no layer equivalent")
    act = kernels[0].act
    acts = [_act(act)] if act != "NONE" else [Activation("Affine", 1.0, 0.0)]
    tm = bool(info.options.get("time_major", info.name == "BIDIRECTIONAL_SEQUENCE_RNN"))
    return cls(np.stack(Ws), np.stack(Rs), np.stack(bs), activations=acts,
               direction="bidirectional" if len(kernels) == 2 else "forward",
               batch_first=info.name != "RNN" and not tm)


register_converter("from_tflite", layer_from_tflite)

__all__ = ["layer_from_tflite"]
