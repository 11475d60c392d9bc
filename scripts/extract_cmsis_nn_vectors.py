"""Extract Arm CMSIS-NN's integer LSTM unit-test vectors into fusedrnn's test data.

CMSIS-NN tests ``arm_lstm_unidirectional_s8`` / ``_s16`` (``Tests/UnitTest/TestCases/test_arm_lstm_unidirectional_s8``
and ``_s16``) on cases whose data live in ``Tests/UnitTest/TestCases/TestData/<case>/``: ``config_data.h`` (sizes,
zero points, multipliers and shifts as ``#define``) and one header per array (weights, biases, input, expected
output). This script reads those headers and writes their numbers (no code)::

    python scripts/extract_cmsis_nn_vectors.py PATH/TO/CMSIS-NN [--commit SHA]

writes ``tests/data/cmsis_nn/<case>.npz`` (the arrays, named without the case prefix: ``input_tensor``,
``output``, ``<gate>_gate_input_weights``, ``<gate>_gate_hidden_weights``, ``<gate>_gate_bias``) and
``tests/data/cmsis_nn/index.json`` (each case's defines, named without the case prefix, and the source).
``tests/test_cmsis_nn.py`` ports the tests themselves.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

CASES = ("lstm_1", "lstm_2", "lstm_one_time_step", "lstm_stateful_batch_major_multibatch",
         "lstm_1_s16", "lstm_2_s16", "lstm_one_time_step_s16", "lstm_stateful_batch_major_multibatch_s16")
DATA_DIR = "Tests/UnitTest/TestCases/TestData"
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "cmsis_nn"
_C_TYPES = {"int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32, "int64_t": np.int64}


def _value(text: str):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    return int(text, 0)


def _defines(text: str, prefix: str) -> dict:
    out = {}
    for name, value in re.findall(r"^#define\s+(\w+)\s+(\S+)", text, flags=re.M):
        if name.startswith(prefix):
            out[name[len(prefix):]] = _value(value)
    return out


def _arrays(text: str, prefix: str) -> dict:
    out = {}
    for ctype, name, n, body in re.findall(r"const\s+(\w+)\s+(\w+)\[(\d+)\]\s*=\s*\{(.*?)\};", text, flags=re.S):
        vals = [int(v) for v in re.findall(r"-?\d+", body)]
        if len(vals) != int(n):
            raise SystemExit(f"{name}: declares {n} values, found {len(vals)}")
        key = name[len(prefix):] if name.startswith(prefix) else name
        out[key] = np.asarray(vals, dtype=_C_TYPES[ctype])
    return out


def extract_case(root: Path, case: str) -> tuple[dict, dict]:
    d = root / DATA_DIR / case
    includes = re.findall(r'#include\s+"([^"]+)"', (d / "test_data.h").read_text())
    defines, arrays = {}, {}
    for inc in includes:
        text = (d / inc).read_text()
        defines.update(_defines(text, case.upper() + "_"))
        arrays.update(_arrays(text, case + "_"))
    return defines, arrays


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="an ARM-software/CMSIS-NN checkout")
    ap.add_argument("--commit", default="", help="the checkout's commit, recorded with the data")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    index = {"source": {"repository": "ARM-software/CMSIS-NN", "commit": args.commit, "path": DATA_DIR},
             "cases": {}}
    for case in CASES:
        defines, arrays = extract_case(args.root, case)
        np.savez_compressed(args.out / f"{case}.npz", **arrays)
        index["cases"][case] = defines
        print(f"{case}: {len(defines)} defines, arrays {', '.join(sorted(arrays))}")
    (args.out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
