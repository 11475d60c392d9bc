"""Compile fusedrnn's C kernels when the package is built (``pip install .``, ``pip install -e .``, wheels).

The project's metadata is in pyproject.toml; this file adds the kernels. Each C library of
``src/fusedrnn/_native/build.py`` (``LIBRARIES``) is compiled once per instruction-set level (x86-64: AVX-512 VNNI,
AVX-512, AVX2, portable; elsewhere: portable) into ``fusedrnn/_native/<library>.<level>.so``, a plain shared
library used through ctypes (no Python module init, so one wheel serves every Python 3: it is tagged
``py3-none-<platform>``). ``fusedrnn._native`` loads the best level the CPU runs, so no compiler is needed after
installation. A ``manifest.json`` beside the libraries records each file's size and SHA-256 (checked before one is
loaded), the digest of its sources and the compiler's errors.

Why setuptools (and not scikit-build-core or meson-python): it already is the build backend, the kernels are single
C files with no dependencies, and a ``build_ext`` that runs the compiler with our flags is all they need; the same
compile function (``_native/build.py``) serves the developer's run-time build (``FUSEDRNN_BUILD=runtime``).

Without a C compiler the build still succeeds: the package installs without kernels, the manifest says why, and
fusedrnn warns once at run time and runs its NumPy loops.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "src" / "fusedrnn"


def _native_build():
    """``src/fusedrnn/_native/build.py``, loaded by its path (it imports the standard library only)."""
    spec = importlib.util.spec_from_file_location("_fusedrnn_native_build", PACKAGE / "_native" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


native = _native_build()


class NativeLibrary(Extension):
    """One library at one level (the module name is nominal: :meth:`build_native.get_ext_filename` maps it to
    ``<library>.<level>.so``)."""

    def __init__(self, library, level):
        super().__init__(f"fusedrnn._native.{library.name}_{level.name}",
                         sources=[f"src/fusedrnn/{library.source}"],
                         depends=[f"src/fusedrnn/{h}" for h in library.headers], optional=True)
        self.library, self.level = library, level


class build_native(build_ext):  # noqa: N801 - a setuptools command class
    """Compile every :class:`NativeLibrary` with ``_native/build.py`` (in parallel), then write the manifest."""

    def get_ext_filename(self, fullname: str) -> str:
        *package, last = fullname.split(".")
        library, _, level = last.rpartition("_")
        return os.path.join(*package, native.file_name(library, level))

    def build_extensions(self) -> None:
        self.native_results = {}
        self.native_error = None
        cc = native.find_compiler()
        self.native_compiler = None if cc is None else native.compiler_version(cc)
        if cc is None:
            self.native_error = "no C compiler found ($CC, cc, gcc, clang)"
            self.warn(f"fusedrnn: {self.native_error}: the compiled kernels are not built. fusedrnn will run its "
                      f"NumPy loops (10-100x slower) and warn once at run time; install gcc or clang and reinstall.")
            return
        exts = [e for e in self.extensions if isinstance(e, NativeLibrary)]
        with ThreadPoolExecutor(max_workers=max(1, min(len(exts), os.cpu_count() or 1))) as pool:
            errors = list(pool.map(lambda e: self._build_one(cc, e), exts))
        for ext, error in zip(exts, errors, strict=True):
            self.native_results.setdefault(ext.library.name, {})[ext.level.name] = error
            if error is not None:
                self.warn(f"fusedrnn: the {ext.library.name} kernel at level {ext.level.name} did not build "
                          f"(the loader uses the next level): {error}")

    def _build_one(self, cc: str, ext: NativeLibrary) -> str | None:
        """Compile one library at one level (None) or say why it did not build. An earlier build of the same
        sources, command and compiler is kept (its stamp in the build's temporary folder says which)."""
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)
        stamp_path = Path(self.build_temp) / "native" / (out.name + ".stamp")
        stamp = "\n".join((native.source_digest(ext.library, PACKAGE), self.native_compiler,
                           *native.command(cc, ext.library, ext.level, PACKAGE, out)))
        if not self.force and out.exists() and stamp_path.exists() and stamp_path.read_text() == stamp:
            return None
        try:
            native.compile_library(cc, ext.library, ext.level, PACKAGE, out)
        except native.BuildError as e:
            return str(e)
        stamp_path.parent.mkdir(parents=True, exist_ok=True)
        stamp_path.write_text(stamp)
        return None

    def _folders(self) -> list[Path]:
        """Where the libraries are: the build folder, and the source tree for an in-place (editable) build."""
        folders = [Path(self.build_lib) / "fusedrnn" / "_native"]
        if self.inplace:
            folders.append(Path(self.get_finalized_command("build_py").get_package_dir("fusedrnn._native")))
        return folders

    def run(self) -> None:
        super().run()
        for folder in self._folders():
            if folder.is_dir():
                data = native.make_manifest(folder, PACKAGE, self.native_results, self.native_compiler,
                                            self.native_error)
                native.write_json(folder / native.MANIFEST, data)

    def get_outputs(self) -> list[str]:
        built = [p for p in super().get_outputs() if os.path.exists(p)]
        return built + [str(self._folders()[-1] / native.MANIFEST)]

    def get_output_mapping(self) -> dict[str, str]:
        mapping = {k: v for k, v in super().get_output_mapping().items() if os.path.exists(k)}
        if self.inplace:
            build, source = self._folders()
            mapping[str(build / native.MANIFEST)] = str(source / native.MANIFEST)
        return mapping


commands = {"build_ext": build_native}
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 (the build requires >= 77)
    bdist_wheel = None
if bdist_wheel is not None:
    class bdist_wheel_native(bdist_wheel):  # noqa: N801 - a setuptools command class
        """The libraries do not link against Python: the wheel is for every Python 3 on its platform."""

        def get_tag(self) -> tuple[str, str, str]:
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = bdist_wheel_native

setup(
    ext_modules=[NativeLibrary(lib, level) for lib in native.LIBRARIES.values() for level in native.levels()],
    cmdclass=commands,
)
