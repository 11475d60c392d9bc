"""Float GRU engine: ONNX GRU (both ``linear_before_reset`` forms), PyTorch, Keras and TFLite GRUs.

Canonical inputs (gate order z, r, n; z = update, r = reset, n = candidate; matrices out x in):
x [T, B, I]; W [D, 3H, I]; R [D, 3H, H]; b_x, b_h [D, 3H] (double bias); h0 [D, B, H].

    z = f(x·Wzᵀ + h·Rzᵀ + bxz + bhz)          r = f(x·Wrᵀ + h·Rrᵀ + bxr + bhr)
    n = g(x·Wnᵀ + (r ⊙ h)·Rnᵀ + bhn + bxn)    linear_before_reset = False (ONNX default, Keras reset_after=False)
    n = g(x·Wnᵀ + bxn + r ⊙ (h·Rnᵀ + bhn))    linear_before_reset = True  (PyTorch, Keras reset_after=True)
    h' = (1 - z) ⊙ n + z ⊙ h

``clip`` clamps the three pre-activations before f/g (onnxruntime).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import dispatch
from .activations import Activation, half_sigmoid
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
)
from .rounding import EXACT, RoundingPolicy


def gru_sequence(
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
    linear_before_reset: bool = False,
    policy: RoundingPolicy = EXACT,
    observer: Observer | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run a GRU over a sequence. Returns Y [T, D, B, H] and Y_h [D, B, H]; ``acts[d]`` = (f, g). ``observer``
    is called with the values of every step at the named points of :mod:`fusedrnn.cells.observers`. The backend
    (compiled, rounded or this module's NumPy loop) is chosen by :mod:`fusedrnn.cells.dispatch`."""
    return dispatch.run("gru", locals(), _numpy_gru)  # locals(): exactly the arguments, by name


def _numpy_gru(x, W, R, b_x, b_h, h0, *, reverse, acts, lens=None, clip=None, linear_before_reset=False,
               policy=EXACT, observer=None):
    """The NumPy time loop of :func:`gru_sequence` (same arguments)."""
    B = x.shape[1]
    D, H3 = W.shape[0], W.shape[1]
    H = H3 // 3
    dt = x.dtype
    rw = policy.get("weights")
    r_pre, r_gate, r_hid = (policy.get(p) for p in ("preact", "gates", "hidden"))

    # Biases folded into the input projection: everything except, with linear_before_reset, the candidate's
    # recurrent bias, which sits inside r ⊙ (...).
    b_x, b_h = stored_biases(b_x, b_h, rw)
    # split points (xproj / hproj, linear_before_reset only): b_h stays with h·Rᵀ, rounded with it
    r_xp, r_hp = policy.get("xproj"), policy.get("hproj")
    split = policy.splits_biases and linear_before_reset
    bias = np.zeros((D, H3), dt)
    if b_x is not None:
        bias += b_x
    b_hn = None
    h_bias = b_h.reshape(D, 1, H3).copy() if split and b_h is not None else None
    if b_h is not None and not split:
        if linear_before_reset:
            bias[:, : 2 * H] += b_h[:, : 2 * H]
            b_hn = b_h[:, None, 2 * H :].copy()  # [D, 1, H]
        else:
            bias += b_h
    # σ(x) = ½·tanh(½x) + ½ with the ½ folded into the z and r rows (exact), as in the LSTM engine
    fold = all(a[0].name == "Sigmoid" for a in acts) and r_pre is None and r_gate is None and not split
    Wc = W.copy() if (rw is not None or fold) else W
    RT = np.array(R.transpose(0, 2, 1), order="C", copy=True)  # [D, H, 3H]
    if rw is not None:
        for arr in (Wc, RT):
            rw(arr)
    if fold:
        Wc[:, : 2 * H] *= 0.5
        RT[:, :, : 2 * H] *= 0.5
        bias[:, : 2 * H] *= 0.5
    if linear_before_reset:  # one GEMM over all three gates
        RT = padded_copy(RT)
    else:  # z, r first; the candidate's GEMM needs r
        RT_zr, RT_n = padded_copy(RT[:, :, : 2 * H]), padded_copy(RT[:, :, 2 * H :])

    plan, x, h_prev, _, Yp = begin_sequence(x, h0, lens, policy, H)
    clamp = clipper(clip)
    zr_stage = gate_stage(clipper(None if clip is None else clip / 2) if fold else clamp, r_pre,
                          half_sigmoid if fold else activation_applier([a[0] for a in acts], D), r_gate)
    n_stage = gate_stage(clamp, r_pre, activation_applier([a[1] for a in acts], D), r_gate)
    want = wanted_points(observer)
    unfold = 2 if fold else 1  # the folded z, r pre-activations are ½ of the true ones (exactly)
    if linear_before_reset:
        acc = np.empty((D, B, H3), dt)
    else:
        acc = np.empty((D, B, 2 * H), dt)
        cand = np.empty((D, B, H), dt)
        rh = np.empty((D, B, H), dt)

    for s, n, g in projected_steps(x, Wc, bias, reverse, plan, r_xp if split else None):
        hp = h_prev[:, :n]
        a = acc[:, :n]
        if linear_before_reset:
            np.matmul(hp, RT, out=a)
            if split:
                if h_bias is not None:
                    a += h_bias
                if r_hp is not None:
                    r_hp(a)
            zr, nn = a[:, :, : 2 * H], a[:, :, 2 * H :]
            zr += g[:, :, : 2 * H]
        else:
            np.matmul(hp, RT_zr, out=a)
            zr = a
            zr += g[:, :, : 2 * H]
        if "preact" in want:
            pre = np.empty((D, n, 3, H), dt)
            np.multiply(zr.reshape(D, n, 2, H), unfold, out=pre[:, :, :2])
        zr_stage(zr)
        z, r = zr[:, :, :H], zr[:, :, H:]
        if linear_before_reset:
            if b_hn is not None:
                nn += b_hn
            nn *= r
        else:
            nn = cand[:, :n]
            t = rh[:, :n]
            np.multiply(r, hp, out=t)
            np.matmul(t, RT_n, out=nn)
        nn += g[:, :, 2 * H :]
        if "preact" in want:
            pre[:, :, 2] = nn
        n_stage(nn)
        # h' = n + z ⊙ (h - n)
        hn = Yp[s, :, :n]
        np.subtract(hp, nn, out=hn)
        hn *= z
        hn += nn
        if r_hid is not None:
            r_hid(hn)
        if want:
            if "preact" in want:
                observer("preact", pre)
            if "gates" in want:
                observer("gates", np.concatenate([zr, nn], axis=2).reshape(D, n, 3, H))
            for point in ("hidden", "output"):
                if point in want:
                    observer(point, hn.copy())
        h_prev = Yp[s]

    return end_sequence(Yp, h0, plan, reverse, policy)
