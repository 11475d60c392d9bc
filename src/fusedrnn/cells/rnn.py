"""Float vanilla RNN engine (ONNX RNN, PyTorch ``nn.RNN``, Keras ``SimpleRNN``, TFLite RNN ops).

Canonical inputs: x [T, B, I]; W [D, H, I]; R [D, H, H]; b_x, b_h [D, H]; h0 [D, B, H].

    h' = f(clip(x·Wᵀ + h·Rᵀ + b_x + b_h))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .activations import Activation
from .recurrence import (
    SequencePlan,
    activation_applier,
    clipper,
    final_rows,
    padded_copy,
    projected_steps,
    restore_time_order,
    stored_biases,
    summed_bias,
)
from .rounding import EXACT, RoundingPolicy


def rnn_sequence(
    x: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    b_x: np.ndarray | None,
    b_h: np.ndarray | None,
    h0: np.ndarray,
    *,
    reverse: Sequence[bool],
    acts: Sequence[Sequence[Activation]],
    lens: np.ndarray | None = None,
    clip: float | None = None,
    policy: RoundingPolicy = EXACT,
) -> tuple[np.ndarray, np.ndarray]:
    """Run a vanilla RNN over a sequence. Returns Y [T, D, B, H] and Y_h [D, B, H]; ``acts[d]`` = (f,)."""
    T, B, _ = x.shape
    D, H = W.shape[0], W.shape[1]
    dt = x.dtype
    rw, ri = policy.get("weights"), policy.get("inputs")
    r_pre, r_gate, r_hid, r_out = (policy.get(p) for p in ("preact", "gates", "hidden", "outputs"))
    bias = summed_bias(*stored_biases(b_x, b_h, rw), (D, H), dt)
    Wc = W.copy() if rw is not None else W
    RT = padded_copy(R.transpose(0, 2, 1))
    if rw is not None:
        for arr in (Wc, RT):
            rw(arr)

    plan = SequencePlan(T, B, lens)
    x = plan.sort_batch(x, 1)
    h_prev = plan.sort_batch(h0, 1)
    if ri is not None:
        x, h_prev = np.array(x, copy=True), np.array(h_prev, copy=True)
        ri(x)
        ri(h_prev)
    act = activation_applier([a[0] for a in acts], D)
    clamp = clipper(clip)
    Yp = np.zeros((T, D, B, H), dt) if plan.lens is not None else np.empty((T, D, B, H), dt)

    for s, n, g in projected_steps(x, Wc, bias, reverse, plan):
        hn = Yp[s, :, :n]
        np.matmul(h_prev[:, :n], RT, out=hn)
        hn += g
        if clamp is not None:
            clamp(hn)
        if r_pre is not None:
            r_pre(hn)
        act(hn)
        if r_gate is not None:
            r_gate(hn)
        if r_hid is not None:
            r_hid(hn)
        h_prev = Yp[s]

    Y_h = plan.unsort_batch(final_rows(Yp, h0, plan), 1)
    Y = plan.unsort_batch(restore_time_order(Yp, reverse, plan), 2)
    if r_out is not None:
        r_out(Y)
        r_out(Y_h)
    return Y, Y_h
