"""``matmul_op``, ``matmul_bcast_op``, ``matmul_transpose_op``: DLFLOAT16 operands, float64 accumulation, one
DLFLOAT16 rounding of the result (zdnn.md section 5).

Shapes (transformed dims): a (s, 1, m, n), b (s, 1, n, p), c (s, 1, 1, p), out (s, 1, m, p); BCAST23 has b and c
with one stack, BCAST1 has a with one stack. ADDITION gives a@b + c; compare ops give 1.0 where (a@b) <op> c.
"""

from __future__ import annotations

import numpy as np

from . import machine as _m
from .constants import MatmulOp, NNPAFunction
from .ops_support import require_desc
from .status import Status
from .transform import read_values, write_values
from .verify import OpStatus, check_feature, op_result, require, require_ztensors
from .ztensor import ZTensor

COMPARE = {
    MatmulOp.MATMUL_OP_GREATER: np.greater,
    MatmulOp.MATMUL_OP_GREATER_EQUAL: np.greater_equal,
    MatmulOp.MATMUL_OP_EQUAL: np.equal,
    MatmulOp.MATMUL_OP_NOT_EQUAL: np.not_equal,
    MatmulOp.MATMUL_OP_LESSER_EQUAL: np.less_equal,
    MatmulOp.MATMUL_OP_LESSER: np.less,
}


def matmul_function(a_dim4: int, b_dim4: int) -> NNPAFunction:
    """NNPA function code chosen from the stack counts (zDNN's ``get_matmul_function``)."""
    if a_dim4 == 1 and b_dim4 != 1:
        return NNPAFunction.NNPA_MATMUL_OP_BCAST1
    if b_dim4 == 1 and a_dim4 != 1:
        return NNPAFunction.NNPA_MATMUL_OP_BCAST23
    return NNPAFunction.NNPA_MATMUL_OP


def _dims(zt: ZTensor) -> tuple[int, int, int, int]:
    return tuple(int(v) for v in zt.transformed_desc.dims)


def check_matmul_shapes(a, b, c, out, transpose_a=False, transpose_b=False, fn=None):
    """libzdnn's ``verify_matmul_op_common`` shape checks, in its order (INVALID_SHAPE): the stacks (dim4) for the
    function code (``fn``, else chosen from the stacks), every dim3 = 1, c's dim2 = 1, then output rows, the inner
    dimension and the columns of b, c and output, transposes applied. Returns (function code, m, n, p)."""
    sa, _, ra, ca = _dims(a)
    sb, _, rb, cb = _dims(b)
    fn = matmul_function(sa, sb) if fn is None else fn
    if fn == NNPAFunction.NNPA_MATMUL_OP:
        require(_dims(b)[0] == _dims(c)[0] == _dims(out)[0] == sa)
    elif fn == NNPAFunction.NNPA_MATMUL_OP_BCAST23:
        require(_dims(out)[0] == sa)
        require(sb == 1 and _dims(c)[0] == 1)
    else:
        require(sa == 1)
        require(_dims(c)[0] == _dims(out)[0] == sb)
    require(all(_dims(t)[1] == 1 for t in (a, b, c, out)))
    require(_dims(c)[2] == 1)
    m, n = (ca, ra) if transpose_a else (ra, ca)
    nb, p = (cb, rb) if transpose_b else (rb, cb)
    require(_dims(out)[2] == m)
    require(nb == n)
    require(_dims(c)[3] == p and _dims(out)[3] == p)
    return fn, m, n, p


def compute_matmul(a: ZTensor, b: ZTensor, c: ZTensor, op: int, out: ZTensor, transpose_a=False,
                   transpose_b=False) -> Status:
    """Run the op on valid tensors; ELEMENT_RANGE_VIOLATION when a result leaves the DLFLOAT16 range."""
    A = read_values(a)[:, 0].astype(np.float64)
    B = read_values(b)[:, 0].astype(np.float64)
    Cv = read_values(c)[:, 0].astype(np.float64)  # (s, 1, p)
    if transpose_a:
        A = A.transpose(0, 2, 1)
    if transpose_b:
        B = B.transpose(0, 2, 1)
    prod = np.matmul(A, B)
    with np.errstate(invalid="ignore", over="ignore"):
        res = prod + Cv if op == MatmulOp.MATMUL_OP_ADDITION else COMPARE[MatmulOp(op)](prod, Cv).astype(np.float64)
    flags = write_values(out, res[:, None])
    out.is_transformed = True
    return Status.ZDNN_ELEMENT_RANGE_VIOLATION if (flags.overflow or flags.invalid) else Status.ZDNN_OK


def _matmul(where, a, b, c, op_type, out, transpose_a=False, transpose_b=False, kind="op") -> Status:
    """libzdnn's sequence: the parameter-block format (matmul_op 0; transpose 1; bcast 0 for MATMUL_OP and
    BCAST23 ADDITION, else 1; UNAVAILABLE_FUNCTION), the verifier (shapes, then every type and format as
    input_a's, which must be DLFLOAT16 4DFEATURE), the NNPA function, the operation code (the NNPA's F000), then
    the computation (buffers met there)."""
    require_ztensors(input_a=a, input_b=b, input_c=c, output=out)
    try:
        require_desc(a, b, c, out)
    except OpStatus as e:
        return op_result(e.status, where, hw_f001=kind != "op")
    fn = NNPAFunction.NNPA_MATMUL_OP if kind == "op" else matmul_function(_dims(a)[0], _dims(b)[0])
    if kind == "transpose":
        parmblk = 1
    elif kind == "bcast":
        addition = int(op_type) == MatmulOp.MATMUL_OP_ADDITION
        parmblk = 0 if fn == NNPAFunction.NNPA_MATMUL_OP or (fn == NNPAFunction.NNPA_MATMUL_OP_BCAST23
                                                             and addition) else 1
    else:
        parmblk = 0
    if not _m.parmblk_fmts_installed(parmblk):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    try:
        check_matmul_shapes(a, b, c, out, transpose_a, transpose_b, fn)
        check_feature(a)
        for t in (b, c, out):
            check_feature(t)
    except OpStatus as e:
        return op_result(e.status, where, hw_f001=kind != "op")
    if not _m.functions_installed(fn):
        return op_result(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
    try:
        op = MatmulOp(int(op_type))
    except ValueError:
        return op_result(Status.ZDNN_FUNC_RC_F000, where)
    try:
        return op_result(compute_matmul(a, b, c, op, out, transpose_a, transpose_b), where)
    except OpStatus as e:
        return op_result(e.status, where)


def matmul_op(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, op_type: int, output: ZTensor) -> Status:
    """``zdnn_matmul_op``: unstacked (2D, 2D, 1D -> 2D) or stacked (3DS, 3DS, 2DS -> 3DS) with equal stacks."""
    return _matmul("matmul_op", input_a, input_b, input_c, op_type, output)


def matmul_bcast_op(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, op_type: int,
                    output: ZTensor) -> Status:
    """``zdnn_matmul_bcast_op``: as matmul_op plus BCAST23 (b, c shared by a's stacks) and BCAST1 (a shared)."""
    return _matmul("matmul_bcast_op", input_a, input_b, input_c, op_type, output, kind="bcast")


def matmul_transpose_op(input_a: ZTensor, input_b: ZTensor, input_c: ZTensor, transpose_a: bool,
                        transpose_b: bool, op_type: int, output: ZTensor) -> Status:
    """``zdnn_matmul_transpose_op``: a stored (n, m) when ``transpose_a``, b stored (p, n) when ``transpose_b``."""
    return _matmul("matmul_transpose_op", input_a, input_b, input_c, op_type, output, bool(transpose_a),
                   bool(transpose_b), kind="transpose")
