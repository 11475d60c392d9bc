"""Activation look-up tables (spec mli.md §4) and their interpolating evaluation (§2.7).

Tables are generated, not copied: ``L[i] = clip(round_half_away(f((i - offset) / 2^in_frac) · 2^15))`` in
double precision (the upstream ``lutfx.py`` formula), which reproduces the shipped MLI 2.0 and 1.1 tables.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _arith as A
from .config import ElType
from .status import Status
from .tensors import DataContainer

KMAX_FRAC_FX16 = 15
KMAX_FRAC_FX8 = 7


class Lut:
    """``mli_lut``: ``data`` (a :class:`.tensors.DataContainer` of int16 Q15 outputs: ``data.mem`` the buffer,
    ``data.capacity`` its bytes), ``type`` (element type of the table), ``length`` (entries), ``in_frac_bits``,
    ``out_frac_bits``, ``input_offset``, ``output_offset``; ``kind`` ("tanh" / "sigm") is fusedrnn's note of the
    function. ``Lut(data=buf)`` with a preallocated int16 array (or a container) is filled in place by
    ``krn_*_create_lut``; ``Lut()`` lets it allocate the table. The buffer passes array attributes through
    (``lut.data.size``, ``lut.data[:4]``) as in earlier versions."""

    def __init__(self, data=None, in_frac_bits: int = 0, out_frac_bits: int = 15, input_offset: int = 0,
                 kind: str = "", *, type=None, length: int | None = None, output_offset: int = 0):
        self.data = data
        self.in_frac_bits = in_frac_bits
        self.out_frac_bits = out_frac_bits
        self.input_offset = input_offset
        self.output_offset = output_offset
        self.kind = kind
        self.type = ElType.MLI_EL_FX_16 if type is None else type
        m = self._data.mem
        self.length = (int(m.size) if isinstance(m, np.ndarray) else 0) if length is None else int(length)

    @property
    def data(self) -> DataContainer:
        return self._data

    @data.setter
    def data(self, value) -> None:
        """A container replaces the table's; an array or None becomes a container of its size."""
        self._data = value if isinstance(value, DataContainer) else DataContainer(mem=value)
        if "length" in self.__dict__:
            m = self._data.mem
            self.length = int(m.size) if isinstance(m, np.ndarray) else 0

    @property
    def table(self) -> np.ndarray:
        """The ``length`` entries of the table (a view of the buffer)."""
        return self._data.mem[:self.length]

    def __repr__(self) -> str:
        return (f"Lut(kind={self.kind!r}, length={self.length}, data={self._data!r}, in_frac_bits="
                f"{self.in_frac_bits}, out_frac_bits={self.out_frac_bits}, input_offset={self.input_offset}, "
                f"output_offset={self.output_offset})")


def _sigm(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


FUNCS = {"sigm": _sigm, "tanh": math.tanh}
# (size, in_frac_bits, offset) of the shipped tables
TABLES = {
    ("2.0", "sigm"): (320, 4, 160),
    ("2.0", "tanh"): (344, 5, 172),
    ("1.x", "sigm"): (180, 3, 90),
    ("1.x", "tanh"): (178, 4, 89),
}


def generate_table(func: str, size: int, in_frac: int, offset: int) -> np.ndarray:
    """The generator formula of spec §4.3 (int16, Q15)."""
    f = FUNCS[func]
    vals = []
    for i in range(size):
        v = f((i - offset) / 2.0**in_frac) * 32768.0
        r = math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)
        vals.append(min(max(r, -32768), 32767))
    return np.array(vals, dtype=np.int16)


def make_lut(func: str, version: str = "2.0") -> Lut:
    size, qi, off = TABLES[(version, func)]
    return Lut(generate_table(func, size, qi, off), qi, 15, off, func)


def lut_size(func: str, version: str = "2.0") -> int:
    """Bytes of table data (``mli_krn_{tanh,sigm}_get_lut_size``)."""
    return TABLES[(version, func)][0] * 2


def create_lut(lut: Lut, func: str, version: str = "2.0") -> Status:
    """Fill ``lut`` (``mli_krn_{tanh,sigm}_create_lut``): the table is copied into the caller's buffer
    ``lut.data.mem`` (NOT_ENGH_MEM when ``lut.data.capacity`` is short of its bytes, as ``mli_chk_lut``; a
    buffer that is not a writable int16 array is ARGUMENT_ERROR); ``Lut()`` without a buffer gets a new one. Then
    type, length, frac bits and offsets are set."""
    if not isinstance(lut, Lut):
        return Status.MLI_STATUS_ARGUMENT_ERROR
    ref = make_lut(func, version)
    lut.type = ElType.MLI_EL_FX_16
    c = lut.data
    if c.mem is None:
        lut.data = DataContainer(mem=ref.data.mem.copy())
    else:
        m = c.mem
        if not (isinstance(m, np.ndarray) and m.dtype == np.int16 and m.ndim == 1 and m.flags.writeable
                and isinstance(c.capacity, (int, np.integer)) and 0 <= c.capacity <= m.nbytes):
            return Status.MLI_STATUS_ARGUMENT_ERROR
        if c.capacity < ref.length * 2:
            return Status.MLI_STATUS_NOT_ENGH_MEM
        m[:ref.length] = ref.data.mem
    lut.length, lut.in_frac_bits, lut.out_frac_bits = ref.length, ref.in_frac_bits, ref.out_frac_bits
    lut.input_offset, lut.output_offset, lut.kind = ref.input_offset, 0, func
    return Status.MLI_STATUS_OK


def lut_eval(q, lut: Lut, fi: int, mode: str, sa: tuple[int, int, int] | None = None) -> np.ndarray:
    """Q15 table output for integer inputs ``q`` with ``fi`` fraction bits (fx), or for sa8 inputs with
    ``sa = (scale, zero_point, scale_frac_bits)`` converted to ``fi`` fraction bits first (§2.7)."""
    q = A.i64(q)
    L = lut.table.astype(np.int64)
    n = L.size
    shift_in = min(fi - lut.in_frac_bits, 15)
    if shift_in > 0:
        pre = min(max(fi - lut.in_frac_bits - 15, 0), 15)
        if sa is None:
            x = q
        else:
            s, z, f = sa
            x = A.rnd((q - z) * s, f - fi, 32, mode)
        x = A.asr(x, pre, 32)
        idx = A.clamp(A.add_sat(x >> shift_in, lut.input_offset, 32), 0, n - 2)
        frac = x & ((1 << shift_in) - 1)
        y0 = L[idx]
        return y0 - A.sat(A.rnd((y0 - L[idx + 1]) * frac, shift_in, 32, mode), 16)
    if sa is None:
        x = q
    else:
        s, z, f = sa
        x = A.sat((q - z) * int(A.rnd(s, f - fi, 32, mode)), 16)
    idx = A.clamp(A.add_sat(A.asl(x, -shift_in, 32), lut.input_offset, 32), 0, n - 1)
    return L[idx]


# fixed output quantization of the sa8 activations (mli_prv_activation_lut.h): (scale, zero_point, sfb)
SA8_OUT = {"tanh": (1, 0, 7), "sigm": (1, -128, 8)}


def sa8_in_frac(lut: Lut) -> int:
    """The fraction bits an sa8 input is converted to before the lookup: 15 - (7 - lut.in_frac_bits)."""
    return KMAX_FRAC_FX16 - (KMAX_FRAC_FX8 - lut.in_frac_bits)


def act_fx16(q, frac: int, lut: Lut, mode: str) -> np.ndarray:
    """fx16 tanh/sigm: Q15 output."""
    return lut_eval(q, lut, frac, mode)


def act_fx8(q, frac: int, lut: Lut, mode: str) -> np.ndarray:
    """fx8 tanh/sigm: Q7 output, sat8(rnd16(y, 8))."""
    return A.sat(A.rnd(lut_eval(q, lut, frac, mode), 8, 16, mode), 8)


def act_sa8(q, sa: tuple[int, int, int], lut: Lut, mode: str, kind: str | None = None) -> np.ndarray:
    """sa8 tanh/sigm (``kind``, default ``lut.kind``) with MLI's fixed output parameters (:data:`SA8_OUT`)."""
    _, zo, fo = SA8_OUT[kind or lut.kind]
    y = lut_eval(q, lut, sa8_in_frac(lut), mode, sa)
    return A.sat(A.rnd(y, 15 - fo, 32, mode) + zo, 8)


@functools.lru_cache(maxsize=256)
def _act_table(kind: str, data: bytes, in_frac: int, offset: int, flavor: str, qp: tuple, mode: str) -> np.ndarray:
    lut = Lut(np.frombuffer(data, np.int16), in_frac, 15, offset, kind)
    if flavor == "sa8":
        t = act_sa8(np.arange(-128, 128), qp, lut, mode, kind)
    else:
        t = act_fx16(np.arange(-32768, 32768), qp[0], lut, mode)
    t = t.astype(np.int16)  # int8 / int16 values: a small table stays in cache
    t.flags.writeable = False
    return t


def act_lookup(kind: str, q, qp, flavor: str, lut: Lut, mode: str) -> np.ndarray:
    """tanh/sigm of int8 (sa8, ``qp`` = (scale, zp, sfb)) or int16 (fx16, ``qp`` = frac) inputs through a table
    of the activation evaluated on every possible input (exactly :func:`act_sa8` / :func:`act_fx16`)."""
    return act_table(kind, qp, flavor, lut, mode)[A.i64(q) + (128 if flavor == "sa8" else 32768)]


def act_table(kind: str, qp, flavor: str, lut: Lut, mode: str) -> np.ndarray:
    """The read-only int16 table of :func:`act_lookup`: entry x + 128 (sa8) or x + 32768 (fx16) is the output for
    input x."""
    key = tuple(map(int, qp)) if flavor == "sa8" else (int(qp),)
    return _act_table(kind, lut.table.astype(np.int16).tobytes(), int(lut.in_frac_bits), int(lut.input_offset),
                      "sa8" if flavor == "sa8" else "fx16", key, mode)
