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
    for col, kw in (("name", {"style": "bold"}), ("family", {}), ("compute dtype", {}), ("rounding", {}),
                    ("description", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for r in rows:
        table.add_row(r["name"], r["family"], r["compute_dtype"], r["rounding"], r["description"])
    features = Table(title="features (✓ = the target can express it)")
    features.add_column("feature", style="bold")
    for r in rows:
        features.add_column(r["name"], justify="center")
    for feature in registry.FLOAT_FEATURES:
        features.add_row(feature, *("✓" if feature in r["features"] else "–" for r in rows))
    console = stdout_console()
    console.print(table)
    console.print(features)
