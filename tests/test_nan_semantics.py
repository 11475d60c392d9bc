"""NaN and infinity: fusedrnn's IEEE propagation (default) and ``nan="onnxruntime"``, checked against onnxruntime
itself with one NaN or ±Inf placed in each input of small LSTM, GRU and RNN nodes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from fusedrnn import ops
from fusedrnn.errors import AttributeValueError

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle (test extra)")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
FUNCTIONS = {"LSTM": ops.lstm, "GRU": ops.gru, "RNN": ops.rnn}
EXTRA = {"GRU": {"linear_before_reset": 1}}


def _session(op: str, H: int, with_h0: bool):
    names = ["X", "W", "R", "B"] + (["h0"] if with_h0 else [])
    node = helper.make_node(op, names[:4] + (["", "h0"] if with_h0 else []), ["Y"], hidden_size=H,
                            **EXTRA.get(op, {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
                and np.allclose(np.nan_to_num(a), np.nan_to_num(b), atol=1e-5))


def _cases():
    rng = np.random.default_rng(0)
    for op in ("LSTM", "GRU", "RNN"):
        G, H, I, T, B = GATES[op], 3, 2, 4, 2
        for place in ("X", "W", "R", "B", "h0"):
            for value in (np.nan, np.inf, -np.inf):
                for with_h0 in (False, True):
                    if place == "h0" and not with_h0:
                        continue
                    arrays = {"X": rng.normal(size=(T, B, I)), "W": rng.normal(size=(1, G * H, I)),
                              "R": rng.normal(size=(1, G * H, H)), "B": rng.normal(size=(1, 2 * G * H)),
                              "h0": np.zeros((1, B, H))}
                    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
                    arrays[place].flat[rng.integers(arrays[place].size)] = value
                    yield op, place, value, with_h0, arrays


def _run(op, with_h0, arrays, nan):
    a = arrays
    with np.errstate(invalid="ignore", over="ignore"):
        y = FUNCTIONS[op](a["X"], a["W"], a["R"], a["B"], None, a["h0"] if with_h0 else None, hidden_size=3,
                          nan=nan, **EXTRA.get(op, {}))[0]
    feeds = {k: v for k, v in a.items() if k != "h0" or with_h0}
    return y, _session(op, 3, with_h0).run(None, feeds)[0]


def test_onnxruntime_mode_matches_onnxruntime_where_ieee_does_not():
    differ = {"ieee": [], "onnxruntime": []}
    for op, place, value, with_h0, arrays in _cases():
        for nan in differ:
            y, y_ort = _run(op, with_h0, arrays, nan)
            if not _same(y, y_ort):
                differ[nan].append((op, place, str(value), with_h0))
    # the IEEE default propagates NaN where onnxruntime's LSTM/GRU clamps turn it into numbers
    assert ("LSTM", "X", "nan", False) in differ["ieee"] and len(differ["ieee"]) >= 25
    # nan="onnxruntime" agrees on every LSTM case and every GRU case but an infinite initial_h; onnxruntime's RNN
    # skips R at the first step without initial_h (a non-finite R shows there only in fusedrnn)
    left = {(op, place, with_h0) for op, place, _, with_h0 in differ["onnxruntime"]}
    assert left <= {("GRU", "h0", True), ("RNN", "R", False)} | {("RNN", p, h) for p in "XWRB" for h in (0, 1)} | \
        {("RNN", "h0", True)}, differ["onnxruntime"]
    assert not [d for d in differ["onnxruntime"] if d[0] == "LSTM"]


def test_finite_inputs_are_unchanged_by_the_onnxruntime_mode():
    rng = np.random.default_rng(1)
    X, W, R = (rng.normal(size=s).astype(np.float32) for s in ((5, 2, 3), (1, 16, 3), (1, 16, 4)))
    # the same values up to float rounding (the mode runs the NumPy loop without its folded sigmoid)
    np.testing.assert_allclose(ops.lstm(X, W, R, hidden_size=4)[0],
                               ops.lstm(X, W, R, hidden_size=4, nan="onnxruntime")[0], rtol=1e-5, atol=1e-6)


def test_onnxruntime_mode_refuses_a_rounding_policy():
    from fusedrnn.cells import FP16

    X, W, R = np.zeros((2, 1, 3), np.float32), np.zeros((1, 16, 3), np.float32), np.zeros((1, 16, 4), np.float32)
    with pytest.raises(AttributeValueError, match="nan: 'onnxruntime'"):
        ops.lstm(X, W, R, hidden_size=4, nan="onnxruntime", rounding=FP16)
    with pytest.raises(AttributeValueError, match="nan"):
        ops.lstm(X, W, R, hidden_size=4, nan="quiet")
