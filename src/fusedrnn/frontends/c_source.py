"""C source text of NumPy arrays: ``static const`` arrays whose literals read back to the same bits (float32 as
``%.9g``, float64 as ``%.17g``, integers as integers, float16 / bfloat16 as bit patterns), and whole headers.

Used by ``fusedrnn export-vectors`` (golden vectors) and :mod:`fusedrnn.frontends.c_export` (SDK weights).
"""

from __future__ import annotations

import re

import numpy as np

from .. import __version__
from ..errors import DTypeError

_INTS = {  # numpy dtype name -> (C type, literal suffix)
    "int8": ("int8_t", ""), "int16": ("int16_t", ""), "int32": ("int32_t", ""), "int64": ("int64_t", "LL"),
    "uint8": ("uint8_t", "U"), "uint16": ("uint16_t", "U"), "uint32": ("uint32_t", "U"),
    "uint64": ("uint64_t", "ULL"), "bool": ("uint8_t", "U"),
}
_PER_LINE = 8


def c_identifier(name: str) -> str:
    """``name`` as a C identifier: characters outside [A-Za-z0-9_] become ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _float_literals(values: np.ndarray, spec: str, suffix: str) -> tuple[list[str], bool]:
    """Decimal literals of float ``values`` (each ``spec``-formatted, with a ``.0`` where the text would read
    as an integer); returns (literals, whether INFINITY / NAN from <math.h> were used)."""
    out, special = [], False
    with np.errstate(invalid="ignore"):  # signalling NaNs
        as_float = values.astype(np.float64).tolist()
    for v in as_float:
        if v != v:
            out.append("NAN")
            special = True
        elif v in (float("inf"), float("-inf")):
            out.append("INFINITY" if v > 0 else "-INFINITY")
            special = True
        else:
            s = spec % v
            if not any(c in s for c in ".en"):
                s += ".0"
            out.append(s + suffix)
    return out, special


def _int_literals(values: np.ndarray, suffix: str) -> list[str]:
    out = []
    for v in values.astype(np.int64 if values.dtype.kind in "ib" else np.uint64).tolist():
        v = int(v)
        if suffix == "LL" and v == -(2**63):  # the literal 9223372036854775808 does not fit in long long
            out.append("(-9223372036854775807LL - 1)")
        else:
            out.append(f"{v}{suffix}")
    return out


def c_array(name: str, array: np.ndarray, onnx_name: str) -> tuple[str, bool]:
    """One array as C text (comment, size define, ``static const`` array); returns (text, uses <math.h>).

    Raises :class:`~fusedrnn.errors.DTypeError` for dtypes that have no C form here (strings, complex)."""
    a = np.asarray(array)  # (np.ascontiguousarray would make a 0-d array 1-d)
    flat = a.reshape(-1)
    dt = a.dtype
    shape = "scalar" if a.ndim == 0 else "[" + ", ".join(str(d) for d in a.shape) + "]"
    note = ""
    math = False
    if dt == np.float32:
        ctype, (lits, math) = "float", _float_literals(flat, "%.9g", "f")
    elif dt == np.float64:
        ctype, (lits, math) = "double", _float_literals(flat, "%.17g", "")
    elif dt.name in _INTS:
        ctype, suffix = _INTS[dt.name]
        lits = _int_literals(flat, suffix)
    elif dt.itemsize in (1, 2) and dt.name.startswith(("float", "bfloat")):
        bits = flat.view(np.uint16 if dt.itemsize == 2 else np.uint8)
        ctype = "uint16_t" if dt.itemsize == 2 else "uint8_t"
        width = 2 * dt.itemsize
        lits = [f"0x{int(b):0{width}X}U" for b in bits.tolist()]
        note = f" (stored as {dt.name} bit patterns)"
    else:
        raise DTypeError(f"{onnx_name}: arrays of dtype {dt} cannot be written to a C header")
    macro = f"{name.upper()}_SIZE"
    head = [f"/* {onnx_name}: {dt.name} {shape}, {flat.size} elements in C (row-major) order{note} */",
            f"#define {macro} {flat.size}"]
    if flat.size == 0:
        return "\n".join([*head, f"/* {name}: empty array, no C definition */"]) + "\n", math
    rows = [", ".join(lits[i: i + _PER_LINE]) for i in range(0, len(lits), _PER_LINE)]
    body = ",\n    ".join(rows)
    return "\n".join([*head, f"static const {ctype} {name}[{macro}] = {{\n    {body}\n}};"]) + "\n", math


def c_names(onnx_names, prefix: str) -> dict[str, str]:
    """{ONNX name: ``<prefix>_<C identifier>``}, a numeric suffix keeping names apart that would clash (also
    when upper-cased, as the size macros are)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for onnx_name in onnx_names:
        base = f"{prefix}_{c_identifier(onnx_name)}"
        name, k = base, 1
        while name.upper() in taken:
            k += 1
            name = f"{base}_{k}"
        names[onnx_name] = name
        taken.add(name.upper())
    return names


def c_header(arrays: dict[str, np.ndarray], prefix: str, guard: str, title: str) -> str:
    """A C header holding every array of ``arrays`` ({ONNX name: array}) as ``<prefix>_<name>``
    (:func:`c_names`)."""
    names = c_names(arrays, prefix)
    blocks, math = [], False
    for onnx_name, array in arrays.items():
        text, uses_math = c_array(names[onnx_name], array, onnx_name)
        blocks.append(text)
        math = math or uses_math
    includes = ["#include <stdint.h>"] + (["#include <math.h> /* INFINITY, NAN */"] if math else [])
    return "\n".join([
        f"/* {title}", f" * Written by fusedrnn {__version__} (fusedrnn export-vectors). */",
        f"#ifndef {guard}", f"#define {guard}", "", *includes, "", *blocks, f"#endif /* {guard} */", "",
    ])


__all__ = ["c_array", "c_header", "c_identifier", "c_names"]
