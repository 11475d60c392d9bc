"""The registry of emulation targets: name -> :class:`Target` with its capabilities.

A target says how a recurrent layer's arithmetic is carried out: the float engines in a compute dtype with a
storage-rounding policy (``fp32``, ``fp64``, ``fp16``, ``bf16``), and later the SDK targets (MLI, zDNN,
Quark, LiteRT), which register themselves here without changes to the callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """

    name: str
    description: str
    family: str = "float"
    dtype: np.dtype = field(default=np.dtype(np.float32))
    rounding: RoundingPolicy = EXACT
    features: frozenset = frozenset(FLOAT_FEATURES)
    bit_exact: bool = False

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
