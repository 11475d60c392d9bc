"""``fusedrnn.conventions`` against the spec: the permutation tables of conventions.md section 3 and the
orientation / bias columns of sections 1.1, 2.2 and 4, typed in here as literal data (the outside oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from fusedrnn import conventions
from fusedrnn.errors import AttributeValueError, FusedRNNError, ShapeError

# conventions.md section 3: perm[k] = the canonical gate in the framework's block k.
# LSTM canonical (i, f, g, o) = (0, 1, 2, 3).
LSTM_PERM = {
    "torch": [0, 1, 2, 3], "keras": [0, 1, 2, 3], "tflite": [0, 1, 2, 3], "onednn": [0, 1, 2, 3],
    "cudnn": [0, 1, 2, 3],
    "onnx": [0, 3, 1, 2], "ort_dynamic_quantize": [0, 3, 1, 2], "quark": [0, 3, 1, 2],
    "openvino": [1, 0, 2, 3], "zdnn": [1, 0, 2, 3],
    "mli1": [0, 2, 1, 3], "mli2": [0, 2, 1, 3],
    "tf1_lstm_cell_simple": [2, 0, 1, 3],
}
# GRU canonical (z, r, n) = (0, 1, 2). TFLite's custom GRU: gate_weight rows r, z ([1, 0]) with the candidate
# in its own tensor, i.e. [1, 0, 2] over the three blocks.
GRU_PERM = {
    "onnx": [0, 1, 2], "keras": [0, 1, 2], "openvino": [0, 1, 2], "onednn": [0, 1, 2], "mli2": [0, 1, 2],
    "zdnn": [0, 1, 2],
    "torch": [1, 0, 2], "cudnn": [1, 0, 2],
    "tflite": [1, 0, 2],
}
NO_GRU = ["ort_dynamic_quantize", "quark", "mli1", "tf1_lstm_cell_simple"]
# section 1.1 / 2.2 "orientation": out x in (x·Wᵀ) or in x out (x·W)
ORIENTATION = {
    "onnx": "out_in", "ort_dynamic_quantize": "in_out", "quark": "out_in", "torch": "out_in", "keras": "in_out",
    "tflite": "out_in", "onednn": "in_out", "openvino": "out_in", "cudnn": "out_in", "mli1": "out_in",
    "mli2": "in_out", "zdnn": "in_out", "tf1_lstm_cell_simple": "in_out",
}
# section 4 / 1.1 "bias" columns
BIAS = {
    "onnx": "double", "ort_dynamic_quantize": "double", "quark": "double", "torch": "double", "keras": "single",
    "tflite": "single", "onednn": "single", "openvino": "single", "cudnn": "double", "mli1": "single",
    "mli2": "single", "zdnn": "double", "tf1_lstm_cell_simple": "none",
}
PEEPHOLE_ORDER = {"onnx": "iof", "tflite": "ifo", "onednn": "ifo"}
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def cells_of(name):
    return ["lstm", "rnn"] + ([] if name in NO_GRU else ["gru"])


def test_every_convention_is_in_the_spec_tables():
    assert set(conventions.CONVENTIONS) == set(LSTM_PERM)
    assert set(GRU_PERM) | set(NO_GRU) == set(LSTM_PERM)


@pytest.mark.parametrize("name", sorted(LSTM_PERM))
def test_lstm_permutation_table(name):
    assert list(conventions.permutation("lstm", name)) == LSTM_PERM[name]


@pytest.mark.parametrize("name", sorted(GRU_PERM))
def test_gru_permutation_table(name):
    assert list(conventions.permutation("gru", name)) == GRU_PERM[name]


@pytest.mark.parametrize("name", NO_GRU)
def test_no_gru_weights(name):
    with pytest.raises(AttributeValueError, match="convention"):
        conventions.permutation("gru", name)
    with pytest.raises(AttributeValueError, match="convention"):
        conventions.to_canonical(np.zeros((6, 2)), "gru", name, axis=0)


@pytest.mark.parametrize("name", sorted(LSTM_PERM))
def test_orientation_bias_and_peephole_columns(name):
    conv = conventions.get(name)
    assert conv.orientation == ORIENTATION[name]
    assert conv.bias == BIAS[name]
    if name in PEEPHOLE_ORDER:
        assert conv.peephole_order == PEEPHOLE_ORDER[name]
    assert conventions.get("keras").gru_bias == "double"  # reset_after=True: bias [2, 3U]


def blocks(G, H, extra=(3,), seed=0):
    """G distinguishable canonical blocks [H, *extra] (block k filled around 100*k)."""
    rng = np.random.default_rng(seed)
    return [100.0 * k + rng.standard_normal((H, *extra)) for k in range(G)]


def build_framework(canon_blocks, perm, axis=0):
    """conventions.md section 3: F = concat([C[perm[k]] for k in range(G)])."""
    return np.concatenate([canon_blocks[p] for p in perm], axis=axis)


@pytest.mark.parametrize("name", sorted(LSTM_PERM))
@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_to_from_canonical_against_hand_built_blocks(name, cell):
    if cell not in cells_of(name):
        pytest.skip(f"{name} has no {cell}")
    G = GATES[cell]
    perm = {"lstm": LSTM_PERM, "gru": GRU_PERM}[cell][name] if cell != "rnn" else [0]
    C = blocks(G, 3)
    canon = np.concatenate(C, axis=0)  # [G*H, 3]
    fw = build_framework(C, perm)
    np.testing.assert_array_equal(conventions.from_canonical(canon, cell, name, axis=0), fw)
    np.testing.assert_array_equal(conventions.to_canonical(fw, cell, name, axis=0), canon)
    # other axes: bias vectors [D, G*H] along the last axis, weights [D, G*H, I] along axis 1
    bias = np.stack([canon[:, 0], canon[:, 1]])
    np.testing.assert_array_equal(conventions.from_canonical(bias, cell, name), np.stack([fw[:, 0], fw[:, 1]]))
    Wd = np.stack([canon, canon + 0.5])
    np.testing.assert_array_equal(conventions.to_canonical(np.stack([fw, fw + 0.5]), cell, name, axis=1), Wd)


@pytest.mark.parametrize("name", sorted(LSTM_PERM))
@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_round_trips(name, cell):
    if cell not in cells_of(name):
        pytest.skip(f"{name} has no {cell}")
    rng = np.random.default_rng(1)
    G = GATES[cell]
    for shape, axis in (((G * 5,), 0), ((2, G * 4, 3), 1), ((2, 3, G * 2), -1), ((G * 3, 7), 0)):
        a = rng.standard_normal(shape)
        np.testing.assert_array_equal(conventions.to_canonical(conventions.from_canonical(a, cell, name, axis),
                                                               cell, name, axis), a)
        np.testing.assert_array_equal(conventions.from_canonical(conventions.to_canonical(a, cell, name, axis),
                                                                 cell, name, axis), a)
    w = rng.standard_normal((2, G * 4, 3))  # canonical [D, G*H, I]
    fw = conventions.weights_from_canonical(w, cell, name)
    np.testing.assert_array_equal(conventions.weights_to_canonical(fw, cell, name), w)


@pytest.mark.parametrize("name", sorted(LSTM_PERM))
def test_weights_to_canonical_transposes_in_out(name):
    C = blocks(4, 2, extra=(3,))  # canonical blocks [H=2, I=3]
    canon = np.concatenate(C, axis=0)  # [8, 3] out x in
    fw_out_in = build_framework(C, LSTM_PERM[name])
    fw = fw_out_in.T if ORIENTATION[name] == "in_out" else fw_out_in
    assert fw.shape == ((3, 8) if ORIENTATION[name] == "in_out" else (8, 3))
    np.testing.assert_array_equal(conventions.weights_to_canonical(fw, "lstm", name), canon)
    np.testing.assert_array_equal(conventions.weights_from_canonical(canon, "lstm", name), fw)
    # stacked over directions
    st = np.stack([fw, fw * 2])
    np.testing.assert_array_equal(conventions.weights_to_canonical(st, "lstm", name), np.stack([canon, canon * 2]))


def test_torch_onnx_keras_lstm_reorders():
    H, I = 3, 2
    Bi, Bf, Bg, Bo = blocks(4, H, extra=(I,), seed=7)
    torch_w = np.concatenate([Bi, Bf, Bg, Bo])  # weight_ih [4H, I]: i, f, g, o
    onnx_w = np.concatenate([Bi, Bo, Bf, Bg])  # W[d] [4H, I]: i, o, f, c
    keras_k = np.concatenate([Bi, Bf, Bg, Bo]).T  # kernel [I, 4U]: columns i, f, c, o
    openvino_w = np.concatenate([Bf, Bi, Bg, Bo])  # f, i, c, o
    mli2_w = np.concatenate([Bi, Bg, Bf, Bo]).T  # i, g, f, o, in x out
    np.testing.assert_array_equal(conventions.convert(torch_w, "lstm", "torch", "onnx", axis=0), onnx_w)
    np.testing.assert_array_equal(conventions.convert(onnx_w, "lstm", "onnx", "torch", axis=0), torch_w)
    np.testing.assert_array_equal(conventions.convert(onnx_w, "lstm", "onnx", "openvino", axis=0), openvino_w)
    np.testing.assert_array_equal(conventions.convert(keras_k, "lstm", "keras", "onnx", axis=1), onnx_w.T)
    np.testing.assert_array_equal(conventions.weights_to_canonical(keras_k, "lstm", "keras"), torch_w)
    np.testing.assert_array_equal(conventions.weights_to_canonical(onnx_w, "lstm", "onnx"), torch_w)
    np.testing.assert_array_equal(conventions.weights_to_canonical(mli2_w, "lstm", "mli2"), torch_w)
    np.testing.assert_array_equal(
        conventions.weights_from_canonical(conventions.weights_to_canonical(keras_k, "lstm", "keras"),
                                           "lstm", "onnx"), onnx_w)
    # biases: ONNX B [8H] = [Wb | Rb] each in i, o, f, c
    bi, bf, bg, bo = (np.full(H, v) for v in (1.0, 2.0, 3.0, 4.0))
    np.testing.assert_array_equal(conventions.convert(np.concatenate([bi, bf, bg, bo]), "lstm", "torch", "onnx"),
                                  np.concatenate([bi, bo, bf, bg]))


def test_torch_onnx_keras_gru_reorders():
    H, I = 2, 3
    Bz, Br, Bn = blocks(3, H, extra=(I,), seed=9)
    torch_w = np.concatenate([Br, Bz, Bn])  # r, z, n
    onnx_w = np.concatenate([Bz, Br, Bn])  # z, r, h
    keras_k = np.concatenate([Bz, Br, Bn]).T  # kernel [I, 3U] z, r, h
    np.testing.assert_array_equal(conventions.convert(torch_w, "gru", "torch", "onnx", axis=0), onnx_w)
    np.testing.assert_array_equal(conventions.convert(onnx_w, "gru", "onnx", "torch", axis=0), torch_w)
    np.testing.assert_array_equal(conventions.convert(keras_k, "gru", "keras", "torch", axis=1), torch_w.T)
    np.testing.assert_array_equal(conventions.weights_to_canonical(keras_k, "gru", "keras"), onnx_w)
    np.testing.assert_array_equal(conventions.weights_to_canonical(torch_w, "gru", "torch"), onnx_w)
    np.testing.assert_array_equal(conventions.weights_from_canonical(onnx_w, "gru", "torch"), torch_w)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("fn", ["get", "gate_order", "permutation", "to_canonical", "from_canonical",
                                "weights_to_canonical", "weights_from_canonical", "convert_src", "convert_dst"])
def test_unknown_convention(cell, fn):
    a = np.zeros((2, GATES[cell] * 2, 3))
    calls = {
        "get": lambda: conventions.get("caffe"),
        "gate_order": lambda: conventions.gate_order(cell, "caffe"),
        "permutation": lambda: conventions.permutation(cell, "caffe"),
        "to_canonical": lambda: conventions.to_canonical(a, cell, "caffe", axis=1),
        "from_canonical": lambda: conventions.from_canonical(a, cell, "caffe", axis=1),
        "weights_to_canonical": lambda: conventions.weights_to_canonical(a, cell, "caffe"),
        "weights_from_canonical": lambda: conventions.weights_from_canonical(a, cell, "caffe"),
        "convert_src": lambda: conventions.convert(a, cell, "caffe", "onnx", axis=1),
        "convert_dst": lambda: conventions.convert(a, cell, "onnx", "caffe", axis=1),
    }
    with pytest.raises(AttributeValueError) as ei:
        calls[fn]()
    assert isinstance(ei.value, FusedRNNError)
    assert "caffe" in str(ei.value) and "convention" in str(ei.value)


def test_unknown_cell():
    with pytest.raises(AttributeValueError, match="cell"):
        conventions.gate_order("lstmp", "onnx")
    with pytest.raises(FusedRNNError):
        conventions.to_canonical(np.zeros(8), "lstmp", "onnx")


@pytest.mark.parametrize("shape,axis", [((7, 3), 0), ((2, 9), 1), ((), 0)])
def test_block_count_mismatch(shape, axis):
    with pytest.raises(ShapeError, match="W_in"):
        conventions.to_canonical(np.zeros(shape), "lstm", "onnx", axis=axis, argument="W_in")


def test_weights_need_a_matrix():
    with pytest.raises(ShapeError, match="W"):
        conventions.weights_to_canonical(np.zeros(8), "lstm", "keras")


def test_single_bias_folding():
    rng = np.random.default_rng(2)
    bx, bh = rng.standard_normal((2, 12)), rng.standard_normal((2, 12))
    np.testing.assert_array_equal(conventions.single_bias(bx, bh), bx + bh)
    np.testing.assert_array_equal(conventions.single_bias(bx, None), bx)
    np.testing.assert_array_equal(conventions.single_bias(None, bh), bh)
    # reset-after GRU: the candidate's recurrent bias (last block) cannot be folded
    bh9 = rng.standard_normal((2, 9))
    with pytest.raises(FusedRNNError, match="b_h"):
        conventions.single_bias(bx[:, :9], bh9, reset_after_gru=True)
    bh9[:, 6:] = 0
    np.testing.assert_array_equal(conventions.single_bias(bx[:, :9], bh9, reset_after_gru=True), bx[:, :9] + bh9)
    with pytest.raises(ShapeError):
        conventions.single_bias(None, None)


@pytest.mark.parametrize("name", sorted(PEEPHOLE_ORDER))
def test_peephole_reorders(name):
    """P [D, 3H] blocks: ONNX i, o, f; TFLite and oneDNN i, f, o (= fusedrnn's order)."""
    H = 2
    canon = np.concatenate([np.full((1, H), 10.0 * k) for k in range(3)], axis=1)  # i=0, f=10, o=20
    framework = conventions.peepholes_from_canonical(canon, name)
    want = {g: 10.0 * "ifo".index(g) for g in "ifo"}
    np.testing.assert_array_equal(framework.reshape(3, H)[:, 0], [want[g] for g in PEEPHOLE_ORDER[name]])
    np.testing.assert_array_equal(conventions.peepholes_to_canonical(framework, name), canon)
    assert conventions.peephole_order(name) == PEEPHOLE_ORDER[name]


def test_peepholes_of_a_convention_without_them():
    with pytest.raises(AttributeValueError, match="peephole"):
        conventions.peepholes_to_canonical(np.zeros(6), "torch")
    with pytest.raises(ShapeError, match="P"):
        conventions.peepholes_to_canonical(np.zeros(7), "onnx")
