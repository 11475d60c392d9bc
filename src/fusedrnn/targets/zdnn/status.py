"""``zdnn_status`` codes, their messages, and the emulator's runtime settings (ZDNN_ENABLE_PRECHECK,
ZDNN_STATUS_DIAG)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum

from ...errors import FusedRNNError
from .constants import ZDNN_DATA_ERROR, ZDNN_HW_ERROR, ZDNN_PARAMETER_ERROR, ZDNN_WARNING  # noqa: F401


class Status(IntEnum):
    """``zdnn_status``: the values of zdnn.h."""

    ZDNN_OK = 0x00000000
    ZDNN_ELEMENT_RANGE_VIOLATION = 0x00020001
    ZDNN_INVALID_SHAPE = 0x00040001
    ZDNN_INVALID_LAYOUT = 0x00040002
    ZDNN_INVALID_TYPE = 0x00040003
    ZDNN_INVALID_FORMAT = 0x00040004
    ZDNN_INVALID_DIRECTION = 0x00040005
    ZDNN_INVALID_CONCAT_INFO = 0x00040006
    ZDNN_INVALID_STRIDE_PADDING = 0x00040007
    ZDNN_INVALID_STRIDES = 0x00040008
    ZDNN_MISALIGNED_PARMBLOCK = 0x00040009
    ZDNN_INVALID_CLIPPING_VALUE = 0x0004000A
    ZDNN_INVALID_ADJUSTMENT_FACTOR = 0x0004000B
    ZDNN_INVALID_EPSILON = 0x0004000C
    ZDNN_INVALID_TRANSFORM_TYPE = 0x0004000D
    ZDNN_INVALID_BETA = 0x0004000E
    ZDNN_INVALID_GAMMA = 0x0004000F
    ZDNN_INVALID_BESSEL_CORRECTION = 0x00040010
    ZDNN_INVALID_SCALE = 0x00040011
    ZDNN_INVALID_OFFSET = 0x00040012
    ZDNN_ALLOCATION_FAILURE = 0x00100001
    ZDNN_INVALID_BUFFER = 0x00100002
    ZDNN_CONVERT_FAILURE = 0x00100003
    ZDNN_INVALID_STATE = 0x00100004
    ZDNN_UNSUPPORTED_AIU_EXCEPTION = 0x00100005
    ZDNN_UNSUPPORTED_PARMBLOCK = 0x000C0001
    ZDNN_UNAVAILABLE_FUNCTION = 0x000C0002
    ZDNN_UNSUPPORTED_FORMAT = 0x000C0010
    ZDNN_UNSUPPORTED_TYPE = 0x000C0011
    ZDNN_EXCEEDS_MDIS = 0x000C0012
    ZDNN_EXCEEDS_MTS = 0x000C0013
    ZDNN_MISALIGNED_TENSOR = 0x000C0014
    ZDNN_MISALIGNED_SAVEAREA = 0x000C0015
    ZDNN_FUNC_RC_F000 = 0x000CF000
    ZDNN_FUNC_RC_F001 = 0x000CF001
    ZDNN_FUNC_RC_F002 = 0x000CF002
    ZDNN_FUNC_RC_F003 = 0x000CF003
    ZDNN_FUNC_RC_F004 = 0x000CF004
    ZDNN_FUNC_RC_F005 = 0x000CF005
    ZDNN_FUNC_RC_F006 = 0x000CF006
    ZDNN_FUNC_RC_F007 = 0x000CF007
    ZDNN_FUNC_RC_F008 = 0x000CF008
    ZDNN_FUNC_RC_F009 = 0x000CF009

    @property
    def message(self) -> str:
        return get_status_message(self)


_TEXTS = {
    Status.ZDNN_OK: "Success.",
    Status.ZDNN_ELEMENT_RANGE_VIOLATION: "One or more output tensor values were not valid.",
    Status.ZDNN_INVALID_SHAPE: "Invalid shape in one (or more) of the input/output tensor(s).",
    Status.ZDNN_INVALID_LAYOUT: "Invalid layout in one (or more) of the input/output tensor(s).",
    Status.ZDNN_INVALID_TYPE: "Invalid type in one (or more) of the input/output tensor(s).",
    Status.ZDNN_INVALID_FORMAT: "Invalid format in one (or more) of the input/output tensor(s).",
    Status.ZDNN_INVALID_DIRECTION: "Invalid RNN direction.",
    Status.ZDNN_INVALID_CONCAT_INFO: "Invalid concatenation info.",
    Status.ZDNN_INVALID_STRIDE_PADDING: "Padding type is not valid for the current stride inputs.",
    Status.ZDNN_INVALID_STRIDES: "Invalid stride height or width.",
    Status.ZDNN_MISALIGNED_PARMBLOCK: "NNPA parameter block is not on doubleword boundary.",
    Status.ZDNN_INVALID_CLIPPING_VALUE: "Invalid clipping for the specified operation.",
    Status.ZDNN_INVALID_ADJUSTMENT_FACTOR: "Invalid adjustment for the specified operation.",
    Status.ZDNN_INVALID_EPSILON: "Invalid epsilon for the specified operation.",
    Status.ZDNN_INVALID_TRANSFORM_TYPE: "Invalid transformation type.",
    Status.ZDNN_INVALID_BETA: "Invalid beta value for the specified operation.",
    Status.ZDNN_INVALID_GAMMA: "Invalid gamma value for the specified operation.",
    Status.ZDNN_INVALID_BESSEL_CORRECTION: "Invalid bessel correction value for the specified operation.",
    Status.ZDNN_INVALID_SCALE: "Invalid scale value for the specified operation.",
    Status.ZDNN_INVALID_OFFSET: "Invalid offset value for the specified operation.",
    Status.ZDNN_ALLOCATION_FAILURE: "Can not allocate storage.",
    Status.ZDNN_INVALID_BUFFER: "Buffer address is NULL or not on 4K-byte boundary, or insufficient buffer size.",
    Status.ZDNN_CONVERT_FAILURE: "Floating point data conversion failure.",
    Status.ZDNN_INVALID_STATE: "Invalid zTensor state.",
    Status.ZDNN_UNSUPPORTED_AIU_EXCEPTION: "zAIU operation returned an unexpected exception.",
    Status.ZDNN_UNSUPPORTED_PARMBLOCK: "NNPA parameter block format is not supported by the model.",
    Status.ZDNN_UNAVAILABLE_FUNCTION: "Specified NNPA function is not defined or installed on the machine.",
    Status.ZDNN_UNSUPPORTED_FORMAT: "Specified tensor data layout format is not supported.",
    Status.ZDNN_UNSUPPORTED_TYPE: "Specified tensor data type is not supported.",
    Status.ZDNN_EXCEEDS_MDIS: "Tensor dimension exceeds maximum dimension index size (MDIS).",
    Status.ZDNN_EXCEEDS_MTS: "Total number of elements in tensor exceeds maximum tensor size (MTS).",
    Status.ZDNN_MISALIGNED_TENSOR: "Tensor address is not on 4K-byte boundary.",
    Status.ZDNN_MISALIGNED_SAVEAREA: "Function specific save area address is not on 4K-byte boundary.",
}
for _s in Status:
    if _s.name.startswith("ZDNN_FUNC_RC_F"):
        _TEXTS[_s] = f"Function specific response code ({_s.name[-4:]})."
del _s
_MESSAGES = {s: f"{s.name}: {t}" for s, t in _TEXTS.items()}
"""``zdnn_get_status_message``'s strings (libzdnn's status.c): ``"ZDNN_XXX: text"``."""

UNDEFINED_STATUS_MESSAGE = "(Status string is not defined.)"


def get_status_message(status: int) -> str:
    """libzdnn's message of ``status`` (``"ZDNN_INVALID_SHAPE: Invalid shape in ..."``), or "(Status string is not
    defined.)". The API reference prints only the text after the colon, and some texts differ from the reference's
    (ELEMENT_RANGE_VIOLATION, STRIDE_PADDING, EXCEEDS_MTS ...): these are the library's."""
    try:
        return _MESSAGES[Status(int(status))]
    except ValueError:
        return UNDEFINED_STATUS_MESSAGE


PRECHECK_STATUSES = frozenset({Status.ZDNN_INVALID_SHAPE, Status.ZDNN_INVALID_TYPE, Status.ZDNN_INVALID_FORMAT,
                               Status.ZDNN_INVALID_STRIDE_PADDING, Status.ZDNN_INVALID_STRIDES,
                               Status.ZDNN_MISALIGNED_PARMBLOCK})
"""The statuses the API reference marks with *: operations return them only with ZDNN_ENABLE_PRECHECK."""


class NNPAProgramException(FusedRNNError, RuntimeError):
    """An operation met invalid tensors with ``settings.precheck`` off: on Z the NNPA instruction would end the
    program abnormally; the emulator raises this instead (``.status`` holds the status precheck would return)."""

    def __init__(self, status: Status, where: str):
        self.status = status
        super().__init__(f"{where}: {status.name} ({get_status_message(status)}); with ZDNN_ENABLE_PRECHECK off "
                         f"zDNN would end abnormally here; set fusedrnn.zdnn.settings.precheck = True (or the "
                         f"environment variable ZDNN_ENABLE_PRECHECK=true and call init()) to get the status")


logger = logging.getLogger("fusedrnn.zdnn")


@dataclass
class Settings:
    """Runtime settings read by :func:`init` from the environment (as zDNN's ``zdnn_init``).

    ``precheck`` (ZDNN_ENABLE_PRECHECK=true): operations verify their tensors and return the * statuses; when
    False, operations given invalid tensors raise :class:`NNPAProgramException` (zDNN would terminate).
    ``status_diag`` (ZDNN_STATUS_DIAG, decimal or 0x hex): whenever a function returns this status, a diagnostic
    line is logged on the ``fusedrnn.zdnn`` logger (WARNING) and appended to ``diagnostics``.
    """

    precheck: bool = False
    status_diag: int | None = None
    diagnostics: list = field(default_factory=list)

    def load_environment(self, environ=None) -> None:
        env = os.environ if environ is None else environ
        self.precheck = str(env.get("ZDNN_ENABLE_PRECHECK", "")).strip().lower() == "true"
        raw = str(env.get("ZDNN_STATUS_DIAG", "")).strip()
        self.status_diag = None
        if raw:
            try:
                self.status_diag = int(raw, 16) if raw.lower().startswith("0x") else int(raw, 10)
            except ValueError:
                self.status_diag = None

    @contextmanager
    def override(self, **values) -> Iterator[Settings]:
        """Temporarily change settings: ``with settings.override(precheck=True): ...``."""
        old = {k: getattr(self, k) for k in values}
        for k, v in values.items():
            setattr(self, k, v)
        try:
            yield self
        finally:
            for k, v in old.items():
                setattr(self, k, v)


settings = Settings()
settings.load_environment()


def report(status: Status, where: str, detail: str = "") -> Status:
    """Return ``status`` from API function ``where``, emitting the ZDNN_STATUS_DIAG diagnostic when it matches."""
    status = Status(status)
    if settings.status_diag is not None and int(status) == settings.status_diag:
        line = f"zDNN status diag: {where} returned {status.name} (0x{int(status):08X}) {detail}".rstrip()
        settings.diagnostics.append(line)
        logger.warning(line)
    return status
