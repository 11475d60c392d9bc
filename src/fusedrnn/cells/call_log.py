"""Per-thread logs of kernel calls, for code that needs what a call prepared (the ONNX custom-op bridge,
:mod:`fusedrnn.frontends.onnx_native`, takes the kernel arguments of a probe call instead of rebuilding them)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class CallLog:
    """Calls a module notes (:meth:`note`) are appended, per thread, to the list :meth:`recording` yields; outside
    such a block a note costs one attribute lookup."""

    def __init__(self):
        self._local = threading.local()

    def note(self, call) -> None:
        calls = getattr(self._local, "calls", None)
        if calls is not None:
            calls.append(call)

    @contextlib.contextmanager
    def recording(self) -> Iterator[list]:
        """Context in which this thread's noted calls are appended to the list it yields."""
        old = getattr(self._local, "calls", None)
        self._local.calls = calls = []
        try:
            yield calls
        finally:
            self._local.calls = old


__all__ = ["CallLog"]
