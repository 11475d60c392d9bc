"""``quantized_matmul_op`` (Telum II): zDNN's CPU + zAIU decomposition (zdnn.md section 4.2).

Notation: Sa, Sb, Sc, Sy are the ztensors' ``rec_scale`` (1/scale) and Za ... Zy their ``offset``; N is the inner
dimension. The exact integer sum Σ a_q·b_q comes from :func:`fusedrnn.numerics.int_matmul.int_matmul`; the zAIU
sees rec_scales and the folded bias q̃c as DLFLOAT16; CPU corrections and clipping run in float32.

ADDITION:  M = Sy/(Sa·Sb), scale = Sy/Sc
    Zb != 0: q̃c = c_q·scale + Zy − scale·Zc + M·N·Za·Zb (on-the-fly: without M·N·Za·Zb);
             y = [M·Σ a_q·b_q + q̃c] − (M·Zb·Σ_k a_q + M·Za·Σ_k b_q)   (on-the-fly: M·Zb·Sa·Σ_k a instead)
    Zb == 0: q̃c = c_q·scale + Zy − scale·Zc − M·Za·Σ_k b_q; y = [M·Σ a_q·b_q + q̃c]
    then, unless disable_clipping, y = clip(round_half_even(y), clip_min, clip_max); with dequantize,
    y = (y − Zy)/Sy.
compare:   q̃c = (Sa·Sb/Sc)·(c_q − Zc) + Za·Σ_k b_q; out = 1.0 where Σ a_q·b_q <op> q̃c, the op mirrored
    (GREATER <-> LESSER, GREATER_EQUAL <-> LESSER_EQUAL) when Sa·Sb/Sc < 0.
pre_computed: c holds q̃c as DLFLOAT16 values (requires Zb == 0).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...numerics.float_formats import round_to_dlfloat16
from ...numerics.int_matmul import int_matmul
from . import machine as _m
from .constants import DataFormat, DataType, MatmulOp
from .desc import _enum
from .matmul import COMPARE, check_matmul_shapes
from .status import Status
from .transform import dlf16_value, quantize_to_int8, read_cells, read_values, write_values
from .verify import OpStatus, op_result, require, require_ztensors
from .ztensor import ZTensor

_F32 = np.float32
FLIP = {MatmulOp.MATMUL_OP_GREATER: MatmulOp.MATMUL_OP_LESSER,
        MatmulOp.MATMUL_OP_LESSER: MatmulOp.MATMUL_OP_GREATER,
        MatmulOp.MATMUL_OP_GREATER_EQUAL: MatmulOp.MATMUL_OP_LESSER_EQUAL,
        MatmulOp.MATMUL_OP_LESSER_EQUAL: MatmulOp.MATMUL_OP_GREATER_EQUAL}


def _tensor(zt: ZTensor, fmt: DataFormat, types, output=False) -> None:
    """Format and type (libzdnn checks neither the state nor the buffer here: the buffers are met where they are
    read or written, :func:`.ztensor.access`)."""
    tf = zt.transformed_desc
    if tf is None or _enum(DataFormat, tf.format) != fmt:
        raise OpStatus(Status.ZDNN_INVALID_FORMAT)
    if _enum(DataType, tf.type) not in types:
        raise OpStatus(Status.ZDNN_INVALID_TYPE)


def _bad_scale(v: float) -> bool:
    d = dlf16_value(v)
    return d == 0 or np.isnan(d)


def quantized_matmul_op(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, op_type: int, clip_min: int,
                        clip_max: int, disable_clipping: bool, dequantize: bool, pre_computed: bool, work_area,
                        output: ZTensor) -> Status:
    """``zdnn_quantized_matmul_op``: a QUANTIZED_INT8 (or QUANTIZED_DLFLOAT16: on-the-fly quantization), b
    QUANTIZED_WEIGHTS_INT8, c QUANTIZED_INT8 (DLFLOAT16 q̃c when ``pre_computed``), output QUANTIZED_DLFLOAT16.
    ``work_area``: None or a 4 KiB-aligned array of at least ``input_c.buffer_size`` bytes (misaligned:
    MISALIGNED_TENSOR, the hardware's answer for the q̃c tensor placed there; too small: ShapeError)."""
    where = "quantized_matmul_op"
    a, b, c, out = input_a, input_b, input_c, output
    require_ztensors(input_a=a, input_b=b, input_c=c, output=out)
    if pre_computed and b.offset != 0:  # libzdnn's first check
        return op_result(Status.ZDNN_INVALID_OFFSET, where)
    if not _m.parmblk_fmts_installed(1):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    try:
        op = MatmulOp(int(op_type))
    except ValueError:
        return op_result(Status.ZDNN_FUNC_RC_F000, where)
    try:
        _tensor(a, DataFormat.ZDNN_FORMAT_4DFEATURE, (DataType.ZDNN_BINARY_INT8, DataType.ZDNN_DLFLOAT16))
        _tensor(b, DataFormat.ZDNN_FORMAT_4DWEIGHTS, (DataType.ZDNN_BINARY_INT8,))
        _tensor(c, DataFormat.ZDNN_FORMAT_4DFEATURE,
                (DataType.ZDNN_DLFLOAT16,) if pre_computed else (DataType.ZDNN_BINARY_INT8,))
        _tensor(out, DataFormat.ZDNN_FORMAT_4DFEATURE, (DataType.ZDNN_DLFLOAT16,), output=True)
        check_matmul_shapes(a, b, c, out)
        require(int(clip_min) < int(clip_max), Status.ZDNN_INVALID_CLIPPING_VALUE)
        on_the_fly = a.transformed_desc.type == DataType.ZDNN_DLFLOAT16
        if on_the_fly:
            require(not _bad_scale(a.rec_scale), Status.ZDNN_INVALID_SCALE)
            require(not np.isnan(dlf16_value(a.offset)), Status.ZDNN_INVALID_OFFSET)
        if pre_computed:
            require(b.offset == 0, Status.ZDNN_INVALID_OFFSET)
        scales = (b.rec_scale, out.rec_scale) if on_the_fly else (a.rec_scale, b.rec_scale, out.rec_scale)
        require(not any(_bad_scale(s) for s in scales), Status.ZDNN_FUNC_RC_F002)
        if work_area is not None:
            require(np.asarray(work_area).ctypes.data % 4096 == 0, Status.ZDNN_MISALIGNED_TENSOR)
    except OpStatus as e:
        return op_result(e.status, where, hw_f001=True)
    if work_area is not None and np.asarray(work_area).nbytes < int(c.buffer_size):
        raise ShapeError(f"work_area: expected at least input_c.buffer_size = {int(c.buffer_size)} bytes, got "
                         f"{np.asarray(work_area).nbytes}")

    try:
        return _compute(a, b, c, op, out, clip_min, clip_max, disable_clipping, dequantize, pre_computed,
                        on_the_fly, where)
    except OpStatus as e:  # a buffer the NNPA or the CPU part cannot access
        return op_result(e.status, where)


def _compute(a, b, c, op, out, clip_min, clip_max, disable_clipping, dequantize, pre_computed, on_the_fly,
             where) -> Status:
    Sa, Za, Sb, Zb = _F32(a.rec_scale), _F32(a.offset), _F32(b.rec_scale), _F32(b.offset)
    Sc, Zc, Sy, Zy = _F32(c.rec_scale), _F32(c.offset), _F32(out.rec_scale), _F32(out.offset)
    bq = read_cells(b)[:, 0]  # (sb, n, p) int8
    N = bq.shape[1]
    if on_the_fly:
        a_fp = read_values(a)[:, 0]  # (sa, m, n)
        aq = quantize_to_int8(a_fp, a.rec_scale, a.offset, int(clip_min), int(clip_max))
    else:
        aq = read_cells(a)[:, 0]
    acc = int_matmul(aq, bq, a_absmax=128, b_absmax=128).astype(np.float64)  # exact Σ a_q·b_q
    sum_b = bq.astype(np.int64).sum(axis=1, keepdims=True).astype(_F32)  # (sb, 1, p)
    c_val = read_values(c)[:, 0] if pre_computed else read_cells(c)[:, 0].astype(_F32)  # (sc, 1, p)

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if op == MatmulOp.MATMUL_OP_ADDITION:
            M = Sy / (Sa * Sb)
            if pre_computed:
                qc = c_val
            else:
                scale = Sy / Sc
                if Zb != 0:
                    base = Zy - scale * Zc + (_F32(0) if on_the_fly else M * _F32(N) * Za * Zb)
                    qc = c_val * scale + base
                else:
                    qc = c_val * scale + Zy - scale * Zc - M * Za * sum_b
            qc = _dlf16(qc)
            M_hw = _F32(dlf16_value(Sy)) / (_F32(dlf16_value(Sa)) * _F32(dlf16_value(Sb)))
            y = _dlf16((M_hw * acc + qc).astype(_F32))
            if Zb != 0 and not pre_computed:
                if on_the_fly:
                    term_a = M * Zb * Sa * a_fp.sum(axis=-1, keepdims=True, dtype=_F32)
                else:
                    term_a = M * Zb * aq.astype(np.int64).sum(axis=-1, keepdims=True).astype(_F32)
                y = (y - (term_a + M * Za * sum_b)).astype(_F32)
            if not disable_clipping:
                y = np.clip(np.rint(y), _F32(int(clip_min)), _F32(int(clip_max))).astype(_F32)
            if dequantize:
                y = ((y - Zy) * (_F32(1) / Sy)).astype(_F32)
        else:
            ratio = Sa * Sb / Sc
            qc = c_val if pre_computed else ratio * (c_val - Zc) + Za * sum_b
            qc = _dlf16(qc)
            cmp = FLIP.get(op, op) if ratio < 0 else op
            y = COMPARE[cmp](acc, qc.astype(np.float64)).astype(_F32)
    flags = write_values(out, y[:, None])
    out.is_transformed = True
    return op_result(Status.ZDNN_ELEMENT_RANGE_VIOLATION if (flags.overflow or flags.invalid) else Status.ZDNN_OK,
                     where)


def _dlf16(x) -> np.ndarray:
    return round_to_dlfloat16(np.array(x, dtype=_F32, copy=True))
