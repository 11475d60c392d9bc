"""The public LiteRT API (``fusedrnn.litert``): load .tflite models and run their recurrent ops with persistent
state, build ops from tensors, write models, map Keras layers and fusedrnn layers to the converter's graphs."""

from __future__ import annotations

from .basic_lstm import BasicLSTM
from .export import export, prepare, to_tflite
from .graph import RECURRENT_OPS, Model, load
from .lstm_integer import IntegerLstmKernel, IntegerLstmParameter
from .ops import BidirectionalSequenceLSTM, SequenceLSTM, make_lstm_kernel
from .reader import ModelInfo, OpInfo, TensorInfo, read_model
from .rnn import BidirectionalSequenceRNN, RnnKernel, SequenceGRU, SequenceRNN
from .slots import LstmOptions, LstmTensors, const
from .writer import OpSpec, bidirectional_lstm_model, lstm_model, single_op_model, write_model

__all__ = [
    "RECURRENT_OPS",
    "export",
    "prepare",
    "Model",
    "load",
    "read_model",
    "ModelInfo",
    "OpInfo",
    "TensorInfo",
    "LstmOptions",
    "LstmTensors",
    "const",
    "SequenceLSTM",
    "BidirectionalSequenceLSTM",
    "BasicLSTM",
    "IntegerLstmKernel",
    "IntegerLstmParameter",
    "SequenceRNN",
    "BidirectionalSequenceRNN",
    "SequenceGRU",
    "RnnKernel",
    "make_lstm_kernel",
    "OpSpec",
    "write_model",
    "single_op_model",
    "lstm_model",
    "bidirectional_lstm_model",
    "to_tflite",
]
