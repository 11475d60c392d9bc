"""Stickified byte images: 4 KiB pages of 32 sticks x 128 bytes, big-endian cells (zdnn.md section 2.4).

Every function maps between a logical 4D array of *cell codes* (uint16 DLFLOAT16 codes, int8, int32) and the
flat uint8 buffer image, vectorised with reshape/transpose (no per-element loops). Padding cells are written as 0.

============  ==========================================  =================================================
format        dims                                        image (C-order array of cells)
============  ==========================================  =================================================
4DFEATURE     (N, H, W, C), cps cells per stick           [N][ceil(C/cps)][H][ceil(W/32)*32][cps]
4DKERNEL      (H, W, C, K), 2-byte cells                  [ceil(K/64)][H][W][ceil(C/32)*32][64]
4DWEIGHTS     (N, H, W, C) int8, rows W paired            [N][ceil(C/64)][H][ceil(W/64)*32][64][2]
============  ==========================================  =================================================
"""

from __future__ import annotations

import numpy as np

from .desc import ceil_div

CELL_DTYPES = {2: np.dtype(">u2"), 1: np.dtype("i1"), 4: np.dtype(">i4")}


def feature_to_image(cells: np.ndarray, cps: int, out: np.ndarray | None = None) -> np.ndarray:
    """Stickify (N, H, W, C) cells (dtype with the cell's byte size; converted to big-endian) as 4DFEATURE with
    ``cps`` cells per stick. Writes into ``out`` (uint8, at least the image size) when given; returns the image."""
    N, H, W, C = cells.shape
    Wp, Cg = ceil_div(W, 32) * 32, ceil_div(C, cps)
    cdt = CELL_DTYPES[cells.dtype.itemsize]
    full = np.zeros((N, H, Wp, Cg * cps), cdt)
    full[:, :, :W, :C] = cells
    img = full.reshape(N, H, Wp, Cg, cps).transpose(0, 3, 1, 2, 4)
    size = N * H * Wp * Cg * cps * cdt.itemsize
    if out is None:
        return np.ascontiguousarray(img).view(np.uint8).reshape(-1)
    out[:size].view(cdt).reshape(N, Cg, H, Wp, cps)[...] = img
    return out[:size]


def feature_from_image(buf: np.ndarray, dims: tuple[int, int, int, int], itemsize: int, cps: int) -> np.ndarray:
    """The (N, H, W, C) cells (native-endian copy) of a 4DFEATURE image."""
    N, H, W, C = (int(v) for v in dims)
    Wp, Cg = ceil_div(W, 32) * 32, ceil_div(C, cps)
    cdt = CELL_DTYPES[itemsize]
    size = N * H * Wp * Cg * cps * itemsize
    v = buf[:size].view(cdt).reshape(N, Cg, H, Wp, cps).transpose(0, 2, 3, 1, 4).reshape(N, H, Wp, Cg * cps)
    return v[:, :, :W, :C].astype(cdt.newbyteorder("="))


def kernel_to_image(cells: np.ndarray) -> np.ndarray:
    """Stickify (H, W, C, K) 2-byte cells as 4DKERNEL: [ceil(K/64)][H][W][ceil(C/32)*32][64]."""
    H, W, C, K = cells.shape
    Cp, Kg = ceil_div(C, 32) * 32, ceil_div(K, 64)
    full = np.zeros((H, W, Cp, Kg * 64), CELL_DTYPES[2])
    full[:, :, :C, :K] = cells
    img = full.reshape(H, W, Cp, Kg, 64).transpose(3, 0, 1, 2, 4)
    return np.ascontiguousarray(img).view(np.uint8).reshape(-1)


def kernel_from_image(buf: np.ndarray, dims: tuple[int, int, int, int]) -> np.ndarray:
    H, W, C, K = (int(v) for v in dims)
    Cp, Kg = ceil_div(C, 32) * 32, ceil_div(K, 64)
    size = H * W * Cp * Kg * 64 * 2
    v = buf[:size].view(CELL_DTYPES[2]).reshape(Kg, H, W, Cp, 64).transpose(1, 2, 3, 0, 4)
    return v.reshape(H, W, Cp, Kg * 64)[:, :, :C, :K].astype(np.uint16)


def weights_to_image(q: np.ndarray) -> np.ndarray:
    """Stickify (N, H, W, C) int8 weights as 4DWEIGHTS: rows w, w+1 interleaved byte by byte in one stick (64 columns
    x 2 rows). Padding as zDNN writes it: an odd W repeats the last row into the missing odd row; a partial group
    of 8 columns fills its trailing cells with the pair's value at the group's first column; the rest is 0."""
    N, H, W, C = q.shape
    W2, C2 = ceil_div(W, 64) * 64, ceil_div(C, 64) * 64
    full = np.zeros((N, H, W2, C2), np.int8)
    full[:, :, :W, :C] = q
    if W % 2:
        full[:, :, W, :C] = q[:, :, W - 1, :]
    if C % 8:
        g0 = C - C % 8
        end = min(g0 + 8, C2)
        rows = W + (W % 2)
        # each trailing cell of the pair (rows 2k, 2k+1) takes the even row's first element of the group
        even = full[:, :, 0:rows:2, g0]
        full[:, :, 0:rows:2, C:end] = even[..., None]
        full[:, :, 1:rows:2, C:end] = even[..., None]
    img = full.reshape(N, H, W2 // 2, 2, C2 // 64, 64).transpose(0, 4, 1, 2, 5, 3)
    return np.ascontiguousarray(img).view(np.uint8).reshape(-1)


def weights_from_image(buf: np.ndarray, dims: tuple[int, int, int, int]) -> np.ndarray:
    N, H, W, C = (int(v) for v in dims)
    W2, C2 = ceil_div(W, 64) * 64, ceil_div(C, 64) * 64
    size = N * H * W2 * C2
    v = buf[:size].view(np.int8).reshape(N, C2 // 64, H, W2 // 2, 64, 2).transpose(0, 2, 3, 5, 1, 4)
    return v.reshape(N, H, W2, C2)[:, :, :W, :C].copy()
