"""``fusedrnn export-vectors``: golden inputs and a target's exact outputs for on-target tests.

Writes into DIR: ``inputs.npz`` / ``outputs.npz`` (the arrays as run and as produced, bit for bit),
``inputs.h`` / ``outputs.h`` (the same arrays as C arrays) and ``manifest.json`` (model, target, calibration
source, fusedrnn version, names, shapes, dtypes, sha256 of every file). The files are written into a temporary
folder and renamed into DIR at the end (:mod:`fusedrnn.cli.staging`): a failed or interrupted run leaves the
previous export as it was.

npz members are the model's names made safe to unpack (:func:`npz_names`: ``[A-Za-z0-9_.-]``, unique); the
manifest's ``npz_name`` gives each one.

C headers: one ``static const <type> <prefix>_<name>[]`` per array (the name with every character outside
``[A-Za-z0-9_]`` replaced by ``_``, cut to 40 characters, made unique), flattened in C (row-major) order, its
ONNX name, shape and dtype in a comment (made safe: :func:`~fusedrnn.frontends.c_source.c_comment`), its element
count as ``#define <PREFIX>_<NAME>_SIZE`` and its ONNX name, byte for byte, as the string literal
``#define <PREFIX>_<NAME>_NAME``. float32 values are written ``%.9g`` and
float64 ``%.17g`` (each parses back to the same bits); integers as integers; float16 / bfloat16 / float8
as their bit patterns (``uint16_t`` / ``uint8_t`` hex); ±inf and NaN as ``INFINITY`` / ``NAN`` from
``<math.h>`` (NaN payloads are not kept).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import click
import numpy as np

from .. import __version__
from .. import targets as registry
from ..errors import FusedRNNError
from ..frontends.c_source import c_array, c_header, c_identifier, c_names  # noqa: F401 - re-exported
from . import options as options_mod
from . import render
from .bundle import traced_layers, write_bundles
from .common import CLIError, delayed_progress
from .feeds import CALIBRATION_SAMPLES, calibration_subset, load_feeds
from .models import open_model
from .staging import staged_folder


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _describe(arrays: dict[str, np.ndarray], prefix: str) -> list[dict]:
    names, members = c_names(arrays, prefix), npz_names(arrays)
    return [{"name": k, "npz_name": members[k], "c_name": names[k], "dtype": v.dtype.name, "shape": list(v.shape)}
            for k, v in arrays.items()]


_NPZ_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
NPZ_NAME_LIMIT = 100
"""How many characters of a model's name go into an npz member name."""


def npz_names(names) -> dict[str, str]:
    """{model name: npz member name (without ``.npy``)}: every character outside ``[A-Za-z0-9_.-]`` becomes
    ``_`` (no ``/``, ``\\``, ``:`` or control characters: the member stays inside the folder it is unpacked to),
    a ``_`` goes before a leading ``.`` or ``-``, the name is cut to :data:`NPZ_NAME_LIMIT` characters, and a
    numeric suffix keeps apart names that would clash (also on a case-insensitive file system). Names that are
    already safe (``x``, ``logits``, ``input.1``) stay as they are."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = _NPZ_UNSAFE.sub("_", str(name))[:NPZ_NAME_LIMIT]
        if not base or base[0] in ".-":
            base = "_" + base
        member, k = base, 1
        while member.lower() in taken:
            k += 1
            member = f"{base}_{k}"
        out[name] = member
        taken.add(member.lower())
    return out


def save_npz(path: Path, arrays: dict[str, np.ndarray], members: dict[str, str] | None = None) -> None:
    """``arrays`` as an uncompressed npz (like ``np.savez``, for any array names, ``file`` included); no
    pickles. ``members`` maps each name to its member name (default: :func:`npz_names`)."""
    members = npz_names(arrays) if members is None else members
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, array in arrays.items():
            with z.open(f"{members[name]}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(array), allow_pickle=False)


def _first(feeds: dict, n: int | None) -> dict:
    return feeds if n is None else {k: (v[:n] if np.ndim(v) else v) for k, v in feeds.items()}


@click.command("export-vectors")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", "-t", "target_name", required=True, metavar="NAME", help="The target to run on.")
@click.option("--input", "input_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="NPZ", help="npz whose arrays are the model inputs by name (or a .npy for a single-input "
                                  "model); other arrays are ignored.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="Folder to write into (created if missing; files of the same names are replaced, together, "
                   "once the export has succeeded).")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
              help="npz of model inputs to calibrate a quantized target on (default: the first "
                   f"{CALIBRATION_SAMPLES} samples of --input).")
@click.option("--samples", type=click.IntRange(min=1), metavar="N",
              help="Export only the first N samples (axis 0) of every input (calibration still uses the "
                   "default or --calibration).")
@options_mod.model_options
@options_mod.output_options
def export_vectors(model_path: Path, target_name: str, input_path: Path, out_dir: Path, calibration: Path | None,
                   samples: int | None, **kwargs) -> None:
    """Run MODEL (ONNX, .tflite, Keras 3, PyTorch: any format ``fusedrnn run`` takes) on target NAME and write
    golden vectors into DIR: the inputs and the target's outputs as inputs.npz / outputs.npz (bit for bit), as C
    headers inputs.h / outputs.h, and manifest.json (model, target, calibration source, fusedrnn version, sha256
    of each file). On an integer target (MLI 2.0, LiteRT 8x8_16) also a bundle per recurrent node: its integer
    inputs, outputs and states, weights and quantization parameters (node_<name>.npz), the C header or .tflite
    of the node, listed in the manifest."""
    model_opts, _ = options_mod.collect(kwargs)
    printed = options_mod.output_format(kwargs.pop("out_format"), kwargs.pop("as_json"))
    try:
        target = registry.get(target_name)
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    for what, p in (("MODEL", model_path), ("--input", input_path), ("--calibration", calibration)):
        if p is not None and not p.is_file():
            raise CLIError(f"{what}: no such file: {p}")
    if out_dir.exists() and not out_dir.is_dir():
        raise CLIError(f"--out: {out_dir} exists and is not a folder")
    loaded = open_model(model_path, model_opts, input_path)
    model = loaded.model
    layout = {"file_batch_first": model_opts.batch_first, "model_batch_first": loaded.batch_first,
              "any_name": loaded.format != "onnx"}
    all_feeds, _ = load_feeds(model, input_path, "--input", **layout)
    feeds = _first(all_feeds, samples)
    cal = cal_info = None
    if target.needs_calibration:
        if calibration is not None:
            cal = load_feeds(model, calibration, "--calibration", **layout)[0]
            cal_info = {"source": "--calibration", "path": str(calibration), "sha256": _sha256(calibration)}
        else:
            cal = calibration_subset(all_feeds)
            cal_info = {"source": f"the first {CALIBRATION_SAMPLES} samples of --input", "path": str(input_path),
                        "sha256": _sha256(input_path)}
        cal_info["samples"] = next((int(a.shape[0]) for a in cal.values() if np.ndim(a)), 1)
    files = ("inputs.npz", "outputs.npz", "inputs.h", "outputs.h")
    with delayed_progress("exporting", 4) as steps:
        try:
            steps.begin(f"{target.name}: preparing")
            runner = model.to(target, calibration=cal)
            traced = traced_layers(runner)  # integer targets: each node's integer tensors for the bundle
            steps.advance()
            steps.begin(f"{target.name}: running")
            outputs = runner.run(feeds)
            steps.advance()
        except FusedRNNError as exc:
            raise CLIError(str(exc)) from None
        try:
            with staged_folder(out_dir, last=("manifest.json",)) as stage:
                steps.begin("writing npz")
                save_npz(stage / "inputs.npz", feeds, npz_names(feeds))
                save_npz(stage / "outputs.npz", outputs, npz_names(outputs))
                steps.advance()
                steps.begin("writing C headers")
                try:
                    headers = {"inputs.h": c_header(feeds, "input", "FUSEDRNN_VECTORS_INPUTS_H",
                                                    f"Golden inputs of {model_path.name} for target {target.name}."),
                               "outputs.h": c_header(outputs, "output", "FUSEDRNN_VECTORS_OUTPUTS_H",
                                                     f"Outputs of {model_path.name} on target {target.name}.")}
                except FusedRNNError as exc:
                    raise CLIError(f"C header: {exc}") from None
                for name, text in headers.items():
                    (stage / name).write_text(text, encoding="ascii")
                node_files, node_entries = write_bundles(stage, traced, lambda n: npz_names([n])[n])
                files = (*files, *node_files)
                steps.advance()
                manifest = {
                    "fusedrnn_version": __version__,
                    "model": {"path": str(model_path), "sha256": _sha256(model_path), "format": loaded.format},
                    "target": {k: v for k, v in target.summary().items() if k != "features"},
                    "input": {"path": str(input_path), "sha256": _sha256(input_path),
                              "samples": next((int(a.shape[0]) for a in feeds.values() if np.ndim(a)), 1)},
                    "calibration": cal_info,
                    "inputs": _describe(feeds, "input"),
                    "outputs": _describe(outputs, "output"),
                    "nodes": node_entries,
                    "files": {f: {"sha256": _sha256(stage / f), "bytes": (stage / f).stat().st_size} for f in files},
                }
                (stage / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CLIError(f"--out: cannot write into {out_dir} ({exc.strerror or exc})") from None
    summary = {"wrote": [*files, "manifest.json"], "folder": str(out_dir), "target": target.name,
               "model_format": loaded.format, "inputs": len(feeds), "outputs": len(outputs)}
    if printed == "json":
        click.echo(json.dumps(summary, indent=2))
    elif printed in ("csv", "markdown"):
        keys = list(summary)
        row = [", ".join(v) if isinstance(v, list) else str(v) for v in summary.values()]
        click.echo((render.csv_text if printed == "csv" else render.markdown_text)(keys, [row]), nl=False)
    else:
        click.echo(f"wrote {', '.join((*files, 'manifest.json'))} to {out_dir} "
                   f"({len(feeds)} input(s), {len(outputs)} output(s), target {target.name})")


__all__ = ["NPZ_NAME_LIMIT", "c_array", "c_header", "c_identifier", "c_names", "export_vectors", "npz_names",
           "save_npz"]
