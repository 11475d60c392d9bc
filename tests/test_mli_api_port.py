"""MLI's C API as programs port it: mli_types.h structures under their C names, rank-0 tensors, the 1.x namespace,
LUTs filled in the caller's buffer, and mli_check.cc's debug-mode statuses in both directions (refused in a debug
build, computed in DBG_MODE_RELEASE). Status enumerations and LUT tables are upstream facts
(``tests/data/mli/upstream.json``, ``scripts/extract_mli_upstream.py``)."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusedrnn.mli as mli
import fusedrnn.mli.v1 as v1
from fusedrnn.errors import AttributeValueError

S = mli.Status
OK = S.MLI_STATUS_OK
UP = json.loads((Path(__file__).parent / "data" / "mli" / "upstream.json").read_text())
RELEASE = "DBG_MODE_RELEASE"


# ---- enumerations and structures --------------------------------------------------------------------------------
@pytest.mark.parametrize("ref,module", [("Release_2.0.2", mli), ("Release_1.1.1", v1)])
def test_status_enumeration_is_mli_types_h(ref, module):
    for name, value in UP["status"][ref]:
        assert int(getattr(module, name)) == value, name
    names = {n for n, _ in UP["status"][ref]}
    assert {n for n in dir(module) if n.startswith("MLI_STATUS_")} == names


@pytest.mark.parametrize("ref,module", [("Release_2.0.2", mli), ("Release_1.1.1", v1)])
def test_element_type_enumeration_is_mli_types_h(ref, module):
    """``mli_element_type`` as each release's include/mli_types.h numbers it (1.1.1: FX_8 = 0 ... ASYM_I32 = 3):
    every constant and member we have carries the header's value; 1.x has all four of its types, 2.0 all but
    MLI_EL_FX_4 and MLI_EL_FP_16 (not emulated)."""
    upstream = dict(UP["element_type"][ref])
    ours = {e.name: int(e) for e in module.ElType}
    assert {n: upstream[n] for n in ours} == ours
    assert all(int(getattr(module, n)) == v for n, v in ours.items())
    missing = {"Release_1.1.1": set(), "Release_2.0.2": {"MLI_EL_FX_4", "MLI_EL_FP_16"}}[ref]
    assert set(upstream) - set(ours) == missing
    assert {n for n in dir(module) if n.startswith("MLI_EL_")} == set(ours)


@pytest.mark.parametrize("seed", range(6))
def test_a_1x_program_sees_1x_element_types(seed):
    """A 1.x program builds tensors field by field, sets ``el_type`` with 1.x constants (or their numbers), calls
    1.x kernels and reads 1.x numbers back; its results equal those of the same kernels on 2.0 tensors."""
    rng = np.random.default_rng(seed)
    fl = ["fx8", "fx16"][seed % 2]
    el1, el2, dt = {"fx8": (v1.MLI_EL_FX_8, mli.MLI_EL_FX_8, np.int8),
                    "fx16": (v1.MLI_EL_FX_16, mli.MLI_EL_FX_16, np.int16)}[fl]
    M, N = (int(v) for v in rng.integers(1, 7, 2))
    lim = np.iinfo(dt).max // 4
    wq, xq, bq = (rng.integers(-lim, lim, s).astype(dt) for s in ((M, N), N, M))
    fw, fx, fo = (int(v) for v in rng.integers(1, 7, 3))
    fb = int(rng.integers(0, fw + fx + 1))  # 1.x: bias frac bits <= in + weights frac bits

    def v1_tensor(q, frac, number):
        t = v1.Tensor(el_type=v1.MLI_EL_ASYM_I32)  # retyped below, as a C program assigns the field
        t.el_type = number if seed % 3 == 0 else v1.ElType(number)
        t.data, t.capacity = q.ravel().copy(), q.nbytes
        t.shape, t.mem_stride, t.rank = [*q.shape, *[0] * (4 - q.ndim)], [0, 0, 0, 0], q.ndim
        t.el_params.fx.frac_bits = frac
        return t

    w, x, b = (v1_tensor(q, f, int(el1)) for q, f in ((wq, fw), (xq, fx), (bq, fb)))
    assert w.el_type == el1 and type(w.el_type) is v1.ElType and w.el_type.name == f"MLI_EL_FX_{fl[2:]}"
    out = v1.empty_tensor(el1, M, frac_bits=fo)
    probe = v1.Tensor(el_type=el1)
    probe.el_type = v1.MLI_EL_ASYM_I8
    assert int(probe.el_type) == 2 and v1.hlp_tensor_element_size(probe) == 1 and probe.is_sa
    kernel = getattr(v1, f"krn_fully_connected_{fl}")
    assert kernel(x, w, b, out) == OK
    assert out.el_type == el1 and int(out.el_type) == {"fx8": 0, "fx16": 1}[fl] and f"MLI_EL_FX_{fl[2:]}" in repr(out)
    ref = mli.empty_tensor(el2, M, frac_bits=fo)
    assert kernel(*(mli.fx_tensor(q, f, el2) for q, f in ((xq, fx), (wq, fw), (bq, fb))), ref) == OK
    assert ref.el_type == el2 and type(ref) is mli.Tensor  # 2.0 tensors keep 2.0's numbers
    assert out.values().tolist() == ref.values().tolist() and out.data.mem.dtype == dt
    for t in (out.copy(), copy.copy(out)):
        assert type(t) is v1.Tensor and t.el_type == el1 and t.values().tolist() == ref.values().tolist()
    act = v1.empty_tensor(v1.MLI_EL_FX_16 if fl == "fx16" else v1.MLI_EL_FX_8, M)
    assert getattr(v1, f"krn_tanh_{fl}")(out, act) == OK and act.el_type == el1
    with pytest.raises(AttributeValueError, match="1.x element type"):
        out.el_type = int(el2)  # 2.0's number is no 1.x type
    assert out.el_type == el1


def test_2x_element_types_unchanged_and_lstm_ir_tsr_of_1x():
    t = mli.Tensor(el_type=mli.MLI_EL_FX_16)
    assert t.el_type == 16 and type(t.el_type) is mli.ElType and mli.fx_tensor([1], 0).el_type == 0x10
    assert {int(mli.MLI_EL_FX_8), int(mli.MLI_EL_SA_8), int(mli.MLI_EL_SA_32)} == {0x8, 0x108, 0x120}
    assert v1.Tensor(el_type=v1.MLI_EL_ASYM_I32).data.mem is None and v1.empty_tensor(
        v1.MLI_EL_ASYM_I32, 2).data.mem.dtype == np.int32
    f = v1.Tensor(np.zeros(2, np.float32), [2], el_type=mli.MLI_EL_FP_32)  # fp32: no 1.x number, 2.0's shown
    assert f.el_type is mli.MLI_EL_FP_32
    rng = np.random.default_rng(3)
    M, N = 3, 2
    x = v1.fx_tensor(rng.integers(-900, 900, N), 10)
    h, c = v1.fx_tensor(rng.integers(-900, 900, M), 10), v1.fx_tensor(rng.integers(-900, 900, M), 10)
    W, b = v1.fx_tensor(rng.integers(-3000, 3000, (4, M, N + M)), 14), v1.fx_tensor(rng.integers(-99, 99, (4, M)), 8)
    cfg = v1.RnnCellCfg(v1.RNN_ONE_TO_ONE, v1.RNN_ACT_TANH, v1.empty_tensor(v1.MLI_EL_FX_16, 4 * M))
    as2 = [mli.fx_tensor(t.values(), t.frac_bits) for t in (x, h, W, b, c)]
    cfg2 = v1.RnnCellCfg(v1.RNN_ONE_TO_ONE, v1.RNN_ACT_TANH, mli.empty_tensor(mli.MLI_EL_FX_16, 4 * M))
    out, out2 = v1.empty_tensor(v1.MLI_EL_FX_16, M), mli.empty_tensor(mli.MLI_EL_FX_16, M)
    assert v1.krn_lstm_cell_fx16(x, h, W, b, cfg, c, out) == OK  # cfg.ir_tsr a 1.x tensor too
    assert (out.el_type, c.el_type, cfg.ir_tsr.el_type) == (1, 1, 1) and type(cfg.ir_tsr) is v1.Tensor
    assert v1.krn_lstm_cell_fx16(*as2[:4], cfg2, as2[4], out2) == OK and out2.el_type == 16
    assert out.values().tolist() == out2.values().tolist() and c.values().tolist() == as2[4].values().tolist()
    assert out.frac_bits == out2.frac_bits and c.frac_bits == as2[4].frac_bits


def test_tensor_fields_have_c_names_and_fixed_arrays():
    buf = np.arange(128 * 32, dtype=np.int16)
    t = mli.Tensor(el_type=mli.MLI_EL_FX_16)
    t.data.mem, t.data.capacity = buf, buf.nbytes
    t.shape[0], t.shape[1] = 128, 32
    t.mem_stride[0], t.mem_stride[1] = 32, 1
    t.rank = 2
    t.el_params.fx.frac_bits = 12
    assert t.shape == [128, 32, 0, 0] and len(t.mem_stride) == mli.MLI_MAX_RANK
    assert mli.hlp_count_elem_num(t, 0) == 128 * 32 and mli.hlp_count_elem_num(t, 1) == 32
    np.testing.assert_array_equal(t.values(), buf.reshape(128, 32))
    # the flattened names stay as aliases of the C fields
    assert (t.frac_bits, t.capacity, t.dims) == (12, buf.nbytes, [128, 32])
    t.capacity = 100
    assert t.data.capacity == 100
    w = mli.sa_tensor(np.zeros((3, 2), int), [100, 200], 0, [10, 11], dim=1)
    sa = w.el_params.sa
    assert sa.dim == 1 and sa.scale.mem.tolist() == [100, 200] and sa.scale.capacity == 4
    assert sa.scale_frac_bits.mem.tolist() == [10, 11] and w.el_params.asym is sa  # MLI 1.x's name
    p = mli.sa_tensor(np.zeros(3, int), 300, -5, 9)
    assert (p.el_params.sa.scale.mem, p.el_params.sa.zero_point.mem, p.el_params.sa.scale_frac_bits.mem) == \
        (300, -5, 9) and p.el_params.sa.scale.capacity == 0  # per tensor: the value in the container
    assert mli.hlp_tensor_scale(p) == 300 and mli.hlp_tensor_zero_offset(p) == -5


def test_a_1x_rank2_tensor_with_trailing_zero_dims_works_in_a_kernel():
    """MLI 1.x style: shape [N, M, 0, 0] with rank 2, mem_stride all 0 (dense), ``t.data`` the buffer."""
    rng = np.random.default_rng(0)
    wq = rng.integers(-300, 300, (4, 6)).astype(np.int16)
    w = v1.Tensor(el_type=v1.MLI_EL_FX_16)
    w.data, w.capacity = wq.ravel().copy(), wq.nbytes
    w.shape, w.mem_stride, w.rank = [4, 6, 0, 0], [0, 0, 0, 0], 2
    w.el_params.fx.frac_bits = 10
    x, b = v1.fx_tensor(rng.integers(-300, 300, 6), 10), v1.fx_tensor(rng.integers(-30, 30, 4), 8)
    out = v1.empty_tensor(v1.MLI_EL_FX_16, 4, frac_bits=9)
    assert v1.krn_fully_connected_fx16(x, w, b, out) == OK
    ref = v1.empty_tensor(v1.MLI_EL_FX_16, 4, frac_bits=9)
    assert mli.krn_fully_connected_fx16_v1(x, v1.fx_tensor(wq, 10), b, ref) == OK  # the earlier alias
    assert out.values().tolist() == ref.values().tolist() and out.shape[:out.rank] == [4]


def test_struct_assignment_copies_fields_and_shares_the_buffer():
    t = mli.fx_tensor(np.arange(6).reshape(2, 3), 5)
    u = copy.copy(t)
    u.shape[0], u.el_params.fx.frac_bits = 1, 7
    assert t.shape[0] == 2 and t.frac_bits == 5 and u.data.mem is t.data.mem


# ---- rank-0 tensors ------------------------------------------------------------------------------------------------
def test_rank0_zero_tensor_clears_state_in_place():
    """``mli_krn_eltwise_mul_fx16(&cell, &zero_tsr_fx16, &cell)`` with zero_tsr = {.data = {.capacity = 0,
    .mem = {.i16 = 0}}, .rank = 0}: the value sits in the container, capacity is ignored."""
    cell = mli.fx_tensor(np.arange(1, 33), 11)
    zero = mli.Tensor(el_type=mli.MLI_EL_FX_16)
    zero.data = mli.DataContainer(0, 0)
    zero.rank, zero.shape, zero.mem_stride = 0, [0], [1]
    assert mli.krn_eltwise_mul_fx16(cell, zero, cell) == OK
    assert not cell.values().any()
    two = mli.Tensor(el_type=mli.MLI_EL_FX_16, rank=0)
    two.data = mli.DataContainer(0, 2)  # 2 with frac 0
    x = mli.fx_tensor(np.arange(5), 4)
    out = mli.empty_tensor(mli.MLI_EL_FX_16, 5, frac_bits=4)
    assert mli.krn_eltwise_mul_fx16(x, two, out) == OK and out.values().tolist() == [0, 2, 4, 6, 8]
    both = mli.Tensor(el_type=mli.MLI_EL_FX_16, rank=0)
    both.data = mli.DataContainer(0, 1)
    assert mli.krn_eltwise_add_fx16(both, both, out) == S.MLI_STATUS_NOT_SUPPORTED  # one must have rank > 0


# ---- LUTs -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tanh", "sigm"])
def test_create_lut_fills_the_callers_buffer(kind):
    ref = UP["lut_fx16"][kind]
    buf = np.full(512, 7, np.int16)
    lut = mli.Lut(data=mli.DataContainer(buf.nbytes, buf))
    create = getattr(mli, f"krn_{kind}_create_lut")
    assert create(lut) == OK
    assert lut.data.mem is buf and buf[:ref["length"]].tolist() == ref["table"] and np.all(buf[ref["length"]:] == 7)
    assert (lut.length, lut.in_frac_bits, lut.input_offset, lut.out_frac_bits, lut.output_offset, lut.type) == \
        (ref["length"], ref["in_frac_bits"], ref["input_offset"], ref["out_frac_bits"], 0, mli.MLI_EL_FX_16)
    assert getattr(mli, f"krn_{kind}_get_lut_size")() == 2 * ref["length"]
    short = mli.Lut(data=mli.DataContainer(2 * ref["length"] - 2, np.zeros(512, np.int16)))
    assert create(short) == S.MLI_STATUS_NOT_ENGH_MEM  # mli_chk_lut: capacity, not the array's size


# ---- the 1.x namespace ---------------------------------------------------------------------------------------------
def test_v1_activations_and_point_to_subtensor():
    x = v1.fx_tensor(np.array([[-4000, -10, 0], [10, 300, 4000]]), 10)
    out = v1.empty_tensor(v1.MLI_EL_FX_16, 6)
    assert v1.krn_relu_fx16(x, v1.ReluCfg(v1.MLI_RELU_GEN), out) == OK
    assert out.values().tolist() == [[0, 0, 0], [10, 300, 4000]] and out.frac_bits == 10
    assert v1.krn_relu_fx16(x, v1.ReluCfg(v1.MLI_RELU_1), out) == OK
    assert out.values().tolist() == [[-1024, -10, 0], [10, 300, 1024]]
    assert v1.krn_tanh_fx16(x, out) == OK and out.frac_bits == 15
    t = np.tanh(x.values() / 1024.0)
    assert np.abs(out.values() / 32768.0 - t).max() < 2e-3
    assert v1.krn_sigm_fx16(x, out) == OK and out.frac_bits == 15
    assert np.abs(out.values() / 32768.0 - 1 / (1 + np.exp(-x.values() / 1024.0))).max() < 2e-3
    x8 = v1.fx_tensor(np.array([-100, 0, 100]), 5, v1.MLI_EL_FX_8)
    o8 = v1.empty_tensor(v1.MLI_EL_FX_8, 3)
    assert v1.krn_tanh_fx8(x8, o8) == OK and o8.frac_bits == 7 and v1.krn_sigm_fx8(x8, o8) == OK
    assert v1.krn_tanh_fx16(x8, out) == S.MLI_STATUS_TYPE_MISMATCH
    assert v1.krn_relu_fx16(x, v1.ReluCfg(9), out) == S.MLI_STATUS_BAD_FUNC_CFG
    # point_to_subtensor: row 1 from column 1, two elements of the last dimension
    big = v1.fx_tensor(np.arange(24).reshape(2, 3, 4), 3)
    sub = v1.Tensor(el_type=v1.MLI_EL_FX_16)
    assert v1.hlp_point_to_subtensor(big, v1.PointToSubtsrCfg([1, 1], 2, 2), sub) == OK
    assert sub.values().tolist() == [[16, 17, 18, 19], [20, 21, 22, 23]] and sub.frac_bits == 3
    assert sub.data.capacity == 16 and np.shares_memory(sub.data.mem, big.data.mem)
    assert v1.hlp_point_to_subtensor(big, v1.PointToSubtsrCfg([1, 2], 2, 2), sub) == S.MLI_STATUS_BAD_FUNC_CFG


def test_v1_convert_gives_the_output_the_input_shape_and_count_elem_num_is_1x():
    src = v1.Tensor(np.array([0.5, -0.25, 3.0, -9.0], np.float32), [2, 2], el_type=mli.MLI_EL_FP_32)
    dst = v1.empty_tensor(v1.MLI_EL_FX_8, 8, frac_bits=4)
    assert v1.hlp_convert_tensor(src, dst) == OK
    assert dst.values().tolist() == [[8, -4], [48, -128]] and dst.rank == 2
    assert v1.hlp_convert_tensor(src, v1.empty_tensor(v1.MLI_EL_FX_8, 3)) == S.MLI_STATUS_NOT_ENGH_MEM
    scalar = v1.Tensor(el_type=mli.MLI_EL_FX_16, rank=0)
    assert v1.hlp_count_elem_num(scalar, 0) == 0 and mli.hlp_count_elem_num(scalar, 0) == 1  # 1.x checks rank 0


# ---- MLI 2.0 functions that were missing ----------------------------------------------------------------------------
def test_argmax_takes_mlis_heap_order():
    rng = np.random.default_rng(1)
    v = rng.permutation(60).reshape(3, 4, 5) - 30
    x = mli.fx_tensor(v, 0)
    out = mli.Tensor(np.zeros(12, np.int32), [4, 3], el_type=mli.MLI_EL_SA_32)
    assert mli.krn_argmax_fx16(x, mli.ArgmaxCfg(1, 3), out) == OK
    for k in range(4):  # memory offsets of the 3 largest in slice k of axis 1, largest first
        sl = v[:, k, :]
        order = np.argsort(-sl, axis=None)[:3]
        i, j = np.unravel_index(order, sl.shape)
        assert out.values()[k].tolist() == (i * 20 + k * 5 + j).tolist()
    ties = mli.fx_tensor(np.array([5, 1, 5, 5]), 0)
    one = mli.Tensor(np.zeros(1, np.int32), [1, 1], el_type=mli.MLI_EL_SA_32)
    assert mli.krn_argmax_fx16(ties, mli.ArgmaxCfg(-1, 1), one) == OK and one.values().tolist() == [[3]]
    assert mli.krn_argmax_sa8(x, mli.ArgmaxCfg(-1, 1), one) == S.MLI_STATUS_TYPE_MISMATCH
    assert mli.krn_argmax_fx16(x, mli.ArgmaxCfg(-1, 1), mli.fx_tensor(np.zeros((1, 1), int), 0)) == \
        S.MLI_STATUS_TYPE_MISMATCH


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_mov_tensor_sync_copies_slices_and_permutations(shape, seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(-100, 100, shape)
    src = mli.fx_tensor(v, 6)
    cfg = mli.MovCfg()
    assert mli.mov_cfg_for_copy(cfg) == OK and cfg.sub_sample_step == [1] * 4 and cfg.perm_dim == [0, 1, 2, 3]
    dst = mli.Tensor(np.zeros(300, np.int16), el_type=mli.MLI_EL_FX_16)
    assert mli.mov_tensor_sync(src, cfg, dst) == OK
    assert dst.values().tolist() == v.tolist() and dst.frac_bits == 6
    r = len(shape)
    off = [int(rng.integers(0, s)) for s in shape]
    step = [int(rng.integers(1, 3)) for _ in shape]
    perm = [int(p) for p in rng.permutation(r)]
    cfg = mli.MovCfg(offset=off, sub_sample_step=step, perm_dim=perm)
    dst.mem_stride = [0] * 4  # mli_mov_prepare keeps a dst's non-zero strides: a C program clears them for reuse
    assert mli.mov_tensor_sync(src, cfg, dst) == OK
    ref = np.transpose(v[tuple(slice(o, None, s) for o, s in zip(off, step, strict=True))], perm)
    assert dst.values().tolist() == ref.tolist() and dst.shape[:dst.rank] == list(ref.shape)


def test_data_ptr_cmp_and_convert_safx():
    a = mli.fx_tensor(np.arange(4), 3)
    b = copy.copy(a)
    assert mli.hlp_tensor_data_ptr_cmp(a, b) and not mli.hlp_tensor_data_ptr_cmp(a, mli.fx_tensor(np.arange(4), 3))
    s = mli.sa_tensor(np.zeros(4, int), 16384, 0, 14)  # scale 1.0
    assert mli.hlp_convert_tensor_safx(a, s) == OK and s.values().tolist() == [0, 0, 0, 0]
    a2 = mli.fx_tensor(np.array([8, 16, -24, 4]), 3)
    assert mli.hlp_convert_tensor_safx(a2, s) == OK and s.values().tolist() == [1, 2, -3, 1]  # 0.5 rounds away
    f = mli.Tensor(np.zeros(4, np.float32), [4], el_type=mli.MLI_EL_FP_32)
    assert mli.hlp_convert_tensor_safx(a2, f) == S.MLI_STATUS_TYPE_MISMATCH  # convert_quantized_data: no fp32 pair


# ---- mli_check.cc in both directions --------------------------------------------------------------------------------
def fc(M=4, N=6):
    rng = np.random.default_rng(2)
    return dict(in_=mli.fx_tensor(rng.integers(-900, 900, N), 10),
                weights=mli.fx_tensor(rng.integers(-900, 900, (N, M)), 12),
                bias=mli.fx_tensor(rng.integers(-900, 900, M), 14), cfg=mli.FullyConnectedCfg(),
                out=mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=8))


def call_fc(a):
    return mli.krn_fully_connected_fx16(a["in_"], a["weights"], a["bias"], a["cfg"], a["out"])


def _overlap(a):
    buf = np.zeros(16, np.int16)
    buf[:6] = a["in_"].values()
    a["in_"].data = mli.DataContainer(12, buf[:6])
    a["out"].data = mli.DataContainer(8, buf[4:8])  # out starts inside in's bytes


def _out_rank2(a):
    a["out"].shape, a["out"].rank, a["out"].mem_stride = [1, 4], 2, [4, 1]


def _out_long(a):
    a["out"] = mli.empty_tensor(mli.MLI_EL_FX_16, 6, frac_bits=8)


# (mutation, status in a debug build); each is computed (OK) by the release build
FC_DEBUG_ONLY = {
    "cfg_none": (lambda a: a.update(cfg=None), S.MLI_STATUS_BAD_FUNC_CFG),
    "out_rank": (_out_rank2, S.MLI_STATUS_SHAPE_MISMATCH),
    "out_length": (_out_long, S.MLI_STATUS_SHAPE_MISMATCH),
    "out_frac": (lambda a: setattr(a["out"], "frac_bits", 23), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    "overlap": (_overlap, S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    "bias_frac": (lambda a: setattr(a["bias"], "frac_bits", 23), S.MLI_STATUS_INCOMPATEBLE_TENSORS),
    "zero_stride": (lambda a: setattr(a["in_"], "mem_stride", [0]), S.MLI_STATUS_BAD_TENSOR),
}


@pytest.mark.parametrize("what", sorted(FC_DEBUG_ONLY))
def test_fc_debug_checks_refuse_and_release_computes(what):
    mutate, status = FC_DEBUG_ONLY[what]
    a = fc()
    mutate(a)
    assert call_fc(a) == status
    with mli.build(debug_mode=RELEASE):
        assert call_fc(a) == OK
    ref = fc()
    assert call_fc(ref) == OK
    if what in ("cfg_none", "out_rank", "out_length", "zero_stride"):  # the same numbers without the checks
        assert a["out"].values().reshape(-1).tolist() == ref["out"].values().tolist()


@pytest.mark.parametrize("mode", ["DBG_MODE_RET_CODES", "DBG_MODE_ASSERT", "DBG_MODE_DEBUG", "DBG_MODE_FULL"])
def test_every_debug_mode_returns_the_codes(mode):
    a = fc()
    a["cfg"] = None
    with mli.build(debug_mode=mode):
        assert call_fc(a) == S.MLI_STATUS_BAD_FUNC_CFG
    with pytest.raises(AttributeValueError, match="debug_mode"):
        mli.set_build(debug_mode="DBG_MODE_NONE")


def test_statuses_in_every_build():
    """Refused in every build: a zero input scale (mli_chk_tensor_quant_params), a negative stride, a type
    mismatch, a None tensor, a short container."""
    for build in ("DBG_MODE_RET_CODES", RELEASE):
        with mli.build(debug_mode=build):
            a = fc()
            a["in_"].mem_stride = [-1]
            assert call_fc(a) == S.MLI_STATUS_BAD_TENSOR
            a = fc()
            a["weights"] = mli.fx_tensor(np.zeros((6, 4), int), 5, mli.MLI_EL_FX_8)
            assert call_fc(a) == S.MLI_STATUS_TYPE_MISMATCH
            a = fc()
            a["out"] = None
            assert call_fc(a) == S.MLI_STATUS_ARGUMENT_ERROR
            s = dict(in_=mli.sa_tensor(np.zeros(3, int), 0, 0, 10),
                     weights=mli.sa_tensor(np.zeros((3, 2), int), 1, 0, 0),
                     bias=mli.sa_tensor(np.zeros(2, int), 0, 0, 10, el_type=mli.MLI_EL_SA_32),
                     cfg=mli.FullyConnectedCfg(), out=mli.empty_tensor(mli.MLI_EL_SA_8, 2))
            assert mli.krn_fully_connected_sa8_sa8_sa32(s["in_"], s["weights"], s["bias"], s["cfg"], s["out"]) == \
                S.MLI_STATUS_BAD_TENSOR
    a = fc()
    a["in_"].capacity = 10
    assert call_fc(a) == S.MLI_STATUS_NOT_ENGH_MEM  # check_tensor_private: capacity short of the shape


def dense(n=2, M=5):
    rng = np.random.default_rng(3)
    ins = [mli.fx_tensor(rng.integers(-900, 900, 3 + i), 12) for i in range(n)]
    ws = [mli.fx_tensor(rng.integers(-900, 900, (3 + i, M)), 12) for i in range(n)]
    return ins, ws, mli.fx_tensor(rng.integers(-900, 900, M), 12), mli.RnnDenseCfg(n), \
        mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=10)


def test_rnn_dense_output_shape_and_mixed_types():
    ins, ws, b, cfg, out = dense()
    assert mli.krn_rnn_dense_fx16(ins, ws, b, cfg, out) == OK
    wrong = mli.Tensor(np.zeros(10, np.int16), [2, 5], el_type=mli.MLI_EL_FX_16, frac_bits=10)
    assert mli.krn_rnn_dense_fx16(ins, ws, b, cfg, wrong) == S.MLI_STATUS_SHAPE_MISMATCH
    with mli.build(debug_mode=RELEASE):
        assert mli.krn_rnn_dense_fx16(ins, ws, b, cfg, wrong) == OK
    assert wrong.values().tolist() == out.values().tolist()
    mixed = list(ins)
    mixed[1] = mli.fx_tensor(np.zeros(4, int), 5, mli.MLI_EL_FX_8)
    assert mli.krn_rnn_dense_fx16(mixed, ws, b, cfg, out) == S.MLI_STATUS_TYPE_MISMATCH
    assert mli.krn_rnn_dense_fx16(ins, ws, b, cfg, mli.empty_tensor(mli.MLI_EL_FX_8, 5)) == \
        S.MLI_STATUS_TYPE_MISMATCH


def test_lstm_scratch_and_ir_tsr():
    rng = np.random.default_rng(4)
    T, N, M = 3, 4, 5
    x = mli.fx_tensor(rng.integers(-3000, 3000, (T, N)), 12)
    h = mli.fx_tensor(rng.integers(-3000, 3000, M), 15)
    wi = mli.fx_tensor(rng.integers(-3000, 3000, (4, N, M)), 14)
    wo = mli.fx_tensor(rng.integers(-3000, 3000, (4, M, M)), 14)
    b, c = mli.fx_tensor(rng.integers(-3000, 3000, (4, M)), 14), mli.fx_tensor(rng.integers(-3000, 3000, M), 12)
    luts = mli.Lut(), mli.Lut()
    assert mli.krn_tanh_create_lut(luts[0]) == OK and mli.krn_sigm_create_lut(luts[1]) == OK
    out = mli.empty_tensor(mli.MLI_EL_FX_16, T * M, frac_bits=15)

    def run(scratch):
        cfg = mli.RnnCellCfg(mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL, mli.RNN_ACT_TANH, scratch)
        return mli.krn_lstm_cell_fx16(x, h, wi, wo, b, *luts, cfg, c.copy(), out)

    buf = np.zeros(4 * M, np.int16)
    assert run(mli.DataContainer(buf.nbytes, buf)) == OK
    assert run(mli.DataContainer(buf.nbytes - 2, buf)) == S.MLI_STATUS_BAD_FUNC_CFG
    xb = np.zeros(4 * M, np.int16)  # a scratch buffer that starts where the input's data does
    xb[:T * N] = x.data.mem
    x.data = mli.DataContainer(T * N * 2, xb[:T * N])
    assert run(mli.DataContainer(xb.nbytes, xb)) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    # MLI 1.x: the LSTM needs cfg.ir_tsr (1.1.1's checker), BAD_FUNC_CFG without one in a debug build
    W = v1.fx_tensor(rng.integers(-3000, 3000, (4, M, N + M)), 14)
    cfg1 = v1.RnnCellCfg(v1.RNN_BATCH_TO_BATCH, v1.RNN_ACT_TANH)
    assert v1.krn_lstm_cell_fx16(x, h, W, b, cfg1, c.copy(), out) == S.MLI_STATUS_BAD_FUNC_CFG
    cfg1.ir_tsr = v1.empty_tensor(v1.MLI_EL_FX_16, 4 * M)
    assert v1.krn_lstm_cell_fx16(x, h, W, b, cfg1, c.copy(), out) == OK


def test_helpers_in_both_directions():
    src = mli.fx_tensor(np.arange(6).reshape(2, 3), 4)
    flat = mli.empty_tensor(mli.MLI_EL_FX_16, 6, frac_bits=2)
    assert mli.hlp_convert_tensor(src, flat) == S.MLI_STATUS_SHAPE_MISMATCH
    with mli.build(debug_mode=RELEASE):
        assert mli.hlp_convert_tensor(src, flat) == OK and flat.shape[:flat.rank] == [2, 3]
    assert flat.values().tolist() == [[0, 0, 1], [1, 1, 1]]  # 0.25-steps rounded half away from zero
    a = mli.sa_tensor(np.zeros((2, 3), int), [100, 200], 0, 8, dim=0)
    b = mli.sa_tensor(np.zeros((2, 3), int), [10, 20, 30], 0, 8, dim=1)
    assert mli.hlp_convert_tensor(a, b) == S.MLI_STATUS_SIZE_MISMATCH
    t = mli.fx_tensor(np.zeros((2, 3), int), 0)
    assert [mli.hlp_count_elem_num(t, d) for d in range(4)] == [6, 3, 0, 0]
    with mli.build(debug_mode=RELEASE):
        assert [mli.hlp_count_elem_num(t, d) for d in range(4)] == [6, 3, 1, 1]
    big = mli.Tensor(np.zeros(64, np.int16), [2, 2, 2, 2, 2], el_type=mli.MLI_EL_FX_16)
    assert mli.hlp_count_elem_num(big, 0) == 0  # rank > MLI_MAX_RANK


def test_strided_layouts_the_checker_accepts():
    """Accepted as mli_check.cc accepts them: padded outer strides, a per-axis parameter container longer than
    the axis, a one-element tensor as a scalar operand."""
    rng = np.random.default_rng(6)
    v = rng.integers(-900, 900, (6, 4))
    buf = np.zeros(6 * 7, np.int16)
    for i in range(6):
        buf[i * 7:i * 7 + 4] = v[i]
    w = mli.Tensor(buf, [6, 4], el_type=mli.MLI_EL_FX_16, mem_stride=[7, 1], frac_bits=12)
    a = fc()
    ref = fc()
    a["weights"] = w
    ref["weights"] = mli.fx_tensor(v, 12)
    assert call_fc(a) == OK and call_fc(ref) == OK
    assert a["out"].values().tolist() == ref["out"].values().tolist()
    s = mli.sa_tensor(np.zeros((2, 3), int), [100, 200], 0, [8, 8], dim=0)
    s.el_params.sa.scale = mli.DataContainer(8, np.array([100, 200, 1, 1], np.int16))
    out = mli.empty_tensor(mli.MLI_EL_FP_32, 6)
    out.shape, out.rank, out.mem_stride = [2, 3], 2, [3, 1]
    assert mli.hlp_convert_tensor(s, out) == OK
    x = mli.fx_tensor(np.arange(6), 8)
    o = mli.empty_tensor(mli.MLI_EL_FX_16, 6, frac_bits=8)
    assert mli.krn_eltwise_add_fx16(mli.fx_tensor([[[3]]], 8), x, o) == OK and o.values().tolist() == \
        [3, 4, 5, 6, 7, 8]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), relu=st.integers(0, 3))
def test_valid_calls_agree_in_debug_and_release(seed, relu):
    """Whatever the checker accepts computes the same numbers with and without it."""
    rng = np.random.default_rng(seed)
    N, M = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    fi, fw = int(rng.integers(0, 15)), int(rng.integers(0, 15))
    args = (mli.fx_tensor(rng.integers(-3000, 3000, N), fi), mli.fx_tensor(rng.integers(-3000, 3000, (N, M)), fw),
            mli.fx_tensor(rng.integers(-3000, 3000, M), int(rng.integers(0, fi + fw + 1))),
            mli.FullyConnectedCfg(mli.ReluCfg(relu)))
    fo = int(rng.integers(0, fi + fw + 1))
    outs = []
    for mode in ("DBG_MODE_RET_CODES", RELEASE):
        out = mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=fo)
        with mli.build(debug_mode=mode):
            assert mli.krn_fully_connected_fx16(*args, out) == OK
        outs.append(out.values().tolist())
    assert outs[0] == outs[1]


def test_statuses_mli_defines_but_these_kernels_never_return():
    """LENGTH_ERROR, RANK_MISMATCH, MEM_BANK_MISMATCH and MISALIGNMENT_ERROR exist for programs to compare against;
    MLI's checker returns the last two only from mli_mem_chk on ARC DSP platforms (banks, alignment), which the x86
    build and this emulation do not model."""
    assert [int(s) for s in (S.MLI_STATUS_LENGTH_ERROR, S.MLI_STATUS_SIZE_MISMATCH, S.MLI_STATUS_RANK_MISMATCH,
                             S.MLI_STATUS_MEM_BANK_MISMATCH, S.MLI_STATUS_MISALIGNMENT_ERROR)] == [9, 10, 11, 13, 14]
