"""The ``quark`` and ``quark_corrected`` emulation targets: ``layer.to("quark", calibration=x)``.

``quark`` runs a bidirectional LSTM through the faithful ExtendedLSTM kernel (bit-exact with Quark's CPU
kernel, one sequence at a time since the kernel takes batch 1; zero initial states only, as the op has none).
``quark_corrected`` runs the corrected kernel: forward / reverse / bidirectional, any batch, initial states.
Both calibrate like :func:`fusedrnn.quark.convert` (uint16 min/max per tensor, Y symmetric with headroom).
"""

from __future__ import annotations

import numpy as np

from ... import conventions
from ...cells.spec import CellSpec
from ...errors import UnsupportedFeatureError
from ..batch_split import RowSplitter, macs_per_row_step
from ..registry import Prepared, Target, register
from .convert import calibrate
from .op import prepare

FEATURES = frozenset({"lstm", "bidirectional"})


class QuarkPrepared(Prepared):
    """A bidirectional (faithful) or any-direction (corrected) LSTM on the ExtendedLSTM kernel: ``extended`` is the
    :class:`~fusedrnn.targets.quark.op.PreparedExtendedLSTM` (quantized, packed weights), ``attributes`` the
    node's calibrated scales and zero points."""

    def __init__(self, spec: CellSpec, calibration: list[np.ndarray], *, faithful: bool):
        super().__init__(spec)
        self.name = name = "quark" if faithful else "quark_corrected"
        self.faithful = faithful
        if spec.cell != "lstm":
            raise UnsupportedFeatureError(f"target: {name!r} runs LSTMs only (Quark has no quantized GRU / RNN op)")
        if faithful and spec.direction != "bidirectional":
            raise UnsupportedFeatureError(f"target: {name!r} runs bidirectional LSTMs only (Quark's kernel always "
                                          f"runs both directions), got direction={spec.direction!r}; use "
                                          f"'quark_corrected'")
        W, R, B = (np.asarray(a, np.float32) for a in conventions.onnx_inputs("lstm", spec.W, spec.R, spec.b_x,
                                                                               spec.b_h))
        seqs = [x[:, b : b + 1] for x in calibration for b in range(x.shape[1])]
        self.attributes, _, _ = calibrate(W, R, B, seqs, direction=spec.direction, faithful=faithful)
        mode = "faithful" if faithful else "corrected"
        self.extended = prepare(W, R, B, hidden_size=spec.hidden_size, mode=mode, direction=spec.direction,
                                **self.attributes)
        self.splitter = RowSplitter(macs_per_row_step(spec))  # rows are independent sequences for both kernels

    def run(self, x, states, lens):
        T, batch, _ = x.shape
        H, name = self.spec.hidden_size, self.name
        if lens is not None and np.any(np.asarray(lens) != T):
            raise UnsupportedFeatureError(f"sequence_lens: target {name!r} has no sequence lengths (ExtendedLSTM "
                                          f"has no sequence_lens input); run sequences of equal length")
        h0, c0 = states
        if self.faithful:
            if np.any(h0 != 0) or np.any(c0 != 0):
                raise UnsupportedFeatureError(f"state: target {name!r} starts from zero states (ExtendedLSTM has "
                                              f"no initial_h / initial_c); use 'quark_corrected'")
            if batch == 0:
                Y, h, c = np.zeros((T, 2, 0, H), np.float32), np.zeros((2, 0, H), np.float32), np.zeros((2, 0, H),
                                                                                                         np.float32)
            else:  # the kernel takes batch 1: every row runs as its own sequence (in one call, bit for bit the same)
                Y, h, c = self.extended._run(x, None, None, True, rows=True)
        else:
            Y, h, c = self.extended(x, initial_h=h0, initial_c=c0, return_state=True)
        dt = x.dtype
        return Y.astype(dt), (h.astype(dt), c.astype(dt))


QUARK = register(Target(
    "quark", "AMD Quark ExtendedLSTM, bit-exact with Quark's CPU kernel (uint16, bidirectional, defects included)",
    family="quark", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True,
    prepare=lambda spec, calibration: QuarkPrepared(spec, calibration, faithful=True), needs_calibration=True))
QUARK_CORRECTED = register(Target(
    "quark_corrected", "AMD Quark ExtendedLSTM arithmetic with its defects fixed (any direction and batch)",
    family="quark", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=False,
    prepare=lambda spec, calibration: QuarkPrepared(spec, calibration, faithful=False), needs_calibration=True))
