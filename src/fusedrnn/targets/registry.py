"""The registry of emulation targets: name -> :class:`Target` with its capabilities.

A target says how a recurrent layer's arithmetic is carried out: the float engines in a compute dtype with a
storage-rounding policy (``fp32``, ``fp64``, ``fp16``, ``bf16``), and later the SDK targets (MLI, zDNN,
Quark, LiteRT), which register themselves here without changes to the callers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cells.rounding import BF16, EXACT, FP16, RoundingPolicy
from ..cells.spec import CellSpec
from ..errors import UnknownTargetError

FLOAT_FEATURES = (
    "lstm",
    "gru",
    "rnn",
    "bidirectional",
    "sequence_lens",
    "peepholes",
    "projection",
    "layer_norm",
    "cifg",
    "clip",
    "cell_clip",
    "custom_activations",
    "diagonal_recurrence",
    "linear_before_reset",
)
"""Every option the float engines implement; a target lists the subset it can express."""


@dataclass(frozen=True)
class Target:
    """An emulation target.

    ``dtype`` is the compute dtype of the float engines, ``rounding`` the storage-rounding policy applied at
    the engines' rounding points, ``features`` the options the target can express.

    Targets whose arithmetic is not the float engines' (the integer SDK kernels) set ``prepare``:
    ``prepare(spec, calibration) -> Prepared`` is called once by ``layer.to(target, calibration=...)`` with the
    layer's :class:`~fusedrnn.cells.spec.CellSpec` and the calibration inputs normalised by the layer (a list of
    time-major float64 arrays [T, B, I], or None, or a string naming a stored quantization such as "tflite"); it
    chooses quantization parameters, converts the weights and returns a :class:`Prepared`.
    ``needs_calibration`` says whether ``prepare`` requires calibration data.
    """

    name: str
    description: str
    family: str = "float"
    dtype: np.dtype = field(default=np.dtype(np.float32))
    rounding: RoundingPolicy = EXACT
    features: frozenset = frozenset(FLOAT_FEATURES)
    bit_exact: bool = False
    prepare: Callable[[CellSpec, Any], Prepared] | None = None
    needs_calibration: bool = False

    def supports(self, feature: str) -> bool:
        return feature in self.features

    def summary(self) -> dict:
        """A plain-data description (for tables and JSON)."""
        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "compute_dtype": np.dtype(self.dtype).name,
            "rounding": self.rounding.name,
            "features": sorted(self.features),
            "bit_exact": self.bit_exact,
            "needs_calibration": self.needs_calibration,
        }


class Prepared:
    """A cell prepared once on a target (quantization chosen, weights converted): call it to run.

    ``prepared(x, states, lens) -> (Y, states)``: x is the float input [T, B, I] in the target's ``dtype``,
    ``states`` the tuple of float initial states ((h0,) or (h0, c0), each [D, B, ·]), ``lens`` the validated
    sequence lengths [B] (int64) or None; Y is the float output [T, D, B, Hp] with the final states in the same
    tuple form. Subclasses implement :meth:`run` over all rows at once and keep, as typed attributes, the state
    exporters read (MLI's per-direction tensors, LiteRT's kernels, ...). ``splitter`` (None, or e.g.
    :class:`fusedrnn.targets.batch_split.RowSplitter`) may run a call's rows in parts; results are identical.

    ``probe``: None, or a :class:`~fusedrnn.cells.observers.SaturationCounter` that a target whose
    ``counts_saturation`` is True feeds with its integer gate pre-activations, cell and hidden states while it
    runs (on its NumPy loop: counting never slows a call made without a probe). ``ranges``: {tensor: (lo, hi)}
    per direction, the float ranges the quantization was chosen for (``settings``: the
    :class:`~fusedrnn.cells.calibration.Calibration` used), where the target reports them. ``trace``: None, or
    a dict into which a target that supports it stores, per direction, the integer tensors of its last call
    (``x``, ``h0``, ``c0``, ``y``, ``h``, ``c`` as its kernel read and wrote them, in time order) — the
    on-target bundles of ``export-vectors``.
    """

    splitter: Callable | None = None
    probe = None
    counts_saturation: bool = False
    trace: dict | None = None

    def __init__(self, spec: CellSpec):
        self.spec = spec

    def run(self, x: np.ndarray, states: tuple, lens: np.ndarray | None) -> tuple[np.ndarray, tuple]:
        """All rows in one call (no splitting)."""
        raise NotImplementedError

    def __call__(self, x: np.ndarray, states: tuple, lens: np.ndarray | None) -> tuple[np.ndarray, tuple]:
        if self.splitter is None or self.probe is not None or self.trace is not None:  # probes and traces: one thread
            return self.run(x, states, lens)
        return self.splitter(self.run, x, states, lens)


class CallablePrepared(Prepared):
    """A plain ``run(x, states, lens)`` callable returned by an older ``prepare`` hook, as a :class:`Prepared`."""

    def __init__(self, spec: CellSpec, run: Callable):
        super().__init__(spec)
        self._run = run

    def run(self, x, states, lens):
        return self._run(x, states, lens)


def as_prepared(spec: CellSpec, prepared: Any, target_name: str) -> Prepared:
    """``prepared`` as a :class:`Prepared`: a plain callable (the hook form before 0.2) is wrapped, with a
    DeprecationWarning."""
    if isinstance(prepared, Prepared):
        return prepared
    if callable(prepared):
        warnings.warn(f"target {target_name!r}: prepare() returned a plain callable; return a "
                      f"fusedrnn.targets.Prepared instead", DeprecationWarning, stacklevel=3)
        return CallablePrepared(spec, prepared)
    raise TypeError(f"target {target_name!r}: prepare() must return a fusedrnn.targets.Prepared, got "
                    f"{type(prepared).__name__}")


_REGISTRY: dict[str, Target] = {}


def register(target: Target, *, replace: bool = False) -> Target:
    """Add ``target`` to the registry (``replace=True`` to overwrite a name)."""
    if target.name in _REGISTRY and not replace:
        raise ValueError(f"target: {target.name!r} is already registered")
    _REGISTRY[target.name] = target
    return target


def get(name: str | Target) -> Target:
    """The registered target called ``name`` (a Target passes through)."""
    if isinstance(name, Target):
        return name
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownTargetError(
            f"target: unknown target {name!r}; registered targets are {', '.join(_REGISTRY)}"
        ) from None


def register_new(targets) -> None:
    """Register each of ``targets`` whose name is not registered yet (a package's table, on import)."""
    for t in targets:
        if t.name not in _REGISTRY:
            register(t)


def names() -> list[str]:
    return list(_REGISTRY)


def all_targets() -> list[Target]:
    return list(_REGISTRY.values())


register(Target("fp32", "float32 reference engines (onnxruntime semantics)", dtype=np.dtype(np.float32)))
register(Target("fp64", "float64 engines, the most accurate reference", dtype=np.dtype(np.float64)))
register(Target("fp16", "float16 storage: every value rounded to IEEE half (round to nearest even), float32 "
                "arithmetic", dtype=np.dtype(np.float32), rounding=FP16))
register(Target("bf16", "bfloat16 storage: every value rounded to bfloat16 (round to nearest even), float32 "
                "arithmetic", dtype=np.dtype(np.float32), rounding=BF16))
