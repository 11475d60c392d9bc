"""The compiled MLI loops (targets/mli/_kernel.c) against the NumPy loops they replace: bit-exact (``==``) on
randomised layers over every MLI target, cell, direction, sequence_lens, ROUND_MODE and FULL_ACCU. The NumPy
loops are themselves checked against the upstream conformance vectors (test_mli_conformance.py, which runs the
LSTM / GRU cases through both engines)."""

import dataclasses

import numpy as np
import pytest

import fusedrnn
import fusedrnn.mli as mli
from fusedrnn.targets.mli import _compiled

pytestmark = pytest.mark.skipif(_compiled.load() is None, reason="compiled MLI kernel unavailable")

MLI2 = ("mli2-sa8", "mli2-fx16", "mli2-fx16_fx8_fx8")
MLI1 = ("mli1-fx16", "mli1-fx8", "mli1-fx8w16d")


def _random_layer(rng, cell):
    H, I = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D, G, sc = 2 if direction == "bidirectional" else 1, 4 if cell == "lstm" else 3, rng.uniform(0.2, 1.5)
    arrays = [rng.uniform(-sc, sc, s).astype(np.float32) for s in ((D, G * H, I), (D, G * H, H), (D, G * H),
                                                                     (D, G * H))]
    return (fusedrnn.LSTM if cell == "lstm" else fusedrnn.GRU)(*arrays, direction=direction), I


def _both_engines(layer, target, x, lens, h0):
    out = []
    for engine in ("numpy", "compiled"):
        with _compiled.use_engine(engine):
            em = layer.to(target, calibration=x)  # prepare inside: MLI 1.x binds its loop at prepare time
            kw = {} if lens is None else {"sequence_lens": lens}
            if h0 is not None:
                kw["initial_states"] = h0
            y, states = em(x, **kw)
        out.append([y, *states])
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_mli2_compiled_equals_numpy(seed, cell):
    rng = np.random.default_rng(1000 * seed + (cell == "gru"))
    layer, I = _random_layer(rng, cell)
    T, B = int(rng.integers(1, 10)), int(rng.integers(1, 8))
    x = (rng.uniform(-2, 2, (T, B, I)) * rng.uniform(0.1, 3)).astype(np.float32)
    lens = rng.integers(0, T + 1, B) if rng.random() < 0.5 else None
    for target in MLI2:
        rm, fa = str(rng.choice(["UP", "CONVERGENT"])), bool(rng.random() < 0.5)
        with mli.build(rm, fa):
            a, b = _both_engines(layer, target, x, lens, None)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v, err_msg=f"{target} {rm} FULL_ACCU={fa}")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_mli2_compiled_tiles_equal_numpy(cell):
    """Layers wide enough for several column tiles of the kernel's int32 GEMM (odd K, padded columns), batches
    that mix 4-row tiles with remainder rows, both rounding modes."""
    rng = np.random.default_rng(31 + (cell == "gru"))
    H, I, B, T = int(rng.integers(33, 60)) | 1, int(rng.integers(5, 20)), int(rng.integers(5, 10)), 4
    G = 4 if cell == "lstm" else 3
    arrays = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((1, G * H, I), (1, G * H, H), (1, G * H),
                                                                   (1, G * H))]
    layer = (fusedrnn.LSTM if cell == "lstm" else fusedrnn.GRU)(*arrays)
    x = rng.uniform(-2, 2, (T, B, I)).astype(np.float32)
    for target in ("mli2-sa8", "mli2-fx16_fx8_fx8"):
        for rm in ("UP", "CONVERGENT"):
            with mli.build(rm, False):
                a, b = _both_engines(layer, target, x, None, None)
            for u, v in zip(a, b, strict=True):
                np.testing.assert_array_equal(u, v, err_msg=f"{target} {rm}")


@pytest.mark.parametrize("seed", range(5))
def test_mli1_compiled_equals_numpy(seed):
    rng = np.random.default_rng(7000 + seed)
    layer, I = _random_layer(rng, "lstm")
    T, B = int(rng.integers(1, 10)), int(rng.integers(1, 8))
    x = (rng.uniform(-2, 2, (T, B, I)) * rng.uniform(0.1, 3)).astype(np.float32)
    lens = rng.integers(0, T + 1, B) if rng.random() < 0.5 else None
    for target in MLI1:
        a, b = _both_engines(layer, target, x, lens, None)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v, err_msg=target)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_real_out_equals_dequantized_codes(cell):
    """The loops' direct float32 Y (RealOut: the target's run writes Y's real values without the integer Y) equals
    float32((code - zero_point) * scale) of the integer Y of the same call, computed in float64 by NumPy, for
    scales that are not float32 values (a float32 product or a float32 scale would differ), both directions,
    the two-range case (h0 quantized unlike Y) and a time stride wider than the rows."""
    from fusedrnn.targets.mli.cells import RealOut, gru_sequence, lstm_sequence
    from fusedrnn.targets.mli.config import current_build

    rng = np.random.default_rng(77 + (cell == "gru"))
    bld = current_build()
    for target in MLI2:
        for reverse in (False, True):
            layer, I = _random_layer(rng, cell)
            T, B = int(rng.integers(1, 9)), int(rng.integers(1, 6))
            x = rng.uniform(-2, 2, (T, B, I)).astype(np.float32)
            prepared = layer.to(target, calibration=x).prepared
            q = prepared.directions[0]
            M = q.Wo.shape[-1]
            xq = q.quantize(x, q.q.inp)
            quant = q.q
            if reverse:  # h0 in its own quantization: the loop's first step runs apart from the others
                s_, z_, f_ = (quant.out if quant.flavor == "sa8" else (1, 0, quant.out))
                quant = dataclasses.replace(quant, h0=(s_, z_ + 3, f_) if quant.flavor == "sa8" else f_ - 1)
            h0 = q.quantize(rng.uniform(-1, 1, (B, M)), quant.h0)
            kw = dict(luts=prepared.luts, full_accu=bld.full_accu, mode=bld.mode, cache=q.cache, reverse=reverse)
            wide = np.full((T, 3, B, M), np.nan, np.float32)
            zp, scale = int(rng.integers(-128, 128)), float(rng.uniform(1e-4, 1.0))
            out = RealOut(wide[:, 1], zp, scale)
            if cell == "lstm":
                c0 = q.quantize(rng.uniform(-1, 1, (B, M)), q.q.cell)
                args = (xq, h0, c0, q.Wi, q.Wo, q.b, quant)
                Yq = lstm_sequence(*args, act="tanh", **kw)[0]
                direct = lstm_sequence(*args, act="tanh", out=out, **kw)
            else:
                args = (xq, h0, q.Wi, q.Wo, q.b, quant)
                Yq = gru_sequence(*args, **kw)[0]
                direct = gru_sequence(*args, out=out, **kw)
            assert direct[0] is None  # the loop wrote Y's real values instead
            want = ((Yq[::-1] if reverse else Yq) - np.float64(zp)) * scale
            np.testing.assert_array_equal(wide[:, 1], want.astype(np.float32), err_msg=f"{target} {reverse}")
            assert np.isnan(wide[:, [0, 2]]).all()


def test_engine_argument_is_validated():
    with pytest.raises(ValueError, match="engine"):
        with _compiled.use_engine("fast"):
            pass


def _eltwise_c(lib, op, p1, p2, po, mode, fast_params):
    """The kernel's ew_pass on every int8 operand pair (sa8: direct evaluation when fast_params, else the table)."""
    from fusedrnn.targets.mli import eltwise as E

    a = np.repeat(np.arange(-128, 128, dtype=np.int64), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int64), 256)
    out = np.zeros_like(a)
    keep = _compiled._Keep()
    x = _compiled.EwArgs()
    x.op = _compiled.binop_struct(keep, ("tab", E._sa8_table(op, p1, p2, po, mode)))
    x.e = _compiled.ew_struct(fast_params)
    x.n, x.mode, x.sa8 = a.size, 0 if mode == "up" else 1, 1
    x.a, x.b, x.out = a.ctypes.data, b.ctypes.data, out.ctypes.data
    lib.mli2_eltwise(x)
    return a, b, out


def test_sa8_eltwise_direct_equals_numpy():
    """The kernel's direct sa8 MUL / ADD / SUB (no table) equals eltwise.sa8_mul / sa8_addsub on all 65536 int8
    operand pairs, for random quantization parameters over the whole range (slow-path cases use the table)."""
    from fusedrnn.targets.mli import eltwise as E

    lib = _compiled.load()
    rng = np.random.default_rng(11)
    fast_seen = {"mul": 0, "add": 0, "sub": 0}
    for i in range(60):
        op = ("mul", "add", "sub")[i % 3]
        mode = ("up", "convergent")[(i // 3) % 2]

        def p():
            zr = 128 if rng.random() < 0.6 else 32768
            return (int(rng.integers(1, 32768)), int(rng.integers(-zr, zr)), int(rng.integers(-2, 24)))

        p1, p2, po = p(), p(), p()
        fp = E.sa8_fast_params(op, p1, p2, po, mode)
        fast_seen[op] += fp is not None
        a, b, got = _eltwise_c(lib, op, p1, p2, po, mode, fp)
        ref = E.sa8_mul(a, p1, b, p2, po, mode) if op == "mul" else E.sa8_addsub(a, p1, b, p2, po, mode, op == "sub")
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} {mode} {p1} {p2} {po} fast={fp}")
    assert min(fast_seen.values()) >= 3, fast_seen


def test_quantize_compiled_equals_numerics():
    """The kernel's per-tensor quantizer equals numerics.affine.mli_quantize (float32 steps, x86 casts) on values
    spanning rounding ties, out-of-range casts, infinities, NaN and subnormals, for random sa8 / fx parameters."""
    from fusedrnn.numerics.affine import mli_quantize

    lib = _compiled.load()
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38,
                        2.0**31, -(2.0**31), 2.0**31 - 128, 127.5, -128.5], np.float32)
    for i in range(40):
        bits = (8, 16)[i % 2]
        scale, zp = int(rng.integers(1, 32768)), int(rng.integers(-32768, 32768))
        fb = int(rng.integers(-20, 40)) if i % 4 else int(rng.integers(-128, 128))
        if i % 3 == 0:
            scale, zp = 1, 0
        x = np.concatenate([special, (rng.standard_normal(500) * 10.0 ** rng.uniform(-6, 6, 500)).astype(np.float32),
                            (rng.integers(-300, 300, 200) / 2.0 ** rng.integers(0, 6, 200)).astype(np.float32)])
        x = x[: len(x) // 4 * 4].reshape(4, -1)[:, ::2] if i % 5 == 0 else x  # 2-D, not contiguous
        got = _compiled.quantize(lib, x, bits=bits, frac_bits=fb, scale=scale, zero_point=zp)
        ref = mli_quantize(x, bits=bits, frac_bits=fb, scale=scale, zero_point=zp)
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref.astype(np.int64), err_msg=f"{bits} {scale} {zp} {fb}")
