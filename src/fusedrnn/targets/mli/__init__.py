"""embARC MLI target: the MLI 2.0 (and 1.x) recurrent and dense kernels, bit-exact, with MLI's own API
(:mod:`fusedrnn.mli`) and registry targets for ``layer.to("mli2-sa8", calibration=x)``."""

from ..registry import names, register
from .target import TARGETS

for _t in TARGETS:
    if _t.name not in names():
        register(_t)
