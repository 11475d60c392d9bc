"""Argument checks shared by the public entry points; every message names the argument, the expectation and
the value received."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import AttributeValueError, DTypeError, SequenceLengthError, ShapeError


def as_float_array(a, argument: str) -> np.ndarray:
    """``a`` as a NumPy float array (float16, bfloat16, float32 or float64), or raise DTypeError."""
    try:
        arr = np.asarray(a)
    except Exception as exc:  # noqa: BLE001 - anything array-like that numpy refuses
        raise DTypeError(f"{argument}: expected a float array, got {type(a).__name__}") from exc
    if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":
        raise DTypeError(f"{argument}: expected a float array (float16/bfloat16/float32/float64), got dtype "
                         f"{arr.dtype}")
    return arr


def check_shape(arr: np.ndarray, expected: tuple, argument: str, meaning: str) -> None:
    """Raise ShapeError unless ``arr.shape == expected``; ``meaning`` spells the dimensions."""
    if arr.shape != tuple(expected):
        raise ShapeError(f"{argument}: expected shape {tuple(expected)} {meaning}, got {arr.shape}")


def check_rank(arr: np.ndarray, rank: int, argument: str, meaning: str) -> None:
    if arr.ndim != rank:
        raise ShapeError(f"{argument}: expected a {rank}-D array {meaning}, got shape {arr.shape}")


def positive_int(value, argument: str) -> int:
    if type(value) is int and value > 0:  # the common case first: an ABC check costs about 0.3 µs a call
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise AttributeValueError(f"{argument}: expected a positive integer, got {value!r}")
    return int(value)


def optional_positive_float(value, argument: str) -> float | None:
    """None, or a finite float > 0 (clip thresholds)."""
    if value is None:
        return None
    try:
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and 0 < float(value) < np.inf
    except OverflowError:
        ok = False
    if not ok:
        raise AttributeValueError(f"{argument}: expected a positive finite number or None, got {value!r}")
    return float(value)


def flag(value, argument: str) -> bool:
    """An ONNX 0/1 integer flag or a bool."""
    if (type(value) is int and value in (0, 1)) or isinstance(value, (bool, np.bool_)) or (
            isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise AttributeValueError(f"{argument}: expected 0 or 1, got {value!r}")


def choice(value, options: tuple, argument: str):
    """``value`` if it is one of ``options`` (strings or None), else AttributeValueError."""
    if not isinstance(value, (str, type(None))) or value not in options:
        raise AttributeValueError(f"{argument}: expected one of {options}, got {value!r}")
    return value


def sequence_lengths(lens, T: int, B: int, argument: str = "sequence_lens") -> np.ndarray | None:
    """Validate per-batch lengths: integers, shape [B], 0 <= len <= T. Returns int64 or None."""
    if lens is None:
        return None
    try:
        arr = np.asarray(lens)
    except ValueError as exc:
        raise ShapeError(f"{argument}: expected a 1-D integer array of shape ({B},), got a ragged sequence") from exc
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"{argument}: expected an integer array (int32), got dtype {arr.dtype}")
    check_shape(arr, (B,), argument, "(batch_size,)")
    bad = (arr < 0) | (arr > T)
    if np.any(bad):
        raise SequenceLengthError(
            f"{argument}: expected every length in [0, {T}] (the sequence length), got "
            f"{arr[bad].tolist()[:8]} at batch index {np.flatnonzero(bad).tolist()[:8]}"
        )
    return arr.astype(np.int64)


def compute_dtype(x: np.ndarray, dtype=None) -> np.dtype:
    """The engine's compute dtype: ``dtype`` if given, else float64 for float64 input, float32 otherwise."""
    if dtype is None:
        return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise DTypeError(f"dtype: expected float32 or float64 as the compute dtype, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise DTypeError(f"dtype: expected float32 or float64 as the compute dtype, got {dt}")
    return dt


def layout_value(value) -> int:
    """ONNX ``layout``: 0 (time-major) or 1 (batch-major)."""
    if type(value) is int and value in (0, 1):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value not in (0, 1):
        raise AttributeValueError(f"layout: expected 0 (time-major) or 1 (batch-major), got {value!r}")
    return int(value)


def float_list(value, argument: str) -> list[float] | None:
    """None, or a flat list of finite floats (ONNX ``activation_alpha`` / ``activation_beta``)."""
    if value is None:
        return None
    ok = isinstance(value, (list, tuple, np.ndarray))
    if ok:
        try:
            arr = np.asarray(value, dtype=np.float64)
            ok = arr.ndim == 1 and bool(np.all(np.isfinite(arr)))
        except (TypeError, ValueError):
            ok = False
    if not ok:
        raise AttributeValueError(f"{argument}: expected a list of finite floats, got {value!r}")
    return arr.tolist()


def name_list(value, argument: str) -> list[str]:
    """A list of strings (ONNX ``activations``)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise AttributeValueError(f"{argument}: expected a list of activation names, got {value!r}")
    return list(value)


def calibration_sequences(calibration, input_size: int, *, batch_first: bool = False,
                          argument: str = "calibration") -> list[np.ndarray]:
    """Calibration inputs as a list of time-major float64 arrays [T, B, I]: one array or a list of arrays, each
    [T, B, I] ([B, T, I] when ``batch_first``) or one sequence [T, I]. Raises ShapeError for an empty list, a
    wrong shape, an empty array or a non-finite value, DTypeError for what is not numeric."""
    items = list(calibration) if isinstance(calibration, (list, tuple)) else [calibration]
    if not items:
        raise ShapeError(f"{argument}: expected input sequences, got an empty list")
    layout = "B, T" if batch_first else "T, B"
    out = []
    for k, a in enumerate(items):
        try:
            x = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DTypeError(f"{argument}[{k}]: expected numeric input sequences, got {type(a).__name__}") from exc
        if x.ndim == 2:
            x = x[:, None, :] if not batch_first else x[None]
        if x.ndim != 3 or x.shape[2] != input_size:
            raise ShapeError(f"{argument}[{k}]: expected input sequences [{layout}, {input_size}] (or [T, "
                             f"{input_size}]), got shape {x.shape}")
        if x.size == 0:
            raise ShapeError(f"{argument}[{k}]: expected at least one timestep and one sequence, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ShapeError(f"{argument}[{k}]: expected finite values")
        out.append(np.swapaxes(x, 0, 1) if batch_first else x)
    return out


def brief(value, limit: int = 60) -> str:
    """``value`` for an error message: a string as its ``repr`` (quotes and escapes make control characters and
    line breaks visible), anything else as ``str``; on one line and cut to ``limit`` characters with ``...``, so
    that a name or value read from a hostile file cannot make a message long or multi-line."""
    text = repr(value) if isinstance(value, str) else " ".join(str(value).split())
    return text if len(text) <= limit else text[:max(limit - 3, 1)] + "..."
