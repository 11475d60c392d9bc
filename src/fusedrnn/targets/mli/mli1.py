"""MLI 1.x recurrent and dense kernels (spec mli.md §5): ``krn_fully_connected_{fx8,fx16,fx8w16d}``,
``krn_lstm_cell_{fx8,fx16,fx8w16d}`` and ``krn_basic_rnn_cell_{fx8,fx16,fx8w16d}``; the 1.x activations and
element-wise kernels (``krn_{relu,tanh,sigm}_{fx8,fx16}``, ``krn_eltwise_{add,sub,mul,max,min}_{fx8,fx16}``).

MLI 1.x has no host build and no kernel-level test vectors; it runs on ARC DSPs through FXAPI, always with
convergent rounding (``-Xdsp_ctrl=postshift,guard,convergent``), so these kernels ignore the 2.0 build flags.

Verified from the 1.x sources (structure, certain): weights [M, N] (FC) / [4, M, N+M] gates (i, g, f, o) (LSTM) /
[M, N+M] or stacked [L, M, N+M] (basic RNN); one accumulator for input and state with an intermediate shift by
f_in - f_prev (computed once from ``prev_out``); IR frac 12 (16-bit data) or 4 (fx8); the fused cell update; the
kernel writes ``out``'s frac bits (15 or 7 with an activation); the 1.x LUTs (sigm 180 entries Q.3, tanh 178 Q.4).

Inferred (FXAPI semantics are not public; spec §5.6): the fractional 40-bit MAC holds 2·x·w and the fx16 bias is
2·b shifted left; the fx16 intermediate shift is a floor (no rounding) and the others round; the final casts
round half to even then saturate; fx8 / fx8w16d accumulate in int32 with wrap-around (the fx16 40-bit
accumulator is modelled without overflow); statuses reuse the 2.0 codes.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import conventions
from . import _arith as A
from . import _compiled as C
from . import dense as D
from .checks import check, check_out, check_tensor, check_types, contiguous, debug_checks
from .config import ElType, ReluCfg, ReluType, RnnAct, RnnCellCfgDepr, RnnMode
from .luts import act_fx8, act_fx16, make_lut
from .status import MliCheckFailed, Status, define_kernels, fail, require
from .tensors import dense_strides

S = Status
FX8, FX16 = ElType.MLI_EL_FX_8, ElType.MLI_EL_FX_16
MODE = "convergent"
LSTM1_GATE = {g: k for k, g in enumerate(conventions.gate_order("lstm", "mli1"))}  # MLI 1.x blocks: i, g, f, o
FLAVORS = {"fx16": (FX16, FX16, 16), "fx8": (FX8, FX8, 8), "fx8w16d": (FX16, FX8, 16)}  # data, weights, bits
LUTS1 = {"sigm": make_lut("sigm", "1.x"), "tanh": make_lut("tanh", "1.x")}


def prep(W):
    """Weights [O, K] prepared once as the right operand of x [..., K] @ W.T (exact integer GEMM)."""
    return A.int_matrix(np.ascontiguousarray(A.i64(W).T), 32768)


def _mm(x, W):
    """Exact Σ_j x[..., j]·W[o, j] -> [..., O]; W raw [O, K] or prepared by :func:`prep`."""
    return (prep(W) if isinstance(W, np.ndarray) else W).matmul(A.i64(x))


def dense1x(x, h, Wx, Wh, b, f_in, f_prev, f_w, f_b, f_out, flavor):
    """``rnn_dense_op_fx`` (§5.2): bias, input MACs, shift by f_in - f_prev, state MACs, rounded cast.
    x [..., N], h [..., M] or None, Wx [O, N], Wh [O, M], b [O] -> [..., O] (int, saturated to the data bits)."""
    bits = FLAVORS[flavor][2]
    bs, d, osh = f_in + f_w - f_b, f_in - f_prev, f_prev + f_w - f_out
    sx = _mm(x, Wx)
    sh = 0 if h is None else _mm(h, Wh)
    b = A.i64(b)
    if flavor == "fx16":  # fractional 40-bit MACs: 2·x·w; bias 2·b << bs; floor shift; cast rounds at out_shift+1
        acc = A.asl(2 * b, bs, 64) + 2 * sx
        acc = acc >> d if d >= 0 else acc << -d
        acc = acc + 2 * sh
        return A.sat(A.rnd(acc, osh + 1, 64, MODE), 16)
    acc = A.wrap(A.rnd(b, -bs, 32, MODE) + sx, 32)
    acc = A.wrap(A.rnd(acc, d, 32, MODE) + sh, 32)
    return A.sat(A.rnd(acc, osh, 32, MODE), bits)


def _act(kind, v, frac, bits):
    return act_fx16(v, frac, LUTS1[kind], MODE) if bits == 16 else act_fx8(v, frac, LUTS1[kind], MODE)


@functools.lru_cache(maxsize=64)
def _act_table1(kind: str, frac: int, bits: int) -> np.ndarray:
    """:func:`_act` on every ``bits``-bit input (entry x + 2^(bits-1)), int16."""
    lo, hi = A.lim(bits)
    t = _act(kind, np.arange(lo, hi + 1, dtype=np.int64), frac, bits).astype(np.int16)
    t.flags.writeable = False
    return t


def _lstm1x_compiled(lib, x, h, c, Wx2, Wh, b2, f_in, f_prev, f_w, f_b, f_cell, f_out, f_ir, act, flavor, valid):
    """The time loop of :func:`lstm1x_sequence` in _kernel.c (the input part of every step computed here)."""
    bits = FLAVORS[flavor][2]
    T, B, N = x.shape
    M = Wh.shape[-1]
    bs, d = f_in + f_w - f_b, f_in - f_prev
    sx = Wx2.matmul(_small1(x.reshape(T * B, N), bits))
    if flavor == "fx16":
        pre = A.asl(2 * b2, bs, 64) + 2 * sx
        pre = pre >> d if d >= 0 else pre << -d
    else:
        pre = A.rnd(A.wrap(A.rnd(b2, -bs, 32, MODE) + sx, 32), d, 32, MODE)
    keep = C._Keep()
    h, c = np.ascontiguousarray(h, np.int64), np.ascontiguousarray(c, np.int64)
    Y = np.zeros((T, B, M), np.int64)
    a = C.Mli1Args()
    a.fx16, a.T, a.B, a.M, a.K, a.bits = int(flavor == "fx16"), T, B, M, M, bits
    a.d, a.osh, a.one, a.f_cell, a.f_out = d, f_prev + f_w - f_ir, bits - 1, f_cell, f_out
    Wh16 = np.asarray(Wh).reshape(4 * M, M)
    a.wrap = int(M * 2 ** (bits - 1) * int(np.abs(Wh16).max(initial=0)) >= 2**31)
    a.pre, a.W = keep(pre, np.int64), keep(Wh16, np.int16)
    off = 1 << (bits - 1)
    a.sig = C.act_struct(keep, _act_table1("sigm", f_ir, bits), off)
    a.tnh = C.act_struct(keep, _act_table1("tanh", f_ir, bits), off)
    if act != "none":
        a.actc, a.has_out_act = C.act_struct(keep, _act_table1(act, f_cell, bits), off), 1
    a.valid = None if valid is None else keep(valid, np.uint8)
    a.h, a.c, a.Y = h.ctypes.data, c.ctypes.data, Y.ctypes.data
    a.hk, a.acc = keep(np.empty((B, M), np.int16)), keep(np.empty((B, 4 * M), np.int64))
    lib.mli1_lstm(a)
    return Y, h, c


def _small1(x, bits: int):
    return np.asarray(x).astype(np.int8 if bits == 8 else np.int16)


def lstm1x_sequence(x, h0, c0, Wx, Wh, b, *, f_in, f_prev, f_w, f_b, f_cell, f_out, act, flavor, valid=None,
                    engine: str = "auto"):
    """MLI 1.x LSTM over x [T, B, N] from h0/c0 [B, M]; Wx [4, M, N], Wh [4, M, M], b [4, M] (gates i, g, f, o).
    ``f_out`` is the output frac (15 / 7 with an activation, else prev_out's). ``engine`` "auto" (the compiled
    loop when it loads), "numpy" or "compiled". Returns (Y [T, B, M], h, c)."""
    bits = FLAVORS[flavor][2]
    G, M, N = Wx.shape
    f_ir = bits - 1 - 3
    one = bits - 1
    h, c = A.i64(h0), A.i64(c0)
    T, B, _ = x.shape
    Y = np.zeros((T, B, M), np.int64)
    Wx2, Wh2, b2 = prep(A.i64(Wx).reshape(G * M, N)), prep(A.i64(Wh).reshape(G * M, M)), A.i64(b).reshape(-1)
    lib = C.library(engine)
    if lib is not None:
        return _lstm1x_compiled(lib, x, h, c, Wx2, Wh, b2, f_in, f_prev, f_w, f_b, f_cell, f_out, f_ir, act, flavor,
                                valid)
    for t in range(T):
        ir = dense1x(x[t], h, Wx2, Wh2, b2, f_in, f_prev, f_w, f_b, f_ir, flavor).reshape(B, G, M)
        i, f, o = (_act("sigm", ir[:, LSTM1_GATE[k]], f_ir, bits) for k in "ifo")
        g = _act("tanh", ir[:, LSTM1_GATE["g"]], f_ir, bits)
        v = A.rnd(i * g, one - f_cell, 32, MODE) + f * c
        cn = A.sat(A.rnd(v, one, 32, MODE), bits)
        if act == "none":
            hn = A.sat(A.rnd(cn * o, f_cell + one - f_out, 32, MODE), bits)
        else:
            hn = A.sat(A.rnd(_act(act, cn, f_cell, bits) * o, one, 32, MODE), bits)
        if valid is not None:
            hn, cn = np.where(valid[t][:, None], hn, h), np.where(valid[t][:, None], cn, c)
        h, c = hn, cn
        Y[t] = h
    return Y, h, c


def rnn1x_sequence(x, h0, Wx, Wh, b, *, f_in, f_prev, f_w, f_b, f_out, act, flavor, valid=None):
    """MLI 1.x basic RNN over x [T, B, N]: dense into IR (frac 12 / 4) then tanh/sigm (out frac 15 / 7), or with
    act "none" dense straight to ``f_out``. Wx [M, N], Wh [M, M]."""
    bits = FLAVORS[flavor][2]
    f_ir = bits - 1 - 3
    h = A.i64(h0)
    T, B, _ = x.shape
    Y = np.zeros((T, B, Wx.shape[0]), np.int64)
    Wx, Wh = prep(Wx), prep(Wh)
    for t in range(T):
        if act == "none":
            hn = dense1x(x[t], h, Wx, Wh, b, f_in, f_prev, f_w, f_b, f_out, flavor)
        else:
            hn = _act(act, dense1x(x[t], h, Wx, Wh, b, f_in, f_prev, f_w, f_b, f_ir, flavor), f_ir, bits)
        if valid is not None:
            hn = np.where(valid[t][:, None], hn, h)
        h = hn
        Y[t] = h
    return Y, h


# ---- API ---------------------------------------------------------------------------------------------------
_ACT = {RnnAct.RNN_ACT_NONE: "none", RnnAct.RNN_ACT_TANH: "tanh", RnnAct.RNN_ACT_SIGM: "sigm"}


def _fc1(flavor, in_, weights, bias, out):
    ti, tw, bits = FLAVORS[flavor]
    check_out(out)
    for t, n in ((in_, "in"), (weights, "weights"), (bias, "bias")):
        check_tensor(t, n, v1=True)
    check_types([(in_, ti, "in"), (weights, tw, "weights"), (bias, tw, "bias")])
    require(weights.rank == 2 and bias.rank == 1 and bias.shape[0] == weights.shape[0]
            and weights.shape[1] == in_.count(), S.MLI_STATUS_SHAPE_MISMATCH,
            f"weights/bias: expected [M, {in_.count()}] and [M], got {weights.dims} and {bias.dims}")
    require(bias.frac_bits <= in_.frac_bits + weights.frac_bits, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "bias: frac_bits exceed in + weights frac bits")
    M = weights.shape[0]
    require(M * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM, f"out: capacity {out.capacity} < "
            f"{M * in_.element_size} bytes")
    y = dense1x(in_.values().reshape(-1), None, weights.values(), None, bias.values(), in_.frac_bits,
                in_.frac_bits, weights.frac_bits, bias.frac_bits, out.frac_bits, flavor)
    out.el_type = ti
    out.write(y, [M])


def _cell_common(flavor, G, in_, prev_out, weights, bias, cfg, out, stacked_ok=False):
    ti, tw, bits = FLAVORS[flavor]
    check_out(out)
    for t, n in ((in_, "in"), (prev_out, "prev_out"), (weights, "weights"), (bias, "bias")):
        check_tensor(t, n, v1=True)
    require(isinstance(cfg, RnnCellCfgDepr), S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: expected RnnCellCfgDepr, got {cfg!r}")
    try:
        mode, act = RnnMode(cfg.mode), RnnAct(cfg.act)
    except ValueError:
        fail(S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: bad mode {cfg.mode!r} or act {cfg.act!r}")
    check_types([(in_, ti, "in"), (prev_out, ti, "prev_out"), (weights, tw, "weights"), (bias, tw, "bias")])
    require(prev_out.rank == 1, S.MLI_STATUS_SHAPE_MISMATCH, f"prev_out: expected rank 1 [M], got {prev_out.dims}")
    M = prev_out.shape[0]
    if mode == RnnMode.RNN_ONE_TO_ONE:
        T, N = 1, in_.count()
    else:
        T, N = in_.shape[0], in_.count(1)
    L = 1
    if G == 1 and stacked_ok and mode == RnnMode.RNN_ONE_TO_ONE and weights.rank == 3:
        L = weights.shape[0]
        wshape, bshape = [L, M, N + M], [L, M]
    else:
        wshape, bshape = ([G, M, N + M], [G, M]) if G > 1 else ([M, N + M], [M])
    require(weights.dims == wshape and bias.dims == bshape, S.MLI_STATUS_SHAPE_MISMATCH,
            f"weights/bias: expected {wshape} and {bshape}, got {weights.dims} and {bias.dims}")
    require(bias.frac_bits <= in_.frac_bits + weights.frac_bits, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "bias: frac_bits exceed in + weights frac bits")
    n_out = (T if mode == RnnMode.RNN_BATCH_TO_BATCH else 1) * M * L
    require(n_out * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} < {n_out * in_.element_size} bytes")
    if act == RnnAct.RNN_ACT_NONE:
        require(out.frac_bits == prev_out.frac_bits, S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                "out: with RNN_ACT_NONE out frac_bits must equal prev_out's")
    return mode, _ACT[act], T, N, M, L, bits


def _ir_capacity(cfg, need_elems, elem_size, required: bool):
    """``cfg.ir_tsr``, the kernel's scratch: where ``required`` (LSTM; basic RNN in batch-to-last mode) a tensor
    with a data pointer (BAD_FUNC_CFG in a debug mode; without the checks fusedrnn allocates it), of at least
    ``need_elems`` elements (NOT_ENGH_MEM)."""
    ir = cfg.ir_tsr
    if ir is None or getattr(ir, "mem", None) is None:
        check(not required, S.MLI_STATUS_BAD_FUNC_CFG, "cfg.ir_tsr: the kernel needs an intermediate tensor")
        if ir is None:
            return
    require(ir.mem is not None, S.MLI_STATUS_NOT_ENGH_MEM, "cfg.ir_tsr: no data container")
    check_out(ir, "cfg.ir_tsr")  # the kernel's scratch: a writable container holding its capacity
    require(need_elems * elem_size <= ir.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"cfg.ir_tsr: capacity {ir.capacity} < {need_elems * elem_size} bytes")


def _write_seq(out, Y, h, mode, frac):
    """out = every step's state [T, M] (RNN_BATCH_TO_BATCH) or the last one [M], with frac bits ``frac``."""
    out.frac_bits = frac
    y = Y[:, 0] if mode == RnnMode.RNN_BATCH_TO_BATCH else h[0]
    out.write(y, y.shape)


def _lstm1(flavor, in_, prev_out, weights, bias, cfg, cell, out):
    mode, act, T, N, M, _, bits = _cell_common(flavor, 4, in_, prev_out, weights, bias, cfg, out)
    require(cell is not None, S.MLI_STATUS_BAD_TENSOR, "cell: expected a tensor, got None")
    check_tensor(cell, "cell", writes=True, v1=True)  # updated in place
    require(cell.dims == [M], S.MLI_STATUS_SHAPE_MISMATCH, f"cell: expected [{M}], got {cell.dims}")
    check_types([(cell, FLAVORS[flavor][0], "cell")])
    _ir_capacity(cfg, 4 * M, in_.element_size, True)
    W = weights.values()
    f_out = (bits - 1) if act != "none" else prev_out.frac_bits
    Y, h, c = lstm1x_sequence(in_.values().reshape(T, 1, N), prev_out.values()[None], cell.values()[None],
                              W[..., :N], W[..., N:], bias.values(), f_in=in_.frac_bits, f_prev=prev_out.frac_bits,
                              f_w=weights.frac_bits, f_b=bias.frac_bits, f_cell=cell.frac_bits, f_out=f_out,
                              act=act, flavor=flavor)
    cell.write(c[0])
    out.el_type = FLAVORS[flavor][0]
    _write_seq(out, Y, h, mode, f_out)


def _rnn1(flavor, in_, prev_out, weights, bias, cfg, out):
    mode, act, T, N, M, L, bits = _cell_common(flavor, 1, in_, prev_out, weights, bias, cfg, out, stacked_ok=True)
    if mode == RnnMode.RNN_BATCH_TO_LAST:
        _ir_capacity(cfg, M, in_.element_size, True)
    W = weights.values().reshape(L * M, N + M)
    f_out = (bits - 1) if act != "none" else out.frac_bits
    kw = dict(f_in=in_.frac_bits, f_prev=prev_out.frac_bits, f_w=weights.frac_bits, f_b=bias.frac_bits,
              f_out=f_out, act=act, flavor=flavor)
    out.el_type = FLAVORS[flavor][0]
    if L > 1:  # one-to-one with stacked weights: every block sees (x, prev_out); output [L, M]
        h0 = np.tile(prev_out.values(), L)[None]
        Wh = np.zeros((L * M, L * M), np.int64)  # block-diagonal: block l reads prev_out with its own weights
        for k in range(L):
            Wh[k * M:(k + 1) * M, k * M:(k + 1) * M] = W[k * M:(k + 1) * M, N:]
        Y, h = rnn1x_sequence(in_.values().reshape(1, 1, N), h0, W[:, :N], Wh, bias.values().reshape(-1), **kw)
        out.frac_bits = f_out
        out.write(h[0], [L, M])
        return
    Y, h = rnn1x_sequence(in_.values().reshape(T, 1, N), prev_out.values()[None], W[:, :N], W[:, N:],
                          bias.values().reshape(-1), **kw)
    _write_seq(out, Y, h, mode, f_out)


_DOC_FC = "MLI 1.x fully connected, weights [M, N]; writes out shape [M] and el_type; returns a status."
_DOC_LSTM = ("MLI 1.x LSTM cell (in, prev_out, weights [4, M, N+M] gates i, g, f, o, bias [4, M], cfg, cell, out); "
             "returns a status.")
_DOC_RNN = ("MLI 1.x basic RNN cell (in, prev_out, weights [M, N+M] or stacked [L, M, N+M] in one-to-one mode, "
            "bias, cfg, out); returns a status.")
_EACH_FLAVOR = {flavor: (flavor,) for flavor in FLAVORS}
KERNELS = (define_kernels(globals(), _fc1, "krn_fully_connected_", _EACH_FLAVOR, _DOC_FC)
           + define_kernels(globals(), _lstm1, "krn_lstm_cell_", _EACH_FLAVOR, _DOC_LSTM)
           + define_kernels(globals(), _rnn1, "krn_basic_rnn_cell_", _EACH_FLAVOR, _DOC_RNN))
"""The names of the MLI 1.x kernels this module defines:
``krn_{fully_connected,lstm_cell,basic_rnn_cell}_{fx16,fx8,fx8w16d}``."""


def _relu1(flavor, in_, cfg, out):
    """``mli_krn_relu_fx8/fx16`` (1.x ``mli_chk_relu``): out = in clipped by the ReLU of ``cfg.type`` in in's
    frac bits; out takes in's shape, frac bits and element type."""
    ti, _, bits = FLAVORS[flavor]
    check_tensor(in_, "in", v1=True)
    require(out is not None, S.MLI_STATUS_BAD_TENSOR, "out: expected a tensor, got None")
    check_out(out)
    require(isinstance(cfg, ReluCfg), S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: expected a ReluCfg, got {cfg!r}")
    try:
        relu = int(ReluType(cfg.type))
    except ValueError:
        fail(S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.type: expected a ReluType, got {cfg.type!r}")
    check(contiguous(in_), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: layout must be contiguous")
    require(in_.count() * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} < {in_.count() * in_.element_size} bytes")
    check_types([(in_, ti, "in")])
    lo, hi = D.relu_limits(relu, bits, 0, 1, in_.frac_bits)
    out.el_type, out.frac_bits = ti, in_.frac_bits
    out.write(np.clip(in_.values(), lo, hi), in_.dims)


def _act1(kind, flavor, in_, out):
    """``mli_krn_{tanh,sigm}_fx8/fx16`` (1.x): the 1.x tables (sigm 180 entries Q.3, tanh 178 Q.4) with
    interpolation; out frac bits 15 (fx16) or 7 (fx8), in's shape and element type."""
    ti, _, bits = FLAVORS[flavor]
    check_tensor(in_, "in", v1=True)
    require(out is not None, S.MLI_STATUS_BAD_TENSOR, "out: expected a tensor, got None")
    check_out(out)
    check(contiguous(in_), S.MLI_STATUS_INCOMPATEBLE_TENSORS, "in: layout must be contiguous")
    require(in_.count() * in_.element_size <= out.capacity, S.MLI_STATUS_NOT_ENGH_MEM,
            f"out: capacity {out.capacity} < {in_.count() * in_.element_size} bytes")
    check_types([(in_, ti, "in")])
    y = _act(kind, in_.values(), in_.frac_bits, bits)
    out.el_type, out.frac_bits = ti, bits - 1
    out.write(y, in_.dims)


_DOC_RELU = "MLI 1.x ReLU (in, cfg, out): out takes in's shape and frac bits; returns a status."
_DOC_ACT = "MLI 1.x {kind} (in, out) with the 1.x table; out frac bits 15 (fx16) or 7 (fx8); returns a status."
_FX_FLAVORS = {"fx8": ("fx8",), "fx16": ("fx16",)}
ACT_KERNELS = (define_kernels(globals(), _relu1, "krn_relu_", _FX_FLAVORS, _DOC_RELU)
               + define_kernels(globals(), _act1, "krn_tanh_", {k: ("tanh", k) for k in _FX_FLAVORS},
                                _DOC_ACT.format(kind="tanh"))
               + define_kernels(globals(), _act1, "krn_sigm_", {k: ("sigm", k) for k in _FX_FLAVORS},
                                _DOC_ACT.format(kind="sigmoid")))
"""``krn_relu_{fx8,fx16}``, ``krn_tanh_{fx8,fx16}``, ``krn_sigm_{fx8,fx16}`` of MLI 1.x."""


def hlp_count_elem_num(t, start_dim: int = 0) -> int:
    """MLI 1.x ``mli_hlp_count_elem_num``: ``mli_chk_count_elem_num`` makes it 0 for rank > MLI_MAX_RANK and for
    ``start_dim`` >= rank (rank 0 included, unlike 2.0); without the checks the empty product is 1."""
    if not 0 <= t.rank <= 4 or start_dim < 0:
        return 0
    if start_dim >= t.rank and debug_checks():
        return 0
    return t.count(start_dim)


# ---- element-wise (MLI 1.1.1 mli_krn_eltwise.h, mli_chk_eltwise) ---------------------------------------------------
def _is_scalar1(t) -> bool:
    """``mli_tensor_is_scalar``: rank 0 (the value in the container) or one element."""
    return t.rank == 0 or t.count() == 1


def _contiguous1(dims, strides) -> bool:
    """1.1.1's ``check_layout_is_contiguous(shape, mem_stride, rank)``: some stride 0 (the kernel then computes
    dense strides) or exactly the dense strides of ``dims``."""
    strides = list(strides)
    return not all(m != 0 for m in strides) or strides == dense_strides(dims)


def _check_eltwise1(op, ti, in1, in2, out) -> None:
    """1.1.1's ``mli_chk_eltwise`` then the kernel's type check, in its order: scalar operands
    (``mli_chk_scalar_tensor``) and an output with a data pointer (BAD_TENSOR); contiguous inputs
    (INCOMPATEBLE_TENSORS); not both of rank 0 (NOT_SUPPORTED); the non-scalar inputs valid (``mli_chk_tensor``)
    with ``out.mem_stride`` dense for their shape (INCOMPATEBLE_TENSORS, before a bad tensor's status); equal
    element types and, except for mul, equal frac bits (INCOMPATEBLE_TENSORS); equal shapes when neither is a
    scalar (SHAPE_MISMATCH); output capacity for the larger operand (NOT_ENGH_MEM); fx8 / fx16 inputs
    (TYPE_MISMATCH)."""
    S_ = S
    for t, name in ((in1, "in1"), (in2, "in2")):
        require(t is not None, S_.MLI_STATUS_BAD_TENSOR, f"{name}: expected a tensor, got None")
        if _is_scalar1(t) and t.rank:  # mli_chk_scalar_tensor: a rank-0 value is not checked further
            check_tensor(t, name, v1=True)
    require(out is not None and getattr(out, "mem", None) is not None, S_.MLI_STATUS_BAD_TENSOR,
            "out: no data pointer")
    check_out(out)
    check(_contiguous1(in1.dims, in1.mstrides) and _contiguous1(in2.dims, in2.mstrides),
          S_.MLI_STATUS_INCOMPATEBLE_TENSORS, "in1/in2: layout must be contiguous")
    check(in1.rank > 0 or in2.rank > 0, S_.MLI_STATUS_NOT_SUPPORTED, "in1/in2: one operand must have rank > 0")
    status = None
    for t, name in ((in1, "in1"), (in2, "in2")):
        if not _is_scalar1(t):
            try:
                check_tensor(t, name, v1=True)
            except MliCheckFailed as e:  # reported after the output layout check, as mli_chk_eltwise does
                status = status or e
            check(_contiguous1(t.dims, out.mem_stride[:t.rank]), S_.MLI_STATUS_INCOMPATEBLE_TENSORS,
                  "out: mem_stride must be dense for the input's shape")
    if status is not None:
        raise status
    check(in1.el_type == in2.el_type, S_.MLI_STATUS_INCOMPATEBLE_TENSORS, "in1/in2: element types differ")
    if op != "mul":
        check(in1.frac_bits == in2.frac_bits, S_.MLI_STATUS_INCOMPATEBLE_TENSORS,
              f"in1/in2: frac bits {in1.frac_bits} and {in2.frac_bits} differ ({op} needs one notation)")
    if not _is_scalar1(in1) and not _is_scalar1(in2):
        check(in1.dims == in2.dims, S_.MLI_STATUS_SHAPE_MISMATCH, f"in1/in2: shapes {in1.dims} and {in2.dims} differ")
    n = max(in1.count() if in1.rank else 1, in2.count() if in2.rank else 1)
    check(n * in1.element_size <= out.capacity, S_.MLI_STATUS_NOT_ENGH_MEM,
          f"out: capacity {out.capacity} bytes < {n * in1.element_size} needed")
    check_types([(in1, ti, "in1"), (in2, ti, "in2")])


_ELT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "max": np.maximum, "min": np.minimum}


def _eltwise1(op, flavor, in1, in2, out) -> None:
    """MLI 1.x ``mli_krn_eltwise_{add,sub,max,min,mul}_fx8/fx16(in1, in2, out)``: element by element, a scalar
    operand (rank 0 or one element) broadcast; add/sub/max/min on the raw values saturated to the data bits, out
    takes in1's frac bits; mul accumulates the product and casts it by in1 + in2 - out frac bits (the output's
    frac bits are the caller's) with convergent rounding and saturation. ``out`` takes the larger operand's shape
    (rank 0 holding the value when its capacity is 0, without the checks) and in1's element type."""
    ti, _, bits = FLAVORS[flavor]
    if debug_checks():
        _check_eltwise1(op, ti, in1, in2, out)
    else:
        for t, name in ((in1, "in1"), (in2, "in2")):
            if t.rank:
                check_tensor(t, name, v1=True)
        require(out is not None and getattr(out, "mem", None) is not None, S.MLI_STATUS_BAD_TENSOR, "out: no data")
    require(in1.el_type == ti and in2.el_type == ti, S.MLI_STATUS_TYPE_MISMATCH, "in1/in2: wrong element type")
    a, b = in1.values(), in2.values()
    n1, n2 = a.size, b.size
    require(n1 == 1 or n2 == 1 or a.shape == b.shape, S.MLI_STATUS_SHAPE_MISMATCH, "in1/in2: shapes differ")
    a1, b1 = (a.reshape(()) if n1 == 1 else a), (b.reshape(()) if n2 == 1 else b)
    if op == "mul":
        shift = in1.frac_bits + in2.frac_bits - out.frac_bits
        prod = A.i64(a1) * A.i64(b1)
        y = A.sat(A.rnd(2 * prod, shift + 1, 64, MODE), 16) if bits == 16 else A.sat(A.rnd(prod, shift, 32, MODE), 8)
    else:
        y = A.sat(_ELT_OPS[op](A.i64(a1), A.i64(b1)), bits)
    big = in1 if n1 > n2 else in2
    out.el_type = in1.el_type
    if op != "mul":
        out.frac_bits = in1.frac_bits
    if out.capacity == 0 and y.size == 1 and not isinstance(out.mem, np.ndarray):
        out.data.mem, out.rank = int(np.asarray(y).reshape(())), 0
        return
    dims = big.dims  # the larger operand's shape; in2's when both hold one element (rank 0 for a rank-0 in2)
    out.write(np.broadcast_to(y, dims) if y.ndim == 0 else y, dims)


_DOC_ELT = ("MLI 1.x element-wise {op} (in1, in2, out): a scalar operand broadcast, saturated to the data bits; "
            "returns a status (checks: 1.1.1's mli_chk_eltwise).")
ELTWISE_KERNELS = [name for op in ("add", "sub", "mul", "max", "min") for name in define_kernels(
    globals(), _eltwise1, f"krn_eltwise_{op}_", {k: (op, k) for k in _FX_FLAVORS}, _DOC_ELT.format(op=op))]
"""``krn_eltwise_{add,sub,mul,max,min}_{fx8,fx16}`` of MLI 1.x."""
