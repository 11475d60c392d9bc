"""zDNN's element-wise operations: ``add``, ``sub``, ``mul``, ``div``, ``min``, ``max``, ``log``, ``exp``,
``sqrt``, ``invsqrt``.

All tensors are DLFLOAT16 4DFEATURE ztensors of one shape (no broadcasting, as zDNN). Each element is computed in
float64 from the exact DLFLOAT16 inputs and rounded once to DLFLOAT16 (round half away from zero, flush to zero):
the correctly rounded result of the operation on the stored values. Results out of the DLFLOAT16 range or not a
number (division by zero, log of a negative number or of 0, a NINF input) give ELEMENT_RANGE_VIOLATION with NINF in
those elements. Statuses: INVALID_SHAPE / INVALID_TYPE / INVALID_FORMAT (with precheck, see
:func:`.verify.op_result`), INVALID_BUFFER, INVALID_STATE, UNAVAILABLE_FUNCTION; ``invsqrt`` adds INVALID_EPSILON.
"""

from __future__ import annotations

import numpy as np

from .constants import NNPAFunction
from .ops_support import elementwise_op, is_ninf, param_code, param_value, require_desc
from .status import Status
from .verify import OpStatus
from .ztensor import ZTensor

F = NNPAFunction


def add(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_add``: output = input_a + input_b."""
    return elementwise_op("add", F.NNPA_ADD, 0, np.add, (input_a, input_b), output)


def sub(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_sub``: output = input_a - input_b."""
    return elementwise_op("sub", F.NNPA_SUB, 0, np.subtract, (input_a, input_b), output)


def mul(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_mul``: output = input_a * input_b."""
    return elementwise_op("mul", F.NNPA_MUL, 0, np.multiply, (input_a, input_b), output)


def div(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_div``: output = input_a / input_b (x/0 is NINF and ELEMENT_RANGE_VIOLATION)."""
    return elementwise_op("div", F.NNPA_DIV, 0, np.divide, (input_a, input_b), output)


def min(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:  # noqa: A001 - zDNN's name
    """``zdnn_min``: element-wise minimum (a NINF operand gives NINF)."""
    return elementwise_op("min", F.NNPA_MIN, 0, np.minimum, (input_a, input_b), output)


def max(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:  # noqa: A001 - zDNN's name
    """``zdnn_max``: element-wise maximum (a NINF operand gives NINF)."""
    return elementwise_op("max", F.NNPA_MAX, 0, np.maximum, (input_a, input_b), output)


def log(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002 - zDNN's name
    """``zdnn_log``: natural logarithm (x <= 0 gives NINF and ELEMENT_RANGE_VIOLATION)."""
    return elementwise_op("log", F.NNPA_LOG, 0, np.log, (input,), output)


def exp(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_exp``: e**x (x above about 22.87 overflows DLFLOAT16: NINF and ELEMENT_RANGE_VIOLATION)."""
    return elementwise_op("exp", F.NNPA_EXP, 0, np.exp, (input,), output)


def sqrt(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_sqrt`` (parameter-block format 1): square root (x < 0 gives NINF and ELEMENT_RANGE_VIOLATION)."""
    return elementwise_op("sqrt", F.NNPA_SQRT, 1, np.sqrt, (input,), output)


def invsqrt(input: ZTensor, epsilon: float, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_invsqrt`` (parameter-block format 1): 1 / sqrt(x + epsilon).

    ``epsilon`` reaches the NNPA as a DLFLOAT16 code (:func:`.ops_support.param_code`); a code of NINF (an Inf,
    NaN or out-of-range epsilon) gives INVALID_EPSILON. Negative epsilons are allowed. The sum x + epsilon is
    formed in float64 (the reference leaves its precision open; its "nonnumeric sum" note does not arise here);
    x + epsilon <= 0 gives NINF and ELEMENT_RANGE_VIOLATION.
    """
    code = param_code(epsilon)

    def verify_epsilon() -> None:
        if is_ninf(code):
            raise OpStatus(Status.ZDNN_INVALID_EPSILON)

    def verify_output_fields() -> None:  # libzdnn's verify_invsqrt_tensors: before the shapes
        require_desc(input, output)
        ti, to = input.transformed_desc, output.transformed_desc
        if int(to.type) != int(ti.type):
            raise OpStatus(Status.ZDNN_INVALID_TYPE)
        if int(to.format) != int(ti.format):
            raise OpStatus(Status.ZDNN_INVALID_FORMAT)

    eps = param_value(code)
    return elementwise_op("invsqrt", F.NNPA_INVSQRT, 1, lambda x: 1.0 / np.sqrt(x + eps), (input,), output,
                          verify_epsilon, verify_output_fields)


__all__ = ["add", "sub", "mul", "div", "min", "max", "log", "exp", "sqrt", "invsqrt"]
