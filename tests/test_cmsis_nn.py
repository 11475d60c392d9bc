"""Arm CMSIS-NN's integer LSTM (``arm_lstm_unidirectional_s8`` / ``_s16``) and the cmsis-nn-* targets.

* CMSIS-NN's own unit tests, ported (``test_arm_lstm_unidirectional_s8.c`` / ``_s16.c``; their vectors in
  ``tests/data/cmsis_nn``, extracted by ``scripts/extract_cmsis_nn_vectors.py``): the kernel sums from
  ``arm_vector_sum_s8`` / ``_s8_s64``, the parameters from ``config_data.h``, NULL or explicit hidden state as each
  test sets it; the outputs must equal the expected ones bit for bit.
* Where a CMSIS-NN checkout is available (``$CMSIS_NN_ROOT``) and a C compiler runs, CMSIS-NN's portable C is
  compiled into a small program in a temporary directory and run as the oracle on random parameters (including
  saturating ones), and its ``arm_nn_activation_s16`` on every int16 input.
* The targets: CMSIS-NN's parameters derived as TFLM's CMSIS-NN kernel does give TFLM's results except where the
  recurrent term leaves the int16 range; calibrated layers run; the bundled example runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tflm_cases import random_codes, random_quantized

import fusedrnn
from fusedrnn.errors import ShapeError, UnsupportedFeatureError
from fusedrnn.numerics.sigmoid_lut import logistic_lut16, lut16_table
from fusedrnn.targets import registry
from fusedrnn.targets.cmsis_nn import api
from fusedrnn.targets.cmsis_nn.kernel import CmsisLstm, LstmGate, LstmParams, params_from_quantized
from fusedrnn.targets.tflite_quant import QuantizedLstm
from fusedrnn.targets.tflm import TflmLstm

DATA = Path(__file__).parent / "data" / "cmsis_nn"
INDEX = json.loads((DATA / "index.json").read_text())
GATES = ("forget", "input", "cell", "output")


def case_params(case: str) -> tuple[LstmParams, dict, dict]:
    """The ``cmsis_nn_lstm_params`` a CMSIS-NN unit test builds for ``case``."""
    cfg, arr = INDEX["cases"][case], dict(np.load(DATA / f"{case}.npz"))
    s16 = case.endswith("_s16")
    I, H = cfg["INPUT_SIZE"], cfg["HIDDEN_SIZE"]
    gates = {}
    for g in GATES:
        w_in, w_h, b = arr[f"{g}_gate_input_weights"], arr[f"{g}_gate_hidden_weights"], arr[f"{g}_gate_bias"]
        if s16:
            eff_in = api.vector_sum_s8_s64(I, H, w_in, cfg["INPUT_ZERO_POINT"], b)
            eff_h = api.vector_sum_s8_s64(H, H, w_h, -cfg["OUTPUT_ZERO_POINT"], None)
        else:
            eff_in = api.vector_sum_s8(I, H, w_in, cfg["INPUT_ZERO_POINT"], 0, b)
            eff_h = api.vector_sum_s8(H, H, w_h, -cfg["OUTPUT_ZERO_POINT"], 0, None)
        G = g.upper()
        gates[g] = LstmGate(cfg[f"{G}_GATE_INPUT_MULTIPLIER"], cfg[f"{G}_GATE_INPUT_SHIFT"], w_in, eff_in,
                            cfg[f"{G}_GATE_HIDDEN_MULTIPLIER"], cfg[f"{G}_GATE_HIDDEN_SHIFT"], w_h, eff_h, b,
                            api.ARM_TANH if g == "cell" else api.ARM_SIGMOID)
    p = LstmParams(cfg["TIME_MAJOR"], cfg["BATCH_SIZE"], cfg["TIME_STEPS"], I, H, cfg["INPUT_ZERO_POINT"],
                   cfg["FORGET_TO_CELL_MULTIPLIER"], cfg["FORGET_TO_CELL_SHIFT"], cfg["INPUT_TO_CELL_MULTIPLIER"],
                   cfg["INPUT_TO_CELL_SHIFT"], cfg["CELL_CLIP"], cfg["CELL_SCALE_POWER"], cfg["OUTPUT_MULTIPLIER"],
                   cfg["OUTPUT_SHIFT"], cfg["OUTPUT_ZERO_POINT"], gates["forget"], gates["input"], gates["cell"],
                   gates["output"])
    return p, cfg, arr


@pytest.mark.parametrize("case", list(INDEX["cases"]))
def test_cmsis_nn_unit_test_vectors(case):
    p, cfg, arr = case_params(case)
    s16 = case.endswith("_s16")
    B, H = cfg["BATCH_SIZE"], cfg["HIDDEN_SIZE"]
    dt = np.int16 if s16 else np.int8
    out = np.zeros(arr["output"].size, dt)
    hidden = None
    if case.startswith("lstm_stateful"):  # the stateful tests pass a hidden state: the zero point (s8) or 0 (s16)
        hidden = np.full(B * H, 0 if s16 else cfg["OUTPUT_ZERO_POINT"], dt)
    ctx = api.LstmContext(np.full(B * H, 1234, np.int16), hidden)  # the cell buffer: memset (NULL) or zeroed
    if hidden is not None:
        ctx.cell_state[:] = 0
    fn = api.lstm_unidirectional_s16 if s16 else api.lstm_unidirectional_s8
    assert fn(arr["input_tensor"], out, p, ctx) == api.ARM_CMSIS_NN_SUCCESS
    np.testing.assert_array_equal(out, arr["output"])
    if hidden is not None:  # the hidden state holds the last step's output of each batch row
        last = out.reshape(B, cfg["TIME_STEPS"], H)[:, -1] if not cfg["TIME_MAJOR"] else out.reshape(-1, B, H)[-1]
        np.testing.assert_array_equal(ctx.hidden_state.reshape(B, H), last)


def test_api_checks_sizes():
    p, cfg, arr = case_params("lstm_1")
    with pytest.raises(ShapeError, match="input"):
        api.lstm_unidirectional_s8(arr["input_tensor"][:-1], np.zeros(arr["output"].size, np.int8), p,
                                   api.LstmContext(np.zeros(11, np.int16)))
    with pytest.raises(ShapeError, match="output"):
        api.lstm_unidirectional_s8(arr["input_tensor"], np.zeros(3, np.int8), p,
                                   api.LstmContext(np.zeros(11, np.int16)))


# ---- TFLM's CMSIS-NN port: the same results as TFLM's reference kernel, except the unsaturated recurrent term ------
@pytest.mark.parametrize("activation", ["int8", "int16"])
def test_port_agrees_with_tflm(activation):
    variant = "s8" if activation == "int8" else "s16"
    for seed in range(20):
        rng = np.random.default_rng(seed)
        q = random_quantized(rng, activation, wide=seed % 2 == 0)
        T, B = 5, 3
        x = random_codes(rng, (T, B, q.input_size), activation)
        y_t, _ = TflmLstm(q).run(x)
        k = CmsisLstm(params_from_quantized(q), variant)
        h0, c0 = TflmLstm(q).initial_state(B)
        y_c, _ = k.run(x, h0, c0)
        np.testing.assert_array_equal(y_c, y_t)
        np.testing.assert_array_equal(k.run(x, None, c0)[0], y_c)  # NULL hidden state: the same results


def test_port_differs_where_the_recurrent_term_leaves_int16():
    """TFLM saturates the requantized recurrent term before adding it (-32768 + 32767 = -1); CMSIS-NN adds it
    unsaturated (-32768 + 66 064 384 -> 32767): sigmoid(-1/4096) vs sigmoid(8)."""
    one = np.ones((1, 1), np.int8) * 127
    q = QuantizedLstm("int8", (one,) * 4, (one,) * 4, (np.zeros(1, np.int32),) * 4, (1.0,) * 4, (1.0,) * 4,
                      1.0, 0, 1.0, 0, 2.0**-12)
    x, h0, c0 = np.full((1, 1, 1), -128, np.int8), np.full((1, 1), 127, np.int8), np.zeros((1, 1), np.int16)
    k_t, k_c = TflmLstm(q), CmsisLstm(params_from_quantized(q), "s8")
    assert k_t.gate(x[0], h0, "f")[0, 0] == logistic_lut16(np.int16(-1))  # sigmoid(-1 / 4096) in Q0.15
    (_, (_, c_t)), (_, (_, c_c)) = k_t.run(x, (h0, c0)), k_c.run(x, h0, c0)
    assert c_t[0, 0] != c_c[0, 0]


# ---- CMSIS-NN's portable C as the oracle -------------------------------------------------------------------------
_SOURCES = ("Source/LSTMFunctions/arm_lstm_unidirectional_s8.c", "Source/LSTMFunctions/arm_lstm_unidirectional_s16.c",
            "Source/NNSupportFunctions/arm_nn_lstm_step_s8.c", "Source/NNSupportFunctions/arm_nn_lstm_step_s16.c",
            "Source/NNSupportFunctions/arm_nn_lstm_calculate_gate_s8_s16.c",
            "Source/NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
            "Source/NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s8_s16.c",
            "Source/NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s16.c",
            "Source/ActivationFunctions/arm_nn_activation_s16.c", "Source/BasicMathFunctions/arm_elementwise_mul_s16.c",
            "Source/BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
            "Source/BasicMathFunctions/arm_elementwise_mul_s16_s8.c",
            "Source/BasicMathFunctions/arm_elementwise_mul_s16_batch_offset.c",
            "Source/NNSupportFunctions/arm_nntables.c")

# Our driver: reads one case from stdin as whitespace-separated integers, runs CMSIS-NN, prints the output.
_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "arm_nnfunctions.h"
static long long rd(void) { long long v; if (scanf("%lld", &v) != 1) exit(2); return v; }
int main(void) {
    int mode = (int)rd();
    if (mode == 2) {  /* activation table: shift, type; all int16 inputs */
        int shift = (int)rd(), type = (int)rd();
        static int16_t in[65536], out[65536];
        for (int i = 0; i < 65536; i++) in[i] = (int16_t)(i - 32768);
        arm_nn_activation_s16(in, out, 65536, shift, (arm_nn_activation_type)type);
        for (int i = 0; i < 65536; i++) printf("%d\n", out[i]);
        return 0;
    }
    int s16 = mode == 1;
    cmsis_nn_lstm_params p;
    p.time_major = (int)rd(); p.batch_size = (int)rd(); p.time_steps = (int)rd(); p.input_size = (int)rd();
    p.hidden_size = (int)rd(); p.input_offset = (int)rd(); p.forget_to_cell_multiplier = (int)rd();
    p.forget_to_cell_shift = (int)rd(); p.input_to_cell_multiplier = (int)rd(); p.input_to_cell_shift = (int)rd();
    p.cell_clip = (int)rd(); p.cell_scale_power = (int)rd(); p.output_multiplier = (int)rd();
    p.output_shift = (int)rd(); p.output_offset = (int)rd();
    int B = p.batch_size, T = p.time_steps, I = p.input_size, H = p.hidden_size;
    cmsis_nn_lstm_gate *gates[4] = {&p.forget_gate, &p.input_gate, &p.cell_gate, &p.output_gate};
    for (int g = 0; g < 4; g++) {
        cmsis_nn_lstm_gate *q = gates[g];
        q->input_multiplier = (int)rd(); q->input_shift = (int)rd();
        q->hidden_multiplier = (int)rd(); q->hidden_shift = (int)rd(); q->activation_type = (int)rd();
        int8_t *wi = malloc(H * I), *wh = malloc(H * H);
        for (int k = 0; k < H * I; k++) wi[k] = (int8_t)rd();
        for (int k = 0; k < H * H; k++) wh[k] = (int8_t)rd();
        if (s16) {
            int64_t *bi = malloc(8 * H), *bh = malloc(8 * H);
            for (int k = 0; k < H; k++) bi[k] = rd();
            for (int k = 0; k < H; k++) bh[k] = rd();
            q->input_effective_bias = bi; q->hidden_effective_bias = bh;
        } else {
            int32_t *bi = malloc(4 * H), *bh = malloc(4 * H);
            for (int k = 0; k < H; k++) bi[k] = (int32_t)rd();
            for (int k = 0; k < H; k++) bh[k] = (int32_t)rd();
            q->input_effective_bias = bi; q->hidden_effective_bias = bh;
        }
        q->input_weights = wi; q->hidden_weights = wh; q->bias = NULL;
    }
    int has_hidden = (int)rd();
    int16_t *t1 = malloc(2 * B * H), *t2 = malloc(2 * B * H), *cell = malloc(2 * B * H);
    void *hidden = NULL;
    if (has_hidden) {
        if (s16) { int16_t *h = malloc(2 * B * H); for (int k = 0; k < B * H; k++) h[k] = (int16_t)rd(); hidden = h; }
        else { int8_t *h = malloc(B * H); for (int k = 0; k < B * H; k++) h[k] = (int8_t)rd(); hidden = h; }
        for (int k = 0; k < B * H; k++) cell[k] = (int16_t)rd();
    }
    cmsis_nn_lstm_context ctx = {t1, t2, cell, hidden};
    int n = T * B * I, m = T * B * H;
    arm_cmsis_nn_status st;
    if (s16) {
        int16_t *x = malloc(2 * n), *y = malloc(2 * m);
        for (int k = 0; k < n; k++) x[k] = (int16_t)rd();
        st = arm_lstm_unidirectional_s16(x, y, &p, &ctx);
        for (int k = 0; k < m; k++) printf("%d\n", y[k]);
    } else {
        int8_t *x = malloc(n), *y = malloc(m);
        for (int k = 0; k < n; k++) x[k] = (int8_t)rd();
        st = arm_lstm_unidirectional_s8(x, y, &p, &ctx);
        for (int k = 0; k < m; k++) printf("%d\n", y[k]);
    }
    for (int k = 0; k < B * H; k++) printf("%d\n", cell[k]);
    return st == ARM_CMSIS_NN_SUCCESS ? 0 : 3;
}
"""


@pytest.fixture(scope="module")
def cmsis_root():
    root = os.environ.get("CMSIS_NN_ROOT")
    if not root or not (Path(root) / _SOURCES[0]).is_file():
        pytest.skip("CMSIS-NN's C source is not available: set CMSIS_NN_ROOT to an ARM-software/CMSIS-NN checkout "
                    "to compile its portable C as the oracle")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc / gcc) to build CMSIS-NN's portable C")
    return Path(root), cc


def _build(cmsis_root, d: Path, main_c: str, *, ours: bool = False) -> Path:
    """CMSIS-NN's sources and ``main_c`` as a program in ``d``; a failure skips (the sources do not build here)
    unless ``ours`` (then it is this test's header or program that is wrong)."""
    root, cc = cmsis_root
    (d / "main.c").write_text(main_c)
    exe = d / "main"
    srcs = [str(root / s) for s in _SOURCES]
    cmd = [cc, "-O1", "-std=c11", f"-I{root / 'Include'}", f"-I{d}", str(d / "main.c"), *srcs, "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        if ours:
            raise AssertionError(f"the program did not compile: {r.stderr[-2000:]}")
        pytest.skip(f"CMSIS-NN's C source did not compile here: {r.stderr[-500:]}")
    return exe


@pytest.fixture(scope="module")
def cmsis_binary(cmsis_root, tmp_path_factory):
    return _build(cmsis_root, tmp_path_factory.mktemp("cmsis_nn"), _DRIVER)


def _run_c(exe: Path, numbers: list[int]) -> np.ndarray:
    r = subprocess.run([str(exe)], input=" ".join(str(int(v)) for v in numbers), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return np.asarray(r.stdout.split(), np.int64)


def _case_numbers(p: LstmParams, s16: bool, x: np.ndarray, hidden, cell) -> list[int]:
    nums = [int(s16), int(p.time_major), p.batch_size, p.time_steps, p.input_size, p.hidden_size, p.input_offset,
            p.forget_to_cell_multiplier, p.forget_to_cell_shift, p.input_to_cell_multiplier, p.input_to_cell_shift,
            p.cell_clip, p.cell_scale_power, p.output_multiplier, p.output_shift, p.output_offset]
    for g in (p.forget_gate, p.input_gate, p.cell_gate, p.output_gate):
        nums += [g.input_multiplier, g.input_shift, g.hidden_multiplier, g.hidden_shift, g.activation_type]
        for a in (g.input_weights, g.hidden_weights, g.input_effective_bias, g.hidden_effective_bias):
            nums += np.ravel(a).tolist()
    nums.append(int(hidden is not None))
    if hidden is not None:
        nums += np.ravel(hidden).tolist() + np.ravel(cell).tolist()
    return nums + np.ravel(x).tolist()


@pytest.mark.parametrize("kind", ["logistic", "tanh"])
def test_activation_table_against_c(cmsis_binary, kind):
    for shift in (0, 3, -3):
        got = _run_c(cmsis_binary, [2, shift, api.ARM_SIGMOID if kind == "logistic" else api.ARM_TANH])
        x = np.arange(-32768, 32768).astype(np.int16)
        np.testing.assert_array_equal(got, lut16_table(kind, shift)[x.view(np.uint16)])


@pytest.mark.parametrize("activation", ["int8", "int16"])
@pytest.mark.parametrize("seed", range(8))
def test_random_against_compiled_c(cmsis_binary, activation, seed):
    rng = np.random.default_rng(seed + 100 * (activation == "int16"))
    q = random_quantized(rng, activation, wide=seed % 2 == 0)
    T, B = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    p = params_from_quantized(q, time_major=seed % 3 != 0, batch_size=B, time_steps=T)
    if seed % 4 == 1:
        p.cell_clip = int(rng.integers(100, 20000))
    x = random_codes(rng, (T, B, q.input_size), activation)
    hidden = None if seed % 4 == 0 else random_codes(rng, (B, q.hidden_size), activation)
    cell = rng.integers(-32768, 32768, size=(B, q.hidden_size)).astype(np.int16)
    layout = x if p.time_major else x.transpose(1, 0, 2)
    got = _run_c(cmsis_binary, _case_numbers(p, activation == "int16", layout, hidden, cell))
    out = np.zeros(T * B * q.hidden_size, q.dtype)
    ctx = api.LstmContext(cell.reshape(-1).copy(), None if hidden is None else hidden.reshape(-1).copy())
    fn = api.lstm_unidirectional_s16 if activation == "int16" else api.lstm_unidirectional_s8
    assert fn(layout, out, p, ctx) == api.ARM_CMSIS_NN_SUCCESS
    np.testing.assert_array_equal(got[:out.size], out)
    np.testing.assert_array_equal(got[out.size:], ctx.cell_state)


# ---- the targets ------------------------------------------------------------------------------------------------
def test_registered():
    for name in ("cmsis-nn-s8", "cmsis-nn-s16"):
        t = registry.get(name)
        assert t.family == "cmsis-nn" and t.bit_exact and t.needs_calibration


@pytest.mark.parametrize("target, tflm", [("cmsis-nn-s8", "tflm-int8x16"), ("cmsis-nn-s16", "tflm-int16x8")])
def test_calibrated_layers(target, tflm):
    rng = np.random.default_rng(3)
    layer = fusedrnn.LSTM(rng.normal(size=(2, 32, 6)) * 0.5, rng.normal(size=(2, 32, 8)) * 0.5,
                          rng.normal(size=(2, 32)) * 0.3, direction="bidirectional", batch_first=True)
    x = rng.normal(size=(3, 7, 6))
    em = layer.to(target, calibration=x)
    y, (h, c) = em(x)
    ref = layer(x)[0]
    assert y.shape == ref.shape and np.abs(y - ref).max() < 0.05
    np.testing.assert_array_equal(y, layer.to(tflm, calibration=x)(x)[0])  # no saturated recurrent term here
    with pytest.raises(UnsupportedFeatureError, match="calibration"):
        layer.to(target)


# ---- fusedrnn convert --to cmsis-nn-*: a header in the layout of CMSIS-NN's unit tests --------------------------
def parse_header(text: str) -> tuple[dict, dict]:
    """({C name: int64 array}, {macro: value text}) of a generated header."""
    arrays = {}
    for name, body in re.findall(r"static const \w+ (\w+)\[\w+\] = \{([^}]*)\};", text):
        arrays[name] = np.array([int(v.strip().rstrip("UL")) for v in body.split(",") if v.strip()], np.int64)
    return arrays, dict(re.findall(r"^#define (\w+) (.*?)(?: /\*.*\*/)?$", text, flags=re.M))


_HEADER_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "arm_nnfunctions.h"
#include "w.h"
#define GATE(g, A) { CMSIS_NN_L0_D0_##A##_GATE_INPUT_MULTIPLIER, CMSIS_NN_L0_D0_##A##_GATE_INPUT_SHIFT, \
    cmsis_nn_l0_d0_##g##_gate_input_weights, cmsis_nn_l0_d0_##g##_gate_input_effective_bias, \
    CMSIS_NN_L0_D0_##A##_GATE_HIDDEN_MULTIPLIER, CMSIS_NN_L0_D0_##A##_GATE_HIDDEN_SHIFT, \
    cmsis_nn_l0_d0_##g##_gate_hidden_weights, cmsis_nn_l0_d0_##g##_gate_hidden_effective_bias, \
    cmsis_nn_l0_d0_##g##_gate_bias, CMSIS_NN_L0_D0_##A##_GATE_ACTIVATION }
int main(int argc, char **argv) {
    int T = atoi(argv[1]), B = atoi(argv[2]), I = CMSIS_NN_L0_D0_INPUT_SIZE, H = CMSIS_NN_L0_D0_HIDDEN_SIZE;
    cmsis_nn_lstm_params p = {CMSIS_NN_L0_D0_TIME_MAJOR, B, T, I, H, CMSIS_NN_L0_D0_INPUT_ZERO_POINT,
        CMSIS_NN_L0_D0_FORGET_TO_CELL_MULTIPLIER, CMSIS_NN_L0_D0_FORGET_TO_CELL_SHIFT,
        CMSIS_NN_L0_D0_INPUT_TO_CELL_MULTIPLIER, CMSIS_NN_L0_D0_INPUT_TO_CELL_SHIFT, CMSIS_NN_L0_D0_CELL_CLIP,
        CMSIS_NN_L0_D0_CELL_SCALE_POWER, CMSIS_NN_L0_D0_OUTPUT_MULTIPLIER, CMSIS_NN_L0_D0_OUTPUT_SHIFT,
        CMSIS_NN_L0_D0_OUTPUT_ZERO_POINT, GATE(forget, FORGET), GATE(input, INPUT), GATE(cell, CELL),
        GATE(output, OUTPUT)};
    ACT *x = malloc(sizeof(ACT) * T * B * I), *y = malloc(sizeof(ACT) * T * B * H);
    int16_t *t1 = malloc(2 * B * H), *t2 = malloc(2 * B * H), *cell = malloc(2 * B * H);
    for (int k = 0; k < T * B * I; k++) { int v; if (scanf("%d", &v) != 1) return 2; x[k] = (ACT)v; }
    cmsis_nn_lstm_context ctx = {t1, t2, cell, NULL};
    if (FN(x, y, &p, &ctx) != ARM_CMSIS_NN_SUCCESS) return 3;
    for (int k = 0; k < T * B * H; k++) printf("%d\n", y[k]);
    return 0;
}
"""


def _convert(tmp_path, target: str):
    import onnx
    from click.testing import CliRunner

    from fusedrnn.cli import main

    rng = np.random.default_rng(8)
    layer = fusedrnn.LSTM(rng.normal(size=(1, 24, 5)) * 0.6, rng.normal(size=(1, 24, 6)) * 0.6,
                          rng.normal(size=(1, 24)) * 0.3)
    onnx.save(layer.to_onnx_model(), str(tmp_path / "m.onnx"))
    cal = rng.normal(size=(7, 3, 5)).astype(np.float32)
    np.savez(tmp_path / "cal.npz", X=cal)
    res = CliRunner().invoke(main, ["convert", str(tmp_path / "m.onnx"), "--to", target, "--calibration",
                                    str(tmp_path / "cal.npz"), "--out", str(tmp_path / "w.h")])
    assert res.exit_code == 0, res.output
    return fusedrnn.LSTM.from_onnx(str(tmp_path / "m.onnx")).to(target, calibration=cal), rng


@pytest.mark.parametrize("target", ["cmsis-nn-s8", "cmsis-nn-s16"])
def test_convert_writes_a_cmsis_nn_header(tmp_path, target):
    em, _ = _convert(tmp_path, target)
    arrays, defines = parse_header((tmp_path / "w.h").read_text())
    p, q = em.prepared.params[0], em.prepared.quantized[0]
    P = "CMSIS_NN_L0_D0"
    assert int(defines[f"{P}_INPUT_ZERO_POINT"]) == p.input_offset == -q.x_zp
    assert int(defines[f"{P}_OUTPUT_MULTIPLIER"]) == p.output_multiplier
    assert int(defines[f"{P}_CELL_SCALE_POWER"]) == p.cell_scale_power
    assert float(defines[f"{P}_INPUT_SCALE"].rstrip("f")) == np.float32(q.x_scale)
    for gate in ("input", "forget", "cell", "output"):
        g = getattr(p, f"{gate}_gate")
        assert int(defines[f"{P}_{gate.upper()}_GATE_HIDDEN_SHIFT"]) == g.hidden_shift
        for name in ("input_weights", "hidden_weights", "bias", "input_effective_bias", "hidden_effective_bias"):
            np.testing.assert_array_equal(arrays[f"cmsis_nn_l0_d0_{gate}_gate_{name}"],
                                          np.ravel(getattr(g, name)))


@pytest.mark.parametrize("target", ["cmsis-nn-s8", "cmsis-nn-s16"])
def test_converted_header_runs_cmsis_nn_like_the_target(tmp_path, target, cmsis_root):
    """The header compiled with CMSIS-NN's own C computes what the emulation computes."""
    em, rng = _convert(tmp_path, target)
    q = em.prepared.quantized[0]
    s16 = target.endswith("s16")
    defs = (f"#define ACT {'int16_t' if s16 else 'int8_t'}\n#define FN arm_lstm_unidirectional_{'s16' if s16 else 's8'}"
            "\n")
    (tmp_path / "driver").mkdir()
    _build(cmsis_root, tmp_path / "driver", _DRIVER)  # CMSIS-NN itself builds here (else skip)
    exe = _build(cmsis_root, tmp_path, defs + _HEADER_MAIN, ours=True)
    x = rng.normal(size=(6, 2, 5)).astype(np.float32)
    xq = q.quantize_input(x)
    r = subprocess.run([str(exe), "6", "2"], input=" ".join(map(str, xq.ravel().tolist())), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    y = np.asarray(r.stdout.split(), np.int64).reshape(6, 2, -1)
    np.testing.assert_array_equal(q.dequantize_output(y), em(x)[0][:, 0])  # ONNX layout [T, D, B, H]
