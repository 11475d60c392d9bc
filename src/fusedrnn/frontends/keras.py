"""Keras 3 ``LSTM`` / ``GRU`` / ``SimpleRNN`` / ``Bidirectional`` <-> fusedrnn layers.

``from_keras(layer)`` reads a built Keras 3 layer (on the backend the user chose with ``KERAS_BACKEND`` or
``~/.keras/keras.json``; fusedrnn never sets it: :data:`SUPPORTED_BACKENDS`); ``from_keras_weights(kind,
weights, **config)`` does the same from plain weight arrays (``layer.get_weights()``) and the layer's config,
for users without the Keras layer object.

* ``LSTM`` (or ``RNN(LSTMCell)``) -> :class:`~fusedrnn.LSTM`: kernel [I, 4U] -> W [1, 4U, I] (gate order
  i, f, c, o is canonical); the single bias -> ``b_x`` (``b_h`` None).
* ``GRU`` ``reset_after=True`` -> :class:`~fusedrnn.GRU` ``linear_before_reset=True``: bias [2, 3U] -> ``b_x`` =
  row 0, ``b_h`` = row 1 (gate order z, r, h is canonical); ``reset_after=False`` -> ``linear_before_reset=False``
  with the single bias [3U] -> ``b_x``.
* ``SimpleRNN`` (or ``RNN(SimpleRNNCell)``) -> :class:`~fusedrnn.RNN`.
* ``use_bias=False`` -> ``b_x = b_h = None``.
* ``activation`` / ``recurrent_activation`` -> fusedrnn activations (LSTM (rec, act, act), GRU (rec, act),
  RNN (act,)) through ``KERAS_ACTIVATIONS`` (Keras 3 ``hard_sigmoid`` = relu6(x + 3) / 6 = ONNX HardSigmoid
  alpha 1/6, beta 0.5; ``leaky_relu`` slope 0.2; ``linear`` (or None) = Affine(1, 0)); any other activation
  raises ConversionError.
* ``go_backwards=True`` -> a plain :class:`~fusedrnn.LSTM` / ``GRU`` / ``RNN`` with ``direction="reverse"`` and
  ``output_order="processing"``, Keras's output order: y[:, s] is the state after reading x[:, T-1-s]
  (x[:, len-1-s] with ``sequence_lens``; steps past a row's length stay zero); the final state is the same as
  with ``output_order="time"``. :func:`time_ordered` returns a copy with ONNX's (time) order, which ONNX can
  export; :func:`processing_order` the other way round.
* ``Bidirectional(merge_mode=...)`` -> ``direction="bidirectional"``, ``merge`` = concat / sum / mul / ave;
  ``merge_mode=None`` -> ``merge="stack"``: y [B, T, 2, U] with ``y[:, :, 0]`` and ``y[:, :, 1]`` Keras's two
  outputs (the backward one flipped back to time order, as Keras does). Forward and backward layers may differ
  in activations and bias use, not in kind, units or ``reset_after``; a forward layer with ``go_backwards=True``
  raises.

Every layer is ``batch_first=True`` (Keras is batch-major). States: Keras's per-direction lists
([h, c] forward then backward) are fusedrnn's [D, B, U] arrays. ``return_sequences``, ``return_state``,
``stateful``, ``unroll``, dropout (training only), initialisers, regularisers and constraints do not affect the
weights and are not converted. Masking is not converted either: Keras carries state *and* output through masked
steps, which differs from fusedrnn's (onnxruntime's) ``sequence_lens`` semantics.

``to_keras(layer)`` builds the equivalent Keras layer (built, weights set, ``return_sequences=True``; extra
keyword arguments go to the recurrent layer's constructor): ``direction="reverse"`` with
``output_order="processing"`` becomes ``go_backwards=True``. It raises :class:`~fusedrnn.ConversionError` naming
everything Keras cannot express: peepholes, projection, layer norm, ``clip``, ``cell_clip``, ``coupling``
(input_forget / CIFG), a diagonal recurrence, activations Keras has no name for, an LSTM whose cell-candidate
and output activations differ, a ``direction="reverse"`` layer with ``output_order="time"`` (Keras
``go_backwards`` returns outputs in processing order; see :func:`processing_order`) and ``merge="stack"`` on a
one-direction layer. The Keras layer is batch-major and float32 whatever the fusedrnn layer's ``batch_first``
and dtype; its emulation target is not part of the conversion.

Converter type errors (an object that is not a Keras recurrent layer, or not a fusedrnn layer) are
:class:`~fusedrnn.errors.FrameworkTypeError`, both a ConversionError and a TypeError.

``check_keras_file(path)`` checks a ``.keras`` file before Keras builds a model from it (``fusedrnn convert``
calls it): its zip members' sizes (:func:`~fusedrnn.frontends.archives.open_zip`), a ``config.json`` of at most
:data:`KERAS_CONFIG_LIMIT` bytes, and layer sizes no larger than the weights file can back (a config claiming
``units: 1000000000`` would otherwise allocate its weights before any of them is read).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from .. import conventions
from ..cells.activations import Activation
from ..cells.kinds import GATE_COUNT
from ..errors import AttributeValueError, ConversionError, DTypeError, FileFormatError, FrameworkTypeError, ShapeError
from ..layers import GRU, LSTM, RNN, RecurrentLayer, register_converter
from ..validation import brief
from .archives import open_zip
from .common import check_expected

_KERAS_CLASS = {"lstm": "LSTM", "gru": "GRU", "rnn": "SimpleRNN"}
_KINDS = {"lstm": "lstm", "gru": "gru", "simplernn": "rnn", "simple_rnn": "rnn", "rnn": "rnn"}
MERGE_MODES = {"concat": "concat", "sum": "sum", "mul": "mul", "ave": "ave", None: "stack"}
"""Keras ``Bidirectional`` ``merge_mode`` -> fusedrnn ``merge``."""

KERAS_ACTIVATIONS = {
    "tanh": Activation("Tanh"),
    "sigmoid": Activation("Sigmoid"),
    "relu": Activation("Relu"),
    "hard_sigmoid": Activation("HardSigmoid", 1.0 / 6.0, 0.5),  # Keras 3: relu6(x + 3) / 6
    "linear": Activation("Affine", 1.0, 0.0),
    "softsign": Activation("Softsign"),
    "softplus": Activation("Softplus"),
    "elu": Activation("Elu", 1.0),
    "leaky_relu": Activation("LeakyRelu", 0.2),  # Keras 3 default negative_slope
}
"""Keras activation names with an exact fusedrnn (ONNX) equivalent."""

_IGNORED_CONFIG = {"name", "trainable", "dtype", "return_sequences", "return_state", "stateful", "unroll",
                   "zero_output_for_mask", "dropout", "recurrent_dropout", "seed", "implementation", "use_cudnn",
                   "unit_forget_bias", "time_major", "activity_regularizer"}


def _keras(func: str):
    try:
        import keras
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConversionError(f"{func}: Keras 3 with a backend that imports is needed ({exc}); install it with "
                              f"`pip install 'fusedrnn[keras]'` and choose the backend with KERAS_BACKEND "
                              f"({', '.join(SUPPORTED_BACKENDS)}; the backend's own package must be installed)") \
            from exc
    if not hasattr(keras, "ops"):
        raise ConversionError(f"{func}: Keras {getattr(keras, '__version__', '?')} is not Keras 3")
    return keras


# ------------------------------------------------------------------------------------------------ activations

def _activation(value, argument: str) -> Activation:
    """A Keras activation (name, serialized dict, None = linear, or a Keras activation function)."""
    if value is None:
        return KERAS_ACTIVATIONS["linear"]
    if isinstance(value, dict) and isinstance(value.get("config"), str):
        value = value["config"]
    if isinstance(value, str):
        if value in KERAS_ACTIVATIONS:
            return KERAS_ACTIVATIONS[value]
        raise ConversionError(f"{argument}: Keras activation {value!r} has no fusedrnn equivalent; supported: "
                              f"{', '.join(KERAS_ACTIVATIONS)}")
    if callable(value):
        keras = _keras("from_keras")
        for name, act in KERAS_ACTIVATIONS.items():
            if value is keras.activations.get(name):
                return act
        name = getattr(value, "__name__", None)
        if name in KERAS_ACTIVATIONS and str(getattr(value, "__module__", "")).startswith("keras."):
            return KERAS_ACTIVATIONS[name]  # e.g. keras.ops.tanh
        raise ConversionError(f"{argument}: activation {value!r} is not a Keras activation with a fusedrnn "
                              f"equivalent; supported: {', '.join(KERAS_ACTIVATIONS)}")
    raise ConversionError(f"{argument}: expected a Keras activation name or function, got {value!r}")


def _keras_name(act: Activation) -> str | None:
    """The Keras name of a fusedrnn activation (alpha/beta compared at float32 precision), or None."""
    f32 = np.float32
    for name, ref in KERAS_ACTIVATIONS.items():
        if ref.name == act.name and f32(ref.alpha) == f32(act.alpha) and f32(ref.beta) == f32(act.beta):
            return name
    return None


# ------------------------------------------------------------------------------------------------ reading

def _kind(kind) -> str:
    k = _KINDS.get(str(kind).lower()) if isinstance(kind, str) else None
    if k is None:
        raise AttributeValueError(f"kind: expected 'LSTM', 'GRU' or 'SimpleRNN', got {kind!r}")
    return k


def _float(a, argument: str) -> np.ndarray:
    try:
        arr = np.asarray(a)
    except Exception as exc:  # noqa: BLE001
        raise DTypeError(f"{argument}: expected an array, got {type(a).__name__}") from exc
    if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":
        raise DTypeError(f"{argument}: expected a float array, got dtype {arr.dtype}")
    return np.array(arr, dtype=np.float64 if arr.dtype == np.float64 else np.float32)


def _one_direction(kind: str, weights, config: dict, where: str = "") -> dict:
    """Canonical arrays and options of one Keras recurrent layer from its weights and config."""
    unknown = sorted(k for k in config if k not in _IGNORED_CONFIG and k not in
                     ("units", "activation", "recurrent_activation", "use_bias", "reset_after", "go_backwards")
                     and not k.endswith(("_initializer", "_regularizer", "_constraint")))
    if unknown:
        raise AttributeValueError(f"{where}config: unknown Keras {_KERAS_CLASS[kind]} option(s) "
                                  f"{', '.join(unknown)}")
    weights = list(weights)
    if len(weights) not in (2, 3):
        raise ShapeError(f"{where}weights: expected [kernel, recurrent_kernel(, bias)], got {len(weights)} arrays")
    G = GATE_COUNT[kind]
    kernel = _float(weights[0], f"{where}kernel")
    rec = _float(weights[1], f"{where}recurrent_kernel")
    if kernel.ndim != 2 or rec.ndim != 2 or rec.shape[1] != G * rec.shape[0] or kernel.shape[1] != rec.shape[1] \
            or rec.shape[0] == 0 or kernel.shape[0] == 0:
        raise ShapeError(f"{where}kernel, recurrent_kernel: expected [input_dim, {G}*units] and "
                         f"[units, {G}*units], got {kernel.shape} and {rec.shape}")
    U = rec.shape[0]
    units = config.get("units")
    if units is not None and units != U:
        raise ShapeError(f"{where}units: config says {units}, the recurrent kernel {rec.shape} has {U}")
    use_bias = config.get("use_bias")
    if use_bias is not None and bool(use_bias) != (len(weights) == 3):
        raise ShapeError(f"{where}weights: use_bias={use_bias} but {len(weights)} arrays given")
    bias = _float(weights[2], f"{where}bias") if len(weights) == 3 else None
    reset_after = config.get("reset_after")
    out = dict(W=conventions.weights_to_canonical(kernel, kind, "keras", argument=f"{where}kernel"),
               R=conventions.weights_to_canonical(rec, kind, "keras", argument=f"{where}recurrent_kernel"),
               b_x=None, b_h=None, go_backwards=bool(config.get("go_backwards", False)), lbr=None)
    if kind == "gru":
        if bias is not None:
            inferred = bias.ndim == 2
            if reset_after is not None and bool(reset_after) != inferred:
                raise ShapeError(f"{where}bias: reset_after={reset_after} needs a bias of shape "
                                 f"{(2, 3 * U) if reset_after else (3 * U,)}, got {bias.shape}")
            reset_after = inferred
        reset_after = True if reset_after is None else bool(reset_after)  # the Keras 3 default
        out["lbr"] = reset_after
    if bias is not None:
        want = (2, G * U) if kind == "gru" and reset_after else (G * U,)
        if bias.shape != want:
            raise ShapeError(f"{where}bias: expected shape {want}, got {bias.shape}")
        if bias.ndim == 2:
            out["b_x"] = conventions.to_canonical(bias[0], kind, "keras", argument=f"{where}bias")
            out["b_h"] = conventions.to_canonical(bias[1], kind, "keras", argument=f"{where}bias")
        else:
            out["b_x"] = conventions.to_canonical(bias, kind, "keras", argument=f"{where}bias")
    act = _activation(config.get("activation", "tanh"), f"{where}activation")
    if kind == "rnn":
        out["acts"] = (act,)
    else:
        rec_act = _activation(config.get("recurrent_activation", "sigmoid"), f"{where}recurrent_activation")
        out["acts"] = (rec_act, act, act) if kind == "lstm" else (rec_act, act)
    return out


def _build(kind: str, dirs: list[dict], merge: str):
    D = len(dirs)
    if D == 2:
        a, b = dirs
        if a["W"].shape != b["W"].shape:
            raise ConversionError(f"layer: the forward and backward layers differ in shape (kernels "
                                  f"{a['W'].shape[::-1]} and {b['W'].shape[::-1]} transposed); fusedrnn needs "
                                  f"equal units and inputs")
        if a["lbr"] != b["lbr"]:
            raise ConversionError("layer: the forward and backward GRUs differ in reset_after")
    dt = np.float64 if any(d["W"].dtype == np.float64 for d in dirs) else np.float32
    W = np.stack([d["W"] for d in dirs]).astype(dt, copy=False)
    R = np.stack([d["R"] for d in dirs]).astype(dt, copy=False)

    def bias(key):
        if all(d[key] is None for d in dirs):
            return None
        return np.stack([np.zeros(W.shape[1], dt) if d[key] is None else d[key] for d in dirs]).astype(dt)

    b_x, b_h = bias("b_x"), bias("b_h")
    common = dict(direction="bidirectional" if D == 2 else ("reverse" if dirs[0]["go_backwards"] else "forward"),
                  activations=[list(d["acts"]) for d in dirs], batch_first=True, merge=merge)
    if common["direction"] == "reverse":
        common["output_order"] = "processing"  # Keras go_backwards returns the outputs as it computes them
    if kind == "lstm":
        return LSTM(W, R, b_x, b_h, **common)
    if kind == "gru":
        return GRU(W, R, b_x, b_h, linear_before_reset=dirs[0]["lbr"], **common)
    return RNN(W, R, b_x, b_h, **common)


def _check_expected(expected, kind: str) -> None:
    check_expected(expected, kind, "Keras", _KERAS_CLASS, "from_keras", "layer")


def from_keras_weights(kind, weights, *, bidirectional: bool = False, merge_mode="concat", **config):
    """A fusedrnn layer from Keras weight arrays (``layer.get_weights()``) and config.

    ``kind``: ``"LSTM"``, ``"GRU"`` or ``"SimpleRNN"``. ``config``: the Keras options that matter —
    ``activation`` (default ``"tanh"``; None means linear, as in Keras), ``recurrent_activation`` (default
    ``"sigmoid"``), ``use_bias`` and ``reset_after`` (inferred from the weights when absent), ``go_backwards``,
    ``units`` (checked); the other keys of ``layer.get_config()`` are accepted and ignored.
    ``bidirectional=True``: ``weights`` are a ``Bidirectional`` layer's (forward then backward, the same config)
    and ``merge_mode`` its merge mode (None -> ``merge="stack"``).
    """
    k = _kind(kind)
    if merge_mode not in MERGE_MODES:
        raise AttributeValueError(f"merge_mode: expected one of 'concat', 'sum', 'mul', 'ave' or None, got "
                                  f"{merge_mode!r}")
    weights = list(weights)
    if not bidirectional:
        return _build(k, [_one_direction(k, weights, config)], "concat")
    if len(weights) % 2 or len(weights) not in (4, 6):
        raise ShapeError(f"weights: expected the forward then the backward layer's 2 or 3 arrays each, got "
                         f"{len(weights)} arrays")
    if config.get("go_backwards"):
        raise ConversionError("go_backwards: a Bidirectional layer whose forward layer runs backwards has no "
                              "fusedrnn equivalent")
    half = len(weights) // 2
    fw = _one_direction(k, weights[:half], config, "forward ")
    bw = _one_direction(k, weights[half:], dict(config, go_backwards=True), "backward ")
    return _build(k, [fw, bw], MERGE_MODES[merge_mode])


def _variable(v) -> np.ndarray:
    keras = _keras("from_keras")
    return np.asarray(keras.ops.convert_to_numpy(v))


def _read_rnn(layer, keras, where: str = "") -> tuple[str, dict]:
    cell = getattr(layer, "cell", None)
    cells = {keras.layers.LSTMCell: "lstm", keras.layers.GRUCell: "gru", keras.layers.SimpleRNNCell: "rnn"}
    kind = next((k for c, k in cells.items() if type(cell) is c), None)
    if kind is None:
        kind = next((k for c, k in cells.items() if isinstance(cell, c)), None)
    if kind is None:
        raise FrameworkTypeError(f"{where}layer: expected a Keras LSTM, GRU, SimpleRNN (or an RNN with one "
                                 f"LSTMCell, GRUCell or SimpleRNNCell) or a Bidirectional of one, got "
                                 f"{type(layer).__name__} with cell {type(cell).__name__}")
    if not layer.built or getattr(cell, "kernel", None) is None:
        raise ConversionError(f"{where}layer: the Keras layer {layer.name!r} is not built and has no weights yet; "
                              f"call it on an input or build(input_shape) first")
    weights = [_variable(cell.kernel), _variable(cell.recurrent_kernel)]
    if cell.use_bias:
        weights.append(_variable(cell.bias))
    config = dict(units=cell.units, activation=cell.activation, go_backwards=bool(layer.go_backwards))
    if kind != "rnn":
        config["recurrent_activation"] = cell.recurrent_activation
    if kind == "gru":
        config["reset_after"] = bool(cell.reset_after)
    return kind, _one_direction(kind, weights, config, where)


def from_keras(layer, expected=None):
    """A fusedrnn layer from a built Keras 3 ``LSTM``, ``GRU``, ``SimpleRNN`` (or ``RNN`` of one such cell) or
    ``Bidirectional`` of one. ``expected``: a layer class the Keras layer must match (or ``RecurrentLayer`` /
    None for any)."""
    keras = _keras("from_keras")
    if isinstance(layer, keras.layers.Bidirectional):
        fwd, bwd = layer.forward_layer, layer.backward_layer
        kf, df = _read_rnn(fwd, keras, "forward ")
        kb, db = _read_rnn(bwd, keras, "backward ")
        if kf != kb:
            raise ConversionError(f"layer: the Bidirectional's forward layer is a {_KERAS_CLASS[kf]} and its "
                                  f"backward layer a {_KERAS_CLASS[kb]}; fusedrnn needs one cell kind")
        if df["go_backwards"] or not db["go_backwards"]:
            raise ConversionError("layer: a Bidirectional whose forward layer has go_backwards=True has no fusedrnn "
                                  "equivalent (its outputs come in processing order)")
        _check_expected(expected, kf)
        return _build(kf, [df, db], MERGE_MODES[layer.merge_mode])
    if not isinstance(layer, keras.layers.RNN):
        raise FrameworkTypeError(f"layer: expected a Keras LSTM, GRU, SimpleRNN or Bidirectional layer, got "
                                 f"{type(layer).__module__}.{type(layer).__qualname__}")
    kind, d = _read_rnn(layer, keras)
    _check_expected(expected, kind)
    return _build(kind, [d], "concat")


# ------------------------------------------------------------------------------------------------ go_backwards

def _copy_with_order(layer, order: str, func: str):
    if not isinstance(layer, RecurrentLayer):
        raise FrameworkTypeError(f"layer: {func} expected a fusedrnn LSTM, GRU or RNN, got "
                                 f"{type(layer).__name__}")
    new = copy.copy(layer)  # shares the weight arrays, as layer.to() does
    new.output_order = order
    return new


def time_ordered(layer):
    """A copy of ``layer`` with ``output_order="time"``: a reverse layer's output for x[t] at index t (ONNX's and
    PyTorch's order; ``to_onnx`` accepts it). The weight arrays are shared."""
    return _copy_with_order(layer, "time", "time_ordered")


def processing_order(layer):
    """A copy of a ``direction="reverse"`` layer with ``output_order="processing"``: its outputs in the order it
    computes them, as Keras ``go_backwards=True`` returns them (the inverse of :func:`time_ordered`). The weight
    arrays are shared."""
    if isinstance(layer, RecurrentLayer) and layer.direction != "reverse":
        raise ConversionError(f"layer: output_order='processing' needs direction='reverse', got "
                              f"direction={layer.direction!r}")
    return _copy_with_order(layer, "processing", "processing_order")


# ------------------------------------------------------------------------------------------------ to_keras

def _problems(layer) -> list[str]:
    bad = []
    if layer.direction == "reverse" and layer.output_order != "processing":
        bad.append("direction='reverse' with outputs in time order (output_order='time'; Keras go_backwards "
                   "returns them in processing order: convert fusedrnn.frontends.keras.processing_order(layer))")
    if layer.num_directions == 1 and layer.merge == "stack":
        bad.append("merge='stack' on a one-direction layer (Keras returns [B, T, U]; set merge='concat' on a "
                   "copy)")
    if layer.clip is not None:
        bad.append(f"clip={layer.clip}")
    for d, per in enumerate(layer.activations):
        names = [_keras_name(a) for a in per]
        for a, n in zip(per, names, strict=True):
            if n is None:
                bad.append(f"activation {a.name}(alpha={a.alpha}, beta={a.beta}) (no Keras name; Keras has "
                           f"{', '.join(KERAS_ACTIVATIONS)})")
        if layer.cell == "lstm" and per[1] != per[2]:
            bad.append(f"activations[{d}]: cell candidate {per[1].name} differs from the cell output activation "
                       f"{per[2].name} (Keras LSTM uses one `activation` for both)")
    if layer.cell == "lstm":
        for cond, name in ((layer.P is not None, "peepholes (P)"),
                           (layer.proj_W is not None, "projection (proj_W)"),
                           (layer.proj_b is not None, "projection bias (proj_b)"),
                           (layer.proj_clip is not None, f"proj_clip={layer.proj_clip}"),
                           (layer.layer_norm is not None, "layer_norm"),
                           (layer.coupling is not None, f"coupling={layer.coupling!r} (input_forget / CIFG)"),
                           (layer.cell_clip is not None, f"cell_clip={layer.cell_clip}"),
                           (layer.diagonal, "diagonal recurrence (R [D, 4H])")):
            if cond:
                bad.append(name)
    return bad


def _keras_weights(layer, d: int) -> list[np.ndarray]:
    kind = layer.cell
    f32 = np.float32
    w = [conventions.weights_from_canonical(layer.W[d], kind, "keras").astype(f32),
         conventions.weights_from_canonical(layer.R[d], kind, "keras").astype(f32)]
    if layer.b_x is None and layer.b_h is None:
        return w
    zeros = np.zeros(layer.W.shape[1], layer.W.dtype)
    bx = zeros if layer.b_x is None else layer.b_x[d]
    bh = None if layer.b_h is None else layer.b_h[d]
    if kind == "gru" and layer.linear_before_reset:
        rows = [bx, zeros if bh is None else bh]
        w.append(np.stack([conventions.from_canonical(r, kind, "keras") for r in rows]).astype(f32))
    else:  # single bias: every bias is additive outside the activations here
        w.append(conventions.from_canonical(bx if bh is None else bx + bh, kind, "keras").astype(f32))
    return w


def to_keras(layer, **layer_kwargs):
    """The equivalent Keras 3 layer (``LSTM``/``GRU``/``SimpleRNN``, in a ``Bidirectional`` for two
    directions), built and loaded with ``layer``'s weights. ``layer_kwargs`` go to the recurrent layer's
    constructor (default ``return_sequences=True``)."""
    if not isinstance(layer, RecurrentLayer):
        raise FrameworkTypeError(f"layer: expected a fusedrnn LSTM, GRU or RNN, got {type(layer).__name__}")
    fixed = sorted(set(layer_kwargs) & {"units", "activation", "recurrent_activation", "use_bias", "reset_after",
                                        "go_backwards", "merge_mode", "backward_layer"})
    if fixed:
        raise AttributeValueError(f"layer_kwargs: {', '.join(fixed)} come from the fusedrnn layer and cannot be "
                                  f"overridden")
    keras = _keras("to_keras")
    problems = _problems(layer)
    if problems:
        raise ConversionError(f"layer: Keras {_KERAS_CLASS[layer.cell]} cannot express: " + "; ".join(problems))
    kind, U, D = layer.cell, layer.hidden_size, layer.num_directions
    cls = getattr(keras.layers, _KERAS_CLASS[kind])
    use_bias = layer.b_x is not None or layer.b_h is not None

    def make(d: int, go_backwards: bool, **extra):
        per = layer.activations[d]
        kw = dict(units=U, activation=_keras_name(per[1] if kind != "rnn" else per[0]), use_bias=use_bias,
                  go_backwards=go_backwards, return_sequences=True, dtype="float32")
        if kind != "rnn":
            kw["recurrent_activation"] = _keras_name(per[0])
        if kind == "gru":
            kw["reset_after"] = bool(layer.linear_before_reset)
        kw.update(layer_kwargs)
        kw.update(extra)
        return cls(**kw)

    shape = (None, None, layer.input_size)
    if D == 1:
        out = make(0, layer.direction == "reverse")
        out.build(shape)
        out.set_weights(_keras_weights(layer, 0))
        return out
    merge_mode = {v: k for k, v in MERGE_MODES.items()}[layer.merge]
    fwd = make(0, False)
    bwd = None
    if layer.activations[0] != layer.activations[1]:
        base = layer_kwargs.get("name", fwd.name)
        bwd = make(1, True, name=f"backward_{base}")
    out = keras.layers.Bidirectional(fwd, merge_mode=merge_mode, backward_layer=bwd)
    out.build(shape)
    out.set_weights(_keras_weights(layer, 0) + _keras_weights(layer, 1))
    return out


# ------------------------------------------------------------------------------------------------ .keras files

SUPPORTED_BACKENDS = ("torch", "jax", "tensorflow")
"""The Keras backends fusedrnn reads and writes layers with (weights are read as NumPy arrays, so any backend
Keras runs on works; the test suite runs torch)."""
KERAS_CONFIG_LIMIT = 16 << 20
"""The largest ``config.json`` :func:`check_keras_file` reads."""
_WEIGHTS_PER_UNIT = {  # class name -> gate count: at least gates * units * (units + input size) weights
    "LSTM": 4, "LSTMCell": 4, "GRU": 3, "GRUCell": 3, "SimpleRNN": 1, "SimpleRNNCell": 1, "Dense": 0,
}


def _declared_weights(config, argument: str = "SRC") -> int:
    """A lower bound of the weights the layers in a Keras config (parsed JSON) allocate when built: for each
    LSTM / GRU / SimpleRNN (or cell) gates * units * units, plus gates * units * input size (Dense: units *
    input size) where the layer's ``build_config`` gives the input size."""
    total, todo = 0, [config]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        todo.extend(node.values())
        cls, cfg = node.get("class_name"), node.get("config")
        if cls not in _WEIGHTS_PER_UNIT or not isinstance(cfg, dict) or "units" not in cfg:
            continue
        units = cfg["units"]
        if isinstance(units, bool) or not isinstance(units, int) or not 0 < units < 2**31:
            raise FileFormatError(f"{argument}: layer {brief(cfg.get('name'))} ({cls}): units: expected a positive "
                                  f"int, got {brief(units)}")
        build = node.get("build_config")
        shape = build.get("input_shape") if isinstance(build, dict) else None
        inputs = shape[-1] if isinstance(shape, list) and shape and isinstance(shape[-1], int) else 0
        gates = _WEIGHTS_PER_UNIT[cls]
        total += gates * units * units + max(gates, 1) * units * max(inputs, 0)
    return total


def check_keras_file(path, argument: str = "SRC") -> None:
    """Raise FileFormatError unless ``path`` is a ``.keras`` zip archive whose claims fit the file (module
    docstring): member sizes, ``config.json`` present, parseable and at most :data:`KERAS_CONFIG_LIMIT` bytes,
    and no more layer weights declared (:func:`_declared_weights`, one byte each at least) than
    ``model.weights.h5`` has bytes."""
    path = Path(path)
    with open_zip(path, argument) as z:
        infos = {i.filename: i for i in z.infolist()}
        config = infos.get("config.json")
        if config is None:
            raise FileFormatError(f"{argument}: {brief(str(path))} has no config.json; expected a Keras 3 .keras "
                                  f"archive")
        if config.file_size > KERAS_CONFIG_LIMIT:
            raise FileFormatError(f"{argument}: config.json of {brief(str(path))} has {config.file_size} bytes; "
                                  f"expected at most {KERAS_CONFIG_LIMIT}")
        try:
            parsed = json.loads(z.read(config).decode("utf-8"))
        except (ValueError, RecursionError, OSError, EOFError) as exc:
            raise FileFormatError(f"{argument}: config.json of {brief(str(path))} is not readable JSON "
                                  f"({brief(str(exc), 80)})") from None
        except Exception as exc:  # noqa: BLE001 - zipfile's errors on a damaged member (BadZipFile, CRC)
            raise FileFormatError(f"{argument}: config.json of {brief(str(path))} cannot be read "
                                  f"({type(exc).__name__})") from None
        weights = infos.get("model.weights.h5")
        have = weights.file_size if weights is not None else 0
    need = _declared_weights(parsed, argument)
    if need > have:
        raise FileFormatError(f"{argument}: the layers of {brief(str(path))} declare at least {need} weights but its "
                              f"weights file holds {have} bytes")


register_converter("from_keras", from_keras)
register_converter("to_keras", to_keras)

__all__ = ["SUPPORTED_BACKENDS", "from_keras", "from_keras_weights", "to_keras", "time_ordered", "processing_order",
           "KERAS_ACTIVATIONS", "MERGE_MODES", "KERAS_CONFIG_LIMIT", "check_keras_file"]
