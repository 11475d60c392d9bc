"""fusedrnn's float32 LSTM/GRU where users run it: beside other busy processes, and with large batches.

    python -m benchmarks.bench_load            # both parts, 10-20 minutes on 2 cores
    python -m benchmarks.bench_load --quick    # fewer rounds and cases, a few minutes

Part (a), *busy*: the benchmark starts ``--spinners`` (default 2) pure-Python busy processes, then times LSTM and
GRU (forward) at S1, S2 and S4 in one process, fusedrnn, onnxruntime and torch (where installed) in alternating
turns (:func:`benchmarks.common.interleaved_timing`). Each case's fusedrnn and onnxruntime medians are first
measured quiet (before the spinners start); a busy call over ``10×`` the library's own quiet median is counted as
a *stall*, for both libraries alike (a scheduler slice of a few milliseconds makes a 0.1 ms call a stall in any
library; a library that waits for a descheduled thread has many more). The spinners are killed at the end, also
when the run fails or is interrupted.

Part (b), *large*: quiet, LSTM and GRU, forward and bidirectional, B = 1024, 4096, 8192 at T=50 I=64 H=128 and
T=20 I=32 H=64, the same alternating timing.

Part (c), *cores* (``--part cores``, not in ``both``): quiet, LSTM and GRU forward at S2, S3 and T=50 B=4096 I=64
H=128 (plus LSTM bidirectional S2), every implementation with 1, 2, 4, 8, ... threads up to the CPUs this process
may use (``--thread-counts`` to choose), then each library's speed-up over its own one-thread time.

Every implementation runs with the same thread count (``--threads``, default: the CPUs this process may use). The
table gives medians, the worst call, and fusedrnn's time ÷ the peer's (below 1: fusedrnn faster). The first outputs
are compared (max |Δ| against onnxruntime; over ``--atol``: MISMATCH and exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from fusedrnn.cells import compiled

from .common import (
    SHAPES,
    ForeignLoad,
    PeerUnavailable,
    Shape,
    fusedrnn_runner,
    interleaved_timing,
    machine_facts,
    make_problem,
    max_abs_diff,
    ort_runner,
    set_threads,
    torch_runner,
)

BUSY_SHAPES = ("S1", "S2", "S4")
LARGE_SHAPES = ((50, 64, 128), (20, 32, 64))  # (T, I, H)
LARGE_BATCHES = (1024, 4096, 8192)
CORE_CASES = (("lstm", "forward", "S2"), ("lstm", "forward", "S3"), ("lstm", "forward", "B4096"),
              ("gru", "forward", "S2"), ("gru", "forward", "S3"), ("gru", "forward", "B4096"),
              ("lstm", "bidirectional", "S2"))
CORE_SHAPES = {**SHAPES, "B4096": Shape("B4096", 50, 4096, 64, 128)}
STALL_FACTOR = 10.0
SPIN = "import signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\nwhile True:\n    pass\n"


class Spinners:
    """``n`` busy child processes (pure-Python loops) for the lifetime of a ``with`` block; killed on exit."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        # a plain SIGTERM would end this process without running __exit__ and leave the spinners running
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN]))
        time.sleep(0.3)  # let them get going
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        return False


def _runners(p, with_torch: bool):
    runners = {"fusedrnn": fusedrnn_runner(p)}
    peers = [ort_runner] + ([torch_runner] if with_torch else [])
    for make in peers:
        try:
            r = make(p)
        except PeerUnavailable:
            continue
        runners[r.name] = r
    return runners


def _check(runners, atol: float) -> tuple[float | None, bool]:
    outs = {n: r.normalize(r.run()) for n, r in runners.items()}
    if "ORT" not in outs:
        return None, True
    d = max_abs_diff(outs["fusedrnn"], outs["ORT"])
    return d, d <= atol


def _time(runners, rounds: tuple[int, int], budget: float, gap: float):
    fns = {n: r.run for n, r in runners.items()}
    return interleaved_timing(fns, min_rounds=rounds[0], max_rounds=rounds[1], budget_s=budget, gap_s=gap)


def _row(case: str, timing, quiet: dict | None = None) -> dict:
    """One case's numbers; ``quiet``: each library's quiet median (s), for its stalls (calls over STALL_FACTOR×
    its own quiet median: the same measure for every library, so that a scheduler slice, which hits them all,
    is told apart from a library's own cliff)."""
    row = {"case": case}
    for n, xs in timing.samples.items():
        row[n] = {"median_ms": 1e3 * statistics.median(xs), "worst_ms": 1e3 * max(xs), "n": len(xs)}
        if quiet and n in quiet:
            row[n]["quiet_median_ms"] = 1e3 * quiet[n]
            row[n]["stalls"] = sum(x > STALL_FACTOR * quiet[n] for x in xs)
    f = timing.samples["fusedrnn"]
    for peer in ("ORT", "torch"):
        if peer in timing.samples:
            row[f"ratio_{peer}"] = statistics.median(f) / statistics.median(timing.samples[peer])
    if quiet:
        row["quiet_median_ms"] = row["fusedrnn"]["quiet_median_ms"]
        row["stalls"] = row["fusedrnn"]["stalls"]
    return row


def _fmt(row: dict, busy: bool) -> str:
    def cell(n):
        r = row.get(n)
        return f"{r['median_ms']:9.2f} {r['worst_ms']:9.2f}" if r else f"{'-':>9} {'-':>9}"

    s = f"{row['case']:<34} {cell('fusedrnn')} {cell('ORT')} {cell('torch')}"
    s += f" {row.get('ratio_ORT', float('nan')):7.2f}× {row.get('ratio_torch', float('nan')):7.2f}×"
    if busy:
        ort = row.get("ORT", {})
        s += f" {row['quiet_median_ms']:8.2f} {row['stalls']:4d}/{row['fusedrnn']['n']:<4d}"
        s += f" {ort.get('stalls', 0):4d}/{ort.get('n', 0):<4d}" if ort else f" {'-':>9}"
    if row.get("mismatch"):
        s += f"  MISMATCH max|Δ|={row['maxdiff']:.2e}"
    return s


def _header(busy: bool) -> str:
    s = f"{'case':<34} {'fused med':>9} {'worst':>9} {'ORT med':>9} {'worst':>9} {'torch med':>9} {'worst':>9}"
    s += f" {'f/ORT':>8} {'f/torch':>8}"
    if busy:
        s += f" {'quiet':>8} {'stalls':>9} {'ORT st.':>9}"
    return s + "   (ms)"


def busy_part(a, cells) -> list[dict]:
    """Quiet medians of fusedrnn and onnxruntime first, then every case again beside the spinners."""
    cases = [(c, SHAPES[s]) for c in cells for s in a.busy_shapes]
    quiet = {}
    problems = {}
    for cell, shape in cases:
        p = problems[(cell, shape.name)] = make_problem(cell, "forward", shape)
        runners = {n: r for n, r in _runners(p, False).items() if n in ("fusedrnn", "ORT")}
        t = _time(runners, (3, 5), a.budget / 2, a.gap)
        quiet[(cell, shape.name)] = {n: t.median(n) for n in runners}
    rows = []
    print(f"\n(a) beside {a.spinners} busy processes (spinners started by this benchmark)")
    print(_header(True))
    with Spinners(a.spinners):
        for cell, shape in cases:
            runners = _runners(problems[(cell, shape.name)], not a.no_torch)
            d, ok = _check(runners, a.atol)
            load = ForeignLoad()
            t = _time(runners, a.rounds, a.budget, a.gap)
            row = _row(f"{cell} forward {shape.label()}", t, quiet[(cell, shape.name)])
            row.update(maxdiff=d, mismatch=not ok, foreign=load.stop())
            rows.append(row)
            print(_fmt(row, True), flush=True)
    return rows


def large_part(a, cells) -> list[dict]:
    rows = []
    print("\n(b) quiet, large batches")
    print(_header(False))
    for T, I, H in a.large_shapes:
        for B in a.batches:
            for cell in cells:
                for direction in a.directions:
                    p = make_problem(cell, direction, Shape(f"B{B}", T, B, I, H))
                    runners = _runners(p, not a.no_torch)
                    d, ok = _check(runners, a.atol)
                    load = ForeignLoad()
                    t = _time(runners, a.rounds, a.budget, a.gap)
                    row = _row(f"{cell} {direction[:5]} T{T} B{B} I{I} H{H}", t)
                    row.update(maxdiff=d, mismatch=not ok, foreign=load.stop())
                    rows.append(row)
                    print(_fmt(row, False), flush=True)
    return rows


def thread_counts(cpus: int) -> list[int]:
    """1, 2, 4, ... below ``cpus``, then ``cpus``."""
    counts, n = [], 1
    while n < cpus:
        counts.append(n)
        n *= 2
    return counts + [cpus]


def cores_part(a, cells) -> list[dict]:
    """Each case at each thread count, every implementation with that many threads."""
    rows = []
    print(f"\n(c) quiet, threads {', '.join(map(str, a.thread_counts))}")
    print(f"{'threads':>7} " + _header(False))
    for cell, direction, shape in CORE_CASES:
        if cell not in cells:
            continue
        p = make_problem(cell, direction, CORE_SHAPES[shape])
        for n in a.thread_counts:
            set_threads(n)
            runners = _runners(p, not a.no_torch)
            d, ok = _check(runners, a.atol)
            load = ForeignLoad()
            pool0 = compiled.pool_stats() or {}
            t = _time(runners, a.rounds, a.budget, a.gap)
            row = _row(f"{cell} {direction[:5]} {CORE_SHAPES[shape].label()}", t)
            pool = {k: v - pool0[k] for k, v in (compiled.pool_stats() or {}).items()}  # what fusedrnn's helpers did
            row.update(threads=n, maxdiff=d, mismatch=not ok, foreign=load.stop(), pool=pool)
            rows.append(row)
            print(f"{n:7d} " + _fmt(row, False), flush=True)
    print("\nspeed-up over the library's own one-thread median (fusedrnn / ORT / torch):")
    by_case: dict[str, dict[int, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["threads"]] = r
    for case, per in by_case.items():
        if 1 not in per:
            continue
        cells_ = []
        for n, r in per.items():
            ups = [per[1][lib]["median_ms"] / r[lib]["median_ms"] if lib in r and lib in per[1] else float("nan")
                   for lib in ("fusedrnn", "ORT", "torch")]
            cells_.append(f"{n}: " + " / ".join(f"{u:.1f}" for u in ups))
        print(f"  {case:<34} " + "   ".join(cells_))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, B=1024 and 4096 only, forward only")
    ap.add_argument("--part", choices=("busy", "large", "both", "cores"), default="both")
    ap.add_argument("--cells", default="lstm,gru")
    ap.add_argument("--spinners", type=int, default=2, help="busy processes beside the timed one (default 2)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of every implementation (default: the CPUs this process may use)")
    ap.add_argument("--thread-counts", default=None,
                    help="comma list for --part cores (default: 1, 2, 4, ... and the CPUs this process may use)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--json", default=None, help="write every number here")
    a = ap.parse_args(argv)
    threads = a.threads or len(os.sched_getaffinity(0))
    print(set_threads(threads))
    a.busy_shapes = BUSY_SHAPES
    a.large_shapes = LARGE_SHAPES
    a.batches = LARGE_BATCHES[:2] if a.quick else LARGE_BATCHES
    a.directions = ("forward",) if a.quick else ("forward", "bidirectional")
    a.rounds = (3, 6) if a.quick else (3, 20)
    a.budget = 2.0 if a.quick else 3.0
    a.gap = 0.05
    cells = [c for c in a.cells.split(",") if c]
    out = {"machine": machine_facts(), "threads": threads, "argv": sys.argv[1:]}
    if a.part in ("busy", "both"):
        out["busy"] = busy_part(a, cells)
    if a.part in ("large", "both"):
        out["large"] = large_part(a, cells)
    if a.part == "cores":
        a.thread_counts = ([int(n) for n in a.thread_counts.split(",") if n] if a.thread_counts
                           else thread_counts(threads))
        out["cores"] = cores_part(a, cells)
    rows = out.get("busy", []) + out.get("large", []) + out.get("cores", [])
    bad = [r["case"] for r in rows if r.get("mismatch")]
    stalls = sum(r.get("stalls", 0) for r in rows)
    print(f"\nstalls (busy calls over {STALL_FACTOR:g}× the library's own quiet median; 'ORT st.' for "
          f"onnxruntime): fusedrnn {stalls}, onnxruntime {sum(r.get('ORT', {}).get('stalls', 0) for r in rows)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if bad:
        print("MISMATCH:", ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
