"""Quark ExtendedLSTM, faithful mode: fusedrnn vs Quark's compiled kernel vs a per-element Python kernel.

Run from the repository root::

    python -m benchmarks.bench_quark              # T=100, H=128, I=64 (the issue's case), about a minute
    python -m benchmarks.bench_quark --quick      # fewer rounds
    python -m benchmarks.bench_quark --T 200 --H 64 --I 32 --json benchmarks/results/quark.json
    python -m benchmarks.bench_quark --anchors S2,S4  # also faithful vs our float32 bidirectional LSTM (default)

The compiled kernel is Quark's own C++ source from the amd-quark wheel (downloaded with pip, built with g++ in
a temporary directory; ``FUSEDRNN_QUARK_WHEEL`` points at a local wheel). The per-element Python kernel is a
straightforward transcription of the same arithmetic (Python ints, NumPy float32 scalars, the C library's tanhf
through ctypes); its cost is linear in T, so it is timed on ``--naive-steps`` steps and scaled to T (both
numbers are printed). Every implementation is checked bit for bit against fusedrnn. All three are timed in
the same run, interleaved, single-threaded (numpy's BLAS limited to 1 thread). Exit status 1 on disagreement.
``--anchors`` then times faithful mode (the compiled loop when a C compiler is available; ``FUSEDRNN_ENGINE=numpy``
times the NumPy loop) against the float32 engine's bidirectional LSTM on the anchor shapes (issue 11's goal:
<= 2x on S2 and S4; S2's 32 sequences run as rows of one call, each bit-identical to a batch-1 call). The goal
is measured with the weights prepared once (``quark.prepare``, what ``layer.to("quark")`` and ONNX models do);
the one-shot time (weights quantized and packed on every call) is printed next to it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from .common import ForeignLoad, interleaved_timing, machine_facts, set_threads


def make_case(T: int, H: int, I: int, seed: int = 0) -> tuple[tuple, dict]:  # noqa: E741
    """Trained-like random weights with min/max uint16 scales (Y symmetric over [-1, 1])."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 1, I)).astype(np.float32)
    W = (rng.normal(size=(2, 4 * H, I)) * 0.7 / math.sqrt(I)).astype(np.float32)
    R = (rng.normal(size=(2, 4 * H, H)) * 0.7 / math.sqrt(H)).astype(np.float32)
    B = (rng.normal(size=(2, 8 * H)) * 0.2).astype(np.float32)
    sc = {}
    for n, a in zip("xwrb", (X, W, R, B), strict=True):
        lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
        s = (hi - lo) / 65535.0
        sc[f"{n}_scale"], sc[f"{n}_zero_point"] = s, int(round(-lo / s))
    sc["y_scale"], sc["y_zero_point"] = 2.0 / 65535.0, 32768
    return (X, W, R, B), sc


def naive_kernel(X, W, R, B, sc: dict, H: int, steps: int) -> np.ndarray:
    """Quark's kernel element by element in Python (first ``steps`` steps of each direction); uint16 Y codes
    [steps, 2, H] where each direction processes its first ``steps`` inputs (x[0..] forward, x[T-1..] backward)."""
    from fusedrnn.numerics.affine import quark_quantize_uint16 as quant
    from fusedrnn.quark import make_scales
    from fusedrnn.targets.quark import fixed
    from fusedrnn.targets.quark.params import kernel_params
    from fusedrnn.targets.quark.tanhf import _libm

    tanhf = _libm()
    s = make_scales(**sc)
    T, _, I = X.shape  # noqa: E741
    x = [[int(v) - 32768 for v in row] for row in quant(X, s.x_scale, s.x_zero_point)[:, 0]]
    w = (quant(W, s.w_scale, s.w_zero_point).astype(np.int64) - 32768)
    r = (quant(R, s.r_scale, s.r_zero_point).astype(np.int64) - 32768)
    b = (quant(B, s.b_scale, s.b_zero_point).astype(np.int64) - 32768)
    p = kernel_params(s, w.sum(axis=2), r.sum(axis=2), b[:, :4 * H], b[:, 4 * H:], I, H, faithful=True)
    w, r = w.tolist(), r.tolist()

    def srs(v, sh):
        half = 0 if sh == 0 else fixed.c_one_shl(sh - 1)
        a = (abs(v) + half) >> sh
        return max(-(2**31), min(2**31 - 1, -a if v < 0 else a))

    def wrap32(v):
        return ((v + 2**31) % 2**32) - 2**31

    f32 = np.float32
    out = np.zeros((steps, 2, H), dtype=np.uint16)
    for d in range(2):
        h = [p.ohz] * H
        c = [f32(0.0)] * H
        for t in range(steps):
            xt = x[T - 1 - t] if d else x[t]
            g = []
            for k in range(4 * H):
                acc = 0
                for j in range(I):
                    acc += xt[j] * w[d][k][j]
                a = srs(srs(acc, p.xw) * p.qx, p.xwq)
                acc = 0
                for j in range(H):
                    acc += h[j] * r[d][k][j]
                g.append(a + srs(srs(acc, p.hr) * p.qh, p.hrq))
            xs = srs(sum(xt) * p.qa, p.xss)
            hs = srs(sum(h) * p.qb, p.hss)
            for k in range(4 * H):
                g[k] = wrap32(g[k] - xs - hs + int(p.qc[d][k]))
            for i in range(H):
                vi, vo, vf = (f32(float(f32(tanhf(float(f32(g[i + n * H] / 2.0**25))))) * 0.5 + 0.5)
                              for n in range(3))
                vc = f32(tanhf(float(f32(g[i + 3 * H] / 2.0**24))))
                c[i] = vi * vc + vf * c[i]
                hf = vo * f32(tanhf(float(c[i])))
                hint = int(fixed.round_int_c(np.float64(hf) * 2.0**24))
                v = hint * p.ohs + (p.ohz << p.oh)
                half = fixed.c_one_shl(p.oh - 1)
                q = (abs(v) + half) >> p.oh
                q = max(-65536, min(65535, -q if v < 0 else q))
                h[i] = ((q + 32768) & 0xFFFF) - 32768
                out[t, d, i] = (h[i] + 32768) & 0xFFFF
    return out


def anchor_case(shape: str):
    """The float benchmark's bidirectional LSTM problem on an anchor shape (benchmarks.common) with min/max uint16
    scales; X, W, R, B in ONNX layout (ExtendedLSTM's gate order i, o, f, c is ONNX's)."""
    from .common import SHAPES, make_problem

    p = make_problem("lstm", "bidirectional", SHAPES[shape])
    sc = {}
    for n, a in zip("xwrb", (p.X, p.W, p.R, p.B), strict=True):
        lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
        s = (hi - lo) / 65535.0
        sc[f"{n}_scale"], sc[f"{n}_zero_point"] = s, int(round(-lo / s))
    sc["y_scale"], sc["y_zero_point"] = 2.0 / 65535.0, 32768
    return p, sc


def faithful_sequences(X, W, R, B, sc: dict, H: int):
    """Faithful mode on the B sequences of X [T, B, I] (float in, float Y [T, 2, B, H] out), weights prepared on
    every call. The kernel is batch 1; its arithmetic is per sequence, so the rows run together and each row is
    bit-identical to a batch-1 call (checked in :func:`compare_anchor`), as the ``quark`` target runs them."""
    import fusedrnn.quark as quark

    return quark.prepare(W, R, B, hidden_size=H, **sc)._run(X, None, None, False, rows=True)


def prepared_sequences(prepared, X):
    """:func:`faithful_sequences` with the weights prepared once (``quark.prepare``, as ``layer.to("quark")``)."""
    return prepared._run(X, None, None, False, rows=True)


def compare_anchor(shape: str, quick: bool) -> tuple[bool, dict]:
    """Issue 11: Quark faithful (the bidirectional LSTM the op computes) vs our float32 bidirectional LSTM on the
    same problem, interleaved; goal faithful <= 2x float32 on S2 and S4."""
    import fusedrnn.quark as quark
    from fusedrnn import ops

    p, sc = anchor_case(shape)
    H = p.shape.H
    y = faithful_sequences(p.X, p.W, p.R, p.B, sc, H)
    ok = True
    for b in sorted({0, p.shape.B - 1}):  # rows run together == each sequence alone, bit for bit
        y1 = quark.extended_lstm(p.X[:, b:b + 1], p.W, p.R, p.B, hidden_size=H, **sc)
        ok &= np.array_equal(y1.view(np.uint32), y[:, :, b:b + 1].view(np.uint32))
    ref = ops.lstm(p.X, p.W, p.R, p.B, hidden_size=H, direction="bidirectional")[0]
    err = float(np.abs(y - ref).max())
    prepared = quark.prepare(p.W, p.R, p.B, hidden_size=H, **sc)
    ok &= np.array_equal(prepared_sequences(prepared, p.X).view(np.uint32), y.view(np.uint32))
    fns = {"fp32": lambda: ops.lstm(p.X, p.W, p.R, p.B, hidden_size=H, direction="bidirectional"),
           "quark faithful": lambda: prepared_sequences(prepared, p.X),
           "quark faithful one-shot": lambda: faithful_sequences(p.X, p.W, p.R, p.B, sc, H)}
    timing = interleaved_timing(fns, min_rounds=3 if quick else 5, max_rounds=8 if quick else 30,
                                budget_s=3.0 if quick else 12.0)
    ratio = timing.paired_ratio("quark faithful", "fp32")
    ratio1 = timing.paired_ratio("quark faithful one-shot", "fp32")
    res = {"shape": p.shape.label(), "fp32": timing.summary("fp32"), "faithful": timing.summary("quark faithful"),
           "faithful_one_shot": timing.summary("quark faithful one-shot"), "ratio": ratio,
           "ratio_one_shot": ratio1, "rows_bit_identical": bool(ok), "max_abs_diff_vs_fp32": err, "goal": 2.0}
    print(f"  {p.shape.label():26s} fp32 {res['fp32']['median_ms']:8.2f} ms  faithful (prepared) "
          f"{res['faithful']['median_ms']:8.2f} ms  ratio {ratio:.2f}x (goal <= 2x)  one-shot (weights prepared "
          f"per call) {res['faithful_one_shot']['median_ms']:8.2f} ms {ratio1:.2f}x  rows bit-identical: {ok}  "
          f"max |Y - fp32| {err:.2e}")
    return ok and err <= 0.05, res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--H", type=int, default=128)
    ap.add_argument("--I", type=int, default=64)
    ap.add_argument("--naive-steps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--anchors", default="S2,S4", help="anchor shapes for the faithful vs float32 comparison "
                    "(issue 11); empty to skip")
    args = ap.parse_args(argv)

    import fusedrnn.quark as quark
    from fusedrnn.numerics.affine import quark_quantize_uint16 as quant
    from fusedrnn.targets.quark import reference

    threads = set_threads(1)
    (X, W, R, B), sc = make_case(args.T, args.H, args.I)
    H = args.H
    print(f"ExtendedLSTM faithful, T={args.T} H={H} I={args.I} batch 1, bidirectional; {threads}")
    s = quark.make_scales(**sc)
    codes = [quant(a, getattr(s, f"{n}_scale"), getattr(s, f"{n}_zero_point"))
             for n, a in zip("xwrb", (X, W, R, B), strict=True)]
    ours_y = quark.extended_lstm(X, W, R, B, hidden_size=H, **sc)
    ours_q = quark.extended_lstm_quantized(*codes, s, hidden_size=H)
    prepared = quark.prepare(W, R, B, hidden_size=H, **sc)
    ok = np.array_equal(prepared(X).view(np.uint32), ours_y.view(np.uint32))
    fns = {"fusedrnn": lambda: quark.extended_lstm(X, W, R, B, hidden_size=H, **sc),
           "fusedrnn prepared": lambda: prepared(X),
           "fusedrnn corrected": lambda: quark.extended_lstm(X, W, R, B, hidden_size=H, mode="corrected", **sc)}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            dll = reference.build(Path(tmp))
        except reference.OracleUnavailable as e:
            dll = None
            print(f"compiled kernel unavailable: {e}")
        if dll is not None:
            y_c, _ = reference.run(dll, X, W, R, B, sc, H)
            same = np.array_equal(y_c.view(np.uint32), ours_y.view(np.uint32))
            ok &= same
            print(f"compiled kernel agrees bit for bit: {same}")
            fns["compiled (g++ -O2)"] = lambda: reference.run(dll, X, W, R, B, sc, H)
        n = min(args.naive_steps, args.T)
        naive = naive_kernel(X, W, R, B, sc, H, n)
        same = np.array_equal(naive[:, 0], ours_q[:n, 0, 0]) and np.array_equal(naive[:, 1], ours_q[::-1][:n, 1, 0])
        ok &= same
        print(f"per-element Python kernel ({n} steps) agrees bit for bit: {same}")
        fns[f"python per-element ({n} steps)"] = lambda: naive_kernel(X, W, R, B, sc, H, n)
        load = ForeignLoad()
        timing = interleaved_timing(fns, min_rounds=2 if args.quick else 3, max_rounds=3 if args.quick else 6,
                                    budget_s=20 if args.quick else 60)
        foreign = load.stop()
    med = {k: timing.median(k) for k in fns}
    naive_key = f"python per-element ({n} steps)"
    med["python per-element (scaled to T)"] = med.pop(naive_key) * args.T / n
    for k, v in med.items():
        print(f"  {k:34s} {1e3 * v:10.1f} ms")
    ratios = {"python_per_element_over_fusedrnn": med["python per-element (scaled to T)"] / med["fusedrnn"]}
    print(f"fusedrnn is {ratios['python_per_element_over_fusedrnn']:.0f}x faster than the per-element Python kernel "
          f"(goal >= 100x)")
    if "compiled (g++ -O2)" in med:
        ratios["fusedrnn_over_compiled"] = med["fusedrnn"] / med["compiled (g++ -O2)"]
        ratios["fusedrnn_prepared_over_compiled"] = med["fusedrnn prepared"] / med["compiled (g++ -O2)"]
        print(f"fusedrnn takes {ratios['fusedrnn_over_compiled']:.2f}x the compiled kernel's time (goal <= 5x); "
              f"prepared: {ratios['fusedrnn_prepared_over_compiled']:.2f}x")
    print(f"foreign CPU load during timing: {foreign}")
    anchors = {}
    if args.anchors:
        print("Quark faithful (bidirectional) vs the float32 engine's bidirectional LSTM, same problem, interleaved:")
        load = ForeignLoad()
        for shape in args.anchors.split(","):
            good, anchors[shape] = compare_anchor(shape.strip(), args.quick)
            ok &= good
        print(f"foreign CPU load during timing: {load.stop()}")
    if args.json:
        args.json.write_text(json.dumps({"case": {k: v for k, v in vars(args).items() if k != "json"}, "median_s": med,
                                         "ratios": ratios, "anchors": anchors, "agree": bool(ok),
                                         "machine": machine_facts(), "foreign_load": foreign}, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
