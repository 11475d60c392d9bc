"""The one engine setting: which backend runs the float engines' calls, and which loop the SDK targets' kernels
use. :mod:`fusedrnn.cells.dispatch` reads it (and re-exports its functions); the compiled backends' switches
(``compiled.disabled()``, ``rounded.disabled()``, ...) and the targets' engine choices
(:class:`fusedrnn.cells.compiled._build.EngineChoice`) are views of it.

Values (:data:`ENGINES`):

``auto``      the float engines take the first backend of the dispatch table that accepts the call (compiled,
              rounded, NumPy); the targets their compiled loop when it builds, else the NumPy loop
``compiled``  the compiled float loop only (a call it declines raises); the targets' compiled loops
``rounded``   the compiled rounded float loop only (a call it declines raises); the targets as ``auto``
``numpy``     the NumPy loops everywhere

Initial value: ``$FUSEDRNN_ENGINE``; else, deprecated, ``FUSEDRNN_COMPILED=0`` (or false / no / off) means
``numpy`` (and the kernels are then not even built); else ``auto``. The targets' ``use_engine`` blocks override it
for one target only (a *scope*, e.g. "MLI"), so that comparing a target's two loops leaves the float engines on
their default.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from ..errors import AttributeValueError

ENGINES: tuple[str, ...] = ("auto", "compiled", "rounded", "numpy")
ENV = "FUSEDRNN_ENGINE"
DEPRECATED_ENV = "FUSEDRNN_COMPILED"
_OFF = ("0", "false", "no", "off")


def compiled_switched_off_by_env() -> bool:
    """True when the deprecated ``FUSEDRNN_COMPILED`` says 0 / false / no / off (no kernel is built then)."""
    return os.environ.get(DEPRECATED_ENV, "1").strip().lower() in _OFF


def check_engine(engine: str, argument: str = "engine", allowed: tuple[str, ...] = ENGINES) -> str:
    """``engine`` when it is one of ``allowed``, else AttributeValueError (a ValueError)."""
    if not isinstance(engine, str) or engine not in allowed:
        raise AttributeValueError(f"{argument}: expected one of {', '.join(map(repr, allowed))}, got {engine!r}")
    return engine


def from_environment() -> str:
    """The initial engine setting from the environment (see the module docstring)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value:
        if value in ENGINES:
            return value
        warnings.warn(f"${ENV}: expected one of {', '.join(ENGINES)}, got {value!r}; using 'auto'",
                      RuntimeWarning, stacklevel=2)
        return "auto"
    if compiled_switched_off_by_env():
        warnings.warn(f"${DEPRECATED_ENV}=0 is deprecated: use {ENV}=numpy", DeprecationWarning, stacklevel=2)
        return "numpy"
    return "auto"


_state: dict = {"engine": from_environment(), "scoped": {}}


def engine(scope: str | None = None) -> str:
    """The engine setting now; with ``scope`` (a target's name), that target's override when one is active."""
    if scope is not None:
        override = _state["scoped"].get(scope)
        if override is not None:
            return override
    return _state["engine"]


def allows(backend: str) -> bool:
    """True when the setting lets the float backend ``backend`` ("compiled" or "rounded") take calls: "auto", or
    that backend itself."""
    e = _state["engine"]
    return e == "auto" or e == backend


def set_engine(name: str) -> None:
    """Set the engine for this process (see :data:`ENGINES`); not thread-safe."""
    _state["engine"] = check_engine(name)


@contextlib.contextmanager
def using(name: str, scope: str | None = None) -> Iterator[None]:
    """The engine ``name`` inside the block (process-wide, not thread-safe); with ``scope``, for that target's
    loops only."""
    check_engine(name)
    if scope is None:
        old, _state["engine"] = _state["engine"], name
        try:
            yield
        finally:
            _state["engine"] = old
        return
    scoped = _state["scoped"]
    old = scoped.get(scope)
    scoped[scope] = name
    try:
        yield
    finally:
        if old is None:
            scoped.pop(scope, None)
        else:
            scoped[scope] = old
