"""``fusedrnn bench``: run one of the benchmark suites of a fusedrnn source checkout.

The suites live in the repository's ``benchmarks/`` folder (they compare fusedrnn with onnxruntime, PyTorch and
the SDK kernels, which an installed package does not ship). ``fusedrnn bench SUITE [ARGS...]`` finds the checkout
(the current folder or one of its parents, or ``--root``) and runs ``python -m benchmarks.bench_<SUITE> ARGS`` there
with this Python; ARGS go to the suite unchanged (``fusedrnn bench float --quick``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from .common import CLIError


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``benchmarks/bench_float.py``."""
    for folder in (start, *start.parents):
        if (folder / "benchmarks" / "bench_float.py").is_file():
            return folder
    return None


def suites(root: Path) -> list[str]:
    """The suite names in ``root/benchmarks`` (``bench_<name>.py``)."""
    return sorted(p.stem[len("bench_"):] for p in (root / "benchmarks").glob("bench_*.py"))


@click.command("bench", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("suite", required=False)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path),
              help="The fusedrnn source checkout (default: the current folder or a parent).")
@click.option("--list", "list_only", is_flag=True, help="List the suites and exit.")
@click.pass_context
def bench(ctx: click.Context, suite: str | None, root: Path | None, list_only: bool) -> None:
    """Run the benchmark SUITE (float, compiled, int_matmul, mli, zdnn, zdnn_conv, litert, quark) of a source
    checkout; extra arguments go to the suite (e.g. ``fusedrnn bench float --quick``)."""
    base = root if root is not None else find_root(Path.cwd())
    if base is None or not (base / "benchmarks").is_dir():
        where = root if root is not None else Path.cwd()
        raise CLIError(f"--root: no benchmarks/ folder at or above {where}; the suites ship with the fusedrnn "
                       f"source checkout, run this command inside it or pass --root")
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
