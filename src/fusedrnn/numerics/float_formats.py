"""Float storage formats: round a float32/float64 array to float16, bfloat16 or DLFLOAT16 in place; encode values
to 16-bit codes and decode them.

float16 and bfloat16 round to nearest, ties to even (IEEE 754 for float16, ml_dtypes' conversion for bfloat16);
values beyond the format's range become ±inf, NaN stays NaN (NumPy / ml_dtypes keep the sign and the high payload
bits). float16 rounds float64 once; bfloat16 rounds float64 to float32 first, as ml_dtypes does, which differs
from a single rounding only when the float32 value lands exactly halfway between two bfloat16 values.

DLFLOAT16 (IBM zAIU) rounds ties away from zero and flushes tiny values to zero; see :mod:`.dlfloat16`.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import DTypeError
from .dlfloat16 import _as_codes, _as_float_array, _check_bool, _round_dlf16_inplace

__all__ = [
    "decode_bfloat16",
    "decode_float16",
    "encode_bfloat16",
    "encode_float16",
    "round_to_bfloat16",
    "round_to_dlfloat16",
    "round_to_float16",
]


def _check_inplace(x, name: str, dtypes: tuple) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in dtypes:
        got = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        expected = "/".join(str(np.dtype(d)) for d in dtypes)
        raise DTypeError(f"{name}: expected a NumPy {expected} array (rounded in place), got {got}")


_FLOATS = (np.float32, np.float64)
_DLF16_DTYPES = frozenset(map(np.dtype, _FLOATS))  # native byte order only


def round_to_float16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` (float32/float64) to the nearest float16 value in place and return it."""
    _check_inplace(x, "x", _FLOATS + (np.float16,))
    with np.errstate(over="ignore"):
        x[...] = x.astype(np.float16)
    return x


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` (float32/float64) to the nearest bfloat16 value in place and return it."""
    _check_inplace(x, "x", _FLOATS)
    with np.errstate(over="ignore", invalid="ignore"):
        x[...] = x.astype(ml_dtypes.bfloat16)
    return x


def round_to_dlfloat16(x: np.ndarray, *, saturate: bool = False) -> np.ndarray:
    """Round ``x`` (float32/float64) in place to the DLFLOAT16 value it converts to, and return it.

    Ties away from zero; magnitudes that round below 2^-31 * (1 + 1/512) become ±0; overflow, ±Inf and NaN become
    NaN (the NINF code decodes to NaN). ``saturate=True`` clamps finite values to ±DLF16_MAX first (zdnn.md §1.6).
    float64 values are rounded once, directly. Equals ``dlf16_to_fp32(fp32_to_dlf16(x))`` element for element.
    """
    if not isinstance(x, np.ndarray) or x.dtype not in _DLF16_DTYPES:
        _check_inplace(x, "x", _FLOATS)
    if saturate is not False and saturate is not True:
        saturate = _check_bool(saturate, "saturate")
    return _round_dlf16_inplace(x, saturate)


def encode_float16(x) -> np.ndarray:
    """float16 codes (uint16) of ``x`` (float32/float64/bfloat16/int), rounded to nearest even; overflow -> ±inf."""
    a = np.asarray(x)
    if a.dtype != np.float16:
        a = _as_float_array(a, "x")
        with np.errstate(over="ignore"):
            a = a.astype(np.float16)
    return a.view(np.uint16).copy()


def decode_float16(codes) -> np.ndarray:
    """float32 values of float16 ``codes`` (uint16); exact, subnormals included."""
    return _as_codes(codes, "codes", "float16").view(np.float16).astype(np.float32)


def encode_bfloat16(x) -> np.ndarray:
    """bfloat16 codes (uint16) of ``x`` (float32/float64/float16/int), rounded to nearest even (ml_dtypes).

    float64 is rounded to float32 first (see the module docstring); overflow -> ±inf.
    """
    a = np.asarray(x)
    if a.dtype != ml_dtypes.bfloat16:
        with np.errstate(over="ignore", invalid="ignore"):
            a = _as_float_array(a, "x").astype(ml_dtypes.bfloat16)
    return a.view(np.uint16).copy()


def decode_bfloat16(codes) -> np.ndarray:
    """float32 values of bfloat16 ``codes`` (uint16): the code as the high 16 bits of a float32; exact."""
    c = _as_codes(codes, "codes", "bfloat16")
    return (c.astype(np.uint32) << np.uint32(16)).view(np.float32)
