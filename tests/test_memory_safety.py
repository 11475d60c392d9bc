"""Memory safety of the SDK APIs (issue 17, item 3): hostile containers given to ``fusedrnn.mli`` and
``fusedrnn.zdnn`` (negative strides, strided views, a capacity beyond the buffer, huge strides, views past the end,
read-only buffers where the kernel writes, containers of the wrong kind) give the SDK's status or a correct
result, never an access outside the buffer. Every container lives in the middle of a larger array whose guard
bytes are checked after every call, through the NumPy and the compiled loops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_mli_status import cell_args

import fusedrnn.mli as mli
import fusedrnn.zdnn as z
from fusedrnn.errors import BufferLayoutError, FusedRNNError
from fusedrnn.targets.mli import _compiled
from fusedrnn.targets.zdnn.ztensor import PAGE, aligned_buffer

S = mli.Status
OK = S.MLI_STATUS_OK
PAD = 48  # guard elements on each side of an MLI container
ENGINES = ("numpy", "compiled") if _compiled.load() is not None else ("numpy",)


# ---- the reproductions ----------------------------------------------------------------------------------
def test_huge_stride_view_raises_instead_of_reading_past_the_buffer():
    t = mli.Tensor(np.zeros(4, np.int8), [4], el_type=mli.MLI_EL_SA_8, mem_stride=[1 << 28])
    with pytest.raises(BufferLayoutError, match="mem_stride|spans"):
        t.values()
    t.mem_stride = [-1]
    with pytest.raises(BufferLayoutError):
        t.values()
    with pytest.raises(BufferLayoutError):
        t.write(np.zeros(4))


def fc_args(M=64, N=5):
    rng = np.random.default_rng(0)
    return dict(in_=mli.sa_tensor(rng.integers(-128, 128, N), 20000, 3, 16),
                weights=mli.sa_tensor(rng.integers(-127, 128, (N, M)), 16000, 0, 20),
                bias=mli.sa_tensor(rng.integers(-5000, 5000, M), int(np.rint(20000 * 16000 / 2**15)), 0, 21,
                                   el_type=mli.MLI_EL_SA_32),
                cfg=mli.FullyConnectedCfg(),
                out=mli.empty_tensor(mli.MLI_EL_SA_8, M, scale=18000, zero_point=-5, scale_frac_bits=14))


def call_fc(a):
    return mli.krn_fully_connected_sa8_sa8_sa32(a["in_"], a["weights"], a["bias"], a["cfg"], a["out"])


def test_fc_output_capacity_beyond_its_buffer_is_bad_tensor():
    """The issue's case: a 1-byte output container claiming 64 bytes let the kernel write 63 bytes past it."""
    a = fc_args()
    big = np.full(64 + 2 * PAD, 0x5A, np.uint8).view(np.int8)
    a["out"].data = big[PAD:PAD + 1]
    a["out"].capacity = 64
    assert call_fc(a) == S.MLI_STATUS_BAD_TENSOR
    assert np.all(big.view(np.uint8) == 0x5A)
    with pytest.raises(FusedRNNError, match="capacity"):
        mli.Tensor(np.zeros(1, np.int8), [1], el_type=mli.MLI_EL_SA_8, capacity=64)


@pytest.mark.parametrize("view", ["reversed", "strided", "read_only"])
def test_fc_output_views_are_bad_tensor(view):
    a = fc_args()
    big = np.full(2 * 64 + 2 * PAD, 0x5A, np.uint8).view(np.int8)
    mid = {"reversed": big[PAD:PAD + 64][::-1], "strided": big[PAD:PAD + 128:2], "read_only": big[PAD:PAD + 64]}[view]
    if view == "read_only":
        mid.flags.writeable = False
    a["out"].data, a["out"].capacity = mid, 64
    assert call_fc(a) == S.MLI_STATUS_BAD_TENSOR
    assert np.all(big.view(np.uint8) == 0x5A)
    with pytest.raises(FusedRNNError):
        mli.Tensor(big[PAD:PAD + 128:2], [64], el_type=mli.MLI_EL_SA_8)


def test_lstm_cell_tensor_beyond_its_buffer_is_bad_tensor():
    a = cell_factory("lstm", "fx16")
    big = np.full(2 * PAD + 5, 0x5A5A, np.int16)
    a["cell"].data = big[PAD:PAD + 1]  # shape [5] over a 1-element container
    a["cell"].capacity = 10
    assert call_cell("lstm", "fx16", a) == S.MLI_STATUS_BAD_TENSOR
    assert np.all(big == 0x5A5A)
    a = cell_factory("lstm", "fx16")
    a["cell"].data.flags.writeable = False  # updated in place
    assert call_cell("lstm", "fx16", a) == S.MLI_STATUS_BAD_TENSOR


@pytest.mark.parametrize("data", [[0] * 400, np.zeros((2, 400), np.int16), np.zeros(400, np.float32), "table"])
def test_luts_that_are_not_tables_are_argument_errors(data):
    a = cell_factory("lstm", "fx16")
    lut = mli.Lut(data, 5, 15, 172, "tanh")
    cfg = mli.RnnCellCfg(mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL, mli.RNN_ACT_TANH, np.zeros(4096, np.int8))
    assert mli.krn_lstm_cell_fx16(a["in_"], a["prev_out"], a["weights_in"], a["weights_out"], a["bias"], lut,
                                  _luts()["sigm"], cfg, a["cell"], a["out"]) == S.MLI_STATUS_ARGUMENT_ERROR
    assert mli.krn_tanh_fx16(a["prev_out"], lut, mli.empty_tensor(mli.MLI_EL_FX_16, 5)) == \
        S.MLI_STATUS_ARGUMENT_ERROR
    assert mli.krn_tanh_create_lut(lut) == S.MLI_STATUS_ARGUMENT_ERROR  # fills the caller's buffer: not a table
    assert mli.krn_sigm_create_lut("lut") == S.MLI_STATUS_ARGUMENT_ERROR


# ---- kernel cases: valid arguments, the call, the tensors it writes ---------------------------------------------
def _fx(rng, shape, frac, el=mli.MLI_EL_FX_16, lo=-900, hi=900):
    return mli.fx_tensor(rng.integers(lo, hi, shape), frac, el)


def fc_factory(flavor):
    rng = np.random.default_rng(1)
    N, M = 6, 4
    if flavor == "sa8":
        a = fc_args(M, N)
        return a
    el_w = {"fx16": mli.MLI_EL_FX_16, "fx16_fx8_fx8": mli.MLI_EL_FX_8, "fx8": mli.MLI_EL_FX_8}[flavor]
    el_io = mli.MLI_EL_FX_8 if flavor == "fx8" else mli.MLI_EL_FX_16
    w = 100 if el_w == mli.MLI_EL_FX_8 else 900
    return dict(in_=_fx(rng, N, 6, el_io, -100, 100), weights=_fx(rng, (N, M), 6, el_w, -w, w),
                bias=_fx(rng, M, 8, el_w, -w, w), cfg=mli.FullyConnectedCfg(),
                out=mli.empty_tensor(el_io, M, frac_bits=5))


FC = {"fx16": mli.krn_fully_connected_fx16, "fx16_fx8_fx8": mli.krn_fully_connected_fx16_fx8_fx8,
      "fx8": mli.krn_fully_connected_fx8, "sa8": mli.krn_fully_connected_sa8_sa8_sa32}


def dense_factory(flavor):
    rng = np.random.default_rng(2)
    return dict(in0=_fx(rng, 3, 12), in1=_fx(rng, 4, 12), w0=_fx(rng, (3, 5), 12), w1=_fx(rng, (4, 5), 12),
                bias=_fx(rng, 5, 12), out=mli.empty_tensor(mli.MLI_EL_FX_16, 5, frac_bits=10))


def cell_factory(cell, flavor, T=3, N=4, M=5):
    """The tensors of a valid LSTM / GRU cell call (test_mli_status's), without its configuration and LUTs."""
    a = cell_args(4 if cell == "lstm" else 3, flavor, T, N, M)
    for k in ("cfg", "tanh_lut", "sigm_lut"):
        del a[k]
    return a


_CELLS = {("lstm", "fx16"): mli.krn_lstm_cell_fx16, ("gru", "fx16"): mli.krn_gru_cell_fx16,
          ("lstm", "sa8"): mli.krn_lstm_cell_sa8_sa8_sa32, ("gru", "sa8"): mli.krn_gru_cell_sa8_sa8_sa32}
_LUTS = {}


def _luts():
    if not _LUTS:
        _LUTS["tanh"], _LUTS["sigm"] = mli.Lut(), mli.Lut()
        assert mli.krn_tanh_create_lut(_LUTS["tanh"]) == OK and mli.krn_sigm_create_lut(_LUTS["sigm"]) == OK
    return _LUTS


def call_cell(cell, flavor, a):
    cfg = mli.RnnCellCfg(mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL, mli.RNN_ACT_TANH, np.zeros(4096, np.int8))
    args = [a["in_"], a["prev_out"], a["weights_in"], a["weights_out"], a["bias"], _luts()["tanh"], _luts()["sigm"],
            cfg]
    return _CELLS[cell, flavor](*args, a["cell"], a["out"]) if cell == "lstm" else _CELLS[cell, flavor](*args,
                                                                                                       a["out"])


def v1_factory(kind):
    rng = np.random.default_rng(4)
    N, M, T = 3, 4, 2
    if kind == "fc":
        return dict(in_=_fx(rng, N, 8), weights=_fx(rng, (M, N), 8), bias=_fx(rng, M, 8),
                    out=mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=8))
    return dict(in_=_fx(rng, (T, N), 8), prev_out=_fx(rng, M, 15), weights=_fx(rng, (4, M, N + M), 8),
                bias=_fx(rng, (4, M), 8), cell=_fx(rng, M, 10), out=mli.empty_tensor(mli.MLI_EL_FX_16, T * M),
                ir=mli.empty_tensor(mli.MLI_EL_FX_16, 4 * M))


def _v1_call(kind, a):
    if kind == "fc":
        return mli.krn_fully_connected_fx16_v1(a["in_"], a["weights"], a["bias"], a["out"])
    cfg = mli.RnnCellCfgDepr(mli.RNN_BATCH_TO_BATCH, mli.RNN_ACT_TANH, a["ir"])
    return mli.krn_lstm_cell_fx16_v1(a["in_"], a["prev_out"], a["weights"], a["bias"], cfg, a["cell"], a["out"])


def _shaped(t: mli.Tensor, dims) -> mli.Tensor:
    """``t`` described with shape ``dims`` (dense), as MLI 2.0's checker wants an output described."""
    t.shape, t.rank, t.mem_stride = list(dims), len(dims), [dims[1], 1]
    return t


def elt_factory(kind):
    rng = np.random.default_rng(5)
    if kind.endswith("sa8"):
        return dict(in1=mli.sa_tensor(rng.integers(-128, 128, (2, 3)), 20000, 1, 20),
                    in2=mli.sa_tensor(rng.integers(-128, 128, (2, 3)), 18000, -2, 20),
                    out=_shaped(mli.empty_tensor(mli.MLI_EL_SA_8, 6, scale=19000, zero_point=0, scale_frac_bits=19),
                                (2, 3)))
    return dict(in1=_fx(rng, (2, 3), 8), in2=_fx(rng, (2, 3), 9),
                out=_shaped(mli.empty_tensor(mli.MLI_EL_FX_16, 6, frac_bits=8), (2, 3)))


def _unary(a):
    del a["in2"]
    return a


def _convert_factory(_):
    src = mli.Tensor(np.array([0.5, -0.25, 3.0, -9.0, 1.5, 0.0], np.float32), [2, 3], el_type=mli.MLI_EL_FP_32)
    dst = mli.Tensor(np.zeros(6, np.int8), [2, 3], el_type=mli.MLI_EL_FX_8, frac_bits=4)  # src's shape
    return dict(src=src, dst=dst)


# name -> (factory, call(args) -> status, roles the kernel writes (out: shape set by the kernel))
CASES = {
    **{f"fc_{f}": (lambda f=f: fc_factory(f), lambda a, f=f: FC[f](a["in_"], a["weights"], a["bias"], a["cfg"],
                                                                    a["out"]), {"out"}) for f in FC},
    "fc_sa8_ext_bias": (lambda: fc_factory("sa8"), lambda a: mli.krn_fully_connected_sa8_sa8_sa32_ext_bias(
        a["in_"], a["weights"], a["bias"], a["cfg"], a["out"]), {"out"}),
    "rnn_dense_fx16": (lambda: dense_factory("fx16"), lambda a: mli.krn_rnn_dense_fx16(
        [a["in0"], a["in1"]], [a["w0"], a["w1"]], a["bias"], mli.RnnDenseCfg(2), a["out"]), {"out"}),
    **{f"{c}_{f}": (lambda c=c, f=f: cell_factory(c, f), lambda a, c=c, f=f: call_cell(c, f, a),
                    {"out", "cell"} if c == "lstm" else {"out"}) for c, f in _CELLS},
    "fc_v1": (lambda: v1_factory("fc"), lambda a: _v1_call("fc", a), {"out"}),
    "lstm_v1": (lambda: v1_factory("lstm"), lambda a: _v1_call("lstm", a), {"out", "cell", "ir"}),
    "add_fx16": (lambda: elt_factory("fx16"), lambda a: mli.krn_eltwise_add_fx16(a["in1"], a["in2"], a["out"]),
                 {"out"}),
    "mul_sa8": (lambda: elt_factory("sa8"), lambda a: mli.krn_eltwise_mul_sa8(a["in1"], a["in2"], a["out"]),
                {"out"}),
    "tanh_fx16": (lambda: _unary(elt_factory("fx16")), lambda a: mli.krn_tanh_fx16(a["in1"], _luts()["tanh"], a["out"]),
                  {"out"}),
    "sigm_sa8": (lambda: _unary(elt_factory("sa8")), lambda a: mli.krn_sigm_sa8(a["in1"], _luts()["sigm"], a["out"]),
                 {"out"}),
    "convert": (lambda: _convert_factory(None), lambda a: mli.hlp_convert_tensor(a["src"], a["dst"]), {"dst"}),
}
IN_PLACE = {"cell"}  # written with the shape the caller gave
SCRATCH = {"ir"}  # checked and claimed, never read back


def _host(t: mli.Tensor) -> np.ndarray:
    """Move ``t``'s container into the middle of a guarded array: big[PAD : PAD + n] (room for a 2n strided view)."""
    n = t.data.size
    big = np.empty(2 * PAD + 2 * n, t.data.dtype)
    big.view(np.uint8)[:] = 0xA5
    big[PAD:PAD + n] = t.data
    t.data = big[PAD:PAD + n]
    return big


MUTATIONS = ("reversed", "strided", "capacity_over", "capacity_under", "short", "huge_stride", "negative_stride",
             "stride_past_end", "read_only", "rank_mismatch", "not_an_array", "two_d", "wrong_dtype", "relayout",
             "shape_grow", "none")


def _mutate(t: mli.Tensor, big: np.ndarray, kind: str, k: int, huge: int, dim: int) -> bool:
    """Apply ``kind`` to ``t`` (container ``big[PAD:PAD+n]``); returns whether the kernel must refuse it when it
    reads ``t`` (for tensors it writes, see :func:`_must_refuse`)."""
    n = t.data.size
    mid = big[PAD:PAD + n]
    d = dim % max(t.rank, 1)
    if kind == "reversed":
        t.data = mid[::-1]
        return n > 1
    if kind == "strided":
        t.data = big[PAD:PAD + 2 * n:2]
        return n > 1
    if kind == "capacity_over":
        t.capacity = mid.nbytes + k * mid.itemsize
        return True
    if kind == "capacity_under":
        t.capacity = max(mid.nbytes - k * mid.itemsize, 0)
        return t.rank > 0
    if kind == "short":
        t.data = big[PAD:PAD + max(n - k, 0)]
        t.capacity = t.data.nbytes
        return True
    if kind in ("huge_stride", "negative_stride", "stride_past_end") and t.rank:
        st_ = list(t.strides())
        st_[d] = {"huge_stride": huge, "negative_stride": -k, "stride_past_end": st_[d] + n}[kind]
        t.mem_stride = st_
        return kind == "negative_stride" or t.shape[d] > 1
    if kind == "read_only":
        t.data.flags.writeable = False
        return False
    if kind == "rank_mismatch":
        t.rank += 1
        return True
    if kind == "not_an_array":
        t.data = mid.tolist()
        return True
    if kind == "two_d":
        t.data = mid.reshape(1, n)
        return True
    if kind == "wrong_dtype":
        t.data = mid.view(np.uint8)
        return True
    if kind == "relayout" and t.rank:  # a valid strided layout: outer dimension padded by k elements
        vals = t.values()
        st_ = list(t.strides())
        st_[0] = st_[0] + k
        need = (t.dims[0] - 1) * st_[0] + int(np.prod(t.dims[1:])) if t.dims[0] else 0
        if need <= big.size - PAD:
            buf = big[PAD:PAD + need]
            view = np.lib.stride_tricks.as_strided(buf, shape=tuple(t.dims),
                                                   strides=tuple(s * buf.itemsize for s in st_))
            view[...] = vals.astype(buf.dtype)
            t.data, t.mem_stride, t.capacity = buf, st_, buf.nbytes
        return False
    if kind == "shape_grow" and t.rank:
        t.shape[d] += k
        return True
    return False


def _region(data, big: np.ndarray) -> tuple[int, int]:
    """Byte offsets [lo, hi) of ``data``'s elements inside ``big`` (empty when it is not a view of it)."""
    if not isinstance(data, np.ndarray) or not np.shares_memory(data, big) or data.size == 0:
        return 0, 0
    start = data.__array_interface__["data"][0] - big.ctypes.data
    span = [(n - 1) * s for n, s in zip(data.shape, data.strides, strict=True)]
    return start + sum(v for v in span if v < 0), start + sum(v for v in span if v > 0) + data.itemsize


def _must_refuse(kind: str, role: str, writes: set, reads_refuse: bool) -> bool:
    if role in SCRATCH:
        return kind in ("reversed", "strided", "capacity_over", "not_an_array", "two_d", "wrong_dtype", "read_only")
    if role in writes and role not in IN_PLACE:  # the kernel sets the shape: only the container matters
        return (kind in ("capacity_over", "not_an_array", "two_d", "wrong_dtype", "read_only")
                or (kind in ("reversed", "strided") and reads_refuse))
    if kind == "read_only":
        return role in writes
    return reads_refuse


def _outputs(a: dict, writes: set) -> dict:
    return {r: (a[r].values().tolist(), list(a[r].shape)) for r in sorted(writes - SCRATCH)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_are_valid(name):
    factory, call, writes = CASES[name]
    a = factory()
    assert call(a) == OK, name


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(CASES)), pick=st.integers(0, 20), kind=st.sampled_from(MUTATIONS),
       k=st.integers(1, 5), huge=st.sampled_from([1 << 16, 1 << 28, 1 << 40]), dim=st.integers(0, 3),
       engine=st.sampled_from(ENGINES))
def test_hostile_mli_containers_give_a_status_or_the_right_result(name, pick, kind, k, huge, dim, engine):
    factory, call, writes = CASES[name]
    clean = factory()
    with _compiled.use_engine(engine):
        assert call(clean) == OK
        expected = _outputs(clean, writes)
        a = factory()
        roles = sorted(r for r, v in a.items() if isinstance(v, mli.Tensor))
        bigs = {r: _host(a[r]) for r in roles}
        role = roles[pick % len(roles)]
        reads_refuse = _mutate(a[role], bigs[role], kind, k, huge, dim)
        before = {r: b.copy() for r, b in bigs.items()}
        status = call(a)
    assert isinstance(status, mli.Status), status
    refuse = _must_refuse(kind, role, writes, reads_refuse)
    for r, b in bigs.items():
        if refuse or r not in writes:  # refused before any write; containers only read stay untouched
            assert np.array_equal(b.view(np.uint8), before[r].view(np.uint8)), (r, "changed")
        else:  # the guard bytes around the container the caller handed over are untouched
            lo, hi = _region(a[r].mem, b)
            raw, old = b.view(np.uint8), before[r].view(np.uint8)
            assert np.array_equal(raw[:lo], old[:lo]) and np.array_equal(raw[hi:], old[hi:]), (r, "guard bytes")
    if refuse:
        assert status != OK, (name, role, kind, status)
    if status == OK:
        assert _outputs(a, writes) == expected, (name, role, kind)


# ---- zDNN ztensors ------------------------------------------------------------------------------------------------
@pytest.fixture
def precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def _zt(shape=(2, 3, 4), x=None):
    pre = z.init_pre_transformed_desc(z.ZDNN_3DS, z.FP32, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == z.ZDNN_OK
    t = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, t) == z.ZDNN_OK
    if x is not None:
        assert z.transform_ztensor(t, np.asarray(x, np.float32)) == z.ZDNN_OK
    return t


def _zhost(t: z.ZTensor) -> np.ndarray:
    """Move the stick buffer to raw[PAGE : PAGE + n] of a guarded, page-aligned array."""
    n = t.buffer.size
    raw = aligned_buffer(3 * PAGE + 2 * n)
    raw[:] = 0xA5
    raw[PAGE:PAGE + n] = t.buffer
    t.buffer = raw[PAGE:PAGE + n]
    return raw


Z_MUTATIONS = ("reversed", "reversed_aligned", "strided", "size_over", "short", "short_both", "read_only",
               "misaligned", "wrong_dtype", "two_d", "not_an_array", "size_not_int", "bigger", "none")


def _zmutate(t: z.ZTensor, raw: np.ndarray, kind: str, k: int) -> bool:
    """Apply ``kind`` to ``t``'s buffer; returns whether every use must refuse it (INVALID_BUFFER, or
    MISALIGNED_TENSOR from an operation)."""
    n = t.buffer.size
    mid = raw[PAGE:PAGE + n]
    if kind == "reversed":
        t.buffer = mid[::-1]
    elif kind == "reversed_aligned":  # starts on the page boundary, runs backwards into the guard bytes
        t.buffer = raw[PAGE - n + 1:PAGE + 1][::-1]
    elif kind == "strided":
        t.buffer = raw[PAGE:PAGE + 2 * n:2]
    elif kind == "size_over":
        t.buffer_size = n + k
    elif kind == "short":
        t.buffer = raw[PAGE:PAGE + n - k]
    elif kind == "short_both":
        t.buffer = raw[PAGE:PAGE + n - k]
        t.buffer_size = n - k
    elif kind == "read_only":
        t.buffer.flags.writeable = False
        return False
    elif kind == "misaligned":
        t.buffer = raw[PAGE + k:PAGE + k + n]
    elif kind == "wrong_dtype":  # C's void *: the same bytes seen as uint16 are a valid buffer
        t.buffer = mid.view(np.uint16)
        return False
    elif kind == "two_d":
        t.buffer = mid.reshape(1, n)
        return False
    elif kind == "not_an_array":  # read-only bytes: readable, refused where written (the caller checks)
        t.buffer = bytes(mid)
        return False
    elif kind == "size_not_int":
        t.buffer_size = float(n)
    elif kind == "bigger":  # a valid, over-allocated buffer
        t.buffer, t.buffer_size = raw[PAGE:PAGE + n + k], n + k
        return False
    else:
        return False
    return True


def _z_case(name):
    """(tensors, call(tensors) -> status, roles the operation writes, result(tensors) -> comparable)."""
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    if name == "add":
        ts = {"a": _zt(x=x), "b": _zt(x=y), "out": _zt()}
        return ts, lambda t: z.add(t["a"], t["b"], t["out"]), {"out"}, \
            lambda t: bytes(z.byte_view(t["out"].buffer)[:PAGE])
    if name == "transform":
        ts = {"t": _zt()}
        return ts, lambda t: z.transform_ztensor(t["t"], x.astype(np.float32)), {"t"}, \
            lambda t: bytes(z.byte_view(t["t"].buffer)[:PAGE])
    if name == "origtensor":
        ts = {"t": _zt(x=x)}
        res = {}

        def call(t):
            res["out"] = np.zeros((2, 3, 4), np.float32)
            return z.transform_origtensor(t["t"], res["out"])
        return ts, call, set(), lambda t: res["out"].tobytes()
    if name == "reshape":
        ts = {"src": _zt(x=x), "dest": _zt((3, 2, 4))}
        return ts, lambda t: z.reshape_ztensor(t["src"], t["dest"]), {"dest"}, \
            lambda t: bytes(z.byte_view(t["dest"].buffer)[:PAGE])
    if name == "getrange":
        ts = {"t": _zt(x=x)}
        res = {}

        def call(t):
            st_, *res["range"] = z.getrange_ztensor(t["t"])
            return st_
        return ts, call, set(), lambda t: tuple(res["range"])
    raise KeyError(name)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["add", "transform", "origtensor", "reshape", "getrange"]), pick=st.integers(0, 5),
       kind=st.sampled_from(Z_MUTATIONS), k=st.integers(1, 64))
def test_hostile_ztensor_buffers_give_invalid_buffer_or_the_right_result(precheck, name, pick, kind, k):
    ts, call, writes, result = _z_case(name)
    assert call(ts) == z.ZDNN_OK
    expected = result(ts)
    ts, call, writes, result = _z_case(name)
    roles = sorted(ts)
    raws = {r: _zhost(ts[r]) for r in roles}
    role = roles[pick % len(roles)]
    sizes = {r: ts[r].buffer.size for r in roles}
    refuse = _zmutate(ts[role], raws[role], kind, k) or (kind in ("read_only", "not_an_array") and role in writes)
    before = {r: b.copy() for r, b in raws.items()}
    status = call(ts)
    assert isinstance(status, z.Status)
    for r, b in raws.items():
        n = sizes[r]
        if r in writes:
            assert np.array_equal(b[:PAGE], before[r][:PAGE]) and np.array_equal(b[PAGE + n:], before[r][PAGE + n:])
        else:
            assert np.array_equal(b, before[r]), (r, "input changed")
    if refuse:
        # operations meet the buffer where the NNPA reads it: an address off 4 KiB is its MISALIGNED_TENSOR
        want = z.ZDNN_MISALIGNED_TENSOR if name == "add" and kind == "misaligned" else z.ZDNN_INVALID_BUFFER
        assert status == want, (name, role, kind, status)
    if status == z.ZDNN_OK:
        assert result(ts) == expected


@pytest.mark.parametrize("view", ["reversed", "strided", "read_only"])
def test_transform_origtensor_refuses_out_buffers_it_cannot_write(precheck, view):
    t = _zt(x=np.ones((2, 3, 4)))
    big = np.zeros(2 * 24 + 16, np.float32)
    out = {"reversed": big[8:32][::-1], "strided": big[8:56:2], "read_only": big[8:32]}[view]
    if view == "read_only":
        out.flags.writeable = False
    with pytest.raises(BufferLayoutError, match="out_buf"):
        z.transform_origtensor(t, out)
    assert not big.any()


def test_zdnn_buffer_size_beyond_the_buffer_is_invalid_buffer(precheck):
    t = _zt(x=np.ones((2, 3, 4)))
    t.buffer_size = t.buffer.size + 1
    assert z.getrange_ztensor(t)[0] == z.ZDNN_INVALID_BUFFER
    out = _zt()
    out.buffer.flags.writeable = False
    assert z.add(_zt(x=np.ones((2, 3, 4))), _zt(x=np.ones((2, 3, 4))), out) == z.ZDNN_INVALID_BUFFER
