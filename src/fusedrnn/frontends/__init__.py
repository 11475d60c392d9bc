"""Model formats and framework converters.

* :mod:`fusedrnn.frontends.onnx`: load and run whole ONNX models with their recurrent nodes on fusedrnn
  (re-exported as ``fusedrnn.onnx``; its parts are the ``onnx_*`` modules), and
  :mod:`fusedrnn.frontends.onnx_node`: single ONNX recurrent nodes <-> fusedrnn layers;
* :mod:`fusedrnn.frontends.torch`: PyTorch ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` <-> fusedrnn layers;
* :mod:`fusedrnn.frontends.keras`: Keras 3 ``LSTM`` / ``GRU`` / ``SimpleRNN`` / ``Bidirectional`` <-> fusedrnn
  layers;
* :mod:`fusedrnn.frontends.tflite`: the recurrent ops of a .tflite model as fusedrnn layers;
* :mod:`fusedrnn.frontends.model_files`: whole model files of every format (ONNX, .tflite, Keras 3, PyTorch),
  recognised by their bytes and turned into ONNX models (what the CLI's MODEL arguments read), and
  :mod:`fusedrnn.frontends.onnx_graph`: multi-node ONNX models of layers, stacks and dense heads.

Importing this package (``import fusedrnn`` does) imports every converter module, and each registers its
converters in :data:`fusedrnn.layers.CONVERTERS`, which the layer methods (``LSTM.from_torch``,
``layer.to_keras()``, ``from_onnx``, ...) call. PyTorch and Keras themselves are imported only when a converter
runs.
"""

from . import keras, onnx, onnx_node, tflite, torch

__all__ = ["keras", "onnx", "onnx_node", "tflite", "torch"]
