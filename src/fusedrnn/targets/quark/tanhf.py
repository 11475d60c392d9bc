"""float32 ``tanhf`` exactly as the C library the Quark kernel links against computes it, vectorised.

Quark's CPU kernel calls ``std::tanh(float)``, i.e. the C library's ``tanhf``. On x86-64 Linux with glibc up
to at least 2.36 that is the fdlibm algorithm (``tanhf`` on top of ``expm1f`` in float32 arithmetic), which
is not correctly rounded (about 5 % of float32 inputs differ by one ulp from the correctly rounded tanh).
:func:`tanhf_fdlibm` re-implements that algorithm branch by branch in NumPy float32 arithmetic (IEEE binary32,
round to nearest even, no excess precision), so it agrees bit for bit wherever the C library is fdlibm's.

:func:`tanhf` picks a backend once per process by probing the local C library through ``ctypes``:

* ``"fdlibm"`` - the emulation above (fast; the default when no C library can be probed);
* ``"correctly_rounded"`` - ``float32(tanh(float64))`` with the rare near-midpoint results recomputed by the
  C library (for C libraries whose ``tanhf`` is correctly rounded, e.g. CORE-MATH based ones);
* ``"libm"`` - the C library's ``tanhf`` element by element through ``ctypes`` (exact by construction, slow).

``set_backend(name)`` pins one; ``backend()`` reports the choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

from ...errors import AttributeValueError

BACKENDS = ("auto", "fdlibm", "correctly_rounded", "libm")

_F = np.float32


def _f(word: int) -> np.ndarray:
    """A float32 constant from its bit pattern, as a 0-d array (cheaper than a NumPy scalar in ufunc calls)."""
    return np.array(word, dtype=np.uint32).view(np.float32)


def _c32(v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _ci(v: int) -> np.ndarray:
    return np.array(v, dtype=np.int32)


# fdlibm's float constants, by bit pattern
_LN2_HI = _f(0x3F317180)
_LN2_LO = _f(0x3717F7D1)
_INVLN2 = _f(0x3FB8AA3B)
_Q = [_f(w) for w in (0xBD088889, 0x3AD00D01, 0xB8A670CD, 0x36867E54, 0xB457EDBB)]
_ONE, _TWO, _HALF, _THREE, _SIX = _c32(1.0), _c32(2.0), _c32(0.5), _c32(3.0), _c32(6.0)
_C7F, _C23, _CZERO = _ci(0x7F), _ci(23), _ci(0)
_U_ABS = np.array(0x7FFFFFFF, dtype=np.uint32)


_I32 = np.int32


def _expm1f_tanh(y: np.ndarray, *, exact_bound: bool = False, near: bool = True) -> np.ndarray:
    """fdlibm ``expm1f(y)`` for the arguments ``tanhf`` passes when |x| < 9.5: y = 2|x| in [2, 19) or
    y = -2|x| in (-2, 0]. Dense: every lane computes every branch's formula, one select at the end (fancy
    indexing costs more than arithmetic on these small arrays); lanes outside the domain give garbage.

    fdlibm's reduction k: 0 for |y| <= ln2/2, -1 for ln2/2 < |y| < 1.5 ln2 (y < 0 here), trunc(y/ln2 +- 0.5)
    above. On this domain the last formula gives the same k everywhere except at y = -0x1.62e430p-2 (the
    k = 0 bound, where it gives -1; checked exhaustively): ``exact_bound`` corrects that lane, otherwise the
    caller does (:data:`_X0_BITS`). ``near=False`` promises that no y is >= 2 (skips that branch). Reachable
    branches: k = 0, k = -1, k in {-2, -3} ("k <= -2") and k in [3, 27] (k < 23 and k >= 23 forms). fdlibm's
    |y| < 2^-25 shortcut returns y, which the k = 0 formula also gives. With k = -1 or 0, y - k*ln2_hi is
    fdlibm's y + ln2_hi or y.
    """
    k = (_INVLN2 * y + np.copysign(_HALF, y)).astype(_I32)  # C float -> int: truncation
    if exact_bound:
        k = np.where(y.view(np.uint32) == np.uint32(0xBEB17218), _CZERO, k)
    tk = k.astype(np.float32)
    hi = y - tk * _LN2_HI  # exact
    lo = tk * _LN2_LO
    xr = hi - lo
    c = (hi - xr) - lo
    hfx = _HALF * xr
    hxs = xr * hfx
    r1 = _ONE + hxs * (_Q[0] + hxs * (_Q[1] + hxs * (_Q[2] + hxs * (_Q[3] + hxs * _Q[4]))))
    t = _THREE - r1 * hfx
    e = hxs * ((r1 - t) / (_SIX - xr * t))
    r0 = xr - (xr * e - hxs)  # k == 0
    e = (xr * (e - c) - c) - hxs
    r_m1 = _HALF * (xr - e) - _HALF  # k == -1
    ex = e - xr
    neg = k < 0
    if near:  # some lane has k >= 2 (y >= 2)
        two_mk = ((_C7F - k) << _C23).view(np.float32)  # 2^-k (k in [-3, 27])
        yk = np.where(neg, _ONE - ex, np.where(k < _C23, (_ONE - two_mk) - ex, (xr - (e + two_mk)) + _ONE))
    else:
        yk = _ONE - ex
    yk = (yk.view(_I32) + (k << _C23)).view(np.float32)  # add k to the exponent
    yk = np.where(neg, yk - _ONE, yk)  # the k <= -2 form subtracts 1 after scaling
    return np.where(k == 0, r0, np.where(k == -1, r_m1, yk))


_NINE_HALF = _c32(9.5)  # fdlibm's tanhf is exactly +-1 from here on (1 - 2/(e^19 + 1) rounds to 1)
_X0_BITS = 0x3E317218  # |x| whose argument -2|x| is the expm1f k = 0 bound (see _expm1f_tanh)
_X0_T = _expm1f_tanh(np.array([-2 * np.uint32(_X0_BITS).view(np.float32)], np.float32), exact_bound=True)[0]
_X0_TANH = -_X0_T / (_X0_T + _TWO)


def tanhf_fdlibm(x, *, finite: bool = False) -> np.ndarray:
    """fdlibm/glibc ``tanhf`` of a float32 array (any shape; NaN and +-inf handled), returned as float32.

    fdlibm's branches |x| < 2^-55 (x*(1+x)) and |x| >= 22 (1 - tiny) need no lanes of their own: the general
    formula returns x for such tiny x, and tanhf is exactly +-1 from |x| = 9.5 on, so |x| is capped there.
    ``finite=True`` promises no NaN (skips that check). Verified against glibc on every float32.
    """
    x = np.asarray(x, dtype=np.float32)
    ix = x.view(np.uint32) & _U_ABS
    with np.errstate(all="ignore"):
        y = _TWO * np.minimum(ix.view(np.float32), _NINE_HALF)
        ge1 = ix >= 0x3F800000
        if ge1.any():
            t = _expm1f_tanh(np.where(ge1, y, -y))
            t2 = t + _TWO
            z = np.where(ge1, _ONE - _TWO / t2, -t / t2)
        else:  # every |x| < 1
            t = _expm1f_tanh(-y, near=False)
            z = -t / (t + _TWO)
        z = np.copysign(z, x)
        hit = ix == _X0_BITS
        if hit.any():
            z = np.where(hit, np.copysign(_X0_TANH, x), z)
        if not finite and np.any(ix > 0x7F800000):  # NaN: fdlibm returns NaN + 1 (or -1), i.e. x quieted
            z = np.where(ix > 0x7F800000, (x.view(np.uint32) | np.uint32(0x00400000)).view(np.float32), z)
    return z


@functools.lru_cache(maxsize=1)
def _libm():
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        fn = lib.tanhf
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float]
    return fn


def libm_available() -> bool:
    """Whether the C library's ``tanhf`` can be called through ctypes."""
    return _libm() is not None


def tanhf_libm(x) -> np.ndarray:
    """The C library's ``tanhf`` element by element (exact by construction; about 1 us per element)."""
    fn = _libm()
    if fn is None:
        raise AttributeValueError("tanhf backend: 'libm' requested but no C math library is loadable via ctypes")
    x = np.asarray(x, dtype=np.float32)
    flat = x.reshape(-1)
    out = np.fromiter((fn(float(v)) for v in flat), dtype=np.float32, count=flat.size)
    return out.reshape(x.shape)


def tanhf_correctly_rounded(x) -> np.ndarray:
    """Correctly rounded float32 tanh: float64 tanh rounded to float32; results whose float64 value lies
    within 2^-40 (relative) of a float32 rounding boundary are recomputed by the C library's ``tanhf``."""
    x = np.asarray(x, dtype=np.float32)
    d = np.tanh(x.astype(np.float64))
    r = d.astype(np.float32)
    r64 = r.astype(np.float64)
    up = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(r, np.float32(-np.inf)).astype(np.float64)
    near = np.minimum(np.abs(d - 0.5 * (r64 + up)), np.abs(d - 0.5 * (r64 + down)))  # to the rounding bounds
    hard = (near <= np.abs(d) * 2.0**-40) & (d != 0)
    if hard.any():
        r[hard] = tanhf_libm(x[hard])
    return r


_PROBE_SEED = 20261121


@functools.lru_cache(maxsize=1)
def _probe() -> str:
    """The backend whose results agree with the C library on a probe set (fdlibm first)."""
    fn = _libm()
    if fn is None:
        return "fdlibm"
    rng = np.random.default_rng(_PROBE_SEED)
    words = rng.integers(0x30000000, 0x42000000, size=3000, dtype=np.uint32)
    x = np.concatenate([words.view(np.float32), -words[:500].view(np.float32),
                        np.float32([0.0, 1.0, 0.5, 2.0**-25, 21.9, 22.0, 100.0])])
    ref = tanhf_libm(x)
    if np.array_equal(tanhf_fdlibm(x).view(np.uint32), ref.view(np.uint32)):
        return "fdlibm"
    if np.array_equal(tanhf_correctly_rounded(x).view(np.uint32), ref.view(np.uint32)):
        return "correctly_rounded"
    return "libm"


_pinned: str | None = None


def set_backend(name: str) -> None:
    """Pin the tanhf backend (one of :data:`BACKENDS`; ``"auto"`` probes the C library again)."""
    global _pinned
    if name not in BACKENDS:
        raise AttributeValueError(f"tanhf backend: expected one of {BACKENDS}, got {name!r}")
    _pinned = None if name == "auto" else name


def backend() -> str:
    """The backend :func:`tanhf` uses."""
    return _pinned or _probe()


_IMPL = {"fdlibm": tanhf_fdlibm, "correctly_rounded": tanhf_correctly_rounded, "libm": tanhf_libm}


def tanhf(x, *, finite: bool = False) -> np.ndarray:
    """float32 tanh that agrees bit for bit with the C library's ``tanhf`` (see the module docstring);
    ``finite=True`` promises that x holds no NaN."""
    name = backend()
    return tanhf_fdlibm(x, finite=finite) if name == "fdlibm" else _IMPL[name](x)
