"""A toy quantized target for tests of the target plumbing (CLI, reports, exports): the fp64 engine on inputs
rounded to a grid of 1/``levels`` of the calibration data's largest |x|, so its effect is visible and depends on
the calibration."""

from __future__ import annotations

import numpy as np

import fusedrnn
from fusedrnn import targets
from fusedrnn.cells.spec import run_spec


class _Rounded(targets.Prepared):
    """The fp64 engine on inputs rounded to a grid of ``step``."""

    def __init__(self, spec, step):
        super().__init__(spec)
        self.step = step

    def run(self, x, states, lens):
        return run_spec(self.spec, np.round(x / self.step) * self.step, states, lens)


def toy_quantized(name: str, calls: list | None = None, *, cannot: str | None = None,
                  levels: int = 8) -> targets.Target:
    """The toy target; ``calls`` (if given) receives the number of calibration sequences of every prepare, and
    ``cannot`` makes prepare refuse every layer with that message."""

    def prepare(spec, calibration):
        if cannot:
            raise fusedrnn.UnsupportedFeatureError(cannot)
        step = max(float(np.max(np.abs(c))) for c in calibration) / levels
        if calls is not None:
            calls.append(sum(np.shape(c)[1] for c in calibration))  # calibration arrives time-major [T, B, I]
        return _Rounded(spec, step)

    return targets.Target(name, "toy quantized target", family="test", dtype=np.dtype(np.float64),
                          prepare=prepare, needs_calibration=True)
