"""Float LSTM engine: the union of ONNX, PyTorch, Keras and TFLite LSTM options.

Canonical inputs (gate order i, f, g, o; g = cell candidate; matrices out x in, i.e. ``x @ W.T``):

==========  ==================  =====================================================================
x           [T, B, I]           time-major input
W           [D, 4H, I]          input weights
R           [D, 4H, Hp]         recurrent weights (Hp = projection size, or H); [D, 4H] when diagonal
b_x, b_h    [D, 4H]             input-side and recurrent-side biases (double-bias convention)
h0, c0      [D, B, Hp], [D, B, H]
P           [D, 3, H]           peepholes, order i, f, o; the output gate uses the *new* cell
proj_W      [D, Hp, H]          projection (PyTorch ``proj_size``, TFLite projection), proj_b [D, Hp]
ln          [D, 4, H]           TFLite layer-norm coefficients (i, f, g, o)
==========  ==================  =====================================================================

Per step (onnxruntime order): pre-activation = x·Wᵀ + h·Rᵀ (or R ⊙ h if diagonal) + peephole + biases;
with layer norm the bias is added *after* normalising over the H units of each gate (ε = 1e-8 inside the
square root, as TFLite); ``clip`` clamps every pre-activation; i, f, o use activation f, the candidate g,
the output h(c). ``coupling``: ``"input_forget"`` (ONNX, f = 1 - i) or ``"cifg"`` (TFLite, i = 1 - f).
``cell_clip`` clamps the new cell (TFLite); the projection ``h = m·proj_Wᵀ + proj_b`` with ``proj_clip``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import dispatch
from .activations import Activation, half_sigmoid
from .kinds import lstm_blocks
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

# the engine's internal gate order: the three sigmoid-type gates first (one contiguous block), candidate last
_COMPUTE_ORDER = (0, 1, 3, 2)  # i, f, o, g taken from canonical i, f, g, o (and back: the map is an involution)
LN_EPSILON = 1e-8


def _regate(a: np.ndarray, axis: int, order: tuple[int, ...] = _COMPUTE_ORDER) -> np.ndarray:
    """Reorder the 4 gate blocks along ``axis``: block k of the result is block ``order[k]`` of ``a`` (by default
    canonical i, f, g, o to compute order i, f, o, g)."""
    shape = a.shape
    H = shape[axis] // 4
    blocks = a.reshape(shape[:axis] + (4, H) + shape[axis + 1 :])
    return np.ascontiguousarray(np.take(blocks, order, axis=axis)).reshape(shape)


def lstm_sequence(
    x: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    b_x: np.ndarray | None,
    b_h: np.ndarray | None,
    h0: np.ndarray,
    c0: np.ndarray,
    *,
    reverse: Sequence[bool],
    acts: Sequence[Sequence[Activation]],
    lens: np.ndarray | None = None,
    P: np.ndarray | None = None,
    clip: float | None = None,
    coupling: str | None = None,
    cell_clip: float | None = None,
    proj_W: np.ndarray | None = None,
    proj_b: np.ndarray | None = None,
    proj_clip: float | None = None,
    ln: np.ndarray | None = None,
    policy: RoundingPolicy = EXACT,
    h_feed: Callable[[np.ndarray], np.ndarray] | None = None,
    observer: Observer | None = None,
    gate_order: str = "canonical",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run an LSTM over a sequence. Returns Y [T, D, B, Hp], Y_h [D, B, Hp], Y_c [D, B, H].

    Inputs are validated canonical arrays in one float dtype (the compute dtype); ``acts[d]`` holds the
    (f, g, h) activations of direction d. Nothing the caller passed is modified. ``h_feed`` maps the previous
    hidden state of the active rows [D, n, Hp] to the values the recurrent GEMM sees (a new array; e.g.
    onnxruntime's DynamicQuantizeLSTM quantizes it to uint8 and back every step). ``observer`` is called with
    the values of every step at the named points of :mod:`fusedrnn.cells.observers` (the NumPy loop runs).
    ``gate_order`` is the block order of W, R, b_x and b_h (a key of :data:`.kinds.LSTM_GATE_ORDERS`: "onnx"
    takes ONNX's i, o, f, c as they are); P and ln are always canonical.

    The backend (compiled, rounded or this module's NumPy loop) is chosen by :mod:`fusedrnn.cells.dispatch`.
    """
    return dispatch.run("lstm", locals(), _numpy_lstm)  # locals(): exactly the arguments, by name


def _numpy_lstm(x, W, R, b_x, b_h, h0, c0, *, reverse, acts, lens=None, P=None, clip=None, coupling=None,
                cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, ln=None, policy=EXACT, h_feed=None,
                observer=None, gate_order="canonical"):
    """The NumPy time loop of :func:`lstm_sequence` (same arguments)."""
    B = x.shape[1]
    D, H4 = W.shape[0], W.shape[1]
    H = H4 // 4
    diagonal = R.ndim == 2
    Hp = proj_W.shape[1] if proj_W is not None else H
    dt = x.dtype
    rw = policy.get("weights")
    r_pre, r_gate, r_cell, r_hid = (policy.get(p) for p in ("preact", "gates", "cell", "hidden"))

    # ---- weights in compute order, pre-transposed for row-vector GEMMs, rounded once --------------------
    blocks = lstm_blocks(gate_order)  # W, R, b_x, b_h: the block of each canonical gate
    order = tuple(blocks[k] for k in _COMPUTE_ORDER)  # P and ln: canonical
    Wc = _regate(W, 1, order)
    # split points (xproj / hproj): the recurrent bias stays with h·Rᵀ instead of being folded into the projection
    r_xp, r_hp = policy.get("xproj"), policy.get("hproj")
    split = policy.splits_biases and ln is None
    sb_x, sb_h = stored_biases(b_x, b_h, rw)
    bias = summed_bias(sb_x, None if split else sb_h, (D, H4), dt)
    bias = None if bias is None else _regate(bias, 1, order)
    h_bias = _regate(sb_h, 1, order).reshape(D, 1, H4) if split and sb_h is not None else None
    if diagonal:
        Rc = _regate(R, 1, order).reshape(D, 1, 4, H)
    else:
        Rc = padded_copy(_regate(R, 1, order).transpose(0, 2, 1))  # [D, Hp, 4H]
    P_if = None if P is None else P[:, None, 0:2].copy()  # [D, 1, 2, H]
    P_o = None if P is None else P[:, None, 2].copy()  # [D, 1, H]
    ln_c = None if ln is None else _regate(ln, 1).reshape(D, 1, 4, H)
    projT = None if proj_W is None else np.ascontiguousarray(proj_W.transpose(0, 2, 1))  # [D, H, Hp]
    pb = None if proj_b is None else proj_b.reshape(D, 1, Hp).copy()
    if rw is not None:
        for arr in (Wc, Rc, P_if, P_o, ln_c, projT, pb):
            if arr is not None:
                rw(arr)
    # with layer norm the bias goes in after normalisation, so it is not folded into the projection
    ln_bias = None if ln_c is None or bias is None else bias.reshape(D, 1, 4, H)
    # σ(x) = ½·tanh(½x) + ½. With f = Sigmoid (all directions) and no rounding of pre-activations or gates, the ½
    # is folded into the i, f, o rows of W, R, biases and peepholes (exact: a power of two), so a single tanh call
    # covers every gate of a step. Layer norm is excluded (ε makes it not scale-invariant).
    fold = (all(a[0].name == "Sigmoid" for a in acts) and r_pre is None and r_gate is None and ln_c is None
            and not split)
    if fold:
        Wc[:, : 3 * H] *= 0.5
        if bias is not None:
            bias[:, : 3 * H] *= 0.5
        if diagonal:
            Rc[:, :, :3] *= 0.5
        else:
            Rc[:, :, : 3 * H] *= 0.5
        if P_if is not None:
            P_if *= 0.5
            P_o *= 0.5

    plan, x, h_prev, c, Yp = begin_sequence(x, h0, lens, policy, Hp, c0=c0)
    act_f = half_sigmoid if fold else activation_applier([a[0] for a in acts], D)
    act_g = activation_applier([a[1] for a in acts], D)
    act_h = activation_applier([a[2] for a in acts], D)
    h_is_tanh = all(a[2].name == "Tanh" for a in acts)
    one_tanh = fold and P_if is None and all(a[1].name == "Tanh" for a in acts)
    clamp = clipper(clip)
    fclamp = clipper(None if clip is None else clip / 2) if fold else clamp
    o_stage = gate_stage(fclamp, r_pre, act_f, r_gate)  # the output gate when its peephole needs the new cell
    cclamp = clipper(cell_clip)
    pclamp = clipper(proj_clip)
    peep_o = P_o is not None
    # gates activated before the cell update: i, f (and o unless its peephole needs the new cell)
    n_early = 2 * H if peep_o else 3 * H

    want = wanted_points(observer)
    unfold = 2 if fold else 1  # the folded i, f, o pre-activations are ½ of the true ones (exactly)

    acc = np.empty((D, B, H4), dt)
    m_buf = np.empty((D, B, H), dt) if projT is not None else None

    def layer_norm(a4: np.ndarray, gates: slice) -> None:
        v = a4[:, :, gates]
        mean = v.mean(axis=-1, keepdims=True)
        v -= mean
        var = np.mean(v * v, axis=-1, keepdims=True)
        v /= np.sqrt(var + LN_EPSILON)
        v *= ln_c[:, :, gates]
        if ln_bias is not None:
            v += ln_bias[:, :, gates]

    views: dict[int, tuple] = {}

    def views_for(n: int) -> tuple:
        """Views of the step buffers over the first n (active) rows, made once per distinct n."""
        if n not in views:
            a = acc[:, :n]
            views[n] = (a, a.reshape(D, n, 4, H), c[:, :n], a[:, :, :n_early], a[:, :, 3 * H :], a[:, :, 0:H],
                        a[:, :, H : 2 * H], a[:, :, 2 * H : 3 * H], None if m_buf is None else m_buf[:, :n])
        return views[n]

    for s, n, g in projected_steps(x, Wc, None if ln_c is not None else bias, reverse, plan,
                                   r_xp if split else None):
        a, a4, cc, early, cand, gi, gf, go, m = views_for(n)
        hp = h_prev[:, :n] if h_feed is None else h_feed(h_prev[:, :n])
        if diagonal:
            np.multiply(hp[:, :, None, :], Rc, out=a4)
        else:
            np.matmul(hp, Rc, out=a)
        if split:
            if h_bias is not None:
                a += h_bias
            if r_hp is not None:
                r_hp(a)
        a += g
        if P_if is not None:
            a4[:, :, 0:2] += P_if * cc[:, :, None]
        if "preact" in want:  # compute order; o is replaced below when its peephole needs the new cell
            pre = a4.copy()
            pre[:, :, :3] *= unfold
        if ln_c is not None:
            layer_norm(a4, slice(0, 2) if peep_o else slice(0, 3))
            layer_norm(a4, slice(3, 4))
        if clamp is not None:
            fclamp(early)
            clamp(cand)
        if r_pre is not None:
            r_pre(early)
            r_pre(cand)
        if one_tanh:  # all four gates in one call, then ½·t + ½ on i, f, o
            np.tanh(a, out=a)
            early *= 0.5
            early += 0.5
        else:
            act_f(early)
            act_g(cand)
        if coupling == "input_forget":
            np.subtract(1, gi, out=gf)
        elif coupling == "cifg":
            np.subtract(1, gf, out=gi)
        if r_gate is not None:
            r_gate(early)
            r_gate(cand)
        if "gates" in want:  # before i is overwritten by i * g
            gates = a4.copy()
        # c = f * c + i * g
        cc *= gf
        gi *= cand
        cc += gi
        if cclamp is not None:
            cclamp(cc)
        if r_cell is not None:
            r_cell(cc)
        if peep_o:
            go += P_o * cc
            if "preact" in want:
                np.multiply(go, unfold, out=pre[:, :, 2])
            if ln_c is not None:
                layer_norm(a4, slice(2, 3))
            o_stage(go)
            if "gates" in want:
                gates[:, :, 2] = go
        # h = o * h(c), then the optional projection
        hn = Yp[s, :, :n]
        if m is None:
            m = hn
        if h_is_tanh:
            np.tanh(cc, out=m)
        else:
            m[...] = cc
            act_h(m)
        m *= go
        if m_buf is not None:
            if r_hid is not None:
                r_hid(m)
            np.matmul(m, projT, out=hn)
            if pb is not None:
                hn += pb
            if pclamp is not None:
                pclamp(hn)
        if r_hid is not None:
            r_hid(hn)
        if want:
            _report(observer, want, pre if "preact" in want else None, gates if "gates" in want else None, cc,
                    m, hn)
        h_prev = Yp[s]

    return end_sequence(Yp, h0, plan, reverse, policy, c)


def _report(observer, want, pre, gates, cell, hidden, output) -> None:
    """Call ``observer`` with the step's values at the points it wants (gate points reordered to canonical)."""
    for point, v, gated in (("preact", pre, True), ("gates", gates, True), ("cell", cell, False),
                            ("hidden", hidden, False), ("output", output, False)):
        if point in want:
            observer(point, np.take(v, _COMPUTE_ORDER, axis=2) if gated else v.copy())
