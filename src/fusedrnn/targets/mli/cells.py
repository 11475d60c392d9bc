"""The MLI 2.0 LSTM and GRU cells (spec mli.md §3.3, §3.4) on whole batches of sequences.

Integer arrays: x [T, B, N], states [B, M]; weights stacked gate-major as MLI stores them (Wi [G, N, M],
Wo [G, M, M], bias [G, M]). The input projection of every step is computed in one GEMM before the time loop
(it depends only on x and the bias); each step does one recurrent GEMM over all gates and the element-wise
work vectorised over batch rows and units. Results equal running the MLI kernel on each batch row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _arith as A
from . import dense as D
from . import eltwise as E
from .luts import SA8_OUT, Lut, act_lookup

SA8_LSTM_IR = (1, 0, 4)  # scale, zero point, scale_frac_bits of the LSTM gate pre-activations
SA8_GRU_IR = (21, 0, 9)
SA8_ONE = (1, -128, 8)  # GRU "one" = 127 in these parameters (255/256)
FX_ONE = 32767  # frac 15
WMAX = {"fx16": 32768, "fx16_fx8_fx8": 128, "sa8": 128}
XMAX = {"fx16": 32768, "fx16_fx8_fx8": 32768, "sa8": 128}


@dataclass
class CellQuant:
    """Quantization of a cell's operands. sa8: data as (scale, zero_point, scale_frac_bits) tuples and weights as
    (scales [G] or [1], scale_frac_bits [G] or [1]); fx flavours: frac bits (ints)."""

    flavor: str
    inp: object
    h0: object
    out: object
    wi: object
    wo: object
    bias_frac: int = 0
    cell: object = None


def _pair(flavor, qin, qw, qir, full_accu, mode, M, gates=None, tweak=None):
    """Pair params towards the IR for the gates ``gates`` (per-column multipliers for per-axis sa8 weights)."""
    if flavor != "sa8":
        return D.fx_pair(flavor, qin, qw, qir)
    s, f = (A.i64(v) for v in qw)
    s, f = (s[gates], f[gates]) if s.size > 1 else (s.reshape(()), f.reshape(()))
    if tweak is not None:
        s, f = tweak(s, f)
    p = D.sa8_pair(qin, s, f, qir, full_accu, mode)
    if not (isinstance(p.out_mul, int) and isinstance(p.out_shift, int)):
        m, sh = np.broadcast_arrays(A.i64(p.out_mul), A.i64(p.out_shift))
        p.out_mul, p.out_shift, p.blocks = m.copy(), sh.copy(), m.size
    return p


def _stack(W):
    """[G, K, M] -> [K, G*M] (gate-major columns)."""
    G, K, M = W.shape
    return np.ascontiguousarray(A.i64(W).transpose(1, 0, 2).reshape(K, G * M))


def _act(kind: str, v, qv, flavor: str, luts: dict, mode: str):
    """(activated values, their quantization); a table lookup over every possible input."""
    return act_lookup(kind, v, qv, flavor, luts[kind], mode), (SA8_OUT[kind] if flavor == "sa8" else 15)


def _mul(a, qa, b, qb, qo, flavor, mode):
    if flavor == "sa8":
        return E.sa8_binary("mul", a, qa, b, qb, qo, mode)
    return E.fx16_mul(a, qa, b, qb, qo, mode)


def _addsub(a, qa, b, qb, qo, flavor, mode, sub=False):
    if flavor == "sa8":
        return E.sa8_binary("sub" if sub else "add", a, qa, b, qb, qo, mode)
    return E.fx16_addsub(a, qa, b, qb, qo, mode, sub)


CHUNK_ROWS = 1024  # input-projection rows per GEMM: keeps the int64 temporaries in cache


def _small(a, flavor):
    """Integer data in its container dtype (int8 for sa8, int16 otherwise): the GEMM then needs no range scan."""
    return a.astype(np.int8 if flavor == "sa8" else np.int16)


def _mat(cache: dict | None, key: str, W, flavor: str):
    """The prepared exact-GEMM operand of stacked weights W [G, K, M] (kept in ``cache`` across calls)."""
    if cache is not None and key in cache:
        return cache[key]
    m = A.int_matrix(_stack(W), XMAX[flavor])
    if cache is not None:
        cache[key] = m
    return m


def _input_partials(x, Wi, bias, pair0, flavor, full_accu, mode, mat=None):
    """r_0 (input 0 with the bias, requantized to the IR) for every step and gate: [T, B, G*M], computed in
    chunks of steps; int32 storage where r_0 is a 32-bit value."""
    T, B, N = x.shape
    mat = mat if mat is not None else A.int_matrix(_stack(Wi), XMAX[flavor])
    b = A.i64(bias).reshape(-1)
    r0 = np.empty((T, B, b.size), np.int64 if flavor == "fx16" else np.int32)
    step = max(1, CHUNK_ROWS // max(B, 1))
    xs = _small(x, flavor)
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        r0[t0:t1] = D.first_partial(xs[t0:t1].reshape(-1, N), mat, pair0, b, flavor, full_accu, mode).reshape(
            t1 - t0, B, -1)
    return r0


def _ir(r0t, r1, flavor: str) -> np.ndarray:
    """finish(add_sat(r0, r1)) for an IR with zero point 0: the nested clamps collapse to one (r0, r1 are 32-bit
    values for the 32-bit flavours, so their int64 sum is exact)."""
    if flavor == "fx16":
        return D.finish(A.add_sat(r0t, r1, 64), flavor)
    lo, hi = A.lim(D.IO_BITS[flavor])
    return np.clip(r0t + r1, lo, hi)


def _needs_wrap(W, flavor: str, zp: int = 0) -> bool:
    """Whether the recurrent accumulator Σ h·W - zp·Σ W can leave int32 (it never does for MLI-sized layers)."""
    if flavor == "fx16":
        return False
    W = A.i64(W)
    K = W.shape[-2]
    bound = K * XMAX[flavor] * int(np.abs(W).max(initial=0)) * (1 + (abs(zp) > 0))
    return bound >= 2**31


def _rec(h, mat, pair, flavor: str, wrap_needed: bool, mode: str):
    """The recurrent pair's requantized partial r_1 for states h."""
    acc = D.dot(_small(h, flavor), mat, pair)
    return D.requant_partial(D.wrap_acc(acc, flavor) if wrap_needed else acc, pair, mode)


def _order(T: int, reverse: bool):
    return range(T - 1, -1, -1) if reverse else range(T)


def lstm_sequence(x, h0, c0, Wi, Wo, bias, q: CellQuant, *, act: str, reverse: bool, luts: dict[str, Lut],
                  full_accu: bool, mode: str, valid=None, cache: dict | None = None):
    """Run the MLI LSTM cell over x [T, B, N] from (h0, c0) [B, M].

    ``act`` "tanh" | "sigm" | "none" (output activation). Returns (Y [T, B, M] in processing order, h [B, M],
    c [B, M]). ``valid`` [T, B] bool (processing order) freezes rows whose step is invalid (padding); ``cache``
    (a dict owned by the caller) keeps the prepared weight matrices between calls with the same weights."""
    flavor = q.flavor
    T, B, _ = x.shape
    M = Wo.shape[-1]
    qir = SA8_LSTM_IR if flavor == "sa8" else min(10, q.inp + q.wi)
    all4 = np.arange(4)
    pair0 = _pair(flavor, q.inp, q.wi, qir, full_accu, mode, M, all4)
    if flavor != "sa8":
        pair0.bias_shift = q.inp + q.wi - q.bias_frac
    r0 = _input_partials(x, Wi, bias, pair0, flavor, full_accu, mode, _mat(cache, "wi", Wi, flavor))
    rmat = _mat(cache, "wo", Wo, flavor)
    wrap = _needs_wrap(Wo, flavor, 128)
    h, c = A.i64(h0).copy(), A.i64(c0).copy()
    qh = q.h0
    pair1 = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, all4)
    Y = np.zeros((T, B, M), np.int64)
    sig_idx = np.array([0, 2, 3])
    for s, t in enumerate(_order(T, reverse)):
        ir = _ir(r0[t], _rec(h, rmat, pair1, flavor, wrap, mode), flavor).reshape(B, 4, M)
        sg, qs = _act("sigm", ir[:, sig_idx], qir, flavor, luts, mode)
        g, qt = _act("tanh", ir[:, 1], qir, flavor, luts, mode)
        i, f, o = sg[:, 0], sg[:, 1], sg[:, 2]
        cn = _mul(c, q.cell, f, qs, q.cell, flavor, mode)
        g = _mul(g, qt, i, qs, qt, flavor, mode)
        cn = _addsub(cn, q.cell, g, qt, q.cell, flavor, mode)
        if act == "none":
            hn = _mul(cn, q.cell, o, qs, q.out, flavor, mode)
        else:
            a, qa = _act(act, cn, q.cell, flavor, luts, mode)
            hn = _mul(a, qa, o, qs, q.out, flavor, mode)
        if valid is not None:
            v = valid[s][:, None]
            hn, cn = np.where(v, hn, h), np.where(v, cn, c)
        h, c = hn, cn
        Y[s] = h
        if s == 0 and qh != q.out:
            qh = q.out
            pair1 = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, all4)
    return Y, h, c


def gru_tweak_faithful(s, f):
    """MLI's per-tensor sa8 GRU new-gate quirk (§3.4): the scale and scale_frac_bits 'pointers' advanced by 2
    through a union that holds values: int16 scale + 4, int8 scale_frac_bits + 2 (little-endian, wrapping)."""
    return A.wrap(s + 4, 16), A.wrap(f + 2, 8)


def gru_sequence(x, h0, Wi, Wo, bias, q: CellQuant, *, reverse: bool, luts: dict[str, Lut], full_accu: bool,
                 mode: str, faithful: bool = True, valid=None, cache: dict | None = None):
    """Run the MLI GRU cell (gates z, r, n; reset applied before the recurrent matmul) over x [T, B, N] from
    h0 [B, M]. ``faithful`` reproduces MLI's per-tensor sa8 new-gate weight-scale quirk; False uses the
    weights' real scale. Returns (Y [T, B, M] in processing order, h [B, M])."""
    flavor = q.flavor
    T, B, _ = x.shape
    M = Wo.shape[-1]
    qir = SA8_GRU_IR if flavor == "sa8" else min(11, q.inp + q.wi)
    per_tensor = flavor == "sa8" and A.i64(q.wi[0]).size == 1
    tweak = gru_tweak_faithful if (per_tensor and faithful) else None
    zr = np.arange(2)
    pz = _pair(flavor, q.inp, q.wi, qir, full_accu, mode, M, zr)
    pn = _pair(flavor, q.inp, q.wi, qir, full_accu, mode, M, np.array([2]), tweak)
    if flavor != "sa8":
        pz.bias_shift = pn.bias_shift = q.inp + q.wi - q.bias_frac
    b = A.i64(bias)
    r0_zr = _input_partials(x, Wi[:2], b[:2], pz, flavor, full_accu, mode, _mat(cache, "wi_zr", Wi[:2], flavor))
    r0_n = _input_partials(x, Wi[2:], b[2:], pn, flavor, full_accu, mode, _mat(cache, "wi_n", Wi[2:], flavor))
    mat_zr = _mat(cache, "wo_zr", Wo[:2], flavor)
    mat_n = _mat(cache, "wo_n", Wo[2:], flavor)
    wrap_zr, wrap_n = _needs_wrap(Wo[:2], flavor, 128), _needs_wrap(Wo[2:], flavor, 128)
    h = A.i64(h0).copy()
    qh = q.h0
    one, qone = (127, SA8_ONE) if flavor == "sa8" else (FX_ONE, 15)
    Y = np.zeros((T, B, M), np.int64)
    p1_zr = p1_n = None
    for s, t in enumerate(_order(T, reverse)):
        if p1_zr is None:
            p1_zr = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, zr)
            p1_n = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, np.array([2]), tweak)
        ir = _ir(r0_zr[t], _rec(h, mat_zr, p1_zr, flavor, wrap_zr, mode), flavor).reshape(B, 2, M)
        zr_act, qs = _act("sigm", ir, qir, flavor, luts, mode)
        z, r = zr_act[:, 0], zr_act[:, 1]
        hr = _mul(r, qs, h, qh, qh, flavor, mode)
        hz = _mul(h, qh, z, qs, qh, flavor, mode)
        omz = _addsub(np.int64(one), qone, z, qs, qs, flavor, mode, sub=True)
        n_ir = _ir(r0_n[t], _rec(hr, mat_n, p1_n, flavor, wrap_n, mode), flavor)
        n, qt = _act("tanh", n_ir, qir, flavor, luts, mode)
        tmp = _mul(n, qt, omz, qs, q.out, flavor, mode)
        hn = _addsub(tmp, q.out, hz, qh, q.out, flavor, mode)
        if valid is not None:
            hn = np.where(valid[s][:, None], hn, h)
        h = hn
        Y[s] = h
        if s == 0 and qh != q.out:
            qh = q.out
            p1_zr = None
    return Y, h


def rnn_sequence(x, h0, Wi, Wo, bias, q: CellQuant, *, reverse: bool, luts: dict[str, Lut], full_accu: bool,
                 mode: str, valid=None, cache: dict | None = None):
    """A basic tanh RNN as an MLI 2.0 user builds it (2.0 dropped the basic RNN cell): per step
    ``rnn_dense([x_t, h], [Wi, Wo], b)`` into the LSTM's IR format, then ``tanh`` (whose fixed output format is
    the state's: sa8 (1, 0, 7), fx frac 15). Wi [1, N, M], Wo [1, M, M], bias [1, M]."""
    flavor = q.flavor
    T, B, _ = x.shape
    M = Wo.shape[-1]
    qir = SA8_LSTM_IR if flavor == "sa8" else min(10, q.inp + q.wi)
    g0 = np.arange(1)
    pair0 = _pair(flavor, q.inp, q.wi, qir, full_accu, mode, M, g0)
    if flavor != "sa8":
        pair0.bias_shift = q.inp + q.wi - q.bias_frac
    r0 = _input_partials(x, Wi, bias, pair0, flavor, full_accu, mode, _mat(cache, "wi", Wi, flavor))
    rmat = _mat(cache, "wo", Wo, flavor)
    wrap = _needs_wrap(Wo, flavor, 128)
    h = A.i64(h0).copy()
    pair1 = _pair(flavor, q.h0, q.wo, qir, full_accu, mode, M, g0)
    Y = np.zeros((T, B, M), np.int64)
    for s, t in enumerate(_order(T, reverse)):
        ir = _ir(r0[t], _rec(h, rmat, pair1, flavor, wrap, mode), flavor)
        hn, qa = _act("tanh", ir, qir, flavor, luts, mode)
        if valid is not None:
            hn = np.where(valid[s][:, None], hn, h)
        h = hn
        Y[s] = h
        if s == 0 and q.h0 != qa:
            pair1 = _pair(flavor, qa, q.wo, qir, full_accu, mode, M, g0)
    return Y, h
