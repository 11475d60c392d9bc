"""fusedrnn.quark faithful mode against Quark's own kernel, compiled from the amd-quark wheel's C++ source.

Skips (with the reason) when there is no g++ or the wheel cannot be downloaded; set FUSEDRNN_QUARK_WHEEL to a
local wheel to run offline.
"""

import math

import numpy as np
import pytest

from fusedrnn.targets.quark import fixed, reference, tanhf
from fusedrnn.targets.quark.op import extended_lstm, extended_lstm_quantized, make_scales
from fusedrnn.targets.quark.params import kernel_params

N_CONFIGS = 240
CATEGORIES = ("plain", "pow2", "near_pow2", "y_pow2", "wrap", "y_zp_low", "symmetric", "overflow", "big")


@pytest.fixture
def kernel(quark_kernel):
    return quark_kernel


def _qparams(lo: float, hi: float) -> tuple[float, int]:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    s = (hi - lo) / 65535.0
    return s, int(np.clip(round(-lo / s), 0, 65535))


def _config(rng: np.random.Generator, category: str) -> dict:
    """A random ExtendedLSTM case (batch 1, both directions) from one category of the option space."""
    big = category == "big"
    T = int(rng.integers(1, 25 if big else 10))
    I = int(rng.choice([1, 2, 3, 7, 8, 16, 33, 64]) if big else rng.integers(1, 20))
    H = int(rng.choice([1, 5, 16, 31, 64]) if big else rng.integers(1, 20))
    amp = 8.0 if category == "overflow" else 1.0
    X = (rng.normal(size=(T, 1, I)) * rng.uniform(0.2, 2.0) * amp).astype(np.float32)
    W = (rng.normal(size=(2, 4 * H, I)) * rng.uniform(0.1, 1.0) * amp).astype(np.float32)
    R = (rng.normal(size=(2, 4 * H, H)) * rng.uniform(0.1, 1.0)).astype(np.float32)
    B = (rng.normal(size=(2, 8 * H)) * rng.uniform(0.0, 0.5)).astype(np.float32)
    sc = {}
    for n, a in zip("xwrb", (X, W, R, B), strict=True):
        m = rng.uniform(1.0, 1.5)
        sc[f"{n}_scale"], sc[f"{n}_zero_point"] = _qparams(float(a.min()) * m, float(a.max()) * m)
    ylo, yhi = -rng.uniform(0.5, 1.1), rng.uniform(0.5, 1.1)
    if category == "wrap":  # Y's range tighter than h: values outside wrap around (defect 2)
        ylo, yhi = -rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3)
    sc["y_scale"], sc["y_zero_point"] = _qparams(ylo, yhi)
    if category == "y_zp_low":
        sc["y_zero_point"] = int(rng.integers(30000, 32768))
    if category in ("pow2", "near_pow2"):  # x_scale * w_scale * 2^24 (or y_scale * r_scale * 2^24) a power of 2
        for a, b in (("x", "w"), ("y", "r")):
            if rng.random() < 0.7:
                sc[f"{a}_scale"] = 2.0 ** int(rng.integers(-16, -9))
                sc[f"{b}_scale"] = 2.0 ** int(rng.integers(-17, -12))
                if category == "near_pow2":  # the float32 product rounds the mantissa up to 2^15
                    sc[f"{b}_scale"] = float(np.nextafter(np.float32(sc[f"{b}_scale"]), np.float32(0)))
    if category == "overflow":  # |pre-activations| >= 128: the kernel's int32 gate sum wraps; symmetric W keeps
        sc["w_scale"], sc["w_zero_point"] = float(np.abs(W).max()) / 32767.0, 32768  # the scales defined
    if category == "y_pow2":
        sc["y_scale"] = 2.0 ** int(rng.integers(-16, -13))
    if category == "symmetric":  # zero point 32768 -> zp' = 0 -> log2(0) (defect 4)
        for n in rng.choice(list("xwrby"), size=int(rng.integers(1, 4)), replace=False):
            sc[f"{n}_zero_point"] = 32768
    return {"X": X, "W": W, "R": R, "B": B, "scales": sc, "H": H}


def _configs():
    rng = np.random.default_rng(20261121)
    return [(c, _config(rng, c)) for c in (CATEGORIES[i % len(CATEGORIES)] for i in range(N_CONFIGS))]


def test_faithful_matches_quark_kernel_bit_for_bit(kernel):
    triggered = {c: 0 for c in CATEGORIES}
    for i, (category, cfg) in enumerate(_configs()):
        sc, H = cfg["scales"], cfg["H"]
        y_ref, yq_ref = reference.run(kernel, cfg["X"], cfg["W"], cfg["R"], cfg["B"], sc, H)
        y = extended_lstm(cfg["X"], cfg["W"], cfg["R"], cfg["B"], hidden_size=H, **sc)
        assert y.dtype == np.float32 and y.shape == y_ref.shape
        np.testing.assert_array_equal(y.view(np.uint32), y_ref.view(np.uint32), err_msg=f"config {i} ({category})")
        corrected = extended_lstm(cfg["X"], cfg["W"], cfg["R"], cfg["B"], hidden_size=H, mode="corrected", **sc)
        triggered[category] += int(not np.array_equal(corrected, y))
    # every defect category actually changes the output somewhere (the inputs do trigger the defects)
    for c in ("pow2", "near_pow2", "wrap", "y_zp_low"):
        assert triggered[c] > 0, (c, triggered)


def test_uint16_codes_match(kernel):
    for category, cfg in _configs()[:40]:
        sc, H = cfg["scales"], cfg["H"]
        _, yq_ref = reference.run(kernel, cfg["X"], cfg["W"], cfg["R"], cfg["B"], sc, H)
        s = make_scales(**sc)
        from fusedrnn.numerics.affine import quark_quantize_uint16 as q
        yq = extended_lstm_quantized(q(cfg["X"], s.x_scale, s.x_zero_point), q(cfg["W"], s.w_scale, s.w_zero_point),
                                     q(cfg["R"], s.r_scale, s.r_zero_point), q(cfg["B"], s.b_scale, s.b_zero_point),
                                     s, hidden_size=H)
        np.testing.assert_array_equal(yq, yq_ref, err_msg=category)


def test_kernel_constants_match_get_params(kernel):
    """Every constant of step 2 (mantissas, shifts, qc, ohs, ohz), including the defect cases."""
    seen_wrapped_mantissa = seen_zero_log = False
    for category, cfg in _configs():
        sc, H = cfg["scales"], cfg["H"]
        I = cfg["X"].shape[2]
        s = make_scales(**sc)
        from fusedrnn.numerics.affine import quark_quantize_uint16 as q
        w = q(cfg["W"], s.w_scale, s.w_zero_point).astype(np.int64) - 32768
        r = q(cfg["R"], s.r_scale, s.r_zero_point).astype(np.int64) - 32768
        b = q(cfg["B"], s.b_scale, s.b_zero_point).astype(np.int64) - 32768
        ref = reference.params(kernel, w, r, b, I, H, sc)
        p = kernel_params(s, w.sum(axis=2), r.sum(axis=2), b[:, :4 * H], b[:, 4 * H:], I, H, faithful=True)
        for name in ("qx", "qh", "qa", "qb", "ohs", "ohz", "xw", "xwq", "hr", "hrq", "xss", "hss", "oh"):
            assert getattr(p, name) == ref[name], (category, name, getattr(p, name), ref[name])
        np.testing.assert_array_equal(p.qc, ref["qc"])
        seen_wrapped_mantissa |= -32768 in (p.qx, p.qh)
        seen_zero_log |= 0 in (p.qa, p.qb)
    assert seen_wrapped_mantissa and seen_zero_log


def test_scalar_helpers_match_kernel(kernel):
    rng = np.random.default_rng(7)
    doubles = np.concatenate([rng.uniform(-3, 3, 400), -rng.uniform(0, 1, 100), rng.normal(0, 2.0**20, 200),
                              np.arange(-4, 4, 0.25), [2.0**31, -(2.0**31) - 0.6, 2.0**31 - 0.5, 1e12, -1e12]])
    np.testing.assert_array_equal(fixed.round_int_c(doubles), [kernel.k_round_int(float(d)) for d in doubles])
    small = doubles[np.abs(doubles) <= 2.0**24]
    np.testing.assert_array_equal(fixed.round_int_c_small(small), [kernel.k_round_int(float(d)) for d in small])
    shorts = np.concatenate([rng.uniform(-70000, 70000, 300), [32767.5, 32768, 65535.4, 65535.5, -65536.6, -0.7]])
    assert [fixed.round_short_c(float(d)) for d in shorts] == [kernel.k_round_short(float(d)) for d in shorts]
    for shift in range(0, 33):
        xs = np.concatenate([rng.integers(-(2**45), 2**45, 60), rng.integers(-(2**20), 2**20, 60),
                             [0, 1, -1, 2**(shift - 1) if shift else 3, -(2**(max(shift, 1) - 1))]]).astype(np.int64)
        ref = [kernel.k_srs_int(int(x), shift) for x in xs]
        np.testing.assert_array_equal(fixed.srs(xs, shift), ref)
        np.testing.assert_array_equal(fixed.srs_fn(shift)(xs), ref)
        np.testing.assert_array_equal(fixed.srs_hidden(xs, shift), [kernel.k_srs_short(int(x), shift) for x in xs])
    import ctypes
    vals = [2.0**k for k in range(-15, 15)] + [-(2.0**k) for k in range(-15, 15)] + [0.0]
    vals += list(rng.uniform(2.0**-15, 2.0**14, 200)) + [float(np.float32(2.0**-20) * np.float32(1 - 2**-24)) * 2**24]
    for v in vals:
        m = ctypes.c_short()
        a = kernel.k_fix(v, ctypes.byref(m))
        assert fixed.fix_faithful(v) == (a & 0xFF if v == 0 else a, m.value), v


def test_tanhf_matches_c_library():
    if not tanhf.libm_available():
        pytest.skip("no C math library loadable through ctypes")
    rng = np.random.default_rng(3)
    words = rng.integers(0, 0x43000000, size=60000, dtype=np.uint32)  # |x| < 128, every binade
    x = np.concatenate([words.view(np.float32), -words[:20000].view(np.float32),
                        np.float32([0.0, -0.0, 22.0, -22.0, np.inf, -np.inf, np.nan, 1.0, 0.5 * math.log(2)])])
    ref = tanhf.tanhf_libm(x)
    np.testing.assert_array_equal(tanhf.tanhf(x).view(np.uint32), ref.view(np.uint32))
    if tanhf.backend() == "fdlibm":
        assert not np.array_equal(np.tanh(x.astype(np.float64)).astype(np.float32)[:60000], ref[:60000])


@pytest.mark.skipif(not __import__("os").environ.get("FUSEDRNN_QUARK_EXHAUSTIVE"),
                    reason="set FUSEDRNN_QUARK_EXHAUSTIVE=1 to compare tanhf with the C library on all 2^32 floats "
                           "(a few minutes)")
def test_tanhf_exhaustive_against_c_library(tmp_path):
    """Every float32 (NaNs included): fusedrnn's tanhf against the C library's, called from C over arrays."""
    import ctypes
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "arr.c"
    src.write_text("#include <math.h>\n#include <stddef.h>\n"
                   "void tanhf_arr(const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i++) "
                   "y[i] = tanhf(x[i]); }\n")
    lib = tmp_path / "libarr.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib), "-lm"], check=True)
    dll = ctypes.CDLL(str(lib))
    step = 1 << 24
    for start in range(0, 1 << 31, step):
        w = np.arange(start, start + step, dtype=np.uint32)
        for sign in (0, 0x80000000):
            x = (w | np.uint32(sign)).view(np.float32)
            ref = np.empty_like(x)
            dll.tanhf_arr(x.ctypes.data_as(ctypes.c_void_p), ref.ctypes.data_as(ctypes.c_void_p),
                          ctypes.c_size_t(x.size))
            np.testing.assert_array_equal(tanhf.tanhf(x).view(np.uint32), ref.view(np.uint32),
                                          err_msg=f"from {hex(start | sign)}")
