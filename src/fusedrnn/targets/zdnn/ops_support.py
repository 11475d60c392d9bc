"""Shared machinery of zDNN's element-wise, activation, normalization, pooling and convolution operations.

Every operation follows zDNN's ``aiu_ops_func_specific`` sequence: parameter-block format installed (else
UNAVAILABLE_FUNCTION), the operation's verifier (statuses marked * in the API reference need precheck, see
:func:`.verify.op_result`), the NNPA function installed (else UNAVAILABLE_FUNCTION), the hardware's
function-specific checks (response codes), then the computation. As in libzdnn, no operation checks that its
inputs were transformed (an input never transformed is read as its buffer holds), and buffers are checked only
where the NNPA accesses them: MISALIGNED_TENSOR (the NNPA's response code) for an address off a 4 KiB boundary,
INVALID_BUFFER for a missing, too small or read-only buffer (undefined on Z; the emulator refuses to touch it).
Values are read from the transformed inputs as
DLFLOAT16 (decoded exactly), computed in float64 and rounded once to DLFLOAT16 into the output; a result that
leaves the DLFLOAT16 range or is not a number (NINF) gives ELEMENT_RANGE_VIOLATION, as the NNPA's range-violation
flag does.

Float parameters (clipping value, adjustment factor, epsilon, beta, gamma) reach the hardware as DLFLOAT16 codes:
0.0 is not converted (code 0), anything else goes through VCRNF (:func:`param_code`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import BufferLayoutError, ShapeError
from ...numerics.dlfloat16 import dlf16_to_fp32, fp32_to_dlf16
from . import machine as _m
from .constants import DataFormat, DataType
from .desc import _enum
from .status import Status, report
from .transform import read_values, write_values
from .verify import OpStatus, check_feature, op_result, require
from .ztensor import PAGE, ZTensor, _allocator, byte_view

SAVEAREA_SIZE = 8 * 1024
"""``ZDNN_8K_SAVEAREA_SIZE``: the function-specific save area of NNPA_SOFTMAX and NNPA_REDUCE."""

DLF16_NINF_POS, DLF16_NINF_NEG, DLF16_ONE = 0x7FFF, 0xFFFF, 0x3E00


def param_code(value: float | None) -> int:
    """The DLFLOAT16 code a float parameter reaches the NNPA as: 0 for None or 0.0 (zDNN skips the conversion),
    else FP32(value) through VCRNF (overflow, Inf and NaN become NINF 0x7FFF / 0xFFFF)."""
    if value is None:
        return 0
    v = np.float32(value)
    if v == 0:
        return 0
    return int(fp32_to_dlf16(np.array([v], np.float32))[0])


def param_value(code: int) -> float:
    """The value of a DLFLOAT16 parameter code (NINF reads as NaN)."""
    return float(dlf16_to_fp32(np.array([code], np.uint16))[0])


def is_ninf(code: int) -> bool:
    return code in (DLF16_NINF_POS, DLF16_NINF_NEG)


def require_desc(*zts: ZTensor) -> None:
    """Every ztensor has a transformed descriptor (INVALID_FORMAT otherwise, as an unknown format)."""
    for zt in zts:
        if zt is None or getattr(zt, "transformed_desc", None) is None:
            raise OpStatus(Status.ZDNN_INVALID_FORMAT)


def dims(zt: ZTensor) -> tuple[int, int, int, int]:
    """Transformed (dim4, dim3, dim2, dim1)."""
    return tuple(int(v) for v in zt.transformed_desc.dims)


def require_same_dims(ref: ZTensor, *others: ZTensor) -> None:
    """zDNN's ``verify_tensors`` shape rule: all dims equal to ``ref``'s (INVALID_SHAPE)."""
    for zt in others:
        require(dims(zt) == dims(ref))


def check_kernel(zt: ZTensor) -> None:
    """A DLFLOAT16 4DKERNEL (HWCK) ztensor (its buffer is checked where it is read, :func:`.ztensor.access`)."""
    tf = zt.transformed_desc
    if int(tf.type) != DataType.ZDNN_DLFLOAT16:
        raise OpStatus(Status.ZDNN_INVALID_TYPE)
    if _enum(DataFormat, tf.format) != DataFormat.ZDNN_FORMAT_4DKERNEL:
        raise OpStatus(Status.ZDNN_INVALID_FORMAT)
    if any(int(v) <= 0 for v in tf.dims):
        raise OpStatus(Status.ZDNN_INVALID_SHAPE)


def store(out: ZTensor, values: np.ndarray) -> Status:
    """Round float64 ``values`` (the output's transformed shape) once to DLFLOAT16 into ``out``, mark it
    transformed; ELEMENT_RANGE_VIOLATION when a value overflowed or was not a number."""
    with np.errstate(all="ignore"):
        flags = write_values(out, np.asarray(values, np.float64).reshape(dims(out)))
    out.is_transformed = True
    return Status.ZDNN_ELEMENT_RANGE_VIOLATION if (flags.overflow or flags.invalid) else Status.ZDNN_OK


def save_area_status(save_area) -> Status:
    """A caller's save area: None (the operation allocates 8 KiB itself; ALLOCATION_FAILURE when that fails) or a
    uint8 array of at least 8 KiB whose address is 4 KiB aligned (MISALIGNED_SAVEAREA otherwise)."""
    if save_area is None:
        try:
            _allocator[0](SAVEAREA_SIZE)
        except MemoryError:
            return Status.ZDNN_ALLOCATION_FAILURE
        return Status.ZDNN_OK
    a = byte_view(save_area)
    if a is None or not a.flags.writeable:
        raise BufferLayoutError(f"save_area: expected a writable C-contiguous buffer, got {type(save_area).__name__}")
    if a.nbytes < SAVEAREA_SIZE:
        raise ShapeError(f"save_area: expected at least {SAVEAREA_SIZE} bytes, got {a.nbytes}")
    if a.ctypes.data % PAGE:
        return Status.ZDNN_MISALIGNED_SAVEAREA
    return Status.ZDNN_OK


def run_op(where: str, function: int, parmblk: int, verify: Callable[[], None],
           compute: Callable[[], Status], hardware: Callable[[], Status] | None = None) -> Status:
    """zDNN's operation sequence (module docstring); ``verify`` raises OpStatus, ``hardware`` returns the
    function-specific response code (or ZDNN_OK) and ``compute`` the final status."""
    if not _m.parmblk_fmts_installed(parmblk):
        return report(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    try:
        verify()
    except OpStatus as e:
        return op_result(e.status, where)
    if not _m.functions_installed(function):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    if hardware is not None:
        st = hardware()
        if st != Status.ZDNN_OK:
            return op_result(st, where)
    try:
        return op_result(compute(), where)
    except OpStatus as e:  # a buffer the NNPA cannot access (.ztensor.access)
        return op_result(e.status, where)


def verify_features(inputs: tuple[ZTensor, ...], outputs: tuple[ZTensor, ...],
                    shapes: Callable[[], None]) -> None:
    """zDNN's verifier order: every ztensor has a transformed descriptor, then the operation's shape rules
    (``shapes``, INVALID_SHAPE), then the inputs and outputs are DLFLOAT16 4DFEATURE ztensors."""
    require_desc(*inputs, *outputs)
    shapes()
    for zt in inputs:
        check_feature(zt)
    for zt in outputs:
        check_feature(zt, input_=False)


def verify_same_features(inputs: tuple[ZTensor, ...], output: ZTensor) -> None:
    """``verify_tensors``: shapes equal to the first input's, then formats/types (DLFLOAT16 4DFEATURE)."""
    verify_features(inputs, (output,), lambda: require_same_dims(inputs[0], output, *inputs[1:]))


def require_fields_of(ref: ZTensor, *others: ZTensor) -> None:
    """libzdnn's ``VERIFY_FIELDS(ref type, ref format, others...)``: each of ``others`` in turn has ``ref``'s
    transformed type (INVALID_TYPE) and format (INVALID_FORMAT)."""
    t, f = int(ref.transformed_desc.type), int(ref.transformed_desc.format)
    for zt in others:
        if int(zt.transformed_desc.type) != t:
            raise OpStatus(Status.ZDNN_INVALID_TYPE)
        if int(zt.transformed_desc.format) != f:
            raise OpStatus(Status.ZDNN_INVALID_FORMAT)


def require_same_n_c(input: ZTensor, output: ZTensor) -> None:  # noqa: A002
    """The pooling verifiers' shape rule: the output's dim4 (N) and dim1 (C) are the input's (INVALID_SHAPE)."""
    require(dims(output)[0] == dims(input)[0] and dims(output)[3] == dims(input)[3])


def elementwise_op(where: str, function: int, parmblk: int, func: Callable[..., np.ndarray],
                   inputs: tuple[ZTensor, ...], output: ZTensor,
                   verify_extra: Callable[[], None] | None = None,
                   verify_before: Callable[[], None] | None = None) -> Status:
    """output = func(*inputs) on the exact DLFLOAT16 values in float64, rounded once (:func:`store`), for inputs
    and output of one shape (``verify_before``, :func:`verify_same_features`, then ``verify_extra``'s parameter
    checks)."""

    def verify() -> None:
        if verify_before is not None:
            verify_before()
        verify_same_features(inputs, output)
        if verify_extra is not None:
            verify_extra()

    def compute() -> Status:
        values = [read_values(zt).astype(np.float64) for zt in inputs]
        with np.errstate(all="ignore"):
            return store(output, func(*values))

    return run_op(where, function, parmblk, verify, compute)
