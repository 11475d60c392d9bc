"""Shared pieces of the command line: the error type, consoles, and a progress bar that shows up only when
the work runs longer than a second."""

from __future__ import annotations

import os
import sys
import threading
import time
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


WIDE = 400
"""The width of tables written to a file or pipe when ``COLUMNS`` is not set: wide enough that no cell is cut."""


def output_width() -> int | None:
    """The width tables must fit: ``COLUMNS`` when set (a positive number), else the terminal's (None: rich
    measures it), else :data:`WIDE` off a terminal."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return None if sys.stdout.isatty() else WIDE


def stdout_console() -> Console:
    """The console for results: created per invocation so that click's test runner (which swaps sys.stdout)
    captures it; as wide as :func:`output_width` (``COLUMNS`` honoured)."""
    return Console(highlight=False, width=output_width(), soft_wrap=False)


class _Steps:
    """What ``delayed_progress`` yields: ``set_total(n)``, ``begin(label)`` before a step, ``advance()`` after."""

    def __init__(self, progress: Progress, task, description: str, lines: bool = False):
        self._progress, self._task, self._description = progress, task, description
        self._lines, self._label, self._done, self._total, self._t0 = lines, "", 0, None, time.perf_counter()

    def set_total(self, n: int) -> None:
        self._total = n
        self._progress.update(self._task, total=n)

    def begin(self, label: str) -> None:
        self._label, self._t0 = label, time.perf_counter()
        self._progress.update(self._task, description=f"{self._description} {label}")

    def advance(self, note: str = "") -> None:
        """One step done; off a terminal (with lines on) one line ``[k/n] description label (note, s)``."""
        self._done += 1
        self._progress.update(self._task, advance=1)
        if self._lines:
            of = f"/{self._total}" if self._total else ""
            took = f"{time.perf_counter() - self._t0:.1f} s"
            print(f"[{self._done}{of}] {self._description} {self._label}: {note + ', ' if note else ''}{took}",
                  file=sys.stderr, flush=True)


@contextmanager
def delayed_progress(description: str, total: int | None = None, *, enabled: bool = True, delay: float = 1.0,
                     lines: bool = False):
    """A transient rich progress bar on stderr that appears only if the block runs longer than ``delay``
    seconds (and stderr is a terminal); with ``lines`` (and ``enabled``), off a terminal one line per finished
    step instead. Yields a :class:`_Steps`."""
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
        yield _Steps(progress, task, description, lines=enabled and lines and not console.is_terminal)
    finally:
        timer.cancel()
        timer.join()
        progress.stop()
