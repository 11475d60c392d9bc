"""``--report out.html``: a self-contained HTML report of a ``run`` / ``compare`` (plots inlined as base64 SVG
images, styles inline, no scripts, nothing fetched over the network).

Sections: the summary table (the CLI's metrics per target), error distributions (a histogram of every output
element's error vs the reference, one plot per target), error growth over timesteps (mean |Δ| of each
recurrent node's Y at every timestep, one plot per target, one line per node) and a per-node table (node,
op, shapes, target, max / mean |Δ| of Y).

Per-node outputs come from an instrumented copy of the model (:func:`instrument`) whose graph also outputs
each top-level recurrent node's X and Y. Recurrent nodes inside ``If`` / ``Loop`` / ``Scan`` bodies cannot be
exposed that way; they are listed without errors. matplotlib (the ``report`` extra) is imported only when a
report is written.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from .. import __version__
from ..frontends import onnx as fonnx
from ..frontends.onnx_ops import recurrent_op
from .common import CLIError
from .staging import staged_files

EXTRA = "report"
"""The pyproject extra that provides matplotlib."""


def require_plotting() -> None:
    """Raise a one-line :class:`CLIError` naming the extra when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise CLIError(f"--report: writing the HTML report needs matplotlib; install it with "
                       f"pip install 'fusedrnn[{EXTRA}]'") from None


@dataclass(frozen=True)
class NodeProbe:
    """A recurrent node of the model: ``x`` / ``y`` are the names of its X input and Y output (None for nodes
    inside subgraphs, whose values cannot be recorded); ``time_axis`` is Y's timestep axis (0 for ONNX
    layout 0, [T, D, B, H]; 1 for layout 1, [B, T, D, H])."""

    name: str
    op_type: str
    x: str | None
    y: str | None
    time_axis: int = 0


def _layout(node) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "layout"), 0)


def instrument(model: fonnx.Model) -> tuple[fonnx.Model, list[NodeProbe]]:
    """A copy of ``model`` whose graph also outputs every top-level recurrent node's X and Y (after the
    model's own outputs, which keep their order), and a probe per recurrent node (subgraph nodes included,
    with ``x = y = None``)."""
    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    graph = proto.graph
    known = {o.name for o in graph.output}
    feeds = {i.name for i in model.inputs}
    top = [n for n in graph.node if recurrent_op(n) is not None]
    probes = []
    for node in top:
        for name in (node.input[0], node.output[0]):
            if name and name not in known and name not in feeds:
                graph.output.append(onnx.ValueInfoProto(name=name))
                known.add(name)
        probes.append(NodeProbe(node.name or fonnx.node_key(node), node.op_type, node.input[0], node.output[0],
                                1 if _layout(node) == 1 else 0))
    top_names = {p.name for p in probes}
    probes += [NodeProbe(name, "(in a subgraph)", None, None) for name in model.recurrent_nodes
               if name not in top_names]
    return fonnx.load(proto), probes


def _abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))


def _is_float(a) -> bool:
    return np.asarray(a).dtype.kind == "f" or np.asarray(a).dtype.name in ("bfloat16", "float8_e4m3fn")


def _svg(fig) -> str:
    """The figure as an ``<img>`` with a base64 SVG data URI (each image isolated: no clashing ids)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "fusedrnn"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float = 6.4, height: float = 3.4):
    """A pyplot-free figure with fixed margins (a layout engine would triple the rendering time)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.13, right=0.97, top=0.9, bottom=0.15)
    return fig


def error_histogram(target: str, deltas: np.ndarray, reference: str) -> str:
    """Histogram (log counts) of the signed output errors ``deltas`` (target - reference); base64 SVG."""
    fig = _figure()
    ax = fig.add_subplot()
    d = deltas[np.isfinite(deltas)]
    m = float(np.max(np.abs(d), initial=0.0))
    nonzero = int(np.count_nonzero(d))
    if m == 0:
        ax.stairs([d.size], [-1.0, 1.0], fill=True, color="#4c72b0")
        ax.text(0.5, 0.5, f"identical to {reference}", transform=ax.transAxes, ha="center", va="center")
    else:
        counts, edges = np.histogram(d, bins=81, range=(-m, m))
        ax.stairs(counts, edges, fill=True, color="#4c72b0")  # one path, not 81 patches
        ax.set_yscale("log")
    ax.set_xlabel(f"output error ({target} − {reference})")
    ax.set_ylabel("elements")
    ax.set_title(f"{target}: {nonzero} of {d.size} output elements differ, max |Δ| = {m:.3g}", fontsize=10)
    return _svg(fig)


def error_growth(target: str, curves: dict[str, np.ndarray], reference: str) -> str:
    """mean |Δ| of each node's Y at every timestep (``curves``: node name -> [T]); base64 SVG."""
    fig = _figure()
    ax = fig.add_subplot()
    positive = any(np.any(c > 0) for c in curves.values())
    for name, c in curves.items():
        steps = np.arange(1, len(c) + 1)
        ax.plot(steps, np.where(c > 0, c, np.nan) if positive else c, marker="o", markersize=3, label=name)
    if positive:
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, f"identical to {reference}", transform=ax.transAxes, ha="center", va="center")
    if not curves:
        ax.text(0.5, 0.5, "no recurrent node outputs recorded", transform=ax.transAxes, ha="center", va="center")
    ax.set_xlabel("timestep")
    ax.set_ylabel(f"mean |Δ| of Y vs {reference}")
    ax.set_title(f"{target}: error of the recurrent outputs over time", fontsize=10)
    if len(curves) > 1 or (curves and positive):
        ax.legend(fontsize=8)
    return _svg(fig)


def growth_curve(y: np.ndarray, ref: np.ndarray, time_axis: int) -> np.ndarray:
    """mean |y - ref| at each timestep (over batch, directions and units); float64 [T]."""
    d = np.moveaxis(_abs_diff(y, ref), time_axis, 0)
    return d.reshape(d.shape[0], -1).mean(axis=1) if d.size else np.zeros(d.shape[0])


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 70em;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure.plot { margin: 0; } figure.plot img { width: 32em; max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
.note { color: #666; font-size: 0.9em; } dl.facts dt { font-weight: bold; float: left; width: 9em; }
dl.facts dd { margin-left: 10em; }
"""


def _e(v) -> str:
    return html.escape(str(v), quote=True)


def _plot(kind: str, target: str, data: str, caption: str) -> str:
    return (f'<figure class="plot" data-kind="{_e(kind)}" data-target="{_e(target)}">'
            f'<img alt="{_e(caption)}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _summary_table(rows: list[dict], metrics: Sequence[tuple], cell: Callable) -> str:
    head = "".join(f"<th>{_e(title)}</th>" for _, title, _ in metrics)
    body = []
    for r in rows:
        if r["error"] is not None:
            body.append(f'<tr><td class="l">{_e(r["target"])}</td>'
                        f'<td class="l" colspan="{len(metrics)}">cannot run: {_e(r["error"])}</td></tr>')
        else:
            cells = "".join(f"<td>{_e(cell(r, key, spec))}</td>" for key, _, spec in metrics)
            body.append(f'<tr><td class="l">{_e(r["target"])}</td>{cells}</tr>')
    return (f'<table id="summary"><thead><tr><th class="l">target</th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _shape(a) -> str:
    return "×".join(str(d) for d in np.shape(a)) if a is not None else "-"


def build(facts: dict, rows: list[dict], outputs: dict[str, dict], output_names: Sequence[str],
          probes: Sequence[NodeProbe], *, metrics: Sequence[tuple], cell: Callable, feeds: dict,
          progress=None) -> str:
    """The report's HTML text.

    ``outputs``: {target name: {output name: array}} for every target that ran, the reference included (the
    model's outputs and the probes' X / Y); ``output_names``: the model's own outputs (the error
    distributions cover their float elements); ``metrics`` / ``cell``: the summary table's columns and cell
    formatter (as in the CLI)."""
    reference = facts["reference"]
    ref = outputs[reference]
    ran = [r["target"] for r in rows if r["error"] is None and r["target"] != reference]
    if progress is not None:
        progress.set_total(2 * len(ran))
    hist_figs, growth_figs, node_rows = [], [], []
    recorded = [p for p in probes if p.y is not None and p.y in ref]

    def value(target: str, name: str | None):
        if name is None:
            return None
        return outputs[target].get(name, feeds.get(name))

    for target in ran:
        out = outputs[target]
        if progress is not None:
            progress.begin(f"{target} (plots)")
        floats = [n for n in output_names if _is_float(ref[n])]
        deltas = np.concatenate([np.ravel(np.asarray(out[n], np.float64) - np.asarray(ref[n], np.float64))
                                 for n in floats]) if floats else np.zeros(0)
        hist_figs.append(_plot("error-distribution", target, error_histogram(target, deltas, reference),
                               f"{target}: distribution of the output errors vs {reference} "
                               f"({', '.join(floats) or 'no float outputs'})"))
        if progress is not None:
            progress.advance()
        curves = {p.name: growth_curve(out[p.y], ref[p.y], p.time_axis) for p in recorded}
        growth_figs.append(_plot("error-growth", target, error_growth(target, curves, reference),
                                 f"{target}: mean |Δ| of each recurrent node's Y per timestep vs {reference}"))
        if progress is not None:
            progress.advance()
        for p in probes:
            if p.y is None or p.y not in ref:
                node_rows.append((p.name, p.op_type, "-", "-", target, "not recorded (inside a subgraph)", ""))
                continue
            d = _abs_diff(out[p.y], ref[p.y])
            node_rows.append((p.name, p.op_type, _shape(value(target, p.x)), _shape(out[p.y]), target,
                              f"{float(np.max(d, initial=0.0)):.3e}", f"{float(d.mean()) if d.size else 0.0:.3e}"))

    none = f'<p class="note">No target other than the reference {_e(reference)} ran.</p>'
    facts_html = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in (
        ("model", facts["model"]), ("data", facts["data"]), ("samples", facts["samples"]),
        ("reference", reference), ("fusedrnn", __version__),
        ("written", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))))
    node_head = "".join(f'<th class="l">{h}</th>' if i < 5 else f"<th>{h}</th>" for i, h in enumerate(
        ("node", "op", "X shape", "Y shape", "target", "max |Δ| of Y", "mean |Δ| of Y")))
    node_body = "".join("<tr>" + "".join(f'<td class="l">{_e(v)}</td>' if i < 5 else f"<td>{_e(v)}</td>"
                                         for i, v in enumerate(r)) + "</tr>" for r in node_rows)
    node_table = (f'<table id="nodes"><thead><tr>{node_head}</tr></thead><tbody>{node_body}</tbody></table>'
                  if node_rows else none)
    title = f"fusedrnn report: {Path(facts['model']).name}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        f"<h1>{_e(title)}</h1>", f'<dl class="facts">{facts_html}</dl>',
        '<section id="summary-section"><h2>Summary</h2>',
        _summary_table(rows, metrics, cell), "</section>",
        '<section id="error-distributions"><h2>Error distributions</h2>',
        f'<p class="note">Every element of the model\'s float outputs, target minus {_e(reference)} '
        "(log-scaled counts).</p>",
        f'<div class="plots">{"".join(hist_figs)}</div>' if hist_figs else none, "</section>",
        '<section id="error-growth"><h2>Error growth over timesteps</h2>',
        f'<p class="note">Mean |Δ| vs {_e(reference)} of each recurrent node\'s output Y at every timestep '
        "(over batch, directions and units).</p>",
        f'<div class="plots">{"".join(growth_figs)}</div>' if growth_figs else none, "</section>",
        '<section id="per-node"><h2>Per-node errors</h2>', node_table, "</section>",
        "</body>", "</html>",
    ]
    return "\n".join(parts) + "\n"


def check_path(path: Path) -> None:
    """Fail early (CLIError) when the report cannot be written at ``path``."""
    if path.is_dir():
        raise CLIError(f"--report: {path} is a directory; give a file name such as report.html")
    if not path.parent.is_dir():
        raise CLIError(f"--report: no such directory: {path.parent}")


def write(path: Path, text: str) -> None:
    """Write the report to ``path`` through a staged file (:mod:`fusedrnn.cli.staging`): all or nothing."""
    try:
        with staged_files(path) as (staged,):
            staged.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"--report: cannot write {path} ({exc.strerror or exc})") from None


__all__ = ["EXTRA", "NodeProbe", "build", "check_path", "error_growth", "error_histogram", "growth_curve",
           "instrument", "require_plotting", "write"]
