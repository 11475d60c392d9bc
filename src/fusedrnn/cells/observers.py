"""Observers: callbacks that see the values a float engine computes at its named points, step by step.

An observer is any callable ``observer(point: str, values: np.ndarray) -> None``, passed as ``observer=`` to
:func:`~fusedrnn.cells.lstm_sequence`, :func:`~fusedrnn.cells.gru_sequence` or
:func:`~fusedrnn.cells.rnn_sequence`. Once per processing step the engine calls it for every point it records,
with a fresh array (the observer may keep it) holding the ``n`` rows still running at that step (in processing
order: sorted by descending ``sequence_lens``), true values in the canonical gate order (LSTM i, f, g, o; GRU
z, r, n; RNN one gate), in the compute dtype:

===========  ==============  ===================================================================================
point        shape           value
===========  ==============  ===================================================================================
``preact``   [D, n, G, H]    each gate's pre-activation sum x·Wᵀ + h·Rᵀ + biases (+ peepholes), before layer
                             norm and clip. LSTM: o includes its peephole with the *new* cell; with layer norm the
                             sum *without* biases (they are added after normalising). GRU n: the candidate's sum
                             with r applied (x·Wnᵀ + bxn + (r ⊙ h)·Rnᵀ + bhn, or x·Wnᵀ + bxn + r ⊙ (h·Rnᵀ + bhn)).
``gates``    [D, n, G, H]    each gate after its activation (and the LSTM coupling)
``cell``     [D, n, H]       LSTM only: the new cell state after cell_clip
``hidden``   [D, n, H]       LSTM: o ⊙ h(c), the projection's input; GRU / RNN: the new hidden state
``output``   [D, n, Hp]      the new hidden state as stored (after the projection and proj_clip)
===========  ==============  ===================================================================================

Under a rounding policy the values are those the engine goes on with (after the point's rounding), except
``preact``, which is taken before the clip (and so before the ``preact`` rounding). An observer with a
``points`` attribute (a collection of point names) is called for those points only; the others are not even
copied. Only the NumPy engines observe: the dispatch runs any call with an observer there
(:mod:`fusedrnn.cells.dispatch`). Observing does not change the results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..errors import AttributeValueError

POINTS: tuple[str, ...] = ("preact", "gates", "cell", "hidden", "output")
"""Every point an engine reports, in the order a step reaches them."""
GATE_POINTS: tuple[str, ...] = ("preact", "gates")
"""The points with a gate axis ([D, n, G, H]); the others are [D, n, H]."""

Observer = Callable[[str, np.ndarray], object]


def wanted_points(observer: Observer | None) -> frozenset[str]:
    """The points an engine reports to ``observer``: its ``points`` attribute when it has one, else all (none
    without an observer)."""
    if observer is None:
        return frozenset()
    return frozenset(getattr(observer, "points", POINTS))


def check_points(points: Iterable[str], argument: str = "points") -> tuple[str, ...]:
    """``points`` as a tuple of known point names, or AttributeValueError."""
    if isinstance(points, str):
        points = (points,)
    out = tuple(points)
    unknown = [p for p in out if p not in POINTS]
    if unknown:
        raise AttributeValueError(f"{argument}: unknown observer point(s) {unknown}; expected a subset of {POINTS}")
    return out


@dataclass(frozen=True)
class Range:
    """The running range of one point: min, max and max |value| (float64; [D, G] for a gate point, [D] else)."""

    min: np.ndarray
    max: np.ndarray
    absmax: np.ndarray


class RangeObserver:
    """Records, per point, the running min, max and max |.| over every step, row and unit (per direction, and per
    gate at the gate points), in float64.

    ``points``: the points to record (default: all of :data:`POINTS`). Reduction: over rows and units, so a gate
    point gives [D, G] and the others [D]. NaN values propagate into the ranges.
    """

    def __init__(self, points: Iterable[str] = POINTS):
        self.points: tuple[str, ...] = check_points(points)
        self._ranges: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def __call__(self, point: str, values: np.ndarray) -> None:
        if point not in self.points:
            return
        axes = (1, 3) if point in GATE_POINTS else (1, 2)
        v = np.asarray(values, dtype=np.float64)
        lo, hi = v.min(axis=axes), v.max(axis=axes)
        am = np.maximum(np.abs(lo), np.abs(hi))
        old = self._ranges.get(point)
        if old is not None:
            lo, hi, am = np.minimum(old[0], lo), np.maximum(old[1], hi), np.maximum(old[2], am)
        self._ranges[point] = (lo, hi, am)

    def observed(self) -> tuple[str, ...]:
        """The points that have seen values so far."""
        return tuple(p for p in self.points if p in self._ranges)

    def ranges(self, point: str) -> Range:
        """The range recorded at ``point`` (copies). AttributeValueError for a point not recorded or not seen yet
        (an LSTM-only point on a GRU, or before any call)."""
        check_points((point,), "point")
        got = self._ranges.get(point)
        if got is None:
            why = "not among this observer's points" if point not in self.points else "no values seen there yet"
            raise AttributeValueError(f"point: {point!r} has no range ({why}); observed: {self.observed()}")
        return Range(*(a.copy() for a in got))

    def reset(self) -> None:
        """Forget every range recorded so far."""
        self._ranges.clear()


__all__ = ["GATE_POINTS", "POINTS", "Observer", "Range", "RangeObserver", "wanted_points"]
