"""Float bidirectional LSTM -> ExtendedLSTM: calibrated uint16 parameters, an ONNX model, an error report.

Parameters are chosen as Quark's flow does (``quantize_static`` with uint16 activations and weights, then
``convert_lstm_to_customlstm``): per-tensor asymmetric min/max for X (over the calibration data) and for W, R, B
(their own values). Y differs on purpose: the faithful kernel wraps hidden values outside Y's range (defect 2)
and biases y_zero_point < 32768 by one LSB (defect 3), so Y gets a symmetric range (zero point 32768) around
the calibrated peak |h| widened by ``headroom``, capped at 1 (|h| < 1 always). Scale products that hit the
kernel's power-of-two defect (defect 1) are nudged by a relative 2^-12.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ... import conventions
from ...cells.spec import CellSpec, default_activations, run_spec
from ...errors import ConversionError, UnsupportedFeatureError
from ...numerics.affine import choose_qparams, quark_quantize_uint16
from ...validation import calibration_sequences
from .onnx_op import load_model, node_attributes
from .op import extended_lstm, make_scales
from .params import kernel_params

OPSET = 21  # uint16 QuantizeLinear / DequantizeLinear
IR_VERSION = 10  # opset 21; loadable by onnxruntime >= 1.20
DOMAIN = "com.amd.quark"


@dataclass(frozen=True)
class ConversionReport:
    """Faithful ExtendedLSTM vs the float64 LSTM on the calibration sequences (Y, both directions)."""

    max_abs_error: float
    mean_abs_error: float
    max_error_lsb: float  # max_abs_error / y_scale
    y_scale: float
    y_range: tuple[float, float]
    h_peak: float  # max |Y| of the float LSTM on the calibration data
    headroom: float
    sequences: int
    adjustments: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"ExtendedLSTM vs float64 LSTM on {self.sequences} calibration sequence(s):",
                 f"  max |error| {self.max_abs_error:.3g} ({self.max_error_lsb:.2f} LSB of y_scale "
                 f"{self.y_scale:.3g}), mean {self.mean_abs_error:.3g}",
                 f"  Y range [{self.y_range[0]:.4g}, {self.y_range[1]:.4g}] for a calibrated peak |h| "
                 f"{self.h_peak:.4g} (headroom {self.headroom:g})"]
        lines += [f"  adjusted: {a}" for a in self.adjustments]
        return "\n".join(lines)


@dataclass(frozen=True)
class Conversion:
    """The result of :func:`convert`: the ONNX model, the node's attributes, the report."""

    model: object  # onnx.ModelProto
    attributes: dict
    report: ConversionReport
    weights: dict = field(repr=False)  # float W, R, B (ONNX gate order i, o, f, c)


def _sequences(calibration, input_size: int, batch_first: bool = False) -> list[np.ndarray]:
    """Calibration data as a list of float64 sequences [T, 1, I] (Quark's kernel takes batch 1)."""
    arrays = calibration_sequences(calibration, input_size, batch_first=batch_first)
    return [x[:, b : b + 1] for x in arrays for b in range(x.shape[1])]


def _float_lstm(x, W, R, B, direction: str = "bidirectional") -> np.ndarray:
    """Y [T, D, B, H] of the float LSTM (the cells engine in float64, zero states) for ONNX-order W, R, B."""
    Wc, Rc, b_x, b_h = conventions.onnx_to_canonical("lstm", *(np.asarray(a, np.float64) for a in (W, R, B)))
    D = Wc.shape[0]
    spec = CellSpec("lstm", Wc, Rc, b_x, b_h, direction=direction, activations=default_activations("lstm", D))
    zeros = np.zeros((D, x.shape[1], spec.hidden_size))
    Y, _ = run_spec(spec, np.ascontiguousarray(x, np.float64), (zeros, zeros))
    return Y


def _qp(lo: float, hi: float) -> tuple[float, int]:
    s, z = choose_qparams(lo, hi, np.uint16)
    return float(np.float32(s)), int(z)


def calibrate(W, R, B, sequences: list[np.ndarray], *, headroom: float = 0.25, direction: str = "bidirectional",
              faithful: bool = True) -> tuple[dict, list[str], float]:
    """ExtendedLSTM scale / zero-point attributes for float W, R, B (ONNX order) and calibration sequences.
    Returns (attributes, adjustments made to dodge defect 1, calibrated peak |h|)."""
    if not (isinstance(headroom, float | int) and 0 <= headroom):
        raise ConversionError(f"headroom: expected a non-negative fraction of Y's calibrated peak, got {headroom!r}")
    xs = np.concatenate([s.reshape(-1) for s in sequences])
    a = {}
    a["x_scale"], a["x_zero_point"] = _qp(float(xs.min()), float(xs.max()))
    for n, t in (("w", W), ("r", R), ("b", B)):
        a[f"{n}_scale"], a[f"{n}_zero_point"] = _qp(float(t.min()), float(t.max()))
    peak = max(float(np.abs(_float_lstm(s, W, R, B, direction)).max()) for s in sequences)
    m = min(1.0, peak * (1.0 + headroom)) if peak > 0 else 1.0
    a["y_scale"] = float(np.float32(2.0 * m / 65535.0))
    a["y_zero_point"] = 32768
    notes = []
    if not faithful:  # the corrected kernel has none of the defects
        return a, notes, peak
    H, I = W.shape[1] // 4, W.shape[2]
    for _ in range(16):  # nudge away from the power-of-two mantissa defect
        sc = make_scales(**a)
        w = quark_quantize_uint16(W, sc.w_scale, sc.w_zero_point).astype(np.int64) - 32768
        r = quark_quantize_uint16(R, sc.r_scale, sc.r_zero_point).astype(np.int64) - 32768
        b = quark_quantize_uint16(B, sc.b_scale, sc.b_zero_point).astype(np.int64) - 32768
        try:
            p = kernel_params(sc, w.sum(axis=2), r.sum(axis=2), b[:, :4 * H], b[:, 4 * H:], I, H, faithful=True)
        except UnsupportedFeatureError as e:
            raise ConversionError(f"calibration: the calibrated scales are outside what Quark's kernel can "
                                  f"execute ({e})") from e
        qo = 1.0 / float(sc.y_scale)
        ohs_ideal = qo * 2.0 ** (p.oh - 24)  # the kernel's ohs before rounding; >= 65535.5 saturates (defect 1)
        bad = [n for n, hit in (("w_scale", p.qx == -32768), ("r_scale", p.qh == -32768),
                                ("y_scale", ohs_ideal >= 65535.5)) if hit]
        if not bad:
            return a, notes, peak
        for n in bad:
            a[n] = float(np.float32(a[n] * (1 + 2.0**-12)))
            notes.append(f"{n} widened by 2^-12 to {a[n]!r}: a power-of-two scale product would flip the sign of "
                         f"a term in Quark's kernel (defect 1)")
    raise ConversionError("calibration: could not move the scales off Quark's power-of-two defect")


def _weights_from(model_or_layer):
    """(W, R, B float ONNX order, input name or None, model proto or None, lstm node or None, batch_first)."""
    spec = getattr(model_or_layer, "spec", model_or_layer)  # a layer's CellSpec, or a CellSpec
    if isinstance(spec, CellSpec):
        if spec.cell != "lstm":
            raise UnsupportedFeatureError(f"layer: ExtendedLSTM is an LSTM, got a {spec.cell.upper()}")
        bad = [f for f in spec.features() if f not in ("lstm", "bidirectional")]
        if bad:
            raise UnsupportedFeatureError(f"layer: ExtendedLSTM cannot express {', '.join(bad)}")
        if spec.direction != "bidirectional":
            raise UnsupportedFeatureError(f"layer: ExtendedLSTM always runs both directions (Quark's kernel "
                                          f"ignores direction), got direction={spec.direction!r}")
        W, R, B = conventions.onnx_inputs("lstm", spec.W, spec.R, spec.b_x, spec.b_h)
        return W, R, B, None, None, None, bool(getattr(model_or_layer, "batch_first", False))
    proto = load_model(model_or_layer)
    lstm = [n for n in proto.graph.node if n.op_type == "LSTM" and n.domain in ("", "ai.onnx")]
    if len(lstm) != 1:
        raise ConversionError(f"model: expected exactly one ONNX LSTM node, found {len(lstm)}")
    node = lstm[0]
    inits = {i.name: i for i in proto.graph.initializer}
    attrs = node_attributes(node)
    ins = list(node.input) + [""] * (8 - len(node.input))
    if any(ins[4:]):
        raise UnsupportedFeatureError("model: the LSTM uses sequence_lens / initial states / peepholes, which "
                                      "ExtendedLSTM does not have")
    bad = sorted(set(attrs) - {"hidden_size", "direction", "layout", "input_forget"})
    if bad or attrs.get("layout", 0) != 0 or attrs.get("input_forget", 0) != 0:
        raise UnsupportedFeatureError(f"model: ExtendedLSTM cannot express the LSTM attributes "
                                      f"{bad or {k: attrs[k] for k in ('layout', 'input_forget') if k in attrs}}")
    if attrs.get("direction", "forward") != "bidirectional":
        raise UnsupportedFeatureError(f"model: ExtendedLSTM always runs both directions, the LSTM's direction is "
                                      f"{attrs.get('direction', 'forward')!r}")
    if any(o and (o in {g.name for g in proto.graph.output} or any(o in n.input for n in proto.graph.node))
           for o in node.output[1:]):
        raise UnsupportedFeatureError("model: Y_h / Y_c are used, but ExtendedLSTM has only the Y output")
    missing = [n for n in ins[1:4] if n and n not in inits]
    if missing or not ins[1] or not ins[2]:
        raise ConversionError(f"model: W, R, B must be initializers (missing {missing})")
    W, R = numpy_helper.to_array(inits[ins[1]]), numpy_helper.to_array(inits[ins[2]])
    B = numpy_helper.to_array(inits[ins[3]]) if ins[3] else np.zeros((2, 2 * W.shape[1]), W.dtype)
    if ins[0] not in {i.name for i in proto.graph.input}:
        raise ConversionError("model: the LSTM's X must be a graph input (calibration data is fed to it)")
    return W, R, B, ins[0], proto, node, False


def _qdq(name: str, scale: float, zp: int, inits: list, nodes: list, quantize: bool, src: str, dst: str) -> None:
    inits += [helper.make_tensor(f"{name}_scale", TensorProto.FLOAT, [], [scale]),
              helper.make_tensor(f"{name}_zero_point", TensorProto.UINT16, [], [zp])]
    if quantize:
        nodes.append(helper.make_node("QuantizeLinear", [src, f"{name}_scale", f"{name}_zero_point"],
                                      [f"{name}_quantized"]))
        src = f"{name}_quantized"
    nodes.append(helper.make_node("DequantizeLinear", [src, f"{name}_scale", f"{name}_zero_point"], [dst]))


def build_nodes(attrs: dict, W, R, B, x_name: str, y_name: str, prefix: str = "quark_lstm"):
    """Q/DQ + ExtendedLSTM nodes and initializers as Quark's converter leaves them: X -> Q -> DQ ->
    ExtendedLSTM(X, DQ(W), DQ(R), DQ(B)) -> Q -> DQ -> Y, with W, R, B stored as uint16."""
    inits, nodes = [], []
    _qdq(f"{prefix}_x", attrs["x_scale"], attrs["x_zero_point"], inits, nodes, True, x_name, f"{prefix}_x_dq")
    for n, t in (("w", W), ("r", R), ("b", B)):
        q = quark_quantize_uint16(t, attrs[f"{n}_scale"], attrs[f"{n}_zero_point"])
        inits.append(numpy_helper.from_array(q, f"{prefix}_{n}_quantized"))
        _qdq(f"{prefix}_{n}", attrs[f"{n}_scale"], attrs[f"{n}_zero_point"], inits, nodes, False,
             f"{prefix}_{n}_quantized", f"{prefix}_{n}_dq")
    nodes.append(helper.make_node("ExtendedLSTM", [f"{prefix}_{n}_dq" for n in "xwrb"], [f"{prefix}_y_float"],
                                  domain=DOMAIN, name=f"{prefix}_ExtendedLSTM", direction="bidirectional",
                                  hidden_size=int(W.shape[1] // 4), layout=0, input_forget=0, **attrs))
    _qdq(f"{prefix}_y", attrs["y_scale"], attrs["y_zero_point"], inits, nodes, True, f"{prefix}_y_float", y_name)
    return nodes, inits


def convert(model_or_layer, calibration, *, headroom: float = 0.25) -> Conversion:
    """Convert a float bidirectional LSTM (a :class:`fusedrnn.LSTM`, or an ONNX model / path with one LSTM node
    whose X is a graph input) to Quark's ExtendedLSTM.

    ``calibration``: input sequences [T, B, I] (or a list of them; [B, T, I] for a batch_first layer).
    Returns a :class:`Conversion`: ``model`` (an ONNX model: the graph with the LSTM replaced by the Q/DQ +
    ExtendedLSTM nodes, or a new single-node model for a layer, input "X" [T, 1, I] -> output "Y"),
    ``attributes`` (the node's scales and zero points) and ``report`` (faithful kernel vs float64 LSTM).
    """
    W, R, B, x_name, proto, node, batch_first = _weights_from(model_or_layer)
    W, R, B = (np.asarray(t, dtype=np.float32) for t in (W, R, B))
    if W.shape[0] != 2:
        raise UnsupportedFeatureError(f"W: ExtendedLSTM needs two directions, got shape {W.shape}")
    H, I = W.shape[1] // 4, W.shape[2]
    seqs = _sequences(calibration, I, batch_first)
    attrs, notes, peak = calibrate(W, R, B, seqs, headroom=headroom)
    if proto is None:
        nodes, inits = build_nodes(attrs, W, R, B, "X", "Y")
        graph = helper.make_graph(nodes, "fusedrnn_quark_extended_lstm",
                                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["seq", 1, I])],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["seq", 2, 1, H])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                        helper.make_opsetid(DOMAIN, 1)], ir_version=IR_VERSION)
    else:
        model = onnx.ModelProto()
        model.CopyFrom(proto)
        g = model.graph
        k = [i for i, n in enumerate(g.node) if n.op_type == "LSTM"][0]
        nodes, inits = build_nodes(attrs, W, R, B, x_name, node.output[0], prefix=(node.name or "lstm") + "_quark")
        old = list(g.node)
        del g.node[:]
        g.node.extend(old[:k] + nodes + old[k + 1:])
        used = {i for n in g.node for i in n.input}
        keep = [i for i in g.initializer if i.name in used]
        del g.initializer[:]
        g.initializer.extend(keep + inits)
        del model.opset_import[:]
        model.opset_import.extend([helper.make_opsetid("", max(OPSET, _opset(proto))), helper.make_opsetid(DOMAIN, 1)])
        model.ir_version = max(model.ir_version, IR_VERSION)
    report = _report(W, R, B, seqs, attrs, peak, headroom, notes)
    return Conversion(model=model, attributes=attrs, report=report, weights={"W": W, "R": R, "B": B})


def _opset(proto) -> int:
    return max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=OPSET)


def _report(W, R, B, seqs, attrs, peak, headroom, notes) -> ConversionReport:
    errs = []
    for s in seqs:
        y = extended_lstm(s.astype(np.float32), W, R, B, hidden_size=W.shape[1] // 4, **attrs)
        errs.append(np.abs(y.astype(np.float64) - _float_lstm(s.astype(np.float32).astype(np.float64), W, R, B)))
    flat = np.concatenate([e.reshape(-1) for e in errs])
    ys, yz = attrs["y_scale"], attrs["y_zero_point"]
    return ConversionReport(max_abs_error=float(flat.max()), mean_abs_error=float(flat.mean()),
                            max_error_lsb=float(flat.max() / ys), y_scale=ys,
                            y_range=(-yz * ys, (65535 - yz) * ys), h_peak=peak, headroom=float(headroom),
                            sequences=len(seqs), adjustments=tuple(notes))
