"""Multi-node ONNX models of fusedrnn layers, stacks and simple heads: what ``convert --to onnx`` writes for a
stack, and how whole Keras models and .tflite graphs become ONNX models that :mod:`fusedrnn.frontends.onnx` runs.

A recurrent layer is one ONNX ``LSTM`` / ``GRU`` / ``RNN`` node (weights as initializers) between the nodes that
give it the layer's own signature, so that nothing of ONNX's node form leaks out:

* ``x`` in the layer's layout ([T, B, I], or [B, T, I] for ``batch_first``): a ``Transpose`` to time-major first;
* ``Y`` [T, D, B, H] -> the layer's merged output: ``concat`` [T, B, D*H] (Transpose + Reshape), ``sum`` / ``ave``
  (ReduceSum / ReduceMean over D), ``mul`` (Mul of the two directions), ``stack`` [T, D, B, H] as it is; one
  direction loses the direction axis (Squeeze); then back to [B, T, ...] for ``batch_first``.

:class:`GraphBuilder` collects nodes and initializers; :func:`stack_model` writes ``y = head(stack(x))`` with the
final states ``h_n`` (and ``c_n``) [L*D, B, H] as extra outputs (PyTorch's form: layer k's directions at rows
k*D .. k*D+D-1) and, with ``state_inputs=True``, optional inputs ``sequence_lens`` [B], ``h_0`` (``c_0``) of the
same form. Without them (the default) the graph's only input is ``x``, which onnxruntime runs as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import ConversionError
from ..layers import RecurrentLayer, Stack
from .onnx_node import ONNX_OP_TYPES

OPSET = 17
"""The opset of the models written here (ReduceSum / Squeeze take their axes as inputs since 13)."""

DENSE_ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax")
"""The activations :class:`Dense` heads can carry."""


@dataclass(frozen=True)
class Dense:
    """A head ``y = activation(x @ kernel + bias)`` on the last axis (Keras ``Dense``, PyTorch ``Linear`` with
    ``kernel = weight.T``, TFLite ``FULLY_CONNECTED``); ``kernel`` [in, out], ``bias`` [out] or None; ``name`` names
    its nodes (default ``dense<k>``)."""

    kernel: np.ndarray
    bias: np.ndarray | None = None
    activation: str = "linear"
    name: str = ""


class GraphBuilder:
    """Nodes, initializers and unique names of one ONNX graph under construction."""

    def __init__(self, elem: int = TensorProto.FLOAT):
        self.elem = elem
        self.nodes: list = []
        self.inits: list = []
        self._used: set[str] = set()

    def name(self, base: str) -> str:
        """``base``, or ``base_2``, ``base_3``, ... when taken."""
        name, k = base, 1
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        return name

    def const(self, base: str, value) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def small(self, base: str, value) -> str:
        """A small constant (axes, shapes) as a Constant node, so that the initializers are the weights only."""
        name = self.name(base)
        self.nodes.append(helper.make_node("Constant", [], [name], name=self.name(f"{base}_node"),
                                           value=numpy_helper.from_array(np.asarray(value), name)))
        return name

    def node(self, op: str, inputs: Sequence[str], base: str, n_out: int = 1, node_name: str | None = None,
             **attrs) -> list[str]:
        outs = [self.name(f"{base}_{k}" if n_out > 1 else base) for k in range(n_out)]
        name = self.name(node_name or f"{base}_node")
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs

    def one(self, op: str, inputs: Sequence[str], base: str, **attrs) -> str:
        return self.node(op, inputs, base, **attrs)[0]

    def transpose(self, x: str, perm: Sequence[int], base: str) -> str:
        return self.one("Transpose", [x], base, perm=list(perm))

    def recurrent(self, layer: RecurrentLayer, x: str, prefix: str, *, sequence_lens: str = "",
                  initial: Sequence[str] = (), weights: str | None = None) -> tuple[str, list[str]]:
        """The nodes of ``layer`` reading ``x`` (the layer's layout); returns (the merged output's name, the
        final state names [D, B, H] each). ``initial``: names of time-major [D, B, H] initial states;
        ``weights``: the initializers' name prefix (default ``prefix_``)."""
        wp = f"{prefix}_" if weights is None else weights
        if layer.output_order == "processing":
            raise ConversionError(f"{prefix}: a reverse layer with output_order='processing' (Keras go_backwards) "
                                  f"has no ONNX node form; use fusedrnn.frontends.keras.time_ordered and flip y")
        spec = layer.to_onnx()
        attrs = dict(spec["attributes"])
        attrs.pop("layout", None)
        xt = self.transpose(x, (1, 0, 2), f"{prefix}_x_time_major") if layer.batch_first else x
        dt = np.float64 if self.elem == TensorProto.DOUBLE else np.float32
        ins = [xt, *(self.const(f"{wp}{k}", spec[k].astype(dt)) for k in ("W", "R", "B"))]
        tail = [sequence_lens, *initial]
        if "P" in spec:
            tail += [""] * (3 - len(tail)) + [self.const(f"{wp}P", spec["P"].astype(dt))]
        while tail and not tail[-1]:
            tail.pop()
        n_out = 3 if layer.cell == "lstm" else 2
        Y, *states = self.node(ONNX_OP_TYPES[layer.cell], ins + tail, f"{prefix}_Y", n_out, node_name=prefix,
                               **attrs)
        y = self._merge(Y, layer, prefix)
        if layer.batch_first:
            perm = (2, 0, 1, 3) if layer.merge == "stack" and layer.num_directions == 2 else (1, 0, 2)
            y = self.transpose(y, perm, f"{prefix}_y")
        return y, states

    def _merge(self, Y: str, layer: RecurrentLayer, prefix: str) -> str:
        D, merge = layer.num_directions, layer.merge
        if D == 1:
            return self.one("Squeeze", [Y, self.small(f"{prefix}_axis", np.array([1], np.int64))], f"{prefix}_y1")
        if merge == "stack":
            return Y
        if merge == "concat":
            t = self.transpose(Y, (0, 2, 1, 3), f"{prefix}_Y_tbdh")
            return self.one("Reshape", [t, self.small(f"{prefix}_shape", np.array([0, 0, -1], np.int64))],
                            f"{prefix}_y_concat")
        axis = self.small(f"{prefix}_axis", np.array([1], np.int64))
        if merge in ("sum", "ave"):
            return self.one("ReduceSum" if merge == "sum" else "ReduceMean", [Y, axis], f"{prefix}_y_{merge}",
                            keepdims=0)
        fw, bw = self.node("Split", [Y], f"{prefix}_Y_dir", 2, axis=1, num_outputs=2)
        return self.one("Squeeze", [self.one("Mul", [fw, bw], f"{prefix}_Y_mul"), axis], f"{prefix}_y_mul")

    def dense(self, head: Dense, x: str, prefix: str) -> str:
        if head.activation not in DENSE_ACTIVATIONS:
            raise ConversionError(f"{prefix}: activation {head.activation!r} of a dense layer; expected one of "
                                  f"{', '.join(DENSE_ACTIVATIONS)}")
        dt = np.float64 if self.elem == TensorProto.DOUBLE else np.float32
        y = self.node("MatMul", [x, self.const(f"{prefix}.kernel", np.asarray(head.kernel, dt))], f"{prefix}_matmul",
                      node_name=prefix)[0]
        if head.bias is not None:
            y = self.node("Add", [y, self.const(f"{prefix}.bias", np.asarray(head.bias, dt))], f"{prefix}_add",
                          node_name=f"{prefix}_bias")[0]
        act = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softmax": "Softmax"}.get(head.activation)
        if act is not None:
            y = self.one(act, [y], f"{prefix}_{head.activation}", **({"axis": -1} if act == "Softmax" else {}))
        return y

    def model(self, inputs: Sequence, outputs: Sequence, name: str = "fusedrnn") -> onnx.ModelProto:
        """The checked model of the collected nodes; ``inputs`` / ``outputs`` are ValueInfoProtos."""
        graph = helper.make_graph(self.nodes, name, list(inputs), list(outputs), self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8,
                                  producer_name="fusedrnn")
        onnx.checker.check_model(model)
        return model


def layer_list(obj) -> list[RecurrentLayer]:
    """The layers of a layer or a :class:`~fusedrnn.Stack`."""
    return list(obj.layers) if isinstance(obj, Stack) else [obj]


@dataclass(frozen=True)
class LastStep:
    """Keep the last timestep of [B, T, H] (``batch_first``) or [T, B, H]: Keras ``return_sequences=False``."""

    batch_first: bool = True


def stack_model(stages, heads: Sequence[Dense] = (), *, state_inputs: bool = False, input_name: str = "x",
                name: str = "fusedrnn", layer_names: Sequence[str] | None = None) -> onnx.ModelProto:
    """``y = heads(stages(x))`` as one ONNX model (module docstring). ``stages``: a layer, a
    :class:`~fusedrnn.Stack`, or a list of layers, stacks, :class:`Dense` heads and :class:`LastStep` in the order
    they apply; input ``x`` in the first layer's layout, outputs ``y`` and the final states ``h_n`` (, ``c_n``
    when every layer is an LSTM) [L*D, B, H] when the layers agree in directions and sizes; ``state_inputs``
    adds the inputs ``sequence_lens``, ``h_0`` (, ``c_0``) of the same form. ``layer_names`` name the recurrent
    nodes (default ``l0``, ``l1``, ...)."""
    items = []
    for s in (stages if isinstance(stages, (list, tuple)) else [stages]):
        items += layer_list(s) if isinstance(s, (Stack, RecurrentLayer)) else [s]
    items += list(heads)
    ls = [s for s in items if isinstance(s, RecurrentLayer)]
    if not ls:
        raise ConversionError("stages: expected at least one recurrent layer")
    first = ls[0]
    if not isinstance(items[0], RecurrentLayer):
        raise ConversionError(f"stages: expected a recurrent layer first, got {type(items[0]).__name__}")
    elem = TensorProto.DOUBLE if first.W.dtype == np.float64 else TensorProto.FLOAT
    g = GraphBuilder(elem)
    g.name(input_name)
    bf = first.batch_first
    inputs = [helper.make_tensor_value_info(input_name, elem, ["batch", "seq", first.input_size] if bf
                                            else ["seq", "batch", first.input_size])]
    lstm = all(layer.cell == "lstm" for layer in ls)
    uniform = len({(layer.num_directions, layer.output_size, layer.hidden_size) for layer in ls}) == 1
    state_names = ["h_0", "c_0"] if lstm else ["h_0"]
    seq = ""
    if state_inputs:
        if not uniform:
            raise ConversionError("state_inputs: the layers differ in directions or sizes, so their states do not "
                                  "stack into one [L*D, B, H] input; export without state inputs")
        seq = g.name("sequence_lens")
        inputs.append(helper.make_tensor_value_info(seq, TensorProto.INT32, ["batch"]))
        for s in state_names:
            g.name(s)
            inputs.append(helper.make_tensor_value_info(s, elem, [len(ls) * first.num_directions, "batch",
                                                                  first.output_size if s == "h_0" else
                                                                  first.hidden_size]))
    y, finals, rank, k = input_name, [], 3, 0
    for j, item in enumerate(items):
        if isinstance(item, RecurrentLayer):
            initial: list[str] = []
            if state_inputs:
                D = item.num_directions
                lo = g.small(f"l{k}_rows_from", np.array([k * D], np.int64))
                hi = g.small(f"l{k}_rows_to", np.array([k * D + D], np.int64))
                initial = [g.one("Slice", [s, lo, hi], f"l{k}_{s}") for s in state_names]
                if item.cell != "lstm":
                    initial = initial[:1]
            prefix = layer_names[k] if layer_names is not None else f"l{k}"
            y, states = g.recurrent(item, y, prefix, sequence_lens=seq, initial=initial,
                                    weights="" if len(ls) == 1 else None)
            finals.append(states)
            rank = 4 if item.merge == "stack" and item.num_directions == 2 else 3
            k += 1
        elif isinstance(item, Dense):
            y = g.dense(item, y, item.name or f"dense{j}")
        elif isinstance(item, LastStep):
            y = g.one("Gather", [y, g.small(f"last{j}", np.array(-1, np.int64))], f"last_step{j}",
                      axis=1 if item.batch_first else 0)
            rank -= 1
        else:
            raise ConversionError(f"stages[{j}]: expected a layer, Dense or LastStep, got {type(item).__name__}")
    y = g.one("Identity", [y], "y")
    outputs = [helper.make_tensor_value_info(y, elem, [f"y_{d}" for d in range(rank)])]
    if uniform:
        for j, s in enumerate(["h_n", "c_n"] if lstm else ["h_n"]):
            parts = [f[j] for f in finals]
            out = g.one("Concat", parts, s, axis=0) if len(parts) > 1 else g.one("Identity", parts, s)
            outputs.append(helper.make_tensor_value_info(out, elem, [len(ls) * first.num_directions, "batch",
                                                                     first.output_size if s == "h_n" else
                                                                     first.hidden_size]))
    return g.model(inputs, outputs, name)


__all__ = ["DENSE_ACTIVATIONS", "Dense", "GraphBuilder", "LastStep", "OPSET", "layer_list", "stack_model"]
