"""The three recurrent cell kinds as data: gate counts, ONNX default activations, LSTM weight block orders."""

from __future__ import annotations

import numpy as np

from .. import conventions
from ..errors import AttributeValueError

GATE_COUNT = {"lstm": 4, "gru": 3, "rnn": 1}
"""Gate blocks in W, R and each bias: LSTM i, f, g, o; GRU z, r, n; RNN one."""
DEFAULT_ACTIVATIONS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh"), "rnn": ("Tanh",)}
"""Per-direction activations (LSTM f, g, h; GRU f, g; RNN f) when none are given; their count is the number a
direction takes."""

LSTM_GATE_ORDERS: dict[str, str] = {"canonical": conventions.CANONICAL_GATES["lstm"],
                                    "onnx": conventions.gate_order("lstm", "onnx")}
"""The block orders (as canonical gate letters) the LSTM engine takes for W, R, b_x and b_h (``gate_order=``):
the canonical i, f, g, o and ONNX's i, o, f, c (so ONNX weights need no reordered copy per call)."""
LSTM_BLOCKS: dict[str, tuple[int, ...]] = {
    name: tuple(order.index(g) for g in conventions.CANONICAL_GATES["lstm"]) for name, order in LSTM_GATE_ORDERS.items()
}
"""For each gate order: the block holding each canonical gate (i, f, g, o)."""


def lstm_blocks(gate_order: str) -> tuple[int, ...]:
    """:data:`LSTM_BLOCKS` of ``gate_order``, or AttributeValueError."""
    blocks = LSTM_BLOCKS.get(gate_order)
    if blocks is None:
        raise AttributeValueError(f"gate_order: expected one of {sorted(LSTM_GATE_ORDERS)}, got {gate_order!r}")
    return blocks


def lstm_canonical(a: np.ndarray | None, gate_order: str, axis: int = 1) -> np.ndarray | None:
    """``a`` (W, R or a bias in ``gate_order``) with its gate blocks along ``axis`` in the canonical order."""
    if a is None or gate_order == "canonical":
        return a
    blocks = lstm_blocks(gate_order)
    shape = a.shape
    split = a.reshape(shape[:axis] + (4, shape[axis] // 4) + shape[axis + 1 :])
    return np.ascontiguousarray(np.take(split, blocks, axis=axis)).reshape(shape)
