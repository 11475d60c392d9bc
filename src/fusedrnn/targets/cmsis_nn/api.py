"""CMSIS-NN's LSTM functions with CMSIS-NN's names (less the ``arm_`` prefix), structures and status codes, so that
code written against ``arm_nnfunctions.h`` ports line by line:

    status = lstm_unidirectional_s8(input, output, params, context)     # arm_lstm_unidirectional_s8
    status = lstm_unidirectional_s16(input, output, params, context)    # arm_lstm_unidirectional_s16
    kernel_sum = vector_sum_s8(cols, rows, weights, lhs_offset, rhs_offset, bias)      # arm_vector_sum_s8
    kernel_sum = vector_sum_s8_s64(cols, rows, weights, lhs_offset, bias)              # arm_vector_sum_s8_s64

``input`` is the flat (or shaped) int8 / int16 array in the layout ``params.time_major`` says ([T, B, I] or
[B, T, I]); ``output`` receives [T, B, H] or [B, T, H] values in place; ``context`` (:class:`LstmContext`) holds
the int16 cell state (updated in place) and the hidden state (None for NULL: the cell starts at 0 and the first
step has no recurrent term; else read at the start and overwritten with the last step's). CMSIS-NN checks none of
its LSTM arguments; here sizes that do not match the parameters raise :class:`~fusedrnn.errors.ShapeError` (where C
would read or write out of bounds). Returns ``ARM_CMSIS_NN_SUCCESS``.
"""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, ShapeError
from .kernel import (
    ARM_CMSIS_NN_ARG_ERROR,
    ARM_CMSIS_NN_FAILURE,
    ARM_CMSIS_NN_NO_IMPL_ERROR,
    ARM_CMSIS_NN_SUCCESS,
    ARM_SIGMOID,
    ARM_TANH,
    CmsisLstm,
    LstmContext,
    LstmGate,
    LstmParams,
    vector_sum_s8,
    vector_sum_s8_s64,
)

_DTYPES = {"s8": np.dtype(np.int8), "s16": np.dtype(np.int16)}


def _buffer(name: str, a, n: int, dtype) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != dtype:
        raise DTypeError(f"{name}: expected {dtype} values, got {arr.dtype}")
    if arr.size != n:
        raise ShapeError(f"{name}: expected {n} elements for the parameters' sizes, got {arr.size}")
    return arr


def _lstm(variant: str, input, output, params: LstmParams, context: LstmContext) -> int:
    p = params
    T, B, I, H = p.time_steps, p.batch_size, p.input_size, p.hidden_size
    dt = _DTYPES[variant]
    x = _buffer("input", input, T * B * I, dt)
    out = np.asarray(output)
    if not isinstance(output, np.ndarray) or out.dtype != dt or out.size != T * B * H:
        raise ShapeError(f"output: expected a writable {dt} array of {T * B * H} elements, got "
                         f"{getattr(out, 'dtype', None)} {getattr(out, 'shape', None)}")
    cell = context.cell_state
    if not isinstance(cell, np.ndarray) or cell.dtype != np.int16 or cell.size != B * H:
        raise ShapeError(f"context.cell_state: expected a writable int16 array of {B * H} elements")
    hidden = context.hidden_state
    if hidden is not None:
        hidden = _buffer("context.hidden_state", hidden, B * H, dt)
    else:
        cell.reshape(-1)[:] = 0  # memset when there is no hidden state
    x = x.reshape(T, B, I) if p.time_major else x.reshape(B, T, I).transpose(1, 0, 2)
    y, (h, c) = CmsisLstm(p, variant).run(x, None if hidden is None else hidden.reshape(B, H), cell.reshape(B, H))
    out.reshape(-1)[:] = (y if p.time_major else y.transpose(1, 0, 2)).reshape(-1)
    cell.reshape(-1)[:] = c.reshape(-1)
    if context.hidden_state is not None and T > 0:
        context.hidden_state.reshape(-1)[:] = h.reshape(-1)
    return ARM_CMSIS_NN_SUCCESS


def lstm_unidirectional_s8(input, output: np.ndarray, params: LstmParams, context: LstmContext) -> int:  # noqa: A002
    """``arm_lstm_unidirectional_s8``: int8 input / output / weights, int32 effective biases, int16 cell."""
    return _lstm("s8", input, output, params, context)


def lstm_unidirectional_s16(input, output: np.ndarray, params: LstmParams, context: LstmContext) -> int:  # noqa: A002
    """``arm_lstm_unidirectional_s16``: int16 input / output, int8 weights, int64 effective biases, int16 cell."""
    return _lstm("s16", input, output, params, context)


__all__ = ["ARM_CMSIS_NN_ARG_ERROR", "ARM_CMSIS_NN_FAILURE", "ARM_CMSIS_NN_NO_IMPL_ERROR", "ARM_CMSIS_NN_SUCCESS",
           "ARM_SIGMOID", "ARM_TANH", "LstmContext", "LstmGate", "LstmParams", "lstm_unidirectional_s16",
           "lstm_unidirectional_s8", "vector_sum_s8", "vector_sum_s8_s64"]
