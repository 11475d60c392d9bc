"""Targets mli2-*: layer.to(target, calibration) runs MLI's kernels on batches; each batch row equals the
faithful single-sequence MLI API call on the prepared tensors; sequence_lens, directions and the unsupported
options behave as documented."""

import numpy as np
import pytest

import fusedrnn
import fusedrnn.mli as mli
from fusedrnn.targets import registry

FLAVOR_FN = {
    ("lstm", "mli2-sa8"): mli.krn_lstm_cell_sa8_sa8_sa32, ("lstm", "mli2-fx16"): mli.krn_lstm_cell_fx16,
    ("lstm", "mli2-fx16_fx8_fx8"): mli.krn_lstm_cell_fx16_fx8_fx8, ("gru", "mli2-sa8"): mli.krn_gru_cell_sa8_sa8_sa32,
    ("gru", "mli2-fx16"): mli.krn_gru_cell_fx16, ("gru", "mli2-fx16_fx8_fx8"): mli.krn_gru_cell_fx16_fx8_fx8,
}
TARGETS = ("mli2-sa8", "mli2-fx16", "mli2-fx16_fx8_fx8")


def make(cls, G, direction="forward", seed=0, T=7, B=3, I=5, H=6):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    layer = cls(rng.normal(size=(D, G * H, I)) * 0.5, rng.normal(size=(D, G * H, H)) * 0.4,
                rng.normal(size=(D, G * H)) * 0.3, rng.normal(size=(D, G * H)) * 0.1, direction=direction)
    return layer, rng.normal(size=(T, B, I)).astype(np.float32)


def _tensor(flavor, values, q, el8=False, per_gate=None, bias=False):
    if flavor == "sa8":
        if per_gate is not None:
            m, f = per_gate
            return mli.sa_tensor(values, m, 0, f, dim=0, el_type=mli.MLI_EL_SA_32 if bias else mli.MLI_EL_SA_8)
        return mli.sa_tensor(values, q[0], q[1], q[2])
    return mli.fx_tensor(values, q, mli.MLI_EL_FX_8 if el8 else mli.MLI_EL_FX_16)


def api_row(cell, target, d, x_row, h0, c0, direction):
    """Run the faithful MLI API kernel for one sequence with the target's prepared tensors (ints in, ints out)."""
    flavor = {"mli2-sa8": "sa8", "mli2-fx16": "fx16", "mli2-fx16_fx8_fx8": "fx16_fx8_fx8"}[target]
    q = d.q
    el8 = flavor == "fx16_fx8_fx8"
    _G, M = d.Wo.shape[0], d.Wo.shape[-1]
    if flavor == "sa8":
        m, f = q.wi
        mo, fo = q.wo
        bm = np.round(q.inp[0] * m / 2**15).astype(int)
        args = [_tensor(flavor, x_row, q.inp), _tensor(flavor, h0, q.h0),
                _tensor(flavor, d.Wi, None, per_gate=(m, f)), _tensor(flavor, d.Wo, None, per_gate=(mo, fo)),
                _tensor(flavor, d.b, None, per_gate=(bm, q.inp[2] + f - 15), bias=True)]
        out = mli.empty_tensor(mli.MLI_EL_SA_8, x_row.shape[0] * M, scale=q.out[0], zero_point=q.out[1],
                               scale_frac_bits=q.out[2])
        cell_t = None if c0 is None else mli.sa_tensor(c0, *q.cell)
    else:
        args = [mli.fx_tensor(x_row, q.inp), mli.fx_tensor(h0, q.h0), _tensor(flavor, d.Wi, q.wi, el8),
                _tensor(flavor, d.Wo, q.wo, el8), _tensor(flavor, d.b, q.bias_frac, el8)]
        out = mli.empty_tensor(mli.MLI_EL_FX_16, x_row.shape[0] * M, frac_bits=q.out)
        cell_t = None if c0 is None else mli.fx_tensor(c0, q.cell)
    luts = [mli.Lut(), mli.Lut()]
    mli.krn_tanh_create_lut(luts[0])
    mli.krn_sigm_create_lut(luts[1])
    cfg = mli.RnnCellCfg(mli.RNN_DIR_BACKWARD if direction else mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL,
                         mli.RNN_ACT_TANH, np.zeros(4096, np.int8))
    fn = FLAVOR_FN[(cell, target)]
    st = fn(*args, *luts, cfg, cell_t, out) if cell == "lstm" else fn(*args, *luts, cfg, out)
    assert st == mli.MLI_STATUS_OK
    return out.values(), (None if cell_t is None else cell_t.values())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cls,G", [(fusedrnn.LSTM, 4), (fusedrnn.GRU, 3)])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_batch_rows_equal_the_mli_api_kernel(target, cls, G, direction):
    layer, x = make(cls, G, direction)
    run = registry.get(target).prepare(layer.spec, [x.astype(np.float64)])
    d = run.directions[0]
    T, B, _ = x.shape
    H = layer.hidden_size
    rng = np.random.default_rng(5)
    h0 = rng.uniform(-0.9, 0.9, (1, B, H)).astype(np.float32)
    states = (h0, rng.uniform(-1, 1, (1, B, H)).astype(np.float32)) if cls is fusedrnn.LSTM else (h0,)
    Y, st = run(x, states, None)
    xq = d.quantize(x, d.q.inp)
    h0q = d.quantize(h0[0], d.q.h0)
    c0q = d.quantize(states[1][0], d.q.cell) if cls is fusedrnn.LSTM else None
    for b in range(B):
        out, cell = api_row(layer.cell, target, d, xq[:, b], h0q[b], None if c0q is None else c0q[b],
                            direction == "reverse")
        proc = Y[::-1, 0, b] if direction == "reverse" else Y[:, 0, b]  # MLI stores in processing order
        np.testing.assert_array_equal(d.quantize(proc, d.q.out), out)
        np.testing.assert_array_equal(d.quantize(st[0][0, b], d.q.out), out[-1])
        if cell is not None:
            np.testing.assert_array_equal(d.quantize(st[1][0, b], d.q.cell), cell)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cls,G", [(fusedrnn.LSTM, 4), (fusedrnn.GRU, 3), (fusedrnn.RNN, 1)])
def test_close_to_float_and_sequence_lens(target, cls, G):
    layer, x = make(cls, G, "bidirectional", seed=1)
    em = layer.to(target, calibration=x)
    y, _ = em(x)
    ref, _ = layer(x)
    tol = {"mli2-sa8": 0.15, "mli2-fx16": 0.01, "mli2-fx16_fx8_fx8": 0.08}[target]
    assert y.shape == ref.shape and np.abs(y - ref).max() < tol
    lens = np.array([7, 2, 0])
    y2, st2 = em(x, sequence_lens=lens)
    for b, n in enumerate(lens):
        assert np.all(y2[n:, b] == 0)
        if n:  # a row's valid prefix equals running that row alone
            yb, sb = em(x[:n, b:b + 1])
            np.testing.assert_array_equal(y2[:n, b:b + 1], yb)
            h2 = st2[0] if cls is fusedrnn.LSTM else st2
            hb = sb[0] if cls is fusedrnn.LSTM else sb
            np.testing.assert_array_equal(h2[:, b:b + 1], hb)


def test_registry_entries_and_unsupported_options():
    for name in TARGETS:
        t = registry.get(name)
        assert t.family == "mli" and t.bit_exact and t.needs_calibration
    layer, x = make(fusedrnn.LSTM, 4)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="calibration"):
        layer.to("mli2-sa8")
    rng = np.random.default_rng(0)
    peep = fusedrnn.LSTM(layer.W, layer.R, P=rng.normal(size=(1, 3, 6)))
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="peepholes"):
        peep.to("mli2-sa8", calibration=x)
    gru = fusedrnn.GRU(rng.normal(size=(1, 18, 5)), rng.normal(size=(1, 18, 6)), linear_before_reset=True)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="linear_before_reset"):
        gru.to("mli2-fx16", calibration=x)
    clipped = fusedrnn.LSTM(layer.W, layer.R, clip=3.0)
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="clip"):
        clipped.to("mli2-fx16", calibration=x)
    with pytest.raises(fusedrnn.ShapeError, match="calibration"):
        layer.to("mli2-sa8", calibration=np.zeros((3, 2, 4)))


def test_rounding_build_flags_apply_at_call_time():
    layer, x = make(fusedrnn.LSTM, 4, seed=3, T=20)
    em = layer.to("mli2-sa8", calibration=x)
    with mli.build("UP"):
        up, _ = em(x)
    with mli.build("CONVERGENT", full_accu=True):
        conv, _ = em(x)
    assert up.shape == conv.shape and not np.array_equal(up, conv)


def test_batch_first_layer_and_calibration_list():
    layer, x = make(fusedrnn.GRU, 3, seed=6)
    bf = fusedrnn.GRU(layer.W, layer.R, layer.b_x, layer.b_h, batch_first=True)
    xb = np.ascontiguousarray(x.transpose(1, 0, 2))
    y_tm, _ = layer.to("mli2-sa8", calibration=[x[:4], x[4:]])(x)
    y_bf, _ = bf.to("mli2-sa8", calibration=[xb[:, :4], xb[:, 4:]])(xb)
    np.testing.assert_array_equal(y_bf, y_tm.transpose(1, 0, 2))
