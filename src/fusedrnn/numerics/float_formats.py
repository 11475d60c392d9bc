"""Float storage formats: round a float32/float64 array to float16 or bfloat16 and back, in place.

Both round to nearest, ties to even (IEEE 754 for float16, ml_dtypes' conversion for bfloat16); values
beyond the format's range become ±inf, NaN stays NaN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


def round_to_float16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` (float32/float64) to the nearest float16 value in place and return it."""
    with np.errstate(over="ignore"):
        x[...] = x.astype(np.float16)
    return x


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` (float32/float64) to the nearest bfloat16 value in place and return it."""
    x[...] = x.astype(ml_dtypes.bfloat16)
    return x
