"""The weight layouts of the SDK targets' compiled integer products (``_int8_dot.h`` and the int16 pair products
of each loop), made once per prepared layer: rows grouped in pairs (``vpmaddwd``) or quads (``vpdpbusd``), columns
zero-padded, and the offsets that undo ``vpdpbusd``'s unsigned operand. Used by the MLI, LiteRT and TFLM / CMSIS-NN
loops.
"""

from __future__ import annotations

import numpy as np


def row_groups(w: np.ndarray, n_pad: int, n: int, dtype) -> np.ndarray:
    """Integer matrix [K, N] -> [ceil(K / n), n_pad, n] with G[k // n, j, k % n] = w[k, j] (rows in groups of n,
    the missing rows and columns zero)."""
    K, N = w.shape
    p = np.zeros((-(-K // n) * n, n_pad), dtype)
    p[:K, :N] = w
    return np.ascontiguousarray(p.reshape(-1, n, n_pad).transpose(0, 2, 1))


def quad_offsets(w: np.ndarray, n_pad: int) -> np.ndarray:
    """off[j] = -128 · sum_k w[k, j] (int32 [n_pad], padding 0): the accumulators' start that undoes the +128 offset
    of vpdpbusd's unsigned operand. Exact in int32 for int8 weights and K < 2^17 (the callers check both)."""
    off = np.zeros(n_pad, np.int32)
    off[:w.shape[1]] = -128 * np.asarray(w).astype(np.int64).sum(axis=0)
    return off


def in_int8(w: np.ndarray) -> bool:
    """Whether ``w`` is an integer array of int8 values."""
    w = np.asarray(w)
    return w.dtype.kind in "iu" and (w.size == 0 or (int(w.min()) >= -128 and int(w.max()) <= 127))
