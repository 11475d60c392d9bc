"""AMD Quark's ``com.amd.quark::ExtendedLSTM`` in Python, bit for bit: see :mod:`fusedrnn.targets.quark.api`."""

from .targets.quark.api import *  # noqa: F403
from .targets.quark.api import __all__  # noqa: F401
