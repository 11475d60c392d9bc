"""Helpers shared by the framework converters."""

from __future__ import annotations

from ..errors import ConversionError
from ..layers import RecurrentLayer

LAYER_NAMES = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}
"""Cell kind -> the fusedrnn layer class name."""


def check_expected(expected, kind: str, framework: str, class_names: dict[str, str], method: str,
                   argument: str) -> None:
    """Raise ConversionError unless ``expected`` (a layer class, ``RecurrentLayer`` meaning any, or None) fits
    the cell ``kind`` found in a framework object; ``class_names`` spell the framework's classes by cell kind,
    ``method`` is the converter (``from_torch``), ``argument`` the name of the converted argument."""
    if expected is None or expected is RecurrentLayer:
        return
    if not (isinstance(expected, type) and issubclass(expected, RecurrentLayer)):
        raise ConversionError(f"expected: a fusedrnn layer class (LSTM, GRU, RNN or RecurrentLayer), got "
                              f"{expected!r}")
    if expected.cell != kind:
        raise ConversionError(f"{argument}: {expected.__name__}.{method} expected a {framework} "
                              f"{class_names[expected.cell]}, got {class_names[kind]}; use "
                              f"fusedrnn.{LAYER_NAMES[kind]}.{method}")
