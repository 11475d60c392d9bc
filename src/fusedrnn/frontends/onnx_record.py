"""Recording what each recurrent node of a model receives, to calibrate quantized targets on it.

:meth:`fusedrnn.onnx.Model.to` runs the float model on the calibration feeds with a :class:`Recorder` in the
node runner (:func:`fusedrnn.frontends.onnx_emulation.node_function`): every call of a recurrent node appends
its inputs in float form (a quantized operator's dequantized weights) under the node's key.
"""

from __future__ import annotations

from ..errors import DTypeError
from .onnx_ops import node_key


class Recorder(dict):
    """{node key: [inputs of each call]}; each entry holds one input per ONNX slot of the node's float form
    (X, W, R, B, sequence_lens, initial_h, initial_c, P; shorter when the node has fewer, None where omitted)."""

    def record(self, node, inputs) -> None:
        """Append one call of ``node`` with ``inputs``."""
        self.setdefault(node_key(node), []).append(tuple(inputs))


def calibration_batches(calibration) -> list[dict]:
    """The calibration feeds as a non-empty list of dicts (a single dict is one batch); DTypeError otherwise."""
    batches = calibration if isinstance(calibration, (list, tuple)) else [calibration]
    if not batches or not all(isinstance(b, dict) for b in batches):
        raise DTypeError(f"calibration: expected a dict of input name -> array or a non-empty list of such "
                         f"dicts, got {type(calibration).__name__}")
    return list(batches)


__all__ = ["Recorder", "calibration_batches"]
