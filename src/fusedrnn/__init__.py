"""fusedrnn: fused and quantized recurrent operators of accelerator SDKs and ONNX, on the CPU."""

from importlib.metadata import PackageNotFoundError, version

from . import conventions, frontends, ops, targets  # frontends registers the layer converters
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

try:
    __version__ = version("fusedrnn")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

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
