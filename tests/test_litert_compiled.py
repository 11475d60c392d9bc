"""The compiled 8x8_16 LSTM loop (targets/litert/_kernel.c) against the NumPy loop of IntegerLstmKernel, which is
itself checked bit for bit against the LiteRT interpreter (test_litert_random.py): random kernels over the whole
option space (CIFG, peepholes, projection with and without bias, layer norm, cell scales 2^-15..2^-9, cell and
projection clipping, time-major and batch-major peephole layouts, both MultiplyByQuantizedMultiplier roundings,
large weight gains that saturate the gates), batch 1 and > 1, forward and reverse, random initial states.
Outputs and both final states must be equal (==); with calibration ranges near 1e30 too, in a build under UBSan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusedrnn
from fusedrnn import _native
from fusedrnn.targets.litert import _compiled
from fusedrnn.targets.litert.lstm_integer import IntegerLstmKernel
from fusedrnn.targets.litert.slots import LstmOptions, LstmTensors, const

needs_cc = pytest.mark.skipif(_compiled.load() is None, reason="no compiled LiteRT kernel (no C compiler?)")
def _q(rng, shape, dtype=np.int8, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = -info.max if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def random_kernel(rng, *, gain=None, rounding=None, peephole=None, layer_norm=None,
                  extremes=False) -> IntegerLstmKernel:
    """A random 8x8_16 kernel with plausible scales; ``gain`` > 1 scales weights up (saturated gates);
    ``extremes``: every int8 weight -128 or 127 (else uniform in TFLite's symmetric range -127..127)."""

    def w8(shape):
        return rng.choice(np.array([-128, 127], np.int8), shape) if extremes else _q(rng, shape)

    I, H = int(rng.integers(1, 40)), int(rng.choice([4, 8, 16, 12, 32, 5, 80]))
    cifg, peep, proj, ln = (bool(rng.random() < p) for p in (0.3, 0.4, 0.4, 0.4))
    peep = peep if peephole is None else peephole
    ln = ln if layer_norm is None else layer_norm
    P = int(rng.integers(2, 40)) if proj else H
    if peep and proj:
        P = min(P, H)
    s_x, zp_x = float(rng.uniform(0.01, 0.05)), int(rng.integers(-30, 30))
    cs = int(rng.integers(-15, -8))
    s_hid, zp_hid = float(rng.uniform(0.5, 1.2) * 2 / 255), int(rng.integers(-10, 10))
    if proj:
        s_h, zp_h = float(rng.uniform(0.005, 0.03)), int(rng.integers(-20, 20))
    else:
        s_h, zp_h = s_hid, zp_hid
    gain = float(rng.choice([1.0, 1.0, 8.0, 40.0])) if gain is None else gain
    slots = [None] * 24
    slots[0] = const("x", None, s_x, zp_x, type_name="INT8", shape=(1, 1, I))
    gates = [1, 2, 3] if cifg else [0, 1, 2, 3]
    inter = [const(f"i{g}", None, float(2.0**-12 * rng.uniform(0.3, 3)), 0, type_name="INT16", shape=(0,)) if ln
             else const(f"i{g}", None, type_name="FLOAT32", shape=(0,)) for g in range(4)]
    inter.append(const("i4", None, s_hid, zp_hid, type_name="INT8", shape=(0,)))
    for g in gates:
        sw = gain * float(rng.uniform(0.5, 2.5) / (np.sqrt(I) * 127 * 0.03 * 20))
        sr = gain * float(rng.uniform(0.5, 2.5) / (np.sqrt(P) * 127 * 0.6))
        slots[1 + g] = const(f"W{g}", w8((H, I)), sw)
        slots[5 + g] = const(f"R{g}", w8((H, P)), sr)
        if ln:
            sl = float(rng.uniform(0.5, 1.5) / 32767)
            slots[20 + g] = const(f"L{g}", _q(rng, (H,), np.int16, 8000, 32767), sl)
            bs = sl * 2.0**-10
        else:
            bs = s_x * sw
        slots[12 + g] = const(f"b{g}", np.round(rng.uniform(-1, 1, H) / bs).astype(np.int32), bs)
    if peep:
        for g, k in ((0, 9), (1, 10), (3, 11)):
            if g in gates:
                slots[k] = const(f"P{g}", _q(rng, (H,), np.int16), float(rng.uniform(0.2, 1) * gain / 32767))
    if proj:
        sp = float(rng.uniform(0.5, 2) / (np.sqrt(H) * 127 * 0.5))
        slots[16] = const("Wp", w8((P, H)), sp)
        if rng.random() < 0.5:
            slots[17] = const("bp", np.round(rng.uniform(-0.5, 0.5, P) / (sp * s_hid)).astype(np.int32), sp * s_hid)
    slots[18] = const("h", None, s_h, zp_h, type_name="INT8", shape=(1, P), is_variable=True)
    slots[19] = const("c", None, 2.0**cs, 0, type_name="INT16", shape=(1, H), is_variable=True)
    opts = LstmOptions(cell_clip=float(rng.choice([0.0, 0.0, 0.5, 3.0, 10.0])),
                       proj_clip=float(rng.choice([0.0, 0.0, 0.3, 2.0])), time_major=bool(rng.random() < 0.5))
    rounding = rounding or str(rng.choice(["double", "double", "single"]))
    return IntegerLstmKernel(LstmTensors(slots, inter), opts, rounding=rounding)


def _case(rng, T=None, B=None):
    k = random_kernel(rng)
    T = int(rng.integers(1, 12)) if T is None else T
    B = int(rng.choice([1, 1, 2, 3, 7])) if B is None else B
    x = rng.integers(-128, 128, (T, B, k.n_input)).astype(np.int8)
    h0 = rng.integers(-128, 128, (B, k.n_output)).astype(np.int8)
    c0 = rng.integers(-32768, 32768, (B, k.n_cell)).astype(np.int16)
    return k, x, (h0, c0), bool(rng.random() < 0.3)


def _assert_same(a, b, msg=""):
    np.testing.assert_array_equal(a[0], b[0], err_msg=f"y {msg}")
    np.testing.assert_array_equal(a[1][0], b[1][0], err_msg=f"h {msg}")
    np.testing.assert_array_equal(a[1][1], b[1][1], err_msg=f"c {msg}")
    assert b[0].dtype == np.int8 and b[1][0].dtype == np.int8 and b[1][1].dtype == np.int16


@needs_cc
@settings(max_examples=250, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_equals_numpy_on_random_kernels(seed):
    rng = np.random.default_rng(seed)
    k, x, state, rev = _case(rng)
    want = k.run(x, state, reverse=rev, engine="numpy")
    got = k.run(x, state, reverse=rev, engine="compiled")
    _assert_same(want, got, f"seed {seed}, cifg {k.cifg} ln {k.ln} peephole {sorted(k.P)} proj {k.proj} "
                            f"rounding {k.rounding} x {x.shape}")


@needs_cc
@pytest.mark.parametrize("seed", range(4))
def test_compiled_equals_numpy_on_longer_sequences_and_larger_shapes(seed):
    """Longer sequences (forward and reverse), batches of 1 to 8 rows (the dot products' blocks of four rows and
    the rows left over) and gate blocks wider than the dot products' 64 columns."""
    rng = np.random.default_rng(1000 + seed)
    k, x, state, _ = _case(rng, T=int(rng.integers(20, 40)), B=int(rng.integers(1, 9)))
    for rev in (False, True):
        _assert_same(k.run(x, state, reverse=rev, engine="numpy"), k.run(x, state, reverse=rev, engine="compiled"))


@needs_cc
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_compiled_equals_numpy_with_blocks_of_input_terms(rows, monkeypatch):
    """The loop computes the input terms (x W, requantized) for blocks of INPUT_BLOCK_ROWS rows before their
    steps: blocks of one step, several steps with a shorter last block, and one row per block with a batch wider
    than the block (one step each), forward and reverse."""
    from fusedrnn.targets.litert import _compiled

    monkeypatch.setattr(_compiled, "INPUT_BLOCK_ROWS", rows)
    rng = np.random.default_rng(500 + rows)
    for _ in range(6):
        k, x, state, _ = _case(rng, T=int(rng.integers(2, 12)), B=int(rng.choice([1, 2, 3])))
        for rev in (False, True):
            _assert_same(k.run(x, state, reverse=rev, engine="numpy"), k.run(x, state, reverse=rev,
                                                                              engine="compiled"), f"rows {rows}")


@needs_cc
@pytest.mark.parametrize("seed", range(6))
def test_compiled_equals_numpy_at_the_int8_extremes(seed):
    """Weights, inputs and states at -128 and 127 only (the uint8 offset of the vpdpbusd products meets its
    largest terms), wide layers (sums far beyond int16), batches around the four-row tiles of the products."""
    rng = np.random.default_rng(2000 + seed)
    k = random_kernel(rng, extremes=True)
    T, B = int(rng.integers(2, 9)), int(rng.choice([1, 4, 5, 9]))
    x = rng.choice(np.array([-128, 127], np.int8), (T, B, k.n_input))
    h0 = rng.choice(np.array([-128, 127], np.int8), (B, k.n_output))
    c0 = rng.integers(-32768, 32768, (B, k.n_cell)).astype(np.int16)
    for rev in (False, True):
        _assert_same(k.run(x, (h0, c0), reverse=rev, engine="numpy"),
                     k.run(x, (h0, c0), reverse=rev, engine="compiled"), f"seed {seed}")


@needs_cc
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_quantize_and_lookup_equal_numpy(seed):
    """The compiled QUANTIZE of the target's input gives tflite_quant.quantize_values' int8 values (ties exactly
    between two steps included: half to even), declines non-finite input; the int8 -> float look-up writes a
    direction's strided slice of Y as np.take does and leaves the rest alone."""
    from fusedrnn.targets.tflite_quant import quantize_values

    lib = _compiled.load()
    if lib is None:
        pytest.skip(f"LiteRT kernel unavailable: {_compiled.unavailable_reason()}")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2000))
    scale = float(2.0 ** -int(rng.integers(3, 9))) * (1.0 if rng.random() < 0.5 else float(rng.uniform(0.5, 2)))
    zp = int(rng.integers(-128, 128))
    x = (rng.normal(size=n) * rng.choice([0.05, 1.0, 30.0])).astype(np.float32)
    ties = rng.random(n) < 0.3  # (k + 1/2)·scale, exact in float32 when scale is a power of two
    x[ties] = ((rng.integers(-200, 200, int(ties.sum())) + 0.5) * scale).astype(np.float32)
    got = _compiled.quantize_i8(lib, x, scale, zp)
    assert got is not None and got.dtype == np.int8
    np.testing.assert_array_equal(got, quantize_values(x, scale, zp, np.int8))
    x[int(rng.integers(n))] = [np.nan, np.inf, -np.inf][int(rng.integers(3))]
    assert _compiled.quantize_i8(lib, x, scale, zp) is None
    T, B, H, D = int(rng.integers(1, 9)), int(rng.integers(1, 4)), int(rng.integers(1, 20)), int(rng.integers(1, 3))
    y = rng.integers(-128, 128, (T, B, H)).astype(np.int8)
    lut = rng.normal(size=256).astype(np.float32)
    Y = np.full((T, D, B, H), 7.0, np.float32)
    d = int(rng.integers(D))
    assert _compiled.lookup_f32(lib, y, lut, Y[:, d])
    np.testing.assert_array_equal(Y[:, d], np.take(lut, y.astype(np.intp) + 128))
    assert np.all(np.delete(Y, d, axis=1) == 7.0)


def test_empty_sequence_and_auto_engine():
    rng = np.random.default_rng(7)
    k, x, state, _ = _case(rng, T=3, B=2)
    _assert_same(k.run(x, state, engine="numpy"), k.run(x, state))  # auto: compiled
    y, (h, c) = k.run(x[:0], state, engine="compiled")
    assert y.shape == (0, 2, k.n_output)
    np.testing.assert_array_equal(h, state[0])
    np.testing.assert_array_equal(c, state[1])


def test_engine_selection(monkeypatch):
    rng = np.random.default_rng(3)
    k, x, state, _ = _case(rng, T=2, B=1)
    with pytest.raises(ValueError, match="engine"):
        k.run(x, state, engine="fast")
    with _compiled.use_engine("numpy"):
        assert _compiled.library("auto") is None
    lib = _compiled._LOOP.kernel  # as if the kernel could not be built
    for attr, value in (("_tried", True), ("_lib", None), ("reason", "disabled by FUSEDRNN_COMPILED=0")):
        monkeypatch.setattr(lib, attr, value)
    with pytest.raises(RuntimeError, match="FUSEDRNN_COMPILED=0"):
        k.run(x, state, engine="compiled")
    y, _ = k.run(x, state)  # auto falls back to the NumPy loop
    assert y.shape == (2, 1, k.n_output)


def test_saturating_gates_match_the_interpreter():
    """Large weight gains make the requantized recurrent term leave the int16 range before its saturating sum with
    the input term (the case the NumPy fast path's tables do not cover): both engines against the interpreter."""
    interp = pytest.importorskip("ai_edge_litert.interpreter")
    from fusedrnn.targets.litert.writer import lstm_model

    checked = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        k = random_kernel(rng, gain=40.0, peephole=False, layer_norm=False)
        if not k.rec_wide:
            continue
        B, T = 2, 5
        x = rng.integers(-128, 128, (T, B, k.n_input)).astype(np.int8)
        opts = dict(fused_activation_function="TANH", cell_clip=k.opts.cell_clip, proj_clip=k.opts.proj_clip,
                    time_major=True, asymmetric_quantize_inputs=False)
        model = lstm_model(k.t, opts, batch=B, time=T)
        it = interp.Interpreter(model_content=model,
                                experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        it.reset_all_variables()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        k2 = IntegerLstmKernel(k.t, LstmOptions(**opts), rounding="double")
        for engine in ("numpy", "auto"):
            np.testing.assert_array_equal(k2.run(x, k2.initial_state(B), engine=engine)[0], want,
                                          err_msg=f"seed {seed}, engine {engine}")
        checked += 1
        if checked == 6:
            break
    assert checked >= 3


UBSAN_CASE = """
import numpy as np, fusedrnn
from fusedrnn.targets.litert import _compiled
assert _compiled.load() is not None, _compiled.unavailable_reason()
rng = np.random.default_rng(0)
I, H = 4, 8
for scale in (1e30, 1e20, 1.0):
    layer = fusedrnn.LSTM(rng.standard_normal((1, 4 * H, I)).astype(np.float32),
                          rng.standard_normal((1, 4 * H, H)).astype(np.float32))
    x = (rng.standard_normal((5, 2, I)) * scale).astype(np.float32)
    emulated = layer.to("litert-int8x16", calibration=x)
    y, _ = emulated(x)
    with _compiled.use_engine("numpy"):
        y0, _ = emulated(x)
    assert np.array_equal(y, y0), scale
print("OK")
"""


def test_no_undefined_behaviour_on_extreme_calibration(tmp_path):
    """Calibration ranges near 1e30 give requantization multipliers with left shifts near 100: the kernel built
    with UBSan (aborting on the first report) agrees with the NumPy loop, which makes every bit shifted out of the
    low 32 zero (a C shift by 64 or more was undefined, reported as "shift exponent 99")."""
    cc = _native.build.find_compiler()
    flags = "-fsanitize=undefined -fno-sanitize-recover=undefined"
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    if cc is None or subprocess.run([cc, *flags.split(), str(probe), "-o", str(tmp_path / "probe")],
                                    capture_output=True).returncode != 0:
        pytest.skip("no C compiler with UBSan")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEDRNN_")}
    env.update(PYTHONPATH=os.pathsep.join([str(Path(fusedrnn.__file__).resolve().parents[1]),
                                           env.get("PYTHONPATH", "")]),
               FUSEDRNN_BUILD="runtime", FUSEDRNN_CACHE_DIR=str(tmp_path / "cache"), FUSEDRNN_CFLAGS=flags)
    proc = subprocess.run([sys.executable, "-c", UBSAN_CASE], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
