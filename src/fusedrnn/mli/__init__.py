"""Synopsys embARC MLI in Python, bit for bit: MLI 2.0 here (see :mod:`fusedrnn.targets.mli.api`), MLI 1.x in
:mod:`fusedrnn.mli.v1`."""

from ..targets.mli.api import *  # noqa: F403
from ..targets.mli.api import __all__  # noqa: F401
from . import v1  # noqa: F401 - ``fusedrnn.mli.v1`` as an attribute too
