"""fusedrnn: fused and quantized recurrent operators of accelerator SDKs and ONNX, on the CPU."""

from importlib.metadata import PackageNotFoundError, version

from . import conventions, ops
from .errors import (
    AttributeValueError,
    ConversionError,
    DTypeError,
    FusedRNNError,
    SequenceLengthError,
    ShapeError,
    UnknownTargetError,
    UnsupportedFeatureError,
)

try:
    __version__ = version("fusedrnn")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = [
    "__version__",
    "conventions",
    "ops",
    "AttributeValueError",
    "ConversionError",
    "DTypeError",
    "FusedRNNError",
    "SequenceLengthError",
    "ShapeError",
    "UnknownTargetError",
    "UnsupportedFeatureError",
]
