"""Compiled recurrence vs the NumPy engine vs onnxruntime vs PyTorch: µs per timestep.

    python -m benchmarks.bench_compiled                    # S1-S4; LSTM uni, LSTM bidirectional, GRU
    python -m benchmarks.bench_compiled --shapes S2,S3     # the batched path (packed GEMM + fused gates)
    python -m benchmarks.bench_compiled --quick --sweep    # + batch sweep: per-row GEMV vs batched vs NumPy
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.bench_compiled --threads 1                     # every library on 1 core
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.bench_compiled --threads 1 --kernel-threads 2  # bidir on 2 threads

Every implementation runs one full sequence per call through its public entry point: ``fusedrnn.ops.lstm`` /
``ops.gru`` with the compiled loop switched off ("numpy") and on ("compiled"), an onnxruntime session of the
single ONNX node ("ORT"), and ``torch.nn.LSTM`` / ``GRU`` under inference_mode ("torch"). Until the engines call
the compiled loop themselves, this benchmark puts the dispatch in front of ``ops``' engine functions (the hook
the lead adds to lstm_sequence / gru_sequence), so both fusedrnn rows pay the same ops-level overhead.
Timing: benchmarks.common.interleaved_timing (alternating blocks, idle gap between libraries); reported: the
median call divided by T, and ratios compiled / other (< 1: compiled is faster).
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.common import (
    PEER_FACTORIES,
    SHAPES,
    VARIANTS,
    ForeignLoad,
    PeerUnavailable,
    Shape,
    interleaved_timing,
    machine_facts,
    make_problem,
    max_abs_diff,
    set_threads,
)

PROFILES = {"default": (5, 40, 4.0), "quick": (3, 8, 0.8)}  # min rounds, max rounds, budget seconds per case


def fusedrnn_calls(p) -> dict:
    from fusedrnn import ops
    from fusedrnn.cells import compiled

    X, W, R, B, H = p.X, p.W, p.R, p.B, p.shape.H
    if p.cell == "lstm":
        def call():
            return ops.lstm(X, W, R, B, hidden_size=H, direction=p.direction)
    else:
        def call():
            return ops.gru(X, W, R, B, hidden_size=H, direction=p.direction, linear_before_reset=1)

    def numpy_run():
        with compiled.disabled():
            return call()

    return {"numpy": numpy_run, "compiled": call}


def normalize(out) -> tuple:
    return out[0], out[1], (out[2] if len(out) > 2 else None)


def run_case(p, peers: list[str], profile) -> dict:
    fns = fusedrnn_calls(p)
    outs = {n: normalize(f()) for n, f in fns.items()}
    skipped = {}
    for name in peers:
        try:
            r = PEER_FACTORIES[name](p)
        except PeerUnavailable as e:
            skipped[name] = str(e)
            continue
        fns[name] = r.run
        outs[name] = r.normalize(r.run())
    diffs = {n: max_abs_diff(outs["compiled"], outs[n]) for n in outs if n != "compiled"}
    load = ForeignLoad()
    mn, mx, budget = profile
    t = interleaved_timing(fns, min_rounds=mn, max_rounds=mx, budget_s=budget, gap_s=0.05)
    T = p.shape.T
    us = {n: 1e6 * t.median(n) / T for n in fns}
    best = {n: 1e6 * min(t.samples[n]) / T for n in fns}
    paired = {n: t.paired_ratio("compiled", n) for n in fns if n != "compiled"}
    return {"us_per_step": us, "best": best, "paired": paired,
            "diff": diffs, "rounds": t.rounds, "skipped": skipped, "foreign": load.stop()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_compiled", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3-8 rounds per case (about 30 s in all)")
    ap.add_argument("--shapes", default="S1,S2,S3,S4", help="comma list of " + ",".join(SHAPES))
    ap.add_argument("--peers", default="ORT,torch", help="comma list of ORT,torch (empty: fusedrnn only)")
    ap.add_argument("--threads", type=int, metavar="N", help="limit numpy BLAS, ORT and torch to N threads")
    ap.add_argument("--kernel-threads", type=int, metavar="N",
                    help="threads of the compiled kernel (2: a bidirectional call runs its directions at once; "
                         "default: --threads when given, else the kernel's default)")
    ap.add_argument("--sweep", action="store_true",
                    help="also time LSTM and GRU forward at T=50 I=64 H=128 for B = 1..64: numpy, the per-row compiled "
                         "path and the batched one (compiled.driver.BATCH_MIN)")
    a = ap.parse_args(argv)
    from fusedrnn.cells import compiled

    if not compiled.available():
        print(f"compiled kernel unavailable: {compiled.unavailable_reason()}")
        return 1
    peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    if a.threads is not None:
        print(set_threads(a.threads))
    kt = a.kernel_threads if a.kernel_threads is not None else a.threads
    if kt is not None:
        compiled.set_threads(kt)
    print(f"compiled kernel threads: {compiled.threads()}")
    f = machine_facts()
    print(f"CPU {f['cpu']} ({f['cpus_usable']} usable); numpy {f['numpy']} {f['numpy_blas']}")
    print(f"onnxruntime {f['onnxruntime']}; torch {f['torch']}; env {f['env']}; load average {f['load_average']}")
    print(f"kernel: {compiled.library_path()}")
    profile = PROFILES["quick" if a.quick else "default"]
    cols = ["numpy", "compiled"] + peers
    print(f"\n{'case':34s}" + "".join(f"{c + ' µs/step':>17s}" for c in cols)
          + "".join(f"{'compiled/' + c:>18s}" for c in cols if c != "compiled") + "   max|Δ| vs compiled  load")
    print("(per case: median call / T; the ratio columns are the median over rounds of compiled / other; 'fastest"
          " call' is the minimum / T,\n the least disturbed estimate on a shared machine; load: other processes'"
          " CPU use during the case, in cores)")
    for sname in a.shapes.split(","):
        shape = SHAPES[sname.strip()]
        for cell, direction in VARIANTS:
            p = make_problem(cell, direction, shape)
            res = run_case(p, peers, profile)
            us, pr = res["us_per_step"], res["paired"]
            line = f"{cell} {direction[:5]} {shape.label():23s}"
            line += "".join(f"{us[c]:17.2f}" if c in us else f"{'-':>17s}" for c in cols)
            line += "".join(f"{pr[c]:17.2f}x" if pr.get(c) else f"{'-':>18s}" for c in cols if c != "compiled")
            line += "   " + " ".join(f"{n}:{d:.1e}" for n, d in res["diff"].items())
            fl = res["foreign"]
            line += f"  {fl['foreign_cores']:.2f}" if fl else ""
            print(line, flush=True)
            print(f"{'  fastest call':34s}" + "".join(f"{res['best'][c]:17.2f}" if c in us else f"{'-':>17s}"
                                                     for c in cols), flush=True)
    if a.sweep:
        from fusedrnn.cells.compiled import driver

        print("\nbatch sweep, forward T=50 I=64 H=128, µs/step (ratio batched/numpy; < 1: batched faster)")
        for cell in ("lstm", "gru"):
            for B in (1, 2, 3, 4, 8, 16, 32, 64):
                p = make_problem(cell, "forward", Shape(f"B{B}", 50, B, 64, 128))
                fns = fusedrnn_calls(p)
                compiled_call = fns.pop("compiled")

                def forced(batch_min, call=compiled_call):
                    def run():
                        old = driver.BATCH_MIN, driver.MAX_ROWS
                        driver.BATCH_MIN, driver.MAX_ROWS = batch_min, 10**6  # time each path beyond its range
                        try:
                            return call()
                        finally:
                            driver.BATCH_MIN, driver.MAX_ROWS = old
                    return run

                fns["per-row"], fns["batched"] = forced(10**6), forced(1)
                t = interleaved_timing(fns, min_rounds=profile[0], max_rounds=profile[1], budget_s=profile[2],
                                       gap_s=0.05)
                us = {n: 1e6 * t.median(n) / p.shape.T for n in fns}
                print(f"  {cell} B={B:3d}: numpy {us['numpy']:8.2f}  per-row {us['per-row']:8.2f}  batched "
                      f"{us['batched']:8.2f}  ratio {t.paired_ratio('batched', 'numpy'):.2f}", flush=True)
        print(f"  (defaults: batched path from B = {driver.BATCH_MIN}; per-row path up to D·B = "
              f"{compiled.MAX_ROWS} for options outside the batched subset)")
    print("\ndiffs: max |Δ| of Y, Y_h, Y_c between the compiled result and each other implementation.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
