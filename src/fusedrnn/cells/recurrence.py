"""Sequence plumbing shared by the LSTM, GRU and RNN engines.

The engines run every direction as a *forward* walk over "processing steps" s = 0 … T-1:

* the backward direction reads its input in reversed order — over the valid prefix only when
  ``sequence_lens`` is given (onnxruntime semantics), so processing step s of batch row b reads x[len_b-1-s];
* with ``sequence_lens``, batch rows are sorted by descending length so the rows still running at step s are a
  prefix ``[:n_s]`` (the PackedSequence idea): a finished row is never touched again, which keeps its final state
  and leaves its later outputs zero;
* the input projection of all timesteps is one GEMM per direction before the loop;
* the state of step s is written straight into the output buffer ``Yp[s]`` (processing order), so no copy is made
  per step; the backward half is put back at its original time index once, after the loop.

All arrays here are in the engines' compute dtype (float32 or float64).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..errors import AttributeValueError

DIRECTIONS = ("forward", "reverse", "bidirectional")
MERGE_MODES = ("stack", "concat", "sum", "mul", "ave")


def direction_flags(direction: str) -> tuple[bool, ...]:
    """The per-direction "runs backwards" flags of an ONNX direction string."""
    if direction == "forward":
        return (False,)
    if direction == "reverse":
        return (True,)
    if direction == "bidirectional":
        return (False, True)
    raise AttributeValueError(f"direction: expected one of {DIRECTIONS}, got {direction!r}")


class SequencePlan:
    """Batch ordering, per-step active row counts and time reversal for one call."""

    def __init__(self, T: int, B: int, lens: np.ndarray | None):
        self.T, self.B = T, B
        if lens is not None and np.all(lens == T):
            lens = None
        self.lens = lens
        if lens is None:
            self.order = None
            self.lens_sorted = None
            self.active = None
            self.rev_index = None
            return
        order = np.argsort(-lens, kind="stable")
        self.order = order
        self.inverse = np.argsort(order)
        ls = lens[order]
        self.lens_sorted = ls
        # number of rows still running at each processing step
        self.active = (ls[None, :] > np.arange(T)[:, None]).sum(axis=1)
        self.rev_index = reversal_index(ls, T)

    def sort_batch(self, a: np.ndarray, axis: int) -> np.ndarray:
        """``a`` with its batch axis put in processing order (a no-op without sequence_lens)."""
        return a if self.order is None else np.take(a, self.order, axis=axis)

    def unsort_batch(self, a: np.ndarray, axis: int) -> np.ndarray:
        return a if self.order is None else np.take(a, self.inverse, axis=axis)

    def reverse_time(self, a: np.ndarray) -> np.ndarray:
        """Reverse the valid prefix of each (sorted) batch row of a [T, B, ...] array."""
        if self.rev_index is None:
            return a[::-1]
        return a[self.rev_index, np.arange(self.B)]

    def steps(self):
        """Yield (s, n_active) for every processing step that has at least one active row."""
        if self.active is None:
            for s in range(self.T):
                yield s, self.B
        else:
            for s in range(self.T):
                n = int(self.active[s])
                if n == 0:
                    return
                yield s, n


def reversal_index(lens: np.ndarray, T: int) -> np.ndarray:
    """idx[s, b]: the time index that step s of a backward walk over row b's valid prefix reads (len_b-1-s);
    padded steps map to themselves, so the map is an involution on [0, T)."""
    steps = np.arange(T)[:, None]
    return np.where(steps < lens[None, :], lens[None, :] - 1 - steps, steps)


def reverse_valid_prefix(a: np.ndarray, lens: np.ndarray | None) -> np.ndarray:
    """A [T, B, ...] array with each row's first lens[b] steps reversed (all T steps when ``lens`` is None)."""
    if lens is None:
        return a[::-1]
    return a[reversal_index(lens, a.shape[0]), np.arange(a.shape[1])]


PROJECTION_BUFFER_BYTES = 4 << 20
"""Size of the input-projection buffer: the projection runs in chunks of timesteps that fit it (so it stays in
cache and is never a page-faulting multi-megabyte allocation), each chunk one GEMM per direction of at least 256
rows where T allows."""


def padded_empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array whose rows (last axis) are padded by 64 bytes when their length in bytes is a
    multiple of 256. Power-of-two row strides make BLAS operands alias in the cache: padding R's rows speeds the
    recurrent GEMM by 1.2-1.5x at H = 256 and 512 (measured with OpenBLAS 0.3.31)."""
    dt = np.dtype(dtype)
    n = shape[-1]
    pad = 64 // dt.itemsize if (n * dt.itemsize) % 256 == 0 else 0
    return np.empty(shape[:-1] + (n + pad,), dt)[..., :n]


def padded_copy(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` with padded rows (see :func:`padded_empty`)."""
    out = padded_empty(a.shape, a.dtype)
    out[...] = a
    return out


def projected_steps(x: np.ndarray, W: np.ndarray, b: np.ndarray | None, reverse: Sequence[bool],
                    plan: SequencePlan, rounder: Callable[[np.ndarray], object] | None = None,
                    ) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield (s, n_active, G_s) for every processing step: G_s [D, n, GH] = x_d[s] @ W[d].T + b[d] for the
    active rows, x_d being x read backwards over each row's valid prefix for a reverse direction; ``rounder``
    (the ``xproj`` rounding point) is applied in place to each yielded G_s.

    x: [T, B, I] (batch already sorted); W: [D, GH, I]; b: [D, GH] or None. The projection of a chunk of K
    timesteps is one GEMM of K*B rows per direction, computed when the walk reaches it.
    """
    T, B, I = x.shape
    D, GH, _ = W.shape
    per_step = D * B * GH * x.dtype.itemsize
    K = min(T, max(1, PROJECTION_BUFFER_BYTES // per_step, -(-256 // B)))
    xr = np.ascontiguousarray(plan.reverse_time(x)) if any(reverse) else None
    xs = [xr if rev else x for rev in reverse]
    Wn = padded_copy(W.transpose(0, 2, 1))  # [D, I, GH]: the NN layout is the faster GEMM here
    G = padded_empty((D, K * B, GH), x.dtype)
    for s, n in plan.steps():
        k = s % K
        if k == 0:
            m = min(K, T - s)
            for d in range(D):
                out = G[d, : m * B]
                np.matmul(xs[d][s : s + m].reshape(m * B, I), Wn[d], out=out)
                if b is not None:
                    out += b[d]
        g = G[:, k * B : k * B + n]
        if rounder is not None:  # per step, while the slice is in cache (each element is rounded once)
            rounder(g)
        yield s, n, g


def begin_sequence(x: np.ndarray, h0: np.ndarray, lens: np.ndarray | None, policy, out_width: int,
                   c0: np.ndarray | None = None):
    """Common start of an engine run: the sequence plan, x and the initial states with the batch in processing
    order (copied and rounded at the ``inputs`` point when the policy rounds there; the cell state is always a
    private copy, it is updated in place), and the output buffer Yp [T, D, B, out_width] (zeroed when rows
    finish early, so their padded steps read 0). Returns (plan, x, h0, c0, Yp)."""
    T, B, _ = x.shape
    plan = SequencePlan(T, B, lens)
    x = plan.sort_batch(x, 1)
    h = plan.sort_batch(h0, 1)
    c = None if c0 is None else np.array(plan.sort_batch(c0, 1), dtype=x.dtype, copy=True)
    ri = policy.get("inputs")
    if ri is not None:
        x, h = np.array(x, copy=True), np.array(h, copy=True)
        for arr in (x, h, c):
            if arr is not None:
                ri(arr)
    shape = (T, h0.shape[0], B, out_width)
    Yp = np.zeros(shape, x.dtype) if plan.lens is not None else np.empty(shape, x.dtype)
    return plan, x, h, c, Yp


def end_sequence(Yp: np.ndarray, h0: np.ndarray, plan: SequencePlan, reverse: Sequence[bool], policy,
                 c: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Common end of an engine run: (Y [T, D, B, H], Y_h [D, B, H][, Y_c]) in the caller's batch order and time
    order, a zero state for rows of length 0, rounded at the ``outputs`` point."""
    Y_h = plan.unsort_batch(final_rows(Yp, h0, plan), 1)
    outs = [None, Y_h]
    if c is not None:
        if plan.lens is not None:
            c[:, plan.lens_sorted == 0] = 0
        outs.append(plan.unsort_batch(c, 1))
    outs[0] = plan.unsort_batch(restore_time_order(Yp, reverse, plan), 2)
    r_out = policy.get("outputs")
    if r_out is not None:
        for arr in outs:
            r_out(arr)
    return tuple(outs)


def gate_stage(*steps: Callable[[np.ndarray], object] | None) -> Callable[[np.ndarray], None]:
    """One in-place function running the given in-place steps in order (None entries are skipped), e.g. a
    gate's clip, pre-activation rounding, activation and gate rounding."""
    funcs = [f for f in steps if f is not None]
    if len(funcs) == 1:
        return funcs[0]

    def run(v: np.ndarray) -> None:
        for f in funcs:
            f(v)

    return run


def stored_biases(b_x, b_h, rw) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The biases as a target stores them: copies rounded by the ``weights`` rounder ``rw`` (each tensor on its
    own, before they are added in the compute precision), or the arrays themselves when ``rw`` is None."""
    if rw is None:
        return b_x, b_h
    out = []
    for b in (b_x, b_h):
        if b is not None:
            b = b.copy()
            rw(b)
        out.append(b)
    return out[0], out[1]


def summed_bias(b_x, b_h, shape: tuple, dtype) -> np.ndarray | None:
    """b_x + b_h (either may be None), or None when both are."""
    if b_x is None and b_h is None:
        return None
    bias = np.zeros(shape, dtype)
    for b in (b_x, b_h):
        if b is not None:
            bias += b
    return bias


def restore_time_order(Yp: np.ndarray, reverse: Sequence[bool], plan: SequencePlan) -> np.ndarray:
    """Put the backward directions of the processing-order buffer Yp [T, D, B, H] at their original time
    indices, in place (only the reversed halves are copied), and return it."""
    for d, rev in enumerate(reverse):
        if rev:
            Yp[:, d] = plan.reverse_time(Yp[:, d]).copy()
    return Yp


def final_rows(Yp: np.ndarray, h0: np.ndarray, plan: SequencePlan) -> np.ndarray:
    """The last hidden state [D, B, H] of each (sorted) row: Yp at its last valid step; 0 for length 0."""
    if plan.lens_sorted is None:
        return Yp[-1].copy() if plan.T else h0.copy()
    ls = plan.lens_sorted
    last = np.maximum(ls - 1, 0)
    out = Yp[last, :, np.arange(plan.B)].transpose(1, 0, 2).copy()
    out[:, ls == 0] = 0
    return out


def activation_applier(per_direction: Sequence, D: int) -> Callable[[np.ndarray], None]:
    """A function applying per-direction activations to a [D, n, W] view in place (one call when all match)."""
    first = per_direction[0]
    if all(a == first for a in per_direction):
        return first.apply

    def apply(v: np.ndarray) -> None:
        for d in range(D):
            per_direction[d].apply(v[d])

    return apply


def clipper(clip: float | None) -> Callable[[np.ndarray], None] | None:
    """In-place clamp to [-clip, clip], or None when clip is None."""
    if clip is None:
        return None
    lo, hi = -float(clip), float(clip)

    def apply(v: np.ndarray) -> None:
        np.clip(v, lo, hi, out=v)

    return apply


def merge_directions(Y: np.ndarray, merge: str) -> np.ndarray:
    """Merge the direction axis of Y [T, D, B, H].

    ``stack`` keeps ONNX's [T, D, B, H]; ``concat`` gives [T, B, D*H] (forward first, as PyTorch and Keras);
    ``sum``, ``mul`` and ``ave`` give [T, B, H].
    """
    if merge == "stack":
        return Y
    if merge == "concat":
        T, D, B, H = Y.shape
        return np.ascontiguousarray(Y.transpose(0, 2, 1, 3)).reshape(T, B, D * H)
    if merge == "sum":
        return Y.sum(axis=1)
    if merge == "mul":
        return np.prod(Y, axis=1)
    if merge == "ave":
        return Y.mean(axis=1)
    raise AttributeValueError(f"merge: expected one of {MERGE_MODES}, got {merge!r}")
