"""The public zDNN API of fusedrnn (``fusedrnn.zdnn``): zDNN's C functions without the ``zdnn_`` prefix.

C out-parameters become Python values: descriptor/ztensor structs are filled in place as in C
(``generate_transformed_desc(pre, tfrmd)``), scalar outputs are returned (``getrange_ztensor(zt) ->
(status, min, max)``, ``get_max_limit(t, pre) -> (status, value)``), and ``transform_origtensor(zt, out)``
writes the NumPy array ``out``. Functions that return ``zdnn_status`` in C return a :class:`Status`.

A program written against libzdnn 1.2.0 ports line by line:

* checks run in libzdnn's order and give its statuses: the operations' verifiers (``verify_*`` of libzdnn's
  tensor_verify.c: shapes, then types and formats; lstm/gru as ``verify_zdnn_lstm_or_gru_tensors``), then the
  NNPA; no operation checks that an input was transformed (not even ``quantized_matmul_op``: the INVALID_STATE in
  libzdnn's aiu_quantized_matmul.c is ``getrange_ztensor``'s), and a ztensor's buffer is met where the NNPA reads
  it, after every check (MISALIGNED_TENSOR off a 4 KiB boundary,
  INVALID_BUFFER where C would read or write outside the buffer: the emulator refuses instead);
* ``get_status_message`` returns libzdnn's strings (``"ZDNN_INVALID_SHAPE: Invalid shape in ..."``),
  ``get_library_version_str()`` returns ``ZDNN_VERSION``;
* ``is_nnpa_function_installed(count, ...)`` and ``is_nnpa_parmblk_fmt_installed(count, ...)`` take the count
  first (a count that disagrees with the codes given raises :class:`~fusedrnn.errors.AttributeValueError`);
* every name of zdnn.h exists with its value (the ``NNPA_*`` hardware enums, ``ZDNN_WARNING`` ... ``ZDNN_HW_ERROR``,
  the save-area sizes, ``BITSHIFT_*``, ``CONCAT_*`` and ``MSB_BITMASK`` as functions);
* buffers are C's ``void *``: any C-contiguous buffer at least as large as needed (``bytearray``, ``memoryview``,
  ``bytes`` where only read, a NumPy array of any dtype and shape) serves as data, output buffer, stick buffer,
  save area or work area; :func:`malloc_aligned_4k` allocates as libzdnn's; ``init_ztensor`` keeps ``buffer`` and
  ``buffer_size``; ``lstm``/``gru`` write a caller's ``work_area`` as zDNN does (the input projections of every
  step, the last step's hidden projection, the alternating per-step states; :func:`.rnn._write_work_area`).

Where the zDNN API reference and libzdnn disagree, this module does what libzdnn does:

* ``generate_transformed_desc_concatenated`` checks the type first, then an odd dim2 of PREV_LAYER_BIDIR weights,
  then the usage with its layout, then the RNN type (the reference lists the layout first); a PREV_LAYER other
  than BIDIR counts as UNI and the low byte is ignored; the dims are written before the RNN type is checked;
* ``generate_quantized_transformed_desc`` accepts FP32, FP16, BFLOAT and INT8 for every transform type,
  QUANTIZED_WEIGHTS_INT8 included (the reference: INT8 only); ``transform_quantized_ztensor`` then refuses float
  data for 4DWEIGHTS with INVALID_TYPE, after its buffer and state checks;
* ``transform_ztensor_with_saturation`` saturates HWCK (4DKERNEL) tensors too (the reference: 4DFEATURE);
* ``reshape_ztensor`` reshapes HWCK tensors whose dim1 stays, copies equal dims as a whole image, and gives
  INVALID_FORMAT when an HWCK tensor's dim1 changes (the reference: NHWC only);
* a FICO/ZRH tensor whose pre-transformed dim2 (or hidden size) changed after its descriptor was generated is
  transformed as libzdnn does it: each gate's slices as images of the pre-transformed dims, back to back (the
  reference implies INVALID_SHAPE; the emulator gives INVALID_SHAPE only where libzdnn would write past the buffer);
* ``lstm``/``gru`` check no layouts (an NHWC ztensor of the right dims serves as weights) and the direction only
  after the tensors; operations return neither INVALID_STATE nor an early INVALID_BUFFER;
* ``transform_ztensor`` (and its saturating form) transforms FP32, FP16 and BFLOAT data into DLFLOAT16 only: INT32
  data (a BINARY_INT32 descriptor from ``generate_transformed_desc``) is INVALID_TYPE (an INT32 ztensor is an
  output, read back with ``transform_origtensor``);
* ``conv2d``, ``avgpool2d`` and ``maxpool2d`` verify as ``verify_conv2d_tensors`` / ``verify_pool_avg_max_tensors``:
  shapes and strides, the bias and output (pooling: the output, before the strides) against the input's type and
  format, the kernel's type only; libzdnn never checks the input's own type or format nor the kernel's format
  (the reference: DLFLOAT16 4DFEATURE / 4DKERNEL): the emulator refuses those with INVALID_TYPE / INVALID_FORMAT
  after libzdnn's checks, where the NNPA would be handed them.
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
