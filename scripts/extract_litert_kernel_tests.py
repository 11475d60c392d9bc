"""Extract the numbers of LiteRT's recurrent kernel tests (weights, inputs, golden outputs, sizes, flags and
tolerances) from the C++ sources of google-ai-edge/LiteRT into tests/data/litert_kernel_tests/<file>.json.

The C++ test files are read as text, never compiled or run. Each file is cut into its top-level blocks (the
file-scope preamble, a top-level helper ``function``, a
``TEST``/``TEST_P``/``TEST_F`` body, a fixture ``class``, an ``INSTANTIATE_TEST_SUITE_P``); for each block the
script records

* ``arrays``: every brace initializer that holds only numbers (``name = {...}``, ``std::vector<float> name{...}``,
  ``const float name[] = {...}``; a call's brace argument ``m.SetGateBias({...})`` as ``SetGateBias()``), nested
  lists kept; a name given twice gets ``name@1``, ``name@2`` ...;
* ``scalars``: ``const int n_batch = 2;``-style constants, initialised scalar variables and numeric member
  assignments (``n_batch_ = 2;``), field assignments (``param_.cell_scale = -11;`` as ``param_.cell_scale``)
  and ``std::fill_n(param_.bias.get(), n, 152)`` as ``fill:param_.bias``;
* ``flags``: the ``/*name=*/value`` comments of the calls, in order (``[name, value-text]``);
* ``tolerances``: ``{TensorType_X, tol}`` pairs;
* ``calls``: ``[name, argument text, numeric brace arguments]`` of ``VerifyGoldens(...)`` /
  ``ArrayFloatNear(...)`` / model constructors;
* ``base``: for a class, the classes it derives from;
* ``values``: for an ``INSTANTIATE_TEST_SUITE_P``, its numeric parameter lists (``std::vector<...>{...}``).

Usage::

    python scripts/extract_litert_kernel_tests.py GIT_DIR_OR_CHECKOUT [--commit REV]

where the first argument is a checkout of google-ai-edge/LiteRT or its bare git directory (``fetch`` gives one).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys

FILES = (
    "lstm_test.cc", "unidirectional_sequence_lstm_test.cc", "bidirectional_sequence_lstm_test.cc",
    "unidirectional_sequence_rnn_test.cc", "bidirectional_sequence_rnn_test.cc", "basic_rnn_test.cc",
    "unidirectional_sequence_gru_test.cc", "lstm_eval_test.cc", "optional_tensor_test.cc", "quant_basic_lstm_test.cc",
)
KERNELS = "tflite/kernels"
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "litert_kernel_tests")

_HEAD = re.compile(r"^(TEST_P|TEST_F|TEST|INSTANTIATE_TEST_SUITE_P|class|struct|(?:std::[^\n(]*?|void|bool)\s(?=\w+\())"
                   r"[^\n]*", re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*(?!\s*\w+\s*=\s*\*/).*?\*/", re.S)
_INIT = re.compile(r"(\w+)\s*(?:\[[^\]]*\])*\s*(=\s*|\(\s*)?\{")
_NUMERIC = re.compile(r"^[\s\d.\-+eExXa-fA-F,{}()uUlL*/]*$")
_SCALAR = re.compile(r"(?:^|[;{}])\s*(?:const\s+|constexpr\s+)?(?:static\s+)?"
                     r"(?:int|int32_t|int64_t|float|double|bool|size_t)\s+(\w+)\s*=\s*([-+\w.]+)\s*;", re.M)
_MEMBER = re.compile(r"(?:^|[;{}])\s*(\w+_)\s*=\s*([-+]?[\d.]+(?:[eE][-+]?\d+)?[fF]?)\s*;", re.M)
_FIELD = re.compile(r"(?:^|[;{},])\s*(\w+)\.(\w+)\s*=\s*([-+]?\d[\d.eE]*)\s*[;,]", re.M)
_FILL = re.compile(r"std::fill_n\(\s*(\w+)\.(\w+)\.get\(\)\s*,\s*\w+\s*,\s*([-+]?\d+)\s*\)")
_FLAG = re.compile(r"/\*\s*(\w+)\s*=\s*\*/\s*([^,)\n]+)")
_TOL = re.compile(r"\{\s*TensorType_(\w+)\s*,\s*([-+\d.eE]+)f?\s*\}")
_CALL = re.compile(r"\b(VerifyGoldens|ArrayFloatNear|\w+OpModel)\s*(?:\w+\s*)?\(")


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket closing the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _arith(node):
    """A constant expression of numbers and + - * / (``127.0 / 128``), evaluated as C does for these
    operands: a division of two integers truncates, anything with a float is a double."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _arith(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.Div):
            if isinstance(a, int) and isinstance(b, int):
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b >= 0) else -q
            return a / b
        return (
            a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b)
    raise ValueError(f"not a constant expression: {ast.dump(node)}")


def _number(tok: str):
    t = re.sub(r"(?<=[\d.])[fFuUlL]+\b", "", tok.strip())
    if not t:
        return None
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", t):
        return int(t, 16)
    return _arith(ast.parse(t, mode="eval").body)


def _parse_list(s: str):
    """A brace list of numbers (possibly nested) as Python lists."""
    pos = 0

    def parse():
        nonlocal pos
        assert s[pos] == "{"
        pos += 1
        out, tok = [], ""
        while pos < len(s):
            ch = s[pos]
            if ch == "{":
                out.append(parse())
                tok = ""
                continue
            if ch in ",}":
                v = _number(tok)
                if v is not None:
                    out.append(v)
                tok = ""
                pos += 1
                if ch == "}":
                    return out
                continue
            if ch not in "()":
                tok += ch
            pos += 1
        return out

    return parse()


def _top_level_args(text: str) -> list[str]:
    """The comma-separated arguments of a call's text, split outside brackets, stripped."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _block(kind: str, header: str, body: str) -> dict:
    text = _COMMENT.sub(" ", body)
    b: dict = {"kind": kind, "header": " ".join(header.split())}
    m = re.match(r"\w+\s*\(\s*(\w+)\s*,\s*(\w+)", body)
    if kind.startswith("TEST") and m:
        b["suite"], b["name"] = m.group(1), m.group(2)
    elif kind == "INSTANTIATE_TEST_SUITE_P":
        tail = body[_matching(body, body.index("("), "(", ")") - 1:] if "(" in body else ""
        b["name"] = header
        b["text"] = " ".join(body.split())[:2000]
        del tail
        # the parameter values: brace lists after a type (``std::vector<std::vector<int>>{{2, 4}, ...}``)
        clean = _COMMENT.sub(" ", body)
        vals = []
        for mm in re.finditer(r">\s*\{", clean):
            start = mm.end() - 1
            inner = clean[start:_matching(clean, start, "{", "}")]
            if _NUMERIC.match(inner):
                vals.append(_parse_list(inner))
        b["values"] = vals
    elif kind == "function":
        b["name"] = re.search(r"(\w+)\s*\($", header.split("(")[0] + "(").group(1)
    else:
        m = re.match(r"(?:class|struct)\s+(\w+)\s*(?::\s*([^{]*))?", " ".join(body.split("{")[0].split()))
        if m:
            b["name"] = m.group(1)
            access = r"(?:public|protected|private)"
            b["base"] = re.findall(access + r"\s+([\w:<>, ]+?)(?=,\s*" + access + r"|$)", (m.group(2) or "").strip())
    arrays: dict = {}
    for mm in _INIT.finditer(text):
        start = mm.end() - 1
        end = _matching(text, start, "{", "}")
        inner = text[start:end]
        if not _NUMERIC.match(inner) or not re.search(r"\d", inner) or mm.group(1) in ("return", "else"):
            continue
        name = mm.group(1) + ("()" if (mm.group(2) or "").startswith("(") else "")
        key, n = name, 1
        while key in arrays:
            key, n = f"{name}@{n}", n + 1
        arrays[key] = _parse_list(inner)
    b["arrays"] = arrays
    b["scalars"] = {k: _number(v) if re.fullmatch(r"[-+\d.eExXa-fA-F]+[fFuUlL]?", v) else v
                    for k, v in _SCALAR.findall(text) + _MEMBER.findall(text)}
    b["scalars"].update({f"{o}.{f}": _number(v) for o, f, v in _FIELD.findall(text)})
    b["scalars"].update({f"fill:{o}.{f}": _number(v) for o, f, v in _FILL.findall(text)})
    b["flags"] = [[k, " ".join(v.split())] for k, v in _FLAG.findall(body)]
    b["tolerances"] = {k: float(v) for k, v in _TOL.findall(text)}
    calls = []
    for mm in _CALL.finditer(text):
        start = mm.end() - 1
        end = _matching(text, start, "(", ")")
        inner = text[start + 1:end - 1]
        lists = [_parse_list(a) for a in _top_level_args(inner) if a.startswith("{") and _NUMERIC.match(a)
                 and re.search(r"\d", a)]
        calls.append([mm.group(1), " ".join(inner.split()), lists])
    b["calls"] = calls
    return b


def parse_file(text: str) -> list[dict]:
    """The top-level blocks of one C++ test file."""
    heads = [m for m in _HEAD.finditer(text)]
    blocks = [_block("preamble", "(file scope before the first class or test)", text[:heads[0].start()])] \
        if heads else []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[m.start():end]
        if m.group(1) in ("class", "struct") and "{" not in body.split(";")[0]:
            continue  # a forward declaration
        kind = m.group(1)
        if kind not in ("TEST_P", "TEST_F", "TEST", "INSTANTIATE_TEST_SUITE_P", "class", "struct"):
            kind = "function"
        blocks.append(_block(kind, m.group(0), body))
    return blocks


def _reader(source: str, commit: str):
    if os.path.isdir(os.path.join(source, KERNELS)):
        return (lambda path: open(os.path.join(source, path), encoding="utf-8").read()), "checkout"
    rev = subprocess.run(["git", "--git-dir", source, "rev-parse", commit], check=True, capture_output=True,
                         text=True).stdout.strip()

    def read(path: str) -> str:
        return subprocess.run(["git", "--git-dir", source, "show", f"{rev}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    return read, rev


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a google-ai-edge/LiteRT checkout or its git directory")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    read, rev = _reader(a.source, a.commit)
    os.makedirs(a.out, exist_ok=True)
    for f in FILES:
        path = f"{KERNELS}/{f}"
        blocks = parse_file(read(path))
        doc = {"source": f"google-ai-edge/LiteRT {path}", "commit": rev, "blocks": blocks}
        out = os.path.join(a.out, f.replace(".cc", ".json"))
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=None, separators=(",", ":"))
            fh.write("\n")
        n_arr = sum(len(b["arrays"]) for b in blocks)
        print(f"{f}: {len(blocks)} blocks, {n_arr} arrays -> {os.path.relpath(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
