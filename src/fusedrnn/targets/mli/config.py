"""MLI enums, configuration structures and the build flags (``ROUND_MODE``, ``FULL_ACCU``, ``MLI_DEBUG_MODE``).

MLI fixes rounding, accumulator behaviour and its parameter checks when the library is compiled; here they are a
context: ``with build(round_mode="CONVERGENT", full_accu=True, debug_mode="DBG_MODE_RELEASE"): ...`` (defaults:
``ROUND_MODE=UP``, ``FULL_ACCU=OFF`` as the cmake default, see spec mli.md §0.2, and ``DBG_MODE_RET_CODES``:
the checks of ``mli_check.cc`` on, their statuses returned). MLI's own default is ``DBG_MODE_RELEASE`` (no
checks, every kernel returns OK); ``DBG_MODE_ASSERT``, ``DBG_MODE_DEBUG`` and ``DBG_MODE_FULL`` return the same
statuses as ``DBG_MODE_RET_CODES`` (they add assertions and messages). Kernels read the flags when called.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

from ...c_enums import c_enum, export_members
from ...errors import AttributeValueError

ElType = c_enum("ElType", "``mli_element_type`` (MLI 2.0 values).", __name__, {
    "MLI_EL_FX_8": 0x8, "MLI_EL_FX_16": 0x10, "MLI_EL_SA_8": 0x108, "MLI_EL_SA_32": 0x120, "MLI_EL_FP_32": 0x220})
ElTypeV1 = c_enum("ElTypeV1", "MLI 1.x ``mli_element_type`` (1.1.1 values, C's order from 0).", __name__,
                  "MLI_EL_FX_8 MLI_EL_FX_16 MLI_EL_ASYM_I8 MLI_EL_ASYM_I32")
EL_TYPE_FROM_V1 = dict(zip(ElTypeV1, (ElType.MLI_EL_FX_8, ElType.MLI_EL_FX_16, ElType.MLI_EL_SA_8, ElType.MLI_EL_SA_32),
                           strict=True))
"""1.x element type -> the 2.0 type that the kernels use for it (1.x's asym i8 / i32 are 2.0's sa8 / sa32)."""
EL_TYPE_TO_V1 = {v: k for k, v in EL_TYPE_FROM_V1.items()}
ReluType = c_enum("ReluType", "``mli_relu_cfg.type``.", __name__, "MLI_RELU_NONE MLI_RELU_GEN MLI_RELU_1 MLI_RELU_6")
RnnDirection = c_enum("RnnDirection", "``mli_rnn_cell_cfg.direction``.", __name__, "RNN_DIR_FORWARD RNN_DIR_BACKWARD")
RnnResults = c_enum("RnnResults", "``mli_rnn_cell_cfg.results``.", __name__, "RNN_OUT_LAST RNN_OUT_ALL")
RnnAct = c_enum("RnnAct", "``mli_rnn_cell_cfg.act`` (the output activation).", __name__,
                "RNN_ACT_NONE RNN_ACT_TANH RNN_ACT_SIGM")
RnnMode = c_enum("RnnMode", "MLI 1.x ``mli_rnn_mode``.", __name__,
                 "RNN_ONE_TO_ONE RNN_BATCH_TO_BATCH RNN_BATCH_TO_LAST")
ENUM_CONSTANTS = export_members(globals(), ElType, ReluType, RnnDirection, RnnResults, RnnAct, RnnMode)
"""The enum members under their C names (``MLI_EL_SA_8``, ``RNN_ACT_TANH`` ...), constants of this module."""

MLI_RNN_MAX_INPUT = 4
MLI_MAX_RANK = 4


@dataclass
class ReluCfg:
    """``mli_relu_cfg``."""

    type: ReluType = ReluType.MLI_RELU_NONE


@dataclass
class FullyConnectedCfg:
    """``mli_fully_connected_cfg``."""

    relu: ReluCfg = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.relu is None:
            self.relu = ReluCfg()


@dataclass
class RnnDenseCfg:
    """``mli_rnn_dense_cfg``: number of (input, weights) pairs, 1..MLI_RNN_MAX_INPUT."""

    inputs_num: int = 1


@dataclass
class RnnCellCfg:
    """``mli_rnn_cell_cfg`` (MLI 2.0): ``scratch_data`` is the intermediate buffer, an ``mli_data_container``
    (:class:`~fusedrnn.targets.mli.tensors.DataContainer`, capacity in bytes) as in C, or an array (its size, or
    ``scratch_capacity`` bytes); None is C's NULL pointer, BAD_FUNC_CFG in a debug build as MLI's checker says
    (the kernel allocates it only in ``DBG_MODE_RELEASE``)."""

    direction: RnnDirection = RnnDirection.RNN_DIR_FORWARD
    results: RnnResults = RnnResults.RNN_OUT_LAST
    act: RnnAct = RnnAct.RNN_ACT_TANH
    scratch_data: object = None
    scratch_capacity: int | None = None


@dataclass
class RnnCellCfgDepr:
    """MLI 1.x ``mli_rnn_cell_cfg`` {mode, act, ir_tsr}."""

    mode: RnnMode = RnnMode.RNN_ONE_TO_ONE
    act: RnnAct = RnnAct.RNN_ACT_TANH
    ir_tsr: object = None


ROUND_MODES = ("UP", "CONVERGENT")
DEBUG_MODES = ("DBG_MODE_RELEASE", "DBG_MODE_RET_CODES", "DBG_MODE_ASSERT", "DBG_MODE_DEBUG", "DBG_MODE_FULL")


@dataclass(frozen=True)
class BuildConfig:
    """The MLI build flags: ``round_mode`` "UP" | "CONVERGENT", ``full_accu`` bool, ``debug_mode`` one of
    :data:`DEBUG_MODES`."""

    round_mode: str = "UP"
    full_accu: bool = False
    debug_mode: str = "DBG_MODE_RET_CODES"

    @property
    def checks(self) -> bool:
        """Whether the kernels run MLI's parameter checks (every mode but ``DBG_MODE_RELEASE``)."""
        return self.debug_mode != "DBG_MODE_RELEASE"

    @property
    def mode(self) -> str:
        """The :mod:`._arith` rounding-mode name."""
        return "up" if self.round_mode == "UP" else "convergent"


_DEFAULT = BuildConfig()
_CURRENT: contextvars.ContextVar[BuildConfig] = contextvars.ContextVar("mli_build", default=_DEFAULT)


def make_build(round_mode: str = "UP", full_accu: bool = False,
               debug_mode: str = "DBG_MODE_RET_CODES") -> BuildConfig:
    if not isinstance(round_mode, str) or round_mode.upper() not in ROUND_MODES:
        raise AttributeValueError(f"round_mode: expected one of {ROUND_MODES}, got {round_mode!r}")
    if not isinstance(full_accu, bool):
        raise AttributeValueError(f"full_accu: expected a bool (ON=True, OFF=False), got {full_accu!r}")
    if debug_mode not in DEBUG_MODES:
        raise AttributeValueError(f"debug_mode: expected one of {DEBUG_MODES}, got {debug_mode!r}")
    return BuildConfig(round_mode.upper(), full_accu, debug_mode)


def current_build() -> BuildConfig:
    """The build flags in effect."""
    return _CURRENT.get()


@contextlib.contextmanager
def build(round_mode: str = "UP", full_accu: bool = False, debug_mode: str = "DBG_MODE_RET_CODES"):
    """Run kernels as if MLI were compiled with ``ROUND_MODE=round_mode``, ``FULL_ACCU=ON/OFF`` and
    ``MLI_DEBUG_MODE=debug_mode``."""
    token = _CURRENT.set(make_build(round_mode, full_accu, debug_mode))
    try:
        yield current_build()
    finally:
        _CURRENT.reset(token)


def set_build(round_mode: str = "UP", full_accu: bool = False,
              debug_mode: str = "DBG_MODE_RET_CODES") -> BuildConfig:
    """Set the build flags for the current context (returns the new flags)."""
    b = make_build(round_mode, full_accu, debug_mode)
    _CURRENT.set(b)
    return b


__all__ = [
    "build", "current_build", "set_build", "BuildConfig", "ElType", "ElTypeV1", "EL_TYPE_FROM_V1", "EL_TYPE_TO_V1",
    "ReluType", "RnnDirection", "RnnResults", "RnnAct", "RnnMode", "ReluCfg", "FullyConnectedCfg", "RnnDenseCfg",
    "RnnCellCfg", "RnnCellCfgDepr",
    "MLI_MAX_RANK", "MLI_RNN_MAX_INPUT", "DEBUG_MODES", *ENUM_CONSTANTS,
]
