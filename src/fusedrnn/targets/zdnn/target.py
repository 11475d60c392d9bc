"""The registry target ``zdnn``: float LSTM/GRU layers run with zDNN's DLFLOAT16 op-boundary rounding."""

from __future__ import annotations

import numpy as np

from ...cells.spec import CellSpec, run_spec
from ...errors import UnsupportedFeatureError
from ..registry import Prepared, Target
from .policy import DLF16_OP_BOUNDARIES

FEATURES = frozenset({"lstm", "gru", "bidirectional", "linear_before_reset"})


class ZdnnPrepared(Prepared):
    """An LSTM / GRU run by the float engine with zDNN's DLFLOAT16 rounding at every NNPA op boundary."""

    def __init__(self, spec: CellSpec):
        super().__init__(spec)
        if spec.cell == "gru" and not spec.linear_before_reset:
            raise UnsupportedFeatureError("linear_before_reset: zDNN's GRU applies the reset gate after the linear "
                                          "transformation only (linear_before_reset=True / reset_after=True), got "
                                          "False")

    def run(self, x, states, lens):
        if lens is not None and np.any(np.asarray(lens) != x.shape[0]):
            raise UnsupportedFeatureError(f"sequence_lens: zDNN's lstm/gru run every sequence for all "
                                          f"{x.shape[0]} timesteps; got lengths {np.asarray(lens).tolist()}")
        return run_spec(self.spec, np.asarray(x, np.float32), states, policy=DLF16_OP_BOUNDARIES)


def prepare(spec: CellSpec, calibration=None) -> ZdnnPrepared:
    """Check what zDNN cannot express; the returned object runs the cell with zDNN's rounding."""
    return ZdnnPrepared(spec)


ZDNN_TARGET = Target(
    "zdnn",
    "IBM zDNN (z16/z17 zAIU) LSTM/GRU: DLFLOAT16 storage at every NNPA op boundary (weights, inputs, x·W+b, "
    "h·R+b, c, h), float32 inside ops",
    family="zdnn",
    dtype=np.dtype(np.float32),
    rounding=DLF16_OP_BOUNDARIES,
    features=FEATURES,
    bit_exact=False,
    prepare=prepare,
    needs_calibration=False,
)
