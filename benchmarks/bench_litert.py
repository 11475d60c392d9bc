"""LiteRT targets vs the float32 engine and the LiteRT interpreter on the same model, timed interleaved.

Run from the repository root::

    python -m benchmarks.bench_litert                 # S2, S4 LSTM: fp32 vs litert-int8x16 vs interpreter
    python -m benchmarks.bench_litert --numpy-loop    # also time the kernels' NumPy loop (compiled loop off)
    python -m benchmarks.bench_litert --quick         # fewer rounds
    python -m benchmarks.bench_litert --targets litert-int8x16,litert-hybrid --json benchmarks/results/litert.json

Each case builds one float layer from the benchmark problem, prepares the LiteRT target with the problem's own
input as calibration (not timed), writes the prepared tensors as a .tflite model (time-major) and loads it in the
``ai_edge_litert`` interpreter (builtin kernels, no delegate; a test extra). Timed calls: ``layer(x)`` on the
float32 engine, ``emulated(x)`` (float in, quantize, integer kernel, dequantize) and the interpreter's
``reset_all_variables(); set_tensor(x_q); invoke(); get_tensor(y)``. The issue's goals for ``litert-int8x16`` on
S2 (T=100, B=32, I=128, H=256) and S4 (T=1000, B=1, I=40, H=64): within 2x of the float32 engine; on S2
within 3x of the interpreter. ``litert-int8x16`` runs its compiled time loop (``_kernel.c``) when a C compiler
is available (``FUSEDRNN_ENGINE=numpy``: the NumPy loop). The
interpreter's int8 output must equal fusedrnn's bit for bit (exit status 1 otherwise). Read the paired ratios
(median over rounds); absolute times on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import sys

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

PROFILES = {"default": (5, 30, 10.0), "quick": (3, 8, 3.0)}
GOAL_FP32 = {("lstm", "litert-int8x16", "S2"): 2.0, ("lstm", "litert-int8x16", "S4"): 2.0}
GOAL_INTERP = {("lstm", "litert-int8x16", "S2"): 3.0}


def _interpreter(model: bytes):
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    it = Interpreter(model_content=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    return it


def _numpy_loop(fn):
    from fusedrnn.targets.litert._compiled import use_engine

    def run():
        with use_engine("numpy"):
            return fn()
    return run


def run_case(cell: str, shape: str, targets: list[str], profile: tuple, numpy_loop: bool = False) -> dict:
    from fusedrnn.targets.litert.export import to_tflite

    p = make_problem(cell, "forward", SHAPES[shape])
    layer = build_layer(p)
    x = p.X
    T, B, _ = x.shape
    fns = {"fp32": lambda: layer(x)}
    res = {"cell": cell, "shape": SHAPES[shape].label(), "targets": {}}
    ref = layer(x)[0]
    extra = {}
    for t in targets:
        em = layer.to(t, calibration=x)
        fns[t] = (lambda em=em: em(x))
        k = em.prepared.kernels[0]
        if numpy_loop and k.kind == "integer":
            fns[f"{t} numpy-loop"] = _numpy_loop(fns[t])
        it = _interpreter(to_tflite(em, batch=B, time=T))
        info = {"max_abs_diff_vs_fp32": float(np.abs(em(x)[0] - ref).max())}
        if it is not None:
            if k.kind == "integer":
                s, zp = float(k.t[0].scale[0]), int(k.t[0].zero_point[0])
                xin = np.clip(np.rint(x / s) + zp, -128, 127).astype(np.int8)
            else:
                xin = np.ascontiguousarray(x, np.float32)
            i_in, i_out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

            def interp(it=it, xin=xin, i_in=i_in, i_out=i_out):
                it.reset_all_variables()
                it.set_tensor(i_in, xin)
                it.invoke()
                return it.get_tensor(i_out)

            fns[f"{t} interpreter"] = interp
            y_ours = k.run(xin, k.initial_state(B))[0]
            y_it = interp()
            info["interpreter_max_abs_diff"] = float(np.abs(y_ours.astype(np.float64) - y_it).max())
            info["interpreter_bit_exact"] = bool(k.kind == "integer" and np.array_equal(y_ours, y_it))
        extra[t] = info
    load = ForeignLoad()
    timing = interleaved_timing(fns, min_rounds=profile[0], max_rounds=profile[1], budget_s=profile[2])
    foreign = load.stop()
    res["fp32"] = timing.summary("fp32")
    res["foreign_cores"] = None if foreign is None else foreign["foreign_cores"]
    for name in fns:
        if name.endswith(" numpy-loop"):
            t = name[:-len(" numpy-loop")]
            res["targets"][name] = {"timing": timing.summary(name), "ratio_vs_fp32": timing.paired_ratio(name, "fp32"),
                                    "interpreter": timing.summary(f"{t} interpreter"),
                                    "ratio_vs_interpreter": timing.paired_ratio(name, f"{t} interpreter")
                                    if f"{t} interpreter" in fns else None, "ok": True,
                                    "max_abs_diff_vs_fp32": extra[t]["max_abs_diff_vs_fp32"]}
    for t in targets:
        info = extra[t]
        r_fp32 = timing.paired_ratio(t, "fp32")
        r_int = timing.paired_ratio(t, f"{t} interpreter") if f"{t} interpreter" in fns else None
        g1, g2 = GOAL_FP32.get((cell, t, shape)), GOAL_INTERP.get((cell, t, shape))
        ok = (g1 is None or r_fp32 <= g1) and (g2 is None or r_int is None or r_int <= g2)
        if "interpreter_bit_exact" in info and t == "litert-int8x16":
            ok = ok and info["interpreter_bit_exact"]
        res["targets"][t] = {"timing": timing.summary(t), "ratio_vs_fp32": r_fp32,
                             "interpreter": timing.summary(f"{t} interpreter"), "ratio_vs_interpreter": r_int,
                             "goal_vs_fp32": g1, "goal_vs_interpreter": g2, "ok": ok, **info}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="S2,S4")
    ap.add_argument("--numpy-loop", action="store_true", help="also time the integer kernels' NumPy loop")
    ap.add_argument("--targets", default="litert-int8x16")
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
    for shape in a.shapes.split(","):
        r = run_case("lstm", shape, targets, profile, a.numpy_loop)
        results.append(r)
        for t, v in r["targets"].items():
            it_ms = "-" if v["interpreter"] is None else f"{v['interpreter']['median_ms']:.1f}"
            r_it = "-" if v["ratio_vs_interpreter"] is None else f"{v['ratio_vs_interpreter']:.2f}x"
            rows.append(["lstm", r["shape"], t, f"{r['fp32']['median_ms']:.1f}", f"{v['timing']['median_ms']:.1f}",
                         it_ms, f"{v['ratio_vs_fp32']:.2f}x", r_it,
                         str(v.get("interpreter_bit_exact", "-")), f"{v['max_abs_diff_vs_fp32']:.3g}"])
            styles.append([None] * 10 if v["ok"] else [None] * 6 + ["red", "red", "red", None])
    out.table("LiteRT targets vs the float32 engine and the LiteRT interpreter (paired ratios: median over rounds)",
              ["cell", "shape", "target", "fp32 ms", "fusedrnn ms", "interp ms", "vs fp32", "vs interp",
               "bit-exact", "max|diff| fp32"], rows, styles)
    facts = machine_facts()
    out.line(f"machine: {facts.get('cpu', '?')}, {facts.get('cpus_usable', '?')} cores; foreign load during timing: "
             + ", ".join(f"{r['foreign_cores']:.2f}" if r["foreign_cores"] is not None else "n/a" for r in results)
             + " cores (other processes; > 0.1 makes times noisy)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": facts, "results": results}, f, indent=1)
    return 0 if all(v["ok"] for r in results for v in r["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
