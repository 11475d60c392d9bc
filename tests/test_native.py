"""fusedrnn._native: the C kernels built when the package is installed, one library per instruction-set level, the
level chosen by the CPU's features (every level runs the compiled-kernel tests here, forced by $FUSEDRNN_ISA);
a damaged library is refused before it is loaded; the developer's run-time build refuses a cache folder others
control, rebuilds a damaged library, stops a hung compiler and leaves no temporary files behind a killed build;
an unavailable kernel is reported once, never silently."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import fusedrnn
from fusedrnn import _native
from fusedrnn._native import build
from fusedrnn.cells.compiled import _build
from fusedrnn.cells.rounded import driver as rounded_driver
from fusedrnn.targets import micro_lstm
from fusedrnn.targets.litert import _compiled as litert_compiled
from fusedrnn.targets.mli import _compiled as mli_compiled
from fusedrnn.targets.quark import _compiled as quark_compiled

TESTS = Path(__file__).resolve().parent
LIBRARIES = {"kernel": _build.KERNEL, "rounded": rounded_driver.LIBRARY, "mli": mli_compiled._LOOP.kernel,
             "litert": litert_compiled._LOOP.kernel, "quark": quark_compiled._LOOP.kernel,
             "micro": micro_lstm._LOOP.kernel}
COMPILER = build.find_compiler()
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C compiler")


def _env(**extra: str) -> dict:
    """The environment of a child Python that imports this fusedrnn (installed or from the source tree)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEDRNN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(fusedrnn.__file__).resolve().parents[1]),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def _python(code: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=_env(**env))


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget the warnings given so far (each is given once per process)."""
    monkeypatch.setattr(_native, "_warned", set())


def _rounded(folder: Path = _native.HERE) -> _native.Library:
    """A new (not yet loaded) handle on the smallest library."""
    return _native.Library("rounded", rounded_driver.ABI_VERSION, rounded_driver._bind, folder=folder)


# ---- the install-time build ----------------------------------------------------------------------------------------
@needs_compiler
def test_the_installed_build_has_every_level_and_loads_the_best():
    """Where a C compiler exists the package was built with its kernels: every library at every level of this
    architecture, and the best level this CPU runs (or $FUSEDRNN_ISA's) is what loads."""
    data, problem = _native.manifest()
    assert data is not None, problem
    assert data["levels"] == [lv.name for lv in build.levels()]
    for name in build.LIBRARIES:
        entry = data["libraries"][name]
        assert entry["errors"] == {} and sorted(entry["files"]) == sorted(data["levels"]), (name, entry["errors"])
    want = _native.selected_levels()[0].name
    for name, lib in LIBRARIES.items():
        assert lib.load() is not None, (name, lib.reason)
        assert lib.isa == want and lib.path.name == build.file_name(name, want), (name, lib.path)


def test_forced_isa_is_what_loads():
    """Run by the per-level test below: with $FUSEDRNN_ISA set, every library loads that level."""
    forced = os.environ.get(_native.ISA_ENV)
    if not forced:
        pytest.skip("$FUSEDRNN_ISA is not set (the per-level runs set it)")
    for name, lib in LIBRARIES.items():
        assert lib.load() is not None, (name, lib.reason)
        assert lib.isa == forced, (name, lib.isa, forced)


ISA_SUBSET = [str(TESTS / f) for f in ("test_compiled_recurrence.py", "test_rounded_recurrence.py",
                                       "test_mli_compiled.py", "test_litert_compiled.py", "test_quark_compiled.py")]
ISA_DESELECT = "not seeded_configurations and not naive_float64_reference"  # more seeds of the random tests


@needs_compiler
@pytest.mark.parametrize("level", [lv.name for lv in build.levels()])
def test_every_level_runs_the_compiled_kernel_tests(level):
    """The compiled-kernel tests (less their extra seeds) in a child process with $FUSEDRNN_ISA=level: each
    level's libraries load and agree with the NumPy loops."""
    if level not in [lv.name for lv in _native.supported_levels()]:
        pytest.skip(f"this CPU does not run {level}")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-rs", "-p", "no:cacheprovider",
                           "-k", ISA_DESELECT, f"{TESTS / 'test_native.py'}::test_forced_isa_is_what_loads",
                           *ISA_SUBSET],
                          capture_output=True, text=True, timeout=600, cwd=TESTS.parent,
                          env=_env(**{_native.ISA_ENV: level}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "FUSEDRNN_ISA is not set" not in proc.stdout, proc.stdout[-3000:]  # the check above ran


def test_unknown_or_unsupported_isa_warns_and_chooses_automatically(monkeypatch, fresh_warnings):
    monkeypatch.setenv(_native.ISA_ENV, "sse9")
    with pytest.warns(_native.NativeKernelWarning, match="expected auto or one of"):
        assert _native.selected_levels() == _native.supported_levels()
    monkeypatch.setenv(_native.ISA_ENV, "avx512")
    monkeypatch.setattr(_native, "_cpu", {"flags": frozenset({"sse2"})})
    if build.is_x86_64():
        with pytest.warns(_native.NativeKernelWarning, match="this CPU does not run it"):
            assert [lv.name for lv in _native.selected_levels()] == ["portable"]
    monkeypatch.setenv(_native.ISA_ENV, "auto")
    assert [lv.name for lv in _native.selected_levels()] == ["portable"]


def _copy_build(dst: Path, name: str) -> dict:
    """The installed manifest and the files of one library, copied to ``dst``; returns the manifest."""
    data, problem = _native.manifest()
    if data is None:
        pytest.skip(problem)
    data = json.loads(json.dumps(data))  # a copy: the loader keeps the installed one
    for record in data["libraries"][name]["files"].values():
        shutil.copy2(_native.HERE / record["file"], dst / record["file"])
    (dst / build.MANIFEST).write_text(json.dumps(data))
    return data


@needs_compiler
def test_a_truncated_installed_library_is_refused_before_it_is_loaded(tmp_path):
    """Truncated (as by a full disk) or replaced files are detected by their size and SHA-256 before dlopen (which
    would die of SIGBUS on a truncated one): the next level loads, with a warning; with every level damaged,
    nothing loads and the NumPy loop runs, with a warning."""
    data = _copy_build(tmp_path, "rounded")
    levels = [lv.name for lv in _native.supported_levels()]
    if len(levels) < 2:
        pytest.skip("one level only")
    code = f"""
        import warnings
        from pathlib import Path
        from fusedrnn import _native
        from fusedrnn.cells.rounded import driver
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as w:
            lib = _native.Library("rounded", driver.ABI_VERSION, driver._bind, folder=Path({str(tmp_path)!r}))
            print("LOADED", lib.load() is not None, lib.isa)
        print("\\n".join(str(x.message) for x in w))
        """
    best = tmp_path / build.file_name("rounded", levels[0])
    best.write_bytes(best.read_bytes()[:4096])
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr  # not killed by SIGBUS
    assert f"LOADED True {levels[1]}" in proc.stdout and "truncated or replaced" in proc.stdout, proc.stdout

    for level in levels[1:]:  # the same size, another content
        path = tmp_path / data["libraries"]["rounded"]["files"][level]["file"]
        path.write_bytes(path.read_bytes()[:-1] + bytes([path.read_bytes()[-1] ^ 1]))
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED False None" in proc.stdout and "no compiled rounded kernel for this CPU loads" in proc.stdout
    assert "differs from what was built (SHA-256)" in proc.stdout, proc.stdout


def test_a_library_built_from_other_sources_loads_with_a_warning(tmp_path, fresh_warnings):
    """An editable install whose C sources were edited after `pip install -e .`: the library still loads (its ABI
    version matches), and a warning says to rebuild."""
    data = _copy_build(tmp_path, "rounded")
    data["libraries"]["rounded"]["sources"] = "0" * 64
    (tmp_path / build.MANIFEST).write_text(json.dumps(data))
    with pytest.warns(_native.NativeKernelWarning, match="built from other sources"):
        assert _rounded(tmp_path).load() is not None


def test_an_abi_mismatch_is_refused():
    """A library whose ABI version is not the one its Python side was written for is not used."""
    lib = _native.Library("rounded", rounded_driver.ABI_VERSION + 100, rounded_driver._bind)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert lib.load() is None
    if _native.manifest()[0] is not None:
        assert f"its Python side expects {rounded_driver.ABI_VERSION + 100}" in lib.reason, lib.reason


def test_an_installation_without_kernels_says_so_once(tmp_path, fresh_warnings):
    """Installed without a C compiler (no manifest, or one recording the failure): every library is unavailable,
    reported by one warning naming the cause and the remedy, and by unavailable_reason."""
    libs = [_rounded(tmp_path), _native.Library("mli", mli_compiled.ABI, mli_compiled._bind, folder=tmp_path)]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert [lib.load() for lib in libs] == [None, None]
    assert len(w) == 1 and issubclass(w[0].category, _native.NativeKernelWarning), [str(x.message) for x in w]
    assert "not built in this installation" in str(w[0].message) and "pip install" in str(w[0].message)
    assert "NumPy loops run instead" in str(w[0].message) and libs[1].reason.startswith("fusedrnn's compiled")

    other = tmp_path / "failed"
    other.mkdir()
    build.write_json(other / build.MANIFEST, build.make_manifest(other, _native.PACKAGE_ROOT, {}, None,
                                                                  "no C compiler found ($CC, cc, gcc, clang)"))
    with pytest.warns(_native.NativeKernelWarning, match="not built when it was installed: no C compiler found"):
        assert _rounded(other).load() is None


def test_switched_off_loads_nothing_and_says_nothing(monkeypatch, fresh_warnings):
    monkeypatch.setenv("FUSEDRNN_COMPILED", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = _rounded()
        assert lib.load() is None and lib.reason == "disabled by FUSEDRNN_COMPILED=0"


# ---- the developer's run-time build -------------------------------------------------------------------------------
@pytest.fixture
def runtime(monkeypatch, tmp_path, fresh_warnings):
    """FUSEDRNN_BUILD=runtime into tmp_path/cache."""
    monkeypatch.setenv(_native.BUILD_ENV, "runtime")
    monkeypatch.setenv(_native.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_runtime_cache_folder_writable_by_others_is_refused(runtime):
    runtime.mkdir(mode=0o700)
    os.chmod(runtime, 0o777)
    with pytest.warns(_native.NativeKernelWarning, match="may be written by group or others"):
        lib = _rounded()
        assert lib.load() is None
    assert "refused" in lib.reason and list(runtime.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another uid needs root")
def test_runtime_cache_folder_of_another_user_is_refused(runtime):
    """A folder another local user created first (e.g. $TMPDIR/fusedrnn-$UID): never used, so nothing they put
    there is loaded."""
    runtime.mkdir(mode=0o700)
    (runtime / "planted.so").write_bytes(b"\x7fELF")
    os.chown(runtime, 12345, 12345)
    with pytest.warns(_native.NativeKernelWarning, match="owned by uid 12345"):
        lib = _rounded()
        assert lib.load() is None
    assert "refused" in lib.reason and sorted(p.name for p in runtime.iterdir()) == ["planted.so"]


def test_runtime_cache_folder_without_a_home_is_private(monkeypatch, tmp_path):
    """With HOME=/ (or empty) and no XDG_CACHE_HOME: $TMPDIR/fusedrnn-$UID, created with mode 0700."""
    for home in ("/", ""):
        monkeypatch.delenv(_native.CACHE_ENV, raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setenv("HOME", home)
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
        folder = _native.cache_dir()
        assert folder == tmp_path / f"fusedrnn-{os.getuid()}"
    assert _native.private_folder(folder) is None
    assert (folder.stat().st_mode & 0o777) == 0o700


@needs_compiler
def test_runtime_build_rebuilds_a_truncated_library(runtime):
    """A cached library cut short is detected by its build record (size, SHA-256) before it is loaded, and
    rebuilt; the process does not die of SIGBUS."""
    code = """
        from fusedrnn.cells.rounded import driver
        lib = driver.LIBRARY
        print("LOADED", lib.load() is not None, lib.path, lib.notes)
        """
    env = {_native.BUILD_ENV: "runtime", _native.CACHE_ENV: str(runtime)}
    proc = _python(code, **env)
    assert proc.returncode == 0 and "LOADED True" in proc.stdout, proc.stdout + proc.stderr
    built = [p for p in runtime.iterdir() if p.suffix == ".so"]
    assert len(built) == 1 and (runtime.stat().st_mode & 0o777) == 0o700
    built[0].write_bytes(built[0].read_bytes()[:4096])
    proc = _python(code, **env)
    assert proc.returncode == 0 and "LOADED True" in proc.stdout, proc.stdout + proc.stderr
    assert "truncated or replaced" in proc.stdout and "rebuilt" in proc.stdout


def _fake_compiler(tmp_path: Path, seconds: int) -> Path:
    """A "compiler" that writes its output file, records its process id, then hangs for ``seconds``."""
    cc = tmp_path / "hung-cc"
    cc.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--version" ]; then echo "hung-cc 1.0"; exit 0; fi
        echo $$ > {tmp_path / 'cc.pid'}
        while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then echo partial > "$2"; fi; shift; done
        exec sleep {seconds}
        """))
    cc.chmod(0o755)
    return cc


def _stop(pid_file: Path) -> None:
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_runtime_build_stops_a_hung_compiler(runtime, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(_fake_compiler(tmp_path, 60)))
    monkeypatch.setenv(_native.TIMEOUT_ENV, "1")
    t0 = time.monotonic()
    try:
        with pytest.warns(_native.NativeKernelWarning, match="did not finish within 1 s"):
            assert _rounded().load() is None
        assert time.monotonic() - t0 < 30
        time.sleep(0.2)
        with pytest.raises(ProcessLookupError):  # the compiler was stopped
            os.kill(int((tmp_path / "cc.pid").read_text()), 0)
    finally:
        _stop(tmp_path / "cc.pid")
    assert [p.name for p in runtime.iterdir() if not p.name.endswith(".lock")] == []  # no temporary file left


@needs_compiler
def test_runtime_build_leaves_no_temporary_files_behind_a_killed_build(runtime, tmp_path):
    """A process killed while its compiler runs leaves a temporary file; the next build removes it (its process is
    gone)."""
    code = "from fusedrnn.cells.rounded import driver; driver.LIBRARY.load()"
    child = subprocess.Popen([sys.executable, "-c", code], env=_env(**{
        _native.BUILD_ENV: "runtime", _native.CACHE_ENV: str(runtime), "CC": str(_fake_compiler(tmp_path, 60))}))
    try:
        deadline = time.monotonic() + 60
        while not [p for p in (runtime.iterdir() if runtime.exists() else ()) if p.name.endswith(".tmp")]:
            assert time.monotonic() < deadline and child.poll() is None, "the build did not start"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        child.kill()
        _stop(tmp_path / "cc.pid")
    assert [p for p in runtime.iterdir() if p.name.endswith(".tmp")], "test is void: no temporary file"
    proc = _python("from fusedrnn.cells.rounded import driver; print('LOADED', driver.LIBRARY.load() is not None)",
                   **{_native.BUILD_ENV: "runtime", _native.CACHE_ENV: str(runtime)})
    assert "LOADED True" in proc.stdout, proc.stdout + proc.stderr
    assert [p.name for p in runtime.iterdir() if p.name.endswith(".tmp")] == []


def test_runtime_build_without_a_compiler_says_so_once(runtime, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _rounded().load() is None and _rounded().load() is None
    assert [str(x.message) for x in w] == [f"FUSEDRNN_BUILD=runtime: the rounded kernel was not built: no C compiler "
                                           f"found ($CC, cc, gcc, clang); {_native.SLOWER}"]


def test_runtime_build_forgets_builds_unused_for_a_week(tmp_path):
    """Cached libraries of older sources or flags go once unused for STALE_BUILD_S; the current one stays."""
    old, recent, keep = (tmp_path / f"rounded.avx2.{k}.so" for k in ("old", "recent", "keep"))
    for p in (old, recent, keep):
        p.write_bytes(b"x")
        p.with_name(p.name + ".json").write_text("{}")
    week_ago = time.time() - build.STALE_BUILD_S - 60
    for p in (old, keep):
        os.utime(p, (week_ago, week_ago))
    build.remove_old_builds(tmp_path, "rounded", keep=keep)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for p in (recent, keep) for n in (p.name, p.name + ".json"))


@pytest.mark.skipif(not build.is_x86_64(), reason="x86-64 levels")
def test_an_x86_cpu_without_avx2_runs_the_portable_build_and_says_so(monkeypatch, fresh_warnings):
    if _native.manifest()[0] is None:
        pytest.skip("no install-time build")
    monkeypatch.delenv(_native.ISA_ENV, raising=False)
    monkeypatch.setattr(_native, "_cpu", {"flags": frozenset({"sse2", "avx"})})
    with pytest.warns(_native.NativeKernelWarning, match=r"lacks the features of the AVX2 level \(abm, avx2"):
        lib = _rounded()
        assert lib.load() is not None
    assert lib.isa == "portable"
