"""The compiled ExtendedLSTM loop (targets/quark/_kernel.c) against the NumPy loop it replaces: bit-exact (``==``
on y codes, final h and the float32 cell's bits) on random configurations of every oracle category (each defect),
both modes, batch > 1 (rows are independent sequences), one direction, initial states, and extreme uint16 codes
(all -32768 products, sizes past the kernel's int32 chunk of 256 products). The NumPy loop is itself checked
against Quark's compiled kernel (test_quark_oracle.py, which runs through the default engine, i.e. this one)."""

import numpy as np
import pytest
from test_quark_oracle import CATEGORIES, _config

from fusedrnn.numerics.affine import quark_quantize_uint16 as quant
from fusedrnn.targets.quark import _compiled, tanhf
from fusedrnn.targets.quark.op import extended_lstm_quantized, make_scales

pytestmark = pytest.mark.skipif(_compiled.load() is None, reason="compiled Quark kernel unavailable")


def _both(codes, s, H, **kw):
    out = []
    for engine in ("numpy", "compiled"):
        with _compiled.use_engine(engine):
            yq, hq, c = extended_lstm_quantized(*codes, s, hidden_size=H, return_state=True, **kw)
        out.append((yq, hq, c.view(np.uint32)))
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)
    return out[0][0]


def _batched(rng, cfg, batch):
    """The config's weights and scales with ``batch`` random sequences (x codes drawn around the config's X)."""
    s = make_scales(**cfg["scales"])
    X = cfg["X"]
    xs = np.concatenate([X] + [X[:, :1] * rng.uniform(0.5, 1.5) + rng.normal(size=X.shape).astype(np.float32) * 0.3
                               for _ in range(batch - 1)], axis=1).astype(np.float32)
    return s, [quant(xs, s.x_scale, s.x_zero_point), quant(cfg["W"], s.w_scale, s.w_zero_point),
               quant(cfg["R"], s.r_scale, s.r_zero_point), quant(cfg["B"], s.b_scale, s.b_zero_point)]


@pytest.mark.parametrize("category", CATEGORIES)
def test_compiled_equals_numpy_on_oracle_categories(category):
    rng = np.random.default_rng(CATEGORIES.index(category) + 500)
    for _ in range(4):
        cfg = _config(rng, category)
        H = cfg["H"]
        s, codes = _batched(rng, cfg, int(rng.integers(1, 6)))
        y = _both(codes, s, H)  # faithful: every row an independent batch-1 sequence
        assert y.shape[2] == codes[0].shape[1]
        try:
            _both(codes, s, H, mode="corrected")
        except Exception as e:  # noqa: BLE001 - corrected mode may refuse extreme scales; both engines alike
            assert "UnsupportedFeature" in type(e).__name__


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_compiled_equals_numpy_corrected_directions_and_states(direction):
    rng = np.random.default_rng({"forward": 1, "reverse": 2, "bidirectional": 3}[direction])
    D = 2 if direction == "bidirectional" else 1
    for _ in range(4):
        cfg = _config(rng, "plain")
        H, B = cfg["H"], int(rng.integers(1, 6))
        s, codes = _batched(rng, cfg, B)
        codes[1], codes[2], codes[3] = codes[1][:D], codes[2][:D], codes[3][:D]
        h0 = rng.integers(-32768, 32768, size=(D, B, H))
        c0 = rng.normal(size=(D, B, H)).astype(np.float32)
        _both(codes, s, H, mode="corrected", direction=direction, initial_h=h0, initial_c=c0)
        _both(codes, s, H, mode="corrected", direction=direction)


@pytest.mark.parametrize("mode", ["faithful", "corrected"])
def test_compiled_equals_numpy_extreme_codes(mode):
    """Codes drawn from {0, 65535, anything}: products (-32768)^2 in every int32 pair, sums of 300+ terms."""
    rng = np.random.default_rng(7 + (mode == "corrected"))
    for I, H in ((300, 3), (5, 261), (1, 1)):  # noqa: E741
        T, B = 3, 3

        def codes(shape):
            return rng.choice(np.array([0, 0, 65535, 32768, 1], np.uint16), size=shape)

        sc = dict(x_scale=2.0**-9, x_zero_point=32768, w_scale=3e-5, w_zero_point=40000, r_scale=2e-5,
                  r_zero_point=20000, b_scale=1e-4, b_zero_point=32768, y_scale=2.0 / 65535, y_zero_point=32768)
        s = make_scales(**sc)
        cs = [codes((T, B, I)), codes((2, 4 * H, I)), codes((2, 4 * H, H)),
              rng.integers(0, 65536, size=(2, 8 * H)).astype(np.uint16)]
        _both(cs, s, H, mode=mode)


def test_compiled_tanhf_equals_numpy():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = np.arange(0x38000000, 0x41200000, 61, dtype=np.uint32).view(np.float32)  # 3e-5 .. 10, every k case
    x = np.concatenate([x[np.isfinite(x)], dense, -dense, np.float32([0.0, -0.0, 9.5, -9.5, 22.0, 1.0, -1.0]),
                        np.uint32([0x3E317218, 0xBE317218, 0x3F800000, 0x3F7FFFFF]).view(np.float32)])
    ref = tanhf.tanhf_fdlibm(x, finite=True).view(np.uint32)
    np.testing.assert_array_equal(_compiled.tanhf_array(x).view(np.uint32), ref)  # vectorised loop
    np.testing.assert_array_equal(_compiled.tanhf_scalar(x).view(np.uint32), ref)  # scalar function


@pytest.mark.parametrize("mode", ["faithful", "corrected"])
def test_compiled_direction_split_equals_numpy(mode, monkeypatch):
    """A batch-1 bidirectional call runs its two directions on two threads (each claimed by whichever thread is
    free): the same bits as the NumPy loop, with and without initial states, and the split really ran."""
    from fusedrnn.cells.compiled import driver

    monkeypatch.setattr(_compiled, "SPLIT_MIN_MACS", 0)
    threads = driver.threads()
    driver.set_threads(2)
    claimed = []
    real = _compiled._run_claimed
    monkeypatch.setattr(_compiled, "_run_claimed", lambda lib, calls: (claimed.append(len(calls)), real(lib, calls)))
    try:
        rng = np.random.default_rng(11 + (mode == "corrected"))
        for _ in range(3):
            cfg = _config(rng, "plain")
            H = cfg["H"]
            s, codes = _batched(rng, cfg, 1)
            _both(codes, s, H, mode=mode)
            if mode == "corrected":
                h0 = rng.integers(-32768, 32768, size=(2, 1, H))
                c0 = rng.normal(size=(2, 1, H)).astype(np.float32)
                _both(codes, s, H, mode=mode, direction="bidirectional", initial_h=h0, initial_c=c0)
    finally:
        driver.set_threads(threads)
    assert claimed and set(claimed) == {2}
