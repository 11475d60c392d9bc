"""``zdnn_ztensor`` and its life cycle: init, 4 KiB-aligned buffer allocation, reset, free, quantized metadata.

``buffer`` is what C's ``void *buffer`` points to: any C-contiguous writable buffer at least ``buffer_size`` bytes
(a NumPy array of any dtype, a ``bytearray``, a ``memoryview`` ...; :func:`byte_view`), e.g. from
:func:`malloc_aligned_4k`, or None. zDNN's "4K-aligned" requirement is checked on its address, so a misaligned view
such as ``buf[1:]`` is rejected as zDNN would. Every function checks the buffer before touching it, where libzdnn
checks it (transforms: ZDNN_INVALID_BUFFER before the state) or, in operations, where the NNPA would access it
(after every libzdnn check, :func:`access`); never an access outside the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constants import DataFormat, DataType, QuantizedTransformType
from .desc import TensorDesc, getsize_ztensor, verify_transformed_desc
from .status import Status, report

PAGE = 4096


@dataclass
class ZTensor:
    """``zdnn_ztensor``: descriptors, the stick buffer, the transformed flag and the quantization metadata
    (``rec_scale`` = 1/scale, ``offset`` = zero point, both float32 as in C)."""

    pre_transformed_desc: TensorDesc | None = None
    transformed_desc: TensorDesc | None = None
    buffer_size: int = 0
    buffer: np.ndarray | None = None
    is_transformed: bool = False
    rec_scale: float = 0.0
    offset: float = 0.0
    reserved: bytes = field(default=bytes(3), repr=False)
    reserved2: bytes = field(default=bytes(20), repr=False)


def aligned_buffer(nbytes: int) -> np.ndarray:
    """A zeroed uint8 array of ``nbytes`` whose address is a multiple of 4096 (raises MemoryError)."""
    raw = np.zeros(int(nbytes) + PAGE, np.uint8)
    off = (-raw.ctypes.data) % PAGE
    return raw[off : off + int(nbytes)]


class OpStatus(Exception):
    """Internal: a check failed with ``status`` (the operation returns it)."""

    def __init__(self, status: Status):
        self.status = status


def byte_view(buffer) -> np.ndarray | None:
    """The bytes of a C-like buffer as a 1-D uint8 view (no copy), or None when it is not one.

    Accepted, as C's ``void *buffer``: a C-contiguous NumPy array of any dtype and shape, or any object with the
    buffer protocol (``bytearray``, ``memoryview``, ``array.array``, ``mmap``; ``bytes`` too, read-only). The view
    is writable exactly when the object is."""
    if buffer is None or isinstance(buffer, (str, bool, int, float)):
        return None
    if isinstance(buffer, np.ndarray):
        if not buffer.flags.c_contiguous or buffer.dtype.hasobject:
            return None
        return buffer.reshape(-1).view(np.uint8)
    try:
        mv = memoryview(buffer)
    except TypeError:
        return None
    if not mv.c_contiguous:
        return None
    return np.frombuffer(mv, np.uint8) if mv.nbytes else np.zeros(0, np.uint8)


def _size_ok(zt: ZTensor, view: np.ndarray, need: int | None) -> bool:
    size = zt.buffer_size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 0 <= size <= view.nbytes:
        return False
    return need is None or (int(size) >= need and view.size >= need)


def buffer_ok(zt: ZTensor, need: int | None = None, *, writes: bool = False) -> bool:
    """Buffer present and C-like (:func:`byte_view`; writable when the function ``writes`` it), 4 KiB aligned,
    ``buffer_size`` an int no larger than the buffer, and (with ``need``) both at least ``need`` bytes."""
    v = byte_view(zt.buffer)
    if v is None or (writes and not v.flags.writeable) or v.ctypes.data % PAGE:
        return False
    return _size_ok(zt, v, need)


def access(zt: ZTensor, need: int, *, writes: bool = False) -> np.ndarray:
    """The operation's access to the stick buffer (what the NNPA does when it runs, after zDNN's checks): the
    uint8 view, or OpStatus ZDNN_MISALIGNED_TENSOR (the NNPA's response for an address off a 4 KiB boundary) or
    ZDNN_INVALID_BUFFER (no buffer, too small, or read-only where written: on Z undefined behaviour; the emulator
    refuses instead of touching memory outside the buffer)."""
    v = byte_view(zt.buffer)
    if v is None or (writes and not v.flags.writeable) or not _size_ok(zt, v, need):
        raise OpStatus(Status.ZDNN_INVALID_BUFFER)
    if v.ctypes.data % PAGE:
        raise OpStatus(Status.ZDNN_MISALIGNED_TENSOR)
    return v


def init_ztensor(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc, output: ZTensor) -> ZTensor:
    """Attach the descriptors and clear the state and quantization fields; ``buffer`` and ``buffer_size`` are kept,
    as libzdnn's ``zdnn_init_ztensor`` leaves them (a program sets them before or after)."""
    output.pre_transformed_desc = pre_tfrmd_desc
    output.transformed_desc = tfrmd_desc
    output.is_transformed = False
    output.rec_scale = 0.0
    output.offset = 0.0
    output.reserved, output.reserved2 = bytes(3), bytes(20)
    return output


def _rec(scale: float) -> float:
    s = np.float32(scale)
    return 0.0 if s == 0 else float(np.float32(1.0) / s)


def init_quantized_ztensor(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc, scale: float, offset: float,
                           output: ZTensor) -> ZTensor:
    """As :func:`init_ztensor`, storing ``rec_scale = 1/scale`` (0 for scale 0) and ``offset`` (float32)."""
    init_ztensor(pre_tfrmd_desc, tfrmd_desc, output)
    output.rec_scale = _rec(scale)
    output.offset = float(np.float32(offset))
    return output


_allocator = [aligned_buffer]


def allochelper_ztensor(ztensor: ZTensor) -> Status:
    """Allocate a zeroed, 4 KiB-aligned buffer of ``getsize_ztensor`` bytes after verifying the transformed
    descriptor (INVALID_FORMAT / INVALID_LAYOUT / INVALID_TYPE / INVALID_SHAPE, ALLOCATION_FAILURE)."""
    where = "allochelper_ztensor"
    st = verify_transformed_desc(ztensor.transformed_desc)
    if st != Status.ZDNN_OK:
        return report(st, where)
    size = getsize_ztensor(ztensor.transformed_desc)
    try:
        ztensor.buffer = _allocator[0](size)
    except MemoryError:
        return report(Status.ZDNN_ALLOCATION_FAILURE, where)
    ztensor.buffer_size = size
    return report(Status.ZDNN_OK, where)


def init_ztensor_with_malloc(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc, output: ZTensor) -> Status:
    init_ztensor(pre_tfrmd_desc, tfrmd_desc, output)
    return allochelper_ztensor(output)


def init_quantized_ztensor_with_malloc(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc, scale: float,
                                       offset: float, output: ZTensor) -> Status:
    init_quantized_ztensor(pre_tfrmd_desc, tfrmd_desc, scale, offset, output)
    return allochelper_ztensor(output)


def is_quantized_ztensor(ztensor: ZTensor) -> bool:
    """True when the ztensor carries quantization parameters (``rec_scale != 0``)."""
    return ztensor.rec_scale != 0


def quantized_transform_type(ztensor: ZTensor) -> QuantizedTransformType | None:
    """The quantized transform type implied by the transformed descriptor, or None."""
    d = ztensor.transformed_desc
    if d is None:
        return None
    if d.type == DataType.ZDNN_DLFLOAT16 and d.format == DataFormat.ZDNN_FORMAT_4DFEATURE:
        return QuantizedTransformType.QUANTIZED_DLFLOAT16
    if d.type == DataType.ZDNN_BINARY_INT8:
        if d.format == DataFormat.ZDNN_FORMAT_4DWEIGHTS:
            return QuantizedTransformType.QUANTIZED_WEIGHTS_INT8
        if d.format == DataFormat.ZDNN_FORMAT_4DFEATURE:
            return QuantizedTransformType.QUANTIZED_INT8
    return None


def malloc_aligned_4k(size: int) -> np.ndarray | None:
    """libzdnn's ``malloc_aligned_4k``: ``size`` zeroed bytes at a 4 KiB-aligned address (a uint8 array), or None
    for a size of 0 or one the machine cannot allocate (C's NULL)."""
    size = int(size)
    if size <= 0:
        return None
    try:
        return _allocator[0](size)
    except MemoryError:
        return None


def free_aligned_4k(ptr) -> None:
    """libzdnn's ``free_aligned_4k``: nothing to do (the buffer is freed when no longer referenced)."""


def reset_ztensor(ztensor: ZTensor) -> None:
    """Mark the ztensor not transformed (buffer and buffer_size are kept, as zDNN)."""
    ztensor.is_transformed = False
    ztensor.reserved, ztensor.reserved2 = bytes(3), bytes(20)


def free_ztensor_buffer(ztensor: ZTensor) -> Status:
    """Release the buffer (INVALID_BUFFER when there is none)."""
    if ztensor.buffer is None:
        return report(Status.ZDNN_INVALID_BUFFER, "free_ztensor_buffer")
    ztensor.buffer = None
    return report(Status.ZDNN_OK, "free_ztensor_buffer")
