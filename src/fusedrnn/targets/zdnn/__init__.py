"""IBM zDNN on any machine: ztensors, stickified layouts byte for byte, DLFLOAT16 arithmetic, lstm/gru/matmul.

The API lives in :mod:`.api` (public as ``fusedrnn.zdnn``); importing this package registers the ``zdnn`` target.
"""

from ..registry import names as _names
from ..registry import register as _register
from .target import ZDNN_TARGET

if ZDNN_TARGET.name not in _names():
    _register(ZDNN_TARGET)

__all__ = ["ZDNN_TARGET"]
