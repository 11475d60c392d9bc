"""zDNN's normalization and reduction operations: ``meanreduce2d``, ``batchnorm``, ``norm``, ``moments``,
``layernorm``, ``reduce``.

Tensors are 4DFEATURE ztensors with transformed dims (N, H, W, C) = (dim4, dim3, dim2, dim1). Inputs are read as
exact DLFLOAT16 values, reductions are evaluated in float64 (sums with NumPy's pairwise summation, two-pass
variance) and every output element is rounded once to DLFLOAT16 (the NNPA's internal precision is not published).
Shape rules and status order follow zDNN's verifiers (``verify_batchnorm_tensors``, ``verify_norm_tensors``,
``verify_moments_tensors``, ``verify_layernorm_tensors``, ``verify_reduce_tensors``, and the AVGPOOL2D verifier
for ``meanreduce2d``).
"""

from __future__ import annotations

import numpy as np

from ...c_enums import c_enum, export_members
from .constants import DataType, NNPAFunction
from .ops_support import (
    dims,
    is_ninf,
    param_code,
    param_value,
    require_desc,
    require_same_n_c,
    run_op,
    save_area_status,
    store,
    verify_features,
)
from .status import Status
from .transform import read_values, write_cells
from .verify import OpStatus, check_feature, require
from .ztensor import ZTensor

F = NNPAFunction
MEANREDUCE2D_MAX_HW = 1024


MomentsBessel = c_enum("MomentsBessel", "``zdnn_moments_bessel``.", __name__,
                       "MOMENTS_BESSEL_POPULATION MOMENTS_BESSEL_SAMPLE")
ReduceOp = c_enum("ReduceOp", "``zdnn_reduce_ops`` (= the NNPA-REDUCE operation field).", __name__,
                  "REDUCE_OP_MINIMUM REDUCE_OP_MINIMUM_IDX REDUCE_OP_MAXIMUM REDUCE_OP_MAXIMUM_IDX")
ENUM_CONSTANTS = export_members(globals(), MomentsBessel, ReduceOp)


def _values(zt: ZTensor) -> np.ndarray:
    return read_values(zt).astype(np.float64)


# ---- meanreduce2d ------------------------------------------------------------------------------------------------
def meanreduce2d(input: ZTensor, output: ZTensor) -> Status:  # noqa: A002 - zDNN's name
    """``zdnn_meanreduce2d``: (N, H, W, C) -> (N, 1, 1, C), the mean over H and W (NNPA-AVGPOOL2D with zero strides
    and a kernel of the whole plane). INVALID_SHAPE when N, C differ or the output plane is not 1x1;
    FUNC_RC_F001 when H or W exceeds 1024."""

    def verify() -> None:
        verify_features((input,), (output,), lambda: require_same_n_c(input, output))
        require(dims(output)[1:3] == (1, 1))

    def hardware() -> Status:
        _, h, w, _ = dims(input)
        return Status.ZDNN_FUNC_RC_F001 if h > MEANREDUCE2D_MAX_HW or w > MEANREDUCE2D_MAX_HW else Status.ZDNN_OK

    return run_op("meanreduce2d", F.NNPA_AVGPOOL2D, 0, verify,
                  lambda: store(output, np.mean(_values(input), axis=(1, 2), keepdims=True)), hardware)


# ---- batchnorm -----------------------------------------------------------------------------------------------------
def batchnorm(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, output: ZTensor) -> Status:
    """``zdnn_batchnorm``: output = input_b * input_a + input_c with a (N, H, W, C) and b, c (1, 1, 1, C)
    broadcast over N, H, W (one rounding of the float64 product-sum)."""

    def verify() -> None:
        require_desc(input_a, input_b, input_c, output)
        require(dims(output) == dims(input_a))
        c = dims(input_a)[3]
        require(dims(input_b)[3] == c and dims(input_c)[3] == c)
        require(dims(input_b)[:3] == (1, 1, 1) and dims(input_c)[:3] == (1, 1, 1))
        for zt in (input_a, input_b, input_c):
            check_feature(zt)
        check_feature(output, input_=False)

    def compute() -> Status:
        with np.errstate(all="ignore"):
            return store(output, _values(input_b) * _values(input_a) + _values(input_c))

    return run_op("batchnorm", F.NNPA_BATCHNORMALIZATION, 0, verify, compute)


# ---- norm ----------------------------------------------------------------------------------------------------------
def norm(input_a: ZTensor, input_b: ZTensor, output: ZTensor) -> Status:
    """``zdnn_norm`` (parameter-block format 1): output[n, 0, w, 0] = sqrt(sum_c (b - a)**2) over dim1.

    a, b (N, 1, W, C); output (N, 1, W, 1). INVALID_SHAPE per zDNN's ``verify_norm_tensors``."""

    def verify() -> None:
        require_desc(input_a, input_b, output)
        n, _, w, c = dims(input_a)
        require(dims(input_b)[0] == n and dims(output)[0] == n)
        require(dims(input_a)[1] == 1 and dims(input_b)[1] == 1 and dims(output)[1] == 1)
        require(dims(input_b)[2] == w and dims(output)[2] == w)
        require(dims(input_b)[3] == c and dims(output)[3] == 1)
        for zt in (input_a, input_b):
            check_feature(zt)
        check_feature(output, input_=False)

    def compute() -> Status:
        with np.errstate(all="ignore"):
            d = _values(input_b) - _values(input_a)
            return store(output, np.sqrt(np.sum(d * d, axis=3, keepdims=True)))

    return run_op("norm", F.NNPA_NORM, 1, verify, compute)


# ---- moments -------------------------------------------------------------------------------------------------------
def moments(input: ZTensor, bessel_correction_type: int, output_a: ZTensor,  # noqa: A002 - zDNN's name
            output_b: ZTensor) -> Status:
    """``zdnn_moments`` (parameter-block format 1): per dim4 index n, the mean (output_a) and the variance
    (output_b) of the H*W*C elements of input[n]; outputs (N, 1, 1, 1). Variance = sum((x - mean)**2) / d with
    d = H*W*C (MOMENTS_BESSEL_POPULATION) or H*W*C - 1 (MOMENTS_BESSEL_SAMPLE).

    INVALID_BESSEL_CORRECTION for a type other than 0/1, or SAMPLE on a tensor with H = W = C = 1."""

    def verify() -> None:
        require_desc(input, output_a, output_b)
        check_feature(input)
        check_feature(output_a, input_=False)
        check_feature(output_b, input_=False)
        b = int(bessel_correction_type)
        if b < 0 or b > 1 or (b == MomentsBessel.MOMENTS_BESSEL_SAMPLE and dims(input)[1:] == (1, 1, 1)):
            raise OpStatus(Status.ZDNN_INVALID_BESSEL_CORRECTION)
        for zt in (output_a, output_b):
            require(dims(zt)[1:] == (1, 1, 1))
        require(dims(output_a)[0] == dims(input)[0] and dims(output_b)[0] == dims(input)[0])

    def compute() -> Status:
        x = _values(input)
        n = x.shape[1] * x.shape[2] * x.shape[3]
        with np.errstate(all="ignore"):
            mean = np.mean(x, axis=(1, 2, 3), keepdims=True)
            dev = x - mean
            var = np.sum(dev * dev, axis=(1, 2, 3), keepdims=True) / (n - int(bessel_correction_type))
        st_a = store(output_a, mean)
        st_b = store(output_b, var)
        return st_a if st_a != Status.ZDNN_OK else st_b

    return run_op("moments", F.NNPA_MOMENTS, 1, verify, compute)


# ---- layernorm -----------------------------------------------------------------------------------------------------
def layernorm(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, beta: float, gamma: float, epsilon: float,
              output: ZTensor) -> Status:
    """``zdnn_layernorm`` (parameter-block format 1): output = (a - b) / sqrt(c + epsilon) * gamma + beta.

    a and output (N, H, W, C); b (means) and c (variances) of one shape whose dim4 is N, normally the (N, 1, 1, 1)
    outputs of :func:`moments`; b and c are broadcast over a (each of their dim3..dim1 must be 1 or a's, else
    INVALID_SHAPE: the reference only requires b and c to match each other). beta, gamma, epsilon reach the NNPA as
    DLFLOAT16 codes; NINF codes give INVALID_BETA / INVALID_GAMMA / INVALID_EPSILON (checked first, as zDNN).
    Evaluated in float64 with one final rounding.
    """
    codes = (param_code(beta), param_code(gamma), param_code(epsilon))

    def verify() -> None:
        for code, st in zip(codes, (Status.ZDNN_INVALID_BETA, Status.ZDNN_INVALID_GAMMA,
                                    Status.ZDNN_INVALID_EPSILON), strict=True):
            if is_ninf(code):
                raise OpStatus(st)
        require_desc(input_a, input_b, input_c, output)
        da, db = dims(input_a), dims(input_b)
        require(db[0] == da[0] and dims(input_c)[0] == da[0] and dims(output)[0] == da[0])
        require(dims(output)[1:] == da[1:])
        require(dims(input_c)[1:] == db[1:])
        require(all(x in (1, y) for x, y in zip(db[1:], da[1:], strict=True)))
        for zt in (input_a, input_b, input_c):
            check_feature(zt)
        check_feature(output, input_=False)

    def compute() -> Status:
        b_, g_, e_ = (param_value(c) for c in codes)
        with np.errstate(all="ignore"):
            res = (_values(input_a) - _values(input_b)) / np.sqrt(_values(input_c) + e_) * g_ + b_
        return store(output, res)

    return run_op("layernorm", F.NNPA_LAYERNORM, 1, verify, compute)


# ---- reduce --------------------------------------------------------------------------------------------------------
def reduce(input: ZTensor, save_area, op_type: int, output: ZTensor) -> Status:  # noqa: A002 - zDNN's name
    """``zdnn_reduce`` (parameter-block format 1): reduce dim1 to 1.

    REDUCE_OP_MINIMUM / MAXIMUM write the extreme value into a DLFLOAT16 output; REDUCE_OP_MINIMUM_IDX /
    MAXIMUM_IDX write the index of its first occurrence into a BINARY_INT32 output (pre-transformed INT32). A NINF
    element in a vector makes that result unpredictable (here: NINF / the index of the first NINF) and gives
    ELEMENT_RANGE_VIOLATION. ``save_area`` as :func:`.ops_activation.softmax`. Statuses: INVALID_SHAPE (output
    dims must be the input's with dim1 = 1), INVALID_FORMAT, INVALID_TYPE (input not DLFLOAT16, output type not the
    op's), ALLOCATION_FAILURE, MISALIGNED_SAVEAREA, FUNC_RC_F000 (unknown op_type), UNAVAILABLE_FUNCTION.
    """
    op = int(op_type)
    idx_op = op in (ReduceOp.REDUCE_OP_MINIMUM_IDX, ReduceOp.REDUCE_OP_MAXIMUM_IDX)

    def verify() -> None:  # libzdnn's verify_reduce_tensors: shapes, output format, input type, output type
        require_desc(input, output)
        require(dims(output)[:3] == dims(input)[:3] and dims(output)[3] == 1)
        tf = output.transformed_desc
        if int(tf.format) != int(input.transformed_desc.format):
            raise OpStatus(Status.ZDNN_INVALID_FORMAT)
        check_feature(input)
        if int(tf.type) not in (DataType.ZDNN_DLFLOAT16, DataType.ZDNN_BINARY_INT32):
            raise OpStatus(Status.ZDNN_INVALID_TYPE)
        if op in tuple(ReduceOp):
            want = DataType.ZDNN_BINARY_INT32 if idx_op else DataType.ZDNN_DLFLOAT16
            if int(tf.type) != want:
                raise OpStatus(Status.ZDNN_INVALID_TYPE)
        check_feature(output, type_=int(tf.type), input_=False)

    def hardware() -> Status:
        st = save_area_status(save_area)
        if st != Status.ZDNN_OK:
            return st
        return Status.ZDNN_OK if op in tuple(ReduceOp) else Status.ZDNN_FUNC_RC_F000

    def compute() -> Status:
        x = _values(input)
        bad = bool(np.isnan(x).any())
        if idx_op:
            f = np.argmin if op == ReduceOp.REDUCE_OP_MINIMUM_IDX else np.argmax
            write_cells(output, f(x, axis=3, keepdims=True).astype(np.int32))
            output.is_transformed = True
            return Status.ZDNN_ELEMENT_RANGE_VIOLATION if bad else Status.ZDNN_OK
        f = np.min if op == ReduceOp.REDUCE_OP_MINIMUM else np.max
        st = store(output, f(x, axis=3, keepdims=True))
        return Status.ZDNN_ELEMENT_RANGE_VIOLATION if bad else st

    return run_op("reduce", F.NNPA_REDUCE, 1, verify, compute, hardware)


__all__ = ["meanreduce2d", "batchnorm", "norm", "moments", "layernorm", "reduce", "MomentsBessel", "ReduceOp",
           *ENUM_CONSTANTS]
