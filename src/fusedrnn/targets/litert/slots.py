"""Tensor slots and options of the TFLite recurrent ops (litert.md sections 1-3), as data.

An LSTM direction is described by :class:`LstmTensors`: its 24 input slots (``None`` where absent) and the five
intermediates; each present slot is a :class:`~fusedrnn.targets.litert.reader.TensorInfo` (data, scale, zero
point). Gate order is i, f, c (the cell candidate, "g"), o: ``GATES``, from :mod:`fusedrnn.conventions`. Slots are
named by ``SLOT`` (LSTM), ``RNN_SLOTS``, ``BI_RNN_SLOTS`` and ``GRU_SLOTS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ... import conventions
from ...errors import AttributeValueError, DTypeError, ShapeError, UnsupportedFeatureError
from ...numerics import eigen
from .reader import TensorInfo

# LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM input slots (lstm_shared.h)
INPUT = 0
INPUT_WEIGHTS = (1, 2, 3, 4)  # i, f, c, o  [n_cell, n_input]
RECURRENT_WEIGHTS = (5, 6, 7, 8)  # [n_cell, n_output] or [n_cell] (diagonal)
PEEPHOLES = (9, 10, 11)  # cell_to_{input, forget, output}  [n_cell]
GATE_BIASES = (12, 13, 14, 15)
PROJECTION_WEIGHTS = 16  # [n_output, n_cell]
PROJECTION_BIAS = 17
OUTPUT_STATE = 18  # variable [B, n_output]
CELL_STATE = 19  # variable [B, n_cell]
LAYER_NORM = (20, 21, 22, 23)
SLOT_NAMES = (
    "input", "input_to_input_weights", "input_to_forget_weights", "input_to_cell_weights",
    "input_to_output_weights", "recurrent_to_input_weights", "recurrent_to_forget_weights",
    "recurrent_to_cell_weights", "recurrent_to_output_weights", "cell_to_input_weights", "cell_to_forget_weights",
    "cell_to_output_weights", "input_gate_bias", "forget_gate_bias", "cell_gate_bias", "output_gate_bias",
    "projection_weights", "projection_bias", "output_state", "cell_state", "input_layer_norm_coefficients",
    "forget_layer_norm_coefficients", "cell_layer_norm_coefficients", "output_layer_norm_coefficients",
)

N_SLOTS = len(SLOT_NAMES)
SLOT = {name: k for k, name in enumerate(SLOT_NAMES)}
"""LSTM input slot by name: ``SLOT["output_state"] == 18`` (``LstmTensors`` also takes the name as its index)."""
GATES = conventions.gate_order("lstm", "tflite")
"""The gates of INPUT_WEIGHTS, RECURRENT_WEIGHTS, GATE_BIASES and LAYER_NORM as canonical letters ("ifgo": i, f,
the cell candidate g, which TFLite calls c, o)."""
GATE = {g: k for k, g in enumerate(GATES)}
"""Position of a gate letter in those tuples: ``GATE["f"] == 1``."""
I_GATE, F_GATE, C_GATE, O_GATE = (GATE[g] for g in "ifgo")
"""Positions of the input, forget, cell (candidate) and output gates in the per-gate slot tuples."""
PEEPHOLE_GATES = conventions.get("tflite").peephole_order
"""The gates of PEEPHOLES ("ifo"): ``PEEPHOLES[PEEPHOLE_GATES.index("o")]`` is cell_to_output_weights."""

N_INTERMEDIATES = 5  # of the 8x8_16 kernel: 0-3 the gates' (i, f, c, o) matmul / layer-norm outputs, 4 the hidden
HIDDEN_INTERMEDIATE = 4  # the effective hidden state o·tanh(c) before projection

# BIDIRECTIONAL_SEQUENCE_LSTM (48 inputs): slot k (1..17) of fw is k, of bw is k + 17
BI_INPUTS = 48
BI_DIRECTION_SLOTS = range(1, 18)  # the per-direction slots, input_to_input_weights .. projection_bias
BI_BW_OFFSET = 17
BI_FW_STATES = (35, 36)
BI_BW_STATES = (37, 38)
BI_AUX_INPUT = 39
BI_FW_AUX_WEIGHTS = (40, 41, 42, 43)
BI_BW_AUX_WEIGHTS = (44, 45, 46, 47)
BI_DIRECTIONS = ((0, BI_FW_STATES, BI_FW_AUX_WEIGHTS), (BI_BW_OFFSET, BI_BW_STATES, BI_BW_AUX_WEIGHTS))
"""Per direction (fw, bw) of the 48-input op: the offset of its slots 1-17, its (h, c) state slots, its aux weights."""

# RNN / UNIDIRECTIONAL_SEQUENCE_RNN (basic_rnn.cc), BIDIRECTIONAL_SEQUENCE_RNN, the custom UNIDIRECTIONAL_SEQUENCE_GRU
RNN_SLOTS = {"input": 0, "weights": 1, "recurrent_weights": 2, "bias": 3, "hidden_state": 4}
BI_RNN_SLOTS = {"input": 0, "fw_weights": 1, "fw_recurrent_weights": 2, "fw_bias": 3, "fw_hidden_state": 4,
                "bw_weights": 5, "bw_recurrent_weights": 6, "bw_bias": 7, "bw_hidden_state": 8, "aux_input": 9,
                "fw_aux_weights": 10, "bw_aux_weights": 11}
GRU_SLOTS = {"input": 0, "hidden_state": 1, "gate_weight": 2, "gate_bias": 3, "candidate_weight": 4,
             "candidate_bias": 5}

FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT", "SIGMOID")


def apply_fused_activation(v: np.ndarray, name: str, *, start: int = 0, rows: bool = False) -> np.ndarray:
    """In place: TFLite's ``ApplyActivationToVector`` (float). Returns v. TANH and SIGMOID are the interpreter's
    Eigen functions bit for bit (:mod:`fusedrnn.numerics.eigen`); the sigmoid of an element depends on where the
    kernel's destination buffer lies: ``start`` is its offset in floats from an aligned buffer start, ``rows``
    says each last-axis row is a separate call (see :func:`fusedrnn.numerics.eigen.logistic`)."""
    if name == "TANH":
        v[...] = eigen.tanh(v)
    elif name == "RELU":
        np.maximum(v, 0, out=v)
    elif name == "RELU6":
        np.clip(v, 0, 6, out=v)
    elif name == "RELU_N1_TO_1":
        np.clip(v, -1, 1, out=v)
    elif name == "SIGMOID":
        v[...] = eigen.logistic(v, start, rows)
    elif name == "SIGN_BIT":
        v[...] = np.signbit(v).astype(v.dtype)
    elif name != "NONE":
        raise AttributeValueError(f"fused_activation_function: expected one of {FUSED_ACTIVATIONS}, got {name!r}")
    return v


@dataclass(frozen=True)
class LstmOptions:
    """Options of the LSTM ops (``cell_clip``/``proj_clip`` 0 = off)."""

    fused_activation_function: str = "TANH"
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    time_major: bool = False
    asymmetric_quantize_inputs: bool = False
    diagonal_recurrent_tensors: bool = False
    merge_outputs: bool = False  # bidirectional only

    @classmethod
    def from_dict(cls, d: dict, **defaults) -> LstmOptions:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        opts = replace(cls(**defaults), **known)
        if opts.fused_activation_function not in FUSED_ACTIVATIONS:
            raise AttributeValueError(f"fused_activation_function: expected one of {FUSED_ACTIVATIONS}, got "
                                      f"{opts.fused_activation_function!r}")
        for name in ("cell_clip", "proj_clip"):
            v = getattr(opts, name)
            if not np.isfinite(v) or v < 0:
                raise AttributeValueError(f"{name}: expected a finite value >= 0 (0 = off), got {v!r}")
        return opts


def const(name: str, data, scale=None, zero_point=None, *, type_name: str | None = None,
          is_variable: bool = False, shape=None) -> TensorInfo:
    """A :class:`TensorInfo` made in Python (tests, converters): constant ``data`` with optional per-tensor
    ``scale`` / ``zero_point``; ``data=None`` with ``shape`` for a variable or an intermediate."""
    arr = None if data is None else np.asarray(data)
    if type_name is None:
        if arr is None:
            raise DTypeError(f"{name}: a tensor without data needs type_name")
        type_name = {np.dtype(np.float32): "FLOAT32", np.dtype(np.int8): "INT8", np.dtype(np.int16): "INT16",
                     np.dtype(np.int32): "INT32", np.dtype(np.uint8): "UINT8", np.dtype(np.float16): "FLOAT16",
                     np.dtype(np.int64): "INT64"}.get(arr.dtype)
        if type_name is None:
            raise DTypeError(f"{name}: unsupported dtype {arr.dtype}")
    sc = None if scale is None else np.atleast_1d(np.asarray(scale, np.float32))
    zp = None if sc is None else (np.zeros(sc.shape, np.int64) if zero_point is None
                                  else np.atleast_1d(np.asarray(zero_point, np.int64)))
    shp = tuple(arr.shape) if arr is not None else tuple(shape or ())
    return TensorInfo(-1, name, type_name, shp, arr, sc, zp, 0, is_variable)


@dataclass
class LstmTensors:
    """One LSTM direction: ``slots[k]`` for the 24 LSTM input slots (slot 0 describes the input tensor, 18/19 the
    state variables), ``intermediates`` (five, twelve for the 8x8_8 kernel, or none), ``aux`` = aux-input weights
    (i, f, c, o) of a bidirectional op, ``output`` the op's output tensor where known."""

    slots: list
    intermediates: list = field(default_factory=list)
    aux: list = field(default_factory=lambda: [None] * 4)
    output: TensorInfo | None = None  # the op's output tensor (its scale quantizes the 8x8_8 kernel's proj_clip)

    def __post_init__(self):
        if len(self.slots) < N_SLOTS:
            self.slots = list(self.slots) + [None] * (N_SLOTS - len(self.slots))

    def __getitem__(self, k: int | str) -> TensorInfo | None:
        """The tensor in slot ``k``: an index or a name of ``SLOT_NAMES`` (``t["cell_state"]``)."""
        return self.slots[SLOT[k] if isinstance(k, str) else k]

    # ---- facts ---------------------------------------------------------------------------------------------
    @property
    def cifg(self) -> bool:
        return self["input_to_input_weights"] is None

    @property
    def peephole(self) -> bool:
        return self["cell_to_output_weights"] is not None

    @property
    def projection(self) -> bool:
        return self["projection_weights"] is not None

    @property
    def layer_norm(self) -> bool:
        return self["forget_layer_norm_coefficients"] is not None

    @property
    def n_cell(self) -> int:
        return self["input_to_forget_weights"].shape[0]

    @property
    def n_input(self) -> int:
        return self["input_to_forget_weights"].shape[1]

    @property
    def n_output(self) -> int:
        return self["projection_weights"].shape[0] if self.projection else self.n_cell

    @property
    def n_aux_input(self) -> int:
        return 0 if self.aux[1] is None else self.aux[1].shape[1]

    @property
    def diagonal(self) -> bool:
        return len(self["recurrent_to_forget_weights"].shape) == 1

    def kind(self) -> str:
        """``"float"``, ``"hybrid"`` or ``"integer"`` (8x8_16) from the tensor types."""
        w = self["input_to_forget_weights"].type_name
        inp = self["input"].type_name if self["input"] is not None else "FLOAT32"
        if inp == "INT8":
            cell = self["cell_state"]
            if cell is not None and cell.type_name != "INT16":
                raise UnsupportedFeatureError(f"cell_state: the integer LSTM kernel supported is 8x8_16 (int16 cell "
                                              f"state); got {cell.type_name} (8x8_8 is not implemented)")
            return "integer"
        if inp not in ("FLOAT32",):
            raise UnsupportedFeatureError(f"input: expected a FLOAT32 or INT8 LSTM input, got {inp}")
        if w in ("INT8", "UINT8"):
            return "hybrid"
        if w in ("FLOAT32", "FLOAT16"):
            return "float"
        raise UnsupportedFeatureError(f"input_to_forget_weights: unsupported weight type {w}")

    def validate(self, diagonal: bool = False) -> None:
        """Check presence rules and shapes (raise ShapeError / AttributeValueError naming the slot)."""
        s = self.slots
        for k in (slots[GATE[g]] for slots in (INPUT_WEIGHTS, RECURRENT_WEIGHTS, GATE_BIASES) for g in "fgo"):
            if s[k] is None or s[k].data is None:
                raise AttributeValueError(f"{SLOT_NAMES[k]}: required constant tensor (slot {k}) is missing")
        n_cell, n_input, n_output = self.n_cell, self.n_input, self.n_output
        wi, ri, bi = INPUT_WEIGHTS[GATE["i"]], RECURRENT_WEIGHTS[GATE["i"]], GATE_BIASES[GATE["i"]]
        cifg = s[wi] is None
        if cifg != (s[ri] is None):
            raise AttributeValueError("input_to_input_weights / recurrent_to_input_weights: CIFG needs both absent, "
                                      f"got slot {wi} {'absent' if s[wi] is None else 'present'}, slot {ri} "
                                      f"{'absent' if s[ri] is None else 'present'}")
        if not cifg and s[bi] is None:
            raise AttributeValueError(f"input_gate_bias: required (slot {bi}) unless CIFG")
        rec_shape = (n_cell,) if diagonal else (n_cell, n_output)
        expect = {k: (n_cell, n_input) for k in INPUT_WEIGHTS}
        expect.update({k: rec_shape for k in RECURRENT_WEIGHTS})
        expect.update({k: (n_cell,) for k in PEEPHOLES + GATE_BIASES + LAYER_NORM})
        expect.update({PROJECTION_WEIGHTS: (n_output, n_cell), PROJECTION_BIAS: (n_output,)})
        for k, shp in expect.items():
            if s[k] is not None and tuple(s[k].shape) != shp:
                raise ShapeError(f"{SLOT_NAMES[k]}: expected shape {shp} (slot {k}), got {tuple(s[k].shape)}")
        p_i, p_f, p_o = (s[PEEPHOLES[PEEPHOLE_GATES.index(g)]] for g in "ifo")
        if p_i is None and p_o is not None and not cifg:
            raise AttributeValueError(f"cell_to_input_weights: peepholes without CIFG need all three (slots "
                                      f"{min(PEEPHOLES)}-{max(PEEPHOLES)})")
        if (p_f is None) != (p_o is None):
            raise AttributeValueError("cell_to_forget_weights / cell_to_output_weights: both or neither")
        ln = {g: s[LAYER_NORM[GATE[g]]] is not None for g in GATES}
        if any(ln.values()) and not all(ln[g] for g in "fgo"):
            fgo = sorted(LAYER_NORM[GATE[g]] for g in "fgo")
            raise AttributeValueError(f"layer_norm_coefficients: forget, cell and output (slots {fgo[0]}-{fgo[-1]}) "
                                      f"come together")
        if s[PROJECTION_BIAS] is not None and s[PROJECTION_WEIGHTS] is None:
            raise AttributeValueError(f"projection_bias: needs projection_weights (slot {PROJECTION_WEIGHTS})")
        for j, a in enumerate(self.aux):
            if a is not None and tuple(a.shape)[0] != n_cell:
                raise ShapeError(f"aux_input_to_{'ifco'[j]}_weights: expected {n_cell} rows, got {tuple(a.shape)}")


def values(t: TensorInfo | None, dtype=np.float32) -> np.ndarray | None:
    """The tensor's data as ``dtype`` (float16 widened), or None."""
    if t is None or t.data is None:
        return None
    return np.asarray(t.data, dtype=dtype)


def dequantized(t: TensorInfo | None) -> np.ndarray | None:
    """Float32 values of a (possibly quantized, per-tensor) constant: (q - zp)·scale, or the float data."""
    if t is None or t.data is None:
        return None
    if t.dtype is not None and t.dtype.kind in "iu" and t.quantized:
        zp = np.float32(t.zero_point[0]) if t.zero_point is not None else np.float32(0)
        return ((t.data.astype(np.float32) - zp) * np.float32(t.scale[0])).astype(np.float32)
    return np.asarray(t.data, np.float32)


def per_tensor(t: TensorInfo, name: str) -> tuple[float, int]:
    """(scale, zero_point) of a per-tensor quantized tensor (UnsupportedFeatureError for per-channel)."""
    if not t.quantized:
        raise AttributeValueError(f"{name}: expected a quantized tensor with a scale, got none")
    if t.scale.size != 1:
        raise UnsupportedFeatureError(f"{name}: the TFLite fused LSTM takes per-tensor quantization only, got "
                                      f"{t.scale.size} scales")
    return float(t.scale[0]), int(t.zero_point[0])
