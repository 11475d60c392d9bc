"""Exact integer matrix products through float BLAS.

``int_matmul(a, b)`` is ``a @ b`` over the integers (np.matmul shapes and broadcasting) for int8, uint8, int16,
uint16, int32, uint32 and int64 operands, returned as int64 (or int32, wrapped or saturated). NumPy's own
integer matmul does not use BLAS and is 30-200x slower than sgemm; here the operands are converted to float32
or float64, where BLAS is exact as long as no partial sum can leave the format's range of consecutive integers
(see ``EXACT_FLOAT32_LIMIT``), and split into limbs when even float64 is not wide enough.

``IntMatrix(b, a_absmax=...)`` prepares a right operand once (float copy, padded rows) for hot loops such as the
recurrent GEMM of an RNN step.

When the true product does not fit int64 (only possible when K*max|a|*max|b| >= 2^63), ``overflow`` decides:
"wrap" gives it modulo 2^64 in two's complement (what an int64 accumulator, and NumPy's integer matmul, give),
"saturate" clamps it to the int64 range, "raise" raises :class:`IntegerOverflowError`. The same modes apply to
an int32 result (``out_dtype=np.int32``), where they act on the exact product.
"""

from __future__ import annotations

import numbers
import threading
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import AttributeValueError, DTypeError, FusedRNNError, ShapeError, UnsupportedFeatureError

# Exactness argument. BLAS may add the K products of a dot product in any order, in any blocking, with or
# without FMA, in any number of partial accumulators (it is never Strassen-like: OpenBLAS, MKL, BLIS and
# Accelerate compute every output as a sum of the products a[m, k] * b[k, n]). Every value it forms on the way
# is then either one product a*b (|a*b| <= max|a|*max|b|) or a sum of some subset of the K products; both are
# integers of magnitude <= K * max|a| * max|b|. A binary floating-point format with a p-bit significand holds
# every integer of magnitude <= 2^p, so when K * max|a| * max|b| <= 2^p each product, each FMA result and each
# partial sum is exact: no rounding ever happens, whatever the order. The operands themselves convert exactly
# too (|a| <= K*max|a|*max|b| when K >= 1 and b is nonzero; when b is all zero every product is an exact 0).
# NumPy's own non-BLAS float matmul loops (used for some strides) also form only such sums.
# float32: p = 24, float64: p = 53.
EXACT_FLOAT32_LIMIT = 2**24
EXACT_FLOAT64_LIMIT = 2**53

OVERFLOW_MODES = ("wrap", "saturate", "raise")
SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64))
OUT_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
_I64, _I32 = np.dtype(np.int64), np.dtype(np.int32)
_SMALL_RESULT = 8192  # IntMatrix products up to this many elements skip the scratch buffers
_VIA_INT32_MAX = 2**16  # float -> int64 conversions up to this many elements go through int32

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MASK32 = 0xFFFFFFFF
# The limb fallback keeps every per-limb-pair sum (over all of K) below this, so int64 holds it (see _LimbPlan)
_LIMB_SUM_LIMIT = 2**62
_MAX_LIMBS = 8


class IntegerOverflowError(FusedRNNError, OverflowError):
    """An exact integer result does not fit the requested integer type (``overflow="raise"``)."""


# ----------------------------------------------------------------------------------------------------------
# small helpers


def dtype_absmax(dtype) -> int:
    """max |x| over the values of an integer dtype: 128 for int8, 255 for uint8, 2^63 for int64."""
    dt = np.dtype(dtype)
    v = _DTYPE_ABSMAX.get(dt)
    if v is None:
        info = np.iinfo(dt)
        v = max(-int(info.min), int(info.max))
    return v


_DTYPE_ABSMAX = {dt: max(-int(np.iinfo(dt).min), int(np.iinfo(dt).max)) for dt in SUPPORTED_DTYPES}


def exact_float_dtype(k: int, a_absmax: int, b_absmax: int):
    """The narrowest float type whose BLAS GEMM is exact for K = ``k`` and operands bounded by ``a_absmax`` and
    ``b_absmax`` in magnitude: ``np.float32`` when k*a_absmax*b_absmax <= 2^24, ``np.float64`` when <= 2^53,
    else ``None`` (the limb fallback of :func:`int_matmul` is needed)."""
    bound = _nonneg_int(k, "k") * _nonneg_int(a_absmax, "a_absmax") * _nonneg_int(b_absmax, "b_absmax")
    if bound <= EXACT_FLOAT32_LIMIT:
        return np.float32
    if bound <= EXACT_FLOAT64_LIMIT:
        return np.float64
    return None


def _nonneg_int(v, name: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise DTypeError(f"{name}: expected a non-negative integer, got {v!r} ({type(v).__name__})")
    v = int(v)
    if v < 0:
        raise AttributeValueError(f"{name}: expected a non-negative integer, got {v}")
    return v


def _absmax_arg(v, name: str) -> int | None:
    """A caller's magnitude bound: None, a non-negative integer, or an integer dtype (its range)."""
    if v is None:
        return None
    if isinstance(v, (type, np.dtype)):
        try:
            dt = np.dtype(v)
        except TypeError:
            dt = None
        if dt is None or dt not in SUPPORTED_DTYPES:
            raise DTypeError(f"{name}: expected a non-negative integer or an integer dtype, got {v!r}")
        return dtype_absmax(dt)
    return _nonneg_int(v, name)


def _dtype_names() -> str:
    return ", ".join(str(d) for d in SUPPORTED_DTYPES)


def _int_array(x, name: str) -> np.ndarray:
    if type(x) is not np.ndarray:
        x = np.asarray(x)
    if x.dtype not in _SUPPORTED:
        raise DTypeError(f"{name}: expected an integer array of dtype {_dtype_names()}, got dtype {x.dtype}")
    if x.ndim == 0:
        raise ShapeError(f"{name}: expected an array of at least 1 dimension for a matrix product, got a scalar")
    return x


def _out_dtype_arg(out_dtype, out) -> np.dtype:
    if out is not None and not isinstance(out, np.ndarray):
        raise DTypeError(f"out: expected a NumPy array, got {type(out).__name__}")
    if out_dtype is None:
        dt = np.dtype(np.int64) if out is None else getattr(out, "dtype", None)
    else:
        try:
            dt = np.dtype(out_dtype)
        except TypeError as e:
            raise DTypeError(f"out_dtype: expected np.int64 or np.int32, got {out_dtype!r}") from e
    if dt not in OUT_DTYPES:
        what = "out_dtype" if out_dtype is not None else "out"
        raise DTypeError(f"{what}: expected dtype int64 or int32, got {dt}")
    return dt


def _overflow_arg(overflow) -> str:
    if overflow not in OVERFLOW_MODES:
        raise AttributeValueError(f"overflow: expected one of {', '.join(map(repr, OVERFLOW_MODES))}, got {overflow!r}")
    return overflow


def _check_out(out, shape: tuple, dt: np.dtype) -> None:
    if out.dtype != dt:
        raise DTypeError(f"out: expected dtype {dt} (out_dtype), got {out.dtype}")
    if out.shape != shape:
        raise ShapeError(f"out: expected shape {shape} (the product's shape), got {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out: the array is read-only")


def scan_absmax(x: np.ndarray) -> int:
    """max |x| of an integer array as a Python int (two reductions, no temporaries; 0 for an empty array), exact
    where ``np.abs`` is not (|INT64_MIN| stays negative in int64)."""
    if x.size == 0:
        return 0
    hi = int(x.max())
    if x.dtype.kind == "u":
        return hi
    return max(hi, -int(x.min()))


def _padded_empty(shape: tuple, dtype) -> np.ndarray:
    """Uninitialised array whose rows are padded by 64 bytes when their byte length is a multiple of 256:
    power-of-two row strides make OpenBLAS operands alias in the cache (measured: [8, 1024] @ [1024, 1024]
    float32 1.9x faster with padded rows of the right operand)."""
    dt = np.dtype(dtype)
    n = shape[-1]
    pad = 64 // dt.itemsize if n and (n * dt.itemsize) % 256 == 0 else 0
    return np.empty(shape[:-1] + (n + pad,), dt)[..., :n]


def _float_copy(x: np.ndarray, fdt) -> np.ndarray:
    """x converted to float dtype ``fdt``, rows padded (see _padded_empty) when x has at least 2 dimensions."""
    if x.ndim < 2:
        return x.astype(fdt)
    y = _padded_empty(x.shape, fdt)
    np.copyto(y, x, casting="unsafe")
    return y


def _shapes(a: np.ndarray, b: np.ndarray) -> tuple[int, tuple]:
    """(K, result shape) of np.matmul(a, b); ShapeError naming the mismatch."""
    k = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k != kb:
        raise ShapeError(
            f"b: expected {k} rows (a's last dimension, K) for a {a.shape} @ b product, got b of shape {b.shape}"
        )
    a2 = a.shape if a.ndim >= 2 else (1,) + a.shape
    b2 = b.shape if b.ndim >= 2 else b.shape + (1,)
    ba, bb = a2[:-2], b2[:-2]
    if ba == bb or not bb:
        batch = ba
    elif not ba:
        batch = bb
    else:
        try:
            batch = np.broadcast_shapes(ba, bb)
        except ValueError as e:
            raise ShapeError(
                f"a, b: batch dimensions {ba} and {bb} do not broadcast (a {a.shape}, b {b.shape})"
            ) from e
    shape = batch + ((a2[-2],) if a.ndim >= 2 else ()) + ((b2[-1],) if b.ndim >= 2 else ())
    return k, shape


# ----------------------------------------------------------------------------------------------------------
# result conversion


def _float_to_int64(r: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """int64 copy of a float array of integers of magnitude < 2^31, through int32: NumPy's float -> int32 cast is
    vectorised and float -> int64 is not (measured 2x faster for cache-resident results; for large arrays, which
    are memory-bound, the int32 temporary only costs, so they are converted directly)."""
    if r.size > _VIA_INT32_MAX:
        if out is None:
            return r.astype(np.int64)
        out[...] = r
        return out
    t = r.astype(np.int32)
    if out is None:
        return t.astype(np.int64)
    out[...] = t
    return out


def _emit(r: np.ndarray, bound: int, dt: np.dtype, overflow: str, out: np.ndarray | None,
          fits: np.ndarray | None = None, neg: np.ndarray | None = None) -> np.ndarray:
    """Write the product into a ``dt`` array. ``r`` is either a float array of exact integers or an int64 array
    equal to the product modulo 2^64; ``bound`` >= max |product|. ``fits``/``neg`` (int64 fallback, only when
    bound >= 2^63) say where the product fits int64 and where it is negative."""
    lo, hi = (_INT64_MIN, _INT64_MAX) if dt == np.int64 else (-(2**31), 2**31 - 1)
    if dt == np.int64 and bound <= 2**31 - 1 and r.dtype.kind == "f":
        return _float_to_int64(r, out)
    if bound <= hi or (fits is None and dt == np.int64):
        # no overflow possible (or int64 wrap, which r already is): a plain conversion
        if out is None:
            return r.astype(dt)
        out[...] = r  # (assignment casts unsafely, and costs less per call than np.copyto)
        return out
    v = r if r.dtype == np.int64 else r.astype(np.int64)
    bad = None
    if dt == np.int32:
        bad = (v < lo) | (v > hi)
        if fits is not None:
            bad |= ~fits
    elif fits is not None:
        bad = ~fits
    if overflow == "raise":
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            hint = ", or out_dtype=np.int64" if dt == np.int32 else ""
            raise IntegerOverflowError(
                f"int_matmul: the exact product does not fit {dt} at index {idx} (overflow='raise'; use "
                f"overflow='wrap' or 'saturate'{hint})"
            )
        res = v
    elif overflow == "saturate":
        if neg is None:
            neg = v < 0
        res = np.where(bad, np.where(neg, lo, hi), v)
    elif dt == np.int32:  # wrap: the low 32 bits, two's complement (v is the product modulo 2^64)
        res = ((v + 2**31) & _MASK32) - 2**31
    else:
        res = v
    if out is None:
        return res.astype(dt)
    out[...] = res
    return out


# ----------------------------------------------------------------------------------------------------------
# limb fallback


@dataclass(frozen=True)
class _LimbPlan:
    """Split a (and b) into ``na`` (``nb``) limbs of ``sa`` (``sb``) bits: a = sum_i a_i 2^(sa*i), the lower
    limbs in [0, 2^sa) and the top limb a >> (sa*(na-1)) signed. Each limb-pair GEMM runs in float64 on blocks
    of ``kb`` rows of K, with kb * max|a_i| * max|b_j| <= 2^53: exact by the argument at EXACT_FLOAT64_LIMIT.
    The block results are summed in int64 (|sum| <= K*max|a_i|*max|b_j| < 2^62) and combined exactly in base
    2^32 digits (see _combine)."""

    na: int
    sa: int
    nb: int
    sb: int
    kb: int

    @staticmethod
    def limb_absmax(absmax: int, n: int, s: int) -> int:
        if n == 1:
            return absmax
        return max(2**s - 1, -(-absmax // 2 ** (s * (n - 1))))

    @staticmethod
    def width(absmax: int, n: int) -> int:
        bits = (absmax - 1).bit_length() if absmax > 0 else 0  # smallest t with absmax <= 2^t
        return max(1, -(-bits // n))

    @classmethod
    def choose(cls, k: int, a_absmax: int, b_absmax: int) -> _LimbPlan:
        best = None
        for na in range(1, _MAX_LIMBS + 1):
            sa = cls.width(a_absmax, na)
            ma = cls.limb_absmax(a_absmax, na, sa)
            for nb in range(1, _MAX_LIMBS + 1):
                sb = cls.width(b_absmax, nb)
                mb = cls.limb_absmax(b_absmax, nb, sb)
                p = ma * mb
                kb = k if p == 0 else min(k, EXACT_FLOAT64_LIMIT // p)
                if kb < 1 or k * p >= _LIMB_SUM_LIMIT:
                    continue
                blocks = -(-k // kb)
                cost = na * nb * (k + 64 * blocks)  # MACs per output element + ~64 per block (int64 sums)
                if best is None or cost < best[0]:
                    best = (cost, cls(na, sa, nb, sb, kb))
        if best is None:  # K beyond 2^46: not a realistic GEMM
            raise UnsupportedFeatureError(f"int_matmul: K = {k} is too large for the exact limb fallback")
        return best[1]

    @staticmethod
    def split(x: np.ndarray, n: int, s: int) -> list[np.ndarray]:
        """The n limbs of x as float64 arrays (padded rows), lowest first."""
        if n == 1:
            return [_float_copy(x, np.float64)]
        x = x.astype(np.int64, copy=False)
        mask = np.int64(2**s - 1)
        limbs = [_float_copy(x >> np.int64(s * i) & mask, np.float64) for i in range(n - 1)]
        limbs.append(_float_copy(x >> np.int64(s * (n - 1)), np.float64))
        return limbs


def _limb_products(al: list[np.ndarray], bl: list[np.ndarray], plan: _LimbPlan, k: int) -> list[tuple]:
    """[(sum over K of a_i @ b_j as int64, shift sa*i + sb*j)] for every limb pair."""
    terms = []
    for i, ai in enumerate(al):
        for j, bj in enumerate(bl):
            acc = None
            for k0 in range(0, max(k, 1), plan.kb):
                k1 = min(k, k0 + plan.kb)
                p = np.matmul(ai[..., k0:k1], bj[..., k0:k1, :]).astype(np.int64)
                acc = p if acc is None else acc + p
            terms.append((acc, plan.sa * i + plan.sb * j))
    return terms


def _combine(terms: list[tuple], need_sign: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Exact sum of t * 2^shift over ``terms`` (|t| < 2^62, shift >= 0) in base-2^32 digits (int64 arrays).

    Returns (the sum modulo 2^64 as int64, and with ``need_sign``: where it fits int64, where it is < 0)."""
    nd = max(s for _, s in terms) // 32 + 3
    shape = terms[0][0].shape
    d = [np.zeros(shape, np.int64) for _ in range(nd)]
    for t, shift in terms:
        q, r = divmod(shift, 32)
        low = 32 - r
        d[q] += (t & np.int64(2**low - 1)) << np.int64(r)  # in [0, 2^32)
        t = t >> np.int64(low)  # |t| < 2^61
        d[q + 1] += t & np.int64(_MASK32)
        d[q + 2] += t >> np.int64(32)  # |.| < 2^29; each digit gets < 3 * 64 terms below 2^32: no overflow
    for i in range(nd - 1):  # carry: d[i] in [0, 2^32) for i < nd-1, the top digit signed
        d[i + 1] += d[i] >> np.int64(32)
        d[i] &= np.int64(_MASK32)
    wrapped = ((d[1].astype(np.uint64) << np.uint64(32)) | d[0].astype(np.uint64)).view(np.int64)
    if not need_sign:
        return wrapped, None, None
    # value = d0 + d1 2^32 + R 2^64 with R = sum_{i>=2} d_i 2^(32(i-2)); it fits int64 iff R == 0 and
    # d1 < 2^31, or R == -1 and d1 >= 2^31. R == -1 iff d_2..d_{nd-2} are all ones and the top digit is -1.
    r_zero = np.ones(shape, bool)
    r_m1 = d[nd - 1] == -1
    for i in range(2, nd):
        r_zero &= d[i] == 0
        if i < nd - 1:
            r_m1 &= d[i] == _MASK32
    high = d[1] >= 2**31
    fits = (r_zero & ~high) | (r_m1 & high)
    return wrapped, fits, d[nd - 1] < 0


def _fallback(a: np.ndarray, b: np.ndarray, k: int, amax: int, bmax: int, dt, overflow, out,
              plan: _LimbPlan | None = None, b_limbs: list | None = None) -> np.ndarray:
    plan = plan or _LimbPlan.choose(k, amax, bmax)
    al = _LimbPlan.split(a, plan.na, plan.sa)
    bl = b_limbs if b_limbs is not None else _LimbPlan.split(b, plan.nb, plan.sb)
    bound = k * amax * bmax
    need_sign = bound > _INT64_MAX and overflow != "wrap"
    wrapped, fits, neg = _combine(_limb_products(al, bl, plan, k), need_sign)
    return _emit(wrapped, bound, dt, overflow, out, fits, neg)


# ----------------------------------------------------------------------------------------------------------
# public API


def _operand_bounds(a, b, k, a_absmax, b_absmax) -> tuple[int, int]:
    """Magnitude bounds for a and b: the callers', else the dtype's; an operand is scanned (smaller first) only
    while the bounds do not yet prove float32 exactness."""
    amax = dtype_absmax(a.dtype) if a_absmax is None else min(a_absmax, dtype_absmax(a.dtype))
    bmax = dtype_absmax(b.dtype) if b_absmax is None else min(b_absmax, dtype_absmax(b.dtype))
    todo = [(x.size, i) for i, (x, given) in enumerate(((a, a_absmax), (b, b_absmax))) if given is None]
    for _, i in sorted(todo):
        if k * amax * bmax <= EXACT_FLOAT32_LIMIT:
            break
        if i == 0:
            amax = scan_absmax(a)
        else:
            bmax = scan_absmax(b)
    return amax, bmax


def int_matmul(a, b, *, out_dtype=None, overflow: str = "wrap", a_absmax=None, b_absmax=None,
               out: np.ndarray | None = None) -> np.ndarray:
    """Exact integer ``a @ b`` with np.matmul's shapes: a [..., M, K] @ b [..., K, N] -> [..., M, N] (1-D
    operands as np.matmul treats them; batch dimensions broadcast).

    a, b: integer arrays (int8, uint8, int16, uint16, int32, uint32, int64; mixed dtypes allowed).
    out_dtype: np.int64 (default) or np.int32; ``out``, when given, must have the result's shape and dtype
    (and its dtype is the default out_dtype).
    overflow: what happens to products outside out_dtype's range: "wrap" (modulo 2^bits, two's complement),
    "saturate" (clamp), "raise" (IntegerOverflowError). For int64 a product can leave the range only when
    K*max|a|*max|b| >= 2^63.
    a_absmax, b_absmax: bounds on max |a| and max |b| (ints, or an integer dtype meaning its range) that spare
    the scan of the operand; a bound the values exceed is a caller's bug and can give wrong results.

    Computed with float32 BLAS when K*max|a|*max|b| <= 2^24, float64 BLAS when <= 2^53 (exact: see
    EXACT_FLOAT32_LIMIT), else by splitting the operands into limbs whose float64 products are exact.
    """
    a, b = _int_array(a, "a"), _int_array(b, "b")
    k, shape = _shapes(a, b)
    dt = _out_dtype_arg(out_dtype, out)
    overflow = _overflow_arg(overflow)
    if out is not None:
        _check_out(out, shape, dt)
    a_absmax, b_absmax = _absmax_arg(a_absmax, "a_absmax"), _absmax_arg(b_absmax, "b_absmax")
    amax, bmax = _operand_bounds(a, b, k, a_absmax, b_absmax)
    bound = k * amax * bmax
    # work on >= 2-D operands; np.matmul's 1-D rules are restored at the end
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out2 = out
    if out is not None:  # views of out with the 1-D operands' dimensions put back
        if a.ndim == 1:
            out2 = np.expand_dims(out2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            out2 = np.expand_dims(out2, -1)
    if bound <= EXACT_FLOAT64_LIMIT:
        fdt = np.float32 if bound <= EXACT_FLOAT32_LIMIT else np.float64
        r = np.matmul(a2.astype(fdt), _float_copy(b2, fdt))
        res = _emit(r, bound, dt, overflow, out2)
    else:
        res = _fallback(a2, b2, k, amax, bmax, dt, overflow, out2)
    if out is not None:
        return out
    if a.ndim == 1:
        res = res[..., 0, :]
    if b.ndim == 1:
        res = res[..., 0]
    return res


class IntMatrix:
    """A right operand b [..., K, N] prepared once for many exact products ``a @ b`` (hot loops).

    ``a_absmax`` (an int, or an integer dtype meaning its range) is the bound the left operands will respect;
    with b's own bound (``b_absmax``, scanned when not given) it picks the float type as in
    :func:`exact_float_dtype`, and b is converted once into it (rows padded against OpenBLAS's slow
    power-of-two strides), or split once into float64 limbs when neither float type is exact.

    :meth:`matmul` never returns an inexact result: a left operand whose values exceed what the prepared
    float type allows (``a_capacity``) is detected (free when its dtype alone proves it fits, else one min/max
    scan; ``check=False`` skips the scan and trusts ``a_absmax``) and computed by the exact general path.

    b is copied; later changes to the caller's array do not affect the IntMatrix. Thread-safe: 2-D products reuse
    scratch buffers of the calling thread (a product returned without ``out`` is valid until that thread's next
    product with this IntMatrix).
    """

    def __init__(self, b, *, a_absmax, b_absmax=None):
        b = _int_array(b, "b")
        if b.ndim < 2:
            raise ShapeError(f"b: expected a matrix [..., K, N] (at least 2 dimensions), got shape {b.shape}")
        if a_absmax is None:
            raise AttributeValueError("a_absmax: required (an int, or the left operands' integer dtype)")
        self.a_absmax: int = min(_absmax_arg(a_absmax, "a_absmax"), 2**63)  # no supported dtype goes beyond
        given = _absmax_arg(b_absmax, "b_absmax")
        self.b = b.copy()
        self.b.flags.writeable = False
        self.b_absmax: int = scan_absmax(self.b) if given is None else given
        self.k, self.n = b.shape[-2], b.shape[-1]
        self.shape = b.shape
        self.dtype = exact_float_dtype(self.k, self.a_absmax, self.b_absmax)
        kb = self.k * self.b_absmax
        if self.dtype is None:
            self._plan = _LimbPlan.choose(self.k, self.a_absmax, self.b_absmax)
            self._limbs = _LimbPlan.split(self.b, self._plan.nb, self._plan.sb)
            self.a_capacity: int | None = self.a_absmax
        else:
            self._bf = _float_copy(self.b, self.dtype)
            limit = EXACT_FLOAT32_LIMIT if self.dtype is np.float32 else EXACT_FLOAT64_LIMIT
            self.a_capacity = None if kb == 0 else limit // kb  # None: any a is exact (b is all zero, or K = 0)
        self._scratch: dict = {}  # per thread: (a buffer, result buffer) of the hot loop
        # the hot-loop fast path: left-operand dtypes whose range alone proves the prepared 2-D float product
        # exact -> whether that product also fits int32 (|a @ b| <= K * dtype bound * b_absmax < 2^31), which
        # allows the faster float -> int32 -> int64 conversion
        fast = self.dtype is not None and b.ndim == 2
        self._fast = {d: kb * dtype_absmax(d) <= 2**31 - 1 for d in SUPPORTED_DTYPES
                      if fast and (self.a_capacity is None or dtype_absmax(d) <= self.a_capacity)}

    def __repr__(self) -> str:
        kind = "limbs" if self.dtype is None else np.dtype(self.dtype).name
        return (f"IntMatrix(shape={self.shape}, b dtype={self.b.dtype}, a_absmax={self.a_absmax}, "
                f"b_absmax={self.b_absmax}, computed in {kind})")

    @cached_property
    def column_sums(self) -> np.ndarray:
        """int64 [..., N]: sum over K of b (the zero-point correction term). Wraps modulo 2^64 only when
        K*max|b| >= 2^63 (int64 b)."""
        s = np.add.reduce(self.b, axis=-2, dtype=np.int64)
        s.flags.writeable = False
        return s

    def _fits(self, a: np.ndarray, check: bool) -> tuple[bool, int]:
        """(whether the prepared path is exact for a, the magnitude bound to use for a)."""
        cap = self.a_capacity
        if cap is None:
            return True, self.a_absmax
        amax = dtype_absmax(a.dtype)
        if amax <= cap:
            return True, amax
        if not check:
            return True, min(self.a_absmax, cap)
        amax = scan_absmax(a)
        return amax <= cap, amax

    def _check_a(self, a) -> np.ndarray:
        a = _int_array(a, "a")
        if a.shape[-1] != self.k:
            raise ShapeError(
                f"a: expected last dimension {self.k} (K, the rows of b {self.shape}), got shape {a.shape}"
            )
        return a

    def _float_product(self, a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if a.ndim == 2 and self._bf.ndim == 2:  # the hot-loop case: reuse the scratch buffers (the calling thread's)
            m = a.shape[0]
            tid = threading.get_ident()
            bufs = self._scratch.get(tid)
            if bufs is None or bufs[0].shape[0] < m:
                bufs = self._scratch[tid] = (np.empty((m, self.k), self.dtype), _padded_empty((m, self.n), self.dtype))
            af = bufs[0][:m]
            af[...] = a
            r = bufs[1][:m] if out is None else out
            return np.matmul(af, self._bf, out=r)
        return np.matmul(a.astype(self.dtype), self._bf, out=out)

    def matmul(self, a, *, out: np.ndarray | None = None, out_dtype=None, overflow: str = "wrap",
               check: bool = True) -> np.ndarray:
        """Exact ``a @ b`` for integer a [..., M, K] (or [K]); int64 result [..., M, N], or int32 / ``out`` with
        ``overflow`` as in :func:`int_matmul`. The result is a new array unless ``out`` is given."""
        via32 = self._fast.get(a.dtype) if type(a) is np.ndarray else None
        if via32 is not None and a.ndim == 2 and a.shape[1] == self.k and overflow in OVERFLOW_MODES:
            # fast path (RNN steps): a's dtype proves exactness; an int64 result, or int32 when it cannot overflow
            want = _I64 if out_dtype is None or out_dtype is np.int64 else None
            if via32 and out_dtype is np.int32:
                want = _I32
            if want is not None and out is None:
                if a.shape[0] * self.n <= _SMALL_RESULT:  # small: fresh arrays cost less than the scratch logic
                    r = np.matmul(a.astype(self.dtype), self._bf)
                else:
                    r = self._float_product(a)
                if want is _I32:
                    return r.astype(np.int32)
                return _float_to_int64(r) if via32 else r.astype(np.int64)
            if want is not None and type(out) is np.ndarray and out.dtype == want and out.shape == (a.shape[0], self.n):
                r = self._float_product(a)
                if via32 and want is _I64:
                    return _float_to_int64(r, out)
                out[...] = r
                return out
        a = self._check_a(a)
        dt = _out_dtype_arg(out_dtype, out)
        overflow = _overflow_arg(overflow)
        if out is not None:
            _check_out(out, _shapes(a, self.b)[1], dt)
        ok, amax = self._fits(a, check)
        if not ok:  # a exceeds what the prepared operand allows: the exact general path
            return int_matmul(a, self.b, out_dtype=dt, overflow=overflow, a_absmax=amax, b_absmax=self.b_absmax,
                              out=out)
        bound = self.k * amax * self.b_absmax
        if self.dtype is None:
            a2 = a[None, :] if a.ndim == 1 else a
            out2 = out if out is None or a.ndim > 1 else np.expand_dims(out, -2)
            res = _fallback(a2, self.b, self.k, amax, self.b_absmax, dt, overflow, out2, self._plan, self._limbs)
            return out if out is not None else (res[..., 0, :] if a.ndim == 1 else res)
        r = self._float_product(a)
        return _emit(r, bound, dt, overflow, out)

    def matmul_float(self, a, *, out: np.ndarray | None = None, check: bool = True) -> np.ndarray:
        """``a @ b`` as exact integers in the prepared float type (float32 or float64), for callers that go on
        in floating point (e.g. rescaling an int32 accumulator), sparing the int64 conversion.

        ``out``: a float array of that dtype and the product's shape (rows may be padded). Raises
        UnsupportedFeatureError when the prepared operand needs the limb fallback, or when a's values exceed
        ``a_capacity``."""
        a = self._check_a(a)
        if self.dtype is None:
            raise UnsupportedFeatureError(
                f"IntMatrix.matmul_float: K*a_absmax*b_absmax = {self.k * self.a_absmax * self.b_absmax} "
                f"exceeds 2^53, so the product is not exact in any float type; use matmul"
            )
        ok, amax = self._fits(a, check)
        if not ok:
            raise UnsupportedFeatureError(
                f"a: max |a| = {amax} exceeds a_capacity = {self.a_capacity} of this IntMatrix (a_absmax "
                f"{self.a_absmax}), so the {np.dtype(self.dtype).name} product would not be exact; use matmul"
            )
        if out is not None:
            shape = _shapes(a, self.b)[1]
            if not isinstance(out, np.ndarray) or out.dtype != self.dtype or out.shape != shape:
                raise ShapeError(
                    f"out: expected a {np.dtype(self.dtype).name} array of shape {shape}, got "
                    f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}"
                )
            return self._float_product(a, out)
        return self._float_product(a, _padded_empty(_shapes(a, self.b)[1], self.dtype))


__all__ = [
    "EXACT_FLOAT32_LIMIT",
    "EXACT_FLOAT64_LIMIT",
    "OVERFLOW_MODES",
    "SUPPORTED_DTYPES",
    "IntMatrix",
    "IntegerOverflowError",
    "dtype_absmax",
    "exact_float_dtype",
    "int_matmul",
]
