"""``fusedrnn targets``: the registry of emulation targets."""

from __future__ import annotations

import json

import click
from rich.table import Table

from .. import targets as registry
from .common import stdout_console


@click.command("targets")
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
def targets(as_json: bool) -> None:
    """List the emulation targets: name, family, compute dtype, rounding and features."""
    rows = [t.summary() for t in registry.list()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="fusedrnn targets")
    for col, kw in (("name", {"style": "bold"}), ("family", {}), ("compute dtype", {}), ("rounding", {}),
                    ("features", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for r in rows:
        table.add_row(r["name"], r["family"], r["compute_dtype"], r["rounding"], ", ".join(r["features"]))
    stdout_console().print(table)
