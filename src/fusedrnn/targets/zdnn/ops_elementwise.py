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

from collections.abc import Callable

import numpy as np

from .constants import NNPAFunction
from .ops_support import is_ninf, param_code, param_value, require_desc, require_same_dims, run_op, store
from .status import Status
from .transform import read_values
from .verify import OpStatus, check_feature
from .ztensor import ZTensor

F = NNPAFunction


def _verify_same(inputs: tuple, output: ZTensor) -> None:
    """``verify_tensors``: shapes equal to the first input's, then formats/types (DLFLOAT16 4DFEATURE)."""
    require_desc(*inputs, output)
    require_same_dims(inputs[0], output, *inputs[1:])
    for zt in inputs:
        check_feature(zt)
    check_feature(output, input_=False)


def _binary(where: str, fn: NNPAFunction, parmblk: int, ufunc: Callable, input_a: ZTensor, input_b: ZTensor,
            output: ZTensor) -> Status:
    def compute() -> Status:
        a = read_values(input_a).astype(np.float64)
        b = read_values(input_b).astype(np.float64)
        with np.errstate(all="ignore"):
            return store(output, ufunc(a, b))

    return run_op(where, fn, parmblk, lambda: _verify_same((input_a, input_b), output), compute)


def _unary(where: str, fn: NNPAFunction, parmblk: int, func: Callable, input: ZTensor,  # noqa: A002
           output: ZTensor, verify_extra: Callable[[], None] | None = None) -> Status:
    def verify() -> None:
        _verify_same((input,), output)
        if verify_extra is not None:
            verify_extra()

    def compute() -> Status:
        x = read_values(input).astype(np.float64)
        with np.errstate(all="ignore"):
            return store(output, func(x))

    return run_op(where, fn, parmblk, verify, compute)


def add(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_add``: output = input_a + input_b."""
    return _binary("add", F.NNPA_ADD, 0, np.add, input_a, input_b, output)


def sub(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_sub``: output = input_a - input_b."""
    return _binary("sub", F.NNPA_SUB, 0, np.subtract, input_a, input_b, output)


def mul(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_mul``: output = input_a * input_b."""
    return _binary("mul", F.NNPA_MUL, 0, np.multiply, input_a, input_b, output)


def div(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_div``: output = input_a / input_b (x/0 is NINF and ELEMENT_RANGE_VIOLATION)."""
    return _binary("div", F.NNPA_DIV, 0, np.divide, input_a, input_b, output)


def min(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:  # noqa: A001 - zDNN's name
    """``zdnn_min``: element-wise minimum (a NINF operand gives NINF)."""
    return _binary("min", F.NNPA_MIN, 0, np.minimum, input_a, input_b, output)


def max(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:  # noqa: A001 - zDNN's name
    """``zdnn_max``: element-wise maximum (a NINF operand gives NINF)."""
    return _binary("max", F.NNPA_MAX, 0, np.maximum, input_a, input_b, output)


def log(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002 - zDNN's name
    """``zdnn_log``: natural logarithm (x <= 0 gives NINF and ELEMENT_RANGE_VIOLATION)."""
    return _unary("log", F.NNPA_LOG, 0, np.log, input, output)


def exp(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_exp``: e**x (x above about 22.87 overflows DLFLOAT16: NINF and ELEMENT_RANGE_VIOLATION)."""
    return _unary("exp", F.NNPA_EXP, 0, np.exp, input, output)


def sqrt(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002
    """``zdnn_sqrt`` (parameter-block format 1): square root (x < 0 gives NINF and ELEMENT_RANGE_VIOLATION)."""
    return _unary("sqrt", F.NNPA_SQRT, 1, np.sqrt, input, output)


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

    eps = param_value(code)
    return _unary("invsqrt", F.NNPA_INVSQRT, 1, lambda x: 1.0 / np.sqrt(x + eps), input, output, verify_epsilon)


__all__ = ["add", "sub", "mul", "div", "min", "max", "log", "exp", "sqrt", "invsqrt"]
