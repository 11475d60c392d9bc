"""``fusedrnn.litert.export``: fusedrnn layers (native, from PyTorch, Keras 3 and ONNX) written as .tflite models of
fused recurrent ops, run by the LiteRT interpreter through the model signature.

Oracles: the interpreter's int8 outputs equal the ``litert-int8x16`` target's bit for bit; float and hybrid agree
with ``litert-float`` / ``litert-hybrid`` to 1e-6; float exports agree with the source framework (torch, Keras 3,
onnxruntime) to 1e-5. The bundled digits classifier keeps its accuracy in int8."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litert_cases import random_tflite_options

import fusedrnn
from fusedrnn.errors import AttributeValueError, DTypeError, FusedRNNError, UnsupportedFeatureError
from fusedrnn.targets.litert.export import export, prepare
from fusedrnn.targets.litert.reader import read_model

interp = pytest.importorskip("ai_edge_litert.interpreter")
SCHEMES = ("float", "hybrid", "int8x16")


def interpreter(content: bytes):
    return interp.Interpreter(model_content=content,
                              experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


def run_tflite(content: bytes, *xs: np.ndarray) -> list[np.ndarray]:
    """Float outputs of consecutive invokes through the signature (state carried): int8 inputs are quantized with
    the input tensor's parameters (round half to even, as the targets do), int8 outputs dequantized with the
    output tensor's."""
    it = interpreter(content)
    runner = it.get_signature_runner("serving_default")
    din = runner.get_input_details()["x"]
    dout = runner.get_output_details()["y"]
    out = []
    for x in xs:
        if din["dtype"] == np.int8:
            s, zp = din["quantization"]
            x = np.clip(np.rint(x.astype(np.float64) / s) + zp, -128, 127).astype(np.int8)
        y = runner(x=np.ascontiguousarray(x))["y"]
        if dout["dtype"] == np.int8:
            s, zp = dout["quantization"]
            y = ((y.astype(np.float64) - zp) * s).astype(np.float32)
        out.append(y.copy())
    return out


def dequantize_op_inputs(content: bytes, x: np.ndarray) -> list[np.ndarray]:
    """The int8 tensors the model's DEQUANTIZE ops read (first invoke), dequantized exactly (float64 product,
    one rounding to float32). The interpreter's DEQUANTIZE itself computes q·s - zp·s in float32 (up to 1 ulp
    away), so int8 models with float outputs are compared bit for bit here, before it."""
    info = read_model(content)
    it = interp.Interpreter(model_content=content, experimental_preserve_all_tensors=True,
                            experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.reset_all_variables()
    d = it.get_input_details()[0]
    if d["dtype"] == np.int8:
        s, zp = d["quantization"]
        x = np.clip(np.rint(x.astype(np.float64) / s) + zp, -128, 127).astype(np.int8)
    it.set_tensor(d["index"], np.ascontiguousarray(x))
    it.invoke()
    out = []
    for op in info.ops:
        if op.name == "DEQUANTIZE":
            t = info.tensors[op.inputs[0]]
            q = it.get_tensor(op.inputs[0]).astype(np.float64)
            out.append(((q - float(t.zero_point[0])) * float(t.scale[0])).astype(np.float32))
    return out


def expected(layer, y: np.ndarray, *, last: bool = False) -> np.ndarray:
    """A layer's output in the exported model's layout: one direction without ONNX's direction axis."""
    if layer.merge == "stack" and layer.num_directions == 1:
        y = y[:, :, 0] if layer.batch_first else y[:, 0]
    if last:
        y = y[:, -1] if layer.batch_first else y[-1]
    return y


def check_against_target(layer, scheme: str, xs, calibration, **kw):
    """Export ``layer``; the interpreter equals the prepared target over consecutive calls (state carried)."""
    em = prepare(layer, scheme, calibration)
    content = export(layer, None, scheme, calibration, **kw)
    got = run_tflite(content, *xs)
    state = None
    for k, x in enumerate(xs):
        y, state = em(x, state)
        top = layer.layers[-1] if hasattr(layer, "layers") else layer
        want = expected(top, y, last=not kw.get("return_sequences", True))
        if scheme == "int8x16" and got[k].dtype == np.float32 and any(
                op.name == "DEQUANTIZE" for op in read_model(content).ops):
            np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-6, err_msg=f"call {k}")
            if k == 0:  # the int8 values before DEQUANTIZE: bit for bit
                check_int8_before_dequantize(em, content, x)
        elif scheme == "int8x16":
            np.testing.assert_array_equal(got[k], want, err_msg=f"call {k}")
        else:
            np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-6, err_msg=f"call {k}")
    return content, got


def check_int8_before_dequantize(em, content, x):
    """A single layer's int8 outputs (per direction before a float merge) equal the target's bit for bit."""
    import copy

    ys = dequantize_op_inputs(content, x)
    if em.num_directions == 2 and em.merge in ("sum", "mul", "ave"):
        st = copy.copy(em)
        st.merge = "stack"
        Y, _ = st(x)
        want = [Y[:, :, d] if em.batch_first else Y[:, d] for d in range(2)]
    else:
        want = [expected(em, em(x)[0])]
    assert len(ys) == len(want)
    for got, w in zip(ys, want, strict=True):
        np.testing.assert_array_equal(got, w)


def seq(rng, layer_or_bf, T, B, I):
    bf = layer_or_bf if isinstance(layer_or_bf, bool) else layer_or_bf.batch_first
    return rng.normal(size=(B, T, I) if bf else (T, B, I)).astype(np.float32)


# ---- native layers over TFLite's whole option space -------------------------------------------------------------
def random_lstm(rng, *, int8: bool) -> fusedrnn.LSTM:
    I, H = int(rng.integers(1, 9)), int(rng.choice([4, 8, 16]))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    Hp = int(rng.integers(2, H + 1)) if rng.random() < 0.3 else H
    opts = {"direction": direction, "batch_first": bool(rng.random() < 0.5),
            "merge": str(rng.choice(["concat", "stack", "sum", "mul", "ave"])) if D == 2 else "concat"}
    if direction == "reverse" and rng.random() < 0.5:
        opts["output_order"] = "processing"
    opts.update(random_tflite_options(rng, D, H, Hp))
    if not int8 and rng.random() < 0.25:
        opts["activations"] = ["Sigmoid", "Relu", "Relu"]
    R = rng.normal(size=(D, 4 * H, Hp)) / np.sqrt(Hp)
    if not int8 and Hp == H and rng.random() < 0.15:
        R = rng.normal(size=(D, 4 * H)) * 0.5  # diagonal recurrence (IndyLSTM)
    return fusedrnn.LSTM(rng.normal(size=(D, 4 * H, I)) / np.sqrt(I), R, rng.normal(size=(D, 4 * H)) * 0.3, **opts)


@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_lstm_equals_target(scheme, seed):
    rng = np.random.default_rng(seed)
    layer = random_lstm(rng, int8=scheme == "int8x16")
    T, B = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    xs = [seq(rng, layer, T, B, layer.input_size) for _ in range(2)]
    kw = {"return_sequences": bool(rng.random() < 0.8)}
    try:
        prepare(layer, scheme, xs[0])
    except UnsupportedFeatureError as exc:  # the 8x8_16 kernel's peephole limit with projection > cell
        assert "peephole" in str(exc) or "diagonal" in str(exc)
        return
    content, got = check_against_target(layer, scheme, xs, xs[0], **kw)
    names = [op.name for op in read_model(content).ops]
    assert names.count("UNIDIRECTIONAL_SEQUENCE_LSTM") == layer.num_directions
    if scheme == "float":  # and the float engines (fp64) within 1e-5
        ref, _ = layer.to("fp64")(xs[0])
        np.testing.assert_allclose(got[0], expected(layer, ref, last=not kw["return_sequences"]), atol=1e-5)


@pytest.mark.parametrize("scheme", ["float", "hybrid"])
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_bidirectional_op(scheme, seed):
    rng = np.random.default_rng(seed)
    layer = random_lstm(rng, int8=False)
    if layer.num_directions == 1 or layer.layer_norm is not None or layer.diagonal:
        with pytest.raises(UnsupportedFeatureError) if layer.num_directions == 2 else _nothing():
            export(layer, None, scheme, bidirectional_op=True)
        return
    T, B = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    xs = [seq(rng, layer, T, B, layer.input_size) for _ in range(2)]
    content, _ = check_against_target(layer, scheme, xs, None, batch=B, bidirectional_op=True)
    assert [op.name for op in read_model(content).ops][0] == "BIDIRECTIONAL_SEQUENCE_LSTM"


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_bidirectional_op_refuses_int8():
    rng = np.random.default_rng(1)
    layer = fusedrnn.LSTM(rng.normal(size=(2, 16, 3)), rng.normal(size=(2, 16, 4)), direction="bidirectional")
    with pytest.raises(UnsupportedFeatureError, match="no integer kernel"):
        export(layer, None, "int8x16", rng.normal(size=(4, 2, 3)), bidirectional_op=True)


# ---- PyTorch --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_torch(scheme, seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed % 2**31)
    I, H, L = int(rng.integers(1, 7)), int(rng.integers(2, 9)), int(rng.integers(1, 3))
    bf, bi = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
    rnn = scheme != "int8x16" and rng.random() < 0.3
    if rnn:
        m = torch.nn.RNN(I, H, L, nonlinearity=str(rng.choice(["tanh", "relu"])), batch_first=bf, bidirectional=bi)
    else:
        proj = int(rng.integers(1, H)) if rng.random() < 0.3 else 0
        m = torch.nn.LSTM(I, H, L, batch_first=bf, bidirectional=bi, proj_size=proj, bias=bool(rng.random() < 0.8))
    layers = fusedrnn.LSTM.from_torch(m) if not rnn else fusedrnn.RNN.from_torch(m)
    T, B = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    xs = [seq(rng, bf, T, B, I) for _ in range(2)]
    _, got = check_against_target(layers, scheme, xs, xs[0])
    if scheme == "float":
        with torch.no_grad():
            want = m(torch.from_numpy(xs[0]))[0].numpy()
        np.testing.assert_allclose(got[0], want, atol=1e-5, rtol=0)


def test_torch_stack_int8_layers_share_the_tensor_between_them():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = torch.nn.LSTM(5, 16, 3, bidirectional=True)
    rng = np.random.default_rng(0)
    cal = rng.normal(size=(8, 6, 5)).astype(np.float32)
    stack = fusedrnn.LSTM.from_torch(m)
    content, got = check_against_target(stack, "int8x16", [cal[:, :2], cal[:, 2:4]], cal, batch=2)
    names = [op.name for op in read_model(content).ops]
    assert names.count("UNIDIRECTIONAL_SEQUENCE_LSTM") == 6 and "QUANTIZE" not in names
    with torch.no_grad():
        want = m(torch.from_numpy(cal[:, :2]))[0].numpy()
    assert np.abs(got[0] - want).max() < 0.05


# ---- Keras 3 --------------------------------------------------------------------------------------------------
def _keras():
    return pytest.importorskip("keras")


@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_keras(scheme, seed):
    keras = _keras()
    rng = np.random.default_rng(seed)
    keras.utils.set_random_seed(seed % 2**31)
    T, I, U = int(rng.integers(1, 6)), int(rng.integers(1, 7)), int(rng.integers(2, 9))
    kind = "lstm" if scheme == "int8x16" or rng.random() < 0.7 else "rnn"
    seq_out = bool(rng.random() < 0.7)
    kw = {"return_sequences": True, "go_backwards": bool(rng.random() < 0.3)}
    if kind == "lstm":
        inner = keras.layers.LSTM(U, use_bias=bool(rng.random() < 0.8), **kw)
    else:
        inner = keras.layers.SimpleRNN(U, activation=str(rng.choice(["tanh", "relu"])), **kw)
    if rng.random() < 0.4 and not kw["go_backwards"]:
        layer = keras.layers.Bidirectional(inner, merge_mode=rng.choice(["concat", "sum", "mul", "ave", None]))
    else:
        layer = inner
    inp = keras.Input((T, I), batch_size=2)
    model = keras.Model(inp, layer(inp))
    for w in model.weights:  # non-trivial biases
        w.assign(rng.normal(size=w.shape).astype(np.float32) * 0.5)
    fl = (fusedrnn.LSTM if kind == "lstm" else fusedrnn.RNN).from_keras(layer)
    xs = [rng.normal(size=(2, T, I)).astype(np.float32) for _ in range(2)]
    _, got = check_against_target(fl, scheme, xs, xs[0], batch=2, return_sequences=seq_out)
    if scheme == "float":
        want = model(xs[0])
        npy = keras.ops.convert_to_numpy
        want = np.stack([npy(w) for w in want], axis=2) if isinstance(want, (list, tuple)) else npy(want)
        np.testing.assert_allclose(got[0], want if seq_out else want[:, -1], atol=1e-5, rtol=0)


def test_keras3_lstm_exports_as_one_fused_op(tmp_path):
    keras = _keras()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((20, 12)), keras.layers.LSTM(32)])  # return_sequences=False
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 20, 12)).astype(np.float32)
    layer = fusedrnn.LSTM.from_keras(model.layers[0])
    for scheme in ("float", "int8x16"):
        path = tmp_path / f"lstm_{scheme}.tflite"
        export(layer, path, scheme, calibration=x, return_sequences=False)
        names = [op.name for op in read_model(path.read_bytes()).ops]
        assert names == ["UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE"]
        (y,) = run_tflite(path.read_bytes(), x)
        err = np.abs(y - keras.ops.convert_to_numpy(model(x))).max()
        assert err < (1e-5 if scheme == "float" else 0.05), err


# ---- ONNX -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_onnx(scheme, seed):
    from ort_oracle import ort_lstm, ort_rnn

    rng = np.random.default_rng(seed)
    T, B, I, H = (int(v) for v in rng.integers(1, 7, 4))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    rnn = scheme != "int8x16" and rng.random() < 0.3
    G = 1 if rnn else 4
    W = rng.normal(size=(D, G * H, I)).astype(np.float32) / np.sqrt(I)
    R = rng.normal(size=(D, G * H, H)).astype(np.float32) / np.sqrt(H)
    Bb = rng.normal(size=(D, 2 * G * H)).astype(np.float32) * 0.3
    P = rng.normal(size=(D, 3 * H)).astype(np.float32) * 0.3 if not rnn and rng.random() < 0.4 else None
    acts = None
    if not rnn and scheme != "int8x16" and rng.random() < 0.3:
        acts = ["Sigmoid", "Relu", "Relu"] * D
    x = rng.normal(size=(T, B, I)).astype(np.float32)
    attrs = {"hidden_size": H, "direction": direction}
    if acts:
        attrs["activations"] = acts
    cls = fusedrnn.RNN if rnn else fusedrnn.LSTM
    layer = cls.from_onnx(W, R, Bb, P, **attrs) if not rnn else cls.from_onnx(W, R, Bb, **attrs)
    _, got = check_against_target(layer, scheme, [x, x[::-1].copy()], x)
    if scheme == "float":
        Y = (ort_rnn(x, W, R, Bb, direction=direction)[0] if rnn else
             ort_lstm(x, W, R, Bb, P=P, direction=direction, activations=acts)[0])
        np.testing.assert_allclose(got[0], Y[:, 0] if D == 1 else Y, atol=1e-5, rtol=0)


# ---- model-level behaviour ------------------------------------------------------------------------------------
def test_dynamic_time_and_fixed_shapes():
    rng = np.random.default_rng(5)
    layer = fusedrnn.LSTM(rng.normal(size=(1, 32, 3)) * 0.5, rng.normal(size=(1, 32, 8)) * 0.5, batch_first=True)
    cal = rng.normal(size=(3, 7, 3)).astype(np.float32)
    content = export(layer, None, "int8x16", cal)
    d = interpreter(content).get_input_details()[0]
    assert tuple(d["shape"]) == (3, 7, 3) and tuple(d["shape_signature"]) == (3, -1, 3)
    x = rng.normal(size=(3, 11, 3)).astype(np.float32)  # another T through the signature runner
    em = prepare(layer, "int8x16", cal)
    np.testing.assert_array_equal(run_tflite(content, x)[0], em(x)[0])
    fixed = interpreter(export(layer, None, "float", batch=2, time=4)).get_input_details()[0]
    assert tuple(fixed["shape"]) == (2, 4, 3) and tuple(fixed["shape_signature"]) == (2, 4, 3)
    sig = interpreter(content).get_signature_list()
    assert sig == {"serving_default": {"inputs": ["x"], "outputs": ["y"]}}
    assert "rnn" in interpreter(export(layer, None, signature_name="rnn")).get_signature_list()


def test_int8_float_io_quantize_dequantize():
    rng = np.random.default_rng(6)
    layer = fusedrnn.LSTM(rng.normal(size=(2, 16, 3)) * 0.5, rng.normal(size=(2, 16, 4)) * 0.5,
                          direction="bidirectional", merge="sum")
    cal = rng.normal(size=(6, 2, 3)).astype(np.float32)
    em = prepare(layer, "int8x16", cal)
    t0 = em.prepared.kernels[0].t[0]
    s, zp = float(t0.scale[0]), int(t0.zero_point[0])
    q = rng.integers(-128, 128, size=cal.shape)
    x = ((q - zp) * s).astype(np.float32)  # on the int8 grid: every rounding rule quantizes it the same way
    content = export(layer, None, "int8x16", cal, quantized_io=False)
    ops = [op.name for op in read_model(content).ops]
    assert ops[0] == "QUANTIZE" and ops.count("DEQUANTIZE") == 2 and ops[-1] == "ADD"
    check_int8_before_dequantize(em, content, x)  # the QUANTIZE of grid values and both int8 directions
    np.testing.assert_allclose(run_tflite(content, x)[0], em(x)[0], rtol=1e-6, atol=1e-6)
    one = fusedrnn.LSTM(layer.W[:1], layer.R[:1], batch_first=True)  # same x range: x stays on the grid
    content = export(one, None, "int8x16", cal, quantized_io=False, batch=6)
    assert [op.name for op in read_model(content).ops] == ["QUANTIZE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "DEQUANTIZE"]
    check_int8_before_dequantize(prepare(one, "int8x16", cal), content, x)


def test_example_int8_keeps_accuracy():
    import onnx
    from onnx import numpy_helper

    import fusedrnn.example as ex

    x, labels = ex.load_data()
    m = onnx.load(ex.model_path())
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    layer = fusedrnn.LSTM.from_onnx(init["lstm_W"], init["lstm_R"], init["lstm_B"], hidden_size=64)
    xt = np.ascontiguousarray(x.transpose(1, 0, 2))  # the ONNX node is time-major
    cal = xt[:, :200]
    content = export(layer, None, "int8x16", cal, batch=len(labels), return_sequences=False)
    assert [op.name for op in read_model(content).ops] == ["UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE"]
    (h,) = run_tflite(content, xt)
    float_acc = (ex.load_model().run({"x": x})["logits"].argmax(1) == labels).mean()
    int8_acc = ((h @ init["head_W"].T + init["head_b"]).argmax(1) == labels).mean()
    assert float_acc > 0.9 and int8_acc >= float_acc - 0.01, (float_acc, int8_acc)


# ---- errors ---------------------------------------------------------------------------------------------------
def test_errors():
    rng = np.random.default_rng(7)
    lstm = fusedrnn.LSTM(rng.normal(size=(1, 8, 2)), rng.normal(size=(1, 8, 2)))
    gru = fusedrnn.GRU(rng.normal(size=(1, 6, 2)), rng.normal(size=(1, 6, 2)))
    with pytest.raises(UnsupportedFeatureError, match="GRU"):
        export(gru, None)
    with pytest.raises(DTypeError, match="layers"):
        export("model.onnx", None)
    with pytest.raises(AttributeValueError, match="scheme"):
        export(lstm, None, "int4")
    with pytest.raises(UnsupportedFeatureError, match="calibration"):
        export(lstm, None, "int8x16")
    sig = fusedrnn.LSTM(rng.normal(size=(1, 8, 2)), rng.normal(size=(1, 8, 2)),
                        activations=["Sigmoid", "Sigmoid", "Sigmoid"])
    with pytest.raises(UnsupportedFeatureError, match="SIGMOID"):
        export(sig, None)
    with pytest.raises(UnsupportedFeatureError, match="rnn"):
        export(fusedrnn.RNN(rng.normal(size=(1, 2, 2)), rng.normal(size=(1, 2, 2))), None, "int8x16",
               rng.normal(size=(3, 1, 2)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(batch=st.one_of(st.none(), st.integers(-3, 4), st.floats(0, 3), st.booleans(), st.text(max_size=2)),
       time=st.one_of(st.none(), st.integers(-3, 4), st.booleans()),
       sig=st.one_of(st.just("serving_default"), st.text(max_size=3), st.integers()))
def test_argument_fuzz(batch, time, sig):
    rng = np.random.default_rng(8)
    lstm = fusedrnn.LSTM(rng.normal(size=(1, 8, 2)), rng.normal(size=(1, 8, 2)))
    ok = all((v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)) for v in (batch, time)) \
        and isinstance(sig, str) and sig != ""
    if ok:
        assert export(lstm, None, batch=batch, time=time, signature_name=sig)[4:8] == b"TFL3"
    else:
        with pytest.raises(FusedRNNError):
            export(lstm, None, batch=batch, time=time, signature_name=sig)


# ---- CLI ------------------------------------------------------------------------------------------------------
def test_cli_convert_to_tflite(tmp_path):
    import onnx
    from click.testing import CliRunner

    from fusedrnn.cli import main

    rng = np.random.default_rng(9)
    layer = fusedrnn.LSTM(rng.normal(size=(2, 32, 4)) * 0.4, rng.normal(size=(2, 32, 8)) * 0.4,
                          rng.normal(size=(2, 32)) * 0.2, rng.normal(size=(2, 32)) * 0.2, direction="bidirectional")
    onnx.save(layer.to_onnx_model(), tmp_path / "m.onnx")
    cal = rng.normal(size=(5, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "cal.npz", x=cal)
    run = CliRunner().invoke
    res = run(main, ["convert", str(tmp_path / "m.onnx"), "--to", "tflite", "--scheme", "int8x16", "--calibration",
                     str(tmp_path / "cal.npz"), "--out", str(tmp_path / "m.tflite")])
    assert res.exit_code == 0, res.output
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in res.output
    src = fusedrnn.LSTM.from_onnx(tmp_path / "m.onnx")
    (got,) = run_tflite((tmp_path / "m.tflite").read_bytes(), cal)
    np.testing.assert_array_equal(got, prepare(src, "int8x16", cal)(cal)[0])
    res = run(main, ["convert", str(tmp_path / "m.onnx"), "--to", "tflite", "--scheme", "int8x16"])
    assert res.exit_code != 0 and "--calibration" in res.output
    res = run(main, ["convert", str(tmp_path / "m.onnx"), "--to", "tflite", "--out", str(tmp_path / "m.bin")])
    assert res.exit_code != 0 and ".tflite" in res.output
    res = run(main, ["convert", str(tmp_path / "m.onnx"), "--to", "tflite", "--scheme", "hybrid", "--batch", "3"])
    assert res.exit_code == 0, res.output
    (got,) = run_tflite((tmp_path / "m.tflite").read_bytes(), cal)
    np.testing.assert_allclose(got, prepare(src, "hybrid")(cal)[0], rtol=1e-6, atol=1e-6)
