"""Whole model files of every format the CLI takes, recognised by their bytes and turned into ONNX models that
:mod:`fusedrnn.frontends.onnx` runs (the recurrent nodes on fusedrnn, the rest in float).

=====================  ==================================  ===========================================================
format                 recognised by                       becomes ONNX through
=====================  ==================================  ===========================================================
``onnx``               ``.onnx`` (protobuf has no magic)   itself
``tflite``             ``TFL3`` at byte 4                  :func:`tflite_model`: each op to ONNX nodes (the recurrent
                                                           ops to LSTM / RNN / GRU nodes, REVERSE_V2, CONCATENATION,
                                                           PACK, ADD, MUL, STRIDED_SLICE, FULLY_CONNECTED)
``keras``              a zip with ``config.json``          :func:`keras_model`: Keras 3, ``safe_mode=True``; the
``keras-h5``           the HDF5 signature                  layers of a chain (recurrent, Bidirectional, Dense,
                                                           Dropout, Activation) to ONNX nodes
``torch-export``       a zip with ``*/models/*.json``      ``torch.export.load`` -> ``torch.onnx.export``
``torchscript``        a zip with ``*/code/``              ``torch.jit.load`` -> ``torch.onnx.export``
``torch-state-dict``   any other zip / pickle              ``torch.load(weights_only=True)``, the modules named in
                                                           ``layers`` (or the one recurrent module) -> ``torch.onnx.
                                                           export``
=====================  ==================================  ===========================================================

PyTorch models go through PyTorch's own ONNX exporter (its TorchScript-based one, ``dynamo=False``, which needs
no extra package and writes ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` as ONNX recurrent nodes). Keras' own ONNX
export (``model.export(format="onnx")``) is not used: on the torch and JAX backends it traces the recurrent
layers step by step, and a graph of unrolled MatMuls has no recurrent node left to emulate (tf2onnx, on the
TensorFlow backend, needs TensorFlow). Nothing in a file is executed as Python: ``torch.load`` runs with
``weights_only=True``, Keras with ``safe_mode=True`` (no ``Lambda`` bytecode).

The layout of the model's sequence inputs (``batch_first``: [B, T, I] or [T, B, I]) is in the file for every
format but a state dict; :class:`LoadedModel` says it (None when the model has no recurrent node to tell).
"""

from __future__ import annotations

import copy
import io
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..errors import ConversionError, FileFormatError, FusedRNNError, UnsupportedFeatureError
from ..layers import RecurrentLayer
from ..targets.litert.graph import load as load_tflite
from ..validation import brief
from . import onnx as fonnx
from .archives import open_zip
from .keras import check_keras_file, from_keras
from .onnx_graph import Dense, GraphBuilder, LastStep, stack_model
from .tflite import layer_from_tflite
from .torch import check_storage, module_from_state_dict, state_dict_groups

EXTRAS = {"torch-export": "torch", "torchscript": "torch", "torch-state-dict": "torch", "keras": "keras",
          "keras-h5": "keras", "tflite": None, "onnx": None}
"""The pyproject extra each format needs (None: the core package)."""
SUFFIXES = {".onnx": "onnx", ".tflite": "tflite", ".keras": "keras", ".h5": "keras-h5", ".hdf5": "keras-h5",
            ".pt2": "torch-export", ".pt": "torch-state-dict", ".pth": "torch-state-dict"}
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
PICKLE_MAGIC = b"\x80"
TORCH_FORMATS = ("torch-export", "torchscript", "torch-state-dict")


class MissingExtraError(UnsupportedFeatureError):
    """A format whose framework is not installed; the message names the extra to install."""


@dataclass
class LoadedModel:
    """A model file as an ONNX model: ``model`` (a :class:`fusedrnn.onnx.Model`), its ``format`` (a key of
    :data:`EXTRAS`), ``description`` (one line for people) and ``batch_first`` (the recurrent inputs' layout;
    None when no recurrent layer tells it)."""

    model: fonnx.Model
    format: str
    description: str
    batch_first: bool | None


def sniff(path: Path) -> str:
    """The format of ``path`` (a key of :data:`EXTRAS`) from its first bytes and, for zips, its member names;
    the suffix decides only between formats without a signature (ONNX) and between ``.pt`` state dicts and
    ``.pt2`` programs. Raises FileFormatError for a file of none of them."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(8)
    if head[4:8] == b"TFL3":
        return "tflite"
    if head == HDF5_MAGIC:
        return "keras-h5"
    if head[:4] == b"PK\x03\x04":
        with open_zip(path, "MODEL") as z:
            names = z.namelist()
        if "config.json" in names and any(n.endswith(".weights.h5") for n in names):
            return "keras"
        if any("/models/" in n and n.endswith(".json") for n in names) or "archive_format" in \
                {n.rsplit("/", 1)[-1] for n in names}:
            return "torch-export"
        if any("/code/" in n for n in names) and any(n.endswith("constants.pkl") for n in names):
            return "torchscript"
        if any(n.endswith("data.pkl") for n in names):
            return "torch-state-dict"
        raise FileFormatError(f"MODEL: {brief(str(path))} is a zip archive of no model format fusedrnn reads "
                              f"(.keras, torch.save, torch.export, TorchScript)")
    if head[:1] == PICKLE_MAGIC and path.suffix.lower() in (".pt", ".pth"):
        return "torch-state-dict"
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt == "onnx":
        return fmt
    raise FileFormatError(f"MODEL: cannot tell the format of {brief(str(path))} (suffix "
                          f"{path.suffix or '(none)'!r}); expected ONNX (.onnx), LiteRT (.tflite), Keras 3 (.keras, "
                          f".h5) or PyTorch (.pt2 from torch.export, TorchScript, a torch.save state dict)")


def _need(fmt: str):
    extra = EXTRAS[fmt]
    module = "torch" if extra == "torch" else "keras"
    try:
        if module == "keras":
            import keras
            return keras
        import torch
        return torch
    except ImportError as exc:
        backend = " and a backend chosen with KERAS_BACKEND (torch, jax or tensorflow)" if module == "keras" else ""
        raise MissingExtraError(f"MODEL: reading {fmt} files needs {module}{backend} ({exc}); install it with "
                                f"pip install 'fusedrnn[{extra}]'") from None


def load_model(path: Path, *, layers: str | None = None, batch_first: bool | None = None,
               nonlinearity: str = "tanh", example: dict | None = None, state_inputs: bool = False) -> LoadedModel:
    """The model in ``path`` as a :class:`LoadedModel` (module docstring).

    ``layers``: for a state dict, the module prefixes in the order the model applies them (``"lstm,head"``:
    recurrent modules and ``nn.Linear`` heads); ``batch_first``: the layout of a state dict's modules (which a
    state dict does not record; required there); ``nonlinearity``: an ``nn.RNN``'s; ``example``: {name: array}
    of inputs to trace a PyTorch program or TorchScript module with (default: the shapes recorded in a
    ``.pt2``)."""
    path = Path(path)
    fmt = sniff(path)
    if fmt == "onnx":
        model = fonnx.load(path)
        return LoadedModel(model, fmt, f"ONNX model {path.name}", _onnx_layout(model.proto))
    if fmt == "tflite":
        proto, bf = tflite_model(path)
        return LoadedModel(fonnx.load(proto), fmt, f"LiteRT model {path.name}", bf)
    if fmt in ("keras", "keras-h5"):
        proto, bf = keras_model(path, _need(fmt))
        return LoadedModel(fonnx.load(proto), fmt, f"Keras model {path.name}", bf)
    torch = _need(fmt)
    if fmt == "torch-state-dict":
        proto, bf = torch_state_dict_model(torch, path, layers, batch_first, nonlinearity, state_inputs)
        return LoadedModel(fonnx.load(proto), fmt, f"PyTorch state dict {path.name}", bf)
    proto = torch_program_model(torch, path, fmt, example)
    return LoadedModel(fonnx.load(proto), fmt, f"PyTorch {'exported program' if fmt == 'torch-export' else fmt} "
                                               f"{path.name}", _onnx_layout(proto))


# ---- layouts --------------------------------------------------------------------------------------------------
def _onnx_layout(proto: onnx.ModelProto) -> bool | None:
    """batch_first of an ONNX model's first recurrent node: layout=1, or a Transpose [1, 0, 2] from a graph input
    in front of it (how exporters write batch-major models); None without a recurrent node."""
    graph = proto.graph
    producers = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}
    for node in graph.node:
        if node.op_type not in ("LSTM", "GRU", "RNN") or node.domain not in ("", "ai.onnx"):
            continue
        if any(a.name == "layout" and a.i == 1 for a in node.attribute):
            return True
        x, hops = node.input[0], 0
        while x not in inputs and x in producers and hops < 8:
            p = producers[x]
            if p.op_type == "Transpose":
                perm = next((list(a.ints) for a in p.attribute if a.name == "perm"), [])
                if perm[:2] == [1, 0]:
                    return True
            x, hops = p.input[0] if p.input else "", hops + 1
        return False
    return None


# ---- PyTorch --------------------------------------------------------------------------------------------------
def _export_torch(torch, module, example: tuple, names: list[str], dynamic: bool) -> onnx.ModelProto:
    """``torch.onnx.export`` (TorchScript-based, no onnxscript needed) of ``module`` traced on ``example``."""
    buf = io.BytesIO()
    axes = {n: {0: f"{n}_dim0", 1: f"{n}_dim1"} for n in names} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, buf, dynamo=False, input_names=names, output_names=["y"],
                          dynamic_axes=axes, training=torch.onnx.TrainingMode.PRESERVE, opset_version=17)
    return onnx.load_from_string(buf.getvalue())


def _torch_load(torch, path: Path):
    try:
        if zipfile.is_zipfile(path):  # torch.save's format: the members' sizes must fit the file
            open_zip(path, "MODEL").close()
        return torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except FusedRNNError:
        raise
    except Exception as exc:  # noqa: BLE001 - pickle errors of every kind
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FileFormatError(f"MODEL: {brief(str(path))} cannot be loaded with torch.load(weights_only=True): "
                              f"{brief(first, 200)}; save a state_dict(), torch.export.save a program or "
                              f"torch.jit.save a scripted module") from None


def _linear(sd: dict, prefix: str):
    w, b = sd.get(f"{prefix}.weight"), sd.get(f"{prefix}.bias")
    if w is None or w.ndim != 2 or (b is not None and tuple(b.shape) != (w.shape[0],)):
        return None
    return w, b


def torch_state_dict_model(torch, path: Path, layers: str | None, batch_first: bool | None, nonlinearity: str,
                           state_inputs: bool = False) -> tuple[onnx.ModelProto, bool]:
    """The ONNX model of a state dict's modules in the order ``layers`` names them (recurrent modules and
    ``nn.Linear`` heads); without ``layers`` the state dict must hold one recurrent module and nothing else."""
    sd = _torch_load(torch, path)
    if isinstance(sd, torch.nn.Module):
        sd = sd.state_dict()
    if not isinstance(sd, dict):
        raise FileFormatError(f"MODEL: expected a state dict in {brief(str(path))}, got {type(sd).__name__}")
    check_storage({k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}, f"MODEL: {path.name}")
    groups = state_dict_groups(sd)
    if layers is None:
        if len(groups) != 1 or len(next(iter(groups.values()), {})) != len(sd):
            found = ", ".join(sorted({k.rsplit(".", 1)[0] for k in sd if "." in k})) or "none"
            raise ConversionError(f"--layers: the state dict {brief(path.name)} holds more than one recurrent "
                                  f"module's weights (modules: {brief(found, 200)}); name the modules in the order "
                                  f"the model applies them, e.g. --layers lstm,head")
        order = [next(iter(groups))]
    else:
        order = [p.strip() for p in layers.split(",") if p.strip()]
    if batch_first is None:
        raise ConversionError("--batch-first/--time-major: a state dict does not record whether its recurrent "
                              "modules take [batch, time, features] or [time, batch, features]; say which with "
                              "--batch-first or --time-major")
    modules = []
    for prefix in order:
        if prefix in groups:
            m = module_from_state_dict(groups[prefix], nonlinearity, f"MODEL: {brief(prefix) or 'state dict'}")
            if m.batch_first != batch_first:
                m = type(m)(**{**_rnn_kwargs(m), "batch_first": batch_first})
                m.load_state_dict(groups[prefix])
            modules.append(("rnn", m))
            continue
        lin = _linear(sd, prefix)
        if lin is None:
            known = sorted(set(groups) | {k.rsplit(".", 1)[0] for k in sd if k.endswith(".weight")})
            raise ConversionError(f"--layers: no recurrent module or nn.Linear called {brief(prefix)} in "
                                  f"{brief(path.name)}; it holds {brief(', '.join(known), 200)}")
        w, b = lin
        m = torch.nn.Linear(w.shape[1], w.shape[0], bias=b is not None, dtype=w.dtype)
        m.load_state_dict({"weight": w, **({"bias": b} if b is not None else {})})
        modules.append(("linear", m))
    if modules[0][0] != "rnn":
        raise ConversionError(f"--layers: the first module ({order[0]}) must be a recurrent one")

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mods = torch.nn.ModuleList([m for _, m in modules])

        def forward(self, x):
            for (kind, _), m in zip(modules, self.mods, strict=True):
                x = m(x)[0] if kind == "rnn" else m(x)
            return x

    first = modules[0][1]
    x = torch.zeros((2, 3, first.input_size) if batch_first else (3, 2, first.input_size), dtype=torch.float32)
    chain = Chain().eval()
    return _export_torch(torch, chain, (x,), ["x"], dynamic=True), batch_first


def _rnn_kwargs(m) -> dict:
    kw = dict(input_size=m.input_size, hidden_size=m.hidden_size, num_layers=m.num_layers, bias=m.bias,
              bidirectional=m.bidirectional, dtype=m.weight_ih_l0.dtype)
    if getattr(m, "proj_size", 0):
        kw["proj_size"] = m.proj_size
    if hasattr(m, "nonlinearity"):
        kw["nonlinearity"] = m.nonlinearity
    return kw


def _example_for(names: list[str], example: dict | None, shapes: list | None, what: str) -> tuple:
    if example:
        arrays = [example.get(n) for n in names]
        if any(a is None for a in arrays) and len(names) == 1 and len(example) == 1:
            arrays = list(example.values())
        if all(a is not None for a in arrays):
            return tuple(np.asarray(a, np.float32) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
                         for a in arrays)
    if shapes is not None and all(s is not None for s in shapes):
        return tuple(np.zeros(s, np.float32) for s in shapes)
    raise ConversionError(f"MODEL: a {what} is traced to become ONNX and needs example inputs "
                          f"({', '.join(names)}); give them with --data")


def torch_program_model(torch, path: Path, fmt: str, example: dict | None) -> onnx.ModelProto:
    """ONNX of a ``torch.export`` program (``.pt2``) or a TorchScript module, traced on ``example``."""
    try:
        if fmt == "torch-export":
            ep = torch.export.load(os.fspath(path))
            names = list(ep.graph_signature.user_inputs)
            vals = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
            shapes = []
            for n in names:
                v = vals.get(n)
                dims = None if v is None else [d if isinstance(d, int) else None for d in v.shape]
                shapes.append(None if dims is None or None in dims else dims)
            module = ep.module()
            what = "torch.export program"
        else:
            module = torch.jit.load(os.fspath(path), map_location="cpu")
            names = [a.name for a in module.forward.schema.arguments[1:]]
            shapes = None
            what = "TorchScript module"
    except FusedRNNError:
        raise
    except Exception as exc:  # noqa: BLE001 - the loaders' errors of every kind
        raise FileFormatError(f"MODEL: {brief(str(path))} cannot be loaded as a {fmt} file "
                              f"({type(exc).__name__}: {brief(str(exc), 200)})") from None
    args = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in _example_for(names, example, shapes, what))
    try:
        return _export_torch(torch, module, args, names, dynamic=fmt == "torchscript")
    except Exception as exc:  # noqa: BLE001 - the exporter's errors of every kind
        raise ConversionError(f"MODEL: torch.onnx.export of the {what} {brief(path.name)} failed "
                              f"({type(exc).__name__}: {brief(str(exc), 200)})") from None


# ---- Keras ----------------------------------------------------------------------------------------------------
_KERAS_SKIP = ("InputLayer", "Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout",
               "ActivityRegularization")


def keras_model(path: Path, keras) -> tuple[onnx.ModelProto, bool]:
    """The ONNX model of a Keras model whose layers form a chain of recurrent layers (LSTM, GRU, SimpleRNN,
    RNN of their cells, Bidirectional), Dense, Activation and Dropout (module docstring)."""
    if path.suffix.lower() == ".keras" or zipfile.is_zipfile(path):
        check_keras_file(path, "MODEL")
    try:
        model = keras.saving.load_model(os.fspath(path), compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001 - zip, json, h5 and deserialisation errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise FileFormatError(f"MODEL: {brief(str(path))} is not a Keras model Keras loads with safe_mode=True "
                              f"({type(exc).__name__}: {brief(first, 200)})") from None
    recurrent = (keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN, keras.layers.Bidirectional,
                 keras.layers.RNN)
    chain = [layer for layer in getattr(model, "layers", []) if type(layer).__name__ not in _KERAS_SKIP]
    if len(getattr(model, "inputs", None) or [None]) != 1 or len(getattr(model, "outputs", None) or [None]) != 1:
        raise UnsupportedFeatureError(f"MODEL: {path.name}: a Keras model with one input and one output is "
                                      f"supported; this one has {len(model.inputs)} and {len(model.outputs)}")
    stages, names = [], []
    for layer in chain:
        cls = type(layer).__name__
        if isinstance(layer, recurrent):
            fl = from_keras(layer)
            cfg = layer.get_config()
            inner = cfg.get("layer", {}).get("config", {}) if cls == "Bidirectional" else cfg
            if inner.get("return_state"):
                raise UnsupportedFeatureError(f"MODEL: layer {layer.name}: return_state=True")
            stages.append(fl)
            names.append(_clean(layer.name) or f"l{len(names)}")
            if not inner.get("return_sequences", False):
                stages.append(LastStep(batch_first=True))
        elif cls == "Dense":
            w = layer.get_weights()
            act = keras.activations.serialize(layer.activation)
            act = act if isinstance(act, str) else act.get("config", {}).get("name", str(act))
            stages.append(Dense(w[0], w[1] if len(w) > 1 else None, act, _clean(layer.name)))
        elif cls == "Activation":
            act = keras.activations.serialize(layer.activation)
            act = act if isinstance(act, str) else act.get("config", {}).get("name", str(act))
            stages.append(Dense(None, None, act))
        else:
            raise UnsupportedFeatureError(f"MODEL: layer {layer.name} ({cls}) of {path.name}: fusedrnn reads Keras "
                                          f"models made of LSTM / GRU / SimpleRNN / Bidirectional, Dense, "
                                          f"Activation and Dropout layers (export other models to ONNX or .tflite)")
    if not any(isinstance(s, RecurrentLayer) for s in stages):
        raise UnsupportedFeatureError(f"MODEL: {path.name} has no recurrent layer")
    proto = stack_model(_fold_activations(stages), name=model.name or "keras", layer_names=names)
    _check_same(keras, model, proto, path)
    return proto, True


def _check_same(keras, model, proto: onnx.ModelProto, path: Path) -> None:
    """Refuse a Keras model whose layers are not the chain they were read as (a functional graph that branches,
    masking, ...): the ONNX model must give Keras' outputs on a random probe."""
    shape = [d if isinstance(d, int) else (2 if k == 0 else 3) for k, d in enumerate(model.inputs[0].shape)]
    probe = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = np.asarray(keras.ops.convert_to_numpy(model(probe)), np.float32)
    got = fonnx.load(proto).run({proto.graph.input[0].name: probe})["y"]
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise UnsupportedFeatureError(f"MODEL: {path.name}: its layers do not compute as a chain of "
                                      f"{', '.join(type(x).__name__ for x in model.layers)} (a branching "
                                      f"functional model, masking or a layer option fusedrnn does not read); "
                                      f"export it to ONNX or .tflite")


def _fold_activations(stages: list) -> list:
    """Activation layers (Dense without a kernel) joined to the Dense before them."""
    out: list = []
    for s in stages:
        if isinstance(s, Dense) and s.kernel is None:
            if not out or not isinstance(out[-1], Dense) or out[-1].activation != "linear":
                raise UnsupportedFeatureError(f"MODEL: an Activation({s.activation}) layer after anything but a "
                                              f"linear Dense is not supported")
            out[-1] = Dense(out[-1].kernel, out[-1].bias, s.activation, out[-1].name)
        else:
            out.append(s)
    return out


# ---- LiteRT ---------------------------------------------------------------------------------------------------
_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max
_FUSED = {"NONE": None, "RELU": "Relu", "TANH": "Tanh", "SIGMOID": "Sigmoid"}


def tflite_model(path: Path) -> tuple[onnx.ModelProto, bool | None]:
    """The ONNX model of a float (or hybrid: weights dequantized) .tflite graph, op by op (module docstring).
    Full-integer models (int8 inputs) are refused: run them with ``fusedrnn.litert.load``."""
    tm = load_tflite(path)
    info = tm.info
    g = GraphBuilder()
    names: dict[int, str] = {}

    def tensor_name(i: int) -> str:
        if i not in names:
            t = info.tensors[i]
            if t.data is not None:
                names[i] = g.const(_clean(t.name) or f"t{i}", np.asarray(t.data))
            else:
                names[i] = g.name(_clean(t.name) or f"t{i}")
        return names[i]

    inputs = []
    for i in info.inputs:
        t = info.tensors[i]
        if t.dtype != np.float32:
            raise UnsupportedFeatureError(f"MODEL: {path.name} takes {t.dtype} input {t.name!r}; fusedrnn turns float "
                                          f"and hybrid .tflite models into ONNX (run full-integer ones with "
                                          f"fusedrnn.litert.load)")
        shape = [f"{_clean(t.name)}_{k}" for k in range(len(t.shape) - 1)] + list(t.shape[-1:])
        inputs.append(helper.make_tensor_value_info(tensor_name(i), TensorProto.FLOAT, shape))
    rec_index, batch_first = 0, None
    for node in tm.nodes:
        op = node.info
        if node.op is not None:
            layer = layer_from_tflite(None, tm, rec_index)
            rec_index += 1
            if layer.direction == "reverse":  # the REVERSE_V2 ops around it are translated themselves
                layer = copy.copy(layer)
                layer.direction, layer.output_order = "forward", "time"
            if layer.num_directions == 2:
                if not op.options.get("merge_outputs", False):
                    raise UnsupportedFeatureError(f"MODEL: op {op.index} ({op.name}) without merge_outputs")
                layer.merge = "concat"
            batch_first = layer.batch_first if batch_first is None else batch_first
            y, _ = g.recurrent(layer, tensor_name(op.inputs[0]), f"op{op.index}")
            names[op.outputs[0]] = y
            continue
        ins = [tensor_name(i) if i >= 0 else "" for i in op.inputs]
        try:
            names.update(zip(op.outputs, _tflite_op(g, op, ins, info), strict=False))
        except FusedRNNError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as exc:  # tensors that do not fit the op
            raise FileFormatError(f"MODEL: op {op.index} ({op.name}) of {path.name}: its tensors do not fit the op "
                                  f"({type(exc).__name__}: {brief(str(exc), 120)})") from None
    outputs = []
    for i in info.outputs:
        y = g.one("Identity", [tensor_name(i)], _clean(info.tensors[i].name) or f"out{i}")
        outputs.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, [f"{y}_{k}" for k in
                                                                          range(len(info.tensors[i].shape))]))
    try:
        return g.model(inputs, outputs, "tflite"), batch_first
    except onnx.checker.ValidationError as exc:
        raise FileFormatError(f"MODEL: {path.name} does not translate to a valid ONNX graph "
                              f"({brief(str(exc), 200)})") from None


def _clean(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in str(name))[:60]


def _tflite_op(g: GraphBuilder, op, ins: list[str], info) -> list[str]:
    """ONNX nodes of one non-recurrent .tflite op; returns its output names."""
    o, name = op.options, op.name
    base = f"op{op.index}"
    if name == "REVERSE_V2":
        axes = [int(a) for a in np.atleast_1d(info.tensors[op.inputs[1]].data)]
        n = len(axes)
        return [g.one("Slice", [ins[0], g.small(f"{base}_starts", np.full(n, -1, np.int64)),
                                g.small(f"{base}_ends", np.full(n, _INT64_MIN, np.int64)),
                                g.small(f"{base}_axes", np.array(axes, np.int64)),
                                g.small(f"{base}_steps", np.full(n, -1, np.int64))], base)]
    if name == "CONCATENATION":
        y = g.one("Concat", ins, base, axis=int(o.get("axis", 0)))
    elif name == "PACK":
        axis = g.small(f"{base}_axis", np.array([int(o.get("axis", 0))], np.int64))
        y = g.one("Concat", [g.one("Unsqueeze", [x, axis], f"{base}_u{k}") for k, x in enumerate(ins)], base,
                  axis=int(o.get("axis", 0)))
        return [y]
    elif name in ("ADD", "MUL"):
        y = g.one(name.capitalize(), ins[:2], base)
    elif name == "FULLY_CONNECTED":
        w = info.tensors[op.inputs[1]].data
        if w is None or np.asarray(w).dtype != np.float32:
            raise UnsupportedFeatureError(f"MODEL: op {op.index} FULLY_CONNECTED with non-float or non-constant "
                                          f"weights")
        x = ins[0]
        if not o.get("keep_num_dims", False):
            x = g.one("Reshape", [x, g.small(f"{base}_flat", np.array([-1, np.asarray(w).shape[1]], np.int64))],
                      f"{base}_flat")
        y = g.one("MatMul", [x, g.const(f"{base}_kernel", np.asarray(w).T.copy())], f"{base}_matmul")
        if len(ins) > 2 and ins[2]:
            y = g.one("Add", [y, ins[2]], f"{base}_add")
    elif name == "STRIDED_SLICE":
        begin, end, strides = (np.atleast_1d(info.tensors[i].data).astype(np.int64) for i in op.inputs[1:4])
        n = len(begin)
        starts, ends = begin.copy(), end.copy()
        for d in range(n):
            if o.get("begin_mask", 0) >> d & 1:
                starts[d] = 0 if strides[d] > 0 else _INT64_MAX
            if o.get("end_mask", 0) >> d & 1:
                ends[d] = _INT64_MAX if strides[d] > 0 else _INT64_MIN
            if o.get("shrink_axis_mask", 0) >> d & 1:
                ends[d] = starts[d] + 1 if starts[d] != -1 else _INT64_MAX
        if o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0):
            raise UnsupportedFeatureError(f"MODEL: op {op.index} STRIDED_SLICE with ellipsis or new-axis masks")
        y = g.one("Slice", [ins[0], g.small(f"{base}_starts", starts), g.small(f"{base}_ends", ends),
                            g.small(f"{base}_axes", np.arange(n, dtype=np.int64)),
                            g.small(f"{base}_steps", strides)], f"{base}_slice")
        shrink = [d for d in range(n) if o.get("shrink_axis_mask", 0) >> d & 1]
        if shrink:
            y = g.one("Squeeze", [y, g.small(f"{base}_shrink", np.array(shrink, np.int64))], base)
        return [y]
    else:
        raise UnsupportedFeatureError(f"MODEL: op {op.index} ({name}) has no ONNX translation in fusedrnn (it "
                                      f"translates REVERSE_V2, CONCATENATION, PACK, ADD, MUL, STRIDED_SLICE, "
                                      f"FULLY_CONNECTED and the recurrent ops)")
    act = _FUSED.get(o.get("fused_activation_function", "NONE"), "?")
    if act == "?":
        raise UnsupportedFeatureError(f"MODEL: op {op.index} ({name}): fused activation "
                                      f"{o.get('fused_activation_function')}")
    return [g.one(act, [y], f"{base}_act") if act else y]


__all__ = ["EXTRAS", "LoadedModel", "MissingExtraError", "SUFFIXES", "TORCH_FORMATS", "keras_model", "load_model",
           "sniff", "tflite_model", "torch_program_model", "torch_state_dict_model"]
