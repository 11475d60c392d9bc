"""litert-float / litert-hybrid / litert-int8x16 targets, the .tflite exporter and LSTM import from .tflite.

Random layers over the option space are quantized as the converter would, written as .tflite models and run by the
LiteRT interpreter: the 8x8_16 target's output equals the interpreter's dequantized output exactly, float and hybrid
agree to 1e-6. Imported conformance models run on their own stored tensors reproduce the interpreter's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_dir
from hypothesis import given, settings
from hypothesis import strategies as st
from litert_cases import random_tflite_options

import fusedrnn
from fusedrnn.errors import AttributeValueError, ConversionError, FusedRNNError, UnsupportedFeatureError
from fusedrnn.frontends.tflite import layer_from_tflite
from fusedrnn.targets import registry
from fusedrnn.targets.litert.export import to_tflite
from fusedrnn.targets.litert.reader import read_model
from fusedrnn.targets.litert.slots import LstmOptions

interp = pytest.importorskip("ai_edge_litert.interpreter")


def _interpret(model: bytes, x: np.ndarray) -> np.ndarray:
    it = interp.Interpreter(model_content=model,
                            experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.reset_all_variables()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def test_registered():
    for name, exact in (("litert-float", False), ("litert-hybrid", False), ("litert-int8x16", True)):
        t = registry.get(name)
        assert t.family == "litert" and t.bit_exact is exact and t.prepare is not None
    assert registry.get("litert-int8x16").needs_calibration
    assert "gru" in registry.get("litert-float").features and "gru" not in registry.get("litert-int8x16").features


def random_layer(rng) -> fusedrnn.LSTM:
    I, H, D = int(rng.integers(1, 10)), int(rng.choice([4, 8, 16])), 1
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    Hp = int(rng.integers(2, 10)) if rng.random() < 0.3 else H
    opts = {}
    opts.update(random_tflite_options(rng, D, H, Hp))
    return fusedrnn.LSTM(rng.normal(size=(D, 4 * H, I)) / np.sqrt(I), rng.normal(size=(D, 4 * H, Hp)) / np.sqrt(Hp),
                         rng.normal(size=(D, 4 * H)) * 0.3, direction=direction, batch_first=bool(rng.random() < 0.5),
                         **opts)


@pytest.mark.parametrize("target", ["litert-float", "litert-hybrid", "litert-int8x16"])
@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_layers_match_interpreter(target, seed):
    rng = np.random.default_rng(seed)
    layer = random_layer(rng)
    T, B = int(rng.integers(1, 7)), int(rng.integers(1, 4))
    x = rng.normal(size=(T, B, layer.input_size)).astype(np.float32)
    xl = x.transpose(1, 0, 2) if layer.batch_first else x
    if target == "litert-int8x16" and layer.P is not None and layer.output_size > layer.hidden_size:
        with pytest.raises(UnsupportedFeatureError, match="peephole reads past"):
            layer.to(target, calibration=xl)
        return
    em = layer.to(target, calibration=xl)
    y, (h, c) = em(xl)
    y = y.transpose(1, 0, 2) if layer.batch_first else y
    model = to_tflite(em, batch=B, time=T)
    k = em.prepared.kernels[0]
    if target == "litert-int8x16":
        s, zp = float(k.t[0].scale[0]), int(k.t[0].zero_point[0])
        xq = np.clip(np.rint(x / s) + zp, -128, 127).astype(np.int8)
        yq = _interpret(model, xq)
        sh, zh = float(k.t[18].scale[0]), int(k.t[18].zero_point[0])
        np.testing.assert_array_equal(y, ((yq.astype(np.float64) - zh) * sh).astype(np.float32))
    else:
        np.testing.assert_allclose(y, _interpret(model, x), rtol=1e-6, atol=1e-6)
    ref, _ = layer(xl)
    ref = ref.transpose(1, 0, 2) if layer.batch_first else ref
    assert np.abs(y - ref).max() < (1e-5 if target == "litert-float" else 0.5)


def test_int8x16_tracks_float_on_calibration_data():
    rng = np.random.default_rng(3)
    layer = fusedrnn.LSTM(rng.normal(size=(1, 64, 16)) * 0.3, rng.normal(size=(1, 64, 16)) * 0.3,
                          rng.normal(size=(1, 64)) * 0.3)
    x = rng.normal(size=(20, 4, 16))
    y, _ = layer.to("litert-int8x16", calibration=x)(x)
    assert np.abs(y - layer(x)[0]).max() < 0.05


def test_state_in_and_out_of_the_integer_target():
    rng = np.random.default_rng(4)
    layer = fusedrnn.LSTM(rng.normal(size=(1, 32, 5)) * 0.4, rng.normal(size=(1, 32, 8)) * 0.4)
    x = rng.normal(size=(6, 2, 5))
    em = layer.to("litert-int8x16", calibration=x)
    y_full, _ = em(x)
    y1, st = em(x[:3])
    y2, _ = em(x[3:], st)  # the dequantized state re-quantizes to the same integers
    np.testing.assert_array_equal(np.concatenate([y1, y2]), y_full)


@pytest.mark.parametrize("name", ["k2_lstm_int8", "k2_lstm_backwards_int8", "k2_lstm_dynamic", "k2_lstm_float"])
def test_imported_models_run_their_own_tensors(name):
    d = shared_dir("conformance", "tflite")
    ref = np.load(d / f"{name}.npz")
    layer = fusedrnn.LSTM.from_tflite(d / f"{name}.tflite") if hasattr(fusedrnn.LSTM, "from_tflite") else \
        layer_from_tflite(fusedrnn.LSTM, d / f"{name}.tflite", 0)
    assert layer.batch_first and layer.cell_clip == 10.0 and layer.hidden_size == 64
    kind = layer.kept["litert"]["kind"]
    if kind == "float":
        y, _ = layer(ref["x_float"])
        np.testing.assert_allclose(y, ref["y"], rtol=0, atol=1e-6)
        return
    target = {"integer": "litert-int8x16", "hybrid": "litert-hybrid"}[kind]
    y, _ = layer.to(target, calibration="tflite")(ref["x_float"])
    if kind == "integer":
        assert layer.direction == ("reverse" if "backwards" in name else "forward")
        np.testing.assert_array_equal(y, ref["y_dequantized"])
    else:
        np.testing.assert_allclose(y, ref["y"], rtol=0, atol=1e-6)


def test_imported_bidirectional_graph_halves():
    d = shared_dir("conformance", "tflite")
    ref = np.load(d / "k2_bilstm_float.npz")
    bw = layer_from_tflite(fusedrnn.LSTM, d / "k2_bilstm_float.tflite", 0)
    fw = layer_from_tflite(fusedrnn.LSTM, d / "k2_bilstm_float.tflite", 1)
    assert bw.direction == "reverse" and bw.output_order == "time" and fw.direction == "forward"
    y = np.concatenate([fw(ref["x_float"])[0], bw(ref["x_float"])[0]], axis=2)
    np.testing.assert_allclose(y, ref["y"], rtol=0, atol=1e-6)


def test_rnn_and_gru_targets():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 3, 4))
    rnn = fusedrnn.RNN(rng.normal(size=(2, 6, 4)) * 0.5, rng.normal(size=(2, 6, 6)) * 0.5,
                       rng.normal(size=(2, 6)) * 0.3, direction="bidirectional")
    np.testing.assert_allclose(rnn.to("litert-float")(x)[0], rnn(x)[0], atol=1e-5)
    yh = rnn.to("litert-hybrid")(x)[0]
    assert 0 < np.abs(yh - rnn(x)[0]).max() < 0.1
    gru = fusedrnn.GRU(rng.normal(size=(2, 18, 4)) * 0.5, rng.normal(size=(2, 18, 6)) * 0.5,
                       rng.normal(size=(2, 18)) * 0.3, rng.normal(size=(2, 18)) * 0.3, direction="bidirectional")
    np.testing.assert_allclose(gru.to("litert-float")(x)[0], gru(x)[0], atol=1e-5)
    with pytest.raises(UnsupportedFeatureError, match="linear_before_reset"):
        fusedrnn.GRU(gru.W, gru.R, linear_before_reset=True, direction="bidirectional").to("litert-float")


def test_clear_errors():
    rng = np.random.default_rng(6)
    W, R = rng.normal(size=(1, 16, 3)), rng.normal(size=(1, 16, 4))
    x = rng.normal(size=(4, 2, 3))
    layer = fusedrnn.LSTM(W, R)
    with pytest.raises(UnsupportedFeatureError, match="sequence_lens"):
        layer.to("litert-float")(x, sequence_lens=[4, 2])
    with pytest.raises(UnsupportedFeatureError, match="clip"):
        fusedrnn.LSTM(W, R, clip=1.0).to("litert-float")
    with pytest.raises(UnsupportedFeatureError, match="input_forget"):
        fusedrnn.LSTM(W, R, coupling="input_forget").to("litert-hybrid")
    with pytest.raises(UnsupportedFeatureError, match="calibration"):
        layer.to("litert-int8x16")
    with pytest.raises(UnsupportedFeatureError, match="imported"):
        layer.to("litert-int8x16", calibration="tflite")
    with pytest.raises(UnsupportedFeatureError, match="custom_activations"):
        fusedrnn.LSTM(W, R, activations=["Sigmoid", "Relu", "Relu"]).to("litert-int8x16", calibration=x)
    with pytest.raises(FusedRNNError):
        fusedrnn.LSTM(W, R, activations=["Sigmoid", "Tanh", "Relu"]).to("litert-float")
    d = shared_dir("conformance", "tflite")
    with pytest.raises(AttributeValueError, match="op_index"):
        layer_from_tflite(fusedrnn.LSTM, d / "k2_lstm_float.tflite", 1)
    with pytest.raises(ConversionError, match="LSTM"):
        layer_from_tflite(fusedrnn.GRU, d / "k2_lstm_float.tflite", 0)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=300), cut=st.integers(0, 27000))
def test_reader_refuses_garbage_cleanly(data, cut):
    raw = (shared_dir("conformance", "tflite") / "k2_lstm_int8.tflite").read_bytes()
    for blob in (data, b"\0\0\0\0TFL3" + data, raw[:cut]):
        try:
            read_model(blob)
        except FusedRNNError:
            pass


@settings(max_examples=60, deadline=None)
@given(act=st.one_of(st.text(max_size=8), st.sampled_from(["TANH", "RELU", "NONE"])),
       clip=st.floats(allow_nan=True, allow_infinity=True))
def test_options_validation_fuzz(act, clip):
    try:
        o = LstmOptions.from_dict({"fused_activation_function": act, "cell_clip": clip})
    except AttributeValueError as e:
        assert "fused_activation_function" in str(e) or "cell_clip" in str(e)
    else:
        assert o.cell_clip >= 0 and np.isfinite(o.cell_clip)
