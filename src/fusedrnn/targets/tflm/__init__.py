"""TensorFlow Lite for Microcontrollers (TFLM): its integer UNIDIRECTIONAL_SEQUENCE_LSTM kernel (int8 and int16
activations, :mod:`.kernel`) and the ``tflm-int8x16`` / ``tflm-int16x8`` emulation targets (registered on
import)."""

from .kernel import TflmLstm, TflmLstmParams
from .targets import TflmPrepared, register_all

register_all()

__all__ = ["TflmLstm", "TflmLstmParams", "TflmPrepared"]
