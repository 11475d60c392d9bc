"""The ``fusedrnn`` command line (click's CliRunner)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from toy_targets import toy_quantized

import fusedrnn
import fusedrnn.example as ex
from fusedrnn import targets
from fusedrnn.cli import main

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


@pytest.fixture(scope="module")
def ort_accuracy():
    """The example's test accuracy (%) computed from onnxruntime's outputs, independently of fusedrnn."""
    with np.load(ex.data_path()) as d:
        x, y = d["x"], d["y"]
    sess = ort.InferenceSession(str(ex.model_path()), providers=["CPUExecutionProvider"])
    logits = sess.run(["logits"], {"x": x})[0]
    return float(np.mean(logits.argmax(1) == y) * 100), logits


def test_version(runner):
    res = runner.invoke(main, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"fusedrnn {fusedrnn.__version__}"


def test_help_lists_commands(runner):
    res = runner.invoke(main, ["--help"])
    assert res.exit_code == 0
    assert "run" in res.output and "targets" in res.output


def test_targets_table(runner):
    res = runner.invoke(main, ["targets"])
    assert res.exit_code == 0, res.output
    for t in targets.list():
        assert t.name in res.output
    for header in ("name", "family", "bit-exact", "calibration", "features", "cannot express"):
        assert header in res.output
    fp16 = [ln for ln in res.output.splitlines() if ln.split("│")[1:2] and ln.split("│")[1].strip() == "fp16"]
    assert fp16[-1].split("│")[2].strip() == "lstm, gru, rnn" and fp16[-1].split("│")[3].strip() == "-"


def test_targets_json(runner):
    res = runner.invoke(main, ["targets", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["name"] for r in rows] == targets.names()
    by_name = {r["name"]: r for r in rows}
    assert by_name["fp64"]["compute_dtype"] == "float64"
    assert by_name["fp16"]["rounding"] == targets.get("fp16").rounding.name
    assert "lstm" in by_name["fp32"]["features"]


def test_run_example_table(runner, ort_accuracy):
    res = runner.invoke(main, ["run", "--repeat", "1"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for t in targets.names():
        row = [ln for ln in lines if ln.split() and ln.split()[0] == t]
        assert len(row) == 1, (t, res.output)
    fp32 = next(ln for ln in lines if ln.split() and ln.split()[0] == "fp32")
    cells = [c.strip() for c in fp32.split("│")]
    assert cells[1] == f"{ort_accuracy[0]:.2f}"  # accuracy (%)
    assert cells[2] == "100.00"  # agreement with itself
    assert float(cells[3]) == 0.0  # max |delta| vs itself
    assert "accuracy (%)" in res.output and "time (ms)" in res.output


def test_run_example_json(runner, ort_accuracy):
    res = runner.invoke(main, ["run", "--json", "--repeat", "1"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["samples"] == len(ort_accuracy[1]) and out["reference"] == "fp32"
    rows = {r["target"]: r for r in out["results"]}
    assert list(rows) == targets.names()
    assert rows["fp32"]["accuracy_percent"] == pytest.approx(ort_accuracy[0], abs=1e-9)
    assert rows["fp32"]["max_abs_diff"] == 0.0 and rows["fp32"]["agreement_percent"] == 100.0
    for name, r in rows.items():
        if r["error"] is not None:  # a target that cannot express the example's forward LSTM says why
            assert targets.get(name).family != "float" and r["time_ms"] is None and len(r["error"]) > 10
            continue
        assert r["time_ms"] > 0 and r["accuracy_percent"] >= 90.0 and r["agreement_percent"] >= 95.0, name
    assert 0 < rows["fp16"]["max_abs_diff"] < 0.1
    assert rows["fp64"]["max_abs_diff"] < 1e-5


def test_run_selected_targets_still_compare_with_fp32(runner):
    res = runner.invoke(main, ["run", "--json", "--repeat", "1", "-t", "bf16", "--target", "fp16", "-t", "bf16"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["results"]
    assert [r["target"] for r in rows] == ["bf16", "fp16"]
    assert all(r["max_abs_diff"] > 0 for r in rows)


def test_run_model_with_data(runner, tmp_path, ort_accuracy):
    with np.load(ex.data_path()) as d:
        x, y = d["x"][:50], d["y"][:50]
    data = tmp_path / "inputs.npz"
    np.savez(data, x=x.astype(np.float64), y=y)  # float64 is cast to the model's float32
    res = runner.invoke(main, ["run", str(ex.model_path()), "--data", str(data), "-t", "fp32", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["samples"] == 50
    want = float(np.mean(ort_accuracy[1][:50].argmax(1) == y) * 100)
    assert out["results"][0]["accuracy_percent"] == pytest.approx(want)
    # without labels there is no accuracy, but the comparison with fp32 still runs
    np.savez(data, x=x)
    res = runner.invoke(main, ["run", str(ex.model_path()), "--data", str(data), "-t", "fp16"])
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if ln.split() and ln.split()[0] == "fp16")
    assert row.split("│")[1].strip() == "-"


def test_unknown_target_exits_2(runner):
    res = runner.invoke(main, ["run", "--target", "nope"])
    assert res.exit_code == 2
    assert "unknown target 'nope'" in res.output and "fp32" in res.output
    assert "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["run", "missing.onnx", "--data", "missing.npz"], "MODEL: no such file: missing.onnx"),
    (["run", "--data", "missing.npz"], "--data: no such file: missing.npz"),
    (["run", str(ex.model_path())], "--data: an npz with the inputs of MODEL is required"),
])
def test_user_errors_exit_2(runner, args, message):
    res = runner.invoke(main, args)
    assert res.exit_code == 2, res.output
    assert res.output.strip() == f"Error: {message}" or message in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_bad_data_and_bad_model_exit_2(runner, tmp_path):
    data = tmp_path / "d.npz"
    np.savez(data, z=np.zeros(3, np.float32))
    res = runner.invoke(main, ["run", str(ex.model_path()), "--data", str(data)])
    assert res.exit_code == 2 and "lacks the model input(s) x" in res.output
    np.savez(data, x=np.zeros((2, 8, 8), np.int64))
    res = runner.invoke(main, ["run", str(ex.model_path()), "--data", str(data)])
    assert res.exit_code == 2 and "dtype int64" in res.output
    np.savez(data, x=np.zeros((2, 8, 5), np.float32))
    res = runner.invoke(main, ["run", str(ex.model_path()), "--data", str(data)])
    assert res.exit_code == 2 and "x: expected shape" in res.output
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 not a model")
    res = runner.invoke(main, ["run", str(bad), "--data", str(data)])
    assert res.exit_code == 2 and res.output.startswith("Error: MODEL:")
    for r in [res]:
        assert "Traceback" not in r.output


def test_bundled_model_is_the_one_run(runner):
    # the table title names the bundled files
    res = runner.invoke(main, ["run", "-t", "fp32", "--repeat", "1"])
    assert ex.MODEL_FILE in res.output and ex.DATA_FILE in res.output
    assert onnx.load(ex.model_path()).graph.name == "digits_lstm"


def test_run_calibrates_quantized_targets_and_reports_unsupported_ones(runner, monkeypatch):
    calls: list = []
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-q", toy_quantized("toy-q", calls))
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-no", toy_quantized("toy-no", [], cannot="no peepholes"))
    res = runner.invoke(main, ["run", "--json", "--repeat", "1", "-t", "toy-q", "-t", "toy-no"])
    assert res.exit_code == 0, res.output
    rows = {r["target"]: r for r in json.loads(res.output)["results"]}
    assert calls == [256]  # calibrated once, on the first 256 samples of the data
    q = rows["toy-q"]
    assert q["error"] is None and q["max_abs_diff"] > 0 and q["snr_db"] > 0 and q["accuracy_percent"] > 50
    assert rows["toy-no"]["error"].endswith("node 'lstm' (LSTM): no peepholes") and rows["toy-no"]["time_ms"] is None
    res = runner.invoke(main, ["run", "--repeat", "1", "-t", "toy-no"])
    assert res.exit_code == 0 and "cannot run:" in res.output and "no peepholes" in res.output


def test_run_with_calibration_file(runner, monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-q2", toy_quantized("toy-q2", calls))
    with np.load(ex.data_path()) as d:
        x = d["x"][:10]
    cal = tmp_path / "cal.npz"
    np.savez(cal, x=x)
    res = runner.invoke(main, ["run", "--json", "--repeat", "1", "-t", "toy-q2", "--calibration", str(cal)])
    assert res.exit_code == 0, res.output
    assert calls == [10]
    res = runner.invoke(main, ["run", "-t", "toy-q2", "--calibration", str(tmp_path / "missing.npz")])
    assert res.exit_code == 2 and "--calibration: no such file" in res.output


def test_compare_side_by_side(runner, monkeypatch):
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-no2", toy_quantized("toy-no2", [], cannot="no clip"))
    args = ["compare", str(ex.model_path()), "--data", str(ex.data_path()), "--repeat", "1"]
    res = runner.invoke(main, [*args, "-t", "fp16", "-t", "bf16", "-t", "toy-no2"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    header = next(ln for ln in lines if "fp16" in ln and "bf16" in ln)
    assert header.index("fp16") < header.index("bf16")
    acc = next(ln for ln in lines if ln.strip().startswith("accuracy (%)"))
    assert len(acc.split("│")) == 3  # one column per target that ran
    assert any(ln.startswith("toy-no2: cannot run:") and "no clip" in ln for ln in lines)
    res = runner.invoke(main, [*args, "-t", "fp16", "--json"])
    assert [r["target"] for r in json.loads(res.output)["results"]] == ["fp16"]
    assert runner.invoke(main, ["compare"]).exit_code == 2  # MODEL is required


def test_bench_lists_and_runs_suites(runner, tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    res = runner.invoke(main, ["bench", "--list", "--root", str(root)])
    assert res.exit_code == 0 and "float" in res.output and "mli" in res.output
    # a suite runs as ``python -m benchmarks.bench_<suite> ARGS`` in the checkout; here a fake one
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_float.py").write_text(
        "import json, sys\nopen('ran.json', 'w').write(json.dumps(sys.argv[1:]))\nsys.exit(3)\n")
    res = runner.invoke(main, ["bench", "float", "--quick", "--shapes", "S1", "--root", str(tmp_path)])
    assert res.exit_code == 3  # the suite's own exit status
    assert json.loads((tmp_path / "ran.json").read_text()) == ["--quick", "--shapes", "S1"]
    res = runner.invoke(main, ["bench", "nope", "--root", str(tmp_path)])
    assert res.exit_code == 2 and "unknown suite 'nope'" in res.output
    res = runner.invoke(main, ["bench", "float", "--root", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no benchmarks/ folder" in res.output
