"""``fusedrnn bench``: run one of the benchmark suites of a fusedrnn source checkout.

The suites live in the repository's ``benchmarks/`` folder (they compare fusedrnn with onnxruntime, PyTorch and
the SDK kernels, which an installed package does not ship). ``fusedrnn bench SUITE [ARGS...]`` runs
``python -m benchmarks.bench_<SUITE> ARGS`` with this Python in the checkout that holds the running fusedrnn
package (``src/fusedrnn`` next to ``benchmarks/``: a source checkout or an editable install), or in the folder
given with ``--root``; ARGS go to the suite unchanged (``fusedrnn bench float --quick``). It never looks for
benchmarks in the current folder or its parents: a file found there would be run as code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from .common import CLIError


def package_root() -> Path | None:
    """The source checkout of the running fusedrnn package: the folder two levels above the package
    (``<root>/src/fusedrnn``) when it holds ``benchmarks/bench_float.py``, else None (an installed wheel)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "benchmarks" / "bench_float.py").is_file() else None


def suites(root: Path) -> list[str]:
    """The suite names in ``root/benchmarks`` (``bench_<name>.py``)."""
    return sorted(p.stem[len("bench_"):] for p in (root / "benchmarks").glob("bench_*.py"))


@click.command("bench", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("suite", required=False)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path),
              help="The fusedrnn source checkout whose suites to run (default: the one holding the running "
                   "fusedrnn package).")
@click.option("--list", "list_only", is_flag=True, help="List the suites and exit.")
@click.pass_context
def bench(ctx: click.Context, suite: str | None, root: Path | None, list_only: bool) -> None:
    """Run the benchmark SUITE (float, compiled, int_matmul, mli, zdnn, zdnn_conv, litert, quark) of a source
    checkout; extra arguments go to the suite (e.g. ``fusedrnn bench float --quick``)."""
    base = root if root is not None else package_root()
    if base is None:
        raise CLIError(f"--root: the running fusedrnn ({Path(__file__).resolve().parents[1]}) is not in a source "
                       f"checkout with benchmarks/; the suites ship with the source, pass its folder with --root")
    if not (base / "benchmarks").is_dir():
        raise CLIError(f"--root: no benchmarks/ folder in {base}; the suites ship with the fusedrnn source "
                       f"checkout")
    names = suites(base)
    if list_only or suite is None:
        click.echo("suites: " + ", ".join(names))
        if suite is None and not list_only:
            click.echo("run one with: fusedrnn bench SUITE [ARGS...]  (e.g. fusedrnn bench float --quick)")
        return
    if suite not in names:
        raise CLIError(f"SUITE: unknown suite {suite!r}; {base / 'benchmarks'} has {', '.join(names)}")
    cmd = [sys.executable, "-m", f"benchmarks.bench_{suite}", *ctx.args]
    ctx.exit(subprocess.call(cmd, cwd=base))
