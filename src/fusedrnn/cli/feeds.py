"""Model inputs from npz / npy files, shared by the commands that run a model (``run``, ``compare``,
``export-vectors``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..frontends import onnx as fonnx
from .common import CLIError

LABELS = "y"
"""The npz array holding labels (unless the model has an input of that name)."""
CALIBRATION_SAMPLES = 256
"""How many samples of the data calibrate a quantized target when no calibration file is given."""

UNREADABLE = (OSError, ValueError, TypeError, AttributeError, EOFError, zipfile.BadZipFile)
"""What np.load raises on a file that is not the npz / npy it should be."""


def load_feeds(model: fonnx.Model, data: Path, option: str = "--data") -> tuple[dict, np.ndarray | None]:
    """The model's feeds from the npz ``data`` (float arrays cast to the declared float dtype), and
    the optional label array ``y`` (unless the model has an input called ``y``). A ``.npy`` file is the one
    input of a single-input model."""
    names = [i.name for i in model.inputs]
    if data.suffix.lower() == ".npy":
        if len(names) != 1:
            raise CLIError(f"{option}: a .npy file holds one array but the model has {len(names)} inputs "
                           f"({', '.join(names)}); give an npz with one array per input name")
        try:
            arrays = {names[0]: np.load(data, allow_pickle=False)}
        except UNREADABLE as exc:
            raise CLIError(f"{option}: cannot read {data} as a .npy array ({exc})") from None
    else:
        try:
            with np.load(data, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except UNREADABLE as exc:
            raise CLIError(f"{option}: cannot read {data} as an npz archive ({exc})") from None
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CLIError(f"{option}: {data} lacks the model input(s) {', '.join(missing)} "
                       f"(it holds {', '.join(arrays) or 'nothing'})")
    feeds = {}
    for spec in model.inputs:
        a = arrays[spec.name]
        if spec.dtype is not None and a.dtype != spec.dtype:
            if not (a.dtype.kind == "f" and spec.dtype.kind == "f"):  # only float precision is adapted
                raise CLIError(f"{option}: array {spec.name!r} has dtype {a.dtype}; the model expects {spec.dtype}")
            a = a.astype(spec.dtype)
        feeds[spec.name] = a
    labels = arrays.get(LABELS) if LABELS not in names else None
    return feeds, labels


def calibration_subset(feeds: dict, limit: int = CALIBRATION_SAMPLES) -> dict:
    """The first ``limit`` samples of every batched feed (axis 0), used to calibrate quantized targets when no
    separate calibration data is given."""
    return {k: (v[:limit] if np.ndim(v) and v.shape[0] > limit else v) for k, v in feeds.items()}


__all__ = ["CALIBRATION_SAMPLES", "LABELS", "UNREADABLE", "calibration_subset", "load_feeds"]
