"""``--calibration-method``, ``--percentile`` and ``--keep-float``: how the commands that calibrate quantized targets
choose ranges and which recurrent nodes stay in float.

``--calibration-method`` is repeatable; each value is ``[TARGET:][NODE=]METHOD``: ``percentile`` (every target and
node), ``mli2-sa8:entropy`` (one target), ``lstm2=mse`` (one node on every target), ``litert-int8x16:lstm2=mse``.
The most specific entry wins. METHOD is one of :data:`fusedrnn.cells.calibration.METHODS` (``sdk``: the
target's own recipe, the default).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import click

from .. import targets as _targets
from ..cells.calibration import METHODS, Calibration
from .common import CLIError


@dataclass(frozen=True)
class MethodChoice:
    """The parsed ``--calibration-method`` values: {target or None: {node or None: method}}."""

    entries: dict = field(default_factory=dict)
    percentile: float = 99.99

    def for_target(self, target: str, inputs) -> Calibration:
        """The :class:`~fusedrnn.Calibration` of ``target`` with ``inputs`` (feeds)."""
        chosen: dict = {}
        for scope in (None, target):
            chosen.update(self.entries.get(scope, {}))
        base = Calibration(inputs, method=chosen.get(None, "sdk"), percentile=self.percentile)
        per_node = {node: replace(base, inputs=None, method=m) for node, m in chosen.items() if node is not None}
        return replace(base, per_node=per_node)

    def describe(self) -> dict:
        return {("*" if t is None else t): {("*" if n is None else n): m for n, m in nodes.items()}
                for t, nodes in self.entries.items()}


def parse_methods(values: tuple[str, ...], percentile: float) -> MethodChoice:
    """The ``--calibration-method`` values as a :class:`MethodChoice`; CLIError naming a bad value."""
    entries: dict = {}
    for value in values:
        target, rest = None, value
        if ":" in value:
            target, rest = value.split(":", 1)
            if target not in _targets.names():
                raise CLIError(f"--calibration-method: {target!r} in {value!r} is not a target; see "
                               f"'fusedrnn targets'")
        node, method = (rest.split("=", 1) if "=" in rest else (None, rest))
        if method not in METHODS:
            raise CLIError(f"--calibration-method: expected [TARGET:][NODE=]METHOD with METHOD one of "
                           f"{', '.join(METHODS)}, got {value!r}")
        entries.setdefault(target, {})[node or None] = method
    if not 0 < percentile <= 100:
        raise CLIError(f"--percentile: expected a number in (0, 100], got {percentile}")
    return MethodChoice(entries, percentile)


def calibration_options(fn):
    """The options ``--calibration-method``, ``--percentile`` and ``--keep-float``."""
    options = [
        click.option("--calibration-method", "calibration_methods", multiple=True, metavar="[TARGET:][NODE=]METHOD",
                     help=f"How quantized targets choose each tensor's range: {', '.join(METHODS)} (default sdk: "
                          f"the target's own recipe). Repeatable; scope it to a target and/or a node."),
        click.option("--percentile", type=float, default=99.99, show_default=True,
                     help="The percentile of --calibration-method percentile."),
        click.option("--keep-float", "keep_float", multiple=True, metavar="NODE",
                     help="A recurrent node that stays in float on every target (repeatable)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


__all__ = ["MethodChoice", "calibration_options", "parse_methods"]
