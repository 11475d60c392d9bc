"""embARC MLI targets vs the float32 engine on the same layer, timed interleaved in one process.

Run from the repository root::

    python -m benchmarks.bench_mli                  # S2 LSTM: fp32 vs mli2-sa8, about a minute on 2 cores
    python -m benchmarks.bench_mli --quick          # fewer rounds
    python -m benchmarks.bench_mli --targets mli2-sa8,mli2-fx16,mli2-fx16_fx8_fx8 --cells lstm,gru
    python -m benchmarks.bench_mli --json benchmarks/results/mli.json

Each case builds one float layer from the benchmark problem (PyTorch-style init, inputs U(-1, 1)), prepares the
MLI target with the problem's own input as calibration (not timed), and times ``layer(x)`` on the float32 engine
and on the integer MLI kernels in the same rounds (the compiled MLI loops when a C compiler is available;
``FUSEDRNN_ENGINE=numpy`` times the NumPy loops). The goal (issue 11): ``mli2-sa8`` LSTM on S2 (T=100, B=32,
I=128, H=256) and S4 (T=1000, B=1, I=40, H=64) within 2x of the float32 engine. The paired ratio (median over
rounds of mli / fp32) is what to read; absolute times on a shared machine are noisy. Exit status 1 when the goal
is missed or the MLI result is far from float (max |diff| > 0.25, a broken quantization).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from .bench_float import Out
from .common import (
    SHAPES,
    ForeignLoad,
    add_threads_option,
    interleaved_timing,
    machine_facts,
    make_problem,
    set_threads,
)

PROFILES = {"default": (5, 30, 8.0), "quick": (3, 8, 2.0)}
GOAL = {(c, "mli2-sa8", s): 2.0 for c in ("lstm", "gru") for s in ("S2", "S4")}  # issue 11


def build_layer(p):
    import fusedrnn
    from fusedrnn import conventions

    cls = {"lstm": fusedrnn.LSTM, "gru": fusedrnn.GRU}[p.cell]
    G, H = p.G, p.shape.H
    W = conventions.to_canonical(p.W, p.cell, "onnx", axis=1)
    R = conventions.to_canonical(p.R, p.cell, "onnx", axis=1)
    bx = conventions.to_canonical(p.B[:, : G * H], p.cell, "onnx", axis=1)
    bh = conventions.to_canonical(p.B[:, G * H:], p.cell, "onnx", axis=1)
    return cls(W, R, bx, bh, direction=p.direction)


def run_case(cell: str, shape: str, targets: list[str], profile: tuple) -> dict:
    import fusedrnn.mli as mli
    from fusedrnn.targets import registry

    targets = [t for t in targets if registry.get(t).supports(cell)]  # e.g. MLI 1.x has no GRU
    p = make_problem(cell, "forward", SHAPES[shape])
    layer = build_layer(p)
    x = p.X
    fns = {"fp32": lambda: layer(x)}
    emulated = {t: layer.to(t, calibration=x) for t in targets}
    for t, em in emulated.items():
        fns[t] = (lambda em=em: em(x))
    ref = layer(x)[0]
    diffs = {t: float(np.abs(em(x)[0] - ref).max()) for t, em in emulated.items()}
    load = ForeignLoad()
    with mli.build("UP", False):
        timing = interleaved_timing(fns, min_rounds=profile[0], max_rounds=profile[1], budget_s=profile[2])
    foreign = load.stop()
    res = {"cell": cell, "shape": SHAPES[shape].label(), "fp32": timing.summary("fp32"), "targets": {},
           "foreign_cores": None if foreign is None else foreign["foreign_cores"]}
    for t in targets:
        ratio = timing.paired_ratio(t, "fp32")
        goal = GOAL.get((cell, t, shape))
        res["targets"][t] = {"timing": timing.summary(t), "ratio_vs_fp32": ratio, "max_abs_diff_vs_fp32": diffs[t],
                             "goal_ratio": goal, "ok": (goal is None or ratio <= goal) and diffs[t] <= 0.25}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="S2")
    ap.add_argument("--cells", default="lstm")
    ap.add_argument("--targets", default="mli2-sa8")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plain", action="store_true", help="plain text instead of rich tables")
    add_threads_option(ap)
    a = ap.parse_args(argv)
    if a.threads:
        set_threads(a.threads)
    out = Out(a.plain)
    profile = PROFILES["quick" if a.quick else "default"]
    targets = a.targets.split(",")
    results, rows, styles = [], [], []
    for cell in a.cells.split(","):
        for shape in a.shapes.split(","):
            r = run_case(cell, shape, targets, profile)
            results.append(r)
            for t, v in r["targets"].items():
                rows.append([cell, r["shape"], t, f"{r['fp32']['median_ms']:.1f}", f"{v['timing']['median_ms']:.1f}",
                             f"{v['ratio_vs_fp32']:.2f}x", "-" if v["goal_ratio"] is None else
                             f"<= {v['goal_ratio']:.1f}x", f"{v['max_abs_diff_vs_fp32']:.3g}"])
                styles.append([None] * 7 + [None] if v["ok"] else [None] * 5 + ["red", "red", None])
    out.table("MLI targets vs the float32 engine (paired ratio = median over rounds of mli / fp32)",
              ["cell", "shape", "target", "fp32 ms", "mli ms", "ratio", "goal", "max|diff|"], rows, styles)
    facts = machine_facts()
    out.line(f"machine: {facts.get('cpu', '?')}, {facts.get('cpus_usable', '?')} cores; foreign load during timing: "
             + ", ".join(f"{r['foreign_cores']:.2f}" if r["foreign_cores"] is not None else "n/a" for r in results)
             + " cores (other processes; > 0.1 makes times noisy)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": facts, "results": results}, f, indent=1)
    ok = all(v["ok"] for r in results for v in r["targets"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
