"""``fusedrnn run / compare --report``: the self-contained HTML report (structure, plots, per-node errors checked
against onnxruntime's recurrent outputs, and a headless-Chromium rendering without console errors)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper
from toy_targets import toy_quantized

import fusedrnn.example as ex
from fusedrnn import targets
from fusedrnn.cli import main
from fusedrnn.cli import report as rep
from fusedrnn.frontends import onnx as fonnx

pytest.importorskip("matplotlib", reason="the report needs the 'report' extra (matplotlib)")

SAMPLES = 48
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Checker(HTMLParser):
    """Collects a parse of the report: balanced non-void tags, figures, images, table rows."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids = [], [], []
        self.figures, self.images, self.rows, self._row, self._cell, self.scripts = [], [], {}, None, None, 0
        self._table = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "figure":
            self.figures.append((a.get("data-kind"), a.get("data-target")))
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag == "table":
            self._table = a.get("id")
            self.rows[self._table] = []
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = ""
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        if tag == "tr" and self._table is not None:
            self.rows[self._table].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def parse(text: str) -> _Checker:
    assert text.startswith("<!DOCTYPE html>")
    p = _Checker()
    p.feed(text)
    p.close()
    assert not p.errors and not p.stack, (p.errors, p.stack)
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    with np.load(ex.data_path()) as d:
        x, y = d["x"][:SAMPLES], d["y"][:SAMPLES]
    path = tmp_path_factory.mktemp("data") / "digits48.npz"
    np.savez(path, x=x, y=y)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory, data):
    """The report of ``run`` on fp16, bf16, a toy quantized target and one that cannot run the model."""
    out = tmp_path_factory.mktemp("report") / "out.html"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(targets.registry._REGISTRY, "toy-q", toy_quantized("toy-q"))
        mp.setitem(targets.registry._REGISTRY, "toy-no", toy_quantized("toy-no", cannot="no peepholes"))
        res = CliRunner().invoke(main, ["run", str(ex.model_path()), "--data", str(data), "--repeat", "1", "--json",
                                        "--report", str(out), "-t", "fp16", "-t", "bf16", "-t", "toy-q",
                                        "-t", "toy-no"])
    assert res.exit_code == 0, res.output
    return out, res


def test_report_structure(report):
    out, res = report
    assert "report written to" in res.stderr
    rows = json.loads(res.stdout)["results"]  # --json output stays machine-readable
    assert [r["target"] for r in rows] == ["fp16", "bf16", "toy-q", "toy-no"]
    text = out.read_text(encoding="utf-8")
    p = parse(text)
    for section in ("summary-section", "error-distributions", "error-growth", "per-node", "summary", "nodes"):
        assert section in p.ids
    assert p.scripts == 0 and "http://" not in text and "https://" not in text  # self-contained, no network
    ran = ["fp16", "bf16", "toy-q"]
    assert [t for k, t in p.figures if k == "error-distribution"] == ran  # one plot per target that ran
    assert [t for k, t in p.figures if k == "error-growth"] == ran
    assert len(p.images) == 2 * len(ran)
    summary = {r[0]: r for r in p.rows["summary"][1:]}
    assert list(summary) == ["fp16", "bf16", "toy-q", "toy-no"]
    assert summary["toy-no"][1].startswith("cannot run:") and "no peepholes" in summary["toy-no"][1]
    by_target = {r["target"]: r for r in rows}
    assert summary["bf16"][3] == format(by_target["bf16"]["max_abs_diff"], ".2e")  # same numbers as the CLI's


def test_report_images_are_wellformed_svg(report):
    p = parse(report[0].read_text(encoding="utf-8"))
    svg = "{http://www.w3.org/2000/svg}"
    for src, (_, target) in zip(p.images, p.figures, strict=True):
        prefix = "data:image/svg+xml;base64,"
        assert src.startswith(prefix)
        root = ET.fromstring(base64.b64decode(src[len(prefix):], validate=True))
        assert root.tag == f"{svg}svg"
        assert len(list(root.iter(f"{svg}path"))) >= 5  # axes, ticks and data were drawn
        assert f"{target}:" in " ".join(t.text or "" for t in root.iter(f"{svg}text"))  # the plot's title


def _onnxruntime_lstm_y(x: np.ndarray) -> np.ndarray:
    """The example's LSTM output Y from onnxruntime (an outside oracle for the recorded node outputs)."""
    ort = pytest.importorskip("onnxruntime")
    proto = onnx.load(ex.model_path())
    node = next(n for n in proto.graph.node if n.op_type == "LSTM")
    node.output[0] = node.output[0] or "lstm_Y"  # the example omits Y
    proto.graph.output.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None))
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run([node.output[0]], {"x": x})[0]


def test_per_node_table_matches_onnxruntime(report, data):
    p = parse(report[0].read_text(encoding="utf-8"))
    header, *rows = p.rows["nodes"]
    assert header[:5] == ["node", "op", "X shape", "Y shape", "target"]
    assert [(r[0], r[1], r[4]) for r in rows] == [("lstm", "LSTM", t) for t in ("fp16", "bf16", "toy-q")]
    with np.load(data) as d:
        x = d["x"]
    y_ort = _onnxruntime_lstm_y(x)
    T, B, H = 8, SAMPLES, 64
    assert y_ort.shape == (T, 1, B, H)
    assert all(r[2] == f"{T}×{B}×8" and r[3] == f"{T}×1×{B}×{H}" for r in rows)
    # the table's numbers for fp16: |fp16 Y - fp32 Y| where fp32 Y agrees with onnxruntime to float rounding
    model = fonnx.load(ex.model_path())
    probed, probes = rep.instrument(model)
    assert [(q.name, q.op_type, q.time_axis) for q in probes] == [("lstm", "LSTM", 0)]
    ys = {t: probed.to(t).run({"x": x})[probes[0].y] for t in ("fp32", "fp16")}
    np.testing.assert_allclose(ys["fp32"], y_ort, atol=1e-5)
    d = np.abs(ys["fp16"].astype(np.float64) - ys["fp32"])
    fp16 = rows[0]
    assert float(fp16[5]) == pytest.approx(d.max(), rel=1e-3) and float(fp16[6]) == pytest.approx(d.mean(), rel=1e-3)
    assert np.abs(ys["fp16"].astype(np.float64) - y_ort).max() == pytest.approx(d.max(), abs=1e-5)
    # and the instrumented model still gives the model's own outputs unchanged
    np.testing.assert_array_equal(probed.to("fp16").run({"x": x})["logits"], model.to("fp16").run({"x": x})["logits"])


def test_growth_curve_averages_each_timestep():
    rng = np.random.default_rng(1)
    T, D, B, H = 5, 2, 3, 4
    y, ref = rng.normal(size=(T, D, B, H)), rng.normal(size=(T, D, B, H))
    want = [np.mean([abs(y[t, d, b, h] - ref[t, d, b, h]) for d in range(D) for b in range(B) for h in range(H)])
            for t in range(T)]
    np.testing.assert_allclose(rep.growth_curve(y, ref, 0), want, rtol=1e-12)
    yb, refb = y.transpose(2, 0, 1, 3), ref.transpose(2, 0, 1, 3)  # ONNX layout=1: [B, T, D, H]
    assert yb.shape == (B, T, D, H)
    np.testing.assert_allclose(rep.growth_curve(yb, refb, 1), want, rtol=1e-12)


def _two_node_model(T=6, B=3, I=4) -> onnx.ModelProto:
    """x [B, T, I] -> GRU (layout=1, H=5) -> squeeze/transpose -> bidirectional LSTM (H=3, Y omitted) -> h."""
    rng = np.random.default_rng(7)

    def init(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, rng.normal(scale=0.5, size=shape).ravel())

    nodes = [
        helper.make_node("GRU", ["x", "Wg", "Rg"], ["yg"], name="enc_gru", hidden_size=5, layout=1),
        helper.make_node("Squeeze", ["yg", "ax"], ["yg3"]),
        helper.make_node("Transpose", ["yg3"], ["yt"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["yt", "Wl", "Rl"], ["", "h"], name="dec/lstm", hidden_size=3,
                         direction="bidirectional"),
    ]
    inits = [init("Wg", [1, 15, I]), init("Rg", [1, 15, 5]), init("Wl", [2, 12, 5]), init("Rl", [2, 12, 3]),
             helper.make_tensor("ax", TensorProto.INT64, [1], [2])]
    graph = helper.make_graph(nodes, "two_nodes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", T, I])],
                              [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, "B", 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_compare_report_on_two_node_model(tmp_path):
    T, B = 6, 3
    path = tmp_path / "two.onnx"
    onnx.save(_two_node_model(T, B), path)
    data = tmp_path / "x.npz"
    np.savez(data, x=np.random.default_rng(0).normal(size=(B, T, 4)).astype(np.float32))
    out = tmp_path / "cmp.html"
    res = CliRunner().invoke(main, ["compare", str(path), "--data", str(data), "--repeat", "1", "-t", "fp16",
                                    "-t", "bf16", "--report", str(out)])
    assert res.exit_code == 0, res.output
    p = parse(out.read_text(encoding="utf-8"))
    assert [t for k, t in p.figures if k == "error-growth"] == ["fp16", "bf16"]
    rows = p.rows["nodes"][1:]
    assert [(r[0], r[1], r[4]) for r in rows] == [("enc_gru", "GRU", "fp16"), ("dec/lstm", "LSTM", "fp16"),
                                                  ("enc_gru", "GRU", "bf16"), ("dec/lstm", "LSTM", "bf16")]
    assert rows[0][2] == f"{B}×{T}×4" and rows[0][3] == f"{B}×{T}×1×5"  # layout=1 GRU
    assert rows[1][2] == f"{T}×{B}×5" and rows[1][3] == f"{T}×2×{B}×3"  # omitted Y is still recorded
    assert all(float(r[5]) > 0 for r in rows)
    model = fonnx.load(path)
    probed, probes = rep.instrument(model)
    assert [(q.name, q.time_axis) for q in probes] == [("enc_gru", 1), ("dec/lstm", 0)]
    assert [o.name for o in probed.outputs][:1] == ["h"]


def test_report_needs_matplotlib(monkeypatch, tmp_path):
    for mod in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, mod, None)  # import fails as if the extra were not installed
    res = CliRunner().invoke(main, ["run", "-t", "fp16", "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "Error: --report: writing the HTML report needs matplotlib; install it with pip install 'fusedrnn[report]'"]
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("where,message", [("missing/r.html", "--report: no such directory"),
                                           (".", "is a directory")])
def test_report_path_errors(tmp_path, where, message):
    res = CliRunner().invoke(main, ["run", "-t", "fp16", "--report", str(tmp_path / where)])
    assert res.exit_code == 2 and message in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


# ---- headless Chromium ---------------------------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium found (install Debian's package: apt-get install -y chromium)")


def render(html_path, png_path) -> list[str]:
    """Screenshot ``html_path`` in headless Chromium; returns the page's console messages."""
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--enable-logging=stderr", "--v=0", f"--screenshot={png_path}", "--window-size=1200,1800",
           html_path.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert png_path.is_file(), proc.stderr[-2000:]
    return [ln for ln in proc.stderr.splitlines() if re.search(r":CONSOLE(\(\d+\))?:", ln) or "Uncaught" in ln]


def test_report_renders_in_headless_chromium(report, tmp_path):
    import matplotlib.image

    png = tmp_path / "shot.png"
    assert render(report[0], png) == []
    img = matplotlib.image.imread(png)
    assert img.shape[:2] == (1800, 1200)
    ink = np.mean(np.any(img[..., :3] < 0.9, axis=-1))
    assert ink > 0.03  # text, tables and plots were drawn, not a blank page


def test_chromium_harness_sees_console_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>undefined_function()</script></body></html>")
    messages = render(page, tmp_path / "bad.png")
    assert any("undefined_function" in m for m in messages)
