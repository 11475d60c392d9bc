"""Option groups the commands share, each a decorator (``@model_options``, ``@output_options``, ...): a command
takes a group whole, so that an option means the same everywhere and a new one is added in one place.

Each group also has a small value type that the command receives instead of loose keyword arguments, through
:func:`collect`: ``model_options`` -> :class:`ModelOptions`, ``gate_options`` -> :class:`Gates`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

FORMATS = ("table", "csv", "markdown", "json")
"""What ``--format`` takes on every command."""


def _apply(options: list, fn: Callable) -> Callable:
    for option in reversed(options):
        fn = option(fn)
    return fn


@dataclass(frozen=True)
class ModelOptions:
    """How to read MODEL (:func:`fusedrnn.frontends.model_files.load_model`): ``layers`` (a state dict's module
    order), ``batch_first`` (True / False from ``--batch-first`` / ``--time-major``, None when not given),
    ``nonlinearity`` (an nn.RNN's)."""

    layers: str | None = None
    batch_first: bool | None = None
    nonlinearity: str = "tanh"


def model_options(fn: Callable) -> Callable:
    """``--layers``, ``--batch-first/--time-major``, ``--nonlinearity``: gathered into ``model_opts``."""
    return _apply([
        click.option("--layers", "model_layers", metavar="PREFIXES",
                     help="A PyTorch state dict's modules in the order the model applies them, comma-separated "
                          "(recurrent modules and nn.Linear heads, e.g. lstm,head)."),
        click.option("--batch-first/--time-major", "batch_first", default=None,
                     help="The layout of the data and calibration files' sequences ([batch, time, features] or "
                          "[time, batch, features]) and of a state dict's recurrent modules (which the file does "
                          "not record). Default: the model's own layout; required where it cannot be told."),
        click.option("--nonlinearity", type=click.Choice(["tanh", "relu"]), default="tanh", show_default=True,
                     help="The nn.RNN nonlinearity of a state dict (it is not stored in the weights)."),
    ], fn)


def output_options(fn: Callable) -> Callable:
    """``--format table|csv|markdown|json`` (and ``--json``, the same as ``--format json``): ``out_format``."""
    return _apply([
        click.option("--format", "out_format", type=click.Choice(FORMATS), default=None,
                     help="How to print the results: a table for people (default), csv, markdown or json."),
        click.option("--json", "as_json", is_flag=True, help="Print the results as JSON (--format json)."),
    ], fn)


def output_format(out_format: str | None, as_json: bool) -> str:
    """The format chosen by ``--format`` / ``--json`` (both given must agree)."""
    if as_json and out_format not in (None, "json"):
        raise click.UsageError(f"--json and --format {out_format} contradict each other")
    return "json" if as_json else (out_format or "table")


@dataclass(frozen=True)
class Gates:
    """Pass / fail limits for CI (exit status 3 when one fails): ``min_agreement`` (percent),
    ``min_snr`` (dB), ``skip_unsupported`` (a target that cannot run is not a failure), ``allow_float`` (a
    model without recurrent nodes runs anyway)."""

    min_agreement: float | None = None
    min_snr: float | None = None
    skip_unsupported: bool = False
    allow_float: bool = False


def gate_options(fn: Callable) -> Callable:
    """``--min-agreement``, ``--min-snr``, ``--skip-unsupported``, ``--allow-float``: gathered into ``gates``."""
    return _apply([
        click.option("--min-agreement", type=click.FloatRange(0, 100), metavar="PERCENT",
                     help="Fail (exit 3) when a target's argmax agreement with fp32 is below PERCENT."),
        click.option("--min-snr", type=float, metavar="DB",
                     help="Fail (exit 3) when a target's output SNR vs fp32 is below DB (identical outputs pass)."),
        click.option("--skip-unsupported", is_flag=True,
                     help="A target that cannot run the model is skipped; without it, it fails the gates."),
        click.option("--allow-float", is_flag=True,
                     help="Run a model that has no recurrent node (every target would run it in float; refused "
                          "without this)."),
    ], fn)


def progress_option(fn: Callable) -> Callable:
    """``--progress/--no-progress``: progress on stderr (default: a bar on a terminal; elsewhere one line per
    finished step, except with --format json)."""
    return click.option("--progress/--no-progress", "progress", default=None,
                        help="Progress on stderr: a bar on a terminal, one line per finished target elsewhere "
                             "(default: on, except with --format json off a terminal).")(fn)


def collect(kwargs: dict) -> tuple[ModelOptions, Gates]:
    """Pop the option groups out of a command's keyword arguments into their value types."""
    model = ModelOptions(kwargs.pop("model_layers", None), kwargs.pop("batch_first", None),
                         kwargs.pop("nonlinearity", "tanh"))
    gates = Gates(kwargs.pop("min_agreement", None), kwargs.pop("min_snr", None),
                  kwargs.pop("skip_unsupported", False), kwargs.pop("allow_float", False))
    return model, gates


PathType = click.Path(dir_okay=False, path_type=Path)

__all__ = ["FORMATS", "Gates", "ModelOptions", "PathType", "collect", "gate_options", "model_options",
           "output_format", "output_options", "progress_option"]
