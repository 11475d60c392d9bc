"""A toy quantized target for tests of the target plumbing (CLI, reports, exports): the fp64 engine on inputs
rounded to a grid of 1/``levels`` of the calibration data's largest |x|, so its effect is visible and depends on
the calibration."""

from __future__ import annotations

import numpy as np

import fusedrnn
from fusedrnn import targets


def toy_quantized(name: str, calls: list | None = None, *, cannot: str | None = None,
                  levels: int = 8) -> targets.Target:
    """The toy target; ``calls`` (if given) receives the number of calibration sequences of every prepare, and
    ``cannot`` makes prepare refuse every layer with that message."""

    def prepare(layer, calibration):
        if cannot:
            raise fusedrnn.UnsupportedFeatureError(cannot)
        step = max(float(np.max(np.abs(c))) for c in calibration) / levels
        if calls is not None:
            calls.append(sum(np.shape(c)[0 if layer.batch_first else 1] for c in calibration))
        ref = layer.to("fp64")
        ref.batch_first, ref.merge = False, "stack"

        def run(x, states, lens):
            y, st = ref(np.round(x / step) * step, states if layer.cell == "lstm" else states[0], lens)
            return y, (tuple(st) if layer.cell == "lstm" else (st,))

        return run

    return targets.Target(name, "toy quantized target", family="test", dtype=np.dtype(np.float64),
                          prepare=prepare, needs_calibration=True)
