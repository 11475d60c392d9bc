"""A speaker-embedding-like model for the diagnosis tests: 3 stacked LSTMs (40 -> H), the last hidden state through
a dense layer, ReLU and L2 normalisation (the shape of Resemblyzer's voice encoder), as ONNX."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def embedding_model(hidden: int = 256, inputs: int = 40, layers: int = 3, seed: int = 0,
                    gain: float = 1.0) -> onnx.ModelProto:
    """The ONNX model (opset 17) with weights U(-gain/√H, gain/√H) plus a forget-gate bias of 1 (as trained
    LSTMs tend to have) and a unit-scale dense layer."""
    rng = np.random.default_rng(seed)
    H = hidden
    k = gain / np.sqrt(H)
    inits, nodes = [], []
    x = "mels"
    for li in range(layers):
        I = inputs if li == 0 else H
        W = rng.uniform(-k, k, (1, 4 * H, I)).astype(np.float32)
        R = rng.uniform(-k, k, (1, 4 * H, H)).astype(np.float32)
        B = rng.uniform(-k, k, (1, 8 * H)).astype(np.float32)
        B[0, 2 * H:3 * H] += 1.0  # ONNX gate order i, o, f, c: the forget bias
        inits += [numpy_helper.from_array(W, f"W{li}"), numpy_helper.from_array(R, f"R{li}"),
                  numpy_helper.from_array(B, f"B{li}")]
        nodes.append(helper.make_node("LSTM", [x, f"W{li}", f"R{li}", f"B{li}"], [f"Y{li}", f"Yh{li}"],
                                      name=f"lstm{li}", hidden_size=H))
        if li < layers - 1:
            nodes.append(helper.make_node("Squeeze", [f"Y{li}", "axis1"], [f"X{li + 1}"]))
            x = f"X{li + 1}"
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
    Wd = (rng.uniform(-1, 1, (H, H)) / np.sqrt(H)).astype(np.float32)
    inits += [numpy_helper.from_array(Wd, "Wd"), numpy_helper.from_array(np.zeros(H, np.float32), "bd")]
    nodes += [helper.make_node("Squeeze", [f"Yh{layers - 1}", "axis0"], ["last"]),
              helper.make_node("Gemm", ["last", "Wd", "bd"], ["dense"]),
              helper.make_node("Relu", ["dense"], ["relu"]),
              helper.make_node("LpNormalization", ["relu"], ["embedding"], axis=-1, p=2)]
    graph = helper.make_graph(nodes, "embedding", [helper.make_tensor_value_info("mels", TensorProto.FLOAT,
                                                                                  ["T", "B", inputs])],
                              [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["B", H])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mel_like(T: int, B: int, inputs: int = 40, seed: int = 1) -> np.ndarray:
    """Log-mel-like features [T, B, inputs]: smooth in time and frequency, mostly in [-1, 1] with rare loud
    frames (the outliers that decide a min/max calibration)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((T, B, inputs)).cumsum(axis=0) / np.sqrt(np.arange(1, T + 1))[:, None, None]
    x = 0.5 * base + 0.2 * rng.standard_normal((T, B, inputs))
    loud = rng.random((T, B)) < 0.01
    x[loud] *= 6.0
    return x.astype(np.float32)
