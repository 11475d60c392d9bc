"""Number formats and exact arithmetic shared by every target (NumPy + ml_dtypes only).

* :mod:`.float_formats` — float16, bfloat16 and DLFLOAT16 rounding in place, 16-bit codes;
* :mod:`.dlfloat16` — IBM zAIU DLFLOAT16 conversions with zDNN's rounding, flags and byte order;
* :mod:`.gemmlowp` — TFLite's quantized multipliers, rounding shifts and gemmlowp fixed-point exp, logistic, tanh.
"""

from .dlfloat16 import (
    DLF16_BIAS,
    DLF16_MAX,
    DLF16_MIN,
    DLF16_NINF,
    FPFlags,
    bf16_to_dlf16,
    dlf16_from_bytes,
    dlf16_to_bf16,
    dlf16_to_bytes,
    dlf16_to_fp16,
    dlf16_to_fp32,
    fp16_to_dlf16,
    fp32_to_dlf16,
    fp32_to_dlf16_flags,
)
from .float_formats import (
    decode_bfloat16,
    decode_float16,
    encode_bfloat16,
    encode_float16,
    round_to_bfloat16,
    round_to_dlfloat16,
    round_to_float16,
)
from .gemmlowp import (
    exp_on_negative_values,
    get_inv_sqrt_quantized_multiplier_exp,
    logistic,
    multiply_by_quantized_multiplier,
    one_minus_x_over_one_plus_x,
    one_over_one_plus_x,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_multiply_by_pot,
    srdhm16,
    srdhm32,
    tanh,
)

__all__ = [
    "DLF16_BIAS",
    "DLF16_MAX",
    "DLF16_MIN",
    "DLF16_NINF",
    "FPFlags",
    "bf16_to_dlf16",
    "decode_bfloat16",
    "decode_float16",
    "dlf16_from_bytes",
    "dlf16_to_bf16",
    "dlf16_to_bytes",
    "dlf16_to_fp16",
    "dlf16_to_fp32",
    "encode_bfloat16",
    "exp_on_negative_values",
    "get_inv_sqrt_quantized_multiplier_exp",
    "logistic",
    "multiply_by_quantized_multiplier",
    "one_minus_x_over_one_plus_x",
    "one_over_one_plus_x",
    "quantize_multiplier",
    "rounding_divide_by_pot",
    "saturating_rounding_multiply_by_pot",
    "srdhm16",
    "srdhm32",
    "tanh",
    "encode_float16",
    "fp16_to_dlf16",
    "fp32_to_dlf16",
    "fp32_to_dlf16_flags",
    "round_to_bfloat16",
    "round_to_dlfloat16",
    "round_to_float16",
]
