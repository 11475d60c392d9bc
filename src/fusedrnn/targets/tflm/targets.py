"""The ``tflm-int8x16`` and ``tflm-int16x8`` emulation targets (registry ``prepare`` hooks).

``layer.to("tflm-int8x16", calibration=x)`` quantizes the layer as the TF converter would
(:mod:`fusedrnn.targets.tflite_quant`: the same tensors as ``litert-int8x16``) and runs TFLM's integer LSTM kernel
(:mod:`.kernel`); ``tflm-int16x8`` uses int16 activations (symmetric) with int64 biases, the 16x8 variant TFLM's
kernel also accepts. The float input is quantized to the input parameters (round half to even), the initial
states to the output-state and cell parameters; outputs and final states are dequantized. A layer imported with
``LSTM.from_tflite`` from an integer model runs its own tensors with ``calibration="tflite"``. Each direction of a
reverse or bidirectional layer is one op (as the TF converter writes Keras layers, with REVERSE_V2 around the
backward one). TFLM has no sequence lengths: calls with ``sequence_lens`` shorter than T are refused.
"""

from __future__ import annotations

import numpy as np

from ...cells.spec import CellSpec
from ..registry import Prepared, Target
from ..tflite_quant import QuantizedLstm, QuantizedLstmPrepared, prepared_directions
from .kernel import TflmLstm

FEATURES = frozenset(("lstm", "bidirectional", "cell_clip"))
ACTIVATIONS = {"tflm-int8x16": "int8", "tflm-int16x8": "int16"}


class TflmPrepared(QuantizedLstmPrepared):
    """An LSTM on TFLM's integer kernel: ``quantized`` holds each direction's tensors
    (:class:`~fusedrnn.targets.tflite_quant.QuantizedLstm`), ``kernels`` one :class:`TflmLstm` per direction."""

    sdk = "TFLM's"

    def __init__(self, spec: CellSpec, quantized: list[QuantizedLstm]):
        super().__init__(spec, quantized, [TflmLstm(q) for q in quantized])


def _prepare(name: str):
    activation = ACTIVATIONS[name]

    def prepare(spec: CellSpec, calibration) -> Prepared:
        quantized = prepared_directions(spec, calibration, activation, name)
        return TflmPrepared(spec, quantized)

    return prepare


TARGETS = (
    Target("tflm-int8x16", "TensorFlow Lite for Microcontrollers integer LSTM, int8 activations, int16 cell "
           "(reference kernels), converter-like calibration, bit-exact with the tflite-micro interpreter",
           family="tflm", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True,
           prepare=_prepare("tflm-int8x16"), needs_calibration=True),
    Target("tflm-int16x8", "TensorFlow Lite for Microcontrollers integer LSTM, int16 activations, int8 weights, "
           "int64 biases (16x8), bit-exact with the tflite-micro interpreter", family="tflm",
           dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True, prepare=_prepare("tflm-int16x8"),
           needs_calibration=True),
)
