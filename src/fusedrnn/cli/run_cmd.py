"""``fusedrnn run`` / ``compare``: run a model of any format on emulation targets and compare each with fp32."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np
from rich.table import Table

from .. import targets as registry
from ..errors import FusedRNNError
from ..frontends import onnx as fonnx
from . import options as options_mod
from . import render
from . import report as html_report
from .calibration_opts import MethodChoice, calibration_options, parse_methods
from .common import CLIError, delayed_progress, stdout_console
from .feeds import CALIBRATION_SAMPLES, LABELS, calibration_subset, load_feeds
from .models import model_and_data, node_roles, open_model
from .options import Gates, ModelOptions

REFERENCE = "fp32"


def _resolve_targets(names) -> list:
    try:
        chosen = [registry.get(n) for n in dict.fromkeys(names)] if names else registry.list()
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    return chosen


def _predictions(out: np.ndarray) -> np.ndarray | None:
    return np.argmax(out, axis=-1) if out.ndim >= 2 and out.shape[-1] > 1 else None


def _differences(out: dict, ref: dict) -> tuple[float, float, float | None, int]:
    """max |Δ|, mean |Δ|, the signal-to-noise ratio in dB (10·log10 Σref² / Σ(out - ref)² over the reference's
    finite elements; None when the outputs are identical) and the NaN mismatches, over every output.

    Elements equal in both (the same infinity, or NaN in both) differ by 0. An element that is NaN in exactly
    one of them is a NaN mismatch (counted) and makes max |Δ|, mean |Δ| and the SNR NaN: no difference to a NaN
    is small, so the numbers must not read as agreement (a max would otherwise skip it)."""
    mx, total, count, sig, noise, nans = 0.0, 0.0, 0, 0.0, 0.0, 0
    for k in out:
        a, b = out[k].astype(np.float64), ref[k].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            nan_a, nan_b = np.isnan(a), np.isnan(b)
            d = np.where((a == b) | (nan_a & nan_b), 0.0, np.abs(a - b))
            nans += int(np.count_nonzero(nan_a != nan_b))
            mx = max(mx, float(np.max(np.where(np.isnan(d), 0.0, d), initial=0.0)))
            total += float(np.sum(d[~np.isnan(d)]))
            count += d.size
            sig += float(np.sum(np.where(np.isfinite(b), b * b, 0.0)))
            noise += float(np.sum(d[~np.isnan(d)] ** 2))
    if nans:
        return float("nan"), float("nan"), float("nan"), nans
    snr = None if noise == 0 else float(10 * np.log10(max(sig, 1e-300) / noise))
    return mx, total / max(count, 1), snr, 0


def compare_targets(model: fonnx.Model, feeds: dict, labels, chosen, *, repeat: int = 1, progress=None,
                    calibration: dict | None = None, compared: list[str] | None = None,
                    keep: dict | None = None, timed: fonnx.Model | None = None, methods: MethodChoice | None = None,
                    keep_float: tuple[str, ...] = ()) -> list[dict]:
    """Run ``model`` on every target in ``chosen``; one row per target with ``accuracy_percent`` (argmax of the
    first output vs ``labels``; None without labels), ``agreement_percent`` (identical argmax predictions vs the
    fp32 run), ``max_abs_diff``, ``mean_abs_diff`` and ``snr_db`` (over every output, vs fp32), ``time_ms``
    (the fastest of ``repeat`` runs after a first, untimed one) and ``error`` (why the target cannot run the
    model, else None).

    Quantized targets are calibrated on ``calibration`` feeds (default: the first samples of ``feeds``).
    ``compared`` names the outputs the measurements cover (default: all of the model's); with ``keep`` (a dict)
    every output of every target that ran, the reference included, is kept as ``keep[target][output name]``.
    ``timed``: the model whose runs are timed (default ``model``; the CLI passes the uninstrumented model when
    ``model`` records extra outputs for a report). ``methods``: the ``--calibration-method`` choices (each
    quantized target's rows say which were used, ``calibration``); ``keep_float``: recurrent nodes that stay in
    float on every target."""
    order = [t.name for t in chosen]
    ref_name = REFERENCE if REFERENCE in registry.names() else order[0]
    runs = order if ref_name in order else [ref_name, *order]
    if progress is not None:
        progress.set_total(len(runs))
    model.to(runs[0]).run(feeds)  # warm-up: one-time import and allocation costs stay out of the timings
    cal = calibration if calibration is not None else calibration_subset(feeds)
    results, times, errors = {}, {}, {}
    for name in runs:
        if progress is not None:
            progress.begin(name)
        target = registry.get(name)
        settings = None
        if target.needs_calibration:
            settings = methods.for_target(name, cal) if methods is not None else cal
        try:
            m = model.to(target, calibration=settings, keep_float=keep_float)
            t_model = m if timed is None else timed.to(target, calibration=settings, keep_float=keep_float)
        except FusedRNNError as exc:
            if name == ref_name:
                raise
            errors[name] = " ".join(str(exc).split())
            if progress is not None:
                progress.advance("cannot run")
            continue
        results[name] = m.run(feeds)  # untimed: the first run of a target pays its one-time costs
        best = float("inf")
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            t_model.run(feeds)
            best = min(best, time.perf_counter() - t0)
        times[name] = best * 1e3
        if progress is not None:
            progress.advance(f"{times[name]:.1f} ms")
    if keep is not None:
        keep.update(results)
    names = [o.name for o in model.outputs] if compared is None else list(compared)
    results = {k: {n: v[n] for n in names} for k, v in results.items()}
    ref = results[ref_name]
    first = names[0]
    ref_pred = _predictions(ref[first])
    rows = []
    for name in order:
        if name in errors:
            rows.append({"target": name, "accuracy_percent": None, "agreement_percent": None, "max_abs_diff": None,
                         "mean_abs_diff": None, "snr_db": None, "nan_mismatches": None, "time_ms": None,
                         "error": errors[name]})
            continue
        out = results[name]
        pred = _predictions(out[first])
        acc = agree = None
        if pred is not None and labels is not None and np.shape(labels) == pred.shape:
            acc = float(np.mean(pred == labels) * 100)
        if pred is not None and ref_pred is not None:
            agree = float(np.mean(pred == ref_pred) * 100)
        mx, mean, snr, nans = _differences(out, ref)
        rows.append({"target": name, "accuracy_percent": acc, "agreement_percent": agree, "max_abs_diff": mx,
                     "mean_abs_diff": mean, "snr_db": snr, "nan_mismatches": nans, "time_ms": times[name],
                     "error": None})
    return rows


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def json_rows(rows: list[dict]) -> list[dict]:
    """``rows`` for JSON: NaN and infinities (which JSON cannot hold) as the strings "nan", "inf", "-inf"."""
    return [render.json_safe(r) for r in rows]


def _print_notes(console, rows: list[dict], facts: dict | None = None) -> None:
    """Under the table (on stderr for csv / markdown, ``console`` None): which nodes were emulated and which
    stayed float, why a target could not run, and NaN mismatches."""
    def say(text: str) -> None:
        if console is None:
            click.echo(text, err=True)
        else:
            console.print(text, highlight=False, markup=False)

    if facts is not None:
        ran = [r["target"] for r in rows if r["error"] is None]
        emulated = facts.get("emulated_nodes") or []
        floats = facts.get("float_nodes") or []
        if ran:
            which = f"every target that ran ({len(ran)})" if len(ran) == len(rows) or len(ran) > 3 else \
                ", ".join(ran)
            kept = facts.get("kept_float") or []
            emulated = [n for n in emulated if n not in kept]
            say(f"emulated on {which}: {', '.join(emulated) or 'no node (the model ran in float)'}")
            say(f"float on every target: {', '.join(kept + floats) if kept or floats else 'none'}")
            methods = facts.get("calibration_method") or {}
            if methods and methods != {"*": {"*": "sdk"}}:
                say("calibration methods: " + "; ".join(
                    f"{t}: " + ", ".join(f"{n}={m}" if n != "*" else m for n, m in nodes.items())
                    for t, nodes in methods.items()))
    for r in rows:
        if r["error"] is not None:
            say(f"{r['target']}: cannot run: {r['error']}")
        elif r.get("nan_mismatches"):
            say(f"{r['target']}: {r['nan_mismatches']} output element(s) are NaN in one of {r['target']} and "
                f"{REFERENCE} but not in the other (max / mean |Δ| and SNR are nan)")


def _shared_options(fn):
    """The options ``run`` and ``compare`` share (and the shared groups of :mod:`fusedrnn.cli.options`)."""
    options = [
        click.option("--data", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
                     help="npz whose arrays are the model inputs by name, plus optional labels 'y' (or a .npy for "
                          "a single-input model; an npz's one array is the input of a single-input Keras, PyTorch "
                          "or LiteRT model, whose input names are made up on the way to ONNX)."),
        click.option("--target", "-t", "target_names", multiple=True, metavar="NAME",
                     help="Target to run on (repeatable; default: every registered target)."),
        click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
                     help="npz of model inputs to calibrate quantized targets on (default: the first "
                          f"{CALIBRATION_SAMPLES} samples of the data)."),
        click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
                     help="Timed runs per target after an untimed first one; the time is the fastest."),
        click.option("--report", "report_path", type=click.Path(path_type=Path), metavar="HTML",
                     help="Also write a self-contained HTML report with plots (error distributions, error growth "
                          "over timesteps, per-node errors); needs the '{html_report.EXTRA}' extra.".replace(
                              "{html_report.EXTRA}", html_report.EXTRA)),
    ]
    fn = calibration_options(options_mod.progress_option(options_mod.gate_options(options_mod.output_options(
        options_mod.model_options(fn)))))
    for option in reversed(options):
        fn = option(fn)
    return fn


def _evaluate(model_path: Path | None, data: Path | None, target_names, calibration: Path | None, repeat: int,
              quiet: bool, report: Path | None = None, model_opts: ModelOptions | None = None,
              gates: Gates | None = None, lines: bool = False, methods: MethodChoice | None = None,
              keep_float: tuple[str, ...] = ()) -> tuple[dict, list[dict]]:
    """Load MODEL and the npz files, run every target (and write the HTML ``report``); returns (header facts,
    result rows). Each row also says which nodes ran emulated and which stayed float (``emulated``,
    ``float``)."""
    model_opts = model_opts or ModelOptions()
    gates = gates or Gates()
    chosen = _resolve_targets(target_names)
    if report is not None:
        html_report.require_plotting()
        html_report.check_path(report)
    model_path, data = model_and_data(model_path, data, calibration)
    loaded = open_model(model_path, model_opts, data)
    model = loaded.model
    recurrent, floats = node_roles(loaded)
    unknown = [n for n in keep_float if n not in model.recurrent_nodes]
    if unknown:
        raise CLIError(f"--keep-float: {', '.join(unknown)} is not a recurrent node of MODEL; its recurrent nodes are "
                       f"{', '.join(model.recurrent_nodes) or 'none'}")
    if not recurrent and not gates.allow_float:
        raise CLIError(f"MODEL: {model_path.name} has no recurrent node (LSTM, GRU, RNN, ...; an LSTM unrolled at "
                       f"export has none): every target would run it in float and agree with fp32 exactly; pass "
                       f"--allow-float to run it anyway")
    layout = {"file_batch_first": model_opts.batch_first, "model_batch_first": loaded.batch_first,
              "any_name": loaded.format != "onnx"}
    feeds, labels = load_feeds(model, data, **layout)
    cal = None if calibration is None else load_feeds(model, calibration, "--calibration", **layout)[0]
    samples = next((int(a.shape[0]) for a in feeds.values() if a.ndim), 1)
    facts = {"model": str(model_path), "format": loaded.format, "data": str(data), "samples": samples,
             "reference": REFERENCE, "emulated_nodes": recurrent, "float_nodes": floats,
             "calibration_method": (methods.describe() if methods else {}) or {"*": {"*": "sdk"}},
             "kept_float": list(keep_float)}
    try:
        if report is None:
            with delayed_progress("running", enabled=not quiet, lines=lines) as steps:
                rows = compare_targets(model, feeds, labels, chosen, repeat=repeat, progress=steps, calibration=cal,
                                       methods=methods, keep_float=keep_float)
            return facts, _with_roles(rows, recurrent, floats)
        probed, probes = html_report.instrument(model)
        kept: dict = {}
        with delayed_progress("running", enabled=not quiet, lines=lines) as steps:
            rows = compare_targets(probed, feeds, labels, chosen, repeat=repeat, progress=steps, calibration=cal,
                                   compared=[o.name for o in model.outputs], keep=kept, timed=model,
                                   methods=methods, keep_float=keep_float)
        with delayed_progress("writing report", enabled=not quiet) as steps:
            text = html_report.build({**facts, "reference": _reference(kept)}, rows, kept,
                                     [o.name for o in model.outputs], probes, metrics=METRICS, cell=_cell,
                                     feeds=feeds, progress=steps)
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    html_report.write(report, text)
    click.echo(f"report written to {report}", err=True)
    return facts, _with_roles(rows, recurrent, floats)


def _with_roles(rows: list[dict], recurrent: list[str], floats: list[str]) -> list[dict]:
    return [{**r, "emulated": [] if r["error"] else list(recurrent), "float": [] if r["error"] else list(floats)}
            for r in rows]


def _reference(results: dict) -> str:
    """The target the others were compared with (fp32 unless it is not registered)."""
    return REFERENCE if REFERENCE in results else next(iter(results))


METRICS = (  # (row key, column title, format)
    ("accuracy_percent", "accuracy (%)", ".2f"),
    ("agreement_percent", f"agreement with {REFERENCE} (%)", ".2f"),
    ("max_abs_diff", "max |Δ|", ".2e"),
    ("mean_abs_diff", "mean |Δ|", ".2e"),
    ("snr_db", "SNR (dB)", ".1f"),
    ("time_ms", "time (ms)", ".1f"),
)


SHORT_TITLES = ("acc %", "agree %", "max |Δ|", "mean |Δ|", "SNR dB", "ms")
"""The metrics' titles in tables narrower than :data:`NARROW` columns."""
NARROW = 100


def _cell(row: dict, key: str, spec: str) -> str:
    if key == "snr_db" and row["snr_db"] is None and row["max_abs_diff"] == 0:
        return "exact"
    return _fmt(row[key], spec)


def _lines(progress: bool | None, fmt: str) -> tuple[bool, bool]:
    """(progress enabled, one line per target off a terminal) from ``--progress/--no-progress`` and the format."""
    if progress is None:
        return fmt != "json", fmt != "json"
    return progress, progress


def _print_rows(facts: dict, rows: list[dict], fmt: str, *, per_target: bool) -> None:
    """The results in ``fmt``: json (facts and rows), csv / markdown (one row per target, raw numbers in csv),
    or a table (one row per target with ``per_target``, else one column per target unless they do not fit)."""
    if fmt == "json":
        click.echo(json.dumps({**facts, "results": json_rows(rows)}, indent=2))
        return
    if fmt in ("csv", "markdown"):
        keys = ["target", *(k for k, _, _ in METRICS), "nan_mismatches", "error", "emulated", "float"]
        if fmt == "csv":
            click.echo(render.csv_text(keys, [[_raw(r.get(k)) for k in keys] for r in rows]), nl=False)
        else:
            titles = ["target", *(t for _, t, _ in METRICS), "emulated", "float"]
            body = [[r["target"], *(["cannot run"] + [""] * (len(METRICS) - 1) if r["error"] else
                                    [_cell(r, k, spec) for k, _, spec in METRICS]),
                     ", ".join(r["emulated"]) or "-", ", ".join(r["float"]) or "-"] for r in rows]
            click.echo(render.markdown_text(titles, body), nl=False)
        _print_notes(None, rows, facts)
        return
    console = stdout_console()
    ok = [r for r in rows if r["error"] is None]
    name = Path(facts["model"]).name
    width = console.width
    side_by_side = not per_target and render.fits_side_by_side(len(ok), width)
    if side_by_side:
        table = Table(title=f"{name} on {facts['samples']} samples", show_edge=False)
        table.add_column("", style="bold")
        for r in ok:
            table.add_column(r["target"], justify="right")
        for key, title, spec in METRICS:
            table.add_row(title, *[_cell(r, key, spec) for r in ok])
    else:
        table = Table(title=f"{name} on {facts['samples']} samples of {Path(facts['data']).name}", show_edge=False)
        table.add_column("target", style="bold", overflow="fold")
        titles = [t for _, t, _ in METRICS] if width >= NARROW else SHORT_TITLES
        for title in titles:
            table.add_column(title, justify="right", overflow="fold")  # a narrow COLUMNS folds, never cuts
        for r in rows:
            if r["error"] is not None:
                table.add_row(r["target"], "[dim]cannot run[/dim]", *[""] * (len(METRICS) - 1))
                continue
            table.add_row(r["target"], *[_cell(r, key, spec) for key, _, spec in METRICS])
    console.print(table)
    _print_notes(console, rows, facts)


def _raw(v) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return "; ".join(v)
    return repr(v) if isinstance(v, float) else str(v)


def _finish(facts: dict, rows: list[dict], gates: Gates) -> None:
    """Exit 3 with one line per failure on stderr when a gate fails."""
    failures = render.gate_failures(rows, gates, REFERENCE)
    for line in failures:
        click.echo(f"gate failed: {line}", err=True)
    if failures:
        raise click.exceptions.Exit(3)


def _command(model_path, kwargs: dict, *, per_target: bool) -> None:
    model_opts, gates = options_mod.collect(kwargs)
    methods = parse_methods(kwargs.pop("calibration_methods"), kwargs.pop("percentile"))
    keep_float = tuple(kwargs.pop("keep_float"))
    fmt = options_mod.output_format(kwargs.pop("out_format"), kwargs.pop("as_json"))
    enabled, lines = _lines(kwargs.pop("progress"), fmt)
    facts, rows = _evaluate(model_path, kwargs["data"], kwargs["target_names"], kwargs["calibration"],
                            kwargs["repeat"], not enabled, kwargs["report_path"], model_opts, gates, lines,
                            methods=methods, keep_float=keep_float)
    _print_rows(facts, rows, fmt, per_target=per_target)
    _finish(facts, rows, gates)


@click.command("run")
@click.argument("model_path", metavar="[MODEL]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@_shared_options
def run(model_path: Path | None, **kwargs) -> None:
    """Run MODEL on each target and compare it with fp32: accuracy, agreement of the argmax predictions, the
    largest and mean output difference, the signal-to-noise ratio and the run time (the fastest of --repeat
    runs). Quantized targets are calibrated first. Says which nodes each target emulated and which stayed
    float.

    MODEL: ONNX (.onnx), LiteRT (.tflite), Keras 3 (.keras, .h5) or PyTorch (.pt2 from torch.export, a
    TorchScript module, or a state dict with --layers and --batch-first/--time-major). Without MODEL, runs the
    bundled example (an LSTM classifier of 8x8 handwritten digits) on its test split.
    """
    _command(model_path, kwargs, per_target=True)


@click.command("compare")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False, path_type=Path))
@_shared_options
def compare(model_path: Path, **kwargs) -> None:
    """Run MODEL (any format ``fusedrnn run`` takes) on the given targets (default: all) and show them side by
    side, one column per target (one row per target when that does not fit the width, COLUMNS), with the same
    measurements as ``fusedrnn run``. Targets that cannot run the model say why underneath."""
    _command(model_path, kwargs, per_target=False)


__all__ = ["CALIBRATION_SAMPLES", "LABELS", "REFERENCE", "calibration_subset", "compare", "compare_targets",
           "json_rows", "run"]
