"""C headers of recurrent weights for on-target programs: embARC MLI and Arm CMSIS-NN (quantized, with every
quantization parameter) and IBM zDNN (stickified ztensor buffers with their descriptors).

``mli_export(layer, target, calibration)`` prepares ``layer`` (an LSTM / GRU / RNN or a :class:`~fusedrnn.Stack`)
on an ``mli2-*`` / ``mli1-*`` target exactly as ``layer.to(target, calibration)`` does and returns a
:class:`CExport` whose integer tensors are the prepared target's own (the values the emulation computes with):

* MLI 2.0, per layer ``l`` and direction ``d`` (prefix ``<p>_l<l>_d<d>``): ``weights_in`` [G, I, H],
  ``weights_out`` [G, H, H], ``bias`` [G, H], gate order LSTM (i, g, f, o), GRU (z, r, n), RNN one block (the
  ``rnn_dense`` operands ``Wi[0]``, ``Wo[0]``, ``bias[0]``). sa8: weights int8 with one scale per gate (``dim`` 0),
  bias int32 (sa32; its scale s_in·s_w[g] is written as MLI's checker wants it, the kernels never read it); data
  tensors (in, prev_out/out, cell) per tensor: ``scale`` (int16 mantissa), ``scale_frac_bits``, ``zero_point``.
  fx16 / fx16_fx8_fx8: ``frac_bits`` of every tensor (weights int16 / int8, bias int16 / int8).
* MLI 1.x: one ``weights`` tensor [4, M, N+M] (RNN [M, N+M]) holding the input then the recurrent weights of each
  neuron (gates i, g, f, o), ``bias`` [4, M] (RNN [M]), one ``frac_bits`` per tensor; 1.x has no backward mode,
  so a reverse direction is run by feeding the input reversed (over each sequence's length).

``cmsis_nn_export(layer, target, calibration)`` (``cmsis-nn-s8`` / ``-s16``) writes, per layer ``l`` and direction
``d`` (prefix ``<p>_l<l>_d<d>``), the ``cmsis_nn_lstm_params`` values in the names of CMSIS-NN's unit tests'
``config_data.h`` and the per-gate weights, biases and effective biases (:func:`cmsis_nn_export`).

``zdnn_export(layer)`` builds the four concatenated ztensors zDNN's ``zdnn_lstm`` / ``zdnn_gru`` take per layer
(``weights`` [D, I, H] per gate, ``biases`` [D, H], ``hidden_weights`` [D, H, H], ``hidden_biases`` [D, H]; FICO
for LSTM, ZRH for GRU; FP32 pre-transformed, ``PREV_LAYER_NONE`` for the first layer and ``UNI`` / ``BIDIR``
after it) with :func:`fusedrnn.zdnn.transform_ztensor`, so their buffers are zDNN's stickified bytes.

Names follow ``<prefix>_l<layer>_d<direction>_<tensor>`` (zDNN: ``<prefix>_l<layer>_<tensor>``); every scalar
parameter is a ``#define`` of the upper-cased name. Array text comes from :mod:`fusedrnn.frontends.c_source`
(``c_array``: element count define, shape and dtype comment, C row-major order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import conventions, targets
from .._version import __version__
from ..errors import ConversionError, UnsupportedFeatureError
from ..layers import RecurrentLayer, Stack
from ..numerics.affine import mli_scale_from_float
from ..targets.zdnn import api as z
from .c_source import c_array, c_comment

MLI_GATES = {**{cell: ", ".join(conventions.gate_order(cell, "mli2")) for cell in ("lstm", "gru")}, "rnn": "one block"}
ZDNN_GATES = {"lstm": "f, i, c, o (FICO)", "gru": "z, r, h (ZRH)"}
_ZDNN_ORDER = {cell: conventions.permutation(cell, "zdnn") for cell in ("lstm", "gru")}
"""Per zDNN block, the canonical gate it holds (LSTM blocks f, i, c, o; GRU z, r, h)."""


@dataclass
class CExport:
    """What a header holds: ``arrays`` {C name: array} (exact dtypes), ``defines`` {C macro: value text},
    ``comments`` {C name or macro: comment}, and ``ztensors`` {C name: ZTensor} for zDNN."""

    title: str
    arrays: dict = field(default_factory=dict)
    defines: dict = field(default_factory=dict)
    comments: dict = field(default_factory=dict)
    ztensors: dict = field(default_factory=dict)
    order: list = field(default_factory=list)  # ("array" | "define" | "comment", key) in writing order

    def array(self, name: str, a: np.ndarray, comment: str) -> None:
        self.arrays[name] = a
        self.comments[name] = comment
        self.order.append(("array", name))

    def define(self, name: str, value, comment: str = "") -> None:
        self.defines[name] = str(value)
        if comment:
            self.comments[name] = comment
        self.order.append(("define", name))

    def note(self, text: str) -> None:
        self.order.append(("comment", text))

    def header(self, guard: str) -> str:
        """The C header text (``<stdint.h>``; include guard ``guard``); every comment goes through
        :func:`~fusedrnn.frontends.c_source.c_comment`."""
        lines: list[str] = []
        for kind, key in self.order:
            if kind == "comment":
                lines += ["", f"/* ---- {c_comment(key)} */"]
            elif kind == "define":
                c = self.comments.get(key)
                lines.append(f"#define {key} {self.defines[key]}" + (f" /* {c_comment(c)} */" if c else ""))
            else:
                text, _ = c_array(key, self.arrays[key], self.comments[key])
                if key in self.ztensors:  # zDNN wants 4 KiB-aligned ztensor buffers
                    text = text.replace(f"{key}[", f"__attribute__((aligned(4096))) {key}[", 1)
                lines += ["", text.rstrip("\n"), ""]
        return "\n".join([f"/* {c_comment(self.title)}", f" * Written by fusedrnn {__version__} (fusedrnn convert). */",
                          f"#ifndef {guard}", f"#define {guard}", "", "#include <stdint.h>", *lines, "",
                          f"#endif /* {guard} */", ""])


def _layers(layer_or_stack) -> list:
    if isinstance(layer_or_stack, Stack):
        return list(layer_or_stack.layers)
    if isinstance(layer_or_stack, RecurrentLayer):
        return [layer_or_stack]
    raise ConversionError(f"layer: expected a fusedrnn LSTM, GRU, RNN or Stack, got {type(layer_or_stack).__name__}")


def _describe(layer) -> str:
    return (f"{layer.cell.upper()} input {layer.input_size}, hidden {layer.hidden_size}, {layer.direction}")


# ---- MLI ---------------------------------------------------------------------------------------------------
def _stack_calibration(layers, calibration) -> list:
    """Each layer's calibration input: the float stack's activations (layer k's output feeds layer k + 1)."""
    cals = [calibration]
    arrays = calibration if isinstance(calibration, (list, tuple)) else [calibration]
    for layer in layers[:-1]:
        arrays = [layer(np.asarray(a, np.float32))[0] for a in arrays]
        cals.append(list(arrays))
    return cals


def _mli_c_type(target_name: str, what: str) -> np.dtype:
    """numpy dtype of an MLI tensor: ``what`` in ("w", "b")."""
    flavor = target_name.split("-", 1)[1]
    table = {"sa8": ("int8", "int32"), "fx16": ("int16", "int16"), "fx16_fx8_fx8": ("int8", "int8"),
             "fx8": ("int8", "int8"), "fx8w16d": ("int8", "int8")}
    return np.dtype(table[flavor][0 if what == "w" else 1])


def _checked(a: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    info = np.iinfo(dtype)
    a = np.asarray(a, np.int64)
    if a.size and (a.min() < info.min or a.max() > info.max):  # a target bug, never user input
        raise ConversionError(f"{name}: values outside {dtype.name}")
    return a.astype(dtype)


def mli_export(layer_or_stack, target, calibration, prefix: str = "mli") -> CExport:
    """The MLI C export of ``layer_or_stack`` on ``target`` (an ``mli2-*`` / ``mli1-*`` name or Target),
    calibrated on ``calibration``; with ``calibration`` None, layers already on ``target`` (``layer.to(target,
    ...)``) are exported with the quantization they have."""
    t = targets.get(target)
    if t.family != "mli":
        raise UnsupportedFeatureError(f"target: expected an mli2-* or mli1-* target, got {t.name!r}")
    layers = _layers(layer_or_stack)
    v1 = t.name.startswith("mli1-")
    out = CExport(f"Weights and quantization parameters for embARC MLI {'1.x' if v1 else '2.0'} ({t.name}).")
    out.define(f"{prefix.upper()}_NUM_LAYERS", len(layers))
    ready = calibration is None and all(getattr(layer, "target", None) is t and layer.prepared is not None
                                        for layer in layers)  # layers already on the target: export as they are
    cals = [None] * len(layers) if ready else _stack_calibration(layers, calibration)
    for k, (layer, cal) in enumerate(zip(layers, cals, strict=True)):
        prepared = layer if ready else layer.to(t, calibration=cal)
        dirs = prepared.prepared.directions
        for d, q in enumerate(dirs):
            p = f"{prefix}_l{k}_d{d}"
            rev = d == 1 or layer.direction == "reverse"
            out.note(f"layer {k} ({_describe(layer)}), direction {d} ({'backward' if rev else 'forward'})")
            (_mli1_direction if v1 else _mli2_direction)(out, p, layer, q, t.name, rev)
    return out


def _data(out: CExport, p: str, what: str, params, sa8: bool, meaning: str) -> None:
    P = f"{p}_{what}".upper()
    if sa8:
        s, z, f = params
        out.define(f"{P}_EL_TYPE", "MLI_EL_SA_8", meaning)
        out.define(f"{P}_SCALE", int(s), "int16 mantissa; real scale = SCALE * 2^-SCALE_FRAC_BITS")
        out.define(f"{P}_SCALE_FRAC_BITS", int(f))
        out.define(f"{P}_ZERO_POINT", int(z))
    else:
        out.define(f"{P}_FRAC_BITS", int(params), meaning)


def _mli2_direction(out: CExport, p: str, layer, q, target_name: str, rev: bool) -> None:
    cell, H, I = layer.cell, layer.hidden_size, layer.input_size
    G = q.Wi.shape[0]
    sa8 = q.flavor == "sa8"
    wt, bt = _mli_c_type(target_name, "w"), _mli_c_type(target_name, "b")
    P = p.upper()
    out.define(f"{P}_INPUT_SIZE", I)
    out.define(f"{P}_HIDDEN_SIZE", H)
    out.define(f"{P}_GATES", G, f"gate order {MLI_GATES[cell]}")
    out.define(f"{P}_DIRECTION", "RNN_DIR_BACKWARD" if rev else "RNN_DIR_FORWARD", "mli_rnn_cell_cfg.direction")
    _data(out, p, "in", q.q.inp, sa8, "input x [T, N]")
    _data(out, p, "out", q.q.out, sa8, "out and prev_out (h)")
    if cell == "lstm":
        _data(out, p, "cell", q.q.cell, sa8, "cell state c")
    for name, a, shape in (("weights_in", q.Wi, f"[{G}, {I}, {H}] [gate, input, hidden]"),
                           ("weights_out", q.Wo, f"[{G}, {H}, {H}] [gate, prev_out, hidden]")):
        pq = q.q.wi if name == "weights_in" else q.q.wo
        c = f"{p}_{name}"
        out.array(c, _checked(a, wt, c), f"{name} {shape}, gates {MLI_GATES[cell]}, "
                                         f"{'MLI_EL_SA_8' if sa8 else 'MLI_EL_FX_' + str(wt.itemsize * 8)}")
        if sa8:
            m, f = (np.asarray(v, np.int64).reshape(-1) for v in pq)
            out.array(f"{c}_scale", m.astype(np.int16), f"{name} scale mantissas per gate (el_params.sa.dim = 0)")
            out.array(f"{c}_scale_frac_bits", f.astype(np.int8), f"{name} scale_frac_bits per gate")
            out.array(f"{c}_zero_point", np.zeros(m.size, np.int16), f"{name} zero points (symmetric)")
            out.define(f"{c.upper()}_DIM", 0, "per-axis quantization over dim 0 (one scale per gate)")
        else:
            out.define(f"{c.upper()}_FRAC_BITS", int(pq))
    c = f"{p}_bias"
    out.array(c, _checked(q.b, bt, c), f"bias [{G}, {H}], gates {MLI_GATES[cell]}, b_x + b_h, "
                                      f"{'MLI_EL_SA_32' if sa8 else 'MLI_EL_FX_' + str(bt.itemsize * 8)}")
    if sa8:
        s_in = q.q.inp[0] * 2.0 ** -q.q.inp[2]
        m_w, f_w = (np.asarray(v, np.int64).reshape(-1) for v in q.q.wi)
        m, f = mli_scale_from_float(s_in * np.ldexp(m_w.astype(np.float64), -f_w))
        out.array(f"{c}_scale", np.atleast_1d(m).astype(np.int16), "bias scale mantissas per gate = s_in * s_w[g] "
                  "(checked by MLI, not read by the kernels: the bias is added raw to the accumulator)")
        out.array(f"{c}_scale_frac_bits", np.atleast_1d(f).astype(np.int8), "bias scale_frac_bits per gate")
        out.array(f"{c}_zero_point", np.zeros(G, np.int16), "bias zero points")
        out.define(f"{c.upper()}_DIM", 0)
    else:
        out.define(f"{c.upper()}_FRAC_BITS", int(q.q.bias_frac))


def _mli1_direction(out: CExport, p: str, layer, q, target_name: str, rev: bool) -> None:
    cell, H, I = layer.cell, layer.hidden_size, layer.input_size
    wt, bt = _mli_c_type(target_name, "w"), _mli_c_type(target_name, "b")
    P = p.upper()
    out.define(f"{P}_INPUT_SIZE", I)
    out.define(f"{P}_HIDDEN_SIZE", H)
    out.define(f"{P}_REVERSED_INPUT", int(rev), "1: feed the input reversed over each sequence (no backward mode "
                                                 "in MLI 1.x) and reverse the outputs back")
    for what, f, meaning in (("in", q.f_in, "input"), ("out", q.f_out, "out and prev_out (h)"),
                             ("cell", q.f_cell, "cell state c")):
        if f is not None:
            out.define(f"{P}_{what.upper()}_FRAC_BITS", int(f), meaning)
    W = np.concatenate([q.Wx, q.Wh], axis=-1)
    shape = f"[4, {H}, {I}+{H}]" if cell == "lstm" else f"[{H}, {I}+{H}]"
    out.array(f"{p}_weights", _checked(W, wt, f"{p}_weights"),
              f"weights {shape}: input then recurrent weights per neuron, gates {MLI_GATES[cell]}, "
              f"MLI_EL_FX_{wt.itemsize * 8}")
    out.define(f"{P}_WEIGHTS_FRAC_BITS", int(q.f_w))
    out.array(f"{p}_bias", _checked(q.b, bt, f"{p}_bias"),
              f"bias {'[4, ' + str(H) + ']' if cell == 'lstm' else '[' + str(H) + ']'}, b_x + b_h, "
              f"MLI_EL_FX_{bt.itemsize * 8}")
    out.define(f"{P}_BIAS_FRAC_BITS", int(q.f_b))


# ---- CMSIS-NN ----------------------------------------------------------------------------------------------
_CMSIS_GATES = ("input", "forget", "cell", "output")


def cmsis_nn_export(layer_or_stack, target, calibration, prefix: str = "cmsis_nn") -> CExport:
    """The CMSIS-NN C export of an LSTM (or a Stack of LSTMs) on ``cmsis-nn-s8`` / ``cmsis-nn-s16``: per layer and
    direction the ``cmsis_nn_lstm_params`` values as CMSIS-NN's unit tests write them (``config_data.h``: sizes,
    ``INPUT_ZERO_POINT`` = the input offset -zp, ``OUTPUT_ZERO_POINT``, ``CELL_CLIP``, ``CELL_SCALE_POWER``, the
    multipliers and shifts) and the per-gate arrays (``<gate>_gate_input_weights`` [H, I],
    ``<gate>_gate_hidden_weights`` [H, H], ``<gate>_gate_bias`` [H]) plus the effective biases
    ``arm_vector_sum_s8`` / ``_s8_s64`` would compute (``<gate>_gate_input_effective_bias``,
    ``<gate>_gate_hidden_effective_bias``), exactly as the emulation runs them; and the input / output / cell
    scales to quantize the data with."""
    t = targets.get(target)
    if t.family != "cmsis-nn":
        raise UnsupportedFeatureError(f"target: expected cmsis-nn-s8 or cmsis-nn-s16, got {t.name!r}")
    layers = _layers(layer_or_stack)
    out = CExport(f"Weights and parameters for Arm CMSIS-NN arm_lstm_unidirectional_{t.name.split('-')[-1]} "
                  f"({t.name}).")
    out.define(f"{prefix.upper()}_NUM_LAYERS", len(layers))
    ready = calibration is None and all(getattr(layer, "target", None) is t and layer.prepared is not None
                                        for layer in layers)  # layers already on the target: export as they are
    cals = [None] * len(layers) if ready else _stack_calibration(layers, calibration)
    for k, (layer, cal) in enumerate(zip(layers, cals, strict=True)):
        prepared = layer if ready else layer.to(t, calibration=cal).prepared
        for d, (q, p) in enumerate(zip(prepared.quantized, prepared.params, strict=True)):
            rev = layer.spec.reverse[d]
            P = f"{prefix}_l{k}_d{d}"
            out.note(f"layer {k} ({_describe(layer)}), direction {d} ({'backward' if rev else 'forward'})")
            _cmsis_direction(out, P, layer, q, p, rev)
    return out


def _cmsis_direction(out: CExport, p: str, layer, q, params, rev: bool) -> None:
    P = p.upper()
    out.define(f"{P}_TIME_MAJOR", "false" if layer.batch_first else "true", "the layer's layout")
    out.define(f"{P}_INPUT_SIZE", params.input_size)
    out.define(f"{P}_HIDDEN_SIZE", params.hidden_size)
    out.define(f"{P}_REVERSED_INPUT", int(rev), "1: feed the input reversed in time (CMSIS-NN has no backward "
                                                "mode) and reverse the outputs back")
    out.define(f"{P}_CELL_SCALE_POWER", params.cell_scale_power)
    out.define(f"{P}_INPUT_ZERO_POINT", params.input_offset, "cmsis_nn_lstm_params.input_offset (-zero point)")
    out.define(f"{P}_OUTPUT_ZERO_POINT", params.output_offset)
    out.define(f"{P}_CELL_CLIP", params.cell_clip, "quantized; 0 = no clip")
    for name in ("forget_to_cell", "input_to_cell", "output"):
        out.define(f"{P}_{name.upper()}_MULTIPLIER", getattr(params, f"{name}_multiplier"))
        out.define(f"{P}_{name.upper()}_SHIFT", getattr(params, f"{name}_shift"))
    for what, scale, zp in (("input", q.x_scale, q.x_zp), ("output", q.h_scale, q.h_zp), ("cell", q.c_scale, 0)):
        out.define(f"{P}_{what.upper()}_SCALE", f"{np.float32(scale):.9g}f",
                   f"real = (q - {zp}) * scale" if what != "cell" else "int16 cell state, real = q * scale")
    bias_t = np.dtype(np.int64 if q.activation == "int16" else np.int32)
    vsum = "arm_vector_sum_s8_s64" if bias_t.itemsize == 8 else "arm_vector_sum_s8"
    for gate in _CMSIS_GATES:
        g = getattr(params, f"{gate}_gate")
        G = gate.upper()
        out.define(f"{P}_{G}_GATE_INPUT_MULTIPLIER", g.input_multiplier)
        out.define(f"{P}_{G}_GATE_INPUT_SHIFT", g.input_shift)
        out.define(f"{P}_{G}_GATE_HIDDEN_MULTIPLIER", g.hidden_multiplier)
        out.define(f"{P}_{G}_GATE_HIDDEN_SHIFT", g.hidden_shift)
        out.define(f"{P}_{G}_GATE_ACTIVATION", "ARM_TANH" if g.activation_type == 1 else "ARM_SIGMOID")
        c = f"{p}_{gate}_gate"
        out.array(f"{c}_input_weights", _checked(g.input_weights, np.dtype(np.int8), c),
                  f"{gate} gate input weights [{params.hidden_size}, {params.input_size}]")
        out.array(f"{c}_hidden_weights", _checked(g.hidden_weights, np.dtype(np.int8), c),
                  f"{gate} gate hidden weights [{params.hidden_size}, {params.hidden_size}]")
        out.array(f"{c}_bias", _checked(g.bias, bias_t, c), f"{gate} gate bias (b_x + b_h)")
        out.array(f"{c}_input_effective_bias", _checked(g.input_effective_bias, bias_t, c),
                  f"{gate} gate bias + input offset * row sums ({vsum})")
        out.array(f"{c}_hidden_effective_bias", _checked(g.hidden_effective_bias, bias_t, c),
                  f"{gate} gate -output zero point * hidden row sums")


# ---- zDNN --------------------------------------------------------------------------------------------------
def _ztensor(layout, dims, info, gates):
    pre = z.init_pre_transformed_desc(layout, z.FP32, None, *dims)
    tf = z.TensorDesc()
    st = z.generate_transformed_desc_concatenated(pre, info, tf)
    if st != z.ZDNN_OK:
        raise ConversionError(f"zdnn: generate_transformed_desc_concatenated returned {st.name}")
    zt = z.ZTensor()
    st = z.init_ztensor_with_malloc(pre, tf, zt)
    if st == z.ZDNN_OK:
        st = z.transform_ztensor(zt, *[np.ascontiguousarray(g, np.float32) for g in gates])
    if st != z.ZDNN_OK:
        raise ConversionError(f"zdnn: transform_ztensor returned {st.name} (weights outside DLFLOAT16's range?)")
    return zt


def zdnn_gate_arrays(layer) -> dict:
    """zDNN's per-gate float32 arrays of ``layer``: {"weights": [G][D, I, H], "biases": [G][D, H],
    "hidden_weights": [G][D, H, H], "hidden_biases": [G][D, H]} in FICO / ZRH order (x @ W orientation)."""
    G = layer.gate_count
    D, H = layer.num_directions, layer.hidden_size
    order = _ZDNN_ORDER[layer.cell]
    zeros = np.zeros((D, G * H), np.float32)

    def gates(a, matrix):
        a = np.asarray(a, np.float32)
        if matrix:
            return [np.ascontiguousarray(a[:, g * H:(g + 1) * H, :].transpose(0, 2, 1)) for g in order]
        return [np.ascontiguousarray(a[:, g * H:(g + 1) * H]) for g in order]

    return {"weights": gates(layer.W, True), "biases": gates(zeros if layer.b_x is None else layer.b_x, False),
            "hidden_weights": gates(layer.R, True),
            "hidden_biases": gates(zeros if layer.b_h is None else layer.b_h, False)}


def _zdnn_check(layer) -> None:
    t = targets.get("zdnn")
    bad = [f for f in layer.features() if not t.supports(f)]
    if layer.cell == "gru" and not layer.linear_before_reset:
        bad.append("linear_before_reset=False (zDNN's GRU resets after the linear transformation)")
    if layer.cell == "lstm" and getattr(layer, "output_order", "time") != "time":
        bad.append("output_order='processing'")
    if bad:
        raise UnsupportedFeatureError(f"layer: zDNN's {layer.cell} cannot express {', '.join(bad)}")


def zdnn_export(layer_or_stack, prefix: str = "zdnn") -> CExport:
    """The zDNN export of ``layer_or_stack``: per layer the four concatenated ztensors (``ztensors``), their
    buffers as uint8 ``arrays`` (byte for byte) and their descriptors as defines."""
    layers = _layers(layer_or_stack)
    out = CExport("Stickified weight and bias ztensors for IBM zDNN (zdnn_lstm / zdnn_gru).")
    out.define(f"{prefix.upper()}_NUM_LAYERS", len(layers))
    for k, layer in enumerate(layers):
        _zdnn_check(layer)
        rtype = z.RNN_TYPE_LSTM if layer.cell == "lstm" else z.RNN_TYPE_GRU
        prev = z.PREV_LAYER_NONE if k == 0 else (z.PREV_LAYER_BIDIR if layers[k - 1].num_directions == 2
                                                  else z.PREV_LAYER_UNI)
        D, H, I = layer.num_directions, layer.hidden_size, layer.input_size
        p = f"{prefix}_l{k}"
        P = p.upper()
        out.note(f"layer {k} ({_describe(layer)}); gates {ZDNN_GATES[layer.cell]}")
        direction = {"forward": "FWD", "reverse": "BWD", "bidirectional": "BIDIR"}[layer.direction]
        out.define(f"{P}_DIRECTION", direction, "lstm_gru_direction")
        out.define(f"{P}_INPUT_SIZE", I)
        out.define(f"{P}_HIDDEN_SIZE", H)
        arrays = zdnn_gate_arrays(layer)
        for usage, name, layout, dims in (
                (z.USAGE_WEIGHTS, "weights", z.ZDNN_3DS, (D, I, H)),
                (z.USAGE_BIASES, "biases", z.ZDNN_2DS, (D, H)),
                (z.USAGE_HIDDEN_WEIGHTS, "hidden_weights", z.ZDNN_3DS, (D, H, H)),
                (z.USAGE_HIDDEN_BIASES, "hidden_biases", z.ZDNN_2DS, (D, H))):
            info = rtype | prev | usage
            zt = _ztensor(layout, dims, info, arrays[name])
            c = f"{p}_{name}"
            out.ztensors[c] = zt
            _desc(out, c.upper() + "_PRE", zt.pre_transformed_desc, z)
            _desc(out, c.upper() + "_TFRMD", zt.transformed_desc, z)
            out.define(f"{c.upper()}_CONCAT_INFO", f"0x{info:08X}U",
                       f"RNN_TYPE_{'LSTM' if layer.cell == 'lstm' else 'GRU'} | "
                       f"PREV_LAYER_{'BIDIR' if prev == z.PREV_LAYER_BIDIR else ('UNI' if k else 'NONE')} | "
                       f"USAGE_{name.upper()}")
            out.array(c, np.array(zt.buffer, np.uint8),
                      f"{name}: zdnn_ztensor buffer ({zt.buffer_size} bytes, stickified DLFLOAT16), gates "
                      f"{ZDNN_GATES[layer.cell]}")
    return out


def _desc(out: CExport, P: str, d, z) -> None:
    lay, fmt, typ = z.DataLayout(d.layout).name, z.DataFormat(d.format).name, z.DataType(d.type).name
    out.define(f"{P}_DESC", f"{{{lay}, {fmt}, {typ}, {d.dim4}, {d.dim3}, {d.dim2}, {d.dim1}}}",
               "zdnn_tensor_desc initializer {layout, format, type, dim4, dim3, dim2, dim1}")


__all__ = ["CExport", "mli_export", "zdnn_export", "zdnn_gate_arrays", "MLI_GATES", "ZDNN_GATES"]
