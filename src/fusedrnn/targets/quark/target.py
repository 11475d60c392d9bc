"""The ``quark`` and ``quark_corrected`` emulation targets: ``layer.to("quark", calibration=x)``.

``quark`` runs a bidirectional LSTM through the faithful ExtendedLSTM kernel (bit-exact with Quark's CPU
kernel, one sequence at a time since the kernel takes batch 1; zero initial states only, as the op has none).
``quark_corrected`` runs the corrected kernel: forward / reverse / bidirectional, any batch, initial states.
Both calibrate like :func:`fusedrnn.quark.convert` (uint16 min/max per tensor, Y symmetric with headroom).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedFeatureError
from ..batch_split import macs_per_row_step, split_rows
from ..registry import Target, register
from .convert import _sequences, calibrate
from .op import prepare

FEATURES = frozenset({"lstm", "bidirectional"})


def _prepare(layer, calibration, *, faithful: bool):
    name = "quark" if faithful else "quark_corrected"
    if layer.cell != "lstm":
        raise UnsupportedFeatureError(f"target: {name!r} runs LSTMs only (Quark has no quantized GRU / RNN op)")
    if faithful and layer.direction != "bidirectional":
        raise UnsupportedFeatureError(f"target: {name!r} runs bidirectional LSTMs only (Quark's kernel always runs "
                                      f"both directions), got direction={layer.direction!r}; use "
                                      f"'quark_corrected'")
    spec = layer.to_onnx()
    W, R, B = (np.asarray(spec[k], dtype=np.float32) for k in ("W", "R", "B"))
    H = layer.hidden_size
    seqs = _sequences(calibration, layer.input_size, layer.batch_first)
    attrs, _, _ = calibrate(W, R, B, seqs, direction=layer.direction, faithful=faithful)
    mode = "faithful" if faithful else "corrected"
    prepared = prepare(W, R, B, hidden_size=H, mode=mode, direction=layer.direction, **attrs)  # once per layer

    def run(x, states, lens):
        T, batch, _ = x.shape
        if lens is not None and np.any(np.asarray(lens) != T):
            raise UnsupportedFeatureError(f"sequence_lens: target {name!r} has no sequence lengths (ExtendedLSTM "
                                          f"has no sequence_lens input); run sequences of equal length")
        h0, c0 = states
        if faithful:
            if np.any(h0 != 0) or np.any(c0 != 0):
                raise UnsupportedFeatureError(f"state: target {name!r} starts from zero states (ExtendedLSTM has "
                                              f"no initial_h / initial_c); use 'quark_corrected'")
            if batch == 0:
                Y, h, c = np.zeros((T, 2, 0, H), np.float32), np.zeros((2, 0, H), np.float32), np.zeros((2, 0, H),
                                                                                                         np.float32)
            else:  # the kernel takes batch 1: every row runs as its own sequence (in one call, bit for bit the same)
                Y, h, c = prepared._run(x, None, None, True, rows=True)
        else:
            Y, h, c = prepared(x, initial_h=h0, initial_c=c0, return_state=True)
        dt = x.dtype
        return Y.astype(dt), (h.astype(dt), c.astype(dt))

    return split_rows(run, macs_per_row_step(layer))  # rows are independent sequences for both kernels


QUARK = register(Target(
    "quark", "AMD Quark ExtendedLSTM, bit-exact with Quark's CPU kernel (uint16, bidirectional, defects included)",
    family="quark", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True,
    prepare=lambda layer, calibration: _prepare(layer, calibration, faithful=True), needs_calibration=True))
QUARK_CORRECTED = register(Target(
    "quark_corrected", "AMD Quark ExtendedLSTM arithmetic with its defects fixed (any direction and batch)",
    family="quark", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=False,
    prepare=lambda layer, calibration: _prepare(layer, calibration, faithful=False), needs_calibration=True))
