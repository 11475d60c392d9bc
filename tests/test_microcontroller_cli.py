"""The TFLM and CMSIS-NN targets in the command line: ``fusedrnn run`` runs the bundled example on them,
``export-vectors`` writes their exact outputs, ``targets`` lists them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import fusedrnn.example as ex
from fusedrnn.cli import main
from fusedrnn.cli.run_cmd import calibration_subset
from fusedrnn.frontends import onnx as fonnx

NEW = ("tflm-int8x16", "tflm-int16x8", "cmsis-nn-s8", "cmsis-nn-s16")


def test_run_bundled_example_on_microcontroller_targets(tmp_path):
    pytest.importorskip("matplotlib")
    report = tmp_path / "report.html"
    args = ["run", "--repeat", "1", "--json", "--report", str(report)] + [a for t in ("fp32", *NEW) for a in ("-t", t)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    html = report.read_text(encoding="utf-8")
    assert all(t in html for t in NEW)
    out = res.output[res.output.index("{"):res.output.rindex("}") + 1]  # (the "report written" line aside)
    rows = {r["target"]: r for r in json.loads(out)["results"]}
    for t in NEW:
        assert rows[t]["error"] is None, rows[t]
        assert rows[t]["agreement_percent"] >= 99.0 and abs(rows[t]["accuracy_percent"] -
                                                            rows["fp32"]["accuracy_percent"]) <= 1.0
        assert 0 < rows[t]["max_abs_diff"] < 0.5
    # TFLM's CMSIS-NN port computes what TFLM's reference kernel computes on this model
    assert rows["cmsis-nn-s8"]["max_abs_diff"] == rows["tflm-int8x16"]["max_abs_diff"]


def test_export_vectors_are_the_targets_outputs(tmp_path):
    res = CliRunner().invoke(main, ["export-vectors", str(ex.model_path()), "--target", "tflm-int8x16", "--input",
                                    str(ex.data_path()), "--out", str(tmp_path), "--samples", "16"])
    assert res.exit_code == 0, res.output
    with np.load(tmp_path / "outputs.npz") as o, np.load(ex.data_path()) as d:
        x = d["x"]
        want = fonnx.load(ex.model_path()).to("tflm-int8x16", calibration=calibration_subset({"x": x})).run(
            {"x": x[:16]})
        np.testing.assert_array_equal(o["logits"], want["logits"])
    assert json.loads((tmp_path / "manifest.json").read_text())["target"]["family"] == "tflm"


def test_targets_lists_them():
    res = CliRunner().invoke(main, ["targets", "--json"])
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["tflm-int8x16"]["bit_exact"] and rows["cmsis-nn-s16"]["family"] == "cmsis-nn"


def test_convert_to_tflite_runs_on_tflm_as_the_target_does(tmp_path):
    """``convert --to tflite --scheme int8x16 --time T``: a model with fixed shapes (as Vela needs) that the
    tflite-micro interpreter runs bit for bit as the tflm-int8x16 target runs the imported model."""
    from tflm_cases import run_tflm

    import fusedrnn

    with np.load(ex.data_path()) as d:
        x = d["x"][:32].transpose(1, 0, 2).astype(np.float32)  # the LSTM node's input: [T=8, B, 8]
    np.savez(tmp_path / "cal.npz", X=x)
    res = CliRunner().invoke(main, ["convert", str(ex.model_path()), "--to", "tflite", "--scheme", "int8x16",
                                    "--calibration", str(tmp_path / "cal.npz"), "--batch", "1", "--time", "8",
                                    "--out", str(tmp_path / "m.tflite")])
    assert res.exit_code == 0, res.output
    layer = fusedrnn.LSTM.from_tflite(tmp_path / "m.tflite")
    em = layer.to("tflm-int8x16", calibration="tflite")
    q = em.prepared.quantized[0]
    xs = x[:, :1].transpose(1, 0, 2) if layer.batch_first else x[:, :1]
    (out,) = run_tflm((tmp_path / "m.tflite").read_bytes(), q.quantize_input(xs))
    np.testing.assert_array_equal(em(xs)[0], q.dequantize_output(out))
