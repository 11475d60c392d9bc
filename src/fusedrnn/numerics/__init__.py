"""Number formats and exact arithmetic shared by every target (NumPy + ml_dtypes only).

Each integer primitive is defined once, as an unchecked core in :mod:`.core` (int64 arrays in and out, no
validation: what the targets' per-timestep loops call) and a validated public function here that checks its
arguments and calls the core.

* :mod:`.core` — the unchecked cores: saturate, wrap, saturating add, C division, bit length; MLI's shifts and
  roundings; gemmlowp's SRDHM, RoundingDivideByPOT, MultiplyByQuantizedMultiplier (``core.Requant``);
* :mod:`.float_formats` — float16, bfloat16 and DLFLOAT16 rounding in place, 16-bit codes;
* :mod:`.dlfloat16` — IBM zAIU DLFLOAT16 conversions with zDNN's rounding, flags and byte order;
* :mod:`.fixed_point` — MLI-style Q-format fixed point: rounding shifts in every SDK mode, saturation, norm,
  C division, bit length;
* :mod:`.affine` — scale / zero-point quantization (per tensor, per axis), MLI sa8/sa32 scale mantissas, Quark's
  uint16, TFLite's per-row dynamic quantization;
* :mod:`.int_matmul` — exact integer matrix products through float32 / float64 BLAS (bounds stated in the code;
  the function is ``numerics.int_matmul.int_matmul``, so that the module name stays importable);
* :mod:`.gemmlowp` — TFLite's quantized multipliers, rounding shifts and gemmlowp fixed-point exp, logistic, tanh.
* :mod:`.eigen` — the LiteRT interpreter's float32 tanh and logistic (Eigen's, SSE without FMA) bit for bit.
"""

from .affine import (
    INT_RANGES,
    choose_qparams,
    dequantize,
    mli_scale_from_float,
    mli_scale_to_float,
    quantize,
    quark_quantize_uint16,
    tflite_quantize_rows_asymmetric,
    tflite_quantize_rows_symmetric,
    tflite_symmetric_quantize,
)
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
from .fixed_point import (
    ROUNDING_MODES,
    add_sat,
    asl_sat,
    asr,
    asr_rnd,
    bit_length,
    cast_fx,
    dequantize_fx,
    norm,
    quantize_fx,
    saturate,
    saturate_unsigned,
    sub_sat,
    trunc_div,
    wrap,
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
from .int_matmul import IntegerOverflowError, IntMatrix, exact_float_dtype

__all__ = [
    "add_sat",
    "asl_sat",
    "asr",
    "asr_rnd",
    "bf16_to_dlf16",
    "bit_length",
    "cast_fx",
    "choose_qparams",
    "decode_bfloat16",
    "decode_float16",
    "dequantize",
    "dequantize_fx",
    "DLF16_BIAS",
    "dlf16_from_bytes",
    "DLF16_MAX",
    "DLF16_MIN",
    "DLF16_NINF",
    "dlf16_to_bf16",
    "dlf16_to_bytes",
    "dlf16_to_fp16",
    "dlf16_to_fp32",
    "encode_bfloat16",
    "encode_float16",
    "exact_float_dtype",
    "exp_on_negative_values",
    "fp16_to_dlf16",
    "fp32_to_dlf16",
    "fp32_to_dlf16_flags",
    "FPFlags",
    "get_inv_sqrt_quantized_multiplier_exp",
    "INT_RANGES",
    "IntegerOverflowError",
    "IntMatrix",
    "logistic",
    "mli_scale_from_float",
    "mli_scale_to_float",
    "multiply_by_quantized_multiplier",
    "norm",
    "one_minus_x_over_one_plus_x",
    "one_over_one_plus_x",
    "quantize",
    "quantize_fx",
    "quantize_multiplier",
    "quark_quantize_uint16",
    "round_to_bfloat16",
    "round_to_dlfloat16",
    "round_to_float16",
    "rounding_divide_by_pot",
    "ROUNDING_MODES",
    "saturate",
    "saturate_unsigned",
    "saturating_rounding_multiply_by_pot",
    "srdhm16",
    "srdhm32",
    "sub_sat",
    "tanh",
    "tflite_quantize_rows_asymmetric",
    "tflite_quantize_rows_symmetric",
    "tflite_symmetric_quantize",
    "trunc_div",
    "wrap",
]
