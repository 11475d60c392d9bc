"""Why a target loses accuracy: per-node errors in isolation and cumulatively, per-gate saturation counted by the
integer kernels, the ranges the calibration chose, calibration methods side by side, per-node sensitivity and a
search for the float nodes that meet a goal.

For a model M with recurrent nodes n_1 … n_k, float reference outputs y = M(x) and node outputs Y_j:

* **cumulative** error of n_j: Y_j of M with every node on the target (minus ``keep_float``) against the float
  Y_j — what the node's output really is on the device;
* **isolated** error of n_j: Y_j of M with *only* n_j on the target (so its inputs are the float ones) against
  the float Y_j — what the node's own arithmetic costs; the model-level metric of that run is the node's
  **sensitivity**;
* per node and tensor: max |Δ|, mean |Δ|, SNR = 10·log10(Σ ref² / Σ Δ²) dB (∞: identical), and the mean |Δ| at
  every timestep (error growth);
* model level, per output: SNR, the mean cosine similarity of the rows (last axis), the argmax agreement, and the
  accuracy when labels are given.

Every node is calibrated once per target (on the inputs it receives in the float model), so the isolated, the
cumulative and the mixed-precision runs of one target share the same quantization.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from .. import targets as _targets
from ..cells.calibration import METHODS, Calibration
from ..cells.observers import RangeObserver, SaturationCounter
from ..cells.spec import run_spec
from ..errors import AttributeValueError, UnsupportedFeatureError
from ..targets import Target
from .onnx import Model
from .onnx_emulation import node_function
from .onnx_ops import node_key, recurrent_nodes

METRICS: tuple[str, ...] = ("cosine", "agreement", "accuracy", "snr")
"""Model-level metrics (higher is better); ``accuracy`` needs labels."""


# ---- measures -----------------------------------------------------------------------------------------------
def snr_db(y: np.ndarray, ref: np.ndarray) -> float:
    """10·log10(Σ ref² / Σ (y - ref)²) in dB; ∞ when identical, -∞ when the reference is all zeros."""
    ref = np.asarray(ref, np.float64)
    err = np.asarray(y, np.float64) - ref
    noise, signal = float(np.sum(err * err)), float(np.sum(ref * ref))
    if noise == 0.0:
        return float("inf")
    if signal == 0.0:
        return float("-inf")
    return 10.0 * float(np.log10(signal / noise))


def tensor_errors(y: np.ndarray, ref: np.ndarray, time_axis: int | None = 0) -> dict:
    """max |Δ|, mean |Δ|, SNR of ``y`` against ``ref``, and (with ``time_axis``) the mean |Δ| per timestep."""
    d = np.abs(np.asarray(y, np.float64) - np.asarray(ref, np.float64))
    out = {"max_abs": float(d.max()) if d.size else 0.0, "mean_abs": float(d.mean()) if d.size else 0.0,
           "snr_db": snr_db(y, ref)}
    if time_axis is not None and d.ndim > time_axis:
        out["curve"] = np.moveaxis(d, time_axis, 0).reshape(d.shape[time_axis], -1).mean(axis=1).tolist()
    return out


def cosine(y: np.ndarray, ref: np.ndarray) -> float:
    """Mean cosine similarity of the rows (last axis) of ``y`` and ``ref`` (1 for two zero rows)."""
    a = np.asarray(y, np.float64).reshape(-1, np.shape(y)[-1] if np.ndim(y) else 1)
    b = np.asarray(ref, np.float64).reshape(a.shape)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    dot = np.sum(a * b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    cos = np.where(both_zero, 1.0, dot / np.maximum(na * nb, 1e-300))
    return float(np.mean(cos))


def model_metrics(outputs: dict, reference: dict, labels: np.ndarray | None = None) -> dict:
    """Per model output: SNR, cosine, argmax agreement (and accuracy with ``labels``), plus the first output's
    values under ``model``."""
    per = {}
    for name, ref in reference.items():
        y = outputs[name]
        if np.asarray(ref).dtype.kind != "f":
            per[name] = {"snr_db": float("inf") if np.array_equal(y, ref) else float("-inf"),
                         "cosine": 1.0 if np.array_equal(y, ref) else 0.0, "agreement": float(np.mean(y == ref))}
            continue
        m = {"snr_db": snr_db(y, ref), "cosine": cosine(y, ref)}
        if np.ndim(ref) >= 1 and np.shape(ref)[-1] > 1:
            m["agreement"] = float(np.mean(np.argmax(y, -1) == np.argmax(ref, -1)))
            if labels is not None and np.shape(labels) == np.shape(ref)[:-1]:
                m["accuracy"] = float(np.mean(np.argmax(y, -1) == labels))
        per[name] = m
    return per


def metric_value(per_output: dict, metric: str) -> float:
    """The model-level ``metric`` of a run: its value on the first output that has it."""
    for m in per_output.values():
        if metric == "snr" and "snr_db" in m:
            return m["snr_db"]
        if metric in m:
            return m[metric]
    raise AttributeValueError(f"metric: {metric!r} is not available for this model's outputs (accuracy needs "
                              f"labels; agreement needs a class axis)")


# ---- running with some nodes on a target --------------------------------------------------------------------
def _layout(node) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "layout"), 0)


class _Runs:
    """Runs ``model`` with a chosen set of recurrent nodes on ``target`` (the others in float), recording every
    node's Y."""

    def __init__(self, model: Model, target: Target, emulations: dict | None):
        self.model, self.target = model, target
        self.nodes = {node_key(n): n for n in recurrent_nodes(model.proto.graph)}
        self.names = {k: (n.name or k) for k, n in self.nodes.items()}
        self.taps: dict[str, np.ndarray] = {}
        self.inputs: dict[str, np.ndarray] = {}

        def tap(node, outputs, x):
            self.taps[node_key(node)] = outputs[0]
            self.inputs[node_key(node)] = x

        self.on_target = node_function(target, emulations, tap=tap)
        self.in_float = node_function(None, tap=tap)

    def run(self, feeds: dict, on_target: set[str]) -> tuple[dict, dict]:
        """(model outputs, {node key: Y}) with the nodes of ``on_target`` (keys) on the target."""
        self.taps = {}

        def mixed(node, inputs, attributes):
            fn = self.on_target if node_key(node) in on_target else self.in_float
            return fn(node, inputs, attributes)

        runner = self.model._runner_with(mixed, f"partly on target {self.target.name}")
        names = [o.name for o in self.model.outputs]
        outs = dict(zip(names, runner(names, self.model._check_feeds(feeds)), strict=True))
        return outs, dict(self.taps)


def _node_errors(ys: dict, ref_ys: dict, nodes: dict, names: dict) -> dict:
    out = {}
    for key, ref in ref_ys.items():
        if key in ys:
            out[names[key]] = tensor_errors(ys[key], ref, 1 if _layout(nodes[key]) == 1 else 0)
    return out


def observed_ranges(spec, x: np.ndarray, batch_major: bool) -> list[dict]:
    """Per direction, the float values' ranges {tensor: (min, max)} of a node run in float on its input x (the
    node's X; [B, T, I] when ``batch_major``): the input, the cell (LSTM), m = o·act(c) ("hidden") and the stored
    output."""
    x = np.asarray(x, np.float64)
    if batch_major:
        x = np.swapaxes(x, 0, 1)
    observer = RangeObserver(points=("cell", "hidden", "output"))
    D, B = spec.num_directions, x.shape[1]
    states = (np.zeros((D, B, spec.output_size)),) + ((np.zeros((D, B, spec.hidden_size)),)
                                                       if spec.cell == "lstm" else ())
    run_spec(spec, np.ascontiguousarray(x), states, observer=observer)
    out = []
    for d in range(D):
        r = {"input": (float(x.min()), float(x.max()))}
        for point in observer.observed():
            rr = observer.ranges(point)
            r[point] = (float(rr.min[d]), float(rr.max[d]))
        out.append(r)
    return out


def _params(emu) -> int:
    return int(sum(np.size(w) for w in emu.weights if w is not None)) if emu is not None else 0


def diagnose(model: Model, targets: Sequence[str | Target], calibration, data: dict, *,
             keep_float: Sequence[str] = (), labels: np.ndarray | None = None, metric: str = "cosine",
             window: int = 0, saturation: bool = True, methods: Sequence[str] = (), goal: float | None = None,
             progress: Callable[[str], None] | None = None) -> dict:
    """Diagnose ``model`` (a :class:`~fusedrnn.frontends.onnx.Model` in native precision) on ``targets``.

    ``calibration``: feeds, or a :class:`~fusedrnn.Calibration` with feeds and the method (default: each SDK's
    own recipe); ``data``: the feeds the errors are measured on; ``keep_float``: recurrent node names that stay in
    float in the cumulative run; ``labels``: class labels of the first output's rows (for accuracy); ``metric``:
    the model-level metric of the sensitivity ranking and the search (:data:`METRICS`); ``window``: timesteps
    per saturation window (0: one window); ``saturation``: count saturation (on the integer targets' NumPy
    loops: slower); ``methods``: calibration methods to compare on every quantized target (cumulative metric
    each); ``goal``: search for float nodes until the metric reaches it.

    Returns a JSON-ready dict: ``targets`` (per target: ``model`` metrics, ``nodes`` {name: {isolated,
    cumulative, sensitivity, ranges, saturation}}, ``ranking``, ``methods``, ``search``), ``nodes``,
    ``calibration``, ``keep_float``, ``metric``, ``executor``."""
    if metric not in METRICS:
        raise AttributeValueError(f"metric: expected one of {METRICS}, got {metric!r}")
    if goal is not None and not np.isfinite(goal):
        raise AttributeValueError(f"goal: expected a finite number, got {goal!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise AttributeValueError(f"methods: unknown calibration method(s) {unknown}; expected some of {METHODS}")
    settings = calibration if isinstance(calibration, Calibration) else Calibration(calibration)
    model._check_node_names(keep_float, "keep_float")
    say = progress or (lambda _msg: None)
    ref_runs = _Runs(model, _targets.get("fp32"), None)
    all_keys = set(ref_runs.nodes)
    if not all_keys:
        raise UnsupportedFeatureError("model: it has no recurrent node (LSTM, GRU, RNN, ...); there is nothing to "
                                      "diagnose")
    ref_out, ref_ys = ref_runs.run(data, set())
    names = ref_runs.names
    floats = {k for k, n in names.items() if n in set(keep_float) or k in set(keep_float)}
    result = {"metric": metric, "executor": model.executor, "calibration": settings.as_dict(),
              "keep_float": [names[k] for k in sorted(floats)], "nodes": [names[k] for k in ref_runs.nodes],
              "targets": {}}
    for target in targets:
        t = _targets.get(target)
        say(f"{t.name}: calibrating")
        emulated = model.to(t, calibration=settings) if t.prepare is not None else model.to(t)
        emulations = emulated._emulations
        runs = _Runs(model, t, emulations)
        on_target = all_keys - floats
        counters = {}
        if saturation and emulations:
            for key, emu in emulations.items():
                prepared = getattr(emu.layer, "prepared", None)
                if key in on_target and prepared is not None and prepared.counts_saturation:
                    counters[key] = prepared.probe = SaturationCounter(window)
        try:
            say(f"{t.name}: cumulative run")
            out, ys = runs.run(data, on_target)
        finally:
            for key in counters:
                emulations[key].layer.prepared.probe = None
        model_m = model_metrics(out, ref_out, labels)
        cumulative = _node_errors(ys, ref_ys, runs.nodes, names)
        entry = {"model": model_m, "metric": metric_value(model_m, metric), "nodes": {}}
        for key in ref_runs.nodes:
            say(f"{t.name}: {names[key]} alone")
            iso_out, iso_ys = runs.run(data, {key})
            iso_m = model_metrics(iso_out, ref_out, labels)
            emu = emulations.get(key) if emulations else None
            prepared = getattr(getattr(emu, "layer", None), "prepared", None)
            node = {"isolated": _node_errors(iso_ys, ref_ys, runs.nodes, names).get(names[key]),
                    "cumulative": cumulative.get(names[key]), "float": key in floats,
                    "sensitivity": metric_value(iso_m, metric), "isolated_model": iso_m,
                    "parameters": _params(emu)}
            if prepared is not None and getattr(prepared, "ranges", None) is not None:
                node["ranges"] = prepared.ranges
                node["observed"] = observed_ranges(prepared.spec, ref_runs.inputs[key],
                                                   _layout(runs.nodes[key]) == 1)
                node["calibration"] = getattr(prepared, "settings", settings).describe()
            if prepared is not None and hasattr(prepared, "qparams"):
                node["qparams"] = [prepared.qparams(d) for d in range(prepared.spec.num_directions)]
            if key in counters:
                node["saturation"] = counters[key].summary()
            entry["nodes"][names[key]] = node
        entry["ranking"] = sorted(entry["nodes"], key=lambda n: entry["nodes"][n]["sensitivity"])
        if methods and t.prepare is not None:
            entry["methods"] = {}
            for method in methods:
                say(f"{t.name}: calibration method {method}")
                other = model.to(t, calibration=replace(settings, method=method))
                m_out, _ = _Runs(model, t, other._emulations).run(data, on_target)
                mm = model_metrics(m_out, ref_out, labels)
                entry["methods"][method] = {"metric": metric_value(mm, metric), "model": mm}
        if goal is not None:
            entry["search"] = _search(runs, data, ref_out, labels, metric, goal, entry, floats, emulations, names)
        result["targets"][t.name] = entry
    return result


def _search(runs: _Runs, data: dict, ref_out: dict, labels, metric: str, goal: float, entry: dict, floats: set,
            emulations: dict | None, names: dict) -> dict:
    """Greedy mixed precision: move the most sensitive node (lowest isolated metric) to float until the
    cumulative metric reaches ``goal``; each step with the metric and the parameters kept in float."""
    by_name = {v: k for k, v in names.items()}
    kept = set(floats)
    value = entry["metric"]
    steps = [{"float": sorted(names[k] for k in kept), "metric": value}]
    for name in entry["ranking"]:
        if value >= goal:
            break
        key = by_name[name]
        if key in kept:
            continue
        kept.add(key)
        out, _ = runs.run(data, set(runs.nodes) - kept)
        value = metric_value(model_metrics(out, ref_out, labels), metric)
        params = sum(_params(emulations.get(k)) if emulations else 0 for k in kept)
        steps.append({"float": sorted(names[k] for k in kept), "metric": value, "float_parameters": params})
    return {"goal": goal, "reached": bool(value >= goal), "float": sorted(names[k] for k in kept), "steps": steps}


__all__ = ["METRICS", "cosine", "diagnose", "metric_value", "model_metrics", "snr_db", "tensor_errors"]
