"""``fusedrnn export-vectors``: the npz files reproduce the target's outputs bit for bit, the C headers parse
back (in Python, and through a C compiler when one is installed) to the same bits, and the manifest describes
the files."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from toy_targets import toy_quantized

import fusedrnn
import fusedrnn.example as ex
from fusedrnn import targets
from fusedrnn.cli import main
from fusedrnn.cli.export_cmd import c_header
from fusedrnn.cli.run_cmd import calibration_subset
from fusedrnn.frontends import onnx as fonnx

SAMPLES = 12


@pytest.fixture(scope="module")
def digits():
    with np.load(ex.data_path()) as d:
        return d["x"], d["y"]


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-q", toy_quantized("toy-q"))
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-no", toy_quantized("toy-no", cannot="no peepholes"))


def export(out: Path, target: str, *extra: str, model=None, data=None):
    args = ["export-vectors", str(model or ex.model_path()), "--target", target, "--input",
            str(data or ex.data_path()), "--out", str(out), *extra]
    return CliRunner().invoke(main, args)


def load_npz(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit, except that a NaN only needs to stay a NaN (C's NAN carries no payload)."""
    if want.dtype.kind != "f":
        return same_bits(got, want)
    nan = np.isnan(want)
    return np.array_equal(np.isnan(got), nan) and same_bits(got[~nan], want[~nan])


# ---- parsing the C headers back, independently of the writer ------------------------------------------------

_BLOCK = re.compile(r"/\* (?P<name>.+?): (?P<dtype>\w+) (?P<shape>scalar|\[[^\]]*\]), (?P<n>\d+) elements[^*]*\*/\n"
                    r"#define (?P<macro>\w+) (?P=n)\n"
                    r"static const (?P<ctype>\w+) (?P<cname>\w+)\[(?P=macro)\] = \{\n(?P<body>[^}]*)\n\};")


def _float32_from_decimal(text: str) -> np.float32:
    """The float32 that the decimal ``text`` denotes, checked exactly: it must be strictly nearer (by Fraction
    arithmetic) than both neighbouring float32 values, so a C compiler's strtof-style rounding gets the same
    value whatever the route (no double-rounding ambiguity)."""
    q = Fraction(text)
    value = np.float32(float(text))  # keeps the sign of zero
    d = abs(Fraction(float(value)) - q)
    with np.errstate(over="ignore"):
        neighbours = np.nextafter(value, np.float32(-np.inf)), np.nextafter(value, np.float32(np.inf))
    for n in neighbours:
        assert not np.isfinite(n) or d < abs(Fraction(float(n)) - q), text
    return value


def _literal(text: str, dtype: np.dtype):
    text = text.strip()
    if text in ("NAN", "INFINITY", "-INFINITY"):
        return {"NAN": np.nan, "INFINITY": np.inf, "-INFINITY": -np.inf}[text]
    if text == "(-9223372036854775807LL - 1)":
        return -(2**63)
    if dtype == np.float32:
        assert text.endswith("f") and re.search(r"[.en]", text), text
        return _float32_from_decimal(text[:-1])
    if dtype == np.float64:
        return float(text)
    return int(text.rstrip("UL"), 0)


def parse_header(text: str) -> dict[str, np.ndarray]:
    """{ONNX name: array} from a header written by export-vectors, read from its text alone."""
    out = {}
    for m in _BLOCK.finditer(text):
        dtype = np.dtype(getattr(ml_dtypes, m["dtype"], None) or m["dtype"])
        shape = () if m["shape"] == "scalar" else tuple(int(s) for s in m["shape"][1:-1].split(","))
        lits = [t for t in m["body"].replace("\n", " ").split(",")]
        if dtype.name in ("float16", "bfloat16"):
            assert m["ctype"] == "uint16_t"
            arr = np.array([int(t.strip().rstrip("U"), 16) for t in lits], np.uint16).view(dtype)
        else:
            arr = np.array([_literal(t, dtype) for t in lits], dtype)
        assert arr.size == int(m["n"])
        out[m["name"]] = arr.reshape(shape)
    return out


# ---- the command ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["fp32", "fp16", "bf16"])
def test_float_target_vectors_reproduce_bit_for_bit(tmp_path, target, digits):
    res = export(tmp_path, target, "--samples", str(SAMPLES))
    assert res.exit_code == 0, res.output
    assert f"to {tmp_path}" in res.output
    inputs, outputs = load_npz(tmp_path / "inputs.npz"), load_npz(tmp_path / "outputs.npz")
    assert same_bits(inputs["x"], digits[0][:SAMPLES]) and list(inputs) == ["x"]  # labels are not inputs
    rerun = fonnx.load(ex.model_path()).to(target).run(inputs)
    assert list(outputs) == ["logits"]
    assert outputs["logits"].shape == (SAMPLES, 10)
    np.testing.assert_array_equal(outputs["logits"], rerun["logits"])
    assert same_bits(outputs["logits"], rerun["logits"])
    for name, arrays in (("inputs.h", inputs), ("outputs.h", outputs)):
        parsed = parse_header((tmp_path / name).read_text(encoding="ascii"))
        assert list(parsed) == list(arrays)
        for k in arrays:
            assert same_bits(parsed[k], arrays[k]), (name, k)


def test_manifest_describes_the_files(tmp_path):
    res = export(tmp_path, "fp16", "--samples", "3")
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["fusedrnn_version"] == fusedrnn.__version__
    assert m["target"]["name"] == "fp16" and m["calibration"] is None
    assert m["model"]["sha256"] == hashlib.sha256(ex.model_path().read_bytes()).hexdigest()
    assert m["input"] == {"path": str(ex.data_path()), "sha256": hashlib.sha256(ex.data_path().read_bytes())
                          .hexdigest(), "samples": 3}
    assert set(m["files"]) == {"inputs.npz", "outputs.npz", "inputs.h", "outputs.h"}
    for name, info in m["files"].items():
        blob = (tmp_path / name).read_bytes()
        assert info == {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
    assert m["inputs"] == [{"name": "x", "npz_name": "x", "c_name": "input_x", "dtype": "float32",
                            "shape": [3, 8, 8]}]
    assert m["outputs"] == [{"name": "logits", "npz_name": "logits", "c_name": "output_logits", "dtype": "float32",
                             "shape": [3, 10]}]


def test_quantized_target_records_its_calibration(tmp_path, toy, digits):
    x = digits[0]
    res = export(tmp_path / "default", "toy-q", "--samples", str(SAMPLES))
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "default" / "manifest.json").read_text())
    assert m["calibration"]["source"] == "the first 256 samples of --input" and m["calibration"]["samples"] == 256
    out = load_npz(tmp_path / "default" / "outputs.npz")["logits"]
    want = fonnx.load(ex.model_path()).to("toy-q", calibration=calibration_subset({"x": x})).run({"x": x[:SAMPLES]})
    assert same_bits(out, want["logits"])
    # a separate calibration file changes the quantization, and is recorded
    cal = tmp_path / "cal.npz"
    np.savez(cal, x=x[:5] * 3)
    res = export(tmp_path / "cal", "toy-q", "--samples", str(SAMPLES), "--calibration", str(cal))
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "cal" / "manifest.json").read_text())
    assert m["calibration"] == {"source": "--calibration", "path": str(cal),
                                "sha256": hashlib.sha256(cal.read_bytes()).hexdigest(), "samples": 5}
    out_cal = load_npz(tmp_path / "cal" / "outputs.npz")["logits"]
    want = fonnx.load(ex.model_path()).to("toy-q", calibration={"x": x[:5] * 3}).run({"x": x[:SAMPLES]})
    assert same_bits(out_cal, want["logits"]) and not np.array_equal(out_cal, out)
    parsed = parse_header((tmp_path / "cal" / "outputs.h").read_text())
    assert same_bits(parsed["logits"], out_cal)


def test_npy_input_for_a_single_input_model(tmp_path, digits):
    npy = tmp_path / "x.npy"
    np.save(npy, digits[0][:4].astype(np.float64))  # float64 is cast to the model's float32
    res = export(tmp_path / "out", "fp32", data=npy)
    assert res.exit_code == 0, res.output
    inputs = load_npz(tmp_path / "out" / "inputs.npz")
    assert same_bits(inputs["x"], digits[0][:4])


@pytest.mark.parametrize("case,message", [
    ("missing-model", "MODEL: no such file"),
    ("missing-input", "--input: no such file"),
    ("unknown-target", "target: unknown target 'nope'; registered targets are fp32"),
    ("shape", "x: expected shape"),
    ("dtype", "has dtype int64; the model expects float32"),
    ("lacks", "lacks the model input(s) x"),
    ("not-npz", "cannot read"),
    ("out-is-file", "--out:"),
    ("cannot", "no peepholes"),
])
def test_user_errors_are_one_line_exit_2(tmp_path, toy, case, message):
    data = tmp_path / "d.npz"
    np.savez(data, x=np.zeros((2, 8, 8), np.float32))
    kw, target, extra = {}, "fp32", []
    if case == "missing-model":
        kw["model"] = tmp_path / "nope.onnx"
    elif case == "missing-input":
        kw["data"] = tmp_path / "nope.npz"
    elif case == "unknown-target":
        target = "nope"
    elif case == "shape":
        np.savez(data, x=np.zeros((2, 8, 5), np.float32))
    elif case == "dtype":
        np.savez(data, x=np.zeros((2, 8, 8), np.int64))
    elif case == "lacks":
        np.savez(data, z=np.zeros(3))
    elif case == "not-npz":
        data.write_bytes(b"not an npz at all")
    elif case == "cannot":
        target = "toy-no"
    out = tmp_path / "out"
    if case == "out-is-file":
        out.write_text("x")
    kw.setdefault("data", data)
    res = export(out, target, *extra, **kw)
    assert res.exit_code == 2, res.output
    assert message in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


# ---- the C writer over every dtype, checked by a C compiler --------------------------------------------------


def _random_arrays(rng) -> dict[str, np.ndarray]:
    """Arrays of random bit patterns (every float class: subnormals, ±0, ±inf, NaN) and integer extremes."""
    bits32 = rng.integers(0, 2**32, size=600, dtype=np.uint64).astype(np.uint32)
    f32 = np.concatenate([bits32.view(np.float32), np.array([0.0, -0.0, 1.0, -2.0, 1e-45, 3.4028235e38,
                                                             np.float32(0.1), 16777217, np.inf, -np.inf],
                                                            np.float32)])
    f64 = np.concatenate([rng.integers(0, 2**63, size=300, dtype=np.int64).view(np.float64) * rng.choice([-1, 1], 300),
                          [0.0, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1.0]])
    out = {"f32/values": f32.reshape(61, 10), "f64 values": f64, "scalar": np.array(-1.5, np.float32)}
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(dt)
        vals = rng.integers(info.min, info.max, size=50, dtype=dt, endpoint=True)
        out[np.dtype(dt).name] = np.concatenate([vals, np.array([info.min, info.max, 0], dt)])
    out["flags"] = rng.random(7) < 0.5
    out["half"] = rng.integers(0, 2**16, size=40, dtype=np.uint16).view(np.float16)
    out["bf16"] = rng.integers(0, 2**16, size=40, dtype=np.uint16).view(ml_dtypes.bfloat16)
    out["empty"] = np.zeros((0, 3), np.float32)
    return out


def test_c_header_parses_back_in_python():
    arrays = _random_arrays(np.random.default_rng(0))
    text = c_header(arrays, "v", "V_H", "test")
    assert "#include <math.h>" in text  # the random patterns hold infinities and NaNs
    parsed = parse_header(text)
    assert list(parsed) == [k for k, a in arrays.items() if a.size]
    for k, p in parsed.items():
        assert same_values(p, arrays[k]), k


def test_c_header_compiles_to_the_same_bytes(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc / gcc) found")
    arrays = _random_arrays(np.random.default_rng(1))
    text = c_header(arrays, "v", "V_H", "test")
    (tmp_path / "v.h").write_text(text)
    names = [m["cname"] for m in _BLOCK.finditer(text)]
    keys = [m["name"] for m in _BLOCK.finditer(text)]
    writes = "\n".join(f'    fwrite({n}, sizeof {n}, 1, f);' for n in names)
    (tmp_path / "dump.c").write_text(f'#include <stdio.h>\n#include "v.h"\nint main(void) {{\n'
                                     f'    FILE *f = fopen("dump.bin", "wb");\n{writes}\n    fclose(f);\n'
                                     f'    return 0;\n}}\n')
    subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-Wno-unused-const-variable", "-o", "dump", "dump.c"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    subprocess.run([str(tmp_path / "dump")], cwd=tmp_path, check=True, timeout=30)
    blob, pos = (tmp_path / "dump.bin").read_bytes(), 0
    assert "empty" not in keys
    for k in keys:
        a = np.ascontiguousarray(arrays[k])
        n = a.nbytes
        got = np.frombuffer(blob[pos:pos + n], a.dtype if a.dtype.kind != "b" else np.uint8).reshape(a.shape)
        pos += n
        assert same_values(got.astype(bool) if a.dtype.kind == "b" else got, a), k
    assert pos == len(blob)
