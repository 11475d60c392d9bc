"""``mli_tensor`` and ``mli_data_container``: data with shape, memory strides, element type and quantization
parameters, with the fields of MLI 2.0's ``include/mli_types.h`` under their C names.

- ``t.data`` is an ``mli_data_container`` (:class:`DataContainer`): ``t.data.mem`` the buffer, a flat 1-D NumPy
  array of the element's C type (int8 for fx8/sa8, int16 for fx16, int32 for sa32, float32 for fp32; C's
  ``mem.pi8/pi16/pi32/pf32`` pointers), and ``t.data.capacity`` its size in bytes. A rank-0 tensor keeps its value
  in the container (C's ``mem.i8/i16/i32/f32``): ``t.data.mem`` is then a number and capacity is ignored.
- ``t.shape`` and ``t.mem_stride`` are fixed arrays of ``MLI_MAX_RANK`` entries; ``t.rank`` says how many count
  (a rank-2 tensor may have shape ``[128, 32, 0, 0]``). Element ``idx`` sits at ``Σ idx[i]·mem_stride[i]``
  (in elements); strides all 0 mean dense C order (MLI 1.x).
- ``t.el_params.fx.frac_bits``: fx types, real = q·2^-frac_bits. ``t.el_params.sa`` (1.x: ``el_params.asym``):
  ``scale``, ``zero_point`` and ``scale_frac_bits`` containers and ``dim``; real = (q - zero_point)·scale·
  2^-scale_frac_bits, one value per tensor (``dim`` < 0: the value in ``.mem``, capacity 0) or an array of one
  value per slice along ``dim``.

The flattened names of earlier fusedrnn versions stay as aliases: ``t.capacity`` (= ``t.data.capacity``, also
MLI 1.x's field), ``t.frac_bits``, ``t.scale``, ``t.zero_point``, ``t.scale_frac_bits`` (int arrays) and
``t.dim``; assigning an array to ``t.data`` sets ``t.data.mem`` (MLI 1.x's ``void *data``), and ``t.data`` passes
array attributes through to the buffer (``t.data.dtype``, ``t.data[0]``).

The container is memory-safe: the buffer is a C-contiguous 1-D array with ``0 <= capacity <= mem.nbytes``, and
:meth:`Tensor.values` / :meth:`Tensor.write` check the view (shape, strides) against it before touching memory
(:class:`~fusedrnn.errors.BufferLayoutError`); the kernels check the same through :mod:`.checks` and return
MLI_STATUS_BAD_TENSOR instead, in every build mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ...errors import AttributeValueError, BufferLayoutError, DTypeError, ShapeError
from .config import EL_TYPE_FROM_V1, EL_TYPE_TO_V1, MLI_MAX_RANK, ElType, ElTypeV1

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


def fixed(values: Sequence[int] | None) -> list[int]:
    """A C array of ``MLI_MAX_RANK`` entries: ``values`` padded with zeros (longer lists are kept whole, for the
    checks to refuse)."""
    v = [] if values is None else [int(s) for s in values]
    return v + [0] * (MLI_MAX_RANK - len(v))


class DataContainer:
    """``mli_data_container``: ``capacity`` (bytes) and ``mem``, a 1-D NumPy buffer (C's ``pi8/pi16/pi32/pf32``
    pointers) or a number (C's ``i8/i16/i32/f32`` values: a rank-0 tensor, per-tensor quantization parameters).
    ``capacity`` defaults to the buffer's size (0 for a number). Array attributes and indexing pass through to the
    buffer (the earlier flattened ``tensor.data`` array)."""

    __slots__ = ("capacity", "mem")

    def __init__(self, capacity: int | None = None, mem=None):
        self.mem = mem
        self.capacity = (mem.nbytes if isinstance(mem, np.ndarray) else 0) if capacity is None else capacity

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            mem = object.__getattribute__(self, "mem")
        except AttributeError:
            raise AttributeError(name) from None
        return getattr(mem, name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.mem, dtype)

    def __getitem__(self, key):
        return self.mem[key]

    def __setitem__(self, key, value):
        self.mem[key] = value

    def __len__(self) -> int:
        return len(self.mem)

    def __repr__(self) -> str:
        m = self.mem
        what = f"{m.dtype}[{m.size}]" if isinstance(m, np.ndarray) else repr(m)
        return f"DataContainer(capacity={self.capacity!r}, mem={what})"


class FxParams:
    """``el_params.fx``: ``frac_bits``."""

    __slots__ = ("frac_bits",)

    def __init__(self, frac_bits: int = 0):
        self.frac_bits = frac_bits

    def __repr__(self) -> str:
        return f"FxParams(frac_bits={self.frac_bits!r})"


class SaParams:
    """``el_params.sa`` (MLI 1.x ``el_params.asym``): ``zero_point``, ``scale`` and ``scale_frac_bits``
    containers (the value in ``.mem`` per tensor, an array per axis) and ``dim`` (< 0: per tensor);
    ``type`` is MLI 2.0's ``mli_el_param_type`` (unused by the kernels)."""

    __slots__ = ("type", "zero_point", "scale", "dim", "scale_frac_bits")

    def __init__(self, zero_point=None, scale=None, dim: int = -1, scale_frac_bits=None, type: int = 0):
        self.type = type
        self.zero_point = DataContainer(mem=0) if zero_point is None else zero_point
        self.scale = DataContainer(mem=1) if scale is None else scale
        self.dim = dim
        self.scale_frac_bits = DataContainer(mem=0) if scale_frac_bits is None else scale_frac_bits

    def __repr__(self) -> str:
        return (f"SaParams(zero_point={self.zero_point!r}, scale={self.scale!r}, dim={self.dim!r}, "
                f"scale_frac_bits={self.scale_frac_bits!r})")


class ElParams:
    """``mli_element_params``: ``fx`` (:class:`FxParams`) and ``sa`` (:class:`SaParams`, also ``asym``)."""

    __slots__ = ("fx", "sa")

    def __init__(self, fx: FxParams | None = None, sa: SaParams | None = None):
        self.fx = FxParams() if fx is None else fx
        self.sa = SaParams() if sa is None else sa

    @property
    def asym(self) -> SaParams:
        """MLI 1.x's name of :attr:`sa`."""
        return self.sa

    @asym.setter
    def asym(self, value: SaParams) -> None:
        self.sa = value

    def __repr__(self) -> str:
        return f"ElParams(fx={self.fx!r}, sa={self.sa!r})"


def _param_container(value, dtype, per_axis: bool) -> DataContainer:
    """A quantization parameter container: the number itself (capacity 0) per tensor, an array per axis."""
    if isinstance(value, DataContainer):
        return value
    a = np.atleast_1d(np.asarray(value)).astype(dtype)
    if a.size == 1 and not per_axis:
        return DataContainer(0, int(a[0]))
    return DataContainer(a.nbytes, np.ascontiguousarray(a.ravel()))


def _param_array(c: DataContainer, dtype, n: int | None) -> np.ndarray:
    """The values of a quantization parameter container as an array (its first ``n`` entries when given)."""
    m = getattr(c, "mem", c)
    a = np.atleast_1d(np.asarray(0 if m is None else m)).ravel().astype(dtype)
    return a[:n] if n is not None and a.size > n else a


class Tensor:
    """An MLI tensor (``mli_tensor``). Build one with :func:`fx_tensor`, :func:`sa_tensor` or
    :func:`empty_tensor`, or field by field as in C: ``Tensor(el_type=MLI_EL_FX_16)`` then ``t.data.mem = buf``,
    ``t.data.capacity = buf.nbytes``, ``t.shape[0] = 32``, ``t.mem_stride[0] = 1``, ``t.rank = 1``,
    ``t.el_params.fx.frac_bits = 12``. Kernels read :meth:`values` and write their results into the buffer."""

    def __init__(self, data=None, shape: Sequence[int] = (), *, el_type: ElType, mem_stride=None,
                 frac_bits: int = 0, scale=None, zero_point=None, scale_frac_bits=None, dim: int = -1,
                 capacity: int | None = None, rank: int | None = None):
        try:
            self.el_type = ElType(el_type)
        except ValueError:
            raise AttributeValueError(f"el_type: expected an ElType ({', '.join(e.name for e in ElType)}), "
                                      f"got {el_type!r}") from None
        dt = EL_DTYPE[self._el]
        if isinstance(data, DataContainer):
            data, capacity = data.mem, data.capacity if capacity is None else capacity
        if isinstance(data, np.ndarray) or (data is not None and not np.isscalar(data)):
            data = np.asarray(data)
            if data.dtype != dt:
                raise DTypeError(f"data: expected a {dt.name} container for {self._el.name}, got {data.dtype}")
            if data.ndim != 1:
                raise ShapeError(f"data: expected a flat (1-D) container, got shape {data.shape}")
            if not data.flags.c_contiguous:
                raise ShapeError(f"data: expected a C-contiguous container, got a strided view (byte stride "
                                 f"{data.strides[0]}, element size {data.itemsize})")
        nbytes = data.nbytes if isinstance(data, np.ndarray) else 0
        if capacity is not None and not 0 <= int(capacity) <= nbytes:
            raise AttributeValueError(f"capacity: expected 0 to {nbytes} bytes (the container's size), got {capacity}")
        self.data = DataContainer(nbytes if capacity is None else int(capacity), data)
        dims = [int(s) for s in shape]
        self.rank = len(dims) if rank is None else int(rank)
        self._shape = fixed(dims)
        self._mem_stride = fixed(dense_strides(dims[:self.rank]) if mem_stride is None else mem_stride)
        self.el_params = ElParams(FxParams(int(frac_bits)), SaParams(dim=int(dim)))
        scale = np.atleast_1d(np.asarray(1 if scale is None else scale))
        n = scale.size
        per_axis = int(dim) >= 0
        zp = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point))
        sfb = np.atleast_1d(np.asarray(0 if scale_frac_bits is None else scale_frac_bits))
        self.scale = scale
        self.zero_point = np.repeat(zp, n) if zp.size == 1 and (n > 1 or per_axis) else zp
        self.scale_frac_bits = np.repeat(sfb, n) if sfb.size == 1 and (n > 1 or per_axis) else sfb

    @property
    def _el(self) -> ElType:
        """The element type in MLI 2.0's numbering, which the kernels use (:class:`TensorV1` shows 1.x's)."""
        return self.el_type

    # ---- C fields --------------------------------------------------------------------------------------------
    @property
    def data(self) -> DataContainer:
        """``mli_data_container`` {capacity, mem}."""
        return self._data

    @data.setter
    def data(self, value) -> None:
        """A container replaces the tensor's; an array or None becomes its ``mem`` (capacity unchanged)."""
        if isinstance(value, DataContainer):
            self._data = value
        elif "_data" in self.__dict__:
            self._data.mem = value
        else:
            self._data = DataContainer(mem=value)

    @property
    def mem(self):
        """The buffer (``data.mem``)."""
        return self._data.mem

    @property
    def shape(self) -> list[int]:
        """``uint32_t shape[MLI_MAX_RANK]``: the first ``rank`` entries count."""
        return self._shape

    @shape.setter
    def shape(self, value: Sequence[int]) -> None:
        self._shape = fixed(value)

    @property
    def mem_stride(self) -> list[int]:
        """``int32_t mem_stride[MLI_MAX_RANK]`` (elements): the first ``rank`` entries count."""
        return self._mem_stride

    @mem_stride.setter
    def mem_stride(self, value: Sequence[int] | None) -> None:
        self._mem_stride = fixed(value)

    @property
    def dims(self) -> list[int]:
        """The logical shape: ``shape[:rank]``."""
        return list(self._shape[:self.rank])

    @property
    def mstrides(self) -> list[int]:
        """``mem_stride[:rank]``."""
        return list(self._mem_stride[:self.rank])

    # ---- flattened aliases -----------------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """``data.capacity`` (MLI 1.x: the tensor's ``capacity``)."""
        return self._data.capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        self._data.capacity = value

    @property
    def frac_bits(self) -> int:
        """``el_params.fx.frac_bits``."""
        return self.el_params.fx.frac_bits

    @frac_bits.setter
    def frac_bits(self, value: int) -> None:
        self.el_params.fx.frac_bits = value

    @property
    def dim(self) -> int:
        """``el_params.sa.dim``."""
        return self.el_params.sa.dim

    @dim.setter
    def dim(self, value: int) -> None:
        self.el_params.sa.dim = value

    def _n_params(self) -> int | None:
        d = self.dim
        return self._shape[d] if isinstance(d, (int, np.integer)) and 0 <= d < min(self.rank, len(self._shape)) \
            else None

    @property
    def scale(self) -> np.ndarray:
        """``el_params.sa.scale`` as an int16 array (one entry per tensor, ``shape[dim]`` per axis)."""
        return _param_array(self.el_params.sa.scale, np.int16, self._n_params())

    @scale.setter
    def scale(self, value) -> None:
        self.el_params.sa.scale = _param_container(value, np.int16, self.dim >= 0)

    @property
    def zero_point(self) -> np.ndarray:
        """``el_params.sa.zero_point`` as an int16 array."""
        return _param_array(self.el_params.sa.zero_point, np.int16, self._n_params())

    @zero_point.setter
    def zero_point(self, value) -> None:
        self.el_params.sa.zero_point = _param_container(value, np.int16, self.dim >= 0)

    @property
    def scale_frac_bits(self) -> np.ndarray:
        """``el_params.sa.scale_frac_bits`` as an int8 array."""
        return _param_array(self.el_params.sa.scale_frac_bits, np.int8, self._n_params())

    @scale_frac_bits.setter
    def scale_frac_bits(self, value) -> None:
        self.el_params.sa.scale_frac_bits = _param_container(value, np.int8, self.dim >= 0)

    # ---- facts -------------------------------------------------------------------------------------------
    @property
    def is_fx(self) -> bool:
        return self._el in FX_TYPES

    @property
    def is_sa(self) -> bool:
        return self._el in SA_TYPES

    @property
    def is_scalar_value(self) -> bool:
        """A rank-0 tensor whose container holds the value itself."""
        return self.rank == 0 and not isinstance(self.mem, np.ndarray)

    @property
    def element_size(self) -> int:
        return EL_DTYPE[self._el].itemsize

    def strides(self) -> list[int]:
        """Element strides in effect (dense when ``mem_stride[:rank]`` is all zero)."""
        ms = self.mstrides
        if self.rank == 0 or all(s == 0 for s in ms):
            return dense_strides(self.dims)
        return ms

    def count(self, start_dim: int = 0) -> int:
        n = 1
        for s in self.dims[start_dim:]:
            n *= s
        return n

    def required_elements(self) -> int:
        """Container elements the shape and strides span."""
        if self.count() == 0:
            return 0
        return sum((s - 1) * m for s, m in zip(self.dims, self.strides(), strict=True)) + 1

    # ---- memory safety -----------------------------------------------------------------------------------
    def container_problem(self, *, writes: bool = False) -> str | None:
        """Why ``data`` is not a usable container, or None: a 1-D C-contiguous ndarray of the element type's
        dtype, writable when ``writes``, holding at least ``capacity`` bytes (``0 <= capacity <= mem.nbytes``);
        for a rank-0 tensor also a number (the value; capacity ignored)."""
        d = self.mem
        if not isinstance(self._data, DataContainer):
            return f"data: expected a DataContainer, got {type(self._data).__name__}"
        if self.rank == 0 and isinstance(d, (int, float, np.integer, np.floating)) and not writes:
            return None
        if not isinstance(d, np.ndarray):
            return f"data: expected a NumPy container, got {type(d).__name__}"
        if self._el not in EL_DTYPE or d.dtype != EL_DTYPE[self._el]:
            return f"data: container dtype {d.dtype} does not match element type {self.el_type!r}"
        if d.ndim != 1 or not d.flags.c_contiguous:
            return f"data: expected a C-contiguous 1-D container, got shape {d.shape} with byte strides {d.strides}"
        if writes and not d.flags.writeable:
            return "data: the kernel writes this tensor but its container is read-only"
        if self.rank == 0:
            return None if d.size >= 1 else "data: a rank-0 tensor's buffer holds no element"
        if not isinstance(self.capacity, (int, np.integer)) or not 0 <= self.capacity <= d.nbytes:
            return f"capacity: expected 0 to {d.nbytes} bytes (the container's size), got {self.capacity!r}"
        return None

    def view_problem(self, *, writes: bool = False) -> str | None:
        """Why the view (``shape``, ``mem_stride``, ``rank``) does not lie inside the container, or None:
        :meth:`container_problem`, then rank 0..len(shape), dimensions >= 0, integer strides, and every element
        offset Σ idx[i]·stride[i] in [0, mem.size) (and within ``capacity`` for rank > 0)."""
        p = self.container_problem(writes=writes)
        if p is not None:
            return p
        if not isinstance(self.rank, (int, np.integer)) or not 0 <= self.rank <= len(self._shape) \
                or self.rank > len(self._mem_stride):
            return f"rank: expected 0 to {len(self._shape)}, got {self.rank!r}"
        shape, ms = self.dims, self.mstrides
        if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape):
            return f"shape: expected dimensions >= 0, got {shape}"
        if not all(isinstance(m, (int, np.integer)) for m in ms):
            return f"mem_stride: expected {len(shape)} integer strides for shape {shape}, got {ms}"
        if self.rank == 0 or self.count() == 0:
            return None
        span = [(int(s) - 1) * int(m) for s, m in zip(shape, self.strides(), strict=True)]
        lo, hi = sum(v for v in span if v < 0), sum(v for v in span if v > 0)
        limit = min(self.mem.size, self.capacity // self.element_size)
        if lo < 0 or hi >= limit:
            return (f"shape {shape} with strides {self.strides()} spans elements {lo}..{hi}, outside the container's "
                    f"{limit} elements (mem.size {self.mem.size}, capacity {self.capacity} bytes)")
        return None

    def _require(self, problem: str | None, what: str) -> None:
        if problem is not None:
            raise BufferLayoutError(f"{what}: {problem}")

    # ---- data --------------------------------------------------------------------------------------------
    def values(self) -> np.ndarray:
        """The elements in logical shape, as int64 (float32 for fp32); a copy. A rank-0 tensor gives its value
        (shape ()). Raises :class:`~fusedrnn.errors.BufferLayoutError` when the view does not lie inside the
        container."""
        self._require(self.view_problem(), "values()")
        kind = np.float32 if self._el == ElType.MLI_EL_FP_32 else np.int64
        if self.rank == 0:
            m = self.mem
            v = m[0] if isinstance(m, np.ndarray) else m
            return np.asarray(np.asarray(v).astype(EL_DTYPE[self._el]), dtype=kind)
        st = self.strides()
        item = self.mem.itemsize
        view = np.lib.stride_tricks.as_strided(self.mem, shape=tuple(self.dims),
                                               strides=tuple(s * item for s in st), writeable=False)
        return view.astype(kind)

    def write(self, values: np.ndarray, shape: Sequence[int] | None = None) -> None:
        """Store ``values`` densely (kernel outputs); sets shape, rank and dense mem_stride when ``shape`` given.
        Raises :class:`~fusedrnn.errors.BufferLayoutError` (and changes nothing) when the view would not lie inside
        the container or the container is read-only."""
        values = np.asarray(values)
        old = self._shape, self.rank, self._mem_stride
        if shape is not None:
            dims = [int(s) for s in shape]
            self._shape, self.rank, self._mem_stride = fixed(dims), len(dims), fixed(dense_strides(dims))
        problem = self.view_problem(writes=True)
        if problem is not None:
            self._shape, self.rank, self._mem_stride = old
            self._require(problem, "write()")
        item = self.mem.itemsize
        if self.rank == 0:
            self.mem[0] = values.reshape(()).astype(self.mem.dtype)
            return
        view = np.lib.stride_tricks.as_strided(self.mem, shape=tuple(self.dims),
                                               strides=tuple(s * item for s in self.strides()))
        view[...] = values.reshape(self.dims).astype(self.mem.dtype)

    def params(self, k: int | None = None) -> tuple:
        """(scale, zero_point, scale_frac_bits) as Python ints (slice ``k``) or int64 arrays (all slices)."""
        s, z, f = self.scale, self.zero_point, self.scale_frac_bits
        if k is None:
            return s.astype(np.int64), z.astype(np.int64), f.astype(np.int64)
        return int(s[k]), int(z[k]), int(f[k])

    def to_float(self) -> np.ndarray:
        """Dequantized values (float64), per-axis parameters broadcast along ``dim``."""
        v = self.values().astype(np.float64)
        if self._el == ElType.MLI_EL_FP_32:
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
        m = self.mem
        t = type(self)(m.copy() if isinstance(m, np.ndarray) else m, self.dims, el_type=self._el,
                   mem_stride=self.mem_stride, frac_bits=self.frac_bits, dim=self.dim, capacity=self.capacity,
                   rank=self.rank)
        t.el_params.sa.scale, t.el_params.sa.zero_point, t.el_params.sa.scale_frac_bits = (
            DataContainer(c.capacity, c.mem.copy() if isinstance(c.mem, np.ndarray) else c.mem)
            for c in (self.el_params.sa.scale, self.el_params.sa.zero_point, self.el_params.sa.scale_frac_bits))
        return t

    def __copy__(self) -> Tensor:
        """C's struct assignment (``mli_tensor t2 = t1;``): the fields by value, the buffers (and per-axis
        parameter arrays) shared."""
        t = type(self).__new__(type(self))
        t.el_type, t.rank = self._el, self.rank
        t._data = DataContainer(self._data.capacity, self._data.mem)
        t._shape, t._mem_stride = list(self._shape), list(self._mem_stride)
        sa = self.el_params.sa
        t.el_params = ElParams(FxParams(self.el_params.fx.frac_bits), SaParams(
            *(DataContainer(c.capacity, c.mem) if isinstance(c, DataContainer) else c
              for c in (sa.zero_point, sa.scale)), sa.dim,
            DataContainer(sa.scale_frac_bits.capacity, sa.scale_frac_bits.mem)
            if isinstance(sa.scale_frac_bits, DataContainer) else sa.scale_frac_bits, sa.type))
        return t

    def __repr__(self) -> str:
        q = (f"frac_bits={self.frac_bits}" if self.is_fx else
             f"scale={self.scale.tolist()}, zero_point={self.zero_point.tolist()}, "
             f"scale_frac_bits={self.scale_frac_bits.tolist()}, dim={self.dim}")
        return f"Tensor({self.el_type.name}, shape={self.dims}, rank={self.rank}, {q}, capacity={self.capacity})"


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
    """A dense fx tensor holding ``values`` (integers) with ``frac_bits``; a 0-d value makes a rank-0 tensor."""
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
    """An output tensor: a zeroed container of ``elements`` elements, shape [elements], and the quantization the
    caller wants."""
    data = np.zeros(int(elements), EL_DTYPE[ElType(el_type)])
    return Tensor(data, [int(elements)], el_type=el_type, frac_bits=frac_bits, scale=scale, zero_point=zero_point,
                  scale_frac_bits=scale_frac_bits)



def el_type_v1(value) -> ElType:
    """A 1.x element type (an :class:`ElTypeV1` or its number 0..3) as the 2.0 type the kernels use; a 2.0
    :class:`ElType` member passes through (the kernels assign those, and fp32 has no 1.x number)."""
    if isinstance(value, ElType):
        return value
    try:
        return EL_TYPE_FROM_V1[ElTypeV1(value)]
    except (ValueError, TypeError):
        raise AttributeValueError(f"el_type: expected an MLI 1.x element type "
                                  f"({', '.join(f'{e.name}={e.value}' for e in ElTypeV1)}), got {value!r}") from None


class TensorV1(Tensor):
    """An MLI 1.x tensor (made through :mod:`fusedrnn.mli.v1`): a :class:`Tensor` whose ``el_type`` reads and
    writes 1.1.1's numbers (:class:`ElTypeV1`: ``MLI_EL_FX_8`` = 0, ``MLI_EL_FX_16`` = 1, ``MLI_EL_ASYM_I8`` = 2,
    ``MLI_EL_ASYM_I32`` = 3; an fp32 tensor shows 2.0's ``MLI_EL_FP_32``, which 1.x lacks). The tensor keeps the
    2.0 type inside; kernels see :meth:`as_v2`, a 2.0 view sharing every field, so their writes land here."""

    def __init__(self, data=None, shape: Sequence[int] = (), *, el_type: ElTypeV1 | ElType, **fields):
        super().__init__(data, shape, el_type=el_type_v1(el_type), **fields)

    @property
    def el_type(self) -> ElTypeV1 | ElType:
        el = self.__dict__["el_type"]
        return EL_TYPE_TO_V1.get(el, el)

    @el_type.setter
    def el_type(self, value) -> None:
        self.__dict__["el_type"] = el_type_v1(value)

    @property
    def _el(self) -> ElType:
        return self.__dict__["el_type"]

    def as_v2(self) -> Tensor:
        """The same tensor as a 2.0 :class:`Tensor` (shared fields: writes to either show in both)."""
        t = Tensor.__new__(Tensor)
        t.__dict__ = self.__dict__
        return t

    def __repr__(self) -> str:
        return "TensorV1" + super().__repr__()[len("Tensor"):]


def as_v2(obj):
    """``obj`` as the kernels see it: a :class:`TensorV1` as its 2.0 view, a dataclass (a configuration) holding
    one as a copy holding the view (1.x's ``cfg.ir_tsr``), anything else as is."""
    if isinstance(obj, TensorV1):
        return obj.as_v2()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: v.as_v2() for f in dataclasses.fields(obj)
                   if isinstance(v := getattr(obj, f.name), TensorV1)}
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj


def fx_tensor_v1(values, frac_bits: int, el_type: ElTypeV1 = ElTypeV1.MLI_EL_FX_16) -> TensorV1:
    """:func:`fx_tensor` as a 1.x tensor (``el_type`` in 1.x numbers)."""
    data, shape = _container(values, el_type_v1(el_type))
    return TensorV1(data, shape, el_type=el_type, frac_bits=frac_bits)


def empty_tensor_v1(el_type: ElTypeV1, elements: int, *, frac_bits: int = 0, scale=1, zero_point=0,
                    scale_frac_bits=0) -> TensorV1:
    """:func:`empty_tensor` as a 1.x tensor (``el_type`` in 1.x numbers)."""
    el = el_type_v1(el_type)
    return TensorV1(np.zeros(int(elements), EL_DTYPE[el]), [int(elements)], el_type=el, frac_bits=frac_bits,
                    scale=scale, zero_point=zero_point, scale_frac_bits=scale_frac_bits)


__all__ = ["Tensor", "TensorV1", "as_v2", "el_type_v1", "fx_tensor_v1", "empty_tensor_v1", "DataContainer",
           "ElParams", "FxParams", "SaParams", "fx_tensor", "sa_tensor",
           "empty_tensor", "dense_strides", "fixed", "EL_DTYPE", "MLI_MAX_RANK"]
