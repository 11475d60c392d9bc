"""The public API of :mod:`fusedrnn.quark` (AMD Quark's ExtendedLSTM custom op)."""

from .convert import Conversion, ConversionReport, build_nodes, calibrate, convert
from .onnx_op import (
    NODE_CACHE,
    OPS,
    PreparedCache,
    is_extended_lstm,
    node_attributes,
    node_outputs,
    op_classes,
    run_model,
    run_node,
    run_node_outputs,
)
from .op import (
    MODES,
    PreparedExtendedLSTM,
    dequantize_output,
    extended_lstm,
    extended_lstm_quantized,
    make_scales,
    prepare,
    y_range,
)
from .ort_extensions import declare_ops, onnxruntime_session, register_model
from .params import KernelParams, Scales, kernel_params
from .tanhf import backend as tanhf_backend
from .tanhf import set_backend as set_tanhf_backend
from .tanhf import tanhf

__all__ = [
    "MODES",
    "NODE_CACHE",
    "OPS",
    "Conversion",
    "ConversionReport",
    "KernelParams",
    "PreparedCache",
    "PreparedExtendedLSTM",
    "Scales",
    "build_nodes",
    "calibrate",
    "convert",
    "declare_ops",
    "dequantize_output",
    "extended_lstm",
    "extended_lstm_quantized",
    "is_extended_lstm",
    "kernel_params",
    "make_scales",
    "node_attributes",
    "node_outputs",
    "onnxruntime_session",
    "op_classes",
    "prepare",
    "register_model",
    "run_model",
    "run_node",
    "run_node_outputs",
    "set_tanhf_backend",
    "tanhf",
    "tanhf_backend",
    "y_range",
]
