"""MLI 1.x kernels against a scalar reference written from spec mli.md §5 (the structure is certain, the FXAPI
integer semantics inferred: there are no 1.x kernel vectors), every mode and activation; and the mli1-* targets."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_mli_reference import asl, ints, rnd, sat, wrap

import fusedrnn
import fusedrnn.mli as mli

C = "CONVERGENT"


def table1(kind):
    size, qi, off = {"sigm": (180, 3, 90), "tanh": (178, 4, 89)}[kind]
    f = (lambda v: 1 / (1 + math.exp(-v))) if kind == "sigm" else math.tanh
    L = [min(max(int(math.copysign(math.floor(abs(f((i - off) / 2**qi) * 32768) + 0.5), f((i - off) / 2**qi))),
                 -32768), 32767) for i in range(size)]
    return L, qi, off


T1 = {k: table1(k) for k in ("sigm", "tanh")}


def act1(q, kind, fi, bits):
    L, qi, off = T1[kind]
    shift_in = min(fi - qi, 15)
    if shift_in > 0:
        x = q >> min(max(fi - qi - 15, 0), 15)
        idx = min(max((x >> shift_in) + off, 0), len(L) - 2)
        y = L[idx] - sat(rnd((L[idx] - L[idx + 1]) * (x & ((1 << shift_in) - 1)), shift_in, 32, C), 16)
    else:
        y = L[min(max(asl(q, -shift_in, 32) + off, 0), len(L) - 1)]
    return y if bits == 16 else sat(rnd(y, 8, 16, C), 8)


def dense1(x, h, Wx, Wh, b, f_in, f_prev, f_w, f_b, f_out, flavor):
    """One neuron at a time, one MAC at a time (spec §5.2)."""
    bs, d, osh = f_in + f_w - f_b, f_in - f_prev, f_prev + f_w - f_out
    out = []
    for o in range(len(b)):
        if flavor == "fx16":
            A = asl(2 * b[o], bs, 64)
            for j in range(len(x)):
                A += 2 * x[j] * Wx[o][j]
            A = A >> d if d >= 0 else A << -d
            for k in range(len(h)):
                A += 2 * h[k] * Wh[o][k]
            out.append(sat(rnd(A, osh + 1, 64, C), 16))
        else:
            A = rnd(b[o], -bs, 32, C)
            for j in range(len(x)):
                A = wrap(A + x[j] * Wx[o][j], 32)
            A = rnd(A, d, 32, C)
            for k in range(len(h)):
                A = wrap(A + h[k] * Wh[o][k], 32)
            out.append(sat(rnd(A, osh, 32, C), 8 if flavor == "fx8" else 16))
    return out


FL = {"fx16": (mli.MLI_EL_FX_16, mli.MLI_EL_FX_16, 16), "fx8": (mli.MLI_EL_FX_8, mli.MLI_EL_FX_8, 8),
      "fx8w16d": (mli.MLI_EL_FX_16, mli.MLI_EL_FX_8, 16)}
LSTM = {"fx16": mli.krn_lstm_cell_fx16_v1, "fx8": mli.krn_lstm_cell_fx8, "fx8w16d": mli.krn_lstm_cell_fx8w16d}
RNN = {"fx16": mli.krn_basic_rnn_cell_fx16, "fx8": mli.krn_basic_rnn_cell_fx8,
       "fx8w16d": mli.krn_basic_rnn_cell_fx8w16d}
FC = {"fx16": mli.krn_fully_connected_fx16_v1, "fx8": mli.krn_fully_connected_fx8_v1,
      "fx8w16d": mli.krn_fully_connected_fx8w16d}
MODES = {"one": mli.RNN_ONE_TO_ONE, "b2b": mli.RNN_BATCH_TO_BATCH, "b2l": mli.RNN_BATCH_TO_LAST}
ACTS = {"tanh": mli.RNN_ACT_TANH, "sigm": mli.RNN_ACT_SIGM, "none": mli.RNN_ACT_NONE}


def case(rng, flavor, G, mode):
    de, we, bits = FL[flavor]
    dlo, dhi = (-128, 127) if bits == 8 else (-32768, 32767)
    wlo, whi = (-128, 127) if we == mli.MLI_EL_FX_8 else (-32768, 32767)
    T = 1 if mode == "one" else int(rng.integers(1, 4))
    N, M = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    fb = bits - 1
    f = {"in": int(rng.integers(0, fb + 1)), "w": int(rng.integers(0, (7 if we == mli.MLI_EL_FX_8 else 15) + 1)),
         "cell": int(rng.integers(0, fb + 1))}
    f["b"] = int(max(f["in"] + f["w"] - rng.integers(0, 8), 0))
    shape_w = (G, M, N + M) if G > 1 else (M, N + M)
    return dict(T=T, N=N, M=M, f=f, x=ints(rng, dlo, dhi, (T, N)), h0=ints(rng, dlo, dhi, M),
                c0=ints(rng, dlo, dhi, M), W=ints(rng, wlo, whi, shape_w), b=ints(rng, wlo, whi, shape_w[:-1]))


def L_(a):
    return np.asarray(a).tolist()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(list(FL)), mode=st.sampled_from(list(MODES)),
       act=st.sampled_from(list(ACTS)))
def test_lstm_v1_matches_scalar_reference(seed, flavor, mode, act):
    rng = np.random.default_rng(seed)
    c = case(rng, flavor, 4, mode)
    de, we, bits = FL[flavor]
    f, M, N, T = c["f"], c["M"], c["N"], c["T"]
    f_prev = bits - 1 if act != "none" else int(rng.integers(0, bits))
    xin = c["x"].reshape(-1) if mode == "one" else c["x"]
    out = mli.empty_tensor(de, T * M, frac_bits=f_prev)
    cell = mli.fx_tensor(c["c0"], f["cell"], de)
    st_ = LSTM[flavor](mli.fx_tensor(xin, f["in"], de), mli.fx_tensor(c["h0"], f_prev, de),
                       mli.fx_tensor(c["W"], f["w"], we), mli.fx_tensor(c["b"], f["b"], we),
                       mli.RnnCellCfgDepr(MODES[mode], ACTS[act], mli.empty_tensor(de, 4 * M)), cell, out)
    assert st_ == mli.MLI_STATUS_OK
    # reference
    f_ir, one = bits - 1 - 3, bits - 1
    h, cc = L_(c["h0"]), L_(c["c0"])
    W, b = L_(c["W"]), L_(c["b"])
    outs = []
    for t in range(T):
        ir = [dense1(L_(c["x"][t]), h, [r[:N] for r in W[g]], [r[N:] for r in W[g]], b[g], f["in"], f_prev, f["w"],
                     f["b"], f_ir, flavor) for g in range(4)]
        i = [act1(v, "sigm", f_ir, bits) for v in ir[0]]
        g_ = [act1(v, "tanh", f_ir, bits) for v in ir[1]]
        fg = [act1(v, "sigm", f_ir, bits) for v in ir[2]]
        o = [act1(v, "sigm", f_ir, bits) for v in ir[3]]
        cc = [sat(rnd(rnd(i[m] * g_[m], one - f["cell"], 32, C) + fg[m] * cc[m], one, 32, C), bits) for m in range(M)]
        if act == "none":
            h = [sat(rnd(cc[m] * o[m], f["cell"] + one - f_prev, 32, C), bits) for m in range(M)]
        else:
            h = [sat(rnd(act1(cc[m], act, f["cell"], bits) * o[m], one, 32, C), bits) for m in range(M)]
        outs.append(h)
    assert cell.values().tolist() == cc
    assert out.values().tolist() == (outs if mode == "b2b" else outs[-1])
    assert out.frac_bits == (bits - 1 if act != "none" else f_prev)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(list(FL)), mode=st.sampled_from(list(MODES)),
       act=st.sampled_from(list(ACTS)), stacked=st.integers(1, 3))
def test_basic_rnn_v1_matches_scalar_reference(seed, flavor, mode, act, stacked):
    rng = np.random.default_rng(seed)
    if mode != "one":
        stacked = 1
    c = case(rng, flavor, stacked if stacked > 1 else 1, mode)
    de, we, bits = FL[flavor]
    f, M, N, T = c["f"], c["M"], c["N"], c["T"]
    f_prev = bits - 1 if act != "none" else int(rng.integers(0, bits))
    out = mli.empty_tensor(de, T * M * stacked, frac_bits=f_prev)
    xin = c["x"].reshape(-1) if mode == "one" else c["x"]
    st_ = RNN[flavor](mli.fx_tensor(xin, f["in"], de), mli.fx_tensor(c["h0"], f_prev, de),
                      mli.fx_tensor(c["W"], f["w"], we), mli.fx_tensor(c["b"], f["b"], we),
                      mli.RnnCellCfgDepr(MODES[mode], ACTS[act], mli.empty_tensor(de, M * stacked)), out)
    assert st_ == mli.MLI_STATUS_OK
    f_ir = bits - 1 - 3
    blocks = c["W"].reshape(stacked, M, N + M)
    bias = c["b"].reshape(stacked, M)
    res = []
    for k in range(stacked):
        h = L_(c["h0"])
        outs = []
        Wk = L_(blocks[k])
        for t in range(T):
            ir = dense1(L_(c["x"][t]), h, [r[:N] for r in Wk], [r[N:] for r in Wk], L_(bias[k]), f["in"], f_prev,
                        f["w"], f["b"], f_prev if act == "none" else f_ir, flavor)
            h = ir if act == "none" else [act1(v, act, f_ir, bits) for v in ir]
            outs.append(h)
        res.append(outs if mode == "b2b" else outs[-1])
    exp = res[0] if stacked == 1 else res
    assert out.values().tolist() == exp


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(list(FL)))
def test_fully_connected_v1_matches_scalar_reference(seed, flavor):
    rng = np.random.default_rng(seed)
    c = case(rng, flavor, 1, "one")
    de, we, bits = FL[flavor]
    f = c["f"]
    Wx = c["W"][:, : c["N"]]
    f_out = int(rng.integers(0, f["in"] + f["w"] + 1))
    out = mli.empty_tensor(de, c["M"], frac_bits=f_out)
    x = c["x"].reshape(-1)
    assert FC[flavor](mli.fx_tensor(x, f["in"], de), mli.fx_tensor(Wx, f["w"], we), mli.fx_tensor(c["b"], f["b"], we),
                      out) == mli.MLI_STATUS_OK
    exp = dense1(L_(x), [], L_(Wx), [[] for _ in range(c["M"])], L_(c["b"]), f["in"], f["in"], f["w"], f["b"],
                 f_out, flavor)
    assert out.values().tolist() == exp and out.shape[:out.rank] == [c["M"]] and out.rank == 1


def test_v1_misuse_statuses():
    x = mli.fx_tensor(np.zeros((2, 3), int), 8)
    h = mli.fx_tensor(np.zeros(4, int), 15)
    W = mli.fx_tensor(np.zeros((4, 4, 7), int), 8)
    b = mli.fx_tensor(np.zeros((4, 4), int), 8)
    cfg = mli.RnnCellCfgDepr(mli.RNN_BATCH_TO_BATCH, mli.RNN_ACT_TANH, mli.empty_tensor(mli.MLI_EL_FX_16, 16))
    cell = mli.fx_tensor(np.zeros(4, int), 10)
    f = mli.krn_lstm_cell_fx16_v1
    assert f(x, h, W, b, cfg, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == mli.MLI_STATUS_OK
    no_ir = mli.RnnCellCfgDepr(mli.RNN_BATCH_TO_BATCH, mli.RNN_ACT_TANH)  # 1.1.1's checker: ir_tsr is required
    assert f(x, h, W, b, no_ir, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == mli.MLI_STATUS_BAD_FUNC_CFG
    with mli.build(debug_mode="DBG_MODE_RELEASE"):
        assert f(x, h, W, b, no_ir, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == mli.MLI_STATUS_OK
    assert f(x, h, W, b, cfg, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 7)) == mli.MLI_STATUS_NOT_ENGH_MEM
    assert f(x, h, mli.fx_tensor(np.zeros((4, 4, 6), int), 8), b, cfg, cell,
             mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == mli.MLI_STATUS_SHAPE_MISMATCH
    assert f(x, h, W, b, mli.RnnCellCfgDepr(9, 1), cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == \
        mli.MLI_STATUS_BAD_FUNC_CFG
    assert mli.krn_lstm_cell_fx8(x, h, W, b, cfg, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == \
        mli.MLI_STATUS_TYPE_MISMATCH
    none = mli.RnnCellCfgDepr(mli.RNN_BATCH_TO_BATCH, mli.RNN_ACT_NONE, cfg.ir_tsr)
    assert f(x, h, W, b, none, cell, mli.empty_tensor(mli.MLI_EL_FX_16, 8, frac_bits=3)) == \
        mli.MLI_STATUS_INCOMPATEBLE_TENSORS
    ir = mli.empty_tensor(mli.MLI_EL_FX_16, 15)
    assert f(x, h, W, b, mli.RnnCellCfgDepr(mli.RNN_BATCH_TO_BATCH, mli.RNN_ACT_TANH, ir), cell,
             mli.empty_tensor(mli.MLI_EL_FX_16, 8)) == mli.MLI_STATUS_NOT_ENGH_MEM


@pytest.mark.parametrize("target", ["mli1-fx16", "mli1-fx8", "mli1-fx8w16d"])
@pytest.mark.parametrize("cls,G", [(fusedrnn.LSTM, 4), (fusedrnn.RNN, 1)])
def test_v1_targets_close_to_float_and_lens(target, cls, G):
    rng = np.random.default_rng(4)
    layer = cls(rng.normal(size=(2, G * 6, 5)) * 0.5, rng.normal(size=(2, G * 6, 6)) * 0.4,
                rng.normal(size=(2, G * 6)) * 0.3, direction="bidirectional")
    x = rng.normal(size=(7, 3, 5)).astype(np.float32)
    em = layer.to(target, calibration=x)
    y, _ = em(x)
    ref, _ = layer(x)
    assert np.abs(y - ref).max() < {"mli1-fx16": 0.01, "mli1-fx8": 0.2, "mli1-fx8w16d": 0.08}[target]
    y2, _ = em(x, sequence_lens=np.array([7, 3, 0]))
    yb, _ = em(x[:3, 1:2])
    np.testing.assert_array_equal(y2[:3, 1:2], yb)
    assert np.all(y2[3:, 1] == 0) and np.all(y2[:, 2] == 0)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="gru"):
        fusedrnn.GRU(rng.normal(size=(1, 18, 5)), rng.normal(size=(1, 18, 6))).to(target, calibration=x)
