"""Float LSTM kernel (litert.md section 4) on the shared float engine (:func:`fusedrnn.cells.lstm.lstm_sequence`).

TFLite's float step is the engine's LSTM with coupling "cifg", peepholes (the output gate reading the new cell),
layer norm (ε = 1e-8 inside the square root, bias after it), ``cell_clip``, projection with ``proj_clip`` and
diagonal recurrence; the aux input of the bidirectional op is folded in as extra input columns. The fused
activation is the engine's g and h activation. float32 throughout, but not bit for bit: the engine's exact
sigmoid/tanh differ from the interpreter's Eigen ones (:mod:`fusedrnn.numerics.eigen`, which the hybrid kernel
uses) by an ulp or two, and its float GEMMs sum in another order than the interpreter's, so outputs agree to float32
rounding (~1e-7).
"""

from __future__ import annotations

import numpy as np

from ...cells.activations import Activation
from ...cells.lstm import lstm_sequence
from ...errors import UnsupportedFeatureError
from .slots import (
    GATE_BIASES,
    INPUT_WEIGHTS,
    LAYER_NORM,
    PEEPHOLES,
    PROJECTION_BIAS,
    PROJECTION_WEIGHTS,
    RECURRENT_WEIGHTS,
    LstmOptions,
    LstmTensors,
    dequantized,
)

_ENGINE_ACT = {"TANH": Activation("Tanh"), "RELU": Activation("Relu"), "NONE": Activation("Affine", 1.0, 0.0),
               "SIGMOID": Activation("Sigmoid")}


def _stack(ts, n_cell: int, cols: int | None) -> np.ndarray:
    """Four per-gate tensors (None -> zeros) as one [4*n_cell, cols] (or [4*n_cell]) float32 array."""
    parts = []
    for t in ts:
        v = dequantized(t)
        if v is None:
            v = np.zeros((n_cell,) if cols is None else (n_cell, cols), np.float32)
        parts.append(v)
    return np.concatenate(parts, axis=0)


def direction_arrays(t: LstmTensors, diagonal: bool) -> dict[str, np.ndarray | None]:
    """One direction's tensors as the float engine's canonical arrays, float32, gate order i, f, g, o (absent
    gates are zeros, absent layer-norm coefficients ones): W [4H, I], R [4H, Hp] ([4H] when ``diagonal``), b [4H],
    P [3, H] (i, f, o), ln [4, H], proj_W [Hp, H], proj_b [Hp]; None where the op has none."""
    H = t.n_cell
    out = {"W": _stack([t[k] for k in INPUT_WEIGHTS], H, t.n_input),
           "R": _stack([t[k] for k in RECURRENT_WEIGHTS], H, None if diagonal else t.n_output),
           "b": _stack([t[k] for k in GATE_BIASES], H, None), "P": None, "ln": None, "proj_W": None, "proj_b": None}
    if t.peephole:
        out["P"] = np.stack([dequantized(t[k]) if t[k] is not None else np.zeros(H, np.float32) for k in PEEPHOLES])
    if t.layer_norm:
        out["ln"] = np.stack([dequantized(t[k]) if t[k] is not None else np.ones(H, np.float32) for k in LAYER_NORM])
    if t.projection:
        out["proj_W"] = dequantized(t[PROJECTION_WEIGHTS])
        out["proj_b"] = dequantized(t[PROJECTION_BIAS])
    return out


class FloatLstmKernel:
    """A prepared float LSTM direction: ``run(x [T,B,I], (h, c), reverse=False, aux=None)``."""

    kind = "float"

    def __init__(self, t: LstmTensors, opts: LstmOptions):
        t.validate(opts.diagonal_recurrent_tensors)
        act = _ENGINE_ACT.get(opts.fused_activation_function)
        if act is None:
            raise UnsupportedFeatureError(f"fused_activation_function: the float LSTM supports TANH, RELU, SIGMOID "
                                          f"and NONE, got {opts.fused_activation_function!r}")
        self.opts, self.t = opts, t
        H = t.n_cell
        self.n_cell, self.n_output, self.n_input, self.n_aux = H, t.n_output, t.n_input, t.n_aux_input
        arrays = direction_arrays(t, opts.diagonal_recurrent_tensors)
        W = arrays["W"]
        if self.n_aux:
            W = np.concatenate([W, _stack(t.aux, H, self.n_aux)], axis=1)
        self.W = W[None]
        self.R, self.b, self.P, self.ln, self.proj_W, self.proj_b = (
            None if arrays[k] is None else arrays[k][None] for k in ("R", "b", "P", "ln", "proj_W", "proj_b"))
        self.acts = [(Activation("Sigmoid"), act, act)]

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((B, self.n_output), np.float32), np.zeros((B, self.n_cell), np.float32)

    def run(self, x: np.ndarray, state, *, reverse: bool = False, aux: np.ndarray | None = None):
        """x [T, B, n_input] float32 time-major; returns (y [T, B, n_output], (h, c))."""
        x = np.asarray(x, np.float32)
        if self.n_aux:
            x = np.concatenate([x, np.asarray(aux, np.float32)], axis=2)
        h, c = state
        o = self.opts
        Y, hn, cn = lstm_sequence(
            np.ascontiguousarray(x), self.W, self.R, self.b, None, h[None].astype(np.float32),
            c[None].astype(np.float32), reverse=(reverse,), acts=self.acts, P=self.P,
            coupling="cifg" if self.t.cifg else None, cell_clip=o.cell_clip or None, proj_W=self.proj_W,
            proj_b=self.proj_b, proj_clip=(o.proj_clip or None) if self.proj_W is not None else None, ln=self.ln)
        return Y[:, 0], (hn[0], cn[0])
