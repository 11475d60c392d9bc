"""Layer objects: ``LSTM``, ``GRU``, ``RNN`` hold canonical weights and options; calling one runs it.

Canonical form (see :mod:`fusedrnn.conventions`): gate order LSTM (i, f, g, o), GRU (z, r, n); matrices
out x in per direction, W [D, G*H, I], R [D, G*H, Hp]; double bias ``b_x``, ``b_h`` [D, G*H].

``y, state = layer(x, state=None, sequence_lens=None)``:

* x is [T, B, I], or [B, T, I] when ``batch_first``;
* y has the directions merged by ``merge``: ``"concat"`` [T, B, D*H] (PyTorch/Keras), ``"stack"`` [T, D, B, H]
  (ONNX), ``"sum"``, ``"mul"``, ``"ave"`` [T, B, H]; batch first when ``batch_first``;
* state is [D, B, H] for GRU/RNN and a pair (h [D, B, Hp], c [D, B, H]) for LSTM, whatever ``batch_first``;
* ``sequence_lens`` [B] follows onnxruntime: outputs past each length are zero, the state is the last valid one;
* ``output_order="time"`` (default) stores the backward direction's output for x[t] at index t (ONNX, PyTorch,
  Keras Bidirectional); ``"processing"`` stores a reverse layer's outputs in the order it computes them (Keras
  ``go_backwards``, MLI BACKWARD + OUT_ALL): index s holds the state after reading x[len-1-s].

Importers keep their source's conventions (``from_onnx``: merge "stack" and ONNX ``layout``; ``from_torch``:
merge "concat" and ``batch_first``; ``from_keras``: batch first and the Bidirectional merge mode), so a converted
layer is a drop-in replacement. ``layer.to(target)`` returns a copy that runs on an emulation target.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar

import numpy as np

from . import conventions, targets
from .cells.activations import Activation, parse_activations, to_onnx_lists
from .cells.calibration import Calibration, CalibrationInputs
from .cells.kinds import DEFAULT_ACTIVATIONS, GATE_COUNT
from .cells.recurrence import DIRECTIONS, MERGE_MODES, direction_flags, merge_directions, reverse_valid_prefix
from .cells.spec import CellShape, CellSpec, run_spec
from .errors import AttributeValueError, ConversionError, ShapeError, UnsupportedFeatureError
from .targets.registry import Prepared, as_prepared
from .validation import (
    as_float_array,
    calibration_sequences,
    check_rank,
    check_shape,
    choice,
    flag,
    optional_positive_float,
    sequence_lengths,
)

COUPLINGS = (None, "input_forget", "cifg")
OUTPUT_ORDERS = ("time", "processing")

CONVERTER_SIGNATURES = {
    "from_onnx": "(cls, W, R, B, P, attributes: dict) -> layer",
    "to_onnx_model": "(layer, *, opset, ir_version, name, state_inputs, layout) -> onnx.ModelProto",
    "from_tflite": "(cls, source, op_index) -> layer",
    "from_torch": "(module, expected=cls) -> layer or Stack",
    "to_torch": "(layer_or_stack) -> torch.nn.Module",
    "from_keras": "(keras_layer, expected=cls) -> layer",
    "to_keras": "(layer) -> keras layer",
}
"""The format converters behind the layer methods of the same names, and how each is called."""

CONVERTERS: dict[str, Callable] = {}
"""Converter name (a key of ``CONVERTER_SIGNATURES``) -> function. The frontends fill it when they are imported
(:mod:`fusedrnn.frontends`, which ``import fusedrnn`` imports), so layers never import a model format."""


def register_converter(name: str, fn: Callable) -> None:
    """Make ``fn`` the converter ``name`` (called as ``CONVERTER_SIGNATURES[name]`` says); a frontend calls this
    when it is imported."""
    if name not in CONVERTER_SIGNATURES:
        raise AttributeValueError(f"name: expected one of {sorted(CONVERTER_SIGNATURES)}, got {name!r}")
    if not callable(fn):
        raise AttributeValueError(f"fn: expected a callable converter for {name!r}, got {fn!r}")
    CONVERTERS[name] = fn


def converter(name: str) -> Callable:
    """The registered converter ``name``; ConversionError when no frontend registered it."""
    try:
        return CONVERTERS[name]
    except KeyError:
        raise ConversionError(f"{name}: no converter is registered; the frontends register them when "
                              f"fusedrnn.frontends is imported (``import fusedrnn`` does that)") from None


def _opt_array(a, name: str, shape: tuple, meaning: str) -> np.ndarray | None:
    if a is None:
        return None
    arr = as_float_array(a, name)
    check_shape(arr, shape, name, meaning)
    return np.array(arr, dtype=np.float64 if arr.dtype == np.float64 else np.float32)


class RecurrentLayer(CellShape):
    """Common part of :class:`LSTM`, :class:`GRU` and :class:`RNN`."""

    cell: ClassVar[str] = ""
    prepared: Prepared | None = None
    """The layer prepared on its target by :meth:`to` (quantized weights, kernels); None runs the float engines."""
    kept: dict | None = None
    """Tensors an importer kept from the source file, by format (e.g. ``{"litert": ...}``): see CellSpec.kept."""

    def __init__(self, W, R, b_x=None, b_h=None, *, direction: str = "forward", activations=None,
                 clip: float | None = None, batch_first: bool = False, merge: str = "concat", target=None,
                 output_order: str = "time", diagonal_ok: bool = False):
        G = GATE_COUNT[self.cell]
        self.direction = choice(direction, DIRECTIONS, "direction")
        D = len(direction_flags(direction))
        W = as_float_array(W, "W")
        check_rank(W, 3, "W", f"[num_directions, {G}*hidden_size, input_size]")
        if W.shape[0] != D or W.shape[1] % G or W.shape[1] == 0 or W.shape[2] == 0:
            raise ShapeError(f"W: expected shape ({D}, {G}*hidden_size, input_size) for direction "
                             f"{direction!r}, got {W.shape}")
        H = W.shape[1] // G
        dt = np.float64 if W.dtype == np.float64 else np.float32
        self.W = np.array(W, dtype=dt)
        R = as_float_array(R, "R")
        if diagonal_ok and R.ndim == 2:
            check_shape(R, (D, G * H), "R", "[num_directions, 4*hidden_size] (diagonal recurrence)")
        else:
            check_rank(R, 3, "R", f"[num_directions, {G}*hidden_size, hidden_size]")
            if R.shape[:2] != (D, G * H):
                raise ShapeError(f"R: expected shape ({D}, {G * H}, hidden_size), got {R.shape}")
        self.R = np.array(R, dtype=dt)
        self.b_x = _opt_array(b_x, "b_x", (D, G * H), f"[num_directions, {G}*hidden_size]")
        self.b_h = _opt_array(b_h, "b_h", (D, G * H), f"[num_directions, {G}*hidden_size]")
        self.activations = self._resolve_activations(activations, D)
        self.clip = optional_positive_float(clip, "clip")
        self.batch_first = flag(batch_first, "batch_first")
        self.merge = choice(merge, MERGE_MODES, "merge")
        self.output_order = choice(output_order, OUTPUT_ORDERS, "output_order")
        if self.output_order == "processing" and self.direction != "reverse":
            raise AttributeValueError(f"output_order: 'processing' applies to direction='reverse' layers only, got "
                                      f"direction={self.direction!r}")
        # by default a layer computes in the precision of its weights
        self.target = targets.get(target if target is not None else ("fp64" if dt == np.float64 else "fp32"))

    def _resolve_activations(self, activations, D: int) -> list[tuple[Activation, ...]]:
        n = len(DEFAULT_ACTIVATIONS[self.cell])
        if activations is None:
            per = [tuple(Activation(a) for a in DEFAULT_ACTIVATIONS[self.cell])] * D
            return per
        if not isinstance(activations, (list, tuple)):
            raise AttributeValueError(f"activations: expected a list of activation names or Activation objects, "
                                      f"got {activations!r}")
        acts = list(activations)
        if acts and all(isinstance(a, (list, tuple)) for a in acts):  # per direction
            if len(acts) != D:
                raise AttributeValueError(f"activations: expected {D} per-direction lists, got {len(acts)}")
            acts = [a for per in acts for a in per]
        if len(acts) == n and D == 2:
            acts = acts * 2
        if len(acts) != n * D:
            raise AttributeValueError(f"activations: expected {n} (or {n * D}) activations for a "
                                      f"{self.direction} {self.cell.upper()}, got {len(acts)}: {acts!r}")
        if not all(isinstance(a, (str, Activation)) for a in acts):
            raise AttributeValueError(f"activations: expected activation names or Activation objects, got {acts!r}")
        resolved = [a if isinstance(a, Activation) else parse_activations([a])[0] for a in acts]
        return [tuple(resolved[d * n : (d + 1) * n]) for d in range(D)]

    # ---- running -----------------------------------------------------------------------------------------
    def _inputs(self, x, sequence_lens):
        x = as_float_array(x, "x")
        check_rank(x, 3, "x", "[batch, time, features]" if self.batch_first else "[time, batch, features]")
        if self.batch_first:
            x = x.transpose(1, 0, 2)
        T, B, I = x.shape
        if T == 0 or B == 0:
            raise ShapeError(f"x: expected at least one timestep and one batch row, got shape {x.shape}")
        if I != self.input_size:
            raise ShapeError(f"x: expected {self.input_size} features in the last axis, got shape {x.shape}")
        dt = self.target.dtype
        return np.ascontiguousarray(x, dtype=dt), sequence_lengths(sequence_lens, T, B), dt

    def _state(self, a, name, B, size, dt):
        if a is None:
            return np.zeros((self.num_directions, B, size), dt)
        a = as_float_array(a, name)
        check_shape(a, (self.num_directions, B, size), name, "[num_directions, batch, hidden]")
        return np.ascontiguousarray(a, dtype=dt)

    def _output(self, Y, lens):
        if self.output_order == "processing":  # back to processing order: index s <- time len-1-s
            Y = reverse_valid_prefix(Y.transpose(0, 2, 1, 3), lens).transpose(0, 2, 1, 3)
        y = merge_directions(Y, self.merge)
        if self.merge in ("sum", "mul", "ave") and self.num_directions == 2:
            self.target.rounding.apply("outputs", y)  # the merged values are outputs of the target too
        if self.batch_first:
            y = np.moveaxis(y, 2 if self.merge == "stack" else 1, 0)
        return np.ascontiguousarray(y)

    def _run(self, xt: np.ndarray, states: tuple, lens) -> tuple[np.ndarray, tuple]:
        """The cell over time-major xt: on the prepared target, or the float engines with the target's rounding."""
        if self.prepared is not None:
            return self.prepared(xt, states, lens)
        return run_spec(self.spec, xt, states, lens, policy=self.target.rounding)

    def _spec_options(self) -> dict:
        """The kind-specific CellSpec fields (subclasses add theirs)."""
        return {}

    def __call__(self, x, state=None, sequence_lens=None):
        """Run the cell (GRU, RNN; the LSTM has its own). ``state`` = h0 [D, B, H] or None; returns (y, h_n)."""
        xt, lens, dt = self._inputs(x, sequence_lens)
        h0 = self._state(state, "state", xt.shape[1], self.hidden_size, dt)
        Y, (h,) = self._run(xt, (h0,), lens)
        return self._output(Y, lens), h

    @property
    def spec(self) -> CellSpec:
        """This layer's cell as a :class:`~fusedrnn.cells.spec.CellSpec` (sharing the layer's arrays)."""
        return CellSpec(self.cell, self.W, self.R, self.b_x, self.b_h, direction=self.direction,
                        activations=tuple(self.activations), clip=self.clip, kept=self.kept,
                        **self._spec_options())

    # ---- targets and copies ------------------------------------------------------------------------------
    def to(self, target, calibration=None):
        """A copy of this layer that runs on ``target`` (a registered name or a Target).

        ``calibration`` (input data [T, B, I], or [B, T, I] for a ``batch_first`` layer, or a list of such
        arrays, or a :class:`~fusedrnn.Calibration` holding such data and the method that chooses the ranges)
        is for quantized targets, which choose their quantization parameters from it; the float targets ignore
        it."""
        t = targets.get(target)
        missing = [f for f in self.features() if not t.supports(f)]
        if missing:
            raise UnsupportedFeatureError(f"target: {t.name!r} cannot express {', '.join(missing)} of this "
                                          f"{self.cell.upper()}")
        if t.needs_calibration and (calibration is None or (isinstance(calibration, Calibration)
                                                             and calibration.inputs is None)):
            raise UnsupportedFeatureError(f"calibration: target {t.name!r} is quantized and needs calibration "
                                          f"data (input sequences) to choose its scales, got None")
        new = copy.copy(self)
        new.target = t
        new.prepared = None
        if t.prepare is not None:
            spec = self.spec
            new.prepared = as_prepared(spec, t.prepare(spec, self._calibration(calibration)), t.name)
        return new

    def _calibration(self, calibration):
        """Calibration inputs normalised once for every target: None, a string naming a stored quantization
        (e.g. "tflite"), or a list of time-major float64 arrays [T, B, I] (a
        :class:`~fusedrnn.cells.calibration.CalibrationInputs` carrying the method when one was given)."""
        settings = None
        if isinstance(calibration, Calibration):
            settings, calibration = calibration, calibration.inputs
        if calibration is None or isinstance(calibration, str):
            return calibration
        xs = calibration_sequences(calibration, self.input_size, batch_first=self.batch_first)
        return xs if settings is None else CalibrationInputs(xs, settings)

    def features(self) -> list[str]:
        """The options this layer uses, by the feature names of :mod:`fusedrnn.targets`."""
        return self.spec.features()

    def __repr__(self) -> str:
        order = "" if self.output_order == "time" else f", output_order={self.output_order!r}"
        return (f"{type(self).__name__}(input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"direction={self.direction!r}{order}, target={self.target.name!r})")

    # ---- ONNX --------------------------------------------------------------------------------------------
    def _onnx_common(self) -> dict:
        names, alphas, betas = to_onnx_lists([a for per in self.activations for a in per])
        attrs = {"hidden_size": self.hidden_size, "direction": self.direction}
        if tuple(names) != DEFAULT_ACTIVATIONS[self.cell] * self.num_directions:
            attrs["activations"] = names
            if alphas:
                attrs["activation_alpha"] = alphas
            if betas:
                attrs["activation_beta"] = betas
        if self.clip is not None:
            attrs["clip"] = self.clip
        if self.batch_first:
            attrs["layout"] = 1
        return attrs

    def to_onnx(self) -> dict:
        """ONNX inputs and attributes: ``{"W", "R", "B", ["P",] "attributes"}`` in ONNX gate order."""
        self._check_onnx_expressible()
        W, R, B = conventions.onnx_inputs(self.cell, self.W, self.R, self.b_x, self.b_h)
        out = {"W": W, "R": R, "B": B, "attributes": self._onnx_common()}
        self._onnx_extra(out)
        return out

    def _check_onnx_expressible(self):
        """Raise ConversionError for options an ONNX node cannot carry (the direction merge is not one:
        the node always returns the stacked direction axis)."""
        if self.output_order == "processing":
            raise ConversionError("output_order: ONNX stores reverse outputs in time order; export a copy with "
                                  "output_order='time' and flip Y along time (over each sequence's length)")

    def _onnx_extra(self, out: dict) -> None:
        pass

    def to_onnx_model(self, *, opset: int = 14, ir_version: int = 8, name: str | None = None,
                      state_inputs: bool = True, layout: int = 0):
        """A single-node ONNX model: inputs X [, sequence_lens, initial_h(, initial_c)], weights as
        initializers, outputs Y, Y_h (, Y_c) in ONNX's stacked-direction form.

        A ``batch_first`` layer keeps a batch-major signature (X [batch, seq, I], Y [batch, seq, D, H], states
        [batch, D, H]). With ``layout=0`` (default) that is made of Transpose nodes around a time-major node,
        which onnxruntime runs; ``layout=1`` sets the node's batch-major ``layout`` attribute instead (exact
        ONNX, but onnxruntime refuses to load it). Built by :func:`fusedrnn.frontends.onnx_node.to_onnx_model`.
        """
        return converter("to_onnx_model")(self, opset=opset, ir_version=ir_version, name=name,
                                          state_inputs=state_inputs, layout=layout)

    @classmethod
    def from_onnx(cls, W, R=None, B=None, P=None, **attributes):
        """A layer from ONNX W, R, B (, P) and node attributes, or from a single-node ONNX model
        (``ModelProto`` or path) whose weights are initializers. Keeps ONNX's conventions: merge "stack" and
        ``batch_first = (layout == 1)``."""
        return converter("from_onnx")(cls, W, R, B, P, attributes)

    # ---- other frameworks (implemented in fusedrnn.frontends, found through CONVERTERS) ------------------
    @classmethod
    def from_tflite(cls, path, op_index: int = 0):
        """A layer from the ``op_index``-th recurrent op of a .tflite model (``fusedrnn.litert.load(path).ops``):
        weights dequantized; the model's own tensors are kept so that ``.to("litert-int8x16",
        calibration="tflite")`` runs them unchanged (bit-exact with the LiteRT interpreter)."""
        return converter("from_tflite")(cls, path, op_index)

    @classmethod
    def from_torch(cls, module):
        """A layer (or a :class:`Stack` for ``num_layers > 1``) from a PyTorch ``nn.LSTM/GRU/RNN``."""
        return converter("from_torch")(module, expected=cls)

    def to_torch(self):
        """The equivalent PyTorch ``nn.LSTM/GRU/RNN`` module (float32)."""
        return converter("to_torch")(self)

    @classmethod
    def from_keras(cls, layer):
        """A layer from a Keras 3 ``LSTM``, ``GRU``, ``SimpleRNN`` or ``Bidirectional`` layer."""
        return converter("from_keras")(layer, expected=cls)

    def to_keras(self):
        """The equivalent Keras 3 layer, built and loaded with this layer's weights."""
        return converter("to_keras")(self)


class LSTM(RecurrentLayer):
    """LSTM with every option of ONNX, PyTorch, Keras and TFLite.

    Beyond the common arguments: ``P`` peepholes [D, 3, H] (order i, f, o); ``coupling`` None,
    ``"input_forget"`` (ONNX: f = 1 - i) or ``"cifg"`` (TFLite: i = 1 - f); ``cell_clip``; projection
    ``proj_W`` [D, Hp, H], ``proj_b`` [D, Hp], ``proj_clip``; ``layer_norm`` [D, 4, H] (TFLite; ε = 1e-8 inside
    the square root, bias added after normalisation); a diagonal recurrence when R is [D, 4H].
    """

    cell = "lstm"

    def __init__(self, W, R, b_x=None, b_h=None, *, P=None, coupling: str | None = None,
                 cell_clip: float | None = None, proj_W=None, proj_b=None, proj_clip: float | None = None,
                 layer_norm=None, **options):
        super().__init__(W, R, b_x, b_h, diagonal_ok=True, **options)
        D, H = self.num_directions, self.hidden_size
        self.P = _opt_array(P, "P", (D, 3, H), "[num_directions, 3, hidden_size] (order i, f, o)")
        self.coupling = choice(coupling, COUPLINGS, "coupling")
        self.cell_clip = optional_positive_float(cell_clip, "cell_clip")
        self.proj_W = None
        if proj_W is not None:
            pw = as_float_array(proj_W, "proj_W")
            check_rank(pw, 3, "proj_W", "[num_directions, proj_size, hidden_size]")
            check_shape(pw, (D, pw.shape[1], H), "proj_W", "[num_directions, proj_size, hidden_size]")
            if pw.shape[1] == 0:
                raise ShapeError(f"proj_W: expected proj_size >= 1, got shape {pw.shape}")
            self.proj_W = np.array(pw, dtype=self.W.dtype)
        Hp = self.output_size
        self.proj_b = _opt_array(proj_b, "proj_b", (D, Hp), "[num_directions, proj_size]")
        if self.proj_b is not None and self.proj_W is None:
            raise AttributeValueError("proj_b: a projection bias needs projection weights proj_W")
        self.proj_clip = optional_positive_float(proj_clip, "proj_clip")
        if self.proj_clip is not None and self.proj_W is None:
            raise AttributeValueError("proj_clip: clipping the projection needs projection weights proj_W")
        self.layer_norm = _opt_array(layer_norm, "layer_norm", (D, 4, H), "[num_directions, 4, hidden_size]")
        if self.R.ndim == 2 and self.proj_W is not None:
            raise AttributeValueError("R: a diagonal recurrence (R [D, 4H]) needs hidden and output sizes equal; "
                                      "it cannot be combined with a projection")
        if self.R.ndim == 3 and self.R.shape[2] != Hp:
            raise ShapeError(f"R: expected shape ({D}, {4 * H}, {Hp}) [num_directions, 4*hidden_size, "
                             f"{'proj_size' if self.proj_W is not None else 'hidden_size'}], got {self.R.shape}")

    def __call__(self, x, state=None, sequence_lens=None):
        """Run the LSTM. ``state`` = (h0 [D, B, Hp], c0 [D, B, H]) or None; returns (y, (h_n, c_n))."""
        xt, lens, dt = self._inputs(x, sequence_lens)
        B = xt.shape[1]
        h0 = c0 = None
        if state is not None:
            if not isinstance(state, (tuple, list)) or len(state) != 2:
                raise ShapeError(f"state: expected a pair (h0, c0) for an LSTM, got {type(state).__name__}")
            h0, c0 = state
        h0 = self._state(h0, "state[0] (h0)", B, self.output_size, dt)
        c0 = self._state(c0, "state[1] (c0)", B, self.hidden_size, dt)
        Y, (h, c) = self._run(xt, (h0, c0), lens)
        return self._output(Y, lens), (h, c)

    def _spec_options(self) -> dict:
        return dict(P=self.P, coupling=self.coupling, cell_clip=self.cell_clip, proj_W=self.proj_W,
                    proj_b=self.proj_b, proj_clip=self.proj_clip, layer_norm=self.layer_norm)

    def _check_onnx_expressible(self):
        super()._check_onnx_expressible()
        bad = [name for cond, name in ((self.coupling == "cifg", "coupling='cifg'"),
                                       (self.cell_clip is not None, "cell_clip"),
                                       (self.proj_W is not None, "projection"),
                                       (self.layer_norm is not None, "layer_norm"),
                                       (self.diagonal, "diagonal recurrence")) if cond]
        if bad:
            raise ConversionError(f"layer: ONNX LSTM cannot express {', '.join(bad)}")

    def _onnx_extra(self, out: dict) -> None:
        if self.P is not None:
            out["P"] = conventions.peepholes_from_canonical(self.P, "onnx", axis=1).reshape(self.num_directions, -1)
        if self.coupling == "input_forget":
            out["attributes"]["input_forget"] = 1


class GRU(RecurrentLayer):
    """GRU; ``linear_before_reset=True`` is the PyTorch / Keras ``reset_after=True`` form."""

    cell = "gru"

    def __init__(self, W, R, b_x=None, b_h=None, *, linear_before_reset: bool = False, **options):
        super().__init__(W, R, b_x, b_h, **options)
        self.linear_before_reset = flag(linear_before_reset, "linear_before_reset")
        if self.R.shape[2] != self.hidden_size:
            raise ShapeError(f"R: expected shape {self.W.shape[:2] + (self.hidden_size,)}, got {self.R.shape}")

    def _spec_options(self) -> dict:
        return dict(linear_before_reset=self.linear_before_reset)

    def _onnx_extra(self, out: dict) -> None:
        if self.linear_before_reset:
            out["attributes"]["linear_before_reset"] = 1


class RNN(RecurrentLayer):
    """Vanilla (Elman) RNN: h' = f(x·Wᵀ + h·Rᵀ + b_x + b_h), f = ``activations[0]`` (Tanh by default)."""

    cell = "rnn"

    def __init__(self, W, R, b_x=None, b_h=None, **options):
        super().__init__(W, R, b_x, b_h, **options)
        if self.R.shape[2] != self.hidden_size:
            raise ShapeError(f"R: expected shape {self.W.shape[:2] + (self.hidden_size,)}, got {self.R.shape}")



class Stack:
    """Layers run one after another in one call (PyTorch ``num_layers``): each layer's merged output feeds
    the next. ``state`` is a list with one entry per layer (None for zeros)."""

    def __init__(self, layers: Sequence[RecurrentLayer]):
        if not isinstance(layers, (list, tuple)):
            raise AttributeValueError(f"layers: expected a list of LSTM/GRU/RNN layers, got {layers!r}")
        layers = list(layers)
        if not layers or not all(isinstance(layer, RecurrentLayer) for layer in layers):
            raise AttributeValueError(f"layers: expected a non-empty list of LSTM/GRU/RNN layers, got {layers!r}")
        for k in range(1, len(layers)):
            prev, cur = layers[k - 1], layers[k]
            width = prev.output_size * (prev.num_directions if prev.merge == "concat" else 1)
            if prev.merge == "stack" and prev.num_directions == 2:
                raise AttributeValueError(f"layers[{k - 1}]: merge='stack' output cannot feed another layer")
            if cur.input_size != width or cur.batch_first != prev.batch_first:
                raise ShapeError(f"layers[{k}]: expected input_size {width} and batch_first={prev.batch_first} "
                                 f"to follow layers[{k - 1}], got {cur.input_size} and {cur.batch_first}")
        self.layers = layers

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, k: int) -> RecurrentLayer:
        return self.layers[k]

    def __call__(self, x, state=None, sequence_lens=None):
        if state is not None and not isinstance(state, (list, tuple)):
            raise ShapeError(f"state: expected a list of {len(self.layers)} per-layer states, got {state!r}")
        states = [None] * len(self.layers) if state is None else list(state)
        if len(states) != len(self.layers):
            raise ShapeError(f"state: expected {len(self.layers)} per-layer states, got {len(states)}")
        out = []
        y = x
        for layer, st in zip(self.layers, states, strict=True):
            y, s = layer(y, st, sequence_lens)
            out.append(s)
        return y, out

    def to(self, target, calibration=None) -> Stack:
        """Every layer on ``target``. A quantized target calibrates layer k on what layer k receives in the float
        stack: ``calibration`` for the first, the previous layers' float outputs on it for the others."""
        t = targets.get(target)
        if calibration is None or t.prepare is None:
            return Stack([layer.to(t, calibration) for layer in self.layers])
        settings = None
        if isinstance(calibration, Calibration):
            settings, calibration = calibration, calibration.inputs
        xs = list(calibration) if isinstance(calibration, (list, tuple)) else [calibration]
        emulated = []
        for layer in self.layers:
            emulated.append(layer.to(t, calibration=xs if settings is None else replace(settings, inputs=xs)))
            xs = [layer(x)[0] for x in xs]
        return Stack(emulated)

    def to_torch(self):
        """The equivalent PyTorch module (``num_layers = len(self)``, float32)."""
        return converter("to_torch")(self)

    def __repr__(self) -> str:
        return f"Stack({self.layers!r})"


def layer_from_spec(spec: CellSpec, **options) -> RecurrentLayer:
    """The layer (LSTM, GRU or RNN) of a :class:`~fusedrnn.cells.spec.CellSpec`; ``options`` are the layer-only
    settings (``batch_first``, ``merge``, ``target``, ``output_order``)."""
    cls = {"lstm": LSTM, "gru": GRU, "rnn": RNN}[spec.cell]
    kind = {"lstm": dict(P=spec.P, coupling=spec.coupling, cell_clip=spec.cell_clip, proj_W=spec.proj_W,
                         proj_b=spec.proj_b, proj_clip=spec.proj_clip, layer_norm=spec.layer_norm),
            "gru": dict(linear_before_reset=spec.linear_before_reset), "rnn": {}}[spec.cell]
    layer = cls(spec.W, spec.R, spec.b_x, spec.b_h, direction=spec.direction,
                activations=[list(a) for a in spec.activations] or None, clip=spec.clip, **kind, **options)
    layer.kept = spec.kept
    return layer


__all__ = ["LSTM", "GRU", "RNN", "Stack", "RecurrentLayer", "COUPLINGS", "CONVERTERS", "CONVERTER_SIGNATURES",
           "converter", "layer_from_spec", "register_converter"]
