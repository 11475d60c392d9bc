"""Storage-rounding policies: where a reduced-precision target rounds the float engine's values.

A policy maps named rounding points to in-place rounding functions. The cell engines call the function of a
point on every value that passes it, so fp16, bf16 (and later DLFLOAT16) emulation reuse the float loop.

Points (in the order a step meets them):

``weights``      W, R, biases, peepholes, projection and layer-norm weights, once before the run
``inputs``       X and the initial states, once before the run
``preact``       each gate pre-activation after its sum (input projection + recurrent product + bias)
``gates``        each gate after its activation
``cell``         the LSTM cell state after its update
``hidden``       the hidden state after each step (and the LSTM projection input o*h(c))
``outputs``      Y, Y_h and Y_c as returned

Split points (opt-in, not part of ``POINTS``; LSTM without layer norm, GRU with ``linear_before_reset``, ignored
elsewhere). When a policy rounds at either,
the engine keeps the two bias halves apart, as an accelerator that runs the input and the recurrent GEMMs as
separate ops does (IBM zDNN, zdnn.md 3.3), and disables its exact sigmoid folding:

``xproj``        x·Wᵀ + b_x of every timestep, once it is computed (before any recurrent term is added)
``hproj``        h·Rᵀ + b_h of each step, before the input projection is added
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import AttributeValueError
from ..numerics import round_to_bfloat16, round_to_float16

POINTS: tuple[str, ...] = ("weights", "inputs", "preact", "gates", "cell", "hidden", "outputs")
SPLIT_POINTS: tuple[str, ...] = ("xproj", "hproj")
KNOWN_POINTS: tuple[str, ...] = POINTS + SPLIT_POINTS

Rounder = Callable[[np.ndarray], object]


@dataclass(frozen=True)
class RoundingPolicy:
    """A name and a mapping from rounding point to an in-place rounding function."""

    name: str
    rounders: Mapping[str, Rounder] = field(default_factory=dict)

    def __post_init__(self):
        unknown = set(self.rounders) - set(KNOWN_POINTS)
        if unknown:
            raise AttributeValueError(
                f"rounders: unknown rounding point(s) {sorted(unknown)}; expected a subset of {KNOWN_POINTS}"
            )

    def get(self, point: str) -> Rounder | None:
        """The rounding function at ``point``, or None when values pass it unrounded."""
        return self.rounders.get(point)

    def apply(self, point: str, x: np.ndarray) -> np.ndarray:
        """Round ``x`` in place at ``point`` (no-op when the policy does not round there)."""
        fn = self.rounders.get(point)
        if fn is not None:
            fn(x)
        return x

    @property
    def splits_biases(self) -> bool:
        """True when the policy rounds at a split point (``xproj`` / ``hproj``)."""
        return any(p in self.rounders for p in SPLIT_POINTS)

    @property
    def is_exact(self) -> bool:
        """True when the policy rounds nowhere (the plain float engine)."""
        return not self.rounders


EXACT = RoundingPolicy("exact")
FP16 = RoundingPolicy("fp16", {p: round_to_float16 for p in POINTS})
BF16 = RoundingPolicy("bf16", {p: round_to_bfloat16 for p in POINTS})
