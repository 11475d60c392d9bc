"""LiteRT's recurrent kernel tests as data (tests/data/litert_kernel_tests, written by
scripts/extract_litert_kernel_tests.py from the C++ sources) and the models they describe, built with fusedrnn's
.tflite writer; each model runs on fusedrnn (``litert.load``) and on the LiteRT interpreter when it is installed.

The test harness's weight quantization is reproduced: ``SymmetricQuantizeFloats`` (scale max|w| / 127, codes
rounded half away from zero, zero point 0), stored as int8 codes in an INT8 tensor or as the same bytes in a
UINT8 tensor (``SymmetricQuantizeAndPopulate``).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import replace

import numpy as np

from fusedrnn.numerics.affine import tflite_symmetric_quantize
from fusedrnn.targets.litert.slots import SLOT_NAMES, LstmTensors, const
from fusedrnn.targets.litert.writer import single_op_model

DATA = os.path.join(os.path.dirname(__file__), "data", "litert_kernel_tests")


@functools.cache
def blocks(stem: str) -> list[dict]:
    with open(os.path.join(DATA, stem + ".json"), encoding="utf-8") as f:
        return json.load(f)["blocks"]


def block(stem: str, name: str, kind: str | None = None, suite: str | None = None) -> dict:
    for b in blocks(stem):
        if b.get("name") == name and (kind is None or b["kind"] == kind) and (suite is None or b.get("suite") == suite):
            return b
    raise KeyError(f"{stem}: no block {name!r}")


def kernel_tests(stem: str, kinds=("TEST", "TEST_P", "TEST_F")) -> list[dict]:
    return [b for b in blocks(stem) if b["kind"] in kinds]


def flags(b: dict) -> dict:
    """The ``/*name=*/value`` comments of a block as {name: value} (the first of each name)."""
    out: dict = {}
    for k, v in b["flags"]:
        out.setdefault(k, v)
    return out


def truth(v: str) -> bool:
    return v.strip() == "true"


def flat(a) -> np.ndarray:
    return np.asarray(a, np.float64).reshape(-1)


def interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # pragma: no cover - the interpreter is optional
        return None
    return Interpreter


# ---- weights as the test harness stores them ------------------------------------------------------------------
def weight(name: str, values, weight_type: str, shape):
    """A weight tensor of type FLOAT32, INT8 or UINT8 (symmetric codes, bytes reinterpreted for UINT8). Values
    beyond the tensor's size (a test that sets more than the tensor holds) are quantized with the rest, as the
    harness does, and only the first ones stored."""
    v = np.asarray(values, np.float32).reshape(-1)
    n = int(np.prod(shape))
    if weight_type == "FLOAT32":
        return const(name, v[:n].reshape(shape))
    q, s = tflite_symmetric_quantize(v)
    q = np.asarray(q, np.int8)[:n].reshape(shape)
    if weight_type == "UINT8":
        q = q.view(np.uint8)
    return const(name, q, float(s), 0)


_WEIGHT_SLOTS = set(range(1, 12)) | {16}


def lstm_slots(arrays: dict, *, n_input: int, n_cell: int, n_output: int, use_cifg: bool, use_peephole: bool,
               use_projection_weights: bool, use_projection_bias: bool, is_layer_norm: bool = False,
               weight_type: str = "FLOAT32", recurrent_type: str | None = None, diagonal: bool = False,
               projection_type: str | None = None) -> list:
    """The constant slots 1-17 and 20-23 of one LSTM direction laid out as the tests' op models lay them out: the
    slots present by the flags, each set from ``arrays`` (named as the tests name them: ``input_to_input_weights``
    with or without a trailing underscore, or the setter ``SetInputToInputWeights()``), absent values zero."""
    def get(name):
        setter = "Set" + "".join(w.capitalize() for w in name.split("_")) + "()"
        for k in (name + "_", name, setter, setter.replace("CellGateBias", "CellBias")):
            if k in arrays:
                return arrays[k]
        return None

    shapes = {1: (n_cell, n_input), 2: (n_cell, n_input), 3: (n_cell, n_input), 4: (n_cell, n_input),
              5: (n_cell, n_output), 6: (n_cell, n_output), 7: (n_cell, n_output), 8: (n_cell, n_output),
              9: (n_cell,), 10: (n_cell,), 11: (n_cell,), 12: (n_cell,), 13: (n_cell,), 14: (n_cell,),
              15: (n_cell,), 16: (n_output, n_cell), 17: (n_output,), 20: (n_cell,), 21: (n_cell,), 22: (n_cell,),
              23: (n_cell,)}
    if diagonal:
        for k in (5, 6, 7, 8):
            shapes[k] = (n_cell,)
    present = set(range(2, 5)) | {6, 7, 8, 13, 14, 15}
    if not use_cifg:
        present |= {1, 5, 12}
    if use_peephole:
        present |= {10, 11} | (set() if use_cifg else {9})
    if use_projection_weights:
        present.add(16)
    if use_projection_bias:
        present.add(17)
    if is_layer_norm:
        present |= {21, 22, 23} | (set() if use_cifg else {20})
    slots: list = [None] * 24
    for k in present:
        name = SLOT_NAMES[k]
        v = get(name)
        if v is None and k == 14:
            v = get("cell_bias")
        if v is None:
            v = np.zeros(shapes[k], np.float32)
        wt = weight_type
        if k in (5, 6, 7, 8) and recurrent_type is not None:
            wt = recurrent_type
        if k == 16 and projection_type is not None:
            wt = projection_type
        if k in _WEIGHT_SLOTS:
            slots[k] = weight(name, v, wt, shapes[k])
        else:
            slots[k] = const(name, np.asarray(v, np.float32).reshape(shapes[k]))
    return slots


def lstm_float_model(arrays: dict, *, n_batch: int, n_input: int, n_cell: int, n_output: int, use_cifg: bool,
                     use_peephole: bool, use_projection_weights: bool, use_projection_bias: bool,
                     is_layer_norm: bool = False, weight_type: str = "FLOAT32", op: str = "LSTM",
                     legacy_20_inputs: bool = False, options: dict | None = None, time: int = 1,
                     time_major: bool = True, recurrent_type: str | None = None, diagonal: bool = False,
                     version: int | None = None) -> bytes:
    """A one-op LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM model (:func:`lstm_slots`, float32 input and states)."""
    slots = lstm_slots(arrays, n_input=n_input, n_cell=n_cell, n_output=n_output, use_cifg=use_cifg,
                       use_peephole=use_peephole, use_projection_weights=use_projection_weights,
                       use_projection_bias=use_projection_bias, is_layer_norm=is_layer_norm,
                       weight_type=weight_type, recurrent_type=recurrent_type, diagonal=diagonal)
    if op == "LSTM":
        x_shape, y_shape = (n_batch, n_input), (n_batch, n_output)
    else:
        x_shape = (time, n_batch, n_input) if time_major else (n_batch, time, n_input)
        y_shape = (time, n_batch, n_output) if time_major else (n_batch, time, n_output)
    slots[0] = const("input", None, type_name="FLOAT32", shape=x_shape)
    slots[18] = const("output_state", None, type_name="FLOAT32", shape=(n_batch, n_output), is_variable=True)
    slots[19] = const("cell_state", None, type_name="FLOAT32", shape=(n_batch, n_cell), is_variable=True)
    if legacy_20_inputs:
        slots = slots[:20]
    out = const("output", None, type_name="FLOAT32", shape=y_shape)
    hybrid = weight_type != "FLOAT32"
    opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}
    if op == "LSTM":
        opts["kernel_type"] = "FULL"
    else:
        opts["time_major"] = time_major
    if diagonal:
        opts["diagonal_recurrent_tensors"] = True
    opts.update(options or {})
    if version is None:
        version = 1
        if hybrid:
            version = 3 if opts.get("asymmetric_quantize_inputs") else 2
        if op == "LSTM" and is_layer_norm and not hybrid:
            version = max(version, 2)
        if diagonal:
            version = 4
    return single_op_model(op, slots, [out], opts, version=version)


def run_steps(model: bytes, inputs: list[np.ndarray], *, interpreter: bool) -> list[np.ndarray]:
    """Run one input after another on fusedrnn (``interpreter=False``) or the LiteRT interpreter, state carried."""
    if not interpreter:
        from fusedrnn import litert

        m = litert.load(model)
        return [np.asarray(m(np.asarray(x, np.float32))) for x in inputs]
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    i_in = it.get_input_details()[0]["index"]
    i_out = it.get_output_details()[0]["index"]
    out = []
    for x in inputs:
        it.set_tensor(i_in, np.asarray(x, np.float32))
        it.invoke()
        out.append(it.get_tensor(i_out).copy())
    return out


def parse_tolerance(b: dict, weight_type: str, default: float = 1e-5) -> float:
    """The test's tolerance for ``weight_type``: its per-type map, a ``/*tolerance=*/`` flag, or the default."""
    if weight_type in b["tolerances"]:
        return b["tolerances"][weight_type]
    for k, v in b["flags"]:
        if k in ("tolerance", "max_abs_err", "max_abs_error"):
            return float(re.sub(r"f$", "", v.strip()))
    return default


def rnn_model(op: str, *, batches: int, units: int, size: int, weights, recurrent_weights, bias,
              weight_type: str = "FLOAT32", asym: bool = False, time_major: bool = False, seq: int = 1,
              activation: str = "RELU", shapes=None) -> bytes:
    """A one-op RNN / UNIDIRECTIONAL_SEQUENCE_RNN model as the tests' op models build it (RELU); ``shapes``
    (input, weights, recurrent weights, bias, hidden state) overrides the tensors' shapes, zeros filling them."""
    if shapes is None:
        x_shape = (batches, size) if op == "RNN" else ((seq, batches, size) if time_major else (batches, seq, size))
        shapes = [x_shape, (units, size), (units, units), (units,), (batches, units)]
    x_shape, w_shape, r_shape, b_shape, h_shape = (tuple(s) for s in shapes)

    def fill(v, shape):
        n = int(np.prod(shape))
        return np.zeros(shape, np.float32) if v is None else np.asarray(v, np.float32).reshape(-1)[:n].reshape(shape)

    x = const("input", None, type_name="FLOAT32", shape=x_shape)
    w = weight("weights", fill(weights, w_shape), weight_type, w_shape) if weight_type != "FLOAT16" else \
        const("weights", fill(weights, w_shape).astype(np.float16))
    r = weight("recurrent_weights", fill(recurrent_weights, r_shape), weight_type, r_shape) \
        if weight_type != "FLOAT16" else const("recurrent_weights", fill(recurrent_weights, r_shape).astype(np.float16))
    b = const("bias", fill(bias, b_shape))
    h = const("hidden_state", None, type_name="FLOAT32", shape=h_shape, is_variable=True)
    y_shape = (x_shape[:-1] + (units,)) if len(x_shape) else (units,)
    y = const("output", None, type_name="FLOAT32", shape=y_shape)
    opts = {"fused_activation_function": activation, "asymmetric_quantize_inputs": asym}
    if op != "RNN":
        opts["time_major"] = time_major
    hybrid = weight_type in ("INT8", "UINT8")
    version = (3 if asym else 2) if hybrid else 1
    return single_op_model(op, [x, w, r, b, h], [y], opts, version=version)


def bi_rnn_model(*, batches: int, seq: int, units: int, size: int, weights, recurrent_weights, bias,
                 quantize: bool, asym: bool, time_major: bool, merge: bool, aux_size: int = 0,
                 aux_mode: str = "none", aux_weights=None) -> bytes:
    """The BIDIRECTIONAL_SEQUENCE_RNN of bidirectional_sequence_rnn_test.cc (RELU; UINT8 weights when
    ``quantize``), fw and bw with the same weights; ``aux_mode`` "none", "no_cross" (an aux input without
    weights: the backward cell reads it) or "cross" (aux weights ``aux_weights`` [units, aux_size] on both)."""
    wt = "UINT8" if quantize else "FLOAT32"

    def seq_shape(n):
        return (seq, batches, n) if time_major else (batches, seq, n)

    ins = [const("input", None, type_name="FLOAT32", shape=seq_shape(size))]
    for d in ("fw", "bw"):
        ins += [weight(f"{d}_weights", weights, wt, (units, size)),
                weight(f"{d}_recurrent_weights", recurrent_weights, wt, (units, units)),
                const(f"{d}_bias", np.asarray(bias, np.float32).reshape(units)),
                const(f"{d}_hidden_state", None, type_name="FLOAT32", shape=(batches, units), is_variable=True)]
    if aux_mode == "none":
        ins += [None, None, None]
    else:
        ins.append(const("aux_input", None, type_name="FLOAT32", shape=seq_shape(aux_size)))
        if aux_mode == "cross":
            ins += [weight(f"{d}_aux_weights", aux_weights, wt, (units, aux_size)) for d in ("fw", "bw")]
        else:
            ins += [None, None]

    def out(name, n):
        return const(name, None, type_name="FLOAT32", shape=seq_shape(n))

    outs = [out("output", 2 * units)] if merge else [out("fw_output", units), out("bw_output", units)]
    opts = {"time_major": time_major, "fused_activation_function": "RELU", "merge_outputs": merge,
            "asymmetric_quantize_inputs": asym}
    return single_op_model("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs, opts,
                           version=(3 if asym else 2) if quantize else 1)


def run_outputs(model: bytes, x: np.ndarray, *, interpreter: bool) -> list[np.ndarray]:
    """All outputs of one call (fusedrnn or the interpreter)."""
    if not interpreter:
        from fusedrnn import litert

        y = litert.load(model)(np.asarray(x, np.float32))
        return [np.asarray(v) for v in (y if isinstance(y, tuple) else (y,))]
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.asarray(x, np.float32))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def bi_lstm_model(arrays: dict, *, n_batch: int, n_input: int, n_cell: int, n_output: int, seq: int,
                  use_cifg: bool, use_peephole: bool, use_projection_weights: bool, use_projection_bias: bool,
                  merge: bool, time_major: bool, quantize: bool = False, asym: bool = False, n_aux_input: int = 0,
                  aux_weights: bool = True, aux_shape=None, cell_clip: float = 0.0, proj_clip: float = 0.0) -> bytes:
    """The BIDIRECTIONAL_SEQUENCE_LSTM of bidirectional_sequence_lstm_test.cc: fw and bw with the same weights
    (UINT8 when ``quantize``, except the forward projection, which the test model declares FLOAT32), states of
    shape [n * batch], aux input (and, with ``aux_weights``, its weights ``SetAuxInputTo*Weights()``) when
    ``n_aux_input``."""
    wt = "UINT8" if quantize else "FLOAT32"
    kw = dict(n_input=n_input, n_cell=n_cell, n_output=n_output, use_cifg=use_cifg, use_peephole=use_peephole,
              use_projection_weights=use_projection_weights, use_projection_bias=use_projection_bias,
              weight_type=wt)
    fw = lstm_slots(arrays, projection_type="FLOAT32", **kw)
    bw = lstm_slots(arrays, **kw)

    def seq_shape(n):
        return (seq, n_batch, n) if time_major else (n_batch, seq, n)

    ins: list = [None] * 48
    ins[0] = const("input", None, type_name="FLOAT32", shape=seq_shape(n_input))
    for k in range(1, 18):
        ins[k] = None if fw[k] is None else replace(fw[k], name="fw_" + fw[k].name)
        ins[k + 17] = None if bw[k] is None else replace(bw[k], name="bw_" + bw[k].name)
    for j, (d, n) in enumerate((("fw", n_output), ("fw", n_cell), ("bw", n_output), ("bw", n_cell))):
        ins[35 + j] = const(f"{d}_state_{j}", None, type_name="FLOAT32", shape=(n * n_batch,), is_variable=True)
    if n_aux_input:
        ins[39] = const("aux_input", None, type_name="FLOAT32",
                        shape=tuple(aux_shape) if aux_shape is not None else seq_shape(n_aux_input))
        if aux_weights:
            for d, base in (("fw", 40), ("bw", 44)):
                for j, g in enumerate(("Input", "Forget", "Cell", "Output")):
                    v = arrays.get(f"SetAuxInputTo{g}Weights()")
                    if v is None:
                        v = np.zeros(n_cell * n_aux_input, np.float32)
                    ins[base + j] = weight(f"{d}_aux_input_to_{g.lower()}_weights", v, wt, (n_cell, n_aux_input))
    outs = [const("fw_output", None, type_name="FLOAT32", shape=seq_shape(2 * n_output if merge else n_output))]
    if not merge:
        outs.append(const("bw_output", None, type_name="FLOAT32", shape=seq_shape(n_output)))
    opts = {"fused_activation_function": "TANH", "cell_clip": cell_clip, "proj_clip": proj_clip,
            "merge_outputs": merge, "time_major": time_major, "asymmetric_quantize_inputs": asym}
    return single_op_model("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, opts,
                           version=(3 if asym else 2) if quantize else 1)


def run_inputs(model: bytes, xs: list[np.ndarray], *, interpreter: bool) -> list[np.ndarray]:
    """All outputs of one call with several graph inputs (fusedrnn or the interpreter)."""
    xs = [np.asarray(x, np.float32) for x in xs]
    if not interpreter:
        from fusedrnn import litert

        y = litert.load(model)(*xs)
        return [np.asarray(v) for v in (y if isinstance(y, tuple) else (y,))]
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs, strict=True):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


# ---- the integer LSTM tests' quantization (test_util.h: QuantizationParams, Quantize) -----------------------
_QRANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767), "INT32": (-(2**31), 2**31 - 1)}
_QDTYPE = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32}


def _round_away32(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.float32)


def quantization_params(f_min: float, f_max: float, type_name: str) -> tuple[float, int]:
    """``QuantizationParams<T>(min, max)`` in the test harness's float32 arithmetic: scale = (max - min) /
    (qmax - qmin), the zero point from the end with the smaller error, nudged into range and rounded."""
    f32 = np.float32
    lo, hi = _QRANGE[type_name]
    qmin, qmax = f32(lo), f32(hi)
    f_min, f_max = f32(f_min), f32(f_max)
    if f_min == f_max:
        return 0.0, 0
    scale = f32((f_max - f_min) / f32(qmax - qmin))
    from_min = f32(qmin - f32(f_min / scale))
    from_max = f32(qmax - f32(f_max / scale))
    err_min = f32(abs(qmin) + abs(f32(f_min / scale)))
    err_max = f32(abs(qmax) + abs(f32(f_max / scale)))
    z = from_min if err_min < err_max else from_max
    zp = lo if z < qmin else hi if z > qmax else int(_round_away32(z))
    return float(scale), int(zp)


def quantize_values(values, scale: float, zp: int, type_name: str) -> np.ndarray:
    """``Quantize<T>``: clamp(round(zp + f / scale)) in float32."""
    lo, hi = _QRANGE[type_name]
    f = np.asarray(values, np.float32)
    q = _round_away32(np.float32(zp) + (f / np.float32(scale)).astype(np.float32))
    q = np.maximum(np.float32(lo), np.minimum(np.float32(hi), q))
    return q.astype(np.float64).astype(_QDTYPE[type_name])


def qtensor(name: str, values, rng, type_name: str, shape):
    s, zp = quantization_params(rng[0], rng[1], type_name)
    data = None if values is None else quantize_values(values, s, zp, type_name).reshape(shape)
    return const(name, data, s, zp, type_name=type_name, shape=shape)


_INT_SLOTS = {1: "INT8", 2: "INT8", 3: "INT8", 4: "INT8", 5: "INT8", 6: "INT8", 7: "INT8", 8: "INT8", 9: "INT16",
              10: "INT16", 11: "INT16", 12: "INT32", 13: "INT32", 14: "INT32", 15: "INT32", 16: "INT8", 17: "INT32",
              20: "INT16", 21: "INT16", 22: "INT16", 23: "INT16"}


def integer_lstm_model(arrays: dict, ranges: list, intermediates: list, *, n_batch: int, n_input: int, n_cell: int,
                       n_output: int, use_cifg: bool, use_peephole: bool, use_projection_weights: bool,
                       use_projection_bias: bool, use_layer_norm: bool, op: str = "LSTM", seq: int = 1,
                       time_major: bool = True, tensors_only: bool = False):
    """The integer LSTM of ``LSTMIntegerOpModel`` / ``UnidirectionalSequenceLSTMIntegerOpModel``: each tensor
    quantized from its (min, max) range (``ranges[k]`` for slot k, 24 for the output), INT16 output and cell
    state, INT8 output, the given (scale, zero point) intermediates (5: 8x8_16, 12: 8x8_8); ``tensors_only``: the
    :class:`LstmTensors` (with the output tensor) instead of the model."""
    f = {"use_cifg": use_cifg, "use_peephole": use_peephole, "use_projection_weights": use_projection_weights,
         "use_projection_bias": use_projection_bias, "is_layer_norm": use_layer_norm}
    present = set(range(2, 5)) | {6, 7, 8, 13, 14, 15}
    if not f["use_cifg"]:
        present |= {1, 5, 12}
    if f["use_peephole"]:
        present |= {10, 11} | (set() if f["use_cifg"] else {9})
    if f["use_projection_weights"]:
        present.add(16)
    if f["use_projection_bias"]:
        present.add(17)
    if f["is_layer_norm"]:
        present |= {21, 22, 23} | (set() if f["use_cifg"] else {20})
    shapes = {k: (n_cell, n_input) for k in (1, 2, 3, 4)}
    shapes.update({k: (n_cell, n_output) for k in (5, 6, 7, 8)})
    shapes.update({k: (n_cell,) for k in (9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23)})
    shapes.update({16: (n_output, n_cell), 17: (n_output,)})
    slots: list = [None] * 24
    for k in present:
        v = arrays.get(SLOT_NAMES[k])
        slots[k] = qtensor(SLOT_NAMES[k], v, ranges[k], _INT_SLOTS[k], shapes[k])
    x_shape = (n_batch, n_input) if op == "LSTM" else ((seq, n_batch, n_input) if time_major else
                                                       (n_batch, seq, n_input))
    y_shape = x_shape[:-1] + (n_output,)
    slots[0] = qtensor("input", None, ranges[0], "INT8", x_shape)
    slots[18] = replace(qtensor("output_state", None, ranges[18], "INT16", (n_batch, n_output)), is_variable=True)
    slots[19] = replace(qtensor("cell_state", None, ranges[19], "INT16", (n_batch, n_cell)), is_variable=True)
    inter = [const(f"intermediate_{k}", None, float(s), int(z), type_name="INT16", shape=())
             for k, (s, z) in enumerate(intermediates)]
    out = qtensor("output", None, ranges[24], "INT8", y_shape)
    if tensors_only:
        return LstmTensors(slots, inter, output=out)
    opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}
    if op != "LSTM":
        opts["time_major"] = time_major
    return single_op_model(op, slots, [out], opts, intermediates=inter, version=4 if op == "LSTM" else 3)


def run_int8(model: bytes, xs: list, *, interpreter: bool) -> list[np.ndarray]:
    """Run float inputs quantized with the model's input scale (the tests' ``SetInput``), one call each
    (None: leave the input as it is: zeros); the int8 outputs."""
    from fusedrnn.targets.litert.reader import read_model

    info = read_model(model)
    t_in = info.tensors[info.inputs[0]]
    s, zp = float(t_in.scale[0]), int(t_in.zero_point[0])
    q = [np.zeros(t_in.shape, np.int8) if x is None else
         quantize_values(x, s, zp, "INT8").reshape(t_in.shape) for x in xs]
    if not interpreter:
        from fusedrnn import litert

        m = litert.load(model)
        return [np.asarray(m(v)) for v in q]
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    out = []
    for v in q:
        it.set_tensor(it.get_input_details()[0]["index"], v)
        it.invoke()
        out.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return out
