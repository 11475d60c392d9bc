"""Security and reliability of what the command line reads and writes: exports that cannot carry code (C headers
compiled with the model's hostile names, npz members that stay inside their folder), exports that appear whole or
not at all, hostile and damaged files refused with one line and exit status 2 (a 30,001-layer state dict, npz
headers claiming 10^12 elements, object arrays, bit-flipped models), NaN reported as NaN, and ``bench`` never
running files found around the current folder."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import random
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from mutation import mutate
from toy_targets import toy_quantized

import fusedrnn
import fusedrnn.example as ex
from fusedrnn import targets
from fusedrnn.cli import bench_cmd, common, convert_cmd, export_cmd, main, run_cmd, staging
from fusedrnn.cli.common import CLIError
from fusedrnn.errors import FileFormatError, FusedRNNError
from fusedrnn.frontends import archives
from fusedrnn.frontends import onnx as fonnx
from fusedrnn.frontends.c_source import c_comment, c_header, c_names, c_string
from fusedrnn.frontends.keras import check_keras_file

INJECT_OUT = "logits */ int injected = 1; /*"
INJECT_IN = "x */\n#error injected\n/* ??/\n*\\\n/ \"q\" \u00e9"


def cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(res, *needles) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.output.strip()
    assert err.startswith("Error:") and "\n" not in err and "Traceback" not in err, err
    assert len(err) <= common.MESSAGE_LIMIT + len("Error: "), len(err)
    for n in needles:
        assert n in err, err
    return err


def digits(n: int = 6) -> np.ndarray:
    with np.load(ex.data_path()) as d:
        return d["x"][:n]


def renamed_model(path: Path, renames: dict[str, str]) -> Path:
    """The bundled example with its values renamed (graph inputs, outputs and node references)."""
    m = onnx.load(ex.model_path())
    for vi in (*m.graph.input, *m.graph.output):
        vi.name = renames.get(vi.name, vi.name)
    for node in m.graph.node:
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
    onnx.save(m, str(path))
    return path


def save_npz_raw(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return path


def npy_bytes(shape, descr: str = "<f4", data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue() + data


# ---- exports that cannot carry code ---------------------------------------------------------------------------


def test_c_comment_and_string_literals_are_inert():
    rng = random.Random(0)
    alphabet = ["*", "/", "\\", "?", "\n", "\r", "\t", "\0", '"', "'", "#", "a", " ", "é", "\u2028", "??/", "*/",
                "/*"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        c = c_comment(text)
        assert "*/" not in c and "/*" not in c and "??" not in c and "\\" not in c
        assert all(" " <= ch <= "~" for ch in c)
        s = c_string(text)
        assert s[0] == s[-1] == '"' and all(" " <= ch <= "~" for ch in s) and "??" not in s
    assert c_comment("a" * 100, 20) == "a" * 17 + "..."


def test_c_names_are_unique_identifiers_with_their_macros():
    names = ["a", "A", "a_SIZE", "a_NAME", "1x", "", "x" * 200, "a-b", "a_b", "int"]
    out = c_names(names, "input")
    ids = list(out.values())
    macros = [i.upper() for i in ids] + [f"{i.upper()}_{m}" for i in ids for m in ("SIZE", "NAME")]
    assert len(set(macros)) == len(macros)
    assert all(len(i) <= len("input_") + 40 + 4 for i in ids)
    assert out == c_names(names, "input")  # deterministic


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_injected_names_compile_to_inert_headers(tmp_path):
    """Model names holding ``*/ int injected = 1; /*``, ``#error``, a backslash-newline and a trigraph: the
    headers compile, the program's own ``injected`` is the only one, and the names come back byte for byte."""
    cc = shutil.which("cc") or shutil.which("gcc")
    model = renamed_model(tmp_path / "m.onnx", {"x": INJECT_IN, "logits": INJECT_OUT})
    data = tmp_path / "d.npz"
    np.savez(data, **{INJECT_IN: digits(2)})
    out = tmp_path / "out"
    res = cli("export-vectors", model, "--target", "fp32", "--input", data, "--out", out)
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    cin, cout = manifest["inputs"][0]["c_name"], manifest["outputs"][0]["c_name"]
    for h in ("inputs.h", "outputs.h"):
        code = _code_only((out / h).read_text(encoding="ascii"))
        assert "injected =" not in code and "\\\n" not in code
        assert not [ln for ln in code.splitlines() if ln.strip().startswith("#") and "error" in ln]
    prog = f"""#include <stdio.h>
#include "inputs.h"
#include "outputs.h"
static int injected = 0; /* a file-scope `int injected = 1;` from a header would clash with this */
int main(void) {{
    FILE *f = fopen("names.bin", "wb");
    fwrite({cin.upper()}_NAME, 1, sizeof {cin.upper()}_NAME - 1, f);
    fputc(0, f);
    fwrite({cout.upper()}_NAME, 1, sizeof {cout.upper()}_NAME - 1, f);
    fclose(f);
    printf("injected=%d sizes=%d,%d first=%.9g\\n", injected, (int){cin.upper()}_SIZE, (int){cout.upper()}_SIZE,
           (double){cout}[0]);
    return 0;
}}
"""
    (out / "prog.c").write_text(prog)
    subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Werror", "-Wno-unused-const-variable", "-o", "prog",
                    "prog.c", "-lm"], cwd=out, check=True, capture_output=True, timeout=60)
    run = subprocess.run([str(out / "prog")], cwd=out, check=True, capture_output=True, text=True, timeout=30)
    assert run.stdout.startswith("injected=0 sizes=128,20 "), run.stdout
    assert (out / "names.bin").read_bytes() == INJECT_IN.encode() + b"\0" + INJECT_OUT.encode()
    with np.load(out / "outputs.npz") as z:
        assert z.files == [manifest["outputs"][0]["npz_name"]]


def _code_only(text: str) -> str:
    """C text without its comments and string literals (a small lexer: what a compiler sees as code)."""
    out, k = [], 0
    while k < len(text):
        if text.startswith("/*", k):
            end = text.index("*/", k + 2)  # a comment must close
            k = end + 2
            out.append(" ")
        elif text[k] == '"':
            k += 1
            while text[k] != '"':
                assert text[k] != "\n", "a string literal must not span lines"
                k += 2 if text[k] == "\\" else 1
            k += 1
            out.append('""')
        else:
            out.append(text[k])
            k += 1
    return "".join(out)


def test_npz_member_names_stay_inside_the_folder(tmp_path):
    names = {"x": "../../x_in", "logits": "/etc/../../evil\\..\\out"}
    model = renamed_model(tmp_path / "m.onnx", names)
    data = tmp_path / "d.npz"
    np.savez(data, **{"../../x_in": digits(2)})
    out = tmp_path / "deep" / "out"
    res = cli("export-vectors", model, "--target", "fp32", "--input", data, "--out", out)
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    for f in ("inputs.npz", "outputs.npz"):
        with zipfile.ZipFile(out / f) as z:
            for member in z.namelist():
                assert "/" not in member and "\\" not in member and not member.startswith(("..", ".")), member
            dest = tmp_path / "unpacked" / f
            z.extractall(dest)
            assert all(p.resolve().is_relative_to(dest.resolve()) for p in dest.rglob("*"))
    assert {e["name"] for e in manifest["inputs"] + manifest["outputs"]} == set(names.values())
    with np.load(out / "outputs.npz") as z:
        got = z[manifest["outputs"][0]["npz_name"]]
    want = fonnx.load(model).run({"../../x_in": digits(2)})["/etc/../../evil\\..\\out"]
    assert got.tobytes() == want.tobytes()
    assert not (tmp_path / "x_in.npy").exists() and not list(tmp_path.parent.glob("evil*"))


def test_npz_names_are_unique_and_case_insensitive():
    out = export_cmd.npz_names(["a/b", "a_b", "A_B", ".hidden", "-x", "ok.1", "y" * 300])
    assert list(out.values()) == ["a_b", "a_b_2", "A_B_3", "_.hidden", "_-x", "ok.1", "y" * 100]


# ---- exports that appear whole or not at all ------------------------------------------------------------------


def _export(out: Path, samples: int = 3):
    return cli("export-vectors", ex.model_path(), "--target", "fp32", "--input", ex.data_path(), "--out", out,
               "--samples", samples)


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _no_partials(*folders: Path) -> None:
    for f in folders:
        if f.exists():
            assert not [p for p in f.iterdir() if p.name.startswith(staging.PARTIAL)], list(f.iterdir())


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_export_leaves_the_previous_one(tmp_path, monkeypatch, failure):
    out = tmp_path / "out"
    assert _export(out, 3).exit_code == 0
    (out / "notes.txt").write_text("mine")
    before = _snapshot(out)
    calls = []
    real = export_cmd.save_npz

    def failing(path, arrays, members=None):
        calls.append(path)
        if len(calls) == 2:  # inputs.npz is written, outputs.npz fails
            raise failure
        real(path, arrays, members)

    monkeypatch.setattr(export_cmd, "save_npz", failing)
    res = _export(out, 5)
    if isinstance(failure, KeyboardInterrupt):
        assert res.exit_code != 0
    else:
        one_line_error(res, "--out: cannot write", "No space left")
    assert _snapshot(out) == before
    manifest = json.loads((out / "manifest.json").read_text())
    for name, info in manifest["files"].items():
        assert info["bytes"] == len((out / name).read_bytes())
    _no_partials(out, tmp_path)
    monkeypatch.setattr(export_cmd, "save_npz", real)
    assert _export(out, 5).exit_code == 0  # a good re-run replaces the export, and leaves other files alone
    assert json.loads((out / "manifest.json").read_text())["input"]["samples"] == 5
    assert (out / "notes.txt").read_text() == "mine"


def test_failed_first_export_leaves_nothing(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(export_cmd, "c_header", boom)
    out = tmp_path / "new" / "out"
    res = _export(out)
    assert res.exit_code != 0
    assert not out.exists()
    _no_partials(tmp_path / "new")


def test_publish_undoes_itself_when_a_rename_fails(tmp_path, monkeypatch):
    dest = tmp_path / "d"
    dest.mkdir()
    for n in "abc":
        (dest / n).write_text(f"old {n}")
    real = os.replace
    count = [0]

    def flaky(src, dst):
        count[0] += 1
        if count[0] == 4:  # a moved away, new a in, b moved away, then the new b fails
            raise OSError(5, "I/O error")
        real(src, dst)

    with pytest.raises(OSError):
        with staging.staged_folder(dest) as stage:
            for n in "abc":
                (stage / n).write_text(f"new {n}")
            monkeypatch.setattr(os, "replace", flaky)
    monkeypatch.setattr(os, "replace", real)
    assert {p.name: p.read_text() for p in dest.iterdir()} == {n: f"old {n}" for n in "abc"}


def test_failed_convert_leaves_the_previous_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    layer = fusedrnn.LSTM(rng.normal(size=(1, 16, 3)).astype(np.float32),
                          rng.normal(size=(1, 16, 4)).astype(np.float32))
    src = tmp_path / "m.onnx"
    onnx.save(layer.to_onnx_model(), str(src))
    out = tmp_path / "w.h"
    assert cli("convert", src, "--to", "zdnn", "--out", out).exit_code == 0
    before = out.read_bytes()

    def half_written(export, path, guard):
        path.write_text("/* partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(convert_cmd, "_write_c", half_written)
    one_line_error(cli("convert", src, "--to", "zdnn", "--out", out), "No space left")
    assert out.read_bytes() == before
    _no_partials(tmp_path)


# ---- hostile and damaged files --------------------------------------------------------------------------------


def test_state_dict_layer_bomb_is_refused_fast(tmp_path):
    torch = pytest.importorskip("torch")
    m = torch.nn.LSTM(3, 4)
    for index in (30000, 300000, 10**40):
        sd = dict(m.state_dict())
        sd[f"weight_ih_l{index}"] = sd["weight_ih_l0"].clone()
        torch.save(sd, tmp_path / "bomb.pt")
        assert (tmp_path / "bomb.pt").stat().st_size < 8000
        t0 = time.perf_counter()
        res = cli("convert", tmp_path / "bomb.pt", "--to", "onnx", "--out", tmp_path / "o.onnx")
        assert time.perf_counter() - t0 < 1.0
        one_line_error(res, "layer ind")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("case,needle", [
    ("missing-layer-tensor", "missing ['weight_hh_l1']"),
    ("broadcast", "over a storage of"),
    ("shape", "weight_hh_l1: expected shape"),
    ("leading-zero", "layer index '01'"),
    ("module-claims-layers", "claims num_layers=30000"),
    ("integers", "expected a floating-point tensor"),
])
def test_state_dict_claims_are_checked(tmp_path, case, needle):
    torch = pytest.importorskip("torch")
    m = torch.nn.LSTM(3, 4, num_layers=2)
    sd = dict(m.state_dict())
    obj = sd
    if case == "missing-layer-tensor":
        del sd["weight_hh_l1"]
    elif case == "broadcast":
        sd["weight_hh_l0"] = torch.zeros(1).expand(16, 4)
    elif case == "shape":
        sd["weight_hh_l1"] = torch.zeros(16, 5)
    elif case == "leading-zero":
        sd["weight_ih_l01"] = sd.pop("weight_ih_l1")
    elif case == "module-claims-layers":
        m.num_layers = 30000
        obj = m
    elif case == "integers":
        sd["bias_ih_l1"] = torch.zeros(16, dtype=torch.int64)
    torch.save(obj, tmp_path / "s.pt")
    one_line_error(cli("convert", tmp_path / "s.pt", "--to", "onnx", "--out", tmp_path / "o.onnx"), needle)


def test_npz_claims_and_object_arrays_are_refused(tmp_path):
    huge = save_npz_raw(tmp_path / "huge.npz", {"x.npy": npy_bytes((10**12,), data=b"\0" * 64)})
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([{"a": 1}, None], dtype=object))
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", npy_bytes((16,)) + b"\0" * 64)
    blob = bytearray(bomb.read_bytes())  # claim a 10 GB member in the central directory
    cd = blob.rfind(b"PK\x01\x02")
    blob[cd + 24:cd + 28] = (10**10 % 2**32).to_bytes(4, "little")
    bomb.write_bytes(bytes(blob))
    npy = tmp_path / "huge.npy"
    npy.write_bytes(npy_bytes((10**6, 10**6), data=b"\0" * 16))
    model = ex.model_path()
    for path, needle in ((huge, "header claims shape (1000000000000,)"), (objects, "holds Python objects"),
                         (bomb, "more than its")):
        t0 = time.perf_counter()
        one_line_error(cli("run", model, "--data", path, "-t", "fp32"), "--data:", needle)
        one_line_error(cli("run", "-t", "fp32", "--calibration", path), "--calibration:", needle)
        one_line_error(cli("export-vectors", model, "-t", "fp32", "--input", path, "--out", tmp_path / "o"),
                       "--input:", needle)
        one_line_error(cli("convert", model, "--to", "mli2-sa8", "--calibration", path, "--out", tmp_path / "w.h"),
                       "--calibration:", needle)
        assert time.perf_counter() - t0 < 5
    one_line_error(cli("run", model, "--data", npy, "-t", "fp32"), "header claims shape (1000000, 1000000)")
    with pytest.raises(FileFormatError):
        archives.read_arrays(huge, "data")


def test_damaged_onnx_models_exit_2(tmp_path):
    m = onnx.load(ex.model_path())
    cases = {}
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    bad.graph.node[2].input[0] = "h_lasT"  # a bit flip in a name
    cases["undefined"] = (bad, "which no graph input")
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    bad.graph.initializer[0].dims[0] = 10**6  # dims beyond the data
    cases["dims"] = (bad, "need")
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    bad.graph.node[0].attribute[0].type = 0
    cases["attribute"] = (bad, "unknown attribute type 0")
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    bad.graph.node[0].attribute[0].ints[:] = [0, 16, 1]
    cases["perm"] = (bad, "shape inference")
    for name, (proto, needle) in cases.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(proto, str(path))
        one_line_error(cli("run", path, "--data", ex.data_path(), "-t", "fp32", "--repeat", "1"), "MODEL:", needle)
        with pytest.raises(FusedRNNError):
            fonnx.load(proto)


def test_keras_files_claiming_huge_layers_are_refused(tmp_path):
    config = {"class_name": "Sequential", "config": {"layers": [
        {"class_name": "LSTM", "config": {"name": "big", "units": 10**9},
         "build_config": {"input_shape": [None, None, 8]}}]}}
    path = save_npz_raw(tmp_path / "big.keras", {"metadata.json": b"{}", "config.json": json.dumps(config).encode(),
                                                 "model.weights.h5": b"\0" * 100})
    with pytest.raises(FileFormatError, match="declare at least"):
        check_keras_file(path)
    save_npz_raw(path, {"config.json": b"{" * 100000, "model.weights.h5": b""})
    with pytest.raises(FileFormatError, match="not readable JSON"):
        check_keras_file(path)
    if importlib.util.find_spec("keras") is not None:
        save_npz_raw(path, {"metadata.json": b"{}", "config.json": json.dumps(config).encode(),
                            "model.weights.h5": b"\0" * 100})
        one_line_error(cli("convert", path, "--to", "onnx", "--out", tmp_path / "o.onnx"), "declare at least")


def test_long_names_keep_messages_short(tmp_path):
    model = renamed_model(tmp_path / "m.onnx", {"x": "x" * 100000})
    data = tmp_path / "d.npz"
    np.savez(data, **{"z" * 5000: np.zeros(3, np.float32)})
    one_line_error(cli("run", model, "--data", data, "-t", "fp32"), "lacks the model input(s) 'xxxx")


# ---- the fuzz test --------------------------------------------------------------------------------------------


def _structure(blob: bytes, proto: onnx.ModelProto) -> list[int]:
    """Byte positions outside the initializers' raw data (where a flip changes structure, not weights)."""
    skip = []
    for t in proto.graph.initializer:
        if len(t.raw_data) > 64:
            p = blob.find(t.raw_data)
            skip.append((p, p + len(t.raw_data)))
    return [i for i in range(len(blob)) if not any(a <= i < z for a, z in skip)]


def _outcome(fn) -> str:
    try:
        fn()
    except FusedRNNError:
        return "refused"
    return "ok"


def test_fuzzed_files_succeed_or_raise_fusedrnn_errors(tmp_path):
    """Seeded mutations of the example ONNX model, an npz and a PyTorch state dict: every outcome is a success or
    a FusedRNNError, and on the command line exit 0 or 2 with one line. Bounded to a few seconds
    (``FUSEDRNN_FUZZ_SEED`` and ``FUSEDRNN_FUZZ_SCALE`` run other and longer campaigns by hand,
    ``FUSEDRNN_FUZZ_KEEP=DIR`` keeps a failing command-line case)."""
    seed = int(os.environ.get("FUSEDRNN_FUZZ_SEED", "17"))
    rng = random.Random(seed)  # each kind of file draws from its own generator: time limits change no other kind
    scale = float(os.environ.get("FUSEDRNN_FUZZ_SCALE", "1"))  # longer runs by hand: more cases, more time
    budget = {"onnx": 2.0 * scale, "npz": 0.6 * scale, "pt": 1.2 * scale}  # seconds; then 6 command lines
    x = digits(4)
    blob = ex.model_path().read_bytes()
    region = _structure(blob, onnx.load_from_string(blob))
    seen: dict[str, int] = {}

    def count(key):
        seen[key] = seen.get(key, 0) + 1

    # ONNX, through the API: load, run natively and on fp16
    stop = time.perf_counter() + budget["onnx"]
    for k in range(int(400 * scale)):
        if time.perf_counter() > stop:
            break
        mutated = mutate(rng, blob, region if k % 4 else None)
        target = "fp16" if k % 2 else None
        count("onnx-" + _outcome(lambda m=mutated, t=target: fonnx.load(m).to(t).run({"x": x})))
    # npz, through the checked reader
    rng = random.Random(seed + 1)
    data = tmp_path / "d.npz"
    np.savez(data, x=x, y=np.arange(4))
    npz = data.read_bytes()
    with zipfile.ZipFile(data) as z:
        members = {n: z.read(n) for n in z.namelist()}
    stop = time.perf_counter() + budget["npz"]
    for k in range(int(400 * scale)):
        if time.perf_counter() > stop:
            break
        if k % 2:  # the archive's bytes (mostly caught by the CRC)
            (tmp_path / "m.npz").write_bytes(mutate(rng, npz))
        else:  # a member's .npy bytes, mostly its header, re-zipped with a valid CRC
            name = rng.choice(sorted(members))
            blob_ = members[name]
            save_npz_raw(tmp_path / "m.npz", {**members, name: mutate(rng, blob_, list(range(min(len(blob_), 128))))})
        count("npz-" + _outcome(lambda: archives.read_arrays(tmp_path / "m.npz", "--data")))
    # a PyTorch state dict: structural mutations of the dict and byte mutations of the file
    torch = pytest.importorskip("torch")
    rng = random.Random(seed + 2)
    sd = dict(torch.nn.GRU(3, 4, num_layers=2, bidirectional=True).state_dict())
    torch.save(sd, tmp_path / "sd.pt")
    pt = (tmp_path / "sd.pt").read_bytes()
    stop = time.perf_counter() + budget["pt"]
    for k in range(int(200 * scale)):
        if time.perf_counter() > stop:
            break
        if k % 2:
            (tmp_path / "m.pt").write_bytes(mutate(rng, pt))
        else:
            d = dict(sd)
            key = rng.choice(sorted(d))
            op = rng.randrange(5)
            if op == 0:
                del d[key]
            elif op == 1:
                d[key.replace("_l1", f"_l{rng.choice([2, 7, 30000])}")] = d.pop(key)
            elif op == 2:
                d[key] = d[key].reshape(-1)[: rng.randrange(1, d[key].numel() + 1)]
            elif op == 3:
                d[key] = torch.zeros(1).expand(*d[key].shape) if d[key].ndim else d[key]
            else:
                d[key] = d[key].to(rng.choice([torch.int32, torch.float16, torch.float64]))
            torch.save(d, tmp_path / "m.pt")
        try:
            convert_cmd.load_source(tmp_path / "m.pt")
            count("pt-ok")
        except (CLIError, FusedRNNError):
            count("pt-refused")
    # the command line on a few of each
    rng = random.Random(seed + 3)
    for k in range(int(6 * scale)):
        (tmp_path / "m.onnx").write_bytes(mutate(rng, blob, region))
        (tmp_path / "m.npz").write_bytes(mutate(rng, npz) if k % 2 else npz)
        res = cli("run", tmp_path / "m.onnx" if k % 3 else ex.model_path(), "--data", tmp_path / "m.npz", "-t",
                  "fp32", "--repeat", "1", "--json")
        if res.exit_code not in (0, 2) and os.environ.get("FUSEDRNN_FUZZ_KEEP"):  # keep the case by hand
            shutil.copy(tmp_path / "m.onnx", Path(os.environ["FUSEDRNN_FUZZ_KEEP"]) / f"fail-{seed}-{k}.onnx")
        assert res.exit_code in (0, 2), (res.exit_code, res.output, res.exception)
        if res.exit_code == 2:
            one_line_error(res)
        count(f"cli-{res.exit_code}")
    assert sum(v for k, v in seen.items() if k.startswith("onnx")) >= 30, seen
    assert seen.get("onnx-refused") and seen.get("npz-refused") and seen.get("pt-refused"), seen
    print(seen)


# ---- NaN, bench -----------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the toy target divides by its zero grid step
def test_nan_outputs_are_reported_as_nan(tmp_path, monkeypatch):
    monkeypatch.setitem(targets.registry._REGISTRY, "toy-nan", toy_quantized("toy-nan"))
    zeros = tmp_path / "zeros.npz"
    np.savez(zeros, x=np.zeros((4, 8, 8), np.float32))  # calibration range 0: the toy target's grid step is 0
    args = ["--repeat", "1", "-t", "toy-nan", "--calibration", zeros]
    res = cli("run", *args, "--json")
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)["results"][0]
    assert row["max_abs_diff"] == row["mean_abs_diff"] == row["snr_db"] == "nan"
    assert row["nan_mismatches"] > 0
    for command in (["run"], ["compare", ex.model_path(), "--data", ex.data_path()]):
        res = cli(*command, *args)
        assert res.exit_code == 0, res.output
        assert "nan" in res.output and "0.00e+00" not in res.output
        assert f"toy-nan: {row['nan_mismatches']} output element(s) are NaN" in res.output


def test_differences_count_nan_mismatches_only():
    ref = {"y": np.array([1.0, np.nan, np.inf, 2.0])}
    assert run_cmd._differences({"y": np.array([1.0, np.nan, np.inf, 2.5])}, ref)[::3] == (0.5, 0)
    mx, mean, snr, nans = run_cmd._differences({"y": np.array([np.nan, np.nan, np.inf, 2.0])}, ref)
    assert np.isnan(mx) and np.isnan(mean) and np.isnan(snr) and nans == 1


def test_bench_never_runs_files_found_around_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    for name in ("bench_float.py", "bench_evil.py"):
        (tmp_path / "benchmarks" / name).write_text("open('ran', 'w').write('ran')\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    real_root = bench_cmd.package_root()
    if real_root is not None:  # a source checkout: its own suites, not the ones found around the current folder
        res = cli("bench", "--list")
        assert res.exit_code == 0 and "evil" not in res.output and "float" in res.output
        one_line_error(cli("bench", "evil"), "unknown suite 'evil'")
    monkeypatch.setattr(bench_cmd, "package_root", lambda: None)  # an installed wheel
    one_line_error(cli("bench", "float"), "--root", "not in a source checkout")
    assert not (tmp_path / "ran").exists() and not (tmp_path / "sub" / "ran").exists()


def test_headers_of_ordinary_names_are_unchanged_in_layout():
    text = c_header({"x": np.arange(3, dtype=np.int8)}, "input", "G_H", "t */ #error")
    assert '#define INPUT_X_NAME "x"' in text and "#define INPUT_X_SIZE 3" in text
    assert "static const int8_t input_x[INPUT_X_SIZE]" in text and "* /" in text
