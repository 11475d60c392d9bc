"""Direction merges, ``batch_first``, ONNX ``layout=1`` and ``Stack``, each against a direct computation.

* merge "concat" / "sum" / "mul" / "ave" and ``batch_first`` against the "stack" output of the same layer,
  rearranged by hand (concat: forward first, PyTorch / Keras);
* ``fusedrnn.ops`` with ``layout=1`` against ``layout=0`` on transposed inputs and outputs;
* ``Stack`` of layers against calling the layers one after another.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusedrnn
from fusedrnn import ops

G = {"lstm": 4, "gru": 3, "rnn": 1}
CLS = {"lstm": fusedrnn.LSTM, "gru": fusedrnn.GRU, "rnn": fusedrnn.RNN}


def make_layer(cell, rng, *, D, I, H, Hp=None, **kw):
    g = G[cell]
    extra = {}
    if cell == "lstm" and Hp is not None:
        extra["proj_W"] = rng.standard_normal((D, Hp, H)) * 0.5
    elif cell == "gru":
        extra["linear_before_reset"] = bool(rng.integers(2))
    return CLS[cell](rng.standard_normal((D, g * H, I)) * 0.6, rng.standard_normal((D, g * H, Hp or H)) * 0.6,
                     rng.standard_normal((D, g * H)) * 0.2, rng.standard_normal((D, g * H)) * 0.2,
                     direction="bidirectional" if D == 2 else str(rng.choice(["forward", "reverse"])),
                     **extra, **kw)


def with_options(layer, **kw):
    """The same weights with other merge / batch_first options (a fresh constructor call)."""
    args = dict(direction=layer.direction, merge=layer.merge, batch_first=layer.batch_first)
    args.update(kw)
    extra = {}
    if isinstance(layer, fusedrnn.LSTM) and layer.proj_W is not None:
        extra["proj_W"] = layer.proj_W
    if isinstance(layer, fusedrnn.GRU):
        extra["linear_before_reset"] = layer.linear_before_reset
    return type(layer)(layer.W, layer.R, layer.b_x, layer.b_h, **args, **extra).to(layer.target)


def direct_merge(Y, merge):
    """Y [T, D, B, H] -> the merged output, written out by hand."""
    T, D, B, H = Y.shape
    if merge == "stack":
        return Y
    if merge == "concat":
        out = np.empty((T, B, D * H))
        for d in range(D):
            out[:, :, d * H:(d + 1) * H] = Y[:, d]
        return out
    if D == 1:
        return Y[:, 0]
    if merge == "sum":
        return Y[:, 0] + Y[:, 1]
    if merge == "mul":
        return Y[:, 0] * Y[:, 1]
    if merge == "ave":
        return (Y[:, 0] + Y[:, 1]) / 2
    raise AssertionError(merge)


def to_batch_first(y, merge):
    return y.transpose(2, 0, 1, 3) if merge == "stack" else y.transpose(1, 0, 2)


CASES = list(itertools.product(G, (1, 2), ("stack", "concat", "sum", "mul", "ave"), (False, True)))


@pytest.mark.parametrize("cell,D,merge,batch_first", CASES)
def test_merge_and_batch_first(cell, D, merge, batch_first):
    rng = np.random.default_rng([list(G).index(cell), D, len(merge), batch_first])
    T, B, I, H = 5, 3, 4, 3
    Hp = 2 if cell == "lstm" and rng.integers(2) else None
    base = make_layer(cell, rng, D=D, I=I, H=H, Hp=Hp, merge="stack").to("fp64")
    x = rng.standard_normal((T, B, I))
    lens = np.array([5, 2, 0])
    Hs = Hp or H
    if cell == "lstm":
        state = (rng.standard_normal((D, B, Hs)), rng.standard_normal((D, B, H)))
    else:
        state = rng.standard_normal((D, B, H))
    Y, st_ref = base(x, state, lens)
    assert Y.shape == (T, D, B, Hs)

    layer = with_options(base, merge=merge, batch_first=batch_first)
    y, st = layer(x.transpose(1, 0, 2) if batch_first else x, state, lens)
    want = direct_merge(Y, merge)
    if batch_first:
        want = to_batch_first(want, merge)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-15, atol=0)
    # the state never depends on merge or batch_first
    for a, b in zip(st if cell == "lstm" else [st], st_ref if cell == "lstm" else [st_ref], strict=True):
        np.testing.assert_array_equal(a, b)
    # batch row 2 has length 0: zero outputs in every merge (mul: 0 * 0)
    row2 = y[2] if batch_first else (y[:, :, 2] if merge == "stack" else y[:, 2])
    assert np.all(row2 == 0)


def test_stack_output_matches_onnx_operator():
    """The layer's "stack" output is the ONNX Y (through to_onnx and fusedrnn.ops)."""
    rng = np.random.default_rng(3)
    for cell in G:
        layer = make_layer(cell, rng, D=2, I=3, H=4, merge="stack")
        x = rng.standard_normal((6, 2, 3)).astype(np.float32)
        y, _ = layer(x, sequence_lens=np.array([6, 3]))
        spec = layer.to_onnx()
        extra = {"P": spec["P"]} if "P" in spec else {}
        Y = getattr(ops, cell)(x, spec["W"], spec["R"], spec["B"], np.array([6, 3], np.int32), **extra,
                               **spec["attributes"])[0]
        np.testing.assert_allclose(y, Y, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------ ONNX layout
LAYOUT_CASES = list(itertools.product(G, ("forward", "reverse", "bidirectional"), (False, True)))


@pytest.mark.parametrize("cell,direction,with_state", LAYOUT_CASES)
def test_layout1_equals_layout0_transposed(cell, direction, with_state):
    rng = np.random.default_rng([list(G).index(cell), len(direction), with_state])
    D = 2 if direction == "bidirectional" else 1
    T, B, I, H = 4, 3, 2, 3
    g = G[cell]
    X = rng.standard_normal((T, B, I))
    W = rng.standard_normal((D, g * H, I)) * 0.6
    R = rng.standard_normal((D, g * H, H)) * 0.6
    Bias = rng.standard_normal((D, 2 * g * H)) * 0.2
    lens = np.array([4, 1, 3], np.int32)
    kw0, kw1 = {}, {}
    if with_state:
        h0 = rng.standard_normal((D, B, H))
        kw0["initial_h"], kw1["initial_h"] = h0, h0.transpose(1, 0, 2)
        if cell == "lstm":
            c0 = rng.standard_normal((D, B, H))
            kw0["initial_c"], kw1["initial_c"] = c0, c0.transpose(1, 0, 2)
    if cell == "lstm":
        kw0["P"] = kw1["P"] = rng.standard_normal((D, 3 * H)) * 0.3
    attrs = dict(direction=direction, clip=2.0)
    fn = getattr(ops, cell)
    out0 = fn(X, W, R, Bias, lens, **kw0, **attrs)
    out1 = fn(X.transpose(1, 0, 2), W, R, Bias, lens, **kw1, layout=1, **attrs)
    np.testing.assert_array_equal(out1[0], out0[0].transpose(2, 0, 1, 3))  # [B, T, D, H]
    assert out1[0].shape == (B, T, D, H)
    for s1, s0 in zip(out1[1:], out0[1:], strict=True):
        assert s1.shape == (B, D, H)
        np.testing.assert_array_equal(s1, s0.transpose(1, 0, 2))


# ------------------------------------------------------------------------------------------------ Stack
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_stack_equals_layers_one_by_one(batch_first, with_state):
    rng = np.random.default_rng([batch_first, with_state])
    T, B, I = 6, 3, 4
    l1 = make_layer("lstm", rng, D=2, I=I, H=5, Hp=3, merge="concat", batch_first=batch_first)  # -> 6
    l2 = make_layer("gru", rng, D=2, I=6, H=4, merge="sum", batch_first=batch_first)  # -> 4
    l3 = make_layer("rnn", rng, D=1, I=4, H=3, merge="concat", batch_first=batch_first)  # -> 3
    l4 = make_layer("lstm", rng, D=2, I=3, H=2, merge="ave", batch_first=batch_first)  # -> 2
    layers = [l1, l2, l3, l4]
    stack = fusedrnn.Stack(layers)
    assert len(stack) == 4 and stack[2] is l3
    x = rng.standard_normal((B, T, I) if batch_first else (T, B, I)).astype(np.float32)
    lens = np.array([6, 4, 1])
    states = None
    if with_state:
        states = [(rng.standard_normal((2, B, 3)), rng.standard_normal((2, B, 5))),
                  rng.standard_normal((2, B, 4)), None,
                  (rng.standard_normal((2, B, 2)), rng.standard_normal((2, B, 2)))]
    y, st = stack(x, states, lens)
    h = x
    want_states = []
    for k, layer in enumerate(layers):
        h, s = layer(h, None if states is None else states[k], lens)
        want_states.append(s)
    np.testing.assert_array_equal(y, h)
    assert y.shape == ((B, T, 2) if batch_first else (T, B, 2))
    assert len(st) == 4
    for got, want in zip(st, want_states, strict=True):
        for a, b in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want],
                        strict=True):
            np.testing.assert_array_equal(a, b)
    # Stack.to(target) == every layer moved to the target
    y16, _ = stack.to("fp16")(x, states, lens)
    h = x
    for k, layer in enumerate(layers):
        h, _ = layer.to("fp16")(h, None if states is None else states[k], lens)
    np.testing.assert_array_equal(y16, h)
    assert not np.array_equal(y16, y)
