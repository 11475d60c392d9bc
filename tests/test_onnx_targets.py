"""``fusedrnn.onnx`` models on quantized (``prepare``) targets: per-node calibration from the float model's
recorded activations, nodes inside ``If`` branches, layout=1 nodes, and errors that list every node a target
cannot express."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusedrnn
from fusedrnn.cells.spec import run_spec
from fusedrnn.errors import UnsupportedFeatureError
from fusedrnn.layers import layer_from_spec
from fusedrnn.targets import Prepared, Target

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class GridPrepared(Prepared):
    """The fp64 engine on inputs snapped to a grid of ``step``."""

    def __init__(self, spec, step):
        super().__init__(spec)
        self.step = step

    def run(self, x, states, lens):
        return run_spec(self.spec, np.round(x / self.step) * self.step, states, lens)


def _grid_target(name: str, seen: dict, *, allow_peepholes: bool = True) -> Target:
    """A toy quantized target: inputs snapped to a grid of 1/16 of the calibration range's maximum |x|, then
    the fp64 engine. Records the calibration each layer received."""

    def prepare(spec, calibration):
        xs = [np.asarray(c) for c in calibration]
        step = max(float(np.max(np.abs(x))) for x in xs) / 16
        seen.setdefault(spec.cell, []).append((spec, xs))
        return GridPrepared(spec, step)

    features = fusedrnn.targets.FLOAT_FEATURES
    if not allow_peepholes:
        features = tuple(f for f in features if f != "peepholes")
    return Target(name, "grid test target", family="test", dtype=np.dtype(np.float64), prepare=prepare,
                  needs_calibration=True, features=frozenset(features))


def _node(op, prefix, x_name, rng, *, I, H, D=1, layout=0, peepholes=False, out=None):
    G = GATES[op]
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (D, G * H, I)).astype(np.float32), f"{prefix}W"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (D, G * H, H)).astype(np.float32), f"{prefix}R"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (D, 2 * G * H)).astype(np.float32), f"{prefix}B")]
    inputs = [x_name, f"{prefix}W", f"{prefix}R", f"{prefix}B"]
    if peepholes:
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (D, 3 * H)).astype(np.float32), f"{prefix}P"))
        inputs += ["", "", "", f"{prefix}P"]
    attrs = {"hidden_size": H, "direction": "bidirectional" if D == 2 else "forward"}
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(op, inputs, [out or f"{prefix}Y"], name=f"{prefix}node", **attrs)
    return node, inits


def _two_layer_model(rng, T=6, B=2, I=3, H=4, peepholes=False):
    """X -> LSTM (bidirectional) -> reshape to [T, B, 2H] -> GRU -> Y."""
    n1, i1 = _node("LSTM", "a_", "X", rng, I=I, H=H, D=2, peepholes=peepholes)
    tr = helper.make_node("Transpose", ["a_Y"], ["a_t"], perm=[0, 2, 1, 3])
    shape = numpy_helper.from_array(np.array([0, 0, -1], np.int64), "shape")
    rs = helper.make_node("Reshape", ["a_t", "shape"], ["a_flat"])
    n2, i2 = _node("GRU", "b_", "a_flat", rng, I=2 * H, H=H, out="Y")
    graph = helper.make_graph([n1, tr, rs, n2], "two", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                                      ["T", "B", I])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], i1 + i2 + [shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_each_node_is_calibrated_on_its_own_recorded_input():
    rng = np.random.default_rng(1)
    model = fusedrnn.onnx.load(_two_layer_model(rng))
    cal = [{"X": rng.normal(size=(6, 2, 3)).astype(np.float32)} for _ in range(2)]
    seen: dict = {}
    q = model.to(_grid_target("test-grid-a", seen), calibration=cal)
    # the LSTM saw the calibration X; the GRU saw the float LSTM's output on it
    lstm_layer, lstm_cal = seen["lstm"][0]
    assert [c.shape for c in lstm_cal] == [(6, 2, 3)] * 2
    np.testing.assert_array_equal(lstm_cal[1], cal[1]["X"])
    gru_layer, gru_cal = seen["gru"][0]
    a_y = model.run(cal[0])  # float model
    assert gru_cal[0].shape == (6, 2, 8)
    # independent recomputation from the recorded calibration: snap, run fp64 layers, chain
    x = rng.normal(size=(6, 2, 3)).astype(np.float32)

    def snapped(spec, xs, inp):
        step = max(float(np.max(np.abs(c))) for c in xs) / 16
        r = layer_from_spec(spec, target="fp64", merge="stack")
        y, _ = r(np.round(inp.astype(np.float64) / step) * step)
        return y.astype(np.float32)

    y1 = snapped(lstm_layer, lstm_cal, x)  # [T, D, B, H]
    y2 = snapped(gru_layer, gru_cal, y1.transpose(0, 2, 1, 3).reshape(6, 2, -1))
    np.testing.assert_allclose(q.run({"X": x})["Y"], y2, rtol=1e-6, atol=1e-6)
    assert not np.allclose(q.run({"X": x})["Y"], model.run({"X": x})["Y"], atol=1e-4)  # the grid is visible
    assert a_y["Y"].shape == (6, 1, 2, 4)


def test_nodes_inside_if_branches_and_unreached_branch():
    rng = np.random.default_rng(2)
    I, H = 3, 2
    then_node, then_init = _node("RNN", "t_", "X", rng, I=I, H=H, out="then_y")
    else_node, else_init = _node("GRU", "e_", "X", rng, I=I, H=H, out="else_y")
    out_info = [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, None)]
    then_g = helper.make_graph([then_node], "then", [], out_info, then_init)
    else_g = helper.make_graph([else_node], "else", [], [helper.make_tensor_value_info("else_y", TensorProto.FLOAT,
                                                                                       None)], else_init)
    if_node = helper.make_node("If", ["flag"], ["Y"], then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([if_node], "branches", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                                    [5, 1, I]),
                                                      helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = fusedrnn.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8))
    x = rng.normal(size=(5, 1, I)).astype(np.float32)
    seen: dict = {}
    q = model.to(_grid_target("test-grid-b", seen), calibration={"X": x, "flag": np.array(True)})
    assert list(seen) == ["rnn"]  # only the branch that ran was calibrated
    assert q.run({"X": x, "flag": np.array(True)})["Y"].shape == (5, 1, 1, H)
    with pytest.raises(UnsupportedFeatureError, match="not reached while running the calibration"):
        q.run({"X": x, "flag": np.array(False)})


def test_layout_1_node_with_states():
    rng = np.random.default_rng(3)
    I, H, B, T = 3, 4, 2, 5
    node, inits = _node("LSTM", "l_", "X", rng, I=I, H=H, layout=1)
    node.input.extend(["", "h0", "c0"])
    node.output.extend(["Y_h", "Y_c"])
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [B, T, I]),
           helper.make_tensor_value_info("h0", TensorProto.FLOAT, [B, 1, H]),
           helper.make_tensor_value_info("c0", TensorProto.FLOAT, [B, 1, H])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("l_Y", "Y_h", "Y_c")]
    model = fusedrnn.onnx.load(helper.make_model(helper.make_graph([node], "bm", ins, outs, inits),
                                                 opset_imports=[helper.make_opsetid("", 14)], ir_version=8))
    feeds = {"X": rng.normal(size=(B, T, I)).astype(np.float32), "h0": rng.normal(size=(B, 1, H)).astype(np.float32),
             "c0": rng.normal(size=(B, 1, H)).astype(np.float32)}
    q = model.to(_grid_target("test-grid-c", {}), calibration=feeds)
    got = q.run(feeds)
    ref = model.run(feeds)
    assert {k: v.shape for k, v in got.items()} == {k: v.shape for k, v in ref.items()}
    assert got["Y_h"].shape == (B, 1, H)
    np.testing.assert_allclose(got["l_Y"][:, -1, 0], got["Y_h"][:, 0], rtol=0, atol=0)
    np.testing.assert_allclose(got["l_Y"], ref["l_Y"], atol=0.2)  # same model up to the grid


def test_errors_list_every_unexpressible_node_and_need_calibration():
    rng = np.random.default_rng(4)
    model = fusedrnn.onnx.load(_two_layer_model(rng, peepholes=True))
    t = _grid_target("test-grid-d", {}, allow_peepholes=False)
    with pytest.raises(UnsupportedFeatureError, match="needs calibration"):
        model.to(t)
    with pytest.raises(UnsupportedFeatureError, match=r"(?s)1 recurrent node.*a_node.*peepholes"):
        model.to(t, calibration={"X": np.ones((6, 2, 3), np.float32)})
    with pytest.raises(fusedrnn.DTypeError, match="calibration"):
        model.to(t, calibration="data.npz")
    # float targets ignore calibration
    assert model.to("fp16", calibration={"X": np.ones((6, 2, 3), np.float32)}).target.name == "fp16"


def test_kernel_targets_without_calibration_prepare_each_node_on_first_run():
    rng = np.random.default_rng(6)
    model = fusedrnn.onnx.load(_two_layer_model(rng))
    seen: dict = {}
    t = _grid_target("test-grid-e", seen)
    t = Target(t.name, t.description, family="test", dtype=t.dtype, prepare=t.prepare, needs_calibration=False)
    lazy = model.to(t)
    assert seen == {}
    x = rng.normal(size=(6, 2, 3)).astype(np.float32)
    lazy.run({"X": x})
    assert sorted(seen) == ["gru", "lstm"]  # prepared from the inputs of the first run
    np.testing.assert_array_equal(seen["lstm"][0][1][0], x)
    lazy.run({"X": x})
    assert len(seen["lstm"]) == 1  # once per node
