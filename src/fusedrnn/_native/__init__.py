"""The one load path of fusedrnn's C kernels: the libraries built when the package was installed, the variant for
this CPU's instruction-set level, checked before it is loaded.

``pip install .`` (and ``pip install -e .``) compiles each library of :data:`.build.LIBRARIES` once per level of
:func:`.build.levels` (AVX-512 VNNI, AVX-512, AVX2, portable) into this folder, with a manifest of every file's
size and SHA-256. :class:`Library` loads, on its first use, the best level this CPU runs (``/proc/cpuinfo`` flags;
``$FUSEDRNN_ISA`` forces one), after checking the file against the manifest (a truncated or replaced library is
refused before ``dlopen`` runs anything in it, and the next level is tried), then compares the library's ABI
version with the one its Python side expects. Nothing is compiled at run time unless a developer asks for it:

``FUSEDRNN_BUILD=runtime``  compile the current C sources for this CPU's level at first use into a private cache
                            folder (``$FUSEDRNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/fusedrnn``, else
                            ``~/.cache/fusedrnn``, else ``$TMPDIR/fusedrnn-$UID``), created with mode 0700 and
                            refused when another user owns it or others may write to it; each library's size and
                            SHA-256 are recorded when it is built and checked before it is loaded (a damaged one
                            is rebuilt); builds time out (``$FUSEDRNN_BUILD_TIMEOUT`` seconds, default 120) and
                            temporary files of killed builds are removed. ``$FUSEDRNN_CFLAGS`` adds compiler flags
                            (e.g. sanitizers).

When a library cannot be loaded the callers run their NumPy loops, and a :class:`NativeKernelWarning` says so once
per reason: no kernels built (no C compiler at install time), a damaged file, an ABI mismatch. The deprecated
``FUSEDRNN_COMPILED=0`` keeps every library unloaded, without a warning.

This module imports nothing of fusedrnn: it is the bottom layer that cells and targets load their kernels through.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shlex
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import build
from .build import LIBRARIES, BuildError, IsaLevel

try:
    import fcntl
except ImportError:  # not on Windows: runtime builds there are not serialised between processes
    fcntl = None

HERE = Path(__file__).resolve().parent
"""Where the install-time build puts the libraries and the manifest."""
PACKAGE_ROOT = HERE.parent
"""The ``fusedrnn`` package folder, which the C sources' paths are relative to."""

ISA_ENV = "FUSEDRNN_ISA"
BUILD_ENV = "FUSEDRNN_BUILD"
CACHE_ENV = "FUSEDRNN_CACHE_DIR"
CFLAGS_ENV = "FUSEDRNN_CFLAGS"
TIMEOUT_ENV = "FUSEDRNN_BUILD_TIMEOUT"
SWITCH_ENV = "FUSEDRNN_COMPILED"
RUNTIME_TIMEOUT_S = 120.0
SLOWER = "the NumPy loops run instead (10-100x slower)"


class NativeKernelWarning(RuntimeWarning):
    """A compiled kernel could not be loaded (the NumPy loop runs instead), or the installed one is damaged or
    stale."""


_warned: set[str] = set()
_warn_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, NativeKernelWarning, stacklevel=4)


# ---- the CPU and the instruction-set level ----------------------------------------------------------------------
_cpu: dict = {}


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where there is none: only the portable level runs)."""
    if "flags" not in _cpu:
        flags: frozenset[str] = frozenset()
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = frozenset(line.partition(":")[2].split())
                        break
        except OSError:
            pass
        _cpu["flags"] = flags
    return _cpu["flags"]


def supported_levels() -> tuple[IsaLevel, ...]:
    """The levels built for this architecture that this CPU runs, best first (always ending with portable)."""
    flags = cpu_flags()
    return tuple(lv for lv in build.levels() if lv.cpu_flags <= flags)


def selected_levels() -> tuple[IsaLevel, ...]:
    """The levels to try, in order: ``$FUSEDRNN_ISA`` alone when it names a level this CPU runs (a warning and the
    automatic choice otherwise), else :func:`supported_levels`."""
    forced = os.environ.get(ISA_ENV, "").strip().lower()
    supported = supported_levels()
    if forced in ("", "auto"):
        return supported
    match = [lv for lv in supported if lv.name == forced]
    if match:
        return tuple(match)
    names = [lv.name for lv in build.levels()]
    problem = "this CPU does not run it" if forced in names else f"expected auto or one of {', '.join(names)}"
    _warn_once(f"isa:{forced}", f"${ISA_ENV}={forced!r}: {problem}; using {supported[0].name}")
    return supported


def isa() -> str:
    """The level the libraries are loaded for (the first of :func:`selected_levels`)."""
    return selected_levels()[0].name


def runtime_build() -> bool:
    """True when ``$FUSEDRNN_BUILD`` asks for the developer's run-time build (``runtime``)."""
    return os.environ.get(BUILD_ENV, "").strip().lower() == "runtime"


def switched_off() -> bool:
    """True when the deprecated ``FUSEDRNN_COMPILED`` says 0 / false / no / off."""
    return os.environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "false", "no", "off")


# ---- files: the manifest, integrity and ownership -----------------------------------------------------------------
_manifest_state: dict = {}
_manifest_lock = threading.Lock()


def manifest(folder: Path = HERE) -> tuple[dict | None, str | None]:
    """The install-time build's manifest of ``folder`` (read once per process), or None and why."""
    with _manifest_lock:
        if folder not in _manifest_state:
            _manifest_state[folder] = _read_manifest(folder)
        return _manifest_state[folder]


def _read_manifest(folder: Path) -> tuple[dict | None, str | None]:
    path = folder / build.MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, (f"fusedrnn's compiled kernels are not built in this installation ({folder} has no "
                      f"{build.MANIFEST}): `pip install .`, or `pip install -e .` in a checkout, compiles them "
                      f"(a C compiler is needed then, not later); {BUILD_ENV}=runtime compiles them at first use")
    except (OSError, ValueError) as e:
        return None, f"the manifest of fusedrnn's compiled kernels ({path}) is unreadable: {e}; reinstall fusedrnn"
    if not isinstance(data, dict) or data.get("format") != build.MANIFEST_FORMAT:
        return None, f"the manifest {path} has an unknown format; reinstall fusedrnn"
    if data.get("error"):
        return None, (f"fusedrnn's compiled kernels were not built when it was installed: {data['error']}; "
                      f"reinstall it where a C compiler (gcc or clang) is on PATH")
    return data, None


def check_file(path: Path, size: int, sha256: str, *, private: bool) -> str | None:
    """None when ``path`` is a regular file of ``size`` bytes with this SHA-256, else what is wrong. ``private``
    also asks that this user own it and that neither group nor others may write it (installed files: that others
    may not write it)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if private and hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (0o022 if private else 0o002):
        return f"may be written by {'group or others' if private else 'others'} (mode {stat.filemode(st.st_mode)})"
    if st.st_size != size:
        return f"has {st.st_size} bytes, {size} when it was built (truncated or replaced)"
    try:
        actual = build.file_digest(path)[1]
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if actual != sha256:
        return "differs from what was built (SHA-256)"
    return None


# ---- the developer's run-time build ------------------------------------------------------------------------------
def cache_dir() -> Path:
    """The runtime build's folder: ``$FUSEDRNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/fusedrnn``, else
    ``~/.cache/fusedrnn``, else ``$TMPDIR/fusedrnn-$UID`` (no usable home)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "fusedrnn"
    home = os.path.expanduser("~")
    if os.path.isabs(home) and home != "/":
        return Path(home) / ".cache" / "fusedrnn"
    return Path(tempfile.gettempdir()) / f"fusedrnn-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def private_folder(folder: Path) -> str | None:
    """Create ``folder`` (mode 0700) when missing; None when it is a folder of this user's that neither group nor
    others may write (nor, unless sticky, its parent), else what is wrong."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        link, st = os.lstat(folder), os.stat(folder)
        parent = os.stat(os.path.dirname(os.path.realpath(folder)))
    except OSError as e:
        return f"cannot be created or read ({e})"
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    for what, s in (("it", link), ("the folder it names", st)):
        if s.st_uid != uid:
            return f"{what} is owned by uid {s.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        return f"may be written by group or others (mode {stat.filemode(st.st_mode)})"
    if parent.st_mode & 0o002 and not parent.st_mode & stat.S_ISVTX:
        return "sits in a folder that others may write (and that is not sticky)"
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created 0600) between processes, where the platform has one."""
    if fcntl is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _timeout() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, RUNTIME_TIMEOUT_S)))
    except ValueError:
        return RUNTIME_TIMEOUT_S


_versions: dict[str, str] = {}


# ---- a library -----------------------------------------------------------------------------------------------------
class Library:
    """One of :data:`.build.LIBRARIES`, loaded on the first :meth:`load` and kept for the process.

    ``abi_version`` is the version the Python side (its ctypes structures) was written for; ``bind(lib)`` sets the
    ctypes signatures once loaded; ``folder`` holds the install-time build (tests). After :meth:`load`:
    :attr:`reason` says why it returned None (None when loaded), :attr:`path` and :attr:`isa` say what was loaded,
    :attr:`notes` what was passed over on the way."""

    def __init__(self, name: str, abi_version: int, bind: Callable[[ctypes.CDLL], None], folder: Path = HERE):
        self.spec = LIBRARIES[name]
        self.name, self.abi_version, self.bind, self.folder = name, abi_version, bind, Path(folder)
        self._lock = threading.Lock()
        self._tried = False
        self._lib: ctypes.CDLL | None = None
        self.reason: str | None = None
        self.path: Path | None = None
        self.isa: str | None = None
        self.notes: list[str] = []

    def load(self) -> ctypes.CDLL | None:
        """The library, or None (see :attr:`reason`; a :class:`NativeKernelWarning` said so once)."""
        if self._tried:
            return self._lib
        with self._lock:
            if not self._tried:
                self.notes = []
                if switched_off():
                    lib, reason = None, f"disabled by {SWITCH_ENV}=0"
                else:
                    lib, reason = self._runtime() if runtime_build() else self._installed()
                    if lib is None:
                        _warn_once(reason, f"{reason}; {SLOWER}")
                    else:
                        self.bind(lib)
                self._lib, self.reason, self._tried = lib, (None if lib is not None else reason), True
        return self._lib

    def _open(self, path: Path) -> tuple[ctypes.CDLL | None, str | None]:
        """The library at a checked ``path`` once its ABI version is the expected one."""
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            return None, f"cannot be loaded ({e})"
        fn = getattr(lib, self.spec.abi_symbol, None)
        if fn is None:
            return None, f"has no {self.spec.abi_symbol}()"
        fn.restype = ctypes.c_int
        version = fn()
        if version != self.abi_version:
            return None, (f"has ABI version {version}, its Python side expects {self.abi_version} (built from other "
                          f"sources: rebuild it)")
        return lib, None

    def _installed(self) -> tuple[ctypes.CDLL | None, str]:
        data, problem = manifest(self.folder)
        if data is None:
            return None, problem
        entry = data.get("libraries", {}).get(self.name)
        if not isinstance(entry, dict):
            return None, f"the compiled {self.name} kernel is not in this installation's build; reinstall fusedrnn"
        for level in selected_levels():
            record = entry.get("files", {}).get(level.name)
            if record is None:
                self.notes.append(f"{level.name}: {entry.get('errors', {}).get(level.name, 'not built')}")
                continue
            path = self.folder / record["file"]
            problem = check_file(path, record["size"], record["sha256"], private=False)
            if problem is None:
                lib, problem = self._open(path)
                if lib is not None:
                    self._loaded(path, level)
                    self._check_sources(entry)
                    return lib, ""
            self.notes.append(f"{path}: {problem}")
            _warn_once(f"damaged:{path}", f"the compiled {self.name} kernel {path} {problem}: not loaded; "
                                          f"reinstall fusedrnn")
        return None, (f"no compiled {self.name} kernel for this CPU loads ({'; '.join(self.notes)}); reinstall "
                      f"fusedrnn")

    def _loaded(self, path: Path, level: IsaLevel) -> None:
        """Record what was loaded; warn once when an x86-64 CPU runs the portable level without being asked to."""
        self.path, self.isa = path, level.name
        if level is build.PORTABLE and build.is_x86_64() and os.environ.get(ISA_ENV, "").strip().lower() != "portable":
            missing = sorted(build.X86_64_LEVELS[-2].cpu_flags - cpu_flags())
            _warn_once("portable", f"this CPU lacks the features of the AVX2 level ({', '.join(missing[:8])} are not "
                                   f"in /proc/cpuinfo): fusedrnn's compiled kernels run their portable build, several "
                                   f"times slower")

    def _check_sources(self, entry: dict) -> None:
        """Warn once when the C sources beside the package differ from those the library was built from."""
        try:
            current = build.source_digest(self.spec, PACKAGE_ROOT)
        except OSError:
            return  # an installation without the sources
        if current != entry.get("sources"):
            _warn_once(f"stale:{self.name}",
                       f"the compiled {self.name} kernel was built from other sources than those in {PACKAGE_ROOT} "
                       f"(edited since it was built?): rebuild with `pip install -e .` (or `python setup.py "
                       f"build_ext --inplace`), or set {BUILD_ENV}=runtime")

    def _runtime(self) -> tuple[ctypes.CDLL | None, str]:
        what = f"{BUILD_ENV}=runtime: the {self.name} kernel"
        folder = cache_dir()
        problem = private_folder(folder)
        if problem is not None:
            return None, (f"{what} was not built: the cache folder {folder} {problem}; refused (set {CACHE_ENV} "
                          f"to a folder of your own)")
        cc = build.find_compiler()
        if cc is None:
            return None, f"{what} was not built: no C compiler found ($CC, cc, gcc, clang)"
        level = selected_levels()[0]
        extra = tuple(shlex.split(os.environ.get(CFLAGS_ENV, "")))
        if cc not in _versions:
            _versions[cc] = build.compiler_version(cc)
        key = hashlib.sha256("\0".join((build.source_digest(self.spec, PACKAGE_ROOT), _versions[cc],
                                        *build.command("cc", self.spec, level, PACKAGE_ROOT, Path("o"), extra)))
                             .encode()).hexdigest()[:20]
        path = folder / f"{self.name}.{level.name}.{key}{build.SUFFIX}"
        record_path = path.with_name(path.name + ".json")
        with _locked(folder / f".{self.name}.lock"):
            build.remove_stale_temporaries(folder)
            if path.exists():
                problem = self._check_record(path, record_path)
                if problem is None:
                    lib, problem = self._open(path)
                    if lib is not None:
                        self._loaded(path, level)
                        return lib, ""
                self.notes.append(f"{path}: {problem}; rebuilt")
                for p in (path, record_path):
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
            try:
                build.compile_library(cc, self.spec, level, PACKAGE_ROOT, path, extra_flags=extra,
                                      timeout=_timeout())
                size, sha = build.file_digest(path)
                build.write_json(record_path, {"file": path.name, "size": size, "sha256": sha})
            except (BuildError, OSError) as e:
                return None, f"{what} was not built: {e}"
            build.remove_old_builds(folder, self.name, keep=path)
            problem = self._check_record(path, record_path)
            lib, problem = (None, problem) if problem else self._open(path)
            if lib is None:
                return None, f"{what} {path} {problem}"
            self._loaded(path, level)
            return lib, ""

    @staticmethod
    def _check_record(path: Path, record_path: Path) -> str | None:
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
            size, sha = int(record["size"]), str(record["sha256"])
        except (OSError, ValueError, KeyError, TypeError):
            return "has no readable build record"
        return check_file(path, size, sha, private=True)


def describe() -> dict:
    """What loads where: the mode, this CPU's levels and the install-time build's compiler (diagnostics)."""
    data, problem = manifest()
    return {"mode": "runtime" if runtime_build() else "installed", "isa": isa(),
            "supported": [lv.name for lv in supported_levels()],
            "compiler": None if data is None else data.get("compiler"), "problem": problem}


__all__ = ["HERE", "Library", "NativeKernelWarning", "build", "cache_dir", "check_file", "cpu_flags", "describe",
           "isa", "manifest", "private_folder", "runtime_build", "selected_levels", "supported_levels",
           "switched_off"]
