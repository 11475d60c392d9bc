"""Synopsys embARC MLI in Python, bit for bit: see :mod:`fusedrnn.targets.mli.api`."""

from .targets.mli.api import *  # noqa: F403
from .targets.mli.api import __all__  # noqa: F401
