"""``fusedrnn targets``: the registry of emulation targets."""

from __future__ import annotations

import json

import click
from rich.table import Table

from .. import targets as registry
from . import render
from .common import stdout_console
from .options import output_format, output_options


@click.command("targets")
@output_options
def targets(as_json: bool, out_format: str | None) -> None:
    """List the emulation targets (name, family, compute dtype, rounding) and the features each can express."""
    rows = [t.summary() for t in registry.list()]
    printed = output_format(out_format, as_json)
    if printed == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if printed in ("csv", "markdown"):
        keys = list(rows[0])
        body = [[", ".join(map(str, r[k])) if isinstance(r[k], (list, tuple)) else str(r[k]) for k in keys]
                for r in rows]
        click.echo((render.csv_text if printed == "csv" else render.markdown_text)(keys, body), nl=False)
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
