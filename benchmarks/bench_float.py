"""Float32 LSTM/GRU: fusedrnn vs onnxruntime vs PyTorch, timed interleaved in one process.

Run from the repository root::

    python -m benchmarks.bench_float                 # full run, about 2-4 minutes on 2 cores
    python -m benchmarks.bench_float --quick         # fewer repeats, well under a minute
    python -m benchmarks.bench_float --shapes S1,S2 --cells lstm --json benchmarks/results/float.json
    python -m benchmarks.bench_float --breakdown     # also split fusedrnn's time into GEMMs and the rest

Exit status 1 when an implementation disagrees with fusedrnn by more than ``--atol`` or fusedrnn fails.
See benchmarks/README.md for how to read the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import numpy as np

from .common import (
    PEER_FACTORIES,
    SHAPES,
    VARIANTS,
    ForeignLoad,
    PeerUnavailable,
    Problem,
    Runner,
    fusedrnn_runner,
    interleaved_timing,
    machine_facts,
    make_problem,
    max_abs_diff,
    ort_session_options,
    ort_session_options_facts,
    set_threads,
)

try:
    from rich.console import Console
    from rich.table import Table
except ImportError:  # plain-text fallback
    Console = Table = None

PEERS = ("ORT", "torch")

# (min rounds, max rounds, timed seconds per case, warm-up seconds per case)
PROFILES = {"default": (7, 60, 8.0, 0.5), "quick": (3, 10, 1.0, 0.1)}


# --------------------------------------------------------------------------------------------------------
# output helpers


class Out:
    """Print through rich when it is importable, as plain text otherwise."""

    def __init__(self, plain: bool):
        self.console = None
        if not plain and Console is not None:
            c = Console(highlight=False)
            # a pipe or file gets rich's 80 columns by default: too narrow for the table
            self.console = c if c.is_terminal else Console(highlight=False, width=160)

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.console is not None:
            self.console.print(text, style=style, markup=False)
        else:
            print(text, flush=True)

    def table(self, title: str, headers: list[str], rows: list[list[str]], styles: list[list[str | None]]):
        if self.console is not None:
            t = Table(title=title, title_justify="left")
            for i, h in enumerate(headers):
                t.add_column(h, justify="left" if i < 3 else "right", no_wrap=True)
            for row, st in zip(rows, styles, strict=True):
                t.add_row(*[cell if s is None else f"[{s}]{cell}[/]" for cell, s in zip(row, st, strict=True)])
            self.console.print(t)
            return
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

        def fmt(cells):
            return "  ".join(
                c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )

        print(title)
        print(fmt(headers))
        print("  ".join("-" * w for w in widths))
        for r in rows:
            print(fmt(r))
        print(flush=True)


def _ms(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}"


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _diff(x: float | None) -> str:
    return "—" if x is None else ("inf" if x == float("inf") else f"{x:.1e}")


# --------------------------------------------------------------------------------------------------------
# one case

NOISY_CORES = 0.1  # other processes' average CPU use (in cores) above which a case is flagged as noisy


def _noise(res: dict) -> float:
    """Other processes' CPU use during a case (timing and breakdown), in cores; 0 where unknown."""
    loads = [res.get("foreign_load"), (res.get("breakdown") or {}).get("foreign_load")]
    return max([x["foreign_cores"] for x in loads if x] or [0.0])


def wait_quiet(max_s: float, threshold: float = 0.05) -> float:
    """Wait (up to ``max_s`` seconds) until other processes use < ``threshold`` cores over one second."""
    start = time.perf_counter()
    while time.perf_counter() - start < max_s:
        load = ForeignLoad()
        time.sleep(1.0)
        r = load.stop()
        if r is None or r["foreign_cores"] < threshold:
            break
    return time.perf_counter() - start


def _warm_up(runners: dict[str, Runner], seconds: float) -> tuple[dict, dict, dict]:
    """Call every runner at least once (until ``seconds`` have passed, at most 5 rounds).

    Returns, per implementation, the outputs of the first call in ONNX layout, the error message of a runner
    that raised (it is dropped from the timing) and the time of its last call (to size the timing blocks).
    """
    outs, errors, est = {}, {}, {}
    start = time.perf_counter()
    for r in range(5):
        for name, runner in list(runners.items()):
            try:
                t0 = time.perf_counter()
                raw = runner.run()
                est[name] = time.perf_counter() - t0
                if r == 0:
                    outs[name] = runner.normalize(raw)
            except Exception as e:  # report, keep benchmarking the others
                errors[name] = f"{type(e).__name__}: {e}"
                del runners[name]
                est.pop(name, None)
        if time.perf_counter() - start >= seconds:
            break
    return outs, errors, est


def run_case(p: Problem, peers: list[str], profile: tuple, atol: float) -> dict:
    min_rounds, max_rounds, budget_s, warmup_s = profile
    runners: dict[str, Runner] = {}
    errors: dict[str, str] = {}
    skipped: dict[str, str] = {}
    factories: list[tuple[str, Callable[[Problem], Runner]]] = [("fusedrnn", fusedrnn_runner)]
    factories += [(n, PEER_FACTORIES[n]) for n in peers]
    for name, factory in factories:
        try:
            runners[name] = factory(p)
        except PeerUnavailable as e:
            skipped[name] = str(e)
        except Exception as e:
            errors[name] = f"setup failed: {type(e).__name__}: {e}"

    load = ForeignLoad()
    outs, run_errors, est = _warm_up(runners, warmup_s)
    errors.update(run_errors)

    diffs: dict[str, float | None] = {}
    if "fusedrnn" in outs:
        for n in PEERS:
            diffs[n] = max_abs_diff(outs["fusedrnn"], outs[n]) if n in outs else None
    # peers against each other: tells whether a disagreement is fusedrnn's or the test setup's
    diffs["ORT~torch"] = max_abs_diff(outs["ORT"], outs["torch"]) if "ORT" in outs and "torch" in outs else None

    timing = interleaved_timing(
        {n: r.run for n, r in runners.items()},
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        budget_s=budget_s,
        estimates=est,
    )
    foreign = load.stop()
    s = p.shape
    med = {n: timing.median(n) for n in runners}
    res = {
        "cell": p.cell,
        "direction": p.direction,
        "shape": {"name": s.name, "T": s.T, "B": s.B, "I": s.I, "H": s.H},
        "gemm_gflop_per_call": p.flops() / 1e9,
        "rounds": timing.rounds,
        "wall_s": timing.wall_s,
        "timings": {n: timing.summary(n) for n in runners},
        "samples_ms": {n: [1e3 * t for t in timing.samples[n]] for n in runners},
        "ratio": {},  # median(fusedrnn) / median(peer)
        "paired_ratio": {},  # median over rounds of fusedrnn / peer in the same round
        "max_abs_diff": diffs,
        "mismatch": sorted(n for n in PEERS if diffs.get(n) is not None and not diffs[n] <= atol),
        "errors": errors,
        "skipped": skipped,
        "foreign_load": foreign,
    }
    if med.get("fusedrnn"):
        for n in PEERS:
            if med.get(n):
                res["ratio"][n] = med["fusedrnn"] / med[n]
                res["paired_ratio"][n] = timing.paired_ratio("fusedrnn", n)
    return res


# --------------------------------------------------------------------------------------------------------
# fusedrnn time breakdown (numpy GEMM model of the engine)


def gemm_breakdown(p: Problem, budget_s: float) -> dict:
    """Time, with plain numpy, the GEMMs a NumPy engine cannot avoid, shaped as fusedrnn issues them.

    * input projection: one [T*B, I] x [I, G*H] GEMM per direction plus the bias add, before the loop;
    * recurrent GEMMs: T matmuls of [D, B, H] x [D, H, G*H] (one batched call per step).

    Both are timed interleaved with fusedrnn itself (3-15 rounds); what is left of fusedrnn's time is the
    per-step elementwise work (activations, cell update) plus Python/NumPy call overhead.
    """
    s, D, G = p.shape, p.D, p.G
    T, B, I, H = s.T, s.B, s.I, s.H
    x2 = p.X.reshape(T * B, I)
    WT = [np.ascontiguousarray(p.W[d].T) for d in range(D)]
    bias = p.B[:, : G * H] + p.B[:, G * H :]
    G_out = np.empty((D, T * B, G * H), np.float32)

    def proj():
        for d in range(D):
            np.matmul(x2, WT[d], out=G_out[d])
            G_out[d] += bias[d]

    RT = np.ascontiguousarray(p.R.transpose(0, 2, 1))  # [D, H, G*H]
    h = np.tanh(np.broadcast_to(p.X[0, :, :1], (D, B, H))).astype(np.float32)
    acc = np.empty((D, B, G * H), np.float32)

    def rec():
        for _ in range(T):
            np.matmul(h, RT, out=acc)

    fns = {"fusedrnn": fusedrnn_runner(p).run, "proj": proj, "rec": rec}
    for fn in fns.values():
        fn()
    load = ForeignLoad()
    t = interleaved_timing(fns, min_rounds=3, max_rounds=15, budget_s=budget_s)
    return {
        "fusedrnn_ms": 1e3 * t.median("fusedrnn"),
        "proj_ms": 1e3 * t.median("proj"),
        "rec_ms": 1e3 * t.median("rec"),
        "rounds": t.rounds,
        "foreign_load": load.stop(),
    }


# --------------------------------------------------------------------------------------------------------
# main


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_float", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (3-10 rounds, ~1 s per case; about 1 minute)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {','.join(SHAPES)}")
    ap.add_argument("--cells", default="lstm,gru", help="comma list of lstm,gru")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma list of ORT,torch (empty: fusedrnn only)")
    ap.add_argument("--json", metavar="PATH", help="save machine facts, settings and all samples as JSON")
    ap.add_argument("--budget", type=float, help="timed seconds per case once --min-rounds are done")
    ap.add_argument("--min-rounds", type=int, help="minimum interleaved rounds per case")
    ap.add_argument("--max-rounds", type=int, help="maximum interleaved rounds per case")
    ap.add_argument("--atol", type=float, default=1e-4, help="max |Δ| allowed vs each peer (default 1e-4)")
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the input-projection and recurrent GEMMs alone (fusedrnn's GEMM floor)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="limit numpy BLAS, ORT and torch to N threads (default: each library's own default)",
    )
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each case wait up to S seconds until other processes leave the CPU idle (shared machines)",
    )
    ap.add_argument(
        "--retries",
        type=int,
        default=0,
        metavar="N",
        help=f"re-run a case up to N times when other processes used > {NOISY_CORES} cores during it; "
        "the quietest attempt is kept",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="plain-text output even when rich is installed")
    a = ap.parse_args(argv)

    def split(v: str, allowed, what: str) -> list[str]:
        items = [x.strip() for x in v.split(",") if x.strip()]
        canon = {k.lower(): k for k in allowed}
        bad = [x for x in items if x.lower() not in canon]
        if bad:
            ap.error(f"--{what}: unknown {', '.join(bad)}; expected a subset of {','.join(allowed)}")
        return [canon[x.lower()] for x in items]

    a.shapes = split(a.shapes, list(SHAPES), "shapes")
    a.cells = split(a.cells, sorted({c for c, _ in VARIANTS}), "cells")
    a.peers = split(a.peers, list(PEERS), "peers")
    mn, mx, bud, wu = PROFILES["quick" if a.quick else "default"]
    a.profile = (
        a.min_rounds or mn,
        max(a.max_rounds or mx, a.min_rounds or mn),
        bud if a.budget is None else a.budget,
        wu,
    )
    return a


def _print_facts(out: Out, facts: dict, ort_opts: dict | None) -> None:
    out.line("Machine", style="bold")
    out.line(f"  CPU: {facts['cpu']}  ({facts['cpu_count']} logical CPUs, {facts['cpus_usable']} usable)")
    out.line(f"  Python {facts['python']} on {facts['platform']}")
    out.line(f"  numpy {facts['numpy']}; BLAS: {facts['numpy_blas']}")
    if facts.get("threadpools"):
        out.line(f"  thread pools: {facts['threadpools']}")
    out.line(f"  fusedrnn {facts['fusedrnn'] or '(not installed)'}")
    out.line(f"  onnxruntime {facts['onnxruntime'] or '(not installed: skipped)'}")
    if ort_opts:
        out.line(
            "    session options: intra_op_num_threads={intra_op_num_threads} (0 = ORT default, one per "
            "physical core), inter_op_num_threads={inter_op_num_threads}, {execution_mode}, "
            "{graph_optimization_level}; providers {providers}".format(**ort_opts)
        )
    if facts["torch"]:
        out.line(
            f"  torch {facts['torch']}: {facts['torch_threads']} intra-op threads, "
            f"mkldnn {'available' if facts['torch_mkldnn'] else 'unavailable'}; "
            "runs under torch.inference_mode()"
        )
    else:
        out.line("  torch (not installed: skipped)")
    if facts["env"]:
        out.line(f"  env: {facts['env']}")


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Out(args.plain)
    peers = list(args.peers)
    # import the peers up front so their thread pools show in the facts, and drop missing ones cleanly
    ort_opts = None
    if "ORT" in peers:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            peers.remove("ORT")
    if "torch" in peers:
        try:
            import torch  # noqa: F401
        except ImportError:
            peers.remove("torch")
    threads_note = "each library's default (all cores)"
    if args.threads is not None:
        try:
            threads_note = set_threads(args.threads)
        except RuntimeError as e:
            out.line(f"error: {e}", style="bold red")
            return 2
    if "ORT" in peers:
        ort_opts = ort_session_options_facts(ort_session_options(args.threads))

    facts = machine_facts()
    _print_facts(out, facts, ort_opts)
    out.line(f"  threads: {threads_note}")
    load = facts.get("load_average")
    if load and load[0] > 0.5:
        out.line(
            f"  warning: load average {load[0]:.2f} before the run -- other processes are using the CPU, "
            "timings will be noisy",
            style="bold yellow",
        )
    mn, mx, bud, _ = args.profile
    out.line(
        f"Timing: {mn}-{mx} interleaved rounds per case (stop after {bud:g} s once {mn} are done); a round gives "
        "each implementation, in rotated order, an idle gap of 0.15 s, untimed warm calls and a block of timed "
        f"calls (~50 ms); median per call. Agreement tolerance max|Δ| <= {args.atol:g}"
    )
    out.line("")

    cases = [(c, d, SHAPES[s]) for c, d in VARIANTS if c in args.cells for s in SHAPES if s in args.shapes]
    results = []
    t_start = time.perf_counter()
    for cell, direction, shape in cases:
        p = make_problem(cell, direction, shape, seed=args.seed)
        res = None
        for attempt in range(1 + args.retries):
            if args.wait_quiet:
                waited = wait_quiet(args.wait_quiet)
                if waited > 1.5:
                    out.line(f"  (waited {waited:.0f} s for other processes to go quiet)", style="dim")
            new = run_case(p, peers, args.profile, args.atol)
            if args.breakdown and "fusedrnn" in new["timings"]:
                new["breakdown"] = gemm_breakdown(p, budget_s=args.profile[2] / 3)
            new["attempt"] = attempt + 1
            if res is None or _noise(new) < _noise(res):
                res = new
            if _noise(new) <= NOISY_CORES:
                break
            if attempt < args.retries:
                out.line(
                    f"  {cell} {direction} {shape.name}: other processes used {_noise(new):.2f} cores, retrying",
                    style="yellow",
                )
        results.append(res)
        meds = ", ".join(f"{n} {_ms(v['median_ms'])} ms" for n, v in res["timings"].items() if v)
        fl = res["foreign_load"]
        if fl is not None:
            meds += f"; other processes {fl['foreign_cores']:.2f} cores"
        out.line(
            f"  {cell:4s} {direction:13s} {shape.name}: {res['rounds']} rounds in {res['wall_s']:.1f} s -- {meds}",
            style="dim",
        )
        for n, e in res["errors"].items():
            out.line(f"    {n} ERROR: {e}", style="bold red")
    total_s = time.perf_counter() - t_start
    out.line("")

    headers = [
        "cell",
        "direction",
        "shape",
        "fusedrnn ms",
        "ORT ms",
        "torch ms",
        "fused/ORT",
        "fused/torch",
        "max|Δ| ORT",
        "max|Δ| torch",
        "rounds",
    ]
    rows, styles = [], []
    for r in results:
        tm, ratio, dif = r["timings"], r["ratio"], r["max_abs_diff"]

        def med(n, tm=tm, r=r):
            if n in r["errors"]:
                return "error"
            if n in r["skipped"] or n not in tm:
                return "—"
            return _ms(tm[n]["median_ms"])

        s = r["shape"]
        rows.append(
            [
                r["cell"],
                r["direction"],
                f"{s['name']} {s['T']}×{s['B']}×{s['I']}→{s['H']}",
                med("fusedrnn"),
                med("ORT"),
                med("torch"),
                _ratio(ratio.get("ORT")),
                _ratio(ratio.get("torch")),
                _diff(dif.get("ORT")),
                _diff(dif.get("torch")),
                str(r["rounds"]),
            ]
        )

        def rstyle(x):
            return None if x is None else ("green" if x <= 1.0 else "red" if x >= 2.0 else "yellow")

        styles.append(
            [
                None,
                None,
                None,
                "bold red" if "fusedrnn" in r["errors"] else None,
                None,
                None,
                rstyle(ratio.get("ORT")),
                rstyle(ratio.get("torch")),
                "bold red" if "ORT" in r["mismatch"] else None,
                "bold red" if "torch" in r["mismatch"] else None,
                None,
            ]
        )
    out.table(
        "fusedrnn vs onnxruntime vs PyTorch, float32, median ms per call (ratio < 1: fusedrnn faster)",
        headers,
        rows,
        styles,
    )

    if args.breakdown:
        bh = [
            "cell",
            "direction",
            "shape",
            "fusedrnn ms",
            "input proj ms",
            "recurrent GEMMs ms",
            "rest ms",
            "rest µs/step",
            "GEMM share",
            "GFLOP/s call",
            "GFLOP/s GEMMs",
        ]
        brows = []
        for r in results:
            b = r.get("breakdown")
            if not b:
                continue
            f = b["fusedrnn_ms"]
            gemm = b["proj_ms"] + b["rec_ms"]
            rest = f - gemm
            s = r["shape"]
            gf = r["gemm_gflop_per_call"]
            brows.append(
                [
                    r["cell"],
                    r["direction"],
                    s["name"],
                    _ms(f),
                    _ms(b["proj_ms"]),
                    _ms(b["rec_ms"]),
                    _ms(rest),
                    f"{1e3 * rest / s['T']:.1f}",
                    f"{100 * gemm / f:.0f}%",
                    f"{gf / (f / 1e3):.1f}",
                    f"{gf / (gemm / 1e3):.1f}",
                ]
            )
        out.table(
            "fusedrnn time breakdown, timed interleaved with fusedrnn: the input projection (GEMM + bias) and "
            "the T recurrent GEMMs alone in numpy; rest = elementwise work + Python overhead; "
            "GFLOP/s counts GEMM FLOPs only",
            bh,
            brows,
            [[None] * len(bh)] * len(brows),
        )

    mismatches = [(r, n) for r in results for n in r["mismatch"]]
    failed = [r for r in results if "fusedrnn" in r["errors"]]
    for r, n in mismatches:
        out.line(
            f"MISMATCH: {r['cell']} {r['direction']} {r['shape']['name']}: fusedrnn vs {n} max|Δ| = "
            f"{r['max_abs_diff'][n]:.3g} > atol {args.atol:g} (ORT~torch: "
            f"{_diff(r['max_abs_diff'].get('ORT~torch'))})",
            style="bold red",
        )
    for r in failed:
        out.line(
            f"FAILED: {r['cell']} {r['direction']} {r['shape']['name']}: fusedrnn raised {r['errors']['fusedrnn']}",
            style="bold red",
        )
    noisy = [r for r in results if _noise(r) > NOISY_CORES]
    if noisy:
        names = ", ".join(f"{r['cell']} {r['direction']} {r['shape']['name']}" for r in noisy)
        out.line(
            f"warning: other processes used > {NOISY_CORES} cores during {len(noisy)} case(s) ({names}); "
            "re-run those on a quiet machine",
            style="bold yellow",
        )
    skipped = sorted({f"{n} ({msg})" for r in results for n, msg in r["skipped"].items()})
    if skipped:
        out.line(f"skipped: {'; '.join(skipped)}", style="yellow")
    ratios = {n: [r["ratio"][n] for r in results if n in r["ratio"]] for n in PEERS}
    geo = {n: float(np.exp(np.mean(np.log(v)))) for n, v in ratios.items() if v}
    if geo:
        out.line("geometric mean of ratios: " + ", ".join(f"fusedrnn/{n} {g:.2f}×" for n, g in geo.items()))
    out.line(f"total {total_s:.0f} s")

    if args.json:
        import os

        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        doc = {
            "benchmark": "bench_float",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": facts,
            "ort_session_options": ort_opts,
            "settings": {
                "min_rounds": mn,
                "max_rounds": mx,
                "budget_s": bud,
                "atol": args.atol,
                "seed": args.seed,
                "peers": peers,
                "quick": args.quick,
                "threads": args.threads,
            },
            "geomean_ratio": geo,
            "total_s": total_s,
            "results": results,
        }
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        out.line(f"saved {args.json}")
    return 1 if mismatches or failed else 0


if __name__ == "__main__":
    sys.exit(main())
