"""The ``fusedrnn`` command line: ``--version``, ``targets``, ``run``, ``compare``, ``export-vectors``, ``convert``,
``diagnose`` and, in a source checkout (where the benchmark suites are), ``bench``."""

from __future__ import annotations

import click

from .. import __version__
from .bench_cmd import bench, package_root
from .convert_cmd import convert
from .diagnose_cmd import diagnose_cmd
from .export_cmd import export_vectors
from .run_cmd import compare, run
from .targets_cmd import targets


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="fusedrnn", message="%(prog)s %(version)s")
def main() -> None:
    """fusedrnn: run the recurrent operators of ONNX and accelerator SDKs on the CPU, with each target's
    arithmetic."""


main.add_command(targets)
main.add_command(run)
main.add_command(compare)
main.add_command(export_vectors)
main.add_command(convert)
main.add_command(diagnose_cmd)
main.add_command(bench)
bench.hidden = package_root() is None  # the suites ship with the source, not with the wheel: listed only there

__all__ = ["main"]
