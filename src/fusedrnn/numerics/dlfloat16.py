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
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class _Binary:
    """Bit-level parameters of an IEEE binary format used as a DLFLOAT16 source/target (float32 or float64)."""

    uint: type
    frac: int  # stored fraction bits
    bias: int

    def c(self, v: int):
        """A typed constant (keeps NumPy 1.x value-based casting away from uint64 arithmetic)."""
        return self.uint(v)

    @property
    def sign(self):
        return self.c(1 << (8 * np.dtype(self.uint).itemsize - 1))

    @property
    def shift(self) -> int:  # fraction bits dropped when rounding to 9
        return self.frac - _FRAC_BITS

    @property
    def inf_bits(self):  # magnitude bits of +Inf; larger magnitudes are NaN
        return self.c((2 * self.bias + 1) << self.frac)

    @property
    def half(self):  # half an ULP of the 9-bit fraction
        return self.c(1 << (self.shift - 1))

    @property
    def rebias(self):  # (source bias - DLF16 bias) in code units: code = (rounded >> shift) - rebias
        return self.c((self.bias - DLF16_BIAS) << _FRAC_BITS)

    @property
    def zero_limit(self):  # magnitude bits of 2^-31: rounded magnitudes <= this encode as ±0
        return self.c((self.bias - DLF16_BIAS) << self.frac)

    @property
    def min_bits(self):  # magnitude bits of DLF16_MIN (underflow flag: nonzero and below this)
        return self.c(((self.bias - DLF16_BIAS) << self.frac) | (1 << self.shift))

    @property
    def max_bits(self):  # magnitude bits of DLF16_MAX
        return self.c(((self.bias + 32) << self.frac) | (510 << self.shift))

    @property
    def overflow_bits(self):  # smallest magnitude that rounds (away) past DLF16_MAX: DLF16_MAX + half an ULP
        return self.c(((self.bias + 32) << self.frac) | (1021 << (self.shift - 1)))

    @property
    def qnan_bits(self):
        return self.c(((2 * self.bias + 1) << self.frac) | (1 << (self.frac - 1)))


_F32 = _Binary(np.uint32, 23, 127)
_F64 = _Binary(np.uint64, 52, 1023)
_BINARY = {np.dtype(np.float32): _F32, np.dtype(np.float64): _F64}


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


def _encode(a: np.ndarray, saturate: bool, want_flags: bool) -> tuple[np.ndarray, FPFlags | None]:
    """VCRNF on a float32/float64 array ``a``: (uint16 codes, flags or None)."""
    fmt = _BINARY[a.dtype]
    u = _at_least_1d(a.view(fmt.uint))
    sign = (u >> fmt.c(8 * np.dtype(fmt.uint).itemsize - 16)) & fmt.c(0x8000)
    mag = u & ~fmt.sign
    # Adding half an ULP to the whole magnitude carries into the exponent by itself. raw - rebias is the code
    # when it lies in [0, 0x7FFE]; below (rounded value < 2^-31, denormals) it flushes to 0 (raw == rebias is
    # 2^-31 itself, whose code 0 is also zero); above (incl. Inf/NaN) it is NINF.
    raw = mag + fmt.half
    raw >>= fmt.c(fmt.shift)
    np.clip(raw, fmt.rebias, fmt.rebias + fmt.c(DLF16_NINF), out=raw)
    raw -= fmt.rebias
    if saturate:  # clamp finite values to ±DLF16_MAX before rounding: a finite NINF becomes 0x7FFE
        np.copyto(raw, fmt.c(DLF16_NINF - 1), where=(raw == fmt.c(DLF16_NINF)) & (mag < fmt.inf_bits))
    codes = (raw.astype(_U16) | sign.astype(_U16)).reshape(a.shape)
    if not want_flags:
        return codes, None
    nan = mag > fmt.inf_bits
    big = mag == fmt.inf_bits if saturate else (mag >= fmt.overflow_bits) & ~nan
    tiny = (mag != fmt.c(0)) & (mag < fmt.min_bits)
    return codes, FPFlags(overflow=bool(big.any()), invalid=bool(nan.any()), underflow=bool(tiny.any()))


def fp32_to_dlf16(x, *, saturate: bool = False) -> np.ndarray:
    """Encode ``x`` (float32; float64 / float16 / bfloat16 / int accepted) to DLFLOAT16 codes (uint16, x's shape).

    RNA rounding, flush to zero below DLF16_MIN, NINF for overflow / ±Inf / NaN (sign kept); ``saturate`` clamps
    finite values to ±DLF16_MAX first (zdnn.md §1.2, §1.6). float64 is rounded once (no detour via float32).
    """
    codes, _ = _encode(_as_float_array(x, "x"), _check_bool(saturate, "saturate"), False)
    return codes


def fp32_to_dlf16_flags(x, *, saturate: bool = False) -> tuple[np.ndarray, FPFlags]:
    """:func:`fp32_to_dlf16` and the exception flags it raises (overflow, invalid, underflow)."""
    return _encode(_as_float_array(x, "x"), _check_bool(saturate, "saturate"), True)


def _round_dlf16_inplace(x: np.ndarray, saturate: bool = False) -> np.ndarray:
    """Replace every value of the float32/float64 array ``x`` by the value of its DLFLOAT16 code; return ``x``.

    The same rounding as :func:`fp32_to_dlf16` followed by :func:`dlf16_to_fp32`, done on the bits in one pass:
    ±0 for flushed values, NaN (sign kept) for NINF. No argument checks (see ``float_formats.round_to_dlfloat16``).
    """
    fmt = _BINARY[x.dtype]
    u = _at_least_1d(x.view(fmt.uint))
    sign = u & fmt.sign
    mag = u & ~fmt.sign
    r = mag + fmt.half
    r &= ~fmt.c((1 << fmt.shift) - 1)
    np.copyto(r, fmt.c(0), where=r <= fmt.zero_limit)
    over = mag >= fmt.overflow_bits
    np.copyto(r, fmt.qnan_bits, where=over)
    if saturate:
        np.copyto(r, fmt.max_bits, where=over & (mag < fmt.inf_bits))
    r |= sign
    u[...] = r
    return x


# ---------------------------------------------------------------------------------------------------------------
# DLFLOAT16 -> float32


def _decode_bits(c: np.ndarray) -> np.ndarray:
    """float32 bit patterns (uint32) of DLFLOAT16 codes ``c`` (uint16): exact, ±0 kept, NINF -> quiet NaN."""
    c32 = _at_least_1d(c).astype(np.uint32)
    sign = (c32 & np.uint32(0x8000)) << np.uint32(16)
    mag = c32 & np.uint32(0x7FFF)
    bits = (mag + np.uint32(_F32.rebias)) << np.uint32(_F32.shift)  # (e + 96) << 23 | f << 14
    np.copyto(bits, np.uint32(0), where=mag == np.uint32(0))
    np.copyto(bits, _F32.qnan_bits, where=mag == np.uint32(DLF16_NINF))
    bits |= sign
    return bits.reshape(c.shape)


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
