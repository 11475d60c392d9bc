"""``fusedrnn diagnose MODEL``: why a quantized target loses accuracy (:mod:`fusedrnn.frontends.diagnosis`).

Prints, per target, the model-level metric, each recurrent node's isolated and cumulative error, its sensitivity
(the metric with only that node on the target), the ranges its quantization was chosen for and how often its
gates, cell and hidden state saturate; optionally the calibration methods side by side (``--methods``) and a
search for the float nodes that reach a goal (``--goal``). ``--json`` prints everything; ``--report`` writes it as
HTML with the overview charts first.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from .. import targets as _targets
from ..cells.calibration import METHODS
from ..errors import FusedRNNError
from ..frontends.diagnosis import METRICS, diagnose
from . import diagnosis_report, render
from . import options as options_mod
from .calibration_opts import calibration_options, parse_methods
from .common import CLIError, delayed_progress, stdout_console
from .feeds import calibration_subset, load_feeds
from .models import model_and_data, open_model
from .render import json_safe, number

DEFAULT_TARGETS = ("mli2-sa8", "litert-int8x16")


@click.command("diagnose")
@click.argument("model_path", metavar="[MODEL]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
              help="npz of model inputs by name (plus optional labels 'y') the errors are measured on.")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
              help="npz of model inputs to calibrate on (default: the first samples of --data).")
@click.option("--target", "-t", "target_names", multiple=True, metavar="NAME",
              help=f"Target to diagnose (repeatable; default: {', '.join(DEFAULT_TARGETS)}).")
@calibration_options
@click.option("--metric", type=click.Choice(METRICS), default="cosine", show_default=True,
              help="Model-level metric of the sensitivity ranking and the search (higher is better).")
@click.option("--methods", "compare_methods", is_flag=True,
              help=f"Also run every calibration method ({', '.join(METHODS)}) and show the metric of each.")
@click.option("--goal", type=float, default=None, help="Search for float nodes until the metric reaches GOAL.")
@click.option("--window", type=click.IntRange(min=0), default=0, show_default=True,
              help="Timesteps per saturation window (0: one window).")
@click.option("--no-saturation", "no_saturation", is_flag=True,
              help="Do not count saturation (it runs the integer kernels' slower NumPy loops).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), metavar="HTML",
              help="Also write a self-contained HTML report (needs the 'report' extra).")
@options_mod.model_options
@options_mod.output_options
def diagnose_cmd(model_path: Path | None, data: Path | None, calibration: Path | None, target_names,
                 calibration_methods, percentile: float, keep_float, metric: str, compare_methods: bool,
                 goal: float | None, window: int, no_saturation: bool, report_path: Path | None, **kwargs) -> None:
    """Diagnose MODEL's accuracy loss on quantized targets: per recurrent node the error in isolation (only that
    node on the target) and cumulatively (every node on it), the sensitivity ranking, the chosen ranges and the
    saturation of each gate; calibration methods and float nodes that help.

    MODEL: any format ``fusedrnn run`` takes. Without MODEL, diagnoses the bundled example. --format json (or
    --json) prints everything the report shows; csv and markdown print the per-node table."""
    model_opts, _ = options_mod.collect(kwargs)
    fmt = options_mod.output_format(kwargs.pop("out_format"), kwargs.pop("as_json"))
    as_json = fmt == "json"
    if report_path is not None:
        diagnosis_report.require_plotting()
        diagnosis_report.check_path(report_path)
    model_path, data = model_and_data(model_path, data, calibration)
    names = target_names or DEFAULT_TARGETS
    for name in names:
        if name not in _targets.names():
            raise CLIError(f"--target: unknown target {name!r}; see 'fusedrnn targets'")
    choice = parse_methods(calibration_methods, percentile)
    loaded = open_model(model_path, model_opts, data)
    model = loaded.model
    layout = {"file_batch_first": model_opts.batch_first, "model_batch_first": loaded.batch_first,
              "any_name": loaded.format != "onnx"}
    feeds, labels = load_feeds(model, data, **layout)
    cal = calibration_subset(feeds) if calibration is None else \
        load_feeds(model, calibration, "--calibration", **layout)[0]
    if metric == "accuracy" and labels is None:
        raise CLIError("--metric: accuracy needs labels (an array 'y' in --data)")
    results = {"model": model_path.name, "data": data.name, "targets": {}}
    try:
        with delayed_progress("diagnosing", enabled=not as_json) as steps:
            for name in names:
                steps.begin(name)
                r = diagnose(model, [name], choice.for_target(name, cal), feeds, keep_float=keep_float,
                             labels=labels, metric=metric, window=window, saturation=not no_saturation,
                             methods=METHODS if compare_methods else (), goal=goal)
                results["targets"].update(r.pop("targets"))
                results.update({k: v for k, v in r.items() if k != "calibration"})
                steps.advance()
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    results["calibration"] = {"percentile": percentile, "methods": choice.describe() or {"*": {"*": "sdk"}}}
    if report_path is not None:
        diagnosis_report.write(report_path, diagnosis_report.build(results))
        click.echo(f"report written to {report_path}", err=True)
    if as_json:
        click.echo(json.dumps(json_safe(results), indent=2))
    elif fmt in ("csv", "markdown"):
        keys = ["target", "node", "float", "isolated_snr_db", "cumulative_snr_db", "sensitivity", "calibration",
                "max_saturated_percent"]
        rows = []
        for tname, entry in results["targets"].items():
            for node in entry["ranking"]:
                d = entry["nodes"][node]
                sat = max((s["fraction"] for s in d.get("saturation", [])), default=None)
                rows.append([tname, node, str(bool(d.get("float"))), number((d.get("isolated") or {}).get("snr_db")),
                             number((d.get("cumulative") or {}).get("snr_db")), number(d["sensitivity"], ".6f"),
                             d.get("calibration", "-"), "-" if sat is None else f"{100 * sat:.4f}"])
        click.echo((render.csv_text if fmt == "csv" else render.markdown_text)(keys, rows), nl=False)
    else:
        _print(results)


def _print(results: dict) -> None:
    console = stdout_console()
    metric = results["metric"]
    for tname, entry in results["targets"].items():
        table = Table(title=f"{results['model']} on {tname}: {metric} {number(entry['metric'], '.4f')}",
                      show_edge=False)
        for col in ("node", "isolated SNR (dB)", "cumulative SNR (dB)", f"{metric} alone on target",
                    "calibration", "most saturated"):
            table.add_column(col, justify="left" if col in ("node", "calibration", "most saturated") else "right")
        for node in entry["ranking"]:
            d = entry["nodes"][node]
            iso, cum = d.get("isolated") or {}, d.get("cumulative") or {}
            sat = max(d.get("saturation", []), key=lambda s: s["fraction"], default=None)
            worst = "-" if sat is None else (f"{sat['point']}{'/' + sat['gate'] if sat['gate'] else ''} "
                                             f"{100 * sat['fraction']:.2f}%")
            table.add_row(node + (" (float)" if d.get("float") else ""), number(iso.get("snr_db"), ".1f"),
                          number(cum.get("snr_db"), ".1f"), number(d["sensitivity"], ".4f"),
                          d.get("calibration", "-"), worst)
        console.print(table)
        if entry.get("methods"):
            console.print("  calibration methods: " + ", ".join(
                f"{m} {number(v['metric'], '.4f')}" for m, v in entry["methods"].items()), markup=False)
        if entry.get("search"):
            s = entry["search"]
            console.print(f"  float nodes for {metric} >= {s['goal']}: {', '.join(s['float']) or 'none'} "
                          f"({'reached' if s['reached'] else 'not reached'}, {metric} "
                          f"{number(s['steps'][-1]['metric'], '.4f')})", markup=False)


__all__ = ["diagnose_cmd"]
