"""``mli_hlp_*``: MLI's helper functions on tensors (element counts, quantization parameters, sub-tensors,
conversion between element types); those that check their inputs return a :class:`Status`."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from .checks import check, check_out, check_tensor, debug_checks, inner_stride_one
from .config import MLI_MAX_RANK, ElType
from .status import MliCheckFailed, Status, mli_kernel, require
from .tensors import DataContainer, Tensor, dense_strides, fixed


def hlp_count_elem_num(t: Tensor, start_dim: int = 0) -> int:
    """``mli_hlp_count_elem_num``: elements in dimensions ``start_dim``..rank-1. ``mli_chk_count_elem_num`` makes
    it 0 for rank > MLI_MAX_RANK and, for rank > 0, ``start_dim`` >= rank; without the checks
    (``DBG_MODE_RELEASE``) the empty product over dimensions past the rank is 1."""
    if not 0 <= t.rank <= MLI_MAX_RANK or start_dim < 0:
        return 0
    if t.rank != 0 and start_dim >= t.rank and debug_checks():
        return 0
    return t.count(start_dim)


def hlp_tensor_element_size(t: Tensor) -> int:
    """``mli_hlp_tensor_element_size``: bytes per element."""
    return t.element_size


def hlp_tensor_scale(t: Tensor, scale_idx: int = 0) -> int:
    """``mli_hlp_tensor_scale``: the scale mantissa (1 for fx types)."""
    return 1 if t.is_fx else int(t.scale[scale_idx])


def hlp_tensor_scale_shift(t: Tensor, scale_idx: int = 0) -> int:
    """``mli_hlp_tensor_scale_shift``: scale_frac_bits (frac_bits for fx types)."""
    return t.frac_bits if t.is_fx else int(t.scale_frac_bits[scale_idx])


def hlp_tensor_zero_offset(t: Tensor, zero_idx: int = 0) -> int:
    """``mli_hlp_tensor_zero_offset``: the zero point (0 for fx types)."""
    return 0 if t.is_fx else int(t.zero_point[zero_idx])


class SubTensorCfg:
    """``mli_sub_tensor_cfg``: ``offset`` and ``size`` per input dimension, ``sub_tensor_rank`` <= input rank."""

    def __init__(self, offset: Sequence[int], size: Sequence[int], sub_tensor_rank: int):
        self.offset = [int(v) for v in offset]
        self.size = [int(v) for v in size]
        self.sub_tensor_rank = int(sub_tensor_rank)


def hlp_create_subtensor(in_: Tensor, cfg: SubTensorCfg, out: Tensor) -> Status:
    """``mli_hlp_create_subtensor``: make ``out`` a view of the block ``offset .. offset+size`` of ``in_`` (same
    container memory, the input's strides), keeping the last ``sub_tensor_rank`` dimensions; per-axis parameters
    are sliced along their dimension (a dimension that is dropped leaves the one parameter set of its offset)."""
    try:
        check_tensor(in_, "in")
    except MliCheckFailed as e:
        return e.status
    r = in_.rank
    if (not isinstance(out, Tensor) or not isinstance(cfg, SubTensorCfg) or len(cfg.offset) < r or len(cfg.size) < r
            or not 0 < cfg.sub_tensor_rank <= r
            or any(o < 0 or s < 1 or o + s > n for o, s, n in zip(cfg.offset, cfg.size, in_.shape, strict=False))
            or any(s != 1 for s in cfg.size[: r - cfg.sub_tensor_rank])):
        return Status.MLI_STATUS_BAD_FUNC_CFG
    st = in_.strides()
    start = sum(o * m for o, m in zip(cfg.offset, st, strict=False))
    keep = r - cfg.sub_tensor_rank
    view = in_.mem[start:]
    out.el_type, out.data = in_.el_type, DataContainer(view.nbytes, view)
    out.shape, out.rank = list(cfg.size[keep:r]), cfg.sub_tensor_rank
    out.mem_stride = list(st[keep:])
    out.frac_bits = in_.frac_bits
    sl, out.dim = slice(None), -1
    if in_.is_sa and in_.dim >= 0:
        d = in_.dim
        sl = slice(cfg.offset[d], cfg.offset[d] + (cfg.size[d] if d >= keep else 1))
        out.dim = d - keep if d >= keep else -1
    out.scale, out.zero_point, out.scale_frac_bits = in_.scale[sl], in_.zero_point[sl], in_.scale_frac_bits[sl]
    return Status.MLI_STATUS_OK


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _check_convert(src, dst) -> None:
    """``mli_chk_convert_tensor``: valid ``src`` and ``dst`` tensors, the same shape (SHAPE_MISMATCH), innermost
    strides 1 (INCOMPATEBLE_TENSORS), in place only with equal element sizes and strides (INCOMPATEBLE_TENSORS),
    sa quantization axes that agree (SIZE_MISMATCH). Without the checks ``dst`` takes ``src``'s shape."""
    S = Status
    check_tensor(src, "src")
    check_out(dst, "dst")
    if not debug_checks():
        return
    check_tensor(dst, "dst", writes=True)
    check(src.dims == dst.dims, S.MLI_STATUS_SHAPE_MISMATCH, f"dst: shape {dst.dims} differs from src's {src.dims}")
    check(inner_stride_one(src) and inner_stride_one(dst), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
          "src/dst: innermost mem_stride must be 1")
    if hlp_tensor_data_ptr_cmp(src, dst):
        check(src.element_size == dst.element_size and src.mstrides[:-1] == dst.mstrides[:-1],
              S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in place conversion needs equal element sizes and mem_stride")
    if src.is_sa and dst.is_sa:
        check(src.dim == dst.dim or src.dim < 0 or dst.dim < 0, S.MLI_STATUS_SIZE_MISMATCH,
              f"src/dst: quantization axes {src.dim} and {dst.dim} differ")


def _convert(src: Tensor, dst: Tensor, reshape: bool = False) -> None:
    """Write ``src``'s values converted into ``dst`` (given ``src``'s shape when ``reshape``, without the checks,
    or when the ranks differ)."""
    if reshape or not debug_checks() or dst.rank != src.rank:
        n = src.count()
        require(n * dst.element_size <= dst.capacity, Status.MLI_STATUS_NOT_ENGH_MEM,
                f"dst: capacity {dst.capacity} bytes < {n * dst.element_size} needed")
        dst.write(np.zeros(n), src.dims)
    fp = ElType.MLI_EL_FP_32
    if src.el_type == fp or dst.el_type == fp:
        dst.write(_convert_float(src, dst))
        return
    real = src.to_float()
    if dst.is_fx:
        q = _round_half_away(np.ldexp(real, dst.frac_bits))
    else:
        s, z, f = _broadcast_params(dst)
        q = _round_half_away(real / np.ldexp(s.astype(np.float64), -f)) + z
    info = np.iinfo(dst.mem.dtype)
    dst.write(np.clip(q, info.min, info.max))


def _broadcast_params(t: Tensor) -> tuple:
    """(scale, zero point, scale_frac_bits) shaped to broadcast along ``t.dim`` (per-tensor: scalars)."""
    s, z, f = t.params()
    if t.is_sa and t.dim >= 0:
        require(t.dim < t.rank and t.shape[t.dim] == s.size, Status.MLI_STATUS_INCOMPATEBLE_TENSORS,
                f"per-axis parameters do not match dim {t.dim}")
        shp = [1] * t.rank
        shp[t.dim] = -1
        return s.reshape(shp), z.reshape(shp), f.reshape(shp)
    if t.is_fx:
        return np.int64(1), np.int64(0), np.int64(t.frac_bits)
    return s[0], z[0], f[0]


def _convert_float(src: Tensor, dst: Tensor) -> np.ndarray:
    """``convert_float_data`` in single precision as MLI computes it: quantizing, scale_val =
    (float)ldexp(1.0f / scale, frac_bits), q = (int32)(x·scale_val ± 0.5f) + zero_point, saturated;
    dequantizing, x = (float)(q - zero_point) · (float)ldexp((float)scale, -frac_bits)."""
    f32 = np.float32
    if src.el_type == ElType.MLI_EL_FP_32 and dst.el_type == ElType.MLI_EL_FP_32:
        return src.values()
    if src.el_type == ElType.MLI_EL_FP_32:
        s, z, fb = _broadcast_params(dst)
        inv = f32(1.0) / np.asarray(s, np.float64).astype(f32)
        scale_val = np.ldexp(inv.astype(np.float64), np.asarray(fb, np.int64)).astype(f32)
        x = src.values().astype(f32)
        v = x * scale_val + np.where(x > 0, f32(0.5), f32(-0.5)).astype(f32)
        q = np.trunc(np.clip(v.astype(np.float64), -2.0**31, 2.0**31 - 1)).astype(np.int64)
        info = np.iinfo(dst.mem.dtype)
        return np.clip(np.clip(q + np.asarray(z, np.int64), -2**31, 2**31 - 1), info.min, info.max)
    s, z, fb = _broadcast_params(src)
    scale_val = np.ldexp(np.asarray(s, np.float64).astype(f32).astype(np.float64), -np.asarray(fb, np.int64))
    scale_val = scale_val.astype(f32)
    return (src.values() - np.asarray(z, np.int64)).astype(f32) * scale_val


def _hlp_convert_tensor(src, dst) -> None:
    _check_convert(src, dst)
    _convert(src, dst)


def _hlp_convert_tensor_v1(src, dst) -> None:
    """MLI 1.x ``mli_chk_convert_tensor``: a valid ``src``, an output container, a contiguous ``src`` and output
    strides (INCOMPATEBLE_TENSORS), enough output capacity for ``src``'s elements (NOT_ENGH_MEM); ``dst`` takes
    ``src``'s shape."""
    check_tensor(src, "src", v1=True)
    require(isinstance(dst, Tensor) and dst.mem is not None, Status.MLI_STATUS_BAD_TENSOR, "dst: no data pointer")
    check_out(dst, "dst")
    check(contiguous_in(src), Status.MLI_STATUS_INCOMPATEBLE_TENSORS, "src: layout must be contiguous")
    check(src.count() * dst.element_size <= dst.capacity, Status.MLI_STATUS_NOT_ENGH_MEM,
          f"dst: capacity {dst.capacity} bytes < {src.count() * dst.element_size} needed")
    _convert(src, dst, reshape=True)


hlp_convert_tensor_v1 = mli_kernel(_hlp_convert_tensor_v1, name="hlp_convert_tensor", doc="""MLI 1.x
    ``mli_hlp_convert_tensor(in, out)``: as 2.0's, but ``out`` takes ``in``'s shape (checks:
    :func:`_hlp_convert_tensor_v1`); returns a status.""")


def _hlp_convert_tensor_safx(src, dst) -> None:
    _check_convert(src, dst)
    require(src.el_type != ElType.MLI_EL_FP_32 and dst.el_type != ElType.MLI_EL_FP_32, Status.MLI_STATUS_NOT_SUPPORTED,
            "src/dst: hlp_convert_tensor_safx converts between fx and sa types (fp32: hlp_convert_tensor)")
    _convert(src, dst)


hlp_convert_tensor = mli_kernel(_hlp_convert_tensor, name="hlp_convert_tensor", doc="""``mli_hlp_convert_tensor``:
    convert ``src``'s values into ``dst``'s element type and quantization (float -> integer rounds half away from
    zero and saturates; integer -> float dequantizes; integer -> integer goes through float64). ``dst`` must have
    ``src``'s shape (SHAPE_MISMATCH, :func:`_check_convert`); returns a status.""")
hlp_convert_tensor_safx = mli_kernel(_hlp_convert_tensor_safx, name="hlp_convert_tensor_safx",
                                     doc="""``mli_hlp_convert_tensor_safx``: :func:`hlp_convert_tensor` between fx
    and sa types only (NOT_SUPPORTED for fp32). MLI requantizes in integer arithmetic; here the conversion goes
    through float64 as :func:`hlp_convert_tensor`'s does.""")


def hlp_tensor_data_ptr_cmp(in1: Tensor, in2: Tensor) -> bool:
    """``mli_hlp_tensor_data_ptr_cmp``: the two tensors' data pointers are equal (same element type, neither of
    rank 0, buffers starting at the same address)."""
    if not (isinstance(in1, Tensor) and isinstance(in2, Tensor)) or in1.el_type != in2.el_type:
        return False
    if in1.rank == 0 or in2.rank == 0:
        return False
    m1, m2 = in1.mem, in2.mem
    if not (isinstance(m1, np.ndarray) and isinstance(m2, np.ndarray)):
        return False
    return m1.__array_interface__["data"][0] == m2.__array_interface__["data"][0]


class PointToSubtsrCfg:
    """``mli_point_to_subtsr_cfg``: ``start_coord[MLI_MAX_RANK]``, ``coord_num``, ``first_out_dim_size``."""

    def __init__(self, start_coord: Sequence[int] = (), coord_num: int = 0, first_out_dim_size: int = 0):
        self.start_coord = fixed(start_coord)
        self.coord_num = int(coord_num)
        self.first_out_dim_size = int(first_out_dim_size)


def _point_to_subtensor(in_, cfg, out) -> None:
    S = Status
    check_tensor(in_, "in", v1=True)
    require(isinstance(out, Tensor), S.MLI_STATUS_BAD_TENSOR, "out: expected an mli Tensor")
    require(isinstance(cfg, PointToSubtsrCfg), S.MLI_STATUS_BAD_FUNC_CFG, "cfg: expected a PointToSubtsrCfg")
    n, r = cfg.coord_num, in_.rank
    require(1 <= n <= r, S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.coord_num: expected 1..{r}, got {n}")
    require(all(0 <= cfg.start_coord[i] < in_.shape[i] for i in range(n)), S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg.start_coord {cfg.start_coord[:n]} outside shape {in_.dims}")
    require(cfg.first_out_dim_size >= 1 and cfg.start_coord[n - 1] + cfg.first_out_dim_size <= in_.shape[n - 1],
            S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.first_out_dim_size {cfg.first_out_dim_size} runs past dimension {n - 1}")
    check(contiguous_in(in_), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: layout must be contiguous")
    sizes = dense_strides(in_.dims)
    start = sum(cfg.start_coord[i] * sizes[i] for i in range(n))
    out_dims = [cfg.first_out_dim_size] + in_.dims[n:]
    count = int(np.prod(out_dims))
    out.el_type = in_.el_type
    out.data = DataContainer(count * in_.element_size, in_.mem[start:start + count])
    out.shape, out.rank, out.mem_stride = out_dims, len(out_dims), dense_strides(out_dims)
    out.el_params = copy.copy(in_.el_params)


def contiguous_in(t: Tensor) -> bool:
    return all(m == 0 for m in t.mstrides) or t.mstrides == dense_strides(t.dims)


hlp_point_to_subtensor = mli_kernel(_point_to_subtensor, name="hlp_point_to_subtensor", doc="""
    ``mli_hlp_point_to_subtensor`` (MLI 1.x; deprecated in 2.0): make ``out`` a view of ``in_`` starting at
    ``cfg.start_coord[:coord_num]``, of shape [first_out_dim_size, *in.shape[coord_num:]], dense (``in_`` must be
    contiguous); capacity = the view's bytes, element parameters copied. Returns a status.""")


__all__ = [
    "hlp_count_elem_num", "hlp_tensor_element_size", "hlp_tensor_scale", "hlp_tensor_scale_shift",
    "hlp_tensor_zero_offset", "hlp_convert_tensor", "hlp_create_subtensor", "SubTensorCfg", "hlp_convert_tensor_safx",
    "hlp_tensor_data_ptr_cmp", "hlp_point_to_subtensor", "PointToSubtsrCfg",
]
