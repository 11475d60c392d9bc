"""Functional ONNX operators: ``lstm``, ``gru`` and ``rnn`` with the ONNX signature and attributes.

Inputs, shapes, gate orders and attributes are those of the ONNX operators (opsets 7-22); the semantics are
onnxruntime's where ONNX leaves them open (``sequence_lens``, activation alpha/beta defaults, ``clip`` on gate
pre-activations only). Beyond onnxruntime: ``layout=1``, float64, and the keyword options

* ``activation_defaults``: ``"ort"`` (default) or ``"onnx"`` (the standalone ONNX activation operators'
  alpha/beta defaults);
* ``dtype``: the compute dtype (float32 or float64; default float64 for float64 input, else float32);
* ``rounding``: a :class:`fusedrnn.cells.rounding.RoundingPolicy` for reduced-precision emulation.

float16 / bfloat16 inputs are computed in float32 and the outputs cast back to the input dtype.
"""

from __future__ import annotations

import numpy as np

from . import conventions
from .cells.activations import Activation, parse_activations
from .cells.gru import gru_sequence
from .cells.kinds import DEFAULT_ACTIVATIONS, GATE_COUNT
from .cells.lstm import lstm_sequence
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
_FUSEDRNN_OPTIONS = {"activation_defaults": "ort", "dtype": None, "rounding": None}
_ATTRS = {cell: {**attrs, **_FUSEDRNN_OPTIONS} for cell, attrs in ONNX_ATTRIBUTES.items()}


def _attributes(cell: str, given: dict) -> dict:
    unknown = sorted(set(given) - set(_ATTRS[cell]))
    if unknown:
        raise AttributeValueError(
            f"{', '.join(unknown)}: unknown attribute(s) of {cell.upper()}; expected a subset of "
            f"{sorted(_ATTRS[cell])}"
        )
    return {**_ATTRS[cell], **given}


def onnx_activations(cell: str, names, alpha, beta, D: int, defaults: str = "ort") -> list[list[Activation]]:
    """Resolve ONNX ``activations`` / ``activation_alpha`` / ``activation_beta`` into per-direction lists
    (None names: the defaults). An RNN of one direction accepts the schema default's two names and uses the
    first, as onnxruntime does."""
    n = len(DEFAULT_ACTIVATIONS[cell])
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


def _prepare(cell: str, X, W, R, B, sequence_lens, initial_h, initial_c, P, attributes: dict):
    """Validate ONNX-convention arguments; return canonical time-major arrays and resolved options."""
    attrs = _attributes(cell, attributes)
    G = GATE_COUNT[cell]
    direction = choice(attrs["direction"], DIRECTIONS, "direction")
    reverse = direction_flags(direction)
    D = len(reverse)
    layout = layout_value(attrs["layout"])
    rounding = EXACT if attrs["rounding"] is None else attrs["rounding"]
    if not isinstance(rounding, RoundingPolicy):
        raise DTypeError(f"rounding: expected a RoundingPolicy or None, got {type(rounding).__name__}")
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
        b_x = conventions.to_canonical(B[:, : G * H].astype(dt), cell, "onnx", axis=1)
        b_h = conventions.to_canonical(B[:, G * H :].astype(dt), cell, "onnx", axis=1)
    arrays = dict(
        x=np.ascontiguousarray(x, dtype=dt),
        W=np.ascontiguousarray(conventions.to_canonical(W.astype(dt), cell, "onnx", axis=1)),
        R=np.ascontiguousarray(conventions.to_canonical(R.astype(dt), cell, "onnx", axis=1)),
        b_x=b_x,
        b_h=b_h,
        h0=state(initial_h, "initial_h"),
    )
    if cell == "lstm":
        arrays["c0"] = state(initial_c, "initial_c")
        if P is not None:
            P = as_float_array(P, "P")
            check_shape(P, (D, 3 * H), "P", "[num_directions, 3*hidden_size] (order i, o, f)")
            arrays["P"] = np.ascontiguousarray(P.astype(dt).reshape(D, 3, H)[:, [0, 2, 1]])  # -> i, f, o
    options = dict(
        reverse=reverse,
        acts=onnx_activations(cell, attrs["activations"], attrs["activation_alpha"], attrs["activation_beta"], D,
                              attrs["activation_defaults"]),
        lens=sequence_lengths(sequence_lens, T, Bn),
        clip=clip,
        policy=rounding,
    )
    return arrays, options, attrs, X.dtype


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
    activation_beta, clip, input_forget, layout, plus activation_defaults, dtype, rounding."""
    arrays, options, attrs, out_dtype = _prepare("lstm", X, W, R, B, sequence_lens, initial_h, initial_c, P,
                                                 attributes)
    coupling = "input_forget" if flag(attrs["input_forget"], "input_forget") else None
    out = lstm_sequence(
        arrays["x"], arrays["W"], arrays["R"], arrays["b_x"], arrays["b_h"], arrays["h0"], arrays["c0"],
        P=arrays.get("P"), coupling=coupling, **options,
    )
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """ONNX GRU. Returns ``(Y, Y_h)``. Attributes: hidden_size, direction, activations, activation_alpha,
    activation_beta, clip, linear_before_reset, layout, plus activation_defaults, dtype, rounding."""
    arrays, options, attrs, out_dtype = _prepare("gru", X, W, R, B, sequence_lens, initial_h, None, None,
                                                 attributes)
    lbr = flag(attrs["linear_before_reset"], "linear_before_reset")
    out = gru_sequence(arrays["x"], arrays["W"], arrays["R"], arrays["b_x"], arrays["b_h"], arrays["h0"],
                       linear_before_reset=lbr, **options)
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """ONNX RNN. Returns ``(Y, Y_h)``. Attributes: hidden_size, direction, activations, activation_alpha,
    activation_beta, clip, layout, plus activation_defaults, dtype, rounding."""
    arrays, options, attrs, out_dtype = _prepare("rnn", X, W, R, B, sequence_lens, initial_h, None, None,
                                                 attributes)
    out = rnn_sequence(arrays["x"], arrays["W"], arrays["R"], arrays["b_x"], arrays["b_h"], arrays["h0"],
                       **options)
    return _finish(out, layout_value(attrs["layout"]), out_dtype)


__all__ = ["lstm", "gru", "rnn"]
