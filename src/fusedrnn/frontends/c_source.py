"""C source text of NumPy arrays: ``static const`` arrays whose literals read back to the same bits (float32 as
``%.9g``, float64 as ``%.17g``, integers as integers, float16 / bfloat16 as bit patterns), and whole headers.

Names come from models, so nothing a name holds can become code: identifiers are ``[A-Za-z0-9_]`` only
(:func:`c_identifier`, made unique by :func:`c_names`), comments hold printable ASCII without ``*/``, ``/*``,
backslashes or ``??`` (:func:`c_comment`: no end of comment, no line splice, no trigraph), and the original name
is kept as an escaped string literal (:func:`c_string`) in ``#define <NAME>_NAME``.

Used by ``fusedrnn export-vectors`` (golden vectors) and :mod:`fusedrnn.frontends.c_export` (SDK weights).
"""

from __future__ import annotations

import re

import numpy as np

from .. import __version__
from ..errors import AttributeValueError, DTypeError
from ..validation import brief

_INTS = {  # numpy dtype name -> (C type, literal suffix)
    "int8": ("int8_t", ""), "int16": ("int16_t", ""), "int32": ("int32_t", ""), "int64": ("int64_t", "LL"),
    "uint8": ("uint8_t", "U"), "uint16": ("uint16_t", "U"), "uint32": ("uint32_t", "U"),
    "uint64": ("uint64_t", "ULL"), "bool": ("uint8_t", "U"),
}
_PER_LINE = 8
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "_Bool _Complex _Imaginary".split())
NAME_LIMIT = 40
"""How many characters of a model's name go into a C identifier (C99 guarantees 63 significant ones)."""
COMMENT_LIMIT = 60
"""How many characters of a model's name go into a comment."""


def c_identifier(name: str) -> str:
    """``name`` as a C identifier: characters outside [A-Za-z0-9_] become ``_``; an ``n`` goes before a leading
    digit (or an empty name) and a ``_`` after a C keyword."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
    if not ident or ident[0].isdigit():
        ident = "n" + ident
    return ident + "_" if ident in _KEYWORDS else ident


def c_comment(text: str, limit: int | None = None) -> str:
    """``text`` safe inside a C block comment: printable ASCII only (anything else, the backslash included,
    becomes ``_``, so no line splice), a space breaking every ``*/``, ``/*`` and ``??`` (no end of comment, no
    nested opening, no trigraph); cut to ``limit`` characters with ``...``."""
    out = "".join(c if " " <= c <= "~" and c != "\\" else "_" for c in str(text))
    if limit is not None and len(out) > limit:
        out = out[:max(limit - 3, 1)] + "..."
    while "*/" in out or "/*" in out or "??" in out:
        out = out.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    return out


def c_string(text: str) -> str:
    """``text`` as a C string literal holding its UTF-8 bytes exactly: printable ASCII as itself, ``"`` ``\\``
    and ``?`` escaped (no trigraph), every other byte as a three-digit octal escape."""
    out = []
    for b in str(text).encode("utf-8", "surrogatepass"):
        c = chr(b)
        if c in '"\\?':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


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


def c_array(name: str, array: np.ndarray, onnx_name: str, *, original: str | None = None) -> tuple[str, bool]:
    """One array as C text (``onnx_name``, shape and dtype in a comment, size define, ``static const`` array);
    returns (text, uses <math.h>). With ``original`` the text opens with ``#define <NAME>_NAME "<original>"``
    (:func:`c_string`), the name the array had in the model, byte for byte.

    Raises :class:`~fusedrnn.errors.AttributeValueError` when ``name`` is not a C identifier and
    :class:`~fusedrnn.errors.DTypeError` for dtypes that have no C form here (strings, complex)."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or name in _KEYWORDS:
        raise AttributeValueError(f"name: expected a C identifier ([A-Za-z_][A-Za-z0-9_]*), got {brief(name)}")
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
        raise DTypeError(f"{brief(onnx_name)}: arrays of dtype {dt} cannot be written to a C header")
    macro = f"{name.upper()}_SIZE"
    head = [f"/* {c_comment(onnx_name, COMMENT_LIMIT)}: {dt.name} {shape}, {flat.size} elements in C (row-major) "
            f"order{note} */", f"#define {macro} {flat.size}"]
    if original is not None:
        head.insert(0, f"#define {name.upper()}_NAME {c_string(original)}")
    if flat.size == 0:
        return "\n".join([*head, f"/* {name}: empty array, no C definition */"]) + "\n", math
    rows = [", ".join(lits[i: i + _PER_LINE]) for i in range(0, len(lits), _PER_LINE)]
    body = ",\n    ".join(rows)
    return "\n".join([*head, f"static const {ctype} {name}[{macro}] = {{\n    {body}\n}};"]) + "\n", math


def _claims(name: str) -> set[str]:
    """The upper-case names an array ``name`` takes: itself (as compared when upper-cased) and its macros."""
    u = name.upper()
    return {u, f"{u}_SIZE", f"{u}_NAME"}


def c_names(onnx_names, prefix: str) -> dict[str, str]:
    """{ONNX name: ``<prefix>_<C identifier>``} (the identifier cut to :data:`NAME_LIMIT` characters), a numeric
    suffix keeping names apart whose identifiers or ``_SIZE`` / ``_NAME`` macros would clash (also when
    upper-cased); the same names give the same identifiers, in order."""
    if not _IDENTIFIER.fullmatch(str(prefix)):
        raise AttributeValueError(f"prefix: expected a C identifier, got {brief(prefix)}")
    names: dict[str, str] = {}
    taken: set[str] = set()
    for onnx_name in onnx_names:
        base = f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', str(onnx_name))[:NAME_LIMIT]}"
        name, k = base, 1
        while _claims(name) & taken:
            k += 1
            name = f"{base}_{k}"
        names[onnx_name] = name
        taken |= _claims(name)
    return names


def c_header(arrays: dict[str, np.ndarray], prefix: str, guard: str, title: str) -> str:
    """A C header holding every array of ``arrays`` ({ONNX name: array}) as ``<prefix>_<name>``
    (:func:`c_names`), each with its ONNX name as ``#define <PREFIX>_<NAME>_NAME "..."``; ``title`` goes into the
    opening comment (:func:`c_comment`)."""
    if not _IDENTIFIER.fullmatch(str(guard)):
        raise AttributeValueError(f"guard: expected a C identifier, got {brief(guard)}")
    names = c_names(arrays, prefix)
    blocks, math = [], False
    for onnx_name, array in arrays.items():
        text, uses_math = c_array(names[onnx_name], array, onnx_name, original=onnx_name)
        blocks.append(text)
        math = math or uses_math
    includes = ["#include <stdint.h>"] + (["#include <math.h> /* INFINITY, NAN */"] if math else [])
    return "\n".join([
        f"/* {c_comment(title)}", f" * Written by fusedrnn {__version__} (fusedrnn export-vectors). */",
        f"#ifndef {guard}", f"#define {guard}", "", *includes, "", *blocks, f"#endif /* {guard} */", "",
    ])


__all__ = ["COMMENT_LIMIT", "NAME_LIMIT", "c_array", "c_comment", "c_header", "c_identifier", "c_names", "c_string"]
