"""``to_onnx_model`` of batch-first layers: a batch-major graph that onnxruntime runs (Transposes around a
time-major node) and, on request, ONNX's batch-major ``layout=1`` node."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import fusedrnn
from fusedrnn.errors import AttributeValueError

ort = pytest.importorskip("onnxruntime")


def _layer(cell: str, direction: str, rng, *, peepholes: bool = False):
    D = 2 if direction == "bidirectional" else 1
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    I, H = 3, 4
    kw = dict(direction=direction, batch_first=True, merge="stack")
    args = (rng.uniform(-0.5, 0.5, (D, G * H, I)), rng.uniform(-0.5, 0.5, (D, G * H, H)),
            rng.uniform(-0.5, 0.5, (D, G * H)), rng.uniform(-0.5, 0.5, (D, G * H)))
    args = tuple(a.astype(np.float32) for a in args)
    if cell == "lstm":
        P = rng.uniform(-0.5, 0.5, (D, 3, H)).astype(np.float32) if peepholes else None
        return fusedrnn.LSTM(*args, P=P, **kw)
    if cell == "gru":
        return fusedrnn.GRU(*args, linear_before_reset=True, **kw)
    return fusedrnn.RNN(*args, **kw)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("state_inputs", [True, False])
def test_batch_first_export_runs_in_onnxruntime(cell, direction, state_inputs):
    rng = np.random.default_rng(zlib.crc32(f"{cell}-{direction}-{state_inputs}".encode()))
    layer = _layer(cell, direction, rng, peepholes=True)
    B, T, D = 3, 5, layer.num_directions
    x = rng.standard_normal((B, T, layer.input_size)).astype(np.float32)
    lens = np.array([5, 2, 0], np.int32)
    feeds = {"X": x}
    state = None
    if state_inputs:
        h0 = rng.standard_normal((D, B, layer.output_size)).astype(np.float32)
        feeds.update(sequence_lens=lens, initial_h=h0.transpose(1, 0, 2).copy())
        state = h0
        if cell == "lstm":
            c0 = rng.standard_normal((D, B, layer.hidden_size)).astype(np.float32)
            feeds["initial_c"] = c0.transpose(1, 0, 2).copy()
            state = (h0, c0)
    model = layer.to_onnx_model(state_inputs=state_inputs)
    assert all(a.name != "layout" for n in model.graph.node for a in n.attribute)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    y, st = layer(x, state, lens if state_inputs else None)
    h = st[0] if cell == "lstm" else st
    np.testing.assert_allclose(got[0], y, atol=1e-5, rtol=1e-5)  # [B, T, D, H]: batch-major stack
    np.testing.assert_allclose(got[1], h.transpose(1, 0, 2), atol=1e-5, rtol=1e-5)
    if cell == "lstm":
        np.testing.assert_allclose(got[2], st[1].transpose(1, 0, 2), atol=1e-5, rtol=1e-5)
    back = type(layer).from_onnx(model)
    assert back.batch_first and np.array_equal(back.W, layer.W) and np.array_equal(back.R, layer.R)


def test_layout_1_export_is_a_batch_major_node():
    layer = _layer("gru", "forward", np.random.default_rng(0))
    model = layer.to_onnx_model(layout=1)
    (node,) = model.graph.node
    assert {a.name: a.i for a in node.attribute if a.name == "layout"} == {"layout": 1}
    assert fusedrnn.GRU.from_onnx(model).batch_first


@pytest.mark.parametrize("layout", [2, True, "1"])
def test_bad_layout_rejected(layout):
    with pytest.raises(AttributeValueError, match="layout"):
        _layer("rnn", "forward", np.random.default_rng(0)).to_onnx_model(layout=layout)


def test_layout_1_needs_batch_first():
    layer = _layer("rnn", "forward", np.random.default_rng(0))
    layer.batch_first = False
    with pytest.raises(AttributeValueError, match="batch_first"):
        layer.to_onnx_model(layout=1)
