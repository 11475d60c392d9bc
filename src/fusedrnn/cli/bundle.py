"""On-target bundles: what ``export-vectors`` adds for a target whose kernels trace their integer tensors (MLI 2.0,
LiteRT 8x8_16), so that a C test on the device compares byte for byte, node by node.

For every recurrent node, from the one calibration of the export:

* ``node_<name>.npz``: per direction ``d<k>_x``, ``d<k>_h0``, ``d<k>_c0`` (the integer input and initial states as
  the kernel read them), ``d<k>_y``, ``d<k>_h``, ``d<k>_c`` (its integer outputs and final states; time order)
  and, for MLI, the integer weights and every quantization parameter (``d<k>_weights_in``, ``d<k>_in_scale``,
  ... see :meth:`fusedrnn.targets.mli.target.MliPrepared.quantization`);
* ``node_<name>.h`` (MLI): the weights and parameters as the C header ``fusedrnn convert --to mli`` writes;
  ``node_<name>.tflite`` (LiteRT): the node as an integer .tflite model (int8 input and output) that the
  interpreter runs on ``d0_x``;
* an entry in ``manifest.json`` tying them together (names, dtypes, shapes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..frontends import onnx as fonnx
from ..frontends.c_export import mli_export
from ..frontends.c_source import c_identifier
from ..frontends.onnx_ops import node_key, recurrent_nodes
from ..targets.litert.export import to_tflite


def traced_layers(model: fonnx.Model) -> dict[str, object]:
    """{node name: emulated layer} of the nodes of ``model`` (a ``to(target)`` copy) whose prepared target
    traces its integer tensors; each gets a fresh ``trace`` dict."""
    out = {}
    for node in recurrent_nodes(model.proto.graph):
        emu = (model._emulations or {}).get(node_key(node))
        prepared = getattr(getattr(emu, "layer", None), "prepared", None)
        if prepared is not None and (hasattr(prepared, "quantization") or hasattr(prepared, "kernels")) \
                and getattr(prepared, "integer", True):
            prepared.trace = {}
            out[node.name or node_key(node)] = emu.layer
    return out


def write_bundles(stage: Path, layers: dict[str, object], member) -> tuple[list[str], list[dict]]:
    """Write each traced node's files into ``stage``; returns (file names, manifest entries). ``member(name)``
    makes a node name safe as a file name part."""
    files, entries = [], []
    for name, layer in layers.items():
        prepared = layer.prepared
        trace, prepared.trace = prepared.trace or {}, None
        if not trace:
            continue
        safe = member(name)
        arrays = {}
        for d, tensors in sorted(trace.items()):
            arrays.update({f"d{d}_{k}": np.asarray(v) for k, v in tensors.items()})
            if hasattr(prepared, "quantization"):
                arrays.update({f"d{d}_{k}": v for k, v in prepared.quantization(d).items()})
            elif hasattr(prepared, "qparams"):  # LiteRT: the activations' parameters (the weights are in the .tflite)
                arrays.update({f"d{d}_{k}": np.asarray(v) for k, v in prepared.qparams(d).items()})
        np.savez(stage / f"node_{safe}.npz", **arrays)
        written = [f"node_{safe}.npz"]
        if hasattr(prepared, "quantization"):  # MLI: the C header of convert --to mli
            ident = c_identifier(safe)[:40]
            text = mli_export(layer, layer.target, None, prefix=f"node_{ident}").header(
                f"FUSEDRNN_NODE_{ident.upper()}_H")
            (stage / f"node_{safe}.h").write_text(text, encoding="ascii")
            written.append(f"node_{safe}.h")
        else:  # LiteRT: the node as an integer .tflite model
            T, B = trace[0]["x"].shape[:2]
            (stage / f"node_{safe}.tflite").write_bytes(to_tflite(layer, batch=B, time=T))
            written.append(f"node_{safe}.tflite")
        files += written
        entries.append({"node": name, "target": layer.target.name, "directions": len(trace), "files": written,
                        "reverse": [bool(r) for r in layer.spec.reverse],
                        "arrays": [{"name": k, "dtype": v.dtype.name, "shape": list(v.shape)}
                                   for k, v in arrays.items()]})
    return files, entries


__all__ = ["traced_layers", "write_bundles"]
