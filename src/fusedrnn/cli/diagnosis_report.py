"""``fusedrnn diagnose --report out.html``: the diagnosis as a self-contained HTML page (plots inlined as base64
SVG, no scripts, nothing fetched, no absolute paths).

Overview first: the cumulative SNR of every node on every target as one heat map ("identical" written where a
node's output equals the float one), the error growth of every node (mean |Δ| per timestep, one panel per node on
shared axes, one line per target) and the saturation of every gate, cell and hidden state as a heat map; then the
details: per target and node the isolated and cumulative errors, the sensitivity, the calibration method and
the ranges, the calibration methods compared and the float-node search.
"""

from __future__ import annotations

import html

import numpy as np

from .. import __version__
from .render import number
from .report import _figure, _svg, check_path, require_plotting, write


def _e(v) -> str:
    return html.escape(str(v))


def _img(b64: str, caption: str) -> str:
    return (f'<figure><img alt="{_e(caption)}" src="data:image/svg+xml;base64,{b64}"/>'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def snr_heatmap(results: dict) -> str:
    """Cumulative SNR (dB) of every node (rows) on every target (columns); identical outputs are labelled."""
    targets = list(results["targets"])
    nodes = results["nodes"]
    vals = np.full((len(nodes), len(targets)), np.nan)
    for j, t in enumerate(targets):
        for i, n in enumerate(nodes):
            cum = results["targets"][t]["nodes"].get(n, {}).get("cumulative") or {}
            vals[i, j] = cum.get("snr_db", np.nan)
    finite = vals[np.isfinite(vals)]
    top = float(finite.max()) if finite.size else 1.0
    shown = np.where(np.isposinf(vals), top, vals)
    fig = _figure(1.6 + 1.4 * len(targets), 0.9 + 0.45 * len(nodes))
    fig.subplots_adjust(left=0.25, right=0.95, top=0.85, bottom=0.2)
    ax = fig.add_subplot()
    im = ax.imshow(shown, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(targets)), targets, fontsize=8)
    ax.set_yticks(range(len(nodes)), nodes, fontsize=8)
    for i in range(len(nodes)):
        for j in range(len(targets)):
            ax.text(j, i, number(float(vals[i, j]), ".1f"), ha="center", va="center", fontsize=8, color="white")
    fig.colorbar(im, ax=ax, label="SNR (dB)")
    ax.set_title("cumulative SNR per node and target", fontsize=9)
    return _svg(fig)


def growth_panels(results: dict) -> str:
    """Mean |Δ| per timestep of every node's Y (cumulative), one panel per node on shared axes, one line per
    target; a node identical to float is drawn as a labelled flat line at zero."""
    nodes, targets = results["nodes"], list(results["targets"])
    fig = _figure(3.2 * max(len(nodes), 1), 3.0)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.85, bottom=0.18, wspace=0.1)
    axes = fig.subplots(1, max(len(nodes), 1), sharex=True, sharey=True, squeeze=False)[0]
    for ax, n in zip(axes, nodes, strict=False):
        for t in targets:
            cum = results["targets"][t]["nodes"].get(n, {}).get("cumulative") or {}
            curve = np.asarray(cum.get("curve", []), np.float64)
            if curve.size == 0:
                continue
            label = t + (" (identical)" if not np.any(curve) else "")
            ax.plot(np.arange(curve.size), curve, label=label, linewidth=1)
        ax.set_yscale("symlog", linthresh=1e-6)
        ax.set_title(n, fontsize=9)
        ax.set_xlabel("timestep", fontsize=8)
    axes[0].set_ylabel("mean |Δ| of Y", fontsize=8)
    axes[0].legend(fontsize=7)
    return _svg(fig)


def saturation_heatmap(results: dict) -> str | None:
    """Percent of values at their container's limits, rows (node, direction, tensor / gate), columns the targets
    that count saturation (the integer ones)."""
    targets = [t for t, e in results["targets"].items() if any(d.get("saturation") for d in e["nodes"].values())]
    rows: dict[str, dict] = {}
    for j, t in enumerate(targets):
        for n, d in results["targets"][t]["nodes"].items():
            for s in d.get("saturation", []):
                key = f"{n} d{s['direction']} {s['point']}{'/' + s['gate'] if s['gate'] else ''}"
                rows.setdefault(key, {})[j] = 100.0 * s["fraction"]
    if not rows:
        return None
    vals = np.full((len(rows), len(targets)), np.nan)
    for i, r in enumerate(rows.values()):
        for j, v in r.items():
            vals[i, j] = v
    fig = _figure(2.6 + 1.4 * len(targets), 0.9 + 0.22 * len(rows))
    fig.subplots_adjust(left=0.35, right=0.95, top=0.95, bottom=0.08)
    ax = fig.add_subplot()
    im = ax.imshow(vals, cmap="magma_r", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(targets)), targets, fontsize=8)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=7)
    for i in range(len(rows)):
        for j in range(len(targets)):
            if np.isfinite(vals[i, j]):
                ax.text(j, i, f"{vals[i, j]:.3g}", ha="center", va="center", fontsize=6, color="tab:blue")
    fig.colorbar(im, ax=ax, label="% saturated")
    return _svg(fig)


def _qparams(qp) -> str:
    if not qp:
        return "–"
    return "; ".join(", ".join(f"{k} {v}" for k, v in q.items()) for q in qp)


def _node_table(entry: dict) -> str:
    head = ("<tr><th>node</th><th>float</th><th>isolated max |Δ|</th><th>isolated SNR</th>"
            "<th>cumulative max |Δ|</th><th>cumulative SNR</th><th>metric alone on target</th><th>calibration</th>"
            "<th>ranges chosen</th><th>ranges observed (float, on the data)</th><th>quantization</th></tr>")
    body = []
    for n in entry["ranking"]:
        d = entry["nodes"][n]
        iso, cum = d.get("isolated") or {}, d.get("cumulative") or {}
        ranges, observed = (
            "; ".join(", ".join(f"{k} [{lo:.4g}, {hi:.4g}]" for k, (lo, hi) in r.items()) for r in d.get(what) or [])
            for what in ("ranges", "observed"))
        body.append(f"<tr><td>{_e(n)}</td><td>{'yes' if d.get('float') else ''}</td>"
                    f"<td>{number(iso.get('max_abs'), '.3e')}</td><td>{number(iso.get('snr_db'), '.1f')}</td>"
                    f"<td>{number(cum.get('max_abs'), '.3e')}</td><td>{number(cum.get('snr_db'), '.1f')}</td>"
                    f"<td>{number(d['sensitivity'], '.4f')}</td><td>{_e(d.get('calibration', '–'))}</td>"
                    f"<td>{_e(ranges or '–')}</td><td>{_e(observed or '–')}</td>"
                    f"<td>{_e(_qparams(d.get('qparams')))}</td></tr>")
    return f"<table>{head}{''.join(body)}</table>"


def build(results: dict) -> str:
    """The HTML page of a :func:`fusedrnn.frontends.diagnosis.diagnose` result (as the CLI assembles it)."""
    metric = results["metric"]
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8"/>',
             f"<title>fusedrnn diagnosis of {_e(results['model'])}</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;"
             "margin:0.5em 0}td,th{border:1px solid #ccc;padding:0.2em 0.5em;font-size:0.9em;text-align:right}"
             "td:first-child,th:first-child{text-align:left}figure{display:inline-block;margin:0.5em}"
             "img{max-width:100%}</style>", "</head>", "<body>",
             f"<h1>Diagnosis of {_e(results['model'])}</h1>",
             f"<p>fusedrnn {_e(__version__)}; data {_e(results['data'])}; executor {_e(results['executor'])}; "
             f"metric {_e(metric)}; calibration {_e(results['calibration'])}; nodes kept in float: "
             f"{_e(', '.join(results['keep_float']) or 'none')}.</p>",
             '<section id="overview"><h2>Overview</h2>',
             _img(snr_heatmap(results), "cumulative SNR per node and target"),
             _img(growth_panels(results), "error growth per node (cumulative, shared axes)")]
    sat = saturation_heatmap(results)
    parts.append(_img(sat, "saturation per gate, cell and hidden state") if sat else
                 "<p>No target counted saturation.</p>")
    summary = "".join(f"<tr><td>{_e(t)}</td><td>{number(e['metric'], '.4f')}</td></tr>"
                      for t, e in results["targets"].items())
    parts += [f"<table><tr><th>target</th><th>{_e(metric)}</th></tr>{summary}</table>", "</section>",
              '<section id="details"><h2>Details</h2>']
    for t, entry in results["targets"].items():
        parts += [f"<h3>{_e(t)}: {_e(metric)} {number(entry['metric'], '.4f')}</h3>", _node_table(entry)]
        if entry.get("methods"):
            rows = "".join(f"<tr><td>{_e(m)}</td><td>{number(v['metric'], '.4f')}</td></tr>"
                           for m, v in entry["methods"].items())
            parts.append(f"<table><tr><th>calibration method</th><th>{_e(metric)}</th></tr>{rows}</table>")
        if entry.get("search"):
            s = entry["search"]
            rows = "".join(f"<tr><td>{_e(', '.join(st['float']) or 'none')}</td><td>{number(st['metric'], '.4f')}</td>"
                           f"</tr>" for st in s["steps"])
            parts.append(f"<p>Float nodes for {_e(metric)} ≥ {s['goal']}: "
                         f"{'reached' if s['reached'] else 'not reached'}.</p>"
                         f"<table><tr><th>float nodes</th><th>{_e(metric)}</th></tr>{rows}</table>")
    parts += ["</section>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


__all__ = ["build", "check_path", "growth_panels", "require_plotting", "saturation_heatmap", "snr_heatmap",
           "write"]
