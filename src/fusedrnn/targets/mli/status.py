"""``mli_status`` return codes (MLI 2.0 ``include/mli_types.h``; the documented order, OK = 0)."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    """What an MLI kernel returns. Kernels of :mod:`fusedrnn.mli` return these instead of raising."""

    MLI_STATUS_OK = 0
    MLI_STATUS_BAD_TENSOR = 1  # invalid tensor (rank, shape vs strides, capacity of an input, ...)
    MLI_STATUS_SHAPE_MISMATCH = 2  # shapes or ranks not compatible with the function
    MLI_STATUS_INCOMPATEBLE_TENSORS = 3  # other tensor parameters not compatible (quantization, zero points)
    MLI_STATUS_BAD_FUNC_CFG = 4  # invalid configuration structure
    MLI_STATUS_NOT_ENGH_MEM = 5  # output (or intermediate buffer) capacity too small
    MLI_STATUS_NOT_SUPPORTED = 6  # combination not implemented
    MLI_STATUS_SPEC_PARAM_MISMATCH = 7  # configuration does not match the specialization
    MLI_STATUS_ARGUMENT_ERROR = 8  # a by-reference parameter is None
    MLI_STATUS_TYPE_MISMATCH = 9  # element types do not match the function specialization


MLI_STATUS_OK = Status.MLI_STATUS_OK
MLI_STATUS_BAD_TENSOR = Status.MLI_STATUS_BAD_TENSOR
MLI_STATUS_SHAPE_MISMATCH = Status.MLI_STATUS_SHAPE_MISMATCH
MLI_STATUS_INCOMPATEBLE_TENSORS = Status.MLI_STATUS_INCOMPATEBLE_TENSORS
MLI_STATUS_BAD_FUNC_CFG = Status.MLI_STATUS_BAD_FUNC_CFG
MLI_STATUS_NOT_ENGH_MEM = Status.MLI_STATUS_NOT_ENGH_MEM
MLI_STATUS_NOT_SUPPORTED = Status.MLI_STATUS_NOT_SUPPORTED
MLI_STATUS_SPEC_PARAM_MISMATCH = Status.MLI_STATUS_SPEC_PARAM_MISMATCH
MLI_STATUS_ARGUMENT_ERROR = Status.MLI_STATUS_ARGUMENT_ERROR
MLI_STATUS_TYPE_MISMATCH = Status.MLI_STATUS_TYPE_MISMATCH


class MliCheckFailed(Exception):
    """Internal: raised by a check, turned into the returned status by the kernel wrapper."""

    def __init__(self, status: Status, message: str):
        super().__init__(f"{status.name}: {message}")
        self.status = status
        self.message = message
