"""Float vanilla RNN engine (ONNX RNN, PyTorch ``nn.RNN``, Keras ``SimpleRNN``, TFLite RNN ops).

Canonical inputs: x [T, B, I]; W [D, H, I]; R [D, H, H]; b_x, b_h [D, H]; h0 [D, B, H].

    h' = f(clip(x·Wᵀ + h·Rᵀ + b_x + b_h))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import dispatch
from .activations import Activation
from .observers import Observer, wanted_points
from .recurrence import (
    activation_applier,
    begin_sequence,
    clipper,
    end_sequence,
    gate_stage,
    padded_copy,
    projected_steps,
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
    observer: Observer | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run a vanilla RNN over a sequence. Returns Y [T, D, B, H] and Y_h [D, B, H]; ``acts[d]`` = (f,).
    ``observer`` is called with the values of every step at the named points of :mod:`fusedrnn.cells.observers`.
    The backend (compiled or this module's NumPy loop) is chosen by :mod:`fusedrnn.cells.dispatch`."""
    return dispatch.run("rnn", locals(), _numpy_rnn)  # locals(): exactly the arguments, by name


def _numpy_rnn(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, policy=EXACT, observer=None):
    """The NumPy time loop of :func:`rnn_sequence` (same arguments)."""
    D, H = W.shape[0], W.shape[1]
    dt = x.dtype
    rw = policy.get("weights")
    r_pre, r_gate, r_hid = (policy.get(p) for p in ("preact", "gates", "hidden"))
    bias = summed_bias(*stored_biases(b_x, b_h, rw), (D, H), dt)
    Wc = W.copy() if rw is not None else W
    RT = padded_copy(R.transpose(0, 2, 1))
    if rw is not None:
        for arr in (Wc, RT):
            rw(arr)

    plan, x, h_prev, _, Yp = begin_sequence(x, h0, lens, policy, H)
    want = wanted_points(observer)
    gate = gate_stage(clipper(clip), r_pre, activation_applier([a[0] for a in acts], D), r_gate)
    stage = gate_stage(gate, r_hid) if not want else gate  # observing: r_hid separately, after the gate point
    for s, n, g in projected_steps(x, Wc, bias, reverse, plan):
        hn = Yp[s, :, :n]
        np.matmul(h_prev[:, :n], RT, out=hn)
        hn += g
        if "preact" in want:
            observer("preact", hn.reshape(D, n, 1, H).copy())
        stage(hn)
        if want:
            if "gates" in want:
                observer("gates", hn.reshape(D, n, 1, H).copy())
            if r_hid is not None:
                r_hid(hn)
            for point in ("hidden", "output"):
                if point in want:
                    observer(point, hn.copy())
        h_prev = Yp[s]

    return end_sequence(Yp, h0, plan, reverse, policy)
