"""fusedrnn.frontends.onnx (``fusedrnn.onnx``): whole models and single recurrent nodes against onnxruntime."""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn.example as ex
from fusedrnn.errors import (
    AttributeValueError,
    DTypeError,
    FusedRNNError,
    InputError,
    ShapeError,
    UnknownTargetError,
)
from fusedrnn.frontends import onnx as fonnx

ort = pytest.importorskip("onnxruntime")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
SLOTS = {
    "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
    "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
}
OUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}


def ort_run(model: onnx.ModelProto, feeds: dict) -> dict:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def single_node(op, rng, *, T=5, B=3, I=4, H=6, direction="forward", present=(), outputs=None, weights_as="init",
                seq_lens=None, **attrs):
    """A single-node model: X and every slot in ``present`` are given, the others are "" (trailing ones
    omitted). ``weights_as`` puts W/R/B/P in initializers ("init") or graph inputs ("input")."""
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    shapes = {"X": (T, B, I), "W": (D, G * H, I), "R": (D, G * H, H), "B": (D, 2 * G * H), "sequence_lens": (B,),
              "initial_h": (D, B, H), "initial_c": (D, B, H), "P": (D, 3 * H)}
    given = {"X", "W", "R", *present}
    arrays = {}
    for s in SLOTS[op]:
        if s not in given:
            continue
        if s == "sequence_lens":
            arrays[s] = np.asarray(seq_lens if seq_lens is not None else rng.integers(1, T + 1, B), np.int32)
        else:
            arrays[s] = rng.uniform(-1, 1, shapes[s]).astype(np.float32)
    node_inputs = [s if s in arrays else "" for s in SLOTS[op]]
    while node_inputs[-1] == "":
        node_inputs.pop()
    outputs = outputs or OUTS[op]
    node = helper.make_node(op, node_inputs, outputs, name=f"the_{op.lower()}", hidden_size=H, direction=direction,
                            **attrs)
    const = {"W", "R", "B", "P"} if weights_as == "init" else set()
    inits = [numpy_helper.from_array(arrays[s], s) for s in arrays if s in const]
    elem = {"sequence_lens": TensorProto.INT32}
    inputs = [helper.make_tensor_value_info(s, elem.get(s, TensorProto.FLOAT), list(arrays[s].shape))
              for s in arrays if s not in const]
    out_shapes = {"Y": [T, D, B, H], "Y_h": [D, B, H], "Y_c": [D, B, H]}
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shapes[o]) for o in outputs if o]
    graph = helper.make_graph([node], f"single_{op}", inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    onnx.checker.check_model(model)
    feeds = {s: arrays[s] for s in arrays if s not in const}
    return model, feeds


def assert_matches_ort(model, feeds, atol=1e-5):
    want = ort_run(model, feeds)
    got = fonnx.load(model).run(feeds)
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=atol, err_msg=k)


# ---------------------------------------------------------------------------------------------------- example


@pytest.fixture(scope="module")
def example():
    x, y = ex.load_data()
    proto = onnx.load(ex.model_path())
    return proto, x, y, ort_run(proto, {"x": x})["logits"]


@pytest.mark.parametrize("target", [None, "fp32"])
def test_example_matches_onnxruntime(example, target):
    _, x, _, want = example
    got = fonnx.load(ex.model_path(), target=target).run({"x": x})
    assert list(got) == ["logits"]
    assert got["logits"].dtype == np.float32 and got["logits"].shape == want.shape
    np.testing.assert_allclose(got["logits"], want, rtol=0, atol=1e-5)


def test_model_description():
    m = fonnx.load(ex.model_path())
    assert [(i.name, i.shape, i.dtype) for i in m.inputs] == [("x", ("batch", 8, 8), np.dtype(np.float32))]
    assert [(o.name, o.shape, o.dtype) for o in m.outputs] == [("logits", ("batch", 10), np.dtype(np.float32))]
    assert m.recurrent_nodes == ["lstm"]
    assert m.target is None
    assert "x [batch, 8, 8] float32" in repr(m)


def test_fp16_differs_but_stays_close(example):
    _, x, _, _ = example
    m = fonnx.load(ex.model_path())
    ref = m.to("fp32").run({"x": x})["logits"]
    m16 = m.to("fp16")
    assert m16.target.name == "fp16" and m.target is None  # to() returns a new model
    half = m16.run({"x": x})["logits"]
    bf = m.to("bf16").run({"x": x})["logits"]
    d16, dbf = np.abs(half - ref).max(), np.abs(bf - ref).max()
    assert 1e-5 < d16 < 0.1, d16
    assert d16 < dbf < 0.5, dbf  # bfloat16 keeps 8 significand bits to float16's 11
    assert np.mean(half.argmax(1) == ref.argmax(1)) >= 0.98
    # fp64 computes the LSTM in float64 and rounds its outputs to the model's float32
    d64 = np.abs(m.to("fp64").run({"x": x})["logits"] - ref).max()
    assert d64 < 1e-5


def test_unknown_target():
    m = fonnx.load(ex.model_path())
    with pytest.raises(UnknownTargetError, match="nope"):
        m.to("nope")
    with pytest.raises(UnknownTargetError):
        fonnx.load(ex.model_path(), target="nope")


def test_load_sources_and_proto_untouched():
    proto = onnx.load(ex.model_path())
    before = proto.SerializeToString()
    x = ex.load_data()[0][:7]
    a = fonnx.load(proto).run({"x": x})["logits"]
    b = fonnx.load(before).run({"x": x})["logits"]
    c = fonnx.load(str(ex.model_path())).run({"x": x})["logits"]
    assert proto.SerializeToString() == before  # the omitted LSTM output "" is renamed in a copy only
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        fonnx.load(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 this is not a model")
    with pytest.raises(FusedRNNError):
        fonnx.load(bad)
    with pytest.raises(DTypeError):
        fonnx.load(42)


def test_feed_errors():
    m = fonnx.load(ex.model_path())
    x = ex.load_data()[0][:2]
    with pytest.raises(InputError, match="missing.*'x'") as ei:
        m.run({})
    assert isinstance(ei.value, ValueError) and not isinstance(ei.value, AttributeValueError)
    with pytest.raises(InputError, match="unknown.*'z'"):
        m.run({"x": x, "z": x})
    with pytest.raises(InputError, match="missing.*'x'.*unknown.*'y'"):
        m.run({"y": x})
    with pytest.raises(DTypeError, match="x: expected dtype float32, got float64"):
        m.run({"x": x.astype(np.float64)})
    with pytest.raises(ShapeError, match="x: expected shape"):
        m.run({"x": x[:, :, :4]})
    with pytest.raises(AttributeValueError, match="outputs"):
        m.run({"x": x}, outputs=["nope"])


# ---------------------------------------------------------------------------------------------- single nodes


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize(
    "present",
    [(), ("B",), ("initial_h",), ("B", "initial_c"), ("initial_h", "initial_c", "P"), ("sequence_lens", "initial_c"),
     ("B", "sequence_lens", "initial_h", "initial_c", "P")],
    ids=lambda p: "+".join(p) or "XWR",
)
def test_lstm_node_matches_onnxruntime(direction, present):
    rng = np.random.default_rng(zlib.crc32(repr((direction, present)).encode()))
    model, feeds = single_node("LSTM", rng, direction=direction, present=present)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_node_weights_as_inputs_and_omitted_outputs(direction):
    rng = np.random.default_rng(7)
    model, feeds = single_node("LSTM", rng, direction=direction, present=("B", "initial_c"), weights_as="input",
                               outputs=["", "Y_h", ""])
    assert set(feeds) == {"X", "W", "R", "B", "initial_c"}
    assert_matches_ort(model, feeds)


def test_lstm_node_attributes():
    rng = np.random.default_rng(3)
    model, feeds = single_node("LSTM", rng, direction="bidirectional", present=("B", "initial_h"), clip=0.7,
                               input_forget=1, activations=["HardSigmoid", "LeakyRelu", "Tanh"] * 2,
                               activation_alpha=[0.3, 0.05, 0.25, 0.02], activation_beta=[0.45, 0.55])
    assert_matches_ort(model, feeds)


def test_missing_hidden_size_is_taken_from_R():
    rng = np.random.default_rng(11)
    model, feeds = single_node("LSTM", rng, direction="bidirectional", present=("B",))
    want = ort_run(model, feeds)  # onnxruntime needs hidden_size
    node = model.graph.node[0]
    keep = [a for a in node.attribute if a.name != "hidden_size"]
    del node.attribute[:]
    node.attribute.extend(keep)
    got = fonnx.load(model).run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("GRU", {}),
    ("GRU", {"linear_before_reset": 1}),
    ("RNN", {}),
    ("RNN", {"activations": ["Relu", "Tanh"]}),
])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_rnn_nodes_match_onnxruntime(op, attrs, direction):
    if op == "RNN" and "activations" in attrs and direction == "forward":
        attrs = {"activations": attrs["activations"][:1]}
    rng = np.random.default_rng(5)
    model, feeds = single_node(op, rng, direction=direction, present=("B", "initial_h"), **attrs)
    assert_matches_ort(model, feeds)


def test_omitted_output_does_not_leak_into_optional_inputs():
    """LSTM 1 omits Y (""); LSTM 2 omits B (""). onnx.reference alone would feed LSTM 1's Y to LSTM 2 as B."""
    rng = np.random.default_rng(2)
    T, B, I, H = 4, 2, 3, 5
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(a, n) for n, a in
             [("W1", f(1, 4 * H, I)), ("R1", f(1, 4 * H, H)), ("W2", f(1, 4 * H, I)), ("R2", f(1, 4 * H, H))]]
    nodes = [
        helper.make_node("LSTM", ["x", "W1", "R1"], ["", "h1"], hidden_size=H),
        helper.make_node("LSTM", ["x", "W2", "R2", "", "", "h1"], ["y2", "h2"], hidden_size=H),
    ]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, I])],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, [T, 1, B, H]),
                               helper.make_tensor_value_info("h2", TensorProto.FLOAT, [1, B, H])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    assert_matches_ort(model, {"x": f(T, B, I)})


def test_node_errors_name_the_node():
    rng = np.random.default_rng(1)
    model, feeds = single_node("LSTM", rng, activations=["Sigmoid", "Tanh", "NoSuchFunction"])
    with pytest.raises(AttributeValueError, match="node 'the_lstm' \\(LSTM\\):.*NoSuchFunction"):
        fonnx.load(model).run(feeds)


def test_node_attributes_parsing():
    R = np.zeros((2, 24, 6), np.float32)
    got = fonnx.node_attributes(
        {"direction": b"bidirectional", "activations": [b"Sigmoid", b"Tanh", b"Tanh"] * 2, "clip": np.float32(2.5),
         "activation_alpha": [], "hidden_size": None, "layout": 0},
        R,
    )
    assert got == {"direction": "bidirectional", "activations": ["Sigmoid", "Tanh", "Tanh"] * 2, "clip": 2.5,
                   "layout": 0, "hidden_size": 6}
    assert type(got["clip"]) is float
    with pytest.raises(AttributeValueError, match="dtype: not an ONNX attribute"):
        fonnx.node_attributes({"dtype": "float64"}, R)


@pytest.mark.parametrize("opset, ir_version", [(7, 4), (14, 8), (22, 10)])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("executor", ["reference", "auto"])
def test_opsets_7_14_22(op, opset, ir_version, executor):
    """The recurrent operators' versions in use (7, 14, 22) run the same on both executors."""
    rng = np.random.default_rng(opset)
    present = ("B", "initial_h") + (("initial_c",) if op == "LSTM" else ())
    model, feeds = single_node(op, rng, direction="bidirectional", present=present)
    model.opset_import[0].version = opset
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    want = ort_run(model, feeds)
    got = fonnx.load(model, executor=executor).run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5, err_msg=k)
