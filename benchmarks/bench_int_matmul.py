"""Exact int8 GEMM: fusedrnn's int_matmul / IntMatrix vs float32 sgemm vs NumPy's int32 matmul, timed interleaved.

Run from the repository root::

    python -m benchmarks.bench_int_matmul              # about 2-3 minutes on 2 cores
    python -m benchmarks.bench_int_matmul --quick      # fewer repeats, about 1 minute
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.bench_int_matmul --quick
    python -m benchmarks.bench_int_matmul --cases step --json benchmarks/results/int_matmul.json

Cases are int8 a [M, K] @ int8 b [K, N] with K in {64, 256, 1024}: "step" shapes of one RNN step's recurrent
GEMM (M = batch 1..64, N = 4H = 512..1024) and "proj" shapes of a hoisted input projection (M = T*B = 2048).
Timed per case, in the same rounds:

* ``int_matmul``  -- ``int_matmul(a, b)``: int8 operands in, exact int64 out; converts b every call.
* ``IntMatrix``   -- ``IntMatrix(b, a_absmax=np.int8).matmul(a)`` with b prepared once (the hot-loop form).
* ``sgemm``       -- ``np.matmul(a_f, b_f)`` on float32 copies of the same operands (converted outside the timing).
* ``int32``       -- ``np.matmul(a_i, b_i)`` on int32 copies: NumPy's integer matmul, which does not use BLAS.

The issue's targets: int8 at K <= 1024 within 1.5x of sgemm, and >= 50x faster than NumPy's int32 matmul. The
fusedrnn results are checked bit for bit against NumPy's int32 product (exact here: |sum| <= 1024*128*128 = 2^24).
Exit status 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from .bench_float import Out, wait_quiet
from .common import ForeignLoad, interleaved_timing, machine_facts, set_threads

KS = (64, 256, 1024)
STEP_MS = (1, 8, 64)
STEP_NS = (512, 1024)
PROJ_M, PROJ_N = 2048, 1024

# (min rounds, max rounds, timed seconds per case)
PROFILES = {"default": (5, 40, 3.0), "quick": (3, 10, 0.8)}
NOISY_CORES = 0.1
TARGET_VS_SGEMM = 1.5
TARGET_VS_INT32 = 50.0


def cases(which: list[str]) -> list[tuple[str, int, int, int]]:
    out = []
    if "step" in which:
        out += [("step", m, k, n) for k in KS for n in STEP_NS for m in STEP_MS]
    if "proj" in which:
        out += [("proj", PROJ_M, k, PROJ_N) for k in KS]
    return out


def run_case(kind: str, M: int, K: int, N: int, profile: tuple, seed: int, stat: str = "median") -> dict:
    from fusedrnn.numerics.int_matmul import IntMatrix, int_matmul

    min_rounds, max_rounds, budget_s = profile
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, :] = -128  # the extreme corner: |sum| reaches K * 2^14
    b[:, 0] = -128
    af, bf = a.astype(np.float32), b.astype(np.float32)
    ai, bi = a.astype(np.int32), b.astype(np.int32)
    prepared = IntMatrix(b, a_absmax=np.int8)

    fns = {
        "int_matmul": lambda: int_matmul(a, b),
        "IntMatrix": lambda: prepared.matmul(a),
        "sgemm": lambda: np.matmul(af, bf),
        "int32": lambda: np.matmul(ai, bi),
    }
    # warm up (and agreement): every implementation once, timing the call to size the timing blocks
    est, outs = {}, {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        outs[name] = fn()
        est[name] = time.perf_counter() - t0
    for name in ("int_matmul", "IntMatrix"):
        fn = fns[name]
        for _ in range(3 if est[name] > 0.05 else 20):
            fn()
    exact = {n: bool(np.array_equal(outs[n], outs["int32"])) and outs[n].dtype == np.int64
             for n in ("int_matmul", "IntMatrix")}
    load = ForeignLoad()
    t = interleaved_timing(fns, min_rounds=min_rounds, max_rounds=max_rounds, budget_s=budget_s, estimates=est)
    foreign = load.stop()
    # median call (default), or the fastest call: on a shared machine the minimum is the less noisy estimate of
    # what the code costs, the median what a caller sees
    med = {n: (t.median(n) if stat == "median" else min(t.samples[n])) for n in fns}
    return {
        "kind": kind,
        "M": M,
        "K": K,
        "N": N,
        "float_dtype": np.dtype(prepared.dtype).name,
        "stat": stat,
        "us": {n: 1e6 * v for n, v in med.items()},
        "summary": {n: t.summary(n) for n in fns},
        "ratio_vs_sgemm": {n: med[n] / med["sgemm"] for n in ("int_matmul", "IntMatrix")},
        "paired_ratio_vs_sgemm": {n: t.paired_ratio(n, "sgemm") for n in ("int_matmul", "IntMatrix")},
        "speedup_vs_int32": {n: med["int32"] / med[n] for n in ("int_matmul", "IntMatrix")},
        "exact": exact,
        "rounds": t.rounds,
        "wall_s": t.wall_s,
        "foreign_load": foreign,
    }


def _us(x: float) -> str:
    return f"{x:.1f}" if x < 1e4 else f"{x:.0f}"


def _geo(xs: list[float]) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_int_matmul", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (3-10 rounds, ~0.8 s per case)")
    ap.add_argument("--cases", default="step,proj", help="comma list of step,proj")
    ap.add_argument("--budget", type=float, help="timed seconds per case once the minimum rounds are done")
    ap.add_argument("--threads", type=int, metavar="N", help="limit numpy's BLAS to N threads (threadpoolctl)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="before each case wait up to S seconds until other processes leave the CPU idle")
    ap.add_argument("--json", metavar="PATH", help="save machine facts, settings and all results as JSON")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per-call statistic the table and ratios use (min: fastest call, robust on a busy machine)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="plain-text output even when rich is installed")
    a = ap.parse_args(argv)
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in a.cases if c not in ("step", "proj")]
    if bad:
        ap.error(f"--cases: unknown {', '.join(bad)}; expected a subset of step,proj")
    mn, mx, bud = PROFILES["quick" if a.quick else "default"]
    a.profile = (mn, mx, bud if a.budget is None else a.budget)
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Out(args.plain)
    threads_note = "numpy's BLAS default (OPENBLAS_NUM_THREADS etc., else all cores; see thread pools)"
    if args.threads is not None:
        try:
            threads_note = set_threads(args.threads)
        except RuntimeError as e:
            out.line(f"error: {e}", style="bold red")
            return 2
    facts = machine_facts()
    out.line("Machine", style="bold")
    out.line(f"  CPU: {facts['cpu']}  ({facts['cpu_count']} logical CPUs, {facts['cpus_usable']} usable)")
    out.line(f"  Python {facts['python']}; numpy {facts['numpy']}; BLAS: {facts['numpy_blas']}")
    if facts.get("threadpools"):
        out.line(f"  thread pools: {facts['threadpools']}")
    out.line(f"  threads: {threads_note}" + (f"; env: {facts['env']}" if facts["env"] else ""))
    load = facts.get("load_average")
    if load and load[0] > 0.5:
        out.line(f"  warning: load average {load[0]:.2f} before the run -- other processes are using the CPU, "
                 "timings will be noisy", style="bold yellow")
    mn, mx, bud = args.profile
    out.line(f"Timing: {mn}-{mx} interleaved rounds per case (stop after {bud:g} s once {mn} are done), idle gap "
             f"0.15 s before each turn, {args.stat} per call")
    out.line("")

    results = []
    t_start = time.perf_counter()
    for kind, M, K, N in cases(args.cases):
        if args.wait_quiet:
            waited = wait_quiet(args.wait_quiet)
            if waited > 1.5:
                out.line(f"  (waited {waited:.0f} s for other processes to go quiet)", style="dim")
        r = run_case(kind, M, K, N, args.profile, args.seed, args.stat)
        results.append(r)
        fl = r["foreign_load"]
        out.line(f"  {kind} {M}x{K}x{N}: {r['rounds']} rounds in {r['wall_s']:.1f} s"
                 + (f"; other processes {fl['foreign_cores']:.2f} cores" if fl else ""), style="dim")
    total_s = time.perf_counter() - t_start
    out.line("")

    headers = ["case", "M×K×N", "int_mm µs", "IntMat µs", "sgemm µs", "int32 µs", "int_mm/sg", "IntMat/sg",
               "i32/int_mm", "i32/IntMat", "exact", "others"]
    rows, styles = [], []
    for r in results:
        u, rs, sp = r["us"], r["ratio_vs_sgemm"], r["speedup_vs_int32"]
        fl = r["foreign_load"]
        rows.append([
            r["kind"], f"{r['M']}×{r['K']}×{r['N']}", _us(u["int_matmul"]), _us(u["IntMatrix"]), _us(u["sgemm"]),
            _us(u["int32"]), f"{rs['int_matmul']:.2f}×", f"{rs['IntMatrix']:.2f}×", f"{sp['int_matmul']:.0f}×",
            f"{sp['IntMatrix']:.0f}×", "yes" if all(r["exact"].values()) else "NO",
            f"{fl['foreign_cores']:.2f}" if fl else "—",
        ])

        def vs_sgemm(x):
            return "green" if x <= TARGET_VS_SGEMM else "red"

        def vs_int32(x):
            return "green" if x >= TARGET_VS_INT32 else "yellow"

        styles.append([None] * 6 + [vs_sgemm(rs["int_matmul"]), vs_sgemm(rs["IntMatrix"]), vs_int32(sp["int_matmul"]),
                       vs_int32(sp["IntMatrix"]), None if all(r["exact"].values()) else "bold red",
                       "yellow" if fl and fl["foreign_cores"] > NOISY_CORES else None])
    out.table(f"int8 x int8 -> exact int64, {args.stat} µs per call. int_mm = int_matmul(a, b), IntMat = "
              "IntMatrix.matmul(a) (b prepared), sg = float32 sgemm, i32 = NumPy int32 matmul; x/sg: lower is better, "
              "i32/x: higher is better; others = CPU cores used by other processes", headers, rows, styles)

    for name in ("int_matmul", "IntMatrix"):
        rs = [r["ratio_vs_sgemm"][name] for r in results]
        sp = [r["speedup_vs_int32"][name] for r in results]
        out.line(f"{name}: within {TARGET_VS_SGEMM}× of sgemm in {sum(x <= TARGET_VS_SGEMM for x in rs)}/{len(rs)} "
                 f"cases (geomean {_geo(rs):.2f}×, worst {max(rs, default=float('nan')):.2f}×); >= "
                 f"{TARGET_VS_INT32:.0f}× faster than int32 matmul in {sum(x >= TARGET_VS_INT32 for x in sp)}/"
                 f"{len(sp)} (geomean {_geo(sp):.0f}×, worst {min(sp, default=float('nan')):.0f}×)")
    bad = [r for r in results if not all(r["exact"].values())]
    for r in bad:
        out.line(f"MISMATCH: {r['kind']} {r['M']}x{r['K']}x{r['N']}: {r['exact']}", style="bold red")
    noisy = [r for r in results if r["foreign_load"] and r["foreign_load"]["foreign_cores"] > NOISY_CORES]
    if noisy:
        out.line(f"warning: other processes used > {NOISY_CORES} cores during {len(noisy)} of {len(results)} cases; "
                 "re-run on a quiet machine (or with --wait-quiet 60)", style="bold yellow")
    out.line(f"total {total_s:.0f} s")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        doc = {
            "benchmark": "bench_int_matmul",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": facts,
            "settings": {"profile": args.profile, "cases": args.cases, "threads": args.threads, "seed": args.seed},
            "total_s": total_s,
            "results": results,
        }
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        out.line(f"saved {args.json}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
