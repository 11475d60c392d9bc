"""TensorFlow Lite / LiteRT target (litert.md): the fused LSTM and RNN kernels in float, hybrid and full-integer
8x8_16 arithmetic, a .tflite reader and writer, and the ``litert-float``, ``litert-hybrid`` and ``litert-int8x16``
emulation targets (registered on import)."""

from ..registry import register_new
from .targets import TARGETS

register_new(TARGETS)
