"""The compiled recurrence kernel (``_kernel.c``) and the SDK targets' compiled loops, as loaded by
:mod:`fusedrnn._native` (the libraries built when the package was installed, the variant for this CPU), plus the
engine choice of the targets' loops (:class:`EngineChoice`, :class:`CompiledLoop`).

:func:`load` returns the float kernel's library, or None when it is unavailable (:func:`unavailable_reason` says
why; :mod:`fusedrnn._native` warned once) or when the deprecated ``FUSEDRNN_COMPILED=0`` keeps every kernel
unloaded (the engine setting is then "numpy", :mod:`fusedrnn.cells.setting`); nothing is raised.
"""

from __future__ import annotations

import ctypes

from ... import _native
from .. import setting

ABI_VERSION = 10


def _bind(lib: ctypes.CDLL) -> None:
    for name in ("f32_run", "f64_run", "f32_batched_ok", "f32_rows_ok"):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = ctypes.c_int
    lib.fusedrnn_pool_stats.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.fusedrnn_pool_stats.restype = ctypes.c_int
    lib.fusedrnn_thread_cpu.argtypes = []
    lib.fusedrnn_thread_cpu.restype = ctypes.c_int
    lib.fusedrnn_leave_cpu.argtypes = [ctypes.c_int]
    lib.fusedrnn_leave_cpu.restype = ctypes.c_int
    # the onnxruntime custom operators (_ort_bridge.h)
    lib.fusedrnn_bridge_add.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_long]
    lib.fusedrnn_bridge_add.restype = ctypes.c_long
    lib.fusedrnn_bridge_drop.argtypes = [ctypes.c_long]
    lib.fusedrnn_bridge_drop.restype = None
    lib.fusedrnn_bridge_threads.argtypes = [ctypes.c_int, ctypes.c_long]
    lib.fusedrnn_bridge_threads.restype = None
    lib.fusedrnn_bridge_live.argtypes = []
    lib.fusedrnn_bridge_live.restype = ctypes.c_int
    lib.fusedrnn_bridge_ns.argtypes = []
    lib.fusedrnn_bridge_ns.restype = ctypes.c_long


KERNEL = _native.Library("kernel", ABI_VERSION, _bind)


def load() -> ctypes.CDLL | None:
    """The kernel library (loaded on the first call, then kept for the process), or None."""
    return KERNEL.load()


def unavailable_reason() -> str | None:
    """Why :func:`load` returned None (None when the kernel is loaded or was not tried yet)."""
    return KERNEL.reason


def library_path() -> str | None:
    """The file the kernel was loaded from, once loaded."""
    return None if KERNEL.path is None else str(KERNEL.path)


TARGET_ENGINE = {"auto": "auto", "compiled": "compiled", "rounded": "auto", "numpy": "numpy"}
"""What each engine setting (:data:`fusedrnn.cells.setting.ENGINES`) means for an SDK target's loop: the rounded
backend is a float-engine one, so the targets read "rounded" as "auto"."""


class EngineChoice:
    """Which loop an SDK target's ``engine="auto"`` runs: ``"auto"`` (compiled when available), ``"numpy"`` or
    ``"compiled"``, read from the one engine setting (:mod:`fusedrnn.cells.setting`: ``$FUSEDRNN_ENGINE``,
    :func:`fusedrnn.cells.dispatch.set_engine`). :meth:`use` overrides it for this target (``scope``) inside a
    ``with`` block, leaving the float engines and the other targets alone (tests, benchmarks; process-wide, not
    thread-safe)."""

    ENGINES = ("auto", "numpy", "compiled")

    def __init__(self, scope: str = "target"):
        self.scope = scope

    @property
    def default(self) -> str:
        """What ``engine="auto"`` means now for this target."""
        return TARGET_ENGINE[setting.engine(self.scope)]

    def use(self, engine: str):
        """Context manager: ``engine`` for this target's loops inside the block."""
        setting.check_engine(engine, "engine", self.ENGINES)
        return setting.using(engine, scope=self.scope)


class CompiledLoop:
    """An SDK target's compiled time loop: its library (a :class:`fusedrnn._native.Library`) and the process-wide
    choice of what ``engine="auto"`` means (:class:`EngineChoice`). ``name`` (e.g. "MLI") appears in error
    messages."""

    def __init__(self, name: str, kernel: _native.Library):
        self.name = name
        self.kernel = kernel
        self.engines = EngineChoice(name)

    def load(self) -> ctypes.CDLL | None:
        """The kernel library (loaded on the first call), or None."""
        return self.kernel.load()

    def unavailable_reason(self) -> str | None:
        """Why :meth:`load` returned None (None when loaded or not tried yet)."""
        return self.kernel.reason

    def default_engine(self) -> str:
        """What ``engine="auto"`` means now: "auto" (compiled when available), or what :meth:`use_engine` set."""
        return self.engines.default

    def use_engine(self, engine: str):
        """Make ``engine="auto"`` mean ``engine`` ("auto", "numpy" or "compiled") inside the block (tests,
        benchmarks; process-wide, not thread-safe)."""
        return self.engines.use(engine)

    def library(self, engine: str = "auto") -> ctypes.CDLL | None:
        """The library for ``engine`` ("auto", "numpy", "compiled"), or None for the NumPy loop; RuntimeError for
        "compiled" when the library is unavailable."""
        if engine == "auto":
            engine = self.default_engine()
        if engine == "numpy":
            return None
        setting.check_engine(engine, "engine", EngineChoice.ENGINES)
        lib = self.load()
        if lib is None and engine == "compiled":
            raise RuntimeError(f"engine='compiled': the {self.name} kernel is unavailable "
                               f"({self.unavailable_reason()})")
        return lib
