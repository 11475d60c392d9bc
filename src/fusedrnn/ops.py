"""Functional ONNX operators: ``lstm``, ``gru`` and ``rnn`` with the ONNX signature and attributes.

Inputs, shapes, gate orders and attributes are those of the ONNX operators (opsets 7-22); the semantics are
onnxruntime's where ONNX leaves them open (``sequence_lens``, activation alpha/beta defaults, ``clip`` on gate
pre-activations only). Beyond onnxruntime: ``layout=1``, float64, and the keyword options

* ``activation_defaults``: ``"ort"`` (default) or ``"onnx"`` (the standalone ONNX activation operators'
  alpha/beta defaults);
* ``dtype``: the compute dtype (float32 or float64; default float64 for float64 input, else float32);
* ``rounding``: a :class:`fusedrnn.cells.rounding.RoundingPolicy` for reduced-precision emulation;
* ``nan``: ``"ieee"`` (default: NaN and infinities propagate) or ``"onnxruntime"`` (LSTM and GRU turn a NaN
  pre-activation into the activation's upper bound, as onnxruntime's clamped activations do).

float16 / bfloat16 inputs are computed in float32 and the outputs cast back to the input dtype.
"""

from __future__ import annotations

import numpy as np

from . import conventions
from .cells.activations import Activation, parse_activations
from .cells.compiled.driver import immutable
from .cells.gru import gru_sequence
from .cells.kinds import DEFAULT_ACTIVATIONS, GATE_COUNT
from .cells.lstm import lstm_sequence
from .cells.ort_qlstm import QuantizedWeights, dynamic_quantize_lstm_sequence
from .cells.recurrence import DIRECTIONS, direction_flags
from .cells.rnn import rnn_sequence
from .cells.rounding import EXACT, RoundingPolicy
from .errors import AttributeValueError, DTypeError, ShapeError
from .validation import (
    as_float_array,
    check_rank,
    check_shape,
    choice,
    compute_dtype,
    flag,
    float_list,
    layout_value,
    name_list,
    optional_positive_float,
    positive_int,
    sequence_lengths,
)

_ONNX_COMMON = {
    "hidden_size": None,
    "direction": "forward",
    "activations": None,
    "activation_alpha": None,
    "activation_beta": None,
    "clip": None,
    "layout": 0,
}
ONNX_ATTRIBUTES = {
    "lstm": {**_ONNX_COMMON, "input_forget": 0},
    "gru": {**_ONNX_COMMON, "linear_before_reset": 0},
    "rnn": dict(_ONNX_COMMON),
}
"""The ONNX attributes of each operator with their defaults."""
_FUSEDRNN_OPTIONS = {"activation_defaults": "ort", "dtype": None, "rounding": None, "nan": "ieee"}
NAN_MODES = ("ieee", "onnxruntime")


def _nan_to_upper_bound(a: np.ndarray) -> None:
    """In place: NaN pre-activations become +inf, so sigmoid and tanh give their upper bound 1, as onnxruntime's
    clamped activations do."""
    np.copyto(a, np.inf, where=np.isnan(a))


ORT_NAN = RoundingPolicy("onnxruntime-nan", {"preact": _nan_to_upper_bound})
"""onnxruntime's NaN handling of LSTM and GRU as a policy on the pre-activation point: their activations clamp
their input with min/max, which turns a NaN pre-activation into the upper bound (sigmoid, tanh -> 1). Its RNN
propagates NaN as fusedrnn does."""
_ATTRS = {cell: {**attrs, **_FUSEDRNN_OPTIONS} for cell, attrs in ONNX_ATTRIBUTES.items()}


def _attributes(cell: str, given: dict) -> dict:
    unknown = sorted(set(given) - set(_ATTRS[cell]))
    if unknown:
        raise AttributeValueError(
            f"{', '.join(unknown)}: unknown attribute(s) of {cell.upper()}; expected a subset of "
            f"{sorted(_ATTRS[cell])}"
        )
    return {**_ATTRS[cell], **given}


_DEFAULT_ACTS: dict = {}


def onnx_activations(cell: str, names, alpha, beta, D: int, defaults: str = "ort") -> list[list[Activation]]:
    """Resolve ONNX ``activations`` / ``activation_alpha`` / ``activation_beta`` into per-direction lists
    (None names: the defaults). An RNN of one direction accepts the schema default's two names and uses the
    first, as onnxruntime does."""
    n = len(DEFAULT_ACTIVATIONS[cell])
    if names is None and alpha is None and beta is None and isinstance(defaults, str):  # resolved once per key
        key = (cell, D, defaults)
        if key not in _DEFAULT_ACTS:
            _DEFAULT_ACTS[key] = onnx_activations(cell, list(DEFAULT_ACTIVATIONS[cell]) * D, None, None, D, defaults)
        return [list(a) for a in _DEFAULT_ACTS[key]]
    if names is None:
        names = list(DEFAULT_ACTIVATIONS[cell]) * D
    else:
        names = name_list(names, "activations")
        if cell == "rnn" and D == 1 and len(names) == 2:
            names = names[:1]  # the schema default ["Tanh", "Tanh"] applies to one direction
        if len(names) != n * D:
            raise AttributeValueError(
                f"activations: expected {n * D} names ({n} per direction x {D} direction(s)) for "
                f"{cell.upper()}, got {len(names)}: {names!r}"
            )
    acts = parse_activations(names, float_list(alpha, "activation_alpha"), float_list(beta, "activation_beta"),
                             defaults=defaults)
    return [acts[d * n : (d + 1) * n] for d in range(D)]


def _prepare(cell: str, X, W, R, B, sequence_lens, initial_h, initial_c, P, attributes: dict, canonical=True):
    """Validate ONNX-convention arguments; return time-major arrays and resolved options. W, R, b_x, b_h are in
    the canonical gate order, or (``canonical=False``) left in ONNX's order, uncopied where possible (see
    :func:`_to_canonical`)."""
    attrs = _attributes(cell, attributes)
    G = GATE_COUNT[cell]
    direction = choice(attrs["direction"], DIRECTIONS, "direction")
    reverse = direction_flags(direction)
    D = len(reverse)
    layout = layout_value(attrs["layout"])
    rounding = EXACT if attrs["rounding"] is None else attrs["rounding"]
    if not isinstance(rounding, RoundingPolicy):
        raise DTypeError(f"rounding: expected a RoundingPolicy or None, got {type(rounding).__name__}")
    if choice(attrs["nan"], NAN_MODES, "nan") == "onnxruntime" and cell != "rnn":  # its RNN does not clamp
        if not rounding.is_exact:
            raise AttributeValueError(f"nan: 'onnxruntime' runs the exact float engine; it cannot be combined with "
                                      f"rounding={rounding.name!r}")
        rounding = ORT_NAN
    clip = optional_positive_float(attrs["clip"], "clip")

    X = as_float_array(X, "X")
    check_rank(X, 3, "X", "[seq_length, batch_size, input_size]" if layout == 0 else
               "[batch_size, seq_length, input_size]")
    x = X if layout == 0 else X.transpose(1, 0, 2)
    T, Bn, I = x.shape
    if T == 0 or Bn == 0 or I == 0:
        raise ShapeError(f"X: expected non-empty seq_length, batch_size and input_size, got shape {X.shape}")
    dt = compute_dtype(X, attrs["dtype"])
    W = as_float_array(W, "W")
    R = as_float_array(R, "R")
    check_rank(R, 3, "R", f"[num_directions, {G}*hidden_size, hidden_size]")
    H = R.shape[-1]
    if attrs["hidden_size"] is not None:
        H = positive_int(attrs["hidden_size"], "hidden_size")
    if H == 0:
        raise ShapeError(f"R: expected hidden_size >= 1, got shape {R.shape}")
    check_shape(W, (D, G * H, I), "W", f"[num_directions, {G}*hidden_size, input_size]")
    check_shape(R, (D, G * H, H), "R", f"[num_directions, {G}*hidden_size, hidden_size]")

    def state(a, name):
        if a is None:
            return np.zeros((D, Bn, H), dt)
        a = as_float_array(a, name)
        if layout == 0:
            check_shape(a, (D, Bn, H), name, "[num_directions, batch_size, hidden_size]")
            return np.ascontiguousarray(a, dtype=dt)
        check_shape(a, (Bn, D, H), name, "[batch_size, num_directions, hidden_size] (layout=1)")
        return np.ascontiguousarray(a.transpose(1, 0, 2), dtype=dt)

    b_x = b_h = None
    if B is not None:
        B = as_float_array(B, "B")
        check_shape(B, (D, 2 * G * H), "B", f"[num_directions, {2 * G}*hidden_size]")
        b_x = B[:, : G * H].astype(dt, copy=False)
        b_h = B[:, G * H :].astype(dt, copy=False)
    arrays = dict(
        x=np.ascontiguousarray(x, dtype=dt),
        W=W.astype(dt, copy=False),
        R=R.astype(dt, copy=False),
        b_x=b_x,
        b_h=b_h,
        h0=state(initial_h, "initial_h"),
    )
    if canonical:
        _to_canonical(arrays, cell)
    if cell == "lstm":
        arrays["c0"] = state(initial_c, "initial_c")
        if P is not None:
            P = as_float_array(P, "P")
            check_shape(P, (D, 3 * H), "P", "[num_directions, 3*hidden_size] (order i, o, f)")
            P = P.astype(dt, copy=False).reshape(D, 3, H)
            arrays["P"] = np.ascontiguousarray(conventions.peepholes_to_canonical(P, "onnx", axis=1))
    options = dict(
        reverse=reverse,
        acts=onnx_activations(cell, attrs["activations"], attrs["activation_alpha"], attrs["activation_beta"], D,
                              attrs["activation_defaults"]),
        lens=sequence_lengths(sequence_lens, T, Bn),
        clip=clip,
        policy=rounding,
    )
    return arrays, options, attrs, X.dtype


def _to_canonical(arrays: dict, cell: str) -> None:
    """Reorder W, R, b_x, b_h of :func:`_prepare`'s arrays in place from ONNX's gate order to the canonical one."""
    for name in ("W", "R", "b_x", "b_h"):
        a = arrays[name]
        if a is not None:
            a = conventions.to_canonical(a, cell, "onnx", axis=1)
            arrays[name] = np.ascontiguousarray(a) if name in ("W", "R") else a


def _finish(outputs, layout: int, out_dtype):
    Y, *states = outputs
    if layout == 1:
        Y = Y.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    res = [Y, *states]
    if out_dtype not in (np.float32, np.float64):
        res = [r.astype(out_dtype) for r in res]
    else:
        res = [np.ascontiguousarray(r) for r in res]
    return tuple(res)


def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, **attributes):
    """ONNX LSTM. Returns ``(Y, Y_h, Y_c)``: Y [T, D, B, H] (layout 1: [B, T, D, H]), Y_h, Y_c [D, B, H]
    (layout 1: [B, D, H]). Attributes: hidden_size, direction, activations, activation_alpha,
    activation_beta, clip, input_forget, layout, plus activation_defaults, dtype, rounding, nan."""
    arrays, options, attrs, out_dtype = _prepare("lstm", X, W, R, B, sequence_lens, initial_h, initial_c, P,
                                                 attributes, canonical=False)
    coupling = "input_forget" if flag(attrs["input_forget"], "input_forget") else None
    args = ("x", "W", "R", "b_x", "b_h", "h0", "c0")
    # the engine takes ONNX-order weights as they are (no reordered copy per call)
    out = lstm_sequence(*(arrays[k] for k in args), P=arrays.get("P"), coupling=coupling, gate_order="onnx",
                        **options)
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """ONNX GRU. Returns ``(Y, Y_h)``. Attributes: hidden_size, direction, activations, activation_alpha,
    activation_beta, clip, linear_before_reset, layout, plus activation_defaults, dtype, rounding, nan."""
    arrays, options, attrs, out_dtype = _prepare("gru", X, W, R, B, sequence_lens, initial_h, None, None,
                                                 attributes)  # ONNX's GRU order is the canonical one: no copies
    lbr = flag(attrs["linear_before_reset"], "linear_before_reset")
    out = gru_sequence(arrays["x"], arrays["W"], arrays["R"], arrays["b_x"], arrays["b_h"], arrays["h0"],
                       linear_before_reset=lbr, **options)
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """ONNX RNN. Returns ``(Y, Y_h)``. Attributes: hidden_size, direction, activations, activation_alpha,
    activation_beta, clip, layout, plus activation_defaults, dtype, rounding, nan."""
    arrays, options, attrs, out_dtype = _prepare("rnn", X, W, R, B, sequence_lens, initial_h, None, None,
                                                 attributes)
    out = rnn_sequence(arrays["x"], arrays["W"], arrays["R"], arrays["b_x"], arrays["b_h"], arrays["h0"],
                       **options)
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


def ort_dynamic_uint8(v: np.ndarray) -> np.ndarray:
    """onnxruntime's dynamic uint8 quantization of a float32 block, returned as the integers ``q - zero_point``
    (float64) together with the scale: ``(q - z, s)``.

    The range is widened to contain 0: lo = min(0, min v), hi = max(0, max v); s = (hi - lo) / 255 in float32
    (1 when hi == lo); z = round_half_even(clamp(-lo / s, 0, 255)); q = clamp(round_half_even(v / s) + z, 0, 255).
    """
    v = np.asarray(v, dtype=np.float32)
    lo = np.float32(min(0.0, float(v.min())))
    hi = np.float32(max(0.0, float(v.max())))
    s = np.float32(1.0) if hi == lo else np.float32((hi - lo) / np.float32(255))
    z = np.float32(np.rint(np.clip(-lo / s, 0, 255)))
    q = np.clip(np.rint(v / s) + z, 0, 255)
    return (q - z).astype(np.float64), s


def _quantized_operands(Wq, scale, zero_point, D: int, rows: int, name: str):
    """``Wq`` [D, K, rows] int8 / uint8 with its scale and zero point checked: (Wq, scale float32 [D] or
    [D, rows], zero point [D] or [D, rows] of Wq's dtype, zeros when not given)."""
    Wq = np.asarray(Wq)
    if Wq.dtype not in (np.int8, np.uint8):
        raise DTypeError(f"{name}: expected int8 or uint8 quantized weights, got dtype {Wq.dtype}")
    check_rank(Wq, 3, name, f"[num_directions, {'input_size' if name == 'W' else 'hidden_size'}, 4*hidden_size]")
    check_shape(Wq, (D, Wq.shape[1], rows), name, f"[num_directions, K, {rows}] (transposed: K rows, 4H columns)")
    s = np.asarray(scale, dtype=np.float32) if scale is not None else None
    if s is None or s.shape not in ((D,), (D, rows)):
        raise ShapeError(f"{name}_scale: expected shape ({D},) or ({D}, {rows}), got "
                         f"{None if s is None else s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise AttributeValueError(f"{name}_scale: expected finite positive scales, got {s.ravel()[:8].tolist()}")
    z = np.zeros(s.shape, Wq.dtype) if zero_point is None else np.asarray(zero_point)
    if zero_point is not None and (z.dtype != Wq.dtype or z.shape != s.shape):
        raise DTypeError(f"{name}_zero_point: expected {Wq.dtype} of shape {s.shape} (like {name} and its scale), "
                         f"got {z.dtype} of shape {z.shape}")
    return Wq, s, z


def dequantized_weights(Wq, scale, zero_point, D: int, rows: int, name: str) -> np.ndarray:
    """[D, K, 4H] integer weights with per-direction or per-column scale/zero point -> float64 [D, 4H, K]."""
    Wq, s, z = _quantized_operands(Wq, scale, zero_point, D, rows, name)
    s = s.reshape(D, 1, -1).astype(np.float64)
    z = z.reshape(D, 1, -1).astype(np.float64)
    return ((Wq.astype(np.float64) - z) * s).transpose(0, 2, 1)


_CHECKED: dict = {}


def _quantized(Wq, scale, zero_point, D: int, H: int, name: str) -> QuantizedWeights:
    """Checked [D, K, 4H] int8/uint8 weights with per-direction or per-column scales and zero points (checked
    once for arrays nothing can change, such as a loaded model's initializers)."""
    arrays = (Wq, scale, zero_point)
    key = (tuple(id(a) for a in arrays), D, H, name)
    hit = _CHECKED.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], arrays, strict=True)):
        return hit[1]
    checked = _checked_quantized(Wq, scale, zero_point, D, H, name)
    if all(a is None or (isinstance(a, np.ndarray) and immutable(a)) for a in arrays):
        if len(_CHECKED) >= 256:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[key] = (arrays, checked)
    return checked


def _checked_quantized(Wq, scale, zero_point, D: int, H: int, name: str) -> QuantizedWeights:
    Wq, s, z = _quantized_operands(Wq, scale, zero_point, D, 4 * H, name)
    per_column = z.ndim == 2
    z = z.reshape(D, -1)
    # onnxruntime checks per-column zero points only: int8 ones must be 0, uint8 ones one value (its first)
    if per_column and Wq.dtype == np.int8 and np.any(z != 0):
        raise AttributeValueError(f"{name}_zero_point: per-column zero points of int8 weights must be 0 (as "
                                  f"onnxruntime requires), got {z.ravel()[:8].tolist()}")
    if per_column and np.any(z != z.flat[0]):
        raise AttributeValueError(f"{name}_zero_point: per-column zero points of uint8 weights must all be equal (as "
                                  f"onnxruntime requires), got {z.ravel()[:8].tolist()}")
    return QuantizedWeights(np.ascontiguousarray(Wq), np.ascontiguousarray(s.reshape(D, -1)),
                            tuple(int(v) for v in z[:, 0]))


def dynamic_quantize_lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                          W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None, *, has_y: bool = True,
                          intra_op_threads: int = 1, **attributes):
    """onnxruntime's ``com.microsoft::DynamicQuantizeLSTM`` (what ``quantize_dynamic`` makes of an LSTM), as its
    CPU kernel computes it (:mod:`fusedrnn.cells.ort_qlstm`: float32 arithmetic, MLAS's activations, exact
    integer products). Returns ``(Y, Y_h, Y_c)`` like :func:`lstm` (float32).

    W [D, I, 4H] and R [D, H, 4H] are int8/uint8 and *transposed* relative to ONNX LSTM (gate order still
    i, o, f, c); scales and zero points are per direction [D] or per column [D, 4H] (per-column zero points: 0 for
    int8, one value for uint8, as onnxruntime requires). X (float32) is quantized once to uint8 over its
    first max(sequence_lens) steps, and every step's hidden state of all B rows is re-quantized to uint8 as one
    block. A direction's zero point is its first value (onnxruntime takes no other). ``has_y``: whether the node has
    a Y output: onnxruntime feeds a finished row's last h back into the
    block (Y omitted) or zeros (Y present). ``intra_op_threads``: the onnxruntime session's thread count (with
    B > 4, or B >= 2 and H <= 256, onnxruntime quantizes h per block of ceil(B / threads) rows). Attributes as
    :func:`lstm` without ``layout`` and the fusedrnn options.
    """
    if "layout" in attributes:
        raise AttributeValueError("layout: DynamicQuantizeLSTM has no layout attribute")
    allowed = {k for k in ONNX_ATTRIBUTES["lstm"] if k != "layout"}
    unknown = sorted(set(attributes) - allowed)
    if unknown:
        raise AttributeValueError(f"{', '.join(unknown)}: unknown attribute(s) of DynamicQuantizeLSTM; expected a "
                                  f"subset of {sorted(allowed)}")
    attrs = {**ONNX_ATTRIBUTES["lstm"], **attributes}
    X = as_float_array(X, "X")
    if X.dtype != np.float32:
        raise DTypeError(f"X: DynamicQuantizeLSTM takes float32 input, got {X.dtype}")
    check_rank(X, 3, "X", "[seq_length, batch_size, input_size]")
    T, Bn, I = X.shape
    if T == 0 or Bn == 0 or I == 0:
        raise ShapeError(f"X: expected non-empty seq_length, batch_size and input_size, got shape {X.shape}")
    reverse = direction_flags(choice(attrs["direction"], DIRECTIONS, "direction"))
    D = len(reverse)
    Rq = np.asarray(R)
    check_rank(Rq, 3, "R", "[num_directions, hidden_size, 4*hidden_size]")
    H = Rq.shape[1]
    if attrs["hidden_size"] is not None:
        H = positive_int(attrs["hidden_size"], "hidden_size")
    if H == 0:
        raise ShapeError(f"R: expected hidden_size >= 1, got shape {Rq.shape}")
    Wqw = _quantized(W, W_scale, W_zero_point, D, H, "W")
    Rqw = _quantized(R, R_scale, R_zero_point, D, H, "R")
    check_shape(Wqw.q, (D, I, 4 * H), "W", "[num_directions, input_size, 4*hidden_size]")
    check_shape(Rqw.q, (D, H, 4 * H), "R", "[num_directions, hidden_size, 4*hidden_size]")

    def state(a, name):
        if a is None:
            return np.zeros((D, Bn, H), np.float32)
        a = as_float_array(a, name)
        check_shape(a, (D, Bn, H), name, "[num_directions, batch_size, hidden_size]")
        return np.ascontiguousarray(a, dtype=np.float32)

    bias = None
    if B is not None:
        B = as_float_array(B, "B")
        check_shape(B, (D, 8 * H), "B", "[num_directions, 8*hidden_size]")
        B = B.astype(np.float32, copy=False)
        bias = B[:, : 4 * H] + B[:, 4 * H :]  # Wb + Rb, rounded to float32 once
    if P is not None:
        P = as_float_array(P, "P")
        check_shape(P, (D, 3 * H), "P", "[num_directions, 3*hidden_size] (order i, o, f)")
        P = np.ascontiguousarray(P, dtype=np.float32).reshape(D, 3, H)
    threads = positive_int(intra_op_threads, "intra_op_threads")
    lens = sequence_lengths(sequence_lens, T, Bn)
    out = dynamic_quantize_lstm_sequence(
        X, np.full(Bn, T, np.int64) if lens is None else lens, Wqw, Rqw, bias, state(initial_h, "initial_h"),
        state(initial_c, "initial_c"), P, reverse=reverse,
        acts=onnx_activations("lstm", attrs["activations"], attrs["activation_alpha"], attrs["activation_beta"], D),
        clip=optional_positive_float(attrs["clip"], "clip"), input_forget=flag(attrs["input_forget"], "input_forget"),
        want_y=bool(has_y), intra_op_threads=threads)
    return tuple(np.ascontiguousarray(o) for o in out)


__all__ = ["lstm", "gru", "rnn", "dynamic_quantize_lstm"]
