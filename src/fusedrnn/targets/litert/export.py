"""Write fusedrnn layers as .tflite models of TFLite's fused recurrent ops (litert.md sections 2, 3 and 9), so
the LiteRT interpreter runs the very tensors the ``litert-*`` targets run.

:func:`export` takes a float LSTM / RNN layer or a Stack (from PyTorch, Keras 3 or ONNX through fusedrnn's
importers), prepares it on the scheme's target (:func:`prepare`: the 8x8_16 quantization is the target's, from
calibration data) and writes one UNIDIRECTIONAL_SEQUENCE_LSTM / _RNN per direction, with REVERSE_V2 around the
backward direction and CONCATENATION / PACK / ADD / MUL for the merge, as the TF converter writes Keras layers;
or one BIDIRECTIONAL_SEQUENCE_LSTM / _RNN on request. :func:`to_tflite` writes one prepared LSTM time-major (the
targets' tests use it).
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace

import numpy as np

from ...errors import AttributeValueError, DTypeError, UnsupportedFeatureError
from ...validation import calibration_sequences
from .reader import TensorInfo
from .schema import enum_names
from .slots import INPUT, OUTPUT_STATE, const
from .writer import OpSpec, SignatureSpec, write_model


def to_tflite(layer, *, batch: int, time: int) -> bytes:
    """The .tflite model of an LSTM ``layer.to("litert-...")`` copy (its prepared tensors), input [time, batch, I]
    and output [time, batch, D*Hp] (directions concatenated)."""
    kernels = getattr(getattr(layer, "prepared", None), "kernels", None)
    if layer.cell != "lstm" or kernels is None:
        raise UnsupportedFeatureError("layer: expected an LSTM prepared for a litert-* target (layer.to(...))")
    tensors, ops = [], []

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    k0 = kernels[0]
    x_t = replace(k0.t[INPUT], shape=(time, batch, k0.n_input), name="x")
    x = add(x_t)
    axis = add(const("time_axis", np.array([0], np.int32)))
    outs = []
    rev = [layer.direction == "reverse" or d == 1 for d in range(len(kernels))]
    for d, k in enumerate(kernels):
        t = k.t
        src = x
        if rev[d]:
            src = add(replace(x_t, name=f"x_reversed_{d}"))
            ops.append(OpSpec("REVERSE_V2", [x, axis], [src], version=3 if k.kind == "integer" else 1))
        slots = []
        for j, s in enumerate(t.slots):
            if j == 0:
                slots.append(src)
            elif j in (18, 19):
                shape = (batch, k.n_output if j == 18 else k.n_cell)
                slots.append(add(replace(s, shape=shape, data=None, is_variable=True, name=f"state{j}_{d}")))
            else:
                slots.append(-1 if s is None else add(replace(s, name=f"{s.name}_{d}")))
        inter = [add(replace(s, name=f"{s.name}_{d}")) for s in t.intermediates]
        y_t = replace(t[OUTPUT_STATE], shape=(time, batch, k.n_output), is_variable=False, data=None, name=f"y_{d}")
        y = add(y_t)
        opts = {"fused_activation_function": k.opts.fused_activation_function, "cell_clip": k.opts.cell_clip,
                "proj_clip": k.opts.proj_clip, "time_major": True,
                "asymmetric_quantize_inputs": k.opts.asymmetric_quantize_inputs,
                "diagonal_recurrent_tensors": k.opts.diagonal_recurrent_tensors}
        version = 1 if k.kind != "hybrid" else (3 if k.opts.asymmetric_quantize_inputs else 2)
        if k.opts.diagonal_recurrent_tensors:
            version = 4
        ops.append(OpSpec("UNIDIRECTIONAL_SEQUENCE_LSTM", slots, [y], opts, inter, version))
        if rev[d]:
            yb = add(replace(y_t, name=f"y_{d}_time_order"))
            ops.append(OpSpec("REVERSE_V2", [y, axis], [yb], version=3 if k.kind == "integer" else 1))
            y = yb
        outs.append(y)
    if len(outs) == 2:
        y0 = tensors[outs[0]]
        cat = add(replace(y0, shape=(time, batch, sum(tensors[o].shape[2] for o in outs)), name="y"))
        ops.append(OpSpec("CONCATENATION", outs, [cat], {"axis": 2, "fused_activation_function": "NONE"},
                          version=2 if kernels[0].kind == "integer" else 1))
        outs = [cat]
    return write_model(tensors, ops, [x], outs)


# ---- export: fusedrnn layers -> a .tflite model ------------------------------------------------------------
SCHEMES = ("float", "hybrid", "int8x16")
TARGETS = {"float": "litert-float", "hybrid": "litert-hybrid", "int8x16": "litert-int8x16"}
_MERGE_OPS = {"sum": "ADD", "mul": "MUL", "ave": "ADD"}


def _is_layer(obj) -> bool:
    return getattr(obj, "cell", None) in ("lstm", "gru", "rnn") and hasattr(obj, "to")


def _layer_list(layers) -> list:
    if _is_layer(layers):
        return [layers]
    inner = getattr(layers, "layers", None)
    if isinstance(inner, list) and inner and all(_is_layer(x) for x in inner):
        return list(inner)
    raise DTypeError(f"layers: expected a fusedrnn LSTM / RNN layer or a Stack of them (convert PyTorch, Keras or "
                     f"ONNX models with fusedrnn.LSTM.from_torch / from_keras / from_onnx first), got "
                     f"{type(layers).__name__}")


def _calibration_list(calibration) -> list[np.ndarray]:
    return [np.asarray(a) for a in (calibration if isinstance(calibration, (list, tuple)) else [calibration])]


def prepare(layers, scheme: str = "float", calibration=None):
    """The copy of ``layers`` (a layer or a Stack) on the ``litert-<scheme>`` target: what :func:`export` writes,
    so ``prepare(layers, scheme, calibration)(x)`` is the exported model's reference output.

    A layer already on that target is kept (e.g. ``LSTM.from_tflite(...).to(..., calibration="tflite")``). In a
    Stack under ``int8x16``, layer k is calibrated on the float outputs of layers 0..k-1 for the calibration
    inputs, as the TF converter records every tensor of the float model; its input parameters then equal the
    previous layer's output parameters (one tensor in the graph)."""
    if scheme not in SCHEMES:
        raise AttributeValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
    target = TARGETS[scheme]
    ls = _layer_list(layers)
    cal = calibration
    out = []
    for k, layer in enumerate(ls):
        if layer.cell == "gru":
            raise UnsupportedFeatureError("layers: TFLite has no builtin GRU op (only the custom "
                                          "UNIDIRECTIONAL_SEQUENCE_GRU, which the LiteRT interpreter does not "
                                          "register); export LSTM and RNN layers")
        if layer.target.name == target and layer.prepared is not None:
            out.append(layer)
        else:
            out.append(layer.to(target, cal if (k == 0 or scheme == "int8x16") else None))
        if scheme == "int8x16" and k + 1 < len(ls) and not isinstance(cal, str):
            if cal is None:
                raise UnsupportedFeatureError("calibration: litert-int8x16 needs calibration input sequences")
            ref = layer if layer.prepared is None else None
            if ref is None:
                raise UnsupportedFeatureError(f"layers[{k}]: a stack layer already on {layer.target.name!r} has no "
                                              f"float outputs to calibrate the next layer with; pass float layers")
            ref = ref.to("fp64")
            cal = [np.asarray(ref(c)[0], np.float32) for c in _calibration_list(cal)]
    if len(out) == 1 and _is_layer(layers):
        return out[0]
    stack = copy.copy(layers)
    stack.layers = out
    return stack


class _Graph:
    """Tensors and operators of the model being written."""

    def __init__(self):
        self.tensors: list[TensorInfo] = []
        self.ops: list[OpSpec] = []
        self._names: dict[str, int] = {}

    def add(self, t: TensorInfo) -> int:
        n = self._names.get(t.name, 0)
        self._names[t.name] = n + 1
        if n:
            t = replace(t, name=f"{t.name}_{n}")
        self.tensors.append(t)
        return len(self.tensors) - 1

    def act(self, like: TensorInfo | None, name: str, shape) -> int:
        """A new activation tensor: FLOAT32, or ``like``'s type and quantization."""
        if like is None or like.type_name == "FLOAT32":
            return self.add(const(name, None, type_name="FLOAT32", shape=tuple(shape)))
        return self.add(replace(like, name=name, shape=tuple(shape), data=None, is_variable=False, index=-1))

    def op(self, name: str, ins, outs, options=None, inter=(), version: int = 1) -> None:
        self.ops.append(OpSpec(name, list(ins), list(outs), dict(options or {}), list(inter), version))

    def quantized(self, i: int) -> bool:
        return self.tensors[i].type_name == "INT8"


class _Writer:
    def __init__(self, g: _Graph, batch: int, time: int, batch_first: bool):
        self.g, self.B, self.T, self.bf = g, batch, time, batch_first
        self.time_axis = 1 if batch_first else 0
        self._axes: dict[int, int] = {}
        self._perm = None

    def seq(self, n: int) -> tuple:
        return (self.B, self.T, n) if self.bf else (self.T, self.B, n)

    # -- plumbing -------------------------------------------------------------------------------------------
    def reverse(self, i: int, name: str) -> int:
        g = self.g
        ax = 1 if self.bf else 0
        if ax not in self._axes:
            self._axes[ax] = g.add(const(f"time_axis_{ax}", np.array([ax], np.int32)))
        o = g.act(g.tensors[i], name, g.tensors[i].shape)
        g.op("REVERSE_V2", [i, self._axes[ax]], [o], version=3 if g.quantized(i) else 1)
        return o

    def feed(self, i: int, want: TensorInfo, name: str) -> int:
        """Tensor i as the input ``want`` expects: QUANTIZE float -> int8, or requantize int8 with other
        parameters (the TFLite QUANTIZE op); unchanged when it already matches."""
        g = self.g
        have = g.tensors[i]
        if want.type_name != "INT8":
            return i
        same = have.type_name == "INT8" and float(have.scale[0]) == float(want.scale[0]) and \
            int(have.zero_point[0]) == int(want.zero_point[0])
        if same:
            return i
        o = g.act(want, name, have.shape)
        g.op("QUANTIZE", [i], [o])
        return o

    def dequantize(self, i: int, name: str) -> int:
        g = self.g
        if not g.quantized(i):
            return i
        o = g.act(None, name, g.tensors[i].shape)
        g.op("DEQUANTIZE", [i], [o], version=2)
        return o

    def merge(self, outs: list[int], merge: str, name: str) -> int:
        """Join a bidirectional layer's two outputs as ``layer.merge`` does (concat / stack keep int8 values)."""
        g = self.g
        a, b = outs
        ta = g.tensors[a]
        if merge == "concat":
            o = g.act(ta, name, ta.shape[:-1] + (ta.shape[-1] + g.tensors[b].shape[-1],))
            g.op("CONCATENATION", outs, [o], {"axis": len(ta.shape) - 1, "fused_activation_function": "NONE"},
                 version=2 if g.quantized(a) else 1)
            return o
        if merge == "stack":  # ONNX's direction axis: [T, D, B, H], batch-first [B, T, D, H]
            ax = 2 if self.bf else 1
            o = g.act(ta, name, ta.shape[:ax] + (2,) + ta.shape[ax:])
            g.op("PACK", outs, [o], {"values_count": 2, "axis": ax}, version=2 if g.quantized(a) else 1)
            return o
        a, b = self.dequantize(a, f"{name}_fw_float"), self.dequantize(b, f"{name}_bw_float")
        o = g.act(None, name if merge != "ave" else f"{name}_sum", ta.shape)
        g.op(_MERGE_OPS[merge], [a, b], [o], {"fused_activation_function": "NONE"})
        if merge == "ave":
            half = g.add(const(f"{name}_half", np.array(0.5, np.float32)))
            o2 = g.act(None, name, ta.shape)
            g.op("MUL", [o, half], [o2], {"fused_activation_function": "NONE"})
            o = o2
        return o

    def last_step(self, i: int, name: str) -> int:
        g = self.g
        t = g.tensors[i]
        r, ax = len(t.shape), self.time_axis
        begin = np.zeros(r, np.int32)
        begin[ax] = -1
        bi = g.add(const(f"{name}_begin", begin))
        ei = g.add(const(f"{name}_end", np.zeros(r, np.int32)))
        si = g.add(const(f"{name}_strides", np.ones(r, np.int32)))
        full = (1 << r) - 1
        o = g.act(t, name, t.shape[:ax] + t.shape[ax + 1:])
        g.op("STRIDED_SLICE", [i, bi, ei, si], [o], {"begin_mask": full & ~(1 << ax), "end_mask": full,
                                                      "shrink_axis_mask": 1 << ax},
             version=2 if g.quantized(i) else 1)
        return o

    # -- recurrent layers -----------------------------------------------------------------------------------
    def layer(self, em, x: int, k: int, bidirectional_op: bool) -> int:
        if em.cell == "lstm":
            kernels = em.prepared.kernels
            tensors = [kk.t for kk in kernels]
            if bidirectional_op and em.num_directions == 2:
                return self.bidirectional_lstm(em, kernels, x, k)
            src = self.feed(x, tensors[0][0], f"layer{k}_input_quantized")
            outs = [self.lstm_direction(em, kernels[d], src, f"layer{k}_{'fw' if d == 0 else 'bw'}", d)
                    for d in range(em.num_directions)]
        else:
            dirs = em.prepared.tensors  # (W, R, b, fused activation) per direction
            if bidirectional_op and em.num_directions == 2:
                return self.bidirectional_rnn(em, dirs, x, k)
            outs = [self.rnn_direction(em, dirs[d], x, f"layer{k}_{'fw' if d == 0 else 'bw'}", d)
                    for d in range(em.num_directions)]
        if len(outs) == 1:
            return outs[0]
        return self.merge(outs, em.merge, f"layer{k}_y")

    def _reversed(self, em, d: int) -> bool:
        return em.direction == "reverse" or d == 1

    def _back_in_time(self, em, d: int) -> bool:
        return d == 1 or em.output_order == "time"

    def transpose(self, i: int, name: str) -> int:
        """[B, T, n] <-> [T, B, n]."""
        g = self.g
        if self._perm is None:
            self._perm = g.add(const("perm_swap_batch_time", np.array([1, 0, 2], np.int32)))
        sh = g.tensors[i].shape
        o = g.act(g.tensors[i], name, (sh[1], sh[0]) + sh[2:])
        g.op("TRANSPOSE", [i, self._perm], [o], version=2 if g.quantized(i) else 1)
        return o

    def lstm_direction(self, em, kern, x: int, prefix: str, d: int) -> int:
        g, t, o = self.g, kern.t, kern.opts
        # The 8x8_16 kernel's peephole product strides the cell state by n_output (litert.md section 8): with
        # n_output != n_cell its result depends on how many batch rows one call holds, so a batch-first layer is
        # run time-major between TRANSPOSE ops, as the target runs it.
        swap = self.bf and self.B > 1 and kern.kind == "integer" and t.peephole and kern.n_output != kern.n_cell
        if swap:
            x = self.transpose(x, f"{prefix}_x_time_major")
        bf, self.bf = self.bf, self.bf and not swap
        try:
            rev = self._reversed(em, d)
            src = self.reverse(x, f"{prefix}_x_reversed") if rev else x
            slots = [src]
            for j in range(1, 24):
                s = t[j]
                if j in (18, 19):
                    n = kern.n_output if j == 18 else kern.n_cell
                    nm = "output_state" if j == 18 else "cell_state"
                    slots.append(g.add(replace(s, shape=(self.B, n), data=None, is_variable=True,
                                               name=f"{prefix}_{nm}")))
                else:
                    slots.append(-1 if s is None else g.add(replace(s, name=f"{prefix}_{s.name}")))
            inter = [-1 if s is None else g.add(replace(s, name=f"{prefix}_{s.name}")) for s in t.intermediates]
            y = g.act(t[OUTPUT_STATE], f"{prefix}_y", self.seq(kern.n_output))
            opts = {"fused_activation_function": _fused(o.fused_activation_function), "cell_clip": o.cell_clip,
                    "proj_clip": o.proj_clip, "time_major": not self.bf,
                    "asymmetric_quantize_inputs": o.asymmetric_quantize_inputs,
                    "diagonal_recurrent_tensors": o.diagonal_recurrent_tensors}
            g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", slots, [y], opts, inter, _lstm_version(kern))
            if rev and self._back_in_time(em, d):
                y = self.reverse(y, f"{prefix}_y_time_order")
        finally:
            self.bf = bf
        return self.transpose(y, f"{prefix}_y_batch_major") if swap else y

    def bidirectional_lstm(self, em, kernels, x: int, k: int) -> int:
        g = self.g
        fw, bw = (kk.t for kk in kernels)
        if kernels[0].kind == "integer":
            raise UnsupportedFeatureError("bidirectional_op: BIDIRECTIONAL_SEQUENCE_LSTM has no integer kernel; "
                                          "export int8x16 layers as two UNIDIRECTIONAL_SEQUENCE_LSTM ops")
        if fw.layer_norm or kernels[0].opts.diagonal_recurrent_tensors:
            raise UnsupportedFeatureError("bidirectional_op: BIDIRECTIONAL_SEQUENCE_LSTM takes no layer norm and no "
                                          "diagonal recurrence; export two UNIDIRECTIONAL_SEQUENCE_LSTM ops")
        ins = [-1] * 48
        ins[INPUT] = x
        for j in range(1, 18):
            for base, t, nm in ((0, fw, "fw"), (17, bw, "bw")):
                if t[j] is not None:
                    ins[base + j] = g.add(replace(t[j], name=f"layer{k}_{nm}_{t[j].name}"))
        for base, kk, nm in ((35, kernels[0], "fw"), (37, kernels[1], "bw")):
            for j, (n, s) in enumerate(((kk.n_output, "output_state"), (kk.n_cell, "cell_state"))):
                ins[base + j] = g.add(const(f"layer{k}_{nm}_{s}", None, type_name="FLOAT32", shape=(self.B, n),
                                            is_variable=True))
        o = kernels[0].opts
        merged = em.merge == "concat"
        if merged:
            outs = [g.act(None, f"layer{k}_y", self.seq(kernels[0].n_output + kernels[1].n_output))]
        else:
            outs = [g.act(None, f"layer{k}_{nm}_y", self.seq(kk.n_output))
                    for nm, kk in zip(("fw", "bw"), kernels, strict=True)]
        opts = {"fused_activation_function": _fused(o.fused_activation_function), "cell_clip": o.cell_clip,
                "proj_clip": o.proj_clip, "merge_outputs": merged, "time_major": not self.bf,
                "asymmetric_quantize_inputs": o.asymmetric_quantize_inputs}
        g.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, opts, version=_lstm_version(kernels[0]))
        return outs[0] if merged else self.merge(outs, em.merge, f"layer{k}_y")

    def rnn_direction(self, em, tensors, x: int, prefix: str, d: int) -> int:
        g = self.g
        W, R, b, act = tensors
        rev = self._reversed(em, d)
        src = self.reverse(x, f"{prefix}_x_reversed") if rev else x
        H = W.shape[0]
        h = g.add(const(f"{prefix}_hidden_state", None, type_name="FLOAT32", shape=(self.B, H), is_variable=True))
        ins = [src, g.add(replace(W, name=f"{prefix}_weights")), g.add(replace(R, name=f"{prefix}_recurrent_weights")),
               g.add(replace(b, name=f"{prefix}_bias")), h]
        y = g.act(None, f"{prefix}_y", self.seq(H))
        hybrid = W.type_name == "INT8"
        g.op("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [y], {"time_major": not self.bf,
                                                       "fused_activation_function": _fused(act),
                                                       "asymmetric_quantize_inputs": hybrid},
             version=3 if hybrid else 1)
        if rev and self._back_in_time(em, d):
            y = self.reverse(y, f"{prefix}_y_time_order")
        return y

    def bidirectional_rnn(self, em, dirs, x: int, k: int) -> int:
        g = self.g
        if dirs[0][3] != dirs[1][3]:
            raise UnsupportedFeatureError(f"bidirectional_op: BIDIRECTIONAL_SEQUENCE_RNN has one activation, the "
                                          f"directions use {dirs[0][3]} and {dirs[1][3]}")
        ins = [x]
        for nm, (W, R, b, _) in zip(("fw", "bw"), dirs, strict=True):
            ins += [g.add(replace(W, name=f"layer{k}_{nm}_weights")),
                    g.add(replace(R, name=f"layer{k}_{nm}_recurrent_weights")),
                    g.add(replace(b, name=f"layer{k}_{nm}_bias")),
                    g.add(const(f"layer{k}_{nm}_hidden_state", None, type_name="FLOAT32",
                                shape=(self.B, W.shape[0]), is_variable=True))]
        ins += [-1, -1, -1]
        H = dirs[0][0].shape[0]
        merged = em.merge == "concat"
        outs = [g.act(None, f"layer{k}_y", self.seq(2 * H))] if merged else \
            [g.act(None, f"layer{k}_{nm}_y", self.seq(H)) for nm in ("fw", "bw")]
        hybrid = dirs[0][0].type_name == "INT8"
        g.op("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs, {"time_major": not self.bf, "merge_outputs": merged,
                                                       "fused_activation_function": _fused(dirs[0][3]),
                                                       "asymmetric_quantize_inputs": hybrid},
             version=3 if hybrid else 1)
        return outs[0] if merged else self.merge(outs, em.merge, f"layer{k}_y")


def _fused(name: str) -> str:
    """A fused activation the flatbuffer schema can name (its enum has no SIGMOID, which the kernels know)."""
    if name not in enum_names("ActivationFunctionType").values():
        raise UnsupportedFeatureError(f"activations: the .tflite schema has no fused activation {name} (the "
                                      f"kernels' SIGMOID cannot be written); use Tanh or Relu")
    return name


def _lstm_version(kern) -> int:
    if kern.opts.diagonal_recurrent_tensors:
        return 4
    if kern.kind == "hybrid":
        return 3 if kern.opts.asymmetric_quantize_inputs else 2
    return 1


def _positive(v, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise AttributeValueError(f"{name}: expected a positive int or None, got {v!r}")
    return int(v)


def export(layers, path=None, scheme: str = "float", calibration=None, *, batch: int | None = None,
           time: int | None = None, bidirectional_op: bool = False, signature_name: str = "serving_default",
           return_sequences: bool = True, quantized_io: bool = True) -> bytes:
    """Write ``layers`` (a fusedrnn LSTM / RNN layer or a Stack) as a .tflite model of fused ops; returns the
    bytes (also written to ``path`` unless it is None).

    ``scheme``: ``"float"``, ``"hybrid"`` (int8 weights, float activations) or ``"int8x16"`` (the 8x8_16 LSTM,
    ``calibration`` = input sequences in the layer's layout, quantized exactly as
    ``layer.to("litert-int8x16", calibration=...)``; see :func:`prepare`). Each LSTM direction is one
    UNIDIRECTIONAL_SEQUENCE_LSTM (RNN: UNIDIRECTIONAL_SEQUENCE_RNN) with its variable state tensors, reverse
    directions between REVERSE_V2 ops (no flip back for ``output_order="processing"``, Keras ``go_backwards``),
    directions joined by the layer's ``merge`` (CONCATENATION, PACK, ADD, MUL); ``bidirectional_op=True`` writes
    one BIDIRECTIONAL_SEQUENCE_LSTM / _RNN instead (float and hybrid, no layer norm).

    Input ``x`` is [T, B, I], or [B, T, I] for a batch-first layer (the op's ``time_major`` follows); output
    ``y`` is the layer's output (one direction without ONNX's direction axis), or its last step when
    ``return_sequences=False``; the signature ``signature_name`` names them ``x`` and ``y``. The batch is fixed
    (``batch``, else the calibration's, else 1): the interpreter cannot resize the state variables through a
    signature. The time axis is dynamic (shape_signature -1) unless ``time`` is given. ``int8x16`` models take
    and return int8 (``quantized_io=True``, the parameters are in the tensor details) or float through
    QUANTIZE / DEQUANTIZE ops; sum / mul / ave merges of int8 directions are computed in float after
    DEQUANTIZE. The state persists across ``invoke()`` calls (``reset_all_variables()`` zeroes it)."""
    batch, time = _positive(batch, "batch"), _positive(time, "time")
    if not isinstance(signature_name, str) or not signature_name:
        raise AttributeValueError(f"signature_name: expected a non-empty string, got {signature_name!r}")
    em = prepare(layers, scheme, calibration)
    ls = _layer_list(em)
    bf = ls[0].batch_first
    for k, layer in enumerate(ls[:-1]):
        if layer.num_directions == 2 and layer.merge == "stack":
            raise UnsupportedFeatureError(f"layers[{k}]: merge='stack' output cannot feed another layer")
    T0 = 1
    if calibration is not None and not isinstance(calibration, str):
        c0 = calibration_sequences(calibration, ls[0].input_size, batch_first=bf)[0]  # [T, B, I]
        batch = batch or int(c0.shape[1])
        T0 = int(c0.shape[0])
    B, T = batch or 1, time or T0
    g = _Graph()
    w = _Writer(g, B, T, bf)
    first = ls[0]
    x_like = first.prepared.kernels[0].t[INPUT] if first.cell == "lstm" else None
    if x_like is not None and x_like.type_name == "INT8" and quantized_io:
        x = g.act(x_like, "x", w.seq(first.input_size))
    else:
        x = g.act(None, "x", w.seq(first.input_size))
    y = x
    for k, layer in enumerate(ls):
        y = w.layer(layer, y, k, bool(bidirectional_op))
    if not return_sequences:
        y = w.last_step(y, "y_last")
    if not quantized_io:
        y = w.dequantize(y, "y_float")
    g.tensors[y] = replace(g.tensors[y], name="y")
    sig = list(g.tensors[x].shape)
    if time is None:
        sig[w.time_axis] = -1
    content = write_model(g.tensors, g.ops, [x], [y], description=f"fusedrnn export ({scheme})",
                          shape_signatures={x: sig}, signatures=[SignatureSpec(signature_name, {"x": x}, {"y": y})])
    if path is not None:
        with open(os.fspath(path), "wb") as f:
            f.write(content)
    return content
