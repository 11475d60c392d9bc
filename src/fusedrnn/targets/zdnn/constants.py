"""zDNN enums, flags and status codes with the values of ``zdnn.h`` (zDNN 1.2.0).

Each enum is an ``IntEnum`` named after its C type; the members keep their C names and are also exported as
module constants (``ZDNN_3DS``, ``FP32``, ``FWD``, ``MATMUL_OP_ADDITION``, ``ZDNN_OK`` ...) so C code reads the same.
"""

from __future__ import annotations

from ...c_enums import c_enum, export_members

DataLayout = c_enum("DataLayout", "``zdnn_data_layouts``.", __name__,
                    "ZDNN_1D ZDNN_2D ZDNN_2DS ZDNN_3D ZDNN_3DS ZDNN_ZRH ZDNN_4D ZDNN_4DS ZDNN_NHWC ZDNN_NCHW ZDNN_FICO "
                    "ZDNN_HWCK ZDNN_BIDIR_ZRH ZDNN_BIDIR_FICO")
DataFormat = c_enum("DataFormat", "``zdnn_data_formats`` (the NNPA data-layout format numbers).", __name__, {
    "ZDNN_FORMAT_4DFEATURE": 0, "ZDNN_FORMAT_4DKERNEL": 1, "ZDNN_FORMAT_4DWEIGHTS": 2, "ZDNN_FORMAT_4DGENERIC": 31})
DataType = c_enum("DataType", "``zdnn_data_types``: transformed types (NNPA data types) and pre-transformed types "
                  "(251-255).", __name__, {
                      "ZDNN_DLFLOAT16": 0, "ZDNN_BINARY_FP32": 6, "ZDNN_BINARY_INT8": 8, "ZDNN_BINARY_INT32": 10,
                      "INT8": 251, "INT32": 252, "BFLOAT": 253, "FP16": 254, "FP32": 255})
QuantizedTransformType = c_enum("QuantizedTransformType", "``zdnn_quantized_transform_types``.", __name__,
                                "QUANTIZED_DLFLOAT16 QUANTIZED_INT8 QUANTIZED_WEIGHTS_INT8")
Direction = c_enum("Direction", "``lstm_gru_direction``.", __name__, "FWD BWD BIDIR")
_MATMUL_OPS = "ADDITION GREATER GREATER_EQUAL EQUAL NOT_EQUAL LESSER_EQUAL LESSER".split()
MatmulOp = c_enum("MatmulOp", "``zdnn_matmul_ops`` (= the NNPA matmul operation field).", __name__,
                  " ".join(f"MATMUL_OP_{op}" for op in _MATMUL_OPS))
MatmulBcastOp = c_enum("MatmulBcastOp", "``zdnn_matmul_bcast_ops`` (same values as :class:`MatmulOp`).", __name__,
                       " ".join(f"MATMUL_BCAST_OP_{op}" for op in _MATMUL_OPS))
NNPAFunction = c_enum("NNPAFunction", "``nnpa_function_code`` (NNPA function codes, z/Architecture Principles of "
                      "Operation).", __name__, {
                          "NNPA_QAF": 0, "NNPA_ADD": 16, "NNPA_SUB": 17, "NNPA_MUL": 18, "NNPA_DIV": 19,
                          "NNPA_MIN": 20, "NNPA_MAX": 21, "NNPA_LOG": 32, "NNPA_EXP": 33, "NNPA_SQRT": 34,
                          "NNPA_INVSQRT": 35, "NNPA_RELU": 49, "NNPA_TANH": 50, "NNPA_SIGMOID": 51,
                          "NNPA_SOFTMAX": 52, "NNPA_GELU": 53, "NNPA_BATCHNORMALIZATION": 64, "NNPA_MOMENTS": 65,
                          "NNPA_LAYERNORM": 66, "NNPA_NORM": 67, "NNPA_MAXPOOL2D": 80, "NNPA_AVGPOOL2D": 81,
                          "NNPA_LSTMACT": 96, "NNPA_GRUACT": 97, "NNPA_CONVOLUTION": 112, "NNPA_MATMUL_OP": 113,
                          "NNPA_MATMUL_OP_BCAST23": 114, "NNPA_MATMUL_OP_BCAST1": 115, "NNPA_TRANSFORM": 240,
                          "NNPA_REDUCE": 241})
ParmBlkFormat = c_enum("ParmBlkFormat", "``nnpa_parmblk_format``.", __name__,
                       "NNPA_PARMBLKFORMAT_0 NNPA_PARMBLKFORMAT_1")
NNPADataType = c_enum("NNPADataType", "``nnpa_data_type``.", __name__, {
    "NNPA_DATATYPE_1": 0, "NNPA_32_BIT_BINARY_FP_SHORT": 6, "NNPA_8_BIT_BINARY_INT": 8,
    "NNPA_32_BIT_BINARY_INT": 10})
NNPALayoutFormat = c_enum("NNPALayoutFormat", "``nnpa_layout_format``.", __name__, {
    "NNPA_LAYOUTFMT_4DFEATURE": 0, "NNPA_LAYOUTFMT_4DKERNEL": 1, "NNPA_LAYOUTFMT_4DWEIGHTS": 2,
    "NNPA_LAYOUTFMT_4DGENERIC": 31})
NNPABfpFormat = c_enum("NNPABfpFormat", "``nnpa_bfp_format``.", __name__, {"NNPA_BFPFMT_TINY": 1,
                                                                           "NNPA_BFPFMT_SHORT": 2})
_NNPA_MATMUL = "ADDITION COMP_HIGH COMP_NOT_LOW COMP_EQUAL COMP_NOT_EQUAL COMP_NOT_HIGH COMP_LOW".split()
NNPAMatmulOp = c_enum("NNPAMatmulOp", "``nnpa_matmul_operations`` (the hardware's names of :class:`MatmulOp`).",
                      __name__, " ".join(f"NNPA_MATMUL_OP_{op}" for op in _NNPA_MATMUL))
NNPAMatmulBcastOp = c_enum("NNPAMatmulBcastOp", "``nnpa_matmul_bcast_operations``.", __name__,
                           " ".join(f"NNPA_MATMUL_BCAST_OP_{op}" for op in _NNPA_MATMUL))
NNPASoftmaxAct = c_enum("NNPASoftmaxAct", "``nnpa_softmax_act``.", __name__, "NNPA_SOFTMAX_NONE NNPA_SOFTMAX_LOG")
NNPAReduceOp = c_enum("NNPAReduceOp", "``nnpa_reduce_operations``.", __name__,
                      "NNPA_REDUCE_OP_MINIMUM NNPA_REDUCE_OP_MINIMUM_IDX NNPA_REDUCE_OP_MAXIMUM "
                      "NNPA_REDUCE_OP_MAXIMUM_IDX")
C_ENUMS = (DataLayout, DataFormat, DataType, QuantizedTransformType, Direction, MatmulOp, MatmulBcastOp, NNPAFunction,
           ParmBlkFormat, NNPADataType, NNPALayoutFormat, NNPABfpFormat, NNPAMatmulOp, NNPAMatmulBcastOp,
           NNPASoftmaxAct, NNPAReduceOp)
"""zdnn.h's enums; their members are also constants of this module under their C names."""
ENUM_CONSTANTS = export_members(globals(), *C_ENUMS)


def _msb(field_size: int, pos: int) -> int:
    return 1 << (field_size - 1 - pos)


# zdnn_query_* bit masks (bit position counted from the left, as zdnn.h's MSB_BITMASK)
QUERY_DATATYPE_INTERNAL1 = _msb(16, 0)
QUERY_DATATYPE_BINARY_FP32 = _msb(16, 6)
QUERY_DATATYPE_BINARY_INT8 = _msb(16, 8)
QUERY_DATATYPE_BINARY_INT32 = _msb(16, 10)
QUERY_LAYOUTFMT_4DFEATURE = _msb(32, 0)
QUERY_LAYOUTFMT_4DKERNEL = _msb(32, 1)
QUERY_LAYOUTFMT_4DWEIGHTS = _msb(32, 2)
QUERY_LAYOUTFMT_4DGENERIC = _msb(32, 31)
QUERY_BFPFMT_TINY = _msb(16, 1)
QUERY_BFPFMT_SHORT = _msb(16, 2)

# zdnn_status classes (the status values are these plus a code)
ZDNN_WARNING = 0x00020000
ZDNN_PARAMETER_ERROR = 0x00040000
ZDNN_DATA_ERROR = 0x00100000
ZDNN_HW_ERROR = 0x000C0000

ZDNN_SOFTMAX_SAVEAREA_SIZE = 8 * 1024
ZDNN_8K_SAVEAREA_SIZE = 8 * 1024

# zdnn_concat_info: [RNN_TYPE: 8][PREV_LAYER: 8][USAGE: 8][8]
BITSHIFT_RNN_TYPE = 24
BITSHIFT_PREV_LAYER = 16
BITSHIFT_USAGE = 8
RNN_TYPE_LSTM = 0 << BITSHIFT_RNN_TYPE
RNN_TYPE_GRU = 1 << BITSHIFT_RNN_TYPE
PREV_LAYER_UNI = 0 << BITSHIFT_PREV_LAYER
PREV_LAYER_NONE = PREV_LAYER_UNI
PREV_LAYER_BIDIR = 1 << BITSHIFT_PREV_LAYER
USAGE_WEIGHTS = 0 << BITSHIFT_USAGE
USAGE_HIDDEN_WEIGHTS = 1 << BITSHIFT_USAGE
USAGE_BIASES = 2 << BITSHIFT_USAGE
USAGE_HIDDEN_BIASES = 3 << BITSHIFT_USAGE


def CONCAT_RNN_TYPE(info: int) -> int:  # noqa: N802 - zdnn.h's macro
    """``CONCAT_RNN_TYPE(info)``: the RNN_TYPE_* field of a concat info."""
    return int(info) & (0xFF << BITSHIFT_RNN_TYPE)


def CONCAT_PREV_LAYER(info: int) -> int:  # noqa: N802 - zdnn.h's macro
    """``CONCAT_PREV_LAYER(info)``: the PREV_LAYER_* field of a concat info."""
    return int(info) & (0xFF << BITSHIFT_PREV_LAYER)


def CONCAT_USAGE(info: int) -> int:  # noqa: N802 - zdnn.h's macro
    """``CONCAT_USAGE(info)``: the USAGE_* field of a concat info."""
    return int(info) & (0xFF << BITSHIFT_USAGE)


def MSB_BITMASK(field_size: int, pos: int) -> int:  # noqa: N802 - zdnn.h's macro
    """``MSB_BITMASK(field_size, pos)``: bit ``pos`` counted from the left of a ``field_size``-bit field."""
    return 1 << ((int(field_size) - 1) - int(pos))


concat_rnn_type, concat_prev_layer, concat_usage = CONCAT_RNN_TYPE, CONCAT_PREV_LAYER, CONCAT_USAGE


ZDNN_VERSION = "1.2.0"
ZDNN_VERNUM = 0x010200
ZDNN_VER_MAJOR, ZDNN_VER_MINOR, ZDNN_VER_PATCH = 1, 2, 0

PRE_TRANSFORMED_TYPES = (DataType.FP32, DataType.FP16, DataType.BFLOAT, DataType.INT8, DataType.INT32)
TRANSFORMED_TYPES = (DataType.ZDNN_DLFLOAT16, DataType.ZDNN_BINARY_INT8, DataType.ZDNN_BINARY_INT32)
CONCAT_LAYOUTS = (DataLayout.ZDNN_FICO, DataLayout.ZDNN_ZRH, DataLayout.ZDNN_BIDIR_FICO, DataLayout.ZDNN_BIDIR_ZRH)
PRE_LAYOUT_NDIMS = {
    DataLayout.ZDNN_1D: 1, DataLayout.ZDNN_2D: 2, DataLayout.ZDNN_2DS: 2, DataLayout.ZDNN_3D: 3,
    DataLayout.ZDNN_3DS: 3, DataLayout.ZDNN_4D: 4, DataLayout.ZDNN_4DS: 4, DataLayout.ZDNN_NHWC: 4,
    DataLayout.ZDNN_NCHW: 4, DataLayout.ZDNN_HWCK: 4,
}
"""Pre-transformed layouts and how many of dim4..dim1 (innermost last) they use."""
GATES = {DataLayout.ZDNN_FICO: 4, DataLayout.ZDNN_BIDIR_FICO: 4, DataLayout.ZDNN_ZRH: 3, DataLayout.ZDNN_BIDIR_ZRH: 3}

__all__ = [
    "DataLayout", "DataFormat", "DataType", "QuantizedTransformType", "Direction", "MatmulOp", "MatmulBcastOp",
    "NNPAFunction", "ParmBlkFormat", "NNPADataType", "NNPALayoutFormat", "NNPABfpFormat", "NNPAMatmulOp",
    "NNPAMatmulBcastOp", "NNPASoftmaxAct", "NNPAReduceOp", "CONCAT_LAYOUTS", "ZDNN_WARNING", "ZDNN_PARAMETER_ERROR",
    "ZDNN_DATA_ERROR", "ZDNN_HW_ERROR", "ZDNN_SOFTMAX_SAVEAREA_SIZE", "ZDNN_8K_SAVEAREA_SIZE", "BITSHIFT_RNN_TYPE",
    "BITSHIFT_PREV_LAYER", "BITSHIFT_USAGE", "CONCAT_RNN_TYPE", "CONCAT_PREV_LAYER", "CONCAT_USAGE", "MSB_BITMASK",
    "RNN_TYPE_LSTM", "RNN_TYPE_GRU",
    "PREV_LAYER_UNI", "PREV_LAYER_NONE", "PREV_LAYER_BIDIR", "USAGE_WEIGHTS", "USAGE_HIDDEN_WEIGHTS", "USAGE_BIASES",
    "USAGE_HIDDEN_BIASES", "ZDNN_VERSION", "ZDNN_VERNUM", "ZDNN_VER_MAJOR", "ZDNN_VER_MINOR", "ZDNN_VER_PATCH",
    "QUERY_DATATYPE_INTERNAL1", "QUERY_DATATYPE_BINARY_FP32", "QUERY_DATATYPE_BINARY_INT8",
    "QUERY_DATATYPE_BINARY_INT32", "QUERY_LAYOUTFMT_4DFEATURE", "QUERY_LAYOUTFMT_4DKERNEL", "QUERY_LAYOUTFMT_4DWEIGHTS",
    "QUERY_LAYOUTFMT_4DGENERIC", "QUERY_BFPFMT_TINY", "QUERY_BFPFMT_SHORT", *ENUM_CONSTANTS,
]
