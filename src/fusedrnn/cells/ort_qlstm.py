"""onnxruntime's ``com.microsoft::DynamicQuantizeLSTM`` as its CPU kernel computes it: float32 arithmetic, MLAS's
activation approximations, exact integer GEMMs, and its row semantics with ``sequence_lens``.

Per direction (``deep_cpu_lstm`` / ``uni_directional_lstm`` with uint8 weights, one intra-op thread):

* X[:maxlen] (maxlen = max sequence length, all B rows) is quantized once to uint8 (:func:`quantize_block`); the
  input projection is ``float32(acc) * float32(s_x * s_w[col])`` with the exact int32 product ``acc``;
* every step quantizes the previous hidden state of **all** B rows as one block (a finished row contributes its
  last h, or 0 when the node has a Y output, whose finished rows are zero-filled and fed back); the recurrent
  product is added as ``g + float32(acc) * float32(s_h * s_r[col])``;
* per active row, in ONNX's gate order i, o, f, c: peephole ``g += P * c`` (i, f with the old cell, o with the new
  one), then ``min(clip, max(-clip, g + (Wb + Rb)))``; f = Sigmoid is MLAS's logistic, g, h = Tanh MLAS's tanh
  (:func:`mlas_logistic`, :func:`mlas_tanh`: rational approximations evaluated with FMAs, as the AVX2/FMA3 kernels
  onnxruntime selects on x86-64); ``c = c * f + i * g``; ``h = h(c) * o``; every operation rounded to float32.

A row of length 0 in a node without Y: onnxruntime then feeds the row's part of an output buffer it never wrote
into the quantized block (whatever memory held); fusedrnn feeds the row's initial h.

``intra_op_threads`` > 1 reproduces a multi-threaded session: onnxruntime then splits the batch into
``ceil(B / threads)``-row blocks (when B > 4, or B >= 2 and H <= 256) and quantizes each block's h on its own.

The compiled kernel (``cells/compiled/_ortq.c``) and :func:`_numpy_run` compute the same values; the NumPy loop
evaluates MLAS's FMAs in float64 and rounds once (a double rounding that can differ in the last bit about once
in 2^29 operations).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import _native
from . import setting
from .call_log import CallLog
from .compiled import driver as compiled_driver
from .compiled.driver import immutable

F32 = np.float32
ABI_VERSION = 3

# onnxruntime's activation names (lower case) -> the kernel's code
ACTIVATION_CODES = {"sigmoid": 0, "tanh": 1, "relu": 2, "affine": 3, "leakyrelu": 4, "thresholdedrelu": 5,
                    "scaledtanh": 6, "hardsigmoid": 7, "elu": 8, "softsign": 9, "softplus": 10}

# MLAS logistic: x clamped to [-18, 18]; p = x·(α1 + x²(α3 + x²(α5 + x²(α7 + x²α9)))),
# q = β0 + x²(β2 + x²(β4 + x²(β6 + x²(β8 + x²β10)))); max(0, p / q + 0.5)
_LOGISTIC_P = tuple(F32(v) for v in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                      8.51377133304701e-03, 2.48287947061529e-01))  # α9 .. α1
_LOGISTIC_Q = tuple(F32(v) for v in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                      1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01))  # β10 .. β0
# MLAS tanh: x clamped to [-9, 9]; p = x·(α1 + x²(... α13)), q = β0 + x²(β2 + x²(β4 + x²β6)); p / q
_TANH_P = tuple(F32(v) for v in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                  5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                  4.89352455891786e-03))  # α13 .. α1
_TANH_Q = tuple(F32(v) for v in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                  4.89352518554385e-03))  # β6 .. β0


def _fma(a, b, c) -> np.ndarray:
    """float32 a·b + c rounded once (via float64, where a·b is exact)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(F32)


def _horner(x2: np.ndarray, coefficients: Sequence) -> np.ndarray:
    acc = _fma(x2, coefficients[0], coefficients[1])
    for c in coefficients[2:]:
        acc = _fma(acc, x2, c)
    return acc


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """onnxruntime's float32 sigmoid (MLAS ``MlasComputeLogistic``, FMA3 kernel)."""
    v = np.minimum(np.maximum(np.asarray(x, F32), F32(-18)), F32(18))
    x2 = v * v
    p = v * _horner(x2, _LOGISTIC_P)
    q = _horner(x2, _LOGISTIC_Q)
    return np.maximum(p / q + F32(0.5), F32(0))


def mlas_tanh(x: np.ndarray) -> np.ndarray:
    """onnxruntime's float32 tanh (MLAS ``MlasComputeTanh``, FMA3 kernel)."""
    v = np.minimum(np.maximum(np.asarray(x, F32), F32(-9)), F32(9))
    x2 = v * v
    return (_horner(x2, _TANH_P) * v) / _horner(x2, _TANH_Q)


def _ort_sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, F32(1) / (F32(1) + np.exp(-x)), np.exp(x) / (F32(1) + np.exp(x)))


def _activation(name: str, x: np.ndarray, a: np.float32, b: np.float32) -> np.ndarray:
    """onnxruntime's LSTM activation ``name`` (lower case) of the float32 array ``x`` (a new array)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "sigmoid":
            return mlas_logistic(x)
        if name == "tanh":
            return mlas_tanh(x)
        if name == "relu":
            return np.maximum(x, F32(0))
        if name == "affine":
            return a * x + b
        if name == "leakyrelu":
            return np.where(x >= 0, x, a * x)
        if name == "thresholdedrelu":
            return np.where(x > a, x, F32(0))
        if name == "scaledtanh":
            return a * (F32(2) * _ort_sigmoid(F32(2) * (b * x)) - F32(1))
        if name == "hardsigmoid":
            return np.minimum(F32(1), np.maximum(F32(0), a * x + b))
        if name == "elu":
            return np.where(x >= 0, x, a * (np.exp(x) - F32(1)))
        if name == "softsign":
            return x / (F32(1) + np.abs(x))
        return np.log(F32(1) + np.exp(x))  # softplus


def quantize_block(v: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """onnxruntime's dynamic uint8 quantization of a float32 block: ``(q, scale, zero_point)``.

    lo = min(0, min v), hi = max(0, max v); scale = (hi - lo) / 255 (1 when hi == lo);
    zero_point = round_half_even(clamp(-lo / scale, 0, 255)); q = clamp(round_half_even(v / scale) + zp, 0, 255).
    """
    v = np.asarray(v, F32)
    lo = F32(min(0.0, float(v.min()))) if v.size else F32(0)
    hi = F32(max(0.0, float(v.max()))) if v.size else F32(0)
    s = F32(1) if hi == lo else (hi - lo) / F32(255)
    z = int(np.rint(np.clip(-lo / s, F32(0), F32(255))))
    q = np.clip(np.rint(v / s) + F32(z), 0, 255).astype(np.uint8)
    return q, s, z


@dataclass(frozen=True)
class QuantizedWeights:
    """One direction-stacked quantized weight matrix as the kernel takes it: ``q`` [D, K, 4H] (int8 or uint8,
    columns in ONNX's gate order i, o, f, c), ``scale`` [D, C] float32 (C = 1 or 4H) and the zero point of each
    direction (onnxruntime uses the first value of a per-column zero point)."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: tuple[int, ...]

    @property
    def signed(self) -> bool:
        return self.q.dtype == np.int8


def _direction(x, lens, maxlen, minlen, d, W, R, bias, h0, c0, P, acts, clip, input_forget, want_y, blocks,
               xq, sx, zx, reverse):
    """One direction with NumPy: (Y [T, B, H] or None, Y_h [B, H], Y_c [B, H])."""
    T, Bn, _ = x.shape
    H = R.q.shape[1]
    f_act, g_act, h_act = acts
    xi = xq.astype(np.float64) - zx
    wi = W.q[d].astype(np.float64) - W.zero_point[d]
    ri = R.q[d].astype(np.float64) - R.zero_point[d]
    gx = (xi.reshape(-1, xi.shape[-1]) @ wi).astype(F32).reshape(maxlen, Bn, 4 * H) * (sx * W.scale[d])
    rows = np.arange(Bn)
    if reverse:  # the reversed input of row b at step j is its step lens[b] - 1 - j
        order = np.arange(maxlen)[:, None]
        src = np.where(order < lens[None, :], lens[None, :] - 1 - order, order)
        gx = gx[src, rows[None, :]]
    clip_v = F32(np.finfo(F32).max if clip is None else clip)
    h_prev = np.array(h0, F32)
    c = np.array(c0, F32)
    Y = np.zeros((T, Bn, H), F32) if want_y else None
    h_last = np.zeros((Bn, H), F32)
    c_last = np.zeros((Bn, H), F32)
    Pi, Po, Pf = (None, None, None) if P is None else (P[d, 0], P[d, 1], P[d, 2])
    bi, bo, bf, bc = (None,) * 4 if bias is None else np.split(bias[d], 4)

    def gate(v, b, act):
        if b is not None:
            v = v + b
        v = np.minimum(clip_v, np.maximum(-clip_v, v))
        return _activation(act.name.lower(), v, F32(act.alpha), F32(act.beta))

    for s in range(maxlen):
        g = gx[s].copy()
        for b0, b1 in blocks:
            hq, sh, zh = quantize_block(h_prev[b0:b1])
            acc = (hq.astype(np.float64) - zh) @ ri
            g[b0:b1] = g[b0:b1] + acc.astype(F32) * (sh * R.scale[d])
        active = s < lens
        h_new = h_prev.copy() if not want_y else np.zeros((Bn, H), F32)
        a = rows[active]
        gi, go, gf, gc = (g[a, k * H:(k + 1) * H] for k in range(4))
        ca = c[a]
        if Pi is not None:
            gi = gi + Pi * ca
        i = gate(gi, bi, f_act)
        if input_forget:
            f = F32(1) - i
        else:
            if Pf is not None:
                gf = gf + Pf * ca
            f = gate(gf, bf, f_act)
        cand = gate(gc, bc, g_act)
        ca = ca * f + i * cand
        if Po is not None:
            go = go + Po * ca
        o = gate(go, bo, f_act)
        h = _activation(h_act.name.lower(), ca, F32(h_act.alpha), F32(h_act.beta)) * o
        c[a] = ca
        h_new[a] = h
        ends = a[lens[a] == s + 1]
        c_last[ends] = c[ends]
        h_last[ends] = h_new[ends]
        if want_y:
            Y[s] = h_new
        h_prev = h_new
    if want_y and reverse:  # back to time order: row b's step j is time lens[b] - 1 - j
        out = np.zeros_like(Y)
        for b in range(Bn):
            n = int(lens[b])
            out[:n, b] = Y[:n, b][::-1]
        Y = out
    return Y, h_last, c_last


def _blocks(Bn: int, H: int, threads: int) -> list[tuple[int, int]]:
    """The row blocks whose hidden state onnxruntime quantizes separately (``SetNumThreads``)."""
    if threads > 1 and (Bn > 4 or (Bn >= 2 and H <= 256)):
        per = -(-Bn // threads)
        return [(b, min(Bn, b + per)) for b in range(0, Bn, per)]
    return [(0, Bn)]


def _numpy_run(x, lens, W, R, bias, h0, c0, P, reverse, acts, clip, input_forget, want_y, threads):
    T, Bn, _ = x.shape
    D, H = len(reverse), R.q.shape[1]
    maxlen = int(lens.max()) if Bn else 0
    minlen = min(T, int(lens.min())) if Bn else 0
    xq, sx, zx = quantize_block(x[:maxlen])
    blocks = _blocks(Bn, H, threads)
    Y = np.zeros((T, D, Bn, H), F32)
    Yh = np.zeros((D, Bn, H), F32)
    Yc = np.zeros((D, Bn, H), F32)
    for d in range(D):
        y, Yh[d], Yc[d] = _direction(x, lens, maxlen, minlen, d, W, R, bias, h0[d], c0[d], P, acts[d], clip,
                                     input_forget, want_y, blocks, xq, sx, zx, reverse[d])
        if y is not None:
            Y[:, d] = y
    return Y, Yh, Yc


# ---- the compiled kernel ----------------------------------------------------------------------------------------

class _Args(ctypes.Structure):
    _fields_ = [
        ("T", ctypes.c_int), ("B", ctypes.c_int), ("I", ctypes.c_int), ("H", ctypes.c_int), ("D", ctypes.c_int),
        ("x", ctypes.c_void_p), ("lens", ctypes.c_void_p),
        ("w", ctypes.c_void_p), ("w_colsum", ctypes.c_void_p), ("w_signed", ctypes.c_int), ("w_scale", ctypes.c_void_p),
        ("w_scale_cols", ctypes.c_int), ("w_zp", ctypes.c_void_p),
        ("r", ctypes.c_void_p), ("r_colsum", ctypes.c_void_p), ("r_signed", ctypes.c_int), ("r_scale", ctypes.c_void_p),
        ("r_scale_cols", ctypes.c_int), ("r_zp", ctypes.c_void_p),
        ("bias", ctypes.c_void_p), ("h0", ctypes.c_void_p), ("c0", ctypes.c_void_p), ("P", ctypes.c_void_p),
        ("reverse", ctypes.c_void_p), ("acts", ctypes.c_void_p), ("alphas", ctypes.c_void_p),
        ("betas", ctypes.c_void_p), ("clip", ctypes.c_float), ("input_forget", ctypes.c_int),
        ("want_y", ctypes.c_int), ("block_rows", ctypes.c_int), ("threads", ctypes.c_int),
        ("Y", ctypes.c_void_p), ("Yh", ctypes.c_void_p), ("Yc", ctypes.c_void_p),
    ]


def _bind(lib: ctypes.CDLL) -> None:
    lib.ortq_run.argtypes = [ctypes.POINTER(_Args)]
    lib.ortq_run.restype = ctypes.c_int
    # the onnxruntime custom operator (fusedrnn.frontends.onnx_native)
    lib.ortq_bridge_add.argtypes = [ctypes.POINTER(_Args)]
    lib.ortq_bridge_add.restype = ctypes.c_long
    lib.ortq_bridge_drop.argtypes = [ctypes.c_long]
    lib.ortq_bridge_drop.restype = None
    lib.ortq_bridge_live.argtypes = []
    lib.ortq_bridge_live.restype = ctypes.c_int
    lib.ortq_bridge_threads.argtypes = [ctypes.c_int, ctypes.c_long]
    lib.ortq_bridge_threads.restype = None
    lib.ortq_bridge_ns.argtypes = []
    lib.ortq_bridge_ns.restype = ctypes.c_long
    lib.ortq_packed_size.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.ortq_packed_size.restype = ctypes.c_long
    lib.ortq_colsum_size.argtypes = [ctypes.c_int]
    lib.ortq_colsum_size.restype = ctypes.c_long
    lib.ortq_pack.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_void_p, ctypes.c_void_p]
    lib.ortq_pack.restype = None


KERNEL = _native.Library("ortq", ABI_VERSION, _bind)


_PACKED: dict = {}
_PACKED_MAX = 64


_LIBC = ctypes.CDLL(None)
_LIBC.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_LIBC.memcmp.restype = ctypes.c_int


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two equal-shaped arrays hold the same bytes (``a`` contiguous; memcmp, no temporaries)."""
    b = np.ascontiguousarray(b)
    return a.nbytes == b.nbytes and _LIBC.memcmp(a.ctypes.data, b.ctypes.data, a.nbytes) == 0


def _packed(lib, W: QuantizedWeights) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's packed form of ``W`` (per direction) and its column sums, made once per weight array and
    reused while the array's contents stay equal to those it was packed from (compared on every call, unless
    the array is immutable: then the cached one holds the array itself)."""
    q = W.q
    key = (id(q), q.__array_interface__["data"][0], q.shape, q.dtype.str, W.zero_point)
    hit = _PACKED.get(key)
    if hit is not None and (hit[0] is q or _same_bytes(hit[0], q)):
        return hit[1], hit[2]
    D, K, N = q.shape
    packed = np.zeros((D, lib.ortq_packed_size(K, N)), np.int8)
    colsum = np.zeros((D, lib.ortq_colsum_size(N)), np.int32)
    for d in range(D):
        lib.ortq_pack(q[d].ctypes.data, K, N, int(W.signed), W.zero_point[d], packed[d].ctypes.data,
                      colsum[d].ctypes.data)
    if len(_PACKED) >= _PACKED_MAX:
        _PACKED.pop(next(iter(_PACKED)))
    _PACKED[key] = (q if immutable(q) else q.copy(), packed, colsum)
    return packed, colsum


def _ptr(a) -> int | None:
    return None if a is None else a.__array_interface__["data"][0]


_ACTS: dict = {}


def _activation_arrays(acts) -> dict:
    """The kernel's activation codes, alphas and betas of ``acts`` (made once per distinct list)."""
    key = tuple((a.name, a.alpha, a.beta) for ad in acts for a in ad)
    hit = _ACTS.get(key)
    if hit is None:
        hit = _ACTS[key] = {"acts": np.array([ACTIVATION_CODES[k[0].lower()] for k in key], np.int32),
                            "al": np.array([k[1] for k in key], F32), "be": np.array([k[2] for k in key], F32)}
    return hit


_SETUPS: dict = {}


def _weight_fields(lib, W: QuantizedWeights, R: QuantizedWeights, reverse, acts) -> tuple[dict, dict]:
    """The kernel arguments that depend on the weights and attributes only, with the arrays they point into;
    kept for weights that nothing can change (:func:`immutable`), remade on every call otherwise."""
    acts_key = tuple((a.name, a.alpha, a.beta) for ad in acts for a in ad)
    key = (id(W), id(R), tuple(reverse), acts_key)
    hit = _SETUPS.get(key)
    if hit is not None and hit[0] is W and hit[1] is R:
        return hit[2], hit[3]
    keep = {"wz": np.asarray(W.zero_point, np.int32), "rz": np.asarray(R.zero_point, np.int32),
            "rev": np.asarray(reverse, np.int32), "ws": W.scale, "rs": R.scale, **_activation_arrays(acts)}
    keep["w"], keep["wc"] = _packed(lib, W)
    keep["r"], keep["rc"] = _packed(lib, R)
    fields = {"w": _ptr(keep["w"]), "w_colsum": _ptr(keep["wc"]), "w_signed": int(W.signed),
              "w_scale": _ptr(keep["ws"]), "w_scale_cols": keep["ws"].shape[1], "w_zp": _ptr(keep["wz"]),
              "r": _ptr(keep["r"]), "r_colsum": _ptr(keep["rc"]), "r_signed": int(R.signed),
              "r_scale": _ptr(keep["rs"]), "r_scale_cols": keep["rs"].shape[1], "r_zp": _ptr(keep["rz"]),
              "reverse": _ptr(keep["rev"]), "acts": _ptr(keep["acts"]), "alphas": _ptr(keep["al"]),
              "betas": _ptr(keep["be"])}
    if all(immutable(a) for a in (W.q, W.scale, R.q, R.scale)):
        if len(_SETUPS) >= _PACKED_MAX:
            _SETUPS.pop(next(iter(_SETUPS)))
        _SETUPS[key] = (W, R, keep, fields)
    return keep, fields


def _compiled_run(lib, x, lens, W, R, bias, h0, c0, P, reverse, acts, clip, input_forget, want_y, threads):
    T, Bn, I = x.shape
    D, H = len(reverse), R.q.shape[1]
    blocks = _blocks(Bn, H, threads)
    n_y, n_s = T * D * Bn * H, D * Bn * H
    out = np.zeros(n_y + 2 * n_s, F32)  # Y, Y_h, Y_c in one buffer
    keep, fields = _weight_fields(lib, W, R, reverse, acts)
    x = np.ascontiguousarray(x, F32)
    lens = np.ascontiguousarray(lens, np.int32)
    h0 = np.ascontiguousarray(h0, F32)
    c0 = np.ascontiguousarray(c0, F32)
    bias = None if bias is None else np.ascontiguousarray(bias, F32)
    P = None if P is None else np.ascontiguousarray(P, F32)
    y = _ptr(out)
    args = _Args(T=T, B=Bn, I=I, H=H, D=D, x=_ptr(x), lens=_ptr(lens), bias=_ptr(bias), h0=_ptr(h0), c0=_ptr(c0),
                 P=_ptr(P), clip=F32(np.finfo(F32).max if clip is None else clip), input_forget=int(input_forget),
                 want_y=int(want_y), block_rows=blocks[0][1] - blocks[0][0], threads=compiled_driver.call_threads(),
                 Y=y, Yh=y + 4 * n_y, Yc=y + 4 * (n_y + n_s), **fields)
    status = lib.ortq_run(ctypes.byref(args))
    _log.note((args, (keep, bias, P)))
    del keep
    if status != 0:
        raise MemoryError(f"DynamicQuantizeLSTM kernel: could not allocate its buffers (status {status})")
    return (out[:n_y].reshape(T, D, Bn, H), out[n_y:n_y + n_s].reshape(D, Bn, H),
            out[n_y + n_s:].reshape(D, Bn, H))


_log = CallLog()
recording = _log.recording
"""Context in which this thread's compiled kernel calls are appended to the list it yields, each as (its
``_Args``, the arrays its pointers hold): the ONNX custom-op bridge copies a probe call's weight fields."""


def dynamic_quantize_lstm_sequence(x: np.ndarray, lens: np.ndarray, W: QuantizedWeights, R: QuantizedWeights,
                                   bias: np.ndarray | None, h0: np.ndarray, c0: np.ndarray,
                                   P: np.ndarray | None, *, reverse: Sequence[bool], acts,
                                   clip: float | None = None, input_forget: bool = False, want_y: bool = True,
                                   intra_op_threads: int = 1, engine: str | None = None):
    """Run onnxruntime's DynamicQuantizeLSTM. Returns Y [T, D, B, H], Y_h, Y_c [D, B, H] (float32).

    ``x`` [T, B, I] float32; ``lens`` [B] int (each 0..T); ``W`` / ``R``: :class:`QuantizedWeights` (K = I / H);
    ``bias`` [D, 4H] float32 = Wb + Rb (rounded to float32 once) or None; ``h0``, ``c0`` [D, B, H]; ``P``
    [D, 3, H] in ONNX's order (i, o, f) or None; ``acts[d]``: (f, g, h) :class:`~.activations.Activation`;
    ``want_y``: whether the node has a Y output (which changes what finished rows feed back).
    ``engine``: "compiled", "numpy" or None (the engine setting: compiled when available).
    """
    engine = engine or {"numpy": "numpy", "compiled": "compiled"}.get(setting.engine("ortq"), "auto")
    lib = None if engine == "numpy" else KERNEL.load()
    if engine == "compiled" and lib is None:
        raise RuntimeError(f"the compiled DynamicQuantizeLSTM kernel is unavailable: {KERNEL.reason}")
    args = (x, np.asarray(lens, np.int64), W, R, bias, h0, c0, P, tuple(reverse), acts, clip, input_forget,
            want_y, intra_op_threads)
    if lib is not None:
        return _compiled_run(lib, *args)
    return _numpy_run(*args)


__all__ = ["ACTIVATION_CODES", "KERNEL", "QuantizedWeights", "dynamic_quantize_lstm_sequence", "mlas_logistic",
           "mlas_tanh", "quantize_block", "recording"]
