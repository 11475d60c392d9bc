"""``from_keras``: Keras LSTMs (``LSTM``, ``Bidirectional(LSTM)``, stacks of them, with ``Dense`` heads) as the graph
the TF converter makes of the tf_keras model (litert.md section 9.1), written with fusedrnn's flatbuffer writer
and loaded to run on fusedrnn.

Each LSTM gets the converter's fused op, tensors and options: ``kernel [I, 4U]`` transposed and split into i, f,
c, o ([U, I] each, inputs 1-4), ``recurrent_kernel`` likewise (5-8), the bias split into 12-15, variable state
tensors 18/19, ``fused_activation_function=TANH``, ``cell_clip=10``, ``proj_clip=0``, ``time_major=False`` (Keras
is batch-major). ``go_backwards`` is a REVERSE_V2 on the input time axis with the output left in processing order,
``return_sequences=False`` a STRIDED_SLICE of the last step, ``Bidirectional`` two unidirectional ops (the
backward one between two REVERSE_V2) joined as ``merge_mode`` says: CONCATENATION (``"concat"``), ADD (``"sum"``),
MUL (``"mul"``), ADD then MUL by 0.5 (``"ave"``). A ``Dense`` layer is a FULLY_CONNECTED (``keep_num_dims`` on a
sequence; ``relu`` fused), its ``softmax`` / ``tanh`` activation a SOFTMAX / TANH op.

``mode``: ``"float"`` (default conversion), ``"hybrid"`` (``Optimize.DEFAULT``: int8 per-tensor LSTM weights,
``asymmetric_quantize_inputs=True``, op version 3; an LSTM with a weight tensor under 1024 elements stays float, as
observed with the converter; Dense layers stay float) or ``"int8"`` (``representative_dataset`` = ``calibration``,
full-integer: int8 input and output, 8x8_16 LSTMs, every activation tensor quantized from its float range over the
calibration inputs: both directions of a concatenation share their parameters, a tensor feeding the next layer is
that layer's input tensor, Dense weights int8 per output channel with int32 biases, SOFTMAX output 1/256 - 128,
TANH output 1/128). Keras itself computes the float activations the int8 ranges come from.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import AttributeValueError, ConversionError, UnsupportedFeatureError
from ..numerics.affine import choose_qparams
from ..targets.litert.graph import Model
from ..targets.litert.layer_map import (
    float_direction,
    float_tensors,
    integer_tensors,
)
from ..targets.litert.reader import read_model
from ..targets.litert.slots import OUTPUT_STATE, const
from ..targets.litert.writer import OpSpec, write_model
from ..targets.tflite_quant import calibrate_direction
from .keras import from_keras as read_keras

MODES = ("float", "hybrid", "int8")
DENSE_ACTIVATIONS = ("linear", "relu", "softmax", "tanh")
_MERGE_OPS = {"sum": "ADD", "mul": "MUL", "ave": "ADD"}


def _keras_layer_facts(layer) -> dict:
    inner = getattr(layer, "forward_layer", None) or layer
    return {"return_sequences": bool(getattr(inner, "return_sequences", True)),
            "go_backwards": bool(getattr(inner, "go_backwards", False)),
            "merge_mode": getattr(layer, "merge_mode", None),
            "bidirectional": hasattr(layer, "forward_layer")}


def _numpy(keras, v) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(v), np.float32)


def _layers(obj, keras) -> list:
    """The layers of a Keras model (input layers dropped), or ``[obj]`` for one layer."""
    if isinstance(obj, keras.Model):  # Sequential and functional chains
        out = [layer for layer in obj.layers if not isinstance(layer, keras.layers.InputLayer)]
        if not out:
            raise ConversionError("layer: the Keras model has no layers")
        return out
    return [obj]


def _range(vals: list[np.ndarray]) -> tuple[float, float]:
    return min(float(v.min()) for v in vals), max(float(v.max()) for v in vals)


class _Graph:
    """The tensors and operators being written; ``mode`` decides the activations' types."""

    def __init__(self, mode: str, batch: int, time: int):
        self.mode, self.B, self.T = mode, batch, time
        self.int8 = mode == "int8"
        self.tensors: list = []
        self.ops: list = []
        self.ranges: dict[int, tuple[float, float]] = {}  # int8 tensor -> the float range of its parameters
        self._axis: int | None = None

    def add(self, t) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def act(self, name: str, shape, rng: tuple[float, float] | None = None, q: tuple[float, int] | None = None
            ) -> int:
        """A new activation tensor: float32, or int8 with parameters ``q`` or those of the float range ``rng``."""
        if not self.int8:
            return self.add(const(name, None, type_name="FLOAT32", shape=tuple(shape)))
        if q is None:
            s, zp = choose_qparams(rng[0], rng[1], np.int8)
            q = (float(np.float32(s)), int(zp))
        i = self.add(const(name, None, q[0], q[1], type_name="INT8", shape=tuple(shape)))
        if rng is not None:
            self.ranges[i] = (min(rng[0], 0.0), max(rng[1], 0.0))
        return i

    def op(self, name: str, ins, outs, options=None, inter=(), version: int | None = None) -> None:
        if version is None:
            version = 2 if self.int8 else 1
        self.ops.append(OpSpec(name, list(ins), list(outs), dict(options or {}), list(inter), version))

    def time_axis(self) -> int:
        if self._axis is None:
            self._axis = self.add(const("time_axis", np.array([1], np.int32)))
        return self._axis


def _check_lstm(fl) -> None:
    if fl.cell != "lstm":
        raise ConversionError(f"layer: the TF converter fuses only LSTMs; a Keras {fl.cell.upper()} becomes a WHILE "
                              f"loop (litert.md section 9.2)")
    for d in range(fl.num_directions):
        names = tuple(a.name for a in fl.activations[d])
        if names != ("Sigmoid", "Tanh", "Tanh") or fl.b_x is None:
            raise ConversionError("layer: the converter fuses only LSTMs with activation tanh, recurrent_activation "
                                  f"sigmoid and use_bias=True (tf_keras' cuDNN path); got {names}, use_bias="
                                  f"{fl.b_x is not None}")


def _recurrent(g: _Graph, keras, layer, k: int, x: int, vals) -> tuple[int, list | None]:
    """Write one (Bidirectional) LSTM reading tensor x; returns its output tensor and float values."""
    facts = _keras_layer_facts(layer)
    fl = read_keras(layer)
    _check_lstm(fl)
    merge = facts["merge_mode"]
    if facts["bidirectional"] and merge not in ("concat", "sum", "mul", "ave"):
        raise UnsupportedFeatureError(f"merge_mode: {merge!r}; the converter's graph has one output tensor per "
                                      f"layer ('concat', 'sum', 'mul' or 'ave')")
    if facts["bidirectional"] and not facts["return_sequences"]:
        raise UnsupportedFeatureError("return_sequences: a Bidirectional graph is written for full sequences only")
    if len(g.tensors[x].shape) != 3:
        raise UnsupportedFeatureError(f"layers[{k}]: an LSTM reads sequences [B, T, I], the layer before gives "
                                      f"{g.tensors[x].shape}")
    D, B, T = fl.num_directions, g.B, g.T
    rev = [facts["go_backwards"] or d == 1 for d in range(D)]
    fds = [float_direction(fl, d) for d in range(D)]
    tx = g.tensors[x]
    dir_vals = None
    if g.int8:
        xs = [np.asarray(v, np.float64).transpose(1, 0, 2) for v in vals]
        spec = replace(fl.spec, cell_clip=10.0)  # the converter's calibration model clips the cell at 10
        stats = [calibrate_direction(spec, d, xs, reverse=rev[d]) for d in range(D)]
        if x not in g.ranges:
            raise UnsupportedFeatureError(f"layers[{k}]: an LSTM reading {tx.name!r} (an output with fixed "
                                          f"parameters) is not written")
        x_lo, x_hi = g.ranges[x]
        for s in stats:  # the LSTM reads tensor x: its parameters come from x's range
            s.x_min, s.x_max = x_lo, x_hi
        if D == 2 and merge == "ave":  # the sum's range, before the halving
            fw_layer, bw_layer = layer.forward_layer, layer.backward_layer
            dir_vals = [[_numpy(keras, fw_layer(v)) for v in vals], [_numpy(keras, bw_layer(v)) for v in vals]]
        if D == 1 or merge == "concat":  # one tensor: both directions share the output parameters
            lo, hi = min(s.h_min for s in stats), max(s.h_max for s in stats)
            for s in stats:
                s.h_min, s.h_max = lo, hi
        dirs = [integer_tensors(fds[d], stats[d]) for d in range(D)]
    else:
        dirs = []
        for d in range(D):
            small = min(w.size for w in fds[d].W + fds[d].R) < 1024
            dirs.append(float_tensors(fds[d], hybrid=g.mode == "hybrid" and not small))
    Hp = fl.output_size
    outs = []
    for d, t in enumerate(dirs):
        src = x
        if rev[d]:
            src = g.add(replace(tx, name=f"{tx.name}_reversed_{d}"))
            g.op("REVERSE_V2", [x, g.time_axis()], [src], version=3 if g.int8 else 1)
        slots = [src]
        for j in range(1, 24):
            s = t[j]
            if j in (18, 19):
                shape = (B, Hp if j == 18 else fl.hidden_size)
                slots.append(g.add(replace(s, shape=shape, name=f"layer{k}_state{j}_{d}" if k else f"state{j}_{d}")))
            else:
                slots.append(-1 if s is None else g.add(replace(s, name=f"{s.name}_{d}" if not k else
                                                                f"layer{k}_{s.name}_{d}")))
        inter = [g.add(replace(s, name=f"{s.name}_{d}" if not k else f"layer{k}_{s.name}_{d}"))
                 for s in t.intermediates]
        name = f"lstm_{d}" if not k else f"layer{k}_lstm_{d}"
        y_t = replace(t[OUTPUT_STATE], shape=(B, T, Hp), is_variable=False, name=name) if g.int8 else \
            const(name, None, type_name="FLOAT32", shape=(B, T, Hp))
        y = g.add(y_t)
        if g.int8:
            g.ranges[y] = (stats[d].h_min, stats[d].h_max)
        hybrid = t.kind() == "hybrid"
        opts = {"fused_activation_function": "TANH", "cell_clip": 10.0, "proj_clip": 0.0, "time_major": False,
                "asymmetric_quantize_inputs": hybrid}
        g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", slots, [y], opts, inter, 3 if hybrid else 1)
        if facts["bidirectional"] and rev[d]:
            yb = g.add(replace(y_t, name=f"{name}_time_order"))
            g.op("REVERSE_V2", [y, g.time_axis()], [yb], version=3 if g.int8 else 1)
            if g.int8:
                g.ranges[yb] = g.ranges[y]
            y = yb
        outs.append(y)
    new_vals = [_numpy(keras, layer(v)) for v in vals] if g.int8 else None
    prefix = "" if not k else f"layer{k}_"
    y = outs[0]
    if len(outs) == 2:
        y0 = g.tensors[outs[0]]
        if merge == "concat":
            y = g.add(replace(y0, shape=(B, T, 2 * Hp), name=f"{prefix}y"))
            if g.int8:
                g.ranges[y] = g.ranges[outs[0]]
            g.op("CONCATENATION", outs, [y], {"axis": 2, "fused_activation_function": "NONE"})
        else:
            summed = None
            if g.int8 and merge == "ave":
                summed = _range([a + b[:, ::-1] for a, b in zip(*dir_vals, strict=True)])
            first = g.act(f"{prefix}y" if merge != "ave" else f"{prefix}y_sum", (B, T, Hp),
                          summed if merge == "ave" else (_range(new_vals) if g.int8 else None))
            g.op(_MERGE_OPS[merge], outs, [first], {"fused_activation_function": "NONE"})
            y = first
            if merge == "ave":
                half = const(f"{prefix}half", np.array(127, np.int8), 0.5 / 255, -128) if g.int8 else \
                    const(f"{prefix}half", np.array(0.5, np.float32))
                y = g.act(f"{prefix}y", (B, T, Hp), _range(new_vals) if g.int8 else None)
                g.op("MUL", [first, g.add(half)], [y], {"fused_activation_function": "NONE"})
    if not facts["return_sequences"]:
        begin = g.add(const(f"{prefix}begin", np.array([0, -1, 0], np.int32)))
        end = g.add(const(f"{prefix}end", np.array([0, 0, 0], np.int32)))
        strides = g.add(const(f"{prefix}strides", np.array([1, 1, 1], np.int32)))
        last_t = g.add(replace(g.tensors[y], shape=(B, Hp), name=f"{prefix}y_last"))
        if y in g.ranges:
            g.ranges[last_t] = g.ranges[y]
        g.op("STRIDED_SLICE", [y, begin, end, strides], [last_t], {"begin_mask": 5, "end_mask": 7,
                                                                   "shrink_axis_mask": 2})
        y = last_t
    return y, new_vals


def _dense(g: _Graph, keras, layer, k: int, x: int, vals) -> tuple[int, list | None]:
    """A Keras Dense layer as FULLY_CONNECTED (+ SOFTMAX / TANH)."""
    act = getattr(getattr(layer, "activation", None), "__name__", "linear")
    if act not in DENSE_ACTIVATIONS:
        raise UnsupportedFeatureError(f"layers[{k}]: Dense activation {act!r}; expected one of {DENSE_ACTIVATIONS}")
    weights = [_numpy(keras, w) for w in layer.weights]
    kernel = weights[0]
    bias = weights[1] if len(weights) > 1 else np.zeros(kernel.shape[1], np.float32)
    W = np.ascontiguousarray(kernel.T)  # [units, depth]
    units = W.shape[0]
    tx = g.tensors[x]
    shape = tx.shape[:-1] + (units,)
    keep = len(tx.shape) > 2
    fused = "RELU" if act == "relu" else "NONE"
    prefix = f"layer{k}_"
    pre_vals = None
    if g.int8:
        pre_vals = [v @ kernel + bias for v in vals]
        if act == "relu":
            pre_vals = [np.maximum(v, 0) for v in pre_vals]
        sx = float(tx.scale[0])
        ws = (np.maximum(np.abs(W).max(axis=1), 1e-12) / 127).astype(np.float32)
        wq = np.clip(np.rint(W / ws[:, None]), -127, 127).astype(np.int8)
        bs = (np.float32(sx) * ws).astype(np.float32)
        bq = np.rint(bias.astype(np.float64) / bs.astype(np.float64)).astype(np.int32)
        w_t = replace(const(f"{prefix}kernel", wq, ws, np.zeros(units, np.int64)), quantized_dimension=0)
        b_t = replace(const(f"{prefix}bias", bq, bs, np.zeros(units, np.int64)), quantized_dimension=0)
    else:
        w_t, b_t = const(f"{prefix}kernel", W.astype(np.float32)), const(f"{prefix}bias", bias.astype(np.float32))
    fc = g.act(f"{prefix}dense", shape, _range(pre_vals) if g.int8 else None)
    g.op("FULLY_CONNECTED", [x, g.add(w_t), g.add(b_t)], [fc], {"fused_activation_function": fused,
                                                                  "keep_num_dims": keep},
         version=5 if g.int8 else 1)
    y = fc
    if act in ("softmax", "tanh"):
        q = (1 / 256, -128) if act == "softmax" else (1 / 128, 0)
        y = g.act(f"{prefix}{act}", shape, q=q)
        g.op("SOFTMAX" if act == "softmax" else "TANH", [fc], [y], {"beta": 1.0} if act == "softmax" else {})
    new_vals = [_numpy(keras, layer(v)) for v in vals] if g.int8 else None
    return y, new_vals


def from_keras(layer, *, mode: str = "float", calibration=None, batch_size: int = 1,
               time_steps: int | None = None) -> Model:
    """The converter's TFLite graph of a Keras ``LSTM`` / ``Bidirectional(LSTM)``, or of a Keras model made of
    such layers and ``Dense`` layers, on fusedrnn (a :class:`~fusedrnn.targets.litert.graph.Model`;
    ``model.content`` holds the .tflite bytes).

    ``batch_size`` is the model's fixed batch (the converter needs one); ``time_steps`` the fixed sequence length
    (default: that of ``calibration``, else 1 — ``Model`` runs any length, the interpreter needs
    ``resize_tensor_input`` for others). ``calibration`` (int8 mode): input sequences [B, T, I] or a list."""
    if mode not in MODES:
        raise AttributeValueError(f"mode: expected one of {MODES}, got {mode!r}")
    import keras

    layers = _layers(layer, keras)
    vals = None
    if mode == "int8":
        if calibration is None:
            raise AttributeValueError("calibration: int8 mode needs representative input sequences [B, T, I]")
        items = calibration if isinstance(calibration, (list, tuple)) else [calibration]
        vals = [np.asarray(a, np.float32) for a in items]
        if time_steps is None:
            time_steps = vals[0].shape[1]
        if len({v.shape[1:] for v in vals}) == 1:  # one batch: rows are independent sequences, one Keras call
            vals = [np.concatenate(vals, axis=0)]
    g = _Graph(mode, int(batch_size), int(time_steps or 1))
    first = layers[0]
    if isinstance(first, keras.layers.Dense) or not hasattr(first, "cell") and not hasattr(first, "forward_layer"):
        raise ConversionError(f"layer: expected a Keras LSTM or Bidirectional(LSTM) first, got "
                              f"{type(first).__name__}")
    n_in = read_keras(first).input_size
    x = g.act("x", (g.B, g.T, n_in), _range(vals) if g.int8 else None)
    y = x
    for k, lay in enumerate(layers):
        if isinstance(lay, keras.layers.Dense):
            y, vals = _dense(g, keras, lay, k, y, vals)
        else:
            y, vals = _recurrent(g, keras, lay, k, y, vals)
    content = write_model(g.tensors, g.ops, [x], [y], description="fusedrnn from_keras")
    return Model(read_model(content), content=content)
