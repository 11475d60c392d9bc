"""The ``litert-float``, ``litert-hybrid`` and ``litert-int8x16`` emulation targets (registry ``prepare`` hooks).

``layer.to("litert-int8x16", calibration=x)`` quantizes the layer as the TF converter would (see
:mod:`~fusedrnn.targets.litert.layer_map`) and runs the 8x8_16 kernel: the float input is quantized to the
calibrated int8 input parameters (round half to even), initial states to the output-state and cell parameters,
and the int8 outputs / final states are dequantized. A layer imported with ``LSTM.from_tflite`` keeps the
model's own tensors: ``calibration="tflite"`` runs them unchanged (bit-exact with the interpreter). TFLite has no
sequence lengths: calls with ``sequence_lens`` shorter than T are refused.
"""

from __future__ import annotations

import numpy as np

from ...cells.calibration import settings_of
from ...cells.spec import CellSpec
from ...errors import UnsupportedFeatureError
from ...numerics.affine import tflite_symmetric_quantize
from ..batch_split import RowSplitter, macs_per_row_step
from ..registry import Prepared, Target
from ..tflite_quant import calibrate_direction, quantize_values
from . import _compiled
from .layer_map import (
    check_lstm_expressible,
    float_direction,
    float_tensors,
    fused_activation,
    integer_tensors,
    lstm_options,
)
from .ops import make_lstm_kernel
from .rnn import RnnKernel, SequenceGRU
from .slots import CELL_STATE, INPUT, OUTPUT_STATE, const

_BASE = ("bidirectional", "peepholes", "projection", "layer_norm", "cifg", "cell_clip")
FEATURES = {
    "litert-float": frozenset(("lstm", "gru", "rnn", "custom_activations", "diagonal_recurrence") + _BASE),
    "litert-hybrid": frozenset(("lstm", "rnn", "custom_activations", "diagonal_recurrence") + _BASE),
    "litert-int8x16": frozenset(("lstm",) + _BASE),
}


def _check_lens(lens, T: int) -> None:
    if lens is not None and not np.all(lens == T):
        raise UnsupportedFeatureError("sequence_lens: TFLite's fused ops have no sequence lengths; every sequence "
                                      "must run the full T steps")


def _kept(spec: CellSpec, kind: str):
    kept = (spec.kept or {}).get("litert")
    if kept is not None and kept["kind"] == kind:
        return kept
    return None


# ---- LSTM ----------------------------------------------------------------------------------------------------
class LstmPrepared(Prepared):
    """An LSTM on LiteRT's kernels: ``kernels`` holds one kernel per direction (with its TFLite tensors ``t``)."""

    def __init__(self, spec: CellSpec, kernels: list):
        super().__init__(spec)
        self.kernels = kernels
        self.integer = kernels[0].kind == "integer"
        self.counts_saturation = self.integer
        self._q = [_lstm_qparams(k.t) for k in kernels] if self.integer else None
        # rows are independent sequences for the 8x8_16 kernel, except its peephole quirk with a projection (the
        # peephole runs over flat [B*H] buffers, see IntegerLstmKernel._peephole); the hybrid kernel quantizes the
        # input per tensor (a statistic over the rows), the float one gains nothing (BLAS already runs two threads)
        coupled = any(k.P and k.n_output != k.n_cell for k in kernels) if self.integer else True
        if not coupled:
            self.splitter = RowSplitter(macs_per_row_step(spec))

    def run(self, x, states, lens):
        T, B, _ = x.shape
        _check_lens(lens, T)
        h0, c0 = states
        dt = x.dtype
        rev = self.spec.reverse
        Y = np.empty((T, len(self.kernels), B, self.kernels[0].n_output), dt)
        hs, cs = [], []
        lib = _compiled.library() if self.integer else None  # the compiled loop's library also quantizes
        for d, k in enumerate(self.kernels):
            if self.integer:
                (sx, zx), (sh, zh), sc = self._q[d]
                deq = ((np.arange(-128, 128) - zh) * sh).astype(dt)  # every int8 output value, dequantized
                xq = _compiled.quantize_i8(lib, x, sx, zx)
                if xq is None:
                    xq = quantize_values(x, sx, zx, np.int8)
                st = (quantize_values(h0[d], sh, zh, np.int8), quantize_values(c0[d], sc, 0, np.int16))
                y, (h, c) = k.run(xq, st, reverse=rev[d],
                                  **({} if self.probe is None else {"probe": self.probe.probe(d)}))
                if self.trace is not None:
                    self.trace[d] = {"x": xq, "h0": st[0], "c0": st[1], "y": y, "h": h, "c": c}
                if not _compiled.lookup_f32(lib, y, deq, Y[:, d]):
                    np.take(deq, y.astype(np.intp) + 128, out=Y[:, d])
                hs.append(deq[h.astype(np.intp) + 128])
                cs.append(c.astype(np.float64) * sc)
            else:
                y, (h, c) = k.run(np.asarray(x, np.float32), (h0[d], c0[d]), reverse=rev[d])
                Y[:, d] = y
                hs.append(h)
                cs.append(c)
        return Y, (np.stack(hs).astype(dt), np.stack(cs).astype(dt))


    def qparams(self, d: int) -> dict:
        """Direction d's activation quantization (8x8_16 kernels): input and output scale / zero point, the
        power-of-two cell scale (for reports; the weights' scales are in ``kernels[d].t``)."""
        if not self.integer:
            return {}
        (sx, zx), (sh, zh), sc = self._q[d]
        return {"input_scale": float(sx), "input_zero_point": int(zx), "output_scale": float(sh),
                "output_zero_point": int(zh), "cell_scale": float(sc)}


def _lstm_prepare(spec: CellSpec, calibration, mode: str) -> LstmPrepared:
    check_lstm_expressible(spec)
    D = spec.num_directions
    kinds = {"litert-float": "float", "litert-hybrid": "hybrid", "litert-int8x16": "integer"}
    kept = _kept(spec, kinds[mode]) if isinstance(calibration, str) and calibration == "tflite" else None
    if isinstance(calibration, str) and kept is None:
        raise UnsupportedFeatureError(f"calibration: {calibration!r} means the quantization stored in an imported "
                                      f".tflite model, but this layer was not imported from a {kinds[mode]} model")
    if kept is None and mode == "litert-int8x16":
        if spec.diagonal:
            raise UnsupportedFeatureError("diagonal recurrence: the 8x8_16 kernel has none")
        if calibration is None:
            raise UnsupportedFeatureError("calibration: litert-int8x16 needs calibration input sequences "
                                          "(or 'tflite' for an imported 8x8_16 model)")
        if any(fused_activation(spec, d) != "TANH" for d in range(D)):
            raise UnsupportedFeatureError("activations: the 8x8_16 kernel always uses tanh")
        fds = [float_direction(spec, d) for d in range(D)]
        stats = [calibrate_direction(spec, d, calibration) for d in range(D)]
        # both directions share one output range, so their int8 outputs can be concatenated without requantizing
        lo, hi = min(s.h_min for s in stats), max(s.h_max for s in stats)
        for st in stats:
            st.h_min, st.h_max = lo, hi
    kernels = []
    for d in range(D):
        if kept is not None:
            t, opts = kept["tensors"][d], kept["options"]
        else:
            opts = lstm_options(spec, d, asymmetric=mode == "litert-hybrid")
            if mode == "litert-int8x16":
                t = integer_tensors(fds[d], stats[d])
            else:
                t = float_tensors(float_direction(spec, d), hybrid=mode == "litert-hybrid", diagonal=spec.diagonal)
        kernels.append(make_lstm_kernel(t, opts))
    prepared = LstmPrepared(spec, kernels)
    if kept is None and mode == "litert-int8x16":
        prepared.settings = settings_of(calibration)
        prepared.ranges = [st.ranges() for st in stats]
    return prepared


def _lstm_qparams(t):
    sx, zx = float(t[INPUT].scale[0]), int(t[INPUT].zero_point[0])
    sh, zh = float(t[OUTPUT_STATE].scale[0]), int(t[OUTPUT_STATE].zero_point[0])
    return (sx, zx), (sh, zh), float(t[CELL_STATE].scale[0])


# ---- RNN / GRU -------------------------------------------------------------------------------------------------
def _rnn_prepare(spec: CellSpec, mode: str) -> Prepared:
    if spec.clip is not None:
        raise UnsupportedFeatureError("clip: TFLite's RNN ops have no pre-activation clip")
    hybrid = mode == "litert-hybrid"
    tensors = []
    for d in range(spec.num_directions):
        W, R = np.asarray(spec.W[d], np.float32), np.asarray(spec.R[d], np.float32)
        if hybrid:  # int8 symmetric per-tensor weights (max|w| / 127), as the converter's dynamic-range mode
            (qw, sw), (qr, sr) = tflite_symmetric_quantize(W), tflite_symmetric_quantize(R)
            Wt, Rt = const("W", qw, float(sw)), const("R", qr, float(sr))
        else:
            Wt, Rt = const("W", W), const("R", R)
        tensors.append((Wt, Rt, const("b", spec.bias_sum(d).astype(np.float32)), fused_activation(spec, d)))
    return RnnPrepared(spec, tensors, hybrid)


def _gru_prepare(spec: CellSpec) -> Prepared:
    if spec.clip is not None or spec.linear_before_reset:
        raise UnsupportedFeatureError("linear_before_reset / clip: TFLite's custom GRU resets before the matmul and "
                                      "has no clip")
    if any(tuple(a.name for a in acts) != ("Sigmoid", "Tanh") for acts in spec.activations):
        raise UnsupportedFeatureError("activations: TFLite's custom GRU uses sigmoid and tanh")
    H = spec.hidden_size
    grus = []
    for d in range(spec.num_directions):
        W, R = np.asarray(spec.W[d], np.float64), np.asarray(spec.R[d], np.float64)
        b = spec.bias_sum(d)
        z, r, n = slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H)
        Wg = np.concatenate([np.concatenate([W[r], R[r]], 1), np.concatenate([W[z], R[z]], 1)]).astype(np.float32)
        bg = np.concatenate([b[r], b[z]]).astype(np.float32)
        Wc = np.concatenate([W[n], R[n]], 1).astype(np.float32)
        bc = const("bc", b[n].astype(np.float32))
        grus.append(SequenceGRU(const("Wg", Wg), const("bg", bg), const("Wc", Wc), bc))
    return SingleStatePrepared(spec, [_GruDirection(g) for g in grus])


class SingleStatePrepared(Prepared):
    """An RNN or GRU on LiteRT: ``kernels`` holds one kernel per direction, each with
    ``run(x [T, B, I] float32, (h0,), reverse) -> (y [T, B, H], (h,))``."""

    def __init__(self, spec: CellSpec, kernels: list):
        super().__init__(spec)
        self.kernels = kernels

    def run(self, x, states, lens):
        _check_lens(lens, x.shape[0])
        (h0,) = states
        Y, hs = [], []
        for d, k in enumerate(self.kernels):
            y, (h,) = k.run(np.asarray(x, np.float32), (h0[d],), reverse=self.spec.reverse[d])
            Y.append(y)
            hs.append(h)
        return np.stack(Y, axis=1).astype(x.dtype), (np.stack(hs).astype(x.dtype),)


class RnnPrepared(SingleStatePrepared):
    """An RNN on LiteRT's sequence RNN kernel: ``tensors`` holds each direction's TFLite tensors
    (W, R, bias, fused activation), ``kernels`` one :class:`RnnKernel` per direction."""

    def __init__(self, spec: CellSpec, tensors: list[tuple], hybrid: bool):
        super().__init__(spec, [RnnKernel(W, R, b, activation=act, asymmetric=hybrid) for W, R, b, act in tensors])
        self.tensors = tensors


class _GruDirection:
    """TFLite's custom GRU op (:class:`SequenceGRU`, which reads forwards) as a direction kernel."""

    def __init__(self, gru: SequenceGRU):
        self.gru = gru

    def run(self, x, states, reverse: bool):
        xs = x[::-1] if reverse else x
        y, h = self.gru(np.ascontiguousarray(xs), np.asarray(states[0], np.float32))
        return (y[::-1] if reverse else y), (h,)


def _prepare(mode: str):
    def prepare(spec: CellSpec, calibration) -> Prepared:
        if spec.cell == "lstm":
            return _lstm_prepare(spec, calibration, mode)
        if spec.cell == "rnn":
            return _rnn_prepare(spec, mode)
        return _gru_prepare(spec)

    return prepare


TARGETS = (
    Target("litert-float", "TFLite / LiteRT float kernels (UNIDIRECTIONAL_SEQUENCE_LSTM, sequence RNN, custom GRU)",
           family="litert", dtype=np.dtype(np.float32), features=FEATURES["litert-float"], bit_exact=False,
           prepare=_prepare("litert-float")),
    Target("litert-hybrid", "TFLite dynamic-range (hybrid) kernels: int8 per-tensor weights, per-row asymmetric "
           "input quantization, float state", family="litert", dtype=np.dtype(np.float32),
           features=FEATURES["litert-hybrid"], bit_exact=False, prepare=_prepare("litert-hybrid")),
    Target("litert-int8x16", "TFLite full-integer 8x8_16 LSTM (int8 activations and weights, int16 cell), "
           "converter-like calibration, bit-exact with the LiteRT interpreter", family="litert",
           dtype=np.dtype(np.float32), features=FEATURES["litert-int8x16"], bit_exact=True,
           prepare=_prepare("litert-int8x16"), needs_calibration=True),
)
