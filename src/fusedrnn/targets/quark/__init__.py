"""AMD Quark: the ``com.amd.quark::ExtendedLSTM`` custom op (bit-exact and corrected), ONNX models holding it,
conversion of float LSTMs to it, and the ``quark`` / ``quark_corrected`` emulation targets (registered on import).
"""

from . import target  # noqa: F401  (registers the targets)
