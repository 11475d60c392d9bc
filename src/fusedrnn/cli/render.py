"""Results for people and for CI: CSV and Markdown text, whether a side-by-side table fits the width, and the
gates (``--min-agreement``, ``--min-snr``, ``--skip-unsupported``) that make a run fail with exit status 3."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from .options import Gates

COLUMN_WIDTH = 12
"""The width one target's column takes in a side-by-side table (numbers like ``1.23e-04`` plus padding)."""
LABEL_WIDTH = 26
"""The width of the metric names' column."""
MAX_SIDE_BY_SIDE = 8
"""More targets than this are shown one row per target even when the width would hold them."""


def csv_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``rows`` under ``header`` as CSV (RFC 4180 quoting, ``\\n`` line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _md(cell) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")


def markdown_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped)."""
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def fits_side_by_side(n_targets: int, width: int) -> bool:
    """Whether one column per target fits ``width`` characters (and there are at most
    :data:`MAX_SIDE_BY_SIDE` targets); else the table is transposed to one row per target."""
    return n_targets <= MAX_SIDE_BY_SIDE and LABEL_WIDTH + n_targets * COLUMN_WIDTH <= width


def gate_failures(rows: list[dict], gates: Gates, reference: str) -> list[str]:
    """One line per failed gate: a target below ``min_agreement`` / ``min_snr`` (NaN fails; identical outputs,
    SNR None, pass; no argmax agreement to measure fails ``min_agreement``), or one that could not run (unless
    ``skip_unsupported``)."""
    out = []
    for r in rows:
        if r["target"] == reference:
            continue
        if r["error"] is not None:
            if not gates.skip_unsupported and (gates.min_agreement is not None or gates.min_snr is not None):
                out.append(f"{r['target']}: cannot run ({r['error']}); --skip-unsupported skips such targets")
            continue
        agree, snr = r["agreement_percent"], r["snr_db"]
        if gates.min_agreement is not None and (agree is None or math.isnan(agree) or agree < gates.min_agreement):
            got = "not measurable (no argmax output)" if agree is None else f"{agree:.2f}%"
            out.append(f"{r['target']}: agreement {got} < --min-agreement {gates.min_agreement:g}%")
        exact = snr is None and r["max_abs_diff"] == 0
        if gates.min_snr is not None and not exact and (snr is None or math.isnan(snr) or snr < gates.min_snr):
            out.append(f"{r['target']}: SNR {'nan' if snr is None or math.isnan(snr) else f'{snr:.1f} dB'} < "
                       f"--min-snr {gates.min_snr:g} dB")
    return out


def number(v, spec: str = ".2f") -> str:
    """A measurement for a table: ``-`` for none, ``identical`` for an infinite SNR, ``-inf`` for minus infinity,
    else ``format(v, spec)``."""
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "identical" if v > 0 else "-inf"
    return format(v, spec)


def json_safe(v):
    """``v`` with infinities and NaN as strings (JSON has none), tuples as lists."""
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    if hasattr(v, "item"):
        return json_safe(v.item())
    return v


__all__ = ["COLUMN_WIDTH", "LABEL_WIDTH", "MAX_SIDE_BY_SIDE", "csv_text", "fits_side_by_side", "gate_failures",
           "json_safe", "markdown_text", "number"]
