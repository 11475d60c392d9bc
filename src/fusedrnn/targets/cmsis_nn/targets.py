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
from ...errors import UnsupportedFeatureError
from ..batch_split import RowSplitter, macs_per_row_step
from ..registry import Prepared, Target, names, register
from ..tflite_quant import QuantizedLstm, prepared_directions
from .kernel import CmsisLstm, params_from_quantized

FEATURES = frozenset(("lstm", "bidirectional", "cell_clip"))
VARIANTS = {"cmsis-nn-s8": ("s8", "int8"), "cmsis-nn-s16": ("s16", "int16")}


class CmsisPrepared(Prepared):
    """An LSTM on CMSIS-NN's kernel: ``quantized`` holds each direction's .tflite tensors, ``params`` its
    ``cmsis_nn_lstm_params`` (:class:`~.kernel.LstmParams`), ``kernels`` one :class:`~.kernel.CmsisLstm` each."""

    def __init__(self, spec: CellSpec, quantized: list[QuantizedLstm], variant: str):
        super().__init__(spec)
        self.variant = variant
        self.quantized = quantized
        self.params = [params_from_quantized(q) for q in quantized]
        self.kernels = [CmsisLstm(p, variant) for p in self.params]
        self.splitter = RowSplitter(macs_per_row_step(spec))

    def run(self, x, states, lens):
        T, B, _ = x.shape
        if lens is not None and not np.all(lens == T):
            raise UnsupportedFeatureError("sequence_lens: CMSIS-NN's LSTM has no sequence lengths; every sequence "
                                          "must run the full T steps")
        h0, c0 = states
        dt = x.dtype
        Y = np.empty((T, len(self.kernels), B, self.spec.hidden_size), dt)
        hs, cs = [], []
        for d, (q, k) in enumerate(zip(self.quantized, self.kernels, strict=True)):
            xq = q.quantize_input(x)
            hq, cq = q.quantize_state(h0[d], c0[d])
            rev = self.spec.reverse[d]
            y, (h, c) = k.run(xq[::-1] if rev else xq, hq, cq)
            Y[:, d] = q.dequantize_output(y[::-1] if rev else y, dt)
            hs.append(q.dequantize_output(h, dt))
            cs.append(q.dequantize_cell(c, dt))
        return Y, (np.stack(hs), np.stack(cs))


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


def register_all() -> None:
    for t in TARGETS:
        if t.name not in names():
            register(t)
