"""The house of DESIGN.md, checked: no import cycle anywhere in ``fusedrnn`` (function-local imports included), and
function-local imports only for optional dependencies. The layers and the independence of the target packages
are import-linter contracts in pyproject.toml (``lint-imports`` runs in CI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")

SRC = Path(__file__).resolve().parents[1] / "src" / "fusedrnn"
OPTIONAL = {"torch", "keras", "onnxruntime", "onnxruntime_extensions", "ai_edge_litert", "tflite_runtime",
            "flatbuffers", "matplotlib"}
"""Optional dependencies (extras), imported where they are used so that the core installs without them."""


def test_no_import_cycle():
    graph = grimp.build_graph("fusedrnn")
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.append(" -> ".join((module,) + tuple(chain)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _local_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def test_function_local_imports_are_for_optional_dependencies_only():
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        for line, name in _local_imports(path):
            if name.split(".")[0] not in OPTIONAL:
                bad.append(f"{path.relative_to(SRC.parent)}:{line}: {name}")
    assert not bad, "function-local imports of core modules:\n" + "\n".join(bad)


def test_the_local_import_scan_sees_a_local_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from . import x\n    import numpy\n")
    assert _local_imports(probe) == [(2, "."), (3, "numpy")]
