"""The emulated IBM Z machine (Telum I or Telum II): what the NNPA query functions answer, the version checks
and the tensor limits.

Facts taken from zDNN's documentation and onnx-mlir's ``NNPALimit.hpp`` (32768 max dimension index, 4 GiB max
tensor size); the per-machine function/format lists follow the zDNN API reference's "Since"/"Requires" notes
(Telum II adds parameter-block format 1, BCAST1, NNPA_TRANSFORM, INT8/INT32/FP32 data types and 4DWEIGHTS).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ...errors import AttributeValueError
from .constants import (
    QUERY_BFPFMT_SHORT,
    QUERY_BFPFMT_TINY,
    QUERY_DATATYPE_BINARY_FP32,
    QUERY_DATATYPE_BINARY_INT8,
    QUERY_DATATYPE_BINARY_INT32,
    QUERY_DATATYPE_INTERNAL1,
    QUERY_LAYOUTFMT_4DFEATURE,
    QUERY_LAYOUTFMT_4DGENERIC,
    QUERY_LAYOUTFMT_4DKERNEL,
    QUERY_LAYOUTFMT_4DWEIGHTS,
    ZDNN_VERNUM,
    ZDNN_VERSION,
    NNPADataType,
    NNPAFunction,
)
from .status import Status

_TELUM1_FUNCS = frozenset(NNPAFunction[n] for n in (
    "NNPA_QAF", "NNPA_ADD", "NNPA_SUB", "NNPA_MUL", "NNPA_DIV", "NNPA_MIN", "NNPA_MAX", "NNPA_LOG", "NNPA_EXP",
    "NNPA_RELU", "NNPA_TANH", "NNPA_SIGMOID", "NNPA_SOFTMAX", "NNPA_BATCHNORMALIZATION", "NNPA_MAXPOOL2D",
    "NNPA_AVGPOOL2D", "NNPA_LSTMACT", "NNPA_GRUACT", "NNPA_CONVOLUTION", "NNPA_MATMUL_OP",
    "NNPA_MATMUL_OP_BCAST23"))


@dataclass(frozen=True)
class Machine:
    """One emulated zAIU generation."""

    name: str
    api_level: int  # max runnable API version, 0x00MMmmFF
    functions: frozenset
    parmblk_formats: frozenset
    datatypes: int  # QUERY_DATATYPE_* bits
    layout_formats: int  # QUERY_LAYOUTFMT_* bits
    conversions: int  # QUERY_BFPFMT_* bits for NNPA_DATATYPE_1
    max_dim: tuple = (32768, 32768, 32768, 32768)  # dim1, dim2, dim3, dim4
    max_tensor_size: int = 4 * 1024**3


TELUM_I = Machine("telum1", 0x000100FF, _TELUM1_FUNCS, frozenset({0}), QUERY_DATATYPE_INTERNAL1,
                  QUERY_LAYOUTFMT_4DFEATURE | QUERY_LAYOUTFMT_4DKERNEL, QUERY_BFPFMT_TINY | QUERY_BFPFMT_SHORT)
TELUM_II = Machine("telum2", 0x000100FF | (ZDNN_VERNUM & 0xFFFF00), frozenset(NNPAFunction), frozenset({0, 1}),
                   QUERY_DATATYPE_INTERNAL1 | QUERY_DATATYPE_BINARY_FP32 | QUERY_DATATYPE_BINARY_INT8
                   | QUERY_DATATYPE_BINARY_INT32,
                   QUERY_LAYOUTFMT_4DFEATURE | QUERY_LAYOUTFMT_4DKERNEL | QUERY_LAYOUTFMT_4DWEIGHTS
                   | QUERY_LAYOUTFMT_4DGENERIC, QUERY_BFPFMT_TINY | QUERY_BFPFMT_SHORT)
NO_NNPA = Machine("none", 0, frozenset(), frozenset(), 0, 0, 0)
"""A machine without the NNPA facility (an IBM Z before z16, or the feature disabled): every op is unavailable."""
MACHINES = {"telum1": TELUM_I, "telum2": TELUM_II, "none": NO_NNPA}

_current = [TELUM_II]


def set_machine(name: str | Machine) -> Machine:
    """Select the emulated machine: ``"telum1"``, ``"telum2"`` (the default), ``"none"`` (no NNPA) or a
    :class:`Machine`."""
    if isinstance(name, Machine):
        _current[0] = name
    elif name in MACHINES:
        _current[0] = MACHINES[name]
    else:
        raise AttributeValueError(f"machine: expected one of {sorted(MACHINES)}, got {name!r}")
    return _current[0]


def machine() -> Machine:
    """The emulated machine."""
    return _current[0]


def is_nnpa_installed() -> bool:
    return bool(machine().functions)


def _counted(name: str, count: int, codes: tuple) -> tuple:
    """C's ``(int count, ...)``: exactly ``count`` codes follow (C reads garbage past the arguments given; here a
    mismatch is an error naming ``count``, so a call that leaves the count out fails loudly)."""
    if isinstance(count, bool) or not isinstance(count, (int, IntEnum)) or int(count) != len(codes):
        raise AttributeValueError(f"{name}: count: expected the number of codes that follow ({len(codes)}), got "
                                  f"{count!r}; call it as in C: {name}(2, NNPA_ADD, NNPA_SUB)")
    return codes


def functions_installed(*functions: int) -> bool:
    """True when every listed NNPA function code is installed (True for none); the library's own check."""
    installed = {int(x) for x in machine().functions}
    return all(0 <= int(f) < 256 and int(f) in installed for f in functions)


def parmblk_fmts_installed(*formats: int) -> bool:
    return all(0 <= int(f) < 128 and int(f) in machine().parmblk_formats for f in formats)


def is_nnpa_function_installed(count: int, *functions: int) -> bool:
    """``zdnn_is_nnpa_function_installed(count, ...)``: True when all ``count`` function codes that follow are
    installed (codes of 256 and above are not), as libzdnn's query.c."""
    return functions_installed(*_counted("is_nnpa_function_installed", count, functions))


def is_nnpa_parmblk_fmt_installed(count: int, *formats: int) -> bool:
    """``zdnn_is_nnpa_parmblk_fmt_installed(count, ...)``: True when all ``count`` parameter-block formats that
    follow are installed."""
    return parmblk_fmts_installed(*_counted("is_nnpa_parmblk_fmt_installed", count, formats))


def is_nnpa_datatype_installed(types_bitmask: int) -> bool:
    return (int(types_bitmask) & ~machine().datatypes) == 0


def is_nnpa_layout_fmt_installed(layout_bitmask: int) -> bool:
    return (int(layout_bitmask) & ~machine().layout_formats) == 0


def is_nnpa_conversion_installed(type: int, format_bitmask: int) -> bool:  # noqa: A002 - zDNN's name
    return int(type) == NNPADataType.NNPA_DATATYPE_1 and (int(format_bitmask) & ~machine().conversions) == 0


def refresh_nnpa_query_result() -> Status:
    """ZDNN_OK, or UNAVAILABLE_FUNCTION when the machine has no NNPA (the query function NNPA-QAF is missing)."""
    return Status.ZDNN_OK if is_nnpa_installed() else Status.ZDNN_UNAVAILABLE_FUNCTION


def get_nnpa_max_dim_idx_size() -> int:
    """The smallest of the per-dimension maximum index sizes."""
    return min(machine().max_dim)


def get_max_for_dim(dimension: int) -> int:
    """Maximum size of transformed dimension ``dimension`` (1..4); 0 for any other number."""
    d = int(dimension)
    return machine().max_dim[d - 1] if 1 <= d <= 4 else 0


def get_nnpa_max_tensor_size() -> int:
    """Maximum transformed tensor size in bytes."""
    return machine().max_tensor_size


def get_library_version() -> int:
    return ZDNN_VERNUM


def get_library_version_str() -> str:
    """``ZDNN_VERSION``, as libzdnn returns it."""
    return ZDNN_VERSION


def get_max_runnable_version() -> int:
    """``0x00MMmmFF``: API level runnable on the emulated machine with this library."""
    return min(machine().api_level, (ZDNN_VERNUM & 0xFFFF00) | 0xFF)


def is_version_runnable(ver_num: int) -> bool:
    """Whether an application built for zDNN ``ver_num`` (0x00MMmmpp) runs here."""
    return int(ver_num) <= get_max_runnable_version()
