"""Shared helpers of the TFLM / CMSIS-NN tests: random quantized standard LSTMs, a .tflite writer for them (through
the LiteRT target's flatbuffer writer) and the ``tflite-micro`` interpreter as an oracle."""

from __future__ import annotations

import numpy as np
import pytest

from fusedrnn.targets.litert.slots import const
from fusedrnn.targets.litert.writer import single_op_model
from fusedrnn.targets.tflite_quant import QuantizedLstm

_TYPES = {"int8": "INT8", "int16": "INT16"}


def tflite_model(q: QuantizedLstm, *, batch: int, time: int, time_major: bool = True) -> bytes:
    """A one-op .tflite model of ``q``: input x ([T, B, I] time-major, else [B, T, I]) -> y, variable states."""
    act = _TYPES[q.activation]
    H, I = q.hidden_size, q.input_size
    seq = (lambda n: (time, batch, n)) if time_major else (lambda n: (batch, time, n))
    slots = [None] * 24
    slots[0] = const("x", None, q.x_scale, q.x_zp, type_name=act, shape=seq(I))
    for g, name in enumerate("ifco"):
        slots[1 + g] = const(f"input_to_{name}_weights", q.W[g], q.W_scale[g])
        slots[5 + g] = const(f"recurrent_to_{name}_weights", q.R[g], q.R_scale[g])
        slots[12 + g] = const(f"{name}_gate_bias", q.b[g], float(np.float32(q.x_scale) * np.float32(q.W_scale[g])))
    slots[18] = const("output_state", None, q.h_scale, q.h_zp, type_name=act, shape=(batch, H), is_variable=True)
    slots[19] = const("cell_state", None, q.c_scale, 0, type_name="INT16", shape=(batch, H), is_variable=True)
    y = const("y", None, q.h_scale, q.h_zp, type_name=act, shape=seq(H))
    options = {"fused_activation_function": q.cell_activation, "cell_clip": float(q.cell_clip), "proj_clip": 0.0,
               "time_major": time_major, "asymmetric_quantize_inputs": False}
    return single_op_model("UNIDIRECTIONAL_SEQUENCE_LSTM", slots, [y], options, version=1)


def tflm_runtime():
    """The tflite-micro interpreter module, or skip with the reason."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except Exception as exc:  # ImportError, or a broken install (e.g. its missing pyyaml)
        pytest.skip(f"the tflite-micro interpreter is not installed (pip install tflite-micro pyyaml): {exc}")
    return runtime


def run_tflm(model: bytes, x: np.ndarray, invocations: int = 1) -> list[np.ndarray]:
    """The outputs of ``invocations`` successive invocations of ``model`` on x (the state carries over)."""
    it = tflm_runtime().Interpreter.from_bytes(model)
    outs = []
    for _ in range(invocations):
        it.set_input(x, 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
    return outs


def random_quantized(rng: np.random.Generator, activation: str = "int8", *, H: int | None = None,
                     I: int | None = None, wide: bool = False) -> QuantizedLstm:
    """A random standard LSTM direction with random tensors and scales; ``wide`` makes the scales large enough
    that the FullyConnected outputs and the gates saturate often."""
    H = H or int(rng.integers(1, 20))
    I = I or int(rng.integers(1, 20))
    bias_dt = np.int32 if activation == "int8" else np.int64
    W = tuple(rng.integers(-127, 128, size=(H, I)).astype(np.int8) for _ in range(4))
    R = tuple(rng.integers(-127, 128, size=(H, H)).astype(np.int8) for _ in range(4))
    b = tuple(rng.integers(-30000, 30000, size=H).astype(bias_dt) for _ in range(4))
    k = 8.0 if wide else 1.0
    Ws = tuple(float(np.float32(rng.uniform(0.2, 1.0) * k / (127 * np.sqrt(I)))) for _ in range(4))
    Rs = tuple(float(np.float32(rng.uniform(0.2, 1.0) * k / (127 * np.sqrt(H)))) for _ in range(4))
    if activation == "int8":
        x_scale, x_zp = float(np.float32(rng.uniform(0.005, 0.05))), int(rng.integers(-20, 21))
        h_scale, h_zp = float(np.float32(rng.uniform(0.003, 0.01))), int(rng.integers(-10, 11))
    else:
        x_scale, x_zp = float(np.float32(rng.uniform(2, 6) / 32767)), 0
        h_scale, h_zp = float(np.float32(1.0 / 32767)), 0
    cs = int(rng.integers(-15, -9))
    c_scale = 2.0**cs if rng.random() < 0.75 else float(np.float32(2.0**cs * rng.uniform(0.75, 1.4)))  # TFLM rounds
    clip = float(rng.choice([0.0, 0.0, 1.5, 3.0, 10.0]))  # log2 of a cell scale that is no power of two
    return QuantizedLstm(activation, W, R, b, Ws, Rs, x_scale, x_zp, h_scale, h_zp, c_scale, clip)


def random_codes(rng: np.random.Generator, shape: tuple, activation: str) -> np.ndarray:
    if activation == "int8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    return rng.integers(-32768, 32768, size=shape).astype(np.int16)
