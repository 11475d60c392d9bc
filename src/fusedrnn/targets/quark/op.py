"""``extended_lstm``: AMD Quark's ``com.amd.quark::ExtendedLSTM`` custom op, faithful or corrected.

Layouts follow ONNX: X [T, B, I]; W [D, 4H, I], R [D, 4H, H], B [D, 8H] with gate order (i, o, f, c) and
B = [Wb | Rb]; Y [T, D, B, H] float32. Scales are per tensor (float32), zero points uint16 (0..65535).

``mode="faithful"`` (default) is bit for bit the CPU kernel of amd-quark's custom-op library (quark.md
section 3), defects included: batch must be 1, W/R/B must hold two directions and the ``direction`` attribute
is ignored (the kernel always runs both), power-of-two scale products flip the sign of a term (defect 1), hidden
values outside Y's range wrap around (defect 2), y_zero_point < 32768 is off by one (defect 3).
``mode="corrected"`` keeps the kernel's structure (uint16 tensors, 2^24 fixed-point gates, float32 tanhf and
cell, h re-quantised with Y's parameters every step) but saturates h, uses exact mantissas and zero points,
rounds correctly, and supports batch > 1, forward / reverse / bidirectional and initial states.
"""

from __future__ import annotations

import numbers

import numpy as np

from ...errors import AttributeValueError, DTypeError, ShapeError, UnsupportedFeatureError
from ...numerics.affine import quark_quantize_uint16
from .kernel import Recurrence
from .params import Scales, kernel_params

MODES = ("faithful", "corrected")
DIRECTIONS = ("forward", "reverse", "bidirectional")
_NUM_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
_REVERSE = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
SCALE_NAMES = ("x", "w", "r", "b", "y")
MAX_SIZE = 65536  # input_size, hidden_size: the kernel's ``int`` sums of int16 values stay exact up to here


def _scale(v, name: str) -> np.float32:
    if isinstance(v, bool) or not isinstance(v, numbers.Real | np.ndarray | np.generic):
        raise DTypeError(f"{name}: expected a positive float, got {type(v).__name__} {v!r}")
    a = np.asarray(v, dtype=np.float64)
    if a.size != 1:
        raise ShapeError(f"{name}: expected a scalar (ExtendedLSTM quantizes per tensor), got shape {a.shape}")
    with np.errstate(over="ignore"):
        f = np.float32(a.reshape(()))
    if not (np.isfinite(f) and f > 0):
        raise AttributeValueError(f"{name}: expected a finite positive float32 scale, got {float(a.reshape(()))!r}")
    return f


def _zero_point(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral | np.ndarray | np.generic):
        raise DTypeError(f"{name}: expected an int in [0, 65535] (uint16 zero point), got {type(v).__name__} {v!r}")
    a = np.asarray(v)
    if a.size != 1 or not np.issubdtype(a.dtype, np.integer):
        raise DTypeError(f"{name}: expected an integer scalar in [0, 65535], got {v!r}")
    z = int(a.reshape(()))
    if not 0 <= z <= 65535:
        raise AttributeValueError(f"{name}: expected a uint16 zero point in [0, 65535], got {z}")
    return z


def make_scales(**kw) -> Scales:
    """Validated :class:`Scales` from ``x_scale=..., x_zero_point=..., ..., y_zero_point=...``."""
    out = {}
    for n in SCALE_NAMES:
        out[f"{n}_scale"] = _scale(kw[f"{n}_scale"], f"{n}_scale")
        out[f"{n}_zero_point"] = _zero_point(kw[f"{n}_zero_point"], f"{n}_zero_point")
    return Scales(**out)


def _float_input(a, name: str) -> np.ndarray:
    try:
        arr = np.asarray(a)
    except Exception as e:  # noqa: BLE001 - anything not array-like
        raise DTypeError(f"{name}: expected a float array, got {type(a).__name__}") from e
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise DTypeError(f"{name}: expected a float array, got dtype {arr.dtype}")
    return arr.astype(np.float32)


def _check_attrs(hidden_size, direction, mode, layout, input_forget) -> tuple[int, str, str]:
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, numbers.Integral) or hidden_size < 1:
        raise AttributeValueError(f"hidden_size: expected a positive int, got {hidden_size!r}")
    if mode not in MODES:
        raise AttributeValueError(f"mode: expected one of {MODES}, got {mode!r}")
    if direction not in DIRECTIONS:
        raise AttributeValueError(f"direction: expected one of {DIRECTIONS}, got {direction!r}")
    if layout != 0:
        raise AttributeValueError(f"layout: ExtendedLSTM supports layout=0 only (the kernel throws), got {layout!r}")
    if input_forget != 0:
        raise AttributeValueError(f"input_forget: ExtendedLSTM supports input_forget=0 only, got {input_forget!r}")
    return int(hidden_size), direction, mode


def _weight_shapes(W: np.ndarray, R: np.ndarray, B: np.ndarray | None, H: int, D: int, faithful: bool) -> int:
    """Check W, R, B against hidden_size and the number of directions; returns input_size (W's last axis)."""
    why = (" (mode='faithful': Quark's kernel always runs both directions and would read past the end of a "
           "one-direction tensor)") if faithful else ""
    I = W.shape[-1] if W.ndim == 3 else 0  # noqa: E741
    if I < 1:
        raise ShapeError(f"W: expected shape (num_directions, 4*hidden_size, input_size) with input_size >= 1, "
                         f"got {W.shape}{why if W.ndim == 3 else ''}")
    if I > MAX_SIZE or H > MAX_SIZE:
        raise UnsupportedFeatureError(f"W, hidden_size: input_size and hidden_size up to {MAX_SIZE} are supported "
                                      f"(the kernel's int sums of int16 values overflow beyond), got {I} and {H}")
    for arr, name, shape, meaning in ((W, "W", (D, 4 * H, I), "(num_directions, 4*hidden_size, input_size)"),
                                      (R, "R", (D, 4 * H, H), "(num_directions, 4*hidden_size, hidden_size)"),
                                      (B, "B", (D, 8 * H), "(num_directions, 8*hidden_size)")):
        if arr is not None and arr.shape != shape:
            raise ShapeError(f"{name}: expected shape {shape} {meaning}, got {arr.shape}{why}")
    return I


def _check_x(X: np.ndarray, I: int, faithful: bool, rows: bool) -> tuple[int, int]:  # noqa: E741
    if X.ndim != 3:
        raise ShapeError(f"X: expected [seq_length, batch_size, input_size] (3 dimensions), got shape {X.shape}")
    T, batch, i = X.shape
    if batch < 1 or i != I:
        raise ShapeError(f"X: expected batch_size >= 1 and input_size {I} (W's last dimension), got shape "
                         f"{X.shape}")
    if faithful and batch != 1 and not rows:
        raise UnsupportedFeatureError(
            f"X: mode='faithful' needs batch_size 1 (Quark's kernel reads the first T*I values as the sequence and "
            f"leaves the rest of Y uninitialised), got shape {X.shape}; use mode='corrected'")
    return T, batch


def _recurrence(wq, rq, bq, scales: Scales, H: int, direction: str, faithful: bool) -> Recurrence:
    """The kernel's constants and prepared recurrence from uint16 codes wq [D, 4H, I], rq [D, 4H, H], bq [D, 8H]."""
    w = wq.astype(np.int64) - 32768
    r = rq.astype(np.int64) - 32768
    b = bq.astype(np.int64) - 32768
    p = kernel_params(scales, w.sum(axis=2), r.sum(axis=2), b[:, : 4 * H], b[:, 4 * H:], w.shape[2], H,
                      faithful=faithful)
    return Recurrence(w, r, p, reverse=_REVERSE["bidirectional" if faithful else direction], faithful=faithful,
                      y_scale=scales.y_scale, y_zero_point=scales.y_zero_point)


def extended_lstm_quantized(xq, wq, rq, bq, scales: Scales, *, hidden_size: int, direction: str = "bidirectional",
                            mode: str = "faithful", initial_h=None, initial_c=None, return_state: bool = False):
    """The kernel on uint16 tensors (what the graph's DequantizeLinear nodes hold): xq [T, B, I], wq [D, 4H, I],
    rq [D, 4H, H], bq [D, 8H] uint16. Returns Y's uint16 codes [T, D, B, H] (with ``return_state`` also the
    final h as uint16 codes and the final c float32, [D, B, H]). Inputs are assumed validated
    (:func:`extended_lstm` does it); initial_h is int16-domain [D, B, H], initial_c float32 [D, B, H].
    Faithful mode runs every batch row as an independent batch-1 sequence (the kernel itself takes batch 1)."""
    rec = _recurrence(wq, rq, bq, scales, hidden_size, direction, mode == "faithful")
    yq, h, c, _ = rec.run(xq, initial_h, initial_c)
    if return_state:
        return yq, ((h + 32768) & 0xFFFF).astype(np.uint16), c
    return yq


def dequantize_output(yq: np.ndarray, scale: np.float32, zero_point: int) -> np.ndarray:
    """Y = float32(float32(y - zp) * scale), as the kernel's DequantizeLinear step."""
    return (yq.astype(np.int64) - zero_point).astype(np.float32) * np.float32(scale)


class PreparedExtendedLSTM:
    """ExtendedLSTM with its weights quantized and laid out for the kernel once (:func:`prepare`); call it with X
    as :func:`extended_lstm`. The weights are copied (quantized) at preparation: later changes to the arrays
    given to :func:`prepare` do not affect it. Immutable; safe to call from several threads."""

    def __init__(self, rec: Recurrence, scales: Scales, hidden_size: int, num_directions: int, mode: str):
        self._rec, self.scales, self.hidden_size = rec, scales, hidden_size
        self.num_directions, self.mode = num_directions, mode
        self.input_size = rec.wq.shape[2]

    def __repr__(self) -> str:
        return (f"PreparedExtendedLSTM(input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"num_directions={self.num_directions}, mode={self.mode!r})")

    def __call__(self, X, *, initial_h=None, initial_c=None, return_state: bool = False):
        """Y float32 [T, D, B, H] (with ``return_state``: (Y, Y_h, Y_c)); see :func:`extended_lstm`."""
        return self._run(X, initial_h, initial_c, return_state, rows=False)

    def _run(self, X, initial_h, initial_c, return_state: bool, *, rows: bool):
        """``rows``: faithful mode runs each batch row as its own batch-1 sequence (the ``quark`` target)."""
        sc, H, D = self.scales, self.hidden_size, self.num_directions
        faithful = self.mode == "faithful"
        X = _float_input(X, "X")
        T, batch = _check_x(X, self.input_size, faithful, rows)
        if faithful and (initial_h is not None or initial_c is not None):
            raise UnsupportedFeatureError("initial_h/initial_c: Quark's kernel has no initial states (h starts at "
                                          "Y's zero point, c at 0); use mode='corrected'")
        h0 = c0 = None
        if initial_h is not None:
            h0a = _float_input(initial_h, "initial_h")
            if h0a.shape != (D, batch, H):
                raise ShapeError(f"initial_h: expected shape {(D, batch, H)} (num_directions, batch_size, "
                                 f"hidden_size), got {h0a.shape}")
            h0 = quark_quantize_uint16(h0a, sc.y_scale, sc.y_zero_point).astype(np.int64) - 32768
        if initial_c is not None:
            c0 = _float_input(initial_c, "initial_c")
            if c0.shape != (D, batch, H):
                raise ShapeError(f"initial_c: expected shape {(D, batch, H)} (num_directions, batch_size, "
                                 f"hidden_size), got {c0.shape}")
        if T == 0:
            Y = np.zeros((0, D, batch, H), dtype=np.float32)
            if not return_state:
                return Y
            h_init = (np.zeros((D, batch, H), np.float32) if h0 is None
                      else dequantize_output(h0 + 32768, sc.y_scale, sc.y_zero_point))
            return Y, h_init, (np.zeros((D, batch, H), np.float32) if c0 is None else c0)
        xq = quark_quantize_uint16(X, sc.x_scale, sc.x_zero_point)
        _, h, c, Y = self._rec.run(xq, h0, c0, dequantize=True)
        if return_state:
            return Y, dequantize_output((h + 32768) & 0xFFFF, sc.y_scale, sc.y_zero_point), c
        return Y


def prepare(W, R, B=None, *, x_scale, x_zero_point, w_scale, w_zero_point, r_scale, r_zero_point, b_scale,
            b_zero_point, y_scale, y_zero_point, hidden_size, direction: str = "bidirectional",
            mode: str = "faithful", layout: int = 0, input_forget: int = 0) -> PreparedExtendedLSTM:
    """Quantize W [D, 4H, I], R [D, 4H, H], B [D, 8H] (None: zeros) and derive the kernel's constants once; the
    result runs ``com.amd.quark::ExtendedLSTM`` on any X [T, B, I] (``prepared(X)``), bit for bit what
    :func:`extended_lstm` with the same arguments computes, without re-doing the per-weight work each call.
    Arguments as :func:`extended_lstm`."""
    H, direction, mode = _check_attrs(hidden_size, direction, mode, layout, input_forget)
    faithful = mode == "faithful"
    sc = make_scales(x_scale=x_scale, x_zero_point=x_zero_point, w_scale=w_scale, w_zero_point=w_zero_point,
                     r_scale=r_scale, r_zero_point=r_zero_point, b_scale=b_scale, b_zero_point=b_zero_point,
                     y_scale=y_scale, y_zero_point=y_zero_point)
    D = 2 if faithful else _NUM_DIRECTIONS[direction]
    W, R = _float_input(W, "W"), _float_input(R, "R")
    B = None if B is None else _float_input(B, "B")
    _weight_shapes(W, R, B, H, D, faithful)
    wq = quark_quantize_uint16(W, sc.w_scale, sc.w_zero_point)
    rq = quark_quantize_uint16(R, sc.r_scale, sc.r_zero_point)
    bq = (np.full((D, 8 * H), sc.b_zero_point, dtype=np.uint16) if B is None
          else quark_quantize_uint16(B, sc.b_scale, sc.b_zero_point))
    return PreparedExtendedLSTM(_recurrence(wq, rq, bq, sc, H, direction, faithful), sc, H, D, mode)


def extended_lstm(X, W, R, B=None, *, x_scale, x_zero_point, w_scale, w_zero_point, r_scale, r_zero_point,
                  b_scale, b_zero_point, y_scale, y_zero_point, hidden_size, direction: str = "bidirectional",
                  mode: str = "faithful", layout: int = 0, input_forget: int = 0, initial_h=None,
                  initial_c=None, return_state: bool = False):
    """Run ``com.amd.quark::ExtendedLSTM`` on float tensors; returns Y float32 [T, D, B, H] (with
    ``return_state``: (Y, Y_h, Y_c), the final states [D, B, H] as ONNX would give them, h dequantized, c the
    kernel's float32 cell; Quark's op itself has only Y).

    X, W, R, B are quantized to uint16 with their own (scale, zero point) exactly as the kernel does
    (float32 division, round half to even, clamp), B=None means zeros. See the module docstring for the two
    modes. ``initial_h`` / ``initial_c`` [D, B, H] (corrected mode only): h is quantized with Y's parameters,
    c is kept in float32; by default h starts at Y's zero point and c at 0. To run the same weights many times,
    :func:`prepare` them once.
    """
    if mode == "faithful":  # X's contract limits (batch 1) are checked before W's shapes
        Xa = _float_input(X, "X")
        _check_x(Xa, Xa.shape[-1] if Xa.ndim == 3 else 0, True, False)
        X = Xa
    prepared = prepare(W, R, B, x_scale=x_scale, x_zero_point=x_zero_point, w_scale=w_scale,
                       w_zero_point=w_zero_point, r_scale=r_scale, r_zero_point=r_zero_point, b_scale=b_scale,
                       b_zero_point=b_zero_point, y_scale=y_scale, y_zero_point=y_zero_point,
                       hidden_size=hidden_size, direction=direction, mode=mode, layout=layout,
                       input_forget=input_forget)
    return prepared(X, initial_h=initial_h, initial_c=initial_c, return_state=return_state)


def y_range(y_scale: float, y_zero_point: int) -> tuple[float, float]:
    """The real interval Y (and the hidden state) can represent: [(0 - zp) * scale, (65535 - zp) * scale]."""
    return (-y_zero_point * float(y_scale), (65535 - y_zero_point) * float(y_scale))
