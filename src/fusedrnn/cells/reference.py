"""Reference steps: one short, readable function per cell kind, written like the specification, and a plain
sequence loop. Float64, no speed tricks: the oracle the engines (NumPy, compiled) are tested against.

The steps cover the union of the engines' options: ONNX (clip, peepholes, input_forget, activation lists with
alpha/beta, linear_before_reset), PyTorch and TFLite (projection with bias and clip, cell clip, CIFG coupling,
layer norm) and diagonal recurrent weights. Conventions (``specs/onnx.md``, ``specs/conventions.md``):

* canonical gate order: LSTM i, f, g, o (g = cell candidate); GRU z, r, n (n = candidate); RNN one gate;
* matrices are [out, in], so a product reads x·Wᵀ; the two biases b_x (input side) and b_h (recurrent side)
  are kept apart because the GRU needs them apart;
* one step works on a block of rows: x [B, I], h [B, Hp], c [B, H].

Each step returns a :class:`Step` holding the values at the engines' named points (see
:mod:`fusedrnn.cells.observers`), so observers can be checked against it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .activations import Activation

SIGMOID = Activation("Sigmoid")
TANH = Activation("Tanh")
LN_EPSILON = 1e-8
"""Added to the variance inside the square root of the layer norm (TFLite's value)."""


@dataclass(frozen=True)
class Step:
    """One step's values at the named points, float64, rows first: ``output`` [B, Hp] the new hidden state (as
    stored), ``cell`` [B, H] the new LSTM cell (None for GRU / RNN), ``preact`` and ``gates`` [B, G, H] in the
    canonical gate order, ``hidden`` [B, H] (LSTM o ⊙ h(c'), the projection's input; GRU / RNN the new h)."""

    output: np.ndarray
    cell: np.ndarray | None
    preact: np.ndarray
    gates: np.ndarray
    hidden: np.ndarray


# ---- small named helpers ---------------------------------------------------------------------------------------
def f64(a) -> np.ndarray | None:
    """``a`` as a float64 array (None stays None)."""
    return None if a is None else np.asarray(a, dtype=np.float64)


def clamp(v: np.ndarray, limit: float | None) -> np.ndarray:
    """v clamped to [-limit, limit]; v itself when limit is None."""
    return v if limit is None else np.clip(v, -limit, limit)


def layer_norm(v: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(v - mean) / sqrt(var + ε) ⊙ scale over the last axis (the H units of one gate)."""
    mean = v.mean(axis=-1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
    return (v - mean) / np.sqrt(var + LN_EPSILON) * scale


def gate_blocks(a: np.ndarray, G: int) -> np.ndarray:
    """[..., G·H] -> [..., G, H]: the per-gate blocks of a stacked weight, bias or sum."""
    return a.reshape(a.shape[:-1] + (G, a.shape[-1] // G))


def bias_sum(b_x: np.ndarray | None, b_h: np.ndarray | None, n: int) -> np.ndarray:
    """b_x + b_h, zeros [n] for a missing one."""
    return (np.zeros(n) if b_x is None else b_x) + (np.zeros(n) if b_h is None else b_h)


# ---- the three steps -------------------------------------------------------------------------------------------
def lstm_step(x, h, c, W, R, b_x=None, b_h=None, *, acts: Sequence[Activation] = (SIGMOID, TANH, TANH),
              P=None, clip: float | None = None, coupling: str | None = None, cell_clip: float | None = None,
              proj_W=None, proj_b=None, proj_clip: float | None = None, ln=None) -> Step:
    """One LSTM step, with (f, g, h) = ``acts`` and b = b_x + b_h:

        aᵢ = x·Wᵢᵀ + h·Rᵢᵀ + bᵢ + Pᵢ ⊙ c        i = f(clip(aᵢ))
        a_f = x·W_fᵀ + h·R_fᵀ + b_f + P_f ⊙ c    f = f(clip(a_f))     input_forget: f = 1 - i;  cifg: i = 1 - f
        a_g = x·W_gᵀ + h·R_gᵀ + b_g              g = g(clip(a_g))
        c' = clamp(f ⊙ c + i ⊙ g, cell_clip)
        a_o = x·W_oᵀ + h·R_oᵀ + b_o + P_o ⊙ c'   o = f(clip(a_o))     (the output peephole sees the new cell)
        m = o ⊙ h(c')
        h' = clamp(m·proj_Wᵀ + proj_b, proj_clip), or h' = m without a projection

    Diagonal R (shape [4H]): h·Rᵀ becomes R ⊙ h. Layer norm (``ln`` [4, H]): each gate's sum *without* its bias
    is normalised over its H units and scaled, then the bias is added: a = layer_norm(a - b, ln) + b.

    Shapes: x [B, I]; h [B, Hp]; c [B, H]; W [4H, I]; R [4H, Hp] or [4H]; b_x, b_h [4H]; P [3, H] (i, f, o);
    proj_W [Hp, H]; proj_b [Hp]; ln [4, H]. ``Step.preact`` holds each aᵢ before layer norm and clip (with
    layer norm: without the bias).
    """
    f_act, g_act, h_act = acts
    H = W.shape[0] // 4
    b = gate_blocks(bias_sum(b_x, b_h, 4 * H), 4)  # [4, H]
    rec = R * np.tile(h, 4) if R.ndim == 1 else h @ R.T  # [B, 4H]
    a = gate_blocks(x @ W.T + rec, 4)  # [B, 4, H]: i, f, g, o, without bias
    if P is not None:
        a[:, 0] += P[0] * c
        a[:, 1] += P[1] * c

    def gate_input(k: int, a_k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gate k's sum without bias -> (its pre-activation as reported, what its activation sees)."""
        if ln is None:
            return a_k + b[k], clamp(a_k + b[k], clip)
        return a_k, clamp(layer_norm(a_k, ln[k]) + b[k], clip)

    (p_i, s_i), (p_f, s_f), (p_g, s_g) = (gate_input(k, a[:, k]) for k in range(3))
    i, f, g = f_act(s_i), f_act(s_f), g_act(s_g)
    if coupling == "input_forget":
        f = 1 - i
    elif coupling == "cifg":
        i = 1 - f
    c_new = clamp(f * c + i * g, cell_clip)
    p_o, s_o = gate_input(3, a[:, 3] + (P[2] * c_new if P is not None else 0))
    o = f_act(s_o)
    m = o * h_act(c_new)
    out = m if proj_W is None else clamp(m @ proj_W.T + (0 if proj_b is None else proj_b), proj_clip)
    return Step(output=out, cell=c_new, preact=np.stack([p_i, p_f, p_g, p_o], axis=1),
                gates=np.stack([i, f, g, o], axis=1), hidden=m)


def gru_step(x, h, W, R, b_x=None, b_h=None, *, acts: Sequence[Activation] = (SIGMOID, TANH),
             clip: float | None = None, linear_before_reset: bool = False) -> Step:
    """One GRU step, with (f, g) = ``acts``:

        z = f(clip(x·W_zᵀ + h·R_zᵀ + bx_z + bh_z))
        r = f(clip(x·W_rᵀ + h·R_rᵀ + bx_r + bh_r))
        n = g(clip(x·W_nᵀ + bx_n + (r ⊙ h)·R_nᵀ + bh_n))      linear_before_reset = False (ONNX default)
        n = g(clip(x·W_nᵀ + bx_n + r ⊙ (h·R_nᵀ + bh_n)))      linear_before_reset = True (PyTorch)
        h' = (1 - z) ⊙ n + z ⊙ h

    Shapes: x [B, I]; h [B, H]; W [3H, I]; R [3H, H]; b_x, b_h [3H].
    """
    f_act, g_act = acts
    H = W.shape[0] // 3
    Wz, Wr, Wn = gate_blocks(W.T, 3).transpose(1, 0, 2)  # each [I, H]: x @ Wz = x·W_zᵀ
    Rz, Rr, Rn = gate_blocks(R.T, 3).transpose(1, 0, 2)
    bxz, bxr, bxn = gate_blocks(bias_sum(b_x, None, 3 * H), 3)
    bhz, bhr, bhn = gate_blocks(bias_sum(None, b_h, 3 * H), 3)
    a_z = x @ Wz + h @ Rz + bxz + bhz
    a_r = x @ Wr + h @ Rr + bxr + bhr
    z, r = f_act(clamp(a_z, clip)), f_act(clamp(a_r, clip))
    if linear_before_reset:
        a_n = x @ Wn + bxn + r * (h @ Rn + bhn)
    else:
        a_n = x @ Wn + bxn + (r * h) @ Rn + bhn
    n = g_act(clamp(a_n, clip))
    h_new = (1 - z) * n + z * h
    return Step(output=h_new, cell=None, preact=np.stack([a_z, a_r, a_n], axis=1),
                gates=np.stack([z, r, n], axis=1), hidden=h_new)


def rnn_step(x, h, W, R, b_x=None, b_h=None, *, acts: Sequence[Activation] = (TANH,),
             clip: float | None = None) -> Step:
    """One vanilla RNN step, with (f,) = ``acts``:

        h' = f(clip(x·Wᵀ + h·Rᵀ + b_x + b_h))

    Shapes: x [B, I]; h [B, H]; W [H, I]; R [H, H]; b_x, b_h [H].
    """
    a = x @ W.T + h @ R.T + bias_sum(b_x, b_h, W.shape[0])
    h_new = acts[0](clamp(a, clip))
    return Step(output=h_new, cell=None, preact=a[:, None], gates=h_new[:, None], hidden=h_new)


# ---- the sequence loop -----------------------------------------------------------------------------------------
StepFunction = Callable[..., Step]
"""``step(x_t, h)`` or ``step(x_t, h, c)`` for one direction's weights and options."""


def sequence(steps: Sequence[StepFunction], x, states: Sequence[np.ndarray], reverse: Sequence[bool], lens=None,
             observer: Callable[[int, Step], object] | None = None) -> tuple[np.ndarray, ...]:
    """Run direction d with ``steps[d]`` over the sequence; returns Y [T, D, B, Hp] and the final states.

    x [T, B, I]; ``states``: (h0,) or (h0, c0), each [D, B, .]; ``lens`` [B] (None: every row runs T steps).
    Row b runs its first L = lens[b] timesteps: forwards t = 0 … L-1, backwards (``reverse[d]``) t = L-1 … 0.
    Y[t, d, b] is the output of the step that read x[t, b], and 0 for t ≥ L. The final states are those after
    the row's last step; a row of length 0 gets 0 (not its initial state), except when every row runs all T
    steps (``lens`` None or all T, including T = 0: then the initial state). ``observer(d, step)`` sees every
    step.
    """
    x = f64(x)
    T, B = x.shape[:2]
    lens = np.full(B, T) if lens is None else np.asarray(lens)
    zero_if_empty = bool(np.any(lens != T))
    D = len(reverse)
    Y = np.zeros((T, D, B, states[0].shape[-1]))
    finals = [np.zeros_like(f64(s)) for s in states]
    for d in range(D):
        state = [f64(s)[d].copy() for s in states]
        for s in range(T):
            rows = np.flatnonzero(lens > s)  # the rows still running at the s-th step of this walk
            if rows.size == 0:
                break
            t = lens[rows] - 1 - s if reverse[d] else np.full(rows.size, s)
            out = steps[d](x[t, rows], *(st[rows] for st in state))
            Y[t, d, rows] = out.output
            state[0][rows] = out.output
            if len(state) > 1:
                state[1][rows] = out.cell
            if observer is not None:
                observer(d, out)
        for k, st in enumerate(state):
            finals[k][d] = np.where((lens == 0)[:, None] & zero_if_empty, 0, st)
    return (Y, *finals)


def _at(a, d: int):
    """Direction d of an optional [D, ...] array."""
    return None if a is None else f64(a)[d]


def lstm_sequence(x, W, R, b_x, b_h, h0, c0, *, reverse, acts, lens=None, P=None, clip=None, coupling=None,
                  cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, ln=None, observer=None):
    """:func:`lstm_step` over a sequence, with the engine's arguments (:func:`fusedrnn.cells.lstm_sequence`,
    canonical order, [D, ...] arrays): (Y [T, D, B, Hp], Y_h [D, B, Hp], Y_c [D, B, H]), float64."""
    steps = [lambda xt, h, c, d=d: lstm_step(
        xt, h, c, _at(W, d), _at(R, d), _at(b_x, d), _at(b_h, d), acts=acts[d], P=_at(P, d), clip=clip,
        coupling=coupling, cell_clip=cell_clip, proj_W=_at(proj_W, d), proj_b=_at(proj_b, d), proj_clip=proj_clip,
        ln=_at(ln, d)) for d in range(len(reverse))]
    return sequence(steps, x, (h0, c0), reverse, lens, observer)


def gru_sequence(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, linear_before_reset=False,
                 observer=None):
    """:func:`gru_step` over a sequence (arguments of :func:`fusedrnn.cells.gru_sequence`): (Y, Y_h), float64."""
    steps = [lambda xt, h, d=d: gru_step(xt, h, _at(W, d), _at(R, d), _at(b_x, d), _at(b_h, d), acts=acts[d],
                                         clip=clip, linear_before_reset=linear_before_reset)
             for d in range(len(reverse))]
    return sequence(steps, x, (h0,), reverse, lens, observer)


def rnn_sequence(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, observer=None):
    """:func:`rnn_step` over a sequence (arguments of :func:`fusedrnn.cells.rnn_sequence`): (Y, Y_h), float64."""
    steps = [lambda xt, h, d=d: rnn_step(xt, h, _at(W, d), _at(R, d), _at(b_x, d), _at(b_h, d), acts=acts[d],
                                         clip=clip)
             for d in range(len(reverse))]
    return sequence(steps, x, (h0,), reverse, lens, observer)


__all__ = ["LN_EPSILON", "Step", "gru_sequence", "gru_step", "lstm_sequence", "lstm_step", "rnn_sequence",
           "rnn_step", "sequence"]
