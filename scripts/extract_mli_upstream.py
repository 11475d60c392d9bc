"""Extract facts of embARC MLI's own sources (tags Release_1.1.1 and Release_2.0.2) for the API tests.

Reads a git clone of foss-for-synopsys-dwc-arc-processors/embarc_mli (``git show <tag>:<path>``) and writes

- ``tests/data/mli/upstream.json``: the ``mli_status`` and ``mli_element_type`` enumerations of both releases'
  ``include/mli_types.h`` (names and values in declaration order), the 2.0.2 tanh / sigmoid fx16 lookup tables
  with their parameters (``lib/src/private/src/mli_prv_activation_lut.cc``), the constants of the HAR smartphone example
  (``examples/example_har_smartphone/har_smartphone_constants.h``: integer bits, shapes, strides) and the results its
  README publishes for the fx16 build (S/N and the accuracy on the small test base);
- ``tests/data/mli/har_smartphone.npz``: the example's float coefficients (``har_smartphone_coefficients_fx.c``,
  the arguments of its ``QW*``/``QB*`` macros), its hard-coded input and reference output
  (``har_smartphone_ref_inout.h``) and its small test base with labels (``small_test_base/*.idx``).

Usage: ``python scripts/extract_mli_upstream.py <embarc_mli git dir> [out dir]`` (default out dir tests/data/mli).
Only numbers are extracted; no upstream code is copied.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

V1, V2 = "Release_1.1.1", "Release_2.0.2"
HAR = "examples/example_har_smartphone"


def show(repo: str, ref: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", repo, "show", f"{ref}:{path}"], check=True,
                          capture_output=True).stdout


def enumeration(text: str, typedef: str, prefix: str) -> list[list]:
    """``typedef enum { <prefix>A = 0, <prefix>B, <prefix>C = 0x10, ... } <typedef>;`` -> [[name, value], ...]
    in declaration order (a member without a value is the previous one + 1, as in C), without the
    ``<prefix>LARGE_ENUM`` size guard."""
    body = text[:text.index(f"}} {typedef};")]
    body = body[body.rindex("typedef enum"):]
    out, value = [], -1
    for m in re.finditer(rf"^\s*({prefix}\w+)\s*(?:=\s*(0x[0-9a-fA-F]+|\d+))?\s*,?", body, re.M):
        value = int(m.group(2), 0) if m.group(2) else value + 1
        if m.group(1) != f"{prefix}LARGE_ENUM":
            out.append([m.group(1), value])
    return out


def statuses(text: str) -> list[list]:
    """``typedef enum { MLI_STATUS_OK = 0, MLI_STATUS_X, ... } mli_status;`` -> [[name, value], ...]."""
    return enumeration(text, "mli_status", "MLI_STATUS_")


def element_types(text: str) -> list[list]:
    """``typedef enum { MLI_EL_FX_8 = ..., ... } mli_element_type;`` -> [[name, value], ...]."""
    return enumeration(text, "mli_element_type", "MLI_EL_")


def c_ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"[-+]?\d+", text)]


def lut(text: str, data_name: str, lut_name: str) -> dict:
    """A ``static const int16_t <data_name>[] = {...};`` table and the fields of ``const mli_lut <lut_name>``."""
    m = re.search(rf"{data_name}\[\]\s*=\s*\{{(.*?)\}};", text, re.S)
    table = c_ints(m.group(1))
    m = re.search(rf"const mli_lut {lut_name}\s*=\s*\{{(.*?)\n\}};", text, re.S)
    fields = dict(re.findall(r"/\*\.(\w+)\s*=\*/\s*([^,\n]+)", m.group(1)))
    n = len(table)
    evaluated = {}
    for key in ("in_frac_bits", "out_frac_bits", "input_offset"):
        expr = fields[key].strip()
        if "sizeof" in expr:  # the tables centre their offset: sizeof(table) / (sizeof(entry) * 2)
            evaluated[key] = n // 2
        else:
            evaluated[key] = int(expr)
    return {"table": table, "length": n, **evaluated}


def har_constants(text: str) -> dict:
    ints = {k: int(v) for k, v in re.findall(r"#define (\w+_INT)\s+\((-?\d+)\)", text)}
    shapes = {}
    for k, v in re.findall(r"#define (\w+_(?:SHAPE|MEM_STRIDE))\s+\{([^}]*)\}", text):
        shapes[k] = [int(eval(x, {"__builtins__": {}})) for x in v.split(",")]  # products such as 32*32
    return {"int_bits": ints, "shapes": shapes}


def coefficients(text: str) -> dict[str, tuple[str, np.ndarray]]:
    """``const w_type _W NAME[...] = { QW1(x), ... };`` -> NAME: (macro, float values); an argument that is a sum
    of literals (``QB2(-0.0148504796+1.)``, the forget gate's +1) is summed left to right as C does."""
    out = {}
    for m in re.finditer(r"const \w+\s+_W\s+(\w+)\[[^\]]*\]\s*=\s*\{(.*?)\};", text, re.S):
        calls = re.findall(r"(Q[WB]\d)\(([-+0-9.eE]+)\)", m.group(2))
        macros = {c for c, _ in calls}
        assert len(macros) == 1, (m.group(1), macros)
        vals = []
        for _, arg in calls:
            total = 0.0
            for term in re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", arg):
                total = total + float(term)
            vals.append(total)
        out[m.group(1)] = (macros.pop(), np.array(vals, np.float64))
    return out


def float_macro(text: str, name: str) -> np.ndarray:
    m = re.search(rf"#define {name}\s+\{{\\?(.*?)\}}", text, re.S)
    vals = re.findall(r"Q(?:IN|OUT)\(([-+0-9.eE]+)\)", m.group(1))
    return np.array([float(v) for v in vals], np.float64)


def idx(raw: bytes) -> np.ndarray:
    """An IDX file: 2 zero bytes, a type code, the number of dimensions, big-endian uint32 dimensions, data."""
    assert raw[0] == 0 and raw[1] == 0, "not an IDX file"
    dtype = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[raw[2]]
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    data = np.frombuffer(raw[4 + 4 * nd:], dtype=dtype)
    return data[:int(np.prod(dims))].reshape(dims).astype(data.dtype.newbyteorder("="))


def published(readme: str) -> dict:
    m = re.search(r"run_FX16`: Result may slightly fluctuates around `S/N=([0-9.]+)\s+\(([0-9.]+) db\)", readme)
    a = re.search(r"Final Accuracy: ([0-9.]+) % \((\d+) are correct of (\d+)\)", readme)
    return {"fx16_snr_ratio": m.group(1), "fx16_snr_db": m.group(2), "accuracy_percent": a.group(1),
            "correct": int(a.group(2)), "total": int(a.group(3))}


def main(repo: str, out_dir: str = "tests/data/mli") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lut_src = show(repo, V2, "lib/src/private/src/mli_prv_activation_lut.cc").decode()
    facts = {
        "source": {"repo": "foss-for-synopsys-dwc-arc-processors/embarc_mli", "tags": [V1, V2]},
        "status": {V1: statuses(show(repo, V1, "include/mli_types.h").decode()),
                   V2: statuses(show(repo, V2, "include/mli_types.h").decode())},
        "element_type": {V1: element_types(show(repo, V1, "include/mli_types.h").decode()),
                         V2: element_types(show(repo, V2, "include/mli_types.h").decode())},
        "lut_fx16": {"tanh": lut(lut_src, "tanh_lut_data_fx16", "tanh_lut_fx16"),
                     "sigm": lut(lut_src, "sigmoid_lut_data_fx16", "sigmoid_lut_fx16")},
        "har_smartphone": {**har_constants(show(repo, V2, f"{HAR}/har_smartphone_constants.h").decode()),
                           "published": published(show(repo, V2, f"{HAR}/README.md").decode())},
    }
    arrays = {}
    macros = {}
    for name, (macro, vals) in coefficients(show(repo, V2, f"{HAR}/har_smartphone_coefficients_fx.c").decode()).items():
        arrays[name] = vals
        macros[name] = macro
    facts["har_smartphone"]["coefficient_macros"] = macros
    ref = show(repo, V2, f"{HAR}/har_smartphone_ref_inout.h").decode()
    arrays["in_seq_300"] = float_macro(ref, "IN_SEQ_300")
    arrays["out_scores_300"] = float_macro(ref, "OUT_SCORES_300")
    arrays["tests"] = idx(show(repo, V2, f"{HAR}/small_test_base/tests.idx")).astype(np.float32)
    arrays["labels"] = idx(show(repo, V2, f"{HAR}/small_test_base/labels.idx")).astype(np.int64)
    np.savez_compressed(out / "har_smartphone.npz", **arrays)
    (out / "upstream.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(f"wrote {out / 'upstream.json'} and {out / 'har_smartphone.npz'}: {sorted(arrays)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
