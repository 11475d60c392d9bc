"""``get_max_limit`` / ``get_min_limit``: the largest / smallest value representable both in a transformed type
and a pre-transformed type, as a value of the pre-transformed type."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .constants import DataType
from .desc import _enum
from .status import Status, report

T = DataType
_BF16 = ml_dtypes.bfloat16


def _bf(code: int):
    return np.array([code], np.uint16).view(_BF16)[0]


def _f16(code: int):
    return np.array([code], np.uint16).view(np.float16)[0]


_MAX = {
    (T.ZDNN_DLFLOAT16, T.FP32): np.float32(8573157376.0),
    (T.ZDNN_DLFLOAT16, T.FP16): _f16(0x7BFF),
    (T.ZDNN_DLFLOAT16, T.BFLOAT): _bf(0x4FFF),
    (T.ZDNN_BINARY_INT8, T.FP32): np.float32(127.0),
    (T.ZDNN_BINARY_INT8, T.FP16): _f16(0x57F0),
    (T.ZDNN_BINARY_INT8, T.BFLOAT): _bf(0x42FE),
    (T.ZDNN_BINARY_INT8, T.INT8): np.int8(127),
    (T.ZDNN_BINARY_INT32, T.INT32): np.int32(2**31 - 1),
}
_MIN = {
    (T.ZDNN_DLFLOAT16, T.FP32): np.float32(-8573157376.0),
    (T.ZDNN_DLFLOAT16, T.FP16): _f16(0xFBFF),
    (T.ZDNN_DLFLOAT16, T.BFLOAT): _bf(0xCFFF),
    (T.ZDNN_BINARY_INT8, T.FP32): np.float32(-128.0),
    (T.ZDNN_BINARY_INT8, T.FP16): _f16(0xD800),
    (T.ZDNN_BINARY_INT8, T.BFLOAT): _bf(0xC300),
    (T.ZDNN_BINARY_INT8, T.INT8): np.int8(-128),
    (T.ZDNN_BINARY_INT32, T.INT32): np.int32(-(2**31)),
}


def _limit(table, transformed_type, pre_transformed_type, where):
    key = (_enum(DataType, transformed_type), _enum(DataType, pre_transformed_type))
    if key not in table:
        return report(Status.ZDNN_INVALID_TYPE, where), None
    return report(Status.ZDNN_OK, where), table[key]


def get_max_limit(transformed_type: int, pre_transformed_type: int):
    """(status, limit): INVALID_TYPE (and None) for a pair zDNN does not list."""
    return _limit(_MAX, transformed_type, pre_transformed_type, "get_max_limit")


def get_min_limit(transformed_type: int, pre_transformed_type: int):
    return _limit(_MIN, transformed_type, pre_transformed_type, "get_min_limit")
