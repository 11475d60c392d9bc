"""Synopsys embARC MLI 1.x in Python: see :mod:`fusedrnn.targets.mli.api_v1`."""

from ..targets.mli.api_v1 import *  # noqa: F403
from ..targets.mli.api_v1 import __all__  # noqa: F401
