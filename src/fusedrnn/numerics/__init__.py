"""Number formats and exact arithmetic shared by every target (NumPy + ml_dtypes only)."""

from .float_formats import round_to_bfloat16, round_to_float16

__all__ = ["round_to_bfloat16", "round_to_float16"]
