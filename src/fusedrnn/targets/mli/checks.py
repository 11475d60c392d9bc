"""Parameter checks of the MLI kernels (``lib/src/private/src/mli_check.cc``): each failed condition raises
:class:`.status.MliCheckFailed` with the status MLI returns (:func:`.status.require`), and the kernel wrapper
(:func:`.status.mli_kernel`) turns it into that return value."""

from __future__ import annotations

import numpy as np

from . import _arith as A
from .config import MLI_MAX_RANK, ElType, current_build
from .luts import Lut
from .status import Status, fail, require
from .tensors import EL_DTYPE, DataContainer, Tensor, dense_strides


def debug_checks() -> bool:
    """Whether MLI's debug-mode checks run (the build's ``debug_mode`` is not ``DBG_MODE_RELEASE``)."""
    return current_build().checks


def check(cond: bool, status: Status, message: str) -> None:
    """A check of ``mli_check.cc`` that MLI's release build skips: fails with ``status`` only in a debug mode. The
    kernel computes a defined result without it (for checks it cannot do without, :func:`.status.require`)."""
    if not cond and debug_checks():
        fail(status, message)


def _check_container(t, name: str, writes: bool) -> None:
    """An mli Tensor (ARGUMENT_ERROR for None, BAD_TENSOR otherwise) with a data container of its element type's
    dtype that is a C-contiguous 1-D array holding its ``capacity`` (and writable when the kernel ``writes``);
    BAD_TENSOR otherwise. A rank-0 tensor may hold its value in the container instead."""
    B = Status.MLI_STATUS_BAD_TENSOR
    require(isinstance(t, Tensor), Status.MLI_STATUS_ARGUMENT_ERROR if t is None else B,
            f"{name}: expected an mli Tensor, got {type(t).__name__}")
    require(isinstance(t.data, DataContainer), B, f"{name}: data: expected a DataContainer")
    require(t.mem is not None, B, f"{name}: data container is None")
    if not t.is_scalar_value:
        require(isinstance(t.mem, np.ndarray) and t.el_type in EL_DTYPE and t.mem.dtype == EL_DTYPE[t.el_type], B,
                f"{name}: container dtype {getattr(t.mem, 'dtype', type(t.mem).__name__)} does not match "
                f"{getattr(t.el_type, 'name', t.el_type)}")
    problem = t.container_problem(writes=writes)
    require(problem is None, B, f"{name}: {problem}")


def check_out(t, name: str = "out") -> None:
    """A tensor a kernel writes (and gives its shape): :func:`_check_container` with a writable container."""
    _check_container(t, name, True)


def check_quant(t: Tensor, name: str, zp_bits: int = 15) -> None:
    """``mli_chk_tensor_quant_params``: sa tensors have ``dim`` < rank and for per-axis parameters one entry per
    slice along ``dim`` (containers of at least shape[dim] values), for per-tensor parameters a value (capacity 0)
    (BAD_TENSOR); scales > 0 (BAD_TENSOR); zero points within ``zp_bits`` signed bits (0: zero) (INCOMPATEBLE)."""
    if not t.is_sa:
        return
    B = Status.MLI_STATUS_BAD_TENSOR
    sa = t.el_params.sa
    per_axis = sa.dim >= 0
    require(not per_axis or sa.dim < t.rank, B, f"{name}: quantization dim {sa.dim} >= rank {t.rank}")
    n = t.shape[sa.dim] if per_axis else 1
    for c, what, size in ((sa.scale, "scale", 2), (sa.zero_point, "zero_point", 2),
                          (sa.scale_frac_bits, "scale_frac_bits", 1)):
        m = c.mem
        if per_axis:
            require(isinstance(m, np.ndarray) and m.size >= n and c.capacity >= n * size, B,
                    f"{name}: per-axis {what} needs a container of {n} values along dim {sa.dim}, got {c!r}")
        else:
            ok = not isinstance(m, np.ndarray) or m.size == 1
            require(ok and c.capacity == 0, B, f"{name}: per-tensor {what} must be one value (capacity 0), got {c!r}")
    s, z, _ = t.params()
    require(bool(np.all(s > 0)), B, f"{name}: scales must be > 0, got {s.tolist()}")
    lo, hi = (0, 0) if zp_bits == 0 else (-(1 << zp_bits), (1 << zp_bits) - 1)
    check(bool(np.all((z >= lo) & (z <= hi))), Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
          f"{name}: zero points must be in [{lo}, {hi}], got {z.tolist()}")


def check_tensor(t, name: str, *, writes: bool = False, v1: bool = False, quant: bool = True) -> None:
    """``mli_chk_tensor``: a usable tensor: its container (:func:`_check_container`, writable when the kernel
    ``writes`` it in place), then rank <= MLI_MAX_RANK, every dimension > 0 and every mem_stride > 0 (MLI 1.x,
    ``v1``: >= 0, all 0 meaning dense), strides no smaller than the dimension inside them (BAD_TENSOR); capacity
    covering what shape and strides span (NOT_ENGH_MEM); quantization parameters (:func:`check_quant`; not
    with ``quant`` False, C's ``mli_chk_tensor(t, check_bank, check_quant=false)``); and the
    view inside the container (:meth:`.Tensor.view_problem`, BAD_TENSOR, in every build mode)."""
    B = Status.MLI_STATUS_BAD_TENSOR
    _check_container(t, name, writes)
    require(isinstance(t.rank, (int, np.integer)) and 0 <= t.rank <= MLI_MAX_RANK and t.rank <= len(t.shape)
            and t.rank <= len(t.mem_stride), B,
            f"{name}: rank {t.rank} with shape {t.shape} and mem_stride {t.mem_stride} (rank <= {MLI_MAX_RANK})")
    dims, ms = t.dims, t.mstrides
    require(all(isinstance(s, (int, np.integer)) and s > 0 for s in dims), B,
            f"{name}: every dimension must be > 0, got shape {dims}")
    dense = v1 and all(m == 0 for m in ms)
    if v1:
        require(all(m >= 0 for m in ms), B, f"{name}: negative mem_stride {ms}")
    else:
        require(all(m > 0 for m in ms) or not debug_checks(), B, f"{name}: mem_stride must be > 0, got {ms}")
        require(all(m >= 0 for m in ms), B, f"{name}: negative mem_stride {ms}")
    if not dense and not t.is_scalar_value:
        prev = 1
        for s, m in zip(reversed(dims), reversed(ms), strict=True):
            check(m == 0 or m >= prev, B, f"{name}: mem_stride {ms} too small for shape {dims}")
            prev = s * m
    if not t.is_scalar_value:
        need = t.required_elements()
        check(need * t.element_size <= t.capacity, Status.MLI_STATUS_NOT_ENGH_MEM,
              f"{name}: capacity {t.capacity} bytes < {need * t.element_size} bytes the shape and strides span")
        require(need * t.element_size <= t.capacity and need <= t.mem.size, B,
                f"{name}: capacity {t.capacity} bytes < {need * t.element_size} bytes the shape and strides span")
    if quant:
        check_quant(t, name)
    problem = t.view_problem(writes=writes)
    require(problem is None, B, f"{name}: {problem}")


def check_scalar_tensor(t, name: str) -> None:
    """``mli_chk_scalar_tensor``: a rank-0 tensor (value in the container; only quantization parameters are
    checked) or a valid tensor of one element (SHAPE_MISMATCH otherwise)."""
    if isinstance(t, Tensor) and t.rank == 0:
        _check_container(t, name, False)
        check_quant(t, name)
        return
    check_tensor(t, name)
    check(t.count() == 1, Status.MLI_STATUS_SHAPE_MISMATCH, f"{name}: a scalar tensor has one element")


def is_scalar(t) -> bool:
    """``mli_tensor_is_scalar``: rank 0 or one element."""
    return isinstance(t, Tensor) and (t.rank == 0 or (t.rank <= len(t.shape) and t.count() == 1))


def _span(c: DataContainer) -> tuple[int, int]:
    m = c.mem
    if not isinstance(m, np.ndarray):
        return 0, 0
    a = m.__array_interface__["data"][0]
    return a, a + int(c.capacity)


def overlapped(t1: Tensor, t2: Tensor) -> bool:
    """``mli_chk_tensors_not_overlapped`` negated: the containers' byte ranges [mem, mem + capacity) meet."""
    return containers_overlapped(t1.data, t2.data)


def containers_overlapped(c1, c2) -> bool:
    a1, e1 = _span(c1) if isinstance(c1, DataContainer) else (0, 0)
    a2, e2 = _span(c2) if isinstance(c2, DataContainer) else (0, 0)
    if e1 == a1 or e2 == a2:
        return False
    return not (a1 >= e2 or a2 >= e1)


def check_not_overlapped(t1: Tensor, t2: Tensor, what: str) -> None:
    """INCOMPATEBLE_TENSORS when the two tensors' containers overlap (a debug check)."""
    check(not overlapped(t1, t2), Status.MLI_STATUS_INCOMPATEBLE_TENSORS, f"{what}: buffers must not overlap")


def check_out_frac(inp: Tensor, w: Tensor, out: Tensor) -> None:
    """``mli_chk_out_frac_fx``: out frac bits <= in + weights frac bits (INCOMPATEBLE_TENSORS)."""
    check(out.frac_bits <= inp.frac_bits + w.frac_bits, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
          f"out: frac_bits {out.frac_bits} exceeds in + weights frac bits {inp.frac_bits + w.frac_bits}")


def layout_contiguous(t: Tensor) -> bool:
    """``check_layout_is_contiguous``: rank 0, or mem_stride equal to the dense strides of the shape."""
    if t.rank == 0:
        return True
    ms = t.mstrides
    return all(m == 0 for m in ms) or ms == dense_strides(t.dims)


def check_lut(lut, kind: str, need: int) -> None:
    """``mli_chk_lut``: a :class:`.luts.Lut` whose ``data.mem`` is a 1-D integer array (ARGUMENT_ERROR) holding
    the ``length`` entries it claims, at least the ``need`` MLI's table has (NOT_ENGH_MEM)."""
    d = getattr(getattr(lut, "data", None), "mem", None)
    ok = (isinstance(lut, Lut) and isinstance(d, np.ndarray) and d.ndim == 1 and d.dtype.kind in "iu"
          and isinstance(lut.length, (int, np.integer)) and 0 <= lut.length <= d.size)
    require(ok, Status.MLI_STATUS_ARGUMENT_ERROR,
            f"{kind}_lut: expected a Lut filled by krn_{kind}_create_lut (1-D int16 data), got {lut!r}")
    require(lut.length >= need, Status.MLI_STATUS_NOT_ENGH_MEM,
            f"{kind}_lut: table of {lut.length} entries is shorter than the {need} MLI needs")


def inner_stride_one(t: Tensor) -> bool:
    """``check_inner_most_dimension_is_one`` (a 1.x all-zero stride counts as dense)."""
    return t.rank == 0 or t.mem_stride[t.rank - 1] in (0, 1)


def contiguous(t: Tensor) -> bool:
    """Dense C-order layout (:func:`layout_contiguous`)."""
    return layout_contiguous(t)


def check_types(pairs, what: str = "tensor") -> None:
    """(tensor, expected ElType, name) triples -> TYPE_MISMATCH."""
    for t, et, name in pairs:
        require(t.el_type == et, Status.MLI_STATUS_TYPE_MISMATCH, f"{name}: expected {ElType(et).name}, "
                f"got {t.el_type.name}")


def check_zero_points(t: Tensor, name: str, *, zero: bool) -> None:
    """``mli_chk_tensor_quant_params``: zero points 0 (weights, bias) or within [-128, 127] (data)."""
    z = t.zero_point.astype(np.int64)
    if zero:
        check(bool(np.all(z == 0)), Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"{name}: zero point must be 0 (symmetric), got {z.tolist()}")
    else:
        check(bool(np.all((z >= -128) & (z <= 127))), Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"{name}: zero point must be in [-128, 127], got {z.tolist()}")


def check_bias_frac(inp: Tensor, w: Tensor, b: Tensor) -> None:
    """``mli_chk_bias_frac_fx``: bias frac bits <= in + weights frac bits."""
    check(b.frac_bits <= inp.frac_bits + w.frac_bits, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
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
        check(abs(exp - int(bs[min(k, bs.size - 1)])) <= 1, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"bias: scale[{k}] {int(bs[min(k, bs.size - 1)])} (sfb {int(bf[min(k, bf.size - 1)])}) must be "
                f"in.scale * weights.scale[{k}] = {exp} within 1")
