"""Parameter checks of the MLI kernels (``lib/src/private/src/mli_check.cc``): each failed condition raises
:class:`.status.MliCheckFailed` with the status MLI returns (:func:`.status.require`), and the kernel wrapper
(:func:`.status.mli_kernel`) turns it into that return value."""

from __future__ import annotations

import numpy as np

from . import _arith as A
from .config import MLI_MAX_RANK, ElType
from .luts import Lut
from .status import Status, require
from .tensors import EL_DTYPE, Tensor


def _check_container(t, name: str, writes: bool) -> None:
    """An mli Tensor (ARGUMENT_ERROR for None, BAD_TENSOR otherwise) with a data container of its element type's
    dtype that is a C-contiguous 1-D array holding its ``capacity`` (and writable when the kernel ``writes``);
    BAD_TENSOR otherwise."""
    B = Status.MLI_STATUS_BAD_TENSOR
    require(isinstance(t, Tensor), Status.MLI_STATUS_ARGUMENT_ERROR if t is None else B,
            f"{name}: expected an mli Tensor, got {type(t).__name__}")
    require(t.data is not None, B, f"{name}: data container is None")
    require(isinstance(t.data, np.ndarray) and t.el_type in EL_DTYPE and t.data.dtype == EL_DTYPE[t.el_type], B,
            f"{name}: container dtype {getattr(t.data, 'dtype', type(t.data).__name__)} does not match "
            f"{getattr(t.el_type, 'name', t.el_type)}")
    problem = t.container_problem(writes=writes)
    require(problem is None, B, f"{name}: {problem}")


def check_out(t, name: str = "out") -> None:
    """A tensor a kernel writes (and gives its shape): :func:`_check_container` with a writable container."""
    _check_container(t, name, True)


def check_tensor(t, name: str, *, writes: bool = False) -> None:
    """``mli_chk_tensor``: a usable tensor (BAD_TENSOR otherwise): its container (:func:`_check_container`,
    writable when the kernel ``writes`` it in place), then rank, shape, strides, capacity and quantization
    parameters; the view lies inside the container (:meth:`.Tensor.view_problem`)."""
    B = Status.MLI_STATUS_BAD_TENSOR
    _check_container(t, name, writes)
    require(t.rank <= MLI_MAX_RANK and t.rank == len(t.shape) and len(t.mem_stride) == t.rank, B,
            f"{name}: rank {t.rank} with shape {t.shape} and mem_stride {t.mem_stride} (rank <= {MLI_MAX_RANK})")
    require(all(s > 0 for s in t.shape), B, f"{name}: every dimension must be > 0, got shape {t.shape}")
    require(all(s >= 0 for s in t.mem_stride), B, f"{name}: negative mem_stride {t.mem_stride}")
    need = t.required_elements()
    require(need * t.element_size <= t.capacity and need <= t.data.size, B,
            f"{name}: capacity {t.capacity} bytes < {need * t.element_size} bytes the shape and strides span")
    problem = t.view_problem(writes=writes)
    require(problem is None, B, f"{name}: {problem}")
    if t.is_sa:
        if t.dim >= 0:
            require(t.dim < t.rank, B, f"{name}: quantization dim {t.dim} >= rank {t.rank}")
            n = t.shape[t.dim]
            require(t.scale.size == n and t.zero_point.size == n and t.scale_frac_bits.size == n, B,
                    f"{name}: per-axis parameters need {n} entries along dim {t.dim}")
        else:
            require(t.scale.size == 1 and t.zero_point.size == 1 and t.scale_frac_bits.size == 1, B,
                    f"{name}: per-tensor parameters need exactly one scale, zero point and scale_frac_bits")


def check_lut(lut, kind: str, need: int) -> None:
    """A filled ``mli_lut``: a :class:`.luts.Lut` whose ``data`` is a 1-D integer array (ARGUMENT_ERROR) of at
    least ``need`` entries (NOT_ENGH_MEM)."""
    d = getattr(lut, "data", None)
    ok = isinstance(lut, Lut) and isinstance(d, np.ndarray) and d.ndim == 1 and d.dtype.kind in "iu"
    require(ok, Status.MLI_STATUS_ARGUMENT_ERROR,
            f"{kind}_lut: expected a Lut filled by krn_{kind}_create_lut (1-D int16 data), got {lut!r}")
    require(lut.length >= need, Status.MLI_STATUS_NOT_ENGH_MEM,
            f"{kind}_lut: table of {lut.length} entries is shorter than the {need} MLI needs")


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
