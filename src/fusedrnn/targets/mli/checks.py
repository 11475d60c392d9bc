"""Parameter checks of the MLI kernels (``lib/src/private/src/mli_check.cc``): each failed condition raises
:class:`.status.MliCheckFailed` with the status MLI returns (:func:`.status.require`), and the kernel wrapper
(:func:`.status.mli_kernel`) turns it into that return value."""

from __future__ import annotations

import numpy as np

from . import _arith as A
from .config import MLI_MAX_RANK, ElType
from .status import Status, require
from .tensors import EL_DTYPE, Tensor


def check_out(t, name: str = "out") -> None:
    """A tensor a kernel writes: an mli Tensor (ARGUMENT_ERROR for None, BAD_TENSOR otherwise) whose data container
    has its element type's dtype (BAD_TENSOR)."""
    B = Status.MLI_STATUS_BAD_TENSOR
    require(isinstance(t, Tensor), Status.MLI_STATUS_ARGUMENT_ERROR if t is None else B,
            f"{name}: expected an mli Tensor, got {type(t).__name__}")
    require(t.data is not None, B, f"{name}: data container is None")
    require(t.data.dtype == EL_DTYPE[t.el_type], B, f"{name}: container dtype {t.data.dtype} does not match "
            f"{t.el_type.name}")


def check_tensor(t, name: str) -> None:
    """``mli_chk_tensor``: a usable tensor (BAD_TENSOR otherwise): :func:`check_out`'s checks, then rank, shape,
    strides, capacity and quantization parameters."""
    B = Status.MLI_STATUS_BAD_TENSOR
    check_out(t, name)
    require(t.rank <= MLI_MAX_RANK and t.rank == len(t.shape) and len(t.mem_stride) == t.rank, B,
            f"{name}: rank {t.rank} with shape {t.shape} and mem_stride {t.mem_stride} (rank <= {MLI_MAX_RANK})")
    require(all(s > 0 for s in t.shape), B, f"{name}: every dimension must be > 0, got shape {t.shape}")
    require(all(s >= 0 for s in t.mem_stride), B, f"{name}: negative mem_stride {t.mem_stride}")
    need = t.required_elements()
    require(need * t.element_size <= t.capacity and need <= t.data.size, B,
            f"{name}: capacity {t.capacity} bytes < {need * t.element_size} bytes the shape and strides span")
    if t.is_sa:
        if t.dim >= 0:
            require(t.dim < t.rank, B, f"{name}: quantization dim {t.dim} >= rank {t.rank}")
            n = t.shape[t.dim]
            require(t.scale.size == n and t.zero_point.size == n and t.scale_frac_bits.size == n, B,
                    f"{name}: per-axis parameters need {n} entries along dim {t.dim}")
        else:
            require(t.scale.size == 1 and t.zero_point.size == 1 and t.scale_frac_bits.size == 1, B,
                    f"{name}: per-tensor parameters need exactly one scale, zero point and scale_frac_bits")


def inner_stride_one(t: Tensor) -> bool:
    return t.rank == 0 or t.mem_stride[-1] in (0, 1)


def contiguous(t: Tensor) -> bool:
    if all(s == 0 for s in t.mem_stride):
        return True
    return list(t.mem_stride) == [int(s) for s in np.cumprod([1] + t.shape[::-1][:-1])[::-1]]


def check_types(pairs, what: str = "tensor") -> None:
    """(tensor, expected ElType, name) triples -> TYPE_MISMATCH."""
    for t, et, name in pairs:
        require(t.el_type == et, Status.MLI_STATUS_TYPE_MISMATCH, f"{name}: expected {ElType(et).name}, "
                f"got {t.el_type.name}")


def check_zero_points(t: Tensor, name: str, *, zero: bool) -> None:
    """``mli_chk_tensor_quant_params``: zero points 0 (weights, bias) or within [-128, 127] (data)."""
    z = t.zero_point.astype(np.int64)
    if zero:
        require(bool(np.all(z == 0)), Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"{name}: zero point must be 0 (symmetric), got {z.tolist()}")
    else:
        require(bool(np.all((z >= -128) & (z <= 127))), Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"{name}: zero point must be in [-128, 127], got {z.tolist()}")


def check_bias_frac(inp: Tensor, w: Tensor, b: Tensor) -> None:
    """``mli_chk_bias_frac_fx``: bias frac bits <= in + weights frac bits."""
    require(b.frac_bits <= inp.frac_bits + w.frac_bits, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
            f"bias: frac_bits {b.frac_bits} exceeds in + weights frac bits {inp.frac_bits + w.frac_bits}")


def check_bias(flavor: str, inp: Tensor, w: Tensor, b: Tensor, mode: str) -> None:
    """The bias against input and weights: :func:`check_bias_scale` for sa8, :func:`check_bias_frac` for fx."""
    if flavor == "sa8":
        check_bias_scale(inp, w, b, mode)
    else:
        check_bias_frac(inp, w, b)


def check_bias_scale(inp: Tensor, w: Tensor, b: Tensor, mode: str) -> None:
    """``mli_chk_bias_scale_asym``: bias scale == in scale · weights scale[k] within ±1 after aligning frac bits
    (the product is shifted right with the build's rounding, or left for a negative shift)."""
    s_in = int(inp.scale[0])
    n = w.scale.size
    bs = b.scale.astype(np.int64)
    bf = b.scale_frac_bits.astype(np.int64)
    if bs.size == 1 and n > 1:
        bs, bf = np.repeat(bs, n), np.repeat(bf, n)
    for k in range(n):
        exp = s_in * int(w.scale[k])
        sh = int(inp.scale_frac_bits[0]) + int(w.scale_frac_bits[k]) - int(bf[min(k, bf.size - 1)])
        exp = int(A.rnd(exp, sh, 32, mode)) if sh > 0 else int(A.wrap(exp << -sh, 32))
        require(abs(exp - int(bs[min(k, bs.size - 1)])) <= 1, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"bias: scale[{k}] {int(bs[min(k, bs.size - 1)])} (sfb {int(bf[min(k, bf.size - 1)])}) must be "
                f"in.scale * weights.scale[{k}] = {exp} within 1")
