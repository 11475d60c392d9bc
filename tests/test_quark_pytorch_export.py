"""ExtendedLSTM nodes as AMD Quark's own tool writes them, from a PyTorch export, against Quark's compiled kernel.

The pipeline a user runs: ``torch.onnx.export`` of a bidirectional ``nn.LSTM`` (an LSTM node with 7 inputs: X,
W, R, B, an empty sequence_lens, zero initial_h / initial_c made by Expand nodes; 3 outputs Y, Y_h, Y_c), then
onnxruntime's ``quantize_static`` in QDQ form with uint16 activations and weights (quark.md section 1), then the
rewrite of ``quark/onnx/tools/convert_lstm_to_customlstm.py``: the LSTM node becomes ``com.amd.quark::ExtendedLSTM``
with **the same inputs and outputs**, the per-tensor scale / zero point of the DequantizeLinear feeding inputs 0-3
and of the QuantizeLinear after output 0 as attributes, ``direction`` (default "bidirectional"), ``hidden_size``
(default 128) and ``layout`` (default 0). The rewrite below is ours, written from reading that tool.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import fusedrnn
import fusedrnn.quark as quark
from fusedrnn.errors import UnsupportedFeatureError
from fusedrnn.targets.quark import reference
from fusedrnn.targets.quark.onnx_op import SCALE_ATTRIBUTES

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
ort = pytest.importorskip("onnxruntime")


@pytest.fixture
def kernel(quark_kernel):
    return quark_kernel


def quark_rewrite(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every LSTM node replaced as convert_lstm_to_customlstm does (inputs and outputs kept, Q/DQ left in place)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    nodes = []
    for n in model.graph.node:
        if n.op_type != "LSTM":
            nodes.append(n)
            continue
        attrs = {}
        for k, name in enumerate("xwrb"):
            dq = producer[n.input[k]]
            assert dq.op_type == "DequantizeLinear"
            attrs[f"{name}_scale"] = inits[dq.input[1]].item()
            attrs[f"{name}_zero_point"] = inits[dq.input[2]].item()
        q = next(c for c in consumers[n.output[0]] if c.op_type == "QuantizeLinear")
        attrs["y_scale"], attrs["y_zero_point"] = inits[q.input[1]].item(), inits[q.input[2]].item()
        given = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        nodes.append(helper.make_node(
            "ExtendedLSTM", n.input, n.output, name=n.name, domain="com.amd.quark",
            direction=given.get("direction", b"bidirectional").decode(), hidden_size=given.get("hidden_size", 128),
            layout=given.get("layout", 0), **attrs))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.opset_import.append(helper.make_opsetid("com.amd.quark", 1))
    return out


class _Reader(quantization.CalibrationDataReader):
    def __init__(self, xs):
        self._it = iter([{"X": x} for x in xs])

    def get_next(self):
        return next(self._it, None)


def _pipeline(tmp_path, rng, T, I, H):  # noqa: E741
    """(float model, QDQ model, ExtendedLSTM model, the LSTM node's output names)."""
    torch.manual_seed(int(rng.integers(1 << 30)))
    lstm = torch.nn.LSTM(I, H, bidirectional=True).eval()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x):
            return self.lstm(x)

    f32, qdq = tmp_path / "f.onnx", tmp_path / "q.onnx"
    torch.onnx.export(Net().eval(), (torch.zeros(T, 1, I),), str(f32), dynamo=False, opset_version=17,
                      input_names=["X"], output_names=["Y", "Y_h", "Y_c"])
    cal = [rng.standard_normal((T, 1, I)).astype(np.float32) for _ in range(6)]
    quantization.quantize_static(str(f32), str(qdq), _Reader(cal), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt16,
                                 weight_type=quantization.QuantType.QUInt16, op_types_to_quantize=["LSTM"])
    q = onnx.load(str(qdq))
    node = next(n for n in q.graph.node if n.op_type == "LSTM")
    assert len(node.input) == 7 and node.input[4] == "" and len(node.output) == 3  # what PyTorch exports
    for name in node.output:  # the node's own outputs, before their QuantizeLinear
        q.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    for name in node.input[:4]:
        q.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return q, quark_rewrite(q), node


@pytest.mark.parametrize("seed", range(3))
def test_pytorch_export_rewritten_by_quark_runs_bit_exact_with_quarks_kernel(kernel, tmp_path, seed):
    rng = np.random.default_rng(seed)
    T, I, H = int(rng.integers(2, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 12))  # noqa: E741
    qdq, ext, node = _pipeline(tmp_path, rng, T, I, H)
    enode = next(n for n in ext.graph.node if n.op_type == "ExtendedLSTM")
    assert list(enode.input) == list(node.input) and list(enode.output) == list(node.output)
    x = rng.standard_normal((T, 1, I)).astype(np.float32)
    # the node's float inputs (X, W, R, B out of their DequantizeLinear), as onnxruntime computes them
    names = list(node.input[:4])
    X, W, R, B = ort.InferenceSession(qdq.SerializeToString(), providers=["CPUExecutionProvider"]).run(names,
                                                                                                     {"X": x})
    attrs = quark.node_attributes(enode)
    scales = {k: attrs[k] for k in SCALE_ATTRIBUTES}
    y_ref, _ = reference.run(kernel, X, W, R, B, scales, H)
    Y, Y_h, Y_c = node.output
    runs = {
        "run_model": quark.run_model(ext, {"X": x}, outputs=[Y, Y_h, Y_c]),
        "onnx.load": fusedrnn.onnx.load(ext).run({"X": x}),
        "onnx.load.to(quark)": fusedrnn.onnx.load(ext).to("quark").run({"X": x}),  # quantized already
        "reference executor": fusedrnn.onnx.load(ext, executor="reference").to("quark").run({"X": x}),
    }
    for how, out in runs.items():
        assert out[Y].dtype == np.float32, how
        np.testing.assert_array_equal(out[Y].view(np.uint32), y_ref.view(np.uint32), err_msg=how)
        # Y_h: each direction's last step of Y (forward: t = T-1, backward: t = 0)
        np.testing.assert_array_equal(out[Y_h], np.stack([y_ref[T - 1, 0], y_ref[0, 1]]), err_msg=how)
        assert out[Y_c].shape == (2, 1, H) and out[Y_c].dtype == np.float32
    # Y_c is the kernel's final float32 cell (Quark's op has no such output; the node wiring gives it through)
    _, _, c = quark.extended_lstm(X, W, R, B, hidden_size=H, return_state=True, **scales)
    for how, out in runs.items():
        np.testing.assert_array_equal(out[Y_c], c, err_msg=how)


def _node_model(inputs: list[str], outputs: list[str], extra_inits: dict, rng, T=4, I=3, H=5):  # noqa: E741
    W = (rng.standard_normal((2, 4 * H, I)) * 0.4).astype(np.float32)
    R = (rng.standard_normal((2, 4 * H, H)) * 0.4).astype(np.float32)
    B = (rng.standard_normal((2, 8 * H)) * 0.1).astype(np.float32)
    sc = {"x_scale": 1e-4, "x_zero_point": 32768, "w_scale": 4e-5, "w_zero_point": 32000, "r_scale": 4e-5,
          "r_zero_point": 33000, "b_scale": 1e-5, "b_zero_point": 32768, "y_scale": 3.5e-5, "y_zero_point": 32768}
    node = helper.make_node("ExtendedLSTM", inputs, outputs, domain="com.amd.quark", hidden_size=H,
                            direction="bidirectional", **sc)
    inits = [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"))]
    inits += [numpy_helper.from_array(np.asarray(v), k) for k, v in extra_inits.items()]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [T, 1, I])],
                          [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs if o],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.amd.quark", 1)])
    return m, (W, R, B, sc, H), rng.standard_normal((T, 1, I)).astype(np.float32)


@pytest.mark.parametrize("inputs,outputs", [
    (["X", "W", "R", "B"], ["Y"]),
    (["X", "W", "R", "B", "", "h0", "c0"], ["Y", "Y_h", "Y_c"]),
    (["X", "W", "R", "B", "lens", "h0", "c0", "P"], ["Y", "", "Y_c"]),
    (["X", "W", "R", "", "", "", "c0"], ["Y", "Y_h"]),
], ids=["kernel", "pytorch", "all", "some"])
def test_optional_inputs_and_outputs_present_or_absent(inputs, outputs):
    rng = np.random.default_rng(len(inputs) * 10 + len(outputs))
    T, H = 4, 5
    extra = {"h0": np.zeros((2, 1, H), np.float32), "c0": np.zeros((2, 1, H), np.float32),
             "lens": np.full(1, T, np.int32), "P": np.zeros((2, 3 * H), np.float32)}
    model, (W, R, B, sc, H), x = _node_model(inputs, outputs, {k: v for k, v in extra.items() if k in inputs}, rng)
    ref = quark.extended_lstm(x, W, R, B if "B" in inputs else None, hidden_size=H, **sc)
    for out in (quark.run_model(model, {"X": x}), fusedrnn.onnx.load(model).to("quark").run({"X": x})):
        np.testing.assert_array_equal(out["Y"], ref)
        if "Y_h" in out:
            np.testing.assert_array_equal(out["Y_h"], np.stack([ref[-1, 0], ref[0, 1]]))
        assert set(out) == {o for o in outputs if o}


@pytest.mark.parametrize("name,value,match", [
    ("h0", np.full((2, 1, 5), 0.25, np.float32), "initial_h"),
    ("c0", np.full((2, 1, 5), -0.5, np.float32), "initial_c"),
    ("lens", np.array([2], np.int32), "sequence_lens"),
])
def test_what_quarks_kernel_cannot_express_is_refused(name, value, match):
    rng = np.random.default_rng(9)
    extra = {"h0": np.zeros((2, 1, 5), np.float32), "c0": np.zeros((2, 1, 5), np.float32),
             "lens": np.full(1, 4, np.int32)}
    extra[name] = value
    model, _, x = _node_model(["X", "W", "R", "B", "lens", "h0", "c0"], ["Y", "Y_h", "Y_c"], extra, rng)
    with pytest.raises(UnsupportedFeatureError, match=match):
        quark.run_model(model, {"X": x})
    with pytest.raises(UnsupportedFeatureError, match=match):
        fusedrnn.onnx.load(model).to("quark").run({"X": x})
    if name != "lens":  # the corrected kernel takes initial states
        out = quark.run_model(model, {"X": x}, mode="corrected")
        assert out["Y"].shape == (4, 2, 1, 5)


def test_float_lstm_nodes_still_need_calibration_on_quark():
    rng = np.random.default_rng(3)
    H, I = 4, 3  # noqa: E741
    W, R = rng.standard_normal((2, 4 * H, I)).astype(np.float32), rng.standard_normal((2, 4 * H, H)).astype(np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=H, direction="bidirectional")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [5, 1, I])],
                          [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedFeatureError, match="calibration"):
        fusedrnn.onnx.load(m).to("quark")
