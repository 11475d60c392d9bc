"""``lstm`` and ``gru`` on transformed ztensors, run by the float cell engines with zDNN's DLFLOAT16 op-boundary
rounding (:mod:`.policy`; zdnn.md section 3).

Gate order FICO (LSTM: f, i, c, o) and ZRH (GRU: z, r, h, reset after linear); weights are stored transposed
(x @ W). BWD and the backward half of BIDIR store the output of input step t at index t; the final-step output
is the last *processed* step. BIDIR outputs are (ts, 1, b, 2*PADDED(h)) with forward then backward columns.
"""

from __future__ import annotations

import numpy as np

from ...cells.activations import Activation
from ...cells.gru import gru_sequence
from ...cells.kinds import GATE_COUNT
from ...cells.lstm import lstm_sequence
from ...errors import BufferLayoutError, ShapeError
from . import machine as _m
from .constants import DataLayout, Direction, NNPAFunction
from .desc import TensorDesc, getsize_ztensor, padded
from .ops_support import require_desc
from .policy import DLF16_OP_BOUNDARIES
from .status import Status
from .transform import read_values, write_values
from .verify import OpStatus, check_feature, op_result, require, require_ztensors
from .ztensor import PAGE, ZTensor, _allocator, byte_view

FICO_TO_CANONICAL = (1, 0, 2, 3)  # canonical i, f, g, o taken from f, i, c, o
_LSTM_ACTS = (Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh"))
_GRU_ACTS = (Activation("Sigmoid"), Activation("Tanh"))


def work_area_size(kind: str, num_timesteps: int, num_batches: int, num_hidden: int, bidir: bool = False) -> int:
    """Bytes of the ``work_area`` zDNN's lstm/gru use: per direction getsize(1,1,b,h) * (G*ts + G + min(ts-1, 2))
    (FUSED for all steps, one BIAS_ADD, two alternating state slots), doubled for BIDIR."""
    G = GATE_COUNT[kind]
    unit = getsize_ztensor(TensorDesc(dim4=1, dim3=1, dim2=num_batches, dim1=num_hidden))
    size = unit * (G * num_timesteps + G + min(num_timesteps - 1, 2))
    return size * (2 if bidir else 1)


def _gates(zt: ZTensor, G: int, rows: int, h: int, order) -> np.ndarray:
    """Concatenated gate tensor -> canonical [D, G*h, rows] (out x in) in engine gate order."""
    v = read_values(zt)  # (D, 1, rows, G*PH)
    D = v.shape[0]
    w = v[:, 0].reshape(D, rows, G, padded(h))[..., :h].transpose(0, 2, 3, 1)  # (D, G, h, rows)
    return np.ascontiguousarray(w[:, list(order)]).reshape(D, G * h, rows)


def _bias(zt: ZTensor, G: int, h: int, order) -> np.ndarray:
    v = read_values(zt)[:, 0, 0].reshape(-1, G, padded(h))[..., :h]
    return np.ascontiguousarray(v[:, list(order)]).reshape(v.shape[0], G * h)


def _out_cells(Y: np.ndarray, width: int) -> np.ndarray:
    """[T, D, B, H] -> transformed cells (T, 1, B, width): D = 1 as is; D = 2 at columns d*PADDED(H)."""
    T, D, B, H = Y.shape
    if D == 1:
        return Y.reshape(T, 1, B, H)
    out = np.zeros((T, B, D, width // D), Y.dtype)
    out[..., :H] = Y.transpose(0, 2, 1, 3)
    return out.reshape(T, 1, B, width)


def _dims(zt: ZTensor) -> tuple[int, int, int, int]:
    return tuple(int(v) for v in zt.transformed_desc.dims)


def _check(kind, input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction, hn_output,
           cf_output):
    """libzdnn's ``verify_zdnn_lstm_or_gru_tensors``, in its order: input dim4 nonzero; hn_output dim4 ts or 1;
    batches; weights dim2 = features; every dim3 = 1; biases dim2 = 1; dim4 = h0's (directions), h0's = 1 or 2 by
    ``direction``; output dim1 (h, or 2*PADDED(h) for BIDIR); dim1 = G*PADDED(h); c0 dim1; hidden_weights dim2;
    then every type and format equal to input's (and input DLFLOAT16 4DFEATURE). Layouts are not checked (libzdnn
    does not: an NHWC ztensor of the right dims serves as weights). Returns (ts, b, f, h, D)."""
    lstm = kind == "lstm"
    G = GATE_COUNT[kind]
    ts, _, b, f = _dims(input)
    require(ts != 0)
    require(_dims(hn_output)[0] in (ts, 1))
    for t in (h0, hn_output) + ((c0, cf_output) if lstm else ()):
        require(_dims(t)[2] == b)
    require(_dims(weights)[2] == f)
    for t in (input, h0, weights, biases, hidden_weights, hidden_biases, hn_output) + ((c0, cf_output) if lstm
                                                                                       else ()):
        require(_dims(t)[1] == 1)
    require(_dims(biases)[2] == 1 and _dims(hidden_biases)[2] == 1)
    D, h = _dims(h0)[0], _dims(h0)[3]
    for t in (weights, biases, hidden_weights, hidden_biases) + ((c0,) if lstm else ()):
        require(_dims(t)[0] == D)
    require(D == (2 if int(direction) == Direction.BIDIR else 1))
    width = 2 * padded(h) if D == 2 else h
    for t in (hn_output,) + ((cf_output,) if lstm else ()):
        require(_dims(t)[3] == width)
    for t in (weights, biases, hidden_weights, hidden_biases):
        require(_dims(t)[3] == G * padded(h))
    if lstm:
        require(_dims(c0)[3] == h)
    require(_dims(hidden_weights)[2] == h)
    check_feature(input)
    for t in (h0, weights, biases, hidden_weights, hidden_biases, hn_output) + ((c0, cf_output) if lstm else ()):
        check_feature(t)
    if lstm:
        require(cf_output is not None and _dims(cf_output)[0] == 1)
    return ts, b, f, h, D


def _work_area(work_area, kind, ts, b, h, D, where):
    """None when usable (None = allocated here, as zDNN's malloc_aligned_4k), else the status."""
    size = work_area_size(kind, ts, b, h, D == 2)
    if work_area is None:
        try:
            _allocator[0](size)
        except MemoryError:
            return Status.ZDNN_ALLOCATION_FAILURE
        return None
    wa = byte_view(work_area)
    if wa is None or not wa.flags.writeable:
        raise BufferLayoutError(f"work_area: expected a writable C-contiguous buffer (zDNN writes it), got "
                                f"{type(work_area).__name__}")
    if wa.ctypes.data % PAGE:
        return Status.ZDNN_MISALIGNED_TENSOR
    if wa.nbytes < size:
        raise ShapeError(f"work_area: expected at least {size} bytes for {where} (ts={ts}, b={b}, h={h}, "
                         f"dirs={D}), got {wa.nbytes}")
    return None


def _write_work_area(work_area, kind, x, hs, cs, weights, biases, hidden_weights, hidden_biases, canon, Y,
                     reverse, ts, b, h, D, hn_all) -> None:
    """What zDNN's aiu_lstm_gru leaves in a caller's work area, per direction at d * (its size / directions):

    FUSED (ts, 1, b, G*PADDED(h)) = input @ weights + biases for every timestep (NNPA_MATMUL_OP_BCAST23);
    BIAS_ADD (1, 1, b, G*PADDED(h)) = h_prev @ hidden_weights + hidden_biases of the last step processed
    (NNPA_MATMUL_OP; h_prev is h0 for one timestep); then two alternating (1, 1, b, h) slots holding the output
    of every step but the last (LSTM: its cell state; GRU: its hidden state when hn_output keeps only the final
    step, otherwise unused): step k (in processing order) writes slot k % 2. Each matmul: float64 sums, one
    DLFLOAT16 rounding; the cell states are the engine's, re-run on the processed prefix."""
    wa = byte_view(work_area)
    in_pad = int(weights.transformed_desc.dim1)
    dir_size = work_area_size(kind, ts, b, h, False)

    def put(offset, dims, values):
        desc = TensorDesc(DataLayout.ZDNN_NHWC, 0, 0, *dims)
        n = getsize_ztensor(desc)
        zt = ZTensor(transformed_desc=desc, buffer=wa[offset:offset + n], buffer_size=n)
        with np.errstate(all="ignore"):
            write_values(zt, np.asarray(values, np.float64).reshape(dims))
        return n

    Wt, bt = read_values(weights)[:, 0].astype(np.float64), read_values(biases)[:, 0, 0].astype(np.float64)
    Rt, rbt = read_values(hidden_weights)[:, 0].astype(np.float64), read_values(hidden_biases)[:, 0, 0]
    W, R, bx, bh = canon
    for d in range(D):
        base = d * dir_size
        n_fused = put(base, (ts, 1, b, in_pad), x.astype(np.float64) @ Wt[d] + bt[d])
        order = list(range(ts))[::-1] if reverse[d] else list(range(ts))
        h_prev = hs[d] if ts == 1 else Y[order[-2], d, :, :h]
        n_bias = put(base + n_fused, (1, 1, b, in_pad), h_prev.astype(np.float64) @ Rt[d] + rbt[d])
        slot0 = base + n_fused + n_bias
        n_slot = getsize_ztensor(TensorDesc(dim4=1, dim3=1, dim2=b, dim1=h))
        for k in range(max(0, ts - 3), ts - 1):
            if kind == "lstm":
                xs = x[ts - 1 - k:] if reverse[d] else x[:k + 1]
                sl = slice(d, d + 1)
                _, _, c = lstm_sequence(xs, W[sl], R[sl], bx[sl], bh[sl], hs[sl], cs[sl], reverse=(reverse[d],),
                                        acts=[_LSTM_ACTS], policy=DLF16_OP_BOUNDARIES)
                value = c[0]
            elif not hn_all:
                value = Y[order[k], d, :, :h]
            else:
                continue
            put(slot0 + (k % 2) * n_slot, (1, 1, b, h), value)


def _run(kind, input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction, work_area, hn_output,
         cf_output) -> Status:
    where = kind
    require_ztensors(input=input, h0=h0, weights=weights, biases=biases, hidden_weights=hidden_weights,
                     hidden_biases=hidden_biases, hn_output=hn_output,
                     **({"c0": c0, "cf_output": cf_output} if kind == "lstm" else {}))
    try:
        require_desc(input, h0, weights, biases, hidden_weights, hidden_biases, hn_output,
                     *((c0, cf_output) if kind == "lstm" else ()))
        ts, b, f, h, D = _check(kind, input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction,
                                hn_output, cf_output)
    except OpStatus as e:
        return op_result(e.status, where)
    if not _m.parmblk_fmts_installed(0):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    st = _work_area(work_area, kind, ts, b, h, D, where)
    if st is not None:
        return op_result(st, where)
    try:
        direction = Direction(int(direction))
    except ValueError:
        return op_result(Status.ZDNN_INVALID_DIRECTION, where)
    acts = NNPAFunction.NNPA_LSTMACT if kind == "lstm" else NNPAFunction.NNPA_GRUACT
    if not _m.functions_installed(NNPAFunction.NNPA_MATMUL_OP, NNPAFunction.NNPA_MATMUL_OP_BCAST23, acts):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    try:
        return _compute(kind, input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction, work_area,
                        hn_output, cf_output, ts, b, f, h, D)
    except OpStatus as e:
        return op_result(e.status, where)


def _compute(kind, input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction, work_area,  # noqa: A002
             hn_output, cf_output, ts, b, f, h, D) -> Status:
    where = kind
    G = GATE_COUNT[kind]
    order = FICO_TO_CANONICAL if kind == "lstm" else (0, 1, 2)
    x = np.ascontiguousarray(read_values(input)[:, 0])  # (ts, b, f)
    W = _gates(weights, G, f, h, order)
    R = _gates(hidden_weights, G, h, h, order)
    bx, bh = _bias(biases, G, h, order), _bias(hidden_biases, G, h, order)
    hs = np.ascontiguousarray(read_values(h0)[:, 0])
    reverse = {Direction.FWD: (False,), Direction.BWD: (True,), Direction.BIDIR: (False, True)}[direction]
    if kind == "lstm":
        cs = np.ascontiguousarray(read_values(c0)[:, 0])
        Y, Yh, Yc = lstm_sequence(x, W, R, bx, bh, hs, cs, reverse=reverse, acts=[_LSTM_ACTS] * D,
                                  policy=DLF16_OP_BOUNDARIES)
    else:
        Y, Yh = gru_sequence(x, W, R, bx, bh, hs, reverse=reverse, acts=[_GRU_ACTS] * D, linear_before_reset=True,
                             policy=DLF16_OP_BOUNDARIES)
    if work_area is not None:
        _write_work_area(work_area, kind, x, hs, cs if kind == "lstm" else None, weights, biases, hidden_weights,
                         hidden_biases, (W, R, bx, bh), Y, reverse, ts, b, h, D,
                         hn_output.transformed_desc.dim4 == ts)
    width = hn_output.transformed_desc.dim1
    hn = Y if hn_output.transformed_desc.dim4 == ts else Yh[None]
    flags = write_values(hn_output, _out_cells(hn, width))
    hn_output.is_transformed = True
    bad = flags.overflow or flags.invalid
    if cf_output is not None:
        flags = write_values(cf_output, _out_cells(Yc[None], width))
        cf_output.is_transformed = True
        bad = bad or flags.overflow or flags.invalid
    return op_result(Status.ZDNN_ELEMENT_RANGE_VIOLATION if bad else Status.ZDNN_OK, where)


def lstm(input: ZTensor, h0: ZTensor, c0: ZTensor, weights: ZTensor, biases: ZTensor,  # noqa: A002
         hidden_weights: ZTensor, hidden_biases: ZTensor, direction: int, work_area, hn_output: ZTensor,
         cf_output: ZTensor) -> Status:
    """``zdnn_lstm``: input (ts, b, f) 3DS, h0/c0 (dirs, b, h) 3DS, FICO-concatenated weights/biases; writes
    hn_output (ts or 1, dirs, b, h) 4DS and cf_output (1, dirs, b, h) 4DS. ``work_area``: None (allocated) or a
    4 KiB-aligned writable buffer of at least :func:`work_area_size` bytes, written as zDNN writes it
    (:func:`_write_work_area`)."""
    return _run("lstm", input, h0, c0, weights, biases, hidden_weights, hidden_biases, direction, work_area,
                hn_output, cf_output)


def gru(input: ZTensor, h0: ZTensor, weights: ZTensor, biases: ZTensor, hidden_weights: ZTensor,  # noqa: A002
        hidden_biases: ZTensor, direction: int, work_area, hn_output: ZTensor) -> Status:
    """``zdnn_gru`` (reset after linear): as :func:`lstm` with ZRH gates and no cell state."""
    return _run("gru", input, h0, None, weights, biases, hidden_weights, hidden_biases, direction, work_area,
                hn_output, None)
