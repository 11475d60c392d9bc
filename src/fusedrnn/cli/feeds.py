"""Model inputs from npz / npy files, shared by the commands that run a model (``run``, ``compare``,
``export-vectors``)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np

from ..errors import FileFormatError
from ..frontends import onnx as fonnx
from ..frontends.archives import read_npy, read_npz
from ..validation import brief
from .common import CLIError

LABELS = "y"
"""The npz array holding labels (unless the model has an input of that name)."""
CALIBRATION_SAMPLES = 256
"""How many samples of the data calibrate a quantized target when no calibration file is given."""

UNREADABLE = (OSError, ValueError, TypeError, AttributeError, EOFError, zipfile.BadZipFile)
"""What np.load raises on a file that is not the npz / npy it should be."""


def display_name(name: str) -> str:
    """A model or array name for a message: as it is when it is short and plain, else quoted and cut."""
    return name if re.fullmatch(r"[\w.:/+-]{1,60}", name, re.ASCII) else brief(name)


def read_data(path: Path, option: str, npy: bool = False):
    """The array of the .npy file (``npy``) or the {name: array} of the npz archive ``path``, checked against
    the file before anything is allocated (:mod:`fusedrnn.frontends.archives`); CLIError when unreadable."""
    try:
        return read_npy(path, option) if npy else read_npz(path, option)
    except FileFormatError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"{option}: cannot read {path} ({exc.strerror or exc})") from None


def load_feeds(model: fonnx.Model, data: Path, option: str = "--data", *, file_batch_first: bool | None = None,
               model_batch_first: bool | None = None, any_name: bool = False) -> tuple[dict, np.ndarray | None]:
    """The model's feeds from the npz ``data`` (float arrays cast to the declared float dtype), and
    the optional label array ``y`` (unless the model has an input called ``y``). A ``.npy`` file is the one
    input of a single-input model; so is an npz's only array besides ``y`` with ``any_name`` (for formats whose
    input names are made up on the way to ONNX: Keras, PyTorch, LiteRT).

    ``file_batch_first`` (``--batch-first`` / ``--time-major``: the file's sequences are [B, T, ...] or
    [T, B, ...]) against ``model_batch_first`` (the model's layout): when both are known and differ, the first
    two axes of every float input of rank 3 or more are swapped."""
    names = [i.name for i in model.inputs]
    if data.suffix.lower() == ".npy":
        if len(names) != 1:
            raise CLIError(f"{option}: a .npy file holds one array but the model has {len(names)} inputs "
                           f"({', '.join(display_name(n) for n in names[:8])}); give an npz with one array per input "
                           f"name")
        arrays = {names[0]: read_data(data, option, npy=True)}
    else:
        arrays = read_data(data, option)
        rest = [k for k in arrays if k != LABELS]
        if any_name and len(names) == 1 and names[0] not in arrays and len(rest) == 1:
            arrays = {names[0]: arrays[rest[0]], **({LABELS: arrays[LABELS]} if LABELS in arrays else {})}
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CLIError(f"{option}: {data} lacks the model input(s) {', '.join(display_name(n) for n in missing[:8])} "
                       f"(it holds {', '.join(display_name(n) for n in list(arrays)[:8]) or 'nothing'})")
    feeds = {}
    for spec in model.inputs:
        a = arrays[spec.name]
        if spec.dtype is not None and a.dtype != spec.dtype:
            if not (a.dtype.kind == "f" and spec.dtype.kind == "f"):  # only float precision is adapted
                raise CLIError(f"{option}: array {brief(spec.name)} has dtype {a.dtype}; the model expects "
                               f"{spec.dtype}")
            a = a.astype(spec.dtype)
        swap = file_batch_first is not None and model_batch_first is not None and file_batch_first != model_batch_first
        if swap and a.dtype.kind == "f" and a.ndim >= 3:
            a = np.ascontiguousarray(np.swapaxes(a, 0, 1))
        feeds[spec.name] = a
    labels = arrays.get(LABELS) if LABELS not in names else None
    return feeds, labels


def calibration_subset(feeds: dict, limit: int = CALIBRATION_SAMPLES) -> dict:
    """The first ``limit`` samples of every batched feed (axis 0), used to calibrate quantized targets when no
    separate calibration data is given."""
    return {k: (v[:limit] if np.ndim(v) and v.shape[0] > limit else v) for k, v in feeds.items()}


__all__ = ["CALIBRATION_SAMPLES", "LABELS", "UNREADABLE", "calibration_subset", "display_name", "load_feeds",
           "read_data"]
