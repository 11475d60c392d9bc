"""zDNN's ``avgpool2d``, ``maxpool2d`` and ``conv2d`` on NHWC DLFLOAT16 ztensors (transformed (N, H, W, C)).

Geometry (TensorFlow's, which zDNN's output-shape rules and tests follow): with strides > 0, VALID windows start at
0, s, 2s, ... and out = ceil((in - k + 1) / s); SAME gives out = ceil(in / s) and pads pad = max((out - 1) * s + k -
in, 0) elements, pad // 2 before and the rest after. With both strides 0 the kernel covers the whole input plane
and the output plane is 1x1. Average pooling divides by the number of real (unpadded) elements in each window
(zDNN's SAME test: a 3x3 input, 2x2 kernel, stride 2 gives 4.5 = (3 + 6) / 2 in the corner); max pooling ignores
padding. Pooling runs as separable strided window views (one pass over W, one over H) in float64; conv2d as im2col +
one float32 GEMM per block of output rows (products of DLFLOAT16 values are exact in float32; the sums round in
float32, about 10x faster than float64 BLAS and far below DLFLOAT16's 2**-10 resolution), bias added in float64.
Each output element is rounded once to DLFLOAT16 (the NNPA's accumulation order and width are not published).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...c_enums import c_enum, export_members
from . import machine as _m
from .constants import NNPAFunction
from .ops_activation import apply_relu, clipping_code_status
from .ops_support import (
    check_kernel,
    dims,
    param_code,
    require_desc,
    require_fields_of,
    require_same_n_c,
    run_op,
    store,
)
from .status import Status
from .transform import read_values
from .verify import OpStatus, check_feature, require
from .ztensor import ZTensor

F = NNPAFunction


PoolPadding = c_enum("PoolPadding", "``zdnn_pool_padding``.", __name__, "VALID_PADDING SAME_PADDING")
Conv2dAct = c_enum("Conv2dAct", "``zdnn_conv2d_act``.", __name__, "CONV2D_ACT_NONE CONV2D_ACT_RELU")
ENUM_CONSTANTS = export_members(globals(), PoolPadding, Conv2dAct)

POOL_MAX_ZERO_STRIDE_KERNEL = 1024
POOL_MAX_KERNEL = 64
POOL_MAX_STRIDE = 30
POOL_MAX_INPUT_HW = 1024
CONV_MAX_ZERO_STRIDE_KERNEL = 448
CONV_MAX_KERNEL = 64
CONV_MAX_STRIDE = 13
IM2COL_BLOCK_ELEMENTS = 1 << 22
"""Largest im2col block (elements) conv2d materialises at once."""


def ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def out_size(n: int, k: int, s: int, padding: int) -> int:
    """Output length along one axis for strides > 0 (the reference's formulas)."""
    return ceil_div(n, s) if padding == PoolPadding.SAME_PADDING else ceil_div(n - k + 1, s)


def pads(n: int, k: int, s: int, padding: int) -> tuple[int, int]:
    """(before, after) padding along one axis: TensorFlow's SAME split, none for VALID."""
    if padding != PoolPadding.SAME_PADDING:
        return 0, 0
    total = max((out_size(n, k, s, padding) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _expected_out_hw(ih: int, iw: int, kh: int, kw: int, sh: int, sw: int, padding: int):
    """The output (H, W) the shape rules require, None for an unknown padding type (zDNN skips the check)."""
    if sh == 0 and sw == 0:
        return 1, 1
    if padding not in (PoolPadding.VALID_PADDING, PoolPadding.SAME_PADDING):
        return None
    return out_size(ih, kh, sh, padding), out_size(iw, kw, sw, padding)


# ---- pooling -------------------------------------------------------------------------------------------------------
def _window_reduce(x: np.ndarray, axis: int, k: int, s: int, n_out: int, reducer) -> np.ndarray:
    """Reduce windows of ``k`` along ``axis`` (already padded) taken every ``s`` elements, ``n_out`` of them."""
    w = sliding_window_view(x, k, axis=axis)
    sl = [slice(None)] * w.ndim
    sl[axis] = slice(0, (n_out - 1) * s + 1, s)
    return reducer(w[tuple(sl)], axis=-1)


def pool_values(x: np.ndarray, padding: int, kh: int, kw: int, sh: int, sw: int, kind: str) -> np.ndarray:
    """Pool float64 (N, H, W, C) values; ``kind`` "avg" or "max"; valid arguments assumed."""
    if sh == 0 and sw == 0:
        f = np.mean if kind == "avg" else np.max
        return f(x, axis=(1, 2), keepdims=True)
    _, ih, iw, _ = x.shape
    oh, ow = out_size(ih, kh, sh, padding), out_size(iw, kw, sw, padding)
    (pt, pb), (pl, pr) = pads(ih, kh, sh, padding), pads(iw, kw, sw, padding)
    fill = 0.0 if kind == "avg" else -np.inf
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    red = np.sum if kind == "avg" else np.max
    y = _window_reduce(_window_reduce(xp, 2, kw, sw, ow, red), 1, kh, sh, oh, red)
    if kind == "max":
        return y
    ch = _window_reduce(np.pad(np.ones(ih), (pt, pb)), 0, kh, sh, oh, np.sum)
    cw = _window_reduce(np.pad(np.ones(iw), (pl, pr)), 0, kw, sw, ow, np.sum)
    return y / (ch[:, None] * cw[None, :])[None, :, :, None]


def _pool(where: str, fn: NNPAFunction, kind: str, input: ZTensor, padding_type: int,  # noqa: A002
          kernel_height: int, kernel_width: int, stride_height: int, stride_width: int, output: ZTensor) -> Status:
    pad, kh, kw, sh, sw = (int(v) for v in (padding_type, kernel_height, kernel_width, stride_height, stride_width))

    def verify() -> None:  # verify_pool_avg_max_tensors: N and C, output's fields against the input's, strides
        require_desc(input, output)
        require_same_n_c(input, output)
        require_fields_of(input, output)
        _, ih, iw, _ = dims(input)
        _, oh, ow, _ = dims(output)
        if sh == 0 and sw == 0:
            require(iw == kw and ih == kh and ow == 1 and oh == 1)
            if pad != PoolPadding.VALID_PADDING:
                raise OpStatus(Status.ZDNN_INVALID_STRIDE_PADDING)
        elif (sh == 0) != (sw == 0):
            raise OpStatus(Status.ZDNN_INVALID_STRIDES)
        else:
            if pad == PoolPadding.VALID_PADDING:
                require(kw <= iw and kh <= ih)
            want = _expected_out_hw(ih, iw, kh, kw, sh, sw, pad)
            require(want is None or (oh, ow) == want)
        check_feature(input)  # the emulator's guard (libzdnn compares the output with the input only)

    def hardware() -> Status:
        _, ih, iw, _ = dims(input)
        if sh > _m.get_max_for_dim(3) or sw > _m.get_max_for_dim(2) or not 0 < kh <= _m.get_max_for_dim(3) \
                or not 0 < kw <= _m.get_max_for_dim(2):
            return Status.ZDNN_EXCEEDS_MDIS
        if pad not in (PoolPadding.VALID_PADDING, PoolPadding.SAME_PADDING):
            return Status.ZDNN_FUNC_RC_F000
        if sh == 0:
            return Status.ZDNN_FUNC_RC_F001 if max(kh, kw) > POOL_MAX_ZERO_STRIDE_KERNEL else Status.ZDNN_OK
        if max(kh, kw) > POOL_MAX_KERNEL:
            return Status.ZDNN_FUNC_RC_F002
        if max(sh, sw) > POOL_MAX_STRIDE:
            return Status.ZDNN_FUNC_RC_F003
        if max(ih, iw) > POOL_MAX_INPUT_HW:
            return Status.ZDNN_FUNC_RC_F004
        return Status.ZDNN_OK

    def compute() -> Status:
        x = read_values(input).astype(np.float64)
        with np.errstate(all="ignore"):
            return store(output, pool_values(x, pad, kh, kw, sh, sw, kind))

    return run_op(where, fn, 0, verify, compute, hardware)




def avgpool2d(input: ZTensor, padding_type: int, kernel_height: int, kernel_width: int,  # noqa: A002
              stride_height: int, stride_width: int, output: ZTensor) -> Status:
    """``zdnn_avgpool2d``: the mean of each kernel window (padding excluded from the count).

    Statuses (libzdnn's ``verify_pool_avg_max_tensors`` order): INVALID_SHAPE (N or C differ), INVALID_TYPE /
    INVALID_FORMAT (the output's type and format differ from the input's), then by strides: INVALID_SHAPE (zero
    strides with a kernel other than the input plane or an output plane other than 1x1; VALID with the kernel
    larger than the input; an output H/W other than the formulas), INVALID_STRIDE_PADDING (zero strides with
    SAME_PADDING), INVALID_STRIDES (one stride 0); an input that is not DLFLOAT16 4DFEATURE (libzdnn leaves it to
    the NNPA: the emulator's INVALID_TYPE / INVALID_FORMAT); then the hardware's EXCEEDS_MDIS (a stride above
    get_max_for_dim, a kernel dim 0 or above it), FUNC_RC_F000 (unknown padding), F001 (zero strides, kernel >
    1024), F002 (kernel > 64), F003 (stride > 30), F004 (input H or W > 1024).
    """
    return _pool("avgpool2d", F.NNPA_AVGPOOL2D, "avg", input, padding_type, kernel_height, kernel_width,
                 stride_height, stride_width, output)


def maxpool2d(input: ZTensor, padding_type: int, kernel_height: int, kernel_width: int,  # noqa: A002
              stride_height: int, stride_width: int, output: ZTensor) -> Status:
    """``zdnn_maxpool2d``: the maximum of each kernel window; shapes and statuses as :func:`avgpool2d`."""
    return _pool("maxpool2d", F.NNPA_MAXPOOL2D, "max", input, padding_type, kernel_height, kernel_width,
                 stride_height, stride_width, output)


# ---- conv2d --------------------------------------------------------------------------------------------------------
def conv2d_values(x: np.ndarray, k: np.ndarray, bias: np.ndarray, padding: int, sh: int, sw: int) -> np.ndarray:
    """NHWC x (N, H, W, C) * HWCK kernel (KH, KW, C, K) + bias (K) -> float64 (N, OH, OW, K); the GEMM runs in
    float32 (module docstring). Zero strides mean the kernel covers the whole plane (one output pixel)."""
    x, k = np.asarray(x, np.float32), np.asarray(k, np.float32)
    n, ih, iw, c = x.shape
    kh, kw, _, kout = k.shape
    if sh == 0 and sw == 0:
        sh = sw = 1
        padding = PoolPadding.VALID_PADDING
    oh, ow = out_size(ih, kh, sh, padding), out_size(iw, kw, sw, padding)
    (pt, pb), (pl, pr) = pads(ih, kh, sh, padding), pads(iw, kw, sw, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0))) if pt + pb + pl + pr else x
    win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
    win = win.transpose(0, 1, 2, 4, 5, 3)  # (N, OH, OW, KH, KW, C): the HWCK order of the kernel rows
    kmat = k.reshape(kh * kw * c, kout)
    out = np.empty((n, oh, ow, kout), np.float64)
    rows = max(1, IM2COL_BLOCK_ELEMENTS // max(1, ow * kh * kw * c))  # output rows per block
    flat_n = win.reshape(n * oh, ow, kh, kw, c) if n * oh else win
    out_rows = out.reshape(n * oh, ow, kout)
    for r0 in range(0, n * oh, rows):
        blk = np.ascontiguousarray(flat_n[r0 : r0 + rows]).reshape(-1, kh * kw * c)
        out_rows[r0 : r0 + rows] = (blk @ kmat).reshape(-1, ow, kout)
    out += np.asarray(bias, np.float64)
    return out


def conv2d(input: ZTensor, kernel: ZTensor, bias: ZTensor, padding_type: int,  # noqa: A002 - zDNN's name
           stride_height: int, stride_width: int, act_func: int, clipping_value: float | None,
           output: ZTensor) -> Status:
    """``zdnn_conv2d``: input (N, H, W, C) NHWC, kernel (KH, KW, C, K) HWCK, bias (K) 1D, output (N, OH, OW, K);
    output = act(conv(input, kernel) + bias), act CONV2D_ACT_NONE or CONV2D_ACT_RELU (then min(., clipping_value)
    unless clipping_value is None or 0).

    Statuses (zDNN's order): INVALID_SHAPE (bias not (1, 1, 1, K); N, K, C mismatches; zero strides with a kernel
    other than the input plane or an output plane other than 1x1; VALID with a kernel larger than the input; an
    output H/W other than the formulas), INVALID_STRIDE_PADDING (zero strides with SAME), INVALID_STRIDES (one
    stride 0), INVALID_TYPE / INVALID_FORMAT (bias, then output, unlike the input's type or format; the kernel's
    type unlike the input's), INVALID_CLIPPING_VALUE (RELU with a negative or NINF clipping value) — libzdnn's
    ``verify_conv2d_tensors`` order; then the emulator's guards for what libzdnn leaves to the NNPA (an input not
    DLFLOAT16 4DFEATURE, a kernel not 4DKERNEL: INVALID_TYPE / INVALID_FORMAT); then FUNC_RC_F000 (unknown
    padding), F001 (unknown act_func), F002 (zero strides, kernel > 448), F003 (kernel > 64), F004 (a stride >
    13).
    """
    pad, sh, sw, act = (int(v) for v in (padding_type, stride_height, stride_width, act_func))
    clip = param_code(clipping_value)

    def verify() -> None:
        require_desc(input, kernel, bias, output)
        n, ih, iw, c = dims(input)
        kh, kw, kc, kk = dims(kernel)
        on, oh, ow, ok = dims(output)
        require(dims(bias)[:3] == (1, 1, 1))
        require(on == n)
        require(kk == ok and dims(bias)[3] == ok)
        require(c == kc)
        if sh == 0 and sw == 0:
            require(iw == kw and ih == kh and ow == 1 and oh == 1)
            if pad != PoolPadding.VALID_PADDING:
                raise OpStatus(Status.ZDNN_INVALID_STRIDE_PADDING)
        elif sh and sw:
            if pad == PoolPadding.VALID_PADDING:
                require(iw >= kw and ih >= kh)
            want = _expected_out_hw(ih, iw, kh, kw, sh, sw, pad)
            require(want is None or (oh, ow) == want)
        else:
            raise OpStatus(Status.ZDNN_INVALID_STRIDES)
        require_fields_of(input, bias, output)  # bias and output: the input's type and format
        if int(kernel.transformed_desc.type) != int(input.transformed_desc.type):  # the kernel: its type only
            raise OpStatus(Status.ZDNN_INVALID_TYPE)
        if act == Conv2dAct.CONV2D_ACT_RELU:
            st = clipping_code_status(clip)
            if st != Status.ZDNN_OK:
                raise OpStatus(st)
        check_feature(input)  # the emulator's guards: what libzdnn leaves to the NNPA
        check_kernel(kernel)

    def hardware() -> Status:
        kh, kw = dims(kernel)[:2]
        if pad not in (PoolPadding.VALID_PADDING, PoolPadding.SAME_PADDING):
            return Status.ZDNN_FUNC_RC_F000
        if act not in (Conv2dAct.CONV2D_ACT_NONE, Conv2dAct.CONV2D_ACT_RELU):
            return Status.ZDNN_FUNC_RC_F001
        if sh == 0 and max(kh, kw) > CONV_MAX_ZERO_STRIDE_KERNEL:
            return Status.ZDNN_FUNC_RC_F002
        if sh > 0 and max(kh, kw) > CONV_MAX_KERNEL:
            return Status.ZDNN_FUNC_RC_F003
        if max(sh, sw) > CONV_MAX_STRIDE:
            return Status.ZDNN_FUNC_RC_F004
        return Status.ZDNN_OK

    def compute() -> Status:
        x, k = read_values(input), read_values(kernel)
        b = read_values(bias).astype(np.float64).reshape(-1)
        with np.errstate(all="ignore"):
            y = conv2d_values(x, k, b, pad, sh, sw)
            if act == Conv2dAct.CONV2D_ACT_RELU:
                y = apply_relu(y, clip)
            return store(output, y)

    return run_op("conv2d", F.NNPA_CONVOLUTION, 0, verify, compute, hardware)


__all__ = ["avgpool2d", "maxpool2d", "conv2d", "PoolPadding", "Conv2dAct", *ENUM_CONSTANTS]
