"""The MLI 2.0 LSTM and GRU cells (spec mli.md §3.3, §3.4) on whole batches of sequences.

Integer arrays: x [T, B, N], states [B, M]; weights stacked gate-major as MLI stores them (Wi [G, N, M],
Wo [G, M, M], bias [G, M]). The input projection of every step is computed in one GEMM before the time loop
(it depends only on x and the bias); each step does one recurrent GEMM over all gates and the element-wise
work vectorised over batch rows and units. Results equal running the MLI kernel on each batch row.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from ... import conventions
from .. import scratch
from . import _arith as A
from . import _compiled as C
from . import dense as D
from . import eltwise as E
from .luts import SA8_OUT, Lut, act_lookup, act_table

SA8_LSTM_IR = (1, 0, 4)  # scale, zero point, scale_frac_bits of the LSTM gate pre-activations
SA8_GRU_IR = (21, 0, 9)
SA8_ONE = (1, -128, 8)  # GRU "one" = 127 in these parameters (255/256)
FX_ONE = 32767  # frac 15
LSTM_GATE = {g: k for k, g in enumerate(conventions.gate_order("lstm", "mli2"))}  # MLI's blocks: i, g, f, o
GRU_GATE = {g: k for k, g in enumerate(conventions.gate_order("gru", "mli2"))}  # z, r, n
if GRU_GATE["n"] != 2:  # the GRU loop splits the blocks into [z, r] (one sigmoid) and [n]
    raise ImportError(f"mli: the GRU loop expects the candidate block last, got {tuple(GRU_GATE)}")
_ZR, _N = slice(0, 2), slice(2, 3)
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


def _key(v):
    """A hashable form of quantization parameters (ints, tuples, arrays)."""
    if isinstance(v, tuple):
        try:
            hash(v)  # a tuple of numbers: its own key
            return v
        except TypeError:
            return tuple(_key(u) for u in v)
    if isinstance(v, np.ndarray):
        return ("a", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (tuple, list)):
        return tuple(_key(u) for u in v)
    return int(v) if isinstance(v, (int, np.integer)) else v


def _pair(flavor, qin, qw, qir, full_accu, mode, M, gates=None, tweak=None, cache: dict | None = None):
    """Pair params towards the IR for the gates ``gates`` (per-column multipliers for per-axis sa8 weights).
    With ``cache`` (the caller's dict) sa8 results are kept across calls; callers must not modify them."""
    if cache is not None and flavor == "sa8":  # fx pairs are cheap (and callers set their bias_shift)
        key = ("pair", flavor, _key(qin), _key(qw), _key(qir), bool(full_accu), mode,
               None if gates is None else tuple(int(g) for g in gates), None if tweak is None else tweak.__name__)
        p = cache.get(key)
        if p is None:
            p = cache[key] = _pair(flavor, qin, qw, qir, full_accu, mode, M, gates, tweak)
        return p
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


def _partials_buffer(shape: tuple, dtype, tag: str | None) -> np.ndarray:
    """An uninitialised array for the compiled path's partials in this thread's buffer for ``tag``
    (:func:`fusedrnn.targets.scratch.thread_buffer`: the partials live only during one cell call, the kernel reads
    them and no result refers to them)."""
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize
    return scratch.thread_buffer(tag, n)[:n].view(dtype).reshape(shape)


def _input_partials(x, Wi, bias, pair0, flavor, full_accu, mode, mat=None, lib=None, cache=None, tag=None):
    """r_0 (input 0 with the bias, requantized to the IR) for every step and gate: [T, B, G*M], computed in
    chunks of steps; int32 storage where r_0 is a 32-bit value. With ``lib`` (the compiled kernel) the products come
    from the kernel (sa8: int8 x int8 summed in int32, the same wrap as the int32 value they feed) or from one exact
    float GEMM, and are finished in one compiled pass; the sa8 weights' packed layouts and the bias term are kept in
    ``cache`` under ``tag`` (sa8, whose pairs are cached objects: same weights and bias for the life of the cache,
    like :func:`_mat`)."""
    T, B, N = x.shape
    mat = mat if mat is not None else A.int_matrix(_stack(Wi), XMAX[flavor])
    b = A.i64(bias).reshape(-1)
    r0_dtype = np.int64 if flavor == "fx16" else np.int32
    step = max(1, CHUNK_ROWS // max(B, 1))
    xs = _small(x, flavor)
    if lib is not None and mat.dtype is not None and (mat.a_capacity is None or
                                                      -A.lim(8 * xs.itemsize)[0] <= mat.a_capacity):
        r0 = _partials_buffer((T, B, b.size), r0_dtype, tag)
        a = C.PartArgs()
        a.flavor, a.mode, a.N = FLAVOR_CODE[flavor], 0 if mode == "up" else 1, b.size
        a.G = pair0.blocks if (flavor == "sa8" and pair0.blocks) else 1
        _set_pair(a, pair0, 0, a.G)
        a.f64, a.out64 = int(mat.dtype is np.float64), int(r0.dtype == np.int64)
        key = ("bias_term", tag, bool(full_accu), mode, id(pair0)) if (cache is not None and tag and
                                                                        flavor == "sa8") else None
        bt = None if key is None else cache.get(key)
        if bt is None:
            bt = np.ascontiguousarray(np.broadcast_to(D.bias_term(b, pair0, full_accu, mode), b.shape), np.int64)
            if key is not None:
                cache[key] = bt
                cache[key + ("pair",)] = pair0  # keeps pair0 (and so its id) alive with the entry
        cs = np.ascontiguousarray(mat.column_sums, np.int64)
        a.cs, a.bias = cs.ctypes.data, bt.ctypes.data
        # sa8: the products in the kernel (int8 x int8 -> int32, wrapping mod 2^32 like the int32 value they feed),
        # else one float GEMM per chunk of steps, exact: every product and partial sum is an integer of magnitude
        # <= K * max|x| * max|W|, at most 2^24 for float32 and 2^53 for float64 (IntMatrix picks the dtype from
        # that bound; the condition above checks that x's range, -lim(8 * itemsize), is within a_capacity)
        packed = _weights_q(cache, ("wi_q", tag), mat.b) if flavor == "sa8" else None
        if packed is not None:
            a.f64 = 2
            fbuf = np.empty((min(T, step) * B, packed[0].shape[1]), np.int32)
            scratch = np.empty(C.i8_scratch_bytes(min(T, step) * B, N), np.uint8)
        else:
            fbuf = np.empty((min(T, step) * B, b.size), mat.dtype)
        for t0 in range(0, T, step):
            t1 = min(T, t0 + step)
            rows = (t1 - t0) * B
            if packed is not None:
                f = C.i8_products(lib, np.ascontiguousarray(xs[t0:t1].reshape(rows, N)), packed[0], packed[1],
                                  fbuf[:rows], scratch)
            else:
                f = mat.matmul_float(xs[t0:t1].reshape(rows, N), out=fbuf[:rows], check=False)
            a.R, a.ld, a.accf = rows, f.strides[0] // f.itemsize, f.ctypes.data
            a.out = r0[t0:t1].ctypes.data
            lib.mli2_partials(a)
        return r0
    r0 = np.empty((T, B, b.size), r0_dtype)
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
    return A.sat(r0t + r1, D.IO_BITS[flavor])


def _needs_wrap(W, flavor: str, zp: int = 0, cache: dict | None = None, key: str | None = None) -> bool:
    """Whether the recurrent accumulator Σ h·W - zp·Σ W can leave int32 (it never does for MLI-sized layers); kept
    in ``cache`` under ``key`` (the weights' bound cost 0.3 ms of every S2 call: |W| of 256K int64 values)."""
    if flavor == "fx16":
        return False
    k = ("needs_wrap", key, flavor, zp)
    if cache is not None and key is not None and k in cache:
        return cache[k]
    W = A.i64(W)
    K = W.shape[-2]
    bound = K * XMAX[flavor] * int(np.abs(W).max(initial=0)) * (1 + (abs(zp) > 0))
    if cache is not None and key is not None:
        cache[k] = bound >= 2**31
    return bound >= 2**31


def _rec(h, mat, pair, flavor: str, wrap_needed: bool, mode: str):
    """The recurrent pair's requantized partial r_1 for states h."""
    acc = D.dot(_small(h, flavor), mat, pair)
    return D.requant_partial(A.wrap(acc, D.ACC_WIDTH[flavor]) if wrap_needed else acc, pair, mode)


def _order(T: int, reverse: bool):
    return range(T - 1, -1, -1) if reverse else range(T)


def _ir_quant(q: CellQuant, sa8_ir: tuple, fx_max: int):
    """The quantization of the gate pre-activations (IR): MLI's fixed sa8 parameters, or fx frac bits
    min(fx_max, in + weights)."""
    return sa8_ir if q.flavor == "sa8" else min(fx_max, q.inp + q.wi)


def _input_pair(q: CellQuant, qir, full_accu: bool, mode: str, M: int, gates, tweak=None, cache=None):
    """The input pair towards the IR for ``gates`` (fx flavours also shift the bias: in + weights - bias frac)."""
    pair = _pair(q.flavor, q.inp, q.wi, qir, full_accu, mode, M, gates, tweak, cache=cache)
    if q.flavor != "sa8":
        pair.bias_shift = q.inp + q.wi - q.bias_frac
    return pair


def _lstm_ir_inputs(x, Wi, Wo, bias, q: CellQuant, gates, full_accu: bool, mode: str, cache: dict | None,
                    lib=None):
    """What the cells whose gates use the LSTM's IR format (the LSTM, the basic RNN) compute before their time
    loop: (M, the IR quantization, r_0 of every step and gate, the recurrent GEMM operand, whether its accumulator
    may wrap)."""
    M = Wo.shape[-1]
    qir = _ir_quant(q, SA8_LSTM_IR, 10)
    pair0 = _input_pair(q, qir, full_accu, mode, M, gates, cache=cache)
    r0 = _input_partials(x, Wi, bias, pair0, q.flavor, full_accu, mode, _mat(cache, "wi", Wi, q.flavor), lib, cache,
                         "wi")
    return M, qir, r0, _mat(cache, "wo", Wo, q.flavor), _needs_wrap(Wo, q.flavor, 128, cache, "wo")


@dataclass(frozen=True)
class RealOut:
    """Where the compiled loops write Y's real values, in time order: ``y`` float32 [T, B, M] (its rows contiguous;
    any time stride) gets float32((Y - zero_point) * scale), the product in float64 and rounded once (the bits of
    the targets' dequantize). Used only where ``y`` fits the call (:meth:`fits`); otherwise the integer Y is
    returned as without it."""

    y: np.ndarray
    zero_point: int
    scale: float

    def fits(self, T: int, B: int, M: int) -> bool:
        y = self.y
        return (y.dtype == np.float32 and y.shape == (T, B, M) and y.strides[2] == 4 and y.strides[1] == 4 * M
                and y.strides[0] % 4 == 0 and y.strides[0] >= 4 * B * M and y.flags.writeable
                and y.flags.aligned)


def _keep_invalid(valid, s: int, new, old):
    """``new`` for the rows whose step ``s`` is valid, ``old`` (the state they keep) for the others."""
    return new if valid is None else np.where(valid[s][:, None], new, old)


LSTM_CANONICAL = [LSTM_GATE[g] for g in "ifgo"]  # MLI's gate blocks in the canonical order (i, f, g, o)


def lstm_sequence(x, h0, c0, Wi, Wo, bias, q: CellQuant, *, act: str, reverse: bool, luts: dict[str, Lut],
                  full_accu: bool, mode: str, valid=None, cache: dict | None = None, engine: str = "auto",
                  probe=None, out: RealOut | None = None):
    """Run the MLI LSTM cell over x [T, B, N] from (h0, c0) [B, M].

    ``act`` "tanh" | "sigm" | "none" (output activation). Returns (Y [T, B, M] in processing order, h [B, M],
    c [B, M]). ``valid`` [T, B] bool (processing order) freezes rows whose step is invalid (padding); ``cache``
    (a dict owned by the caller) keeps the prepared weight matrices between calls with the same weights.
    ``engine`` "auto" (the compiled loop when it loads, else NumPy), "numpy" or "compiled" (RuntimeError when the
    kernel cannot be built). ``probe`` (a :meth:`SaturationCounter.probe <fusedrnn.cells.observers.
    SaturationCounter.probe>` function) sees each step's IR gate pre-activations, cell and h on the NumPy loop.
    ``out`` (see :class:`RealOut`): where the compiled loop runs without ``valid``, it writes Y's real values there
    and returns None in Y's place."""
    flavor = q.flavor
    T, B, _ = x.shape
    all4 = np.arange(4)
    lib = C.library("numpy" if probe is not None else engine)
    io_lo, io_hi = A.lim(D.IO_BITS[flavor])
    M, qir, r0, rmat, wrap = _lstm_ir_inputs(x, Wi, Wo, bias, q, all4, full_accu, mode, cache, lib)
    h, c = A.i64(h0).copy(), A.i64(c0).copy()
    qh = q.h0
    pair1 = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, all4, cache=cache)
    if lib is not None:
        pair_out = pair1 if qh == q.out else _pair(flavor, q.out, q.wo, qir, full_accu, mode, M, all4,
                                                   cache=cache)
        return _lstm_compiled(lib, r0, Wo, rmat, wrap, h, c, q, qir, pair1, pair_out, luts, mode, act, reverse,
                              valid, cache, out)
    Y = np.zeros((T, B, M), np.int64)
    sig_idx = np.array([LSTM_GATE[g] for g in "ifo"])
    for s, t in enumerate(_order(T, reverse)):
        ir = _ir(r0[t], _rec(h, rmat, pair1, flavor, wrap, mode), flavor).reshape(B, 4, M)
        sg, qs = _act("sigm", ir[:, sig_idx], qir, flavor, luts, mode)
        g, qt = _act("tanh", ir[:, LSTM_GATE["g"]], qir, flavor, luts, mode)
        i, f, o = sg[:, 0], sg[:, 1], sg[:, 2]
        cn = _mul(c, q.cell, f, qs, q.cell, flavor, mode)
        g = _mul(g, qt, i, qs, qt, flavor, mode)
        cn = _addsub(cn, q.cell, g, qt, q.cell, flavor, mode)
        if act == "none":
            hn = _mul(cn, q.cell, o, qs, q.out, flavor, mode)
        else:
            a, qa = _act(act, cn, q.cell, flavor, luts, mode)
            hn = _mul(a, qa, o, qs, q.out, flavor, mode)
        if probe is not None:
            rows = slice(None) if valid is None else valid[s]
            probe("preact", s, ir[rows][:, LSTM_CANONICAL], io_lo, io_hi, "ifgo")
            probe("cell", s, cn[rows], io_lo, io_hi)
            probe("hidden", s, hn[rows], io_lo, io_hi)
        h, c = _keep_invalid(valid, s, hn, h), _keep_invalid(valid, s, cn, c)
        Y[s] = h
        if s == 0 and qh != q.out:
            qh = q.out
            pair1 = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, all4, cache=cache)
    return Y, h, c


def gru_tweak_faithful(s, f):
    """MLI's per-tensor sa8 GRU new-gate quirk (§3.4): the scale and scale_frac_bits 'pointers' advanced by 2
    through a union that holds values: int16 scale + 4, int8 scale_frac_bits + 2 (little-endian, wrapping)."""
    return A.wrap(s + 4, 16), A.wrap(f + 2, 8)


def gru_sequence(x, h0, Wi, Wo, bias, q: CellQuant, *, reverse: bool, luts: dict[str, Lut], full_accu: bool,
                 mode: str, faithful: bool = True, valid=None, cache: dict | None = None, engine: str = "auto",
                 out: RealOut | None = None):
    """Run the MLI GRU cell (gates z, r, n; reset applied before the recurrent matmul) over x [T, B, N] from
    h0 [B, M]. ``faithful`` reproduces MLI's per-tensor sa8 new-gate weight-scale quirk; False uses the
    weights' real scale. ``engine`` and ``out`` as in :func:`lstm_sequence`. Returns (Y [T, B, M] in processing
    order, h [B, M])."""
    flavor = q.flavor
    T, B, _ = x.shape
    M = Wo.shape[-1]
    qir = _ir_quant(q, SA8_GRU_IR, 11)
    per_tensor = flavor == "sa8" and A.i64(q.wi[0]).size == 1
    tweak = gru_tweak_faithful if (per_tensor and faithful) else None
    zr, n_blk = np.arange(_ZR.start, _ZR.stop), np.arange(_N.start, _N.stop)
    pz = _input_pair(q, qir, full_accu, mode, M, zr, cache=cache)
    pn = _input_pair(q, qir, full_accu, mode, M, n_blk, tweak, cache=cache)
    b = A.i64(bias)
    lib = C.library(engine)
    r0_zr = _input_partials(x, Wi[_ZR], b[_ZR], pz, flavor, full_accu, mode, _mat(cache, "wi_zr", Wi[_ZR], flavor), lib,
                            cache, "wi_zr")
    r0_n = _input_partials(x, Wi[_N], b[_N], pn, flavor, full_accu, mode, _mat(cache, "wi_n", Wi[_N], flavor), lib,
                           cache, "wi_n")
    mat_zr = _mat(cache, "wo_zr", Wo[_ZR], flavor)
    mat_n = _mat(cache, "wo_n", Wo[_N], flavor)
    wrap_zr, wrap_n = _needs_wrap(Wo[_ZR], flavor, 128, cache, "wo_zr"), _needs_wrap(Wo[_N], flavor, 128, cache, "wo_n")
    h = A.i64(h0).copy()
    qh = q.h0
    one, qone = (127, SA8_ONE) if flavor == "sa8" else (FX_ONE, 15)
    if lib is not None:
        pairs = [(qq, _pair(flavor, qq, q.wo, qir, full_accu, mode, M, zr, cache=cache),
                  _pair(flavor, qq, q.wo, qir, full_accu, mode, M, n_blk, tweak, cache=cache))
                 for qq in (qh, q.out)]
        return _gru_compiled(lib, r0_zr, r0_n, Wo, mat_zr, mat_n, wrap_zr or wrap_n, h, q, qir, pairs, luts, mode,
                             (one, qone), reverse, valid, cache, out)
    Y = np.zeros((T, B, M), np.int64)
    p1_zr = p1_n = None
    for s, t in enumerate(_order(T, reverse)):
        if p1_zr is None:
            p1_zr = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, zr, cache=cache)
            p1_n = _pair(flavor, qh, q.wo, qir, full_accu, mode, M, n_blk, tweak, cache=cache)
        ir = _ir(r0_zr[t], _rec(h, mat_zr, p1_zr, flavor, wrap_zr, mode), flavor).reshape(B, 2, M)
        zr_act, qs = _act("sigm", ir, qir, flavor, luts, mode)
        z, r = zr_act[:, GRU_GATE["z"] - _ZR.start], zr_act[:, GRU_GATE["r"] - _ZR.start]
        hr = _mul(r, qs, h, qh, qh, flavor, mode)
        hz = _mul(h, qh, z, qs, qh, flavor, mode)
        omz = _addsub(np.int64(one), qone, z, qs, qs, flavor, mode, sub=True)
        n_ir = _ir(r0_n[t], _rec(hr, mat_n, p1_n, flavor, wrap_n, mode), flavor)
        n, qt = _act("tanh", n_ir, qir, flavor, luts, mode)
        tmp = _mul(n, qt, omz, qs, q.out, flavor, mode)
        hn = _addsub(tmp, q.out, hz, qh, q.out, flavor, mode)
        h = _keep_invalid(valid, s, hn, h)
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
    g0 = np.arange(1)
    M, qir, r0, rmat, wrap = _lstm_ir_inputs(x, Wi, Wo, bias, q, g0, full_accu, mode, cache)
    h = A.i64(h0).copy()
    pair1 = _pair(flavor, q.h0, q.wo, qir, full_accu, mode, M, g0, cache=cache)
    Y = np.zeros((T, B, M), np.int64)
    for s, t in enumerate(_order(T, reverse)):
        ir = _ir(r0[t], _rec(h, rmat, pair1, flavor, wrap, mode), flavor)
        hn, qa = _act("tanh", ir, qir, flavor, luts, mode)
        h = _keep_invalid(valid, s, hn, h)
        Y[s] = h
        if s == 0 and q.h0 != qa:
            pair1 = _pair(flavor, qa, q.wo, qir, full_accu, mode, M, g0, cache=cache)
    return Y, h


# ---- the compiled loops (_kernel.c): same arithmetic, tables and constants computed here --------------------------
FLAVOR_CODE = {"sa8": 0, "fx16": 1, "fx16_fx8_fx8": 2}


def _op(kind: str, qa, qb, qo, flavor: str, mode: str) -> tuple:
    """An element-wise MUL / ADD / SUB as the kernel evaluates it: an sa8 table, or the fx16 shifts."""
    if flavor == "sa8":
        return ("tab", E._sa8_table(kind, tuple(map(int, qa)), tuple(map(int, qb)), tuple(map(int, qo)), mode))
    if kind == "mul":
        return ("mul", min(qa + qb - qo, 31))
    return (kind, min(qa - qb, 0), min(qb - qa, 0), min(max(qa, qb) - qo, 31))


def _set_ops(a, keep, specs, flavor: str, mode: str) -> None:
    """a.op[k] (table / fx16 shifts) and, for sa8, a.ew[k] (direct evaluation where exact) for (kind, qa, qb, qo)."""
    for k, (kind, qa, qb, qo) in enumerate(specs):
        a.op[k] = C.binop_struct(keep, _op(kind, qa, qb, qo, flavor, mode))
        if flavor == "sa8":
            a.ew[k] = C.ew_struct(E.sa8_fast_params(kind, qa, qb, qo, mode))


def _actc(keep, kind: str, qv, flavor: str, luts: dict, mode: str):
    return C.act_struct(keep, act_table(kind, qv, flavor, luts[kind], mode), 128 if flavor == "sa8" else 32768)


def _weights_t(cache, key: str, W) -> tuple[np.ndarray, np.ndarray]:
    """Recurrent weights for the kernel: transposed int16 [N, K] (dot products) and pair-packed (``gemm32``)."""
    if cache is not None and key in cache:
        return cache[key]
    st = _stack(W)
    w = (C.transposed_int16(st), C.pair_packed_int16(st))
    if cache is not None:
        cache[key] = w
    return w


def _weights_q(cache, key, st) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """sa8 weights [K, N] for the kernel's int8 products: (pair-packed int16, (int8 quads, offsets)) or None
    (a weight outside int8); kept in ``cache`` under ``key`` when given (``key[1]`` None: not cached)."""
    if cache is not None and key[1] is not None and key in cache:
        return cache[key]
    q = C.quad_packed_int8(st)
    w = None if q is None else (C.pair_packed_int16(st), q)
    if cache is not None and key[1] is not None:
        cache[key] = w
    return w


def _set_quads(a, keep, cache, key: str, W, which: str) -> None:
    """sa8 recurrent weights also as int8 quads (``a.W8`` / ``a.Wn8`` and their offsets) for the kernel's
    vpdpbusd products; left NULL (gemm32) where a weight is outside int8."""
    k = (key, "rec")  # a cached entry first: stacking W to look it up cost 2.5 ms of a 7.7 ms S2 call
    w = cache[k] if cache is not None and k in cache else _weights_q(cache, k, _stack(W))
    if w is not None:
        q, off = w[1]
        setattr(a, which, keep(q))
        setattr(a, "off_w" if which == "W8" else "off_n", keep(off))


def _per_block(v, n: int) -> list[int]:
    """An sa8 pair's multipliers or shifts for n gate blocks (one value for all, or one each) as ints."""
    v = np.ravel(v).tolist()
    if len(v) not in (1, n):
        raise ValueError(f"mli: {len(v)} requantization values for {n} gate blocks")
    return v * n if len(v) == 1 else v


def _set_pair(a, pair, g0: int, n: int) -> None:
    if pair.flavor == "sa8":
        a.mul[g0:g0 + n], a.shift[g0:g0 + n] = _per_block(pair.out_mul, n), _per_block(pair.out_shift, n)
        a.zp_in = int(pair.zp_in)
    else:
        a.shift[0], a.zp_in = int(pair.shift), 0


def _static_base(a, flavor: str, mode: str, M: int, wrap: bool) -> None:
    """The kernel arguments of the LSTM and GRU loops that depend on the layer only (flavour, sizes, ranges)."""
    a.flavor, a.mode, a.M, a.K = FLAVOR_CODE[flavor], 0 if mode == "up" else 1, M, M
    a.wrap, a.acc64 = int(wrap), int(wrap or flavor == "fx16")
    a.io_lo, a.io_hi = A.lim(D.IO_BITS[flavor])
    a.Kp = C.even(M)


def _call_base(a, r0, reverse, valid, h, G, out: RealOut | None = None):
    """The kernel arguments of one call, for G gates of M = a.M units: returns (keep, h, Y), the state ``h`` as a
    contiguous int64 copy the kernel updates and Y [T, B, M] it fills (None where it writes Y's real values into
    ``out`` instead); the scratch rows are the call's own (calls of one layer may run at once on several
    threads)."""
    T, B, _ = r0.shape
    M = a.M
    keep = C._Keep()
    h = np.ascontiguousarray(h, np.int64)
    direct = out is not None and valid is None and out.fits(T, B, M)
    Y = None if direct else np.zeros((T, B, M), np.int64)
    a.T, a.B = T, B
    a.reverse, a.r0_64, a.r0 = int(reverse), int(r0.dtype == np.int64), keep(r0)
    a.valid = None if valid is None else keep(valid, np.uint8)
    a.h, a.Y = h.ctypes.data, None if Y is None else Y.ctypes.data
    if direct:
        a.yf, a.ldy, a.y_zp, a.y_scale = out.y.ctypes.data, out.y.strides[0] // 4, out.zero_point, out.scale
    buf, (a.hk, a.acc, a.acc32, a.tmp, a.xu) = scratch.areas("mli loop", (
        2 * B * a.Kp, 8 * B * G * M, 4 * B * C.padded_columns(G * M), 8 * B * 8 * M, B * (-(-M // 4) * 4)))
    keep.refs.append(buf)
    ctypes.memset(a.hk, 0, 2 * B * a.Kp)  # hk's padding column stays 0
    return keep, h, Y


def _base(flavor, mode, r0, M, reverse, wrap, valid, h, G, out: RealOut | None = None):
    """Both parts of the arguments at once: returns (keep, args, h, Y) (see :func:`_call_base`)."""
    a = C.Mli2Args()
    _static_base(a, flavor, mode, M, wrap)
    keep, h, Y = _call_base(a, r0, reverse, valid, h, G, out)
    return keep, a, h, Y


def _ranges(T: int, changes: bool):
    return [(0, min(T, 1), 0), (1, T, 1)] if changes else [(0, T, 0)]


def _lstm_static(Wo, rmat, wrap, q, qir, luts, mode, act, cache):
    """The LSTM loop's arguments that depend on the layer only, as (bytes of a ``Mli2Args``, what they point at):
    sizes, packed weights, activation tables, element-wise operations. Made once per ``cache`` (the direction's:
    its weights are fixed, like the packed weights kept there), quantization and table set, luts kept with the
    entry so that its id stays theirs; without a cache, for this call."""
    key = ("lstm_static", id(luts), mode, act, bool(wrap), q.flavor, _key(q.cell), _key(q.out), _key(qir))
    hit = None if cache is None else cache.get(key)
    if hit is not None:
        return hit[0], hit[1]
    flavor = q.flavor
    keep = C._Keep()
    a = C.Mli2Args()
    _static_base(a, flavor, mode, Wo.shape[-1], wrap)
    wt, w2 = _weights_t(cache, "wo_t16", Wo)
    a.W, a.W2, a.np_w, a.cs = keep(wt), keep(w2), w2.shape[1], keep(rmat.column_sums, np.int64)
    if flavor == "sa8":
        _set_quads(a, keep, cache, "wo_q8", Wo, "W8")
    qs, qt = (SA8_OUT["sigm"], SA8_OUT["tanh"]) if flavor == "sa8" else (15, 15)
    a.sig, a.tnh = _actc(keep, "sigm", qir, flavor, luts, mode), _actc(keep, "tanh", qir, flavor, luts, mode)
    qa = q.cell
    if act != "none":
        a.actc, a.has_out_act = _actc(keep, act, q.cell, flavor, luts, mode), 1
        qa = SA8_OUT[act] if flavor == "sa8" else 15
    _set_ops(a, keep, [("mul", q.cell, qs, q.cell), ("mul", qt, qs, qt), ("add", q.cell, qt, q.cell),
                       ("mul", qa, qs, q.out)], flavor, mode)
    raw = bytes(a)
    if cache is not None:
        cache[key] = (raw, keep, luts)
    return raw, keep


def _lstm_compiled(lib, r0, Wo, rmat, wrap, h, c, q, qir, pair_h0, pair_out, luts, mode, act, reverse, valid,
                   cache, out=None):
    T = r0.shape[0]
    raw, static = _lstm_static(Wo, rmat, wrap, q, qir, luts, mode, act, cache)
    a = C.Mli2Args.from_buffer_copy(raw)
    keep, h, Y = _call_base(a, r0, reverse, valid, h, 4, out)
    c = np.ascontiguousarray(c, np.int64)
    a.c = c.ctypes.data
    for s0, s1, k in _ranges(T, q.h0 != q.out):
        if s1 > s0:
            _set_pair(a, (pair_h0, pair_out)[k], 0, 4)
            a.s0, a.s1 = s0, s1
            lib.mli2_lstm(a)
    del static, keep  # what the arguments point at, held until the kernel returned
    return Y, h, c


def _gru_compiled(lib, r0_zr, r0_n, Wo, mat_zr, mat_n, wrap, h, q, qir, pairs, luts, mode, one, reverse, valid,
                  cache, out=None):
    flavor = q.flavor
    T = r0_zr.shape[0]
    keep, a, h, Y = _base(flavor, mode, r0_zr, Wo.shape[-1], reverse, wrap, valid, h, 3, out)
    a.r0n = keep(r0_n)
    wt, w2 = _weights_t(cache, "wo_zr_t16", Wo[_ZR])
    a.W, a.W2, a.np_w, a.cs = keep(wt), keep(w2), w2.shape[1], keep(mat_zr.column_sums, np.int64)
    wt, w2 = _weights_t(cache, "wo_n_t16", Wo[_N])
    a.Wn, a.Wn2, a.np_n, a.csn = keep(wt), keep(w2), w2.shape[1], keep(mat_n.column_sums, np.int64)
    if flavor == "sa8":
        _set_quads(a, keep, cache, "wo_zr_q8", Wo[_ZR], "W8")
        _set_quads(a, keep, cache, "wo_n_q8", Wo[_N], "Wn8")
    qs, qt = (SA8_OUT["sigm"], SA8_OUT["tanh"]) if flavor == "sa8" else (15, 15)
    a.sig, a.tnh = _actc(keep, "sigm", qir, flavor, luts, mode), _actc(keep, "tanh", qir, flavor, luts, mode)
    a.one = int(one[0])
    for s0, s1, k in _ranges(T, q.h0 != q.out):
        if s1 <= s0:
            continue
        qh, p_zr, p_n = pairs[k]
        _set_ops(a, keep, [("mul", qs, qh, qh), ("mul", qh, qs, qh), ("sub", one[1], qs, qs),
                           ("mul", qt, qs, q.out), ("add", q.out, qh, q.out)], flavor, mode)
        _set_pair(a, p_zr, 0, 2)
        _set_pair(a, p_n, 2, 1)
        a.s0, a.s1 = s0, s1
        lib.mli2_gru(a)
    return Y, h
