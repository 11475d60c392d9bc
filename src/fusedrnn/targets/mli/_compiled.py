"""The compiled MLI recurrences (``_kernel.c``): loading, ctypes structures, and drivers that run the time loops of
:func:`.cells.lstm_sequence`, :func:`.cells.gru_sequence` and :func:`.mli1.lstm1x_sequence`.

The library is the ``mli`` one of :mod:`fusedrnn._native` (built when the package was installed, the variant for
this CPU; the engine setting, ``$FUSEDRNN_ENGINE``, says which loop runs). When it is unavailable, :func:`load`
returns None and the callers keep their NumPy loops. Every table and constant is computed by the
NumPy code (activation tables over all inputs, sa8 element-wise tables over all operand pairs), so the C code only
re-does the integer arithmetic that the NumPy path does per step (same results, to the bit: see
tests/test_mli_compiled.py).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ... import _native
from ...cells.compiled import _build
from ..int8_dot import in_int8, quad_offsets, row_groups

ABI = 5

P = ctypes.c_void_p
I32, I64 = ctypes.c_int32, ctypes.c_int64


class Binop(ctypes.Structure):
    _fields_ = [("tab", P), ("kind", I32), ("sa", I32), ("sb", I32), ("so", I32)]


class Ew(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("kind", "fast", "z1", "z2", "zo", "m1", "m2", "s1", "s2", "pad")]


class Act(ctypes.Structure):
    _fields_ = [("tab", P), ("off", I32), ("pad", I32), ("tab32", P)]


class Mli2Args(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("flavor", "mode", "T", "B", "M", "K", "s0", "s1", "reverse", "r0_64", "wrap",
                                   "acc64", "io_lo", "io_hi", "zp_in", "has_out_act")] + [
        ("mul", I64 * 4), ("shift", I64 * 4), ("one", I64), ("r0", P), ("r0n", P), ("W", P), ("Wn", P),
        ("cs", P), ("csn", P), ("sig", Act), ("tnh", Act), ("actc", Act), ("op", Binop * 5), ("valid", P),
        ("h", P), ("c", P), ("Y", P), ("hk", P), ("acc", P), ("tmp", P)] + [
        (n, I32) for n in ("Kp", "np_w", "np_n", "pad2")] + [("W2", P), ("Wn2", P), ("acc32", P),
                                                               ("ew", Ew * 5)] + [
        ("W8", P), ("Wn8", P), ("off_w", P), ("off_n", P), ("xu", P), ("yf", P), ("ldy", I64), ("y_zp", I64),
        ("y_scale", ctypes.c_double)]


class I8pArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("R", "K", "Kp", "np")] + [("x", P), ("W8", P), ("W2", P), ("off", P),
                                                              ("out", P), ("scratch", P)]


class EwArgs(ctypes.Structure):
    _fields_ = [("op", Binop), ("e", Ew), ("n", I32), ("mode", I32), ("sa8", I32), ("pad", I32), ("a", P),
                ("b", P), ("out", P)]


class PartArgs(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("flavor", "mode", "R", "N", "G", "ld", "f64", "out64", "zp_in", "pad")] + [
        ("mul", I64 * 4), ("shift", I64 * 4), ("accf", P), ("cs", P), ("bias", P), ("out", P)]


class QuantArgs(ctypes.Structure):
    _fields_ = [("n", I64), ("sv", ctypes.c_float), ("zp", I32), ("lo", I32), ("hi", I32), ("x", P), ("out", P)]


class Mli1Args(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("fx16", "T", "B", "M", "K", "bits", "d", "osh", "one", "f_cell", "f_out",
                                   "has_out_act", "wrap", "pad")] + [
        ("pre", P), ("W", P), ("sig", Act), ("tnh", Act), ("actc", Act), ("valid", P), ("h", P), ("c", P),
        ("Y", P), ("hk", P), ("acc", P)]


def _bind(lib) -> None:
    for name, st in (("mli2_lstm", Mli2Args), ("mli2_gru", Mli2Args), ("mli1_lstm", Mli1Args),
                     ("mli2_partials", PartArgs), ("mli2_eltwise", EwArgs),
                     ("mli_quantize_f32", QuantArgs), ("mli_i8_products", I8pArgs)):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.POINTER(st)]
        fn.restype = ctypes.c_int
    lib.mli_i8_vnni.argtypes = []
    lib.mli_i8_vnni.restype = ctypes.c_int


_LOOP = _build.CompiledLoop("MLI", _native.Library("mli", ABI, _bind))
# the module-level API of this target's compiled loop (load, engine choice, library for an engine)
load, unavailable_reason = _LOOP.load, _LOOP.unavailable_reason
default_engine, use_engine, library = _LOOP.default_engine, _LOOP.use_engine, _LOOP.library


# ---- helpers ---------------------------------------------------------------------------------------------------
class _Keep:
    """Arrays referenced by a ctypes structure, kept alive (and C-contiguous) for the duration of a call."""

    def __init__(self):
        self.refs = []

    def __call__(self, a, dtype=None):
        if a is None:
            return None
        a = np.ascontiguousarray(a, dtype=dtype)
        self.refs.append(a)
        return a.ctypes.data


def act_struct(keep: _Keep, table: np.ndarray, off: int) -> Act:
    """An activation table; small (sa8, 256-entry) ones also widened to int32 for the kernel's vector gathers."""
    return Act(keep(table, np.int16), off, 0, keep(table, np.int32) if table.size <= 256 else None)


def binop_struct(keep: _Keep, op: tuple) -> Binop:
    """op: ("tab", int16 table[65536]) or ("mul", so) / ("add" | "sub", sa, sb, so)."""
    if op[0] == "tab":
        return Binop(keep(op[1], np.int16), 0, 0, 0, 0)
    if op[0] == "mul":
        return Binop(None, 0, 0, 0, op[1])
    return Binop(None, 1 if op[0] == "add" else 2, *op[1:])


@functools.lru_cache(maxsize=1024)
def _quantize_factor(scale: int, frac_bits: int) -> float:
    """mli_quantize's float32 factor 2^frac_bits / scale (the float32 quotient, then the exact power of two)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(np.float32(1.0) / np.float32(scale), np.int32(frac_bits)).astype(np.float32))


def quantize(lib, x, *, bits: int, frac_bits: int, scale: int = 1, zero_point: int = 0) -> np.ndarray:
    """numerics.affine.mli_quantize per tensor through the kernel (same results), as int64. ``scale`` in
    [1, 32767], ``zero_point`` int16, ``frac_bits`` in [-128, 127], ``bits`` 8 or 16 (not checked here)."""
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty(x.shape, np.int64)
    a = QuantArgs(x.size, _quantize_factor(int(scale), int(frac_bits)), int(zero_point), -(1 << (bits - 1)),
                  (1 << (bits - 1)) - 1, x.ctypes.data, out.ctypes.data)
    lib.mli_quantize_f32(a)
    return out


def ew_struct(params: tuple | None) -> Ew:
    """The sa8 direct-evaluation parameters of :func:`.eltwise.sa8_fast_params` (None: use the table)."""
    return Ew(0, 0, *([0] * 8)) if params is None else Ew(params[0], 1, *params[1:], 0)


def transposed_int16(W2: np.ndarray) -> np.ndarray:
    """Stacked weights [K, N] -> int16 [N, K] (values fit int16 for every MLI flavour)."""
    return np.ascontiguousarray(np.asarray(W2).T, dtype=np.int16)


def even(k: int) -> int:
    return k + (k & 1)


def padded_columns(n: int) -> int:
    """Columns of the pair layout: a multiple of 16 (one tile of the kernel's GEMM)."""
    return -(-n // 16) * 16


def quad_packed_int8(W2: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Stacked weights [K, N] with int8 values -> (int8 [K4 / 4, np, 4] with Q[k // 4, n, k % 4] = W[k, n], int32
    off [np] = -128 * sum_k W[k, n]): the operands of the kernel's ``i8dot_gemm`` (targets/_int8_dot.h), K4 = K
    rounded up to a multiple of 4, np = N rounded up to a multiple of 16, zero-padded. None when a weight is
    outside int8 or K >= 2^17 (|off| < 2^31 needs K * 128 * 128 < 2^31)."""
    W2 = np.asarray(W2)
    if W2.shape[0] >= 1 << 17 or not in_int8(W2):
        return None
    n_pad = padded_columns(W2.shape[1])
    return row_groups(W2, n_pad, 4, np.int8), quad_offsets(W2, n_pad)


def i8_products(lib, x8: np.ndarray, pairs: np.ndarray, quads: tuple[np.ndarray, np.ndarray], out: np.ndarray,
                scratch: np.ndarray) -> np.ndarray:
    """out[r, n] = sum_k x8[r, k] W[k, n] (int32, exact: every sum of an sa8 layer fits, and wraps like the int32
    value it feeds otherwise) for int8 rows x8 [R, K]; ``pairs`` and ``quads`` are W's
    :func:`pair_packed_int16` and :func:`quad_packed_int8`; out int32 [R, np]; scratch at least
    :func:`i8_scratch_bytes` bytes."""
    R, K = x8.shape
    a = I8pArgs(R, K, even(K), out.shape[1], x8.ctypes.data, quads[0].ctypes.data, pairs.ctypes.data,
                quads[1].ctypes.data, out.ctypes.data, scratch.ctypes.data)
    lib.mli_i8_products(a)
    return out


def i8_scratch_bytes(R: int, K: int) -> int:
    return R * max(-(-K // 4) * 4, 2 * even(K))


def pair_packed_int16(W2: np.ndarray) -> np.ndarray:
    """Stacked weights [K, N] -> int16 [Kp / 2, np, 2] with P[k // 2, n, k % 2] = W[k, n], zero-padded to Kp = K
    rounded up to even and np = N rounded up to a multiple of 16 (the layout of the kernel's ``gemm32``)."""
    return row_groups(W2, padded_columns(W2.shape[1]), 2, np.int16)
