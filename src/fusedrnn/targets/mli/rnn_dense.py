"""``mli_krn_rnn_dense_*`` (MLI 2.0, spec mli.md §2.6 / §3.2): y = b + Σ_i x_i·W_i with up to 4 (input, weights)
pairs; each pair is requantized to the output separately and the partial results are summed with saturation."""

from __future__ import annotations

from . import _arith as A
from . import dense as D
from .checks import (
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
from .config import MLI_RNN_MAX_INPUT, RnnDenseCfg, current_build
from .fully_connected import TYPES, WMAX
from .status import Status, mli_kernel, require


def _check(flavor, inputs, weights, bias, cfg, out, mode) -> int:
    """``mli_chk_rnn_dense`` then ``mli_chk_rnn_dense_<flavor>``: cfg (BAD_FUNC_CFG); per input valid tensors,
    weights [in elements, M] of rank 2 (SHAPE_MISMATCH), contiguous input and weights' innermost stride 1
    (INCOMPATEBLE_TENSORS), input and out buffers apart (INCOMPATEBLE_TENSORS); bias rank 1 [M]; out a valid tensor
    of rank 1 and length M (SHAPE_MISMATCH) of the inputs' element type (TYPE_MISMATCH), contiguous; then element
    types of every input, weights and bias (TYPE_MISMATCH), out frac bits (fx) or quantization (sa8)."""
    S = Status
    require(isinstance(cfg, RnnDenseCfg), S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg: expected an RnnDenseCfg, got {type(cfg).__name__}")
    n = cfg.inputs_num
    require(isinstance(n, int) and 1 <= n <= MLI_RNN_MAX_INPUT, S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg.inputs_num: expected 1..{MLI_RNN_MAX_INPUT}, got {n!r}")
    require(isinstance(inputs, (list, tuple)) and isinstance(weights, (list, tuple)) and len(inputs) >= n
            and len(weights) >= n, S.MLI_STATUS_ARGUMENT_ERROR,
            f"inputs/weights: expected sequences of at least {n} tensors")
    check_out(out)
    for i in range(n):
        check_tensor(inputs[i], f"inputs[{i}]")
        check_tensor(weights[i], f"weights[{i}]")
        w = weights[i]
        require(w.rank == 2 and w.shape[0] == inputs[i].count() and w.shape[1] == weights[0].shape[1],
                S.MLI_STATUS_SHAPE_MISMATCH,
                f"weights[{i}]: expected shape [{inputs[i].count()}, {weights[0].shape[1]}], got {w.dims}")
        require(contiguous(inputs[i]) and inner_stride_one(w), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"inputs[{i}] must be contiguous and weights[{i}]'s innermost mem_stride 1")
        check_not_overlapped(inputs[i], out, f"inputs[{i}]/out")
    check_tensor(bias, "bias")
    M = bias.shape[0] if bias.rank >= 1 else 0
    require(bias.rank == 1 and weights[0].shape[1] == M, S.MLI_STATUS_SHAPE_MISMATCH,
            f"bias: expected rank 1 [{weights[0].shape[1]}], got {bias.dims}")
    if debug_checks():
        check_tensor(out, "out", writes=True)
    check(out.rank == 1 and out.shape[0] == M, S.MLI_STATUS_SHAPE_MISMATCH,
          f"out: expected shape [{M}], got {out.dims}")
    check(out.el_type == inputs[0].el_type, S.MLI_STATUS_TYPE_MISMATCH,
          f"out: element type {out.el_type.name} differs from inputs[0]'s {inputs[0].el_type.name}")
    require(inner_stride_one(bias), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "bias: innermost mem_stride must be 1")
    check(contiguous(out), S.MLI_STATUS_INCOMPATEBLE_TENSORS, f"out: layout must be contiguous, got {out.mstrides}")
    require(M * inputs[0].element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} bytes < {M * inputs[0].element_size} needed")
    ti, tw, tb = TYPES[flavor]
    check_types([(inputs[i], ti, f"inputs[{i}]") for i in range(n)] + [(weights[i], tw, f"weights[{i}]")
                for i in range(n)] + [(bias, tb, "bias"), (out, ti, "out")])
    if flavor == "sa8":
        for i in range(n):
            check_zero_points(inputs[i], f"inputs[{i}]", zero=False)
            check_zero_points(weights[i], f"weights[{i}]", zero=True)
            require(inputs[i].dim < 0 and weights[i].dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                    f"inputs[{i}]/weights[{i}]: per-tensor quantization expected")
        check_zero_points(out, "out", zero=False)
        check_zero_points(bias, "bias", zero=True)
        require(out.dim < 0 and bias.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                "out/bias: per-tensor quantization expected")
    else:
        for i in range(n):
            check_out_frac(inputs[i], weights[i], out)
    check_bias(flavor, inputs[0], weights[0], bias, mode)
    return n


def _run(flavor, inputs, weights, bias, cfg, out) -> None:
    bld = current_build()
    n = _check(flavor, inputs, weights, bias, cfg, out, bld.mode)
    xs = [inputs[i].values().reshape(-1) for i in range(n)]
    mats = [A.int_matrix(weights[i].values(), WMAX[inputs[i].el_type]) for i in range(n)]
    if flavor == "sa8":
        po = out.params(0)
        pairs = [D.sa8_pair(inputs[i].params(0), int(weights[i].scale[0]), int(weights[i].scale_frac_bits[0]), po,
                            bld.full_accu, bld.mode) for i in range(n)]
        zp = po[1]
    else:
        pairs = [D.fx_pair(flavor, inputs[i].frac_bits, weights[i].frac_bits, out.frac_bits, bias.frac_bits)
                 for i in range(n)]
        zp = 0
    y = D.rnn_dense(xs, mats, pairs, bias.values(), flavor, bld.full_accu, bld.mode, zp)
    out.write(y, [bias.shape[0]])


krn_rnn_dense_fx16 = mli_kernel(_run, "fx16", name="krn_rnn_dense_fx16",
                                doc="fx16 everything, 64-bit accumulator; returns an mli status.")
krn_rnn_dense_fx16_fx8_fx8 = mli_kernel(_run, "fx16_fx8_fx8", name="krn_rnn_dense_fx16_fx8_fx8",
                                        doc="fx16 inputs/out, fx8 weights and bias, int32 accumulator.")
krn_rnn_dense_sa8_sa8_sa32 = mli_kernel(_run, "sa8", name="krn_rnn_dense_sa8_sa8_sa32",
                                        doc="sa8 inputs/weights/out, sa32 bias; per-tensor quantization only.")
