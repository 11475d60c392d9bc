"""TFLite / gemmlowp integer primitives, vectorised over NumPy integer arrays (litert.md §6.1, §6.4, §6.5).

Every function reproduces the C++ integer semantics bit for bit: ``/`` truncates toward zero, ``>>`` is an
arithmetic (floor) shift, and where gemmlowp adds or negates raw values in their own type the result wraps
(two's complement; for int32 this is undefined behaviour in C++ that compiles to a wrapping add on every
target TFLite ships for). Intermediates are int64. Raw fixed-point values are plain integers: a value
``F(n)`` with ``n`` integer bits in a ``bits``-wide container holds ``raw / 2**(bits - 1 - n)``.

``bits=16`` is the int16 path of the integer LSTM (``FixedPoint<int16_t, n>``); ``bits=32`` gives gemmlowp's
generic int32 templates. Results come back as int16 / int32 arrays (NumPy scalars for scalar inputs).
int16 ``logistic`` / ``tanh`` are evaluated once per ``integer_bits`` over all 65536 inputs and then looked up.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np

from ..errors import AttributeValueError, DTypeError
from . import core

__all__ = [
    "quantize_multiplier",
    "quantize_multiplier_smaller_than_one",
    "quantize_multiplier_greater_than_one",
    "srdhm",
    "srdhm32",
    "srdhm16",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
    "saturating_rounding_multiply_by_pot",
    "rounding_half_sum",
    "exp_on_interval_between_negative_one_quarter_and_0_excl",
    "exp_on_negative_values",
    "one_over_one_plus_x",
    "one_minus_x_over_one_plus_x",
    "logistic",
    "tanh",
    "get_inv_sqrt_quantized_multiplier_exp",
]

Rounding = Literal["double", "single"]
_ROUNDINGS = ("double", "single")
_RAW_BITS = (16, 32)
_OUT_DTYPE = {16: np.int16, 32: np.int32}


# ---------------------------------------------------------------------------------------------------------------
# argument checking and small helpers (int64 in, int64 out)


def _int_array(name: str, x, bits: int | None = None) -> np.ndarray:
    """``x`` as an int64 array; integer dtypes only; with ``bits``, values must fit a signed ``bits`` container."""
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "iu":
        raise DTypeError(f"{name}: expected an integer array or int, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise AttributeValueError(f"{name}: expected values that fit int64, got max {int(arr.max())}")
    fits = bits is None or (np.iinfo(arr.dtype).min >= -(1 << (bits - 1)) and np.iinfo(arr.dtype).max < 1 << (bits - 1))
    arr = arr.astype(np.int64)
    if not fits and arr.size:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            bad = amin if amin < lo else amax
            raise AttributeValueError(f"{name}: expected int{bits} values in [{lo}, {hi}], got {bad}")
    return arr


def _int_param(name: str, value, lo: int, hi: int) -> int:
    """A Python-int parameter (like a C++ template argument) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DTypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise AttributeValueError(f"{name}: expected an int in [{lo}, {hi}], got {value}")
    return value


def _check_bits(bits) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in _RAW_BITS:
        raise AttributeValueError(f"bits: expected one of {_RAW_BITS}, got {bits!r}")
    return int(bits)


def _out(x: np.ndarray, dtype) -> np.ndarray:
    """Cast (values already in range) and unwrap 0-d arrays to NumPy scalars."""
    y = x.astype(dtype)
    return y[()] if y.ndim == 0 else y


def _const(raw32: int, bits: int) -> int:
    """gemmlowp's RescaleConstantInitializer: an int32 Q-constant rounded to the raw type's width."""
    return int(core.rdpot(np.int64(raw32), 32 - bits))


# ---------------------------------------------------------------------------------------------------------------
# §6.1 multipliers and scalar primitives


def _multipliers(m) -> np.ndarray:
    arr = np.asarray(m)
    if arr.dtype == object or arr.dtype.kind not in "iuf":
        raise DTypeError(f"m: expected a real number or real array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise AttributeValueError(f"m: expected finite multipliers, got {arr[~np.isfinite(arr)].flat[0]}")
    return arr


def _quantize_multiplier(arr: np.ndarray, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    if rounding not in _ROUNDINGS:
        raise AttributeValueError(f"rounding: expected one of {_ROUNDINGS}, got {rounding!r}")
    q, e = np.frexp(arr)
    scaled = q * 2.0**31  # exact; |scaled| < 2**31, and |scaled| + 0.5 is exact too
    qf = np.copysign(np.floor(np.abs(scaled) + 0.5), scaled).astype(np.int64)  # std::round: ties away from 0
    e = e.astype(np.int64)
    top = qf == (1 << 31)
    qf = np.where(top, qf // 2, qf)
    e = np.where(top, e + 1, e)
    tiny = e < -31
    qf = np.where(tiny, 0, qf)
    e = np.where(tiny, 0, e)
    if rounding == "single":
        big = e > 30
        qf = np.where(big, (1 << 31) - 1, qf)
        e = np.where(big, 30, e)
    return qf, e


def quantize_multiplier(m, *, rounding: Rounding = "double") -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``QuantizeMultiplier``: real multiplier ``m`` (float64, any sign) -> ``(Q int32, shift int32)``.

    ``m ≈ Q · 2**(shift - 31)`` with ``Q = round_half_away(frexp(m).mantissa · 2**31)`` (a mantissa that rounds
    up to 2**31 is halved and the shift bumped); 0 -> (0, 0); a shift below -31 flushes to (0, 0).
    ``rounding="single"`` (builds with ``TFLITE_SINGLE_ROUNDING=1``) also saturates a shift above 30 to
    ``(2**31 - 1, 30)``. Vectorised over ``m``.
    """
    qf, e = _quantize_multiplier(_multipliers(m), rounding)
    return _out(qf, np.int32), _out(e, np.int32)


def quantize_multiplier_smaller_than_one(m, *, rounding: Rounding = "double") -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``QuantizeMultiplierSmallerThanOneExp``: 0 <= m < 1 -> ``(Q, shift)`` with shift <= 0.

    Like TFLite's checks, m outside [0, 1) or an m so close to 1 that Q rounds up to 2**31 (shift 1) raises.
    """
    arr = _multipliers(m)
    if arr.size and not np.all((arr >= 0) & (arr < 1)):
        raise AttributeValueError(f"m: expected multipliers in [0, 1), got {arr[~((arr >= 0) & (arr < 1))].flat[0]}")
    qf, e = _quantize_multiplier(arr, rounding)
    if e.size and int(e.max()) > 0:
        raise AttributeValueError(f"m: {arr[e > 0].flat[0]!r} rounds to the multiplier 1.0 (shift 1), expected < 1")
    return _out(qf, np.int32), _out(e, np.int32)


def quantize_multiplier_greater_than_one(m, *, rounding: Rounding = "double") -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``QuantizeMultiplierGreaterThanOne``: m > 1 -> ``(Q, shift)`` with shift >= 1."""
    arr = _multipliers(m)
    if arr.size and not np.all(arr > 1):
        raise AttributeValueError(f"m: expected multipliers > 1, got {arr[~(arr > 1)].flat[0]}")
    qf, e = _quantize_multiplier(arr, rounding)
    return _out(qf, np.int32), _out(e, np.int32)


def srdhm(a, b, *, bits: int = 32) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul of raw ``bits``-wide values: a·b / 2**(bits-1) rounded to nearest, ties
    toward +inf (±nudge, then truncating C++ division); ``a == b == min`` gives ``max``. Broadcasts a with b."""
    bits = _check_bits(bits)
    return _out(core.srdhm(_int_array("a", a, bits), _int_array("b", b, bits), bits), _OUT_DTYPE[bits])


def srdhm32(a, b) -> np.ndarray:
    """``srdhm(a, b, bits=32)`` -> int32 (gemmlowp's int32 SaturatingRoundingDoublingHighMul)."""
    return srdhm(a, b, bits=32)


def srdhm16(a, b) -> np.ndarray:
    """``srdhm(a, b, bits=16)`` -> int16 (gemmlowp's int16 SaturatingRoundingDoublingHighMul)."""
    return srdhm(a, b, bits=16)


def rounding_divide_by_pot(x, e) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2**e rounded to nearest, ties away from zero.

    ``x``: integer array (int64 range); ``e``: int or integer array in [0, 62], broadcast with ``x`` (gemmlowp
    asserts e <= 31 for int32). The result has x's dtype (it always fits).
    """
    xa = _int_array("x", x)
    ea = _int_array("e", e)
    if ea.size and (int(ea.min()) < 0 or int(ea.max()) > 62):
        bad = int(ea.min()) if int(ea.min()) < 0 else int(ea.max())
        raise AttributeValueError(f"e: expected exponents in [0, 62], got {bad}")
    dtype = np.asarray(x).dtype if isinstance(x, np.ndarray | np.integer) else np.int64
    e_arg = int(ea) if ea.ndim == 0 else ea
    big = xa > (1 << 62) + (1 << 61) - 1  # x + 2^(e-1) could leave int64: RDPOT(x, e) = RDPOT(x - 2^e, e) + 1
    if big.any():
        return _out(core.rdpot(xa - big * (np.int64(1) << ea), e_arg) + big, dtype)
    return _out(core.rdpot(xa, e_arg), dtype)


def multiply_by_quantized_multiplier(x, Q, shift, *, rounding: Rounding = "double",  # noqa: N803
                                     x_bits: int = 32) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier(x, Q, shift)`` ≈ x · Q · 2**(shift - 31) -> int32.

    ``x_bits=32`` is the ``int32_t x`` overload:
      * ``rounding="double"`` (the default build, pip wheels): ``RDPOT(SRDHM32(x · 2**max(shift, 0), Q),
        max(-shift, 0))``, the pre-shift product wrapping to int32 as in C++; shift in [-31, 30].
      * ``rounding="single"`` (``TFLITE_SINGLE_ROUNDING=1``): ``(x·Q + 2**(30 - shift)) >> (31 - shift)``;
        shift in [-31, 30], Q >= 0.
    ``x_bits=64`` is the ``int64_t x`` overload (same in both builds): Q is first reduced to 16 bits,
    ``Qr = Q < 0x7FFF0000 ? (Q + 2**15) >> 16 : 0x7FFF``, then ``(x·Qr + 2**(14 - shift)) >> (15 - shift)``;
    x in [-2**47, 2**47), shift in [-31, 7], Q >= 0.
    Q and shift broadcast with x (per-channel multipliers). Results are cast to int32 (wrapping like the C++
    ``static_cast``; they fit whenever the caller honours TFLite's range contract).
    """
    if rounding not in _ROUNDINGS:
        raise AttributeValueError(f"rounding: expected one of {_ROUNDINGS}, got {rounding!r}")
    if x_bits not in (32, 64) or isinstance(x_bits, bool):
        raise AttributeValueError(f"x_bits: expected 32 or 64, got {x_bits!r}")
    xa = _int_array("x", x, x_bits if x_bits == 32 else None)
    qa = _int_array("Q", Q, 32)
    sa = _int_array("shift", shift)
    if x_bits == 64:
        if xa.size and (int(xa.min()) < -(1 << 47) or int(xa.max()) >= 1 << 47):
            bad = int(xa.min()) if int(xa.min()) < -(1 << 47) else int(xa.max())
            raise AttributeValueError(f"x: expected values in [-2**47, 2**47) for x_bits=64, got {bad}")
        _check_range("shift", sa, -31, 7)
        _check_range("Q", qa, 0, (1 << 31) - 1)
        return _out(core.mbqm64(xa, qa, sa), np.int32)
    _check_range("shift", sa, -31, 30)
    if rounding == "single":
        _check_range("Q", qa, 0, (1 << 31) - 1)
    return _out(core.Requant(qa, sa, rounding)(xa), np.int32)


def _check_range(name: str, a: np.ndarray, lo: int, hi: int) -> None:
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        bad = int(a.min()) if int(a.min()) < lo else int(a.max())
        raise AttributeValueError(f"{name}: expected values in [{lo}, {hi}], got {bad}")


def saturating_rounding_multiply_by_pot(x, e: int, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` on raw ``bits``-wide values.

    e == 0: x; e < 0: ``RoundingDivideByPOT(x, -e)``; e > 0: x·2**e, saturated to the container when
    x > 2**(bits-1-e) - 1 or x < -(2**(bits-1-e) - 1). ``e`` in [-(bits-1), bits-1].
    """
    bits = _check_bits(bits)
    e = _int_param("e", e, -(bits - 1), bits - 1)
    return _out(core.srmpot(_int_array("x", x, bits), e, bits), _OUT_DTYPE[bits])


def rounding_half_sum(a, b, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum``: (a + b + sign(a + b)) / 2 with C++ truncating division (ties away from 0)."""
    bits = _check_bits(bits)
    return _out(core.rounding_half_sum(_int_array("a", a, bits), _int_array("b", b, bits), bits), _OUT_DTYPE[bits])


# ---------------------------------------------------------------------------------------------------------------
# §6.5 gemmlowp fixed-point exp / logistic / tanh (raw int64 in, raw int64 out)

_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))  # (E, exp(-2**E) in Q0.31)


def _exp_on_interval(a: np.ndarray, bits: int) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), F0 in and out: Taylor expansion around -1/8."""
    c = _const(1895147668, bits)  # exp(-1/8)
    third = _const(715827883, bits)  # 1/3
    x = core.wrap(a + (1 << (bits - 4)), bits)  # a + 1/8
    x2 = core.srdhm(x, x, bits)
    x3 = core.srdhm(x2, x, bits)
    x4 = core.srdhm(x2, x2, bits)
    inner = core.wrap(core.srdhm(core.wrap(core.srmpot(x4, -2, bits) + x3, bits), third, bits) + x2, bits)
    poly = core.srmpot(inner, -1, bits)
    total = c + core.srdhm(np.int64(c), core.wrap(x + poly, bits), bits)
    return core.sat(total, bits) if bits == 16 else core.wrap(total, bits)  # AddSaturatingIf16Bit


def _exp_on_negative_values(a: np.ndarray, integer_bits: int, bits: int) -> np.ndarray:
    frac = bits - 1 - integer_bits
    quarter = 1 << (frac - 2)
    amq = core.wrap((a & (quarter - 1)) - quarter, bits)
    result = _exp_on_interval(core.srmpot(amq, integer_bits, bits), bits)
    remainder = core.wrap(amq - a, bits)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit_set = ((remainder >> (frac + exponent)) & 1).astype(bool)
            result = np.where(bit_set, core.srdhm(result, np.int64(_const(multiplier, bits)), bits), result)
    if integer_bits > 5:
        clamp = _const(-(1 << (36 - integer_bits)), bits)  # -32.0
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, (1 << (bits - 1)) - 1, result)


def _newton_one_over_one_plus_x(a: np.ndarray, bits: int) -> np.ndarray:
    """≈ 1/(1 + a) in F2 for a in F0 (0..1): 3 Newton-Raphson steps on the half denominator."""
    one_f2 = 1 << (bits - 3)
    half_denominator = core.rounding_half_sum(a, np.int64((1 << (bits - 1)) - 1), bits)
    x = core.wrap(_const(1515870810, bits) + core.srdhm(half_denominator, np.int64(_const(-1010580540, bits)), bits),
                  bits)
    for _ in range(3):
        one_minus = core.wrap(one_f2 - core.srdhm(half_denominator, x, bits), bits)
        x = core.wrap(x + core.srmpot(core.srdhm(x, one_minus, bits), 2, bits), bits)
    return x


def _one_over_one_plus_x(a: np.ndarray, bits: int) -> np.ndarray:
    return core.srmpot(_newton_one_over_one_plus_x(a, bits), 1, bits)


def _one_minus_x_over_one_plus_x(a: np.ndarray, bits: int) -> np.ndarray:
    return core.srmpot(core.wrap(_newton_one_over_one_plus_x(a, bits) - (1 << (bits - 3)), bits), 2, bits)


def _logistic(a: np.ndarray, integer_bits: int, bits: int) -> np.ndarray:
    positive = a > 0
    abs_input = np.where(positive, a, core.wrap(-a, bits))
    if_positive = _one_over_one_plus_x(_exp_on_negative_values(core.wrap(-abs_input, bits), integer_bits, bits), bits)
    if_negative = core.wrap(((1 << (bits - 1)) - 1) - if_positive, bits)
    return np.where(a == 0, _const(1 << 30, bits), np.where(positive, if_positive, if_negative))


def _tanh(a: np.ndarray, integer_bits: int, bits: int) -> np.ndarray:
    negative = a < 0
    n = np.where(negative, a, core.wrap(-a, bits))
    t = _one_minus_x_over_one_plus_x(_exp_on_negative_values(n, integer_bits + 1, bits), bits)
    return np.where(a == 0, 0, np.where(negative, core.wrap(-t, bits), t))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a, *, bits: int = 16) -> np.ndarray:
    """gemmlowp's exp on [-1/4, 0): raw F0 in, raw F0 out (defined, if meaningless, for every raw input)."""
    bits = _check_bits(bits)
    return _out(_exp_on_interval(_int_array("a", a, bits), bits), _OUT_DTYPE[bits])


def exp_on_negative_values(a, integer_bits: int, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values``: a in F(integer_bits) (meaningful for a <= 0) -> exp(a) in F0.

    ``integer_bits`` in [0, bits-3]; inputs below -32 give 0 when integer_bits > 5, a == 0 gives the max raw.
    """
    bits = _check_bits(bits)
    integer_bits = _int_param("integer_bits", integer_bits, 0, bits - 3)
    return _out(_exp_on_negative_values(_int_array("a", a, bits), integer_bits, bits), _OUT_DTYPE[bits])


def one_over_one_plus_x(a, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1``: a in F0 (meaningful in [0, 1)) -> 1/(1 + a) in F0."""
    bits = _check_bits(bits)
    return _out(_one_over_one_plus_x(_int_array("a", a, bits), bits), _OUT_DTYPE[bits])


def one_minus_x_over_one_plus_x(a, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1``: a in F0 -> (1 - a)/(1 + a) in F0."""
    bits = _check_bits(bits)
    return _out(_one_minus_x_over_one_plus_x(_int_array("a", a, bits), bits), _OUT_DTYPE[bits])


@functools.lru_cache(maxsize=64)
def _table16(kind: str, integer_bits: int) -> np.ndarray:
    """All 65536 int16 results of logistic / tanh, indexed by the input's uint16 bit pattern (read-only)."""
    raw = np.arange(1 << 16, dtype=np.uint16).view(np.int16).astype(np.int64)
    fn = _logistic if kind == "logistic" else _tanh
    table = fn(raw, integer_bits, 16).astype(np.int16)
    table.setflags(write=False)
    return table


def _int16_codes(name: str, x) -> np.ndarray:
    """The uint16 bit patterns of int16 values (validated), for table lookups."""
    arr = np.asarray(x)
    if arr.dtype != np.int16:
        arr = _int_array(name, x, 16).astype(np.int16)
    return arr.view(np.uint16)


def logistic(a, integer_bits: int, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``logistic``: raw a in F(integer_bits) -> sigmoid(a) in F0 (Q0.15 for bits=16).

    ``integer_bits`` in [0, bits-3]; the LSTM gates use 3 (Q3.12 in, ``PortableApplySigmoid``).
    """
    bits = _check_bits(bits)
    integer_bits = _int_param("integer_bits", integer_bits, 0, bits - 3)
    if bits == 16:  # a pure function of 65536 inputs: evaluate once, then look up
        return _out(_table16("logistic", integer_bits)[_int16_codes("a", a)], np.int16)
    return _out(_logistic(_int_array("a", a, bits), integer_bits, bits), _OUT_DTYPE[bits])


def tanh(a, integer_bits: int, *, bits: int = 16) -> np.ndarray:
    """gemmlowp ``tanh``: raw a in F(integer_bits) -> tanh(a) in F0 (Q0.15 for bits=16).

    exp(2a) is taken by relabelling the raw value as F(integer_bits + 1), so ``integer_bits`` is in
    [0, bits-4]. The LSTM uses 3 for the cell gate and 15 + cell_scale for the cell state (``PortableApplyTanh``
    dispatches 0..6 only).
    """
    bits = _check_bits(bits)
    integer_bits = _int_param("integer_bits", integer_bits, 0, bits - 4)
    if bits == 16:
        return _out(_table16("tanh", integer_bits)[_int16_codes("a", a)], np.int16)
    return _out(_tanh(_int_array("a", a, bits), integer_bits, bits), _OUT_DTYPE[bits])


# ---------------------------------------------------------------------------------------------------------------
# §6.4 inverse square root multiplier for integer layer norm


def get_inv_sqrt_quantized_multiplier_exp(x, reverse_shift: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp``: int32 x >= 0 -> ``(Q int32, shift int32)`` with
    1/sqrt(x) ≈ Q · 2**(shift_right_positive - 31), returned as ``shift = shift_right_positive · reverse_shift``
    (``reverse_shift = -1`` gives a left shift for ``multiply_by_quantized_multiplier``).

    x <= 1 gives (2**31 - 1, 0). Otherwise x is scaled by powers of 4 into [2**27, 2**29), 1/sqrt is found by
    5 Newton-Raphson steps in int32 F3 starting at 1, multiplied by sqrt(2)/2, and a negative shift is folded
    into Q (``Q <<= -shift``, wrapping like the int32 C++ shift).
    """
    xa = _int_array("x", x, 32)
    reverse_shift = _int_param("reverse_shift", reverse_shift, -(1 << 31), (1 << 31) - 1)
    _check_range("x", xa, 0, (1 << 31) - 1)
    small = xa <= 1
    v = np.where(small, 1 << 28, xa)  # placeholder for small inputs keeps the arithmetic in range
    shift = np.full(v.shape, 11, dtype=np.int64)
    while True:
        big = v >= (1 << 29)
        if not big.any():
            break
        v = np.where(big, v // 4, v)
        shift = shift + big
    bit_length = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # exact: v < 2**29
    clz = 32 - bit_length
    left_pairs = (clz - 1) // 2 - 1
    shift = shift - left_pairs
    v = v << (2 * left_pairs)
    half_input = core.rdpot(v >> 1, 1)
    half_three = (1 << 28) + (1 << 27)  # 1.5 in F3
    est = np.full(v.shape, 1 << 28, dtype=np.int64)  # 1.0 in F3
    for _ in range(5):
        cube = core.srmpot(core.srdhm(core.srdhm(est, est, 32), est, 32), 6, 32)
        diff = core.wrap(core.srdhm(np.int64(half_three), est, 32) - core.srdhm(half_input, cube, 32), 32)
        est = core.srmpot(diff, 3, 32)
    est = core.srdhm(est, np.int64(1518500250), 32)  # · sqrt(2)/2
    negative = shift < 0
    est = np.where(negative, core.wrap(est << np.where(negative, -shift, 0), 32), est)
    shift = np.where(negative, 0, shift) * reverse_shift
    est = np.where(small, (1 << 31) - 1, est)
    shift = np.where(small, 0, shift)
    return _out(core.wrap(est, 32), np.int32), _out(core.wrap(shift, 32), np.int32)
