"""MLI's integer primitives under the names of ``lib/src/pal/ref/mli_math.h`` (spec mli.md §2.1): the unchecked
cores of :mod:`fusedrnn.numerics.core`, re-exported, plus the prepared integer GEMM operand.

Values live in int64 arrays whatever their C container; ``width`` names the container (8, 16, 32 or 64). Shift
counts may be Python ints or int arrays (broadcast). Rounding mode ``"up"`` is MLI ROUND_UP (half toward +inf,
the add saturates), ``"convergent"`` is ROUND_CONVERGENT (half to even). No argument validation: the kernels
pass values that already fit ``width``; the validated forms are :mod:`fusedrnn.numerics.fixed_point`.

=============  ==========================  =====================================================
name here      numerics core               MLI
=============  ==========================  =====================================================
``lim``        ``limits``                  the container's (min, max)
``clamp``      ``clamp``                   min(max(x, lo), hi) (index and ReLU limits)
``sat``        ``sat``                     saturation to a container (the kernels' casts)
``wrap``       ``wrap``                    a C cast to a narrower signed type
``add_sat``    ``add_sat``                 ``mli_math_add_fx``
``asl``        ``asl_sat``                 ``mli_math_asl_fx``
``asr``        ``asr``                     ``mli_math_asr_fx``
``rnd``        ``asr_rnd``                 ``mli_math_asr_rnd_fx``
``rnd_nosat``  ``asr_rnd_nosat``           ``mli_math_asr_rnd_fx`` where the add cannot saturate
``norm``       ``norm``                    ``mli_math_norm_fx``
``bitlen``     ``bit_length``
``cdiv``       ``trunc_div``               C ``/`` on integers
=============  ==========================  =====================================================
"""

from __future__ import annotations

import numpy as np

from ...numerics.core import add_sat, asr, clamp, i64, norm, sat, wrap
from ...numerics.core import asl_sat as asl
from ...numerics.core import asr_rnd as rnd
from ...numerics.core import asr_rnd_nosat as rnd_nosat
from ...numerics.core import bit_length as bitlen
from ...numerics.core import limits as lim
from ...numerics.core import trunc_div as cdiv
from ...numerics.int_matmul import IntMatrix

__all__ = ["add_sat", "asl", "asr", "bitlen", "cdiv", "clamp", "i64", "int_matrix", "lim", "norm", "rnd", "rnd_nosat",
           "sat", "wrap"]


def int_matrix(b, a_absmax: int) -> IntMatrix:
    """A prepared exact integer right operand (``numerics.int_matmul.IntMatrix``): ``.matmul(a) -> int64``,
    ``.column_sums``."""
    return IntMatrix(np.ascontiguousarray(b), a_absmax=int(a_absmax))
