"""``mli_krn_lstm_cell_*`` and ``mli_krn_gru_cell_*`` (MLI 2.0): checks (statuses) and tensor plumbing around
:mod:`.cells`."""

from __future__ import annotations

import numpy as np

from .cells import CellQuant, gru_sequence, lstm_sequence
from .checks import (
    check,
    check_bias,
    check_lut,
    check_out,
    check_tensor,
    check_types,
    check_zero_points,
    containers_overlapped,
    contiguous,
    debug_checks,
    inner_stride_one,
)
from .config import RnnAct, RnnCellCfg, RnnDirection, RnnResults, current_build
from .fully_connected import TYPES
from .luts import TABLES
from .status import Status, define_kernels, fail, require
from .tensors import DataContainer

S = Status
_ACT = {RnnAct.RNN_ACT_NONE: "none", RnnAct.RNN_ACT_TANH: "tanh", RnnAct.RNN_ACT_SIGM: "sigm"}


def scratch_capacity(cfg: RnnCellCfg) -> int | None:
    """Bytes of the scratch buffer ``cfg.scratch_data`` (C's ``scratch_data.capacity``; for an array its size
    or the legacy ``cfg.scratch_capacity``); None when there is none: MLI's checker returns BAD_FUNC_CFG for
    that NULL pointer (here too in a debug build; in ``DBG_MODE_RELEASE``, where C would write through NULL,
    fusedrnn allocates the scratch)."""
    sd = cfg.scratch_data
    if isinstance(sd, DataContainer):
        return int(sd.capacity) if sd.mem is not None else 0
    if cfg.scratch_capacity is not None:
        return int(cfg.scratch_capacity)
    return int(sd.nbytes) if isinstance(sd, np.ndarray) else None


def _check_lut(lut, kind: str) -> None:
    check_lut(lut, kind, TABLES[("2.0", kind)][0])


def _enum(v, enum, name):
    try:
        return enum(v)
    except ValueError:
        fail(S.MLI_STATUS_BAD_FUNC_CFG, f"cfg.{name}: expected one of {[e.name for e in enum]}, got {v!r}")


def _check_cell(flavor, G, in_, prev_out, weights_in, weights_out, bias, tanh_lut, sigm_lut, cfg, cell, out, mode):
    check_out(out)
    _check_lut(tanh_lut, "tanh")
    _check_lut(sigm_lut, "sigm")
    require(isinstance(cfg, RnnCellCfg), S.MLI_STATUS_BAD_FUNC_CFG, f"cfg: expected an RnnCellCfg, got {cfg!r}")
    direction = _enum(cfg.direction, RnnDirection, "direction")
    results = _enum(cfg.results, RnnResults, "results")
    act = _enum(cfg.act, RnnAct, "act")
    check_tensor(in_, "in")
    check_tensor(prev_out, "prev_out")
    require(in_.rank == 2, S.MLI_STATUS_SHAPE_MISMATCH, f"in: expected rank 2 [T, N], got {in_.rank}")
    require(prev_out.rank == 1, S.MLI_STATUS_SHAPE_MISMATCH, f"prev_out: expected rank 1 [M], got {prev_out.rank}")
    require(inner_stride_one(in_) and inner_stride_one(prev_out), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "in/prev_out: innermost mem_stride must be 1")
    T, N, M = in_.shape[0], in_.count(1), prev_out.count()
    check_tensor(weights_in, "weights_in")
    check_tensor(weights_out, "weights_out")
    require(weights_in.rank == 3 and weights_in.dims == [G, N, M], S.MLI_STATUS_SHAPE_MISMATCH,
            f"weights_in: expected shape [{G}, {N}, {M}], got {weights_in.dims}")
    require(weights_out.rank == 3 and weights_out.dims == [G, M, M], S.MLI_STATUS_SHAPE_MISMATCH,
            f"weights_out: expected shape [{G}, {M}, {M}], got {weights_out.dims}")
    require(inner_stride_one(weights_in) and inner_stride_one(weights_out), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "weights: innermost mem_stride must be 1")
    check_tensor(bias, "bias")
    require(bias.rank == 2 and bias.dims == [G, M], S.MLI_STATUS_SHAPE_MISMATCH,
            f"bias: expected shape [{G}, {M}], got {bias.dims}")
    if cell is not None:
        check_tensor(cell, "cell", writes=True)  # updated in place
        require(cell.rank == 1 and cell.shape[0] == M, S.MLI_STATUS_SHAPE_MISMATCH,
                f"cell: expected shape [{M}], got {cell.dims}")
    seq = T if results == RnnResults.RNN_OUT_ALL else 1
    if debug_checks():  # mli_chk_tensor(out): the caller describes the output (the kernel then sets its shape)
        check_tensor(out, "out", writes=True)
        check(contiguous(out), S.MLI_STATUS_INCOMPATEBLE_TENSORS, f"out: layout must be contiguous, {out.mstrides}")
    require(seq * M * in_.element_size <= out.capacity, S.MLI_STATUS_BAD_TENSOR,
            f"out: capacity {out.capacity} bytes < {seq * M * in_.element_size} needed")
    cap = scratch_capacity(cfg)
    check(cap is not None, S.MLI_STATUS_BAD_FUNC_CFG,
          "cfg.scratch_data: no scratch buffer (the kernel needs one of at least "
          f"{G * M * in_.element_size} bytes)")
    if cap is not None:
        require(G * M * in_.element_size <= cap, S.MLI_STATUS_BAD_FUNC_CFG,
                f"cfg.scratch_data: capacity {cap} bytes < {G * M * in_.element_size} needed")
    if isinstance(cfg.scratch_data, DataContainer):
        check(not containers_overlapped(in_.data, cfg.scratch_data), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
              "in/cfg.scratch_data: buffers must not overlap")
    require(inner_stride_one(bias) and (cell is None or inner_stride_one(cell)), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
            "bias/cell: innermost mem_stride must be 1")
    ti, tw, tb = TYPES[flavor]
    pairs = [(in_, ti, "in"), (prev_out, ti, "prev_out"), (weights_in, tw, "weights_in"),
             (weights_out, tw, "weights_out"), (bias, tb, "bias"), (out, ti, "out")]
    if cell is not None:
        pairs.append((cell, ti, "cell"))
    check_types(pairs)
    if flavor == "sa8":
        data = [(in_, "in"), (prev_out, "prev_out"), (out, "out")] + ([(cell, "cell")] if cell is not None else [])
        for t, name in data:
            require(t.dim < 0, S.MLI_STATUS_INCOMPATEBLE_TENSORS, f"{name}: per-tensor quantization expected")
            check_zero_points(t, name, zero=False)
        dims = {weights_in.dim, weights_out.dim, bias.dim}
        require(dims in ({-1}, {0}) or (max(dims) < 0), S.MLI_STATUS_INCOMPATEBLE_TENSORS,
                "weights_in/weights_out/bias: all per-tensor or all per-axis along dim 0 (one scale per gate), "
                f"got dims {weights_in.dim}, {weights_out.dim}, {bias.dim}")
        for t, name in ((weights_in, "weights_in"), (weights_out, "weights_out"), (bias, "bias")):
            check_zero_points(t, name, zero=True)
    check_bias(flavor, in_, weights_in, bias, mode)
    return direction, results, act


def _quant(flavor, in_, prev_out, weights_in, weights_out, bias, out, cell) -> CellQuant:
    if flavor == "sa8":
        def w(t):
            return t.scale.astype(np.int64), t.scale_frac_bits.astype(np.int64)
        return CellQuant(flavor, in_.params(0), prev_out.params(0), out.params(0), w(weights_in), w(weights_out),
                         cell=None if cell is None else cell.params(0))
    return CellQuant(flavor, in_.frac_bits, prev_out.frac_bits, out.frac_bits, weights_in.frac_bits,
                     weights_out.frac_bits, bias.frac_bits, None if cell is None else cell.frac_bits)


def _write_out(out, Y, h, results, el_type):
    """out = every step's state [T, M] (RNN_OUT_ALL) or the last one [1, M], of element type ``el_type``."""
    out.el_type = el_type
    y = Y[:, 0] if results == RnnResults.RNN_OUT_ALL else h
    out.write(y, y.shape)


def _lstm(flavor, in_, prev_out, weights_in, weights_out, bias, tanh_lut, sigm_lut, cfg, cell, out):
    bld = current_build()
    require(cell is not None, S.MLI_STATUS_ARGUMENT_ERROR, "cell: expected a tensor, got None")
    direction, results, act = _check_cell(flavor, 4, in_, prev_out, weights_in, weights_out, bias, tanh_lut,
                                          sigm_lut, cfg, cell, out, bld.mode)
    q = _quant(flavor, in_, prev_out, weights_in, weights_out, bias, out, cell)
    x = in_.values()[:, None, :]
    Y, h, c = lstm_sequence(x, prev_out.values()[None], cell.values()[None], weights_in.values(),
                            weights_out.values(), bias.values(), q, act=_ACT[act],
                            reverse=direction == RnnDirection.RNN_DIR_BACKWARD,
                            luts={"tanh": tanh_lut, "sigm": sigm_lut}, full_accu=bld.full_accu, mode=bld.mode)
    cell.write(c[0])
    _write_out(out, Y, h, results, in_.el_type)


def _gru(flavor, in_, prev_out, weights_in, weights_out, bias, tanh_lut, sigm_lut, cfg, out, *, faithful=True):
    bld = current_build()
    direction, results, act = _check_cell(flavor, 3, in_, prev_out, weights_in, weights_out, bias, tanh_lut,
                                          sigm_lut, cfg, None, out, bld.mode)
    q = _quant(flavor, in_, prev_out, weights_in, weights_out, bias, out, None)
    Y, h = gru_sequence(in_.values()[:, None, :], prev_out.values()[None], weights_in.values(),
                        weights_out.values(), bias.values(), q, reverse=direction == RnnDirection.RNN_DIR_BACKWARD,
                        luts={"tanh": tanh_lut, "sigm": sigm_lut}, full_accu=bld.full_accu, mode=bld.mode,
                        faithful=faithful)
    _write_out(out, Y, h, results, in_.el_type)


_DOC_LSTM = """LSTM cell, gates (i, g, f, o): in [T, N], prev_out [M], weights_in [4, N, M], weights_out [4, M, M],
    bias [4, M], cell [M] (updated in place), out [T, M] (RNN_OUT_ALL, processing order) or [1, M]; returns a
    status. cfg.act is the output activation (TANH, SIGM or NONE)."""
_DOC_GRU = """GRU cell, gates (z, r, n), reset before the recurrent matmul: weights_in [3, N, M], weights_out
    [3, M, M], bias [3, M]; returns a status. ``faithful=False`` corrects MLI's per-tensor sa8 new-gate weight
    scale (see :func:`fusedrnn.targets.mli.cells.gru_tweak_faithful`); the default reproduces MLI."""


_FLAVORS = {"fx16": ("fx16",), "fx16_fx8_fx8": ("fx16_fx8_fx8",), "sa8_sa8_sa32": ("sa8",)}
KERNELS = (define_kernels(globals(), _lstm, "krn_lstm_cell_", _FLAVORS, _DOC_LSTM)
           + define_kernels(globals(), _gru, "krn_gru_cell_", _FLAVORS, _DOC_GRU))
"""The names of the kernels this module defines: ``krn_{lstm,gru}_cell_{fx16,fx16_fx8_fx8,sa8_sa8_sa32}``."""
