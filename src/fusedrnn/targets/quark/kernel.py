"""The ExtendedLSTM recurrence (quark.md section 3, step 3), vectorised over directions and batch.

Inputs are int16-domain integers (q - 32768). The whole loop runs in C (``_compiled``, bit-identical) when the
kernel library builds; otherwise, and under the engine setting "numpy" (``$FUSEDRNN_ENGINE``,
:func:`fusedrnn.cells.dispatch.using`, or ``_compiled.use_engine("numpy")`` for Quark alone), the NumPy loop
below runs: per step a fixed number of NumPy calls on [D, B, 4H] arrays, the input projection of all timesteps
one exact GEMM before the loop. Every batch row is an independent sequence with its own arithmetic.
"""

from __future__ import annotations

import threading

import numpy as np

from ... import conventions
from ...numerics import core
from ...numerics.int_matmul import IntMatrix, int_matmul
from . import _compiled
from .fixed import round_half_away, round_int_c_small, srs, srs_fn, srs_hidden_fn
from .params import KernelParams
from .tanhf import tanhf

_F32 = np.float32
_ORDER = conventions.gate_order("lstm", "quark")  # the gate blocks of W, R and B: i, o, f, c (c = candidate g)
_I, _O, _F, _C = (_ORDER.index(g) for g in "iofg")
if _C != 3:  # the loop takes the three sigmoid gates as one slice [0, 3H) before the candidate, as the kernel does
    raise ImportError(f"quark: the loop expects the candidate gate last, got the gate order {_ORDER!r}")
_SCALE_SIG = _F32(2.0**-25)  # sigmoid gates: tanh(g / 2^25)
_SCALE_TANH = _F32(2.0**-24)  # candidate gate: tanh(g / 2^24)
_Q15 = 2**15  # |x'|, |W'|, |R'|, |h| <= 2^15


class Recurrence:
    """The recurrence for one set of weights, prepared once and run on any number of input sequences.

    wq [D, 4H, I], rq [D, 4H, H]: int16-domain integers (gate order i, o, f, c); p the kernel's constants;
    ``reverse[d]`` says whether direction d reads x backwards (its outputs are stored in input time order);
    y_scale / y_zero_point dequantize Y. The C kernel's packed weights are made on the first compiled run and
    kept; the object is immutable after that and safe to share between threads.
    """

    def __init__(self, wq: np.ndarray, rq: np.ndarray, p: KernelParams, *, reverse: tuple[bool, ...],
                 faithful: bool, y_scale: np.float32, y_zero_point: int):
        self.wq = np.asarray(wq, dtype=np.int64)
        self.rq = np.asarray(rq, dtype=np.int64)
        self.p, self.reverse, self.faithful = p, tuple(reverse), faithful
        self.y_scale, self.y_zero_point = np.float32(y_scale), int(y_zero_point)
        self._packed = None
        self._lock = threading.Lock()

    def _pack(self) -> _compiled.Packed:
        with self._lock:
            if self._packed is None:
                self._packed = _compiled.pack(self.wq, self.rq, self.p, reverse=self.reverse,
                                              faithful=self.faithful, y_scale=self.y_scale,
                                              y_zero_point=self.y_zero_point)
            return self._packed

    def run(self, xcodes: np.ndarray, h0: np.ndarray | None = None, c0: np.ndarray | None = None, *,
            dequantize: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """xcodes [T, B, I] uint16 codes of X; h0 [D, B, H] int16-domain initial hidden state (default the
        kernel's ``ohz``), c0 [D, B, H] float32 initial cell (default 0). Returns (Y's uint16 codes
        [T, D, B, H], h_T [D, B, H] int16-domain int64, c_T [D, B, H] float32, Y float32 [T, D, B, H] when
        ``dequantize`` else None)."""
        T, B, _ = xcodes.shape
        D, G, _ = self.wq.shape
        H = G // 4
        p = self.p
        h = np.full((D, B, H), p.ohz, dtype=np.int16) if h0 is None else np.asarray(h0, dtype=np.int64)
        c = np.zeros((D, B, H), dtype=_F32) if c0 is None else np.asarray(c0, dtype=_F32)
        lib = _compiled.library()
        x16 = (np.asarray(xcodes, dtype=np.uint16) ^ np.uint16(0x8000)).view(np.int16)  # q - 32768
        if lib is not None:
            y, h, c, yf = _compiled.run(lib, self._pack(), x16, h.astype(np.int16), c, dequantize=dequantize)
            return y, h.astype(np.int64), c, yf
        y, h, c = _numpy_loop(x16.astype(np.int64), self.wq, self.rq, p, reverse=self.reverse,
                              faithful=self.faithful, h=h.astype(np.int16), c=c.copy())
        yq = (y.view(np.uint16) ^ np.uint16(0x8000))
        yf = _dequantize(yq, self.y_scale, self.y_zero_point) if dequantize else None
        return yq, h.astype(np.int64), c, yf


def _dequantize(yq: np.ndarray, scale: np.float32, zero_point: int) -> np.ndarray:
    return (yq.astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)


def _numpy_loop(xq: np.ndarray, wq: np.ndarray, rq: np.ndarray, p: KernelParams, *, reverse: tuple[bool, ...],
                faithful: bool, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The NumPy loop: xq [T, B, I] int64, h int16 [D, B, H], c float32 [D, B, H] (updated).
    Returns (y int16 [T, D, B, H] int16-domain, h_T int16, c_T float32)."""
    T, B, I = xq.shape  # noqa: E741
    D, G, _ = wq.shape
    H = G // 4
    xsum = xq.sum(axis=2)  # [T, B], exact
    xsum = np.stack([xsum[::-1] if r else xsum for r in reverse])  # [D, T, B]
    xs = srs(xsum * p.qa, p.xss, faithful=faithful)
    # Input part of every gate for every step, hoisted out of the loop: one exact GEMM for all directions.
    # |x'|, |W'| <= 2^15, so every partial sum is <= I * 2^30 <= 2^53 for I <= 2^23: float64 BLAS is exact.
    xs16 = xq.astype(np.int16)
    xd = np.stack([xs16[::-1] if r else xs16 for r in reverse]).reshape(D, T * B, I)
    proj = int_matmul(xd, np.swapaxes(wq, 1, 2).astype(np.int16), a_absmax=_Q15, b_absmax=_Q15)
    proj = proj.reshape(D, T, B, G)
    a = srs(srs(proj, p.xw, faithful=faithful, bound=I * _Q15 * _Q15) * p.qx, p.xwq, faithful=faithful)
    gx = a - xs[..., None] + p.qc[:, None, None, :]  # [D, T, B, 4H] int64
    rt = np.swapaxes(rq, 1, 2).astype(np.int16)  # [D, H, 4H]
    rmats = [IntMatrix(rt[d], a_absmax=_Q15, b_absmax=_Q15) for d in range(D)]  # 2-D: the fast per-step path
    hr_buf = np.empty((D, B, G), dtype=np.int64)

    y = np.empty((T, D, B, H), dtype=np.int16)
    gate_scale = np.full(G, _SCALE_SIG, dtype=_F32)
    gate_scale[_C * H:] = _SCALE_TANH
    ohs = np.int64(p.ohs)
    ohz_term = np.int64(p.ohz) << np.int64(p.oh) if faithful else None
    h_bound = H * _Q15 * _Q15  # |h @ R'|
    hq_bound = ((h_bound >> p.hr) + 1) * abs(p.qh)  # |srs(h @ R', hr) * qh|
    srs_hr = srs_fn(p.hr, faithful=faithful, bound=h_bound)
    srs_hrq = srs_fn(p.hrq, faithful=faithful, bound=hq_bound)
    srs_hss = srs_fn(p.hss, faithful=faithful)
    qh, qb = np.int64(p.qh), np.int64(p.qb)
    requantize_h = srs_hidden_fn(p.oh) if faithful else None
    srs_oh = None if faithful else srs_fn(p.oh, faithful=False)
    half, two24 = _F32(0.5), np.float64(2.0**24)
    for t in range(T):
        for d in range(D):
            rmats[d].matmul(h[d], out=hr_buf[d])
        g = gx[:, t] + srs_hrq(srs_hr(hr_buf) * qh)
        if p.qb:  # the zero-point term of R (0 for a symmetric R)
            g -= srs_hss(h.sum(axis=2) * qb)[..., None]  # exact sum (int64 accumulator)
        # float32(g / 2^25) for i, o, f and float32(g / 2^24) for c: rounding g to float32 then scaling by a power
        # of two is the same (no underflow). Faithful: the kernel's int32 sum wraps, and astype(int32) wraps too.
        gf = (g.astype(np.int32) if faithful else g).astype(_F32) * gate_scale
        v = tanhf(gf, finite=True)
        # The kernel computes float(tanhf(.) * 0.5 + 0.5) in double. t = tanhf(g/2^25) is 0 or |t| >= ~2^-25, so t/2
        # has no bit below 2^-49 and 0.5 + t/2 < 2 is exact in double: one rounding, as in float32 arithmetic.
        sig = v[..., : _C * H] * half + half
        i, o, f = (sig[..., k * H:(k + 1) * H] for k in (_I, _O, _F))
        c = i * v[..., _C * H:] + f * c  # i * cc + f * c, float32
        hf = o * tanhf(c, finite=True)  # o * tanh(c)
        d = hf.astype(np.float64) * two24
        if faithful:
            h = requantize_h(round_int_c_small(d) * ohs + ohz_term)  # |d| <= 2^24: |hf| <= 1
        else:  # round(h / y_scale), then the zero point, then saturate: |h_int * ohs| <= 2^24 * 2^31
            r = srs_oh(round_half_away(d) * ohs) + p.ohz
            h = core.sat(r, 16).astype(np.int16)
        y[t] = h
    for d in range(D):
        if reverse[d]:
            y[:, d] = y[::-1, d].copy()
    return y, h, c
