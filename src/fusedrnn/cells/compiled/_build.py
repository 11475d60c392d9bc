"""Build and load the compiled recurrence kernel (``_kernel.c``) as a plain shared library used through ctypes.

Order of attempts, first success wins:

1. a library in the cache directory built earlier for the same source, compiler, flags and CPU;
2. compile now with the C compiler (``$CC``, else ``cc``, ``gcc``, ``clang``) with ``-O3 -march=native``
   (retried without ``-march=native``), written atomically into the cache directory (a few seconds, once);
3. a library shipped with the package (``_ckernel*.so`` next to this file, e.g. built by a setuptools
   ``Extension``; it exports no Python module, only the C functions), for machines without a compiler. Build
   it for a known ISA level (e.g. ``-march=x86-64-v3``): at baseline x86-64 (SSE2) the 32-byte vector code
   measured 8-40x slower than with ``-march=native``.

Cache directory: ``$FUSEDRNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/fusedrnn``, else ``~/.cache/fusedrnn``, else a
per-user temporary directory. The deprecated ``FUSEDRNN_COMPILED=0`` keeps every kernel unbuilt (and makes the
engine setting "numpy", :mod:`fusedrnn.cells.setting`).
When no compiler is found or compilation fails, :func:`load` returns None and :func:`unavailable_reason` says
why; nothing is raised.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import setting

HERE = Path(__file__).resolve().parent
SOURCES = ("_kernel.c", "_kernel_body.h", "_batched.h", "_rows.h", "_pool.h")
ABI_VERSION = 6
FLAG_SETS = (("-O3", "-march=native"), ("-O3",))
COMMON_FLAGS = ("-std=gnu11", "-shared", "-fPIC", "-fno-math-errno", "-pthread")

_lock = threading.Lock()
_state: dict = {"lib": None, "tried": False, "reason": None, "path": None}


def _enabled_by_env() -> bool:
    return not setting.compiled_switched_off_by_env()


def cache_dir() -> Path:
    env = os.environ.get("FUSEDRNN_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "fusedrnn"
    home = Path.home()
    if home and str(home) not in ("", "/"):
        return home / ".cache" / "fusedrnn"
    return Path(tempfile.gettempdir()) / f"fusedrnn-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def _cpu_key() -> str:
    """A digest of the CPU's feature flags: a -march=native library is reused only on the same kind of CPU."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.encode()).hexdigest()[:12]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _source_digest(cc: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = cc
    h.update("\0".join((version, " ".join(flags), _cpu_key(), sys.platform, platform.machine())).encode())
    return h.hexdigest()[:20]


def _open(path: Path) -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(str(path))
        if lib.fusedrnn_abi_version() != ABI_VERSION:
            return None
    except (OSError, AttributeError):
        return None
    return lib


def _compile(cc: str) -> tuple[ctypes.CDLL | None, str | None, str]:
    out_dir = cache_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return None, None, f"cannot create the cache directory {out_dir}: {e}"
    errors = []
    for flags in FLAG_SETS:
        path = out_dir / f"fusedrnn_kernel_{_source_digest(cc, flags)}.so"
        if path.exists():
            lib = _open(path)
            if lib is not None:
                return lib, str(path), ""
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
        os.close(fd)
        cmd = [cc, *flags, *COMMON_FLAGS, "-o", tmp, str(HERE / "_kernel.c"), "-lm"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode == 0:
                os.replace(tmp, path)  # atomic: concurrent builders each write their own temporary file
                _remove_stale(out_dir, keep=path)
                lib = _open(path)
                if lib is not None:
                    return lib, str(path), ""
                errors.append(f"{' '.join(flags)}: built library failed to load")
            else:
                errors.append(f"{' '.join(flags)}: {proc.stderr.strip()[-500:]}")
        except (OSError, subprocess.SubprocessError) as e:
            errors.append(f"{' '.join(flags)}: {e}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return None, None, "compilation failed: " + " | ".join(errors)


STALE_AFTER_S = 7 * 86400


def _remove_stale(out_dir: Path, keep: Path) -> None:
    """Delete kernels of older sources (same name prefix) not touched for a week; errors are ignored."""
    now = time.time()
    for f in out_dir.glob("fusedrnn_kernel_*.so"):
        try:
            if f != keep and now - f.stat().st_mtime > STALE_AFTER_S:
                f.unlink()
        except OSError:
            pass


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name in ("f32_run", "f64_run", "f32_batched_ok", "f32_rows_ok"):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = ctypes.c_int
    return lib


def load() -> ctypes.CDLL | None:
    """The kernel library (built or compiled on the first call, then cached in the process), or None."""
    if _state["tried"]:
        return _state["lib"]
    with _lock:
        if _state["tried"]:
            return _state["lib"]
        lib, path, reason = None, None, ""
        if not _enabled_by_env():
            reason = "disabled by FUSEDRNN_COMPILED=0"
        else:
            cc = _compiler()
            if cc is None:
                reason = "no C compiler found ($CC, cc, gcc, clang)"
            else:
                lib, path, reason = _compile(cc)
            if lib is None:
                for cand in sorted(HERE.glob("_ckernel*.so")):
                    lib = _open(cand)
                    if lib is not None:
                        path, reason = str(cand), ""
                        break
        _state.update(lib=None if lib is None else _bind(lib), path=path, reason=reason or None, tried=True)
        return _state["lib"]


def unavailable_reason() -> str | None:
    """Why :func:`load` returned None (None when the kernel is loaded or was not tried yet)."""
    return _state["reason"]


def library_path() -> str | None:
    """The file the kernel was loaded from, once loaded."""
    return _state["path"]


class KernelLibrary:
    """A C source of another package (an SDK target's compiled loop) built like this package's kernel: at first
    use, with the same compiler search, flag sets, CPU key, cache directory and ``FUSEDRNN_COMPILED=0`` switch,
    into ``fusedrnn_<stem>_<digest>.so``; None (with :attr:`reason`) when that is not possible.

    ``abi_symbol`` names a C function returning the source's ABI version, which must equal ``abi_version``;
    ``bind(lib)`` sets the ctypes signatures once; ``extra_flags`` are appended to every compile (and keyed).
    """

    def __init__(self, source: Path, stem: str, abi_symbol: str, abi_version: int,
                 bind: Callable[[ctypes.CDLL], None], extra_flags: tuple[str, ...] = ()):
        self.source, self.stem, self.abi_symbol, self.abi_version = Path(source), stem, abi_symbol, abi_version
        self.bind, self.extra_flags = bind, tuple(extra_flags)
        self._lock = threading.Lock()
        self._tried = False
        self._lib: ctypes.CDLL | None = None
        self.reason: str | None = None

    def load(self) -> ctypes.CDLL | None:
        """The library (compiled, or loaded from the cache, on the first call), or None."""
        if self._tried:
            return self._lib
        with self._lock:
            if not self._tried:
                lib, reason = None, None
                if not _enabled_by_env():
                    reason = "disabled by FUSEDRNN_COMPILED=0"
                else:
                    cc = _compiler()
                    lib, reason = (None, "no C compiler found") if cc is None else self._compile(cc)
                if lib is not None:
                    self.bind(lib)
                self._lib, self.reason, self._tried = lib, reason, True
        return self._lib

    def _open(self, path: Path) -> ctypes.CDLL | None:
        try:
            lib = ctypes.CDLL(str(path))
            return lib if getattr(lib, self.abi_symbol)() == self.abi_version else None
        except (OSError, AttributeError):
            return None

    def _compile(self, cc: str) -> tuple[ctypes.CDLL | None, str | None]:
        out_dir = cache_dir()
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return None, f"cannot create the cache directory {out_dir}: {e}"
        errors = []
        for flags in FLAG_SETS:
            h = hashlib.sha256(self.source.read_bytes())
            h.update("\0".join((cc, " ".join(flags), " ".join(self.extra_flags), _cpu_key())).encode())
            path = out_dir / f"fusedrnn_{self.stem}_{h.hexdigest()[:20]}.so"
            if not path.exists():
                fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
                os.close(fd)
                try:
                    proc = subprocess.run([cc, *flags, *COMMON_FLAGS, *self.extra_flags, "-o", tmp, str(self.source)],
                                          capture_output=True, text=True, timeout=300)
                    if proc.returncode != 0:
                        errors.append(f"{' '.join(flags)}: {proc.stderr.strip()[-400:]}")
                        continue
                    os.replace(tmp, path)  # atomic: concurrent builders never see a partial library
                except (OSError, subprocess.SubprocessError) as e:
                    errors.append(f"{' '.join(flags)}: {e}")
                    continue
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
            lib = self._open(path)
            if lib is not None:
                return lib, None
            errors.append(f"{path}: not loadable or ABI version is not {self.abi_version}")
        return None, "compilation failed: " + " | ".join(errors)


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
    """An SDK target's compiled time loop: its :class:`KernelLibrary` and the process-wide choice of what
    ``engine="auto"`` means (:class:`EngineChoice`). ``name`` (e.g. "MLI") appears in error messages; the other
    arguments are :class:`KernelLibrary`'s."""

    def __init__(self, name: str, source: Path, stem: str, abi_symbol: str, abi_version: int,
                 bind: Callable[[ctypes.CDLL], None], extra_flags: tuple[str, ...] = ()):
        self.name = name
        self.kernel = KernelLibrary(source, stem, abi_symbol, abi_version, bind, extra_flags)
        self.engines = EngineChoice(name)

    def load(self) -> ctypes.CDLL | None:
        """The kernel library (compiled or loaded from the cache on the first call), or None."""
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
