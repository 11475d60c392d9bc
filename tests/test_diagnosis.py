"""Diagnosis (issue 22): calibration methods checked against their definitions, saturation counts against direct
counts from the NumPy integer kernels, per-node isolated / cumulative errors, keep-float, the search and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from diagnosis_models import embedding_model, mel_like

import fusedrnn
from fusedrnn.cells.calibration import (
    METHODS,
    Calibration,
    ValueHistogram,
    choose_range,
    histogram_of,
    kl_of_threshold,
    mse_of_threshold,
)
from fusedrnn.cells.observers import SaturationCounter
from fusedrnn.cli import main
from fusedrnn.errors import AttributeValueError
from fusedrnn.frontends.diagnosis import cosine, diagnose, snr_db

rng = np.random.default_rng(2022)


# ---- calibration methods against their definitions ---------------------------------------------------------
def _heavy_tailed(n=50_000, seed=0):
    r = np.random.default_rng(seed)
    return np.concatenate([r.standard_normal(n), r.standard_normal(n // 500) * 15.0, [40.0]])


def test_histogram_counts_every_value_in_its_bin_across_growth():
    v = _heavy_tailed()
    h = ValueHistogram(256)
    for part in np.array_split(v[np.argsort(np.abs(v))], 7):  # ever larger values: the range doubles often
        h.add(part)
    h2 = histogram_of(v, 256)
    assert h.n == h2.n == v.size
    assert (h.min, h.max) == (float(v.min()), float(v.max()))
    assert h.A == h2.A == 64.0
    expected, _ = np.histogram(v, bins=h.edges)
    assert np.array_equal(h.counts, expected)
    assert np.array_equal(h2.counts, expected)


def _bracket(values, q):
    """The two samples between which the q-quantile (0..1) of ``values`` lies."""
    s = np.sort(values)
    k = min(max(int(np.ceil(q * s.size)), 1), s.size - 1)
    return s[k - 1], s[k]


def test_percentile_is_the_definition_within_one_bin():
    v = _heavy_tailed()
    h = histogram_of(v)
    width = 2 * h.A / h.bins
    for p in (90.0, 99.0, 99.9, 99.99):
        lo, hi = choose_range(Calibration(method="percentile", percentile=p), h, bits=8, symmetric=True)
        assert hi == -lo
        a, b = _bracket(np.abs(v), p / 100)
        assert a - width <= hi <= b + width
        lo, hi = choose_range(Calibration(method="percentile", percentile=p), h, bits=8, symmetric=False)
        tail = (100 - p) / 200
        a, b = _bracket(v, tail)
        assert a - width <= lo <= b + width
        a, b = _bracket(v, 1 - tail)
        assert a - width <= hi <= b + width


def test_mse_threshold_minimises_the_squared_error_on_the_samples():
    v = _heavy_tailed(seed=3)
    h = histogram_of(v)
    bits = 8
    _, t = choose_range(Calibration(method="mse"), h, bits=bits, symmetric=True)

    def sample_mse(t):  # the definition, on the raw values: clip to ±t, round to the grid of 2^bits - 1 steps
        step = 2 * t / (2**bits - 1)
        q = np.clip(np.round(np.clip(v, -t, t) / step) * step, -t, t)
        return float(np.mean((v - q) ** 2))

    grid = np.linspace(0.5, 40.0, 400)
    best = min(sample_mse(g) for g in grid)
    assert sample_mse(t) <= best * 1.05
    # the histogram form is the same sum written over bins
    counts, edges = h.absolute()
    centres = (edges[:-1] + edges[1:]) / 2
    noise = (6.0 / 255) ** 2 / 12
    direct = sum(c * ((x - 3.0) ** 2 if x > 3.0 else noise) for x, c in zip(centres, counts, strict=True))
    assert math.isclose(mse_of_threshold(centres, counts, 3.0, 8), direct, rel_tol=1e-9)


def _kl_naive(counts, i, levels):
    """KL(P‖Q) written element by element from the definition (TensorRT's entropy calibration)."""
    p = [float(c) for c in counts[:i]]
    p[-1] += float(sum(counts[i:]))
    q = [0.0] * i
    for k in range(levels):
        a = int(np.floor(k * i / levels))
        b = int(np.floor((k + 1) * i / levels)) if k < levels - 1 else i
        used = [j for j in range(a, b) if counts[j] > 0]
        mass = float(sum(counts[a:b]))
        for j in used:
            q[j] = mass / len(used)
    ps, qs = sum(p), sum(q)
    total = 0.0
    for pj, qj in zip(p, q, strict=True):
        if pj > 0:
            if qj == 0:
                return math.inf
            total += pj / ps * math.log((pj / ps) / (qj / qs))
    return total


@pytest.mark.parametrize("seed", range(4))
def test_kl_of_threshold_is_the_definition(seed):
    r = np.random.default_rng(seed)
    counts = r.integers(0, 50, 300) * (r.random(300) < 0.7)
    for i in (16, 17, 64, 150, 299):
        assert math.isclose(kl_of_threshold(counts, i, 16), _kl_naive(counts, i, 16), rel_tol=1e-9, abs_tol=1e-12)


def test_entropy_picks_the_threshold_of_least_divergence():
    v = _heavy_tailed(seed=5)
    h = histogram_of(v, 512)
    _, t = choose_range(Calibration(method="entropy", bins=512), h, bits=6, symmetric=True)
    counts, edges = h.absolute()
    last = int(np.max(np.nonzero(counts)[0])) + 1
    kls = {i: _kl_naive(counts, i, 32) for i in range(32, last + 1)}
    best = min(kls, key=kls.get)
    assert t == pytest.approx(edges[best])
    assert t < np.abs(v).max()  # the outliers are clipped


def test_every_method_contains_zero_and_stays_within_the_values():
    v = rng.uniform(0.5, 3.0, 10_000)  # all positive: the ranges still contain 0
    h = histogram_of(v)
    for m in METHODS:
        for sym in (False, True):
            lo, hi = choose_range(Calibration(method=m), h, bits=8, symmetric=sym)
            assert lo <= 0 <= hi
            assert hi <= v.max() + 1e-12 and (sym or lo >= min(v.min(), 0))


@pytest.mark.parametrize("bad, message", [
    (dict(method="kl"), "method: expected one of"),
    (dict(percentile=0), "percentile: expected a number in"),
    (dict(percentile=101.0), "percentile"),
    (dict(bins=102), "bins: expected a multiple of 4"),
    (dict(per_node={"a": "mse"}), "per_node['a']: expected a Calibration"),
])
def test_calibration_settings_are_checked(bad, message):
    with pytest.raises(AttributeValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Calibration(**bad)


# ---- methods in the targets -----------------------------------------------------------------------------------
def _lstm(I=12, H=16, D=1, scale=0.5, seed=0):
    r = np.random.default_rng(seed)
    direction = "bidirectional" if D == 2 else "forward"
    return fusedrnn.LSTM(r.uniform(-scale, scale, (D, 4 * H, I)), r.uniform(-scale, scale, (D, 4 * H, H)),
                         r.uniform(-0.1, 0.1, (D, 4 * H)), direction=direction)


@pytest.mark.parametrize("target", ["mli2-sa8", "mli2-fx16", "litert-int8x16", "tflm-int8x16"])
def test_sdk_method_is_the_targets_own_recipe(target):
    layer = _lstm(D=2)
    x = rng.standard_normal((15, 6, 12))
    plain, _ = layer.to(target, calibration=x)(x)
    sdk, _ = layer.to(target, calibration=Calibration(x))(x)
    assert np.array_equal(plain, sdk)


@pytest.mark.parametrize("target", ["mli2-sa8", "litert-int8x16"])
def test_methods_change_the_ranges_the_target_reports(target):
    layer = _lstm()
    x = rng.standard_normal((30, 8, 12))
    x[3, 2, :4] = 25.0  # an outlier: min/max ranges keep it, percentile clips it
    ranges = {m: layer.to(target, calibration=Calibration(x, method=m, percentile=99.0)).prepared.ranges[0]
              for m in ("minmax", "percentile")}
    assert ranges["minmax"]["input"][1] == pytest.approx(25.0)
    assert ranges["percentile"]["input"][1] < 5.0
    assert ranges["percentile"]["cell"][1] <= ranges["minmax"]["cell"][1]


# ---- saturation counts ----------------------------------------------------------------------------------------
def _direct_counts_mli(prepared, x):
    """Step by step through the NumPy MLI loop (one call per step, state carried): the cell and h of every step
    counted at the int8 limits."""
    from fusedrnn.mli import current_build
    from fusedrnn.targets.mli.cells import lstm_sequence

    q = prepared.directions[0]
    xq = q.quantize(x, q.q.inp)
    h = q.quantize(np.zeros((x.shape[1], 16)), q.q.h0)
    c = q.quantize(np.zeros((x.shape[1], 16)), q.q.cell)
    bld = current_build()
    counts = {"cell": 0, "hidden": 0}
    for s in range(x.shape[0]):
        quant = q.q if s == 0 else type(q.q)(**{**q.q.__dict__, "h0": q.q.out})
        _, h, c = lstm_sequence(xq[s:s + 1], h, c, q.Wi, q.Wo, q.b, quant, act="tanh", reverse=False,
                                luts=prepared.luts, full_accu=bld.full_accu, mode=bld.mode, engine="numpy")
        counts["cell"] += int(np.count_nonzero((c <= -128) | (c >= 127)))
        counts["hidden"] += int(np.count_nonzero((h <= -128) | (h >= 127)))
    return counts


def _direct_counts_litert(prepared, x, sx, zx):
    from fusedrnn.targets.tflite_quant import quantize_values

    k = prepared.kernels[0]
    xq = quantize_values(x, sx, zx, np.int8)
    (_, _), (sh, zh), sc = prepared._q[0]
    state = (quantize_values(np.zeros((x.shape[1], k.n_output)), sh, zh, np.int8),
             np.zeros((x.shape[1], k.n_cell), np.int16))
    counts = {"cell": 0, "hidden": 0}
    for s in range(x.shape[0]):
        _, state = k.run(xq[s:s + 1], state, engine="numpy")
        counts["cell"] += int(np.count_nonzero((state[1] <= -32768) | (state[1] >= 32767)))
        counts["hidden"] += int(np.count_nonzero((state[0] <= -128) | (state[0] >= 127)))
    return counts


def _totals(counter):
    out = {}
    for row in counter.summary():
        out[row["point"]] = out.get(row["point"], 0) + row["saturated"]
    return out


@pytest.mark.parametrize("target", ["mli2-sa8", "litert-int8x16"])
@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_saturation_counts_match_a_direct_count(target, scale):
    layer = _lstm(scale=scale, seed=7)
    x = rng.standard_normal((12, 5, 12)) * 2
    emulated = layer.to(target, calibration=x[:, :2] * 0.5)  # a narrow calibration: the run saturates
    y0, _ = emulated(x)
    counter = SaturationCounter(window=5)
    emulated.prepared.probe = counter
    y1, _ = emulated(x)
    emulated.prepared.probe = None
    assert np.array_equal(y0, y1)  # counting does not change the result
    got = _totals(counter)
    if target == "mli2-sa8":
        direct = _direct_counts_mli(emulated.prepared, x)
    else:
        (sx, zx), _, _ = emulated.prepared._q[0]
        direct = _direct_counts_litert(emulated.prepared, x, sx, zx)
    assert got["cell"] == direct["cell"]
    assert got["hidden"] == direct["hidden"]
    rows = counter.summary()
    assert {r["gate"] for r in rows if r["point"] == "preact"} == set("ifgo")
    assert all(len(r["windows"]) == 3 and sum(w[1] for w in r["windows"]) == r["values"] for r in rows)
    assert all(r["values"] == 12 * 5 * 16 for r in rows)


@pytest.mark.parametrize("target", ["mli2-sa8", "litert-int8x16"])
def test_gate_saturation_grows_with_the_weights(target):
    x = rng.standard_normal((10, 4, 12))
    fractions = []
    for scale in (0.01, 30.0):
        emulated = _lstm(scale=scale, seed=1).to(target, calibration=x)
        counter = SaturationCounter()
        emulated.prepared.probe = counter
        emulated(x)
        fractions.append(np.mean([r["fraction"] for r in counter.summary() if r["point"] == "preact"]))
    assert fractions[0] == 0.0
    assert fractions[1] > 0.3


# ---- the model-level diagnosis ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_model():
    model = fusedrnn.onnx.load(embedding_model(hidden=32, inputs=10, seed=4))
    cal = {"mels": mel_like(20, 6, inputs=10, seed=1)}
    data = {"mels": mel_like(20, 6, inputs=10, seed=2)}
    return model, cal, data


def test_measures():
    a = rng.standard_normal((5, 8))
    assert snr_db(a, a) == math.inf
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, -a) == pytest.approx(-1.0)
    assert snr_db(a + 0.1, a) == pytest.approx(10 * np.log10(np.sum(a * a) / (a.size * 0.01)))


def test_isolated_and_cumulative(small_model):
    model, cal, data = small_model
    r = diagnose(model, ["fp32", "mli2-sa8"], cal, data, window=4, methods=("sdk", "percentile"))
    assert r["nodes"] == ["lstm0", "lstm1", "lstm2"]
    fp32 = r["targets"]["fp32"]
    assert all(n["cumulative"]["snr_db"] == math.inf for n in fp32["nodes"].values())
    sa8 = r["targets"]["mli2-sa8"]
    first = sa8["nodes"]["lstm0"]
    assert first["isolated"] == first["cumulative"]  # the first node's inputs are float in both runs
    last = sa8["nodes"]["lstm2"]
    assert last["cumulative"]["mean_abs"] > last["isolated"]["mean_abs"]  # errors of earlier nodes add up
    assert len(last["cumulative"]["curve"]) == 20
    assert sorted(sa8["ranking"]) == ["lstm0", "lstm1", "lstm2"]
    assert [sa8["nodes"][n]["sensitivity"] for n in sa8["ranking"]] == sorted(
        sa8["nodes"][n]["sensitivity"] for n in sa8["ranking"])
    assert {s["point"] for s in first["saturation"]} == {"preact", "cell", "hidden"}
    assert set(first["ranges"][0]) == {"input", "cell"} and first["calibration"] == "sdk"
    assert set(first["observed"][0]) == {"input", "cell", "hidden", "output"}
    assert first["observed"][0]["input"] == (float(data["mels"].min()), float(data["mels"].max()))
    assert set(sa8["methods"]) == {"sdk", "percentile"}
    assert sa8["methods"]["sdk"]["metric"] == pytest.approx(sa8["metric"])


def test_keep_float_and_search(small_model):
    model, cal, data = small_model
    base = diagnose(model, ["mli2-sa8"], cal, data, saturation=False)["targets"]["mli2-sa8"]
    kept = diagnose(model, ["mli2-sa8"], cal, data, keep_float=["lstm2"], saturation=False)["targets"]["mli2-sa8"]
    assert kept["nodes"]["lstm2"]["float"]
    assert kept["nodes"]["lstm2"]["cumulative"]["mean_abs"] < base["nodes"]["lstm2"]["cumulative"]["mean_abs"]
    assert kept["metric"] > base["metric"]  # keeping a node in float measurably improves the embedding
    found = diagnose(model, ["mli2-sa8"], cal, data, saturation=False, goal=0.9999)["targets"]["mli2-sa8"]["search"]
    assert found["reached"] and found["steps"][0]["float"] == []
    assert found["steps"][-1]["metric"] >= 0.9999
    every = fusedrnn.onnx.load(model.proto).to("mli2-sa8", calibration=cal, keep_float=["lstm0", "lstm1", "lstm2"])
    assert np.array_equal(every.run(data)["embedding"], model.run(data)["embedding"])
    with pytest.raises(AttributeValueError, match=r"keep_float: unknown recurrent node\(s\) \['lstm9'\]"):
        model.to("mli2-sa8", calibration=cal, keep_float=["lstm9"])


def test_per_node_methods(small_model):
    model, cal, data = small_model
    settings = Calibration(cal, per_node={"lstm1": Calibration(method="percentile", percentile=99.0)})
    emulated = model.to("litert-int8x16", calibration=settings)
    got = {k: e.layer.prepared.settings.method for k, e in emulated._emulations.items()}
    assert sorted(got.values()) == ["percentile", "sdk", "sdk"]


def test_cli_diagnose_json_and_report(small_model, tmp_path):
    model, cal, data = small_model
    import onnx

    path = tmp_path / "enc.onnx"
    onnx.save(model.proto, path)
    np.savez(tmp_path / "d.npz", **data)
    report = tmp_path / "diag.html"
    res = CliRunner().invoke(main, ["diagnose", str(path), "--data", str(tmp_path / "d.npz"), "-t", "mli2-sa8",
                                    "--calibration-method", "mli2-sa8:lstm1=mse", "--keep-float", "lstm2",
                                    "--goal", "0.99", "--json", "--report", str(report)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    entry = out["targets"]["mli2-sa8"]
    assert entry["nodes"]["lstm1"]["calibration"] == "mse"
    assert entry["nodes"]["lstm2"]["float"] and out["keep_float"] == ["lstm2"]
    text = report.read_text()
    assert text.count("<img") == 3 and str(tmp_path) not in text
    bad = CliRunner().invoke(main, ["diagnose", str(path), "--data", str(tmp_path / "d.npz"),
                                    "--calibration-method", "nope"])
    assert bad.exit_code == 2 and "--calibration-method: expected [TARGET:][NODE=]METHOD" in bad.output


# ---- on-target bundles ----------------------------------------------------------------------------------------
def _export(tmp_path, model, cal, data, target):
    import onnx

    path = tmp_path / "enc.onnx"
    onnx.save(model.proto, path)
    np.savez(tmp_path / "d.npz", **data)
    np.savez(tmp_path / "c.npz", **cal)
    out = tmp_path / target
    res = CliRunner().invoke(main, ["export-vectors", str(path), "-t", target, "--input", str(tmp_path / "d.npz"),
                                    "--calibration", str(tmp_path / "c.npz"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "manifest.json").read_text())


def _emulated_traces(model, cal, data, target):
    """The integer tensors of every node, traced on a model emulated in-process from the same calibration."""
    emulated = model.to(target, calibration=cal)
    layers = {k: e.layer for k, e in emulated._emulations.items()}
    for layer in layers.values():
        layer.prepared.trace = {}
    emulated.run(data)
    return {k: layer.prepared.trace for k, layer in layers.items()}


def test_mli_bundle_reproduces_the_emulated_tensors(small_model, tmp_path):
    from fusedrnn.mli import current_build
    from fusedrnn.targets.mli.cells import CellQuant, lstm_sequence
    from fusedrnn.targets.mli.luts import make_lut

    model, cal, data = small_model
    out, manifest = _export(tmp_path, model, cal, data, "mli2-sa8")
    assert [e["node"] for e in manifest["nodes"]] == ["lstm0", "lstm1", "lstm2"]
    assert all(f in manifest["files"] for e in manifest["nodes"] for f in e["files"])
    traces = _emulated_traces(model, cal, data, "mli2-sa8")
    bld = current_build()
    luts = {"tanh": make_lut("tanh"), "sigm": make_lut("sigm")}
    for entry, key in zip(manifest["nodes"], ("Y0", "Y1", "Y2"), strict=True):
        b = np.load(out / f"node_{entry['node']}.npz")
        for name in ("x", "h0", "c0", "y", "h", "c"):
            assert np.array_equal(b[f"d0_{name}"], traces[key][0][name]), name
        # the bundle alone is enough to run the kernel again and get the same bits
        p = {k[3:]: b[k] for k in b.files if k.startswith("d0_")}
        sa = {t: tuple(int(p[f"{t}_{f}"]) for f in ("scale", "zero_point", "scale_frac_bits"))
              for t in ("in", "out", "cell")}
        q = CellQuant("sa8", sa["in"], sa["out"], sa["out"],
                      (p["weights_in_scale"].astype(np.int64), p["weights_in_scale_frac_bits"].astype(np.int64)),
                      (p["weights_out_scale"].astype(np.int64), p["weights_out_scale_frac_bits"].astype(np.int64)),
                      cell=sa["cell"])
        y, h, c = lstm_sequence(p["x"].astype(np.int64), p["h0"].astype(np.int64), p["c0"].astype(np.int64),
                                p["weights_in"].astype(np.int64), p["weights_out"].astype(np.int64),
                                p["bias"].astype(np.int64), q, act="tanh", reverse=False, luts=luts,
                                full_accu=bld.full_accu, mode=bld.mode, engine="numpy")
        assert np.array_equal(y, p["y"]) and np.array_equal(h, p["h"]) and np.array_equal(c, p["c"])
        header = (out / f"node_{entry['node']}.h").read_text()
        assert f"NODE_{entry['node'].upper()}_L0_D0_IN_SCALE {sa['in'][0]}" in header


def test_litert_bundle_runs_in_the_interpreter(small_model, tmp_path):
    interpreter = pytest.importorskip("ai_edge_litert.interpreter")
    model, cal, data = small_model
    out, manifest = _export(tmp_path, model, cal, data, "litert-int8x16")
    traces = _emulated_traces(model, cal, data, "litert-int8x16")
    for entry, key in zip(manifest["nodes"], ("Y0", "Y1", "Y2"), strict=True):
        b = np.load(out / f"node_{entry['node']}.npz")
        for name in ("x", "h0", "c0", "y", "h", "c"):
            assert np.array_equal(b[f"d0_{name}"], traces[key][0][name]), name
        it = interpreter.Interpreter(model_path=str(out / f"node_{entry['node']}.tflite"))
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], b["d0_x"])
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), b["d0_y"])


def test_run_and_compare_take_the_calibration_options(small_model, tmp_path):
    model, cal, data = small_model
    import onnx

    path = tmp_path / "enc.onnx"
    onnx.save(model.proto, path)
    np.savez(tmp_path / "d.npz", **data)
    base = ["run", str(path), "--data", str(tmp_path / "d.npz"), "-t", "fp32", "-t", "mli2-sa8", "--json",
            "--repeat", "1"]
    plain = json.loads(CliRunner().invoke(main, base).stdout)
    kept = json.loads(CliRunner().invoke(main, [*base, "--keep-float", "lstm0", "--keep-float", "lstm1",
                                                "--keep-float", "lstm2"]).stdout)
    assert kept["kept_float"] == ["lstm0", "lstm1", "lstm2"]
    rows = {r["target"]: r for r in kept["results"]}
    assert rows["mli2-sa8"]["max_abs_diff"] == 0.0  # every node in float: exactly fp32
    assert {r["target"]: r for r in plain["results"]}["mli2-sa8"]["max_abs_diff"] > 0
    res = CliRunner().invoke(main, [*base, "--calibration-method", "mli2-sa8:lstm0=entropy"])
    assert json.loads(res.stdout)["calibration_method"] == {"mli2-sa8": {"lstm0": "entropy"}}
    bad = CliRunner().invoke(main, [*base, "--keep-float", "lstm7"])
    assert bad.exit_code == 2 and "--keep-float: lstm7 is not a recurrent node of MODEL" in bad.output


def test_bad_diagnosis_arguments_are_named(small_model, tmp_path):
    model, cal, data = small_model
    with pytest.raises(AttributeValueError, match=r"metric: expected one of"):
        diagnose(model, ["mli2-sa8"], cal, data, metric="f1")
    with pytest.raises(AttributeValueError, match=r"methods: unknown calibration method\(s\) \['kl'\]"):
        diagnose(model, ["mli2-sa8"], cal, data, methods=("kl",))
    with pytest.raises(AttributeValueError, match=r"goal: expected a finite number"):
        diagnose(model, ["mli2-sa8"], cal, data, goal=float("nan"))
    with pytest.raises(AttributeValueError, match=r"keep_float: unknown recurrent node"):
        diagnose(model, ["mli2-sa8"], cal, data, keep_float=["nope"])
    import onnx

    path = tmp_path / "enc.onnx"
    onnx.save(model.proto, path)
    np.savez(tmp_path / "d.npz", **data)
    base = ["diagnose", str(path), "--data", str(tmp_path / "d.npz")]
    for extra, message in ((["--calibration-method", "mli9:mse"], "'mli9' in 'mli9:mse' is not a target"),
                           (["--percentile", "0"], "--percentile: expected a number in (0, 100]"),
                           (["-t", "nope"], "--target: unknown target 'nope'")):
        res = CliRunner().invoke(main, [*base, *extra])
        assert res.exit_code == 2 and message in res.output, res.output
