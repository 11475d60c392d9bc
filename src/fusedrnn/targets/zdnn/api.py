"""The public zDNN API of fusedrnn (``fusedrnn.zdnn``): zDNN's C functions without the ``zdnn_`` prefix.

C out-parameters become Python values: descriptor/ztensor structs are filled in place as in C
(``generate_transformed_desc(pre, tfrmd)``), scalar outputs are returned (``getrange_ztensor(zt) ->
(status, min, max)``, ``get_max_limit(t, pre) -> (status, value)``), and ``transform_origtensor(zt, out)``
writes the NumPy array ``out``. Functions that return ``zdnn_status`` in C return a :class:`Status`.
"""

from __future__ import annotations

from ...c_enums import export_members
from . import constants as _constants
from .constants import *  # noqa: F403 - zdnn.h's enums, their members and constants under their C names
from .desc import (
    TensorDesc,
    generate_quantized_transformed_desc,
    generate_transformed_desc,
    generate_transformed_desc_concatenated,
    getsize_ztensor,
    init_pre_transformed_desc,
)
from .limits import get_max_limit, get_min_limit
from .machine import (
    NO_NNPA,
    TELUM_I,
    TELUM_II,
    Machine,
    get_library_version,
    get_library_version_str,
    get_max_for_dim,
    get_max_runnable_version,
    get_nnpa_max_dim_idx_size,
    get_nnpa_max_tensor_size,
    is_nnpa_conversion_installed,
    is_nnpa_datatype_installed,
    is_nnpa_function_installed,
    is_nnpa_installed,
    is_nnpa_layout_fmt_installed,
    is_nnpa_parmblk_fmt_installed,
    is_version_runnable,
    machine,
    refresh_nnpa_query_result,
    set_machine,
)
from .matmul import matmul_bcast_op, matmul_op, matmul_transpose_op
from .ops_activation import (
    SOFTMAX_ACT_LOG,
    SOFTMAX_ACT_NONE,
    SoftmaxAct,
    gelu,
    leaky_relu,
    relu,
    sigmoid,
    softmax,
    softmax_mask,
    tanh,
)
from .ops_elementwise import add, div, exp, invsqrt, log, max, min, mul, sqrt, sub
from .ops_norm import (
    MOMENTS_BESSEL_POPULATION,
    MOMENTS_BESSEL_SAMPLE,
    REDUCE_OP_MAXIMUM,
    REDUCE_OP_MAXIMUM_IDX,
    REDUCE_OP_MINIMUM,
    REDUCE_OP_MINIMUM_IDX,
    MomentsBessel,
    ReduceOp,
    batchnorm,
    layernorm,
    meanreduce2d,
    moments,
    norm,
    reduce,
)
from .ops_pool_conv import (
    CONV2D_ACT_NONE,
    CONV2D_ACT_RELU,
    SAME_PADDING,
    VALID_PADDING,
    Conv2dAct,
    PoolPadding,
    avgpool2d,
    conv2d,
    maxpool2d,
)
from .qmatmul import quantized_matmul_op
from .rnn import gru, lstm, work_area_size
from .status import NNPAProgramException, Settings, Status, get_status_message, settings
from .transform import (
    getrange_ztensor,
    reshape_ztensor,
    transform_origtensor,
    transform_quantized_ztensor,
    transform_ztensor,
    transform_ztensor_with_saturation,
)
from .ztensor import (
    ZTensor,
    allochelper_ztensor,
    byte_view,
    free_aligned_4k,
    free_ztensor_buffer,
    init_quantized_ztensor,
    init_quantized_ztensor_with_malloc,
    init_ztensor,
    init_ztensor_with_malloc,
    is_quantized_ztensor,
    malloc_aligned_4k,
    reset_ztensor,
)

STATUS_CONSTANTS = export_members(globals(), Status)


def init() -> None:
    """``zdnn_init``: (re)load ZDNN_ENABLE_PRECHECK and ZDNN_STATUS_DIAG from the environment."""
    settings.load_environment()
    refresh_nnpa_query_result()


__all__ = [
    # structs, settings; zdnn.h's enums and constants (constants.__all__) and the status codes
    "TensorDesc", "ZTensor", "Status", "Machine", "TELUM_I", "TELUM_II", "NO_NNPA", "Settings", "settings",
    "NNPAProgramException", *_constants.__all__, *STATUS_CONSTANTS,
    # support functions
    "init", "get_status_message", "set_machine", "machine", "is_nnpa_installed", "is_nnpa_function_installed",
    "is_nnpa_parmblk_fmt_installed", "is_nnpa_datatype_installed", "is_nnpa_layout_fmt_installed",
    "is_nnpa_conversion_installed", "refresh_nnpa_query_result", "get_nnpa_max_dim_idx_size", "get_max_for_dim",
    "get_nnpa_max_tensor_size", "get_library_version", "get_library_version_str", "get_max_runnable_version",
    "is_version_runnable", "getsize_ztensor", "getrange_ztensor", "get_max_limit", "get_min_limit",
    "init_pre_transformed_desc", "generate_transformed_desc", "generate_quantized_transformed_desc",
    "generate_transformed_desc_concatenated", "init_ztensor", "init_ztensor_with_malloc", "init_quantized_ztensor",
    "init_quantized_ztensor_with_malloc", "is_quantized_ztensor", "reset_ztensor", "allochelper_ztensor",
    "free_ztensor_buffer", "reshape_ztensor", "malloc_aligned_4k", "free_aligned_4k", "byte_view",
    # transforms
    "transform_ztensor", "transform_ztensor_with_saturation", "transform_quantized_ztensor", "transform_origtensor",
    # operations
    "lstm", "gru", "work_area_size", "matmul_op", "matmul_bcast_op", "matmul_transpose_op", "quantized_matmul_op",
]
__all__ += [
    # operations (issue 9)
    "add", "sub", "mul", "div", "min", "max", "log", "exp", "sqrt", "invsqrt", "relu", "leaky_relu", "tanh",
    "sigmoid", "softmax", "softmax_mask", "gelu", "meanreduce2d", "batchnorm", "norm", "moments", "layernorm",
    "reduce", "avgpool2d", "maxpool2d", "conv2d",
    # their enums
    "SoftmaxAct", "SOFTMAX_ACT_NONE", "SOFTMAX_ACT_LOG", "MomentsBessel", "MOMENTS_BESSEL_POPULATION",
    "MOMENTS_BESSEL_SAMPLE", "ReduceOp", "REDUCE_OP_MINIMUM", "REDUCE_OP_MINIMUM_IDX", "REDUCE_OP_MAXIMUM",
    "REDUCE_OP_MAXIMUM_IDX", "PoolPadding", "VALID_PADDING", "SAME_PADDING", "Conv2dAct", "CONV2D_ACT_NONE",
    "CONV2D_ACT_RELU",
]
del _constants
