"""Emulation targets: ``list()`` / ``get(name)`` over the registry, and (later) one package per SDK."""

from .registry import FLOAT_FEATURES, Prepared, Target, all_targets, get, names, register


def list() -> list[Target]:  # noqa: A001 - the public name in DESIGN.md
    """Every registered target, in registration order."""
    return all_targets()


__all__ = ["FLOAT_FEATURES", "Prepared", "Target", "get", "list", "names", "register"]
from . import cmsis_nn, litert, mli, quark, tflm, zdnn  # noqa: E402,F401 - each SDK package registers its targets on import
