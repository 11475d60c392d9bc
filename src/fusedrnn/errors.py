"""The exception hierarchy of fusedrnn.

Every error a Pythonic fusedrnn API raises derives from :class:`FusedRNNError`. Each subclass also derives
from the built-in exception a caller would expect (``ValueError`` for bad values and shapes, ``TypeError``
for bad dtypes or types, ``KeyError`` for unknown names), so ``except ValueError`` keeps working.

Messages name the argument, what was expected and what was given, e.g.
``W: expected shape (1, 512, 64) (D, 4*hidden_size, input_size), got (1, 512, 32)``.
"""

from __future__ import annotations


class FusedRNNError(Exception):
    """Base class of every fusedrnn error."""


class ShapeError(FusedRNNError, ValueError):
    """An array has the wrong rank or shape."""


class DTypeError(FusedRNNError, TypeError):
    """An array has an unsupported or inconsistent dtype, or an argument has the wrong type."""


class AttributeValueError(FusedRNNError, ValueError):
    """An operator attribute or option has an invalid value or an unknown name."""


class SequenceLengthError(FusedRNNError, ValueError):
    """``sequence_lens`` holds a value outside [0, T]."""


class ConversionError(FusedRNNError, ValueError):
    """A layer cannot be converted to or from another framework's convention."""


class FrameworkTypeError(ConversionError, DTypeError):
    """A converter was given an object of the wrong kind (e.g. not a PyTorch RNN module or Keras RNN layer)."""


class InputError(FusedRNNError, ValueError):
    """A model was fed unknown, missing or ill-typed inputs."""


class UnknownTargetError(FusedRNNError, KeyError):
    """No emulation target is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnsupportedFeatureError(FusedRNNError, ValueError):
    """A target or converter cannot express an option of the layer."""


class FileFormatError(FusedRNNError, ValueError):
    """A file is not of the format it should be, is damaged, or claims more than it holds (an array header's
    shape beyond the bytes behind it, layer indices beyond the tensors present, a member that inflates past what
    its compression method allows)."""


class BufferLayoutError(FusedRNNError, ValueError):
    """A buffer handed to an SDK API is not the memory the API needs (a flat, C-contiguous array of the element
    type, writable where the API writes), or a view of it (shape, strides, offset, capacity) reaches outside it."""


__all__ = [
    "FusedRNNError",
    "ShapeError",
    "DTypeError",
    "AttributeValueError",
    "SequenceLengthError",
    "ConversionError",
    "FrameworkTypeError",
    "InputError",
    "UnknownTargetError",
    "UnsupportedFeatureError",
    "FileFormatError",
    "BufferLayoutError",
]
