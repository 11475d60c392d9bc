"""One table of backends for the float engines, decided once per call, in one place.

:func:`~fusedrnn.cells.lstm_sequence`, :func:`~fusedrnn.cells.gru_sequence` and
:func:`~fusedrnn.cells.rnn_sequence` hand their arguments to :func:`run`, which asks the backends of
:data:`BACKENDS` in order whether they take the call and runs the first that does:

============  =========================================================================================
``compiled``  the C time loop (:mod:`fusedrnn.cells.compiled`): EXACT policy, float32/float64, every option
``rounded``   the C loop under a rounding policy (:mod:`fusedrnn.cells.rounded`): fp16 / bf16 / DLFLOAT16
``numpy``     the engine's own NumPy loop: every call (the only one that observes, or feeds h through h_feed)
============  =========================================================================================

Each backend's ``accepts(call)`` returns None when it takes the call, or the reason it declines (any call with an
observer goes to NumPy: "observer given"). The engine setting (:func:`set_engine`, :func:`using`,
``$FUSEDRNN_ENGINE``; see :mod:`fusedrnn.cells.setting`) picks ``"auto"`` (the table in order) or one backend,
which must then take the call or an :class:`~fusedrnn.errors.UnsupportedFeatureError` says why it declines.
:func:`last_decision` tells which backend ran the last call of this thread and why the others declined; the same
is logged at debug level on the ``"fusedrnn"`` logger.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UnsupportedFeatureError
from . import setting
from .call_log import CallLog
from .compiled import driver as compiled_driver
from .rounded import driver as rounded_driver
from .setting import ENGINES, engine, set_engine, using

log = logging.getLogger("fusedrnn")


class Call:
    """One engine call: the cell kind ("lstm", "gru", "rnn"), the engine function's arguments by name, its NumPy
    loop (called with those arguments), and what the accepting backend prepared for its run."""

    __slots__ = ("kind", "args", "loop", "prepared")

    def __init__(self, kind: str, args: dict, loop: Callable[..., tuple]):
        self.kind, self.args, self.loop, self.prepared = kind, args, loop, None


@dataclass(frozen=True)
class Backend:
    """A row of the table: ``accepts(call)`` -> None (takes it; what its run needs may be left in
    ``call.prepared``) or the reason it declines; ``run(call)`` -> the engine's outputs."""

    name: str
    accepts: Callable[[Call], str | None]
    run: Callable[[Call], tuple]


def _numpy_accepts(call: Call) -> str | None:
    return None


def _numpy_run(call: Call) -> tuple:
    return call.loop(**call.args)


BACKENDS: tuple[Backend, ...] = (
    Backend("compiled", compiled_driver.accepts, compiled_driver.run),
    Backend("rounded", rounded_driver.accepts, rounded_driver.run),
    Backend("numpy", _numpy_accepts, _numpy_run),
)
"""The backends in the order ``"auto"`` tries them."""
_BY_NAME = {b.name: b for b in BACKENDS}
_CHAINS = {name: (BACKENDS if name == "auto" else (_BY_NAME[name],)) for name in ENGINES}


@dataclass(frozen=True)
class Decision:
    """Which backend ran a call (None: the forced one declined and the call raised), under which engine setting,
    and why each backend tried before it declined."""

    kind: str
    engine: str
    backend: str | None
    declined: tuple[tuple[str, str], ...]

    def reason(self, backend: str) -> str | None:
        """Why ``backend`` declined the call (None when it was not asked or took it)."""
        return dict(self.declined).get(backend)

    def __str__(self) -> str:
        ran = f"{self.backend} ran" if self.backend is not None else "nothing ran"
        why = "".join(f"; {name} declined: {reason}" for name, reason in self.declined)
        return f"{self.kind} call, engine={self.engine!r}: {ran}{why}"


_last = threading.local()


def run(kind: str, args: dict, loop: Callable[..., tuple]) -> tuple:
    """Run one engine call: ``args`` are the engine function's arguments by name, ``loop`` its NumPy loop."""
    call = Call(kind, args, loop)
    name = setting._state["engine"]
    declined = ()
    for backend in _CHAINS[name]:
        why = backend.accepts(call)
        if why is None:
            _last.decision = (kind, name, backend.name, declined)
            _log.note(call)
            if declined and log.isEnabledFor(logging.DEBUG):
                log.debug("%s", last_decision())
            return backend.run(call)
        declined += ((backend.name, why),)
    _last.decision = (kind, name, None, declined)
    log.debug("%s", last_decision())
    raise UnsupportedFeatureError(f"engine: {name!r} is set, but the {name} backend declines this {kind} call: "
                                  f"{declined[-1][1]}")


_log = CallLog()
recording = _log.recording
"""Context in which this thread's engine calls are appended to the list it yields, each a :class:`Call` with what
its backend prepared (the ONNX custom-op bridge reads the compiled kernel's plan of a probe call)."""


def last_decision() -> Decision | None:
    """The decision of the last engine call of this thread (None before any)."""
    got = getattr(_last, "decision", None)
    return None if got is None else Decision(*got)


__all__ = ["BACKENDS", "ENGINES", "Backend", "Call", "Decision", "engine", "last_decision", "recording", "run",
           "set_engine", "using"]
