"""``from_keras``: a Keras LSTM (or ``Bidirectional(LSTM)``) as the graph the TF converter makes of a tf_keras LSTM
(litert.md section 9.1), written with fusedrnn's flatbuffer writer and loaded to run on fusedrnn.

The fused op gets the converter's tensors and options: ``kernel [I, 4U]`` transposed and split into i, f, c, o
([U, I] each, inputs 1-4), ``recurrent_kernel`` likewise (5-8), the bias split into 12-15, variable state tensors
18/19, ``fused_activation_function=TANH``, ``cell_clip=10``, ``proj_clip=0``, ``time_major=False`` (Keras is
batch-major). ``go_backwards`` is a REVERSE_V2 on the input time axis with the output left in processing order,
``return_sequences=False`` a STRIDED_SLICE of the last step, ``Bidirectional`` two unidirectional ops (the
backward one between two REVERSE_V2) joined by CONCATENATION (``merge_mode="concat"``) or ADD (``"sum"``).

``mode``: ``"float"`` (default conversion), ``"hybrid"`` (``Optimize.DEFAULT``: int8 per-tensor weights,
``asymmetric_quantize_inputs=True``, op version 3; an op with a weight tensor under 1024 elements stays float,
as observed with the converter) or ``"int8"`` (``representative_dataset`` = ``calibration``, int8 input and
output, 8x8_16 LSTM; both directions share the output parameters). Keras itself is imported only to read the
layer (through :mod:`fusedrnn.frontends.keras`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import AttributeValueError, ConversionError, UnsupportedFeatureError
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


def _keras_layer_facts(layer) -> dict:
    inner = getattr(layer, "forward_layer", None) or layer
    return {"return_sequences": bool(getattr(inner, "return_sequences", True)),
            "go_backwards": bool(getattr(inner, "go_backwards", False)),
            "merge_mode": getattr(layer, "merge_mode", None),
            "bidirectional": hasattr(layer, "forward_layer")}


def from_keras(layer, *, mode: str = "float", calibration=None, batch_size: int = 1,
               time_steps: int | None = None) -> Model:
    """The converter's TFLite graph of a Keras ``LSTM`` / ``Bidirectional(LSTM)`` on fusedrnn (a
    :class:`~fusedrnn.targets.litert.graph.Model`; ``model.content`` holds the .tflite bytes).

    ``batch_size`` is the model's fixed batch (the converter needs one); ``time_steps`` the fixed sequence length
    (default: that of ``calibration``, else 1 — ``Model`` runs any length, the interpreter needs
    ``resize_tensor_input`` for others). ``calibration`` (int8 mode): input sequences [B, T, I] or a list."""
    if mode not in MODES:
        raise AttributeValueError(f"mode: expected one of {MODES}, got {mode!r}")
    facts = _keras_layer_facts(layer)
    fl = read_keras(layer)
    if fl.cell != "lstm":
        raise ConversionError(f"layer: the TF converter fuses only LSTMs; a Keras {fl.cell.upper()} becomes a WHILE "
                              f"loop (litert.md section 9.2)")
    for d in range(fl.num_directions):
        names = tuple(a.name for a in fl.activations[d])
        if names != ("Sigmoid", "Tanh", "Tanh") or fl.b_x is None:
            raise ConversionError("layer: the converter fuses only LSTMs with activation tanh, recurrent_activation "
                                  f"sigmoid and use_bias=True (tf_keras' cuDNN path); got {names}, use_bias="
                                  f"{fl.b_x is not None}")
    if facts["bidirectional"] and facts["merge_mode"] not in ("concat", "sum"):
        raise UnsupportedFeatureError(f"merge_mode: {facts['merge_mode']!r}; the converter graph here covers "
                                      f"'concat' and 'sum'")
    if facts["bidirectional"] and not facts["return_sequences"]:
        raise UnsupportedFeatureError("return_sequences: a Bidirectional graph is written for full sequences only")
    xs = None
    if mode == "int8":
        if calibration is None:
            raise AttributeValueError("calibration: int8 mode needs representative input sequences [B, T, I]")
        items = calibration if isinstance(calibration, (list, tuple)) else [calibration]
        xs = [np.asarray(a, np.float64).transpose(1, 0, 2) for a in items]
        if time_steps is None:
            time_steps = xs[0].shape[0]
    T = int(time_steps or 1)
    B = int(batch_size)
    D = fl.num_directions
    rev = [facts["go_backwards"] or d == 1 for d in range(D)]
    fds = [float_direction(fl, d) for d in range(D)]
    kinds = []
    if mode == "int8":
        spec = replace(fl.spec, cell_clip=10.0)  # the converter's calibration model clips the cell at 10
        stats = [calibrate_direction(spec, d, xs, reverse=rev[d]) for d in range(D)]
        lo, hi = min(s.h_min for s in stats), max(s.h_max for s in stats)
        for s in stats:
            s.h_min, s.h_max = lo, hi
        dirs = [integer_tensors(fds[d], stats[d]) for d in range(D)]
    else:
        dirs = []
        for d in range(D):
            small = min(w.size for w in fds[d].W + fds[d].R) < 1024
            dirs.append(float_tensors(fds[d], hybrid=mode == "hybrid" and not small))
    kinds = [t.kind() for t in dirs]
    tensors: list = []

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    I, Hp = fl.input_size, fl.output_size
    int8 = mode == "int8"
    x_t = replace(dirs[0][0], shape=(B, T, I), name="x") if int8 else \
        const("x", None, type_name="FLOAT32", shape=(B, T, I))
    x = add(x_t)
    axis = add(const("time_axis", np.array([1], np.int32)))
    ops, outs = [], []
    for d, t in enumerate(dirs):
        src = x
        if rev[d]:
            src = add(replace(x_t, name=f"x_reversed_{d}"))
            ops.append(OpSpec("REVERSE_V2", [x, axis], [src], version=3 if int8 else 1))
        slots = [src]
        for j in range(1, 24):
            s = t[j]
            if j in (18, 19):
                shape = (B, Hp if j == 18 else fl.hidden_size)
                slots.append(add(replace(s, shape=shape, name=f"state{j}_{d}")))
            else:
                slots.append(-1 if s is None else add(replace(s, name=f"{s.name}_{d}")))
        inter = [add(replace(s, name=f"{s.name}_{d}")) for s in t.intermediates]
        y_t = replace(t[OUTPUT_STATE], shape=(B, T, Hp), is_variable=False, name=f"lstm_{d}") if int8 else \
            const(f"lstm_{d}", None, type_name="FLOAT32", shape=(B, T, Hp))
        y = add(y_t)
        hybrid = kinds[d] == "hybrid"
        opts = {"fused_activation_function": "TANH", "cell_clip": 10.0, "proj_clip": 0.0, "time_major": False,
                "asymmetric_quantize_inputs": hybrid}
        ops.append(OpSpec("UNIDIRECTIONAL_SEQUENCE_LSTM", slots, [y], opts, inter, 3 if hybrid else 1))
        if facts["bidirectional"] and rev[d]:
            yb = add(replace(y_t, name=f"lstm_{d}_time_order"))
            ops.append(OpSpec("REVERSE_V2", [y, axis], [yb], version=3 if int8 else 1))
            y = yb
        outs.append(y)
    if len(outs) == 2:
        y0 = tensors[outs[0]]
        if facts["merge_mode"] == "concat":
            cat = add(replace(y0, shape=(B, T, 2 * Hp), name="y"))
            ops.append(OpSpec("CONCATENATION", outs, [cat], {"axis": 2, "fused_activation_function": "NONE"},
                              version=2 if int8 else 1))
        else:
            if int8:
                raise UnsupportedFeatureError("merge_mode: 'sum' of int8 outputs needs a quantized ADD (not "
                                              "implemented)")
            cat = add(replace(y0, name="y"))
            ops.append(OpSpec("ADD", outs, [cat], {"fused_activation_function": "NONE"}))
        outs = [cat]
    if not facts["return_sequences"]:
        y0 = tensors[outs[0]]
        begin = add(const("begin", np.array([0, -1, 0], np.int32)))
        end = add(const("end", np.array([0, 0, 0], np.int32)))
        strides = add(const("strides", np.array([1, 1, 1], np.int32)))
        last = add(replace(y0, shape=(B, Hp), name="y_last"))
        ops.append(OpSpec("STRIDED_SLICE", [outs[0], begin, end, strides], [last],
                          {"begin_mask": 5, "end_mask": 7, "shrink_axis_mask": 2}, version=2 if int8 else 1))
        outs = [last]
    content = write_model(tensors, ops, [x], outs, description="fusedrnn from_keras")
    model = Model(read_model(content))
    model.content = content
    return model
