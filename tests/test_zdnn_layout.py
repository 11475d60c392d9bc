"""Stickified byte images against an independent implementation of zdnn.md 2.2-2.5 (offset formulas element by
element, big-endian cells), getsize against its formula, and transform/untransform round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_oracle import dlf16_encode_ref, dlf16_round_ref

import fusedrnn.zdnn as z

PAGE = 4096


def cdiv(a, b):
    return -(-a // b)


def padded(x):
    return cdiv(x, 64) * 64


# ---- formulas of zdnn.md ---------------------------------------------------------------------------------------
def getsize_formula(dims, cell: int, fmt: str) -> int:
    d4, d3, d2, d1 = dims
    cps = {2: 64, 1: 128, 4: 32}[cell] if fmt != "weights" else 64
    sticks = cdiv(d2, 2) if fmt == "weights" else d2
    return d4 * d3 * cdiv(sticks, 32) * cdiv(d1, cps) * PAGE


def feature_offset(dims, n, h, w, c, cell: int = 2):
    """4DFEATURE byte offset (zdnn.md 2.4), ``cell`` bytes per cell, 128-byte sticks."""
    N, H, W, C = dims
    cps = 128 // cell
    pages_per_h = cdiv(W, 32)
    pages_all_h = H * pages_per_h
    pages_per_n = pages_all_h * cdiv(C, cps)
    page = n * pages_per_n + (c // cps) * pages_all_h + h * pages_per_h + w // 32
    return page * PAGE + (w % 32) * 128 + (c % cps) * cell


def kernel_offset(dims, h, w, c, k):
    H, W, C, K = dims
    cg = cdiv(C, 32) * PAGE
    return (k // 64) * (H * W * cg) + h * (W * cg) + w * cg + c * 128 + (k % 64) * 2


def weights_offset(dims, n, h, w, c):
    N, H, W, C = dims
    W2, C2 = cdiv(W, 64) * 64, cdiv(C, 64) * 64
    return n * H * W2 * C2 + h * W2 * 64 + (w // 2) * 128 + (c // 64) * W2 * H * 64 + (c * 2) % 128 + (w % 2)


def transformed_index(layout, shape, idx):
    """Pre-transformed index arrays -> transformed (n, h, w, c) per the table of zdnn.md 2.2."""
    zero = np.zeros_like(idx[0])
    if layout == z.ZDNN_1D:
        return zero, zero, zero, idx[0]
    if layout == z.ZDNN_2D:
        return zero, zero, idx[0], idx[1]
    if layout == z.ZDNN_2DS:
        return idx[0], zero, zero, idx[1]
    if layout == z.ZDNN_3D:
        return zero, idx[0], idx[1], idx[2]
    if layout == z.ZDNN_3DS:
        return idx[0], zero, idx[1], idx[2]
    if layout == z.ZDNN_NCHW:
        return idx[0], idx[2], idx[3], idx[1]
    if layout == z.ZDNN_4DS:
        if shape[1] == 1:
            return idx[0], zero, idx[2], idx[3]
        return idx[0], zero, idx[2], idx[1] * padded(shape[3]) + idx[3]
    return tuple(idx)


def transformed_dims_formula(layout, s):
    return {z.ZDNN_1D: lambda: (1, 1, 1, s[0]), z.ZDNN_2D: lambda: (1, 1, s[0], s[1]),
            z.ZDNN_2DS: lambda: (s[0], 1, 1, s[1]), z.ZDNN_3D: lambda: (1, s[0], s[1], s[2]),
            z.ZDNN_3DS: lambda: (s[0], 1, s[1], s[2]), z.ZDNN_NCHW: lambda: (s[0], s[2], s[3], s[1]),
            z.ZDNN_4DS: lambda: (s[0], 1, s[2], s[3] if s[1] == 1 else s[1] * padded(s[3]))}.get(
        layout, lambda: tuple(s))()


def image_of(size, offsets, cells, cell: int) -> np.ndarray:
    """A zero image with each cell written big-endian at its offset (one scatter per byte of the cell)."""
    img = np.zeros(size, np.uint8)
    v = cells.astype(np.int64).reshape(-1) & ((1 << (8 * cell)) - 1)
    off = offsets.reshape(-1)
    for byte in range(cell):
        img[off + byte] = (v >> (8 * (cell - 1 - byte))) & 0xFF
    return img


def values_in(pretype, rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    if pretype == "FP16":
        return x.astype(np.float16), x.astype(np.float16).astype(np.float32)
    if pretype == "BFLOAT":
        codes = (x.view(np.uint32) >> 16).astype(np.uint16)
        return codes, (codes.astype(np.uint32) << 16).view(np.float32)
    return x, x


PRE = {"FP32": z.FP32, "FP16": z.FP16, "BFLOAT": z.BFLOAT}
PLAIN_LAYOUTS = [z.ZDNN_1D, z.ZDNN_2D, z.ZDNN_2DS, z.ZDNN_3D, z.ZDNN_3DS, z.ZDNN_4D, z.ZDNN_NHWC, z.ZDNN_NCHW,
                 z.ZDNN_4DS, z.ZDNN_HWCK]
NDIM = {z.ZDNN_1D: 1, z.ZDNN_2D: 2, z.ZDNN_2DS: 2, z.ZDNN_3D: 3, z.ZDNN_3DS: 3}


def _shape(data, layout):
    n = NDIM.get(layout, 4)
    small = st.integers(1, 3)
    big = st.integers(1, 140)
    dims = [data.draw(small) for _ in range(n - 2)] + [data.draw(st.integers(1, 70)), data.draw(big)]
    if n == 1:
        dims = [data.draw(big)]
    if layout == z.ZDNN_4DS:
        dims[1] = data.draw(st.sampled_from([1, 2]))
    return tuple(dims)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), layout=st.sampled_from(PLAIN_LAYOUTS), pretype=st.sampled_from(sorted(PRE)),
       seed=st.integers(0, 2**32 - 1))
def test_stickified_bytes_match_offset_formulas(data, layout, pretype, seed):
    shape = _shape(data, layout)
    x, x32 = values_in(pretype, np.random.default_rng(seed), shape)
    pre = z.init_pre_transformed_desc(layout, PRE[pretype], None, *shape)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == z.ZDNN_OK
    assert tf.dims == transformed_dims_formula(layout, shape)
    assert tf.type == z.ZDNN_DLFLOAT16
    assert (tf.format, tf.layout) == ((z.ZDNN_FORMAT_4DKERNEL, z.ZDNN_HWCK) if layout == z.ZDNN_HWCK
                                      else (z.ZDNN_FORMAT_4DFEATURE, z.ZDNN_NHWC))
    size = z.getsize_ztensor(tf)
    assert size == getsize_formula(tf.dims, 2, "feature")
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == z.ZDNN_OK
    assert zt.buffer_size == size and zt.buffer.ctypes.data % PAGE == 0
    assert z.transform_ztensor(zt, x) == z.ZDNN_OK and zt.is_transformed
    idx = np.indices(shape)
    if layout == z.ZDNN_HWCK:
        off = kernel_offset(tf.dims, *idx)
    else:
        off = feature_offset(tf.dims, *transformed_index(layout, shape, idx))
    expected = image_of(size, off, dlf16_encode_ref(x32), 2)
    np.testing.assert_array_equal(zt.buffer, expected)
    # round trip (not for kernels: zDNN cannot untransform them)
    if layout != z.ZDNN_HWCK:
        out = np.zeros(shape, {"FP32": np.float32, "FP16": np.float16, "BFLOAT": np.uint16}[pretype])
        assert z.transform_origtensor(zt, out) == z.ZDNN_OK
        r = dlf16_round_ref(x32)
        want = {"FP32": r.view(np.uint32), "FP16": r.astype(np.float16).view(np.uint16),
                "BFLOAT": (r.view(np.uint32) >> 16).astype(np.uint16)}[pretype]
        np.testing.assert_array_equal(out.view(want.dtype), want)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["lstm", "gru"]), usage=st.sampled_from(["w", "hw", "b", "hb"]),
       bidir_prev=st.booleans(), dirs=st.integers(1, 2), rows_half=st.integers(1, 40), h=st.integers(1, 70),
       pretype=st.sampled_from(sorted(PRE)), seed=st.integers(0, 2**32 - 1))
def test_concatenated_gates_match_spec(kind, usage, bidir_prev, dirs, rows_half, h, pretype, seed):
    """FICO/ZRH: each (dir, gate) is a plain 2D tensor (rows', h) in consecutive getsize(1,1,rows',h) blocks of a
    zeroed buffer; BIDIR weights move the backward half of the rows to PADDED(rows/2)."""
    G = 4 if kind == "lstm" else 3
    info = ((z.RNN_TYPE_LSTM if kind == "lstm" else z.RNN_TYPE_GRU)
            | (z.PREV_LAYER_BIDIR if bidir_prev else z.PREV_LAYER_NONE)
            | {"w": z.USAGE_WEIGHTS, "hw": z.USAGE_HIDDEN_WEIGHTS, "b": z.USAGE_BIASES,
               "hb": z.USAGE_HIDDEN_BIASES}[usage])
    weights = usage in ("w", "hw")
    rows = 2 * rows_half if weights else 1
    shape = (dirs, rows, h) if weights else (dirs, h)
    rng = np.random.default_rng(seed)
    gates = [values_in(pretype, rng, shape) for _ in range(G)]
    pre = z.init_pre_transformed_desc(z.ZDNN_3DS if weights else z.ZDNN_2DS, PRE[pretype], None, *shape)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc_concatenated(pre, info, tf) == z.ZDNN_OK
    bidir_rows = usage == "w" and bidir_prev
    rows_t = 2 * padded(rows // 2) if bidir_rows else rows
    assert tf.dims == (dirs, 1, rows_t, G * padded(h))
    expected_layout = {(4, False): z.ZDNN_FICO, (3, False): z.ZDNN_ZRH, (4, True): z.ZDNN_BIDIR_FICO,
                       (3, True): z.ZDNN_BIDIR_ZRH}[(G, bidir_rows)]
    assert tf.layout == expected_layout and tf.format == z.ZDNN_FORMAT_4DFEATURE
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == z.ZDNN_OK
    zt.buffer[:] = 0xAB  # the whole buffer must be rewritten (zeroed) by a concatenated transform
    assert z.transform_ztensor(zt, *[g[0] for g in gates]) == z.ZDNN_OK
    block = getsize_formula((1, 1, rows_t, h), 2, "feature")
    assert zt.buffer_size == dirs * G * block
    expected = np.zeros(zt.buffer_size, np.uint8)
    for d in range(dirs):
        for g in range(G):
            v = gates[g][1].reshape(dirs, rows, h)[d]
            r, c = np.indices((rows, h))
            rt = np.where(r < rows // 2, r, padded(rows // 2) + r - rows // 2) if bidir_rows else r
            off = (d * G + g) * block + feature_offset((1, 1, rows_t, h), 0, 0, rt, c)
            expected |= image_of(zt.buffer_size, off, dlf16_encode_ref(v), 2)
    np.testing.assert_array_equal(zt.buffer, expected)


@settings(max_examples=25, deadline=None)
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 70), st.integers(1, 300)),
       seed=st.integers(0, 2**32 - 1))
def test_int8_feature_bytes(shape, seed):
    """QUANTIZED_INT8 from INT8: 128 one-byte cells per stick at the INT8 formula's offsets."""
    q = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
    pre = z.init_pre_transformed_desc(z.ZDNN_NHWC, z.INT8, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_INT8, tf) == z.ZDNN_OK
    assert (tf.type, tf.format) == (z.ZDNN_BINARY_INT8, z.ZDNN_FORMAT_4DFEATURE)
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, 0.5, 3.0, zt) == z.ZDNN_OK
    assert zt.buffer_size == getsize_formula(shape, 1, "feature")
    assert z.transform_quantized_ztensor(zt, False, -128, 127, q) == z.ZDNN_OK
    N, H, W, C = shape
    n, h, w, c = np.indices(shape)
    page = n * H * cdiv(W, 32) * cdiv(C, 128) + (c // 128) * H * cdiv(W, 32) + h * cdiv(W, 32) + w // 32
    off = page * PAGE + (w % 32) * 128 + (c % 128)
    np.testing.assert_array_equal(zt.buffer, image_of(zt.buffer_size, off, q.view(np.uint8), 1))


@settings(max_examples=25, deadline=None)
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 140), st.integers(1, 140)),
       seed=st.integers(0, 2**32 - 1))
def test_int8_weights_bytes(shape, seed):
    """QUANTIZED_WEIGHTS_INT8: rows paired byte by byte (4DWEIGHTS formula); padding as zdnn.md 2.7 describes."""
    q = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
    pre = z.init_pre_transformed_desc(z.ZDNN_NHWC, z.INT8, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_WEIGHTS_INT8, tf) == z.ZDNN_OK
    assert (tf.type, tf.format) == (z.ZDNN_BINARY_INT8, z.ZDNN_FORMAT_4DWEIGHTS)
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, 0.5, 0.0, zt) == z.ZDNN_OK
    assert zt.buffer_size == getsize_formula(shape, 1, "weights")
    assert z.transform_quantized_ztensor(zt, False, -128, 127, q) == z.ZDNN_OK
    off = weights_offset(shape, *np.indices(shape))
    np.testing.assert_array_equal(zt.buffer[off], q.view(np.uint8))
    N, H, W, C = shape
    if W % 2:  # the missing odd row of the last pair repeats the last row
        n, h, c = np.indices((N, H, C))
        odd = weights_offset(shape, n, h, np.full_like(n, W), c)
        np.testing.assert_array_equal(zt.buffer[odd], q[:, :, W - 1, :].view(np.uint8))


@settings(max_examples=20, deadline=None)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 70)), seed=st.integers(0, 2**32 - 1))
def test_int32_bytes_and_round_trip(shape, seed):
    x = np.random.default_rng(seed).integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
    pre = z.init_pre_transformed_desc(z.ZDNN_3DS, z.INT32, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == z.ZDNN_OK and tf.type == z.ZDNN_BINARY_INT32
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == z.ZDNN_OK
    assert zt.buffer_size == getsize_formula(tf.dims, 4, "feature")
    # libzdnn transforms no INT32 data (an INT32 ztensor is an op's output, reduce's MAXIMUM_IDX): the buffer is
    # written as the NNPA writes it, 4-byte cells in the 4DFEATURE layout, and read back by transform_origtensor
    assert z.transform_ztensor(zt, x) == z.ZDNN_INVALID_TYPE and not zt.is_transformed
    off = feature_offset(tf.dims, *transformed_index(z.ZDNN_3DS, shape, np.indices(shape)), cell=4)
    zt.buffer[:] = image_of(zt.buffer_size, off, x.view(np.uint32), 4)
    zt.is_transformed = True
    out = np.zeros(shape, np.int32)
    assert z.transform_origtensor(zt, out) == z.ZDNN_OK
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("typ,fmt,cell,kind", [(z.ZDNN_DLFLOAT16, z.ZDNN_FORMAT_4DFEATURE, 2, "feature"),
                                               (z.ZDNN_DLFLOAT16, z.ZDNN_FORMAT_4DKERNEL, 2, "feature"),
                                               (z.ZDNN_BINARY_INT8, z.ZDNN_FORMAT_4DFEATURE, 1, "feature"),
                                               (z.ZDNN_BINARY_INT8, z.ZDNN_FORMAT_4DWEIGHTS, 1, "weights"),
                                               (z.ZDNN_BINARY_INT32, z.ZDNN_FORMAT_4DFEATURE, 4, "feature")])
def test_getsize_formula_random(typ, fmt, cell, kind):
    rng = np.random.default_rng(int(typ) * 7 + int(fmt))
    for _ in range(200):
        dims = tuple(int(v) for v in rng.integers(1, 3000, 4))
        d = z.TensorDesc(z.ZDNN_NHWC, fmt, typ, *dims)
        assert z.getsize_ztensor(d) == getsize_formula(dims, cell, kind)


def test_bidir_hn_is_byte_identical_to_2ts_tensor():
    """zdnn.md 2.6: a BIDIR 4DS (ts, 2, b, h) image equals the (2*ts, 1, b, h) image of the fwd/bwd interleave."""
    ts, b, h = 3, 5, 70
    x = np.random.default_rng(1).standard_normal((ts, 2, b, h)).astype(np.float32)
    from test_zdnn_oracle import make_zt

    a = make_zt(z.ZDNN_4DS, "FP32", (ts, 2, b, h), x)
    b2 = make_zt(z.ZDNN_4DS, "FP32", (2 * ts, 1, b, h), x.reshape(2 * ts, 1, b, h))
    assert a.buffer_size == b2.buffer_size
    np.testing.assert_array_equal(a.buffer, b2.buffer)


def test_spec_example_3d_vs_3ds_differ():
    """3D and 3DS give different bytes once C > 64 or W > 32 (zdnn.md 2.2)."""
    from test_zdnn_oracle import make_zt

    x = np.arange(2 * 40 * 70, dtype=np.float32).reshape(2, 40, 70) / 100
    a, b = make_zt(z.ZDNN_3D, "FP32", x.shape, x), make_zt(z.ZDNN_3DS, "FP32", x.shape, x)
    assert a.buffer_size == b.buffer_size and not np.array_equal(a.buffer, b.buffer)
    assert math.prod(x.shape) > 0
