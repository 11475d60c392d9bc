"""``zdnn_ztensor`` and its life cycle: init, 4 KiB-aligned buffer allocation, reset, free, quantized metadata.

``buffer`` is a NumPy uint8 array (the stick image) or None; zDNN's "4K-aligned" requirement is checked on its
address (``buffer.ctypes.data % 4096``), so a misaligned view such as ``buf[1:]`` is rejected as zDNN would.
Every operation checks the buffer before touching it (:func:`buffer_ok`): a C-contiguous 1-D uint8 array, at least
the image size, ``buffer_size`` between the image size and the array's size, writable where the operation writes;
anything else is ZDNN_INVALID_BUFFER, never an access outside the array.
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


def buffer_ok(zt: ZTensor, need: int | None = None, *, writes: bool = False) -> bool:
    """Buffer present, a C-contiguous 1-D uint8 array (writable when the operation ``writes`` it), 4 KiB aligned,
    ``buffer_size`` an int no larger than the array, and (with ``need``) both at least ``need`` bytes."""
    b = zt.buffer
    if b is None or not isinstance(b, np.ndarray) or b.dtype != np.uint8 or b.ndim != 1:
        return False
    if not b.flags.c_contiguous or (writes and not b.flags.writeable):
        return False
    if b.ctypes.data % PAGE:
        return False
    size = zt.buffer_size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 0 <= size <= b.nbytes:
        return False
    if need is not None and (int(size) < need or b.size < need):
        return False
    return True


def init_ztensor(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc, output: ZTensor) -> ZTensor:
    """Reset ``output`` and attach the descriptors (buffer and buffer_size are cleared)."""
    output.pre_transformed_desc = pre_tfrmd_desc
    output.transformed_desc = tfrmd_desc
    output.buffer_size = 0
    output.buffer = None
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
