"""``mli_hlp_*``: MLI's helper functions on tensors (element counts, quantization parameters, sub-tensors,
conversion between element types); those that check their inputs return a :class:`Status`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .checks import check_out, check_tensor
from .config import ElType
from .status import MliCheckFailed, Status
from .tensors import Tensor, dense_strides


def hlp_count_elem_num(t: Tensor, start_dim: int = 0) -> int:
    """``mli_hlp_count_elem_num``: elements in dimensions ``start_dim``..rank-1 (0 for a bad start_dim)."""
    if start_dim < 0 or start_dim > t.rank:
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
    out.el_type, out.data = in_.el_type, in_.data[start:]
    out.shape, out.rank = list(cfg.size[keep:r]), cfg.sub_tensor_rank
    out.mem_stride = list(st[keep:])
    out.capacity = out.data.nbytes
    out.frac_bits = in_.frac_bits
    out.scale, out.zero_point, out.scale_frac_bits, out.dim = in_.scale, in_.zero_point, in_.scale_frac_bits, -1
    if in_.is_sa and in_.dim >= 0:
        d = in_.dim
        sl = slice(cfg.offset[d], cfg.offset[d] + (cfg.size[d] if d >= keep else 1))
        out.scale, out.zero_point, out.scale_frac_bits = in_.scale[sl], in_.zero_point[sl], in_.scale_frac_bits[sl]
        out.dim = d - keep if d >= keep else -1
    return Status.MLI_STATUS_OK


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def hlp_convert_tensor(src: Tensor, dst: Tensor) -> Status:
    """``mli_hlp_convert_tensor``: convert ``src``'s values into ``dst``'s element type and quantization
    (float -> integer rounds half away from zero and saturates; integer -> float dequantizes; integer ->
    integer goes through float64). ``dst`` takes ``src``'s shape; returns a status."""
    try:
        check_tensor(src, "src")
        n = src.count()
        if isinstance(dst, Tensor) and dst.data is None:
            return Status.MLI_STATUS_NOT_ENGH_MEM
        check_out(dst, "dst")  # a writable container holding its capacity
        if n * dst.element_size > dst.capacity:
            return Status.MLI_STATUS_NOT_ENGH_MEM
    except MliCheckFailed as e:
        return e.status
    real = src.to_float()
    dst.shape, dst.rank = list(src.shape), src.rank
    dst.mem_stride = dense_strides(src.shape)
    if dst.el_type == ElType.MLI_EL_FP_32:
        dst.write(real.astype(np.float32))
        return Status.MLI_STATUS_OK
    if dst.is_fx:
        q = _round_half_away(np.ldexp(real, dst.frac_bits))
    else:
        s, z, f = dst.params()
        if dst.dim >= 0:
            if dst.dim >= dst.rank or dst.shape[dst.dim] != s.size:
                return Status.MLI_STATUS_INCOMPATEBLE_TENSORS
            shp = [1] * dst.rank
            shp[dst.dim] = -1
            s, z, f = s.reshape(shp), z.reshape(shp), f.reshape(shp)
        q = _round_half_away(real / np.ldexp(s.astype(np.float64), -f)) + z
    info = np.iinfo(dst.data.dtype)
    dst.write(np.clip(q, info.min, info.max))
    return Status.MLI_STATUS_OK


__all__ = [
    "hlp_count_elem_num", "hlp_tensor_element_size", "hlp_tensor_scale", "hlp_tensor_scale_shift",
    "hlp_tensor_zero_offset", "hlp_convert_tensor", "hlp_create_subtensor", "SubTensorCfg",
]
