"""Sparse tensors of the TFLite format (``SparsityParameters``): traversal order, block map and per-level
dimension metadata (DENSE with its size, or SPARSE_CSR with array segments and indices), as LiteRT's
``FormatConverter`` walks them.

:class:`Sparsity` holds the metadata; :meth:`Sparsity.positions` gives, for every stored value in storage order,
its flat index in the dense tensor (checked: every segment and index in range, the values' count); densifying is
``dense.flat[positions] = values``, compressing ``values = dense.flat[positions]``. :func:`block_csr` builds the
metadata of a 2-D matrix stored as CSR rows of 1 x ``block`` blocks (the layout LiteRT's sparse hybrid LSTM
reads), keeping the blocks that hold a nonzero, as ``FormatConverter::DenseToSparse`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import FileFormatError

DENSE, SPARSE_CSR = "DENSE", "SPARSE_CSR"
_MAX_POSITIONS = 1 << 24  # traversal paths a sparse tensor may declare (bounded resources for untrusted files)
_MAX_DENSE = 1 << 26  # elements of a sparse tensor's dense form


@dataclass(frozen=True)
class DimMetadata:
    """One traversal level: DENSE of ``dense_size`` or SPARSE_CSR with ``segments`` / ``indices``."""

    format: str
    dense_size: int = 0
    segments: tuple[int, ...] = ()
    indices: tuple[int, ...] = ()


@dataclass(frozen=True)
class Sparsity:
    """``SparsityParameters`` of a tensor of dense ``shape``."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_metadata: tuple[DimMetadata, ...]

    def block_sizes(self) -> tuple[int, ...]:
        """The size of each block dimension (the dense sizes of the levels past the tensor's rank)."""
        rank = len(self.traversal_order) - len(self.block_map)
        return tuple(self.dim_metadata[k].dense_size for k in range(rank, len(self.dim_metadata)))

    def positions(self, shape: tuple[int, ...], what: str = "tensor") -> np.ndarray:
        """int64 flat dense index of every stored value, in storage order (FileFormatError when inconsistent)."""
        rank = len(shape)
        levels = len(self.traversal_order)
        if math.prod(shape) > _MAX_DENSE:
            raise FileFormatError(f"source: {what} sparsity: a dense form of {math.prod(shape)} elements (shape "
                                  f"{list(shape)}) exceeds the {_MAX_DENSE} allowed")
        if (len(self.dim_metadata) != levels or levels != rank + len(self.block_map)
                or sorted(self.traversal_order) != list(range(levels))
                or any(not 0 <= d < rank for d in self.block_map)):
            raise FileFormatError(f"source: {what} sparsity: expected a traversal order over {rank} + "
                                  f"{len(self.block_map)} block dimensions and one metadata entry each, got traversal "
                                  f"{list(self.traversal_order)}, block map {list(self.block_map)}, "
                                  f"{len(self.dim_metadata)} metadata entries")
        if any(self.traversal_order[k] != k for k in range(rank)):
            raise FileFormatError(f"source: {what} sparsity: expected the tensor's own dimensions first in traversal "
                                  f"order, got {list(self.traversal_order)}")
        blocks = self.block_sizes()
        pos = np.zeros(1, np.int64)  # the flattened position at the previous level of every path
        coords: list[np.ndarray] = []
        for level, md in enumerate(self.dim_metadata):
            if md.format == DENSE:
                n = int(md.dense_size)
                if n < 0 or pos.size * max(n, 1) > _MAX_POSITIONS:
                    raise FileFormatError(f"source: {what} sparsity level {level}: dense size {n} out of range")
                coords = [np.repeat(c, n) for c in coords] + [np.tile(np.arange(n, dtype=np.int64), pos.size)]
                pos = (np.repeat(pos, n) * n + np.tile(np.arange(n, dtype=np.int64), pos.size))
            else:
                seg = np.asarray(md.segments, np.int64)
                idx = np.asarray(md.indices, np.int64)
                if (seg.size < 1 or (pos.size and int(pos.max()) + 1 >= seg.size) or np.any(np.diff(seg) < 0)
                        or seg[0] < 0 or seg[-1] > idx.size):
                    raise FileFormatError(f"source: {what} sparsity level {level}: array segments do not cover "
                                          f"{pos.size} parent position(s) with {idx.size} indices")
                start, stop = seg[pos], seg[pos + 1]
                counts = stop - start
                if int(counts.sum()) > _MAX_POSITIONS:
                    raise FileFormatError(f"source: {what} sparsity level {level}: too many stored values")
                k = np.repeat(start - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
                coords = [np.repeat(c, counts) for c in coords] + [idx[k]]
                pos = k
        # dense coordinates: the tensor's dims scaled by their blocks plus the in-block offsets
        full = [coords[d].copy() for d in range(rank)]
        for b, d in enumerate(self.block_map):
            full[d] = full[d] * blocks[b] + coords[rank + b]
        for d in range(rank):
            if full[d].size and (full[d].min() < 0 or full[d].max() >= shape[d]):
                raise FileFormatError(f"source: {what} sparsity: a stored value falls outside dimension {d} "
                                      f"(size {shape[d]})")
        flat = np.zeros(full[0].size if rank else 1, np.int64)
        for d in range(rank):
            flat = flat * shape[d] + full[d]
        return flat

    def densify(self, values: np.ndarray, shape: tuple[int, ...], what: str = "tensor") -> np.ndarray:
        """The dense tensor (zeros where nothing is stored) of the stored ``values``."""
        pos = self.positions(shape, what)
        v = np.asarray(values).reshape(-1)
        if v.size != pos.size:
            raise FileFormatError(f"source: {what} sparsity: expected {pos.size} stored values, got {v.size}")
        out = np.zeros(math.prod(shape), v.dtype)
        out[pos] = v
        return out.reshape(shape)

    def compress(self, dense: np.ndarray) -> np.ndarray:
        """The stored values of a dense tensor, in storage order."""
        d = np.asarray(dense)
        return d.reshape(-1)[self.positions(tuple(d.shape))]

    def is_block_csr(self, block: int) -> bool:
        """Rows dense, then CSR over 1 x ``block`` blocks of the columns (LiteRT's sparse hybrid layout)."""
        md = self.dim_metadata
        return (self.traversal_order == (0, 1, 2) and self.block_map == (1,) and len(md) == 3
                and md[0].format == DENSE and md[1].format == SPARSE_CSR and md[2].format == DENSE
                and md[2].dense_size == block)


def block_csr(dense: np.ndarray, block: int = 16) -> Sparsity:
    """The metadata of a 2-D matrix as CSR rows of 1 x ``block`` column blocks, keeping the blocks with a
    nonzero value (``FormatConverter::DenseToSparse`` with traversal (0, 1, 2), block map (1,))."""
    d = np.asarray(dense)
    rows, cols = d.shape
    if cols % block:
        raise FileFormatError(f"dense: expected a column count divisible by the block size {block}, got {cols}")
    nz = np.any(d.reshape(rows, cols // block, block) != 0, axis=2)
    segments = [0, *(int(v) for v in np.cumsum(nz.sum(axis=1)))]
    indices = [int(v) for v in np.nonzero(nz)[1]]
    return Sparsity((0, 1, 2), (1,), (DimMetadata(DENSE, rows), DimMetadata(SPARSE_CSR, 0, tuple(segments),
                                                                           tuple(indices)),
                                      DimMetadata(DENSE, block)))


def from_flatbuffer(sp) -> Sparsity:
    """A :class:`Sparsity` from the schema's ``SparsityParametersT``."""
    def vec(v):
        if v is None:
            return ()
        values = getattr(v, "values", None)
        return () if values is None else tuple(int(i) for i in values)

    mds = []
    for md in sp.dimMetadata or []:
        fmt = SPARSE_CSR if int(md.format) == 1 else DENSE
        mds.append(DimMetadata(fmt, int(md.denseSize), vec(md.arraySegments), vec(md.arrayIndices)))
    return Sparsity(tuple(int(i) for i in (sp.traversalOrder if sp.traversalOrder is not None else ())),
                    tuple(int(i) for i in (sp.blockMap if sp.blockMap is not None else ())), tuple(mds))


def to_flatbuffer(s, sp: Sparsity):
    """The schema's ``SparsityParametersT`` (module ``s``) of a :class:`Sparsity` (index vectors as int32)."""
    out = s.SparsityParametersT()
    out.traversalOrder = list(sp.traversal_order)
    out.blockMap = list(sp.block_map)
    out.dimMetadata = []
    for md in sp.dim_metadata:
        m = s.DimensionMetadataT()
        if md.format == SPARSE_CSR:
            m.format = 1
            seg, idx = s.Int32VectorT(), s.Int32VectorT()
            seg.values, idx.values = list(md.segments), list(md.indices)
            m.arraySegmentsType = m.arrayIndicesType = s.SparseIndexVector.Int32Vector
            m.arraySegments, m.arrayIndices = seg, idx
        else:
            m.format = 0
            m.denseSize = md.dense_size
        out.dimMetadata.append(m)
    return out
