"""The TFLite flatbuffer schema, taken from a maintained package (``ai-edge-litert``'s generated Python schema).

Nothing here parses bytes by hand: :func:`schema` returns the generated module (object API: ``ModelT``,
``SubGraphT``, ``TensorT``, ``OperatorT``, the ``*OptionsT`` tables and the enums). The package is an optional
extra (``pip install fusedrnn[litert]``); a clear error says so when it is missing.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from ...errors import UnsupportedFeatureError

_CANDIDATES = ("ai_edge_litert.schema_py_generated", "tflite_runtime.schema_py_generated")


@functools.cache
def schema() -> ModuleType:
    """The generated TFLite schema module (raises UnsupportedFeatureError when no provider is installed)."""
    for name in _CANDIDATES:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UnsupportedFeatureError("litert: reading or writing .tflite files needs the flatbuffer schema of the "
                                  "'ai-edge-litert' package; install it with `pip install fusedrnn[litert]`")


@functools.cache
def enum_names(enum: str) -> dict[int, str]:
    """value -> NAME of an enum class of the schema (e.g. ``"BuiltinOperator"``, ``"TensorType"``)."""
    cls = getattr(schema(), enum)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


@functools.cache
def enum_value(enum: str, name: str) -> int:
    return getattr(getattr(schema(), enum), name)
