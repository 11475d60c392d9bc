"""Extract the facts of IBM zDNN 1.2.0 that fusedrnn.zdnn must reproduce into fusedrnn's test data.

Reads the zDNN sources (a checkout directory, or a git directory plus a commit) and writes numbers and strings only
(no code) as JSON under ``tests/data/zdnn/``::

    python scripts/extract_zdnn_facts.py PATH/TO/zDNN                       # a checkout
    python scripts/extract_zdnn_facts.py PATH/TO/zDNN.git --commit f261454   # a bare clone (git show)

``zdnn_h.json``
    every public name of ``zdnn/zdnn.h``: ``#define`` constants (integers and strings), every enum member with its
    value (C's implicit numbering applied), the function-like macros (``CONCAT_*``) and the ``zdnn_*`` functions.
``status_messages.json``
    ``zdnn_get_status_message``'s text of every status (``zdnn/status.c``) and the unknown-status text, and the
    string ``zdnn_get_library_version_str`` returns (``zdnn/get.c``).
``verify_lstm_gru.json``
    the cases of ``tests/testDriver_tensor_verify_zdnn_lstm_gru.c``: which tensor is sabotaged (a dim set to a
    value, or the type/format set to 255), the expected status, and the driver's default sizes.

``tensor_desc_layouts.json``
    the transformed-layout cases of ``tests/testDriver_tensor_desc.c`` with the data types each runs with.
``init_ztensor_sizes.json``
    the buffer sizes of ``tests/testDriver_init_ztensor.c`` (plain, quantized, concatenated descriptors).
``reshape.json``
    the cases of ``tests/testDriver_reshape_ztensor.c``.
``verify_conv2d.json`` / ``verify_pool.json``
    the cases of ``tests/testDriver_tensor_verify_conv2d.c`` and ``tests/testDriver_tensor_verify_pool_avg_max.c``
    resolved to concrete settings: per case the tensors (pre-transformed dims, layout, type), padding, strides,
    kernel size or activation, which descriptor field the driver breaks (type or format set to -1) and the
    status ``verify_conv2d_tensors`` / ``verify_pool_avg_max_tensors`` returns.
``samples.json``
    per sample program of ``samples/`` (simple_add, rnn_lstm_fwd, rnn_gru_fwd, rnn_lstm_bidir,
    stickify_unstickify): its integer settings and the ordered zDNN calls whose status it asserts.

``tests/test_zdnn_api_port.py`` ports the tests and samples themselves.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "zdnn"


class Source:
    """Files of a zDNN checkout, or of a commit of a git directory."""

    def __init__(self, path: Path, commit: str | None):
        self.path, self.commit = path, commit

    def read(self, rel: str) -> str:
        if self.commit is None:
            return (self.path / rel).read_text()
        return subprocess.run(["git", "--git-dir", str(self.path), "show", f"{self.commit}:{rel}"], check=True,
                              capture_output=True, text=True).stdout


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _eval_int(expr: str, names: dict[str, int]) -> int:
    """Evaluate a C integer constant expression of literals, known names, + - * << | ( ) and 1u-style suffixes."""
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", expr.strip())

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                   ast.LShift: lambda a, b: a << b, ast.BitOr: lambda a, b: a | b}
            if type(node.op) in ops:
                return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"not an integer constant expression: {expr!r}")

    return ev(ast.parse(expr, mode="eval"))


def zdnn_h(src: Source) -> dict:
    text = _strip_comments(src.read("zdnn/zdnn.h"))
    names: dict[str, int] = {}
    constants: dict[str, int | str] = {}
    macros: dict[str, str] = {}
    enums: dict[str, dict[str, int]] = {}
    # object-like #defines in file order (enums refer to them and they to enum members)

    items = []
    for m in re.finditer(r"^\s*#define\s+(\w+)(\([^)]*\))?[ \t]*([^\n]*)$", text, flags=re.M):
        items.append((m.start(), "define", m))
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        items.append((m.start(), "enum", m))
    for _pos, kind, m in sorted(items, key=lambda i: i[0]):
        if kind == "define":
            name, params, value = m.group(1), m.group(2), m.group(3).strip()
            if name.endswith("_H_") or not value:
                continue
            if params:
                macros[name] = params
                continue
            if value.startswith('"'):
                constants[name] = value.strip('"')
                continue
            try:
                names[name] = constants[name] = _eval_int(value, names)
            except (ValueError, SyntaxError):
                macros[name] = value  # MSB_BITMASK-style helpers
            continue
        members: dict[str, int] = {}
        nxt = 0
        body = re.sub(r"MSB_BITMASK\((\w+),\s*(\w+)\)", r"(1 << ((\1 - 1) - \2))", m.group(2))
        for entry in body.split(","):
            entry = entry.strip()
            if not entry:
                continue
            if "=" in entry:
                name, expr = (s.strip() for s in entry.split("=", 1))
                value = _eval_int(expr, names)
            else:
                name, value = entry, nxt
            members[name] = names[name] = value
            nxt = value + 1
        enums[m.group(3)] = members
    functions = sorted(set(re.findall(r"\b(zdnn_\w+)\s*\(", text)) - set(enums) - {"zdnn_ztensor"})
    return {"constants": constants, "enums": enums, "function_macros": sorted(macros), "functions": functions}


def status_messages(src: Source) -> dict:
    text = src.read("zdnn/status.c")
    messages = {}
    for m in re.finditer(r"DECLARE_STATUS_STR_N_MSG\(\s*(\w+),\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)\)", text):
        parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(2))
        messages[m.group(1)] = f"{m.group(1)}: {''.join(parts)}"
    unknown = re.search(r"STATUS_MSG_UNKNOWN_STATUS\s*=\s*\"([^\"]*)\"", text).group(1)
    get = src.read("zdnn/get.c")
    ret = re.search(r"zdnn_get_library_version_str\(\)\s*\{\s*return\s+(\w+)\s*;", get).group(1)
    version = zdnn_h(src)["constants"][ret]
    return {"messages": messages, "unknown": unknown, "library_version_str": version}


_TENSORS = ["INPUT", "H0", "C0", "WEIGHTS", "BIASES", "HIDDEN_WEIGHTS", "HIDDEN_BIASES", "HN_OUTPUT", "CF_OUTPUT"]


def _functions(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"^void\s+(\w+)\(\)\s*\{", text, flags=re.M):
        depth, i = 0, m.end() - 1
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out[m.group(1)] = text[i:j + 1]
                break
    return out


def _eval_value(expr: str, names: dict[str, int]) -> int:
    """A driver's dim value: integers, sizes, + * ``NUM_GATES(act)``, ``PADDED(x)`` and ``(a != b) ? x : y``."""
    expr = " ".join(expr.split())
    expr = expr.replace("NUM_GATES(act)", str(names["gates"]))
    expr = re.sub(r"PADDED\((\w+)\)", lambda m: str((names[m.group(1)] + 63) // 64 * 64), expr)
    m = re.fullmatch(r"\(?\((\w+) != (\w+)\) \? ([^:]+?) : ([^)]+?)\)?( \+ \d+)?", expr)
    if m:
        a, b, yes, no, rest = m.groups()
        expr = f"({yes if names[a] != names[b] else no}){rest or ''}"
    return _eval_int(expr, names)


DIRECTIONS = ("FWD", "BWD", "BIDIR")


def _locals(body: str, names: dict[str, int]) -> dict[str, int]:
    """``names`` plus the ``uint32_t NAME = EXPR;`` locals of a driver function, evaluated in order."""
    out = dict(names)
    for m in re.finditer(r"uint32_t\s+(\w+)\s*=\s*([^;]+);", body):
        out[m.group(1)] = _eval_value(m.group(2), out)
    return out


def verify_lstm_gru(src: Source) -> dict:
    text = _strip_comments(src.read("tests/testDriver_tensor_verify_zdnn_lstm_gru.c")).replace("\\\n", " ")
    defaults = {k.lower().replace("default_", ""): int(v) for k, v in
                re.findall(r"#define\s+(DEFAULT_\w+)\s+(\d+)", text)}
    bad = {k: int(v) for k, v in re.findall(r"#define\s+(BAD_\w+)\s+(\d+)", text)}
    call = re.compile(r"verify_(shape|type|format)\(\s*act,\s*direction,\s*all_timesteps_out,\s*(\w+),\s*([^;]*?),"
                      r"\s*(ZDNN_\w+),\s*msg\)")
    cases = []
    for fname, body in _functions(text).items():
        if not fname.startswith("verify_") or fname in ("verify_shape", "verify_type", "verify_format"):
            continue
        # split on #define TEST ... #undef TEST blocks; a block's calls run once per TEST(X) inside it
        blocks = re.split(r"#undef\s+TEST", body)
        for block in blocks:
            d = block.find("#define TEST")
            head, macro_part = (block, "") if d < 0 else (block[:d], block[d:])
            for part, expand in ((head, None), (macro_part, re.findall(r"\bTEST\((\w+)\);", macro_part))):
                lstm_only = set()
                if expand is not None:
                    for m in re.finditer(r"if\s*\(act\s*==\s*NNPA_LSTMACT\)\s*\{\s*TEST\((\w+)\);", part):
                        lstm_only.add(m.group(1))
                for m in call.finditer(part):
                    kind, tensor, args, status = m.groups()
                    targets = [tensor] if expand is None else (expand if tensor == "tensor_idx" else [])
                    for t in targets:
                        case = {"test": fname, "kind": kind, "tensor": t, "lstm_only": t in lstm_only,
                                "status": status}
                        if kind == "shape":
                            dim, value = (s.strip() for s in args.split(",", 1))
                            case["dim"] = int(dim)
                            case["value"] = {f"{act}/{d}": _eval_value(value, {**_locals(body, {
                                **defaults, "direction": i, "BIDIR": 2, "gates": g})})
                                for act, g in (("LSTM", 4), ("GRU", 3)) for i, d in enumerate(DIRECTIONS)}
                        else:
                            case["value"] = bad[args.strip()] if args.strip() in bad else int(args)
                        cases.append(case)
    return {"defaults": defaults, "tensors": _TENSORS, "cases": cases}


_RUNNER_LISTS = {"RUN_TEST_ALL_PRE_DATATYPES": "all_pre_tfrmd", "RUN_TEST_ALL_DLFLOAT16_PRE_DATATYPES":
                 "dlfloat_pre_tfrmd", "RUN_TEST_ALL_QUANTIZED_PRE_DATATYPES": "quantized_pre_tfrmd",
                 "RUN_TEST_ALL_INDEX_PRE_DATATYPES": "index_pre_tfrmd", "RUN_TEST_ALL_TFRMD_DATATYPES": "all_tfrmd",
                 "RUN_TEST_ALL_DLFLOAT16_TFRMD_DATATYPES": "dlfloat_tfrmd",
                 "RUN_TEST_ALL_QUANTIZED_TFRMD_DATATYPES": "quantized_tfrmd",
                 "RUN_TEST_ALL_INDEX_TFRMD_DATATYPES": "index_tfrmd"}


def tensor_desc_layouts(src: Source) -> dict:
    """``tests/testDriver_tensor_desc.c``'s verify_*_transformed_layout cases: the layout, whether concatenated, the
    dims, the expected transformed layout and status, and the data types each runs with (the RUN_TEST_ALL_* lists
    of tests/testsupport.c)."""
    text = _strip_comments(src.read("tests/testDriver_tensor_desc.c"))
    lists = _type_lists(_strip_comments(src.read("tests/testsupport.c")))
    bodies = _functions(text)
    call = re.compile(r"verify_transformed_layout\(\s*(ZDNN_\w+),\s*(true|false),\s*(\d+),\s*(\d+),\s*(\d+),"
                      r"\s*(\d+),\s*(ZDNN_\w+),\s*(ZDNN_\w+)\)")
    cases = []
    for m in re.finditer(r"(RUN_TEST_ALL_\w+)\(\s*(\w+)\s*\)", text.split("int main", 1)[1]):
        runner, fname = m.groups()
        c = call.search(bodies.get(fname, ""))
        if c is None:
            continue
        lay, concat, d4, d3, d2, d1, to_layout, status = c.groups()
        cases.append({"test": fname, "types": lists[_RUNNER_LISTS[runner]], "layout": lay, "concat": concat == "true",
                      "dims": [int(d4), int(d3), int(d2), int(d1)], "to_layout": to_layout, "status": status})
    return {"cases": cases}


def _type_lists(support: str) -> dict[str, list[str]]:
    """The data-type lists of tests/testsupport.c (``zdnn_data_types <name>_types[] = {...}``), by name."""
    return {m.group(1): [t.strip() for t in m.group(2).split(",") if t.strip()] for m in
            re.finditer(r"zdnn_data_types\s+(\w+)_types\[\w+\]\s*=\s*\{([^}]*)\}", support)}


def _run_types(text: str, support: str) -> dict[str, list[str]]:
    """Per test function of a driver's main(): the data types it runs with. A plain RUN_TEST keeps the type the
    previous RUN_TEST_ALL_* left in ``test_datatype`` (its list's last)."""
    lists = _type_lists(support)
    out: dict[str, list[str]] = {}
    last = None
    for m in re.finditer(r"\b(RUN_TEST\w*)\(\s*(\w+)\s*\)", text.split("int main", 1)[1]):
        runner, fname = m.groups()
        if runner in _RUNNER_LISTS:
            types = lists[_RUNNER_LISTS[runner]]
            last = types[-1]
        else:
            types = [last] if last else []
        out.setdefault(fname, []).extend(types)
    return out


def init_ztensor_sizes(src: Source) -> dict:
    """``tests/testDriver_init_ztensor.c``: the buffer sizes (and statuses) of init_ztensor_with_malloc for plain,
    quantized and concatenated descriptors, with the data types each case runs with; concat infos that loop over
    tests/testsupport.c's arrays are expanded."""
    text = _strip_comments(src.read("tests/testDriver_init_ztensor.c"))
    support = _strip_comments(src.read("tests/testsupport.c"))
    arrays = {m.group(1): [" ".join(t.split()) for t in m.group(2).split(",") if t.strip()] for m in
              re.finditer(r"zdnn_concat_info\s+(\w+)\[\w+\]\s*=\s*\{([^}]*)\}", support)}
    types = _run_types(text, support)
    cases = []
    for fname, body in _functions(text).items():
        if fname not in types:
            continue
        for m in re.finditer(r"\btest_(NHWC|2D|2DS|3DS)\(([\d,\s]+)\);", body):
            *dims, size = (int(v) for v in m.group(2).split(","))
            cases.append({"test": fname, "kind": "plain", "layout": f"ZDNN_{m.group(1)}", "dims": dims,
                          "size": size, "types": types[fname]})
        for m in re.finditer(r"\btest_quantized\((QUANTIZED_\w+),([\d,\s.]+)\);", body):
            vals = [v.strip() for v in m.group(2).split(",")]
            cases.append({"test": fname, "kind": "quantized", "transform": m.group(1),
                          "dims": [int(v) for v in vals[:4]], "scale": float(vals[4]), "offset": float(vals[5]),
                          "size": int(vals[6]), "types": types[fname]})
        for m in re.finditer(r"\btest_concat\((ZDNN_\w+),\s*([^,]+?),\s*(\d+),\s*(ZDNN_\w+),\s*(ZDNN_\w+),"
                             r"([\d,\s]+)\);", body):
            lay, info, size, st_gen, st_alloc, dims = m.groups()
            options = [[]]
            for term in (t.strip() for t in info.split("|")):
                ref = re.fullmatch(r"(\w+)\[\w+\]", term)
                vals = arrays[ref.group(1)] if ref else [term]
                options = [o + [v] for o in options for v in vals]
            for o in options:
                cases.append({"test": fname, "kind": "concat", "layout": lay, "info": " | ".join(o),
                              "dims": [int(v) for v in dims.split(",")], "size": int(size), "status_gen": st_gen,
                              "status_alloc": st_alloc, "types": types[fname]})
    return {"cases": cases}


def reshape_cases(src: Source) -> dict:
    """``tests/testDriver_reshape_ztensor.c``: each test function's ``test(src layout, dims, dest layout, dims,
    status)`` calls (or, for the hand-written ones, its ``exp_status``), with the data types it runs with."""
    text = _strip_comments(src.read("tests/testDriver_reshape_ztensor.c"))
    support = _strip_comments(src.read("tests/testsupport.c"))
    types = _run_types(text, support)
    out = {}
    for fname, body in _functions(text).items():
        if fname not in types:
            continue
        forced = re.search(r"test_datatype\s*=\s*(\w+);", body)
        pattern = r"\btest\((ZDNN_\w+),([\d,\s]+),\s*(ZDNN_\w+),([\d,\s]+),\s*(ZDNN_\w+)\);"
        calls = [[m.group(1), [int(v) for v in m.group(2).split(",")], m.group(3),
                  [int(v) for v in m.group(4).split(",")], m.group(5)] for m in re.finditer(pattern, body)]
        exp = re.search(r"exp_status\s*=\s*(ZDNN_\w+)", body)
        out[fname] = {"types": [forced.group(1)] if forced else types[fname], "calls": calls,
                      **({"exp_status": exp.group(1)} if exp else {})}
    return {"tests": out}


SAMPLES = ("simple_add.c", "rnn_lstm_fwd.c", "rnn_gru_fwd.c", "rnn_lstm_bidir.c", "stickify_unstickify.c")


_DIM = {"DIM4": 0, "DIM3": 1, "DIM2": 2, "DIM1": 3}


def _conv_ref(path: str) -> tuple[str, ...]:
    """``input.DIM4`` / ``bias.dims[0]`` / ``padding`` -> a key path into a case's settings."""
    parts = path.split(".")
    if len(parts) == 1:
        return (parts[0],)
    m = re.fullmatch(r"dims\[(\d)\]", parts[1])
    if m:
        return parts[0], "dims", int(m.group(1))
    if parts[1] in _DIM:
        return parts[0], "dims", _DIM[parts[1]]
    return parts[0], parts[1]


def _get(d: dict, key: tuple):
    for k in key:
        d = d[k]
    return d


def _set(d: dict, key: tuple, value) -> None:
    for k in key[:-1]:
        d = d[k]
    d[key[-1]] = value


def _conv_value(expr: str, case: dict):
    """``set[i].kernel.DIM3 - 1``, ``2``, ``SAME_PADDING``, ``-1``: an int, or a C name kept as a string."""
    expr = " ".join(expr.split())
    if re.fullmatch(r"[A-Z_][A-Z0-9_]*", expr):
        return expr
    expr = re.sub(r"set(?:\[i\])?\.([\w.\[\]]+)", lambda m: str(_get(case, _conv_ref(m.group(1)))), expr)
    return _eval_int(expr, {})


def verify_conv2d(src: Source) -> dict:
    text = _strip_comments(src.read("tests/testDriver_tensor_verify_conv2d.c")).replace("\\\n", " ")
    text = text.replace("(void)", "()")
    funcs = _functions(text)
    bases: dict[str, dict] = {}
    for m in re.finditer(r"INIT_TENSOR\((\w+),\s*(\w+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*(\w+),"
                         r"\s*(\w+)\)", funcs["setUp"]):
        name, info, *dims, layout, dtype = m.groups()
        bases.setdefault(name, {})[info] = {"dims": [int(d) for d in dims], "layout": layout, "dtype": dtype}
    for m in re.finditer(r"(\w+)\.(padding|stride_height|stride_width)\s*=\s*([^;]+);", funcs["setUp"]):
        bases[m.group(1)][m.group(2)] = _conv_value(m.group(3), {})
    cases = []
    for test in dict.fromkeys(re.findall(r"RUN_TEST\((\w+)\);", text)):
        body = funcs[test]
        sets = {}
        for m in re.finditer(r"memcpy\((&set|set(?:\s*\+\s*(\d+))?),\s*&(\w+),", body):
            sets[int(m.group(2) or 0)] = json.loads(json.dumps(bases[m.group(3)]))
        for k in sorted(sets):
            case = sets[k]
            for m in re.finditer(r"set(?:\[i\])?\.([\w.\[\]]+)\s*=\s*([^;]+);", body):
                _set(case, _conv_ref(m.group(1)), _conv_value(m.group(2), case))
            call = re.search(r"run_verify_conv2d_tensors(_full)?\(\s*set(?:\[i\])?,\s*(\w+),\s*(?:(\w+),\s*(\w+),\s*)?"
                             r"(ZDNN_\w+)\)", body)
            full, act, bad_format, bad_dtype, status = call.groups()
            cases.append({"test": test, **case, "act": act, "nonexistent_format": bad_format == "true",
                          "nonexistent_dtype": bad_dtype == "true", "status": status})
    return {"broken_field_value": -1, "cases": cases}


def _c_args(call: str) -> list[str]:
    return [a.strip() for a in call.split(",")]


def verify_pool(src: Source) -> dict:
    text = _strip_comments(src.read("tests/testDriver_tensor_verify_pool_avg_max.c"))
    funcs = _functions(text)
    cases = []
    for test in dict.fromkeys(re.findall(r"RUN_TEST\((\w+)\);", text)):
        body = funcs[test]
        arrays = {k: [int(v) for v in re.findall(r"-?\d+", vals)]
                  for k, vals in re.findall(r"uint32_t\s+(\w+)\[\]\s*=\s*\{([^}]*)\}", body)}
        ints = {k: int(v) for k, v in re.findall(r"uint32_t\s+(\w+)\s*=\s*(-?\d+)\s*;", body)}
        call = re.search(r"run_verify_pool_avg_max_tensors\(([^;]*)\);", body, re.S).group(1)
        (ishape, ilayout, idtype, oshape, olayout, odtype, pad, kh, kw, sh, sw, mismatch,
         status) = _c_args(call)
        cases.append({"test": test, "input": {"dims": arrays[ishape], "layout": ilayout, "dtype": idtype},
                      "output": {"dims": arrays[oshape], "layout": olayout, "dtype": odtype}, "padding": pad,
                      "kernel_height": ints[kh], "kernel_width": ints[kw], "stride_height": ints[sh],
                      "stride_width": ints[sw], "input_dtype_broken": mismatch == "true", "status": status})
    return {"broken_field_value": -1, "cases": cases}


def samples(src: Source) -> dict:
    """Per sample program: its integer settings (``uint32_t name = value;``, ``dim_x = v`` lists included) and the
    ordered zDNN calls whose status it asserts, with the asserted status."""
    out = {}
    for name in SAMPLES:
        text = _strip_comments(src.read(f"samples/{name}"))
        ints: dict[str, int] = {}
        for decl in re.findall(r"\buint(?:32|8)_t\s+([^;()]*);", text):
            for m in re.finditer(r"(\w+)\s*=\s*(\d+)\b", decl):
                ints.setdefault(m.group(1), int(m.group(2)))
        calls = [[m.group(1), m.group(2)] for m in
                 re.finditer(r"status\s*=\s*(zdnn_\w+)\((?:[^;]*?)\);\s*assert\(status\s*==\s*(ZDNN_\w+)\)",
                             text, flags=re.S)]
        direction = re.search(r"lstm_gru_direction\s+\w+\s*=\s*(\w+)", text)
        out[name] = {"ints": ints, "calls": calls, **({"direction": direction.group(1)} if direction else {})}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("zdnn", type=Path, help="zDNN checkout, or git directory with --commit")
    ap.add_argument("--commit", help="read the files of this commit (git show) instead of a checkout")
    args = ap.parse_args()
    src = Source(args.zdnn, args.commit)
    OUT.mkdir(parents=True, exist_ok=True)
    prov = {"source": "IBM/zDNN", "commit": args.commit or "checkout"}
    for name, data in (("zdnn_h.json", zdnn_h(src)), ("status_messages.json", status_messages(src)),
                       ("verify_lstm_gru.json", verify_lstm_gru(src)), ("samples.json", samples(src)),
                       ("tensor_desc_layouts.json", tensor_desc_layouts(src)),
                       ("init_ztensor_sizes.json", init_ztensor_sizes(src)),
                       ("reshape.json", reshape_cases(src)),
                       ("verify_conv2d.json", verify_conv2d(src)), ("verify_pool.json", verify_pool(src))):
        (OUT / name).write_text(json.dumps({"provenance": prov, **data}, indent=1) + "\n")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
