"""zDNN operations on random configurations against independent oracles written here from zdnn.md (sections 3-5),
and every status the API reference lists for lstm, gru, matmul_op, matmul_bcast_op, matmul_transpose_op and
quantized_matmul_op."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_oracle import dlf16_round_ref, make_zt

import fusedrnn.zdnn as z
from fusedrnn.errors import ShapeError
from fusedrnn.targets.zdnn import ztensor as zmod

S = z.Status
OPS = {0: np.add, 1: np.greater, 2: np.greater_equal, 3: np.equal, 4: np.not_equal, 5: np.less_equal, 6: np.less}


@pytest.fixture(autouse=True)
def _settings():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def out_f32(zt) -> np.ndarray:
    out = np.zeros(zt.pre_transformed_desc.shape(), np.float32)
    st_ = z.transform_origtensor(zt, out)
    assert st_ in (S.ZDNN_OK, S.ZDNN_CONVERT_FAILURE, S.ZDNN_ELEMENT_RANGE_VIOLATION)
    return out


# ---- matmul family ------------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(form=st.sampled_from(["plain", "stacked", "bcast1", "bcast23"]), api=st.sampled_from(["op", "bcast", "tr"]),
       op=st.integers(0, 6), m=st.integers(1, 40), n=st.integers(1, 70), p=st.integers(1, 70), s=st.integers(2, 3),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_matmul_random_against_exact_oracle(form, api, op, m, n, p, s, ta, tb, seed):
    """Values k/4 (DLF16-exact) make every float64 sum exact: the result is exactly DLF16(a@b + c) or the 0/1
    compare of the exact product with the stored c."""
    if api == "op" and form in ("bcast1", "bcast23"):
        form = "stacked"
    if api != "tr":
        ta = tb = False
    rng = np.random.default_rng(seed)
    sa = 1 if form in ("plain", "bcast1") else s
    sb = 1 if form in ("plain", "bcast23") else s
    A = rng.integers(-12, 13, (sa, m, n)) / 4
    B = rng.integers(-12, 13, (sb, n, p)) / 4
    prod = np.matmul(A, B)  # exact
    sc = sb if form in ("bcast1", "stacked") else 1
    C = rng.integers(-64, 65, (sc, 1, p)) / 8
    C[..., ::2] = prod[:sc, :1, ::2]  # equal values exercise EQUAL / GREATER_EQUAL / LESSER_EQUAL ...
    C = dlf16_round_ref(C.astype(np.float32)).astype(np.float64)  # ... where the product is a DLF16 value
    Ast = A.transpose(0, 2, 1) if ta else A
    Bst = B.transpose(0, 2, 1) if tb else B

    def zt_of(v, stacked, vec=False):
        lay = (z.ZDNN_2DS if stacked else z.ZDNN_1D) if vec else (z.ZDNN_3DS if stacked else z.ZDNN_2D)
        arr = v[:, 0] if vec else v
        arr = arr if stacked else arr[0]
        return make_zt(lay, "FP32", arr.shape, arr.astype(np.float32))

    stacked_out = form != "plain"
    a = zt_of(Ast, sa > 1 or form == "stacked")
    b = zt_of(Bst, sb > 1 or form == "stacked")
    c = zt_of(C, sc > 1 or form == "stacked", vec=True)
    so = max(sa, sb)
    oshape = (so, m, p) if stacked_out else (m, p)
    out = make_zt(z.ZDNN_3DS if stacked_out else z.ZDNN_2D, "FP32", oshape, transform=False)
    if api == "op":
        status = z.matmul_op(a, b, c, op, out)
    elif api == "bcast":
        status = z.matmul_bcast_op(a, b, c, op, out)
    else:
        status = z.matmul_transpose_op(a, b, c, ta, tb, op, out)
    assert status == S.ZDNN_OK
    want = prod + C if op == 0 else OPS[op](prod, C).astype(np.float64)
    want = dlf16_round_ref(want.astype(np.float32)).reshape(oshape)  # exact sums fit float32 here
    np.testing.assert_array_equal(out_f32(out).view(np.uint32), want.view(np.uint32))


def _mm_tensors(m=2, n=3, p=4, stacked=None):
    a = make_zt(z.ZDNN_2D, "FP32", (m, n), np.ones((m, n), np.float32))
    b = make_zt(z.ZDNN_2D, "FP32", (n, p), np.ones((n, p), np.float32))
    c = make_zt(z.ZDNN_1D, "FP32", (p,), np.ones(p, np.float32))
    out = make_zt(z.ZDNN_2D, "FP32", (m, p), transform=False)
    return a, b, c, out


def test_matmul_statuses():
    a, b, c, out = _mm_tensors()
    assert z.matmul_op(a, b, c, 9, out) == S.ZDNN_FUNC_RC_F000
    bad = make_zt(z.ZDNN_2D, "FP32", (3, 3), np.ones((3, 3), np.float32))
    assert z.matmul_op(a, bad, c, 0, out) == S.ZDNN_INVALID_SHAPE
    i32 = make_zt(z.ZDNN_2D, z.INT32, (3, 4), np.ones((3, 4), np.int32))
    assert z.matmul_op(a, i32, c, 0, out) == S.ZDNN_INVALID_TYPE
    k = make_zt(z.ZDNN_HWCK, "FP32", (1, 1, 3, 4), np.ones(12, np.float32))
    assert z.matmul_op(a, k, c, 0, out) == S.ZDNN_INVALID_FORMAT
    # matmul_op takes equal stacks only; the bcast forms belong to matmul_bcast_op
    a3 = make_zt(z.ZDNN_3DS, "FP32", (2, 2, 3), np.ones((2, 2, 3), np.float32))
    o3 = make_zt(z.ZDNN_3DS, "FP32", (2, 2, 4), transform=False)
    assert z.matmul_op(a3, b, c, 0, o3) == S.ZDNN_INVALID_SHAPE
    assert z.matmul_bcast_op(a3, b, c, 0, o3) == S.ZDNN_OK
    # bad type/format without precheck: the NNPA function reports F001 (bcast, transpose)
    with z.settings.override(precheck=False):
        assert z.matmul_bcast_op(a, i32, c, 0, out) == S.ZDNN_FUNC_RC_F001
        assert z.matmul_transpose_op(a, k, c, False, False, 0, out) == S.ZDNN_FUNC_RC_F001
    # range violation: the result overflows DLFLOAT16
    big = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.full((2, 3), 1e5, np.float32))
    bb = make_zt(z.ZDNN_2D, "FP32", (3, 4), np.full((3, 4), 1e5, np.float32))
    assert z.matmul_op(big, bb, c, 0, out) == S.ZDNN_ELEMENT_RANGE_VIOLATION


def test_matmul_unavailable_on_telum1():
    a, b, c, out = _mm_tensors()
    b3 = make_zt(z.ZDNN_3DS, "FP32", (2, 3, 4), np.ones((2, 3, 4), np.float32))
    c2 = make_zt(z.ZDNN_2DS, "FP32", (2, 4), np.ones((2, 4), np.float32))
    o3 = make_zt(z.ZDNN_3DS, "FP32", (2, 2, 4), transform=False)
    a3 = make_zt(z.ZDNN_3DS, "FP32", (2, 2, 3), np.ones((2, 2, 3), np.float32))
    z.set_machine("telum1")
    assert z.matmul_op(a, b, c, 0, out) == S.ZDNN_OK
    assert z.matmul_bcast_op(a, b3, c2, 0, o3) == S.ZDNN_UNAVAILABLE_FUNCTION  # BCAST1
    assert z.matmul_bcast_op(a3, b, c, 1, o3) == S.ZDNN_UNAVAILABLE_FUNCTION  # BCAST23, compare op
    assert z.matmul_bcast_op(a3, b, c, 0, o3) == S.ZDNN_OK
    assert z.matmul_transpose_op(a, b, c, False, False, 0, out) == S.ZDNN_UNAVAILABLE_FUNCTION


# ---- LSTM / GRU ---------------------------------------------------------------------------------------------------
def sig(v):
    return 1 / (1 + np.exp(-v))


def rnn_oracle(kind, x, h0, c0, W, Wb, R, Rb, direction, hn_all, r):
    """zdnn.md 3.1-3.4 in float64; ``r`` rounds at the NNPA op boundaries (FUSED, BIAS_ADD, H, C)."""
    ts = x.shape[0]
    D = W.shape[0]
    Y = np.zeros((ts, D, x.shape[1], W.shape[-1]))
    hT, cT = [], []
    for d in range(D):
        rev = direction == "BWD" or (direction == "BIDIR" and d == 1)
        fused = [r(x @ W[d, g] + Wb[d, g]) for g in range(W.shape[1])]
        h, c = h0[d], (c0[d] if c0 is not None else None)
        for t in (range(ts - 1, -1, -1) if rev else range(ts)):
            ba = [r(h @ R[d, g] + Rb[d, g]) for g in range(W.shape[1])]
            if kind == "lstm":
                f, i, o = (sig(fused[g][t] + ba[g]) for g in (0, 1, 3))
                c = r(f * c + i * np.tanh(fused[2][t] + ba[2]))
                h = r(o * np.tanh(c))
            else:
                zz, rr = sig(fused[0][t] + ba[0]), sig(fused[1][t] + ba[1])
                hh = np.tanh(fused[2][t] + rr * ba[2])
                h = r((1 - zz) * hh + zz * h)
            Y[t, d] = h
        hT.append(h)
        cT.append(c)
    return (Y if hn_all else np.stack(hT)[None]), (np.stack(cT)[None] if kind == "lstm" else None)


def run_zdnn_rnn(kind, p, direction, hn_all, work_area=None):
    D, G, f, h = p["W"].shape
    ts, b, _ = p["x"].shape
    rt = z.RNN_TYPE_LSTM if kind == "lstm" else z.RNN_TYPE_GRU
    x = make_zt(z.ZDNN_3DS, "FP32", p["x"].shape, p["x"])
    h0 = make_zt(z.ZDNN_3DS, "FP32", p["h0"].shape, p["h0"])
    W = make_zt(z.ZDNN_3DS, "FP32", (D, f, h), *p["W"].transpose(1, 0, 2, 3), concat=rt | z.USAGE_WEIGHTS)
    Wb = make_zt(z.ZDNN_2DS, "FP32", (D, h), *p["Wb"].transpose(1, 0, 2), concat=rt | z.USAGE_BIASES)
    R = make_zt(z.ZDNN_3DS, "FP32", (D, h, h), *p["R"].transpose(1, 0, 2, 3), concat=rt | z.USAGE_HIDDEN_WEIGHTS)
    Rb = make_zt(z.ZDNN_2DS, "FP32", (D, h), *p["Rb"].transpose(1, 0, 2), concat=rt | z.USAGE_HIDDEN_BIASES)
    hn = make_zt(z.ZDNN_4DS, "FP32", (ts if hn_all else 1, D, b, h), transform=False)
    dirv = {"FWD": z.FWD, "BWD": z.BWD, "BIDIR": z.BIDIR}[direction]
    if kind == "lstm":
        c0 = make_zt(z.ZDNN_3DS, "FP32", p["c0"].shape, p["c0"])
        cf = make_zt(z.ZDNN_4DS, "FP32", (1, D, b, h), transform=False)
        status = z.lstm(x, h0, c0, W, Wb, R, Rb, dirv, work_area, hn, cf)
        return status, hn, cf
    return z.gru(x, h0, W, Wb, R, Rb, dirv, work_area, hn), hn, None


def rnn_params(kind, D, ts, b, f, h, rng):
    G = 4 if kind == "lstm" else 3
    r32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)  # noqa: E731
    p = {"x": r32(ts, b, f), "h0": r32(D, b, h), "W": r32(D, G, f, h), "Wb": r32(D, G, h), "R": r32(D, G, h, h),
         "Rb": r32(D, G, h)}
    if kind == "lstm":
        p["c0"] = r32(D, b, h)
    return p


@settings(max_examples=16, deadline=None)
@given(kind=st.sampled_from(["lstm", "gru"]), direction=st.sampled_from(["FWD", "BWD", "BIDIR"]),
       hn_all=st.booleans(), ts=st.integers(1, 6), b=st.integers(1, 5), f=st.integers(1, 70),
       h=st.integers(1, 70), seed=st.integers(0, 2**32 - 1))
def test_rnn_random_against_op_boundary_oracle(kind, direction, hn_all, ts, b, f, h, seed):
    D = 2 if direction == "BIDIR" else 1
    p = rnn_params(kind, D, ts, b, f, h, np.random.default_rng(seed))
    status, hn, cf = run_zdnn_rnn(kind, p, direction, hn_all)
    assert status == S.ZDNN_OK
    q = {k: dlf16_round_ref(v).astype(np.float64) for k, v in p.items()}  # stored operands

    def rnd(v):
        return dlf16_round_ref(np.asarray(v, np.float32)).astype(np.float64)

    Y, C = rnn_oracle(kind, q["x"], q["h0"], q.get("c0"), q["W"], q["Wb"], q["R"], q["Rb"], direction, hn_all, rnd)
    Y0, _ = rnn_oracle(kind, q["x"], q["h0"], q.get("c0"), q["W"], q["Wb"], q["R"], q["Rb"], direction, hn_all,
                       lambda v: v)
    got = out_f32(hn)
    err = np.abs(got - Y)
    # float32 inside the ops vs float64 in the oracle: a sum near a rounding boundary may land one DLF16 step away
    # and carry that on; otherwise the results are bit-identical, and always nearer to the op-boundary model than
    # to the unrounded one
    assert err.max() <= 4 * 2.0**-9 * max(1.0, np.abs(Y).max())
    unrounded = np.mean(np.abs(got - Y0))
    assert np.mean(err == 0) > 0.9 or np.mean(err) < 0.6 * unrounded
    assert np.mean(err) <= unrounded + 1e-12
    if C is not None:
        assert np.abs(out_f32(cf) - C).max() <= 4 * 2.0**-9 * max(1.0, np.abs(C).max())


def test_rnn_statuses():
    rng = np.random.default_rng(0)
    p = rnn_params("lstm", 1, 3, 2, 4, 5, rng)
    assert run_zdnn_rnn("lstm", p, "FWD", True)[0] == S.ZDNN_OK
    x = make_zt(z.ZDNN_3DS, "FP32", (3, 2, 4), p["x"])
    h0 = make_zt(z.ZDNN_3DS, "FP32", (1, 2, 5), p["h0"])
    c0 = make_zt(z.ZDNN_3DS, "FP32", (1, 2, 5), p["c0"])
    rt = z.RNN_TYPE_LSTM
    W = make_zt(z.ZDNN_3DS, "FP32", (1, 4, 5), *p["W"].transpose(1, 0, 2, 3), concat=rt | z.USAGE_WEIGHTS)
    Wb = make_zt(z.ZDNN_2DS, "FP32", (1, 5), *p["Wb"].transpose(1, 0, 2), concat=rt | z.USAGE_BIASES)
    R = make_zt(z.ZDNN_3DS, "FP32", (1, 5, 5), *p["R"].transpose(1, 0, 2, 3), concat=rt | z.USAGE_HIDDEN_WEIGHTS)
    Rb = make_zt(z.ZDNN_2DS, "FP32", (1, 5), *p["Rb"].transpose(1, 0, 2), concat=rt | z.USAGE_HIDDEN_BIASES)

    def outs(ts=3, D=1):
        return (make_zt(z.ZDNN_4DS, "FP32", (ts, D, 2, 5), transform=False),
                make_zt(z.ZDNN_4DS, "FP32", (1, D, 2, 5), transform=False))

    assert z.lstm(x, h0, c0, W, Wb, R, Rb, 7, None, *outs()) == S.ZDNN_INVALID_DIRECTION
    # libzdnn verifies the shapes before it looks at the direction: FICO-sized weights (4 gates) fail gru's dim1
    assert z.gru(x, h0, W, Wb, R, Rb, -1, None, outs()[0]) == S.ZDNN_INVALID_SHAPE
    assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, None, *outs(ts=2)) == S.ZDNN_INVALID_SHAPE  # hn ts
    assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.BIDIR, None, *outs(D=2)) == S.ZDNN_INVALID_SHAPE  # dirs
    i32 = make_zt(z.ZDNN_3DS, z.INT32, (1, 2, 5), np.zeros((1, 2, 5), np.int32))
    assert z.lstm(x, i32, c0, W, Wb, R, Rb, z.FWD, None, *outs()) == S.ZDNN_INVALID_TYPE
    k = make_zt(z.ZDNN_HWCK, "FP32", (1, 1, 2, 5), np.zeros(10, np.float32))
    assert z.lstm(x, h0, k, W, Wb, R, Rb, z.FWD, None, *outs()) == S.ZDNN_INVALID_FORMAT
    # libzdnn checks no layout: FICO weights reach gru's dim1 check (4 * 64 != 3 * 64)
    assert z.gru(x, h0, W, Wb, R, Rb, z.FWD, None, outs()[0]) == S.ZDNN_INVALID_SHAPE
    # work_area: 4K aligned and large enough (README's bound: (4*ts + 6) units for LSTM)
    size = z.work_area_size("lstm", 3, 2, 5)
    assert size <= (4 * 3 + 6) * 4096 and size == (4 * 3 + 4 + 2) * 4096
    assert z.work_area_size("gru", 1, 40, 70, bidir=True) == 2 * (3 + 3 + 0) * 2 * 2 * 4096
    wa = zmod.aligned_buffer(size)
    assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, wa, *outs()) == S.ZDNN_OK
    assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, zmod.aligned_buffer(size + 64)[8:], *outs()) \
        == S.ZDNN_MISALIGNED_TENSOR
    with pytest.raises(ShapeError, match="work_area"):
        z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, wa[: size - 4096], *outs())

    def fail(n):
        raise MemoryError

    o1, o2 = outs(), outs()
    zmod._allocator[0] = fail
    try:
        assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, None, *o1) == S.ZDNN_ALLOCATION_FAILURE
        assert z.lstm(x, h0, c0, W, Wb, R, Rb, z.FWD, wa, *o2) == S.ZDNN_OK  # no allocation needed
    finally:
        zmod._allocator[0] = zmod.aligned_buffer


def test_rnn_range_violation():
    p = rnn_params("gru", 1, 2, 1, 3, 4, np.random.default_rng(1))
    p["x"][:] = 3e9
    p["W"][:] = 3e9
    status, hn, _ = run_zdnn_rnn("gru", p, "FWD", True)
    assert status == S.ZDNN_ELEMENT_RANGE_VIOLATION


def test_lstm_bidir_output_layout_and_final_steps():
    """BIDIR hn holds fwd at columns [0, h) and bwd at [PADDED(h), PADDED(h)+h); the final-step output is the last
    processed step (fwd: t = ts-1, bwd: t = 0)."""
    p = rnn_params("lstm", 2, 4, 3, 5, 6, np.random.default_rng(2))
    _, hn_all, _ = run_zdnn_rnn("lstm", p, "BIDIR", True)
    _, hn_last, cf = run_zdnn_rnn("lstm", p, "BIDIR", False)
    Y, last = out_f32(hn_all), out_f32(hn_last)
    np.testing.assert_array_equal(last[0, 0], Y[-1, 0])
    np.testing.assert_array_equal(last[0, 1], Y[0, 1])
    from fusedrnn.targets.zdnn.transform import read_values

    cells = read_values(hn_all)  # (ts, 1, b, 2*64)
    np.testing.assert_array_equal(cells[:, 0, :, :6], Y[:, 0])
    np.testing.assert_array_equal(cells[:, 0, :, 64:70], Y[:, 1])
    assert not cells[:, 0, :, 6:64].any() and not cells[:, 0, :, 70:].any()


# ---- quantized matmul -----------------------------------------------------------------------------------------
def q_ref(r, s, o):
    """README QUANTIZE: clip(roundf(r/s + o), -128, 127) in float32 (roundf: half away from zero)."""
    v = (np.asarray(r, np.float32) / np.float32(s) + np.float32(o)).astype(np.float32)
    return np.clip(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)), -128, 127).astype(np.float32)


def dq_ref(q, s, o):
    return ((q - np.float32(o)) * np.float32(s)).astype(np.float32)


def qzt(shape, pretype, qtype, scale, offset, data, clip=(-128, 127)):
    lay = {1: z.ZDNN_1D, 2: z.ZDNN_2D, 3: z.ZDNN_3DS}[len(shape)]
    pre = z.init_pre_transformed_desc(lay, pretype, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, qtype, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, scale, offset, zt) == S.ZDNN_OK
    if data is not None:
        assert z.transform_quantized_ztensor(zt, False, clip[0], clip[1], data) == S.ZDNN_OK
    return zt


def vec_zt(c, scale, offset, pretype=z.FP32, qtype=z.QUANTIZED_INT8):
    lay = z.ZDNN_1D if c.ndim == 1 else z.ZDNN_2DS
    pre = z.init_pre_transformed_desc(lay, pretype, None, *c.shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, qtype, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, scale, offset, zt) == S.ZDNN_OK
    assert z.transform_quantized_ztensor(zt, False, -128, 127, c) == S.ZDNN_OK
    return zt


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from(["plain", "stacked", "bcast1", "bcast23"]), op=st.integers(0, 6),
       otf=st.booleans(), zb_zero=st.booleans(), neg_c=st.booleans(), disable_clipping=st.booleans(),
       dequantize=st.booleans(), m=st.integers(1, 8), n=st.integers(1, 40), p=st.integers(1, 8),
       seed=st.integers(0, 2**32 - 1))
def test_quantized_matmul_random_against_readme_oracle(form, op, otf, zb_zero, neg_c, disable_clipping, dequantize,
                                                       m, n, p, seed):
    """Random shapes, stack forms, ops, Zb = 0 or not, on-the-fly or not, negative scale ratios: ADDITION within
    ±1 quantized step of the README oracle, compares 0/1 as the oracle apart from near-ties."""
    rng = np.random.default_rng(seed)
    s = 2
    sa = 1 if form in ("plain", "bcast1") else s
    sb = 1 if form in ("plain", "bcast23") else s
    sc = sb if form in ("bcast1", "stacked") else 1
    a = (rng.standard_normal((sa, m, n)) * 10).astype(np.float32)
    b_q = rng.integers(-100, 101, (sb, n, p)).astype(np.int8)
    c = (rng.standard_normal((sc, p)) * 50).astype(np.float32)
    Sa, Za = np.float32(0.25), np.float32(rng.integers(-10, 11))
    # compare ops: zDNN's comparison bias has no Zb term (its tests use symmetric weights), so Zb = 0 there
    Sb, Zb = np.float32(0.125), np.float32(0 if zb_zero or op else rng.integers(-5, 6))
    Sc, Zc = np.float32(-0.5 if neg_c else 0.5), np.float32(rng.integers(-3, 4))
    # on the fly, the zAIU quantizes a from its stored DLFLOAT16 values
    A = dq_ref(q_ref(dlf16_round_ref(a) if otf else a, Sa, Za), Sa, Za)
    B = dq_ref(b_q.astype(np.float32), Sb, Zb)
    C = dq_ref(q_ref(c, Sc, Zc), Sc, Zc)
    res = np.matmul(A, B)
    Sy = np.float32(max((res.max() - res.min()) / 255, 1e-3))
    Zy = np.float32(0.0)
    stacked = lambda k: k > 1 or form == "stacked"  # noqa: E731
    a_shape = (sa, m, n) if stacked(sa) else (m, n)
    b_shape = (sb, n, p) if stacked(sb) else (n, p)
    c_arr = c if stacked(sc) else c[0]
    A_zt = qzt(a_shape, z.FP32, z.QUANTIZED_DLFLOAT16 if otf else z.QUANTIZED_INT8, Sa, Za, a.reshape(a_shape))
    B_zt = qzt(b_shape, z.INT8, z.QUANTIZED_WEIGHTS_INT8, Sb, Zb, b_q.reshape(b_shape))
    C_zt = vec_zt(c_arr, Sc, Zc)
    so = max(sa, sb)
    o_shape = (so, m, p) if stacked(so) else (m, p)
    Y_zt = qzt(o_shape, z.FP32, z.QUANTIZED_DLFLOAT16, Sy, Zy, None)
    status = z.quantized_matmul_op(A_zt, B_zt, C_zt, op, -128, 127, disable_clipping, dequantize, False, None, Y_zt)
    assert status == S.ZDNN_OK
    got = out_f32(Y_zt).reshape(so, m, p)
    if op == 0:
        ref = res + C[:, None, :]
        if dequantize:
            got = q_ref(got, Sy, Zy)
        elif disable_clipping:
            got = np.clip(np.rint(got), -128, 127)
        assert np.all(np.abs(got - q_ref(ref, Sy, Zy)) <= 1)
    else:
        # zDNN mirrors GREATER/LESSER(_EQUAL) whenever Sa·Sb/Sc < 0 (aiu_quantized_matmul.c); with sa·sb > 0 that is
        # exactly when the c scale is negative, so the emulated result is A@B <mirrored op> C there
        flip = {1: 6, 6: 1, 2: 5, 5: 2}
        want = OPS[flip.get(op, op) if neg_c else op](res, C[:, None, :])
        near = np.abs(res - C[:, None, :]) <= 0.05 * (1 + np.abs(res))
        assert np.all((got == want) | near)


def _qset(otf=False, b_offset=0.0, b_scale=0.5, y_scale=1.0, a_scale=0.5, a_offset=1.0):
    a = np.linspace(-5, 5, 6, dtype=np.float32).reshape(2, 3)
    A = qzt((2, 3), z.FP32, z.QUANTIZED_DLFLOAT16 if otf else z.QUANTIZED_INT8, a_scale, a_offset,
            a if (otf or a_scale != 0) else None)
    B = qzt((3, 4), z.INT8, z.QUANTIZED_WEIGHTS_INT8, b_scale, b_offset, np.ones((3, 4), np.int8))
    C = vec_zt(np.ones(4, np.float32), 0.5, 0.0)
    Y = qzt((2, 4), z.FP32, z.QUANTIZED_DLFLOAT16, y_scale, 0.0, None)
    return A, B, C, Y


def test_quantized_matmul_statuses():
    A, B, C, Y = _qset()
    args = (-128, 127, False, False, False, None)
    assert z.quantized_matmul_op(A, B, C, 0, *args, Y) == S.ZDNN_OK
    # libzdnn's quantized matmul checks no state (its INVALID_STATE belongs to getrange_ztensor) and meets the
    # buffers after its checks; pre_computed with a nonzero Zb is its very first check
    A.is_transformed = False
    assert z.quantized_matmul_op(A, B, C, 0, *args, Y) == S.ZDNN_OK
    A_buf, A.buffer = A.buffer, None
    assert z.quantized_matmul_op(A, B, C, 0, *args, Y) == S.ZDNN_INVALID_BUFFER
    assert z.quantized_matmul_op(A, B, C, 8, *args, Y) == S.ZDNN_FUNC_RC_F000
    B.offset = 1.0
    assert z.quantized_matmul_op(A, B, C, 8, -128, 127, False, False, True, None, Y) == S.ZDNN_INVALID_OFFSET
    A.buffer, A.is_transformed, B.offset = A_buf, True, 0.0
    assert z.quantized_matmul_op(A, B, C, 8, *args, Y) == S.ZDNN_FUNC_RC_F000
    assert z.quantized_matmul_op(A, B, C, 0, 5, 5, False, False, False, None, Y) == S.ZDNN_INVALID_CLIPPING_VALUE
    A2, B2, C2, Y2 = _qset(otf=True, a_scale=1e30)  # rec_scale underflows to DLF16 zero
    assert z.quantized_matmul_op(A2, B2, C2, 0, *args, Y2) == S.ZDNN_INVALID_SCALE
    A2, B2, C2, Y2 = _qset(otf=True, a_offset=1e12)  # offset overflows DLF16
    assert z.quantized_matmul_op(A2, B2, C2, 0, *args, Y2) == S.ZDNN_INVALID_OFFSET
    A2, B2, _, Y2 = _qset(b_offset=3.0)
    C2 = vec_zt(np.ones(4, np.float32), 0.5, 0.0, qtype=z.QUANTIZED_DLFLOAT16)  # pre-computed q̃c
    assert z.quantized_matmul_op(A2, B2, C2, 0, -128, 127, False, False, True, None, Y2) == S.ZDNN_INVALID_OFFSET
    A2, B2, C2, Y2 = _qset(y_scale=1e30)
    assert z.quantized_matmul_op(A2, B2, C2, 0, *args, Y2) == S.ZDNN_FUNC_RC_F002
    assert z.quantized_matmul_op(C, B, C, 0, *args, Y) == S.ZDNN_INVALID_SHAPE
    assert z.quantized_matmul_op(A, A, C, 0, *args, Y) == S.ZDNN_INVALID_FORMAT  # a is not 4DWEIGHTS
    assert z.quantized_matmul_op(A, B, Y, 0, *args, Y) == S.ZDNN_INVALID_TYPE  # c DLF16 without pre_computed
    with z.settings.override(precheck=False):
        assert z.quantized_matmul_op(A, B, Y, 0, *args, Y) == S.ZDNN_FUNC_RC_F001
    wa = zmod.aligned_buffer(2 * C.buffer_size)
    assert z.quantized_matmul_op(A, B, C, 0, -128, 127, False, False, False, wa, Y) == S.ZDNN_OK
    assert z.quantized_matmul_op(A, B, C, 0, -128, 127, False, False, False, wa[16:], Y) == S.ZDNN_MISALIGNED_TENSOR
    with pytest.raises(ShapeError, match="work_area"):
        z.quantized_matmul_op(A, B, C, 0, -128, 127, False, False, False, wa[:2048], Y)
    z.set_machine("telum1")
    assert z.quantized_matmul_op(A, B, C, 0, *args, Y) == S.ZDNN_UNAVAILABLE_FUNCTION


def test_quantized_pre_computed_matches_folded_bias():
    """pre_computed: c holds q̃c = Zy − (Sc/Sy)·Zc + (Sc/Sy)·c_q (README formula with Zb = 0); the result equals the
    normal path's."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 5)) * 4).astype(np.float32)
    b_q = rng.integers(-50, 51, (5, 2)).astype(np.int8)
    c = (rng.standard_normal(2) * 20).astype(np.float32)
    Sa, Za, Sb, Sc, Zc, Sy, Zy = 0.125, 0.0, 0.25, 0.5, 2.0, 0.75, 3.0
    A = qzt((3, 5), z.FP32, z.QUANTIZED_INT8, Sa, Za, a)
    B = qzt((5, 2), z.INT8, z.QUANTIZED_WEIGHTS_INT8, Sb, 0.0, b_q)
    C = vec_zt(c, Sc, Zc)
    Y1 = qzt((3, 2), z.FP32, z.QUANTIZED_DLFLOAT16, Sy, Zy, None)
    assert z.quantized_matmul_op(A, B, C, 0, -128, 127, False, False, False, None, Y1) == S.ZDNN_OK
    c_q = q_ref(c, Sc, Zc)
    pre = (Zy - (Sc / Sy) * Zc + (Sc / Sy) * c_q).astype(np.float32)
    Cp = vec_zt(pre, Sc, Zc, qtype=z.QUANTIZED_DLFLOAT16)
    Y2 = qzt((3, 2), z.FP32, z.QUANTIZED_DLFLOAT16, Sy, Zy, None)
    assert z.quantized_matmul_op(A, B, Cp, 0, -128, 127, False, False, True, None, Y2) == S.ZDNN_OK
    np.testing.assert_array_equal(out_f32(Y1), out_f32(Y2))


def test_non_ztensor_arguments_raise():
    a, b, c, out = _mm_tensors()
    with pytest.raises(TypeError, match="input_b: expected a ZTensor"):
        z.matmul_op(a, np.ones((3, 4)), c, 0, out)
    with pytest.raises(TypeError, match="c0: expected a ZTensor, got NoneType"):
        z.lstm(a, a, None, a, a, a, a, z.FWD, None, out, out)
    with pytest.raises(TypeError, match="output"):
        z.quantized_matmul_op(a, b, c, 0, -128, 127, False, False, False, None, None)
