"""Model formats and framework converters.

* :mod:`fusedrnn.frontends.onnx`: load and run whole ONNX models with their recurrent nodes on fusedrnn
  (imported here and re-exported as ``fusedrnn.onnx``);
* :mod:`fusedrnn.frontends.torch`: PyTorch ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` <-> fusedrnn layers;
* :mod:`fusedrnn.frontends.keras`: Keras 3 ``LSTM`` / ``GRU`` / ``SimpleRNN`` / ``Bidirectional`` <-> fusedrnn
  layers.

``torch`` and ``keras`` are not imported here: import them explicitly (``from fusedrnn.frontends import torch``)
or use the layer methods (``LSTM.from_torch``, ``layer.to_keras()``...), which import them on first use. TFLite
is planned.
"""

from . import onnx

__all__ = ["onnx"]
