"""Documented misuse returns the documented mli_status (never an exception), for FC, rnn_dense, LSTM, GRU,
the element-wise and activation kernels, LUT creation and hlp_* helpers; plus a fuzz of tensor descriptors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusedrnn.mli as mli

S = mli.Status


def fc_fx16(N=6, M=4):
    rng = np.random.default_rng(0)
    return dict(in_=mli.fx_tensor(rng.integers(-900, 900, N), 10),
                weights=mli.fx_tensor(rng.integers(-900, 900, (N, M)), 12),
                bias=mli.fx_tensor(rng.integers(-900, 900, M), 14),
                cfg=mli.FullyConnectedCfg(),
                out=mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=8))


def fc_sa8(N=6, M=4, per_axis=False):
    rng = np.random.default_rng(1)
    ws = [16000 + 10 * k for k in range(M)] if per_axis else 16000
    w = mli.sa_tensor(rng.integers(-127, 128, (N, M)), ws, 0, 20, dim=1 if per_axis else -1)
    s_in = 20000
    bs = [int(np.rint(s_in * s / 2**15)) for s in np.atleast_1d(ws)]  # in.sfb 16 + w.sfb 20 - b.sfb 21 = 15
    b = mli.sa_tensor(rng.integers(-5000, 5000, M), bs, 0, 21, dim=0 if per_axis else -1, el_type=mli.MLI_EL_SA_32)
    return dict(in_=mli.sa_tensor(rng.integers(-128, 128, N), s_in, 3, 16), weights=w, bias=b,
                cfg=mli.FullyConnectedCfg(), out=mli.empty_tensor(mli.MLI_EL_SA_8, M, scale=18000, zero_point=-5,
                                                                  scale_frac_bits=14))


def call_fc(fn, a):
    return fn(a["in_"], a["weights"], a["bias"], a["cfg"], a["out"])


def test_fc_valid_calls_are_ok():
    assert call_fc(mli.krn_fully_connected_fx16, fc_fx16()) == S.MLI_STATUS_OK
    assert call_fc(mli.krn_fully_connected_sa8_sa8_sa32, fc_sa8()) == S.MLI_STATUS_OK
    assert call_fc(mli.krn_fully_connected_sa8_sa8_sa32, fc_sa8(per_axis=True)) == S.MLI_STATUS_OK


@pytest.mark.parametrize("mutate,expected", [
    (lambda a: a.update(weights=mli.fx_tensor(np.zeros((7, 4), int), 12)), S.MLI_STATUS_SHAPE_MISMATCH),
    (lambda a: a.update(bias=mli.fx_tensor(np.zeros(5, int), 14)), S.MLI_STATUS_SHAPE_MISMATCH),
    (lambda a: a.update(bias=mli.fx_tensor(np.zeros((1, 4), int), 14)), S.MLI_STATUS_SHAPE_MISMATCH),
    # an output shorter than its shape (mli_chk_tensor), and one of the wrong length (mli_chk_fully_connected)
    (lambda a: setattr(a["out"], "capacity", 6), S.MLI_STATUS_NOT_ENGH_MEM),
    (lambda a: a.update(out=mli.empty_tensor(mli.MLI_EL_FX_16, 3, frac_bits=8)), S.MLI_STATUS_SHAPE_MISMATCH),
    (lambda a: a.update(bias=mli.fx_tensor(np.zeros(4, int), 23)), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: a.update(weights=mli.fx_tensor(np.zeros((6, 4), int), 5, mli.MLI_EL_FX_8)), S.MLI_STATUS_TYPE_MISMATCH),
    (lambda a: a.update(out=None), S.MLI_STATUS_ARGUMENT_ERROR),
    (lambda a: setattr(a["in_"], "data", None), S.MLI_STATUS_BAD_TENSOR),
    (lambda a: setattr(a["in_"], "capacity", 4), S.MLI_STATUS_NOT_ENGH_MEM),  # check_tensor_private's status
    (lambda a: a.update(cfg=mli.FullyConnectedCfg(mli.ReluCfg(9))), S.MLI_STATUS_BAD_FUNC_CFG),
])
def test_fc_fx16_misuse(mutate, expected):
    a = fc_fx16()
    mutate(a)
    assert call_fc(mli.krn_fully_connected_fx16, a) == expected


@pytest.mark.parametrize("mutate,expected", [
    (lambda a: setattr(a["weights"], "zero_point", np.array([2], np.int16)), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: setattr(a["bias"], "zero_point", np.array([1], np.int16)), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: setattr(a["in_"], "zero_point", np.array([200], np.int16)), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: setattr(a["out"], "zero_point", np.array([-129], np.int16)), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: setattr(a["bias"], "scale", a["bias"].scale + 2), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    (lambda a: a.update(bias=mli.fx_tensor(np.zeros(4, int), 3)), S.MLI_STATUS_TYPE_MISMATCH),
])
def test_fc_sa8_misuse(mutate, expected):
    a = fc_sa8()
    mutate(a)
    assert call_fc(mli.krn_fully_connected_sa8_sa8_sa32, a) == expected


def test_fc_sa8_bias_scale_within_one_lsb_is_accepted():
    a = fc_sa8()
    a["bias"].scale = a["bias"].scale + 1
    assert call_fc(mli.krn_fully_connected_sa8_sa8_sa32, a) == S.MLI_STATUS_OK


def test_fc_sa8_per_axis_weights_must_be_on_output_dim():
    a = fc_sa8(per_axis=True)
    a["bias"].dim = -1
    a["bias"].scale, a["bias"].zero_point = a["bias"].scale[:1], a["bias"].zero_point[:1]
    a["bias"].scale_frac_bits = a["bias"].scale_frac_bits[:1]
    assert call_fc(mli.krn_fully_connected_sa8_sa8_sa32, a) == S.MLI_STATUS_INCOMPATEBLE_TENSORS


def dense_args(n=2):
    rng = np.random.default_rng(2)
    ins = [mli.fx_tensor(rng.integers(-500, 500, 3 + i), 12) for i in range(n)]
    ws = [mli.fx_tensor(rng.integers(-500, 500, (3 + i, 5)), 12) for i in range(n)]
    return ins, ws, mli.fx_tensor(rng.integers(-500, 500, 5), 12), mli.RnnDenseCfg(n), \
        mli.empty_tensor(mli.MLI_EL_FX_16, 5, frac_bits=10)


def test_rnn_dense_misuse():
    f = mli.krn_rnn_dense_fx16
    ins, ws, b, cfg, out = dense_args()
    assert f(ins, ws, b, cfg, out) == S.MLI_STATUS_OK
    assert f(ins, ws, b, mli.RnnDenseCfg(5), out) == S.MLI_STATUS_BAD_FUNC_CFG
    assert f(ins, ws, b, mli.RnnDenseCfg(0), out) == S.MLI_STATUS_BAD_FUNC_CFG
    assert f(ins, ws[::-1], b, cfg, out) == S.MLI_STATUS_SHAPE_MISMATCH
    # the wrong output length is mli_chk_rnn_dense's SHAPE_MISMATCH; a container short of the shape NOT_ENGH_MEM
    assert f(ins, ws, b, cfg, mli.empty_tensor(mli.MLI_EL_FX_16, 4, frac_bits=10)) == S.MLI_STATUS_SHAPE_MISMATCH
    short = mli.empty_tensor(mli.MLI_EL_FX_16, 5, frac_bits=10)
    short.capacity = 8
    assert f(ins, ws, b, cfg, short) == S.MLI_STATUS_NOT_ENGH_MEM
    assert f(ins, ws, b, cfg, mli.empty_tensor(mli.MLI_EL_FX_16, 5, frac_bits=25)) == \
        S.MLI_STATUS_INCOMPATEBLE_TENSORS
    assert mli.krn_rnn_dense_sa8_sa8_sa32(ins, ws, b, cfg, out) == S.MLI_STATUS_TYPE_MISMATCH


def cell_args(G=4, flavor="fx16", T=3, N=4, M=5, per_axis=True):
    rng = np.random.default_rng(3)
    if flavor == "fx16":
        def t(shape, frac):
            return mli.fx_tensor(rng.integers(-3000, 3000, shape), frac)
        a = dict(in_=t((T, N), 12), prev_out=t(M, 15), weights_in=t((G, N, M), 14), weights_out=t((G, M, M), 14),
                 bias=t((G, M), 14), out=mli.empty_tensor(mli.MLI_EL_FX_16, T * M, frac_bits=15))
        if G == 4:
            a["cell"] = t(M, 12)
    else:
        ws = [16000] * G if per_axis else 16000
        dim = 0 if per_axis else -1
        a = dict(in_=mli.sa_tensor(rng.integers(-128, 128, (T, N)), 20000, 3, 21),
                 prev_out=mli.sa_tensor(rng.integers(-128, 128, M), 20000, -3, 22),
                 weights_in=mli.sa_tensor(rng.integers(-127, 128, (G, N, M)), ws, 0, 22, dim=dim),
                 weights_out=mli.sa_tensor(rng.integers(-127, 128, (G, M, M)), ws, 0, 22, dim=dim),
                 bias=mli.sa_tensor(rng.integers(-9000, 9000, (G, M)), [int(20000 * 16000 / 2**15)] * G if per_axis
                                    else int(20000 * 16000 / 2**15), 0, 28, dim=dim, el_type=mli.MLI_EL_SA_32),
                 out=mli.empty_tensor(mli.MLI_EL_SA_8, T * M, scale=20000, zero_point=2, scale_frac_bits=22))
        if G == 4:
            a["cell"] = mli.sa_tensor(rng.integers(-128, 128, M), 18000, 0, 20)
    a["cfg"] = mli.RnnCellCfg(mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL, mli.RNN_ACT_TANH, np.zeros(4096, np.int8))
    a["tanh_lut"], a["sigm_lut"] = mli.Lut(), mli.Lut()
    assert mli.krn_tanh_create_lut(a["tanh_lut"]) == S.MLI_STATUS_OK
    assert mli.krn_sigm_create_lut(a["sigm_lut"]) == S.MLI_STATUS_OK
    return a


def call_cell(fn, a):
    args = [a["in_"], a["prev_out"], a["weights_in"], a["weights_out"], a["bias"], a["tanh_lut"], a["sigm_lut"],
            a["cfg"]]
    return fn(*args, a["cell"], a["out"]) if "cell" in a else fn(*args, a["out"])


CELLS = [(mli.krn_lstm_cell_fx16, 4, "fx16"), (mli.krn_gru_cell_fx16, 3, "fx16"),
         (mli.krn_lstm_cell_sa8_sa8_sa32, 4, "sa8"), (mli.krn_gru_cell_sa8_sa8_sa32, 3, "sa8")]


@pytest.mark.parametrize("fn,G,flavor", CELLS)
def test_cell_valid_call_is_ok(fn, G, flavor):
    a = cell_args(G, flavor)
    assert call_cell(fn, a) == S.MLI_STATUS_OK
    assert a["out"].rank == 2 and a["out"].shape == [3, 5, 0, 0]  # shape[MLI_MAX_RANK], rank entries count


@pytest.mark.parametrize("fn,G,flavor", CELLS)
@pytest.mark.parametrize("what,expected", [
    ("in_rank", S.MLI_STATUS_SHAPE_MISMATCH),
    ("w_shape", S.MLI_STATUS_SHAPE_MISMATCH),
    ("bias_shape", S.MLI_STATUS_SHAPE_MISMATCH),
    ("out_small", S.MLI_STATUS_BAD_TENSOR),
    ("scratch_small", S.MLI_STATUS_BAD_FUNC_CFG),
    ("bad_direction", S.MLI_STATUS_BAD_FUNC_CFG),
    ("bad_act", S.MLI_STATUS_BAD_FUNC_CFG),
    ("no_lut", S.MLI_STATUS_ARGUMENT_ERROR),
    ("short_lut", S.MLI_STATUS_NOT_ENGH_MEM),
    ("w_type", S.MLI_STATUS_TYPE_MISMATCH),
    ("w_stride", S.MLI_STATUS_INCOMPATEBLE_TENSORS),
])
def test_cell_misuse(fn, G, flavor, what, expected):
    a = cell_args(G, flavor)
    if what == "in_rank":
        a["in_"].shape, a["in_"].rank, a["in_"].mem_stride = [12], 1, [1]
    elif what == "w_shape":
        a["weights_out"].shape = [G, 5, 4]
    elif what == "bias_shape":
        a["bias"].shape, a["bias"].rank, a["bias"].mem_stride = [G * 5], 1, [1]
        if flavor == "sa8":
            b = a["bias"]
            b.dim, b.scale, b.zero_point, b.scale_frac_bits = -1, b.scale[:1], b.zero_point[:1], b.scale_frac_bits[:1]
    elif what == "out_small":  # a valid descriptor (shape [14], 28 bytes) short of the T*M results: BAD_TENSOR
        a["out"].shape[0], a["out"].capacity = 14, 14 * a["out"].element_size
    elif what == "scratch_small":
        a["cfg"].scratch_capacity = G * 5 - 1
    elif what == "bad_direction":
        a["cfg"].direction = 7
    elif what == "bad_act":
        a["cfg"].act = 3
    elif what == "no_lut":
        a["tanh_lut"] = None
    elif what == "short_lut":
        a["sigm_lut"].data = a["sigm_lut"].data[:100]
    elif what == "w_type":
        w = a["weights_in"]
        a["weights_in"] = mli.Tensor(w.data.astype(np.int32), w.dims, el_type=mli.MLI_EL_SA_32, scale=w.scale,
                                     zero_point=w.zero_point, scale_frac_bits=w.scale_frac_bits, dim=w.dim)
    elif what == "w_stride":
        w = a["weights_in"]
        w.mem_stride = [w.shape[1] * w.shape[2] * 2, w.shape[2] * 2, 2]
        w.data = np.repeat(w.data, 2)
        w.capacity = w.data.nbytes
    assert call_cell(fn, a) == expected


@pytest.mark.parametrize("fn,G", [(mli.krn_lstm_cell_sa8_sa8_sa32, 4), (mli.krn_gru_cell_sa8_sa8_sa32, 3)])
def test_sa8_cell_quantization_misuse(fn, G):
    a = cell_args(G, "sa8")
    a["weights_in"].zero_point = np.array([0, 1, 0, 0][:G], np.int16)
    assert call_cell(fn, a) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    a = cell_args(G, "sa8")
    a["in_"].zero_point = np.array([-200], np.int16)
    assert call_cell(fn, a) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    a = cell_args(G, "sa8")  # mixed per-axis weights and per-tensor recurrent weights
    wo = a["weights_out"]
    wo.dim, wo.scale, wo.zero_point, wo.scale_frac_bits = -1, wo.scale[:1], wo.zero_point[:1], wo.scale_frac_bits[:1]
    assert call_cell(fn, a) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    a = cell_args(G, "sa8")
    a["bias"].scale = a["bias"].scale * 2
    assert call_cell(fn, a) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    assert call_cell(fn, cell_args(G, "sa8", per_axis=False)) == S.MLI_STATUS_OK


def test_lstm_cell_shape_and_missing_cell():
    a = cell_args(4, "fx16")
    a["cell"].shape = [4]
    assert call_cell(mli.krn_lstm_cell_fx16, a) == S.MLI_STATUS_SHAPE_MISMATCH
    a = cell_args(4, "fx16")
    a["cell"] = None
    assert call_cell(mli.krn_lstm_cell_fx16, a) == S.MLI_STATUS_ARGUMENT_ERROR


def test_eltwise_and_activation_misuse():
    x = mli.fx_tensor(np.arange(6), 8)
    y = mli.fx_tensor(np.arange(5), 8)
    out = mli.empty_tensor(mli.MLI_EL_FX_16, 6, frac_bits=8)
    assert mli.krn_eltwise_add_fx16(x, x, out) == S.MLI_STATUS_OK
    assert mli.krn_eltwise_add_fx16(x, y, out) == S.MLI_STATUS_SHAPE_MISMATCH
    assert mli.krn_eltwise_add_fx16(x, mli.fx_tensor([3], 8), out) == S.MLI_STATUS_OK  # scalar broadcast
    assert mli.krn_eltwise_mul_fx16(x, x, mli.empty_tensor(mli.MLI_EL_FX_16, 5)) == S.MLI_STATUS_SHAPE_MISMATCH
    short = mli.empty_tensor(mli.MLI_EL_FX_16, 6)
    short.capacity = 10
    assert mli.krn_eltwise_mul_fx16(x, x, short) == S.MLI_STATUS_NOT_ENGH_MEM
    assert mli.krn_eltwise_mul_sa8(x, x, out) == S.MLI_STATUS_TYPE_MISMATCH
    assert mli.krn_eltwise_sub_fx16(x, x, mli.empty_tensor(mli.MLI_EL_SA_8, 6)) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    lut = mli.Lut()
    assert mli.krn_tanh_fx16(x, lut, out) == S.MLI_STATUS_ARGUMENT_ERROR
    assert mli.krn_tanh_create_lut(mli.Lut(np.zeros(10, np.int16))) == S.MLI_STATUS_NOT_ENGH_MEM
    assert mli.krn_tanh_create_lut(lut) == S.MLI_STATUS_OK and lut.length == mli.krn_tanh_get_lut_size() // 2
    assert mli.krn_tanh_fx16(x, lut, out) == S.MLI_STATUS_OK and out.frac_bits == 15
    assert mli.krn_tanh_sa8(x, lut, out) == S.MLI_STATUS_TYPE_MISMATCH


def test_hlp_helpers():
    t = mli.sa_tensor(np.zeros((2, 3), int), [100, 200, 300], [1, 2, 3], [5, 6, 7], dim=1)
    assert mli.hlp_count_elem_num(t) == 6 and mli.hlp_count_elem_num(t, 1) == 3
    assert mli.hlp_tensor_element_size(t) == 1
    assert (mli.hlp_tensor_scale(t, 2), mli.hlp_tensor_scale_shift(t, 1), mli.hlp_tensor_zero_offset(t, 0)) == \
        (300, 6, 1)
    f = mli.fx_tensor(np.zeros(4, int), 11)
    assert (mli.hlp_tensor_scale(f), mli.hlp_tensor_scale_shift(f), mli.hlp_tensor_zero_offset(f)) == (1, 11, 0)
    src = mli.Tensor(np.array([0.5, -0.25, 3.0, -9.0], np.float32), [4], el_type=mli.MLI_EL_FP_32)
    dst = mli.empty_tensor(mli.MLI_EL_FX_8, 4, frac_bits=4)
    assert mli.hlp_convert_tensor(src, dst) == S.MLI_STATUS_OK
    np.testing.assert_array_equal(dst.values(), [8, -4, 48, -128])  # -9 * 16 saturates
    assert mli.hlp_convert_tensor(src, mli.empty_tensor(mli.MLI_EL_FX_8, 3)) == S.MLI_STATUS_SHAPE_MISMATCH
    short = mli.empty_tensor(mli.MLI_EL_FX_8, 4)
    short.capacity = 3
    assert mli.hlp_convert_tensor(src, short) == S.MLI_STATUS_NOT_ENGH_MEM


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=6), stride=st.lists(st.integers(-1, 9), max_size=6),
       cap=st.integers(0, 300), dim=st.integers(-2, 6), nscale=st.integers(1, 4))
def test_fuzzed_descriptors_give_a_status_never_an_exception(shape, stride, cap, dim, nscale):
    data = np.zeros(max(cap, 1), np.int8)
    t = mli.Tensor(data, shape, el_type=mli.MLI_EL_SA_8, mem_stride=stride if len(stride) == len(shape) else None,
                   scale=[1000] * nscale, zero_point=0, scale_frac_bits=10, dim=dim, capacity=cap)
    w = mli.sa_tensor(np.zeros((max(t.count(), 1), 2), int), 1000, 0, 10)
    b = mli.sa_tensor(np.zeros(2, int), 31, 0, 15, el_type=mli.MLI_EL_SA_32)
    out = mli.empty_tensor(mli.MLI_EL_SA_8, 2, scale=1000, scale_frac_bits=10)
    st_ = mli.krn_fully_connected_sa8_sa8_sa32(t, w, b, mli.FullyConnectedCfg(), out)
    assert isinstance(st_, mli.Status)


def test_hlp_create_subtensor_is_a_view_with_sliced_per_axis_params():
    w = mli.sa_tensor(np.arange(4 * 3 * 5).reshape(4, 3, 5) % 100, [10, 20, 30, 40], 0, [1, 2, 3, 4], dim=0)
    sub = mli.Tensor(el_type=mli.MLI_EL_SA_8)
    assert mli.hlp_create_subtensor(w, mli.SubTensorCfg([2, 0, 0], [1, 3, 5], 2), sub) == S.MLI_STATUS_OK
    np.testing.assert_array_equal(sub.values(), w.values()[2])
    assert sub.shape[:sub.rank] == [3, 5] and sub.rank == 2 and sub.dim == -1 and sub.scale.tolist() == [30]
    sub2 = mli.Tensor(el_type=mli.MLI_EL_SA_8)
    assert mli.hlp_create_subtensor(w, mli.SubTensorCfg([1, 1, 0], [2, 2, 5], 3), sub2) == S.MLI_STATUS_OK
    np.testing.assert_array_equal(sub2.values(), w.values()[1:3, 1:3])
    assert sub2.dim == 0 and sub2.scale.tolist() == [20, 30]
    sub2.write(np.zeros((2, 2, 5), int))  # a view: writes reach the parent container
    assert np.all(w.values()[1:3, 1:3] == 0) and np.any(w.values()[0] != 0)
    assert mli.hlp_create_subtensor(w, mli.SubTensorCfg([3, 0, 0], [2, 3, 5], 3), sub) == S.MLI_STATUS_BAD_FUNC_CFG
    # no size-1 dimension to drop: MLI's code keeps the sizes in order and the rank counts the first two
    assert mli.hlp_create_subtensor(w, mli.SubTensorCfg([0, 0, 0], [2, 3, 5], 2), sub) == S.MLI_STATUS_OK
    assert sub.rank == 2 and sub.shape[:3] == [2, 3, 5] and sub.mem_stride[:2] == [15, 5]


def test_status_values_are_those_of_mli_types_h():
    """``mli_status`` numbered as MLI 2.0's include/mli_types.h numbers it: programs print and compare the values."""
    expected = {"MLI_STATUS_OK": 0, "MLI_STATUS_BAD_TENSOR": 1, "MLI_STATUS_SHAPE_MISMATCH": 2,
                "MLI_STATUS_INCOMPATEBLE_TENSORS": 3, "MLI_STATUS_BAD_FUNC_CFG": 4, "MLI_STATUS_NOT_ENGH_MEM": 5,
                "MLI_STATUS_NOT_SUPPORTED": 6, "MLI_STATUS_SPEC_PARAM_MISMATCH": 7, "MLI_STATUS_ARGUMENT_ERROR": 8,
                "MLI_STATUS_LENGTH_ERROR": 9, "MLI_STATUS_SIZE_MISMATCH": 10, "MLI_STATUS_RANK_MISMATCH": 11,
                "MLI_STATUS_TYPE_MISMATCH": 12, "MLI_STATUS_MEM_BANK_MISMATCH": 13, "MLI_STATUS_MISALIGNMENT_ERROR": 14}
    assert {s.name: int(s) for s in mli.Status} == expected
    assert all(int(getattr(mli, name)) == value for name, value in expected.items())
