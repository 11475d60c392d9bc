"""fusedrnn's C kernels as data, and the one way they are compiled.

Each library (:data:`LIBRARIES`) is one C file (plus the headers it includes) built as a plain shared library used
through ctypes: no Python module, so one build serves every Python version. Each is built once per instruction-set
level of :data:`X86_64_LEVELS` (AVX-512 VNNI, AVX-512, AVX2, portable; other architectures: portable only), and
the loader (:mod:`fusedrnn._native`) picks the best level this CPU runs. Two callers compile:

* ``setup.py``'s ``build_ext`` (``pip install .``, ``pip install -e .``): every level, into the package folder
  ``fusedrnn/_native/`` as ``<library>.<level>.so``, with a manifest (:data:`MANIFEST`) recording each file's
  size and SHA-256 (checked before a library is loaded) and the digest of its sources;
* the developer option ``FUSEDRNN_BUILD=runtime``: the current sources, one level, into a private cache folder.

Only the standard library is imported here: ``setup.py`` loads this file by its path, before the package's
dependencies are installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
SUFFIX = ".so"
OPTIMIZATION = ("-O3",)
COMMON_FLAGS = ("-std=gnu11", "-shared", "-fPIC", "-fno-math-errno", "-pthread")
LINK_LIBRARIES = ("-lm",)
COMPILE_TIMEOUT_S = 300.0
"""Longest a compile may take before it is killed (the MLI kernel takes ~11 s at -O3 on one core)."""


@dataclass(frozen=True)
class NativeLibrary:
    """One C kernel: ``source`` and ``headers`` relative to the ``fusedrnn`` package folder; ``abi_symbol`` names a
    C function returning the source's ABI version (the loader compares it with its Python side's);
    ``extra_flags`` are appended to every compile of it."""

    name: str
    source: str
    headers: tuple[str, ...]
    abi_symbol: str
    extra_flags: tuple[str, ...] = ()

    def files(self) -> tuple[str, ...]:
        return (self.source, *self.headers)


LIBRARIES: dict[str, NativeLibrary] = {lib.name: lib for lib in (
    NativeLibrary("kernel", "cells/compiled/_kernel.c",
                  tuple(f"cells/compiled/{h}" for h in ("_kernel_body.h", "_batched.h", "_rows.h", "_pool.h",
                                                        "_ort_api.h", "_ort_bridge.h")),
                  "fusedrnn_abi_version"),
    # every float32 product and sum rounded on its own, as the NumPy engines do
    NativeLibrary("rounded", "cells/rounded/_rounded.c", (), "fusedrnn_rounded_abi", ("-ffp-contract=off",)),
    NativeLibrary("mli", "targets/mli/_kernel.c", ("targets/_int8_dot.h",), "mli_abi_version"),
    NativeLibrary("litert", "targets/litert/_kernel.c", ("targets/_int8_dot.h", "targets/_tflite_requant.h"),
                  "litert_abi_version"),
    NativeLibrary("micro", "targets/_micro_lstm.c", ("targets/_int8_dot.h", "targets/_tflite_requant.h"),
                  "micro_abi_version"),
    # float32 tanhf must not be fused into FMAs; int64 wraps around as in NumPy
    NativeLibrary("quark", "targets/quark/_kernel.c", (), "quark_abi_version",
                  ("-ffp-contract=off", "-fwrapv", "-fno-fast-math", "-fno-trapping-math")),
    # onnxruntime's DynamicQuantizeLSTM: float32 operations rounded one by one, FMAs only where MLAS has them
    NativeLibrary("ortq", "cells/compiled/_ortq.c", ("cells/compiled/_pool.h", "cells/compiled/_ort_api.h"),
                  "ortq_abi_version", ("-ffp-contract=off",)),
    # the C library's expf over arrays, call for call (numerics/eigen.py)
    NativeLibrary("libm", "numerics/_libm.c", (), "fusedrnn_libm_abi",
                  ("-ffp-contract=off", "-fno-fast-math", "-fno-tree-vectorize")),
)}
"""The eight C libraries, by the name the loader and the manifest use."""


@dataclass(frozen=True)
class IsaLevel:
    """An instruction-set level: the compiler flags of its build and the ``/proc/cpuinfo`` flags a CPU needs to run
    it (the x86-64 micro-architecture levels of the psABI, plus VNNI)."""

    name: str
    cflags: tuple[str, ...]
    cpu_flags: frozenset[str]


_V2 = frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})
_V3 = _V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
PORTABLE = IsaLevel("portable", (), frozenset())

X86_64_LEVELS: tuple[IsaLevel, ...] = (
    IsaLevel("avx512vnni", ("-march=x86-64-v4", "-mavx512vnni"), _V4 | {"avx512_vnni"}),
    IsaLevel("avx512", ("-march=x86-64-v4",), _V4),
    IsaLevel("avx2", ("-march=x86-64-v3",), _V3),
    PORTABLE,  # the compiler's default target: baseline x86-64 (SSE2)
)
"""The levels built on x86-64, best first. At baseline x86-64 the vector code of the kernels measured 8-40x slower
than with AVX2, hence a build per level rather than one portable library."""


def is_x86_64(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def levels(machine: str | None = None) -> tuple[IsaLevel, ...]:
    """The levels built for ``machine`` (default: this one), best first."""
    return X86_64_LEVELS if is_x86_64(machine) else (PORTABLE,)


def file_name(library: str, level: str) -> str:
    """``<library>.<level>.so``: not an importable module name, so Python's import system never opens it."""
    return f"{library}.{level}{SUFFIX}"


# ---- compiler and digests ---------------------------------------------------------------------------------------
def find_compiler() -> str | None:
    """The C compiler: ``$CC``, else ``cc``, ``gcc``, ``clang`` on PATH (None when there is none)."""
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def compiler_version(cc: str) -> str:
    """The first line of ``cc --version`` (``cc`` itself when it does not answer within 30 s)."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return cc
    return (out.strip().splitlines() or [cc])[0]


def source_digest(lib: NativeLibrary, package_root: Path) -> str:
    """SHA-256 over the library's source and headers (names and contents)."""
    h = hashlib.sha256()
    for rel in lib.files():
        h.update(rel.encode() + b"\0" + (package_root / rel).read_bytes() + b"\0")
    return h.hexdigest()


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex) of a file."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def command(cc: str, lib: NativeLibrary, level: IsaLevel, package_root: Path, out: Path,
            extra_flags: tuple[str, ...] = ()) -> list[str]:
    """The compile command of one library at one level."""
    return [cc, *OPTIMIZATION, *level.cflags, *COMMON_FLAGS, *lib.extra_flags, *extra_flags, "-o", str(out),
            str(package_root / lib.source), *LINK_LIBRARIES]


# ---- compiling, atomically, with a time limit ----------------------------------------------------------------------
class BuildError(Exception):
    """A compile that failed, timed out or could not start; the message says which and why."""


_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")
STALE_TEMPORARY_S = 3600.0
"""Age after which a build's temporary file is removed even when its process id is alive (a reused id)."""


def temporary_path(out: Path) -> Path:
    """A temporary file beside ``out`` named after this process (see :func:`remove_stale_temporaries`)."""
    return out.with_name(f".{out.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary files of builds that were killed (their process is gone, or the file is older than
    :data:`STALE_TEMPORARY_S`); returns what was removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = _TEMPORARY.match(entry.name)
        if m is None:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMPORARY_S
            if old or not _process_alive(int(m["pid"])):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


STALE_BUILD_S = 7 * 86400.0
"""Age (since last loaded) after which the run-time build removes a cached library of other sources or flags."""


def remove_old_builds(folder: Path, library: str, keep: Path) -> None:
    """Delete ``library``'s cached builds (and their records) other than ``keep`` not used for
    :data:`STALE_BUILD_S`; errors are ignored."""
    now = time.time()
    for path in folder.glob(f"{library}.*{SUFFIX}"):
        try:
            st = path.stat()
            if path != keep and now - max(st.st_atime, st.st_mtime) > STALE_BUILD_S:
                path.unlink()
                path.with_name(path.name + ".json").unlink(missing_ok=True)
        except OSError:
            pass


def compile_library(cc: str, lib: NativeLibrary, level: IsaLevel, package_root: Path, out: Path, *,
                    extra_flags: tuple[str, ...] = (), timeout: float = COMPILE_TIMEOUT_S) -> None:
    """Compile ``lib`` at ``level`` into ``out``: into a temporary file beside it, renamed over ``out`` once
    complete (a reader never sees a partial library; concurrent builders each write their own). A compile running
    longer than ``timeout`` seconds is killed with its whole process group. Raises :class:`BuildError`."""
    tmp = temporary_path(out)
    cmd = command(cc, lib, level, package_root, tmp, extra_flags)
    try:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        except OSError as e:
            raise BuildError(f"cannot run {cc}: {e}") from None
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise BuildError(f"{' '.join(level.cflags) or 'portable'}: the compiler did not finish within "
                             f"{timeout:g} s and was stopped") from None
        if proc.returncode != 0:
            raise BuildError(f"{' '.join(level.cflags) or 'portable'}: {err.strip()[-600:]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop the compiler and what it started (cc1, as): its process group, where the platform has them."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (AttributeError, OSError):
        proc.kill()
    proc.communicate()


# ---- the manifest of an install-time build -------------------------------------------------------------------------
def manifest_entry(folder: Path, library: str, level: str) -> dict:
    """What the manifest records of a built file: its name, size and SHA-256."""
    name = file_name(library, level)
    size, sha = file_digest(folder / name)
    return {"file": name, "size": size, "sha256": sha}


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` as JSON atomically (a temporary file renamed over ``path``)."""
    tmp = temporary_path(path)
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def make_manifest(folder: Path, package_root: Path, built: dict[str, dict[str, str | None]], compiler: str | None,
                  error: str | None = None) -> dict:
    """The manifest of an install-time build into ``folder``: ``built[library][level]`` is None for a level that
    built (its file is in ``folder``) or the compiler's error; ``error`` says why nothing was built."""
    libraries = {}
    for name, results in built.items():
        lib = LIBRARIES[name]
        libraries[name] = {
            "sources": source_digest(lib, package_root),
            "files": {lv: manifest_entry(folder, name, lv) for lv, err in results.items() if err is None},
            "errors": {lv: err for lv, err in results.items() if err is not None},
        }
    return {"format": MANIFEST_FORMAT, "machine": platform.machine(), "compiler": compiler, "error": error,
            "levels": [lv.name for lv in levels()], "libraries": libraries}
