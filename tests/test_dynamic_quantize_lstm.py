"""``com.microsoft::DynamicQuantizeLSTM`` against onnxruntime (single-threaded), directly and inside models: random
models with uneven ``sequence_lens``, Y present or omitted, T up to 200, both engines, and every float target."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn
from fusedrnn.cells import ort_qlstm
from fusedrnn.cells.dispatch import set_engine
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


def model_of(arrays, attrs, lens=False, has_y=True):
    names = ["X", "W", "R", "B", "L" if lens else "", "h0", "c0", "P" if arrays["P"] is not None else "", "ws", "wz",
             "rs", "rz"]
    inits = [numpy_helper.from_array(arrays[n], n) for n in ("W", "R", "B", "ws", "wz", "rs", "rz", "P")
             if arrays[n] is not None]
    outs = ["Y" if has_y else "", "Y_h", "Y_c"]
    node = helper.make_node("DynamicQuantizeLSTM", names, outs, domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("X", "h0", "c0")]
    if lens:
        inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, None))
    graph = helper.make_graph([node], "dq", inputs,
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs if n], inits)
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


def long_case(seed):
    """A random case with T up to 200, uneven sequence lengths (some rows finish early) and Y present or
    omitted (with Y omitted no row has length 0: onnxruntime then feeds back an uninitialized buffer)."""
    rng = np.random.default_rng(1000 + seed)
    a, attrs = random_case(rng)
    T = int(rng.integers(2, 201))
    D, B = a["h0"].shape[:2]
    a["X"] = rng.normal(size=(T, B, a["X"].shape[2])).astype(np.float32)
    has_y = bool(seed % 2)
    lens = rng.integers(0 if has_y else 1, T + 1, B).astype(np.int32)
    return a, attrs, lens, has_y


@pytest.mark.parametrize("seed", range(12))
def test_long_uneven_sequences_match_onnxruntime(seed):
    """Row semantics of onnxruntime (h of finished rows stays in the quantized block), float32 arithmetic and
    MLAS's activations: long sequences stay within 1e-5 of onnxruntime (no requantized code flips)."""
    a, attrs, lens, has_y = long_case(seed)
    feeds = {"X": a["X"], "h0": a["h0"], "c0": a["c0"], "L": lens}
    model = model_of(a, attrs, lens=True, has_y=has_y)
    ref = ort_outputs(model, feeds)
    got = dynamic_quantize_lstm(a["X"], a["W"], a["R"], a["B"], lens, a["h0"], a["c0"], a["P"], a["ws"], a["wz"],
                                a["rs"], a["rz"], has_y=has_y, **attrs)
    names = ("Y", "Y_h", "Y_c") if has_y else ("Y_h", "Y_c")
    for r, g, name in zip(ref, got if has_y else got[1:], names, strict=True):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5, err_msg=name)
    via_model = fusedrnn.onnx.load(model).run(feeds)  # the node runner knows whether Y is omitted
    for r, name in zip(ref, names, strict=True):
        np.testing.assert_allclose(via_model[name], r, rtol=0, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("seed", range(4))
def test_numpy_engine_equals_compiled(seed):
    a, attrs, lens, has_y = long_case(seed)
    a["X"] = a["X"][:40]
    lens = np.minimum(lens, 40)
    args = (a["X"], a["W"], a["R"], a["B"], lens, a["h0"], a["c0"], a["P"], a["ws"], a["wz"], a["rs"], a["rz"])
    set_engine("numpy")
    try:
        slow = dynamic_quantize_lstm(*args, has_y=has_y, **attrs)
    finally:
        set_engine("auto")
    fast = dynamic_quantize_lstm(*args, has_y=has_y, **attrs)
    for s_, f in zip(slow, fast, strict=True):
        np.testing.assert_allclose(s_, f, rtol=0, atol=1e-6)


def test_threaded_session_blocks():
    """With several intra-op threads onnxruntime quantizes h per block of rows; intra_op_threads reproduces it."""
    rng = np.random.default_rng(7)
    a, attrs = random_case(rng)
    B = 6
    a["X"] = rng.normal(size=(9, B, a["X"].shape[2])).astype(np.float32)
    D, _, H = a["h0"].shape
    a["h0"] = (0.5 * rng.normal(size=(D, B, H))).astype(np.float32)
    a["c0"] = (0.5 * rng.normal(size=(D, B, H))).astype(np.float32)
    model = model_of(a, attrs)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"X": a["X"], "h0": a["h0"], "c0": a["c0"]})
    got = dynamic_quantize_lstm(a["X"], a["W"], a["R"], a["B"], None, a["h0"], a["c0"], a["P"], a["ws"], a["wz"],
                                a["rs"], a["rz"], intra_op_threads=2, **attrs)
    for r, g in zip(ref, got, strict=True):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5)


def test_mlas_activations_match_onnxruntime():
    """The activations equal onnxruntime's Sigmoid / Tanh operators (MLAS) bit for bit."""
    x = np.concatenate([np.linspace(-25, 25, 20001, dtype=np.float32),
                        np.random.default_rng(3).normal(scale=4, size=20000).astype(np.float32)])
    for op, ours in (("Sigmoid", ort_qlstm.mlas_logistic), ("Tanh", ort_qlstm.mlas_tanh)):
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "a",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        ref = ort_outputs(model, {"x": x})[0]
        np.testing.assert_array_equal(ours(x), ref, err_msg=op)


@pytest.mark.parametrize("target", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("states", [True, False])
def test_runs_on_float_targets(target, states):
    """Every emulated target runs the float LSTM the node describes (weights dequantized), with or without
    initial states: Y_h and Y_c have the node's shapes."""
    rng = np.random.default_rng(11)
    a, attrs = random_case(rng)
    if not states:
        a["h0"] = a["c0"] = None
    names = ["X", "W", "R", "B", "", "h0" if states else "", "c0" if states else "", "", "ws", "wz", "rs", "rz"]
    inits = [numpy_helper.from_array(a[n], n) for n in ("W", "R", "B", "ws", "wz", "rs", "rz")]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h", "Y_c"], domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in (("X", "h0", "c0") if states
                                                                                  else ("X",))]
    graph = helper.make_graph([node], "dq", inputs, [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                                     for n in ("Y", "Y_h", "Y_c")], inits)
    opsets = [helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    feeds = {"X": a["X"], **({"h0": a["h0"], "c0": a["c0"]} if states else {})}
    out = fusedrnn.onnx.load(model).to(target).run(feeds)
    T, B, _ = a["X"].shape
    D = 2 if attrs["direction"] == "bidirectional" else 1
    H = attrs["hidden_size"]
    assert out["Y"].shape == (T, D, B, H)
    assert out["Y_h"].shape == out["Y_c"].shape == (D, B, H)
    last = {"forward": [-1], "reverse": [0], "bidirectional": [-1, 0]}[attrs["direction"]]
    for d, t in enumerate(last):  # Y_h is each direction's last step
        np.testing.assert_array_equal(out["Y_h"][d], out["Y"][t, d])
    native = fusedrnn.onnx.load(model).run(feeds)
    assert np.max(np.abs(out["Y"] - native["Y"])) < 0.2  # the same LSTM up to quantization and rounding


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


@pytest.mark.parametrize("target", ["mli2-sa8", "litert-int8x16", "zdnn", "quark_corrected"])
def test_runs_on_quantized_targets(target):
    """A quantized target calibrates the node's float LSTM (weights dequantized) and runs it."""
    rng = np.random.default_rng(11)
    a, attrs = random_case(rng)
    model = model_of(a, attrs)
    feeds = {"X": a["X"], "h0": a["h0"], "c0": a["c0"]}
    out = fusedrnn.onnx.load(model).to(target, calibration=feeds).run(feeds)
    native = fusedrnn.onnx.load(model).run(feeds)
    for name in ("Y", "Y_h", "Y_c"):
        assert out[name].shape == native[name].shape
    assert np.max(np.abs(out["Y"] - native["Y"])) < 0.25


# ---- onnxruntime's own tests (onnxruntime/test/contrib_ops/quantize_lstm_op_test.cc), their case matrix extracted
# by scripts/extract_ort_dqlstm_cases.py: one step on Gaussian data, weights quantized with ReduceRange (int8 codes
# in [-64, 64]) and symmetrically when per channel, compared with onnxruntime's float LSTM of the dequantized
# inputs (X and initial_h quantized to uint8 as the operator does) -----------------------------------------------

ORT_CASES = json.loads((Path(__file__).parent / "data" / "ort" / "dynamic_quantize_lstm_cases.json").read_text())


def _ort_quant_params(v: np.ndarray, qtype, symmetric: bool):
    """onnxruntime's GetQuantizationParameter<qtype, ReduceRange=true, symmetric> of a float32 block."""
    lo, hi = np.float32(min(0.0, float(v.min()))), np.float32(max(0.0, float(v.max())))
    qmin, qmax = (-64, 64) if qtype == np.int8 else (0, 255)
    if qtype == np.int8 and symmetric:
        m = max(hi, -lo)
        return (m / np.float32(qmax) if m > 0 else np.float32(1)), 0
    s = np.float32(1) if hi == lo else (hi - lo) / np.float32(qmax - qmin)
    return s, int(np.rint(np.clip(np.float32(qmin) - lo / s, qmin, qmax)))


def _ort_quantize_weights(w: np.ndarray, qtype, per_channel: bool):
    """[D, 4H, K] float weights -> ([D, K, 4H] codes, scales, zero points) as the test's QuantizeWeight."""
    D, rows, _ = w.shape
    blocks = w.reshape(D * rows, -1) if per_channel else w.reshape(D, -1)
    info = np.iinfo(qtype)
    codes, scales, zps = [], [], []
    for block in blocks:
        s, z = _ort_quant_params(block, qtype, per_channel)
        codes.append(np.clip(np.rint(block / s) + z, info.min, info.max).astype(qtype))
        scales.append(s)
        zps.append(z)
    q = np.stack(codes).reshape(w.shape).transpose(0, 2, 1).copy()
    shape = (D, rows) if per_channel else (D,)
    return q, np.array(scales, np.float32).reshape(shape), np.array(zps, qtype).reshape(shape)


def _qdq_uint8(v: np.ndarray) -> np.ndarray:
    q, s = ort_dynamic_uint8(v)
    return (q * np.float64(s)).astype(np.float32)


def _ort_case_ids():
    for test, calls in ORT_CASES["tests"].items():
        for k, call in enumerate(calls):
            for v, variant in enumerate(ORT_CASES["variants"]):
                yield pytest.param(call, variant, id=f"{test}-{k}-{v}")


@pytest.mark.parametrize("call, variant", list(_ort_case_ids()))
def test_onnxruntime_kernel_tests(call, variant):
    rng = np.random.default_rng(zlib.crc32(json.dumps([call, variant], sort_keys=True).encode()))
    mean, std = ORT_CASES["gaussian"]
    T, B, I, H = ORT_CASES["seq_length"], call["batch_size"], call["input_size"], call["hidden_size"]
    D = 2 if variant["direction"] == "bidirectional" else 1
    qtype = np.int8 if call["weight_type"] == "int8" else np.uint8

    def gauss(*shape):
        return rng.normal(mean, std, shape).astype(np.float32)

    X, W, R = gauss(T, B, I), gauss(D, 4 * H, I), gauss(D, 4 * H, H)
    Bias = gauss(D, 8 * H) if variant["has_bias"] else None
    P = gauss(D, 3 * H) if variant["has_P"] else None
    h0, c0 = gauss(D, B, H), gauss(D, B, H)
    Wq, ws, wz = _ort_quantize_weights(W, qtype, call["per_channel"])
    Rq, rs, rz = _ort_quantize_weights(R, qtype, call["per_channel"])
    attrs = {"hidden_size": H, "direction": variant["direction"], "input_forget": 0,
             "activations": ["Sigmoid", "Tanh", "Tanh"] * D}
    got = dynamic_quantize_lstm(X, Wq, Rq, Bias, None, h0, c0, P, ws, wz, rs, rz, **attrs)

    # the operator itself in onnxruntime (weights as initializers or as inputs, as the variant says)
    named = {"X": X, "W": Wq, "R": Rq, "B": Bias, "h0": h0, "c0": c0, "P": P, "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    consts = {"W": variant["initializer_W"], "R": variant["initializer_R"]}
    names = ["X", "W", "R", "B" if Bias is not None else "", "", "h0", "c0", "P" if P is not None else "",
             "ws", "wz", "rs", "rz"]
    feeds = {n: named[n] for n in names if n and not (consts.get(n) or n in ("B", "P", "ws", "wz", "rs", "rz"))}
    inits = [numpy_helper.from_array(named[n], n) for n in names if n and n not in feeds]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h", "Y_c"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                           a.shape) for n, a in feeds.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
                              inits)
    opsets = [helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)]
    native = ort_outputs(helper.make_model(graph, opset_imports=opsets, ir_version=8), feeds)
    for g, r in zip(got, native, strict=True):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5)

    # the test's expectation: onnxruntime's float LSTM (opset 7) on the dequantized inputs
    def dequantized(q, s, z):
        z = z.reshape(D, -1, 1).astype(np.float32)
        return ((q.transpose(0, 2, 1).astype(np.float32) - z) * s.reshape(D, -1, 1)).astype(np.float32)

    fl = {"X": _qdq_uint8(X), "W": dequantized(Wq, ws, wz), "R": dequantized(Rq, rs, rz), "B": Bias,
          "h0": np.stack([_qdq_uint8(h0[d]) for d in range(D)]), "c0": c0, "P": P}
    fnames = ["X", "W", "R", "B" if Bias is not None else "", "", "h0", "c0", "P" if P is not None else ""]
    fnode = helper.make_node("LSTM", fnames, ["Y", "Y_h", "Y_c"], **attrs)
    fgraph = helper.make_graph([fnode], "f", [], [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                                  for n in ("Y", "Y_h", "Y_c")],
                               [numpy_helper.from_array(fl[n], n) for n in fnames if n])
    expected = ort_outputs(helper.make_model(fgraph, opset_imports=[helper.make_opsetid("", 7)], ir_version=8), {})
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
