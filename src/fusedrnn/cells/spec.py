"""``CellSpec``: one recurrent cell — its kind, canonical weights and every option — the one thing every part
of fusedrnn shares.

Frontends produce it, layers wrap it (``layer.spec``), the engines run it and targets consume it
(``Target.prepare(spec, calibration)``). Canonical form (see :mod:`fusedrnn.conventions`):

=============  ====================  =============================================================================
cell           "lstm" | "gru" | "rnn"
W              [D, G*H, I]           input weights, gate order LSTM (i, f, g, o), GRU (z, r, n); matrices out x in
R              [D, G*H, Hp]          recurrent weights ([D, 4H] for a diagonal LSTM recurrence)
b_x, b_h       [D, G*H] or None      input-side and recurrent-side biases (double-bias convention)
direction      "forward" | "reverse" | "bidirectional"  (D = 2 for bidirectional, else 1)
activations    D tuples of Activation  (LSTM f, g, h; GRU f, g; RNN f)
clip           float or None         clamp of every gate pre-activation (ONNX ``clip``)
P              [D, 3, H] or None     LSTM peepholes, order i, f, o
coupling       None | "input_forget" | "cifg"
cell_clip      float or None         LSTM cell clamp (TFLite)
proj_W, proj_b [D, Hp, H], [D, Hp]   LSTM projection (``proj_clip`` clamps its output)
layer_norm     [D, 4, H] or None     LSTM layer-norm coefficients (i, f, g, o)
linear_before_reset  bool            GRU: the reset gate multiplies h·R_nᵀ + b_hn (PyTorch / Keras reset_after)
kept           mapping or None       tensors an importer kept from the source file that a target may run as they
                                     are (e.g. an imported .tflite model's quantized LSTM tensors, key ``litert``)
=============  ====================  =============================================================================

A spec holds validated arrays (layers validate before they build one) and is not copied: treat it as read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from .activations import Activation
from .gru import gru_sequence
from .kinds import DEFAULT_ACTIVATIONS, GATE_COUNT
from .lstm import lstm_sequence
from .recurrence import direction_flags
from .rnn import rnn_sequence
from .rounding import EXACT, RoundingPolicy


class CellShape:
    """Shape facts of a cell, read from ``cell``, ``W``, ``R``, ``proj_W``, ``direction`` and the biases (shared by
    :class:`CellSpec` and the layers)."""

    cell: str
    W: np.ndarray
    R: np.ndarray
    b_x: np.ndarray | None = None
    b_h: np.ndarray | None = None
    proj_W: np.ndarray | None = None
    direction: str = "forward"

    @property
    def gate_count(self) -> int:
        return GATE_COUNT[self.cell]

    @property
    def num_directions(self) -> int:
        return self.W.shape[0]

    @property
    def hidden_size(self) -> int:
        return self.W.shape[1] // self.gate_count

    @property
    def input_size(self) -> int:
        return self.W.shape[2]

    @property
    def output_size(self) -> int:
        """Size of each direction's output (the projection size of a projected LSTM)."""
        return self.hidden_size if self.proj_W is None else self.proj_W.shape[1]

    @property
    def diagonal(self) -> bool:
        """True for an LSTM whose recurrence is diagonal (R [D, 4H])."""
        return self.R.ndim == 2

    @property
    def reverse(self) -> tuple[bool, ...]:
        """Per direction: True when it reads the sequence backwards."""
        return tuple(direction_flags(self.direction))

    def bias_sum(self, d: int) -> np.ndarray:
        """b_x[d] + b_h[d] in float64 [G*H] (zeros where a bias is absent): the one bias of SDKs that fold them."""
        b = np.zeros(self.W.shape[1])
        for bb in (self.b_x, self.b_h):
            if bb is not None:
                b = b + np.asarray(bb[d], np.float64)
        return b


@dataclass(frozen=True, eq=False)
class CellSpec(CellShape):
    """A recurrent cell in canonical form (see the module docstring for every field's shape and meaning)."""

    cell: str
    W: np.ndarray
    R: np.ndarray
    b_x: np.ndarray | None = None
    b_h: np.ndarray | None = None
    direction: str = "forward"
    activations: tuple[tuple[Activation, ...], ...] = ()
    clip: float | None = None
    P: np.ndarray | None = None
    coupling: str | None = None
    cell_clip: float | None = None
    proj_W: np.ndarray | None = None
    proj_b: np.ndarray | None = None
    proj_clip: float | None = None
    layer_norm: np.ndarray | None = None
    linear_before_reset: bool = False
    kept: Mapping | None = field(default=None, repr=False)

    def features(self) -> list[str]:
        """The options this cell uses, by the feature names of :mod:`fusedrnn.targets`."""
        flags = (
            (True, self.cell),
            (self.num_directions == 2, "bidirectional"),
            (self.clip is not None, "clip"),
            (any(tuple(a.name for a in per) != DEFAULT_ACTIVATIONS[self.cell] for per in self.activations),
             "custom_activations"),
            (self.P is not None, "peepholes"),
            (self.proj_W is not None, "projection"),
            (self.layer_norm is not None, "layer_norm"),
            (self.coupling is not None, "cifg"),
            (self.cell_clip is not None, "cell_clip"),
            (self.cell == "lstm" and self.diagonal, "diagonal_recurrence"),
            (self.linear_before_reset, "linear_before_reset"),
        )
        return [name for cond, name in flags if cond]

    def engine_options(self) -> dict:
        """The keyword options of this cell's float engine (``lstm_sequence`` / ``gru_sequence`` /
        ``rnn_sequence``) other than the arrays, the states and the rounding policy."""
        common = dict(reverse=self.reverse, acts=self.activations, clip=self.clip)
        if self.cell == "lstm":
            return dict(common, coupling=self.coupling, cell_clip=self.cell_clip, proj_clip=self.proj_clip)
        if self.cell == "gru":
            return dict(common, linear_before_reset=self.linear_before_reset)
        return common


def default_activations(cell: str, D: int) -> tuple[tuple[Activation, ...], ...]:
    """The ONNX default activations of ``cell`` for each of D directions."""
    return (tuple(Activation(a) for a in DEFAULT_ACTIVATIONS[cell]),) * D


def direction_spec(spec: CellSpec, d: int) -> CellSpec:
    """Direction d of ``spec`` as a one-direction spec ("reverse" where d reads backwards)."""
    def one(a):
        return None if a is None else a[d : d + 1]

    arrays = {k: one(getattr(spec, k)) for k in ("W", "R", "b_x", "b_h", "P", "proj_W", "proj_b", "layer_norm")}
    return replace(spec, **arrays, direction="reverse" if spec.reverse[d] else "forward",
                   activations=spec.activations[d : d + 1])


def run_spec(spec: CellSpec, x: np.ndarray, states: tuple[np.ndarray, ...], lens: np.ndarray | None = None, *,
             policy: RoundingPolicy = EXACT, **engine: object) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run ``spec`` over x [T, B, I] with the float engine of its cell kind, in x's dtype.

    ``states`` is (h0 [D, B, Hp], c0 [D, B, H]) for an LSTM and (h0 [D, B, H],) otherwise; ``lens`` the validated
    sequence lengths [B] or None; ``engine`` passes further engine keywords (e.g. ``observer``). Returns
    Y [T, D, B, Hp] and the final states in the same tuple form."""
    dt = x.dtype

    def w(a):
        return None if a is None else np.ascontiguousarray(a, dtype=dt)

    opts = dict(spec.engine_options(), lens=lens, policy=policy, **engine)
    if spec.cell == "lstm":
        Y, h, c = lstm_sequence(x, w(spec.W), w(spec.R), w(spec.b_x), w(spec.b_h), states[0], states[1], P=w(spec.P),
                                proj_W=w(spec.proj_W), proj_b=w(spec.proj_b), ln=w(spec.layer_norm), **opts)
        return Y, (h, c)
    run = gru_sequence if spec.cell == "gru" else rnn_sequence
    Y, h = run(x, w(spec.W), w(spec.R), w(spec.b_x), w(spec.b_h), states[0], **opts)
    return Y, (h,)
