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
from .calibration import DEFAULT_BINS, Calibration, ValueHistogram, choose_range

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


class HistogramObserver(RangeObserver):
    """A :class:`RangeObserver` that also keeps, per point, direction (and gate at the gate points), the
    distribution of the values (:class:`~fusedrnn.cells.calibration.ValueHistogram`, ``bins`` bins), for the
    calibration methods that need more than min/max."""

    def __init__(self, points: Iterable[str] = POINTS, bins: int = DEFAULT_BINS):
        super().__init__(points)
        self.bins = int(bins)
        self._hists: dict[tuple, ValueHistogram] = {}

    def __call__(self, point: str, values: np.ndarray) -> None:
        if point not in self.points:
            return
        super().__call__(point, values)
        v = np.asarray(values)
        gates = v.shape[2] if point in GATE_POINTS else None
        for d in range(v.shape[0]):
            for g in range(gates or 1):
                key = (point, d, None if gates is None else g)
                h = self._hists.get(key)
                if h is None:
                    h = self._hists[key] = ValueHistogram(self.bins)
                h.add(v[d, :, g] if gates is not None else v[d])

    def histogram(self, point: str, direction: int = 0, gate: int | None = None) -> ValueHistogram:
        """The values seen at ``point`` in ``direction`` (and ``gate``, an index in canonical order, at the gate
        points). AttributeValueError when none were seen there."""
        got = self._hists.get((point, direction, gate))
        if got is None:
            raise AttributeValueError(f"point: no values seen at {point!r} direction {direction} gate {gate}; "
                                      f"observed: {self.observed()}")
        return got

    def reset(self) -> None:
        super().reset()
        self._hists.clear()


class SaturationCounter:
    """Counts how often an integer kernel's values sit at the limits of their container (saturated or clipped):
    per direction, point ("preact": each gate's pre-activation as the activation reads it, "cell", "hidden": the
    state as stored) and gate, in windows of ``window`` processing steps (0: one window).

    A target's NumPy loop calls ``counter.probe(d)(point, step, values, lo, hi, gates)`` once per step with the
    integer values (gate points: [B, G, H] with ``gates`` naming the G gates in canonical letters; others
    [B, H]) and the container's limits. ``counts`` maps (direction, point, gate or None) to a list, per window,
    of [values at a limit, values seen]."""

    def __init__(self, window: int = 0):
        self.window = int(window)
        self.counts: dict[tuple, list[list[int]]] = {}

    def probe(self, direction: int):
        """The function a kernel calls for ``direction``."""
        def count(point: str, step: int, values: np.ndarray, lo: int, hi: int, gates: str | None = None) -> None:
            w = step // self.window if self.window > 0 else 0
            v = np.asarray(values)
            at = (v <= lo) | (v >= hi)
            if gates is None:
                self._add((direction, point, None), w, int(np.count_nonzero(at)), v.size)
                return
            sat = np.count_nonzero(at, axis=(0, 2))
            per = v.size // max(len(gates), 1)
            for k, g in enumerate(gates):
                self._add((direction, point, g), w, int(sat[k]), per)
        return count

    def _add(self, key: tuple, w: int, saturated: int, seen: int) -> None:
        rows = self.counts.setdefault(key, [])
        while len(rows) <= w:
            rows.append([0, 0])
        rows[w][0] += saturated
        rows[w][1] += seen

    def summary(self) -> list[dict]:
        """One row per (direction, point, gate): totals and the fraction saturated, plus the per-window counts."""
        out = []
        def order(item):  # direction, the point's place in a step, the gate's canonical place (LSTM, then GRU)
            d, point, gate = item[0]
            return d, POINTS.index(point) if point in POINTS else len(POINTS), "ifgozrn".find(gate or "")

        for (d, point, gate), rows in sorted(self.counts.items(), key=order):
            sat, seen = sum(r[0] for r in rows), sum(r[1] for r in rows)
            out.append({"direction": d, "point": point, "gate": gate, "saturated": sat, "values": seen,
                        "fraction": sat / seen if seen else 0.0, "windows": [list(r) for r in rows]})
        return out


def observer_for(settings: Calibration, points: Iterable[str]) -> RangeObserver:
    """The observer a target records ``points`` with: a :class:`RangeObserver` for the min/max recipes ("sdk",
    "minmax"), else a :class:`HistogramObserver`."""
    if settings.method in ("sdk", "minmax"):
        return RangeObserver(points)
    return HistogramObserver(points, settings.bins)


def chosen_range(settings: Calibration, observer: RangeObserver | None, point: str, direction: int = 0,
                 gate: int | None = None, *, bits: int, symmetric: bool, sdk: tuple[float, float] | None = None,
                 histogram: ValueHistogram | None = None) -> tuple[float, float]:
    """The range ``settings`` chooses for the values ``observer`` saw at ``point`` (direction, gate), or for the
    values of ``histogram`` when given: ``sdk`` for the target's own recipe, the observed min/max for "sdk"
    without one and "minmax" (widened to contain 0; symmetric: ±max|v|), else
    :func:`~fusedrnn.cells.calibration.choose_range` over the point's histogram."""
    if histogram is not None:
        return choose_range(settings, histogram, bits=bits, symmetric=symmetric, sdk=sdk)
    if settings.method == "sdk" and sdk is not None:
        return sdk
    if settings.method in ("sdk", "minmax"):
        r = observer.ranges(point)
        index = (direction,) if gate is None else (direction, gate)
        lo, hi, am = float(r.min[index]), float(r.max[index]), float(r.absmax[index])
        return (-am, am) if symmetric else (min(lo, 0.0), max(hi, 0.0))  # the ranges of an "sdk" recipe
    h = observer.histogram(point, direction, gate)  # a HistogramObserver (observer_for)
    return choose_range(settings, h, bits=bits, symmetric=symmetric)


__all__ = ["GATE_POINTS", "POINTS", "HistogramObserver", "Observer", "Range", "RangeObserver", "SaturationCounter",
           "chosen_range", "observer_for", "wanted_points"]
