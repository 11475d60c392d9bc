"""LiteRT's own recurrent kernel tests (google-ai-edge/LiteRT tflite/kernels/*_test.cc), ported: their weights,
inputs, golden outputs and tolerances come from tests/data/litert_kernel_tests (extracted from the C++ sources by
scripts/extract_litert_kernel_tests.py); each case is built as a .tflite model, run through fusedrnn and, when
ai_edge_litert is installed, through the LiteRT interpreter, and both are held to the test's tolerance."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from litert_kernel_cases import (
    flags,
    interpreter_class,
    lstm_float_model,
    parse_tolerance,
    run_steps,
    kernel_tests,
    truth,
)

HAVE_INTERPRETER = interpreter_class() is not None
ENGINES = [False, True] if HAVE_INTERPRETER else [False]


def _ids(engine: bool) -> str:
    return "interpreter" if engine else "fusedrnn"


def _check(got: list, want: list, tol: float, what: str) -> None:
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g, np.float64).reshape(-1)
        w = np.asarray(w, np.float64).reshape(-1)
        assert g.shape == w.shape, f"{what} step {step}: shape {g.shape} vs {w.shape}"
        err = float(np.abs(g - w).max())
        assert err <= tol * (1 + 1e-6) + 1e-9, f"{what} step {step}: max |error| {err} > tolerance {tol}"


# ---- lstm_test.cc: LstmOpTest (the one-step LSTM op; float, UINT8 and INT8 hybrid weights) ----------------------
LSTM_OP_TESTS = [b for b in kernel_tests("lstm_test") if b.get("suite") == "LstmOpTest" and b["kind"] == "TEST_P"]
LSTM_OP_PARAMS = list(itertools.product(("FLOAT32", "UINT8", "INT8"), (False, True), (False, True)))


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("weight_type,legacy,asym", LSTM_OP_PARAMS,
                         ids=[f"{w}-{'legacy20' if g else '24'}-{'asym' if a else 'sym'}" for w, g, a in LSTM_OP_PARAMS])
@pytest.mark.parametrize("case", LSTM_OP_TESTS, ids=[b["name"] for b in LSTM_OP_TESTS])
def test_lstm_op(case, weight_type, legacy, asym, engine):
    f = flags(case)
    s = case["scalars"]
    ln = truth(f.get("is_layer_norm", "false"))
    if "model_has_legacy_20_inputs" in f:  # the layer-norm tests fix it (layer norm needs 24 inputs)
        legacy = truth(f["model_has_legacy_20_inputs"])
    a = case["arrays"]
    model = lstm_float_model(
        a, n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"], n_output=s["n_output"],
        use_cifg=truth(f["use_cifg"]), use_peephole=truth(f["use_peephole"]),
        use_projection_weights=truth(f["use_projection_weights"]),
        use_projection_bias=truth(f["use_projection_bias"]), is_layer_norm=ln, weight_type=weight_type,
        legacy_20_inputs=legacy, options={"asymmetric_quantize_inputs": asym})
    xs = [np.asarray(step, np.float32).reshape(s["n_batch"], s["n_input"]) for step in a["lstm_input_"]]
    got = run_steps(model, xs, interpreter=engine)
    _check(got, a["lstm_golden_output_"], parse_tolerance(case, weight_type), case["name"])
