"""TensorFlow Lite / LiteRT fused recurrent operators on fusedrnn (see :mod:`fusedrnn.targets.litert`)."""

from .targets.litert.api import *  # noqa: F403
from .targets.litert.api import __all__  # noqa: F401
