"""zDNN's activation operations: ``relu``, ``leaky_relu``, ``tanh``, ``sigmoid``, ``softmax``, ``softmax_mask``,
``gelu``.

Input and output are DLFLOAT16 4DFEATURE ztensors of one shape. Values are computed in float64 from the exact
DLFLOAT16 inputs and rounded once to DLFLOAT16; NINF inputs or out-of-range results give ELEMENT_RANGE_VIOLATION.
The NNPA's internal evaluation of tanh/sigmoid/gelu/softmax is not published; this module evaluates the functions
exactly (to float64) and rounds once, which is the reference's mathematical definition.
"""

from __future__ import annotations

import numpy as np

from ...c_enums import c_enum, export_members
from .constants import NNPAFunction
from .ops_support import (
    DLF16_NINF_POS,
    DLF16_ONE,
    dims,
    elementwise_op,
    param_code,
    param_value,
    run_op,
    save_area_status,
    store,
    verify_same_features,
)
from .status import Status
from .transform import read_values
from .verify import OpStatus
from .ztensor import ZTensor

F = NNPAFunction


SoftmaxAct = c_enum("SoftmaxAct", "``zdnn_softmax_act``.", __name__, "SOFTMAX_ACT_NONE SOFTMAX_ACT_LOG")
ENUM_CONSTANTS = export_members(globals(), SoftmaxAct)

GELU_SQRT_2_OVER_PI = 0.7978845608
GELU_CUBIC = 0.044715


def clipping_code_status(code: int) -> Status:
    """zDNN's clipping-value rule: negative (sign bit) or NINF codes give INVALID_CLIPPING_VALUE."""
    if code & 0x8000 or code == DLF16_NINF_POS:
        return Status.ZDNN_INVALID_CLIPPING_VALUE
    return Status.ZDNN_OK


def apply_relu(x: np.ndarray, clip_code: int, adjustment: float = 0.0) -> np.ndarray:
    """y = x (x >= 0) or adjustment * x (x < 0), then min(y, clip) when the clipping code is not 0."""
    y = np.where(x >= 0, x, x * adjustment) if adjustment else np.maximum(x, 0.0)
    y = np.where(np.isnan(x), np.nan, y)
    if clip_code:
        y = np.minimum(y, param_value(clip_code))
    return y


def _relu(where: str, parmblk: int, input: ZTensor, clipping_value, adjustment_factor,  # noqa: A002
          output: ZTensor) -> Status:
    clip = param_code(clipping_value)
    adj = param_code(adjustment_factor)

    def verify_parms() -> None:
        st = clipping_code_status(clip)
        if st != Status.ZDNN_OK:
            raise OpStatus(st)
        if adj & 0x8000 or adj == DLF16_NINF_POS or adj > DLF16_ONE:
            raise OpStatus(Status.ZDNN_INVALID_ADJUSTMENT_FACTOR)

    return elementwise_op(where, F.NNPA_RELU, parmblk, lambda x: apply_relu(x, clip, param_value(adj)), (input,),
                          output, verify_parms)


def relu(input: ZTensor, clipping_value: float | None, output: ZTensor) -> Status:  # noqa: A002 - zDNN's name
    """``zdnn_relu``: y = max(0, x), then min(y, clipping_value) unless clipping_value is None or 0.

    The clipping value reaches the NNPA as a DLFLOAT16 code; a negative value (sign bit set, -0.0 excepted as it
    equals 0) or one that converts to NINF gives INVALID_CLIPPING_VALUE.
    """
    return _relu("relu", 0, input, clipping_value, 0.0, output)


def leaky_relu(input: ZTensor, clipping_value: float | None, adjustment_factor: float,  # noqa: A002
               output: ZTensor) -> Status:
    """``zdnn_leaky_relu`` (parameter-block format 1): y = x for x >= 0, adjustment_factor * x for x < 0, then the
    optional clipping as :func:`relu`. The adjustment factor (as DLFLOAT16) must be in [0, 1], else
    INVALID_ADJUSTMENT_FACTOR (values just above 1 that round to 1.0 are accepted, as zDNN compares codes)."""
    return _relu("leaky_relu", 1, input, clipping_value, adjustment_factor, output)


def tanh(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_tanh``."""
    return elementwise_op("tanh", F.NNPA_TANH, 0, np.tanh, (input,), output)


def sigmoid_values(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e**-x), overflow-free (the exponent is never positive)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def sigmoid(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_sigmoid``: 1 / (1 + e**-x)."""
    return elementwise_op("sigmoid", F.NNPA_SIGMOID, 0, sigmoid_values, (input,), output)


def gelu_values(x: np.ndarray) -> np.ndarray:
    """The reference's tanh form: 0.5 x (1 + tanh(x * 0.7978845608 * (1 + 0.044715 x**2)))."""
    return 0.5 * x * (1.0 + np.tanh(x * GELU_SQRT_2_OVER_PI * (1.0 + GELU_CUBIC * x * x)))


def gelu(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_gelu`` (parameter-block format 1), the tanh approximation with the reference's constants."""
    return elementwise_op("gelu", F.NNPA_GELU, 1, gelu_values, (input,), output)


def softmax_values(x: np.ndarray, act: int, mask: int) -> np.ndarray:
    """Softmax (or log-softmax for SOFTMAX_ACT_LOG) over the last axis restricted to its first ``mask`` elements
    (all for 0); masked-off elements are 0, as zDNN's tests expect. Max-subtracted float64 evaluation."""
    n = x.shape[-1]
    m = n if mask == 0 else mask
    v = x[..., :m]
    t = v - np.max(v, axis=-1, keepdims=True)
    e = np.exp(t)
    s = np.sum(e, axis=-1, keepdims=True)
    out = np.zeros_like(x)
    out[..., :m] = t - np.log(s) if act == SoftmaxAct.SOFTMAX_ACT_LOG else e / s
    return out


def _softmax(where: str, parmblk: int, input: ZTensor, save_area, act_func: int, mask: int,  # noqa: A002
             output: ZTensor) -> Status:
    def hardware() -> Status:
        st = save_area_status(save_area)
        if st != Status.ZDNN_OK:
            return st
        if dims(input)[1] != 1:
            return Status.ZDNN_FUNC_RC_F000
        if int(act_func) not in (SoftmaxAct.SOFTMAX_ACT_NONE, SoftmaxAct.SOFTMAX_ACT_LOG):
            return Status.ZDNN_FUNC_RC_F001
        if int(mask) > dims(input)[3]:
            return Status.ZDNN_FUNC_RC_F002
        return Status.ZDNN_OK

    def compute() -> Status:
        x = read_values(input).astype(np.float64)
        with np.errstate(all="ignore"):
            return store(output, softmax_values(x, int(act_func), int(mask)))

    return run_op(where, F.NNPA_SOFTMAX, parmblk, lambda: verify_same_features((input,), output), compute,
                  hardware)


def softmax(input: ZTensor, save_area, act_func: int, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_softmax``: softmax over dim1 of a 3DS-shaped tensor (transformed (dim4, 1, dim2, dim1)), then the
    activation (SOFTMAX_ACT_NONE or SOFTMAX_ACT_LOG).

    ``save_area``: None (allocated internally; ALLOCATION_FAILURE if that fails) or a uint8 array of at least
    8 KiB at a 4 KiB-aligned address (MISALIGNED_SAVEAREA otherwise; a smaller array raises ShapeError).
    Response codes: FUNC_RC_F000 when dim3 is not 1, FUNC_RC_F001 for an unknown ``act_func``.
    """
    return _softmax("softmax", 0, input, save_area, act_func, 0, output)


def softmax_mask(input: ZTensor, save_area, act_func: int, softmax_mask: int,  # noqa: A002
                 output: ZTensor) -> Status:
    """``zdnn_softmax_mask`` (parameter-block format 1): :func:`softmax` over the first ``softmax_mask`` elements
    of dim1 (0 = all); the other output elements are 0. FUNC_RC_F002 when the mask exceeds dim1."""
    return _softmax("softmax_mask", 1, input, save_area, act_func, softmax_mask, output)


__all__ = ["relu", "leaky_relu", "tanh", "sigmoid", "softmax", "softmax_mask", "gelu", "SoftmaxAct", *ENUM_CONSTANTS]
