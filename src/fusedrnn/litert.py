"""TensorFlow Lite / LiteRT fused recurrent operators on fusedrnn: the kernels, models and writer of
:mod:`fusedrnn.targets.litert`, plus the converters that need the layers and frontends (.tflite ops to layers,
Keras layers to the converter's graph)."""

from .frontends.tflite import layer_from_tflite
from .frontends.tflite_keras import from_keras
from .targets.litert.api import *  # noqa: F403
from .targets.litert.api import __all__ as _api_all

__all__ = [*_api_all, "from_keras", "layer_from_tflite"]
