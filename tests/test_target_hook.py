"""The integer-target hook: ``Target.prepare`` is called once by ``layer.to`` and its runner replaces the float
engines for every cell kind, with the layer's own input validation, state handling and direction merge."""

import numpy as np
import pytest

import fusedrnn
from fusedrnn.targets import Target, registry


def _scaled_fp64_target(name, calls):
    """A toy target whose kernel is the fp64 engine on inputs scaled by 2 (so its effect is visible)."""

    def prepare(layer, calibration):
        calls.append(calibration)
        ref = layer.to("fp64")

        def run(x, states, lens):
            y, st = ref(2 * x, states if layer.cell == "lstm" else states[0], lens)
            Y = y.reshape(x.shape[0], x.shape[1], layer.num_directions, -1).transpose(0, 2, 1, 3)
            return Y, tuple(st) if layer.cell == "lstm" else (st,)

        return run

    return Target(name, "test target", family="test", dtype=np.dtype(np.float64), prepare=prepare,
                  needs_calibration=True)


@pytest.mark.parametrize("cls", [fusedrnn.LSTM, fusedrnn.GRU, fusedrnn.RNN])
def test_prepare_runs_instead_of_float_engine(cls):
    calls = []
    t = _scaled_fp64_target(f"test-scaled-{cls.cell}", calls)
    rng = np.random.default_rng(0)
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cls.cell]
    H, I, T, B = 3, 2, 4, 2
    layer = cls(rng.normal(size=(2, G * H, I)), rng.normal(size=(2, G * H, H)), direction="bidirectional",
                merge="concat")
    x = rng.normal(size=(T, B, I))
    with pytest.raises(fusedrnn.UnsupportedFeatureError, match="calibration"):
        layer.to(t)
    emulated = layer.to(t, calibration=x)
    assert calls == [x] and emulated.target is t and layer._emulation is None
    y, _ = emulated(x)
    y_ref, _ = layer.to("fp64")(2 * x)
    np.testing.assert_array_equal(y, y_ref)
    assert y.shape == (T, B, 2 * H)


def test_summary_reports_calibration_need():
    t = _scaled_fp64_target("test-summary", [])
    s = t.summary()
    assert s["needs_calibration"] is True and s["bit_exact"] is False
    assert registry.get("fp32").summary()["needs_calibration"] is False


def test_stack_calibrates_each_layer_on_its_own_float_input():
    seen = []

    def prepare(layer, calibration):
        seen.append([np.asarray(c).copy() for c in calibration])
        ref = layer.to("fp64")

        def run(x, states, lens):
            y, st = ref(x, states[0], lens)
            return y.reshape(x.shape[0], x.shape[1], layer.num_directions, -1).transpose(0, 2, 1, 3), (st,)

        return run

    t = Target("test-stack-cal", "test target", family="test", dtype=np.dtype(np.float64), prepare=prepare,
               needs_calibration=True)
    rng = np.random.default_rng(1)
    first = fusedrnn.GRU(rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 3)), direction="bidirectional")
    second = fusedrnn.GRU(rng.normal(size=(1, 6, 6)), rng.normal(size=(1, 6, 2)))
    stack = fusedrnn.Stack([first, second])
    xs = [rng.normal(size=(5, 2, 4)), rng.normal(size=(7, 1, 4))]
    stack.to(t, calibration=xs)
    assert len(seen) == 2
    for got, x in zip(seen[0], xs, strict=True):
        np.testing.assert_array_equal(got, x)
    for got, x in zip(seen[1], xs, strict=True):  # the first layer's float output on each calibration input
        np.testing.assert_array_equal(got, first(x)[0])
