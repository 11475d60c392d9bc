"""The layer option ``output_order`` ("time" | "processing") of reverse layers.

``output_order="processing"`` (Keras ``go_backwards``) must return, for LSTM, GRU and RNN, the ``"time"`` output
with each row's valid prefix reversed (index s <- time len-1-s; zeros past each length) and the same final state.
The reversal is written here independently of the library, row by row, on a [B, T, H] view, over
``batch_first`` both ways, merge "stack" / "concat", with and without ``sequence_lens`` (lengths 0 and T
included) and with and without an initial state. Also: the option is rejected for forward and bidirectional
layers and by ``to_onnx``, and copies (``to``) keep it.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusedrnn import GRU, LSTM, RNN, AttributeValueError, ConversionError

T, B, I, H = 5, 4, 3, 2
LENS = {
    "none": None,
    "full": np.full(B, T, np.int32),
    "mixed": np.array([T, 0, 2, 1], np.int32),  # T, 0 and partial lengths in one batch
    "zeros": np.zeros(B, np.int64),
}


def make(cell, *, direction="reverse", output_order="time", batch_first=False, merge="concat", seed=0,
         proj=0):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    Hp = proj or H
    W = rng.uniform(-0.8, 0.8, (D, G * H, I)).astype(np.float32)
    R = rng.uniform(-0.8, 0.8, (D, G * H, Hp)).astype(np.float32)
    b_x = rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32)
    b_h = rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32)
    common = dict(direction=direction, output_order=output_order, batch_first=batch_first, merge=merge)
    if cell == "lstm":
        pw = rng.uniform(-0.8, 0.8, (D, proj, H)).astype(np.float32) if proj else None
        return LSTM(W, R, b_x, b_h, proj_W=pw, **common)
    if cell == "gru":
        return GRU(W, R, b_x, b_h, linear_before_reset=bool(seed % 2), **common)
    return RNN(W, R, b_x, b_h, **common)


def as_bth(y, batch_first, merge):
    """A one-direction output as [B, T, H]: concat [T, B, H] / [B, T, H], stack [T, 1, B, H] / [B, T, 1, H]."""
    if merge == "stack":
        assert y.shape[2 if batch_first else 1] == 1
        y = y[:, :, 0] if batch_first else y[:, 0]
    return y if batch_first else y.transpose(1, 0, 2)


def reverse_rows(y_bth, lens):
    """Each row's first lens[b] steps reversed, the steps past it unchanged (a plain loop, on purpose)."""
    out = np.array(y_bth, copy=True)
    nb, nt = y_bth.shape[:2]
    for b in range(nb):
        n = nt if lens is None else int(lens[b])
        for s in range(n):
            out[b, s] = y_bth[b, n - 1 - s]
    return out


def assert_states_equal(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b) == 2
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("lens_name", list(LENS))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("merge", ["concat", "stack"])
@pytest.mark.parametrize("with_state", [False, True])
def test_processing_order_is_time_order_with_valid_prefix_reversed(cell, lens_name, batch_first, merge, with_state):
    seed = len(lens_name) + 2 * batch_first + with_state
    time_layer = make(cell, batch_first=batch_first, merge=merge, seed=seed)
    proc_layer = make(cell, output_order="processing", batch_first=batch_first, merge=merge, seed=seed)
    assert proc_layer.output_order == "processing" and time_layer.output_order == "time"
    rng = np.random.default_rng(100 + seed)
    x = rng.uniform(-1, 1, (B, T, I) if batch_first else (T, B, I)).astype(np.float32)
    state = None
    if with_state:
        h0 = rng.uniform(-1, 1, (1, B, H)).astype(np.float32)
        state = (h0, rng.uniform(-1, 1, (1, B, H)).astype(np.float32)) if cell == "lstm" else h0
    lens = LENS[lens_name]
    y_time, s_time = time_layer(x, state, lens)
    y_proc, s_proc = proc_layer(x, state, lens)
    assert y_proc.shape == y_time.shape and y_proc.dtype == y_time.dtype
    assert y_proc.flags.c_contiguous
    yt, yp = as_bth(y_time, batch_first, merge), as_bth(y_proc, batch_first, merge)
    np.testing.assert_array_equal(yp, reverse_rows(yt, lens))
    if lens is not None:  # zero past each length, in both orders
        for b, n in enumerate(lens):
            assert not np.any(yp[b, n:]) and not np.any(yt[b, n:])
    if lens is None or lens_name == "full":
        np.testing.assert_array_equal(yp, yt[:, ::-1])
    assert_states_equal(s_proc, s_time)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_processing_order_step_s_reads_x_len_minus_1_minus_s(cell):
    """Index s is the state after reading x[len-1-s]: running the reverse layer on the prefix x[len-1-s:len]
    only (a forward walk of that many steps from the end) ends in exactly y_proc[s]."""
    layer = make(cell, output_order="processing", batch_first=True, seed=3)
    x = np.random.default_rng(9).uniform(-1, 1, (1, T, I)).astype(np.float32)
    n = T - 1
    y, _ = layer(x, sequence_lens=np.array([n], np.int32))
    for s in range(n):
        _, st = layer(x[:, n - 1 - s : n])
        h = st[0] if cell == "lstm" else st
        np.testing.assert_allclose(y[0, s], h[0, 0], rtol=1e-6, atol=1e-6)
    assert not np.any(y[0, n:])


def test_processing_order_with_projection():
    time_layer = make("lstm", proj=1, seed=5)
    proc_layer = make("lstm", proj=1, seed=5, output_order="processing")
    x = np.random.default_rng(1).uniform(-1, 1, (T, B, I)).astype(np.float32)
    lens = LENS["mixed"]
    (yt, st), (yp, sp) = time_layer(x, sequence_lens=lens), proc_layer(x, sequence_lens=lens)
    assert yp.shape == (T, B, 1)
    np.testing.assert_array_equal(as_bth(yp, False, "concat"), reverse_rows(as_bth(yt, False, "concat"), lens))
    assert_states_equal(sp, st)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_processing_order_needs_reverse_direction(cell, direction):
    with pytest.raises(AttributeValueError, match="output_order") as ei:
        make(cell, direction=direction, output_order="processing")
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("value", ["backwards", "", None, 1])
def test_output_order_unknown_value(value):
    with pytest.raises(AttributeValueError, match="output_order"):
        make("gru", output_order=value)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_to_onnx_rejects_processing_order(cell):
    layer = make(cell, output_order="processing")
    with pytest.raises(ConversionError, match="output_order"):
        layer.to_onnx()
    with pytest.raises(ConversionError, match="output_order"):
        layer.to_onnx_model()
    make(cell).to_onnx()  # the same layer in time order exports


def test_copies_keep_output_order():
    layer = make("lstm", output_order="processing", batch_first=True)
    x = np.random.default_rng(2).uniform(-1, 1, (B, T, I)).astype(np.float32)
    for target in ("fp32", "fp64"):
        copy = layer.to(target)
        assert copy.output_order == "processing"
        np.testing.assert_allclose(copy(x)[0], layer(x)[0], rtol=1e-6, atol=1e-6)
