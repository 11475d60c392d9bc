"""``fusedrnn convert``: exact round trips between ONNX, PyTorch state dicts and Keras files; MLI headers whose
arrays parse back to the prepared target's integer tensors (and dequantize to the float weights in MLI's layout);
zDNN headers / .bin files holding transform_ztensor's bytes; one-line errors with exit status 2."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

import fusedrnn
from fusedrnn import zdnn as z
from fusedrnn.cli import main

G = {"lstm": 4, "gru": 3, "rnn": 1}
CLS = {"lstm": fusedrnn.LSTM, "gru": fusedrnn.GRU, "rnn": fusedrnn.RNN}


def random_layer(rng, cell, direction="forward", lbr=True, H=None, I=None):
    H = H or int(rng.integers(1, 9))
    I = I or int(rng.integers(1, 7))
    D = 2 if direction == "bidirectional" else 1
    g = G[cell]

    def r(*s, scale=0.5):
        return (rng.normal(size=s) * scale).astype(np.float32)

    kw = {"linear_before_reset": lbr} if cell == "gru" else {}
    return CLS[cell](r(D, g * H, I), r(D, g * H, H), r(D, g * H), r(D, g * H), direction=direction, **kw)


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res


def ok(*args):
    res = cli(*args)
    assert res.exit_code == 0, res.output
    return res


def onnx_arrays(path) -> dict:
    m = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def parse_header(text: str) -> tuple[dict, dict]:
    """({C name: int64 array}, {macro: value text}) of a generated header."""
    arrays = {}
    for ctype, name, body in re.findall(r"static const (\w+) (?:__attribute__\(\(aligned\(4096\)\)\) )?(\w+)\[\w+\] "
                                        r"= \{([^}]*)\};", text):
        vals = [int(v.strip().rstrip("U")) for v in body.replace("\n", " ").split(",") if v.strip()]
        arrays[name] = np.array(vals, np.dtype(ctype.removesuffix("_t"))).astype(np.int64)  # range-checked
    defines = dict(re.findall(r"^#define (\w+) (.*?)(?: /\*.*\*/)?$", text, flags=re.M))
    return arrays, defines


# ---- ONNX <-> PyTorch <-> Keras ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed,cell,direction", [(0, "lstm", "forward"), (1, "lstm", "bidirectional"),
                                                 (2, "gru", "bidirectional"), (3, "rnn", "forward")])
def test_onnx_torch_onnx_is_exact(tmp_path, seed, cell, direction):
    pytest.importorskip("torch")
    layer = random_layer(np.random.default_rng(seed), cell, direction)
    src = tmp_path / "m.onnx"
    onnx.save(layer.to_onnx_model(), str(src))
    ok("convert", src, "--to", "torch", "--out", tmp_path / "m.pt")
    ok("convert", tmp_path / "m.pt", "--to", "onnx", "--out", tmp_path / "back.onnx")
    a, b = onnx_arrays(src), onnx_arrays(tmp_path / "back.onnx")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_torch_state_dict_stack_with_prefix_round_trip(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.GRU(3, 5, num_layers=2, bidirectional=True)
            self.dec = torch.nn.LSTM(10, 4, proj_size=2)

    net = Net()
    torch.save(net.state_dict(), tmp_path / "net.pt")
    res = cli("convert", tmp_path / "net.pt", "--to", "torch", "--out", tmp_path / "x.pt")
    assert res.exit_code == 2 and "'dec'" in res.output and "--node" in res.output
    for prefix, module in (("enc", net.enc), ("dec", net.dec)):
        ok("convert", tmp_path / "net.pt", "--node", prefix, "--to", "torch", "--out", tmp_path / f"{prefix}.pt")
        back = torch.load(tmp_path / f"{prefix}.pt", weights_only=True)
        want = module.state_dict()
        assert back.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(back[k].numpy(), want[k].numpy())
    torch.save(net.dec, tmp_path / "module.pt")  # a saved nn.LSTM (allow-listed for weights_only)
    ok("convert", tmp_path / "module.pt", "--to", "torch", "--out", tmp_path / "m2.pt")
    back = torch.load(tmp_path / "m2.pt", weights_only=True)
    for k, v in net.dec.state_dict().items():
        np.testing.assert_array_equal(back[k].numpy(), v.numpy())


def test_keras_onnx_keras_is_exact(tmp_path):
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(5)
    model = keras.Sequential([keras.Input((None, 3)),
                              keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True), name="bi")])
    model.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()])
    model.save(tmp_path / "m.keras")
    ok("convert", tmp_path / "m.keras", "--to", "onnx", "--out", tmp_path / "m.onnx")
    ok("convert", tmp_path / "m.onnx", "--to", "keras", "--out", tmp_path / "back.keras")
    ok("convert", tmp_path / "m.keras", "--to", "torch", "--out", tmp_path / "m.pt")
    ok("convert", tmp_path / "m.pt", "--to", "keras", "--out", tmp_path / "back2.keras")
    for out in ("back.keras", "back2.keras"):
        back = keras.saving.load_model(tmp_path / out)
        got, want = back.get_weights(), model.get_weights()
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


# ---- MLI ----------------------------------------------------------------------------------------------------
MLI_CASES = [("mli2-sa8", "lstm", "bidirectional", 0), ("mli2-sa8", "gru", "forward", 1),
             ("mli2-sa8", "rnn", "reverse", 2), ("mli2-fx16", "lstm", "forward", 3),
             ("mli2-fx16_fx8_fx8", "gru", "bidirectional", 4), ("mli1-fx16", "lstm", "bidirectional", 5),
             ("mli1-fx8", "rnn", "forward", 6), ("mli1-fx8w16d", "lstm", "reverse", 7)]
MLI_ORDER = {"lstm": [0, 2, 1, 3], "gru": [0, 1, 2], "rnn": [0]}  # MLI block k holds canonical gate ORDER[k]


@pytest.mark.parametrize("target,cell,direction,seed", MLI_CASES)
def test_mli_header_holds_the_targets_tensors(tmp_path, target, cell, direction, seed):
    rng = np.random.default_rng(seed)
    layer = random_layer(rng, cell, direction, lbr=False)
    src = tmp_path / "m.onnx"
    onnx.save(layer.to_onnx_model(), str(src))
    cal = (rng.normal(size=(5, 3, layer.input_size))).astype(np.float32)
    np.savez(tmp_path / "cal.npz", X=cal)
    ok("convert", src, "--to", target, "--calibration", tmp_path / "cal.npz", "--out", tmp_path / "w.h")
    text = (tmp_path / "w.h").read_text()
    arrays, defines = parse_header(text)
    ref = fusedrnn.LSTM.from_onnx(str(src)) if cell == "lstm" else CLS[cell].from_onnx(str(src))
    dirs = ref.to(target, calibration=cal).prepared.directions
    H, I, g = layer.hidden_size, layer.input_size, G[cell]
    assert defines["MLI_NUM_LAYERS"] == "1"
    for d, q in enumerate(dirs):
        p = f"mli_l0_d{d}"
        if target.startswith("mli2-"):
            np.testing.assert_array_equal(arrays[f"{p}_weights_in"], q.Wi.reshape(-1))
            np.testing.assert_array_equal(arrays[f"{p}_weights_out"], q.Wo.reshape(-1))
            np.testing.assert_array_equal(arrays[f"{p}_bias"], q.b.reshape(-1))
            # independent of the target: weights dequantize to the float weights in MLI's [G, in, out] layout
            for name, Wf, K in (("weights_in", layer.W[d], I), ("weights_out", layer.R[d], H)):
                qv = arrays[f"{p}_{name}"].reshape(g, K, H).astype(np.float64)
                if q.flavor == "sa8":
                    s = np.ldexp(arrays[f"{p}_{name}_scale"].astype(np.float64), -arrays[f"{p}_{name}_scale_frac_bits"])
                    assert set(arrays[f"{p}_{name}_zero_point"].tolist()) == {0}
                else:
                    s = np.full(g, 2.0 ** -int(defines[f"{p.upper()}_{name.upper()}_FRAC_BITS"]))
                for k, cg in enumerate(MLI_ORDER[cell]):
                    want = Wf[cg * H:(cg + 1) * H].T.astype(np.float64)
                    assert np.all(np.abs(qv[k] * s[k] - want) <= s[k] / 2 * (1 + 1e-6) + 1e-12)
            if q.flavor == "sa8":
                s_, z_, f_ = q.q.inp
                assert (int(defines[f"{p.upper()}_IN_SCALE"]), int(defines[f"{p.upper()}_IN_ZERO_POINT"]),
                        int(defines[f"{p.upper()}_IN_SCALE_FRAC_BITS"])) == (s_, z_, f_)
            else:
                assert int(defines[f"{p.upper()}_IN_FRAC_BITS"]) == q.q.inp
                assert int(defines[f"{p.upper()}_BIAS_FRAC_BITS"]) == q.q.bias_frac
            rev = d == 1 or direction == "reverse"
            assert defines[f"{p.upper()}_DIRECTION"] == ("RNN_DIR_BACKWARD" if rev else "RNN_DIR_FORWARD")
        else:
            np.testing.assert_array_equal(arrays[f"{p}_weights"],
                                          np.concatenate([q.Wx, q.Wh], axis=-1).reshape(-1))
            np.testing.assert_array_equal(arrays[f"{p}_bias"], q.b.reshape(-1))
            assert int(defines[f"{p.upper()}_WEIGHTS_FRAC_BITS"]) == q.f_w
            assert int(defines[f"{p.upper()}_IN_FRAC_BITS"]) == q.f_in
            W = arrays[f"{p}_weights"].reshape(g, H, I + H) * 2.0 ** -q.f_w
            for k, cg in enumerate(MLI_ORDER[cell]):
                want = np.concatenate([layer.W[d, cg * H:(cg + 1) * H], layer.R[d, cg * H:(cg + 1) * H]], axis=1)
                assert np.all(np.abs(W[k] - want) <= 2.0 ** -q.f_w / 2 * (1 + 1e-6))
    _compiles(tmp_path / "w.h")


def _compiles(path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return
    (path.parent / "t.c").write_text(f'#include "{path.name}"\nint main(void) {{ return 0; }}\n')
    subprocess.run([cc, "-Wall", "-Werror", "-Wno-unused-variable", "-Wno-unused-const-variable", "-fsyntax-only",
                    str(path.parent / "t.c")], check=True, capture_output=True)


# ---- zDNN ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cell,direction,seed", [("lstm", "bidirectional", 0), ("gru", "forward", 1),
                                                 ("lstm", "reverse", 2)])
def test_zdnn_buffers_are_transform_ztensor_bytes(tmp_path, cell, direction, seed):
    rng = np.random.default_rng(seed)
    layer = random_layer(rng, cell, direction)
    src = tmp_path / "m.onnx"
    onnx.save(layer.to_onnx_model(), str(src))
    ok("convert", src, "--to", "zdnn", "--out", tmp_path / "w.h")
    ok("convert", src, "--to", "zdnn", "--out", tmp_path / "w.bin")
    arrays, defines = parse_header((tmp_path / "w.h").read_text())
    raw = (tmp_path / "w.bin").read_bytes()
    manifest = {e["name"]: e for e in json.loads((tmp_path / "w.bin.json").read_text())["ztensors"]}
    # the expected ztensors, built from the ONNX arrays (gate blocks i, o, f, c) as a zDNN program would
    a = onnx_arrays(src)
    D, H, I = layer.num_directions, layer.hidden_size, layer.input_size
    onnx_block = {"lstm": {"f": 2, "i": 0, "c": 3, "o": 1}, "gru": {"z": 0, "r": 1, "h": 2}}[cell]
    gates = "fico" if cell == "lstm" else "zrh"
    g = len(gates)
    rtype = z.RNN_TYPE_LSTM if cell == "lstm" else z.RNN_TYPE_GRU
    blocks = {
        "weights": (z.USAGE_WEIGHTS, z.ZDNN_3DS, (D, I, H), [a["W"][:, onnx_block[c] * H:(onnx_block[c] + 1) * H]
                                                             .transpose(0, 2, 1) for c in gates]),
        "biases": (z.USAGE_BIASES, z.ZDNN_2DS, (D, H), [a["B"][:, onnx_block[c] * H:(onnx_block[c] + 1) * H]
                                                        for c in gates]),
        "hidden_weights": (z.USAGE_HIDDEN_WEIGHTS, z.ZDNN_3DS, (D, H, H),
                           [a["R"][:, onnx_block[c] * H:(onnx_block[c] + 1) * H].transpose(0, 2, 1) for c in gates]),
        "hidden_biases": (z.USAGE_HIDDEN_BIASES, z.ZDNN_2DS, (D, H),
                          [a["B"][:, (g + onnx_block[c]) * H:(g + onnx_block[c] + 1) * H] for c in gates]),
    }
    for name, (usage, layout, dims, data) in blocks.items():
        pre = z.init_pre_transformed_desc(layout, z.FP32, None, *dims)
        tf = z.TensorDesc()
        assert z.generate_transformed_desc_concatenated(pre, rtype | z.PREV_LAYER_NONE | usage, tf) == z.ZDNN_OK
        zt = z.ZTensor()
        assert z.init_ztensor_with_malloc(pre, tf, zt) == z.ZDNN_OK
        assert z.transform_ztensor(zt, *[np.ascontiguousarray(x) for x in data]) == z.ZDNN_OK
        c = f"zdnn_l0_{name}"
        want = np.frombuffer(zt.buffer.tobytes(), np.uint8)
        np.testing.assert_array_equal(arrays[c], want)
        e = manifest[c]
        np.testing.assert_array_equal(np.frombuffer(raw[e["offset"]:e["offset"] + e["bytes"]], np.uint8), want)
        assert e["transformed_desc"]["dims"] == list(tf.dims)
        assert defines[f"{c.upper()}_TFRMD_DESC"].endswith(", ".join(str(x) for x in tf.dims) + "}")
    _compiles(tmp_path / "w.h")


# ---- quark, stacks, errors ---------------------------------------------------------------------------------
def test_quark_output_runs_like_the_quark_converter(tmp_path):
    quark = pytest.importorskip("fusedrnn.quark")
    rng = np.random.default_rng(9)
    layer = random_layer(rng, "lstm", "bidirectional", H=4, I=3)
    src = tmp_path / "m.onnx"
    onnx.save(layer.to_onnx_model(), str(src))
    cal = rng.normal(size=(6, 2, 3)).astype(np.float32)
    np.save(tmp_path / "cal.npy", cal)
    ok("convert", src, "--to", "quark", "--calibration", tmp_path / "cal.npy", "--out", tmp_path / "q.onnx")
    got = onnx.load(str(tmp_path / "q.onnx"))
    want = quark.convert(fusedrnn.LSTM.from_onnx(str(src)), cal).model
    assert got.SerializeToString() == want.SerializeToString()


def one_line_error(res, *needles):
    assert res.exit_code == 2, res.output
    err = res.output.strip()
    assert err.startswith("Error:") and "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_errors_are_one_line(tmp_path):
    rng = np.random.default_rng(3)
    gru = random_layer(rng, "gru", "forward", lbr=False)
    src = tmp_path / "gru.onnx"
    onnx.save(gru.to_onnx_model(), str(src))
    rnn_src = tmp_path / "rnn.onnx"
    onnx.save(random_layer(rng, "rnn").to_onnx_model(), str(rnn_src))
    one_line_error(cli("convert", tmp_path / "nope.onnx", "--to", "onnx"), "no such file")
    one_line_error(cli("convert", src, "--to", "tensorrt"), "unknown format", "mli2-sa8")
    one_line_error(cli("convert", src, "--to", "mli2-sa8", "--out", tmp_path / "w.h"), "--calibration")
    one_line_error(cli("convert", src, "--to", "zdnn"), "linear_before_reset")
    one_line_error(cli("convert", rnn_src, "--to", "zdnn"), "rnn")
    (tmp_path / "w.txt").write_text("x")
    one_line_error(cli("convert", tmp_path / "w.txt", "--to", "onnx"), "unknown model file type")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    one_line_error(cli("convert", tmp_path / "bad.onnx", "--to", "zdnn"), "not a readable ONNX model")
    np.savez(tmp_path / "two.npz", a=np.zeros((2, 2, 2)), b=np.zeros((2, 2, 2)))
    one_line_error(cli("convert", src, "--to", "mli2-fx16", "--calibration", tmp_path / "two.npz"), "found a, b")
    one_line_error(cli("convert", src, "--to", "onnx", "--node", "nope"), "no LSTM/GRU/RNN node called 'nope'")
    if importlib.util.find_spec("torch") is not None:
        one_line_error(cli("convert", src, "--to", "torch"), "linear_before_reset=False")


def test_mli_header_of_a_torch_stack(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    m = torch.nn.LSTM(3, 4, num_layers=2)
    torch.save(m.state_dict(), tmp_path / "m.pt")
    cal = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    np.savez(tmp_path / "cal.npz", cal)
    ok("convert", tmp_path / "m.pt", "--to", "mli2-sa8", "--calibration", tmp_path / "cal.npz", "--time-major",
       "--out", tmp_path / "w.h")
    arrays, defines = parse_header((tmp_path / "w.h").read_text())
    assert defines["MLI_NUM_LAYERS"] == "2"
    stack = fusedrnn.LSTM.from_torch(m)
    y0 = stack[0](cal)[0]
    for k, (layer, c) in enumerate(((stack[0], cal), (stack[1], y0))):
        q = layer.to("mli2-sa8", calibration=c).prepared.directions[0]
        np.testing.assert_array_equal(arrays[f"mli_l{k}_d0_weights_in"], q.Wi.reshape(-1))
        np.testing.assert_array_equal(arrays[f"mli_l{k}_d0_bias"], q.b.reshape(-1))
    ok("convert", tmp_path / "m.pt", "--to", "onnx", "--out", tmp_path / "m.onnx")  # a stack: two LSTM nodes
    got = onnx.load(str(tmp_path / "m.onnx"))
    assert [n.op_type for n in got.graph.node if n.op_type == "LSTM"] == ["LSTM", "LSTM"]
    assert [i.name for i in got.graph.input] == ["x"]
    x = cal[:, :1]
    want = m(torch.from_numpy(x))[0].detach().numpy()
    np.testing.assert_allclose(fusedrnn.onnx.load(got).run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    one_line_error(cli("convert", tmp_path / "m.pt", "--to", "mli2-sa8", "--calibration", tmp_path / "cal.npz"),
                   "--batch-first or --time-major")


def test_tflite_source(tmp_path):
    litert = pytest.importorskip("fusedrnn.litert")
    rng = np.random.default_rng(4)
    layer = random_layer(rng, "lstm", H=4, I=3)
    prepared = layer.to("litert-float", calibration=rng.normal(size=(4, 2, 3)).astype(np.float32))
    (tmp_path / "m.tflite").write_bytes(litert.to_tflite(prepared, batch=2, time=4))
    ok("convert", tmp_path / "m.tflite", "--to", "onnx", "--out", tmp_path / "m.onnx")
    got = onnx_arrays(tmp_path / "m.onnx")
    want = {t.name: numpy_helper.to_array(t) for t in layer.to_onnx_model().graph.initializer}
    for k in ("W", "R"):
        np.testing.assert_array_equal(got[k], want[k])
    G4 = 4 * layer.hidden_size  # TFLite keeps one bias: b_x + b_h
    np.testing.assert_array_equal(got["B"][:, :G4] + got["B"][:, G4:], want["B"][:, :G4] + want["B"][:, G4:])
