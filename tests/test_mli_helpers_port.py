"""MLI 2.0 helpers as ``mli_helpers.cc`` / ``mli_mov_api.cc`` / ``mli_hlp_convert_tensor_ref.h`` compute them and
``mli_check.cc`` checks them, in both directions: ``hlp_create_subtensor`` dropping size-1 dimensions,
``mov_tensor_sync`` with destination offsets and per-axis parameters, ``hlp_convert_tensor_safx``'s integer
requantization, and the cells' missing scratch buffer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusedrnn.mli as mli

S = mli.Status
OK = S.MLI_STATUS_OK
RELEASE = "DBG_MODE_RELEASE"


# ---- hlp_create_subtensor -----------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_create_subtensor_drops_size_one_dimensions_from_the_front(shape, seed):
    """The block offset..offset+size of the input; size-1 dimensions wherever they are go first (front to back)
    until sub_tensor_rank remain, the capacity shrinks by the offset's bytes."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-99, 99, shape)
    t = mli.fx_tensor(v, 5)
    off = [int(rng.integers(0, s)) for s in shape]
    size = [int(rng.integers(1, s - o + 1)) for s, o in zip(shape, off, strict=True)]
    ones = sum(s == 1 for s in size)
    rank = int(rng.integers(len(shape) - ones, len(shape) + 1))
    sub = mli.Tensor(el_type=mli.MLI_EL_FX_16)
    assert mli.hlp_create_subtensor(t, mli.SubTensorCfg(off, size, rank), sub) == OK
    block = v[tuple(slice(o, o + s) for o, s in zip(off, size, strict=True))]
    drop, kept = len(shape) - rank, []
    for s in size:
        if drop and s == 1:
            drop -= 1
        else:
            kept.append(s)
    assert sub.rank == rank and sub.dims == kept and sub.frac_bits == 5
    assert sub.values().tolist() == block.reshape(kept).tolist()
    start = int(np.ravel_multi_index(off, shape))
    assert sub.capacity == t.capacity - 2 * start


def test_create_subtensor_checks_as_mli_chk_create_subtensor():
    w = mli.sa_tensor(np.arange(3 * 1 * 5).reshape(3, 1, 5), [10, 20, 30], 0, [1, 2, 3], dim=0)
    sub = mli.Tensor(el_type=mli.MLI_EL_SA_8)
    # a middle size-1 dimension is dropped (the per-axis dimension stays, its parameters from the offset on)
    assert mli.hlp_create_subtensor(w, mli.SubTensorCfg([1, 0, 1], [2, 1, 4], 2), sub) == OK
    assert sub.dims == [2, 4] and sub.mem_stride[:2] == [5, 1] and sub.dim == 0 and sub.scale.tolist() == [20, 30]
    assert sub.values().tolist() == w.values()[1:3, 0, 1:5].tolist()
    cfg = mli.SubTensorCfg
    assert mli.hlp_create_subtensor(w, cfg([0, 0, 0], [3, 1, 5], 4), sub) == S.MLI_STATUS_BAD_FUNC_CFG  # > rank
    assert mli.hlp_create_subtensor(w, cfg([3, 0, 0], [0, 1, 5], 3), sub) == S.MLI_STATUS_BAD_FUNC_CFG  # offset
    assert mli.hlp_create_subtensor(w, cfg([0, 0, 2], [3, 1, 4], 3), sub) == S.MLI_STATUS_BAD_FUNC_CFG  # size
    assert mli.hlp_create_subtensor(w, cfg([0, 0, 0], [3, 1, 5], 3), None) == S.MLI_STATUS_BAD_TENSOR
    f = mli.Tensor(np.zeros(6, np.float32), [2, 3], el_type=mli.MLI_EL_FP_32)
    assert mli.hlp_create_subtensor(f, cfg([0, 0], [1, 3], 1), mli.Tensor(el_type=mli.MLI_EL_FP_32)) == \
        S.MLI_STATUS_NOT_SUPPORTED


# ---- mov_tensor_sync ------------------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_mov_writes_at_the_destination_offset(shape, seed):
    """dst.shape = moved sizes + dst_offset, dense strides of that shape; the elements before the offset keep
    their values."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-99, 99, shape)
    src = mli.fx_tensor(v, 4)
    r = len(shape)
    dst_off = [int(rng.integers(0, 3)) for _ in shape]
    perm = [int(p) for p in rng.permutation(r)]
    cfg = mli.MovCfg(sub_sample_step=[1] * 4, perm_dim=perm, dst_offset=dst_off)
    buf = np.full(2000, -7, np.int16)
    dst = mli.Tensor(buf, el_type=mli.MLI_EL_FX_16)
    assert mli.mov_tensor_sync(src, cfg, dst) == OK
    moved = np.transpose(v, perm)
    full = [m + o for m, o in zip(moved.shape, dst_off, strict=True)]
    assert dst.dims == full and dst.frac_bits == 4
    expect = np.full(full, -7)
    expect[tuple(slice(o, None) for o in dst_off)] = moved
    assert dst.values().tolist() == expect.tolist()


def test_mov_takes_strides_from_cfg_then_dst_then_dense():
    src = mli.fx_tensor(np.arange(6).reshape(2, 3), 0)
    dst = mli.Tensor(np.zeros(40, np.int16), el_type=mli.MLI_EL_FX_16)
    cfg = mli.MovCfg(sub_sample_step=[1] * 4, perm_dim=[0, 1, 2, 3], dst_mem_stride=[8, 2])
    assert mli.mov_tensor_sync(src, cfg, dst) == OK
    assert dst.mem_stride[:2] == [8, 2] and dst.mem[[0, 2, 4, 8, 10, 12]].tolist() == list(range(6))
    cfg.dst_mem_stride = [0] * 4  # dst keeps the strides it has
    assert mli.mov_tensor_sync(src, cfg, dst) == OK and dst.mem_stride[:2] == [8, 2]
    dst.mem_stride = [0] * 4
    assert mli.mov_tensor_sync(src, cfg, dst) == OK and dst.mem_stride[:2] == [3, 1]
    small = mli.Tensor(np.zeros(5, np.int16), el_type=mli.MLI_EL_FX_16)
    assert mli.mov_tensor_sync(src, cfg, small) == S.MLI_STATUS_NOT_ENGH_MEM


def _per_axis(n=3):
    return mli.sa_tensor(np.arange(n * 2).reshape(n, 2), [10, 20, 30][:n], [1, 2, 3][:n], [4, 5, 6][:n], dim=0)


def _own_params(dst, n):
    sa = dst.el_params.sa
    sa.scale = mli.DataContainer(2 * n, np.zeros(n, np.int16))
    sa.zero_point = mli.DataContainer(2 * n, np.zeros(n, np.int16))
    sa.scale_frac_bits = mli.DataContainer(n, np.zeros(n, np.int8))


def test_mov_per_axis_parameters_shared_or_moved():
    """Per-axis sa: NULL parameter pointers in dst share src's; dst's own buffers receive the axis moved as the
    data (offset, sub-sampling, padding with scale 1 / zero point 0 / frac bits 0, dst_offset)."""
    src = _per_axis()
    dst = mli.Tensor(np.zeros(40, np.int8), el_type=mli.MLI_EL_SA_8)
    copy_cfg = mli.MovCfg()
    assert mli.mov_cfg_for_copy(copy_cfg) == OK
    assert mli.mov_tensor_sync(src, copy_cfg, dst) == OK
    assert dst.el_params.sa.scale is src.el_params.sa.scale and dst.dim == 0
    assert dst.scale.tolist() == [10, 20, 30] and dst.values().tolist() == src.values().tolist()
    dst = mli.Tensor(np.zeros(40, np.int8), el_type=mli.MLI_EL_SA_8)
    _own_params(dst, 6)
    cfg = mli.MovCfg(offset=[1], sub_sample_step=[1, 1, 1, 1], perm_dim=[1, 0, 2, 3], padding_post=[1],
                     dst_offset=[0, 2])
    assert mli.mov_tensor_sync(src, cfg, dst) == OK
    assert dst.dims == [2, 5] and dst.dim == 1
    sa = dst.el_params.sa
    assert sa.scale.mem[:5].tolist() == [0, 0, 20, 30, 1]
    assert sa.zero_point.mem[:5].tolist() == [0, 0, 2, 3, 0]
    assert sa.scale_frac_bits.mem[:5].tolist() == [0, 0, 5, 6, 0]
    assert dst.values()[:, 2:].tolist() == [[2, 4, 0], [3, 5, 0]]


@pytest.mark.parametrize("case", ["zp_only", "scale_shared", "null_with_offset", "null_with_step", "own_too_small",
                                  "shared_with_dst_offset"])
def test_mov_per_axis_spec_param_mismatch(case):
    """mli_chk_data_movement's SPEC_PARAM_MISMATCH (refused in a debug build, not checked in release)."""
    src = _per_axis()
    dst = mli.Tensor(np.zeros(40, np.int8), el_type=mli.MLI_EL_SA_8)
    cfg = mli.MovCfg()
    mli.mov_cfg_for_copy(cfg)
    sa = dst.el_params.sa
    if case == "zp_only":
        sa.zero_point = mli.DataContainer(6, np.zeros(3, np.int16))
    elif case == "scale_shared":
        _own_params(dst, 3)
        sa.scale = src.el_params.sa.scale
    elif case == "null_with_offset":
        cfg.offset[0] = 1
    elif case == "null_with_step":
        cfg.sub_sample_step[0] = 2
    elif case == "own_too_small":
        _own_params(dst, 3)
        cfg.dst_offset[0] = 1
    else:
        sa.scale, sa.zero_point, sa.scale_frac_bits = (src.el_params.sa.scale, src.el_params.sa.zero_point,
                                                       src.el_params.sa.scale_frac_bits)
        cfg.dst_offset[0] = 1
    assert mli.mov_tensor_sync(src, cfg, dst) == S.MLI_STATUS_SPEC_PARAM_MISMATCH


def test_mov_per_axis_accepts_consistent_parameters_and_checks_cfg():
    src = _per_axis()
    for setup in ("null", "shared", "own_exact"):
        dst = mli.Tensor(np.zeros(40, np.int8), el_type=mli.MLI_EL_SA_8)
        cfg = mli.MovCfg()
        mli.mov_cfg_for_copy(cfg)
        if setup == "shared":
            dst.el_params.sa = src.el_params.sa.__class__(src.el_params.sa.zero_point, src.el_params.sa.scale, 0,
                                                          src.el_params.sa.scale_frac_bits)
        elif setup == "own_exact":
            _own_params(dst, 2)
            cfg.offset[0] = 1  # axis size 2: exactly the buffers' capacity
        assert mli.mov_tensor_sync(src, cfg, dst) == OK, setup
    dst = mli.Tensor(np.zeros(40, np.int8), el_type=mli.MLI_EL_SA_8)
    _own_params(dst, 3)
    for field, value in (("sub_sample_step", 0), ("perm_dim", 2)):
        cfg = mli.MovCfg()
        mli.mov_cfg_for_copy(cfg)
        getattr(cfg, field)[1] = value
        assert mli.mov_tensor_sync(src, cfg, dst) == S.MLI_STATUS_BAD_FUNC_CFG, field
    cfg = mli.MovCfg(size=[3, 2], offset=[1], sub_sample_step=[1] * 4, perm_dim=[0, 1, 2, 3])
    assert mli.mov_tensor_sync(src, cfg, dst) == S.MLI_STATUS_BAD_FUNC_CFG


# ---- hlp_convert_tensor_safx ----------------------------------------------------------------------------------------
def _norm(x: int, bits: int) -> int:
    if x == 0:
        return bits - 1
    r = 0
    while (x >> r) != (-1 if x < 0 else 0):
        r += 1
    return bits - 1 - r


def _rnd_up(x: int, n: int, bits: int) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if n <= 0:
        return max(lo, min(hi, x << -n))
    return max(lo, min(hi, x + (1 << (n - 1)))) >> n


def _safx_scalar(q, s_in, f_in, z_in, s_out, f_out, z_out, wide, out_bits):
    """mli_hlp_convert_tensor_ref.h step by step for one element, ROUND_UP, in Python integers."""
    pre = _norm(s_in, 32) - _norm(s_out, 16)
    ratio = (s_in << pre) // s_out
    ns = 16 - _norm(ratio, 32)
    scale = max(-32768, min(32767, _rnd_up(ratio, ns, 32)))
    shift = pre + f_in - f_out - ns
    sat = lambda x, b: max(-(1 << (b - 1)), min((1 << (b - 1)) - 1, x))  # noqa: E731
    if wide:
        d = sat(q - z_in, 32)
        dn = _norm(d, 32)
        d <<= dn
        sn = _norm(scale, 32)
        acc = _rnd_up((d * (scale << sn)) >> 32, min(shift, 63) + sn + dn - 32, 32)
    else:
        acc = _rnd_up(sat(q - z_in, 16) * scale, min(shift, 31), 32)
    return sat(sat(acc + z_out, 32), out_bits)


TYPES = {"fx8": (mli.MLI_EL_FX_8, 8), "fx16": (mli.MLI_EL_FX_16, 16), "sa8": (mli.MLI_EL_SA_8, 8),
         "sa32": (mli.MLI_EL_SA_32, 32)}


def _make(kind, rng, n):
    el, bits = TYPES[kind]
    hi = min(1 << (bits - 1), 1 << 20)
    v = rng.integers(-hi, hi, n)
    if kind.startswith("fx"):
        return mli.fx_tensor(v, int(rng.integers(0, bits)), el_type=el), (1, None, 0)
    s, f, z = int(rng.integers(1, 32768)), int(rng.integers(0, 31)), int(rng.integers(-100, 100))
    return mli.sa_tensor(v, s, z, f, el_type=el), (s, f, z)


@settings(max_examples=60, deadline=None)
@given(src_kind=st.sampled_from(list(TYPES)), dst_kind=st.sampled_from(list(TYPES)), seed=st.integers(0, 2**31 - 1))
def test_convert_safx_requantizes_in_mli_integer_arithmetic(src_kind, dst_kind, seed):
    rng = np.random.default_rng(seed)
    src, (s_in, f_in, z_in) = _make(src_kind, rng, 16)
    dst, (s_out, f_out, z_out) = _make(dst_kind, rng, 16)
    f_in = src.frac_bits if f_in is None else f_in
    f_out = dst.frac_bits if f_out is None else f_out
    assert mli.hlp_convert_tensor_safx(src, dst) == OK
    wide = "sa32" in (src_kind, dst_kind)
    exp = [_safx_scalar(int(q), s_in, f_in, z_in, s_out, f_out, z_out, wide, TYPES[dst_kind][1])
           for q in src.values()]
    assert dst.values().tolist() == exp


def test_convert_safx_per_axis_and_rounding():
    src = mli.sa_tensor(np.array([[10, -10], [7, 9]]), [16384, 8192], [0, 1], [14, 14], dim=0)  # scales 1, 0.5
    dst = mli.fx_tensor(np.zeros((2, 2), int), 1)  # steps of 0.5
    assert mli.hlp_convert_tensor_safx(src, dst) == OK
    assert dst.values().tolist() == [[20, -20], [6, 8]]
    half = mli.fx_tensor(np.array([1, -1, 3, -3]), 1)  # ±0.5, ±1.5 to integers
    out = mli.sa_tensor(np.zeros(4, int), 16384, 0, 14)
    assert mli.hlp_convert_tensor_safx(half, out) == OK and out.values().tolist() == [1, 0, 2, -1]  # ROUND_UP
    with mli.build("CONVERGENT"):
        assert mli.hlp_convert_tensor_safx(half, out) == OK and out.values().tolist() == [0, 0, 2, -2]
    big = mli.sa_tensor(np.array([2**30, -2**30]), 16384, 0, 14, el_type=mli.MLI_EL_SA_32)
    o8 = mli.sa_tensor(np.zeros(2, int), 16384, 3, 14)
    assert mli.hlp_convert_tensor_safx(big, o8) == OK and o8.values().tolist() == [127, -128]  # saturated


# ---- RNN cells: the scratch buffer ----------------------------------------------------------------------------------
def _lstm_args(scratch):
    rng = np.random.default_rng(1)
    M, N = 3, 2
    luts = [mli.Lut(), mli.Lut()]
    mli.krn_tanh_create_lut(luts[0])
    mli.krn_sigm_create_lut(luts[1])
    cfg = mli.RnnCellCfg(mli.RNN_DIR_FORWARD, mli.RNN_OUT_LAST, mli.RNN_ACT_TANH, scratch)
    return (mli.fx_tensor(rng.integers(-99, 99, (1, N)), 8), mli.fx_tensor(np.zeros(M, int), 8),
            mli.fx_tensor(rng.integers(-99, 99, (4, N, M)), 8), mli.fx_tensor(rng.integers(-99, 99, (4, M, M)), 8),
            mli.fx_tensor(np.zeros((4, M), int), 8), *luts, cfg, mli.fx_tensor(np.zeros(M, int), 8),
            mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=8))


def test_cell_without_scratch_is_bad_func_cfg_as_mli_checks():
    assert mli.krn_lstm_cell_fx16(*_lstm_args(None)) == S.MLI_STATUS_BAD_FUNC_CFG
    assert mli.krn_lstm_cell_fx16(*_lstm_args(mli.DataContainer(23, np.zeros(12, np.int16)))) == \
        S.MLI_STATUS_BAD_FUNC_CFG  # 4·M·2 = 24 bytes needed
    assert mli.krn_lstm_cell_fx16(*_lstm_args(mli.DataContainer(24, np.zeros(12, np.int16)))) == OK
    with mli.build(debug_mode=RELEASE):  # no checks: the kernel runs (fusedrnn gives it a scratch)
        assert mli.krn_lstm_cell_fx16(*_lstm_args(None)) == OK


# ---- MLI 1.x element-wise (1.1.1 mli_krn_eltwise.h, mli_chk_eltwise) ------------------------------------------------
def _half_even(p: int, shift: int) -> int:
    if shift <= 0:
        return p << -shift
    q, r = divmod(p, 1 << shift)  # floor
    half = 1 << (shift - 1)
    return q + (r > half or (r == half and q % 2 == 1))


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(["add", "sub", "mul", "max", "min"]), fx=st.sampled_from(["fx8", "fx16"]),
       scalar=st.sampled_from([None, "in1", "in2"]), seed=st.integers(0, 2**31 - 1))
def test_v1_eltwise_matches_its_definition(op, fx, scalar, seed):
    """add/sub/max/min: saturating on the raw values, out frac = in1's; mul: the product rounded half to even by
    in1 + in2 - out frac bits and saturated; a scalar operand (rank 0) broadcast."""
    import fusedrnn.mli.v1 as v1

    rng = np.random.default_rng(seed)
    bits = 8 if fx == "fx8" else 16
    el = v1.MLI_EL_FX_8 if fx == "fx8" else v1.MLI_EL_FX_16
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    shape = [int(s) for s in rng.integers(1, 4, int(rng.integers(1, 4)))]
    f1 = int(rng.integers(0, bits - 1))
    f2 = f1 if op != "mul" else int(rng.integers(0, bits - 1))
    a = rng.integers(lo, hi + 1, [] if scalar == "in1" else shape)
    b = rng.integers(lo, hi + 1, [] if scalar == "in2" else shape)
    in1, in2 = v1.fx_tensor(a, f1, el_type=el), v1.fx_tensor(b, f2, el_type=el)
    fo = int(rng.integers(0, bits - 1))
    out = v1.empty_tensor(el, int(np.prod(shape)), frac_bits=fo)
    assert getattr(v1, f"krn_eltwise_{op}_{fx}")(in1, in2, out) == OK
    sat = lambda x: max(lo, min(hi, x))  # noqa: E731
    fn = {"add": lambda x, y: sat(x + y), "sub": lambda x, y: sat(x - y), "max": max, "min": min,
          "mul": lambda x, y: sat(_half_even(x * y, f1 + f2 - fo))}[op]
    A, B = np.broadcast_arrays(a, b)
    assert out.dims == (in1 if in1.count() > in2.count() else in2).dims  # C: in2's shape when sizes are equal
    assert out.values().ravel().tolist() == [fn(int(x), int(y)) for x, y in
                                                                           zip(A.ravel(), B.ravel(), strict=True)]
    assert out.frac_bits == (fo if op == "mul" else f1)


def test_v1_eltwise_checks_as_mli_chk_eltwise():
    import fusedrnn.mli.v1 as v1

    def t(v, f=3, el=None):
        return v1.fx_tensor(np.asarray(v), f, el_type=v1.MLI_EL_FX_16 if el is None else el)  # 1.x: MLI_EL_FX_8 is 0

    out = v1.empty_tensor(v1.MLI_EL_FX_16, 8)
    add = v1.krn_eltwise_add_fx16
    assert add(t([1, 2, 3]), t([4, 5, 6]), out) == OK and out.values().tolist() == [5, 7, 9]
    assert add(t([1, 2, 3]), t(7), out) == OK and out.values().tolist() == [8, 9, 10]  # rank-0 scalar
    assert add(t([1, 2, 3]), t([7]), out) == OK  # a one-element tensor is a scalar
    assert add(t(1), t(2), out) == S.MLI_STATUS_NOT_SUPPORTED  # both rank 0
    assert add(t([1, 2, 3]), t([1, 2, 3], 4), out) == S.MLI_STATUS_INCOMPATEBLE_TENSORS  # frac bits differ
    assert v1.krn_eltwise_mul_fx16(t([1, 2, 3]), t([1, 2, 3], 4), out) == OK  # mul takes any notations
    assert add(t([1, 2, 3]), t([1, 2, 3], 3, v1.MLI_EL_FX_8), out) == S.MLI_STATUS_INCOMPATEBLE_TENSORS  # types
    assert add(t([1, 2, 3]), t([1, 2, 3, 4]), out) == S.MLI_STATUS_SHAPE_MISMATCH
    assert add(t([1, 2, 3]), t([4, 5, 6]), v1.empty_tensor(v1.MLI_EL_FX_16, 2)) == S.MLI_STATUS_NOT_ENGH_MEM
    assert v1.krn_eltwise_add_fx8(t([1, 2, 3]), t([4, 5, 6]), out) == S.MLI_STATUS_TYPE_MISMATCH
    strided = t(np.arange(6).reshape(2, 3))
    strided.shape, strided.mem_stride = [2, 2], [3, 1]  # a 2x2 window of a 2x3 buffer
    assert add(strided, t([[1, 1], [1, 1]]), out) == S.MLI_STATUS_INCOMPATEBLE_TENSORS
    assert add(t([1, 2, 3]), t([4, 5, 6]), None) == S.MLI_STATUS_BAD_TENSOR
    with mli.build(debug_mode=RELEASE):  # no checks: the frac bits are not compared, out takes in1's
        assert add(t([1, 2, 3]), t([1, 2, 3], 4), out) == OK and out.frac_bits == 3
