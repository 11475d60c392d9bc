"""Whole ONNX models and ``com.microsoft::DynamicQuantizeLSTM``: fusedrnn against plain onnxruntime.

::

    python -m benchmarks.bench_models                 # all cases (downloads three wheels with pip once)
    python -m benchmarks.bench_models --only dq       # only the DynamicQuantizeLSTM cases
    python -m benchmarks.bench_models --models DIR    # where the wheels' models are kept (default: a cache folder)

Each case is timed with alternating calls in one process (:func:`benchmarks.common.interleaved_timing`): the
fusedrnn call and the plain onnxruntime session take turns, and the table shows the median of each and their ratio
(fusedrnn / onnxruntime), then the fastest call of each and their ratio (on a machine other processes load, the
medians swing with the load, tenfold at times, for onnxruntime as for fusedrnn; the fastest calls show the cost
without interference). The outputs of both are compared once (max |Δ| over all outputs).

* **whole models**: ``fusedrnn.onnx.load(model).run(feeds)`` (native precision, onnxruntime as the executor of the
  non-recurrent nodes) against an ``InferenceSession`` of the unmodified model with default options;
* **DynamicQuantizeLSTM**: ``fusedrnn.ops.dynamic_quantize_lstm`` (one bidirectional layer, and three stacked
  layers with the same ``Transpose``/``Reshape`` between them as the ONNX model) against a session of the same
  nodes; onnxruntime with ``intra_op_num_threads`` = 1 and 2 (B = 4 and H = 384: onnxruntime quantizes h as one
  block at every thread count, so both give fusedrnn's result).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .common import interleaved_timing, machine_facts

WHEELS = {  # file -> (package, version, member): the real models tests/test_real_models.py uses
    "silero_vad_v6.onnx": ("faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx"),
    "silero_vad.onnx": ("silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx"),
    "silero_vad_16k_sequence.onnx": ("silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx"),
    "common_old.onnx": ("ddddocr", "1.6.1", "ddddocr/common_old.onnx"),
}


@dataclass
class Case:
    name: str
    ours: Callable[[], list]
    ort: Callable[[], list]


def model_file(folder: Path, name: str) -> Path | None:
    """The model ``name`` from its wheel (downloaded with pip into ``folder`` once), or None when pip fails."""
    out = folder / name
    if out.exists():
        return out
    package, version, member = WHEELS[name]
    dest = folder / "wheels" / package
    if not list(dest.glob("*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps",
                        "--only-binary=:all:", "-q", "-d", str(dest)], capture_output=True, timeout=600)
    found = list(dest.glob("*.whl"))
    if not found:
        return None
    with zipfile.ZipFile(found[0]) as z:
        out.write_bytes(z.read(member))
    return out


def audio(rng, n: int) -> np.ndarray:
    t = np.arange(n) / 16000
    f0 = 140 + 30 * np.sin(2 * np.pi * 3 * t)
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / 16000) / k for k in range(1, 6))
    return (0.3 * np.clip(np.sin(2 * np.pi * 4 * t), 0, None) * voiced + 0.01 * rng.normal(size=n)).astype(np.float32)


def vad_frames(rng, n: int) -> np.ndarray:
    """n frames of 576 samples for Silero VAD's sequence exports: 64 of context (zeros) + 512 of speech-like audio."""
    return np.concatenate([np.zeros((n, 64), np.float32), audio(rng, n * 512).reshape(n, 512)], axis=1)


def model_case(name: str, path, feeds: dict, threads: int | None = None) -> Case:
    import onnxruntime as ort

    import fusedrnn

    model = fusedrnn.onnx.load(str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads is not None:
        so.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    def ours():
        out = model.run(feeds)
        return [out[n] for n in names]

    return Case(name, ours, lambda: sess.run(names, feeds))


def whole_model_cases(folder: Path) -> list[Case]:
    import fusedrnn
    from fusedrnn import example

    rng = np.random.default_rng(0)
    x, _ = example.load_data()
    cases = [model_case(f"bundled example digits_lstm, batch {len(x)}", example.model_path(),
                        {example.INPUT_NAME: x})]
    del fusedrnn
    zeros = np.zeros((1, 1, 128), np.float32)
    path = model_file(folder, "silero_vad_v6.onnx")
    if path is not None:
        cases.append(model_case("silero_vad_v6 (faster-whisper), 64 frames", path,
                                {"input": vad_frames(rng, 64), "h": zeros, "c": zeros}))
    path = model_file(folder, "silero_vad.onnx")
    if path is not None:
        cases.append(model_case("silero_vad (LSTMs in If), one 512-sample chunk", path,
                                {"input": audio(rng, 512)[None], "state": np.zeros((2, 1, 128), np.float32),
                                 "sr": np.array(16000, np.int64)}))
    path = model_file(folder, "silero_vad_16k_sequence.onnx")
    if path is not None:
        cases.append(model_case("silero_vad_16k_sequence, 200 frames", path,
                                {"input": vad_frames(rng, 200), "h": zeros, "c": zeros}))
    path = model_file(folder, "common_old.onnx")
    if path is not None:
        image = np.ones((1, 1, 64, 160), np.float32)
        image[..., 20:44, 10:150] = rng.uniform(0, 1, (24, 140)) > 0.6
        cases.append(model_case("ddddocr common_old (DynamicQuantizeLSTM)", path, {"input1": image}))
    return cases


def dq_stack(layers: int, T: int = 12, B: int = 4, I: int = 384, H: int = 384, seed: int = 0):  # noqa: E741
    """``layers`` bidirectional DynamicQuantizeLSTM nodes (int8 weights, per-tensor scales) with Transpose and
    Reshape between them: the ONNX model, its input and the fusedrnn function computing the same (on the weight
    arrays onnx reads from the model: immutable, so fusedrnn packs them once)."""
    from fusedrnn.ops import dynamic_quantize_lstm

    rng = np.random.default_rng(seed)
    nodes, inits, weights, prev = [], [], [], "X"
    for k in range(layers):
        K = I if k == 0 else 2 * H
        w = (rng.integers(-127, 128, (2, K, 4 * H)).astype(np.int8),
             rng.integers(-127, 128, (2, H, 4 * H)).astype(np.int8),
             (0.1 * rng.normal(size=(2, 8 * H))).astype(np.float32), np.full(2, 0.004, np.float32),
             np.zeros(2, np.int8), np.full(2, 0.004, np.float32), np.zeros(2, np.int8))
        names = [f"{n}{k}" for n in ("W", "R", "B", "ws", "wz", "rs", "rz")]
        inits += [numpy_helper.from_array(a, n) for n, a in zip(names, w, strict=True)]
        w = tuple(numpy_helper.to_array(t) for t in inits[-7:])  # the arrays a loaded model holds
        nodes += [helper.make_node("DynamicQuantizeLSTM", [prev, *names[:3], "", "", "", "", *names[3:]],
                                   [f"Y{k}", f"Yh{k}"], domain="com.microsoft", hidden_size=H,
                                   direction="bidirectional"),
                  helper.make_node("Transpose", [f"Y{k}"], [f"Yt{k}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"Yt{k}", "shape"], [f"X{k + 1}"])]
        weights.append(w)
        prev = f"X{k + 1}"
    inits.append(numpy_helper.from_array(np.array([T, B, 2 * H], np.int64), "shape"))
    graph = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    opsets = [helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    X = rng.normal(size=(T, B, I)).astype(np.float32)

    def ours():
        x = X
        for Wq, Rq, Bb, ws, wz, rs, rz in weights:
            Y = dynamic_quantize_lstm(x, Wq, Rq, Bb, None, None, None, None, ws, wz, rs, rz, hidden_size=H,
                                      direction="bidirectional")[0]
            x = Y.transpose(0, 2, 1, 3).reshape(T, B, 2 * H)
        return [x]

    return model, X, ours


def dq_cases() -> list[Case]:
    import onnxruntime as ort

    cases = []
    for layers in (1, 3):
        model, X, ours = dq_stack(layers)
        for threads in (1, 2):
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.log_severity_level = 3
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            cases.append(Case(f"DynamicQuantizeLSTM x{layers} bidirectional, T12 B4 I384 H384, ORT {threads} "
                              f"thread(s)", ours, (lambda s, x: lambda: s.run(None, {"X": x}))(sess, X)))
    return cases


def measure(case: Case, budget_s: float) -> dict:
    got, ref = case.ours(), case.ort()
    diff = max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(r, np.float64)))) for g, r in
               zip(got, ref, strict=True))
    timing = interleaved_timing({"fusedrnn": case.ours, "onnxruntime": case.ort}, min_rounds=5, max_rounds=60,
                                budget_s=budget_s, gap_s=0.02)
    ours, theirs = timing.median("fusedrnn"), timing.median("onnxruntime")
    best, their_best = min(timing.samples["fusedrnn"]), min(timing.samples["onnxruntime"])
    return {"case": case.name, "fusedrnn_ms": 1e3 * ours, "ort_ms": 1e3 * theirs, "ratio": ours / theirs,
            "fusedrnn_min_ms": 1e3 * best, "ort_min_ms": 1e3 * their_best, "min_ratio": best / their_best,
            "max_abs_diff": diff}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("models", "dq"), help="run one group only")
    parser.add_argument("--models", type=Path, default=Path(tempfile.gettempdir()) / "fusedrnn-bench-models",
                        help="folder for the downloaded real models")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timing per case")
    args = parser.parse_args(argv)
    args.models.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    print(f"# {facts['cpu']}, {facts['cpus_usable']} usable CPUs; onnxruntime {facts['onnxruntime']}")
    cases = []
    if args.only in (None, "models"):
        cases += whole_model_cases(args.models)
    if args.only in (None, "dq"):
        cases += dq_cases()
    print("| case | fusedrnn ms | onnxruntime ms | ratio | fastest call: fusedrnn ms | onnxruntime ms | ratio | "
          "max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        r = measure(case, args.budget)
        print(f"| {r['case']} | {r['fusedrnn_ms']:.2f} | {r['ort_ms']:.2f} | {r['ratio']:.2f} | "
              f"{r['fusedrnn_min_ms']:.2f} | {r['ort_min_ms']:.2f} | {r['min_ratio']:.2f} | "
              f"{r['max_abs_diff']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
