"""Integer SDK targets vs our own float32 engine on the anchor shapes, timed interleaved in one process.

Run from the repository root::

    python -m benchmarks.bench_int_targets            # S2, S4: mli2-sa8, litert-int8x16, quark; about 2 minutes
    python -m benchmarks.bench_int_targets --quick    # fewer rounds
    python -m benchmarks.bench_int_targets --targets mli2-sa8,litert-int8x16,quark,tflm-int8x16,cmsis-nn-s8
    python -m benchmarks.bench_int_targets --threads 1 --json benchmarks/results/int_targets.json
    python -m benchmarks.bench_int_targets --cpu-time  # one thread, CPU time per call (a busy shared machine)

Each shape builds one float LSTM layer from the benchmark problem (PyTorch-style init, inputs U(-1, 1)) and
prepares every target with the problem's own input as calibration (not timed). A timed call is ``layer(x)`` on the
float32 engine or ``emulated(x)`` on a target: float in, quantize, the integer kernel (its compiled loop when the
C kernels are built; ``FUSEDRNN_ENGINE=numpy`` times the NumPy loops), dequantize, float out. ``quark`` runs
bidirectional LSTMs only (Quark's kernel always runs both directions), so it is timed against the float32 engine's
bidirectional LSTM of the same shape; every other target against the forward one. All calls of a shape alternate
round-robin (:func:`benchmarks.common.interleaved_timing`: rotating order, an idle gap before each block), and
the ratio printed is the paired one: the median over rounds of target / float32 timed in the same round.
The goal (issue 18): ``mli2-sa8``, ``litert-int8x16`` and ``quark`` at most 1.0x on S2 and S4 (exit status 1
when one misses it, or when a target's result is far from float, max |diff| > 0.25: a broken quantization).
Absolute times on a shared machine are noisy; the paired ratio less so. On a machine that other processes keep
busy, ``--cpu-time`` times the process's CPU time per call instead of wall time, with every implementation on one
thread (``--threads 1``): what the other processes take is then not counted, nor time spent waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from .bench_float import Out
from .bench_mli import build_layer
from .common import (
    SHAPES,
    ForeignLoad,
    add_threads_option,
    interleaved_timing,
    machine_facts,
    make_problem,
    set_threads,
)

PROFILES = {"default": (5, 30, 12.0), "quick": (3, 8, 3.0)}
GOAL = {(t, s): 1.0 for t in ("mli2-sa8", "litert-int8x16", "quark") for s in ("S2", "S4")}  # issue 18
DEFAULT_TARGETS = "mli2-sa8,litert-int8x16,quark"
BIDIRECTIONAL_ONLY = {"quark"}


def run_shape(shape: str, targets: list[str], profile: tuple, clock=time.perf_counter) -> list[dict]:
    """Time the float32 layers and every target of one shape in the same rounds; one result per target."""
    fns, layers, emulated, refs = {}, {}, {}, {}
    for direction in ("forward", "bidirectional"):
        group = [t for t in targets if (t in BIDIRECTIONAL_ONLY) == (direction == "bidirectional")]
        if not group:
            continue
        p = make_problem("lstm", direction, SHAPES[shape])
        layer, x = build_layer(p), p.X
        base = f"fp32 {direction}"
        layers[base] = layer
        fns[base] = (lambda layer=layer, x=x: layer(x))
        refs[base] = layer(x)[0]
        for t in group:
            em = layer.to(t, calibration=x)
            emulated[t] = (base, em, x)
            fns[t] = (lambda em=em, x=x: em(x))
    load = ForeignLoad()
    timing = interleaved_timing(fns, min_rounds=profile[0], max_rounds=profile[1], budget_s=profile[2], clock=clock)
    foreign = load.stop()
    out = []
    for t, (base, em, x) in emulated.items():
        diff = float(np.abs(em(x)[0] - refs[base]).max())
        ratio = timing.paired_ratio(t, base)
        goal = GOAL.get((t, shape))
        out.append({"shape": shape, "label": SHAPES[shape].label(), "target": t, "baseline": base,
                    "fp32": timing.summary(base), "timing": timing.summary(t), "ratio_vs_fp32": ratio,
                    "goal_ratio": goal, "max_abs_diff_vs_fp32": diff,
                    "ok": (goal is None or ratio <= goal) and diff <= 0.25, "rounds": timing.rounds,
                    "foreign_cores": None if foreign is None else foreign["foreign_cores"]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="S2,S4")
    ap.add_argument("--targets", default=DEFAULT_TARGETS)
    ap.add_argument("--json", default=None)
    ap.add_argument("--plain", action="store_true", help="plain text instead of rich tables")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time each call's process CPU time, on one thread (implies --threads 1)")
    add_threads_option(ap)
    a = ap.parse_args(argv)
    if a.cpu_time:
        a.threads = 1
    if a.threads:
        set_threads(a.threads)
    out = Out(a.plain)
    profile = PROFILES["quick" if a.quick else "default"]
    targets = a.targets.split(",")
    clock = time.process_time if a.cpu_time else time.perf_counter
    results = [r for shape in a.shapes.split(",") for r in run_shape(shape, targets, profile, clock)]
    rows, styles = [], []
    for r in results:
        goal = "-" if r["goal_ratio"] is None else f"<= {r['goal_ratio']:.1f}x"
        rows.append([r["shape"], r["target"], r["baseline"], f"{r['fp32']['median_ms']:.2f}",
                     f"{r['timing']['median_ms']:.2f}", f"{r['ratio_vs_fp32']:.2f}x", goal,
                     f"{r['max_abs_diff_vs_fp32']:.3g}"])
        styles.append([None] * 8 if r["ok"] else [None] * 5 + ["red", "red", None])
    out.table(f"Integer targets vs our float32, {'CPU time, one thread' if a.cpu_time else 'wall time'} (ratio = "
              "median over rounds of target / fp32, timed in the same round)",
              ["shape", "target", "baseline", "fp32 ms", "target ms", "ratio", "goal", "max|diff|"], rows, styles)
    facts = machine_facts()
    loads = sorted({round(r["foreign_cores"], 2) for r in results if r["foreign_cores"] is not None})
    out.line(f"machine: {facts.get('cpu', '?')}, {facts.get('cpus_usable', '?')} cores; foreign load during timing: "
             + (", ".join(f"{x:.2f}" for x in loads) or "n/a") + " cores (other processes; > 0.1 makes times noisy)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": facts, "clock": "process_time" if a.cpu_time else "perf_counter",
                       "threads": a.threads, "results": results}, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
