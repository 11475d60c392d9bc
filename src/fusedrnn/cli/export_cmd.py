"""``fusedrnn export-vectors``: golden inputs and a target's exact outputs for on-target tests.

Writes into DIR: ``inputs.npz`` / ``outputs.npz`` (the arrays as run and as produced, bit for bit),
``inputs.h`` / ``outputs.h`` (the same arrays as C arrays) and ``manifest.json`` (model, target, calibration
source, fusedrnn version, shapes, dtypes, sha256 of every file).

C headers: one ``static const <type> <prefix>_<name>[]`` per array (the name with every character outside
``[A-Za-z0-9_]`` replaced by ``_``), flattened in C (row-major) order, its ONNX name, shape and dtype in a
comment and its element count as ``#define <PREFIX>_<NAME>_SIZE``. float32 values are written ``%.9g`` and
float64 ``%.17g`` (each parses back to the same bits); integers as integers; float16 / bfloat16 / float8
as their bit patterns (``uint16_t`` / ``uint8_t`` hex); ±inf and NaN as ``INFINITY`` / ``NAN`` from
``<math.h>`` (NaN payloads are not kept).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import click
import numpy as np

from .. import __version__
from .. import targets as registry
from ..errors import FusedRNNError
from ..frontends import onnx as fonnx
from ..frontends.c_source import c_array, c_header, c_identifier, c_names  # noqa: F401 - re-exported
from .common import CLIError, delayed_progress
from .feeds import CALIBRATION_SAMPLES, calibration_subset, load_feeds


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _describe(arrays: dict[str, np.ndarray], prefix: str) -> list[dict]:
    names = c_names(arrays, prefix)
    return [{"name": k, "c_name": names[k], "dtype": v.dtype.name, "shape": list(v.shape)}
            for k, v in arrays.items()]


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as an uncompressed npz (like ``np.savez``, for any array names, ``file`` included); no
    pickles."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, array in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
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
              help="Folder to write into (created if missing; files of the same names are replaced).")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="NPZ",
              help="npz of model inputs to calibrate a quantized target on (default: the first "
                   f"{CALIBRATION_SAMPLES} samples of --input).")
@click.option("--samples", type=click.IntRange(min=1), metavar="N",
              help="Export only the first N samples (axis 0) of every input (calibration still uses the "
                   "default or --calibration).")
def export_vectors(model_path: Path, target_name: str, input_path: Path, out_dir: Path, calibration: Path | None,
                   samples: int | None) -> None:
    """Run MODEL on target NAME and write golden vectors into DIR: the inputs and the target's outputs as
    inputs.npz / outputs.npz (bit for bit), as C headers inputs.h / outputs.h, and manifest.json (model,
    target, calibration source, fusedrnn version, sha256 of each file)."""
    try:
        target = registry.get(target_name)
    except FusedRNNError as exc:
        raise CLIError(str(exc)) from None
    for what, p in (("MODEL", model_path), ("--input", input_path), ("--calibration", calibration)):
        if p is not None and not p.is_file():
            raise CLIError(f"{what}: no such file: {p}")
    if out_dir.exists() and not out_dir.is_dir():
        raise CLIError(f"--out: {out_dir} exists and is not a folder")
    try:
        model = fonnx.load(model_path)
    except (FusedRNNError, OSError) as exc:
        raise CLIError(f"MODEL: {exc}") from None
    all_feeds, _ = load_feeds(model, input_path, "--input")
    feeds = _first(all_feeds, samples)
    cal = cal_info = None
    if target.needs_calibration:
        if calibration is not None:
            cal = load_feeds(model, calibration, "--calibration")[0]
            cal_info = {"source": "--calibration", "path": str(calibration), "sha256": _sha256(calibration)}
        else:
            cal = calibration_subset(all_feeds)
            cal_info = {"source": f"the first {CALIBRATION_SAMPLES} samples of --input", "path": str(input_path),
                        "sha256": _sha256(input_path)}
        cal_info["samples"] = next((int(a.shape[0]) for a in cal.values() if np.ndim(a)), 1)
    with delayed_progress("exporting", 4) as steps:
        try:
            steps.begin(f"{target.name}: preparing")
            runner = model.to(target, calibration=cal)
            steps.advance()
            steps.begin(f"{target.name}: running")
            outputs = runner.run(feeds)
            steps.advance()
        except FusedRNNError as exc:
            raise CLIError(str(exc)) from None
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            steps.begin("writing npz")
            save_npz(out_dir / "inputs.npz", feeds)
            save_npz(out_dir / "outputs.npz", outputs)
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
                (out_dir / name).write_text(text, encoding="ascii")
            steps.advance()
        except OSError as exc:
            raise CLIError(f"--out: cannot write into {out_dir} ({exc.strerror or exc})") from None
    files = ("inputs.npz", "outputs.npz", "inputs.h", "outputs.h")
    manifest = {
        "fusedrnn_version": __version__,
        "model": {"path": str(model_path), "sha256": _sha256(model_path)},
        "target": {k: v for k, v in target.summary().items() if k != "features"},
        "input": {"path": str(input_path), "sha256": _sha256(input_path),
                  "samples": next((int(a.shape[0]) for a in feeds.values() if np.ndim(a)), 1)},
        "calibration": cal_info,
        "inputs": _describe(feeds, "input"),
        "outputs": _describe(outputs, "output"),
        "files": {f: {"sha256": _sha256(out_dir / f), "bytes": (out_dir / f).stat().st_size} for f in files},
    }
    try:
        (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"--out: cannot write into {out_dir} ({exc.strerror or exc})") from None
    click.echo(f"wrote {', '.join((*files, 'manifest.json'))} to {out_dir} "
               f"({len(feeds)} input(s), {len(outputs)} output(s), target {target.name})")


__all__ = ["c_array", "c_header", "c_identifier", "c_names", "export_vectors", "save_npz"]
