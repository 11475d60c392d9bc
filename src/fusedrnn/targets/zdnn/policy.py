"""The DLFLOAT16 rounding policy of zDNN's LSTM/GRU for the float cell engines (zdnn.md 3.3).

zDNN runs an RNN as NNPA ops whose every input and output is a DLFLOAT16 tensor: weights, biases, x, h0, c0
(stored), FUSED = x·W + Wb for all steps (``xproj``), BIAS_ADD = h·R + Rb per step (``hproj``), and the
LSTMACT/GRUACT outputs H_t (``hidden``) and C_t (``cell``). Inside an op (the sum FUSED + BIAS_ADD, the
activations, the gate products) the engines compute in float32; the precision there is not published.
"""

from __future__ import annotations

from ...cells.rounding import RoundingPolicy
from ...numerics.float_formats import round_to_dlfloat16

ZDNN_ROUNDING_POINTS = ("weights", "inputs", "xproj", "hproj", "cell", "hidden", "outputs")

DLF16_OP_BOUNDARIES = RoundingPolicy("dlf16-zdnn", dict.fromkeys(ZDNN_ROUNDING_POINTS, round_to_dlfloat16))
"""Round to DLFLOAT16 (ties away, flush to zero, overflow -> NaN) at every zDNN op boundary."""
