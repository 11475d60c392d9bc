"""The registry target ``zdnn``: float LSTM/GRU layers run with zDNN's DLFLOAT16 op-boundary rounding."""

from __future__ import annotations

import numpy as np

from ...cells.gru import gru_sequence
from ...cells.lstm import lstm_sequence
from ...cells.recurrence import direction_flags
from ...errors import UnsupportedFeatureError
from ..registry import Target
from .policy import DLF16_OP_BOUNDARIES

FEATURES = frozenset({"lstm", "gru", "bidirectional", "linear_before_reset"})


def prepare(layer, calibration=None):
    """Check what zDNN cannot express and return ``run(x, states, lens) -> (Y, states)``."""
    if layer.cell == "gru" and not layer.linear_before_reset:
        raise UnsupportedFeatureError("linear_before_reset: zDNN's GRU applies the reset gate after the linear "
                                      "transformation only (linear_before_reset=True / reset_after=True), got False")
    reverse = direction_flags(layer.direction)
    acts = layer.activations

    def w(a):
        return None if a is None else np.ascontiguousarray(a, dtype=np.float32)

    def run(x, states, lens):
        if lens is not None and np.any(np.asarray(lens) != x.shape[0]):
            raise UnsupportedFeatureError(f"sequence_lens: zDNN's lstm/gru run every sequence for all "
                                          f"{x.shape[0]} timesteps; got lengths {np.asarray(lens).tolist()}")
        if layer.cell == "lstm":
            Y, h, c = lstm_sequence(x, w(layer.W), w(layer.R), w(layer.b_x), w(layer.b_h), states[0], states[1],
                                    reverse=reverse, acts=acts, policy=DLF16_OP_BOUNDARIES)
            return Y, (h, c)
        Y, h = gru_sequence(x, w(layer.W), w(layer.R), w(layer.b_x), w(layer.b_h), states[0], reverse=reverse,
                            acts=acts, linear_before_reset=True, policy=DLF16_OP_BOUNDARIES)
        return Y, (h,)

    return run


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
