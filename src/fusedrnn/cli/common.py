"""Shared pieces of the command line: the error type, consoles, and a progress bar that shows up only when
the work runs longer than a second."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

MESSAGE_LIMIT = 600
"""The longest error message the command line prints (longer ones are cut with ``...``)."""


class CLIError(click.ClickException):
    """A user error: printed as one ``Error: ...`` line on stderr (at most :data:`MESSAGE_LIMIT` characters),
    exit status 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str):
        text = " ".join(str(message).split())  # one line
        super().__init__(text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "...")


def stdout_console() -> Console:
    """The console for results: created per invocation so that click's test runner (which swaps sys.stdout)
    captures it; 120 columns when the output is not a terminal, so that piped tables are not wrapped."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=120)
    return console


class _Steps:
    """What ``delayed_progress`` yields: ``set_total(n)``, ``begin(label)`` before a step, ``advance()`` after."""

    def __init__(self, progress: Progress, task, description: str):
        self._progress, self._task, self._description = progress, task, description

    def set_total(self, n: int) -> None:
        self._progress.update(self._task, total=n)

    def begin(self, label: str) -> None:
        self._progress.update(self._task, description=f"{self._description} {label}")

    def advance(self) -> None:
        self._progress.update(self._task, advance=1)


@contextmanager
def delayed_progress(description: str, total: int | None = None, *, enabled: bool = True, delay: float = 1.0):
    """A transient rich progress bar on stderr that appears only if the block runs longer than ``delay``
    seconds (and stderr is a terminal). Yields a :class:`_Steps`."""
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console, transient=True, disable=not (enabled and console.is_terminal),
    )
    task = progress.add_task(description, total=total)
    timer = threading.Timer(delay, progress.start)
    timer.daemon = True
    timer.start()
    try:
        yield _Steps(progress, task, description)
    finally:
        timer.cancel()
        timer.join()
        progress.stop()
