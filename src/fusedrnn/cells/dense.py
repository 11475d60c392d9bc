"""Float multi-input dense layer, as MLI's ``rnn_dense``: y = b + Σᵢ xᵢ·Wᵢ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import DTypeError, ShapeError


def dense(
    inputs: Sequence[np.ndarray], weights: Sequence[np.ndarray], bias: np.ndarray | None = None
) -> np.ndarray:
    """y = bias + Σᵢ inputs[i] @ weights[i].

    inputs[i]: [..., Nᵢ] (any leading shape, the same for all); weights[i]: [Nᵢ, M] (in x out, MLI's
    orientation); bias: [M] or None. Computed in the common float dtype of the arguments (float32 or float64).
    """
    if len(inputs) == 0 or len(inputs) != len(weights):
        raise ShapeError(
            f"inputs, weights: expected the same non-zero number of inputs and weight matrices, "
            f"got {len(inputs)} inputs and {len(weights)} weights"
        )
    xs = [np.asarray(x) for x in inputs]
    ws = [np.asarray(w) for w in weights]
    for name, arrs in (("inputs", xs), ("weights", ws)):
        for k, a in enumerate(arrs):
            if a.dtype.kind != "f":
                raise DTypeError(f"{name}[{k}]: expected a float array, got dtype {a.dtype}")
    dt = np.result_type(*xs, *ws, np.float32)
    M = ws[0].shape[-1] if ws[0].ndim == 2 else None
    lead = xs[0].shape[:-1]
    for k, (x, w) in enumerate(zip(xs, ws, strict=True)):
        if w.ndim != 2 or w.shape[1] != M:
            raise ShapeError(f"weights[{k}]: expected shape (N{k}, {M}) (in, out), got {w.shape}")
        if x.ndim < 1 or x.shape[-1] != w.shape[0] or x.shape[:-1] != lead:
            raise ShapeError(f"inputs[{k}]: expected shape {lead + (w.shape[0],)}, got {x.shape}")
    y = np.zeros(lead + (M,), dt)
    if bias is not None:
        b = np.asarray(bias)
        if b.dtype.kind != "f":
            raise DTypeError(f"bias: expected a float array, got dtype {b.dtype}")
        if b.shape != (M,):
            raise ShapeError(f"bias: expected shape ({M},), got {b.shape}")
        y += b
    for x, w in zip(xs, ws, strict=True):
        y += x.astype(dt, copy=False) @ w.astype(dt, copy=False)
    return y
