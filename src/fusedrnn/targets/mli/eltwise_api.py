"""Element-wise and activation kernels of MLI 2.0 as public functions: ``krn_eltwise_{add,sub,mul}_{fx16,sa8}``
(the output keeps the quantization the caller set; a one-element operand is broadcast) and
``krn_{tanh,sigm}_{fx16,sa8}`` (fx16 output frac 15; sa8 output parameters fixed by MLI and written into
``out``)."""

from __future__ import annotations

import numpy as np

from . import eltwise as E
from .checks import (
    check,
    check_lut,
    check_out,
    check_scalar_tensor,
    check_tensor,
    check_types,
    check_zero_points,
    debug_checks,
    inner_stride_one,
    is_scalar,
)
from .config import ElType, current_build
from .luts import SA8_OUT, act_fx16, act_sa8
from .status import Status, mli_kernel, require

S = Status


def _check_elt(in1, in2, out, et):
    """``mli_chk_eltwise`` then ``mli_chk_eltwise_<type>``: each input a scalar (rank 0, the value in its
    container, capacity ignored; or one element: ``mli_chk_scalar_tensor``) or a valid tensor; out a valid tensor;
    one input of rank > 0 (NOT_SUPPORTED); innermost strides 1 and out of in1's element type
    (INCOMPATEBLE_TENSORS); non-scalar inputs of one shape and out of the non-scalar input's shape
    (SHAPE_MISMATCH); then element types (TYPE_MISMATCH) and for sa8 zero points and per-tensor quantization
    (INCOMPATEBLE_TENSORS). Without the checks out takes the non-scalar input's shape."""
    check_out(out)
    for t, name in ((in1, "in1"), (in2, "in2")):
        if is_scalar(t):
            check_scalar_tensor(t, name)
        else:
            check_tensor(t, name)
    if debug_checks():
        check_tensor(out, "out", writes=True)
    s1, s2 = is_scalar(in1), is_scalar(in2)
    require(in1.rank > 0 or in2.rank > 0, S.MLI_STATUS_NOT_SUPPORTED, "in1/in2: one operand must have rank > 0")
    require((s1 or inner_stride_one(in1)) and (s2 or inner_stride_one(in2)), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "in1/in2: innermost mem_stride must be 1")
    check(inner_stride_one(out), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "out: innermost mem_stride must be 1")
    require(out.el_type == in1.el_type, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            f"out: element type {out.el_type.name} differs from in1's {in1.el_type.name}")
    if not s1 and not s2:
        require(in1.dims == in2.dims, S.MLI_STATUS_SHAPE_MISMATCH,
                f"in1/in2: shapes {in1.dims} and {in2.dims} differ (and neither is a scalar)")
    big = in2 if s1 else in1
    check(out.dims == big.dims, S.MLI_STATUS_SHAPE_MISMATCH,
          f"out: shape {out.dims} differs from the non-scalar input's {big.dims}")
    require(big.count() * in1.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} bytes < {big.count() * in1.element_size} needed")
    check_types([(in1, et, "in1"), (in2, et, "in2")])
    if et == ElType.MLI_EL_SA_8:
        for t, name in ((in1, "in1"), (in2, "in2"), (out, "out")):
            check_zero_points(t, name, zero=False)
    require(in1.dim < 0 and in2.dim < 0 and out.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "in1/in2/out: per-tensor quantization expected")
    return big.dims


def _elt(op, et, in1, in2, out):
    mode = current_build().mode
    shape = _check_elt(in1, in2, out, et)
    a, b = in1.values().reshape(-1), in2.values().reshape(-1)
    if et == ElType.MLI_EL_FX_16:
        if op == "mul":
            y = E.fx16_mul(a, in1.frac_bits, b, in2.frac_bits, out.frac_bits, mode)
        else:
            y = E.fx16_addsub(a, in1.frac_bits, b, in2.frac_bits, out.frac_bits, mode, op == "sub")
    else:
        if op == "mul":
            y = E.sa8_mul(a, in1.params(0), b, in2.params(0), out.params(0), mode)
        else:
            y = E.sa8_addsub(a, in1.params(0), b, in2.params(0), out.params(0), mode, op == "sub")
    out.write(np.broadcast_to(y, (int(np.prod(shape)),)), shape)


def _act(kind, et, in_, lut, out):
    """``mli_chk_basic_activation``: valid in and out tensors, out of in's element type (TYPE_MISMATCH) and shape
    (SHAPE_MISMATCH), innermost strides 1 (INCOMPATEBLE_TENSORS); a filled LUT (ARGUMENT_ERROR / NOT_ENGH_MEM).
    Without the checks out takes in's shape and element type."""
    mode = current_build().mode
    check_out(out)
    check_tensor(in_, "in")
    check_lut(lut, kind, 0)
    if debug_checks():
        check_tensor(out, "out", writes=True)
    check(out.el_type == in_.el_type, S.MLI_STATUS_TYPE_MISMATCH,
          f"out: element type {out.el_type.name} differs from in's {in_.el_type.name}")
    check(out.dims == in_.dims, S.MLI_STATUS_SHAPE_MISMATCH, f"out: shape {out.dims} differs from in's {in_.dims}")
    check(inner_stride_one(in_) and inner_stride_one(out), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
          "in/out: innermost mem_stride must be 1")
    require(in_.count() * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} bytes < {in_.count() * in_.element_size} needed")
    check_types([(in_, et, "in")])
    v = in_.values()
    if et == ElType.MLI_EL_FX_16:
        y = act_fx16(v, in_.frac_bits, lut, mode)
        out.frac_bits = 15
    else:
        require(in_.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: per-tensor quantization expected")
        y = act_sa8(v, in_.params(0), lut, mode, kind)
        s, z, f = SA8_OUT[kind]
        out.dim = -1
        out.scale, out.zero_point, out.scale_frac_bits = s, z, f
    out.el_type = in_.el_type
    out.write(y, in_.dims)


FX16, SA8 = ElType.MLI_EL_FX_16, ElType.MLI_EL_SA_8
krn_eltwise_add_fx16 = mli_kernel(_elt, "add", FX16, name="krn_eltwise_add_fx16")
krn_eltwise_sub_fx16 = mli_kernel(_elt, "sub", FX16, name="krn_eltwise_sub_fx16")
krn_eltwise_mul_fx16 = mli_kernel(_elt, "mul", FX16, name="krn_eltwise_mul_fx16")
krn_eltwise_add_sa8 = mli_kernel(_elt, "add", SA8, name="krn_eltwise_add_sa8")
krn_eltwise_sub_sa8 = mli_kernel(_elt, "sub", SA8, name="krn_eltwise_sub_sa8")
krn_eltwise_mul_sa8 = mli_kernel(_elt, "mul", SA8, name="krn_eltwise_mul_sa8")
krn_tanh_fx16 = mli_kernel(_act, "tanh", FX16, name="krn_tanh_fx16")
krn_sigm_fx16 = mli_kernel(_act, "sigm", FX16, name="krn_sigm_fx16")
krn_tanh_sa8 = mli_kernel(_act, "tanh", SA8, name="krn_tanh_sa8")
krn_sigm_sa8 = mli_kernel(_act, "sigm", SA8, name="krn_sigm_sa8")
