"""The ``cmsis-nn-s8`` and ``cmsis-nn-s16`` emulation targets (registry ``prepare`` hooks).

``layer.to("cmsis-nn-s8", calibration=x)`` quantizes the layer as the TF converter would
(:mod:`fusedrnn.targets.tflite_quant`, the same tensors as ``tflm-int8x16``), derives CMSIS-NN's parameters as
TFLM's CMSIS-NN kernel does (:func:`~.kernel.params_from_quantized`) and runs ``arm_lstm_unidirectional_s8``'s
arithmetic; ``cmsis-nn-s16`` uses int16 activations (``arm_lstm_unidirectional_s16``). The float input and
initial states are quantized as for the TFLM targets (zero states give exactly CMSIS-NN's NULL hidden state), the
outputs and final states dequantized. ``calibration="tflite"`` runs an imported integer .tflite LSTM's own tensors.
No sequence lengths.
"""

from __future__ import annotations

import numpy as np

from ...cells.spec import CellSpec
from ..registry import Prepared, Target
from ..tflite_quant import QuantizedLstm, QuantizedLstmPrepared, prepared_directions
from .kernel import CmsisLstm, params_from_quantized

FEATURES = frozenset(("lstm", "bidirectional", "cell_clip"))
VARIANTS = {"cmsis-nn-s8": ("s8", "int8"), "cmsis-nn-s16": ("s16", "int16")}


class CmsisPrepared(QuantizedLstmPrepared):
    """An LSTM on CMSIS-NN's kernel: ``quantized`` holds each direction's .tflite tensors, ``params`` its
    ``cmsis_nn_lstm_params`` (:class:`~.kernel.LstmParams`), ``kernels`` one :class:`~.kernel.CmsisLstm` each."""

    sdk = "CMSIS-NN's"

    def __init__(self, spec: CellSpec, quantized: list[QuantizedLstm], variant: str):
        self.variant = variant
        self.params = [params_from_quantized(q) for q in quantized]
        super().__init__(spec, quantized, [CmsisLstm(p, variant) for p in self.params])

    def run_direction(self, kernel, xq, state, reverse):
        """CMSIS-NN reads forwards only: a backward direction runs on the time-reversed sequence."""
        y, (h, c) = kernel.run(xq[::-1] if reverse else xq, *state)
        return (y[::-1] if reverse else y), (h, c)


def _prepare(name: str):
    variant, activation = VARIANTS[name]

    def prepare(spec: CellSpec, calibration) -> Prepared:
        quantized = prepared_directions(spec, calibration, activation, name)
        return CmsisPrepared(spec, quantized, variant)

    return prepare


TARGETS = (
    Target("cmsis-nn-s8", "Arm CMSIS-NN arm_lstm_unidirectional_s8 (int8 activations, int16 cell; portable C) with "
           "the parameters TFLM's CMSIS-NN kernel derives, bit-exact with CMSIS-NN's test vectors",
           family="cmsis-nn", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True,
           prepare=_prepare("cmsis-nn-s8"), needs_calibration=True),
    Target("cmsis-nn-s16", "Arm CMSIS-NN arm_lstm_unidirectional_s16 (int16 activations, int8 weights, int64 "
           "biases; portable C), bit-exact with CMSIS-NN's test vectors", family="cmsis-nn",
           dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True, prepare=_prepare("cmsis-nn-s16"),
           needs_calibration=True),
)
