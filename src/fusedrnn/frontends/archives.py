"""Reading files that may be damaged or hostile: zip archives (npz, PyTorch ``.pt``, ``.keras``) and NumPy
arrays, each claim a file makes checked against the file before anything is allocated or decompressed.

* a zip member must be stored or deflated, and its uncompressed size (the size the reader will allocate) must
  fit what its compressed bytes can hold: equal for a stored member, at most :data:`DEFLATE_RATIO` times for a
  deflated one (deflate cannot compress further), and no member may claim more compressed bytes than the
  archive has;
* an ``.npy`` header's shape times its item size must fit in the bytes behind the header; arrays of Python
  objects are refused before any unpickling could start (``allow_pickle`` stays off).

Every refusal is a :class:`~fusedrnn.errors.FileFormatError` (a ValueError) naming the argument, what was
expected and what the file holds, on one line.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import FileFormatError
from ..validation import brief

DEFLATE_RATIO = 1100
"""The most uncompressed bytes a deflated zip member may claim per compressed byte (deflate's limit is about
1032)."""
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
                RuntimeError)
"""What zipfile and numpy raise on a file that is damaged (a CRC mismatch, a truncated stream, a bad header)."""


def _why(exc: BaseException) -> str:
    return brief(f"{type(exc).__name__}: {exc}", 120)


def sniff(path: Path) -> str:
    """``"npy"``, ``"zip"`` or ``"other"`` by the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head == NPY_MAGIC:
        return "npy"
    return "zip" if head[:4] in ZIP_MAGIC else "other"


def open_zip(path: Path, argument: str) -> zipfile.ZipFile:
    """``path`` as an open ZipFile whose every member's claimed sizes fit the archive (see the module
    docstring); raises FileFormatError."""
    size = os.path.getsize(path)
    try:
        z = zipfile.ZipFile(path)
    except _READ_ERRORS as exc:
        raise FileFormatError(f"{argument}: cannot read {brief(str(path))} as a zip / npz archive ({_why(exc)})") \
            from None
    try:
        for info in z.infolist():
            where = f"{argument}: member {brief(info.filename)} of {brief(str(path))}"
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise FileFormatError(f"{where}: expected a stored or deflated member, got compression method "
                                      f"{info.compress_type}")
            if info.compress_size > size:
                raise FileFormatError(f"{where}: claims {info.compress_size} compressed bytes in a {size}-byte file")
            bound = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
                DEFLATE_RATIO * info.compress_size + 64
            if info.file_size > bound:
                raise FileFormatError(f"{where}: claims {info.file_size} bytes, more than its {info.compress_size} "
                                      f"compressed bytes can hold")
    except BaseException:
        z.close()
        raise
    return z


def _header(f, where: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of the .npy stream ``f`` (at its start), refusing object arrays."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"npy format version {version[0]}.{version[1]} is not read here (1.0 and 2.0 are)")
    except Exception as exc:  # noqa: BLE001 - numpy parses the header's Python literal: ValueError, SyntaxError,
        # tokenize.TokenError, RecursionError, ... on damaged text
        raise FileFormatError(f"{where}: expected an .npy array header ({_why(exc)})") from None
    if dtype.hasobject:
        raise FileFormatError(f"{where}: holds Python objects (dtype {brief(dtype)}); expected a numeric array "
                              f"(object arrays would need unpickling, which stays off)")
    return tuple(int(d) for d in shape), dtype, f.tell()


def _check_size(shape, dtype: np.dtype, available: int, where: str) -> None:
    need = math.prod(shape) * dtype.itemsize
    if need > available:
        raise FileFormatError(f"{where}: header claims shape {brief(shape)} {dtype} ({need} bytes) but only "
                              f"{available} bytes follow it")


def read_npy(path: Path, argument: str) -> np.ndarray:
    """The array in the .npy file ``path``, its header checked against the file size first."""
    where = f"{argument}: {brief(str(path))}"
    try:
        with open(path, "rb") as f:
            shape, dtype, start = _header(f, where)
            _check_size(shape, dtype, os.fstat(f.fileno()).st_size - start, where)
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
    except FileFormatError:
        raise
    except _READ_ERRORS as exc:
        raise FileFormatError(f"{where}: cannot read it as an .npy array ({_why(exc)})") from None


def read_npz(path: Path, argument: str) -> dict[str, np.ndarray]:
    """{name: array} of every ``<name>.npy`` member of the npz ``path`` (other members are ignored), each
    member's header checked against its size before it is read."""
    out = {}
    with open_zip(path, argument) as z:
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                continue
            where = f"{argument}: array {brief(info.filename[:-4])} of {brief(str(path))}"
            try:
                with z.open(info) as f:
                    shape, dtype, start = _header(f, where)
                    _check_size(shape, dtype, info.file_size - start, where)
                with z.open(info) as f:
                    out[info.filename[:-4]] = np.lib.format.read_array(f, allow_pickle=False)
            except FileFormatError:
                raise
            except _READ_ERRORS as exc:
                raise FileFormatError(f"{where}: cannot read it ({_why(exc)})") from None
    return out


def read_arrays(path: Path, argument: str) -> np.ndarray | dict[str, np.ndarray]:
    """The array of an .npy file or the {name: array} of an npz archive at ``path``, told apart by the first
    bytes (as ``np.load`` does); anything else raises FileFormatError."""
    try:
        kind = sniff(path)
    except OSError as exc:
        raise FileFormatError(f"{argument}: cannot read {brief(str(path))} ({_why(exc)})") from None
    if kind == "npy":
        return read_npy(path, argument)
    if kind == "zip":
        return read_npz(path, argument)
    raise FileFormatError(f"{argument}: cannot read {brief(str(path))}: expected an .npz archive or an .npy array")


__all__ = ["DEFLATE_RATIO", "open_zip", "read_arrays", "read_npy", "read_npz", "sniff"]
