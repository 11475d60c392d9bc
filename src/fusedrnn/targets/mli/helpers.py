"""``mli_hlp_*``: MLI's helper functions on tensors (element counts, quantization parameters, sub-tensors,
conversion between element types); those that check their inputs return a :class:`Status`."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from . import _arith as A
from .checks import check, check_out, check_tensor, debug_checks, inner_stride_one
from .config import MLI_MAX_RANK, ElType, current_build
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
    container memory from the block's first element on, capacity reduced by the offset's bytes, the input's
    strides) of rank ``sub_tensor_rank``. As MLI's code does, dimensions of size 1 are dropped from the front
    until ``rank - sub_tensor_rank`` are gone; the remaining sizes fill ``out.shape`` in order and ``out.rank``
    counts the first ``sub_tensor_rank`` of them (with too few size-1 dimensions the trailing ones lie past the
    rank). Per-axis parameters start at the offset along their dimension; where that dimension is dropped ``out``
    is per-tensor with the parameters of its offset (MLI leaves the pointers there).

    Checks (``mli_chk_create_subtensor``): a valid input (``mli_chk_tensor``), ``out`` given (BAD_TENSOR);
    ``cfg`` given, ``sub_tensor_rank`` <= rank, per dimension offset < shape and offset + size <= shape
    (BAD_FUNC_CFG); an fp32 input is NOT_SUPPORTED. C's unsigned fields cannot be negative: here a negative value
    is BAD_FUNC_CFG in every build."""
    try:
        check_tensor(in_, "in")
    except MliCheckFailed as e:
        return e.status
    if not isinstance(out, Tensor):
        return Status.MLI_STATUS_BAD_TENSOR
    r = in_.rank
    if (not isinstance(cfg, SubTensorCfg) or len(cfg.offset) < r or len(cfg.size) < r
            or not 0 <= cfg.sub_tensor_rank <= r
            or any(o < 0 or s < 0 or o >= n or o + s > n
                   for o, s, n in zip(cfg.offset[:r], cfg.size[:r], in_.dims, strict=True))):
        return Status.MLI_STATUS_BAD_FUNC_CFG
    if in_.el_type == ElType.MLI_EL_FP_32:
        return Status.MLI_STATUS_NOT_SUPPORTED
    st = in_.strides()
    start = sum(o * m for o, m in zip(cfg.offset, st, strict=False))
    skip = r - cfg.sub_tensor_rank
    kept = []
    for i in range(r):
        if skip > 0 and cfg.size[i] == 1:
            skip -= 1
            continue
        kept.append(i)
    view = in_.mem[start:]
    out.el_type = in_.el_type
    out.data = DataContainer(max(in_.capacity - start * in_.element_size, 0), view)
    out.shape = [cfg.size[i] for i in kept]
    out.mem_stride = [st[i] for i in kept]
    out.rank = cfg.sub_tensor_rank
    out.frac_bits = in_.frac_bits
    sl, out.dim = slice(None), -1
    if in_.is_sa and in_.dim >= 0:
        d = in_.dim
        sl = slice(cfg.offset[d], cfg.offset[d] + (cfg.size[d] if d in kept else 1))
        out.dim = kept.index(d) if d in kept else -1
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


def _param(t: Tensor, k: int) -> tuple[int, int, int]:
    """``mli_hlp_tensor_scale`` / ``_scale_shift`` / ``_zero_offset`` at index ``k``: (1, frac_bits, 0) for fx,
    the per-tensor value whatever ``k``, or slice ``k`` of per-axis parameters."""
    if t.is_fx:
        return 1, t.frac_bits, 0
    scale, zero_point, frac = t.params(k if t.dim >= 0 else 0)
    return scale, frac, zero_point


def requant_params(src: Tensor, dst: Tensor, k: int, mode: str) -> tuple[int, int]:
    """``define_requant_params``: (scale, shift) with scale·2^-shift = src scale / dst scale, ``scale`` int16:
    pre = norm32(s_in) - norm16(s_out), ratio = (s_in << pre) / s_out (C division), normalized to 16 bits by
    ``mli_math_norm_cast_fx`` (a rounded shift by 16 - norm32(ratio)), shift = pre + sfb_in - sfb_out - that
    shift."""
    s_in, f_in, _ = _param(src, k)
    s_out, f_out, _ = _param(dst, k)
    pre = int(A.norm(s_in, 32)) - int(A.norm(s_out, 16))
    ratio = int(A.cdiv(s_in << pre, s_out))
    ns = 16 - int(A.norm(ratio, 32))
    scale = int(A.sat(_rnd32(ratio, ns, mode), 16))
    return scale, pre + f_in - f_out - ns


def _rnd32(x, n, mode: str) -> np.ndarray:
    """``mli_math_asr_rnd_fx<int32_t>`` as MLI 2.0.2's ``mli_math.h`` writes it, whose rounding constant
    ``(T)((unsigned_T(1) << n) >> 1)`` is +2^30 for n = 31 (:func:`._arith.rnd` models a signed constant
    there). ``n``: an int or an int array broadcasting with ``x``."""
    x, n = A.i64(x), A.i64(n)
    res = A.rnd(x, n, 32, mode)
    if mode not in ("up", "convergent") or not np.any(n == 31):
        return res
    c = 1 << 30
    if mode == "up":
        r31 = A.add_sat(x, c, 32) >> 31
    else:
        r = x >> 31
        r31 = r + (((x & c) != 0) & (((r & 1) != 0) | ((x & (c - 1)) != 0)))
    return np.where(n == 31, r31, res)


def _requant_values(v: np.ndarray, in_zp: int, out_zp: int, scale: int, shift: int, wide: bool, out_bits: int,
                    mode: str) -> np.ndarray:
    """``calc_convert``: q_out = sat(rnd((q_in - zp_in)·scale, shift) + zp_out). With an int32 side (``wide``)
    the difference and the scale are normalized to 32 bits, multiplied in 64 and the high word shifted by
    shift + both norms - 32; otherwise the int16 difference times scale in int32."""
    if wide:
        d = A.sat(v - in_zp, 32)
        dn = A.norm(d, 32)
        d = A.asl(d, dn, 32)
        sn = int(A.norm(scale, 32))
        hi = (d * (scale << sn)) >> 32
        acc = _rnd32(hi, min(shift, 63) + sn + dn - 32, mode)
    else:
        d = A.sat(v - in_zp, 16)
        acc = _rnd32(d * scale, min(shift, 31), mode)
    return A.sat(A.add_sat(acc, out_zp, 32), out_bits)


def _convert_quantized(src: Tensor, dst: Tensor) -> np.ndarray:
    """``convert_quantized_data``: every element requantized from ``src``'s to ``dst``'s parameters in MLI's
    integer arithmetic, slice by slice along the per-axis dimension (``dst``'s when both have one)."""
    mode = current_build().mode
    v = src.values()
    wide = ElType.MLI_EL_SA_32 in (src.el_type, dst.el_type)
    bits = 8 * dst.element_size
    axis = dst.dim if dst.is_sa and dst.dim >= 0 else (src.dim if src.is_sa and src.dim >= 0 else -1)
    out = np.empty(v.shape, np.int64)
    for k in range(v.shape[axis] if axis >= 0 else 1):
        sl = (slice(None),) * axis + (k,) if axis >= 0 else ...
        scale, shift = requant_params(src, dst, k, mode)
        out[sl] = _requant_values(v[sl], _param(src, k)[2], _param(dst, k)[2], scale, shift, wide, bits, mode)
    return out


def _hlp_convert_tensor_safx(src, dst) -> None:
    _check_convert(src, dst)
    require(src.el_type != ElType.MLI_EL_FP_32 and dst.el_type != ElType.MLI_EL_FP_32,
            Status.MLI_STATUS_TYPE_MISMATCH,
            "src/dst: hlp_convert_tensor_safx converts between fx and sa types (fp32: hlp_convert_tensor)")
    y = _convert_quantized(src, dst)
    if not debug_checks() or dst.rank != src.rank:  # without the checks dst takes src's shape
        require(y.size * dst.element_size <= dst.capacity, Status.MLI_STATUS_NOT_ENGH_MEM,
                f"dst: capacity {dst.capacity} bytes < {y.size * dst.element_size} needed")
        dst.write(y, src.dims)
        return
    dst.write(y)


hlp_convert_tensor = mli_kernel(_hlp_convert_tensor, name="hlp_convert_tensor", doc="""``mli_hlp_convert_tensor``:
    convert ``src``'s values into ``dst``'s element type and quantization (float -> integer rounds half away from
    zero and saturates; integer -> float dequantizes; integer -> integer goes through float64). ``dst`` must have
    ``src``'s shape (SHAPE_MISMATCH, :func:`_check_convert`); returns a status.""")
hlp_convert_tensor_safx = mli_kernel(_hlp_convert_tensor_safx, name="hlp_convert_tensor_safx",
                                     doc="""``mli_hlp_convert_tensor_safx``: :func:`hlp_convert_tensor` between fx
    and sa types only (fp32 on either side: TYPE_MISMATCH, as ``convert_quantized_data`` returns), requantizing
    in MLI's integer arithmetic (:func:`requant_params`, :func:`_requant_values`) with the build's rounding.""")


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
