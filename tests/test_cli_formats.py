"""The command line on real models of every format, each command in a fresh process (issue 21).

Models (built once): a PyTorch 2-layer bidirectional batch-first LSTM with a linear head (saved as a state
dict, a ``torch.export`` program and TorchScript), a Keras 3 model of two stacked LSTMs and a Dense, a .tflite of
the PyTorch LSTM stack written by ``fusedrnn.litert.export``, and the ONNX of each. Every CLI command runs as its
own ``python -m fusedrnn.cli`` process; the processes run concurrently (they are independent), so that the
imports of torch and Keras in each cost wall time once per core, not once per command.

What is checked: ``run`` / ``compare`` / ``export-vectors`` succeed on every format and give exactly the numbers
of the Python API (the same functions in this process); the fp32 outputs equal the framework's own (float32
rounding); ``convert`` between every pair of formats writes files that the frameworks themselves (PyTorch,
Keras, onnxruntime, the LiteRT interpreter) run to the original outputs; and a model without recurrent nodes, an
ambiguous calibration layout and failing gates give their exit status and message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn
import fusedrnn.litert
from fusedrnn import targets
from fusedrnn.cli.models import node_roles
from fusedrnn.cli.run_cmd import _with_roles, compare_targets
from fusedrnn.frontends.model_files import load_model

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")
ort = pytest.importorskip("onnxruntime")
litert_interp = pytest.importorskip("ai_edge_litert.interpreter")

SRC = Path(fusedrnn.__file__).resolve().parents[1]  # the fusedrnn under test (the checkout's src/ or site-packages)
B, T, I, H, OUT = 3, 5, 3, 4, 3
FEW = ("fp16", "mli2-sa8")  # where the point is the format
FORMATS = {  # name -> (file, extra CLI arguments to read it)
    "torch-state-dict": ("sd.pt", ["--layers", "lstm,head", "--batch-first"]),
    "torch-export": ("m.pt2", []),
    "torchscript": ("ms.pt", []),
    "torch-onnx": ("torch.onnx", []),
    "keras": ("k.keras", []),
    "keras-onnx": ("k.onnx", []),
    "tflite": ("s.tflite", []),
    "tflite-onnx": ("s.onnx", []),
}
IN_PROCESS = ("torchscript", "tflite-onnx")
"""Formats checked through the Python API only (the CLI reads them with the same loader as the others), to keep
the number of processes down."""
CONVERT_SOURCES = {"torch": ("sd.pt", ["--batch-first"]), "keras": ("k.keras", []), "tflite": ("s.tflite", []),
                   "onnx": ("torch.onnx", [])}
SUFFIX = {"onnx": ".onnx", "torch": ".pt", "keras": ".keras", "tflite": ".tflite"}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * H, OUT)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("KERAS_BACKEND", "torch")
    env.pop("COLUMNS", None)
    return env


def _cli(args: list, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fusedrnn.cli", *map(str, args)], capture_output=True, text=True,
                          env={**_env(), **(env or {})}, timeout=600)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    rng = np.random.default_rng(21)
    x = rng.standard_normal((B, T, I)).astype(np.float32)
    np.savez(d / "data.npz", x=x)
    np.savez(d / "data_tm.npz", x=np.ascontiguousarray(x.transpose(1, 0, 2)))  # the same, time-major
    torch.manual_seed(21)
    net = Net().eval()
    with torch.no_grad():
        ref_torch = net(torch.from_numpy(x)).numpy()
        ref_stack = net.lstm(torch.from_numpy(x))[0].numpy()
    torch.save(net.state_dict(), d / "sd.pt")
    torch.export.save(torch.export.export(net, (torch.from_numpy(x),)), d / "m.pt2")
    torch.jit.script(net).save(d / "ms.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.from_numpy(x),), d / "torch.onnx", dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "time"}})
    km = keras.Sequential([keras.Input((None, I)), keras.layers.LSTM(H, return_sequences=True),
                           keras.layers.LSTM(H, return_sequences=True), keras.layers.Dense(OUT)])
    km.set_weights([rng.normal(scale=0.5, size=w.shape).astype(np.float32) for w in km.get_weights()])
    km.save(d / "k.keras")
    ref_keras = keras.ops.convert_to_numpy(km.predict(x, verbose=0))
    ref_keras_stack = keras.ops.convert_to_numpy(keras.Sequential(km.layers[:2]).predict(x, verbose=0))
    stack = fusedrnn.frontends.torch.from_torch(net.lstm)
    fusedrnn.litert.export(stack, d / "s.tflite", batch=B)
    for name, kwargs in (("k", {}), ("s", {})):  # the ONNX of the Keras and LiteRT models, as run reads them
        src = d / ("k.keras" if name == "k" else "s.tflite")
        onnx.save(load_model(src, **kwargs).model.proto, d / f"{name}.onnx")
    gemm = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "dense",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", T, I])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", T, 2])],
                             [numpy_helper.from_array(rng.normal(size=(I, 2)).astype(np.float32), "w")])
    onnx.save(helper.make_model(gemm, opset_imports=[helper.make_opsetid("", 17)]), d / "dense.onnx")
    refs = {"torch-state-dict": ref_torch, "torch-export": ref_torch, "torchscript": ref_torch,
            "torch-onnx": ref_torch, "keras": ref_keras, "keras-onnx": ref_keras, "tflite": ref_stack,
            "tflite-onnx": ref_stack}
    stacks = {"torch": ref_stack, "onnx": ref_stack, "tflite": ref_stack, "keras": ref_keras_stack}
    return {"dir": d, "x": x, "refs": refs, "stacks": stacks}


def _commands(d: Path) -> dict[str, tuple[list, dict]]:
    data = d / "data.npz"
    cmds: dict[str, tuple[list, dict]] = {}
    for name, (file, extra) in FORMATS.items():
        if name in IN_PROCESS:
            continue
        cmds[f"run:{name}"] = (["run", d / file, "--data", data, *extra, *(a for t in FEW for a in ("-t", t)),
                                "--repeat", "1", "--format", "json"], {})
    cmds["compare:csv"] = (["compare", d / "torch.onnx", "--data", data, "--repeat", "1", "--format", "csv"], {})
    cmds["compare:markdown"] = (["compare", d / "k.onnx", "--data", data, "-t", "fp16", "-t", "bf16", "--repeat",
                                 "1", "--format", "markdown"], {})
    cmds["compare:table"] = (["compare", d / "s.tflite", "--data", data, "-t", "fp16", "-t", "bf16", "-t", "fp64",
                              "--repeat", "1"], {"COLUMNS": "60"})
    cmds["compare:time-major"] = (["compare", d / "torch.onnx", "--data", d / "data_tm.npz", "--time-major", "-t",
                                   "fp16", "--repeat", "1", "--json"], {})
    for name in ("keras",):
        file, extra = FORMATS[name]
        cmds[f"export:{name}"] = (["export-vectors", d / file, "-t", "mli2-sa8", "--input", data, "--out",
                                   d / f"vec-{name}", *extra, "--format", "json"], {})
    for src, (file, extra) in CONVERT_SOURCES.items():
        for to in SUFFIX:
            if to != src:
                out = d / f"conv-{src}-to-{to}{SUFFIX[to]}"
                more = ["--batch", B] if to == "tflite" else []
                cmds[f"convert:{src}:{to}"] = (["convert", d / file, "--to", to, "--out", out, *extra, *more], {})
    cmds["error:float-only"] = (["run", d / "dense.onnx", "--data", data, "-t", "fp16"], {})
    cmds["ok:allow-float"] = (["run", d / "dense.onnx", "--data", data, "-t", "fp16", "--allow-float", "--repeat",
                               "1", "--format", "json"], {})
    cmds["error:calibration-layout"] = (["convert", d / "sd.pt", "--to", "mli2-sa8", "--calibration", data], {})
    cmds["error:state-dict-layout"] = (["run", d / "sd.pt", "--data", data, "--layers", "lstm,head"], {})
    # quark runs bidirectional LSTMs only: it cannot run the Keras model's
    cmds["error:gate"] = (["run", d / "k.onnx", "--data", data, "-t", "mli2-sa8", "-t", "quark", "--min-snr", "200",
                           "--repeat", "1", "--format", "csv"], {})
    cmds["ok:skip-unsupported"] = (["run", d / "k.onnx", "--data", data, "-t", "fp64", "-t", "quark", "--min-snr",
                                    "100", "--min-agreement", "99", "--skip-unsupported", "--repeat", "1", "--json"],
                                   {})
    return cmds


@pytest.fixture(scope="module")
def results(models):
    cmds = _commands(models["dir"])
    with ThreadPoolExecutor(max_workers=max(2, min(6, os.cpu_count() or 2))) as pool:
        futures = {k: pool.submit(_cli, args, env) for k, (args, env) in cmds.items()}
        return {k: f.result() for k, f in futures.items()}


def _ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, res.stderr + res.stdout
    return res.stdout


def _api_rows(models, name: str, chosen) -> list[dict]:
    file, extra = FORMATS[name]
    kwargs = {"layers": "lstm,head", "batch_first": True} if name == "torch-state-dict" else {}
    loaded = load_model(models["dir"] / file, example={"x": models["x"]}, **kwargs)
    feeds = {loaded.model.inputs[0].name: models["x"]}
    return compare_targets(loaded.model, feeds, None, [targets.get(t) for t in chosen], repeat=1)


@pytest.mark.parametrize("name", list(FORMATS))
def test_run_every_format_matches_the_api_and_the_framework(models, results, name):
    api = {r["target"]: r for r in _api_rows(models, name, FEW)}
    if name in IN_PROCESS:
        loaded = load_model(models["dir"] / FORMATS[name][0], example={"x": models["x"]})
        out = {"results": _with_roles(list(api.values()), *node_roles(loaded)),
               "emulated_nodes": node_roles(loaded)[0], "float_nodes": node_roles(loaded)[1]}
    else:
        out = json.loads(_ok(results[f"run:{name}"]))
    rows = {r["target"]: r for r in out["results"]}
    assert list(rows) == list(FEW)
    for t in FEW:
        for key in ("max_abs_diff", "mean_abs_diff", "snr_db", "agreement_percent"):
            assert rows[t][key] == api[t][key], (t, key)
        assert rows[t]["emulated"] and len(rows[t]["emulated"]) == out["emulated_nodes"].__len__()
    assert len(out["emulated_nodes"]) in (2, 4)  # two LSTM nodes, or four one-direction .tflite ops
    has_head = not name.startswith("tflite")
    assert any("MatMul" in f or "Gemm" in f for f in out["float_nodes"]) == has_head
    file, extra = FORMATS[name]
    kwargs = {"layers": "lstm,head", "batch_first": True} if name == "torch-state-dict" else {}
    loaded = load_model(models["dir"] / file, example={"x": models["x"]}, **kwargs)
    y = loaded.model.run({loaded.model.inputs[0].name: models["x"]})
    np.testing.assert_allclose(next(iter(y.values())), models["refs"][name], rtol=1e-5, atol=2e-6)


def test_compare_all_targets_csv(models, results):
    text = _ok(results["compare:csv"])
    lines = text.strip().splitlines()
    assert lines[0].startswith("target,accuracy_percent,agreement_percent,max_abs_diff")
    names = [ln.split(",")[0] for ln in lines[1:]]
    assert names == targets.names()
    api = {r["target"]: r for r in _api_rows(models, "torch-onnx", targets.list())}
    for ln in lines[1:]:
        cells = ln.split(",")
        r = api[cells[0]]
        if r["error"] is None:
            assert float(cells[3]) == r["max_abs_diff"]
        else:
            assert cells[8]  # the reason it cannot run
    assert "[1/" in results["compare:csv"].stderr  # one progress line per target off a terminal
    assert results["compare:csv"].stderr.count("running ") == len(targets.names())


def test_compare_markdown_and_a_table_that_fits(results):
    md = _ok(results["compare:markdown"]).splitlines()
    assert md[0].startswith("| target | accuracy (%) |") and md[1].startswith("|---|")
    assert [ln.split("|")[1].strip() for ln in md[2:]] == ["fp16", "bf16"]
    table = _ok(results["compare:table"])
    assert all(len(ln) <= 60 for ln in table.splitlines()), table
    # three targets do not fit 60 columns side by side: one row per target instead, nothing cut
    assert sum(ln.split()[0] in ("fp16", "bf16", "fp64") for ln in table.splitlines() if ln.split()) == 3
    assert "…" not in table


def test_time_major_data_is_the_same_run(results):
    out = json.loads(_ok(results["compare:time-major"]))
    same = json.loads(_ok(results["run:torch-onnx"]))
    assert out["results"][0]["max_abs_diff"] == next(r for r in same["results"]
                                                     if r["target"] == "fp16")["max_abs_diff"]


@pytest.mark.parametrize("name", ["keras"])
def test_export_vectors_of_other_formats(models, results, name):
    summary = json.loads(_ok(results[f"export:{name}"]))
    assert summary["target"] == "mli2-sa8" and summary["model_format"] == name
    folder = models["dir"] / f"vec-{name}"
    with np.load(folder / "outputs.npz") as z:
        got = dict(z)
    file, _ = FORMATS[name]
    loaded = load_model(models["dir"] / file, example={"x": models["x"]})
    want = loaded.model.to("mli2-sa8", calibration={"x": models["x"]}).run({"x": models["x"]})
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def _run_file(path: Path, x: np.ndarray) -> np.ndarray:
    """The output y of a converted file, run by its own framework."""
    if path.suffix == ".onnx":
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert [i.name for i in sess.get_inputs()] == ["x"]  # no required state inputs
        return sess.run(["y"], {"x": x})[0]
    if path.suffix == ".pt":
        sd = torch.load(path, weights_only=True)
        layers = 1 + max(int(k.split("_l")[1].split("_")[0]) for k in sd if k.startswith("weight_ih_l"))
        hidden = sd["weight_hh_l0"].shape[1]
        m = torch.nn.LSTM(sd["weight_ih_l0"].shape[1], hidden, num_layers=layers, batch_first=True,
                          bidirectional=any(k.endswith("_reverse") for k in sd))
        m.load_state_dict(sd)
        with torch.no_grad():
            return m(torch.from_numpy(x))[0].numpy()
    if path.suffix == ".keras":
        return keras.ops.convert_to_numpy(keras.saving.load_model(path).predict(x, verbose=0))
    interp = litert_interp.Interpreter(model_path=str(path))
    interp.resize_tensor_input(interp.get_input_details()[0]["index"], x.shape)  # the time axis is dynamic
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@pytest.mark.parametrize("src", list(CONVERT_SOURCES))
def test_convert_between_every_pair_of_formats(models, results, src):
    want = models["stacks"][src]
    for to in SUFFIX:
        if to == src:
            continue
        _ok(results[f"convert:{src}:{to}"])
        got = _run_file(models["dir"] / f"conv-{src}-to-{to}{SUFFIX[to]}", models["x"])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6, err_msg=f"{src} -> {to}")


def test_refusals_and_gates(results):
    res = results["error:float-only"]
    assert res.returncode == 2 and "no recurrent node" in res.stderr and "--allow-float" in res.stderr
    out = json.loads(_ok(results["ok:allow-float"]))
    assert out["emulated_nodes"] == [] and out["results"][0]["snr_db"] is None
    res = results["error:calibration-layout"]
    assert res.returncode == 2 and "--batch-first or --time-major" in res.stderr
    res = results["error:state-dict-layout"]
    assert res.returncode == 2 and "--batch-first or --time-major" in res.stderr
    res = results["error:gate"]
    assert res.returncode == 3 and "gate failed: mli2-sa8: SNR" in res.stderr and "--min-snr 200" in res.stderr
    assert "gate failed: quark: cannot run" in res.stderr and "--skip-unsupported" in res.stderr
    assert res.stdout.startswith("target,")  # the results are printed before the gate fails
    rows = json.loads(_ok(results["ok:skip-unsupported"]))["results"]
    assert rows[0]["target"] == "fp64" and rows[0]["snr_db"] > 100 and rows[1]["error"]


def test_onnxruntime_style_run(models):
    model = fusedrnn.onnx.load(models["dir"] / "torch.onnx")
    y_list = model.run(["y"], {"x": models["x"]})
    y_all = model.run(None, {"x": models["x"]})
    assert isinstance(y_list, list) and len(y_all) == len(model.outputs)
    np.testing.assert_array_equal(y_list[0], model.run({"x": models["x"]})["y"])


def test_keras_models_read_as_they_compute(tmp_path):
    """Bidirectional, return_sequences=False and activations are read as Keras computes them; a functional
    model whose layers do not form a chain is refused, not misread."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, I)).astype(np.float32)
    inp = keras.Input((None, I))
    y = keras.layers.Bidirectional(keras.layers.GRU(H, return_sequences=True), merge_mode="sum")(inp)
    y = keras.layers.Dropout(0.5)(keras.layers.SimpleRNN(H)(y))
    y = keras.layers.Dense(OUT, activation="softmax")(y)
    model = keras.Model(inp, y)
    model.save(tmp_path / "f.keras")
    got = load_model(tmp_path / "f.keras").model.run({"x": x})["y"]
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(model.predict(x, verbose=0)), rtol=1e-5, atol=1e-6)
    a = keras.layers.LSTM(H, return_sequences=True)(inp)
    b = keras.layers.Dense(H)(inp)  # a branch: Dense on the input, not on the LSTM's output
    branching = keras.Model(inp, keras.layers.Dense(OUT)(keras.layers.Add()([a, b])))
    branching.save(tmp_path / "b.keras")
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="Add"):
        load_model(tmp_path / "b.keras")
