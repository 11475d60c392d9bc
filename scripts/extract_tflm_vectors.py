"""Extract the numbers of TensorFlow Lite for Microcontrollers' LSTM kernel tests into fusedrnn's test data.

TFLM's tests (``tensorflow/lite/micro/kernels/lstm_eval_test.cc``, ``unidirectional_sequence_lstm_test.cc``) build a
2-batch, 3-step, 2-input, 2-unit LSTM from float gate parameters and quantization settings held in
``tensorflow/lite/micro/kernels/testdata/lstm_test_data.cc``, run it in float, int8 (8x8_16) and int16 (16x8) and
compare with float goldens. This script reads that file and writes its facts (numbers only; no code) as JSON::

    python scripts/extract_tflm_vectors.py PATH/TO/tflite-micro [--commit SHA]

writes ``tests/data/tflm/lstm_test_data.json``: the op options (``kDefaultBuiltinData``), the float gate data of
``Create2x3x2X2FloatNodeContents`` (weights and bias per gate), the gate-level check data
(``Get2X2GateOutputCheckData``), the whole-sequence check data (``Get2X2LstmEvalCheckData``) and the int8 / int16
quantization settings (``Get2X2Int8LstmQuantizationSettings`` / ``Get2X2Int16LstmQuantizationSettings``).
``tests/test_tflm_kernel_tests.py`` ports the tests themselves.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SOURCE = "tensorflow/lite/micro/kernels/testdata/lstm_test_data.cc"
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "tflm" / "lstm_test_data.json"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?f?"


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def _numbers(text: str) -> list[float]:
    """Every C number literal in ``text`` (comments removed first), as float."""
    return [float(v.rstrip("f")) for v in re.findall(_NUM, re.sub(r"/\*.*?\*/", "", text, flags=re.S))]


def _function_body(text: str, name: str) -> str:
    """The text of the function ``name`` (from its name to the matching closing brace)."""
    m = re.search(rf"\b{name}\s*\(", text)
    if m is None:
        raise SystemExit(f"{SOURCE}: function {name} not found")
    start = text.index("{", m.end())
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    raise SystemExit(f"{SOURCE}: unbalanced braces in {name}")


def _float_arrays(body: str) -> dict[str, list[float]]:
    """``const float NAME[N] = {...};`` declarations of a function body."""
    out = {}
    for m in re.finditer(r"const\s+float\s+(\w+)\[(\d+)\]\s*=\s*\{(.*?)\};", body, flags=re.S):
        vals = _numbers(m.group(3))
        n = int(m.group(2))
        if vals and len(vals) != n:
            raise SystemExit(f"{SOURCE}: {m.group(1)} declares {n} values, found {len(vals)}")
        out[m.group(1)] = vals + [0.0] * (n - len(vals))  # "= {}" is all zeros
    return out


def _gate_data(body: str) -> dict[str, dict[str, list[float]]]:
    """``GateData<float, ...> NAME = { /*.activation_weight=*/{...}, /*.recurrent_weight=*/{...},
    /*.fused_bias=*/{...}, ... };`` declarations."""
    out = {}
    for m in re.finditer(r"GateData<float[^>]*>\s+(\w+)\s*=\s*\{(.*?)\};", body, flags=re.S):
        fields = re.findall(r"/\*\.?(\w+)=\*/\s*\{([^}]*)\}", m.group(2))
        out[m.group(1)] = {k: _numbers(v) for k, v in fields}
    return out


def _tensor_params(text: str) -> dict:
    vals = re.findall(r"/\*scale=\*/\s*(" + _NUM + r")\s*,\s*/\*zp=\*/\s*(" + _NUM + r")\s*,\s*/\*symmetry=\*/\s*"
                      r"(true|false)", text)
    return [{"scale": float(s.rstrip("f")), "zero_point": int(float(z)), "symmetric": sym == "true"}
            for s, z, sym in vals]


def _quantization(body: str) -> dict:
    out = {}
    for m in re.finditer(r"quantization_settings\.(\w+)\s*=\s*([^;]*);", body, flags=re.S):
        name, value = m.group(1), m.group(2)
        if name in ("input", "output", "hidden_state", "cell_state"):
            (out[name],) = _tensor_params(value)
        elif name.endswith("_gate"):
            w, r, b = _tensor_params(value)
            out[name] = {"activation_weight": w, "recurrent_weight": r, "bias": b}
        elif name.startswith("nonlinear_"):
            (out[name],) = _numbers(value)
        else:
            out[name] = value.strip()
    return out


def _builtin(text: str) -> dict:
    m = re.search(r"kDefaultBuiltinData\s*=\s*\{(.*?)\};", text, flags=re.S)
    fields = dict(re.findall(r"/\*\.?(\w+)=\*/\s*([^,\n]+)", m.group(1)))
    return {"activation": fields["activation"].strip(), "cell_clip": float(fields["cell_clip"]),
            "proj_clip": float(fields["proj_clip"]), "time_major": fields["time_major"].strip() == "true"}


def extract(root: Path) -> dict:
    text = _strip_comments((root / SOURCE).read_text())
    return {
        "builtin_data": _builtin(text),
        "float_gates": _gate_data(_function_body(text, "Create2x3x2X2FloatNodeContents")),
        "gate_output_check": _float_arrays(_function_body(text, "Get2X2GateOutputCheckData")),
        "eval_check": _float_arrays(_function_body(text, "Get2X2LstmEvalCheckData")),
        "int8_quantization": _quantization(_function_body(text, "Get2X2Int8LstmQuantizationSettings")),
        "int16_quantization": _quantization(_function_body(text, "Get2X2Int16LstmQuantizationSettings")),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="a tensorflow/tflite-micro checkout")
    ap.add_argument("--commit", default="", help="the checkout's commit, recorded with the data")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    data = {"source": {"repository": "tensorflow/tflite-micro", "commit": args.commit, "path": SOURCE},
            **extract(args.root)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
