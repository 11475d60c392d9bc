"""The onnxruntime executor of ``fusedrnn.onnx`` (``frontends/onnx_ort.py``): recurrent nodes rewritten into
onnxruntime-extensions Python ops that call back into fusedrnn.

Oracles: plain onnxruntime (outside oracle, within float tolerance) and the reference executor (bit for bit:
both executors hand the same inputs to the same fusedrnn code whenever the non-recurrent nodes are exact)."""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import fusedrnn.example as ex
from fusedrnn.errors import AttributeValueError, FusedRNNError, UnsupportedFeatureError
from fusedrnn.frontends import onnx as fonnx
from fusedrnn.frontends import onnx_ort

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime_extensions")
onnx_ort.declare_ops()  # at collection: before any test of the run opens an onnxruntime-extensions session

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
SLOTS = {"LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
         "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
         "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"]}
OUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
        np.dtype(np.float16): TensorProto.FLOAT16}


def make_model(nodes, inputs, outputs, inits=(), opset=14):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def ort_run(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def both(model, feeds, target=None, calibration=None):
    """(onnxruntime executor's outputs, reference executor's outputs)."""
    out = []
    for executor in ("onnxruntime", "reference"):
        m = fonnx.load(model, executor=executor)
        assert m.executor == executor
        if target is not None:
            m = m.to(target, calibration=calibration)
            assert m.executor == executor
        out.append(m.run(feeds))
    return out


def assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def assert_close(got: dict, want: dict, atol):
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k].astype(np.float64), want[k].astype(np.float64), rtol=0, atol=atol,
                                   err_msg=k)


def random_node_model(op, rng, *, dtype=np.float32, present, const, outputs, direction, layout, T=5, B=3, I=4,
                      H=6, prefix="Transpose"):
    """X (batch-major feed, transposed by a node when layout=0) -> one recurrent node; each slot in ``present``
    given, as an initializer when in ``const`` else a graph input; ``outputs`` are the node outputs kept
    (the others omitted as "")."""
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    shapes = {"W": (D, G * H, I), "R": (D, G * H, H), "B": (D, 2 * G * H), "P": (D, 3 * H),
              "initial_h": (B, D, H) if layout else (D, B, H), "initial_c": (B, D, H) if layout else (D, B, H)}
    arrays = {"X": rng.uniform(-1, 1, (B, T, I)).astype(dtype)}
    for s in SLOTS[op][1:]:
        if s in {"W", "R", *present}:
            arrays[s] = (rng.integers(0, T + 1, B).astype(np.int32) if s == "sequence_lens"
                         else rng.uniform(-0.6, 0.6, shapes[s]).astype(dtype))
    node_inputs = ["X" if layout else "X_tm"] + [s if s in arrays else "" for s in SLOTS[op][1:]]
    while node_inputs[-1] == "":
        node_inputs.pop()
    node_outputs = [o if o in outputs else "" for o in OUTS[op]]
    while node_outputs[-1] == "":
        node_outputs.pop()
    nodes = [] if layout else [helper.make_node("Transpose", ["X"], ["X_tm"], perm=[1, 0, 2])]
    nodes.append(helper.make_node(op, node_inputs, node_outputs, hidden_size=H, direction=direction,
                                  **({"layout": 1} if layout else {})))
    inits = [numpy_helper.from_array(arrays[s], s) for s in arrays if s in const and s != "X"]
    elem = lambda s: TensorProto.INT32 if s == "sequence_lens" else ELEM[np.dtype(dtype)]  # noqa: E731
    ins = [helper.make_tensor_value_info(s, elem(s), list(arrays[s].shape)) for s in arrays
           if s == "X" or s not in const]
    outs = [helper.make_tensor_value_info(o, ELEM[np.dtype(dtype)], None) for o in node_outputs if o]
    feeds = {s: arrays[s] for s in arrays if s == "X" or s not in const}
    return make_model(nodes, ins, outs, inits), feeds


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), op=st.sampled_from(sorted(GATES)),
       direction=st.sampled_from(["forward", "reverse", "bidirectional"]), layout=st.integers(0, 1),
       present=st.sets(st.sampled_from(["B", "sequence_lens", "initial_h", "initial_c", "P"])),
       const=st.sets(st.sampled_from(["W", "R", "B", "P", "initial_h"])),
       outputs=st.sets(st.sampled_from(["Y", "Y_h", "Y_c"]), min_size=1))
def test_random_nodes_match_reference_bit_for_bit_and_onnxruntime(seed, op, direction, layout, present, const,
                                                                 outputs):
    outputs = {o for o in outputs if o in OUTS[op]} or {"Y"}
    present = {p for p in present if p in SLOTS[op]}
    rng = np.random.default_rng(seed)
    model, feeds = random_node_model(op, rng, present=present, const=const, outputs=outputs,
                                     direction=direction, layout=layout)
    got, ref = both(model, feeds)
    assert_same(got, ref)
    if not layout:  # onnxruntime's CPU kernels refuse layout=1
        assert_close(got, ort_run(model, feeds), atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_element_types(dtype):
    """float16 (the Python-op bridge cannot return float16) and float64 nodes keep their element type."""
    rng = np.random.default_rng(3)
    model, feeds = random_node_model("LSTM", rng, dtype=dtype, present={"B", "initial_h"}, const={"W", "R", "B"},
                                     outputs={"Y", "Y_c"}, direction="bidirectional", layout=0)
    got, ref = both(model, feeds)
    assert_same(got, ref)
    assert got["Y"].dtype == dtype
    if dtype == np.float16:  # onnxruntime's LSTM has no float64 kernel
        assert_close(got, ort_run(model, feeds), atol=2e-3)


@pytest.mark.parametrize("target", ["fp16", "bf16", "fp64", "zdnn", "litert-float"])
def test_float_and_uncalibrated_targets_match_reference(target):
    rng = np.random.default_rng(zlib.crc32(target.encode()))
    model, feeds = random_node_model("LSTM", rng, present={"B", "initial_h", "initial_c"}, const={"W", "R", "B"},
                                     outputs={"Y", "Y_h"}, direction="bidirectional", layout=0)
    got, ref = both(model, feeds, target)
    assert_same(got, ref)


@pytest.mark.parametrize("target", ["mli2-sa8", "mli1-fx16", "quark"])
def test_calibrated_targets_match_reference(target):
    """Calibration recorded through the onnxruntime executor equals the reference executor's."""
    rng = np.random.default_rng(zlib.crc32(target.encode()))
    model, feeds = random_node_model("LSTM", rng, present={"B"}, const={"W", "R", "B"}, outputs={"Y", "Y_h"},
                                     direction="bidirectional", layout=0)
    calibration = [{"X": rng.uniform(-1, 1, feeds["X"].shape).astype(np.float32)} for _ in range(2)]
    got, ref = both(model, feeds, target, calibration)
    assert_same(got, ref)


def _lstm_inits(prefix, rng, I, H):
    return [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * H, n)).astype(np.float32), f"{prefix}{w}")
            for w, n in (("W", I), ("R", H))]


def control_flow_model(rng, T, B, I, H, cond_input=True):
    """Recurrent nodes in If branches, a Loop body (reading an outer value and outer initializers, carrying its
    state) and a Scan body (weights as body inputs of the Scan: computed per iteration)."""
    tensor = lambda name, shape=None: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    inits = _lstm_inits("then_", rng, I, H) + _lstm_inits("else_", rng, I, H) + _lstm_inits("loop_", rng, I, H)
    branch = {p: helper.make_graph([helper.make_node("LSTM", ["X", f"{p}_W", f"{p}_R"], ["", f"{p}_h"],
                                                     hidden_size=H)], p, [], [tensor(f"{p}_h")])
              for p in ("then", "else")}
    if_node = helper.make_node("If", ["cond"], ["if_h"], then_branch=branch["then"], else_branch=branch["else"])
    body = helper.make_graph(
        [helper.make_node("LSTM", ["X", "loop_W", "loop_R", "", "", "h_in"], ["", "h_out"], hidden_size=H)],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []), tensor("h_in")],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), tensor("h_out")])
    body.node.insert(0, helper.make_node("Identity", ["c"], ["c_out"]))
    body.output[0].name = "c_out"
    loop = helper.make_node("Loop", ["trips", "keep" if cond_input else "", "h0"], ["loop_h"], body=body)
    scan_body = helper.make_graph(
        [helper.make_node("LSTM", ["X", "sW", "sR"], ["", "s_h"], hidden_size=H)], "scan",
        [tensor("sW", [1, 4 * H, I]), tensor("sR", [1, 4 * H, H])], [tensor("s_h", [1, B, H])])
    scan = helper.make_node("Scan", ["Ws", "Rs"], ["scan_h"], body=scan_body, num_scan_inputs=2)
    model = make_model(
        [if_node, loop, scan],
        [tensor("X", [T, B, I]), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("trips", TensorProto.INT64, []), tensor("h0", [1, B, H]),
         tensor("Ws", [3, 1, 4 * H, I]), tensor("Rs", [3, 1, 4 * H, H])],
        [tensor("if_h"), tensor("loop_h"), tensor("scan_h")],
        [*inits, numpy_helper.from_array(np.array(True), "keep")], opset=14)
    return model


def control_flow_feeds(rng, cond, T, B, I, H):
    return {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32), "cond": np.array(cond),
            "trips": np.array(3, np.int64), "h0": rng.uniform(-1, 1, (1, B, H)).astype(np.float32),
            "Ws": rng.uniform(-0.5, 0.5, (3, 1, 4 * H, I)).astype(np.float32),
            "Rs": rng.uniform(-0.5, 0.5, (3, 1, 4 * H, H)).astype(np.float32)}


def test_recurrent_nodes_in_if_branches_run_partitioned():
    """A top-level If whose branches hold LSTMs (one branch with an If of its own holding an LSTM, all reading
    outer values and outer initializers) is cut branch by branch: no Python op, each branch a partition of its own, an
    Identity-only tail copied without a session. Both conditions give the reference executor's bits, and
    onnxruntime's outputs to float rounding."""
    from fusedrnn.frontends import onnx_partition

    rng = np.random.default_rng(8)
    T, B, I, H = 4, 2, 3, 5
    tensor = lambda name, shape=None: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    inits = _lstm_inits("a_", rng, I, H) + _lstm_inits("b_", rng, H, H) + _lstm_inits("c_", rng, I, H)
    inner = {"t": helper.make_graph([helper.make_node("LSTM", ["y1", "b_W", "b_R"], ["Yt"], hidden_size=H),
                                     helper.make_node("Squeeze", ["Yt", "axis1"], ["t_y"])], "t", [],
                                    [tensor("t_y")]),
             "e": helper.make_graph([helper.make_node("Mul", ["y1", "y1"], ["e_y"])], "e", [], [tensor("e_y")])}
    then = helper.make_graph(
        [helper.make_node("Mul", ["X", "two"], ["X2"]),
         helper.make_node("LSTM", ["X2", "a_W", "a_R"], ["Y1", "h1"], hidden_size=H),
         helper.make_node("Squeeze", ["Y1", "axis1"], ["y1"]),
         helper.make_node("If", ["cond2"], ["y2"], then_branch=inner["t"], else_branch=inner["e"]),
         helper.make_node("LSTM", ["y2", "b_W", "b_R"], ["", "then_h"], hidden_size=H)],
        "then", [], [tensor("then_h")])
    other = helper.make_graph([helper.make_node("LSTM", ["X", "c_W", "c_R"], ["", "else_h"], hidden_size=H)],
                              "else", [], [tensor("else_h")])
    nodes = [helper.make_node("If", ["cond"], ["h"], then_branch=then, else_branch=other),
             helper.make_node("Identity", ["h"], ["out"])]
    model = make_model(nodes, [tensor("X", [T, B, I]), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("cond2", TensorProto.BOOL, [])],
                       [tensor("out")],
                       [*inits, numpy_helper.from_array(np.float32(2), "two"),
                        numpy_helper.from_array(np.array([1], np.int64), "axis1")])
    m = fonnx.load(model, executor="onnxruntime")
    part = m._ort_graph().partition
    kinds = [type(s).__name__ for s in part.stages]
    assert kinds == ["_Switch", "_Copies"], kinds
    inside = [type(s).__name__ for s in part.stages[0].branches[True][0].stages]
    assert inside == ["_Segment", "_Recurrent", "_Segment", "_Switch", "_Recurrent"], inside
    assert isinstance(part, onnx_partition.Partition)
    X = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
    for cond, cond2 in ((True, True), (True, False), (False, True)):
        feeds = {"X": X, "cond": np.array(cond), "cond2": np.array(cond2)}
        got, ref = both(model, feeds)
        assert_same(got, ref)
        assert_close(got, ort_run(model, feeds), atol=2e-6)


def test_partitions_tolerate_stale_shapes_and_constant_conditions():
    """A value_info exported at batch 1 and run at batch 2 (onnxruntime tolerates it inside a whole model, and a
    segment must too: only the graph's own inputs keep their declared shapes), and an If whose condition is an
    initializer: both run partitioned and agree with onnxruntime."""
    rng = np.random.default_rng(12)
    T, B, I, H = 4, 2, 3, 5
    tensor = lambda name, shape=None: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    nodes = [helper.make_node("Relu", ["X"], ["xr"]),
             helper.make_node("LSTM", ["xr", "a_W", "a_R"], ["Y"], hidden_size=H),
             helper.make_node("Relu", ["Y"], ["out"])]
    model = make_model(nodes, [tensor("X", [T, "batch", I])], [tensor("out", [T, 1, "batch", H])],
                       _lstm_inits("a_", rng, I, H))
    model.graph.value_info.append(tensor("Y", [T, 1, 1, H]))  # stale: exported at batch 1
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
    m = fonnx.load(model, executor="onnxruntime")
    assert m._ort_graph().partition is not None
    assert_close(m.run(feeds), ort_run(model, feeds), atol=2e-6)
    for flag in (True, False):
        branch = {p: helper.make_graph([helper.make_node("LSTM", ["X", f"{p}_W", f"{p}_R"], ["", f"{p}_h"],
                                                         hidden_size=H)], p, [], [tensor(f"{p}_h")])
                  for p in ("t", "e")}
        model = make_model([helper.make_node("If", ["flag"], ["h"], then_branch=branch["t"],
                                             else_branch=branch["e"]),
                            helper.make_node("Relu", ["h"], ["out"])],
                           [tensor("X", [T, B, I])], [tensor("out")],
                           [*_lstm_inits("t_", rng, I, H), *_lstm_inits("e_", rng, I, H),
                            numpy_helper.from_array(np.array(flag), "flag")])
        feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
        m = fonnx.load(model, executor="onnxruntime")
        assert [type(s).__name__ for s in m._ort_graph().partition.stages] == ["_Switch", "_Segment"]
        assert_close(m.run(feeds), ort_run(model, feeds), atol=2e-6)


def test_nodes_inside_if_loop_and_scan_bodies():
    rng = np.random.default_rng(5)
    dims = 4, 2, 3, 5
    model = control_flow_model(rng, *dims)
    m = fonnx.load(model, executor="onnxruntime")
    assert len(m.recurrent_nodes) == 4
    for cond in (True, False):
        feeds = control_flow_feeds(rng, cond, *dims)
        got = m.run(feeds)
        assert_same(got, fonnx.load(model, executor="reference").run(feeds))
        assert_close(got, ort_run(model, feeds), atol=2e-6)


def test_loop_without_condition_input():
    """A Loop whose optional ``cond`` input is "" runs its trip count (onnx 1.23's reference Loop reads the
    missing condition as false and returns the initial state, so only onnxruntime serves as oracle here)."""
    rng = np.random.default_rng(12)
    dims = 4, 2, 3, 5
    model = control_flow_model(rng, *dims, cond_input=False)
    feeds = control_flow_feeds(rng, True, *dims)
    got = fonnx.load(model, executor="onnxruntime").run(feeds)
    assert_close(got, ort_run(model, feeds), atol=2e-6)
    assert np.max(np.abs(got["loop_h"] - feeds["h0"])) > 0.1


def test_weights_computed_by_other_nodes():
    rng = np.random.default_rng(6)
    T, B, I, H = 5, 2, 3, 4
    w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4 * H, I)).astype(np.float32), "w2d")
    r = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * H, H)).astype(np.float32), "R")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [helper.make_node("Unsqueeze", ["w2d", "axes"], ["W"]),
             helper.make_node("Mul", ["R", "scale"], ["R2"]),
             helper.make_node("LSTM", ["X", "W", "R2"], ["Y"], hidden_size=H)]
    model = make_model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I]),
                               helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])],
                       [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w, r, axes])
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32), "scale": np.array(0.7, np.float32)}
    got, ref = both(model, feeds)
    assert_same(got, ref)
    assert_close(got, ort_run(model, feeds), atol=2e-6)


def test_weights_built_from_constants_are_folded_before_the_cut():
    """An LSTM whose W, R and B an exporter builds from Constant weights (Slice, Concat, Unsqueeze: PyTorch's gate
    order to ONNX's) gets them as folded constants, immutable, so that they are packed once: no segment computes
    them on every call. A constant that is a graph output and a random node stay nodes; the outputs equal the
    reference executor's bit for bit."""
    from fusedrnn.cells.compiled import driver
    from fusedrnn.frontends import onnx_partition

    rng = np.random.default_rng(23)
    T, B, I, H = 5, 2, 3, 4

    def const(name, a):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(a), name + "_t"))

    w = rng.uniform(-0.5, 0.5, (4 * H, I)).astype(np.float32)
    r = rng.uniform(-0.5, 0.5, (4 * H, H)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (8 * H,)).astype(np.float32)
    nodes = [const("w", w), const("r", r), const("b", b), const("axes", np.array([0], np.int64)),
             const("mid", np.array([2 * H], np.int64)), const("end", np.array([4 * H], np.int64)),
             helper.make_node("Slice", ["w", "mid", "end", "axes"], ["w_hi"]),  # W's two halves of gates swapped
             helper.make_node("Slice", ["w", "axes", "mid", "axes"], ["w_lo"]),
             helper.make_node("Concat", ["w_hi", "w_lo"], ["w_cat"], axis=0),
             helper.make_node("Unsqueeze", ["w_cat", "axes"], ["W"]),
             helper.make_node("Unsqueeze", ["r", "axes"], ["R"]),
             helper.make_node("Unsqueeze", ["b", "axes"], ["Bias"]),
             const("shown", np.array([1.5], np.float32)),  # a graph output: not folded
             helper.make_node("RandomUniformLike", ["X"], ["noise"], low=0.0, high=0.0),  # never folded
             helper.make_node("Add", ["X", "noise"], ["Xn"]),
             helper.make_node("LSTM", ["Xn", "W", "R", "Bias"], ["Y", "Yh"], hidden_size=H)]
    model = make_model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
                       [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                        helper.make_tensor_value_info("shown", TensorProto.FLOAT, None)])
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
    m = fonnx.load(model, executor="onnxruntime")
    stages = m._ort_graph().partition.stages
    lstm = next(s for s in stages if isinstance(s, onnx_partition._Recurrent))
    assert [s[0] for s in lstm.slots[1:4]] == ["const"] * 3
    assert all(driver.immutable(s[1]) for s in lstm.slots[1:4])
    np.testing.assert_array_equal(lstm.slots[1][1][0], np.concatenate([w[2 * H:], w[: 2 * H]]))
    got, ref = both(model, feeds)
    assert_same(got, ref)
    assert_close(got, ort_run(model, feeds), atol=2e-6)
    assert got["shown"].tolist() == [1.5]


def test_constant_folding_leaves_quantization_and_random_nodes():
    """DequantizeLinear of constant int8 weights stays a node (onnxruntime fuses it into integer kernels; folding it
    to float weights changed a QDQ model's results), and so does a Dropout in training mode (a new mask each run);
    an Unsqueeze of a constant is folded."""
    from fusedrnn.frontends import onnx_partition

    w8 = numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), "w8")
    scale = numpy_helper.from_array(np.float32(0.1), "scale")
    ratio = numpy_helper.from_array(np.float32(0.5), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [helper.make_node("DequantizeLinear", ["w8", "scale"], ["w"]),
             helper.make_node("Dropout", ["w8f", "ratio", "train"], ["dropped"]),
             helper.make_node("Unsqueeze", ["w8f", "axes"], ["w8u"]),
             helper.make_node("MatMul", ["X", "w"], ["a"]),
             helper.make_node("MatMul", ["X", "dropped"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Mul", ["c", "w8u"], ["out"])]
    w8f = numpy_helper.from_array(np.ones((3, 4), np.float32), "w8f")
    model = make_model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                       [w8, scale, ratio, train, axes, w8f], opset=13)
    dtypes = {n: np.dtype(np.float32) for n in ("w", "dropped", "w8u", "a", "b", "c", "out", "X")}
    folded = onnx_partition._fold_constants(model, dtypes)
    assert [n.op_type for n in folded.graph.node] == ["DequantizeLinear", "Dropout", "MatMul", "MatMul", "Add", "Mul"]
    assert "w8u" in {t.name for t in folded.graph.initializer}


@pytest.mark.parametrize("wdt", [np.uint8, np.int8])
def test_dynamic_quantize_lstm_matches_reference(wdt):
    """com.microsoft::DynamicQuantizeLSTM, natively and on a float target, with X computed by a node."""
    rng = np.random.default_rng(7)
    T, B, I, H, D = 6, 2, 5, 4, 2
    lo, hi = (0, 256) if wdt == np.uint8 else (-127, 128)
    zp = (D,) if wdt == np.uint8 else (D, 4 * H)  # onnxruntime refuses per-column uint8 zero points
    w = {"W": rng.integers(lo, hi, (D, I, 4 * H)).astype(wdt),
         "R": rng.integers(lo, hi, (D, H, 4 * H)).astype(wdt),
         "B": rng.uniform(-0.3, 0.3, (D, 8 * H)).astype(np.float32),
         "W_scale": rng.uniform(0.002, 0.01, zp).astype(np.float32),
         "W_zero_point": (rng.integers(100, 150, zp) if wdt == np.uint8 else np.zeros(zp)).astype(wdt),
         "R_scale": rng.uniform(0.002, 0.01, (D,)).astype(np.float32),
         "R_zero_point": (rng.integers(120, 136, (D,)) if wdt == np.uint8 else np.zeros((D,))).astype(wdt)}
    names = ["X2", "W", "R", "B", "", "", "", "", "W_scale", "W_zero_point", "R_scale", "R_zero_point"]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["Y", "Y_h"], domain="com.microsoft", hidden_size=H,
                            direction="bidirectional")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["X2"]), node], "dq",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                    helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
    for target in (None, "fp16"):
        got, ref = both(model, feeds, target)
        assert_same(got, ref)
    assert_close(both(model, feeds)[0], ort_run(model, feeds), atol=1e-5)


def test_example_model_matches_onnxruntime():
    x, _ = ex.load_data()
    m = fonnx.load(ex.model_path(), executor="onnxruntime")
    got = m.run({"x": x})
    assert_close(got, ort_run(onnx.load(ex.model_path()), {"x": x}), atol=1e-5)
    # the Gemm head is onnxruntime's (MLAS) rather than NumPy's: within float32 rounding of the reference
    assert_close(got, fonnx.load(ex.model_path(), executor="reference").run({"x": x}), atol=1e-5)


def test_models_and_targets_share_sessions_and_interleave():
    """to() copies share the model's session; interleaved runs of several models and targets in one process
    each reach their own node function."""
    rng = np.random.default_rng(11)
    models = [random_node_model(op, rng, present={"B"}, const={"W", "R"}, outputs={"Y_h"},
                                direction="bidirectional", layout=0) for op in ("LSTM", "GRU")]
    runs = []
    for model, feeds in models:
        m = fonnx.load(model, executor="onnxruntime")
        ref = fonnx.load(model, executor="reference")
        copies = [m, m.to("fp16"), m.to("bf16"), m.to("mli2-sa8", calibration=feeds)]
        assert all(c._ort_graph() is m._ort_graph() for c in copies)
        refs = [ref, ref.to("fp16"), ref.to("bf16"), ref.to("mli2-sa8", calibration=feeds)]
        runs += [(c, r, feeds) for c, r in zip(copies, refs, strict=True)]
    outs = [r.run(feeds) for _, r, feeds in runs]
    assert len({o["Y_h"].tobytes() for o in outs}) == len(outs)  # every target computes something else
    for _ in range(2):
        for (c, _, feeds), want in zip(runs, outs, strict=True):
            assert_same(c.run(feeds), want)


def test_node_errors_are_raised_after_onnxruntime_returns_and_the_session_survives():
    """An exception inside a Python op would abort the process: it is carried out and re-raised instead."""
    rng = np.random.default_rng(8)
    model, feeds = random_node_model("GRU", rng, present={"sequence_lens"}, const={"W", "R"}, outputs={"Y_h"},
                                     direction="forward", layout=0)
    m = fonnx.load(model, executor="onnxruntime")
    good = m.run(feeds)
    bad = dict(feeds, sequence_lens=np.array([1, 99, 2], np.int32))
    with pytest.raises(FusedRNNError, match="GRU") as info:
        m.run(bad)
    with pytest.raises(type(info.value)):
        fonnx.load(model, executor="reference").run(bad)
    assert_same(m.run(feeds), good)


def test_executor_choice_and_fallback(monkeypatch):
    model, feeds = random_node_model("RNN", np.random.default_rng(9), present=set(), const={"W", "R"},
                                     outputs={"Y"}, direction="forward", layout=0)
    assert fonnx.load(model).executor == "onnxruntime"  # auto, with both packages importable
    assert fonnx.load(model, executor="reference").executor == "reference"
    model14 = onnx.ModelProto()
    model14.CopyFrom(model)
    model14.ir_version = 99  # onnxruntime refuses it; the reference evaluator does not mind
    assert fonnx.load(model14).executor == "reference"
    with pytest.raises(UnsupportedFeatureError, match="onnxruntime"):
        fonnx.load(model14, executor="onnxruntime")
    monkeypatch.setattr(onnx_ort, "available", lambda: False)
    assert fonnx.load(model).executor == "reference"
    with pytest.raises(UnsupportedFeatureError, match="onnxruntime-extensions"):
        fonnx.load(model, executor="onnxruntime")


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(), st.none()))
def test_executor_validation(value):
    model, _ = random_node_model("RNN", np.random.default_rng(10), present=set(), const={"W", "R"},
                                 outputs={"Y"}, direction="forward", layout=0)
    if value in fonnx.EXECUTORS:
        assert fonnx.load(model, executor=value).executor in ("onnxruntime", "reference")
    else:
        with pytest.raises(AttributeValueError, match="executor"):
            fonnx.load(model, executor=value)


def test_op_declarations_cover_every_recurrent_node():
    """The declared op types cover every input / output count the recurrent operators' schemas allow."""
    for op in ("LSTM", "GRU", "RNN"):
        schema = onnx.defs.get_schema(op)
        assert len(schema.inputs) <= onnx_ort.MAX_INPUTS and len(schema.outputs) <= onnx_ort.MAX_OUTPUTS
    assert onnx_ort.MAX_INPUTS >= 12  # com.microsoft::DynamicQuantizeLSTM (not in onnx's schemas)


def test_declarations_made_by_others_first_make_auto_fall_back():
    """A Python op declared by other code before fusedrnn's may have open sessions that a new declaration would
    crash: auto falls back to the reference executor, an explicit onnxruntime executor refuses (fresh process)."""
    import subprocess
    import sys

    code = """
import numpy as np
from onnxruntime_extensions import PyCustomOpDef, onnx_op
onnx_op(op_type="Other", inputs=[PyCustomOpDef.dt_float], outputs=[PyCustomOpDef.dt_float])(lambda x: x)
import fusedrnn.example as ex
from fusedrnn.errors import UnsupportedFeatureError
from fusedrnn.frontends import onnx as fonnx
assert fonnx.load(ex.model_path()).executor == "reference"
try:
    fonnx.load(ex.model_path(), executor="onnxruntime")
except UnsupportedFeatureError as exc:
    assert "declare_ops" in str(exc), exc
    print("refused")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "refused", res.stderr[-2000:]


def test_quark_ops_are_declared_together():
    from fusedrnn.targets.quark import ort_extensions as quark_ops

    fonnx.load(ex.model_path(), executor="onnxruntime")
    assert onnx_ort._declared and quark_ops._declared


def test_top_level_recurrent_nodes_run_between_onnxruntime_segments():
    """A model whose recurrent nodes are all top-level runs as onnxruntime segments around them (no Python-op
    bridge): two stacked LSTMs and a GRU, a value computed before the first node read after the last, an
    initializer used by a segment and a node; the outputs equal the reference route's and a model with nodes in
    If / Loop / Scan bodies keeps the bridge."""
    rng = np.random.default_rng(21)
    T, B, I, H = 6, 3, 4, 5

    def weights(name, gates, k):
        return [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, gates * H, k)).astype(np.float32), f"W{name}"),
                numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, gates * H, H)).astype(np.float32), f"R{name}")]

    inits = [*weights("a", 4, I), *weights("b", 4, H), *weights("c", 3, H),
             numpy_helper.from_array(np.array([T, B, H], np.int64), "shape"),
             numpy_helper.from_array(np.float32(0.5), "half")]
    nodes = [helper.make_node("Mul", ["X", "half"], ["Xs"]),
             helper.make_node("ReduceMean", ["X"], ["xm"], axes=[2], keepdims=1),  # read after the last node
             helper.make_node("LSTM", ["Xs", "Wa", "Ra"], ["Ya", "Ha"], hidden_size=H),
             helper.make_node("Reshape", ["Ya", "shape"], ["Xb"]),
             helper.make_node("LSTM", ["Xb", "Wb", "Rb", "", "", "Ha"], ["Yb"], hidden_size=H),
             helper.make_node("Reshape", ["Yb", "shape"], ["Xc"]),
             helper.make_node("Mul", ["Xc", "half"], ["Xc2"]),
             helper.make_node("GRU", ["Xc2", "Wc", "Rc"], ["", "Hc"], hidden_size=H),
             helper.make_node("Mul", ["Hc", "half"], ["out"]),
             helper.make_node("Add", ["xm", "half"], ["xm2"])]
    model = make_model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
                       [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "xm2", "Ya")],
                       inits)
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
    m = fonnx.load(model, executor="onnxruntime")
    stages = m._ort_graph().partition.stages
    kinds = [getattr(getattr(s, "node", None), "op_type", "segment") for s in stages]
    assert kinds == ["segment", "LSTM", "segment", "LSTM", "segment", "GRU", "segment"]
    exact = ("out", "Ya")  # xm2 is ReduceMean's alone, which onnxruntime and onnx.reference round differently

    def recurrent(outs):
        return {k: outs[k] for k in exact}

    got, ref = both(model, feeds)
    assert_same(recurrent(got), recurrent(ref))
    assert_close(got, ort_run(model, feeds), atol=2e-6)
    assert_same(recurrent(m.to("fp16").run(feeds)),
                recurrent(fonnx.load(model, executor="reference").to("fp16").run(feeds)))
    assert fonnx.load(control_flow_model(rng, 4, 2, 3, 5), executor="onnxruntime")._ort_graph().partition is None
    # the first segment's input keeps the shape the model declares (onnxruntime optimises a segment as the model)
    first = stages[0].session.get_inputs()[0]
    assert first.name == "X" and first.shape == [T, B, I]
    # the recurrent nodes on one thread (the mode the partition measures against the threaded one) give the same bits
    part = m._ort_graph().partition
    part.share.one_thread = True
    got_one = m.run(feeds)
    assert_same(recurrent(got_one), recurrent(got))
