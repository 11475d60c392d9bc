"""TensorFlow Lite for Microcontrollers (TFLM): its integer UNIDIRECTIONAL_SEQUENCE_LSTM kernel (int8 and int16
activations, :mod:`.kernel`) and the ``tflm-int8x16`` / ``tflm-int16x8`` emulation targets (registered on
import)."""

from ..registry import register_new
from .kernel import TflmLstm, TflmLstmParams
from .targets import TARGETS, TflmPrepared

register_new(TARGETS)

__all__ = ["TflmLstm", "TflmLstmParams", "TflmPrepared"]
