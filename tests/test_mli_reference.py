"""Randomised MLI 2.0 configurations the conformance vectors do not cover, against a slow scalar reference
written here from the spec (mli.md §2-§4) with Python ints: one neuron, one MAC, one element at a time.

Covers LSTM act TANH/SIGM/NONE, RNN_OUT_ALL/LAST, forward/backward, per-tensor and per-axis sa8 weights,
FULL_ACCU ON vs OFF, both ROUND_MODEs, negative frac bits, saturating values, the GRU per-tensor quirk
(faithful and corrected), FC sa8 with both output paths and every ReLU, element-wise ops and activations."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusedrnn.mli as mli

# ---------------------------------------------------------------------------------------------------------
# scalar primitives (spec §2.1)


def lim(w):
    return -(1 << (w - 1)), (1 << (w - 1)) - 1


def sat(x, w):
    lo, hi = lim(w)
    return min(max(x, lo), hi)


def wrap(x, w):
    x &= (1 << w) - 1
    return x - (1 << w) if x >> (w - 1) else x


def asl(x, n, w):
    if n < 0:
        return x >> -n
    if n > w - 1:
        return 0 if x == 0 else lim(w)[x > 0]
    return sat(x << n, w)


def asr(x, n, w):
    if n < 0:
        return asl(x, -n, w)
    if n > w - 1:
        return -1 if x < 0 else 0
    return x >> n


def rnd(x, n, w, mode):
    if n < 0:
        return asl(x, -n, w)
    if n == 0:
        return x
    if n > w - 1:
        return 0
    if mode == "UP":
        return sat(x + (1 << (n - 1)), w) >> n
    r = x >> n
    if (x >> (n - 1)) & 1 and (r & 1 or x & ((1 << (n - 1)) - 1)):
        r += 1
    return r


def norm32(x):
    return 31 if x == 0 else 31 - (x if x > 0 else ~x).bit_length()


def cdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# ---------------------------------------------------------------------------------------------------------
# LUTs (§4.3 generator, §2.7 evaluation)


def table(kind):
    size, qi, off = {"sigm": (320, 4, 160), "tanh": (344, 5, 172)}[kind]
    f = (lambda v: 1 / (1 + math.exp(-v))) if kind == "sigm" else math.tanh
    out = []
    for i in range(size):
        v = f((i - off) / 2**qi) * 32768
        out.append(min(max(int(math.copysign(math.floor(abs(v) + 0.5), v)), -32768), 32767))
    return out, qi, off


TABLES = {k: table(k) for k in ("sigm", "tanh")}
SA8_ACT_OUT = {"tanh": (1, 0, 7), "sigm": (1, -128, 8)}  # scale, zero point, sfb


def lut(q, kind, mode, fi=None, sa=None):
    L, qi, off = TABLES[kind]
    if sa is not None:
        fi = 15 - (7 - qi)
    shift_in = min(fi - qi, 15)
    if shift_in > 0:
        pre = min(max(fi - qi - 15, 0), 15)
        x = q if sa is None else rnd((q - sa[1]) * sa[0], sa[2] - fi, 32, mode)
        x = asr(x, pre, 32)
        idx = min(max(sat((x >> shift_in) + off, 32), 0), len(L) - 2)
        frac = x & ((1 << shift_in) - 1)
        return L[idx] - sat(rnd((L[idx] - L[idx + 1]) * frac, shift_in, 32, mode), 16)
    x = q if sa is None else sat((q - sa[1]) * rnd(sa[0], sa[2] - fi, 32, mode), 16)
    return L[min(max(sat(asl(x, -shift_in, 32) + off, 32), 0), len(L) - 1)]


def act(q, kind, qp, flavor, mode):
    """(value, its quantization) of tanh/sigm."""
    if flavor == "sa8":
        s, z, f = SA8_ACT_OUT[kind]
        return sat(rnd(lut(q, kind, mode, sa=qp), 15 - f, 32, mode) + z, 8), (s, z, f)
    return lut(q, kind, mode, fi=qp), 15


# ---------------------------------------------------------------------------------------------------------
# element-wise (§2.5)


def mul(a, qa, b, qb, qo, flavor, mode):
    if flavor != "sa8":
        return sat(rnd(a * b, min(qa + qb - qo, 31), 64, mode), 16)
    (s1, z1, f1), (s2, z2, f2), (so, zo, fo) = qa, qb, qo
    P = s1 * s2
    n = norm32(P)
    q = cdiv(P << n, so)
    post = f1 + f2 - fo + n
    n2 = norm32(q)
    m16 = sat(rnd(q, 16 - n2, 32, mode), 16)
    post -= 16 - n2
    k = max(post - 31, 0) + min(31 + post, 0)
    m16 = rnd(m16, k, 16, mode)
    post -= k
    p = sat(a - z1, 16) * sat(b - z2, 16)
    pre = min(max(post - 21, 0), 3)
    p16 = sat(rnd(p, pre, 32, mode), 16)
    t = sat(rnd(p16 * m16, post - pre, 32, mode), 16)
    return sat(sat(t + zo, 16), 8)


def addsub(a, qa, b, qb, qo, flavor, mode, sub=False):
    if flavor != "sa8":
        x1 = rnd(a, min(qa - qb, 0), 32, mode)
        x2 = rnd(b, min(qb - qa, 0), 32, mode)
        return sat(rnd(sat(x1 - x2 if sub else x1 + x2, 32), min(max(qa, qb) - qo, 31), 64, mode), 16)
    vs = []
    for x, (s, z, f) in ((a, qa), (b, qb)):
        so, zo, fo = qo
        n = norm32(s)
        q = cdiv(s << n, so)
        pre = n + f - fo
        n2 = norm32(q)
        m = sat(rnd(q, 16 - n2, 32, mode), 16)
        pre -= 16 - n2
        k = max(pre - 23, 0) + min(31 + pre, 0)
        m = rnd(m, k, 16, mode)
        pre -= k
        vs.append(rnd(sat(x - z, 16) * m, pre, 32, mode))
    v = sat(vs[0] - vs[1] if sub else vs[0] + vs[1], 32)
    return sat(sat(sat(v, 16) + qo[1], 16), 8)


# ---------------------------------------------------------------------------------------------------------
# dense (§2.2, §2.3, §2.6)


def quant_params(p_in, s_w, f_w, p_out, full_accu, mode):
    s_in, _, f_in = p_in
    s_out, _, f_out = p_out
    n_in = norm32(s_in)
    su = cdiv(s_in << n_in, s_out)
    n2 = norm32(su)
    ratio = sat(rnd(su, 16 - n2, 32, mode), 16)
    mul_ = ratio * s_w
    shift = f_in + n_in - f_out - (16 - n2) + f_w
    if not full_accu:
        m = norm32(mul_)
        mul_, shift = mul_ << m, shift + m
    return mul_, shift


def bias_value(b, flavor, bias_shift, full_accu, mode):
    if flavor == "sa8":
        if not full_accu:
            k = max(16 - norm32(b), 0)
            b = asl(b >> k, k, 32)
        return b
    if flavor == "fx16":
        return wrap(rnd(b, -bias_shift, 64, mode), 32)
    return rnd(b, -bias_shift, 32, mode)


def ref_dense(xs, Ws, b, qs_in, qs_w, q_out, flavor, full_accu, mode, q_bias=0):
    """rnn_dense for one output vector; xs[i] list, Ws[i] [N_i][M] lists, per-pair weight quantization
    qs_w[i] (fx: frac; sa8: (scale, sfb)), q_out (fx frac or sa8 tuple)."""
    M = len(b)
    wide = 64 if flavor == "fx16" else 32
    out = []
    for o in range(M):
        R = 0
        for i, (x, W) in enumerate(zip(xs, Ws, strict=False)):
            acc = bias_value(b[o], flavor, qs_in[0] + qs_w[0] - q_bias if flavor != "sa8" else 0, full_accu,
                             mode) if i == 0 else 0
            for j in range(len(x)):
                acc = acc + x[j] * W[j][o]
                if wide == 32:
                    acc = wrap(acc, 32)
            if flavor == "sa8":
                for j in range(len(x)):
                    acc = wrap(acc - qs_in[i][1] * W[j][o], 32)
                m, sh = quant_params(qs_in[i], qs_w[i][0], qs_w[i][1], q_out, full_accu, mode)
                r = sat(rnd(acc * m, min(sh, 63), 64, mode), 32)
            elif flavor == "fx16":
                r = rnd(acc, min(qs_in[i] + qs_w[i] - q_out, 39), 64, mode)
            else:
                r = rnd(acc, qs_in[i] + qs_w[i] - q_out, 32, mode)
            R = sat(R + r, wide)
        out.append(sat(sat(sat(R, 16) + q_out[1], 16), 8) if flavor == "sa8" else sat(R, 16))
    return out


# ---------------------------------------------------------------------------------------------------------
# cells (§3.3, §3.4)


def wq(flavor, q, g):
    """Quantization of weight gate g: fx frac, or sa8 (scale, sfb) from per-tensor or per-axis params."""
    if flavor != "sa8":
        return q
    s, f = q
    return (s[g], f[g]) if len(s) > 1 else (s[0], f[0])


def ref_lstm(x, h, c, Wi, Wo, b, q, flavor, act_kind, backward, full_accu, mode):
    """Returns (outputs in processing order, final cell)."""
    ir = (1, 0, 4) if flavor == "sa8" else min(10, q["in"] + q["wi"])
    qh = q["h0"]
    outs = []
    for t in (range(len(x) - 1, -1, -1) if backward else range(len(x))):
        g_ir = [ref_dense([x[t], h], [Wi[g], Wo[g]], b[g], [q["in"], qh], [wq(flavor, q["wi"], g),
                          wq(flavor, q["wo"], g)], ir, flavor, full_accu, mode, q.get("b", 0)) for g in range(4)]
        i_, qs = zip(*[act(v, "sigm", ir, flavor, mode) for v in g_ir[0]], strict=False)
        g_, qt = zip(*[act(v, "tanh", ir, flavor, mode) for v in g_ir[1]], strict=False)
        f_ = [act(v, "sigm", ir, flavor, mode)[0] for v in g_ir[2]]
        o_ = [act(v, "sigm", ir, flavor, mode)[0] for v in g_ir[3]]
        qs, qt = qs[0], qt[0]
        qc = q["cell"]
        c = [mul(c[m], qc, f_[m], qs, qc, flavor, mode) for m in range(len(c))]
        gg = [mul(g_[m], qt, i_[m], qs, qt, flavor, mode) for m in range(len(c))]
        c = [addsub(c[m], qc, gg[m], qt, qc, flavor, mode) for m in range(len(c))]
        if act_kind == "none":
            h = [mul(c[m], qc, o_[m], qs, q["out"], flavor, mode) for m in range(len(c))]
        else:
            a = [act(v, act_kind, qc, flavor, mode) for v in c]
            h = [mul(a[m][0], a[m][1], o_[m], qs, q["out"], flavor, mode) for m in range(len(c))]
        qh = q["out"]
        outs.append(h)
    return outs, c


def ref_gru(x, h, Wi, Wo, b, q, flavor, backward, full_accu, mode, faithful=True):
    ir = (21, 0, 9) if flavor == "sa8" else min(11, q["in"] + q["wi"])
    one, qone = ((127, (1, -128, 8)) if flavor == "sa8" else (32767, 15))
    qh = q["h0"]
    outs = []
    M = len(h)

    def wq_new(qw):
        s, f = wq(flavor, qw, 2)
        if flavor == "sa8" and len(qw[0]) == 1 and faithful:
            return wrap(s + 4, 16), wrap(f + 2, 8)
        return s, f

    for t in (range(len(x) - 1, -1, -1) if backward else range(len(x))):
        zr = [ref_dense([x[t], h], [Wi[g], Wo[g]], b[g], [q["in"], qh], [wq(flavor, q["wi"], g),
                        wq(flavor, q["wo"], g)], ir, flavor, full_accu, mode, q.get("b", 0)) for g in range(2)]
        z = [act(v, "sigm", ir, flavor, mode) for v in zr[0]]
        r = [act(v, "sigm", ir, flavor, mode)[0] for v in zr[1]]
        qs = z[0][1]
        z = [v[0] for v in z]
        hr = [mul(r[m], qs, h[m], qh, qh, flavor, mode) for m in range(M)]
        hz = [mul(h[m], qh, z[m], qs, qh, flavor, mode) for m in range(M)]
        omz = [addsub(one, qone, z[m], qs, qs, flavor, mode, sub=True) for m in range(M)]
        if flavor == "sa8":
            qwn_i, qwn_o = wq_new(q["wi"]), wq_new(q["wo"])
        else:
            qwn_i, qwn_o = q["wi"], q["wo"]
        n_ir = ref_dense([x[t], hr], [Wi[2], Wo[2]], b[2], [q["in"], qh], [qwn_i, qwn_o], ir, flavor, full_accu,
                         mode, q.get("b", 0))
        n = [act(v, "tanh", ir, flavor, mode) for v in n_ir]
        tmp = [mul(n[m][0], n[m][1], omz[m], qs, q["out"], flavor, mode) for m in range(M)]
        h = [addsub(tmp[m], q["out"], hz[m], qh, q["out"], flavor, mode) for m in range(M)]
        qh = q["out"]
        outs.append(h)
    return outs


# ---------------------------------------------------------------------------------------------------------
# random configurations


def ints(rng, lo, hi, shape, edge=0.15):
    """Uniform ints with a share of saturating extremes."""
    v = rng.integers(lo, hi + 1, shape)
    m = rng.random(shape) < edge
    return np.where(m, rng.choice([lo, hi], shape), v)


def sa_scale(rng, sfb=(12, 24)):
    return int(rng.integers(1 << 13, 1 << 15)), int(rng.integers(*sfb))


def make_cell_case(rng, flavor, G, per_tensor):
    T, N, M = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
    if flavor == "sa8":
        q = {}
        for k in ("in", "h0", "out", "cell"):
            s, f = sa_scale(rng)
            q[k] = (s, int(rng.integers(-128, 128)), f)
        q["cell"] = (q["cell"][0], int(rng.integers(-20, 21)), q["cell"][2])
        nw = 1 if per_tensor else G
        sw, fw = zip(*[sa_scale(rng) for _ in range(nw)], strict=False)
        q["wi"] = (list(sw), list(fw))
        sw2, fw2 = zip(*[sa_scale(rng) for _ in range(nw)], strict=False)
        q["wo"] = (list(sw2), list(fw2))
        x = ints(rng, -128, 127, (T, N))
        h0 = ints(rng, -128, 127, M)
        c0 = ints(rng, -128, 127, M)
        Wi, Wo = ints(rng, -127, 127, (G, N, M)), ints(rng, -127, 127, (G, M, M))
        b = ints(rng, -(2**24), 2**24, (G, M), edge=0.05)
    else:
        wb = 16 if flavor == "fx16" else 8
        fmax = 15 if wb == 16 else 7
        q = {"in": int(rng.integers(-2, 15)), "h0": int(rng.integers(-2, 16)), "out": int(rng.integers(-2, 16)),
             "cell": int(rng.integers(-2, 15)), "wi": int(rng.integers(-2, fmax + 1)),
             "wo": int(rng.integers(-2, fmax + 1))}
        q["b"] = int(q["in"] + q["wi"] - rng.integers(0, 12))
        lo, hi = lim(wb)
        x = ints(rng, -32768, 32767, (T, N))
        h0, c0 = ints(rng, -32768, 32767, M), ints(rng, -32768, 32767, M)
        Wi, Wo, b = ints(rng, lo, hi, (G, N, M)), ints(rng, lo, hi, (G, M, M)), ints(rng, lo, hi, (G, M))
    return q, x, h0, c0, Wi, Wo, b


def tensors(flavor, q, x, h0, c0, Wi, Wo, b, G, results_all):
    T, M = x.shape[0], Wo.shape[-1]
    if flavor == "sa8":
        def w(v, qw):
            s, f = qw
            return mli.sa_tensor(v, s, 0, f, dim=0 if len(s) > 1 else -1)
        bs = [int(np.round(q["in"][0] * s / 2**15)) for s in q["wi"][0]]
        bf = [q["in"][2] + f - 15 for f in q["wi"][1]]
        bt = mli.sa_tensor(b, bs, 0, bf, dim=0 if len(bs) > 1 else -1, el_type=mli.MLI_EL_SA_32)
        args = [mli.sa_tensor(x, *q["in"]), mli.sa_tensor(h0, *q["h0"]), w(Wi, q["wi"]), w(Wo, q["wo"]), bt]
        out = mli.empty_tensor(mli.MLI_EL_SA_8, T * M, scale=q["out"][0], zero_point=q["out"][1],
                               scale_frac_bits=q["out"][2])
        cell = mli.sa_tensor(c0, *q["cell"])
    else:
        we = mli.MLI_EL_FX_16 if flavor == "fx16" else mli.MLI_EL_FX_8
        args = [mli.fx_tensor(x, q["in"]), mli.fx_tensor(h0, q["h0"]), mli.fx_tensor(Wi, q["wi"], we),
                mli.fx_tensor(Wo, q["wo"], we), mli.fx_tensor(b, q["b"], we)]
        out = mli.empty_tensor(mli.MLI_EL_FX_16, T * M, frac_bits=q["out"])
        cell = mli.fx_tensor(c0, q["cell"])
    luts = [mli.Lut(), mli.Lut()]
    mli.krn_tanh_create_lut(luts[0])
    mli.krn_sigm_create_lut(luts[1])
    return args, luts, out, cell


LSTM_FN = {"fx16": mli.krn_lstm_cell_fx16, "fx16_fx8_fx8": mli.krn_lstm_cell_fx16_fx8_fx8,
           "sa8": mli.krn_lstm_cell_sa8_sa8_sa32}
GRU_FN = {"fx16": mli.krn_gru_cell_fx16, "fx16_fx8_fx8": mli.krn_gru_cell_fx16_fx8_fx8,
          "sa8": mli.krn_gru_cell_sa8_sa8_sa32}
ACTS = {"tanh": mli.RNN_ACT_TANH, "sigm": mli.RNN_ACT_SIGM, "none": mli.RNN_ACT_NONE}
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def L(a):
    return np.asarray(a).tolist()


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(["fx16", "fx16_fx8_fx8", "sa8"]),
       act_kind=st.sampled_from(["tanh", "sigm", "none"]), backward=st.booleans(), results_all=st.booleans(),
       per_tensor=st.booleans(), full_accu=st.booleans(), mode=st.sampled_from(["UP", "CONVERGENT"]))
def test_lstm_cell_matches_scalar_reference(seed, flavor, act_kind, backward, results_all, per_tensor, full_accu,
                                            mode):
    rng = np.random.default_rng(seed)
    q, x, h0, c0, Wi, Wo, b = make_cell_case(rng, flavor, 4, per_tensor)
    args, luts, out, cell = tensors(flavor, q, x, h0, c0, Wi, Wo, b, 4, results_all)
    cfg = mli.RnnCellCfg(mli.RNN_DIR_BACKWARD if backward else mli.RNN_DIR_FORWARD,
                         mli.RNN_OUT_ALL if results_all else mli.RNN_OUT_LAST, ACTS[act_kind], np.zeros(4096, np.int8))
    with mli.build(mode, full_accu):
        st_ = LSTM_FN[flavor](*args, *luts, cfg, cell, out)
    assert st_ == mli.MLI_STATUS_OK
    outs, c = ref_lstm(L(x), L(h0), L(c0), L(Wi), L(Wo), L(b), q, flavor, act_kind, backward, full_accu, mode)
    exp = outs if results_all else outs[-1:]
    assert out.values().tolist() == exp
    assert cell.values().tolist() == c


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(["fx16", "fx16_fx8_fx8", "sa8"]),
       backward=st.booleans(), per_tensor=st.booleans(), full_accu=st.booleans(), faithful=st.booleans(),
       mode=st.sampled_from(["UP", "CONVERGENT"]))
def test_gru_cell_matches_scalar_reference(seed, flavor, backward, per_tensor, full_accu, faithful, mode):
    rng = np.random.default_rng(seed)
    q, x, h0, _, Wi, Wo, b = make_cell_case(rng, flavor, 3, per_tensor)
    args, luts, out, _ = tensors(flavor, q, x, h0, h0, Wi, Wo, b, 3, True)
    cfg = mli.RnnCellCfg(mli.RNN_DIR_BACKWARD if backward else mli.RNN_DIR_FORWARD, mli.RNN_OUT_ALL,
                         scratch_data=np.zeros(4096, np.int8))
    kw = {"faithful": faithful} if flavor == "sa8" else {}
    with mli.build(mode, full_accu):
        st_ = GRU_FN[flavor](*args, *luts, cfg, out, **kw)
    assert st_ == mli.MLI_STATUS_OK
    outs = ref_gru(L(x), L(h0), L(Wi), L(Wo), L(b), q, flavor, backward, full_accu, mode, faithful)
    assert out.values().tolist() == outs


def test_gru_per_tensor_quirk_changes_the_result():
    rng = np.random.default_rng(7)
    q = {"in": (20000, 0, 21), "h0": (16384, 0, 21), "out": (16384, 0, 21), "cell": (16384, 0, 21),
         "wi": ([20000], [22]),
         "wo": ([20000], [22])}
    x, h0 = rng.integers(-60, 60, (4, 3)), rng.integers(-60, 60, 4)
    Wi, Wo, b = rng.integers(-60, 60, (3, 3, 4)), rng.integers(-60, 60, (3, 4, 4)), rng.integers(-900, 900, (3, 4))
    res = []
    for faithful in (True, False):
        args, luts, out, _ = tensors("sa8", q, x, h0, h0, Wi, Wo, b, 3, True)
        assert mli.krn_gru_cell_sa8_sa8_sa32(*args, *luts, mli.RnnCellCfg(results=mli.RNN_OUT_ALL,
                                                             scratch_data=np.zeros(4096, np.int8)), out,
                                             faithful=faithful) == mli.MLI_STATUS_OK
        res.append(out.values())
    assert not np.array_equal(*res)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), relu=st.sampled_from([0, 1, 2, 3]), per_axis=st.booleans(),
       full_accu=st.booleans(), mode=st.sampled_from(["UP", "CONVERGENT"]), ext=st.booleans())
def test_fc_sa8_matches_scalar_reference(seed, relu, per_axis, full_accu, mode, ext):
    rng = np.random.default_rng(seed)
    N, M = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    s_in, f_in = sa_scale(rng)
    z_in = int(rng.integers(-128, 128))
    s_out, f_out = sa_scale(rng)
    f_out = int(rng.integers(-4, 30))
    z_out = int(rng.integers(-128, 128))
    nw = M if per_axis else 1
    sw, fw = map(list, zip(*[sa_scale(rng) for _ in range(nw)], strict=False))
    x, W = ints(rng, -128, 127, N), ints(rng, -127, 127, (N, M))
    b = ints(rng, -(2**26), 2**26, M, edge=0.05)
    bt = mli.sa_tensor(b, [int(np.round(s_in * s / 2**15)) for s in sw], 0, [f_in + f - 15 for f in fw],
                       dim=0 if per_axis else -1, el_type=mli.MLI_EL_SA_32)
    out = mli.empty_tensor(mli.MLI_EL_SA_8, M, scale=s_out, zero_point=z_out, scale_frac_bits=f_out)
    fn = mli.krn_fully_connected_sa8_sa8_sa32_ext_bias if ext else mli.krn_fully_connected_sa8_sa8_sa32
    with mli.build(mode, full_accu):
        st_ = fn(mli.sa_tensor(x, s_in, z_in, f_in), mli.sa_tensor(W, sw, 0, fw, dim=1 if per_axis else -1), bt,
                 mli.FullyConnectedCfg(mli.ReluCfg(relu)), out)
    assert st_ == mli.MLI_STATUS_OK
    zp = 0 if ext else z_in
    exp = []
    lo, hi = -128, 127
    if relu == 1:
        lo = max(z_out, -128)
    elif relu == 3:
        six = (cdiv(6 << f_out, s_out) if f_out < 28 else 127) if f_out >= 0 else \
            (cdiv(6 >> -f_out, s_out) if f_out > -3 else 0)
        lo, hi = max(z_out, -128), min(six + z_out, 127)
    elif relu == 2:
        one = (cdiv(1 << f_out, s_out) if f_out < 30 else 127) if f_out >= 0 else 0
        lo, hi = max(z_out - one, -128), min(z_out + one, 127)
    for o in range(M):
        acc = 0
        for j in range(N):
            acc = wrap(acc + int(x[j]) * int(W[j, o]), 32)
        for j in range(N):
            acc = wrap(acc - zp * int(W[j, o]), 32)
        acc = sat(acc + bias_value(int(b[o]), "sa8", 0, full_accu, mode), 32)
        k = o if per_axis else 0
        m, sh = quant_params((s_in, z_in, f_in), sw[k], fw[k], (s_out, z_out, f_out), full_accu, mode)
        if full_accu:
            v = sat(rnd(acc * m, min(sh, 63), 64, mode), 16)
        else:
            m16 = rnd(m, 16, 32, mode)
            sh -= 16
            pre = min(max(sh - 21, 0), 8)
            v = sat(rnd(sat(rnd(acc, pre, 32, mode), 16) * m16, min(sh - pre, 63), 64, mode), 16)
        exp.append(min(max(sat(sat(v + z_out, 16), 8), lo), hi))
    assert out.values().tolist() == exp


def test_full_accu_changes_a_large_sa32_bias():
    """FULL_ACCU=OFF keeps only 16 significant bits of the sa32 bias (the vectors cannot show it): a bias of
    64.5 output steps plus 32 accumulator LSBs rounds (half to even) to 65 with all bits and to 64 without."""
    x = mli.sa_tensor([0, 0], 16384, 0, 14)  # 1.0 per LSB
    w = mli.sa_tensor([[1], [1]], 16384, 0, 14)  # 1.0 per LSB
    b = mli.sa_tensor([16384 * 64 + 8192 + 32], 8192, 0, 13, el_type=mli.MLI_EL_SA_32)  # 1.0 per LSB
    res = []
    for full in (False, True):
        out = mli.empty_tensor(mli.MLI_EL_SA_8, 1, scale=16384, zero_point=0, scale_frac_bits=0)  # 16384 per LSB
        with mli.build("CONVERGENT", full):
            assert mli.krn_fully_connected_sa8_sa8_sa32(x, w, b, mli.FullyConnectedCfg(), out) == mli.MLI_STATUS_OK
        res.append(int(out.values()[0]))
    assert res == [64, 65]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), op=st.sampled_from(["add", "sub", "mul"]), sa=st.booleans(),
       scalar=st.booleans(), mode=st.sampled_from(["UP", "CONVERGENT"]))
def test_eltwise_matches_scalar_reference(seed, op, sa, scalar, mode):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    if sa:
        ps = [(sa_scale(rng, (0, 32)), int(rng.integers(-128, 128))) for _ in range(3)]
        qs = [(s, z, f) for (s, f), z in ps]
        a, bvals = ints(rng, -128, 127, n), ints(rng, -128, 127, 1 if scalar else n)
        t1, t2 = mli.sa_tensor(a, *qs[0]), mli.sa_tensor(bvals, *qs[1])
        out = mli.empty_tensor(mli.MLI_EL_SA_8, n, scale=qs[2][0], zero_point=qs[2][1], scale_frac_bits=qs[2][2])
        flavor = "sa8"
    else:
        qs = [int(rng.integers(-3, 16)) for _ in range(3)]
        a, bvals = ints(rng, -32768, 32767, n), ints(rng, -32768, 32767, 1 if scalar else n)
        t1, t2 = mli.fx_tensor(a, qs[0]), mli.fx_tensor(bvals, qs[1])
        out = mli.empty_tensor(mli.MLI_EL_FX_16, n, frac_bits=qs[2])
        flavor = "fx16"
    fn = getattr(mli, f"krn_eltwise_{op}_{'sa8' if sa else 'fx16'}")
    with mli.build(mode):
        assert fn(t1, t2, out) == mli.MLI_STATUS_OK
    bb = [int(bvals[0])] * n if scalar else L(bvals)
    if op == "mul":
        exp = [mul(int(a[i]), qs[0], bb[i], qs[1], qs[2], flavor, mode) for i in range(n)]
    else:
        exp = [addsub(int(a[i]), qs[0], bb[i], qs[1], qs[2], flavor, mode, op == "sub") for i in range(n)]
    assert out.values().tolist() == exp


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["tanh", "sigm"]), sa=st.booleans(),
       frac=st.integers(-3, 15), mode=st.sampled_from(["UP", "CONVERGENT"]))
def test_activations_match_scalar_reference(seed, kind, sa, frac, mode):
    """fx16 inputs of every frac (frac <= 4 or 5 is the non-interpolating path) and sa8 inputs."""
    rng = np.random.default_rng(seed)
    lut = mli.Lut()
    getattr(mli, f"krn_{kind}_create_lut")(lut)
    if sa:
        s, f = sa_scale(rng)
        z = int(rng.integers(-128, 128))
        v = ints(rng, -128, 127, 16)
        t, out = mli.sa_tensor(v, s, z, f), mli.empty_tensor(mli.MLI_EL_SA_8, 16)
        with mli.build(mode):
            assert getattr(mli, f"krn_{kind}_sa8")(t, lut, out) == mli.MLI_STATUS_OK
        exp = [act(int(u), kind, (s, z, f), "sa8", mode)[0] for u in v]
        assert (int(out.scale[0]), int(out.zero_point[0]), int(out.scale_frac_bits[0])) == SA8_ACT_OUT[kind]
    else:
        v = ints(rng, -32768, 32767, 16)
        t, out = mli.fx_tensor(v, frac), mli.empty_tensor(mli.MLI_EL_FX_16, 16)
        with mli.build(mode):
            assert getattr(mli, f"krn_{kind}_fx16")(t, lut, out) == mli.MLI_STATUS_OK
        exp = [act(int(u), kind, frac, "fx16", mode)[0] for u in v]
        assert out.frac_bits == 15
    assert out.values().tolist() == exp


@pytest.mark.parametrize("flavor", ["fx16", "fx16_fx8_fx8", "sa8"])
def test_rnn_dense_four_inputs_matches_scalar_reference(flavor):
    rng = np.random.default_rng(11)
    for _ in range(6):
        n = int(rng.integers(1, 5))
        M = int(rng.integers(1, 6))
        Ns = [int(rng.integers(1, 6)) for _ in range(n)]
        if flavor == "sa8":
            qin = [(*sa_scale(rng), int(rng.integers(-128, 128))) for _ in range(n)]
            qin = [(s, z, f) for s, f, z in qin]
            qw = [sa_scale(rng) for _ in range(n)]
            so, fo = sa_scale(rng)
            qo = (so, int(rng.integers(-128, 128)), fo)
            xs = [ints(rng, -128, 127, k) for k in Ns]
            Ws = [ints(rng, -127, 127, (k, M)) for k in Ns]
            b = ints(rng, -(2**22), 2**22, M)
            ins = [mli.sa_tensor(x, *q) for x, q in zip(xs, qin, strict=False)]
            ws = [mli.sa_tensor(w, s, 0, f) for w, (s, f) in zip(Ws, qw, strict=False)]
            bt = mli.sa_tensor(b, int(np.round(qin[0][0] * qw[0][0] / 2**15)), 0, qin[0][2] + qw[0][1] - 15,
                               el_type=mli.MLI_EL_SA_32)
            out = mli.empty_tensor(mli.MLI_EL_SA_8, M, scale=qo[0], zero_point=qo[1], scale_frac_bits=qo[2])
            qb = 0
        else:
            wb = 16 if flavor == "fx16" else 8
            we = mli.MLI_EL_FX_16 if wb == 16 else mli.MLI_EL_FX_8
            qin = [int(rng.integers(0, 15)) for _ in range(n)]
            qw = [int(rng.integers(0, wb)) for _ in range(n)]
            qo = int(rng.integers(-2, min(a + w for a, w in zip(qin, qw, strict=False)) + 1))
            qb = int(qin[0] + qw[0] - rng.integers(0, 8))
            lo, hi = lim(wb)
            xs = [ints(rng, -32768, 32767, k) for k in Ns]
            Ws = [ints(rng, lo, hi, (k, M)) for k in Ns]
            b = ints(rng, lo, hi, M)
            ins = [mli.fx_tensor(x, q) for x, q in zip(xs, qin, strict=False)]
            ws = [mli.fx_tensor(w, q, we) for w, q in zip(Ws, qw, strict=False)]
            bt = mli.fx_tensor(b, qb, we)
            out = mli.empty_tensor(mli.MLI_EL_FX_16, M, frac_bits=qo)
        fn = getattr(mli, f"krn_rnn_dense_{flavor if flavor != 'sa8' else 'sa8_sa8_sa32'}")
        for mode in ("UP", "CONVERGENT"):
            for full in (False, True):
                with mli.build(mode, full):
                    assert fn(ins, ws, bt, mli.RnnDenseCfg(n), out) == mli.MLI_STATUS_OK
                exp = ref_dense([L(x) for x in xs], [L(w) for w in Ws], L(b), qin, qw, qo, flavor, full, mode, qb)
                assert out.values().tolist() == exp


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), flavor=st.sampled_from(["fx16", "fx16_fx8_fx8", "fx8"]),
       relu=st.sampled_from([0, 1, 2, 3]), mode=st.sampled_from(["UP", "CONVERGENT"]))
def test_fc_fx_matches_scalar_reference(seed, flavor, relu, mode):
    """fx FC, bias added last with saturation, every ReLU, negative frac bits included (fx8 FC has no vectors)."""
    rng = np.random.default_rng(seed)
    N, M = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    ib, wb = (8, 8) if flavor == "fx8" else (16, 16 if flavor == "fx16" else 8)
    ie = mli.MLI_EL_FX_8 if ib == 8 else mli.MLI_EL_FX_16
    we = mli.MLI_EL_FX_8 if wb == 8 else mli.MLI_EL_FX_16
    f_in, f_w = int(rng.integers(-3, ib)), int(rng.integers(-3, wb))
    f_b = int(f_in + f_w - rng.integers(0, 20))
    f_out = int(rng.integers(-3, ib + 2))
    x, W, b = ints(rng, *lim(ib), N), ints(rng, *lim(wb), (N, M)), ints(rng, *lim(wb), M)
    out = mli.empty_tensor(ie, M, frac_bits=f_out)
    fn = getattr(mli, f"krn_fully_connected_{flavor}")
    args = (mli.fx_tensor(x, f_in, ie), mli.fx_tensor(W, f_w, we), mli.fx_tensor(b, f_b, we),
            mli.FullyConnectedCfg(mli.ReluCfg(relu)), out)
    debug = "DBG_MODE_RET_CODES"
    if f_out > f_in + f_w:  # mli_chk_out_frac_fx refuses it; MLI's release build computes it
        with mli.build(mode):
            assert fn(*args) == mli.MLI_STATUS_INCOMPATEBLE_TENSORS
        debug = "DBG_MODE_RELEASE"
    with mli.build(mode, debug_mode=debug):
        assert fn(*args) == mli.MLI_STATUS_OK
    lo, hi = lim(ib)
    if relu == 1:
        lo = 0
    elif relu == 3:
        six = ((6 << f_out) if f_out < 28 else hi) if f_out >= 0 else ((6 >> -f_out) if f_out > -3 else 0)
        lo, hi = 0, min(six, hi)
    elif relu == 2:
        one = ((1 << f_out) if f_out < 30 else hi) if f_out >= 0 else 0
        lo, hi = max(-one, lo), min(one, hi)
    exp = []
    for o in range(M):
        acc = 0
        for j in range(N):
            acc = acc + int(x[j]) * int(W[j, o])
            if flavor != "fx16":
                acc = wrap(acc, 32)
        if flavor == "fx16":
            acc = sat(acc + wrap(rnd(int(b[o]), -(f_in + f_w - f_b), 64, mode), 32), 64)
            v = sat(rnd(acc, f_in + f_w - f_out, 64, mode), 16)
        else:
            acc = sat(acc + rnd(int(b[o]), -(f_in + f_w - f_b), 32, mode), 32)
            v = sat(rnd(acc, f_in + f_w - f_out, 32, mode), ib)
        exp.append(min(max(v, lo), hi))
    assert out.values().tolist() == exp
