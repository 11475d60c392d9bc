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
    """List the emulation targets (name, family, compute dtype, rounding) and the features each can express."""
    rows = [t.summary() for t in registry.list()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="fusedrnn targets")
    for col, kw in (("name", {"style": "bold"}), ("family", {}), ("bit-exact", {"justify": "center"}),
                    ("calibration", {"justify": "center"}), ("description", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for r in rows:
        table.add_row(r["name"], r["family"], "✓" if r["bit_exact"] else "", "needed" if r["needs_calibration"] else "",
                      r["description"])
    features = Table(title="features: what each target can express (fusedrnn targets --json for the full lists)")
    features.add_column("target", style="bold")
    features.add_column("cells")
    features.add_column("cannot express", overflow="fold")
    cells = ("lstm", "gru", "rnn")
    for r in rows:
        lacks = [f for f in registry.FLOAT_FEATURES if f not in cells and f not in r["features"]]
        features.add_row(r["name"], ", ".join(c for c in cells if c in r["features"]), ", ".join(lacks) or "-")
    console = stdout_console()
    console.print(table)
    console.print(features)
