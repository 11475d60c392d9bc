"""The integer-target hook: ``Target.prepare(spec, calibration)`` is called once by ``layer.to`` with the layer's
CellSpec and the normalised calibration, and the Prepared object it returns replaces the float engines for every
cell kind, with the layer's own input validation, state handling and direction merge."""

import numpy as np
import pytest

import fusedrnn
from fusedrnn.cells.spec import CellSpec, run_spec
from fusedrnn.targets import Prepared, Target, registry


class _Scaled(Prepared):
    """The fp64 engine on inputs scaled by 2 (so the target's effect is visible)."""

    def run(self, x, states, lens):
        return run_spec(self.spec, 2 * x, states, lens)


def _scaled_fp64_target(name, calls):
    """A toy target whose kernel is the fp64 engine on inputs scaled by 2."""

    def prepare(spec, calibration):
        assert isinstance(spec, CellSpec)
        calls.append(calibration)
        return _Scaled(spec)

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
    assert len(calls) == 1 and len(calls[0]) == 1 and emulated.target is t and layer.prepared is None
    np.testing.assert_array_equal(calls[0][0], x)  # normalised: a list of time-major float64 arrays
    assert isinstance(emulated.prepared, _Scaled)
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

    def prepare(spec, calibration):
        seen.append([np.asarray(c).copy() for c in calibration])
        return _Scaled(spec)

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


def test_batch_first_calibration_reaches_prepare_time_major():
    seen = []
    t = _scaled_fp64_target("test-batch-first", seen)
    rng = np.random.default_rng(2)
    layer = fusedrnn.GRU(rng.normal(size=(1, 6, 3)), rng.normal(size=(1, 6, 2)), batch_first=True)
    x = rng.normal(size=(4, 5, 3))  # [B, T, I]
    layer.to(t, calibration=x)
    np.testing.assert_array_equal(seen[0][0], x.transpose(1, 0, 2))


def test_calibration_is_checked_before_prepare():
    t = _scaled_fp64_target("test-bad-calibration", [])
    layer = fusedrnn.RNN(np.ones((1, 2, 3)), np.ones((1, 2, 2)))
    with pytest.raises(fusedrnn.ShapeError, match=r"calibration\[1\]: expected input sequences \[T, B, 3\]"):
        layer.to(t, calibration=[np.zeros((2, 1, 3)), np.zeros((2, 1, 4))])
    with pytest.raises(fusedrnn.ShapeError, match=r"calibration\[0\]: expected finite values"):
        layer.to(t, calibration=np.full((2, 1, 3), np.nan))


def test_a_plain_callable_from_prepare_still_runs_with_a_deprecation_warning():
    def prepare(spec, calibration):
        return lambda x, states, lens: run_spec(spec, 3 * x, states, lens)

    t = Target("test-legacy-hook", "test target", family="test", dtype=np.dtype(np.float64), prepare=prepare)
    rng = np.random.default_rng(4)
    layer = fusedrnn.RNN(rng.normal(size=(1, 2, 3)), rng.normal(size=(1, 2, 2)))
    with pytest.warns(DeprecationWarning, match="return a fusedrnn.targets.Prepared"):
        emulated = layer.to(t)
    x = rng.normal(size=(4, 2, 3))
    np.testing.assert_array_equal(emulated(x)[0], layer.to("fp64")(3 * x)[0])
