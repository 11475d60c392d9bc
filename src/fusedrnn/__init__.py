"""fusedrnn: fused and quantized recurrent operators of accelerator SDKs and ONNX, on the CPU."""

from . import conventions, frontends, ops, targets  # frontends registers the layer converters
from ._version import __version__
from .cells.calibration import Calibration
from .errors import (
    AttributeValueError,
    ConversionError,
    DTypeError,
    FrameworkTypeError,
    FusedRNNError,
    InputError,
    SequenceLengthError,
    ShapeError,
    UnknownTargetError,
    UnsupportedFeatureError,
)
from .frontends import onnx
from .layers import GRU, LSTM, RNN, Stack

__all__ = [
    "__version__",
    "conventions",
    "frontends",
    "ops",
    "onnx",
    "targets",
    "LSTM",
    "GRU",
    "RNN",
    "Stack",
    "Calibration",
    "AttributeValueError",
    "ConversionError",
    "DTypeError",
    "FrameworkTypeError",
    "FusedRNNError",
    "InputError",
    "SequenceLengthError",
    "ShapeError",
    "UnknownTargetError",
    "UnsupportedFeatureError",
]
