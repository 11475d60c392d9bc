"""``com.microsoft::DynamicQuantizeLSTM`` against onnxruntime (single-threaded), directly and inside models."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn
from fusedrnn.errors import AttributeValueError, DTypeError, ShapeError
from fusedrnn.ops import dynamic_quantize_lstm, ort_dynamic_uint8

ort = pytest.importorskip("onnxruntime")


def random_case(rng):
    T, B, I, H = (int(v) for v in (rng.integers(1, 8), rng.integers(1, 5), rng.integers(1, 20), rng.integers(1, 12)))
    D = int(rng.integers(1, 3))
    direction = "bidirectional" if D == 2 else str(rng.choice(["forward", "reverse"]))
    wdt = np.int8 if rng.random() < 0.5 else np.uint8
    # onnxruntime refuses per-column zero points for uint8 weights ("InputWeight point must be constant")
    per_col = bool(rng.random() < 0.5) and wdt == np.int8
    shape = (D, 4 * H) if per_col else (D,)

    def quantized(K):
        if wdt == np.int8:
            q = rng.integers(-127, 128, (D, K, 4 * H)).astype(np.int8)
            zp = np.zeros(shape, np.int8)
        else:
            q = rng.integers(0, 256, (D, K, 4 * H)).astype(np.uint8)
            zp = rng.integers(100, 156, shape).astype(np.uint8)
        return q, rng.uniform(0.001, 0.02, shape).astype(np.float32), zp

    Wq, ws, wz = quantized(I)
    Rq, rs, rz = quantized(H)
    arrays = {"X": rng.normal(size=(T, B, I)).astype(np.float32), "W": Wq, "R": Rq,
              "B": (0.1 * rng.normal(size=(D, 8 * H))).astype(np.float32),
              "h0": (0.5 * rng.normal(size=(D, B, H))).astype(np.float32),
              "c0": (0.5 * rng.normal(size=(D, B, H))).astype(np.float32),
              "P": (0.3 * rng.normal(size=(D, 3 * H))).astype(np.float32) if rng.random() < 0.5 else None,
              "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    attrs = {"hidden_size": H, "direction": direction}
    if rng.random() < 0.3:
        attrs["clip"] = float(np.float32(rng.uniform(0.5, 3)))  # as ONNX stores it
    return arrays, attrs


def model_of(arrays, attrs):
    names = ["X", "W", "R", "B", "", "h0", "c0", "P" if arrays["P"] is not None else "", "ws", "wz", "rs", "rz"]
    inits = [numpy_helper.from_array(arrays[n], n) for n in ("W", "R", "B", "ws", "wz", "rs", "rz", "P")
             if arrays[n] is not None]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h", "Y_c"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                             for n in ("X", "h0", "c0")],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
                              inits)
    opsets = [helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def ort_outputs(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # the h quantization block depends on the thread count
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("seed", range(24))
def test_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    a, attrs = random_case(rng)
    feeds = {"X": a["X"], "h0": a["h0"], "c0": a["c0"]}
    model = model_of(a, attrs)
    ref = ort_outputs(model, feeds)
    got = dynamic_quantize_lstm(a["X"], a["W"], a["R"], a["B"], None, a["h0"], a["c0"], a["P"], a["ws"], a["wz"],
                                a["rs"], a["rz"], **attrs)
    via_model = fusedrnn.onnx.load(model).run(feeds)
    for r, g, name in zip(ref, got, ("Y", "Y_h", "Y_c"), strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, r, rtol=0, atol=2e-6, err_msg=name)
        np.testing.assert_array_equal(via_model[name], g)


def test_quantization_is_visible():
    """The emulation is of the quantized operator, not of the float LSTM on dequantized weights."""
    rng = np.random.default_rng(99)
    a, attrs = random_case(rng)
    model = fusedrnn.onnx.load(model_of(a, attrs))
    feeds = {"X": a["X"], "h0": a["h0"], "c0": a["c0"]}
    native = model.run(feeds)["Y"]
    as_float = model.to("fp32").run(feeds)["Y"]  # float targets run the dequantized float LSTM
    assert np.max(np.abs(native - as_float)) > 1e-4


def test_uint8_block_quantization_matches_formula():
    v = np.array([[-1.0, 0.5], [2.0, 0.25]], np.float32)
    q, s = ort_dynamic_uint8(v)
    assert s == np.float32(3.0) / np.float32(255)
    z = np.rint(1.0 / s)
    np.testing.assert_array_equal(q + z, np.clip(np.rint(v / s) + z, 0, 255))
    q0, s0 = ort_dynamic_uint8(np.zeros((2, 2), np.float32))
    assert s0 == 1 and not q0.any()


def test_validation():
    rng = np.random.default_rng(5)
    a, attrs = random_case(rng)
    args = [a["X"], a["W"], a["R"], a["B"], None, a["h0"], a["c0"], a["P"], a["ws"], a["wz"], a["rs"], a["rz"]]
    bad = list(args)
    bad[1] = a["W"].astype(np.int16)
    with pytest.raises(DTypeError, match="W: expected int8 or uint8"):
        dynamic_quantize_lstm(*bad, **attrs)
    bad = list(args)
    bad[8] = np.ones(7, np.float32)
    with pytest.raises(ShapeError, match="W_scale"):
        dynamic_quantize_lstm(*bad, **attrs)
    bad = list(args)
    bad[10] = -a["rs"]
    with pytest.raises(AttributeValueError, match="R_scale: expected finite positive"):
        dynamic_quantize_lstm(*bad, **attrs)
    with pytest.raises(AttributeValueError, match="layout"):
        dynamic_quantize_lstm(*args, layout=1, **attrs)
    bad = list(args)
    bad[0] = a["X"].astype(np.float64)
    with pytest.raises(DTypeError, match="float32"):
        dynamic_quantize_lstm(*bad, **attrs)
