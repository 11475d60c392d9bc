"""The bundled example (src/fusedrnn/data): present, small, and accurate in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import fusedrnn.example as ex

ort = pytest.importorskip("onnxruntime")


def test_files_exist_and_are_small():
    paths = [ex.model_path(), ex.data_path()]
    assert all(p.is_file() for p in paths), paths
    assert sum(p.stat().st_size for p in paths) < 1_000_000


def test_test_split():
    x, y = ex.load_data()
    assert x.dtype == np.float32 and x.ndim == 3 and x.shape[1:] == (8, 8)
    assert y.dtype == np.int64 and y.shape == (x.shape[0],)
    assert x.shape[0] >= 300  # about a quarter of the 1797 digits
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))


def test_model_structure():
    m = onnx.load(ex.model_path())
    onnx.checker.check_model(m, full_check=True)
    assert {o.domain: o.version for o in m.opset_import}[""] == 14
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("LSTM") == 1 and ops[0] == "Transpose"
    (inp,), (out,) = m.graph.input, m.graph.output
    assert inp.name == ex.INPUT_NAME and out.name == ex.OUTPUT_NAME
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert isinstance(dims[0], str) and dims[1:] == [8, 8]
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim][1:] == [10]


def test_onnxruntime_accuracy():
    x, y = ex.load_data()
    sess = ort.InferenceSession(str(ex.model_path()), providers=["CPUExecutionProvider"])
    logits = sess.run([ex.OUTPUT_NAME], {ex.INPUT_NAME: x})[0]
    assert logits.shape == (len(y), 10)
    assert np.mean(logits.argmax(1) == y) >= 0.90


def test_load_model_helper():
    x, y = ex.load_data()
    m = ex.load_model(target="fp32")
    assert m.target.name == "fp32"
    acc = np.mean(m.run({ex.INPUT_NAME: x})[ex.OUTPUT_NAME].argmax(1) == y)
    assert acc >= 0.90
