"""The quantized tensors of TFLite's standard integer LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM without peepholes,
projection, layer norm or CIFG), shared target infrastructure for the targets that run such .tflite tensors with
their own arithmetic (TensorFlow Lite for Microcontrollers, Arm CMSIS-NN).

:class:`QuantizedLstm` holds one direction: per gate (i, f, c, o) the int8 input and recurrent weights with their
per-tensor scales and the bias (int32 for int8 activations, int64 for int16 activations), the input and
output-state (= output) scale and zero point, the int16 cell-state scale, ``cell_clip`` and the cell gate's fused
activation. It comes from

* :func:`quantize_direction` — the TF converter's recipe (litert.md section 2, ``operator_property.cc``) from
  float weights and calibration ranges: weights int8 symmetric per tensor (``max|w| / 127``); biases at
  ``float32(s_w · s_x)``, rounded half away from zero; the cell at the power-of-two scale
  ``2^ceil(log2 max|c|) / 2^15`` (kept within 2^-15..2^-9, as LiteRT needs); activations int8 asymmetric over the
  calibrated range widened to 0 (``"int8"``, the 8x8_16 scheme) or int16 symmetric (``"int16"``, the 16x8 scheme
  TFLM and CMSIS-NN run: ``2·max|v| / 65535``, zero point 0);
* :func:`from_tflite_tensors` — the tensors of an imported .tflite op (the ``kept`` tensors of a layer made by
  ``LSTM.from_tflite``), read as stored.

:class:`TflmLstmParams` is what TFLM's ``UnidirectionalSequenceLstmPrepare`` derives from those tensors (the
FullyConnected and inter-gate multipliers, the cell facts); TFLM's reference kernel and its CMSIS-NN port both
compute with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..cells.calibration import histogram_of, settings_of
from ..cells.observers import chosen_range, observer_for
from ..cells.spec import CellSpec, direction_spec, run_spec
from ..errors import AttributeValueError, UnsupportedFeatureError
from ..numerics import gemmlowp
from ..numerics.affine import choose_qparams, tflite_symmetric_quantize
from .batch_split import RowSplitter, macs_per_row_step
from .registry import Prepared

ACTIVATION_TYPES = ("int8", "int16")
GATES = "ifco"  # TFLite's gate order: input, forget, cell (candidate), output
_ACT_DTYPE = {"int8": np.dtype(np.int8), "int16": np.dtype(np.int16)}
_BIAS_DTYPE = {"int8": np.dtype(np.int32), "int16": np.dtype(np.int64)}
_TYPE_NAMES = {"INT8": "int8", "INT16": "int16"}
_F32 = np.float32


@dataclass(frozen=True, eq=False)
class QuantizedLstm:
    """One direction of a standard integer UNIDIRECTIONAL_SEQUENCE_LSTM, as its .tflite tensors hold it.

    ``W[g]`` int8 [H, I], ``R[g]`` int8 [H, H], ``b[g]`` int32 / int64 [H] for g in (i, f, c, o), with the float32
    per-tensor scales ``W_scale[g]``, ``R_scale[g]``; ``x_scale``/``x_zp`` the input, ``h_scale``/``h_zp`` the
    output state and output; ``c_scale`` the int16 cell state (zero point 0); ``cell_clip`` 0 = off;
    ``cell_activation`` the op's fused activation ("TANH" or "SIGMOID"), which the integer kernels apply to the
    cell gate (the cell output always uses tanh)."""

    activation: str
    W: tuple
    R: tuple
    b: tuple
    W_scale: tuple
    R_scale: tuple
    x_scale: float
    x_zp: int
    h_scale: float
    h_zp: int
    c_scale: float
    cell_clip: float = 0.0
    cell_activation: str = "TANH"

    @property
    def hidden_size(self) -> int:
        return self.W[1].shape[0]

    @property
    def input_size(self) -> int:
        return self.W[1].shape[1]

    @property
    def dtype(self) -> np.dtype:
        """The activation dtype (input, output and output state)."""
        return _ACT_DTYPE[self.activation]

    def quantize_input(self, x: np.ndarray) -> np.ndarray:
        """Float x at the input parameters (round half to even, saturated)."""
        return quantize_values(x, self.x_scale, self.x_zp, self.dtype)

    def quantize_state(self, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Float (h, c) as (output-state codes, int16 cell codes)."""
        return (quantize_values(h, self.h_scale, self.h_zp, self.dtype),
                quantize_values(c, self.c_scale, 0, np.int16))

    def dequantize_output(self, q: np.ndarray, dtype=np.float32) -> np.ndarray:
        return ((np.asarray(q, np.float64) - self.h_zp) * self.h_scale).astype(dtype)

    def dequantize_cell(self, q: np.ndarray, dtype=np.float32) -> np.ndarray:
        return (np.asarray(q, np.float64) * self.c_scale).astype(dtype)


def quantize_values(v, scale: float, zp: int, dtype) -> np.ndarray:
    """Float values as TFLite's QUANTIZE stores them: round(v / scale) half to even, + zp, saturated to dtype."""
    info = np.iinfo(dtype)
    q = np.rint(np.asarray(v, np.float64) / scale) + zp  # round half to even, like TFLite's QUANTIZE
    return np.clip(q, info.min, info.max).astype(dtype)


# ---- calibration ------------------------------------------------------------------------------------------
@dataclass
class LstmStats:
    """Calibration ranges of one direction (the float engine over the calibration inputs): input x, stored output
    h, m = o·act(c) (the projection input), max |c| and each gate's max |pre-activation| before layer norm
    (i, f, c, o)."""

    x_min: float
    x_max: float
    h_min: float
    h_max: float
    m_min: float
    m_max: float
    c_absmax: float
    gate_absmax: list

    def ranges(self) -> dict[str, tuple[float, float]]:
        """{tensor: (lo, hi)}: the input x, the stored output h, m = o·act(c) and the cell."""
        return {"input": (self.x_min, self.x_max), "output": (self.h_min, self.h_max),
                "hidden": (self.m_min, self.m_max), "cell": (-self.c_absmax, self.c_absmax)}


LstmRanges = LstmStats
"""The name the standard-LSTM recipe uses for the same ranges."""


def calibrate_direction(spec: CellSpec, d: int, xs: list[np.ndarray], *, reverse: bool | None = None) -> LstmStats:
    """The ranges of direction d over calibration sequences xs (each [T, B, I], from zero states) that TFLite's
    integer LSTM quantization needs (litert.md section 4), recorded by the float engine (float64) at its named
    points; ``reverse`` overrides the direction's reading order. h and m ranges include 0. Calibration inputs
    that carry :class:`~fusedrnn.cells.calibration.Calibration` settings choose the x, h, m and cell ranges by
    their method (the gates' ranges stay max |.|)."""
    settings = settings_of(xs)
    one = direction_spec(spec, d)
    if reverse is not None:
        one = replace(one, direction="reverse" if reverse else "forward")
    observer = observer_for(settings, ("preact", "cell", "hidden", "output"))
    for x in xs:
        B = x.shape[1]
        states = (np.zeros((1, B, spec.output_size)), np.zeros((1, B, spec.hidden_size)))
        run_spec(one, np.ascontiguousarray(x, np.float64), states, observer=observer)
    gate_absmax = [float(v) for v in observer.ranges("preact").absmax[0]]
    if spec.coupling == "cifg":
        gate_absmax[0] = 0.0  # no input gate: i = 1 - f
    x_range = (min(float(x.min()) for x in xs), max(float(x.max()) for x in xs))
    if settings.method not in ("sdk", "minmax"):
        x_range = chosen_range(settings, None, "input", bits=8, symmetric=False,
                               histogram=histogram_of(list(xs), settings.bins))
    h_range, m_range = (chosen_range(settings, observer, p, bits=8, symmetric=False) for p in ("output", "hidden"))
    c_absmax = chosen_range(settings, observer, "cell", bits=16, symmetric=True)[1]
    return LstmStats(*x_range, *h_range, *m_range, c_absmax, gate_absmax)


def cell_scale_exponent(c_absmax: float) -> int:
    """log2 of the int16 cell scale: 2^ceil(log2 max|c|) / 2^15, kept within 2^-15 .. 2^-9."""
    e = 0 if c_absmax <= 0 else int(np.ceil(np.log2(c_absmax)))
    return int(np.clip(e - 15, -15, -9))


def _act_qparams(lo: float, hi: float, activation: str) -> tuple[float, int]:
    if activation == "int8":
        s, zp = choose_qparams(lo, hi, np.int8)
    else:
        s, zp = choose_qparams(lo, hi, np.int16, symmetric=True)
    return float(np.float32(s)), int(zp)


def round_away(v: np.ndarray) -> np.ndarray:
    """Round half away from zero (the converter's rounding of biases and int16 constants)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


# ---- the converter's recipe -------------------------------------------------------------------------------
def check_standard_lstm(spec: CellSpec, what: str) -> None:
    """UnsupportedFeatureError unless ``spec`` is an LSTM the standard integer kernel runs: no peepholes,
    projection, layer norm, coupling, diagonal recurrence or pre-activation clip; sigmoid gates, tanh cell
    output, cell input tanh or sigmoid."""
    if spec.cell != "lstm":
        raise UnsupportedFeatureError(f"cell: {what} runs LSTMs only, got {spec.cell!r}")
    for flag, name in ((spec.P is not None, "peepholes"), (spec.proj_W is not None, "projection"),
                       (spec.layer_norm is not None, "layer_norm"), (spec.coupling is not None, "coupling"),
                       (spec.diagonal, "diagonal recurrence"), (spec.clip is not None, "clip")):
        if flag:
            raise UnsupportedFeatureError(f"{name}: {what} runs the standard LSTM only (no peepholes, projection, "
                                          f"layer norm, CIFG, diagonal recurrence or pre-activation clip)")
    for acts in spec.activations:
        f, g, h = (a.name for a in acts)
        if f != "Sigmoid" or h != "Tanh" or g not in ("Tanh", "Sigmoid"):
            raise UnsupportedFeatureError(f"activations: {what} uses sigmoid gates, a tanh or sigmoid cell input and "
                                          f"a tanh cell output; got {[f, g, h]}")


def quantize_direction(spec: CellSpec, d: int, ranges: LstmRanges, activation: str = "int8") -> QuantizedLstm:
    """Direction d of ``spec`` quantized by the converter's recipe (module docstring) from calibration
    ``ranges``; ``activation`` "int8" (8x8_16) or "int16" (16x8)."""
    if activation not in ACTIVATION_TYPES:
        raise AttributeValueError(f"activation: expected one of {ACTIVATION_TYPES}, got {activation!r}")
    H = spec.hidden_size
    s_x, zp_x = _act_qparams(ranges.x_min, ranges.x_max, activation)
    s_h, zp_h = _act_qparams(ranges.h_min, ranges.h_max, activation)
    W = np.asarray(spec.W[d], np.float32)
    R = np.asarray(spec.R[d], np.float32)
    b = spec.bias_sum(d)
    Wq, Rq, bq, Ws, Rs = [], [], [], [], []
    info = np.iinfo(_BIAS_DTYPE[activation])
    for k in range(4):
        rows = slice(k * H, (k + 1) * H)
        qw, sw = tflite_symmetric_quantize(W[rows])
        qr, sr = tflite_symmetric_quantize(R[rows])
        bias_scale = float(np.float32(sw) * np.float32(s_x))
        qb = np.clip(round_away(b[rows] / bias_scale), info.min, info.max).astype(_BIAS_DTYPE[activation])
        Wq.append(qw)
        Rq.append(qr)
        bq.append(qb)
        Ws.append(float(sw))
        Rs.append(float(sr))
    g = spec.activations[d][1].name
    return QuantizedLstm(activation, tuple(Wq), tuple(Rq), tuple(bq), tuple(Ws), tuple(Rs), s_x, zp_x, s_h, zp_h,
                         2.0 ** cell_scale_exponent(ranges.c_absmax), float(spec.cell_clip or 0.0),
                         "TANH" if g == "Tanh" else "SIGMOID")


def quantize_spec(spec: CellSpec, calibration: list[np.ndarray], activation: str, what: str) -> list[QuantizedLstm]:
    """Every direction of ``spec`` quantized from calibration sequences; the directions share one output range
    (so a bidirectional layer's halves concatenate without requantizing), as the LiteRT target does."""
    check_standard_lstm(spec, what)
    ranges = [calibrate_direction(spec, d, calibration) for d in range(spec.num_directions)]
    lo, hi = min(r.h_min for r in ranges), max(r.h_max for r in ranges)
    return [quantize_direction(spec, d, replace(r, h_min=lo, h_max=hi), activation) for d, r in enumerate(ranges)]


# ---- an imported .tflite op's own tensors -------------------------------------------------------------------
def prepared_directions(spec: CellSpec, calibration, activation: str, what: str) -> list[QuantizedLstm]:
    """The quantized directions a target ``what`` runs: the converter's recipe over calibration sequences, or the
    tensors kept from an imported .tflite model when ``calibration`` is "tflite" (their activation type must be
    ``activation``)."""
    if isinstance(calibration, str):
        if calibration != "tflite":
            raise UnsupportedFeatureError(f"calibration: expected input sequences or 'tflite', got {calibration!r}")
        quantized = kept_directions(spec, what)
        if any(q.activation != activation for q in quantized):
            raise UnsupportedFeatureError(f"calibration: the imported model has {quantized[0].activation} "
                                          f"activations; {what} runs {activation}")
        return quantized
    if calibration is None:
        raise UnsupportedFeatureError(f"calibration: {what} needs calibration input sequences (or 'tflite' for a "
                                      f"layer imported from an integer .tflite model)")
    return quantize_spec(spec, calibration, activation, what)


class QuantizedLstmPrepared(Prepared):
    """An LSTM whose directions run on an integer kernel over TFLite's quantized tensors: float inputs and states
    quantized with each direction's parameters, the kernel's integer outputs dequantized. ``quantized`` holds each
    direction's :class:`QuantizedLstm`, ``kernels`` one kernel each; rows are independent sequences, so a large
    call may run its rows on two threads. Subclasses name the SDK (``sdk``) and may adapt how a kernel runs one
    direction (:meth:`run_direction`)."""

    sdk = "this"

    def __init__(self, spec: CellSpec, quantized: list[QuantizedLstm], kernels: list):
        super().__init__(spec)
        self.quantized, self.kernels = quantized, kernels
        self.splitter = RowSplitter(macs_per_row_step(spec))

    def run_direction(self, kernel, xq: np.ndarray, state: tuple, reverse: bool) -> tuple[np.ndarray, tuple]:
        """One direction: xq [T, B, I] integer, state (h, c) integer -> (y [T, B, H], (h, c))."""
        return kernel.run(xq, state, reverse=reverse)

    def run(self, x, states, lens):
        T, B, _ = x.shape
        if lens is not None and not np.all(lens == T):
            raise UnsupportedFeatureError(f"sequence_lens: {self.sdk} LSTM has no sequence lengths; every sequence "
                                          f"must run the full T steps")
        h0, c0 = states
        dt = x.dtype
        Y = np.empty((T, len(self.kernels), B, self.spec.hidden_size), dt)
        hs, cs = [], []
        for d, (q, k) in enumerate(zip(self.quantized, self.kernels, strict=True)):
            y, (h, c) = self.run_direction(k, q.quantize_input(x), q.quantize_state(h0[d], c0[d]),
                                           self.spec.reverse[d])
            Y[:, d] = q.dequantize_output(y, dt)
            hs.append(q.dequantize_output(h, dt))
            cs.append(q.dequantize_cell(c, dt))
        return Y, (np.stack(hs), np.stack(cs))


def _per_tensor(t, name: str) -> tuple[float, int]:
    if t is None or t.scale is None or np.size(t.scale) == 0:
        raise AttributeValueError(f"{name}: expected a quantized tensor with a scale, got none")
    if np.size(t.scale) != 1:
        raise UnsupportedFeatureError(f"{name}: the LSTM takes per-tensor quantization only, got {np.size(t.scale)} "
                                      f"scales")
    return float(np.float32(t.scale[0])), int(t.zero_point[0]) if t.zero_point is not None else 0


def from_tflite_tensors(t, options, what: str) -> QuantizedLstm:
    """The :class:`QuantizedLstm` of one imported UNIDIRECTIONAL_SEQUENCE_LSTM direction: ``t[k]`` the 24 input
    slots (objects with ``data``, ``scale``, ``zero_point``, ``type_name``, as the .tflite reader gives them),
    ``options`` its options (``fused_activation_function``, ``cell_clip``)."""
    for k, name in ((9, "peepholes"), (16, "projection"), (21, "layer norm")):
        if t[k] is not None:
            raise UnsupportedFeatureError(f"{name}: {what} runs the standard LSTM only")
    for k in range(1, 9):
        if t[k] is None or t[k].data is None:
            raise UnsupportedFeatureError(f"slot {k}: {what} needs all eight weight tensors (no CIFG)")
        if t[k].type_name != "INT8" or np.ndim(t[k].data) != 2:
            raise UnsupportedFeatureError(f"slot {k}: {what} needs int8 matrices, got {t[k].type_name} "
                                          f"{tuple(np.shape(t[k].data))}")
    activation = _TYPE_NAMES.get(t[0].type_name) if t[0] is not None else None
    if activation is None:
        raise UnsupportedFeatureError(f"input: {what} runs int8 or int16 activations, got "
                                      f"{None if t[0] is None else t[0].type_name}")
    if t[19] is None or t[19].type_name != "INT16":
        raise UnsupportedFeatureError(f"cell_state: {what} needs an int16 cell state")
    s_x, zp_x = _per_tensor(t[0], "input")
    s_h, zp_h = _per_tensor(t[18], "output_state")
    s_c, _ = _per_tensor(t[19], "cell_state")
    H = t[2].data.shape[0]
    bias_dtype = _BIAS_DTYPE[activation]
    W, R, b, Ws, Rs = [], [], [], [], []
    for g in range(4):
        W.append(np.asarray(t[1 + g].data, np.int8))
        R.append(np.asarray(t[5 + g].data, np.int8))
        Ws.append(_per_tensor(t[1 + g], f"input_to_{GATES[g]}_weights")[0])
        Rs.append(_per_tensor(t[5 + g], f"recurrent_to_{GATES[g]}_weights")[0])
        bt = t[12 + g]
        b.append(np.zeros(H, bias_dtype) if bt is None or bt.data is None else np.asarray(bt.data, bias_dtype))
    act = options.fused_activation_function
    if act not in ("TANH", "SIGMOID"):
        raise UnsupportedFeatureError(f"fused_activation_function: {what} applies TANH or SIGMOID to the cell gate, "
                                      f"got {act}")
    return QuantizedLstm(activation, tuple(W), tuple(R), tuple(b), tuple(Ws), tuple(Rs), s_x, zp_x, s_h, zp_h, s_c,
                         float(options.cell_clip or 0.0), act)


def kept_directions(spec: CellSpec, what: str) -> list[QuantizedLstm]:
    """The quantized directions of a layer imported from an integer .tflite LSTM (``calibration="tflite"``)."""
    kept = (spec.kept or {}).get("litert")
    if kept is None or kept.get("kind") != "integer":
        raise UnsupportedFeatureError(f"calibration: 'tflite' means the quantization stored in an imported .tflite "
                                      f"model, but this layer was not imported from an integer LSTM; {what} needs "
                                      f"calibration input sequences instead")
    return [from_tflite_tensors(t, kept["options"], what) for t in kept["tensors"]]


# ---- what TFLM's Prepare derives from the tensors ---------------------------------------------------------------
PRODUCTS = ("float32", "double")


def _qm(m: float) -> tuple[int, int]:
    q, s = gemmlowp.quantize_multiplier(float(m))
    return int(q), int(s)


def checked_log2(x: float) -> int:
    """TFLite ``CheckedLog2``'s result: round(float32(logf(x) · (1 / logf(2)))), half away from zero."""
    v = _F32(np.log(_F32(x))) * _F32(_F32(1.0) / _F32(np.log(_F32(2.0))))
    return int(np.sign(v) * np.floor(np.abs(v) + _F32(0.5)))


@dataclass(frozen=True)
class TflmLstmParams:
    """What ``UnidirectionalSequenceLstmPrepare`` computes from the tensors (``OpDataLSTM``): per gate (i, f, c,
    o) the input and recurrent FullyConnected multipliers ``(Q, shift)``; the inter-gate multipliers; the cell
    facts. ``products``: "float32" multiplies the float32 tensor scales of each FullyConnected in float32 as the
    kernel does, "double" in double as the helpers of TFLM's kernel tests do (the inter-gate and cell parameters
    take float32 scales in both)."""

    input_fc: tuple
    recurrent_fc: tuple
    forget_cell: tuple
    input_cell: tuple
    hidden: tuple
    cell_state_scale_power: int
    cell_clip: float
    quantized_cell_clip: int

    @classmethod
    def prepare(cls, q: QuantizedLstm, products: str = "float32", *, gate_scales: tuple = (2.0**-12, 2.0**-15)
                ) -> TflmLstmParams:
        """``gate_scales``: the scales of the gate pre-activations and outputs (the kernel's 2^-12 and 2^-15;
        TFLM's kernel tests pass their own, rounded to float32)."""
        if products not in PRODUCTS:
            raise AttributeValueError(f"products: expected one of {PRODUCTS}, got {products!r}")
        nl_in, nl_out = (float(_F32(v)) for v in gate_scales)

        def fc(s_in: float, s_w: float) -> tuple[int, int]:
            prod = float(_F32(s_in) * _F32(s_w)) if products == "float32" else float(s_in) * float(s_w)
            return _qm(prod / nl_in)

        s_c, s_h = float(_F32(q.c_scale)), float(_F32(q.h_scale))  # float parameters in both (ArithmeticParams)
        input_fc = tuple(fc(q.x_scale, q.W_scale[g]) for g in range(4))
        recurrent_fc = tuple(fc(q.h_scale, q.R_scale[g]) for g in range(4))
        qclip = int(np.trunc(min(max(float(_F32(q.cell_clip)) / s_c, -32768.0), 32767.0)))
        return cls(input_fc, recurrent_fc, _qm(nl_out * s_c / s_c), _qm(nl_out * nl_out / s_c),
                   _qm(nl_out * nl_out / s_h), checked_log2(s_c), float(_F32(q.cell_clip)), qclip)


__all__ = ["ACTIVATION_TYPES", "GATES", "PRODUCTS", "LstmRanges", "LstmStats", "QuantizedLstm",
           "QuantizedLstmPrepared", "TflmLstmParams",
           "calibrate_direction", "cell_scale_exponent", "check_standard_lstm", "checked_log2", "from_tflite_tensors",
           "kept_directions", "prepared_directions", "quantize_direction", "quantize_spec", "quantize_values",
           "round_away"]
