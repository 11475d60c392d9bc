"""float32 tanh and logistic as the LiteRT interpreter computes them: Eigen's ``array().tanh()`` and
``array().logistic()`` (``tensor_utils::ApplyTanhToVector`` / ``ApplySigmoidToVector``, and the TANH / LOGISTIC
ops), bit for bit.

Which Eigen, which instructions. The x86-64 ``ai-edge-litert`` wheel (2.3.0) builds Eigen for SSE packets of 4
floats *without FMA* (so every multiply-add rounds twice), and Eigen's code for these two functions has been the
same since late 2024. This was established by probing the interpreter (``scripts/probe_eigen_activations.py``:
1.37 million inputs, and vectors of every length 1-7 for the scalar tail) and matches Eigen built with SSE2, SSE4.1
or AVX; an AVX2+FMA build would differ in about 20 % of tanh values. Eigen is compiled in, so the result does not
depend on the CPU the interpreter runs on; the one host dependency is the C library's ``expf`` (below).

* ``tanh`` (``EIGEN_FAST_MATH``): clamp x to ±7.90738964080810547, then the odd/even 9/8-degree rational function
  ``(x³·p(x²) + x) / q(x²)`` with Horner steps ``a·x² + c`` rounded after the product and after the sum, and one
  float32 division. Eigen evaluates the scalar tail with the same formula, so the element's position does not
  matter.
* ``logistic``, packets of 4: ``e = exp(min(x, 16.6355324)/2)²`` from a Cephes range reduction and a degree-5
  polynomial, exact scaling by 2^m, then ``e / (1 + e)``; 0 below -104.
* ``logistic``, scalar elements (those before the first 16-byte aligned destination element, and the tail after
  the last whole packet): ``e = expf(min(x, 16.6355324))``, ``e / (1 + e)`` — the C library's ``expf``, called
  here through ctypes (glibc's is not correctly rounded for about 7e-5 of the inputs); without a loadable C
  library, ``float32(exp(float64 x))``.

So a logistic result depends on where in the destination buffer an element lies: :func:`logistic` takes the
destination's start offset (in floats, modulo 4) and the vector lengths the kernel applies it to.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

from .. import _native

_F32 = np.float32
PACKET = 4
"""Floats per SSE packet: the vector loop's width (and the destination alignment it seeks, 16 bytes)."""

TANH_CLAMP = _F32(7.90738964080810547)
_TANH_ALPHA = tuple(_F32(v) for v in (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1))
_TANH_BETA = tuple(_F32(v) for v in (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0))
LOGISTIC_HI = _F32(16.6355324)
LOGISTIC_LO = _F32(-104.0)
_LOG2E = _F32(1.44269504088896341)
_C1 = _F32(-0.693359375)
_C2 = _F32(2.12194440e-4)
_P2, _P3, _P4, _P5 = (_F32(v) for v in (0.49999141693115234375, 0.16666877269744873046875,
                                         4.1898667812347412109375e-2, 8.33471305668354034423828125e-3))


def _madd(a, b, c):
    """Eigen's ``pmadd`` without FMA: round(round(a·b) + c), float32."""
    return (a * b).astype(_F32) + c


def _horner(x2: np.ndarray, coeffs) -> np.ndarray:
    r = np.full_like(x2, coeffs[0])
    for k in coeffs[1:]:
        r = _madd(r, x2, k)
    return r


def tanh(x: np.ndarray) -> np.ndarray:
    """float32 tanh of every element of x (any shape) as the interpreter's Eigen computes it (position-free)."""
    x = np.asarray(x, _F32)
    with np.errstate(all="ignore"):
        c = np.maximum(np.minimum(x, TANH_CLAMP), -TANH_CLAMP)
        x2 = c * c
        x3 = x2 * c
        p = _madd(x3, _horner(x2, _TANH_ALPHA), c)
        return (p / _horner(x2, _TANH_BETA)).astype(_F32)


def logistic_packet(x: np.ndarray) -> np.ndarray:
    """float32 logistic of every element as Eigen's packet path computes it (elements inside whole packets)."""
    x = np.asarray(x, _F32)
    with np.errstate(all="ignore"):
        half = _F32(0.5)
        v = np.minimum(x, LOGISTIC_HI) * half
        m = np.floor(_madd(v, _LOG2E, half))
        r = _madd(m, _C1, v)
        r = _madd(m, _C2, r)
        r2 = r * r
        p_even = _madd(r2, _P4, _P2)
        p_odd = _madd(r2, _P5, _P3)
        p = _madd(r, p_odd, p_even)
        p = _madd(r2, p, r + _F32(1))
        # 2^m as the float with biased exponent m + 127 (m is in [-76, 12] here, so exact and normal)
        mi = np.nan_to_num(m, nan=0.0, posinf=0.0, neginf=0.0).astype(np.int32)
        scale = ((np.clip(mi + 127, 0, 255).astype(np.uint32)) << 23).view(_F32)
        e = p * scale
        e = e * e
        out = (e / (_F32(1) + e)).astype(_F32)
        return np.where(x < LOGISTIC_LO, _F32(0), out).astype(_F32)


def _bind(lib: ctypes.CDLL) -> None:
    lib.fusedrnn_expf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.fusedrnn_expf.restype = None


LIBM = _native.Library("libm", 1, _bind)
"""numerics/_libm.c: the C library's expf over an array in one call."""


def _load_expf():
    name = ctypes.util.find_library("m") or ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name)
        fn = lib.expf
    except (OSError, AttributeError, TypeError):  # pragma: no cover - no C library to load
        return None
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


_EXPF = _load_expf()


def expf(x: np.ndarray) -> np.ndarray:
    """The C library's float ``expf`` of every element (float32): one call of the compiled loop
    (numerics/_libm.c); without it the C library's expf element by element through ctypes (slow), or
    float32(exp(float64)) without a C library."""
    x = np.ascontiguousarray(x, _F32)
    lib = LIBM.load()
    if lib is not None:
        out = np.empty_like(x)
        lib.fusedrnn_expf(x.ctypes.data, out.ctypes.data, x.size)
        return out
    if _EXPF is None:  # pragma: no cover
        with np.errstate(over="ignore"):
            return np.exp(x.astype(np.float64)).astype(_F32)
    flat = x.reshape(-1)
    return np.array([_EXPF(float(v)) for v in flat], _F32).reshape(x.shape)


def logistic_scalar(x: np.ndarray) -> np.ndarray:
    """float32 logistic as Eigen's scalar path computes it: e = expf(min(x, 16.6355324)), e / (1 + e)."""
    x = np.asarray(x, _F32)
    e = expf(np.where(x > LOGISTIC_HI, LOGISTIC_HI, x))
    with np.errstate(all="ignore"):
        return (e / (_F32(1) + e)).astype(_F32)


def scalar_mask(n: int, start=0) -> np.ndarray:
    """bool[..., n]: which elements of an n-element destination starting ``start`` floats after a 16-byte boundary
    Eigen computes one at a time (the prologue up to the first aligned element and the tail after the last whole
    packet); the others go through packets. ``start`` may be an array of starts (one destination each)."""
    start = np.asarray(start, np.int64)[..., None]
    head = np.minimum((-start) % PACKET, n)
    tail_start = head + (n - head) // PACKET * PACKET
    idx = np.arange(n)
    return (idx < head) | (idx >= tail_start)


def logistic(x: np.ndarray, start: int = 0, rows: bool = False) -> np.ndarray:
    """float32 logistic as ``ApplySigmoidToVector`` computes it for a destination at element offset ``start``
    (modulo 4) from a 16-byte boundary (TFLite's buffers are 64-byte aligned; a gate buffer inside a scratch
    tensor starts at ``k·n_batch·n_cell``). x [..., n]: one vector of all elements (``rows=False``), or each
    last-axis row a separate call whose destination starts ``row·n`` floats after ``start`` (``rows=True``: a
    batch-major kernel's per-row calls)."""
    x = np.asarray(x, _F32)
    out = logistic_packet(x)
    if rows and x.ndim >= 1:
        n = x.shape[-1]
        lead = x.reshape(-1, n)
        mask = scalar_mask(n, start + np.arange(lead.shape[0]) * n).reshape(x.shape)
    else:
        mask = scalar_mask(x.size, start).reshape(x.shape)
    if mask.any():
        out[mask] = logistic_scalar(x[mask])
    return out
