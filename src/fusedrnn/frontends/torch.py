"""PyTorch ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` <-> fusedrnn layers.

``from_torch(module)`` reads the parameters of a PyTorch recurrent module into canonical fusedrnn layers:

=====================  ==========================================================================================
PyTorch                fusedrnn
=====================  ==========================================================================================
``nn.LSTM``            :class:`~fusedrnn.LSTM`; ``proj_size > 0`` -> ``proj_W`` from ``weight_hr_l{k}`` (no
                       projection bias); gate order i, f, g, o is already canonical
``nn.GRU``             :class:`~fusedrnn.GRU` with ``linear_before_reset=True`` (PyTorch's only formulation);
                       gate blocks r, z, n -> z, r, n
``nn.RNN``             :class:`~fusedrnn.RNN`; ``nonlinearity`` tanh / relu -> activations ["Tanh"] / ["Relu"]
``bias=False``         ``b_x = b_h = None``
``bidirectional``      ``direction="bidirectional"`` (PyTorch has no reverse-only module)
``batch_first``        ``batch_first``
``num_layers > 1``     a :class:`~fusedrnn.Stack` of one layer per PyTorch layer
``nn.LSTMCell`` ...    a forward one-layer LSTM / GRU / RNN (feed it [1, B, I] for a single step)
=====================  ==========================================================================================

Every layer gets ``merge="concat"`` (PyTorch's [T, B, D*H] output). The states are fusedrnn's per-layer
[D, B, H] arrays; PyTorch's h_0 [L*D, B, H] holds layer k's at rows ``k*D : (k+1)*D``. Dropout between layers
applies in training only and is not converted. Parameters keep float64 when the module is float64; every other
float dtype becomes float32 (float16 / bfloat16 widen exactly).

``to_torch(layer_or_stack)`` builds the module back with float32 parameters and raises
:class:`~fusedrnn.ConversionError` naming every option PyTorch cannot express: peepholes, layer norm,
``coupling`` (input_forget / CIFG), ``cell_clip``, ``clip``, a projection bias or ``proj_clip``, a diagonal
recurrence, non-default activations (RNN: tanh or relu only), ``direction="reverse"``,
``output_order="processing"``, a two-direction ``merge`` of ``"sum"`` / ``"mul"`` / ``"ave"`` (other values
than PyTorch's concatenation), and a GRU with ``linear_before_reset=False``. ``merge="stack"`` (what
``from_onnx`` sets) is accepted: it holds the same values as PyTorch's output in another layout ([T, D, B, H]
against [T, B, D*H]), and the merge is not a parameter of the module. The layer's emulation target is not part
of the conversion (the module always computes in float32). Objects that are not PyTorch modules / fusedrnn
layers raise :class:`~fusedrnn.errors.FrameworkTypeError` (a ConversionError and a TypeError).

State dicts (what ``fusedrnn convert`` reads from ``.pt`` files): :func:`state_dict_groups` finds the recurrent
modules in one (by their ``weight_ih_l0`` ... keys) and :func:`module_from_state_dict` builds the module whose
parameters they are, after checking every claim against the tensors present: layer indices 0 to L-1 without gaps
(so L is bounded by the number of keys), every parameter of every layer and direction present with the shape the
first layer implies, and no tensor claiming more elements than its storage holds (a broadcast view of a few
bytes cannot make a huge module). :func:`check_storage` does the last check for any loaded tensors.

torch is imported lazily, inside the functions.
"""

from __future__ import annotations

import re

import numpy as np

from .. import conventions
from ..cells.kinds import DEFAULT_ACTIVATIONS
from ..errors import ConversionError, DTypeError, FileFormatError, FrameworkTypeError
from ..layers import GRU, LSTM, RNN, RecurrentLayer, Stack, register_converter
from ..validation import brief
from .common import check_expected

_KIND_NAMES = {"lstm": "nn.LSTM", "gru": "nn.GRU", "rnn": "nn.RNN"}
_RNN_NONLINEARITY = {"tanh": "Tanh", "relu": "Relu"}
_NONLINEARITY_OF = {v: k for k, v in _RNN_NONLINEARITY.items()}


def _torch(func: str):
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConversionError(f"{func}: PyTorch is not installed; install it with `pip install fusedrnn[torch]` "
                              f"(or `pip install torch`)") from exc
    return torch


def _kind(module, torch) -> tuple[str, bool]:
    """(cell kind, is a single-step cell module) of ``module``, or raise FrameworkTypeError."""
    nn = torch.nn
    for cls, kind, is_cell in ((nn.LSTM, "lstm", False), (nn.GRU, "gru", False), (nn.RNN, "rnn", False),
                               (nn.LSTMCell, "lstm", True), (nn.GRUCell, "gru", True), (nn.RNNCell, "rnn", True)):
        if isinstance(module, cls):
            return kind, is_cell
    raise FrameworkTypeError(f"module: expected a PyTorch nn.LSTM, nn.GRU or nn.RNN (or nn.LSTMCell, "
                             f"nn.GRUCell, nn.RNNCell), got {type(module).__module__}.{type(module).__qualname__}")


def _check_expected(expected, kind: str) -> None:
    check_expected(expected, kind, "PyTorch", _KIND_NAMES, "from_torch", "module")


def _layer_count(module, suffixes: list[str], proj: int, torch) -> int:
    """``module.num_layers``, checked: a positive int and every layer's parameters present as tensors (a module
    unpickled from a file may claim layers it does not hold)."""
    n = module.num_layers
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConversionError(f"module: num_layers: expected a positive int, got {brief(n)}")
    bases = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if module.bias else []) + \
        (["weight_hr"] if proj else [])
    for k in range(n):
        for base in bases:
            for s in suffixes:
                if not isinstance(getattr(module, f"{base}_l{k}{s}", None), torch.Tensor):
                    raise ConversionError(f"module: {type(module).__name__} claims num_layers={n} but has no "
                                          f"tensor {base}_l{k}{s}")
    return n



def _array(t, torch, name: str) -> np.ndarray:
    """A PyTorch tensor as a float32 (or float64) NumPy array."""
    t = t.detach()
    if t.device.type == "meta":
        raise ConversionError(f"module: parameter {name} is on the 'meta' device and holds no values")
    if not t.is_floating_point():
        raise DTypeError(f"module: parameter {name} has dtype {t.dtype}; expected a floating-point dtype")
    if t.dtype != torch.float64:
        t = t.to(torch.float32)
    return t.cpu().numpy().copy()


def from_torch(module, expected=None):
    """A fusedrnn layer (or :class:`~fusedrnn.Stack` when ``num_layers > 1``) from a PyTorch recurrent module.

    ``expected``: a layer class (``LSTM``, ``GRU``, ``RNN``) the module must match, or ``RecurrentLayer`` /
    None for any kind.
    """
    torch = _torch("from_torch")
    kind, is_cell = _kind(module, torch)
    _check_expected(expected, kind)
    cls = {"lstm": LSTM, "gru": GRU, "rnn": RNN}[kind]
    nonlinearity = getattr(module, "nonlinearity", None)
    if is_cell:  # nn.LSTMCell / GRUCell / RNNCell: one forward step's parameters, no layer index
        def one(base):
            return _array(getattr(module, base), torch, base)[None]

        return _build_layer(cls, kind, one, module.bias, nonlinearity, batch_first=False)
    D = 2 if module.bidirectional else 1
    suffixes = [""] + (["_reverse"] if D == 2 else [])
    proj = getattr(module, "proj_size", 0) or 0
    if isinstance(proj, bool) or not isinstance(proj, int) or proj < 0:
        raise ConversionError(f"module: proj_size: expected a non-negative int, got {brief(proj)}")
    layers = []
    for k in range(_layer_count(module, suffixes, proj, torch)):
        def stack(base, k=k):
            return np.stack([_array(getattr(module, f"{base}_l{k}{s}"), torch, f"{base}_l{k}{s}")
                             for s in suffixes])

        layers.append(_build_layer(cls, kind, stack, module.bias, nonlinearity, batch_first=bool(module.batch_first),
                                   direction="bidirectional" if D == 2 else "forward",
                                   proj_W=stack("weight_hr") if proj else None))
    return layers[0] if len(layers) == 1 else Stack(layers)


def _build_layer(cls, kind: str, get, has_bias: bool, nonlinearity: str | None, *, batch_first: bool,
                 direction: str = "forward", proj_W=None):
    """One fusedrnn layer from PyTorch parameters; ``get(base)`` returns the parameter ``base`` (weight_ih, ...)
    stacked over directions, [D, rows, cols]."""
    def canonical(base):
        return conventions.to_canonical(get(base), kind, "torch", axis=1, argument=base)

    W, R = canonical("weight_ih"), canonical("weight_hh")
    b_x, b_h = (canonical("bias_ih"), canonical("bias_hh")) if has_bias else (None, None)
    common = dict(direction=direction, batch_first=batch_first, merge="concat")
    if kind == "lstm":
        return cls(W, R, b_x, b_h, proj_W=proj_W, **common)
    if kind == "gru":
        return cls(W, R, b_x, b_h, linear_before_reset=True, **common)
    return cls(W, R, b_x, b_h, activations=[_rnn_activation(nonlinearity)], **common)


def _rnn_activation(nonlinearity: str) -> str:
    try:
        return _RNN_NONLINEARITY[nonlinearity]
    except KeyError:
        raise ConversionError(f"module: unknown nn.RNN nonlinearity {nonlinearity!r}; expected 'tanh' or "
                              f"'relu'") from None


# ------------------------------------------------------------------------------------------------ to_torch

def _act_names(layer) -> list[tuple[str, ...]]:
    return [tuple(a.name for a in per) for per in layer.activations]


def _problems(layer) -> list[str]:
    """Every option of ``layer`` an nn.LSTM / nn.GRU / nn.RNN cannot express."""
    bad = []
    if layer.output_order != "time":
        bad.append(f"output_order={layer.output_order!r} (outputs in processing order, as a Keras go_backwards "
                   f"layer returns them; PyTorch returns outputs in time order)")
    if layer.direction == "reverse":
        bad.append("direction='reverse' (PyTorch has forward and bidirectional modules only)")
    if layer.merge in ("sum", "mul", "ave") and layer.num_directions == 2:
        bad.append(f"merge={layer.merge!r} (PyTorch concatenates the directions, [T, B, D*H], and a {layer.merge} "
                   f"of the two directions has other values)")
    if layer.clip is not None:
        bad.append(f"clip={layer.clip}")
    acts = _act_names(layer)
    if layer.cell == "rnn":
        if any(a[0] not in _NONLINEARITY_OF for a in acts) or len(set(acts)) > 1:
            bad.append(f"activations={[list(a) for a in acts]} (nn.RNN has one nonlinearity, tanh or relu)")
    elif any(a != DEFAULT_ACTIVATIONS[layer.cell] for a in acts):
        bad.append(f"activations={[list(a) for a in acts]} (PyTorch uses {list(DEFAULT_ACTIVATIONS[layer.cell])})")
    if layer.cell == "lstm":
        for cond, name in ((layer.P is not None, "peepholes (P)"),
                           (layer.layer_norm is not None, "layer_norm"),
                           (layer.coupling is not None, f"coupling={layer.coupling!r} (input_forget / CIFG)"),
                           (layer.cell_clip is not None, f"cell_clip={layer.cell_clip}"),
                           (layer.proj_b is not None, "projection bias (proj_b)"),
                           (layer.proj_clip is not None, f"proj_clip={layer.proj_clip}"),
                           (layer.diagonal, "diagonal recurrence (R [D, 4H])")):
            if cond:
                bad.append(name)
    if layer.cell == "gru" and not layer.linear_before_reset:
        bad.append("linear_before_reset=False (nn.GRU applies the reset gate after the recurrent matmul only)")
    return bad


def to_torch(layer_or_stack):
    """The equivalent PyTorch ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (float32 parameters) of a fusedrnn layer or
    :class:`~fusedrnn.Stack` (-> ``num_layers = len(stack)``).

    The module's output is always the concatenation of the directions, [T, B, D*H] (batch first when
    ``batch_first``). A layer with ``merge="stack"`` converts too: its output holds the same values in another
    layout ([T, D, B, H]; ``y.transpose(0, 2, 1, 3).reshape(T, B, D * H)`` gives PyTorch's). A two-direction
    ``"sum"`` / ``"mul"`` / ``"ave"`` merge has different values and raises ConversionError; with one direction
    every merge but ``"stack"`` is already [T, B, H] and ``"stack"`` only adds a unit direction axis."""
    if isinstance(layer_or_stack, Stack):
        layers = list(layer_or_stack.layers)
    elif isinstance(layer_or_stack, RecurrentLayer):
        layers = [layer_or_stack]
    else:
        raise FrameworkTypeError(f"layer: expected a fusedrnn LSTM, GRU, RNN or Stack, got "
                                 f"{type(layer_or_stack).__name__}")
    torch = _torch("to_torch")
    first = layers[0]
    kind = first.cell
    problems = []
    for k, layer in enumerate(layers):
        where = f"layers[{k}]: " if len(layers) > 1 else ""
        problems += [where + p for p in _problems(layer)]
    if len(layers) > 1:
        for k, layer in enumerate(layers[1:], 1):
            for what, a, b in (("cell", layer.cell, kind), ("hidden_size", layer.hidden_size, first.hidden_size),
                               ("output_size (proj_size)", layer.output_size, first.output_size),
                               ("direction", layer.direction, first.direction),
                               ("batch_first", layer.batch_first, first.batch_first)):
                if a != b:
                    problems.append(f"layers[{k}]: {what} {a!r} differs from layers[0]'s {b!r} (a PyTorch "
                                    f"module uses one value for every layer)")
            if layer.cell == "rnn" == kind and _act_names(layer) != _act_names(first):
                problems.append(f"layers[{k}]: activations differ from layers[0]'s (nn.RNN has one nonlinearity)")
    if problems:
        raise ConversionError(f"layer: PyTorch {_KIND_NAMES.get(kind, kind)} cannot express: " + "; ".join(problems))

    D, H, Hp = first.num_directions, first.hidden_size, first.output_size
    bias = any(layer.b_x is not None or layer.b_h is not None for layer in layers)
    kwargs = dict(input_size=first.input_size, hidden_size=H, num_layers=len(layers), bias=bias,
                  batch_first=first.batch_first, bidirectional=D == 2)
    if kind == "lstm":
        module = torch.nn.LSTM(proj_size=Hp if first.proj_W is not None else 0, **kwargs)
    elif kind == "gru":
        module = torch.nn.GRU(**kwargs)
    else:
        module = torch.nn.RNN(nonlinearity=_NONLINEARITY_OF[first.activations[0][0].name], **kwargs)
    module = module.to(torch.float32)

    suffixes = [""] + (["_reverse"] if D == 2 else [])
    with torch.no_grad():
        for k, layer in enumerate(layers):
            zeros = np.zeros(layer.W.shape[:2], np.float32)
            arrays = {
                "weight_ih": conventions.from_canonical(layer.W, kind, "torch", axis=1),
                "weight_hh": conventions.from_canonical(layer.R, kind, "torch", axis=1),
            }
            if bias:
                arrays["bias_ih"] = conventions.from_canonical(zeros if layer.b_x is None else layer.b_x, kind,
                                                               "torch", axis=1)
                arrays["bias_hh"] = conventions.from_canonical(zeros if layer.b_h is None else layer.b_h, kind,
                                                               "torch", axis=1)
            if kind == "lstm" and layer.proj_W is not None:
                arrays["weight_hr"] = layer.proj_W
            for base, arr in arrays.items():
                for d, s in enumerate(suffixes):
                    p = getattr(module, f"{base}_l{k}{s}")
                    src = np.ascontiguousarray(arr[d], dtype=np.float32)
                    if tuple(p.shape) != src.shape:  # a mismatch here is a fusedrnn bug, never user input
                        raise ConversionError(f"layer: {base}_l{k}{s} expected shape {tuple(p.shape)}, built "
                                              f"{src.shape}")
                    p.copy_(torch.from_numpy(src))
    return module


# ------------------------------------------------------------------------------------------------ state dicts

STATE_DICT_KEY = re.compile(r"^(?P<prefix>.*?)(?P<base>weight_ih|weight_hh|weight_hr|bias_ih|bias_hh)_l(?P<k>\d+)"
                            r"(?P<rev>_reverse)?$")
"""A recurrent parameter's key: an optional module prefix, the parameter, the layer index, ``_reverse``."""
MAX_INDEX_DIGITS = 6
"""Layer indices longer than this are refused before they are parsed."""
_KINDS_BY_GATES = {4: "LSTM", 3: "GRU", 1: "RNN"}


def check_storage(tensors: dict, where: str) -> None:
    """Raise FileFormatError for a tensor of ``tensors`` ({name: tensor}) that claims more elements than its
    storage holds (a broadcast view, stride 0: a few bytes in a file posing as a huge tensor)."""
    for name, t in tensors.items():
        have = t.untyped_storage().nbytes()
        need = t.numel() * t.element_size()
        if need > have:
            raise FileFormatError(f"{where}: tensor {brief(name)} claims shape {tuple(t.shape)} ({need} bytes) over "
                                  f"a storage of {have} bytes; expected a tensor that holds its values")


def state_dict_groups(state_dict: dict) -> dict[str, dict]:
    """{module prefix ("" for none): {key without the prefix: tensor}} of the recurrent parameters in a state
    dict (keys matching :data:`STATE_DICT_KEY` with tensor values), for the modules that have ``weight_ih_l0``."""
    torch = _torch("state_dict_groups")
    groups: dict[str, dict] = {}
    for key, value in state_dict.items():
        m = STATE_DICT_KEY.match(key) if isinstance(key, str) else None
        if m and isinstance(value, torch.Tensor):
            groups.setdefault(m["prefix"].rstrip("."), {})[key[len(m["prefix"]):]] = value
    return {k: v for k, v in groups.items() if "weight_ih_l0" in v}


def _layer_indices(sd: dict, where: str) -> int:
    """The layer count L of ``sd``'s keys, whose indices must be exactly 0 .. L-1."""
    digits = {STATE_DICT_KEY.match(k)["k"] for k in sd}
    long = sorted(d for d in digits if len(d) > MAX_INDEX_DIGITS or (len(d) > 1 and d[0] == "0"))
    if long:
        raise FileFormatError(f"{where}: layer index {brief(long[0], 20)} in the keys; expected indices 0, 1, ... "
                              f"in decimal")
    found = sorted(int(d) for d in digits)
    if found != list(range(len(found))):
        gap = next(i for i, v in enumerate(found) if i != v)
        raise FileFormatError(f"{where}: layer indices must run 0 to L-1 without gaps; the keys have "
                              f"{brief(found, 40)} (no layer {gap})")
    return len(found)


def module_from_state_dict(sd: dict, nonlinearity: str = "tanh", where: str = "state dict"):
    """The nn.LSTM / nn.GRU / nn.RNN whose state dict is ``sd`` (keys without a module prefix, as
    :func:`state_dict_groups` gives them), every claim checked before it is built (module docstring).

    The kind and sizes come from the first layer: gate count = rows of ``weight_hh_l0`` / its columns (or 4 with
    ``weight_hr_l0``), ``num_layers`` and ``bidirectional`` from the keys. Raises FileFormatError for keys or
    tensors that contradict each other, ConversionError for weights of no PyTorch recurrent module."""
    torch = _torch("module_from_state_dict")
    check_storage(sd, where)
    L = _layer_indices(sd, where)
    bidir = any(k.endswith("_reverse") for k in sd)
    wih, whh = sd["weight_ih_l0"], sd.get("weight_hh_l0")
    if whh is None or wih.ndim != 2 or whh.ndim != 2:
        raise ConversionError(f"{where}: expected 2-D weight_ih_l0 and weight_hh_l0")
    proj = 0
    if "weight_hr_l0" in sd:
        if sd["weight_hr_l0"].ndim != 2:
            raise ConversionError(f"{where}: expected a 2-D weight_hr_l0, got shape {tuple(sd['weight_hr_l0'].shape)}")
        proj, H = sd["weight_hr_l0"].shape
        G = wih.shape[0] // H if H else 0
    else:
        H = whh.shape[1]
        G = whh.shape[0] // H if H else 0
    if G not in _KINDS_BY_GATES or G * H != wih.shape[0] or (proj and G != 4):
        raise ConversionError(f"{where}: weight_ih_l0 {tuple(wih.shape)} and weight_hh_l0 {tuple(whh.shape)} are not "
                              f"the weights of an nn.LSTM, nn.GRU or nn.RNN")
    D, out = (2 if bidir else 1), (proj or H)
    bias = "bias_ih_l0" in sd
    expected = {}
    for k in range(L):
        for s in ("", "_reverse") if bidir else ("",):
            expected[f"weight_ih_l{k}{s}"] = (G * H, wih.shape[1] if k == 0 else D * out)
            expected[f"weight_hh_l{k}{s}"] = (G * H, out)
            if bias:
                expected[f"bias_ih_l{k}{s}"] = expected[f"bias_hh_l{k}{s}"] = (G * H,)
            if proj:
                expected[f"weight_hr_l{k}{s}"] = (proj, H)
    missing, unexpected = [k for k in expected if k not in sd], [k for k in sd if k not in expected]
    if missing or unexpected:
        what = "; ".join(filter(None, [missing and f"missing {brief(missing, 80)}",
                                       unexpected and f"unexpected {brief(unexpected, 80)}"]))
        raise FileFormatError(f"{where}: the keys do not form an nn.{_KINDS_BY_GATES[G]} of {L} layer(s)"
                              f"{', bidirectional' if bidir else ''}: {what}")
    for key, shape in expected.items():
        t = sd[key]
        if tuple(t.shape) != shape:
            raise FileFormatError(f"{where}: {key}: expected shape {shape} (from layer 0's weights), got "
                                  f"{tuple(t.shape)}")
        if not t.is_floating_point():
            raise DTypeError(f"{where}: {key}: expected a floating-point tensor, got {t.dtype}")
    kw = dict(input_size=wih.shape[1], hidden_size=H, num_layers=L, bias=bias, bidirectional=bidir)
    if G == 4:
        kw["proj_size"] = proj
    if G == 1:
        kw["nonlinearity"] = nonlinearity
    double = any(v.dtype == torch.float64 for v in sd.values())
    module = getattr(torch.nn, _KINDS_BY_GATES[G])(**kw, dtype=torch.float64 if double else torch.float32)
    dtype = torch.float64 if double else torch.float32
    module.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=True)
    return module


register_converter("from_torch", from_torch)
register_converter("to_torch", to_torch)

__all__ = ["MAX_INDEX_DIGITS", "STATE_DICT_KEY", "check_storage", "from_torch", "module_from_state_dict",
           "state_dict_groups", "to_torch"]
