"""The converter table of ``fusedrnn.layers``: the frontends fill it on ``import fusedrnn``, the layer methods call
it, a missing converter is a clear error, and layers never import a frontend (not even inside a function)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import fusedrnn
from fusedrnn import frontends, layers
from fusedrnn.errors import AttributeValueError, ConversionError


def _layer():
    rng = np.random.default_rng(0)
    return fusedrnn.LSTM(rng.standard_normal((1, 8, 3)), rng.standard_normal((1, 8, 2)))


def test_import_fusedrnn_fills_every_converter():
    assert set(layers.CONVERTERS) == set(layers.CONVERTER_SIGNATURES)
    assert layers.converter("from_onnx") is frontends.onnx_node.layer_from_onnx
    assert layers.converter("to_onnx_model") is frontends.onnx_node.to_onnx_model
    assert layers.converter("from_tflite") is frontends.tflite.layer_from_tflite
    assert layers.converter("from_torch") is frontends.torch.from_torch
    assert layers.converter("to_torch") is frontends.torch.to_torch
    assert layers.converter("from_keras") is frontends.keras.from_keras
    assert layers.converter("to_keras") is frontends.keras.to_keras


@pytest.mark.parametrize("name, call", [
    ("to_torch", lambda layer: layer.to_torch()),
    ("to_keras", lambda layer: layer.to_keras()),
    ("to_onnx_model", lambda layer: layer.to_onnx_model()),
    ("from_onnx", lambda layer: fusedrnn.LSTM.from_onnx(**layer.to_onnx())),
    ("from_torch", lambda layer: fusedrnn.GRU.from_torch(object())),
    ("from_keras", lambda layer: fusedrnn.RNN.from_keras(object())),
    ("from_tflite", lambda layer: fusedrnn.LSTM.from_tflite(b"")),
    ("to_torch", lambda layer: fusedrnn.Stack([layer]).to_torch()),
])
def test_a_missing_converter_is_a_clear_error(monkeypatch, name, call):
    monkeypatch.delitem(layers.CONVERTERS, name)
    with pytest.raises(ConversionError, match=rf"^{name}: no converter is registered.*fusedrnn\.frontends"):
        call(_layer())


def test_registered_converters_are_what_the_methods_call(monkeypatch):
    layer = _layer()
    seen = []
    monkeypatch.setitem(layers.CONVERTERS, "to_torch", lambda obj: seen.append(obj) or "module")
    monkeypatch.setitem(layers.CONVERTERS, "from_torch", lambda module, expected: seen.append((module, expected)))
    assert layer.to_torch() == "module"
    fusedrnn.GRU.from_torch("m")
    assert seen == [layer, ("m", fusedrnn.GRU)]


@pytest.mark.parametrize("name, fn", [("from_pickle", print), ("to_torch", None), ("to_torch", 3)])
def test_register_converter_checks_its_arguments(name, fn):
    with pytest.raises(AttributeValueError, match="^(name|fn): expected"):
        layers.register_converter(name, fn)


def test_layers_never_import_frontends():
    tree = ast.parse(inspect.getsource(layers))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported |= {f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
    assert not [m for m in imported if "frontends" in m or m.split(".")[0] in ("onnx", "torch", "keras")], imported


def test_no_import_cycle_runs_through_layers_frontends_or_cli():
    """Counting function-local imports too (grimp reads every import statement)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("fusedrnn")
    ours = ("fusedrnn.layers", "fusedrnn.frontends", "fusedrnn.cli")
    cycles = []
    for module in sorted(graph.modules):
        if not module.startswith(ours):
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            # targets.quark.convert -> layers is a known edge outside this part of the house (being removed)
            if back and "fusedrnn.targets.quark.convert" not in back:
                cycles.append(" -> ".join([module, *back]))
    assert not cycles, "\n".join(cycles)
