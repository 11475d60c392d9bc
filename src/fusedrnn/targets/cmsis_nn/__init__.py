"""Arm CMSIS-NN: its integer LSTM functions (``arm_lstm_unidirectional_s8`` / ``_s16`` with CMSIS-NN's structures
and status codes, :mod:`.api`) and the ``cmsis-nn-s8`` / ``cmsis-nn-s16`` emulation targets (registered on
import)."""

from ..registry import register_new
from . import api
from .kernel import CmsisLstm, LstmContext, LstmGate, LstmParams, params_from_quantized
from .targets import TARGETS, CmsisPrepared

register_new(TARGETS)

__all__ = ["CmsisLstm", "CmsisPrepared", "LstmContext", "LstmGate", "LstmParams", "api", "params_from_quantized"]
