"""Model formats: ``onnx`` (load and run whole ONNX models with their recurrent nodes on fusedrnn); later torch,
keras and tflite."""

from . import onnx

__all__ = ["onnx"]
