"""``mli_krn_argmax_{sa8,fx16}`` and the data-movement functions ``mli_mov_tensor_sync`` / ``mli_mov_cfg_for_copy``
(MLI 2.0).

Argmax returns memory offsets (``Σ idx[i]·mem_stride[i]`` of the input), ``topk`` per slice, largest first, chosen
the way MLI's reference kernel chooses them: the first ``topk`` elements in memory order seed a min-heap, every
later element not smaller than the heap's root replaces it (so among equal values the later one wins), then a heap
sort orders the result. The output is sa32 [slices, topk] with scale 1, zero point 0.
"""

from __future__ import annotations

import copy

import numpy as np

from .checks import check, check_out, check_tensor, containers_overlapped, debug_checks, inner_stride_one
from .config import MLI_MAX_RANK, ElType
from .status import Status, mli_kernel, require
from .tensors import ElParams, fixed

S = Status


class ArgmaxCfg:
    """``mli_argmax_cfg``: ``axis`` (< 0: the whole tensor) and ``topk``."""

    def __init__(self, axis: int = -1, topk: int = 1):
        self.axis = int(axis)
        self.topk = int(topk)


def _heapify(v: np.ndarray, idx: list[int], size: int, root: int) -> None:
    """Sift ``root`` down the min-heap ``idx[:size]`` keyed by ``v[idx[i]]`` (a child replaces its parent only when
    strictly smaller, the left child first)."""
    smallest = root
    while root < size // 2:
        left, right = 2 * root + 1, 2 * root + 2
        if left < size and v[idx[left]] < v[idx[smallest]]:
            smallest = left
        if right < size and v[idx[right]] < v[idx[smallest]]:
            smallest = right
        if smallest == root:
            break
        idx[root], idx[smallest] = idx[smallest], idx[root]
        root = smallest


def top_k_offsets(values: np.ndarray, offsets: np.ndarray, topk: int, mem: np.ndarray) -> list[int]:
    """The ``topk`` memory offsets of ``values`` (in memory-walk order, their offsets ``offsets``) by MLI's heap
    selection and heap sort (descending); ``mem`` is the buffer the offsets index."""
    idx = [int(o) for o in offsets[:topk]]
    for i in range(topk // 2 - 1, -1, -1):
        _heapify(mem, idx, topk, i)
    for o in offsets[topk:]:
        if mem[idx[0]] > mem[int(o)]:
            continue
        idx[0] = int(o)
        _heapify(mem, idx, topk, 0)
    for i in range(topk - 1, 0, -1):
        idx[0], idx[i] = idx[i], idx[0]
        _heapify(mem, idx, i, 0)
    return idx


def _argmax(et, in_, cfg, out) -> None:
    check_tensor(in_, "in")
    check_out(out)
    if debug_checks():
        check_tensor(out, "out", writes=True)
    check(out.el_type == ElType.MLI_EL_SA_32, S.MLI_STATUS_TYPE_MISMATCH,
          f"out: expected MLI_EL_SA_32, got {getattr(out.el_type, 'name', out.el_type)}")
    require(isinstance(cfg, ArgmaxCfg), S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: expected an ArgmaxCfg, got {cfg!r}")
    require(cfg.axis < in_.rank, S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.axis {cfg.axis} >= rank {in_.rank}")
    check(inner_stride_one(in_), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: innermost mem_stride must be 1")
    n = in_.count()
    slices = in_.shape[cfg.axis] if cfg.axis >= 0 else 1
    require(1 <= cfg.topk <= n // slices, S.MLI_STATUS_BAD_FUNC_CFG,
            f"cfg.topk {cfg.topk} must be 1..{n // slices} (the elements of a slice)")
    check(out.shape[0] == slices and out.shape[1] == cfg.topk, S.MLI_STATUS_SHAPE_MISMATCH,
          f"out: expected shape [{slices}, {cfg.topk}], got {out.dims}")
    require(out.el_type == ElType.MLI_EL_SA_32 and slices * cfg.topk * 4 <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} bytes < {slices * cfg.topk * 4} needed")
    require(in_.el_type == et, S.MLI_STATUS_TYPE_MISMATCH, f"in: expected {ElType(et).name}, got {in_.el_type.name}")
    if et == ElType.MLI_EL_SA_8:
        check(in_.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: per-tensor quantization expected")
    st = in_.strides()
    grid = np.indices(in_.dims).reshape(in_.rank, -1) if in_.rank else np.zeros((0, 1), int)
    offs = (np.asarray(st).reshape(-1, 1) * grid).sum(axis=0) if in_.rank else np.zeros(1, int)
    mem = in_.mem.astype(np.int64)
    res = []
    for k in range(slices):
        sel = offs if cfg.axis < 0 else offs[grid[cfg.axis] == k]
        res.extend(top_k_offsets(mem[sel], sel, cfg.topk, mem))
    out.scale, out.zero_point, out.scale_frac_bits, out.dim = 1, 0, 0, -1
    out.write(np.array(res, np.int64), [slices, cfg.topk])


krn_argmax_sa8 = mli_kernel(_argmax, ElType.MLI_EL_SA_8, name="krn_argmax_sa8", doc="""``mli_krn_argmax_sa8``:
    the memory offsets of the ``cfg.topk`` largest elements of ``in_`` (per slice along ``cfg.axis``, or of the
    whole tensor for axis < 0) into sa32 ``out`` [slices, topk]; returns a status.""")
krn_argmax_fx16 = mli_kernel(_argmax, ElType.MLI_EL_FX_16, name="krn_argmax_fx16",
                             doc="``mli_krn_argmax_fx16``: :func:`krn_argmax_sa8` for fx16 input.")


class MovCfg:
    """``mli_mov_cfg_t``: per dimension ``offset``, ``size`` (0: to the end), ``sub_sample_step``, ``dst_offset``,
    ``dst_mem_stride`` (0: dense), ``perm_dim``, ``padding_pre``, ``padding_post``; all arrays of MLI_MAX_RANK."""

    def __init__(self, offset=(), size=(), sub_sample_step=(), dst_offset=(), dst_mem_stride=(), perm_dim=(),
                 padding_pre=(), padding_post=()):
        self.offset, self.size = fixed(offset), fixed(size)
        self.sub_sample_step, self.dst_offset = fixed(sub_sample_step), fixed(dst_offset)
        self.dst_mem_stride, self.perm_dim = fixed(dst_mem_stride), fixed(perm_dim)
        self.padding_pre, self.padding_post = fixed(padding_pre), fixed(padding_post)


def mov_cfg_for_copy(cfg: MovCfg) -> Status:
    """``mli_mov_cfg_for_copy``: fill ``cfg`` for a full copy (every field 0, sub_sample_step 1, perm_dim the
    identity)."""
    if not isinstance(cfg, MovCfg):
        return S.MLI_STATUS_ARGUMENT_ERROR
    cfg.__init__(sub_sample_step=[1] * MLI_MAX_RANK, perm_dim=list(range(MLI_MAX_RANK)))
    return S.MLI_STATUS_OK


def _ptr(c):
    """The address a quantization-parameter container points at, or None (C's NULL: no array, e.g. a fresh
    tensor's per-tensor value)."""
    m = getattr(c, "mem", None)
    return m.__array_interface__["data"][0] if isinstance(m, np.ndarray) else None


def _cpy_sizes(src, cfg) -> list[int]:
    """Elements copied per source dimension: ``cfg.size``, or 0 for the padded rest after ``cfg.offset``."""
    return [cfg.size[i] or src.shape[i] - cfg.offset[i] + cfg.padding_pre[i] + cfg.padding_post[i]
            for i in range(src.rank)]


def _check_spec_params(src, cfg, dst) -> None:
    """``mli_chk_data_movement``'s per-axis part (sa ``src`` with ``dim`` >= 0): ``dst``'s parameter pointers
    either all shared with ``src``, all its own, or all NULL (SPEC_PARAM_MISMATCH); the configuration within
    the padded input, steps > 0, perm_dim < rank (BAD_FUNC_CFG); shared or NULL pointers only when the
    quantization axis is copied whole (no offset, padding, sub-sampling, dst_offset), own buffers large enough
    for the axis's copied size plus its dst_offset (SPEC_PARAM_MISMATCH)."""
    ss, ds = src.el_params.sa, dst.el_params.sa
    sz, ssc, sfb = _ptr(ss.zero_point), _ptr(ss.scale), _ptr(ss.scale_frac_bits)
    dz, dsc, dfb = _ptr(ds.zero_point), _ptr(ds.scale), _ptr(ds.scale_frac_bits)
    fail = False
    if dz == sz:
        fail |= not (dsc == ssc and dfb == sfb)
    if dz is not None and dz != sz:
        fail |= not (dsc is not None and dsc != ssc and dfb is not None and dfb != sfb)
    if dz is None:
        fail |= not (dsc is None and dfb is None)
    r = src.rank
    for i in range(r):
        check(cfg.size[i] + cfg.offset[i] <= src.shape[i] + cfg.padding_pre[i] + cfg.padding_post[i],
              S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: size + offset of dimension {i} larger than the padded input")
        check(cfg.sub_sample_step[i] > 0, S.MLI_STATUS_BAD_FUNC_CFG, "cfg.sub_sample_step must be > 0")
        check(cfg.perm_dim[i] < r, S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.perm_dim[{i}] out of range")
    d = src.dim
    out_dim = next((k for k in range(r) if cfg.perm_dim[k] == d), 0)
    if not fail and (dz is None or dz == sz):
        fail |= not ((cfg.size[d] == 0 or cfg.size[d] == src.shape[d]) and cfg.offset[d] == 0
                     and cfg.padding_pre[d] == 0 and cfg.padding_post[d] == 0 and cfg.sub_sample_step[d] == 1
                     and cfg.dst_offset[out_dim] == 0)
    elif not fail:
        n = -(-_cpy_sizes(src, cfg)[d] // cfg.sub_sample_step[d]) + cfg.dst_offset[out_dim]
        fail |= not (ds.zero_point.capacity >= 2 * n and ds.scale.capacity >= 2 * n
                     and ds.scale_frac_bits.capacity >= n)
    check(not fail, S.MLI_STATUS_SPEC_PARAM_MISMATCH,
          "dst: quantization parameters not set up consistently for the per-axis copy")


def _mov(src, cfg, dst) -> None:
    check_tensor(src, "src")
    require(isinstance(cfg, MovCfg), S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: expected a MovCfg, got {cfg!r}")
    check_out(dst, "dst")
    r = src.rank
    per_axis = src.is_sa and src.dim != -1
    if per_axis and debug_checks():
        _check_spec_params(src, cfg, dst)
    check(not containers_overlapped(src.data, dst.data), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
          "src/dst: buffers must not overlap")
    require(all(cfg.sub_sample_step[i] > 0 and 0 <= cfg.perm_dim[i] < r and cfg.dst_offset[i] >= 0
                for i in range(r)), S.MLI_STATUS_BAD_FUNC_CFG,
            "cfg: sub_sample_step must be > 0, perm_dim < rank and dst_offset >= 0")
    cpy = _cpy_sizes(src, cfg)
    for i in range(r):
        padded = src.shape[i] + cfg.padding_pre[i] + cfg.padding_post[i]
        require(cpy[i] >= 1 and cfg.offset[i] + cpy[i] <= padded, S.MLI_STATUS_BAD_FUNC_CFG,
                f"cfg: size {cpy[i]} at offset {cfg.offset[i]} runs past dimension {i} ({padded} with padding)")
    v = src.values()
    pad = [(cfg.padding_pre[i], cfg.padding_post[i]) for i in range(r)]
    v = np.pad(v, pad) if any(p for pp in pad for p in pp) else v
    v = v[tuple(slice(cfg.offset[i], cfg.offset[i] + cpy[i], cfg.sub_sample_step[i]) for i in range(r))]
    v = np.transpose(v, cfg.perm_dim[:r]) if r else v
    write = list(v.shape)
    dims = [write[i] + cfg.dst_offset[i] for i in range(r)]
    strides = list(dst.mem_stride[:r]) + [0] * (r - len(dst.mem_stride[:r]))
    for i in range(r - 1, -1, -1):
        if cfg.dst_mem_stride[i] != 0:
            strides[i] = cfg.dst_mem_stride[i]
        elif strides[i] == 0:
            strides[i] = 1 if i == r - 1 else strides[i + 1] * dims[i + 1]
    dst.el_type = src.el_type
    dst.rank = r
    dst.shape = dims + [1] * (MLI_MAX_RANK - r)
    dst.mem_stride = strides + [0] * (MLI_MAX_RANK - r)
    if per_axis:
        _mov_params(src, cfg, dst)
    else:
        dst.el_params = ElParams(copy.copy(src.el_params.fx), copy.copy(src.el_params.sa))  # a struct copy
    check_tensor(dst, "dst", writes=True, quant=False)  # mli_chk_data_movement_dst_tensor: view in capacity
    if r == 0:
        dst.write(v)
        return
    item = dst.mem.itemsize
    start = sum(o * m for o, m in zip(cfg.dst_offset[:r], strides, strict=True))
    view = np.lib.stride_tricks.as_strided(dst.mem[start:], shape=tuple(write),
                                           strides=tuple(m * item for m in strides))
    view[...] = v.astype(dst.mem.dtype)


def _mov_params(src, cfg, dst) -> None:
    """The per-axis parameters: ``dst`` shares ``src``'s containers (its pointers are NULL or ``src``'s), or its
    own containers receive the quantization axis moved as the data is (padding with scale 1, zero point 0,
    frac bits 0; positions before ``dst_offset`` untouched)."""
    d = src.dim
    out_dim = next(k for k in range(src.rank) if cfg.perm_dim[k] == d)
    ss, ds = src.el_params.sa, dst.el_params.sa
    ds.dim = out_dim
    if _ptr(ds.scale) is None or _ptr(ds.scale) == _ptr(ss.scale):
        ds.scale, ds.zero_point, ds.scale_frac_bits = ss.scale, ss.zero_point, ss.scale_frac_bits
        return
    n = -(-_cpy_sizes(src, cfg)[d] // cfg.sub_sample_step[d])
    pos = np.arange(n) * cfg.sub_sample_step[d] + cfg.offset[d] - cfg.padding_pre[d]
    inside = (pos >= 0) & (pos < src.shape[d])
    at = np.clip(pos, 0, src.shape[d] - 1)
    o = cfg.dst_offset[out_dim]
    for name, pad in (("scale", 1), ("zero_point", 0), ("scale_frac_bits", 0)):
        sm, dm = getattr(ss, name).mem, getattr(ds, name).mem
        require(dm.size >= o + n, S.MLI_STATUS_NOT_ENGH_MEM, f"dst: {name} holds {dm.size} < {o + n} values")
        dm[o:o + n] = np.where(inside, sm[at], pad)


mov_tensor_sync = mli_kernel(_mov, name="mov_tensor_sync", doc="""``mli_mov_tensor_sync(src, cfg, dst)``: copy
    ``src`` into ``dst``'s buffer as ``cfg`` says (offset, size, sub-sampling, zero padding, permutation,
    destination offset and strides); ``dst`` takes the resulting shape (the moved sizes plus ``dst_offset``),
    element type and parameters, and its strides from ``cfg.dst_mem_stride``, else its own non-zero
    ``mem_stride``, else dense for that shape, as ``mli_mov_prepare`` sets them (a program reusing ``dst`` for
    another shape clears its ``mem_stride`` first). Elements before ``dst_offset`` keep their values. Checks
    (:func:`_check_spec_params` for per-axis sa tensors, overlapping buffers INCOMPATEBLE_TENSORS, ``dst``'s
    view within its capacity NOT_ENGH_MEM) as ``mli_chk_data_movement``. Returns a status.""")


__all__ = ["ArgmaxCfg", "krn_argmax_sa8", "krn_argmax_fx16", "MovCfg", "mov_cfg_for_copy", "mov_tensor_sync",
           "top_k_offsets"]
