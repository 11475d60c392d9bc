"""Calibration methods: how a quantized target turns the values a tensor took on calibration data into the range
[lo, hi] it quantizes over.

A target records each tensor it quantizes (its inputs, and the float engine's named points: see
:mod:`fusedrnn.cells.observers`) in a :class:`ValueHistogram` and asks :func:`choose_range` for the range. The
methods, for values v with a histogram of ``bins`` equal bins over [-A, A] (A grows by doubling to hold max |v|):

=============  ========================================================================================================
method         range
=============  ========================================================================================================
``sdk``        the target's own recipe (the default; what the SDK's converter or test harness does — plain min/max
               for every target fusedrnn has, plus the target's own headroom)
``minmax``     [min v, max v]
``percentile`` symmetric: [-t, t] with t the ``percentile``-th percentile of |v|; asymmetric: the
               (100 - p)/2-th and (100 + p)/2-th percentiles of v (the two tails share what is clipped)
``mse``        the range minimising the expected squared error of the quantized tensor, clipping included:
               MSE(t) = Σ_{|v|>t} (|v| - t)² + Σ_{|v|≤t} Δ(t)²/12,   Δ(t) = 2t / (2^bits - 1)
               over the bin centres (symmetric; asymmetric scales [min, max] by the same search)
``entropy``    the threshold t minimising KL(P‖Q) (TensorRT's entropy calibration): P the |v| histogram up to t with
               the mass beyond t folded into its last bin, Q the same bins merged into 2^(bits-1) levels and spread
               back over the non-empty bins they came from
=============  ========================================================================================================

Every range is widened to contain 0 (all targets quantize 0 exactly) and never extends beyond [min v, max v].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import AttributeValueError

METHODS: tuple[str, ...] = ("sdk", "minmax", "percentile", "mse", "entropy")
"""The calibration methods, the target's own recipe first."""

DEFAULT_BINS = 2048
"""Histogram bins over [-A, A] (a multiple of 4, so that doubling A merges bin pairs exactly)."""


@dataclass(frozen=True)
class Calibration:
    """Calibration data with the method that chooses each quantized tensor's range.

    ``inputs``: what a target's ``calibration=`` takes (input sequences; for a model, feeds), or None where the
    inputs are given elsewhere. ``method``: one of :data:`METHODS` (``"sdk"``: the target's own recipe).
    ``percentile``: for ``method="percentile"``, in (0, 100]. ``bins``: histogram bins. ``per_node``: for
    models, {node name: Calibration} overriding the method for those nodes (their ``inputs`` are ignored).
    """

    inputs: object = None
    method: str = "sdk"
    percentile: float = 99.99
    bins: int = DEFAULT_BINS
    per_node: Mapping[str, Calibration] = field(default_factory=dict)

    def __post_init__(self):
        if self.method not in METHODS:
            raise AttributeValueError(f"method: expected one of {METHODS}, got {self.method!r}")
        p = self.percentile
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 < float(p) <= 100:
            raise AttributeValueError(f"percentile: expected a number in (0, 100], got {p!r}")
        if isinstance(self.bins, bool) or not isinstance(self.bins, (int, np.integer)) or self.bins < 64 \
                or self.bins % 4:
            raise AttributeValueError(f"bins: expected a multiple of 4 of at least 64, got {self.bins!r}")
        for name, sub in dict(self.per_node).items():
            if not isinstance(sub, Calibration):
                raise AttributeValueError(f"per_node[{name!r}]: expected a Calibration, got {type(sub).__name__}")

    def for_node(self, name: str) -> Calibration:
        """The settings of node ``name`` (its ``per_node`` entry, else these)."""
        return self.per_node.get(name, self)

    def describe(self) -> str:
        """The method in words, e.g. ``percentile 99.99`` (for reports)."""
        return f"percentile {self.percentile:g}" if self.method == "percentile" else self.method

    def as_dict(self) -> dict:
        out = {"method": self.method, "bins": self.bins}
        if self.method == "percentile":
            out["percentile"] = float(self.percentile)
        if self.per_node:
            out["per_node"] = {k: v.as_dict() for k, v in self.per_node.items()}
        return out


SDK = Calibration()
"""The default: every target's own recipe."""


class CalibrationInputs(list):
    """Calibration input sequences (a list, as targets' ``prepare`` receives them) that carry the
    :class:`Calibration` settings they were given with (``settings``)."""

    def __init__(self, items, settings: Calibration = SDK):
        super().__init__(items)
        self.settings = settings


def settings_of(calibration) -> Calibration:
    """The :class:`Calibration` settings a target's ``calibration`` argument carries (``sdk`` when plain)."""
    if isinstance(calibration, Calibration):
        return calibration
    return getattr(calibration, "settings", SDK)


class ValueHistogram:
    """The distribution of one tensor's values: exact min, max and count, and a histogram of ``bins`` equal bins
    over [-A, A], A a power of two ≥ max |v| (doubling A merges adjacent bin pairs, so no value moves between
    bins). Memory is O(bins) whatever the number of values."""

    def __init__(self, bins: int = DEFAULT_BINS):
        self.bins = int(bins)
        self.counts = np.zeros(self.bins, np.int64)
        self.A = 0.0
        self.min, self.max, self.n = np.inf, -np.inf, 0

    def _grow(self, absmax: float) -> None:
        if self.A == 0.0:
            self.A = 2.0 ** np.ceil(np.log2(absmax)) if absmax > 0 else 0.0
            return
        while self.A < absmax:
            half = self.bins // 2
            pairs = self.counts.reshape(-1, 2).sum(axis=1)  # bins//2 merged bins, centred on 0
            self.counts = np.zeros(self.bins, np.int64)
            self.counts[half // 2: half // 2 + half] = pairs
            self.A *= 2.0

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, np.float64).ravel()
        v = v[np.isfinite(v)]
        if v.size == 0:
            return
        lo, hi = float(v.min()), float(v.max())
        self.min, self.max, self.n = min(self.min, lo), max(self.max, hi), self.n + v.size
        self._grow(max(abs(lo), abs(hi)))
        if self.A == 0.0:  # every value so far is 0: it lands in the bin right of 0 once A exists
            self.counts[self.bins // 2] += v.size
            return
        idx = np.floor((v + self.A) * (self.bins / (2.0 * self.A))).astype(np.int64)
        np.clip(idx, 0, self.bins - 1, out=idx)
        self.counts += np.bincount(idx, minlength=self.bins)

    @property
    def edges(self) -> np.ndarray:
        """The bins' edges, [bins + 1] over [-A, A] (A = 1 before any non-zero value)."""
        A = self.A or 1.0
        return np.linspace(-A, A, self.bins + 1)

    def absolute(self) -> tuple[np.ndarray, np.ndarray]:
        """The histogram of |v|: (counts [bins/2], edges [bins/2 + 1] over [0, A]) (mirrored bins added)."""
        half = self.bins // 2
        counts = self.counts[half:] + self.counts[:half][::-1]
        return counts, self.edges[half:]


def _widen(lo: float, hi: float, h: ValueHistogram) -> tuple[float, float]:
    """[lo, hi] within [min, max], widened to contain 0."""
    lo, hi = max(lo, h.min), min(hi, h.max)
    return min(lo, 0.0), max(hi, 0.0)


def _quantile(counts: np.ndarray, edges: np.ndarray, q: float) -> float:
    """The q-quantile (0..1) of a histogram, interpolated linearly within its bin."""
    cum = np.cumsum(counts)
    total = cum[-1]
    if total == 0:
        return 0.0
    target = q * total
    k = int(np.searchsorted(cum, target, side="left"))
    k = min(k, len(counts) - 1)
    before = cum[k - 1] if k else 0
    frac = 0.0 if counts[k] == 0 else (target - before) / counts[k]
    return float(edges[k] + frac * (edges[k + 1] - edges[k]))


def _percentile(h: ValueHistogram, p: float, symmetric: bool) -> tuple[float, float]:
    if symmetric:
        counts, edges = h.absolute()
        t = _quantile(counts, edges, p / 100.0)
        return -t, t
    tail = (100.0 - p) / 200.0
    return _quantile(h.counts, h.edges, tail), _quantile(h.counts, h.edges, 1.0 - tail)


def mse_of_threshold(centres: np.ndarray, counts: np.ndarray, t: float, bits: int) -> float:
    """Expected squared error of quantizing |v| (bin centres with counts) symmetrically over [-t, t] at ``bits``:
    clipped values cost (|v| - t)², the others the rounding noise Δ²/12 with Δ = 2t / (2^bits - 1)."""
    step = 2.0 * t / (2**bits - 1)
    clipped = centres > t
    return float(np.sum(counts[clipped] * (centres[clipped] - t) ** 2) + np.sum(counts[~clipped]) * step**2 / 12.0)


def _mse(h: ValueHistogram, bits: int, symmetric: bool) -> tuple[float, float]:
    counts, edges = h.absolute()
    centres = 0.5 * (edges[:-1] + edges[1:])
    absmax = max(abs(h.min), abs(h.max))
    if symmetric:
        candidates = edges[1:][edges[1:] < absmax]
        candidates = np.append(candidates, absmax)
        errs = [mse_of_threshold(centres, counts, t, bits) for t in candidates]
        t = float(candidates[int(np.argmin(errs))])
        return -t, t
    # asymmetric: [a·min, a·max] for the scale a with the least error over the signed histogram
    full = 0.5 * (h.edges[:-1] + h.edges[1:])
    best, best_a = np.inf, 1.0
    for a in np.linspace(0.05, 1.0, 96):
        lo, hi = a * min(h.min, 0.0), a * max(h.max, 0.0)
        step = (hi - lo) / (2**bits - 1)
        below, above = full < lo, full > hi
        inside = ~(below | above)
        err = (np.sum(h.counts[below] * (lo - full[below]) ** 2) + np.sum(h.counts[above] * (full[above] - hi) ** 2)
               + np.sum(h.counts[inside]) * step**2 / 12.0)
        if err < best:
            best, best_a = err, a
    return best_a * min(h.min, 0.0), best_a * max(h.max, 0.0)


def kl_of_threshold(counts: np.ndarray, i: int, levels: int) -> float:
    """KL(P‖Q) of the first ``i`` ≥ ``levels`` bins of the |v| histogram ``counts`` quantized to ``levels`` levels
    (P: bins [0, i) with the mass of the bins beyond folded into bin i-1; Q: the bins [0, i) merged into
    ``levels`` groups (group k: bins floor(k·i/levels) .. floor((k+1)·i/levels) - 1), each group's mass spread
    evenly over its non-empty bins)."""
    p = counts[:i].astype(np.float64)
    p[i - 1] += counts[i:].sum()
    nonzero = counts[:i] > 0
    starts = np.floor(np.arange(levels) * (i / levels)).astype(np.int64)
    mass = np.add.reduceat(counts[:i].astype(np.float64), starts)
    used = np.add.reduceat(nonzero.astype(np.float64), starts)
    group = np.repeat(np.arange(levels), np.diff(np.append(starts, i)))
    q = np.where(nonzero, mass[group] / np.maximum(used[group], 1.0), 0.0)
    p_sum, q_sum = p.sum(), q.sum()
    if p_sum == 0 or q_sum == 0:
        return float(np.inf)
    p, q = p / p_sum, q / q_sum
    mask = p > 0
    if np.any(q[mask] == 0):
        return float(np.inf)
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def _entropy(h: ValueHistogram, bits: int) -> tuple[float, float]:
    counts, edges = h.absolute()
    levels = 2 ** (bits - 1)
    last = int(np.max(np.nonzero(counts)[0])) + 1 if counts.any() else 1
    if last <= levels:
        t = float(edges[last])
    else:
        errs = [(kl_of_threshold(counts, i, levels), i) for i in range(levels, last + 1)]
        t = float(edges[min(errs)[1]])
    return -t, t


def choose_range(settings: Calibration, h: ValueHistogram, *, bits: int, symmetric: bool,
                 sdk: tuple[float, float] | None = None) -> tuple[float, float]:
    """The range [lo, hi] that ``settings.method`` chooses for the values in ``h`` quantized to ``bits`` bits
    (``symmetric``: a range [-t, t]). ``sdk`` is the target's own range, returned for method ``sdk`` (min/max
    when not given)."""
    method = settings.method
    if h.n == 0:
        return (0.0, 0.0) if sdk is None or method != "sdk" else sdk
    if method == "sdk":
        return sdk if sdk is not None else _widen(h.min, h.max, h)
    if method == "minmax":
        lo, hi = h.min, h.max
        if symmetric:
            t = max(abs(lo), abs(hi))
            return -t, t
        return _widen(lo, hi, h)
    if method == "percentile":
        lo, hi = _percentile(h, float(settings.percentile), symmetric)
    elif method == "mse":
        lo, hi = _mse(h, bits, symmetric)
    else:
        lo, hi = _entropy(h, bits)
    if symmetric:
        t = min(max(abs(lo), abs(hi)), max(abs(h.min), abs(h.max)))
        return -float(t), float(t)
    lo, hi = _widen(lo, hi, h)
    return float(lo), float(hi)


def histogram_of(values, bins: int = DEFAULT_BINS) -> ValueHistogram:
    """A :class:`ValueHistogram` of ``values`` (an array or a list of arrays)."""
    h = ValueHistogram(bins)
    for v in values if isinstance(values, (list, tuple)) else [values]:
        h.add(v)
    return h


__all__ = ["DEFAULT_BINS", "METHODS", "SDK", "Calibration", "CalibrationInputs", "ValueHistogram", "choose_range",
           "histogram_of", "kl_of_threshold", "mse_of_threshold", "settings_of"]
