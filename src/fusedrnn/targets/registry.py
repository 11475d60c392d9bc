"""The registry of emulation targets: name -> :class:`Target` with its capabilities.

A target says how a recurrent layer's arithmetic is carried out: the float engines in a compute dtype with a
storage-rounding policy (``fp32``, ``fp64``, ``fp16``, ``bf16``), and later the SDK targets (MLI, zDNN,
Quark, LiteRT), which register themselves here without changes to the callers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cells.rounding import BF16, EXACT, FP16, RoundingPolicy
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
    ``prepare(layer, calibration) -> run`` is called once by ``layer.to(target, calibration=...)`` (it chooses
    quantization parameters and converts the weights) and returns a callable
    ``run(x, states, lens) -> (Y, states)`` with x the float input [T, B, I] in ``dtype``, ``states`` the tuple
    of float initial states ((h0,) or (h0, c0), each [D, B, H]), ``lens`` the validated sequence lengths [B]
    (int64) or None, and Y the float output [T, D, B, H] with the final states in the same tuple form.
    ``needs_calibration`` says whether ``prepare`` requires calibration data.
    """

    name: str
    description: str
    family: str = "float"
    dtype: np.dtype = field(default=np.dtype(np.float32))
    rounding: RoundingPolicy = EXACT
    features: frozenset = frozenset(FLOAT_FEATURES)
    bit_exact: bool = False
    prepare: Callable[[Any, Any], Callable] | None = None
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
