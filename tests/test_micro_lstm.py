"""The compiled loop of the microcontroller integer LSTMs (targets/_micro_lstm.c, targets/micro_lstm.py) against
the NumPy loops it replaces, TFLM's (int8x16, int16x8) and CMSIS-NN's (s8, s16): bit-exact (``==``) on random
tensors and scales (saturating ones included), cell clips, batches, both walking directions, states and CMSIS-NN's
NULL hidden state, blocks of input terms of every size. The NumPy loops are themselves checked against the TFLM
interpreter (test_tflm_target.py, which now runs the compiled loop by default) and CMSIS-NN's C
(test_cmsis_nn.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tflm_cases import random_codes, random_quantized

from fusedrnn.errors import AttributeValueError
from fusedrnn.numerics import core
from fusedrnn.targets import micro_lstm
from fusedrnn.targets.cmsis_nn.kernel import CmsisLstm, params_from_quantized, requantize_s64
from fusedrnn.targets.tflm.kernel import TflmLstm

pytestmark = pytest.mark.skipif(micro_lstm.load() is None, reason="the compiled micro LSTM kernel is unavailable")


def _same(a, b, msg=""):
    (ya, (ha, ca)), (yb, (hb, cb)) = a, b
    for name, u, v in (("y", ya, yb), ("h", ha, hb), ("c", ca, cb)):
        assert u.dtype == v.dtype and u.shape == v.shape, f"{name} {msg}"
        np.testing.assert_array_equal(u, v, err_msg=f"{name} {msg}")


def _check(kernel, *args, msg: str = "", **kw):
    """kernel.run(*args, **kw) on both loops: the same bits, and the compiled loop really ran (a declined plan
    falls back to NumPy, which would give the same bits too)."""
    want = kernel.run(*args, engine="numpy", **kw)
    got = kernel.run(*args, engine="compiled", **kw)
    assert isinstance(getattr(kernel, "_micro_plan", None), micro_lstm.Plan), getattr(kernel, "_micro_reason", "")
    _same(want, got, msg)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), activation=st.sampled_from(["int8", "int16"]), wide=st.booleans(),
       reverse=st.booleans(), state=st.booleans(), T=st.integers(1, 30), B=st.integers(1, 9))
def test_tflm_compiled_equals_numpy(seed, activation, wide, reverse, state, T, B):
    rng = np.random.default_rng(seed)
    q = random_quantized(rng, activation, wide=wide)
    k = TflmLstm(q)
    x = random_codes(rng, (T, B, q.input_size), activation)
    st0 = (random_codes(rng, (B, q.hidden_size), activation),
           rng.integers(-32768, 32768, (B, q.hidden_size)).astype(np.int16)) if state else None
    _check(k, x, st0, reverse=reverse, msg=f"{activation} wide={wide} reverse={reverse} clip={q.cell_clip}")


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), activation=st.sampled_from(["int8", "int16"]), wide=st.booleans(),
       hidden=st.booleans(), T=st.integers(1, 30), B=st.integers(1, 9))
def test_cmsis_nn_compiled_equals_numpy(seed, activation, wide, hidden, T, B):
    rng = np.random.default_rng(seed)
    q = random_quantized(rng, activation, wide=wide)
    k = CmsisLstm(params_from_quantized(q), "s8" if activation == "int8" else "s16")
    x = random_codes(rng, (T, B, q.input_size), activation)
    h = random_codes(rng, (B, q.hidden_size), activation) if hidden else None  # None: CMSIS-NN's NULL state
    c = rng.integers(-32768, 32768, (B, q.hidden_size)).astype(np.int16)
    _check(k, x, h, c, msg=f"{activation} wide={wide} hidden={hidden}")


@pytest.mark.parametrize("rows", [1, 3, 8])
def test_blocks_of_input_terms(rows, monkeypatch):
    """The input terms are computed for INPUT_BLOCK_ROWS rows at a time before their steps: one step per block,
    several with a shorter last block, one row per block with a wider batch, both walking directions."""
    monkeypatch.setattr(micro_lstm, "INPUT_BLOCK_ROWS", rows)
    rng = np.random.default_rng(40 + rows)
    for activation in ("int8", "int16"):
        q = random_quantized(rng, activation)
        k = TflmLstm(q)
        for B in (1, 2, 3):
            x = random_codes(rng, (int(rng.integers(2, 12)), B, q.input_size), activation)
            for rev in (False, True):
                _check(k, x, reverse=rev)


def test_wide_layers_and_long_sums():
    """H and I past one 16-column tile and past the pairs' 128-pair chunk (int16 sums widened to int64)."""
    rng = np.random.default_rng(7)
    for activation in ("int8", "int16"):
        q = random_quantized(rng, activation, H=37, I=300)
        for k in (TflmLstm(q), CmsisLstm(params_from_quantized(q), "s8" if activation == "int8" else "s16")):
            x = random_codes(rng, (5, 3, q.input_size), activation)
            if isinstance(k, TflmLstm):
                _check(k, x)
            else:
                _check(k, x, random_codes(rng, (3, 37), activation), np.zeros((3, 37), np.int16))


def test_parameters_the_loop_does_not_take_run_on_numpy():
    """A CMSIS-NN s16 shift the SDK's requantization does not take (> 14) is declined by the plan: the NumPy loop
    runs and raises its error; a cell clip beyond int16 (the SDK API takes any int) is declined too."""
    rng = np.random.default_rng(9)
    q = random_quantized(rng, "int16")
    p = params_from_quantized(q)
    p.forget_gate.input_shift = 15
    k = CmsisLstm(p, "s16")
    x = random_codes(rng, (3, 2, q.input_size), "int16")
    with pytest.raises(AttributeValueError, match="shift"):
        k.run(x, None, np.zeros((2, q.hidden_size), np.int16))
    assert k._micro_plan is False and "shift" in k._micro_reason
    p = params_from_quantized(q)
    p.cell_clip = 40000
    k = CmsisLstm(p, "s16")
    c = np.zeros((2, q.hidden_size), np.int16)
    y, _ = k.run(x, None, c)
    assert k._micro_plan is False and "int16" in k._micro_reason
    _same(k.run(x, None, c, engine="numpy"), (y, k.run(x, None, c)[1]))


def test_engine_numpy_and_auto():
    rng = np.random.default_rng(11)
    q = random_quantized(rng)
    k = TflmLstm(q)
    x = random_codes(rng, (4, 2, q.input_size), "int8")
    with micro_lstm.use_engine("numpy"):
        y, _ = k.run(x)
    assert getattr(k, "_micro_plan", None) is None  # the NumPy loop ran: no plan was made
    np.testing.assert_array_equal(k.run(x)[0], y)
    assert isinstance(k._micro_plan, micro_lstm.Plan)


def test_requantizations_equal_numpy():
    """The loop's three FC requantizations on random and extreme sums, multipliers and shifts over the ranges its
    plan takes: TFLite's MBQM of the int32-wrapped sum, its int64 form (the multiplier reduced to 16 bits, 0x7FFF
    from 0x7FFF0000 on) and CMSIS-NN's arm_nn_requantize_s64 (r = INT32_MAX: r + 1 wraps)."""
    lib = micro_lstm.load()
    rng = np.random.default_rng(5)
    n = 4000
    big = np.concatenate([rng.integers(-(1 << 46), 1 << 46, n), [(1 << 47) - 1, -(1 << 47), 0, 1, -1, (1 << 31) - 1,
                                                               -(1 << 31), 1 << 31]])
    for kind in range(3):
        for i, acc in enumerate(big.tolist()):
            if kind == 0:
                Q = int(rng.choice([rng.integers(-(1 << 31), 1 << 31), -(1 << 31), (1 << 31) - 1, 1 << 30]))
                S = int(rng.integers(-62, 63))
                want = core.wrap(core.Requant(Q, S)(core.wrap(np.int64(acc), 32)), 32)
            elif kind == 1:
                Q = int(rng.choice([rng.integers(0, 1 << 31), 0x7FFF0000 - 1, 0x7FFF0000, (1 << 31) - 1]))
                S = int(rng.integers(-47, 15))
                want = core.wrap(core.mbqm64(np.int64(acc), Q, S), 32)
            else:
                Q, S = int(rng.integers(0, (1 << 15) + 1)), int(rng.integers(-49, 15))
                if i < 8:
                    acc, Q, S = (1 << 31) - 1 + (i << 32), 1, 14  # r = INT32_MAX
                want = requantize_s64(np.int64(acc), Q, S)
            assert lib.micro_requant(kind, acc, Q, S) == int(want), (kind, acc, Q, S)


def _scaled(q, rec: float = 1.0, inp: float = 1.0, **changes):
    """q with its weight scales multiplied (FC outputs, and so gates, far beyond int16 for large factors)."""
    return dataclasses.replace(q, R_scale=tuple(float(np.float32(s * rec)) for s in q.R_scale),
                               W_scale=tuple(float(np.float32(s * inp)) for s in q.W_scale), **changes)


@pytest.mark.parametrize("seed", range(6))
def test_saturating_terms(seed):
    """Recurrent terms far beyond int16 against input terms of the other sign (TFLM saturates the recurrent term
    before the sum, CMSIS-NN does not), and a cell scale below 2^-15 with saturated gates (TFLM saturates
    MBQM(i·g) to int16, CMSIS-NN does not): the two loops' switches, each against its NumPy loop."""
    rng = np.random.default_rng(60 + seed)
    activation = ("int8", "int16")[seed % 2]
    q = _scaled(random_quantized(rng, activation, wide=True), rec=float(rng.uniform(20, 200)),
                inp=float(rng.uniform(5, 50)), c_scale=float(np.float32(2.0**-15 * rng.uniform(0.5, 0.9))),
                cell_clip=float(rng.choice([0.0, 0.5])))
    T, B = 12, 3
    x = random_codes(rng, (T, B, q.input_size), activation)
    h = random_codes(rng, (B, q.hidden_size), activation)
    c = rng.integers(-32768, 32768, (B, q.hidden_size)).astype(np.int16)
    _check(TflmLstm(q), x, (h, c), msg="tflm")
    _check(CmsisLstm(params_from_quantized(q), "s8" if activation == "int8" else "s16"), x, h, c, msg="cmsis")


def test_long_sums_at_the_extremes():
    """int16 inputs at 32767 and weights at 127 over 600 inputs: a sum of 2.5e9, past int32, so the pairs' int32
    chunks must be widened in time (16-bit variants), and the same row of int8 codes."""
    H, I = 3, 600
    w = np.full((H, I), 127, np.int8)
    r = np.full((H, H), -127, np.int8)
    for activation, top in (("int16", 32767), ("int8", 127)):
        q = dataclasses.replace(random_quantized(np.random.default_rng(1), activation, H=H, I=I),
                                W=(w,) * 4, R=(r,) * 4)
        x = np.full((4, 2, I), top, np.int16 if activation == "int16" else np.int8)
        _check(TflmLstm(q), x, msg=activation)
        _check(CmsisLstm(params_from_quantized(q), "s8" if activation == "int8" else "s16"), x, None,
               np.zeros((2, H), np.int16), msg=activation)


def _api_params(H: int, I: int, T: int, B: int, bias_fn=None):  # noqa: E741
    """CMSIS-NN parameters as a user of its API writes them (the plain structures, any values)."""
    from fusedrnn.targets.cmsis_nn.api import LstmGate, LstmParams

    rng = np.random.default_rng(0)

    def gate(g):
        bias = rng.integers(-2000, 2000, H) if bias_fn is None else bias_fn(g)
        return LstmGate((1 << 30) + 1, -3, rng.integers(-128, 128, (H, I)).astype(np.int8), bias, 1 << 30, -3,
                        rng.integers(-128, 128, (H, H)).astype(np.int8), rng.integers(-2000, 2000, H))

    return LstmParams(True, B, T, I, H, 0, 1 << 30, -14, 1 << 30, -14, 0, -12, 1 << 30, -15, 0, *(gate(g)
                                                                                                  for g in range(4)))


@pytest.mark.parametrize("variant", ["s8", "s16"])
def test_sdk_api_edge_cases_agree_with_numpy(variant):
    """Found in review: no inputs (the pairs' product wrote nothing, and a reused scratch buffer was read), no
    units (an IndexError), an effective bias of INT64_MIN (np.abs keeps it negative, so no bound caught it), all
    through CMSIS-NN's API with the default engine, after a call that filled the thread's scratch."""
    from fusedrnn.targets.cmsis_nn import api

    fn, dt = (api.lstm_unidirectional_s8, np.int8) if variant == "s8" else (api.lstm_unidirectional_s16, np.int16)

    def run(p, engine):
        T, B, I, H = p.time_steps, p.batch_size, p.input_size, p.hidden_size  # noqa: E741
        out = np.zeros(T * B * H, dt)
        ctx = api.LstmContext(np.zeros(B * H, np.int16), np.full(B * H, 3, dt))
        with micro_lstm.use_engine(engine):
            fn(np.arange(T * B * I).astype(dt), out, p, ctx)
        return out, ctx.cell_state, ctx.hidden_state

    run(_api_params(40, 60, 20, 8), "auto")  # leaves this thread's scratch full of values
    huge = lambda g: np.where(np.arange(4) == 0, np.int64(-(1 << 63)), 100) if g == 1 else np.full(4, 100)  # noqa
    for p in (_api_params(5, 0, 4, 3), _api_params(0, 3, 4, 3), _api_params(4, 3, 3, 2, huge)):
        for a, b in zip(run(p, "numpy"), run(p, "auto"), strict=True):
            np.testing.assert_array_equal(a, b)


def test_values_beyond_their_types_run_as_the_numpy_loop_reads_them():
    """Found in review: codes in a wider array beyond int8, and a cell beyond int16, are used as given by the NumPy
    loops (no cast); the compiled loop declines such calls instead of wrapping them. A flat h [B*H] works too."""
    rng = np.random.default_rng(21)
    q = random_quantized(rng, "int8")
    H, I = q.hidden_size, q.input_size  # noqa: E741
    x = random_codes(rng, (4, 2, I), "int8").astype(np.int32)
    x[0, 0, 0] = 300
    h = random_codes(rng, (2, H), "int8")
    c = rng.integers(-32768, 32768, (2, H)).astype(np.int64)
    for kernel in (TflmLstm(q), CmsisLstm(params_from_quantized(q), "s8")):
        for xs, cs in ((x, c), (x.clip(-128, 127), c + 100000)):
            args = (xs, (h, cs)) if isinstance(kernel, TflmLstm) else (xs, h, cs)
            _same(kernel.run(*args, engine="numpy"), kernel.run(*args, engine="compiled"))
    k = CmsisLstm(params_from_quantized(q), "s8")
    xc = x.clip(-128, 127).astype(np.int8)
    _check(k, xc, h.reshape(-1), c.astype(np.int16))
