"""The three recurrent cell kinds as data: gate counts and ONNX default activations."""

from __future__ import annotations

GATE_COUNT = {"lstm": 4, "gru": 3, "rnn": 1}
"""Gate blocks in W, R and each bias: LSTM i, f, g, o; GRU z, r, n; RNN one."""
DEFAULT_ACTIVATIONS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh"), "rnn": ("Tanh",)}
"""Per-direction activations (LSTM f, g, h; GRU f, g; RNN f) when none are given; their count is the number a
direction takes."""
