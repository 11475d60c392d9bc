"""IBM DLFLOAT16 ("NNP-data-type-1"), the storage format of the zAIU / NNPA: codes, conversions, flags.

Format (spec zdnn.md §1.1): 16-bit code ``s | eeeeee | fffffffff``, exponent bias 31, value
``(-1)^s * 2^(e-31) * (1 + f/512)`` for every e in [0, 63] -- no subnormals. ``0x0000`` / ``0x8000`` are ±0 (the
e=0, f=0 pattern is zero, not 2^-31). ``0x7FFF`` / ``0xFFFF`` ("NINF") are the only non-numeric codes and stand for
both NaN and ±Inf; they decode to NaN. Largest finite ``0x7FFE`` = 8573157376, smallest nonzero ``0x0001`` =
2^-31 * (1 + 1/512).

Encoding (the VCRNF model, §1.2): round the magnitude to 9 fraction bits, **ties away from zero** (RNA); a
result below 2^-31 * (1 + 1/512) becomes ±0 (flush to zero, including 2^-31 itself); a result above ``DLF16_MAX``,
±Inf and NaN become NINF with the input's sign. Float32 inputs follow the model bit for bit; float64 inputs are
rounded once, directly from float64 (the same result as VCRNF for every float64 that is also a float32).
``saturate=True`` (§1.6) first clamps finite values to [-DLF16_MAX, DLF16_MAX]; Inf and NaN still give NINF.

Flags (§1.5): ``overflow`` (a finite value or an Inf became NINF), ``invalid`` (a NaN input, or a NINF code
decoded), ``underflow`` (a nonzero input of magnitude below DLF16_MIN, i.e. tiny before rounding, as zDNN's
software converter flagged it). Inexact is never a flag: ordinary rounding does not signal in these instructions.

Codes are ``uint16`` arrays (``int16`` arrays are taken as the same bit patterns). Byte images (§1.7) are
big-endian. Every function is vectorised (bit manipulation on uint32/uint64 views) and accepts scalars.
Speed: in-place rounding of large arrays is 3 in-place integer passes plus 4 reductions (about 0.3-0.5 ns per
float32 element on one core, cache-hot) with an exact fallback only when NaN, Inf, overflow or a flush occurs;
float32 arrays of up to ``_TABLE_MAX`` elements round by one lookup in a 2 MiB table built on first use, and
decoding is one lookup in a 256 KiB table.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import AttributeValueError, DTypeError, ShapeError

__all__ = [
    "DLF16_BIAS",
    "DLF16_MAX",
    "DLF16_MIN",
    "DLF16_NINF",
    "FPFlags",
    "bf16_to_dlf16",
    "bf16_to_dlf16_flags",
    "dlf16_from_bytes",
    "dlf16_to_bf16",
    "dlf16_to_bf16_flags",
    "dlf16_to_bytes",
    "dlf16_to_fp16",
    "dlf16_to_fp32",
    "dlf16_to_fp32_flags",
    "fp16_to_dlf16",
    "fp16_to_dlf16_flags",
    "fp32_to_dlf16",
    "fp32_to_dlf16_flags",
]

DLF16_BIAS = 31
DLF16_MAX = 8573157376.0  # 0x7FFE = 2^32 * (1 + 510/512)
DLF16_MIN = 2.0**-31 * (1 + 1 / 512)  # 0x0001, the smallest nonzero magnitude
DLF16_NINF = 0x7FFF  # NaN / Inf (0xFFFF with the sign bit)

_FRAC_BITS = 9
_U16 = np.uint16


@dataclass(frozen=True)
class FPFlags:
    """Floating-point exception flags raised by a conversion (each True when any element raised it).

    zDNN maps ``overflow`` / ``invalid`` to ``ZDNN_CONVERT_FAILURE`` (or ``ZDNN_ELEMENT_RANGE_VIOLATION`` with
    saturation) and logs ``underflow`` only (zdnn.md §1.5, §1.6).
    """

    overflow: bool = False
    invalid: bool = False
    underflow: bool = False

    @property
    def is_error(self) -> bool:
        """True when a flag that zDNN treats as a failure (overflow or invalid) is raised."""
        return self.overflow or self.invalid

    def __or__(self, other: FPFlags) -> FPFlags:
        return FPFlags(self.overflow or other.overflow, self.invalid or other.invalid,
                       self.underflow or other.underflow)


class _Binary:
    """Bit-level constants of an IEEE binary format used as a DLFLOAT16 source/target (float32 or float64).

    Every constant is a typed NumPy scalar (``uint`` unless named ``s_*``: ``sint``), computed once, so the hot
    paths pay no conversion or value-based casting per call.
    """

    def __init__(self, uint: type, sint: type, frac: int, bias: int):
        nbits = 8 * np.dtype(uint).itemsize
        shift = frac - _FRAC_BITS  # fraction bits dropped when rounding to 9
        c = uint
        self.uint, self.sint, self.frac, self.bias, self.shift = uint, sint, frac, bias, shift
        self.c_shift = c(shift)
        self.sign = c(1 << (nbits - 1))
        self.mag_mask = c((1 << (nbits - 1)) - 1)
        self.half = c(1 << (shift - 1))  # half an ULP of the 9-bit fraction
        self.low = c((1 << shift) - 1)  # the bits rounding drops
        self.one = c(1)
        self.inf_bits = c((2 * bias + 1) << frac)  # magnitude bits of +Inf; larger magnitudes are NaN
        self.rebias = c((bias - DLF16_BIAS) << _FRAC_BITS)  # code = (rounded >> shift) - rebias
        self.zero_limit = c((bias - DLF16_BIAS) << frac)  # bits of 2^-31: rounded magnitudes <= this are ±0
        self.min_bits = c(((bias - DLF16_BIAS) << frac) | (1 << shift))  # bits of DLF16_MIN
        self.max_bits = c(((bias + 32) << frac) | (510 << shift))  # bits of DLF16_MAX
        # the smallest magnitude that rounds (away) past DLF16_MAX: DLF16_MAX + half an ULP
        self.overflow_bits = c(((bias + 32) << frac) | (1021 << (shift - 1)))
        self.qnan_bits = c(((2 * bias + 1) << frac) | (1 << (frac - 1)))
        self.overflow_value = float(np.array(self.overflow_bits, dtype=uint).view(_FLOAT_OF[uint]))
        # rounded-minus-one bits (see _round_dlf16_inplace): a negative value that flushes lies below this, signed
        self.s_neg_tiny = sint(-(1 << (nbits - 1)) + int(self.zero_limit))
        # encode: (magnitude + s_enc_offset) >> shift (arithmetic) is the code before clamping to [0, NINF]
        self.s_enc_offset = sint((1 << (shift - 1)) - int(self.zero_limit))
        self.s_shift = sint(shift)
        self.sign_shift = c(nbits - 16)  # code sign = bits >> sign_shift & 0x8000


_FLOAT_OF = {np.uint32: np.float32, np.uint64: np.float64}
_F32 = _Binary(np.uint32, np.int32, 23, 127)
_F64 = _Binary(np.uint64, np.int64, 52, 1023)
_BINARY = {np.dtype(np.float32): _F32, np.dtype(np.float64): _F64}
_max = np.maximum.reduce
_min = np.minimum.reduce
# the clip ufunc itself: np.clip's Python wrapper costs more than the clipping of a 32K-element array
try:  # the clip ufunc itself: np.clip's Python wrapper costs ~10 µs per call on small arrays
    _clip = np._core.umath.clip
except AttributeError:  # a NumPy without that (private) path: the public wrapper, same results
    _clip = np.clip


# ---------------------------------------------------------------------------------------------------------------
# argument checks


def _as_float_array(x, name: str) -> np.ndarray:
    """``x`` as a float32 or float64 array; float16/bfloat16/integers are widened exactly."""
    a = np.asarray(x)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    dt = a.dtype
    if dt in _BINARY:
        return a
    if dt == np.float16 or dt == ml_dtypes.bfloat16:
        return a.astype(np.float32)
    if np.issubdtype(dt, np.integer):
        return a.astype(np.float64)  # exact for |x| < 2^53; anything larger overflows DLFLOAT16 anyway
    raise DTypeError(f"{name}: expected a real float or integer array (float32, float64, float16, bfloat16, "
                     f"int), got dtype {dt}")


def _as_codes(codes, name: str = "codes", what: str = "DLFLOAT16") -> np.ndarray:
    """``codes`` as a uint16 array of 16-bit patterns (int16 is reinterpreted, wider ints are range-checked)."""
    a = np.asarray(codes)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    dt = a.dtype
    if dt == np.uint16:
        return a
    if dt == np.int16:
        return a.view(np.uint16)
    if not np.issubdtype(dt, np.integer):
        raise DTypeError(f"{name}: expected {what} codes as a uint16 (or integer) array, got dtype {dt}")
    if a.size and (a.min() < 0 or a.max() > 0xFFFF):
        raise AttributeValueError(f"{name}: expected {what} codes in [0, 65535], got values in "
                                  f"[{a.min()}, {a.max()}]")
    return a.astype(np.uint16)


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DTypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def _at_least_1d(a: np.ndarray) -> np.ndarray:
    """``a`` itself, or a 1-element view of a 0-d array (ufuncs on 0-d arrays return scalars, not arrays)."""
    return a if a.ndim else a.reshape(1)


# ---------------------------------------------------------------------------------------------------------------
# float32 / float64 -> DLFLOAT16
#
# The fast paths work on the integer view of the values, in place or in one scratch array, with few NumPy calls:
# rounding to nearest, ties away, is "add half an ULP to the magnitude and drop the low bits" (the carry walks
# into the exponent by itself). Flush to zero, overflow, Inf and NaN are handled by the slower exact code only
# when a cheap reduction says an element needs it.


def _codes(a: np.ndarray, saturate: bool, mag: np.ndarray | None = None) -> np.ndarray:
    """VCRNF on a float32/float64 array ``a``: its uint16 codes. ``mag`` (a's magnitude bits) is overwritten."""
    fmt = _BINARY[a.dtype]
    u = _at_least_1d(a).view(fmt.uint)
    if mag is None:
        mag = np.bitwise_and(u, fmt.mag_mask)
    v = mag.view(fmt.sint)
    # (magnitude + half an ULP - bits of 2^-31) >> shift is the code when it lies in [0, 0x7FFE]; below (2^-31
    # itself, whose code 0 is zero, and anything smaller) it flushes to 0, above (incl. Inf / NaN) it is NINF.
    np.add(v, fmt.s_enc_offset, out=v)
    np.right_shift(v, fmt.s_shift, out=v)
    if saturate and v.size and _max(v, axis=None) >= DLF16_NINF:  # clamp finite values to 0x7FFE first
        np.minimum(v, fmt.sint(DLF16_NINF - 1), out=v, where=np.bitwise_and(u, fmt.mag_mask) < fmt.inf_bits)
    _clip(v, fmt.sint(0), fmt.sint(DLF16_NINF), out=v)
    sign = np.right_shift(u, fmt.sign_shift)
    sign &= fmt.uint(0x8000)
    v |= sign.view(fmt.sint)
    return v.astype(_U16).reshape(a.shape)


def _encode(a: np.ndarray, saturate: bool, want_flags: bool) -> tuple[np.ndarray, FPFlags | None]:
    """VCRNF on a float32/float64 array ``a``: (uint16 codes, flags or None)."""
    if not want_flags:
        return _codes(a, saturate), None
    fmt = _BINARY[a.dtype]
    mag = np.bitwise_and(_at_least_1d(a).view(fmt.uint), fmt.mag_mask)
    overflow = invalid = underflow = False
    if mag.size:
        if _max(mag, axis=None) >= fmt.overflow_bits:
            invalid = bool((mag > fmt.inf_bits).any())
            big = mag == fmt.inf_bits if saturate else (mag >= fmt.overflow_bits) & (mag <= fmt.inf_bits)
            overflow = bool(big.any())
        # tiny: nonzero and below DLF16_MIN; magnitude - 1 sends 0 to the top
        underflow = bool(_min(mag - fmt.one, axis=None) < fmt.min_bits - fmt.one)
    return _codes(a, saturate, mag), FPFlags(overflow=overflow, invalid=invalid, underflow=underflow)


def fp32_to_dlf16(x, *, saturate: bool = False) -> np.ndarray:
    """Encode ``x`` (float32; float64 / float16 / bfloat16 / int accepted) to DLFLOAT16 codes (uint16, x's shape).

    RNA rounding, flush to zero below DLF16_MIN, NINF for overflow / ±Inf / NaN (sign kept); ``saturate`` clamps
    finite values to ±DLF16_MAX first (zdnn.md §1.2, §1.6). float64 is rounded once (no detour via float32).
    """
    return _codes(_as_float_array(x, "x"), _check_bool(saturate, "saturate"))


def fp32_to_dlf16_flags(x, *, saturate: bool = False) -> tuple[np.ndarray, FPFlags]:
    """:func:`fp32_to_dlf16` and the exception flags it raises (overflow, invalid, underflow)."""
    return _encode(_as_float_array(x, "x"), _check_bool(saturate, "saturate"), True)


def _round_exact(u: np.ndarray, fmt: _Binary, saturate: bool) -> None:
    """Round the bits ``u`` of float values in place, every case handled (the reference for the fast paths)."""
    sign = u & fmt.sign
    mag = u & fmt.mag_mask
    r = mag + fmt.half
    r &= ~fmt.low
    np.copyto(r, fmt.uint(0), where=r <= fmt.zero_limit)
    over = mag >= fmt.overflow_bits
    np.copyto(r, fmt.qnan_bits, where=over)
    if saturate:
        np.copyto(r, fmt.max_bits, where=over & (mag < fmt.inf_bits))
    r |= sign
    u[...] = r


# float32 arrays up to this many elements round through a table indexed by the top 19 bits (sign, exponent, the
# 9 kept fraction bits and the rounding bit: all the result depends on): 2 NumPy calls instead of 7. The tables
# (2 MiB each, one per saturate mode) are built on first use.
_TABLE_MAX = 8192
_TABLE_SHIFT = np.uint32(_F32.shift - 1)
_tables: dict[bool, np.ndarray] = {}
_tables_lock = threading.Lock()


def _round_table(saturate: bool) -> np.ndarray:
    table = _tables.get(saturate)
    if table is None:
        with _tables_lock:
            table = _tables.get(saturate)
            if table is None:
                table = np.arange(1 << (32 - int(_TABLE_SHIFT)), dtype=np.uint32) << _TABLE_SHIFT
                _round_exact(table, _F32, saturate)
                table.flags.writeable = False
                _tables[saturate] = table
    return table


def _round_dlf16_inplace(x: np.ndarray, saturate: bool = False) -> np.ndarray:
    """Replace every value of the float32/float64 array ``x`` by the value of its DLFLOAT16 code; return ``x``.

    The same rounding as :func:`fp32_to_dlf16` followed by :func:`dlf16_to_fp32`, done on the bits: ±0 for
    flushed values, NaN (sign kept) for NINF. No argument checks (see ``float_formats.round_to_dlfloat16``).
    """
    fmt = _BINARY[x.dtype]
    x1 = _at_least_1d(x)
    n = x1.size
    if not n:
        return x
    u = x1.view(fmt.uint)
    if n <= _TABLE_MAX and fmt is _F32:
        _round_table(saturate).take(u >> _TABLE_SHIFT, out=u, mode="clip")
        return x
    # no NaN (it propagates through max), no overflow or Inf: the plain RNA add cannot wrap, nothing saturates
    limit = fmt.overflow_value
    if not (_max(x1, axis=None) < limit and _min(x1, axis=None) > -limit):
        _round_exact(u, fmt, saturate)
        return x
    # u becomes rounded - 1 (mod 2^bits): (u - half) | low == ((u + half) & ~low) - 1. Minus one sends ±0 to the
    # top of its sign's half, so the smallest values, unsigned and signed, show whether anything must flush.
    np.subtract(u, fmt.half, out=u)
    np.bitwise_or(u, fmt.low, out=u)
    tiny = _min(u, axis=None) < fmt.zero_limit or _min(u.view(fmt.sint), axis=None) < fmt.s_neg_tiny
    np.add(u, fmt.one, out=u)
    if tiny:  # rounded magnitudes <= 2^-31 become ±0
        np.bitwise_and(u, fmt.sign, out=u, where=np.bitwise_and(u, fmt.mag_mask) <= fmt.zero_limit)
    return x


# ---------------------------------------------------------------------------------------------------------------
# DLFLOAT16 -> float32


def _decode_formula(c: np.ndarray) -> np.ndarray:
    """float32 bit patterns (uint32) of DLFLOAT16 codes ``c`` (uint16, 1-D): exact, ±0 kept, NINF -> quiet NaN."""
    c32 = c.astype(np.uint32)
    sign = (c32 & np.uint32(0x8000)) << np.uint32(16)
    mag = c32 & np.uint32(0x7FFF)
    bits = (mag + np.uint32(_F32.rebias)) << np.uint32(_F32.shift)  # (e + 96) << 23 | f << 14
    np.copyto(bits, np.uint32(0), where=mag == np.uint32(0))
    np.copyto(bits, _F32.qnan_bits, where=mag == np.uint32(DLF16_NINF))
    bits |= sign
    return bits


_DECODE = _decode_formula(np.arange(1 << 16, dtype=np.uint32).astype(_U16))  # 256 KiB: one lookup per code
_DECODE.flags.writeable = False


def _decode_bits(c: np.ndarray) -> np.ndarray:
    """float32 bit patterns (uint32) of DLFLOAT16 codes ``c`` (uint16): exact, ±0 kept, NINF -> quiet NaN."""
    return _DECODE.take(_at_least_1d(c)).reshape(c.shape)


def dlf16_to_fp32(codes) -> np.ndarray:
    """Decode DLFLOAT16 ``codes`` to float32 exactly (zdnn.md §1.3): ±0 stays ±0, NINF becomes NaN (sign kept)."""
    return _decode_bits(_as_codes(codes)).view(np.float32)


def _ninf_flags(c: np.ndarray) -> FPFlags:
    return FPFlags(invalid=bool(((c & _U16(0x7FFF)) == _U16(DLF16_NINF)).any()))


def dlf16_to_fp32_flags(codes) -> tuple[np.ndarray, FPFlags]:
    """:func:`dlf16_to_fp32` and its flags: ``invalid`` when a NINF code was decoded."""
    c = _as_codes(codes)
    return _decode_bits(c).view(np.float32), _ninf_flags(c)


# ---------------------------------------------------------------------------------------------------------------
# bfloat16


def _bf16_as_fp32(bf16, name: str) -> np.ndarray:
    a = np.asarray(bf16)
    if a.dtype == ml_dtypes.bfloat16:
        a = a.view(np.uint16)
    c = _as_codes(a, name, "bfloat16")
    return (c.astype(np.uint32) << np.uint32(16)).view(np.float32)


def bf16_to_dlf16(bf16, *, saturate: bool = False) -> np.ndarray:
    """Encode bfloat16 values (uint16 codes or an ``ml_dtypes.bfloat16`` array) to DLFLOAT16 codes (zdnn.md §1.4).

    The value is widened to float32 exactly (16 zero bits appended) and encoded by :func:`fp32_to_dlf16`; exact
    inside the DLFLOAT16 range.
    """
    codes, _ = _encode(_bf16_as_fp32(bf16, "bf16"), _check_bool(saturate, "saturate"), False)
    return codes


def bf16_to_dlf16_flags(bf16, *, saturate: bool = False) -> tuple[np.ndarray, FPFlags]:
    """:func:`bf16_to_dlf16` and its flags (as :func:`fp32_to_dlf16_flags`)."""
    return _encode(_bf16_as_fp32(bf16, "bf16"), _check_bool(saturate, "saturate"), True)


def dlf16_to_bf16(codes) -> np.ndarray:
    """DLFLOAT16 codes to bfloat16 codes (uint16): exact float32 value, then **truncated** to its high 16 bits.

    Truncation is toward zero, as zDNN's unstickify does (zdnn.md §1.4); NINF gives a quiet NaN (sign kept).
    View the result with ``.view(ml_dtypes.bfloat16)`` for bfloat16 values.
    """
    return (_decode_bits(_as_codes(codes)) >> np.uint32(16)).astype(_U16)


def dlf16_to_bf16_flags(codes) -> tuple[np.ndarray, FPFlags]:
    """:func:`dlf16_to_bf16` and its flags: ``invalid`` when a NINF code was converted."""
    c = _as_codes(codes)
    return (_decode_bits(c) >> np.uint32(16)).astype(_U16), _ninf_flags(c)


# ---------------------------------------------------------------------------------------------------------------
# float16


def _fp16_as_fp32(fp16) -> np.ndarray:
    a = np.asarray(fp16)
    if a.dtype != np.float16:
        a = _as_codes(a, "fp16", "float16").view(np.float16)
    return a.astype(np.float32)  # exact, subnormals included


def fp16_to_dlf16(fp16) -> np.ndarray:
    """Encode float16 values (a float16 array or uint16 float16 codes) to DLFLOAT16 codes (zdnn.md §1.4).

    The 10-bit fraction is rounded to 9 bits, ties away from zero (the VCRNF rule; hardware VCNF assumed
    alike); float16 subnormals are exact. ±Inf and NaN give NINF. There is no saturation for float16: its range
    fits in DLFLOAT16.
    """
    codes, _ = _encode(_fp16_as_fp32(fp16), False, False)
    return codes


def fp16_to_dlf16_flags(fp16) -> tuple[np.ndarray, FPFlags]:
    """:func:`fp16_to_dlf16` and its flags: ``overflow`` for ±Inf, ``invalid`` for NaN (never underflow)."""
    return _encode(_fp16_as_fp32(fp16), False, True)


def dlf16_to_fp16(codes) -> tuple[np.ndarray, FPFlags]:
    """DLFLOAT16 codes to float16 values and the flags raised (zdnn.md §1.4, VCFN).

    Values in the float16 normal range are exact. Magnitudes >= 65536 give ±Inf and ``overflow``; NINF gives NaN
    and ``invalid``. Magnitudes below 2^-14 round to the float16 subnormal grid (step 2^-24) ties away from zero
    (hardware rounding there is unspecified; RNA as the rest of the NNP unit) and raise ``underflow``.
    """
    c0 = _as_codes(codes)
    c = _at_least_1d(c0).astype(np.int32)
    sign = c & 0x8000
    mag = c & 0x7FFF
    e = mag >> 9
    f = mag & 0x1FF
    normal = ((e - 16) << 10) | (f << 1)  # exact for e in [17, 46]: float16 exponent e - 16
    s = np.clip(16 - e, 1, 30)  # subnormal: (512 + f) * 2^(e - 16) units of 2^-24, RNA
    sub = ((512 + f) + (1 << (s - 1))) >> s
    sub = np.where(e == 16, 512 + f, sub)
    out = np.where(e >= 17, normal, sub)
    out[mag == 0] = 0
    over = (e >= 47) & (mag != DLF16_NINF)
    ninf = mag == DLF16_NINF
    out[over] = 0x7C00
    out[ninf] = 0x7E00
    out |= sign
    tiny = (e <= 16) & (mag != 0)
    flags = FPFlags(overflow=bool(over.any()), invalid=bool(ninf.any()), underflow=bool(tiny.any()))
    return out.astype(_U16).view(np.float16).reshape(c0.shape), flags


# ---------------------------------------------------------------------------------------------------------------
# byte images


def dlf16_to_bytes(codes) -> bytes:
    """The big-endian byte image of DLFLOAT16 ``codes`` (C order, 2 bytes per code; zdnn.md §1.7)."""
    return np.ascontiguousarray(_as_codes(codes), dtype=">u2").tobytes()


def dlf16_from_bytes(buf) -> np.ndarray:
    """DLFLOAT16 codes (native uint16, 1-D) from a big-endian byte image (bytes, bytearray, memoryview, uint8)."""
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8:
            raise DTypeError(f"buf: expected bytes or a uint8 array, got an array of dtype {buf.dtype}")
        buf = np.ascontiguousarray(buf).tobytes()
    elif not isinstance(buf, (bytes, bytearray, memoryview)):
        raise DTypeError(f"buf: expected bytes, bytearray, memoryview or a uint8 array, got {type(buf).__name__}")
    n = memoryview(buf).nbytes
    if n % 2:
        raise ShapeError(f"buf: expected an even number of bytes (2 per DLFLOAT16 code), got {n}")
    return np.frombuffer(buf, dtype=">u2").astype(np.uint16)
