"""MODEL arguments of every format (:mod:`fusedrnn.frontends.model_files`) for the commands, their errors as one
line, and what a model leaves in float on every target."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import example
from ..errors import FusedRNNError
from ..frontends.model_files import TORCH_FORMATS, LoadedModel, load_model, sniff
from ..frontends.onnx_ops import recurrent_op
from .common import CLIError
from .feeds import read_data
from .options import ModelOptions

DATA_MOVEMENT = frozenset({
    "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather", "Shape", "Constant",
    "ConstantOfShape", "Identity", "Expand", "Cast", "Flatten", "Size", "Range", "Tile", "Where", "Equal",
    "Less", "Greater", "Not", "And", "Or", "ReverseSequence", "If", "Loop", "Scan",
})
"""Op types that move or select values without arithmetic: not listed as 'stayed float'."""


def model_and_data(model_path: Path | None, data: Path | None,
                   calibration: Path | None = None) -> tuple[Path, Path]:
    """MODEL and --data as a command runs them: the bundled example and its test split without MODEL; CLIError
    when MODEL is given without --data or a file is missing."""
    if model_path is None:
        model_path = example.model_path()
        data = data or example.data_path()
    elif data is None:
        raise CLIError("--data: an npz with the inputs of MODEL is required when MODEL is given")
    for what, p in (("MODEL", model_path), ("--data", data), ("--calibration", calibration)):
        if p is not None and not p.is_file():
            raise CLIError(f"{what}: no such file: {p}")
    return model_path, data


def open_model(path: Path, opts: ModelOptions, data: Path | None = None, state_inputs: bool = False) -> LoadedModel:
    """MODEL as a :class:`LoadedModel`; a PyTorch program or TorchScript module is traced on ``data``'s
    arrays. Errors are one-line CLIErrors."""
    if not path.is_file():
        raise CLIError(f"MODEL: no such file: {path}")
    try:
        example = None
        if data is not None and data.is_file() and sniff(path) in TORCH_FORMATS[:2]:
            arrays = read_data(data, "--data", npy=data.suffix.lower() == ".npy")
            example = {"x": arrays} if isinstance(arrays, np.ndarray) else \
                {k: v for k, v in arrays.items() if k != "y" or len(arrays) == 1}
        return load_model(path, layers=opts.layers, batch_first=opts.batch_first, nonlinearity=opts.nonlinearity,
                          example=example, state_inputs=state_inputs)
    except FusedRNNError as exc:
        text = str(exc)
        raise CLIError(text if text.startswith(("MODEL", "--")) else f"MODEL: {text}") from None
    except OSError as exc:
        raise CLIError(f"MODEL: cannot read {path} ({exc.strerror or exc})") from None


def node_roles(loaded: LoadedModel) -> tuple[list[str], list[str]]:
    """(the recurrent nodes every target emulates, the computing nodes that stay float on every target), as
    'name (op)' strings; subgraph recurrent nodes are in the first list by name."""
    proto = loaded.model.proto
    recurrent = list(loaded.model.recurrent_nodes)
    floats = [f"{n.name or n.output[0]} ({n.op_type})" for n in proto.graph.node
              if recurrent_op(n) is None and n.op_type not in DATA_MOVEMENT]
    return recurrent, floats


__all__ = ["DATA_MOVEMENT", "model_and_data", "node_roles", "open_model"]
