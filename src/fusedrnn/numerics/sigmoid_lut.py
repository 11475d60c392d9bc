"""int16 logistic and tanh by interpolation in a 256-entry sigmoid table: TFLite's reference
``reference_integer_ops::Logistic`` / ``Tanh`` for int16 (the power-of-two-scale case, which TensorFlow Lite for
Microcontrollers' integer LSTM calls) and Arm CMSIS-NN's ``arm_nn_activation_s16``. Both compute, with C integer
semantics (``>>`` arithmetic, uint32 intermediates that never wrap in range):

    v  = (x · m + r) >> s           m = 3 · 2^left_shift, r = s = 0 for left_shift >= 0;
                                    m = 3, s = -left_shift, r = 2^(s-1) for left_shift < 0
    a  = |v|;  k = 9 (logistic) or 8 (tanh);  u = a >> k;  t = a & (2^k - 1)
    L  = u >= 255 ? (logistic: 32767·2^10, tanh: 65535·2^8)
                  : T[u]·2^k + t·(T[u+1] − T[u])          T = SIGMOID_TABLE_UINT16, sigmoid(i/24) in 0.16
    logistic = v >= 0 ? (L + 2^9) >> 10 : (2^25 − L + 2^9 − 1) >> 10
    tanh     = v >= 0 ? (L − 2^23 + 2^7) >> 8 : (2^23 − L + 2^7 − 1) >> 8      (tanh(x) = 2·sigmoid(2x) − 1)

The input x is Q3.12 for ``left_shift = 0`` (the factor 3 is the table's 3/4 scaling: 2^-12 · 3 · 2^-9 = 1/24 per
entry for logistic); a cell state with scale 2^p uses ``left_shift = p + 12``. Output: Q0.15 int16.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import AttributeValueError, DTypeError

__all__ = ["SIGMOID_TABLE_UINT16", "logistic_lut16", "tanh_lut16", "lut16_table"]

SIGMOID_TABLE_UINT16: tuple[int, ...] = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
)
"""sigmoid(i / 24) for i = 0..255 in unsigned 0.16 fixed point (65535 for the last), as TFLite's ``common.h`` and
CMSIS-NN's ``arm_nn_tables`` hold it (hand-tuned values: rounding the formula differs in 44 entries by one)."""

_KINDS = ("logistic", "tanh")
_LEFT_SHIFT_RANGE = (-15, 12)  # keeps x·3·2^left_shift inside int32 for every int16 x


def _evaluate(kind: str, x: np.ndarray, left_shift: int) -> np.ndarray:
    """The C computation over int64 values of int16 inputs; int16 results."""
    table = np.asarray(SIGMOID_TABLE_UINT16 + (SIGMOID_TABLE_UINT16[-1],), np.int64)  # +1 entry: u+1 at u = 254
    if left_shift >= 0:
        v = x * (3 << left_shift)
    else:
        s = -left_shift
        v = (x * 3 + (1 << (s - 1))) >> s
    a = np.abs(v)
    k = 9 if kind == "logistic" else 8
    u = a >> k
    t = a & ((1 << k) - 1)
    uc = np.minimum(u, 254)
    lo = table[uc]
    interp = (lo << k) + t * (table[uc + 1] - lo)
    if kind == "logistic":
        L = np.where(u >= 255, 0x7FFF << 10, interp)
        out = np.where(v >= 0, (L + (1 << 9)) >> 10, ((1 << 25) - L + (1 << 9) - 1) >> 10)
    else:
        L = np.where(u >= 255, 0xFFFF << 8, interp)
        out = np.where(v >= 0, (L - (1 << 23) + (1 << 7)) >> 8, ((1 << 23) - L + (1 << 7) - 1) >> 8)
    return (((out + 32768) & 0xFFFF) - 32768).astype(np.int16)  # the C cast to int16 (values are in range)


@functools.lru_cache(maxsize=64)
def lut16_table(kind: str, left_shift: int = 0) -> np.ndarray:
    """int16[65536]: ``kind``'s result ("logistic" or "tanh") for every int16 input, indexed by the input's uint16
    bit pattern (so ``np.take(table, x, mode="wrap")`` looks an int16-valued x up directly). Read-only."""
    if kind not in _KINDS:
        raise AttributeValueError(f"kind: expected one of {_KINDS}, got {kind!r}")
    left_shift = _shift(left_shift)
    x = np.arange(1 << 16, dtype=np.uint16).view(np.int16).astype(np.int64)
    table = _evaluate(kind, x, left_shift)
    table.flags.writeable = False
    return table


class Lut16:
    """``kind``'s int16 table as a fast lookup for int16-valued int64 arrays: ``lut(x)`` equals
    ``np.take(lut16_table(kind, left_shift), x, mode="wrap")`` as int64, through an int64 table ordered by input
    value (x + 2^15 indexes it), which is about 5x faster than the modular take."""

    def __init__(self, kind: str, left_shift: int = 0):
        self.table = np.roll(lut16_table(kind, left_shift).astype(np.int64), 1 << 15)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.take(self.table, np.asarray(x, np.int64) + (1 << 15), mode="clip")


def _shift(left_shift) -> int:
    if isinstance(left_shift, bool) or not isinstance(left_shift, (int, np.integer)):
        raise DTypeError(f"left_shift: expected an int, got {type(left_shift).__name__} {left_shift!r}")
    lo, hi = _LEFT_SHIFT_RANGE
    if not lo <= int(left_shift) <= hi:
        raise AttributeValueError(f"left_shift: expected an int in [{lo}, {hi}], got {left_shift}")
    return int(left_shift)


def _int16(x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.int16:
        return arr
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"x: expected int16 values (an integer array), got dtype {arr.dtype}")
    a64 = arr.astype(np.int64)
    if a64.size and (int(a64.min()) < -32768 or int(a64.max()) > 32767):
        bad = int(a64.min()) if int(a64.min()) < -32768 else int(a64.max())
        raise AttributeValueError(f"x: expected int16 values in [-32768, 32767], got {bad}")
    return a64.astype(np.int16)


def logistic_lut16(x, left_shift: int = 0) -> np.ndarray:
    """sigmoid(x) in Q0.15 (int16) for int16 x in Q3.12 scaled by 2^left_shift (module docstring); a table look-up
    of :func:`lut16_table`. Integer arrays only; values must fit int16."""
    return np.take(lut16_table("logistic", _shift(left_shift)), _int16(x).view(np.uint16).astype(np.intp))


def tanh_lut16(x, left_shift: int = 0) -> np.ndarray:
    """tanh(x) in Q0.15 (int16) for int16 x in Q3.12 scaled by 2^left_shift (module docstring)."""
    return np.take(lut16_table("tanh", _shift(left_shift)), _int16(x).view(np.uint16).astype(np.intp))
