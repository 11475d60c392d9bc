"""Write a layer prepared for a ``litert-*`` target as a .tflite model, so the LiteRT interpreter can run the
very tensors fusedrnn runs (time-major input [T, B, I]). A forward or reverse LSTM is one
UNIDIRECTIONAL_SEQUENCE_LSTM (reverse: REVERSE_V2 around it, as the converter does for ``go_backwards`` plus a
flip back); a bidirectional one is the converter's Keras ``Bidirectional`` graph: REVERSE_V2 → LSTM → REVERSE_V2
for the backward direction and CONCATENATION on the last axis."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import UnsupportedFeatureError
from .slots import const
from .writer import OpSpec, write_model


def to_tflite(layer, *, batch: int, time: int) -> bytes:
    """The .tflite model of an LSTM ``layer.to("litert-...")`` copy (its prepared tensors), input [time, batch, I]
    and output [time, batch, D*Hp] (directions concatenated)."""
    run = getattr(layer, "_emulation", None)
    kernels = getattr(run, "kernels", None)
    if layer.cell != "lstm" or kernels is None:
        raise UnsupportedFeatureError("layer: expected an LSTM prepared for a litert-* target (layer.to(...))")
    tensors, ops = [], []

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    k0 = kernels[0]
    x_t = replace(k0.t[0], shape=(time, batch, k0.n_input), name="x")
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
        y_t = replace(t[18], shape=(time, batch, k.n_output), is_variable=False, data=None, name=f"y_{d}")
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
