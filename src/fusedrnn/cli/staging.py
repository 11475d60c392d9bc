"""Results that appear whole or not at all: every command that writes files writes them under a temporary folder
in the destination's folder and renames them into place at the end, so that a failure or Ctrl-C leaves the
previous result (or nothing), never a mix of new files and an old manifest.

* :func:`staged_files`: one or more files (``convert --out``; a zDNN ``.bin`` and its ``.json``);
* :func:`staged_folder`: the files of a folder (``export-vectors --out``); a folder that did not exist appears
  with one rename, files in an existing folder replace those of the same names (other files stay).

The renames that publish a result run with Ctrl-C held back and undo themselves when one fails. Temporary
folders are named ``.fusedrnn-partial-*`` and are removed on every way out of the block.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PARTIAL = ".fusedrnn-partial-"
"""The name prefix of the temporary folders."""


def _temp_dir(parent: Path) -> Path:
    """A new empty folder in ``parent`` with the default permissions (``os.mkdir`` honours the umask, where
    ``tempfile.mkdtemp`` would make it private)."""
    while True:
        path = parent / f"{PARTIAL}{secrets.token_hex(6)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) until the block ends, then raise KeyboardInterrupt: the renames publishing a
    result are not cut in the middle. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
        if caught:
            raise KeyboardInterrupt


def publish(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Rename every staged file onto its destination ((staged, destination) pairs, in order), all or none: an
    existing destination is first moved beside its staged file (in the staging folder, on the destination's
    file system) and moved back if a later rename fails; Ctrl-C waits until the renames are done. A
    destination that is a folder is an error (IsADirectoryError); a symbolic link is replaced, not written
    through."""
    with interrupts_deferred():
        moved: list[tuple[Path, Path]] = []
        placed: list[Path] = []
        try:
            for k, (new, dest) in enumerate(pairs):
                if dest.is_dir() and not dest.is_symlink():
                    raise IsADirectoryError(21, "is a folder", str(dest))
                if os.path.lexists(dest):
                    old = new.parent / f"{PARTIAL}{k}.old"
                    os.replace(dest, old)
                    moved.append((old, dest))
                os.replace(new, dest)
                placed.append(dest)
        except BaseException:
            for dest in placed:
                dest.unlink(missing_ok=True)
            for old, dest in reversed(moved):
                os.replace(old, dest)
            raise


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def staged_files(*destinations: Path) -> Iterator[list[Path]]:
    """Paths to write instead of ``destinations`` (same names, in a temporary folder beside each); when the
    block ends normally the files written there replace the destinations together (:func:`publish`; a staged
    file that was not written leaves its destination alone), else they are removed and the destinations stay as
    they were. The destinations' folders must exist."""
    temps: dict[Path, Path] = {}
    try:
        staged = []
        for dest in destinations:
            parent = dest.parent
            if parent not in temps:
                temps[parent] = _temp_dir(parent)
            staged.append(temps[parent] / dest.name)
        yield staged
        pairs = [(s, d) for s, d in zip(staged, destinations, strict=True) if os.path.lexists(s)]
        publish(pairs)
    finally:
        for t in temps.values():
            _remove(t)


@contextmanager
def staged_folder(folder: Path, last: Sequence[str] = ()) -> Iterator[Path]:
    """An empty folder to write a result's files into. When the block ends normally: a ``folder`` that does not
    exist becomes that folder by one rename (its parents are created); in an existing ``folder`` every file
    written replaces the file of the same name (:func:`publish`; the names in ``last`` last, e.g. a manifest),
    other files stay. When the block raises (Ctrl-C included), the staged files are removed and ``folder``
    keeps what it held."""
    if folder.exists() or folder.is_symlink():
        stage = _temp_dir(folder)
        try:
            yield stage
            _publish_into(stage, folder, last)
        finally:
            _remove(stage)
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = _temp_dir(folder.parent)
    try:
        yield stage
        with interrupts_deferred():
            try:
                os.rename(stage, folder)
                return
            except OSError:  # the folder appeared meanwhile: publish into it file by file
                if not folder.is_dir():
                    raise
        _publish_into(stage, folder, last)
    finally:
        _remove(stage)


def _publish_into(stage: Path, folder: Path, last: Sequence[str]) -> None:
    names = sorted(p.name for p in stage.iterdir())
    names = [n for n in names if n not in last] + [n for n in last if n in names]
    publish([(stage / n, folder / n) for n in names])


__all__ = ["PARTIAL", "interrupts_deferred", "publish", "staged_files", "staged_folder"]
