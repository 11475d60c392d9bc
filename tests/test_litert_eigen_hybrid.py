"""The hybrid LSTM against the LiteRT interpreter, bit for bit: with the interpreter's Eigen sigmoid and tanh
(:mod:`fusedrnn.numerics.eigen`, placed by the destination's alignment in LiteRT's gate scratch) and its
left-to-right layer-norm sums, a symmetric hybrid LSTM matches the interpreter exactly — also two hybrid layers
stacked over 200 steps, where one flipped requantized code would make the outputs drift apart. Batch x cell
sizes that are not multiples of 4 put gate buffers off the 16-byte boundary (Eigen's scalar prologue), and
batch-major models call the activation once per row."""

from __future__ import annotations

import numpy as np
import pytest
from litert_kernel_cases import rnn_model
from test_litert_random import random_float_lstm, run_interpreter

from fusedrnn.targets.litert.graph import load
from fusedrnn.targets.litert.writer import lstm_model

pytest.importorskip("ai_edge_litert.interpreter")

# (seed, B, H, P, cifg, peephole, layer_norm, projection, time_major); B·H mod 4 != 0 in most
STACKS = [
    (0, 3, 10, 7, False, True, True, True, True),
    (1, 2, 9, 9, True, True, True, False, False),
    (2, 3, 7, 5, False, False, True, True, False),
    (3, 1, 13, 13, False, True, False, False, True),
    (4, 3, 6, 6, True, False, False, False, True),
]


def _layer(rng, I: int, B: int, H: int, P: int, cifg: bool, peephole: bool, layer_norm: bool, projection: bool,
           time_major: bool, T: int):
    cfg = dict(I=I, H=H, P=P if projection else None, B=B, T=T, cifg=cifg, peephole=peephole,
               projection=projection, proj_bias=projection, layer_norm=layer_norm, time_major=time_major,
               cell_clip=float(rng.choice([0.0, 3.0])), proj_clip=float(rng.choice([0.0, 2.0])) if projection else 0.0,
               act="TANH", asymmetric=False)
    t, opts = random_float_lstm(rng, cfg, hybrid=True)
    return lstm_model(t, opts, batch=B, time=T)


@pytest.mark.parametrize("case", STACKS, ids=[f"seed{c[0]}" for c in STACKS])
def test_two_layer_hybrid_stack_200_steps_bit_exact(case):
    seed, B, H, P, cifg, peephole, layer_norm, projection, time_major = case
    T, I = 200, 5
    rng = np.random.default_rng(seed)
    m1 = _layer(rng, I, B, H, P, cifg, peephole, layer_norm, projection, time_major, T)
    n_out = P if projection else H
    m2 = _layer(rng, n_out, B, H, P, not cifg, peephole, layer_norm, projection, time_major, T)
    x = (rng.standard_normal((T, B, I) if time_major else (B, T, I)) * 1.5).astype(np.float32)
    (y1_ref,) = run_interpreter(m1, [x])
    (y2_ref,) = run_interpreter(m2, [y1_ref])
    first, second = load(m1), load(m2)
    assert first.ops[0].kind == second.ops[0].kind == "hybrid"
    y1 = first(x)
    np.testing.assert_array_equal(y1, y1_ref)
    np.testing.assert_array_equal(second(y1), y2_ref)


@pytest.mark.parametrize("op,time_major", [("UNIDIRECTIONAL_SEQUENCE_RNN", True),
                                           ("UNIDIRECTIONAL_SEQUENCE_RNN", False), ("RNN", False)])
def test_hybrid_rnn_tanh_bit_exact(op, time_major):
    """A hybrid TANH RNN with 3 x 5 outputs per step (whole packets and a scalar tail); the schema has no SIGMOID
    fused activation, so an RNN never needs the position-dependent logistic."""
    B, H, I, T = 3, 5, 4, 40 if op != "RNN" else 1
    rng = np.random.default_rng(len(op) + 7 * time_major)
    model = rnn_model(op, batches=B, units=H, size=I, weights=rng.uniform(-1, 1, (H, I)) * 1.5,
                      recurrent_weights=rng.uniform(-1, 1, (H, H)), bias=rng.uniform(-1, 1, H),
                      weight_type="INT8", time_major=time_major, seq=T, activation="TANH")
    shape = (B, I) if op == "RNN" else ((T, B, I) if time_major else (B, T, I))
    xs = [(rng.standard_normal(shape) * 2).astype(np.float32) for _ in range(3)]
    want = run_interpreter(model, xs)
    ours = load(model)
    assert ours.ops[0].kind == "hybrid"
    for k, x in enumerate(xs):
        np.testing.assert_array_equal(ours(x), want[k], err_msg=f"invoke {k}")
