"""ExtendedLSTM inside ONNX models: run_model, the legacy VitisLSTM name, conversion from float LSTMs, the
onnxruntime-extensions route, and the quark targets."""

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn
import fusedrnn.quark as quark
from fusedrnn.targets.quark import ort_extensions

H, I, T = 6, 5, 7


def _layer(rng, direction="bidirectional", cls=fusedrnn.LSTM):
    D = 2 if direction == "bidirectional" else 1
    G = {fusedrnn.LSTM: 4, fusedrnn.GRU: 3}[cls]
    return cls(rng.normal(size=(D, G * H, I)) * 0.5, rng.normal(size=(D, G * H, H)) * 0.4,
               rng.normal(size=(D, G * H)) * 0.2, rng.normal(size=(D, G * H)) * 0.2, direction=direction,
               merge="stack")


def _lstm_model(rng, direction="bidirectional", extra_attrs=None):
    """A float model: X -> LSTM (Y only) -> Relu -> out, weights as initializers."""
    D = 2 if direction == "bidirectional" else 1
    W = (rng.normal(size=(D, 4 * H, I)) * 0.5).astype(np.float32)
    R = (rng.normal(size=(D, 4 * H, H)) * 0.4).astype(np.float32)
    B = (rng.normal(size=(D, 8 * H)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], hidden_size=H, direction=direction,
                              **(extra_attrs or {})),
             helper.make_node("Relu", ["Y"], ["out"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", 1, I])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), (W, R, B)


def test_converted_layer_runs_identically_in_run_model():
    rng = np.random.default_rng(1)
    layer = _layer(rng)
    x = rng.normal(size=(T, 3, I)).astype(np.float32)
    conv = quark.convert(layer, x)
    assert conv.attributes["y_zero_point"] == 32768 and conv.report.sequences == 3
    assert conv.report.max_error_lsb < 8 and "calibration sequence" in str(conv.report)
    node = [n for n in conv.model.graph.node if n.op_type == "ExtendedLSTM"][0]
    assert node.domain == "com.amd.quark"
    W, R, B = (conv.weights[k] for k in "WRB")
    for b in range(3):
        out = quark.run_model(conv.model, {"X": x[:, b: b + 1]})
        y = quark.extended_lstm(x[:, b: b + 1], W, R, B, hidden_size=H, **conv.attributes)
        np.testing.assert_array_equal(out["Y"].view(np.uint32), y.view(np.uint32))
    # the model's weights are uint16 initializers behind DequantizeLinear, as Quark leaves them
    kinds = {numpy_helper.to_array(i).dtype for i in conv.model.graph.initializer}
    assert np.dtype(np.uint16) in kinds


def test_vitis_lstm_legacy_name_and_corrected_mode():
    rng = np.random.default_rng(2)
    conv = quark.convert(_layer(rng), rng.normal(size=(T, 1, I)))
    x = rng.normal(size=(T, 1, I)).astype(np.float32)
    y = quark.run_model(conv.model, {"X": x})["Y"]
    legacy = onnx.ModelProto()
    legacy.CopyFrom(conv.model)
    for n in legacy.graph.node:
        if n.op_type == "ExtendedLSTM":
            n.op_type, n.domain = "VitisLSTM", "com.vai.quantize"
    legacy.opset_import.append(helper.make_opsetid("com.vai.quantize", 1))
    np.testing.assert_array_equal(quark.run_model(legacy, {"X": x})["Y"], y)
    yc = quark.run_model(conv.model, {"X": x}, mode="corrected")["Y"]
    assert np.abs(yc - y).max() <= 2 * conv.attributes["y_scale"]


def test_convert_onnx_model_keeps_the_rest_of_the_graph():
    rng = np.random.default_rng(3)
    model, (W, R, B) = _lstm_model(rng)
    x = rng.normal(size=(T, 1, I)).astype(np.float32)
    conv = quark.convert(model, x)
    ops = [n.op_type for n in conv.model.graph.node]
    assert "LSTM" not in ops and "ExtendedLSTM" in ops and ops[-1] == "Relu"
    out = quark.run_model(conv.model, {"X": x})["out"]
    y = quark.extended_lstm(x, W, R, B, hidden_size=H, **conv.attributes)
    np.testing.assert_array_equal(out, np.maximum(y, 0))


@pytest.mark.parametrize("bad", [{"direction": "forward"}, {"extra_attrs": {"clip": 1.0}}])
def test_convert_rejects_what_the_op_cannot_express(bad):
    rng = np.random.default_rng(4)
    model, _ = _lstm_model(rng, **bad)
    with pytest.raises(fusedrnn.UnsupportedFeatureError):
        quark.convert(model, rng.normal(size=(T, 1, I)))


def test_run_model_errors():
    rng = np.random.default_rng(5)
    conv = quark.convert(_layer(rng), rng.normal(size=(T, 1, I)))
    with pytest.raises(fusedrnn.InputError, match="missing"):
        quark.run_model(conv.model, {})
    broken = onnx.ModelProto()
    broken.CopyFrom(conv.model)
    node = [n for n in broken.graph.node if n.op_type == "ExtendedLSTM"][0]
    keep = [a for a in node.attribute if a.name != "y_scale"]
    del node.attribute[:]
    node.attribute.extend(keep)
    with pytest.raises(fusedrnn.AttributeValueError, match="y_scale"):
        quark.run_model(broken, {"X": rng.normal(size=(T, 1, I)).astype(np.float32)})


def test_quark_target_runs_the_faithful_kernel_per_sequence():
    rng = np.random.default_rng(6)
    layer = _layer(rng)
    x = rng.normal(size=(T, 3, I)).astype(np.float32)
    emulated = layer.to("quark", calibration=x)
    y, (h, c) = emulated(x)
    conv = quark.convert(layer, x)  # the same calibration
    W, R, B = (conv.weights[k] for k in "WRB")
    for b in range(3):
        ref = quark.extended_lstm(x[:, b: b + 1], W, R, B, hidden_size=H, **conv.attributes)
        np.testing.assert_array_equal(y[:, :, b: b + 1], ref)
        np.testing.assert_array_equal(h[0, b], ref[-1, 0, 0])
        np.testing.assert_array_equal(h[1, b], ref[0, 1, 0])
    assert c.shape == (2, 3, H)
    assert fusedrnn.targets.get("quark").summary()["bit_exact"] is True
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="zero states"):
        emulated(x, (np.ones((2, 3, H)), np.zeros((2, 3, H))))


def test_quark_targets_refuse_what_they_cannot_express():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(T, 2, I))
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="bidirectional"):
        _layer(rng, "forward").to("quark", calibration=x)
    with pytest.raises(fusedrnn.UnsupportedFeatureError):
        _layer(rng, cls=fusedrnn.GRU).to("quark", calibration=x)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="calibration"):
        _layer(rng).to("quark")


def test_quark_corrected_target_any_direction_close_to_float():
    rng = np.random.default_rng(8)
    for direction in ("forward", "reverse", "bidirectional"):
        layer = _layer(rng, direction)
        x = rng.normal(size=(T, 3, I))
        y, (h, c) = layer.to("quark_corrected", calibration=x)(x)
        y_ref, _ = layer.to("fp64")(x)
        assert np.abs(y - y_ref).max() < 2e-3, direction  # weight and input quantization included


ORT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import fusedrnn, fusedrnn.quark as quark
    from fusedrnn.targets.quark import ort_extensions
    quark.declare_ops()  # before any session registers the extensions library
    rng = np.random.default_rng(11)
    H, I, T = 6, 5, 9
    layer = fusedrnn.LSTM(rng.normal(size=(2, 4 * H, I)) * 0.5, rng.normal(size=(2, 4 * H, H)) * 0.4,
                          rng.normal(size=(2, 4 * H)) * 0.2, direction="bidirectional")
    conv = quark.convert(layer, rng.normal(size=(T, 2, I)))
    for mode in ("faithful", "corrected"):
        sess = quark.onnxruntime_session(conv.model, mode=mode)
        for _ in range(3):
            x = rng.normal(size=(T, 1, I)).astype(np.float32)
            (y_ort,) = sess.run(None, {"X": x})
            y = quark.run_model(conv.model, {"X": x}, mode=mode)["Y"]
            assert np.array_equal(y_ort.view(np.uint32), y.view(np.uint32)), (mode, np.abs(y_ort - y).max())
    # the attributes reach Python rounded to ~6 digits: the session must have used the exact ones
    assert ort_extensions._NODES and isinstance(ort_extensions._NODES[0][0]["x_scale"], float)
    print("OK")
""")


def test_onnxruntime_extensions_route_gives_identical_outputs():
    """A converted model in onnxruntime (our kernel as an onnxruntime-extensions Python op) and in run_model.
    In a subprocess: the extensions' op registry is process-global."""
    if not ort_extensions.available():
        pytest.skip("onnxruntime-extensions not installed (pip install onnxruntime-extensions)")
    r = subprocess.run([sys.executable, "-c", ORT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


@pytest.mark.skipif(not __import__("os").environ.get("FUSEDRNN_QUARK_ORT_LIBRARY"),
                    reason="set FUSEDRNN_QUARK_ORT_LIBRARY=1 to build Quark's whole ORT custom-op library (~1 min)")
def test_converted_model_in_onnxruntime_with_quarks_own_library(tmp_path):
    import onnxruntime as ort

    from fusedrnn.targets.quark import reference

    try:
        lib = reference.build_ort_library(tmp_path)
    except reference.OracleUnavailable as e:
        pytest.skip(str(e))
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(lib))
    rng = np.random.default_rng(12)
    for _ in range(10):
        layer = _layer(rng)
        conv = quark.convert(layer, rng.normal(size=(T, 2, I)), headroom=float(rng.choice([0.0, 0.25])))
        sess = ort.InferenceSession(conv.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        x = (rng.normal(size=(T, 1, I)) * 1.3).astype(np.float32)
        (y_ort,) = sess.run(None, {"X": x})
        np.testing.assert_array_equal(y_ort.view(np.uint32), quark.run_model(conv.model, {"X": x})["Y"].view(np.uint32))


def test_contrib_qdq_domain_models_run():
    """onnxruntime's quantizer writes 16-bit Q/DQ in the com.microsoft domain below opset 21."""
    rng = np.random.default_rng(13)
    conv = quark.convert(_layer(rng), rng.normal(size=(T, 1, I)))
    x = rng.normal(size=(T, 1, I)).astype(np.float32)
    contrib = onnx.ModelProto()
    contrib.CopyFrom(conv.model)
    for n in contrib.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            n.domain = "com.microsoft"
    contrib.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    np.testing.assert_array_equal(quark.run_model(contrib, {"X": x})["Y"], quark.run_model(conv.model, {"X": x})["Y"])
