"""The native onnxruntime route of ``fusedrnn.onnx`` (``frontends/onnx_native.py``, ``cells/compiled/_ort_bridge.h``):
the model's LSTM / GRU nodes as custom operators of the compiled kernel's library, the whole model one onnxruntime
session.

Oracles: the reference executor (onnx's evaluator, the recurrent nodes through fusedrnn.ops: the same kernel call,
so bit for bit), plain onnxruntime (within float tolerance), and the other onnxruntime routes' errors for the same
feeds."""

from __future__ import annotations

import concurrent.futures
import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from fusedrnn.cells import dispatch, ort_qlstm, setting
from fusedrnn.cells.compiled import _build, driver
from fusedrnn.errors import FusedRNNError, SequenceLengthError, ShapeError
from fusedrnn.frontends import onnx as fonnx
from fusedrnn.frontends import onnx_native, onnx_ort

ort = pytest.importorskip("onnxruntime")
from test_dynamic_quantize_lstm import model_of, ort_outputs, random_case  # noqa: E402

pytest.importorskip("onnxruntime_extensions")
onnx_ort.declare_ops()  # at collection: before any test of the run opens an onnxruntime-extensions session
if _build.load() is None:
    pytest.skip("the compiled kernel is unavailable", allow_module_level=True)

GATES = {"LSTM": 4, "GRU": 3}
STATES = {"LSTM": ["initial_h", "initial_c"], "GRU": ["initial_h"]}
OUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"]}
H_UNIT = 16  # H a multiple of every build's vector width takes the batched path


def lstm_model(op, rng, *, T, B, I, H, direction="forward", bias=True, lens=False, states=(), outputs=None,
               weights="initializers", attrs=None):
    """X [T, B, I] -> one node; its W, R (and B) as initializers, or ("constants") built in the graph by
    Slice / Concat of Constant nodes, as exporters write them; states and lengths are graph inputs."""
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    arrays = {"W": rng.uniform(-0.5, 0.5, (D, G * H, I)), "R": rng.uniform(-0.5, 0.5, (D, G * H, H))}
    if bias:
        arrays["B"] = rng.uniform(-0.5, 0.5, (D, 2 * G * H))
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    nodes, inits = [], []
    for name, value in arrays.items():
        if weights == "initializers":
            inits.append(numpy_helper.from_array(value, name))
            continue
        # the weights twice over, sliced back: constant nodes the route computes once
        doubled = np.concatenate([value, value], axis=1)
        nodes += [helper.make_node("Constant", [], [f"{name}_2"], value=numpy_helper.from_array(doubled)),
                  helper.make_node("Constant", [], [f"{name}_s"], value=numpy_helper.from_array(np.array([0]))),
                  helper.make_node("Constant", [], [f"{name}_e"],
                                   value=numpy_helper.from_array(np.array([value.shape[1]]))),
                  helper.make_node("Constant", [], [f"{name}_a"], value=numpy_helper.from_array(np.array([1]))),
                  helper.make_node("Slice", [f"{name}_2", f"{name}_s", f"{name}_e", f"{name}_a"], [name])]
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])]
    feeds = {"X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32)}
    slots = ["X", "W", "R", "B" if bias else "", "sequence_lens" if lens else ""]
    if lens:
        ins.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [B]))
        feeds["sequence_lens"] = rng.integers(0, T + 1, B).astype(np.int32)
    for s in STATES[op]:
        slots.append(s if s in states else "")
        if s in states:
            ins.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, [D, B, H]))
            feeds[s] = rng.uniform(-1, 1, (D, B, H)).astype(np.float32)
    while slots[-1] == "":
        slots.pop()
    kept = OUTS[op] if outputs is None else outputs
    node_outputs = [o if o in kept else "" for o in OUTS[op]]
    while node_outputs[-1] == "":
        node_outputs.pop()
    nodes.append(helper.make_node(op, slots, node_outputs, hidden_size=H, direction=direction, **(attrs or {})))
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node_outputs if o]
    graph = helper.make_graph(nodes, "g", ins, outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), feeds


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def native_model(model):
    return fonnx.load(model, executor="onnxruntime")


def route(m):
    """The model's native graph once it has run (None: the route declined it)."""
    return m._ort_graph()._native


def run_native(m, feeds):
    """``m.run(feeds)``, checking that the native route ran it (a fallback to the other routes gives the same
    bits, so the comparisons alone could not tell)."""
    graph = m._ort_graph()
    before = 0 if not graph._native else graph._native.runs
    out = m.run(feeds)
    assert graph._native and graph._native.runs == before + 1, "the native route did not run the call"
    return out


def assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), op=st.sampled_from(sorted(GATES)),
       direction=st.sampled_from(["forward", "reverse", "bidirectional"]), bias=st.booleans(), lens=st.booleans(),
       states=st.sets(st.sampled_from(["initial_h", "initial_c"])),
       outputs=st.sets(st.sampled_from(["Y", "Y_h", "Y_c"]), min_size=1),
       weights=st.sampled_from(["initializers", "constants"]), lbr=st.booleans(),
       T=st.integers(1, 7), B=st.integers(1, 40), units=st.integers(1, 3), I=st.integers(1, 24))
def test_random_nodes_match_reference_bit_for_bit_and_onnxruntime(seed, op, direction, bias, lens, states, outputs,
                                                                 weights, lbr, T, B, units, I):
    rng = np.random.default_rng(seed)
    outputs = [o for o in OUTS[op] if o in outputs] or ["Y"]
    attrs = {"linear_before_reset": int(lbr)} if op == "GRU" else {}
    model, feeds = lstm_model(op, rng, T=T, B=B, I=I, H=H_UNIT * units, direction=direction, bias=bias, lens=lens,
                              states=states, outputs=outputs, weights=weights, attrs=attrs)
    m = native_model(model)
    got = run_native(m, feeds)
    want = fonnx.load(model, executor="reference").run(feeds)
    assert_same(got, want)
    with onnx_native.disabled():  # the partition route: the same kernel call
        assert_same(m.run(feeds), got)
    plain = ort_run(model, feeds)
    for k in got:
        np.testing.assert_allclose(got[k], plain[k], rtol=0, atol=2e-5, err_msg=k)


def _if_model(rng, T, B, I, H):
    """An LSTM in each branch of an If on a graph input, its weights built from Constant nodes in the branch
    (Silero VAD's structure)."""
    branches = []
    for tag in ("then", "else"):
        inner, _ = lstm_model("LSTM", rng, T=T, B=B, I=I, H=H, weights="constants", states=("initial_h",))
        g = inner.graph
        for n in g.node:  # branch-local names
            n.input[:] = [f"{tag}_{i}" if i and i not in ("X", "initial_h") else i for i in n.input]
            n.output[:] = [f"{tag}_{o}" if o else o for o in n.output]
        branches.append(helper.make_graph(list(g.node), tag, [],
                                          [helper.make_tensor_value_info(f"{tag}_Y_h", TensorProto.FLOAT, None)]))
    node = helper.make_node("If", ["cond"], ["out"], then_branch=branches[0], else_branch=branches[1])
    ins = [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
           helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I]),
           helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [1, B, H])]
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_nodes_in_if_branches_with_weights_built_from_constants():
    rng = np.random.default_rng(3)
    T, B, I, H = 3, 2, 5, 32
    model = _if_model(rng, T, B, I, H)
    m = native_model(model)
    for cond in (True, False):
        feeds = {"cond": np.array(cond), "X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32),
                 "initial_h": rng.uniform(-1, 1, (1, B, H)).astype(np.float32)}
        got = run_native(m, feeds)
        assert_same(got, fonnx.load(model, executor="reference").run(feeds))
        np.testing.assert_allclose(got["out"], ort_run(model, feeds)["out"], rtol=0, atol=2e-5)
    # the segments of the older route (their sessions: most of a load's time) are made only when a run needs them
    graph = m._ort_graph()
    assert graph._partition is False
    with onnx_native.disabled():
        assert_same(m.run(feeds), got)
    assert graph._partition is not False and graph.partition is not None


@pytest.mark.parametrize("case", ["H not a multiple of the vector width", "layout 1", "clip", "input_forget",
                                  "weights fed", "RNN node", "float64", "activations"])
def test_nodes_the_batched_path_does_not_run_take_the_other_routes(case):
    rng = np.random.default_rng(5)
    op, H, attrs = "LSTM", 32, {}
    if case.startswith("H not"):
        H = 12
    elif case == "layout 1":
        attrs = {"layout": 1}
    elif case == "clip":
        attrs = {"clip": 0.5}
    elif case == "input_forget":
        attrs = {"input_forget": 1}
    elif case == "activations":
        attrs = {"activations": ["HardSigmoid", "Tanh", "Tanh"]}
    model, feeds = lstm_model(op, rng, T=3, B=2, I=4, H=H, attrs=attrs)
    if case == "weights fed":  # W a graph input: not a constant
        model.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [1, 4 * H, 4]))
        feeds["W"] = numpy_helper.to_array(model.graph.initializer[0])
        del model.graph.initializer[0]
    if case == "RNN node":
        node = model.graph.node[0]
        node.op_type = "RNN"
        for k, (name, shape) in enumerate((("W", (1, H, 4)), ("R", (1, H, H)), ("B", (1, 2 * H)))):
            value = rng.uniform(-1, 1, shape).astype(np.float32)
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(value, name))
        del node.output[2:]
        del model.graph.output[2:]
    if case == "float64":
        for t in model.graph.initializer:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
        model.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
        for o in model.graph.output:
            o.type.tensor_type.elem_type = TensorProto.DOUBLE
        feeds["X"] = feeds["X"].astype(np.float64)
    if case == "layout 1":
        feeds["X"] = np.ascontiguousarray(feeds["X"].transpose(1, 0, 2))
        model.graph.input[0].CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT, list(feeds["X"].shape)))
    m = native_model(model)
    got = m.run(feeds)
    assert route(m) is None
    assert_same(got, fonnx.load(model, executor="reference").run(feeds))


def test_the_engine_setting_and_disabled_send_runs_to_the_other_routes():
    rng = np.random.default_rng(7)
    model, feeds = lstm_model("GRU", rng, T=4, B=3, I=6, H=16, states=("initial_h",))
    m = native_model(model)
    native = run_native(m, feeds)
    with dispatch.using("numpy"):  # the NumPy engine: the reference executor's result on that engine
        assert_same(m.run(feeds), fonnx.load(model, executor="reference").run(feeds))
    with onnx_native.disabled():
        assert_same(m.run(feeds), native)


def test_errors_are_those_of_the_other_routes():
    rng = np.random.default_rng(9)
    model, feeds = lstm_model("LSTM", rng, T=3, B=2, I=4, H=16, lens=True, states=("initial_h",))
    for i in model.graph.input:  # undeclared shapes: the operator's own checks see the bad feeds
        i.type.tensor_type.ClearField("shape")
    m = native_model(model)
    run_native(m, feeds)
    bad = dict(feeds, sequence_lens=np.array([1, 4], np.int32))
    with pytest.raises(SequenceLengthError, match=r"sequence_lens: expected every length in \[0, 3\]"):
        m.run(bad)
    bad = dict(feeds, initial_h=np.zeros((1, 3, 16), np.float32))
    with pytest.raises(ShapeError, match="initial_h"):
        m.run(bad)
    with pytest.raises(FusedRNNError, match="input_size"):
        m.run(dict(feeds, X=np.zeros((3, 2, 5), np.float32)))
    assert_same(run_native(m, feeds), fonnx.load(model, executor="reference").run(feeds))  # the session survives


def _operator_model(plan, x_shape=(2, 1, 4), domain=onnx_native.DOMAIN):
    node = helper.make_node("LSTM", ["X"], ["Y", "Y_h", "Y_c"], domain=domain, plan=plan)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h", "Y_c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(domain, 1)],
                             ir_version=8)


def _session(model):
    so = ort.SessionOptions()
    so.register_custom_ops_library(_build.library_path())
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def test_the_operator_checks_its_plan_and_inputs():
    """The C operator on its own, in a session made by hand: an id that names no live plan is refused when the
    session is made; a live plan checks X, the states and the lengths (the error statuses onnxruntime raises)."""
    for plan in (-1, 123456789, 2**40):
        with pytest.raises(Exception, match="plan: expected the id of a live fusedrnn LSTM plan"):
            _session(_operator_model(plan))
    rng = np.random.default_rng(11)
    model, feeds = lstm_model("LSTM", rng, T=2, B=1, I=4, H=16)
    m = native_model(model)
    m.run(feeds)
    ids = route(m).plans
    assert [lib for lib, _ in ids] == ["kernel"]
    sess = _session(_operator_model(ids[0][1]))
    want = fonnx.load(model, executor="reference").run(feeds)
    got = sess.run(None, {"X": feeds["X"]})
    np.testing.assert_array_equal(got[0], want["Y"])
    for shape, message in (((2, 1, 5), "X: expected input_size 4"), ((2, 1), "X: expected rank 3"),
                           ((0, 1, 4), "X: expected non-empty")):
        with pytest.raises(Exception, match=message):
            sess.run(None, {"X": np.zeros(shape, np.float32)})


def test_a_model_holding_the_bridges_domain_is_not_rewritten():
    """The bridge's operators come from fusedrnn's rewrite only: a model that uses the domain itself (which could
    name another model's plan) does not take the route."""
    rng = np.random.default_rng(13)
    model, feeds = lstm_model("LSTM", rng, T=2, B=1, I=4, H=16)
    m = native_model(model)
    m.run(feeds)
    hostile = _operator_model(route(m).plans[0][1])
    hostile.graph.node.append(model.graph.node[0])
    hostile.graph.initializer.extend(model.graph.initializer)
    hostile.graph.node[1].output[:] = ["Y2", "Y_h2", "Y_c2"]
    assert onnx_native.native_graph(hostile, {"X": np.dtype(np.float32)}, lambda *a: None) is None


def test_plans_are_freed_with_their_models():
    lib = _build.load()
    rng = np.random.default_rng(17)
    model, feeds = lstm_model("LSTM", rng, T=2, B=2, I=4, H=16, direction="bidirectional")
    gc.collect()
    before = lib.fusedrnn_bridge_live()
    m = native_model(model)
    m.run(feeds)
    assert lib.fusedrnn_bridge_live() == before + 1
    del m
    gc.collect()
    assert lib.fusedrnn_bridge_live() == before


def test_threads_share_one_model():
    """Concurrent runs of one model (the first call packs the weights under the plan's lock) give the results of
    runs one at a time."""
    rng = np.random.default_rng(19)
    model, _ = lstm_model("LSTM", rng, T=6, B=64, I=32, H=64, direction="bidirectional", lens=True)
    feeds = [{"X": rng.uniform(-1, 1, (6, 64, 32)).astype(np.float32),
              "sequence_lens": rng.integers(0, 7, 64).astype(np.int32)} for _ in range(8)]
    ref = fonnx.load(model, executor="reference")
    want = [ref.run(f) for f in feeds]
    m = native_model(model)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(m.run, feeds * 3))
    assert route(m) is not None and route(m).runs > 0
    for k, g in enumerate(got):
        assert_same(g, want[k % len(feeds)])


def test_thread_counts_give_the_same_bits():
    rng = np.random.default_rng(23)
    model, feeds = lstm_model("LSTM", rng, T=20, B=256, I=64, H=128)
    m = native_model(model)
    one = None
    for n in (1, 2, 3):
        with driver.thread_limit(n):
            got = m.run(feeds) if one is None else run_native(m, feeds)
        one = got if one is None else one
        assert_same(got, one)


@pytest.mark.parametrize("seed", range(30))
def test_dynamic_quantize_lstm_nodes_match_the_reference_and_onnxruntime(seed):
    """com.microsoft::DynamicQuantizeLSTM as the DynamicQuantizeLSTM kernel's operator (domain
    ai.fusedrnn.native.ortq): random weights (int8 / uint8, per-column scales), peepholes, clip, directions,
    lengths with and without Y, states given or not; bit for bit the reference executor's fusedrnn.ops call,
    within 2e-6 of onnxruntime with one thread (the h quantization block depends on the thread count)."""
    rng = np.random.default_rng(seed)
    a, attrs = random_case(rng)
    T, B = a["X"].shape[:2]
    lens, has_y = seed % 3 > 0, seed % 2 == 0
    model = model_of(a, attrs, lens=lens, has_y=has_y)
    feeds = {"X": a["X"], "h0": a["h0"], "c0": a["c0"]}
    if lens:
        feeds["L"] = rng.integers(0 if has_y else 1, T + 1, B).astype(np.int32)
    if seed % 5 == 0:  # states omitted
        node = model.graph.node[0]
        node.input[5] = node.input[6] = ""
        del model.graph.input[1:3]
        del feeds["h0"], feeds["c0"]
    m = native_model(model)
    got = run_native(m, feeds)
    assert [lib for lib, _ in route(m).plans] == ["ortq"]
    assert_same(got, fonnx.load(model, executor="reference").run(feeds))
    plain = dict(zip([o.name for o in model.graph.output], ort_outputs(model, feeds), strict=True))
    for k in got:
        np.testing.assert_allclose(got[k], plain[k], rtol=0, atol=2e-6, err_msg=k)
    with setting.using("numpy", scope="ortq"):  # the other routes on the NumPy loop: the same values
        np.testing.assert_allclose(m.run(feeds)["Y_h"], got["Y_h"], rtol=0, atol=1e-6)


def test_dynamic_quantize_lstm_plans_are_freed_with_their_models():
    lib = ort_qlstm.KERNEL.load()
    rng = np.random.default_rng(31)
    a, attrs = random_case(rng)
    model = model_of(a, attrs)
    gc.collect()
    before = lib.ortq_bridge_live()
    m = native_model(model)
    m.run({"X": a["X"], "h0": a["h0"], "c0": a["c0"]})
    assert lib.ortq_bridge_live() == before + 1
    del m
    gc.collect()
    assert lib.ortq_bridge_live() == before


def test_more_rows_than_the_kernel_takes_run_on_the_other_routes(monkeypatch):
    """Above driver.BATCHED_MAX_ROWS rows the other routes run the NumPy engine; the operator refuses such a call
    (its plan holds the limit) and the run goes there, with the same bits."""
    monkeypatch.setattr(driver, "BATCHED_MAX_ROWS", 8)
    rng = np.random.default_rng(37)
    model, feeds = lstm_model("LSTM", rng, T=3, B=5, I=4, H=16, direction="bidirectional")
    for i in model.graph.input:
        i.type.tensor_type.ClearField("shape")
    m = native_model(model)
    small = {"X": feeds["X"][:, :4]}
    assert_same(run_native(m, small), fonnx.load(model, executor="reference").run(small))
    ns = route(m).libs["kernel"].fusedrnn_bridge_ns()
    assert_same(m.run(feeds), fonnx.load(model, executor="reference").run(feeds))  # 10 rows: the NumPy engine
    assert route(m).libs["kernel"].fusedrnn_bridge_ns() == ns


def test_branches_defining_the_same_weight_names_take_the_other_routes():
    """The two branches of an If may each define their own W, R and B under the same names (legal ONNX); the
    route looks weights up by name across scopes, so it declines such a model (it gave both branches one set)."""
    rng = np.random.default_rng(41)
    T, B, I, H = 3, 2, 5, 16
    branches = []
    for weights in ("initializers", "constants"):
        inner, _ = lstm_model("LSTM", rng, T=T, B=B, I=I, H=H, weights=weights, states=("initial_h",))
        g = inner.graph
        g.node[-1].output[:] = [f"Y_{weights}", f"Y_h_{weights}", f"Y_c_{weights}"]
        branches.append(helper.make_graph(list(g.node), weights, [],
                                          [helper.make_tensor_value_info(f"Y_h_{weights}", TensorProto.FLOAT, None)],
                                          list(g.initializer)))
    branches[1].node[-1].input[:] = list(branches[0].node[-1].input)  # W, R, B: the same names in both branches
    model = _if_model(rng, T, B, I, H)
    model.graph.node[0].attribute[0].g.CopyFrom(branches[0])
    model.graph.node[0].attribute[1].g.CopyFrom(branches[1])
    m = native_model(model)
    for cond in (True, False):
        feeds = {"cond": np.array(cond), "X": rng.uniform(-1, 1, (T, B, I)).astype(np.float32),
                 "initial_h": rng.uniform(-1, 1, (1, B, H)).astype(np.float32)}
        got = m.run(feeds)
        assert route(m) is None
        assert_same(got, fonnx.load(model, executor="reference").run(feeds))


def test_a_declined_node_leaves_no_plans_behind():
    """A model whose second node the route declines (clip) drops the plan it made for the first."""
    lib = _build.load()
    rng = np.random.default_rng(43)
    model, feeds = lstm_model("LSTM", rng, T=2, B=2, I=4, H=16)
    clipped, _ = lstm_model("LSTM", rng, T=2, B=2, I=16, H=16, attrs={"clip": 0.5})
    node = clipped.graph.node[0]
    node.input[:] = ["Y_h2d", "W2", "R2", "B2"]
    node.output[:] = ["Y2"]
    for t in clipped.graph.initializer:
        t.name += "2"
    reshape = helper.make_node("Reshape", ["Y_h", "shape"], ["Y_h2d"])
    model.graph.node.extend([reshape, node])
    model.graph.initializer.extend([*clipped.graph.initializer,
                                    numpy_helper.from_array(np.array([1, 2, 16], np.int64), "shape")])
    model.graph.output.append(helper.make_tensor_value_info("Y2", TensorProto.FLOAT, None))
    gc.collect()
    before = lib.fusedrnn_bridge_live()
    for _ in range(3):
        m = native_model(model)
        assert_same(m.run(feeds), fonnx.load(model, executor="reference").run(feeds))
        assert route(m) is None
    del m
    gc.collect()
    assert lib.fusedrnn_bridge_live() == before
