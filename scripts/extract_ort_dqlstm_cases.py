"""Extract the case matrix of onnxruntime's ``DynamicQuantizeLSTM`` kernel tests into fusedrnn's test data.

onnxruntime's tests (``onnxruntime/test/contrib_ops/quantize_lstm_op_test.cc``) have no stored expected numbers: each
case draws Gaussian data, quantizes the weights (``GetQuantizationParameter<QType, ReduceRange, Symmetric>``), runs
the operator for one step and compares it with the float ``LSTM`` of the dequantized ("QDQ") inputs. Their facts
are the case matrix, which this script reads (numbers and names only; no code) and writes as JSON::

    python scripts/extract_ort_dqlstm_cases.py PATH/TO/onnxruntime [--commit SHA]

writes ``tests/data/ort/dynamic_quantize_lstm_cases.json``: every ``RunQuantLSTM<type>(input, batch, hidden[,
per_channel])`` call of the ``TEST(DynamicQuantLSTMTest, ...)`` blocks, the eight option variants each call expands
to (bias and peepholes, initializer weights, direction), the data distribution (mean, standard deviation), the
sequence length and the quantization flags of the weights (ReduceRange, Symmetric when per channel).
``tests/test_dynamic_quantize_lstm.py`` ports the tests themselves.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

SOURCE = "onnxruntime/test/contrib_ops/quantize_lstm_op_test.cc"
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "ort" / "dynamic_quantize_lstm_cases.json"
_BOOL = {"true": True, "false": False}


def extract(text: str) -> dict:
    tests = {}
    for name, body in re.findall(r"TEST\(DynamicQuantLSTMTest,\s*(\w+)\)\s*\{(.*?)\n\}", text, flags=re.S):
        calls = re.findall(r"RunQuantLSTM<(u?int8)_t>\((\d+),\s*(\d+),\s*(\d+)(?:,\s*(true|false)[^)]*)?\)", body)
        if calls:
            tests[name] = [{"weight_type": t, "input_size": int(i), "batch_size": int(b), "hidden_size": int(h),
                            "per_channel": _BOOL.get(pc, False)} for t, i, b, h, pc in calls]
    variants = [{"has_bias": _BOOL[a], "has_P": _BOOL[b], "initializer_W": _BOOL[c], "initializer_R": _BOOL[d],
                 "direction": direction}
                for a, b, c, d, direction in re.findall(
                    r"RunQuantLSTM<QType>\(input_size, batch_size, hidden_size,\s*(true|false) /\*has_bias\*/,\s*"
                    r"(true|false) /\*has_P\*/,\s*(true|false) /\*is_initializer_W\*/,\s*(true|false) "
                    r"/\*is_initializer_R\*/,\s*per_channel,\s*\"(\w+)\"\)", text)]
    gauss = re.search(r"X_data = rand_gen\.Gaussian<float>\([^)]*\},\s*([-\d.]+)f,\s*([-\d.]+)f\)", text)
    seq = re.search(r"int64_t seq_len = (\d+);", text)
    reduce_range = bool(re.search(r"GetQuantizationParameter<QType, true, (true|false)>", text))
    symmetric_per_channel = "GetQuantizationParameter<QType, true, true>" in text
    return {"tests": tests, "variants": variants, "gaussian": [float(gauss[1]), float(gauss[2])],
            "seq_length": int(seq[1]), "weights_reduce_range": reduce_range,
            "weights_symmetric_when_per_channel": symmetric_per_channel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a checkout of microsoft/onnxruntime")
    parser.add_argument("--commit", default=None, help="the checkout's commit, recorded in the output")
    args = parser.parse_args()
    facts = extract((args.root / SOURCE).read_text())
    if not facts["tests"] or len(facts["variants"]) != 8:
        raise SystemExit(f"{SOURCE}: expected TEST(DynamicQuantLSTMTest, ...) blocks and 8 variants, found "
                         f"{len(facts['tests'])} and {len(facts['variants'])}")
    facts = {"source": f"microsoft/onnxruntime {SOURCE}", "commit": args.commit, **facts}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(facts, indent=1) + "\n")
    print(f"wrote {OUT}: {sum(len(v) for v in facts['tests'].values())} calls x {len(facts['variants'])} variants")


if __name__ == "__main__":
    main()
