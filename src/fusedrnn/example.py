"""The bundled example: an LSTM classifier of scikit-learn's 8x8 handwritten digits and its test split.

Each image is read as 8 timesteps (its rows) of 8 features (pixels scaled to [0, 1]); the ONNX model maps
``x`` float32 [batch, 8, 8] to ``logits`` float32 [batch, 10] through one ONNX ``LSTM`` node (hidden size 64)
and a ``Gemm`` head. ``scripts/train_example.py`` in the source tree retrains and re-exports it::

    import fusedrnn.example as ex
    model = ex.load_model()                  # a fusedrnn.onnx.Model
    x, y = ex.load_data()
    accuracy = (model.run({"x": x})["logits"].argmax(1) == y).mean()
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .frontends import onnx

DATA_DIR = Path(__file__).resolve().parent / "data"
MODEL_FILE = "digits_lstm.onnx"
DATA_FILE = "digits_test.npz"
INPUT_NAME = "x"
OUTPUT_NAME = "logits"


def model_path() -> Path:
    """Path of the bundled ONNX model."""
    return DATA_DIR / MODEL_FILE


def data_path() -> Path:
    """Path of the bundled test split (npz with ``x`` float32 [N, 8, 8] and ``y`` int64 [N])."""
    return DATA_DIR / DATA_FILE


def load_data() -> tuple[np.ndarray, np.ndarray]:
    """The test split: ``(x, y)``, x float32 [N, 8, 8], y int64 [N] labels 0-9."""
    with np.load(data_path()) as d:
        return d["x"], d["y"]


def load_model(target=None):
    """The bundled model as a :class:`fusedrnn.onnx.Model` (on ``target``, default native precision)."""
    return onnx.load(model_path(), target=target)


__all__ = ["DATA_FILE", "INPUT_NAME", "MODEL_FILE", "OUTPUT_NAME", "data_path", "load_data", "load_model",
           "model_path"]
