"""IBM zDNN's C API in Python (functions without the ``zdnn_`` prefix); see :mod:`fusedrnn.targets.zdnn.api`."""

from .targets.zdnn.api import *  # noqa: F403
from .targets.zdnn.api import __all__  # noqa: F401
