"""``fusedrnn convert SRC --to FORMAT``: recurrent weights between conventions and files.

Sources (by file suffix):

* ``.onnx``: an LSTM / GRU / RNN node with initializer weights (``--node NAME`` picks one of several);
* ``.pt`` / ``.pth``: a PyTorch state dict (``torch.load(weights_only=True)``; the kind and sizes come from the
  ``weight_ih_l0`` ... keys: gate count = rows of ``weight_hh_l0`` / its columns (or 4 with ``weight_hr_l0``),
  ``num_layers`` and ``_reverse`` from the keys; ``--node PREFIX`` picks one module of a larger model's state dict)
  or a saved ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (only these classes are allowed to unpickle);
* ``.keras`` / ``.h5``: a Keras 3 model (on the user's ``KERAS_BACKEND``) with ``LSTM`` / ``GRU`` / ``SimpleRNN``
  / ``Bidirectional`` layers (``--node NAME`` picks one; several make a stack);
* ``.pt2`` / TorchScript: the recurrent modules' weights of a ``torch.export`` program or a scripted module;
* ``.tflite``: the recurrent op of a LiteRT model (``--node INDEX`` picks the op), weights dequantized.

Formats: ``onnx`` (a single-node model), ``torch`` (a state dict .pt), ``keras`` (a .keras model), ``quark``
(an ExtendedLSTM ONNX model, ``--calibration``), the ``mli2-*`` / ``mli1-*`` targets (a C header of the
quantized weights in MLI's layout and every quantization parameter, ``--calibration``), the ``cmsis-nn-s8`` /
``cmsis-nn-s16`` targets (a C header of ``arm_lstm_unidirectional_s8`` / ``_s16``'s parameters and weights in the
layout of CMSIS-NN's unit tests, ``--calibration``) and ``zdnn`` (the
stickified weight and bias ztensors as a C header, or a ``.bin`` of the buffers with a ``.json`` manifest) and
``tflite`` (a LiteRT model of fused UNIDIRECTIONAL_SEQUENCE_LSTM / _RNN ops, ``--scheme float|hybrid|int8x16``;
int8x16 needs ``--calibration``; a layer or a stack; ``--batch`` / ``--time`` fix those axes; int8x16 models run on
LiteRT, on TensorFlow Lite for Microcontrollers and, through Arm's Vela compiler, on Ethos-U NPUs).

Calibration (``--calibration NPZ|NPY``): input sequences in the source's layout ([T, B, I]; [B, T, I] for a
batch-first source such as Keras): the npz's only array, or its array ``X`` / ``x`` / ``input``.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import click
import numpy as np
import onnx
from onnx import numpy_helper

from .. import layers, litert, quark
from .. import targets as registry
from ..errors import FusedRNNError
from ..frontends.archives import open_zip, read_arrays, sniff
from ..frontends.c_export import cmsis_nn_export, mli_export, zdnn_export
from ..frontends.keras import check_keras_file, from_keras
from ..frontends.model_files import sniff as sniff_model
from ..frontends.onnx_graph import layer_list, stack_model
from ..frontends.onnx_load import read_model as read_onnx
from ..frontends.onnx_node import batch_major_wrapped
from ..frontends.torch import check_storage, from_torch, module_from_state_dict, state_dict_groups
from ..targets.litert.export import export as litert_export
from ..targets.litert.reader import read_model
from ..validation import brief
from . import options as options_mod
from . import render
from .common import CLIError, delayed_progress
from .feeds import display_name
from .models import open_model
from .options import ModelOptions
from .staging import staged_files

FILE_FORMATS = {"onnx": ".onnx", "torch": ".pt", "keras": ".keras", "quark": ".onnx", "zdnn": ".h",
                "tflite": ".tflite"}
TFLITE_SCHEMES = ("float", "hybrid", "int8x16")
SOURCE_SUFFIXES = (".onnx", ".pt", ".pth", ".pt2", ".keras", ".h5", ".tflite")
TORCH_SUFFIXES = (".pt", ".pth", ".pt2")


def mli_formats() -> list[str]:
    return [t.name for t in registry.list() if t.family == "mli"]


def cmsis_nn_formats() -> list[str]:
    return [t.name for t in registry.list() if t.family == "cmsis-nn"]


def header_formats() -> list[str]:
    """The targets whose weights ``convert`` writes as a quantized C header (needs calibration)."""
    return [*mli_formats(), *cmsis_nn_formats()]


def formats() -> list[str]:
    return [*FILE_FORMATS, *header_formats()]


# ---- sources --------------------------------------------------------------------------------------------------
def load_source(path: Path, node: str | None = None, nonlinearity: str = "tanh", batch_first: bool | None = None):
    """(layer or Stack, description) of the recurrent weights in ``path``: one recurrent node / layer / module,
    or, when there are several and ``node`` is None, the :class:`~fusedrnn.Stack` of them all in the order the
    model applies them. ``batch_first`` (``--batch-first/--time-major``) sets the layout of a PyTorch source,
    whose files do not record it (default: time-major, PyTorch's default)."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return _from_onnx(path, node)
    if suffix in (".pt", ".pth", ".pt2"):
        layer, what = _from_torch(path, node, nonlinearity)
        if batch_first is not None:
            layer = _with_layout(layer, batch_first)
        return layer, what
    if suffix in (".keras", ".h5"):
        return _from_keras(path, node)
    if suffix == ".tflite":
        return _from_tflite(path, node)
    raise CLIError(f"SRC: unknown model file type {path.suffix or '(no suffix)'!r} of {path}; expected one of "
                   f"{', '.join(SOURCE_SUFFIXES)}")


def _with_layout(layer, batch_first: bool):
    out = []
    for one in layer_list(layer):
        one = copy.copy(one)
        one.batch_first = batch_first
        out.append(one)
    return layers.Stack(out) if isinstance(layer, layers.Stack) else out[0]


def _stack(found: dict, what: str, source: str):
    """The Stack of the recurrent layers ``found`` ({name: layer}, in the model's order); the two directions of
    every layer are concatenated (as PyTorch, Keras and the exporters' Transpose + Reshape after an ONNX node
    do), and every
    layer takes the first one's layout (an exporter's nodes between Transposes are time-major inside a
    batch-major model)."""
    ls = []
    first = next(iter(found.values()))
    for layer in found.values():
        layer = copy.copy(layer)
        if layer.merge == "stack":
            layer.merge = "concat"
        layer.batch_first = first.batch_first  # exporters move the time axis between nodes; the stack's is one
        ls.append(layer)
    try:
        return layers.Stack(ls), f"{source}: {len(ls)} {what}s as a stack ({', '.join(map(brief, found))})"
    except FusedRNNError as exc:
        raise CLIError(f"SRC: the {len(ls)} {what}s ({', '.join(map(brief, found))}) do not chain into a stack "
                       f"({exc}); pick one with --node") from None


def _pick(found: dict, node: str | None, what: str, option: str = "--node"):
    if node is not None:
        if node not in found:
            raise CLIError(f"{option}: no {what} called {node!r}; found {', '.join(map(brief, found)) or 'none'}")
        return node, found[node]
    if len(found) != 1:
        names = ", ".join(map(brief, found))
        raise CLIError(f"SRC: expected one {what}, found {len(found)}" + (f" ({names}); pick one with {option}"
                                                                          if found else ""))
    return next(iter(found.items()))


def _from_onnx(path: Path, node_name: str | None):
    try:
        model = read_onnx(path)
    except (FusedRNNError, OSError) as exc:
        raise CLIError(f"SRC: {exc}") from None
    rec = [n for n in model.graph.node if n.op_type in ("LSTM", "GRU", "RNN") and n.domain in ("", "ai.onnx")]
    others = [n for n in model.graph.node if n.op_type in ("ExtendedLSTM", "DynamicQuantizeLSTM")]
    found = {n.name or f"{n.op_type}#{k}": n for k, n in enumerate(rec)}
    if not found and others:
        raise CLIError(f"SRC: {others[0].domain}::{others[0].op_type} nodes are not a convert source yet (their "
                       f"weights are quantized); convert the float model instead")
    if node_name is None and len(found) > 1:
        return _stack({name: _onnx_layer(model, name, n)[0] for name, n in found.items()}, "LSTM/GRU/RNN node",
                      "ONNX")
    name, node = _pick(found, node_name, "LSTM/GRU/RNN node")
    return _onnx_layer(model, name, node)


def _onnx_layer(model, name: str, node):
    inits = {t.name: t for t in model.graph.initializer}
    arrays = {}
    for slot, inp in zip(("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"), node.input,
                         strict=False):
        if inp and slot in ("W", "R", "B", "P"):
            if inp not in inits:
                raise CLIError(f"SRC: input {slot} ({brief(inp)}) of node {brief(name)} is not an initializer; only "
                               f"constant weights can be converted")
            arrays[slot] = numpy_helper.to_array(inits[inp])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: (v.decode() if isinstance(v, bytes) else [x.decode() for x in v]
                 if isinstance(v, list) and v and isinstance(v[0], bytes) else v) for k, v in attrs.items()}
    if batch_major_wrapped(model, node):
        attrs["layout"] = 1
    cls = {"LSTM": "LSTM", "GRU": "GRU", "RNN": "RNN"}[node.op_type]
    if "W" not in arrays or "R" not in arrays:
        raise CLIError(f"SRC: node {brief(name)} lacks its W or R input")
    try:
        layer = getattr(layers, cls).from_onnx(arrays["W"], arrays["R"], arrays.get("B"), arrays.get("P"), **attrs)
    except TypeError as exc:  # an attribute of the wrong name or kind, from the file
        raise CLIError(f"SRC: node {brief(name)} has attributes {cls}.from_onnx does not take "
                       f"({brief(str(exc), 100)})") from None
    assert isinstance(layer, layers.RecurrentLayer)
    return layer, f"ONNX {node.op_type} node {name!r}"


def _torch():
    try:
        import torch
    except ImportError:
        raise CLIError("SRC: reading .pt files needs PyTorch (pip install fusedrnn[torch])") from None
    return torch


def _from_torch(path: Path, prefix: str | None, nonlinearity: str):
    torch = _torch()
    nn = torch.nn
    allowed = [nn.LSTM, nn.GRU, nn.RNN, nn.LSTMCell, nn.GRUCell, nn.RNNCell]
    try:
        if sniff(path) == "zip":  # torch.save's format: the members' sizes must fit the file
            open_zip(path, "SRC").close()
        kind = sniff_model(path) if sniff(path) == "zip" else "torch-state-dict"
        if kind == "torch-export":
            obj = dict(torch.export.load(os.fspath(path)).state_dict)
        elif kind == "torchscript":
            obj = dict(torch.jit.load(os.fspath(path), map_location="cpu").state_dict())
        else:
            with torch.serialization.safe_globals(allowed):
                obj = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - pickle errors of every kind
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CLIError(f"SRC: {path} cannot be loaded with torch.load(weights_only=True): {brief(first, 200)} (save "
                       f"the module's state_dict() instead)") from None
    try:
        if isinstance(obj, nn.Module):
            check_storage(dict(obj.named_parameters()), f"SRC: {path}")
            return from_torch(obj), f"PyTorch {type(obj).__name__}"
        if not isinstance(obj, dict):
            raise CLIError(f"SRC: expected a state dict or an nn.LSTM/GRU/RNN in {path}, got {type(obj).__name__}")
        groups = state_dict_groups(obj)
        if not groups:
            raise CLIError(f"SRC: no recurrent weights (weight_ih_l0, weight_hh_l0, ...) in the state dict {path}")
        name, sd = _pick(groups, prefix, "recurrent module in the state dict", "--node")
        module = module_from_state_dict(sd, nonlinearity, f"SRC: {brief(name) if name else 'state dict'}")
        return from_torch(module), f"PyTorch state dict{' ' + repr(name) if name else ''} ({type(module).__name__})"
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None


def _keras():
    try:
        import keras
    except ImportError as exc:
        raise CLIError(f"reading or writing .keras files needs Keras 3 with a backend that imports ({exc}); pip "
                       f"install 'fusedrnn[keras]' and set KERAS_BACKEND to torch, jax or tensorflow") from None
    return keras


def _keras_recurrent(keras, model) -> dict:
    kinds = (keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN, keras.layers.Bidirectional,
             keras.layers.RNN)
    found: dict = {}

    def walk(layer):
        if isinstance(layer, kinds):
            found[layer.name] = layer
        elif hasattr(layer, "layers"):
            for sub in layer.layers:
                walk(sub)

    walk(model)
    return found


def _from_keras(path: Path, name: str | None):
    keras = _keras()
    try:
        if path.suffix.lower() == ".keras":
            check_keras_file(path, "SRC")
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    try:
        model = keras.saving.load_model(os.fspath(path), compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001 - zip, json and deserialisation errors
        raise CLIError(f"SRC: {path} is not a loadable .keras model ({type(exc).__name__}: "
                       f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})") from None
    found = _keras_recurrent(keras, model)
    if name is None and len(found) > 1:
        try:
            return _stack({k: from_keras(v) for k, v in found.items()}, "Keras recurrent layer", "Keras")
        except FusedRNNError as exc:
            raise CLIError(f"SRC: {exc}") from None
    layer_name, layer = _pick(found, name, "Keras recurrent layer")
    return from_keras(layer), f"Keras {type(layer).__name__} {layer_name!r}"


def _from_tflite(path: Path, node: str | None):
    model = litert.load(path)
    n = len(model.ops)
    if node is None and n > 1:
        merged = _tflite_layers([litert.layer_from_tflite(None, model, k) for k in range(n)])
        if merged is not None:
            if len(merged) == 1:
                return merged[0], f"LiteRT ops 0-{n - 1} (one bidirectional layer)"
            return _stack({f"op{k}": m for k, m in enumerate(merged)}, "LiteRT layer", "LiteRT")
    if node is None and n != 1:
        raise CLIError(f"SRC: expected one recurrent op in {path}, found {n}" +
                       (f"; pick one with --node INDEX (0 to {n - 1})" if n else ""))
    try:
        index = 0 if node is None else int(node)
    except ValueError:
        raise CLIError(f"--node: a .tflite source takes the recurrent op's index (0 to {n - 1}), got {node!r}") \
            from None
    if not 0 <= index < n:
        raise CLIError(f"--node: the model has {n} recurrent op(s); expected an index 0 to {n - 1}, got {index}")
    return litert.layer_from_tflite(None, model, index), f"LiteRT op {index}"


def _tflite_layers(ops: list) -> list | None:
    """The layers of a .tflite graph's recurrent ops, a forward op followed by a reverse one of the same cell and
    sizes joined into one bidirectional layer (how ``litert.export`` and the TF converter write a bidirectional
    layer: two unidirectional ops, the second between REVERSE_V2 ops, CONCATENATION); None when the ops do not
    pair up so."""
    out, k = [], 0
    while k < len(ops):
        a = ops[k]
        b = ops[k + 1] if k + 1 < len(ops) else None
        if (b is not None and a.direction == "forward" and b.direction == "reverse" and b.output_order == "time"
                and type(a) is type(b) and a.W.shape == b.W.shape and a.batch_first == b.batch_first):
            out.append(_bidirectional(a, b))
            k += 2
        elif a.direction == "reverse":
            return None
        else:
            out.append(a)
            k += 1
    return out


def _bidirectional(fw, bw):
    """One two-direction layer of a forward and a reverse layer (weights, biases, activations, clip; an LSTM's
    peepholes and cell clip)."""
    def cat(x, y):
        return None if x is None or y is None else np.concatenate([x, y])

    extra = {}
    if isinstance(fw, layers.LSTM):
        if fw.proj_W is not None or fw.layer_norm is not None or fw.coupling is not None:
            raise CLIError("SRC: a bidirectional pair of LSTM ops with a projection, layer norm or CIFG; convert "
                           "one op with --node INDEX")
        extra = {"P": cat(fw.P, bw.P), "cell_clip": fw.cell_clip}
    return type(fw)(cat(fw.W, bw.W), cat(fw.R, bw.R), cat(fw.b_x, bw.b_x), cat(fw.b_h, bw.b_h),
                    direction="bidirectional", activations=[list(fw.activations[0]), list(bw.activations[0])],
                    clip=fw.clip, batch_first=fw.batch_first, merge="concat", **extra)


# ---- calibration ----------------------------------------------------------------------------------------------
def load_calibration(path: Path, file_batch_first: bool | None = None, layer_batch_first: bool | None = None
                     ) -> np.ndarray:
    """The calibration sequences of ``path`` (an .npy, or an npz's only array or its X / x / input), read
    through :func:`fusedrnn.frontends.archives.read_arrays` (claims checked, no object arrays), in the layer's
    layout: when ``file_batch_first`` (``--batch-first/--time-major``) and ``layer_batch_first`` are both known
    and differ, the first two axes are swapped."""
    try:
        data = read_arrays(path, "--calibration")
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    if isinstance(data, np.ndarray):
        a = data
    else:
        names = list(data)
        key = names[0] if len(names) == 1 else next((n for n in ("X", "x", "input") if n in names), None)
        if key is None:
            raise CLIError(f"--calibration: expected one array (or one called X, x or input) in {path}, found "
                           f"{', '.join(display_name(n) for n in names[:8]) or 'none'}")
        a = data[key]
    if a.ndim != 3 or a.dtype.kind != "f":
        raise CLIError(f"--calibration: expected float input sequences of rank 3, got {a.dtype} {a.shape}")
    if file_batch_first is not None and layer_batch_first is not None and file_batch_first != layer_batch_first:
        a = np.swapaxes(a, 0, 1)
    return np.ascontiguousarray(a, np.float32)


# ---- writers --------------------------------------------------------------------------------------------------
def _single(layer, fmt: str):
    if isinstance(layer, layers.Stack):
        raise CLIError(f"--to {fmt}: the source is a stack of {len(layer)} layers; {fmt} output holds one "
                       f"recurrent layer (one bidirectional LSTM: Quark's ExtendedLSTM); pick one with --node")
    return layer


def _write_onnx(layer, out: Path, state_inputs: bool = False) -> None:
    onnx.save(stack_model(layer, state_inputs=state_inputs), os.fspath(out))


def _write_torch(layer, out: Path) -> None:
    torch = _torch()
    torch.save(layer.to_torch().state_dict(), os.fspath(out))


def _write_keras(layer, out: Path) -> None:
    ls = []
    for one in layer_list(layer):
        if one.merge == "stack" and one.num_directions == 1:  # the output layout, not a weight
            one = copy.copy(one)
            one.merge = "concat"
        ls.append(one)
    keras = _keras()
    model = keras.Sequential([keras.Input(shape=(None, ls[0].input_size)), *(one.to_keras() for one in ls)])
    model.save(os.fspath(out))


def _write_quark(layer, out: Path, cal) -> str:
    conv = quark.convert(_single(layer, "quark"), cal)
    onnx.save(conv.model, os.fspath(out))
    return str(conv.report)


def _write_tflite(layer, out: Path, scheme: str, cal, batch: int | None, time_steps: int | None = None) -> str:
    content = litert_export(layer, out, scheme, cal, batch=batch, time=time_steps)
    ops = [op.name for op in read_model(content).ops]
    return f"{len(content)} bytes, {scheme}: {', '.join(ops)}"


def _write_c(export, out: Path, guard_base: str) -> None:
    guard = "FUSEDRNN_" + re.sub(r"[^A-Za-z0-9]", "_", guard_base).upper() + "_H"
    out.write_text(export.header(guard), encoding="ascii")


def _write_zdnn_bin(export, out: Path) -> Path:
    """Buffers back to back (each a multiple of 4096 bytes) and a JSON manifest next to them."""
    manifest, offset = {"format": "fusedrnn zdnn ztensor buffers", "ztensors": []}, 0
    with open(out, "wb") as f:
        for name, zt in export.ztensors.items():
            data = np.asarray(zt.buffer, np.uint8).tobytes()
            f.write(data)
            desc = {}
            for which, d in (("pre_transformed_desc", zt.pre_transformed_desc),
                             ("transformed_desc", zt.transformed_desc)):
                desc[which] = {"layout": int(d.layout), "format": int(d.format), "type": int(d.type),
                               "dims": [int(x) for x in d.dims]}
            manifest["ztensors"].append({"name": name, "offset": offset, "bytes": len(data), **desc,
                                         "concat_info": export.defines[f"{name.upper()}_CONCAT_INFO"]})
            offset += len(data)
    side = out.with_suffix(out.suffix + ".json")
    side.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return side


def _write(fmt: str, layer, out: Path, cal, scheme: str, batch: int | None, guard_base: str,
           time_steps: int | None = None, state_inputs: bool = False) -> str:
    """Write ``layer`` as ``fmt`` to ``out`` (a staged path); returns an extra line for the user (or "")."""
    if fmt == "onnx":
        _write_onnx(layer, out, state_inputs)
    elif fmt == "torch":
        _write_torch(layer, out)
    elif fmt == "keras":
        _write_keras(layer, out)
    elif fmt == "quark":
        return _write_quark(layer, out, cal)
    elif fmt == "tflite":
        return _write_tflite(layer, out, scheme, cal, batch, time_steps)
    elif fmt == "zdnn":
        export = zdnn_export(layer)
        if out.suffix == ".bin":
            _write_zdnn_bin(export, out)
        else:
            _write_c(export, out, guard_base)
    elif fmt in cmsis_nn_formats():
        _write_c(cmsis_nn_export(layer, fmt, cal), out, guard_base)
    else:
        _write_c(mli_export(layer, fmt, cal), out, guard_base)
    return ""


def _whole_model(src: Path, fmt: str, out: Path, opts: ModelOptions, state_inputs: bool, printed: str) -> None:
    """``--whole-model``: SRC as ``fusedrnn run`` reads it (:func:`fusedrnn.frontends.model_files.load_model`),
    written as ONNX."""
    if fmt != "onnx":
        raise CLIError(f"--whole-model: writes ONNX models (--to onnx), got --to {fmt}")
    if state_inputs:
        raise CLIError("--state-inputs: applies to the recurrent layers' export, not to --whole-model")
    loaded = open_model(src, opts)
    try:
        with staged_files(out) as (staged,):
            onnx.save(loaded.model.proto, os.fspath(staged))
    except OSError as exc:
        raise CLIError(f"--out: cannot write {out} ({exc.strerror or exc})") from None
    nodes = len(loaded.model.recurrent_nodes)
    summary = {"wrote": str(out), "format": "onnx", "source": str(src), "from": loaded.description,
               "recurrent_nodes": nodes, "batch_first": loaded.batch_first}
    if printed == "json":
        click.echo(json.dumps(summary, indent=2))
    elif printed in ("csv", "markdown"):
        keys = list(summary)
        click.echo((render.csv_text if printed == "csv" else render.markdown_text)(
            keys, [[str(summary[k]) for k in keys]]), nl=False)
    else:
        click.echo(f"wrote {out} (the whole {loaded.description}, {nodes} recurrent node(s)) from {src.name}")


# ---- the command ----------------------------------------------------------------------------------------------
@click.command("convert")
@click.argument("src", metavar="SRC", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "fmt", required=True, metavar="FORMAT",
              help="onnx, torch, keras, quark, zdnn, tflite, an MLI target (mli2-sa8, mli2-fx16, mli2-fx16_fx8_fx8, "
                   "mli1-fx16, mli1-fx8, mli1-fx8w16d) or a CMSIS-NN target (cmsis-nn-s8, cmsis-nn-s16).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Output file (default: SRC's name with the format's suffix; zdnn: .h, or .bin for raw buffers).")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
              help="Input sequences to choose the quantization from (mli*, cmsis-nn*, quark, tflite int8x16): "
                   "[T, B, I], "
                   "[B, T, I] for a "
                   "batch-first source; the npz's only array or its array X.")
@click.option("--node", metavar="NAME", help="Which recurrent node (ONNX node name, Keras layer name, state dict "
                                             "prefix, .tflite op index) when SRC has several.")
@click.option("--nonlinearity", type=click.Choice(["tanh", "relu"]), default="tanh", show_default=True,
              help="The nn.RNN nonlinearity of a state dict (it is not stored in the weights).")
@click.option("--batch-first/--time-major", "batch_first", default=None,
              help="The layout of the calibration sequences ([batch, time, features] or [time, batch, features]) "
                   "and of a PyTorch source's modules, which its file does not record (then required with "
                   "--calibration). Default: the source's own layout.")
@click.option("--whole-model", is_flag=True,
              help="--to onnx: the whole model (recurrent layers and the rest: Dense / Linear heads, ...) as "
                   "fusedrnn run reads it, instead of the recurrent layers only.")
@click.option("--layers", "model_layers", metavar="PREFIXES",
              help="--whole-model of a PyTorch state dict: its modules in the order the model applies them "
                   "(e.g. lstm,head).")
@click.option("--state-inputs", is_flag=True,
              help="--to onnx: add the inputs sequence_lens, h_0 (, c_0) [layers*directions, batch, hidden]; "
                   "without it the model's only input is x.")
@options_mod.output_options
@click.option("--scheme", type=click.Choice(TFLITE_SCHEMES), default="float", show_default=True,
              help="--to tflite: float, hybrid (int8 weights) or int8x16 (full integer, needs --calibration).")
@click.option("--batch", type=click.IntRange(min=1), default=None, metavar="N",
              help="--to tflite: the model's fixed batch size (default: the calibration's, else 1).")
@click.option("--time", "time_steps", type=click.IntRange(min=1), default=None, metavar="T",
              help="--to tflite: a fixed number of timesteps (default: a dynamic time axis; Arm's Vela compiler "
                   "for Ethos-U needs a fixed one).")
def convert(src: Path, fmt: str, out: Path | None, calibration: Path | None, node: str | None,
            nonlinearity: str, scheme: str = "float", batch: int | None = None, time_steps: int | None = None,
            batch_first: bool | None = None, state_inputs: bool = False, out_format: str | None = None,
            as_json: bool = False, whole_model: bool = False, model_layers: str | None = None) -> None:
    """Convert the recurrent weights in SRC (.onnx, .pt / .pth state dicts, .pt2 programs, TorchScript, .keras,
    .h5, .tflite) to FORMAT: a model file (onnx, torch, keras, quark, tflite) or a C header for an accelerator
    program (mli2-*, mli1-*, cmsis-nn-*: quantized weights and every quantization parameter; zdnn: stickified
    ztensor buffers and descriptors). A source with several recurrent layers converts as a stack (pick one
    with --node); ONNX output has x as its only input (--state-inputs for more) and y without ONNX's direction
    axis."""
    printed = options_mod.output_format(out_format, as_json)
    fmt = fmt.lower()
    if fmt not in formats():
        raise CLIError(f"--to: unknown format {fmt!r}; expected one of {', '.join(formats())}")
    if not src.is_file():
        raise CLIError(f"SRC: no such file: {src}")
    if calibration is not None and not calibration.is_file():
        raise CLIError(f"--calibration: no such file: {calibration}")
    needs_cal = fmt == "quark" or fmt in header_formats() or (fmt == "tflite" and scheme == "int8x16")
    if needs_cal and calibration is None:
        raise CLIError(f"--calibration: --to {fmt}{' --scheme ' + scheme if fmt == 'tflite' else ''} quantizes "
                       f"the weights and needs calibration inputs (an npz of input sequences)")
    suffix = FILE_FORMATS.get(fmt, ".h")
    if out is None:
        out = src.with_suffix(suffix)
        if out.resolve() == src.resolve():
            out = src.with_name(f"{src.stem}_converted{suffix}")
    elif out.resolve() == src.resolve():
        raise CLIError(f"--out: {out} is SRC; choose another file")
    if fmt == "keras" and out.suffix != ".keras":
        raise CLIError(f"--out: Keras saves .keras files; got {out.name!r}")
    if fmt == "tflite" and out.suffix != ".tflite":
        raise CLIError(f"--out: --to tflite writes a .tflite model; got {out.name!r}")
    if fmt == "zdnn" and out.suffix not in (".h", ".bin"):
        raise CLIError(f"--out: zdnn writes a C header (.h) or raw buffers (.bin); got {out.name!r}")
    if fmt in header_formats() and out.suffix != ".h":
        raise CLIError(f"--out: {fmt} writes a C header (.h); got {out.name!r}")
    if out.parent and not out.parent.is_dir():
        raise CLIError(f"--out: no such folder: {out.parent}")
    extra = ""
    side = out.with_suffix(out.suffix + ".json") if fmt == "zdnn" and out.suffix == ".bin" else None
    if whole_model:
        _whole_model(src, fmt, out, ModelOptions(model_layers, batch_first, nonlinearity), state_inputs, printed)
        return
    with delayed_progress("converting", 3) as steps:
        try:
            steps.begin("reading")
            layer, what = load_source(src, node, nonlinearity, batch_first)
            steps.advance()
            layer_bf = layer_list(layer)[0].batch_first
            if calibration is not None and batch_first is None and src.suffix.lower() in TORCH_SUFFIXES:
                raise CLIError(f"--calibration: {src.name} (PyTorch) does not record whether its modules take "
                               f"[batch, time, features] or [time, batch, features], so the layout of "
                               f"{calibration.name} cannot be told; say it with --batch-first or --time-major")
            cal = load_calibration(calibration, batch_first, layer_bf) if calibration is not None else None
            steps.begin(f"to {fmt}")
            with staged_files(out, *([side] if side else [])) as staged:
                extra = _write(fmt, layer, staged[0], cal, scheme, batch, guard_base=out.stem, time_steps=time_steps,
                               state_inputs=state_inputs)
            if side is not None:
                extra = f"descriptors and offsets in {side}"
            steps.advance()
        except FusedRNNError as exc:
            raise CLIError(f"--to {fmt}: {exc}") from None
        except OSError as exc:
            raise CLIError(f"--out: cannot write {out} ({exc.strerror or exc})") from None
    summary = {"wrote": str(out), "format": fmt, "source": str(src), "from": what,
               "layers": len(layer_list(layer)), "batch_first": layer_list(layer)[0].batch_first, "note": extra}
    if printed == "json":
        click.echo(json.dumps(summary, indent=2))
    elif printed in ("csv", "markdown"):
        keys = list(summary)
        rows = [[str(summary[k]) for k in keys]]
        click.echo((render.csv_text if printed == "csv" else render.markdown_text)(keys, rows), nl=False)
    else:
        click.echo(f"wrote {out} ({fmt}) from {what} in {src.name}")
        if extra:
            click.echo(extra)


__all__ = ["convert", "formats", "header_formats", "load_calibration", "load_source"]
