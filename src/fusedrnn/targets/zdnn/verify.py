"""Shared tensor checks of the operations and the ZDNN_ENABLE_PRECHECK rule for their statuses."""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError
from .constants import DataFormat, DataType
from .desc import _enum
from .status import PRECHECK_STATUSES, NNPAProgramException, Status, report, settings
from .ztensor import OpStatus, ZTensor  # noqa: F401 - OpStatus is re-exported


def op_result(status: Status, where: str, hw_f001: bool = False) -> Status:
    """Return ``status`` from operation ``where``. Without precheck a * status raises NNPAProgramException, except
    that ops whose NNPA function reports bad type/format combinations (``hw_f001``) return ZDNN_FUNC_RC_F001 for
    INVALID_TYPE / INVALID_FORMAT (the hardware's response code; the mapping is inferred from the API reference)."""
    if hw_f001 and not settings.precheck and status in (Status.ZDNN_INVALID_TYPE, Status.ZDNN_INVALID_FORMAT):
        return report(Status.ZDNN_FUNC_RC_F001, where)
    if status in PRECHECK_STATUSES and not settings.precheck:
        report(status, where)
        raise NNPAProgramException(status, where)
    return report(status, where)


def check_feature(zt: ZTensor, type_: int = DataType.ZDNN_DLFLOAT16, input_: bool = True) -> None:
    """A ``type_`` 4DFEATURE ztensor with nonzero dims, checked as libzdnn's ``verify_fields`` (type, then format).

    The buffer and the transformed state are not checked here: libzdnn's operations never check the state, and the
    buffer is checked where the NNPA accesses it (:func:`.ztensor.access`, after every check). ``input_`` is
    unused (kept for callers)."""
    tf = zt.transformed_desc
    if tf is None:
        raise OpStatus(Status.ZDNN_INVALID_FORMAT)
    if int(tf.type) != int(type_):
        raise OpStatus(Status.ZDNN_INVALID_TYPE)
    if _enum(DataFormat, tf.format) != DataFormat.ZDNN_FORMAT_4DFEATURE:
        raise OpStatus(Status.ZDNN_INVALID_FORMAT)
    if any(int(v) <= 0 for v in tf.dims):
        raise OpStatus(Status.ZDNN_INVALID_SHAPE)


def require(cond: bool, status: Status = Status.ZDNN_INVALID_SHAPE) -> None:
    if not cond:
        raise OpStatus(status)


def require_ztensors(**tensors) -> None:
    """Raise DTypeError naming the first argument that is not a ZTensor (C would get a bad pointer here)."""
    for name, t in tensors.items():
        if not isinstance(t, ZTensor):
            raise DTypeError(f"{name}: expected a ZTensor, got {type(t).__name__}")


def is_ninf_code(code) -> bool:
    return bool((np.asarray(code, np.uint16) & 0x7FFF) == 0x7FFF)
