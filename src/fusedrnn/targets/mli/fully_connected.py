"""``mli_krn_fully_connected_*`` (MLI 2.0, spec mli.md §3.1): y[o] = Σ_j x_j·W[j, o] + b[o], weights [N, M],
bias added last, ReLU clamp after the result cast."""

from __future__ import annotations

import numpy as np

from . import _arith as A
from . import dense as D
from .checks import (
    _check_container,
    check,
    check_bias,
    check_not_overlapped,
    check_out,
    check_out_frac,
    check_tensor,
    check_types,
    check_zero_points,
    contiguous,
    debug_checks,
    inner_stride_one,
)
from .config import ElType, FullyConnectedCfg, ReluType, current_build
from .status import Status, mli_kernel, require
from .tensors import Tensor

FX8, FX16, SA8, SA32 = ElType.MLI_EL_FX_8, ElType.MLI_EL_FX_16, ElType.MLI_EL_SA_8, ElType.MLI_EL_SA_32
TYPES = {"fx16": (FX16, FX16, FX16), "fx16_fx8_fx8": (FX16, FX8, FX8), "fx8": (FX8, FX8, FX8),
         "sa8": (SA8, SA8, SA32)}
WMAX = {FX8: 128, FX16: 32768, SA8: 128}


def _check_common(in_, weights, bias, cfg, out) -> None:
    """``mli_chk_fully_connected``: valid tensors; out of in's element type (TYPE_MISMATCH); a cfg
    (BAD_FUNC_CFG); weights rank 2 [N, M], bias rank 1 [M], out rank 1 [M], N = in's elements (SHAPE_MISMATCH); in
    and bias contiguous, weights' innermost stride 1, out contiguous (INCOMPATEBLE_TENSORS); in and out buffers
    apart (INCOMPATEBLE_TENSORS). Without the checks out is given the shape [M] and a None cfg means no ReLU."""
    S = Status
    for t, name in ((in_, "in"), (weights, "weights"), (bias, "bias")):
        check_tensor(t, name)
    check_out(out)
    if debug_checks():
        check_tensor(out, "out", writes=True)
    check(out.el_type == in_.el_type, S.MLI_STATUS_TYPE_MISMATCH,
          f"out: element type {out.el_type.name} differs from in's {in_.el_type.name}")
    check(cfg is not None, S.MLI_STATUS_BAD_FUNC_CFG, "cfg: expected a FullyConnectedCfg, got None")
    require(cfg is None or isinstance(cfg, FullyConnectedCfg), S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg: expected a FullyConnectedCfg, got {type(cfg).__name__}")
    require(cfg is None or int(cfg.relu.type) in tuple(ReluType), S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg.relu.type: expected a ReluType, got {cfg.relu.type if cfg else None!r}")
    require(weights.rank == 2, S.MLI_STATUS_SHAPE_MISMATCH, f"weights: expected rank 2 [N, M], got {weights.rank}")
    require(bias.rank == 1, S.MLI_STATUS_SHAPE_MISMATCH, f"bias: expected rank 1 [M], got {bias.rank}")
    check(out.rank == 1, S.MLI_STATUS_SHAPE_MISMATCH, f"out: expected rank 1 [M], got {out.rank}")
    require(in_.count() == weights.shape[0], S.MLI_STATUS_SHAPE_MISMATCH,
            f"weights: shape[0] {weights.shape[0]} must equal the {in_.count()} input elements")
    require(bias.shape[0] == weights.shape[1], S.MLI_STATUS_SHAPE_MISMATCH,
            f"bias: length {bias.shape[0]} must equal weights.shape[1] {weights.shape[1]}")
    check(out.shape[0] == weights.shape[1], S.MLI_STATUS_SHAPE_MISMATCH,
          f"out: length {out.shape[0]} must equal weights.shape[1] {weights.shape[1]}")
    require(contiguous(in_) and inner_stride_one(weights) and contiguous(bias), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "in and bias must be contiguous and weights' innermost mem_stride 1")
    check(out.rank != 1 or out.mem_stride[0] == 1, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
          f"out: layout must be contiguous (mem_stride[0] 1), got {out.mstrides}")
    check_not_overlapped(in_, out, "in/out")
    require(weights.shape[1] * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} bytes < {weights.shape[1] * in_.element_size} needed")


def _check(flavor: str, in_: Tensor, weights: Tensor, bias: Tensor, cfg, out: Tensor, mode: str) -> None:
    """``mli_chk_fully_connected_<flavor>``: fx flavours check element types, bias and out frac bits first, then
    :func:`_check_common`; sa8 checks :func:`_check_common` first, then types, quantization parameters and the
    bias scale."""
    S = Status
    if flavor != "sa8":  # the fx checks test the element types first
        for t, name in ((in_, "in"), (weights, "weights"), (bias, "bias")):
            _check_container(t, name, False)
        check_types(zip((in_, weights, bias), TYPES[flavor], ("in", "weights", "bias"), strict=True))
        check_bias(flavor, in_, weights, bias, mode)
        check_out(out)
        check_out_frac(in_, weights, out)
    _check_common(in_, weights, bias, cfg, out)
    if flavor == "sa8":
        check_types(zip((in_, weights, bias), TYPES[flavor], ("in", "weights", "bias"), strict=True))
        check_zero_points(in_, "in", zero=False)
        check_zero_points(out, "out", zero=False)
        check_zero_points(weights, "weights", zero=True)
        check_zero_points(bias, "bias", zero=True)
        if weights.dim < 0:
            require(bias.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS, "bias: per-tensor quantization expected")
        else:
            require(weights.dim == 1 and bias.dim == 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                    "weights/bias: per-axis quantization must be along the output channels (dims 1 / 0)")
        require(in_.dim < 0 and out.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                "in/out: per-tensor quantization expected")
        require(out.el_type == SA8, S.MLI_STATUS_TYPE_MISMATCH, f"out: expected MLI_EL_SA_8, got {out.el_type.name}")
        check_bias(flavor, in_, weights, bias, mode)
    else:
        require(out.el_type == TYPES[flavor][0], S.MLI_STATUS_TYPE_MISMATCH,
                f"out: expected {TYPES[flavor][0].name}, got {out.el_type.name}")


def _fc(flavor: str, ext_bias: bool, in_, weights, bias, cfg, out) -> None:
    bld = current_build()
    mode = bld.mode
    _check(flavor, in_, weights, bias, cfg, out, mode)
    x = in_.values().reshape(-1)
    W = weights.values()
    b = bias.values()
    relu = int(cfg.relu.type) if cfg is not None else 0
    if flavor == "sa8":
        pin = in_.params(0)
        pout = out.params(0)
        pair = D.sa8_pair(pin, weights.scale.astype(np.int64), weights.scale_frac_bits.astype(np.int64), pout,
                          bld.full_accu, mode)
        if ext_bias:
            pair.zp_in = 0
        lo, hi = D.relu_limits(relu, 8, pout[1], pout[0], pout[2])
        zp_out = pout[1]
    else:
        pair = D.fx_pair(flavor, in_.frac_bits, weights.frac_bits, out.frac_bits, bias.frac_bits)
        lo, hi = D.relu_limits(relu, D.IO_BITS[flavor], 0, 1, out.frac_bits)
        zp_out = 0
    mat = A.int_matrix(W, WMAX[in_.el_type])
    acc = A.wrap(D.dot(x, mat, pair), D.ACC_WIDTH[flavor])
    acc = D.fc_bias_add(acc, b, pair, flavor, bld.full_accu, mode)
    y = np.clip(D.fc_result(acc, pair, flavor, bld.full_accu, mode, zp_out), lo, hi)
    out.el_type = in_.el_type
    out.write(y, [weights.shape[1]])


krn_fully_connected_fx16 = mli_kernel(_fc, "fx16", False, name="krn_fully_connected_fx16",
                                      doc="fx16 in/weights/bias/out, 64-bit accumulator. Returns an mli status.")
krn_fully_connected_fx16_fx8_fx8 = mli_kernel(_fc, "fx16_fx8_fx8", False, name="krn_fully_connected_fx16_fx8_fx8",
                                              doc="fx16 in/out, fx8 weights and bias, int32 accumulator.")
krn_fully_connected_fx8 = mli_kernel(_fc, "fx8", False, name="krn_fully_connected_fx8",
                                     doc="fx8 everything (deprecated in 2.0 but implemented), int32 accumulator.")
krn_fully_connected_sa8_sa8_sa32 = mli_kernel(
    _fc, "sa8", False, name="krn_fully_connected_sa8_sa8_sa32",
    doc="sa8 in/out/weights, sa32 bias; per-tensor or per-output-channel weights.")
krn_fully_connected_sa8_sa8_sa32_ext_bias = mli_kernel(
    _fc, "sa8", True, name="krn_fully_connected_sa8_sa8_sa32_ext_bias",
    doc="As ``sa8_sa8_sa32`` but the bias already holds -zp_in·Σ_j W[j, o] (the input zero point is not applied).")
