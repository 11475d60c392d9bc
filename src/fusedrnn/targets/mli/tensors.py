"""``mli_tensor``: a data container with shape, memory strides, element type and quantization parameters.

Layout follows MLI 2.0 (``include/mli_types.h``): ``data`` is a flat 1-D container of the element's C type
(int8 for fx8/sa8, int16 for fx16, int32 for sa32, float32 for fp32), ``capacity`` its size in bytes, element
``idx`` sits at ``Σ idx[i]·mem_stride[i]`` (in elements; strides all 0 or None mean dense C order).
The container is memory-safe: ``data`` is a C-contiguous 1-D array with ``0 <= capacity <= data.nbytes``, and
:meth:`Tensor.values` / :meth:`Tensor.write` check the view (shape, strides) against it before touching memory
(:class:`~fusedrnn.errors.BufferLayoutError`); the kernels check the same through :mod:`.checks` and return
MLI_STATUS_BAD_TENSOR instead.
Quantization: fx types real = q·2^-frac_bits; sa types real = (q - zero_point)·scale·2^-scale_frac_bits, one
(scale, zero_point, scale_frac_bits) per tensor (``dim`` < 0) or per slice along ``dim``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import AttributeValueError, BufferLayoutError, DTypeError, ShapeError
from .config import MLI_MAX_RANK, ElType

EL_DTYPE = {
    ElType.MLI_EL_FX_8: np.dtype(np.int8),
    ElType.MLI_EL_FX_16: np.dtype(np.int16),
    ElType.MLI_EL_SA_8: np.dtype(np.int8),
    ElType.MLI_EL_SA_32: np.dtype(np.int32),
    ElType.MLI_EL_FP_32: np.dtype(np.float32),
}
FX_TYPES = (ElType.MLI_EL_FX_8, ElType.MLI_EL_FX_16)
SA_TYPES = (ElType.MLI_EL_SA_8, ElType.MLI_EL_SA_32)


def dense_strides(shape: Sequence[int]) -> list[int]:
    """C-order element strides of ``shape``."""
    st, acc = [], 1
    for s in reversed(list(shape)):
        st.append(acc)
        acc *= int(s)
    return st[::-1]


class Tensor:
    """An MLI tensor. Build one with :func:`fx_tensor`, :func:`sa_tensor` or :func:`empty_tensor`; kernels
    read ``values()`` and write their results into ``data`` (and for outputs ``shape``/``rank``/``mem_stride``)."""

    def __init__(self, data=None, shape: Sequence[int] = (), *, el_type: ElType, mem_stride=None,
                 frac_bits: int = 0, scale=None, zero_point=None, scale_frac_bits=None, dim: int = -1,
                 capacity: int | None = None):
        try:
            self.el_type = ElType(el_type)
        except ValueError:
            raise AttributeValueError(f"el_type: expected an ElType ({', '.join(e.name for e in ElType)}), "
                                      f"got {el_type!r}") from None
        dt = EL_DTYPE[self.el_type]
        if data is not None:
            data = np.asarray(data)
            if data.dtype != dt:
                raise DTypeError(f"data: expected a {dt.name} container for {self.el_type.name}, got {data.dtype}")
            if data.ndim != 1:
                raise ShapeError(f"data: expected a flat (1-D) container, got shape {data.shape}")
            if not data.flags.c_contiguous:
                raise ShapeError(f"data: expected a C-contiguous container, got a strided view (byte stride "
                                 f"{data.strides[0]}, element size {data.itemsize})")
        if capacity is not None and not 0 <= int(capacity) <= (0 if data is None else data.nbytes):
            raise AttributeValueError(f"capacity: expected 0 to {0 if data is None else data.nbytes} bytes (the "
                                      f"container's size), got {capacity}")
        self.data = data
        self.shape = [int(s) for s in shape]
        self.rank = len(self.shape)
        self.mem_stride = [0] * self.rank if mem_stride is None else [int(s) for s in mem_stride]
        self.capacity = (0 if data is None else data.nbytes) if capacity is None else int(capacity)
        self.frac_bits = int(frac_bits)
        self.dim = int(dim)
        self.scale = np.atleast_1d(np.asarray(1 if scale is None else scale)).astype(np.int16)
        n = self.scale.size
        self.zero_point = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point)).astype(np.int16)
        if self.zero_point.size == 1 and n > 1:
            self.zero_point = np.repeat(self.zero_point, n)
        self.scale_frac_bits = np.atleast_1d(np.asarray(0 if scale_frac_bits is None else scale_frac_bits)).astype(
            np.int8)
        if self.scale_frac_bits.size == 1 and n > 1:
            self.scale_frac_bits = np.repeat(self.scale_frac_bits, n)

    # ---- facts -------------------------------------------------------------------------------------------
    @property
    def is_fx(self) -> bool:
        return self.el_type in FX_TYPES

    @property
    def is_sa(self) -> bool:
        return self.el_type in SA_TYPES

    @property
    def element_size(self) -> int:
        return EL_DTYPE[self.el_type].itemsize

    def strides(self) -> list[int]:
        """Element strides in effect (dense when ``mem_stride`` is unset / all zero)."""
        if self.rank == 0 or all(s == 0 for s in self.mem_stride):
            return dense_strides(self.shape)
        return list(self.mem_stride)

    def count(self, start_dim: int = 0) -> int:
        n = 1
        for s in self.shape[start_dim:]:
            n *= s
        return n

    def required_elements(self) -> int:
        """Container elements the shape and strides span."""
        if self.count() == 0:
            return 0
        return sum((s - 1) * m for s, m in zip(self.shape, self.strides(), strict=True)) + 1

    # ---- memory safety -----------------------------------------------------------------------------------
    def container_problem(self, *, writes: bool = False) -> str | None:
        """Why ``data`` is not a usable container, or None: a 1-D C-contiguous ndarray of the element type's
        dtype, writable when ``writes``, holding at least ``capacity`` bytes (``0 <= capacity <= data.nbytes``)."""
        d = self.data
        if not isinstance(d, np.ndarray):
            return f"data: expected a NumPy container, got {type(d).__name__}"
        if self.el_type not in EL_DTYPE or d.dtype != EL_DTYPE[self.el_type]:
            return f"data: container dtype {d.dtype} does not match element type {self.el_type!r}"
        if d.ndim != 1 or not d.flags.c_contiguous:
            return f"data: expected a C-contiguous 1-D container, got shape {d.shape} with byte strides {d.strides}"
        if writes and not d.flags.writeable:
            return "data: the kernel writes this tensor but its container is read-only"
        if not isinstance(self.capacity, (int, np.integer)) or not 0 <= self.capacity <= d.nbytes:
            return f"capacity: expected 0 to {d.nbytes} bytes (the container's size), got {self.capacity!r}"
        return None

    def view_problem(self, *, writes: bool = False) -> str | None:
        """Why the view (``shape``, ``mem_stride``) does not lie inside the container, or None:
        :meth:`container_problem`, then dimensions >= 0, one stride per dimension (unless all are 0, dense), and
        every element offset Σ idx[i]·stride[i] in [0, data.size) (and within ``capacity`` for rank > 0)."""
        p = self.container_problem(writes=writes)
        if p is not None:
            return p
        shape, ms = self.shape, self.mem_stride
        if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape):
            return f"shape: expected dimensions >= 0, got {shape}"
        if not all(isinstance(m, (int, np.integer)) for m in ms) or (
                any(m != 0 for m in ms) and len(ms) != len(shape)):
            return f"mem_stride: expected {len(shape)} integer strides for shape {shape}, got {ms}"
        if self.count() == 0:
            return None
        span = [(int(s) - 1) * int(m) for s, m in zip(shape, self.strides(), strict=True)]
        lo, hi = sum(v for v in span if v < 0), sum(v for v in span if v > 0)
        limit = self.data.size if not shape else min(self.data.size, self.capacity // self.element_size)
        if lo < 0 or hi >= limit:
            return (f"shape {shape} with strides {self.strides()} spans elements {lo}..{hi}, outside the container's "
                    f"{limit} elements (data.size {self.data.size}, capacity {self.capacity} bytes)")
        return None

    def _require(self, problem: str | None, what: str) -> None:
        if problem is not None:
            raise BufferLayoutError(f"{what}: {problem}")

    # ---- data --------------------------------------------------------------------------------------------
    def values(self) -> np.ndarray:
        """The elements in logical shape, as int64 (float32 for fp32); a copy. Raises
        :class:`~fusedrnn.errors.BufferLayoutError` when the view does not lie inside the container."""
        self._require(self.view_problem(), "values()")
        st = self.strides()
        item = self.data.itemsize
        view = np.lib.stride_tricks.as_strided(self.data, shape=tuple(self.shape),
                                               strides=tuple(s * item for s in st), writeable=False)
        return view.astype(np.float32 if self.el_type == ElType.MLI_EL_FP_32 else np.int64)

    def write(self, values: np.ndarray, shape: Sequence[int] | None = None) -> None:
        """Store ``values`` densely (kernel outputs); sets shape, rank and dense mem_stride when ``shape`` given.
        Raises :class:`~fusedrnn.errors.BufferLayoutError` (and changes nothing) when the view would not lie inside
        the container or the container is read-only."""
        values = np.asarray(values)
        old = self.shape, self.rank, self.mem_stride
        if shape is not None:
            self.shape = [int(s) for s in shape]
            self.rank = len(self.shape)
            self.mem_stride = dense_strides(self.shape)
        problem = self.view_problem(writes=True)
        if problem is not None:
            self.shape, self.rank, self.mem_stride = old
            self._require(problem, "write()")
        st = self.strides()
        item = self.data.itemsize
        view = np.lib.stride_tricks.as_strided(self.data, shape=tuple(self.shape),
                                               strides=tuple(s * item for s in st))
        view[...] = values.reshape(self.shape).astype(self.data.dtype)

    def params(self, k: int | None = None) -> tuple:
        """(scale, zero_point, scale_frac_bits) as Python ints (slice ``k``) or int64 arrays (all slices)."""
        if k is None:
            return (self.scale.astype(np.int64), self.zero_point.astype(np.int64),
                    self.scale_frac_bits.astype(np.int64))
        return int(self.scale[k]), int(self.zero_point[k]), int(self.scale_frac_bits[k])

    def to_float(self) -> np.ndarray:
        """Dequantized values (float64), per-axis parameters broadcast along ``dim``."""
        v = self.values().astype(np.float64)
        if self.el_type == ElType.MLI_EL_FP_32:
            return v
        if self.is_fx:
            return np.ldexp(v, -self.frac_bits)
        s, z, f = self.params()
        if self.dim >= 0:
            shp = [1] * self.rank
            shp[self.dim] = -1
            s, z, f = s.reshape(shp), z.reshape(shp), f.reshape(shp)
        return (v - z) * np.ldexp(s.astype(np.float64), -f)

    def copy(self) -> Tensor:
        t = Tensor(None if self.data is None else self.data.copy(), self.shape, el_type=self.el_type,
                   mem_stride=self.mem_stride, frac_bits=self.frac_bits, scale=self.scale.copy(),
                   zero_point=self.zero_point.copy(), scale_frac_bits=self.scale_frac_bits.copy(), dim=self.dim,
                   capacity=self.capacity)
        return t

    def __repr__(self) -> str:
        q = (f"frac_bits={self.frac_bits}" if self.is_fx else
             f"scale={self.scale.tolist()}, zero_point={self.zero_point.tolist()}, "
             f"scale_frac_bits={self.scale_frac_bits.tolist()}, dim={self.dim}")
        return f"Tensor({self.el_type.name}, shape={self.shape}, {q}, capacity={self.capacity})"


# ---- constructors (Pythonic helpers) --------------------------------------------------------------------
def _container(values, el_type: ElType) -> tuple[np.ndarray, list[int]]:
    a = np.asarray(values)
    dt = EL_DTYPE[ElType(el_type)]
    if a.dtype.kind not in "iuf" or (dt.kind == "i" and a.dtype.kind == "f"):
        raise DTypeError(f"values: expected integers for {ElType(el_type).name}, got dtype {a.dtype}")
    info = np.iinfo(dt) if dt.kind == "i" else None
    if info is not None and a.size and (a.min() < info.min or a.max() > info.max):
        raise AttributeValueError(f"values: expected values in [{info.min}, {info.max}] for "
                                  f"{ElType(el_type).name}, got [{a.min()}, {a.max()}]")
    return np.ascontiguousarray(a.astype(dt)).ravel().copy(), list(a.shape)


def fx_tensor(values, frac_bits: int, el_type: ElType = ElType.MLI_EL_FX_16) -> Tensor:
    """A dense fx tensor holding ``values`` (integers) with ``frac_bits``."""
    data, shape = _container(values, el_type)
    return Tensor(data, shape, el_type=el_type, frac_bits=frac_bits)


def sa_tensor(values, scale, zero_point, scale_frac_bits, *, dim: int = -1,
              el_type: ElType = ElType.MLI_EL_SA_8) -> Tensor:
    """A dense sa tensor holding ``values`` (integers); per-axis parameters when ``dim`` >= 0."""
    data, shape = _container(values, el_type)
    return Tensor(data, shape, el_type=el_type, scale=scale, zero_point=zero_point,
                  scale_frac_bits=scale_frac_bits, dim=dim)


def empty_tensor(el_type: ElType, elements: int, *, frac_bits: int = 0, scale=1, zero_point=0,
                 scale_frac_bits=0) -> Tensor:
    """An output tensor: a zeroed container of ``elements`` elements and the quantization the caller wants."""
    data = np.zeros(int(elements), EL_DTYPE[ElType(el_type)])
    return Tensor(data, [int(elements)], el_type=el_type, frac_bits=frac_bits, scale=scale, zero_point=zero_point,
                  scale_frac_bits=scale_frac_bits)


__all__ = ["Tensor", "fx_tensor", "sa_tensor", "empty_tensor", "dense_strides", "EL_DTYPE", "MLI_MAX_RANK"]
