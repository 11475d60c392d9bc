"""LiteRT's own recurrent kernel tests (google-ai-edge/LiteRT tflite/kernels/*_test.cc), ported: their weights,
inputs, golden outputs and tolerances come from tests/data/litert_kernel_tests (extracted from the C++ sources by
scripts/extract_litert_kernel_tests.py); each case is built as a .tflite model, run through fusedrnn and, when
ai_edge_litert is installed, through the LiteRT interpreter, and both are held to the test's tolerance."""

from __future__ import annotations

import itertools
import re
import zlib
from dataclasses import replace

import numpy as np
import pytest
from litert_kernel_cases import (
    bi_lstm_model as _bi_lstm_model,
)
from litert_kernel_cases import (
    bi_rnn_model,
    block,
    blocks,
    flags,
    flat,
    integer_lstm_model,
    interpreter_class,
    kernel_tests,
    lstm_float_model,
    parse_tolerance,
    rnn_model,
    run_inputs,
    run_int8,
    run_outputs,
    run_steps,
    truth,
    weight,
)

from fusedrnn import litert
from fusedrnn.errors import FileFormatError, FusedRNNError, UnsupportedFeatureError
from fusedrnn.numerics.affine import tflite_symmetric_quantize
from fusedrnn.targets.litert.lstm_integer import IntegerLstmKernel, IntegerLstmParameter
from fusedrnn.targets.litert.rnn import SequenceGRU
from fusedrnn.targets.litert.slots import LstmTensors, const
from fusedrnn.targets.litert.sparsity import block_csr
from fusedrnn.targets.litert.writer import OpSpec, single_op_model, write_model

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
                         ids=[f"{w}-{'legacy20' if g else '24'}-{'asym' if a else 'sym'}"
                              for w, g, a in LSTM_OP_PARAMS])
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


# ---- unidirectional_sequence_lstm_test.cc: the fixtures' float and hybrid tests ------------------------------
def _fixture_arrays(stem: str, suite: str) -> dict:
    """The arrays a fixture class (and the classes it derives from) sets in SetUp."""
    out: dict = {}
    chain = []
    name = suite
    while name:
        try:
            b = block(stem, name, "class")
        except KeyError:
            break
        chain.append(b)
        name = (b.get("base") or [None])[0]
    for b in reversed(chain):
        out.update(b["arrays"])
    return out


def _usl_cases():
    out = []
    for b in kernel_tests("unidirectional_sequence_lstm_test"):
        model = [c for c in b["calls"] if c[0].endswith("LSTMOpModel")]
        verify = [c for c in b["calls"] if c[0] == "VerifyGoldens"]
        if not model or not verify or b.get("suite") == "IndyLSTMOpTest":
            continue
        text = model[0][1]
        wtypes = re.findall(r"TensorType_(UINT8|INT8)", text) or ["FLOAT32"]
        for asym in ((False, True) if b["kind"] == "TEST_P" else (False,)):
            out.append(pytest.param(b, wtypes[0], asym, model[0][0], verify[0][1],
                                    id=f"{b['suite']}.{b['name']}{'-asym' if asym else ''}"))
    return out


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("case,weight_type,asym,model_class,verify", _usl_cases())
def test_unidirectional_sequence_lstm(case, weight_type, asym, model_class, verify, engine):
    stem = "unidirectional_sequence_lstm_test"
    a = _fixture_arrays(stem, case["suite"])
    a.update(case["arrays"])
    f = flags(case)
    s = case["scalars"]
    B, I, T, Hp = s["n_batch"], s["n_input"], s["sequence_length"], s["n_output"]
    # the layer-norm model's last four shapes: {0} leaves a coefficient out
    ln_shapes = re.findall(r"\{[^{}]*\}", case["calls"][[c[0] for c in case["calls"]].index(model_class)][1])[-4:]
    ln = model_class.startswith("LayerNorm") and any(x != "{0}" for x in ln_shapes)
    model_tm = truth(f.get("time_major", "true"))
    vflags = dict(re.findall(r"/\*(\w+)=\*/\s*([^,)]+)", verify))
    feed_tm = truth(vflags.get("time_major", "true"))
    tol = float(vflags.get("tolerance", "1e-5").rstrip("f"))
    model = lstm_float_model(
        a, n_batch=B, n_input=I, n_cell=s["n_cell"], n_output=Hp, use_cifg=truth(f["use_cifg"]),
        use_peephole=truth(f["use_peephole"]), use_projection_weights=truth(f["use_projection_weights"]),
        use_projection_bias=truth(f["use_projection_bias"]), is_layer_norm=ln, weight_type=weight_type,
        op="UNIDIRECTIONAL_SEQUENCE_LSTM", time=T, time_major=model_tm,
        options={"asymmetric_quantize_inputs": asym, "cell_clip": float(f["cell_clip"]),
                 "proj_clip": float(f["proj_clip"])})
    inp = [flat(v) for v in a["lstm_input_"]]
    gold = [flat(v) for v in a["lstm_golden_output_"]]
    if feed_tm:
        x = np.stack([np.stack([inp[b][t * I:(t + 1) * I] for b in range(B)]) for t in range(T)])
        want = np.stack([np.stack([gold[b][t * Hp:(t + 1) * Hp] for b in range(B)]) for t in range(T)])
    else:
        x = np.stack([inp[b][:T * I] for b in range(B)])
        want = np.stack([gold[b][:T * Hp] for b in range(B)])
    shape = (T, B, I) if model_tm else (B, T, I)
    got = run_steps(model, [x.astype(np.float32).reshape(shape)], interpreter=engine)
    _check(got, [want], tol, case["name"])


# ---- basic_rnn_test.cc and unidirectional_sequence_rnn_test.cc ------------------------------------------------
def _rnn_data(stem: str, prefix: str) -> dict:
    a = block(stem, None, "preamble")["arrays"]
    names = {"input": "Input", "golden": "GoldenOutput", "weights": "Weights", "recurrent": "RecurrentWeights",
             "bias": "Bias"}
    if prefix == "k":
        return {k: flat(a[f"kRnn{v}"]) for k, v in names.items()}
    return {k: flat(a["rnn_" + re.sub(r"(?<!^)([A-Z])", r"_\1", v).lower()]) for k, v in names.items()}


BASIC_RNN = [pytest.param("FLOAT32", False, 1e-5, id="BlackBoxTest")] + [
    pytest.param(w, asym, 0.0104, id=f"BlackBoxTest{w.capitalize()}-{'asym' if asym else 'sym'}")
    for w in ("UINT8", "INT8") for asym in (False, True)]


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("weight_type,asym,tol", BASIC_RNN)
def test_basic_rnn(weight_type, asym, tol, engine):
    names = [b.get("name") for b in kernel_tests("basic_rnn_test")]
    assert {"BlackBoxTest", "BlackBoxTestUint8", "BlackBoxTestInt8"} <= set(names)
    flagged = {b["name"]: flags(b) for b in kernel_tests("basic_rnn_test")}
    if weight_type != "FLOAT32":
        assert float(flagged[f"BlackBoxTest{weight_type.capitalize()}"]["max_abs_err"]) == tol
    d = _rnn_data("basic_rnn_test", "rnn")
    B, U, I = 2, 16, 8
    model = rnn_model("RNN", batches=B, units=U, size=I, weights=d["weights"], recurrent_weights=d["recurrent"],
                      bias=d["bias"], weight_type=weight_type, asym=asym)
    T = d["input"].size // (I * B)
    xs = [np.tile(d["input"][t * I:(t + 1) * I], (B, 1)).astype(np.float32) for t in range(T)]
    want = [np.tile(d["golden"][t * U:(t + 1) * U], B) for t in range(T)]
    _check(run_steps(model, xs, interpreter=engine), want, tol, "basic rnn")


USR = [pytest.param(tm, "FLOAT32", False, 1e-5, id=f"{'TimeMajor' if tm else ''}BlackBoxTest") for tm in (False, True)]
USR += [pytest.param(tm, w, asym, 0.013, id=f"{'TimeMajor' if tm else ''}BlackBoxTestQuantized-{w}-{asym}")
        for tm in (False, True) for asym in (True, False) for w in ("UINT8", "INT8")]


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("time_major,weight_type,asym,tol", USR)
def test_unidirectional_sequence_rnn(time_major, weight_type, asym, tol, engine):
    d = _rnn_data("unidirectional_sequence_rnn_test", "k")
    B, T, U, I = 2, 16, 16, 8
    model = rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batches=B, units=U, size=I, weights=d["weights"],
                      recurrent_weights=d["recurrent"], bias=d["bias"], weight_type=weight_type, asym=asym,
                      time_major=time_major, seq=T)
    xs = d["input"][:T * I].reshape(T, 1, I).astype(np.float32)
    gold = d["golden"][:T * U].reshape(T, 1, U)
    x = np.tile(xs, (1, B, 1)) if time_major else np.tile(xs.transpose(1, 0, 2), (B, 1, 1))
    want = np.tile(gold, (1, B, 1)) if time_major else np.tile(gold.transpose(1, 0, 2), (B, 1, 1))
    _check(run_steps(model, [x], interpreter=engine), [want], tol, "sequence rnn")


def _invalid_shapes():
    inst = [b for b in blocks("unidirectional_sequence_rnn_test") if b["kind"] == "INSTANTIATE_TEST_SUITE_P"]
    return [v for b in inst for v in b["values"]]


def _refused_at_load(model: bytes) -> None:
    """fusedrnn refuses the model when loading it, as the interpreter (where installed) refuses to allocate it."""
    with pytest.raises(FusedRNNError):
        litert.load(model)
    if HAVE_INTERPRETER:
        it = interpreter_class()(model_content=model)
        with pytest.raises(RuntimeError):
            it.allocate_tensors()


@pytest.mark.parametrize("shapes", _invalid_shapes(), ids=str)
def test_unidirectional_sequence_rnn_refuses_what_the_interpreter_cannot_allocate(shapes):
    model = rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batches=2, units=4, size=4, weights=None,
                      recurrent_weights=None, bias=None, time_major=True, shapes=shapes)
    _refused_at_load(model)


def test_unidirectional_sequence_rnn_refuses_float16_weights():
    """UnsupportedWeightsType: the interpreter allocates the model and refuses to invoke it; fusedrnn refuses it
    when loading."""
    shapes = [[2, 2, 4], [4, 4], [4, 4], [4], [2, 4]]
    model = rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batches=2, units=4, size=4, weights=None,
                      recurrent_weights=None, bias=None, time_major=True, shapes=shapes, weight_type="FLOAT16")
    with pytest.raises(FusedRNNError):
        litert.load(model)
    if HAVE_INTERPRETER:
        it = interpreter_class()(model_content=model)
        it.allocate_tensors()
        with pytest.raises(RuntimeError):
            it.invoke()


# ---- unidirectional_sequence_gru_test.cc (the custom GRU) ------------------------------------------------------
@pytest.mark.parametrize("engine", [False], ids=_ids)
def test_gru_simple(engine):
    b = block("unidirectional_sequence_gru_test", "SimpleTest", "TEST")
    a, s = b["arrays"], b["scalars"]
    T, B, I, H = s["n_time"], s["n_batch"], s["n_input"], s["n_output"]
    op = SequenceGRU(const("gw", np.float32(a["SetGateWeight()"]).reshape(2 * H, I + H)),
                     const("gb", np.float32(a["SetGateBias()"])),
                     const("cw", np.float32(a["SetCandidateWeight()"]).reshape(H, I + H)),
                     const("cb", np.float32(a["SetCandidateBias()"])))
    y, h = op(np.float32(a["SetInput()"]).reshape(T, B, I), np.float32(a["SetInputState()"]).reshape(B, H))
    _check([y], [a["ArrayFloatNear()"]], 1e-5, "gru")
    np.testing.assert_array_equal(h, y[-1])


# ---- state set from outside (the tests' SetInput on a state tensor) ------------------------------------------
@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("weight_type", ["FLOAT32", "INT8", "UINT8"])
def test_set_state_as_the_interpreter_sets_a_variable_tensor(weight_type):
    case = next(b for b in LSTM_OP_TESTS if b["name"] == "NoCifg_Peephole_Projection_NoLayerNorm")
    f, s, a = flags(case), case["scalars"], case["arrays"]
    B, I, H, Hp = s["n_batch"], s["n_input"], s["n_cell"], s["n_output"]
    model = lstm_float_model(a, n_batch=B, n_input=I, n_cell=H, n_output=Hp, use_cifg=truth(f["use_cifg"]),
                             use_peephole=True, use_projection_weights=True, use_projection_bias=False,
                             weight_type=weight_type)
    rng = np.random.default_rng(7)
    h0 = rng.uniform(-1, 1, (B, Hp)).astype(np.float32)
    c0 = rng.uniform(-2, 2, (B, H)).astype(np.float32)
    xs = [np.asarray(x, np.float32).reshape(B, I) for x in a["lstm_input_"]]
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    var = {d["name"]: d["index"] for d in it.get_tensor_details()}
    it.set_tensor(var["output_state"], h0)
    it.set_tensor(var["cell_state"], c0)
    m = litert.load(model)
    (op,) = m.ops
    op.set_state(h0, c0)
    for x in xs:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_allclose(m(x), want, rtol=0, atol=1e-5)
    with pytest.raises(FusedRNNError):
        op.set_state(h0)
    with pytest.raises(FusedRNNError):
        op.set_state(h0[:, :1], c0)


# ---- bidirectional_sequence_rnn_test.cc: the closed-box tests without aux input ------------------------------
def _bi_rnn_tolerance(b: dict, quantize: bool) -> float:
    text = next(c[1] for c in b["calls"] if c[0] == "ArrayFloatNear")
    m = re.search(r"quantize_weights \? ([\w.+-]+) : ([\w.+-]+)", text)
    if m is None:
        return 1e-5
    v = m.group(1 if quantize else 2)
    return float(b["scalars"][v]) if v in b["scalars"] else float(v)


BI_RNN = []
for _name, _tm, _merge in (("ClosedBoxTest", False, False), ("ClosedBoxTestTimeMajor", True, False),
                           ("ClosedBoxTestMergeOutputs", False, True), ("ClosedBoxTestTimeMajorMergeOutputs", True,
                                                                        True)):
    _b = block("bidirectional_sequence_rnn_test", _name)
    _params = list(itertools.product((False, True), (False, True))) if _b["kind"] == "TEST_P" else [(False, False)]
    BI_RNN += [pytest.param(_b, _tm, _merge, q, asym, id=f"{_name}-{'uint8' if q else 'float'}-{asym}")
               for q, asym in _params]


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("case,time_major,merge,quantize,asym", BI_RNN)
def test_bidirectional_sequence_rnn(case, time_major, merge, quantize, asym, engine):
    a = block("bidirectional_sequence_rnn_test", None, "preamble")["arrays"]
    B, T, U, I = 2, 16, 16, 8
    model = bi_rnn_model(batches=B, seq=T, units=U, size=I, weights=a["weights"],
                         recurrent_weights=a["recurrent_weights"], bias=a["biases"], quantize=quantize, asym=asym,
                         time_major=time_major, merge=merge)
    x1 = flat(a["rnn_input"])[:T * I].reshape(T, 1, I)
    fw = flat(a["rnn_golden_fw_output"])[:T * U].reshape(T, 1, U)
    bw = flat(a["rnn_golden_bw_output"])[:T * U].reshape(T, 1, U)
    x = np.tile(x1, (1, B, 1)) if time_major else np.tile(x1.transpose(1, 0, 2), (B, 1, 1))

    def layout(v):
        return np.tile(v, (1, B, 1)) if time_major else np.tile(v.transpose(1, 0, 2), (B, 1, 1))

    got = run_outputs(model, x.astype(np.float32), interpreter=engine)
    tol = _bi_rnn_tolerance(case, quantize)
    if merge:
        _check(got, [np.concatenate([layout(fw), layout(bw)], axis=2)], tol, case["name"])
    elif time_major:  # the time-major test checks the forward output
        _check(got[:1], [layout(fw)], tol, case["name"])
    else:
        _check(got, [layout(fw), layout(bw)], tol, case["name"])


# ---- optional_tensor_test.cc: a model with omitted optional inputs is read back whole ---------------------------
def test_optional_tensors_are_read_as_absent():
    b = block("optional_tensor_test", "BlackBoxTestWithCifgWithPeepholeNoProjectionNoClipping")
    f, s = flags(b), b["scalars"]
    arrays = {re.sub(r"(?<!^)([A-Z])", r"_\1", k[3:-2]).lower(): v for k, v in b["arrays"].items()
              if k.startswith("Set") and k.endswith("()")}
    assert {"input_to_cell_weights", "cell_to_output_weights"} <= set(arrays)
    cifg, peephole = truth(f["use_cifg"]), truth(f["use_peephole"])
    model = lstm_float_model(arrays, n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"],
                             n_output=s["n_output"], use_cifg=cifg, use_peephole=peephole,
                             use_projection_weights=truth(f["use_projection_weights"]),
                             use_projection_bias=truth(f["use_projection_bias"]), legacy_20_inputs=True)
    info = litert.read_model(model)
    (op,) = info.ops
    absent = [k for k, i in enumerate(op.inputs) if i < 0]
    assert absent == [1, 5, 9, 12, 16, 17]  # CIFG's input gate, its peephole, no projection
    k = litert.load(model).ops[0].kernel
    assert (k.n_input, k.n_cell, k.n_output) == (s["n_input"], s["n_cell"], s["n_output"])
    if HAVE_INTERPRETER:
        it = interpreter_class()(model_content=model)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.zeros((s["n_batch"], s["n_input"]), np.float32))
        it.invoke()


# ---- bidirectional_sequence_lstm_test.cc --------------------------------------------------------------------
BI_LSTM_STEM = "bidirectional_sequence_lstm_test"


def _bi_lstm_build(b: dict, quantize: bool, asym: bool, **over) -> bytes:
    f, s = flags(b), b["scalars"]
    kw = dict(n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"], n_output=s["n_output"],
              seq=s["sequence_length"], use_cifg=truth(f["use_cifg"]), use_peephole=truth(f["use_peephole"]),
              use_projection_weights=truth(f["use_projection_weights"]),
              use_projection_bias=truth(f["use_projection_bias"]), merge=truth(f["merge_outputs"]),
              time_major=truth(f.get("time_major", "true")), quantize=quantize, asym=asym)
    if truth(f["use_aux_input"]):
        kw["n_aux_input"] = s.get("n_aux_input", s["n_input"])
        kw["aux_weights"] = truth(f.get("use_aux_input_weights", "true"))
    kw.update(over)
    return _bi_lstm_model(b["arrays"], **kw)


def _bi_params(b: dict):
    return list(itertools.product((False, True), (False, True))) if b["kind"] == "TEST_P" else [(False, False)]


def _bi_cases(names):
    out = []
    for name in names:
        b = block(BI_LSTM_STEM, name)
        out += [pytest.param(b, q, asym, id=f"{name}-{'uint8' if q else 'float'}-{asym}") for q, asym in _bi_params(b)]
    return out


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("case,quantize,asym", _bi_cases([
    "BlackBoxTestNoCifgNoPeepholeNoProjectionNoClipping", "BlackBoxTestMergedOutput",
    "BlackBoxTestNoCifgNoPeepholeNoProjectionNoClippingReverse",
    "BlackBoxTestWithCifgWithPeepholeNoProjectionNoClipping",
    "BlackBoxTestWithCifgWithPeepholeNoProjectionNoClippingReversed", "BlackBoxTestWithAuxInputZeroAuxWeight",
    "BlackBoxTestWithAuxInput"]))
def test_bidirectional_lstm_small(case, quantize, asym, engine):
    """The n_batch 1-2, n_cell 4 tests: fw / bw (or merged) outputs against the goldens; the Reverse tests feed
    the reversed sequence and expect each direction's golden reversed in time in the other direction."""
    a, s = case["arrays"], case["scalars"]
    T, B, I, H = s["sequence_length"], s["n_batch"], s["n_input"], s["n_output"]
    model = _bi_lstm_build(case, quantize, asym)
    rev = "lstm_input_reversed" in a
    x = flat(a["lstm_input_reversed" if rev else "lstm_input"])[:T * B * I].reshape(T, B, I)
    ins = [x]
    if truth(flags(case)["use_aux_input"]):
        ins.append(x)  # SetAuxInput with the same values
    got = run_inputs(model, ins, interpreter=engine)
    fw = flat(a["lstm_fw_golden_output"])[:T * B * H].reshape(T, B, H)
    bw = flat(a["lstm_bw_golden_output"])[:T * B * H].reshape(T, B, H)
    tol = 1e-2 if quantize else 1e-5
    if truth(flags(case)["merge_outputs"]):
        _check(got, [np.concatenate([fw, bw], axis=2)], tol, case["name"])
    elif rev:
        _check(got, [bw[::-1], fw[::-1]], tol, case["name"])
    else:
        _check(got, [fw, bw], tol, case["name"])


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("name", ["BlackBoxTestWithPeepholeWithProjectionNoClipping",
                                  "BlackBoxTestWithPeepholeWithProjectionNoClippingBatchMajor"])
def test_bidirectional_lstm_peephole_projection(name, engine):
    """n_cell 20, n_output 16, two batch rows: the forward output and fw + bw against the combined golden."""
    b = block(BI_LSTM_STEM, name)
    a, s = b["arrays"], b["scalars"]
    T, B, I, H = s["sequence_length"], s["n_batch"], s["n_input"], s["n_output"]
    tm = truth(flags(b)["time_major"])
    xin = np.asarray(a["lstm_input"], np.float64).reshape(B, T, I)
    fw = np.asarray(a["lstm_fw_golden_output"], np.float64).reshape(B, T, H)
    comb = np.asarray(a["lstm_combined_golden_output"], np.float64).reshape(B, T, H)
    if tm:
        xin, fw, comb = (v.transpose(1, 0, 2) for v in (xin, fw, comb))
    got = run_inputs(_bi_lstm_build(b, False, False), [xin], interpreter=engine)
    _check([got[0]], [fw], 1e-5, name)
    _check([got[0] + got[1]], [comb], 1e-5, name)


def _aux_different_size_inputs(time_major: bool, n_batch: int):
    """TestAuxInputWithDifferentSize's inputs: x[b, t, i] = 0.5 (b + 1) + 0.1 t + 0.02 i and
    aux[b, t] = 0.2 (b + 1) + 0.1 t (n_input 2, one aux feature, 3 steps)."""
    T, I = 3, 2
    b = np.arange(n_batch)[:, None, None]
    t = np.arange(T)[None, :, None]
    x = (np.float32(0.5) * (b + 1) + np.float32(0.1) * t + np.float32(0.02) * np.arange(I)).astype(np.float32)
    aux = (np.float32(0.2) * (b + 1) + np.float32(0.1) * t).astype(np.float32)
    if time_major:
        x, aux = x.transpose(1, 0, 2), aux.transpose(1, 0, 2)
    return x, aux


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("case,quantize,asym", _bi_cases(["BlackBoxTestWithAuxInputDifferentSize",
                                                          "BlackBoxTestWithAuxInputBatchMajorDifferentSize"]))
def test_bidirectional_lstm_aux_input_of_another_size(case, quantize, asym, engine):
    helper = block(BI_LSTM_STEM, "TestAuxInputWithDifferentSize", "function")
    f = dict(flags(case))
    tm, B = truth(f["time_major"]), int(f["n_batch"])
    hs = helper["scalars"]
    model = _bi_lstm_build(helper | {"scalars": {**hs, "n_batch": B}}, quantize, asym, time_major=tm,
                           n_aux_input=hs["n_aux_input"], aux_weights=True)
    x, aux = _aux_different_size_inputs(tm, B)
    got = run_inputs(model, [x, aux], interpreter=engine)
    tol = 1e-2 if quantize else 1e-5
    _check(got, [case["arrays"]["fw_expected"], case["arrays"]["bw_expected"]], tol, case["name"])


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("case,quantize,asym", _bi_cases(["BlackBoxTestWithAuxInputNoAuxWeights"]))
def test_bidirectional_lstm_aux_input_without_weights_runs(case, quantize, asym, engine):
    s = case["scalars"]
    x = flat(case["arrays"]["lstm_input"]).reshape(s["sequence_length"], s["n_batch"], s["n_input"])
    got = run_inputs(_bi_lstm_build(case, quantize, asym), [x, x], interpreter=engine)
    assert all(np.isfinite(g).all() for g in got) and len(got) == 2


_REFUSED = {  # the aux input shape each refused model declares (from the test's shape list)
    "TestWithAuxInputInvalidDimensions": lambda s: (s["sequence_length"], s["n_aux_input"]),
    "TestWithAuxInputNoAuxWeightsMismatchedDimension":
        lambda s: (s["sequence_length"], s["n_batch"], s["n_aux_input"]),
    "TestWithAuxInputNoAuxWeightsMismatchedSequenceLength":
        lambda s: (s["sequence_length"] + 1, s["n_batch"], s["n_input"]),
    "TestWithAuxInputNoAuxWeightsMismatchedBatchSize":
        lambda s: (s["sequence_length"], s["n_batch"] + 1, s["n_input"]),
}


@pytest.mark.parametrize("case,quantize,asym", _bi_cases(list(_REFUSED)))
def test_bidirectional_lstm_refuses_what_the_interpreter_cannot_allocate(case, quantize, asym):
    s = case["scalars"]
    aux_shape = _REFUSED[case["name"]](s)
    n_aux = aux_shape[-1]
    model = _bi_lstm_build(case, quantize, asym, n_aux_input=n_aux, aux_shape=aux_shape)
    _refused_at_load(model)


# ---- the integer LSTM tests (lstm_test.cc IntegerLstmOpTest, unidirectional_sequence_lstm_test.cc) ------------
INTEGER = [pytest.param("lstm_test", "IntegerLstmOpTest", b["name"], id=f"lstm.{b['name']}")
           for b in kernel_tests("lstm_test") if b.get("suite") == "IntegerLstmOpTest"]
INTEGER += [pytest.param("unidirectional_sequence_lstm_test", b["suite"], b["name"], id=f"usl.{b['name']}")
            for b in kernel_tests("unidirectional_sequence_lstm_test")
            if b.get("suite") == "IntegerUnidirectionalSequenceLstmOpTest"]


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("stem,suite,name", INTEGER)
def test_integer_lstm(stem, suite, name, engine):
    """8x8_16 (5 intermediates) and, on the LSTM op, 8x8_8 (12): int8 outputs equal to the goldens."""
    b = block(stem, name, suite=suite)
    a, s, f = b["arrays"], b["scalars"], flags(b)
    seq_op = stem != "lstm_test"
    model = integer_lstm_model(
        a, a["ranges"], a["intermediates"], n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"],
        n_output=s["n_output"], use_cifg=truth(f["use_cifg"]), use_peephole=truth(f["use_peephole"]),
        use_projection_weights=truth(f["use_projection_weights"]),
        use_projection_bias=truth(f["use_projection_bias"]), use_layer_norm=truth(f["use_layer_norm"]),
        op="UNIDIRECTIONAL_SEQUENCE_LSTM" if seq_op else "LSTM", seq=s.get("sequence_length", 1))
    if seq_op:
        xs, want = [a["lstm_input"]], [a["expected_output"]]
    elif truth(f["use_8x8_8_implementation"]):
        xs, want = [None] * len(a["expected_output"]), a["expected_output"]  # the test never sets the input
    else:
        xs, want = a["lstm_input"], a["expected_output"]
    got = run_int8(model, xs, interpreter=engine)
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == np.int8
        np.testing.assert_array_equal(g.reshape(-1), np.asarray(w, np.int64).reshape(-1), err_msg=f"step {step}")


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("stem,suite,name", INTEGER)
def test_integer_lstm_random_inputs_bit_exact_with_the_interpreter(stem, suite, name):
    """The tests' models (the 8x8_8 one included) on random int8 inputs over 12 steps, and with cell and proj
    clipping: fusedrnn's outputs equal the interpreter's."""
    b = block(stem, name, suite=suite)
    a, s, f = b["arrays"], b["scalars"], flags(b)
    seq_op = stem != "lstm_test"
    T = 12
    model = integer_lstm_model(
        a, a["ranges"], a["intermediates"], n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"],
        n_output=s["n_output"], use_cifg=truth(f["use_cifg"]), use_peephole=truth(f["use_peephole"]),
        use_projection_weights=truth(f["use_projection_weights"]),
        use_projection_bias=truth(f["use_projection_bias"]), use_layer_norm=truth(f["use_layer_norm"]),
        op="UNIDIRECTIONAL_SEQUENCE_LSTM" if seq_op else "LSTM", seq=T if seq_op else 1)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shape = (T, s["n_batch"], s["n_input"])
    xs = rng.uniform(-1.2, 1.2, shape).astype(np.float32)
    feeds = [xs] if seq_op else list(xs)
    want = run_int8(model, feeds, interpreter=True)
    got = run_int8(model, feeds, interpreter=False)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def _random_8x8_8_model(rng, B: int, I: int, H: int, P: int, cifg: bool, cell_clip: float, proj_clip: float):
    """A random LSTM op for the 8x8_8 kernel: int8 weights, int16 layer norm, int32 biases, 12 intermediates with
    random scales and zero points, int8 state and output."""
    def q8(name, shape, scale=1 / 127):
        return const(name, rng.integers(-127, 128, shape).astype(np.int8), scale, 0)

    slots: list = [None] * 24
    gates = "fgo" if cifg else "ifgo"
    for j, g in enumerate("ifco"):
        if g not in gates.replace("g", "c"):
            continue
        slots[1 + j] = q8(f"w{g}", (H, I), float(rng.uniform(0.005, 0.02)))
        slots[5 + j] = q8(f"r{g}", (H, P), float(rng.uniform(0.005, 0.02)))
        slots[12 + j] = const(f"b{g}", rng.integers(-20000, 20000, H).astype(np.int32), 1e-4, 0)
        slots[20 + j] = const(f"ln{g}", rng.integers(5000, 32767, H).astype(np.int16), float(rng.uniform(3e-5, 6e-5)))
    slots[16] = q8("proj", (P, H), float(rng.uniform(0.0005, 0.002)))
    slots[17] = const("proj_bias", rng.integers(-3000, 3000, P).astype(np.int32), 1e-4, 0)
    zp_x, zp_h = (int(v) for v in rng.integers(-20, 20, 2))
    slots[0] = const("x", None, float(rng.uniform(0.01, 0.03)), zp_x, type_name="INT8", shape=(B, I))
    slots[18] = const("h", None, float(rng.uniform(0.005, 0.01)), zp_h, type_name="INT8", shape=(B, P),
                      is_variable=True)
    slots[19] = const("c", None, 2.0**-15, 0, type_name="INT16", shape=(B, H), is_variable=True)
    inter = [const(f"m{k}", None, float(rng.uniform(0.02, 0.1)), int(rng.integers(-5, 5)), type_name="INT16",
                   shape=()) for k in range(12)]
    out = const("y", None, float(rng.uniform(0.005, 0.01)), zp_h, type_name="INT8", shape=(B, P))
    opts = {"fused_activation_function": "TANH", "cell_clip": cell_clip, "proj_clip": proj_clip}
    return single_op_model("LSTM", slots, [out], opts, intermediates=inter, version=4)


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("seed", range(6))
def test_8x8_8_random_models_bit_exact_with_the_interpreter(seed):
    rng = np.random.default_rng(100 + seed)
    B, I, P = (int(v) for v in rng.integers(1, 7, 3))
    H = int(rng.integers(2, 9))  # layer norm over one cell would make every gate constant
    model = _random_8x8_8_model(rng, B, I, H, P, cifg=bool(rng.integers(2)),
                                cell_clip=float(rng.choice([0.0, 0.5, 2.0])), proj_clip=float(rng.choice([0.0, 0.4])))
    assert litert.load(model).ops[0].kernel.variant == "8x8_8"
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    m = litert.load(model)
    seen = set()
    for _ in range(10):
        x = rng.integers(-128, 128, (B, I)).astype(np.int8)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_array_equal(m(x), want)
        seen |= set(want.ravel().tolist())
    assert len(seen) > 3  # the outputs move (not a saturated model)


# ---- quant_basic_lstm_test.cc: the quantized BASIC LSTM (LSTM op, kernel_type BASIC) --------------------------
def _basic_lstm_model(B: int, I: int, H: int, w_scale: float, w_zp: int, weights, biases, prepend_noop: bool):
    """QuantizedLSTMOpModel: uint8 input / activation at 1/128 (zero point 128), uint8 weights, int32 biases at
    w_scale / 128, int16 state at 1/2048; outputs activation, state, concat_temp, activation_temp (graph outputs
    too), with an ADD of a zero input before the LSTM when ``prepend_noop``."""
    def u8(name, shape, variable=False):
        return const(name, None, 1 / 128, 128, type_name="UINT8", shape=shape, is_variable=variable)

    tensors = []

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    ops = []
    x = add(u8("input", (B, I)))
    inputs = [x]
    lstm_in = x
    if prepend_noop:
        z = add(u8("zero_input", (B, I)))
        s = add(u8("sum_out", (B, I)))
        inputs = [z, x]
        ops.append(OpSpec("ADD", [z, x], [s], {"fused_activation_function": "NONE"}))
        lstm_in = s
    h = add(u8("prev_output", (B, H), variable=True))
    w = add(const("weights", np.asarray(weights, np.uint8).reshape(4 * H, I + H), w_scale, w_zp))
    b = add(const("biases", np.asarray(biases, np.int32).reshape(4 * H), w_scale / 128, 0))
    c = add(const("prev_cell_state", None, 1 / 2048, 0, type_name="INT16", shape=(B, H), is_variable=True))
    outs = [add(u8("output", (B, H))),
            add(const("cell_state_out", None, 1 / 2048, 0, type_name="INT16", shape=(B, H))),
            add(u8("concat_temp", (B, I + H))),
            add(const("activation_temp", None, 1 / 128, 128, type_name="INT16", shape=(B, 4 * H)))]
    ops.append(OpSpec("LSTM", [lstm_in, h, w, b, c], outs,
                      {"fused_activation_function": "TANH", "kernel_type": "BASIC"}, version=2))
    return write_model(tensors, ops, inputs, outs), outs


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("prepend_noop", [False, True])
def test_basic_quantized_lstm(prepend_noop, engine):
    b = block("quant_basic_lstm_test", "BasicQuantizedLstmTest")
    s, a = b["scalars"], b["arrays"]
    weights, biases = next(c[2] for c in b["calls"] if c[0] == "QuantizedLSTMOpModel")
    B, I, H = s["numBatches"], s["inputSize"], s["outputSize"]
    model, _ = _basic_lstm_model(B, I, H, s["weightsScale"], s["weightsZeroPoint"], weights, biases, prepend_noop)
    inp = [np.asarray(v, np.uint8) for v in a["lstmInput"]]
    gold = [np.asarray(v, np.uint8) for v in a["lstmGoldenOutput"]]
    T = inp[0].size // I
    zero = np.full((B, I), 128, np.uint8)
    if engine:
        it = interpreter_class()(model_content=model)
        it.allocate_tensors()
        details = it.get_input_details()
    else:
        m = litert.load(model)
        op = m.ops[0]
        assert op.kind == "basic-uint8"
    for t in range(T):
        x = np.stack([inp[bb][t * I:(t + 1) * I] for bb in range(B)])
        want = np.stack([gold[bb][t * H:(t + 1) * H] for bb in range(B)])
        if engine:
            feeds = [zero, x] if prepend_noop else [x]
            for d, v in zip(details, feeds, strict=True):
                it.set_tensor(d["index"], v)
            it.invoke()
            got = it.get_tensor(it.get_output_details()[0]["index"])
        else:
            # the uint8 ADD of a zero input in front is the graph runner's, not a recurrent kernel; the LSTM op
            # gets what that ADD gives, its input unchanged
            got = op(x)[0] if prepend_noop else m(x)[0]
        np.testing.assert_array_equal(got, want, err_msg=f"step {t}")


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("seed", range(8))
def test_basic_quantized_lstm_random_bit_exact_with_the_interpreter(seed):
    """Random quantized BASIC cells: all four outputs (activation, state, concatenation, pre-activations) equal
    the interpreter's over 8 steps."""
    rng = np.random.default_rng(200 + seed)
    B, I, H = (int(v) for v in rng.integers(1, 6, 3))
    w = rng.integers(0, 256, 4 * H * (I + H))
    bias = rng.integers(-60000, 60000, 4 * H)
    model, _ = _basic_lstm_model(B, I, H, float(rng.uniform(0.002, 0.01)), int(rng.integers(80, 180)), w, bias,
                                 False)
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    m = litert.load(model)
    for _ in range(8):
        x = rng.integers(0, 256, (B, I)).astype(np.uint8)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        for g, w_ in zip(m(x), want, strict=True):
            np.testing.assert_array_equal(g, w_)


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
def test_basic_float_lstm_agrees_with_the_interpreter():
    """The float BASIC cell (float32 throughout) against the interpreter, state carried over 10 calls."""
    rng = np.random.default_rng(5)
    B, I, H = 3, 4, 5
    x_t = const("input", None, type_name="FLOAT32", shape=(B, I))
    tensors = [x_t, const("h", None, type_name="FLOAT32", shape=(B, H), is_variable=True),
               const("w", rng.normal(size=(4 * H, I + H)).astype(np.float32) * 0.5),
               const("b", rng.normal(size=4 * H).astype(np.float32) * 0.2),
               const("c", None, type_name="FLOAT32", shape=(B, H), is_variable=True)]
    outs = [const(n, None, type_name="FLOAT32", shape=shp) for n, shp in
            (("act", (B, H)), ("state", (B, H)), ("concat", (B, I + H)), ("pre", (B, 4 * H)))]
    model = write_model(tensors + outs, [OpSpec("LSTM", [0, 1, 2, 3, 4], [5, 6, 7, 8],
                                                {"fused_activation_function": "TANH", "kernel_type": "BASIC"},
                                                version=2)], [0], [5, 6, 7, 8])
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    m = litert.load(model)
    assert m.ops[0].kind == "basic-float"
    for _ in range(10):
        x = rng.normal(size=(B, I)).astype(np.float32)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        for g, d in zip(m(x), it.get_output_details(), strict=True):
            np.testing.assert_allclose(g, it.get_tensor(d["index"]), rtol=0, atol=1e-5)


# ---- lstm_test.cc: the sparse hybrid LSTM (CSR rows of 1 x 16 blocks) -------------------------------------------
def _sparse_lstm_model(a: dict, s: dict, *, flags_: dict, block: int = 16, asym: bool = False,
                       sparse_recurrent: bool = True) -> bytes:
    """HybridSparseLSTMOpModel: input and recurrent weights INT8 stored sparse (codes symmetric over the stored
    values), peepholes and projection dense INT8, float biases and layer-norm weights, states [n * batch];
    ``block=0`` stores every weight dense (the same model for the dense kernel)."""
    B, I, H, P = s["n_batch_"], s["n_input_"], s["n_cell_"], s["n_output_"]
    slots: list = [None] * 24

    def sparse_w(name, values, shape, sparse=True):
        dense = np.asarray(values, np.float32).reshape(shape)
        if not sparse or not block:  # block 0: every weight dense
            return weight(name, dense, "INT8", shape)
        sp = block_csr(dense, block)
        q, scale = tflite_symmetric_quantize(sp.compress(dense))
        return replace(const(name, sp.densify(np.asarray(q, np.int8), shape), float(scale), 0), sparsity=sp)

    for j, g in enumerate(("input", "forget", "cell", "output")):
        slots[1 + j] = sparse_w(f"input_to_{g}_weights", a[f"input_to_{g}_weights_"], (H, I))
        slots[5 + j] = sparse_w(f"recurrent_to_{g}_weights", a[f"recurrent_to_{g}_weights_"], (H, P),
                                sparse_recurrent)
        slots[12 + j] = const(f"{g}_gate_bias", np.float32(a[f"{g}_gate_bias_"]))
        slots[20 + j] = const(f"{g}_layer_norm", np.float32(a[f"{g}_layer_norm_weights_"]))
    if truth(flags_["use_peephole"]):
        for j, g in enumerate(("input", "forget", "output")):
            slots[9 + j] = weight(f"cell_to_{g}_weights", a[f"cell_to_{g}_weights_"], "INT8", (H,))
    slots[16] = weight("projection_weights", a["projection_weights_"], "INT8", (P, H))
    slots[0] = const("input", None, type_name="FLOAT32", shape=(B, I))
    slots[18] = const("output_state", None, type_name="FLOAT32", shape=(P * B,), is_variable=True)
    slots[19] = const("cell_state", None, type_name="FLOAT32", shape=(H * B,), is_variable=True)
    out = const("output", None, type_name="FLOAT32", shape=(B, P))
    opts = {"fused_activation_function": "TANH", "cell_clip": float(s["cell_clip_"]),
            "proj_clip": float(s["proj_clip_"]), "kernel_type": "FULL", "asymmetric_quantize_inputs": asym}
    return single_op_model("LSTM", slots, [out], opts, version=3 if asym else 2)


def _sparse_case():
    fixture = block("lstm_test", "NoCifgPeepholeProjectionNoClippingSparseLstmTest", "class")
    test = block("lstm_test", "HybridSparseLstmBlackBoxTest", suite="NoCifgPeepholeProjectionNoClippingSparseLstmTest")
    return fixture, test


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
def test_sparse_hybrid_lstm(engine):
    fixture, test = _sparse_case()
    a, s = fixture["arrays"], fixture["scalars"]
    assert test["arrays"]["block_size"] == [16] and test["arrays"]["traversal_order"] == [0, 1, 2]
    model = _sparse_lstm_model(a, s, flags_=flags(test))
    info = litert.read_model(model)
    assert info.tensors[info.ops[0].inputs[2]].sparsity is not None
    B, I, P = s["n_batch_"], s["n_input_"], s["n_output_"]
    inp = [flat(v) for v in a["sparse_layer_norm_lstm_input_"]]
    gold = [flat(v) for v in test["arrays"]["sparse_layer_norm_lstm_golden_output"]]
    T = inp[0].size // I
    xs = [np.stack([inp[b][t * I:(t + 1) * I] for b in range(B)]).astype(np.float32) for t in range(T)]
    want = [np.stack([gold[b][t * P:(t + 1) * P] for b in range(B)]) for t in range(T)]
    _check(run_steps(model, xs, interpreter=engine), want, 1e-5, "sparse hybrid lstm")


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("sparse_recurrent", [True, False])
def test_sparse_hybrid_lstm_follows_the_interpreter_where_it_differs_from_dense(asym, sparse_recurrent):
    """The sparse path's own arithmetic (no zero-point correction, the recurrent term at the input's scale) on
    random inputs with nonzero recurrent weights: fusedrnn within 1e-6 of the interpreter; with sparse recurrent
    weights the interpreter's dense kernel on the same weights gives other outputs. Asymmetric inputs are refused
    (LiteRT's row sums read the sparse weights as dense matrices)."""
    fixture, test = _sparse_case()
    a = dict(fixture["arrays"])
    s = fixture["scalars"]
    rng = np.random.default_rng(11)
    H, P = s["n_cell_"], s["n_output_"]
    for g in ("input", "forget", "cell", "output"):
        r = rng.normal(size=(H, P)) * 0.3
        r[rng.random(H) < 0.3] = 0  # rows without a stored block
        a[f"recurrent_to_{g}_weights_"] = r.reshape(-1).tolist()
    model = _sparse_lstm_model(a, s, flags_=flags(test), asym=asym, sparse_recurrent=sparse_recurrent)
    if asym:  # LiteRT computes row sums of the sparse weights as dense matrices (past their buffers): refused
        with pytest.raises(UnsupportedFeatureError):
            litert.load(model)
        return
    B, I = s["n_batch_"], s["n_input_"]
    xs = [(rng.normal(size=(B, I)) * 2).astype(np.float32) for _ in range(6)]
    want = run_steps(model, xs, interpreter=True)
    got = run_steps(model, xs, interpreter=False)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    if sparse_recurrent:
        dense = _sparse_lstm_model(a, s, flags_=flags(test), asym=asym, sparse_recurrent=False, block=0)
        other = run_steps(dense, xs, interpreter=True)
        assert max(float(np.abs(o - w).max()) for o, w in zip(other, want, strict=True)) > 1e-4


# ---- unidirectional_sequence_lstm_test.cc: IndyLSTM (diagonal recurrent weights) -------------------------------
INDY = list(itertools.product((False, True), (False, True), (False, True)))


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("use_cifg,use_peephole,asym", INDY,
                         ids=[f"cifg{int(c)}-peephole{int(p)}-asym{int(a)}" for c, p, a in INDY])
@pytest.mark.parametrize("name", ["HybridCheckThatDiagAndNonDiagRecurrentWeightsAreEqual",
                                  "CheckThatDiagAndNonDiagRecurrentWeightsAreEqual"])
def test_indy_lstm(name, use_cifg, use_peephole, asym, engine):
    """A diagonal-recurrence LSTM equals the LSTM with the same weights on a diagonal matrix (1e-3 hybrid with UINT8
    weights and float diagonal, 1e-6 float)."""
    b = block("unidirectional_sequence_lstm_test", name, suite="IndyLSTMOpTest")
    a, s = b["arrays"], b["scalars"]
    hybrid = name.startswith("Hybrid")
    if not hybrid:
        asym = False  # the float test passes asymmetric_quantize_inputs=false
    common = {k[:-2]: v for k, v in a.items() if k.endswith("()") and not k.startswith("SetRecurrent")}
    dense = dict(common, **{k[:-2]: v for k, v in a.items() if k.startswith("SetRecurrent") and "@" not in k})
    diag = dict(common, **{k[:-4]: v for k, v in a.items() if k.startswith("SetRecurrent") and k.endswith("@1")})
    kw = dict(n_batch=s["n_batch"], n_input=s["n_input"], n_cell=s["n_cell"], n_output=s["n_output"],
              use_cifg=use_cifg, use_peephole=use_peephole, use_projection_weights=False, use_projection_bias=False,
              weight_type="UINT8" if hybrid else "FLOAT32", op="UNIDIRECTIONAL_SEQUENCE_LSTM",
              time=s["sequence_length"], options={"asymmetric_quantize_inputs": asym})
    m_dense = lstm_float_model(dense, **kw)
    m_diag = lstm_float_model(diag, diagonal=True, recurrent_type="FLOAT32", **kw)
    x = flat(a["lstm_input"]).reshape(s["sequence_length"], s["n_batch"], s["n_input"]).astype(np.float32)
    (y_dense,) = run_steps(m_dense, [x], interpreter=engine)
    (y_diag,) = run_steps(m_diag, [x], interpreter=engine)
    _check([y_diag], [y_dense], 1e-3 if hybrid else 1e-6, name)


def _bi_rnn_arrays():
    a = block("bidirectional_sequence_rnn_test", None, "preamble")["arrays"]
    return {k: flat(v) for k, v in a.items()}


def _tile_batches(seq_values: np.ndarray, B: int, time_major: bool) -> np.ndarray:
    """[T, n] values repeated for every batch row, in the op's layout."""
    v = seq_values[:, None, :]
    return np.tile(v, (1, B, 1)) if time_major else np.tile(v.transpose(1, 0, 2), (B, 1, 1))


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
def test_bidirectional_rnn_reverse_inputs(engine):
    """ClosedBoxTestReverseInputs: the reversed sequence swaps the directions' goldens (each reversed in time)."""
    a = _bi_rnn_arrays()
    B, T, U, I = 2, 16, 16, 8
    model = bi_rnn_model(batches=B, seq=T, units=U, size=I, weights=a["weights"],
                         recurrent_weights=a["recurrent_weights"], bias=a["biases"], quantize=False, asym=False,
                         time_major=False, merge=False)
    x = a["rnn_input"][:T * I].reshape(T, I)[::-1]
    fw, bw = (a[k][:T * U].reshape(T, U)[::-1] for k in ("rnn_golden_bw_output", "rnn_golden_fw_output"))
    got = run_outputs(model, _tile_batches(x, B, False).astype(np.float32), interpreter=engine)
    _check(got, [_tile_batches(fw, B, False), _tile_batches(bw, B, False)], 1e-5, "reverse")


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
def test_bidirectional_rnn_end_to_end(engine):
    """EndToEndTest: 64 sequences one call after another (the hidden states carry over), fw + bw through the test's
    dense layer, against the goldens."""
    b = block("bidirectional_sequence_rnn_test", "EndToEndTest")
    a = _bi_rnn_arrays()
    s = b["scalars"]
    T, U, I, O, N = 4, 16, 8, s["output_size"], s["num_examples"]
    model = bi_rnn_model(batches=1, seq=T, units=U, size=I, weights=a["weights"],
                         recurrent_weights=a["recurrent_weights"], bias=a["biases"], quantize=False, asym=False,
                         time_major=False, merge=False)
    dnn_w = np.asarray(b["arrays"]["dnn_weights"], np.float32).reshape(U, O)
    dnn_b = np.asarray(b["arrays"]["dnn_biases"], np.float32)
    xs = a["endtoend_input"].reshape(N, 1, T, I).astype(np.float32)
    gold = a["golden_endtoend_output"].reshape(N, T, O)
    if engine:
        it = interpreter_class()(model_content=model)
        it.allocate_tensors()
    else:
        m = litert.load(model)
    for k in range(N):
        if engine:
            it.set_tensor(it.get_input_details()[0]["index"], xs[k])
            it.invoke()
            fw, bw = (it.get_tensor(d["index"]) for d in it.get_output_details())
        else:
            fw, bw = m(xs[k])
        y = (fw + bw).reshape(T, U).astype(np.float32) @ dnn_w + dnn_b
        _check([y], [gold[k]], 1e-5, f"example {k}")


_AUX = {  # (time_major, aux mode, feed regular input, feed aux input, directions checked)
    "ClosedBoxTestNoCrossLinkingRegularAndAuxInput": (True, "no_cross", True, True, "fb"),
    "ClosedBoxTestNoCrossLinkingRegularInputOnly": (True, "no_cross", True, False, "f"),
    "ClosedBoxTestNoCrossLinkingAuxInputOnly": (True, "no_cross", False, True, "b"),
    "ClosedBoxTestCrossLinkingAuxInputOnly": (False, "cross", False, True, "fb"),
    "ClosedBoxTestCrossLinkingAuxInputOnlyTimeMajor": (True, "cross", False, True, "f"),
}


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("name", list(_AUX))
def test_bidirectional_rnn_aux_input(name, engine):
    """The aux-input tests: without aux weights the backward cell reads the aux input (no cross-linking); with
    them (cross-linking) both cells add it, here with zero regular weights and the regular weights on the aux."""
    b = block("bidirectional_sequence_rnn_test", name)
    assert flags(b)["aux_input_mode"].endswith("CrossLinking")
    tm, mode, feed_x, feed_aux, check = _AUX[name]
    a = _bi_rnn_arrays()
    B, T, U, I = 2, 16, 16, 8
    w = a["weights"] if mode == "no_cross" else np.zeros_like(a["weights"])
    model = bi_rnn_model(batches=B, seq=T, units=U, size=I, weights=w, recurrent_weights=a["recurrent_weights"],
                         bias=a["biases"], quantize=False, asym=False, time_major=tm, merge=False, aux_size=I,
                         aux_mode=mode, aux_weights=a["weights"])
    seqv = a["rnn_input"][:T * I].reshape(T, I)
    zero = np.zeros_like(seqv)
    x = _tile_batches(seqv if feed_x else zero, B, tm).astype(np.float32)
    aux = _tile_batches(seqv if feed_aux else zero, B, tm).astype(np.float32)
    got = run_inputs(model, [x, aux], interpreter=engine)
    gold = {"f": a["rnn_golden_fw_output"], "b": a["rnn_golden_bw_output"]}
    for k, d in enumerate("fb"):
        if d in check:
            _check([got[k]], [_tile_batches(gold[d][:T * U].reshape(T, U), B, tm)], 1e-5, f"{name} {d}")


@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
@pytest.mark.parametrize("name,reg,aux", [("ClosedBoxTestCrossLinkingRegularAndAuxInputEvenSplit", 4, 4),
                                          ("ClosedBoxTestCrossLinkingRegularAndAuxInputUnevenSplit", 2, 6)])
def test_bidirectional_rnn_input_split(name, reg, aux, engine):
    """run_closedbox_test_with_input_split: each input row and each weight row split into a regular part and an
    aux part (cross-linking); the sums are the unsplit ones, so the goldens hold."""
    b = block("bidirectional_sequence_rnn_test", name)
    assert [v for k, v in b["flags"]] == [str(reg), str(aux)]
    a = _bi_rnn_arrays()
    B, T, U, I = 2, 16, 16, reg + aux
    wf = a["weights"].reshape(U, I)
    model = bi_rnn_model(batches=B, seq=T, units=U, size=reg, weights=wf[:, :reg],
                         recurrent_weights=a["recurrent_weights"], bias=a["biases"], quantize=False, asym=False,
                         time_major=False, merge=False, aux_size=aux, aux_mode="cross", aux_weights=wf[:, reg:])
    xin = a["rnn_input"][:T * I].reshape(T, I)
    x = _tile_batches(xin[:, :reg], B, False).astype(np.float32)
    ax = _tile_batches(xin[:, reg:], B, False).astype(np.float32)
    got = run_inputs(model, [x, ax], interpreter=engine)
    want = [_tile_batches(a[k][:T * U].reshape(T, U), B, False)
            for k in ("rnn_golden_fw_output", "rnn_golden_bw_output")]
    _check(got, want, 1e-5, name)


# ---- lstm_eval_test.cc: TestOneHybridAsymmLSTM (one hybrid step from a given cell state) ----------------------
@pytest.mark.parametrize("engine", ENGINES, ids=_ids)
def test_lstm_eval_one_hybrid_asymmetric_step(engine):
    """EvalHybrid on the test's int8 weights (scale 18, projection scale 1), float biases and layer norm, RELU,
    asymmetric inputs, from its cell state and a zero activation: cell (1e-2) and activation / output (2e-4)."""
    base = block("lstm_eval_test", "BaseLstmParam", "class")
    hyb = block("lstm_eval_test", "HybridLstmParam", "class")
    fn = block("lstm_eval_test", "TestOneHybridAsymmLSTM", "function")
    a = {**base["arrays"], **hyb["arrays"]}
    s = base["scalars"]
    B, I, H, P = s["n_batch_"], s["n_input_"], s["n_cell_"], s["n_output_"]
    w_scale = float(fn["scalars"]["kDefaultScale"])
    slots: list = [None] * 24
    for j, (g, f) in enumerate((("i", "input"), ("f", "forget"), ("c", "cell"), ("o", "output"))):
        slots[1 + j] = const(f"i2{g}", np.int8(a[f"i2{g}_"]).reshape(H, I), w_scale, 0)
        slots[5 + j] = const(f"r2{g}", np.int8(a[f"r2{g}_"]).reshape(H, P), w_scale, 0)
        slots[12 + j] = const(f"{f}_bias", np.float32(a[f"{f}_float_bias_"]))
        slots[20 + j] = const(f"{f}_layer_norm", np.float32(a[f"layer_norm_float_{f}_"]))
    slots[16] = const("projection", np.int8(a["projection_"]).reshape(P, H), 1.0, 0)
    slots[17] = const("projection_bias", np.float32(a["projection_float_bias_"]))
    slots[0] = const("input", None, type_name="FLOAT32", shape=(B, I))
    slots[18] = const("output_state", None, type_name="FLOAT32", shape=(B, P), is_variable=True)
    slots[19] = const("cell_state", None, type_name="FLOAT32", shape=(B, H), is_variable=True)
    out = const("output", None, type_name="FLOAT32", shape=(B, P))
    model = single_op_model("LSTM", slots, [out], {"fused_activation_function": "RELU", "kernel_type": "FULL",
                                                    "asymmetric_quantize_inputs": True}, version=3)
    x = np.float32(a["input_float_"]).reshape(B, I)
    c0 = np.float32(a["cell_state_"]).reshape(B, H)
    h0 = np.zeros((B, P), np.float32)
    if engine:
        it = interpreter_class()(model_content=model)
        it.allocate_tensors()
        idx = {d["name"]: d["index"] for d in it.get_tensor_details()}
        it.set_tensor(idx["output_state"], h0)
        it.set_tensor(idx["cell_state"], c0)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        y = it.get_tensor(it.get_output_details()[0]["index"])
        h, c = it.get_tensor(idx["output_state"]), it.get_tensor(idx["cell_state"])
    else:
        m = litert.load(model)
        m.ops[0].set_state(h0, c0)
        y = m(x)
        ((h, c),) = m.ops[0].state
    want_c, want_h = fn["arrays"]["expected_cell"], fn["arrays"]["expected_activation"]
    _check([c], [want_c], 1e-2, "cell")
    _check([h], [want_h], 2e-4, "activation")
    _check([y], [want_h], 2e-4, "output")


# ---- lstm_eval_test.cc: TestOneFullyQuantizedLSTM (EvalInteger8x8_16 with hand-set parameters) --------------
def test_lstm_eval_one_fully_quantized_step():
    """One 8x8_16 step with the test's IntegerLstmParameter (multipliers, effective biases, variance guards, cell
    scale 2^-11, cell clip) set by hand, from its cell state and an activation at zero point 50: the cell and
    the activation equal the test's (no model file can carry such parameters: no interpreter run)."""
    base = block("lstm_eval_test", "BaseLstmParam", "class")
    qp = block("lstm_eval_test", "QuantizedLstmParam", "class")
    fn = block("lstm_eval_test", "TestOneFullyQuantizedLSTM", "function")
    a = {**base["arrays"], **qp["arrays"]}
    s = base["scalars"]
    B, I, H, P = s["n_batch_"], s["n_input_"], s["n_cell_"], s["n_output_"]
    prefix = "integer_lstm_param_."
    fields = {k[len(prefix):]: v for k, v in qp["scalars"].items() if k.startswith(prefix)}
    fields.update({k[len("fill:" + prefix):]: v for k, v in qp["scalars"].items() if k.startswith("fill:" + prefix)})
    params = IntegerLstmParameter.from_fields(fields)
    slots: list = [None] * 24
    for j, (g, f) in enumerate((("i", "input"), ("f", "forget"), ("c", "cell"), ("o", "output"))):
        slots[1 + j] = const(f"i2{g}", np.int8(a[f"i2{g}_"]).reshape(H, I), 1.0, 0)
        slots[5 + j] = const(f"r2{g}", np.int8(a[f"r2{g}_"]).reshape(H, P), 1.0, 0)
        slots[12 + j] = const(f"{f}_bias", np.int32(a[f"{f}_gate_bias_"]), 1.0, 0)
        slots[20 + j] = const(f"{f}_layer_norm", np.int16(a[f"layer_norm_{f}_"]), 1.0, 0)
    slots[16] = const("projection", np.int8(a["projection_"]).reshape(P, H), 1.0, 0)
    slots[0] = const("input", None, 1.0, 0, type_name="INT8", shape=(B, I))
    slots[18] = const("activation", None, 1.0, 50, type_name="INT8", shape=(B, P), is_variable=True)
    slots[19] = const("cell", None, 2.0**-11, 0, type_name="INT16", shape=(B, H), is_variable=True)
    k = IntegerLstmKernel.from_parameters(LstmTensors(slots), params)
    x = np.int8(a["input_"]).reshape(1, B, I)
    h0 = np.zeros((B, P), np.int8)  # the activation buffer holds zeros (its zero point, 50, is the kernel's zp)
    c0 = np.int16(a["cell_"]).reshape(B, H)
    for engine in ("numpy", "auto"):
        y, (h, c) = k.run(x, (h0, c0), engine=engine)
        np.testing.assert_array_equal(c.reshape(-1), fn["arrays"]["expected_cell"])
        np.testing.assert_array_equal(h.reshape(-1), fn["arrays"]["expected_activation"])
        np.testing.assert_array_equal(y.reshape(-1), fn["arrays"]["expected_activation"])


@pytest.mark.skipif(not HAVE_INTERPRETER, reason="needs the LiteRT interpreter")
@pytest.mark.parametrize("with_output", [False, True])
def test_lstm_model_helper_writes_an_int16_output_state_with_an_int8_output(with_output):
    """litert.lstm_model on the integer test's tensors (INT16 output state): the output is INT8 (at the state's
    quantization, or the given output tensor's), and fusedrnn equals the interpreter on random inputs."""
    b = block("unidirectional_sequence_lstm_test", "NoCifg_NoPeephole_Projection_LayerNorm",
              suite="IntegerUnidirectionalSequenceLstmOpTest")
    a, s, f = b["arrays"], b["scalars"], flags(b)
    T, B, I = 6, s["n_batch"], s["n_input"]
    t = integer_lstm_model(a, a["ranges"], a["intermediates"], n_batch=B, n_input=I, n_cell=s["n_cell"],
                           n_output=s["n_output"], use_cifg=False, use_peephole=False, use_projection_weights=True,
                           use_projection_bias=False, use_layer_norm=truth(f["use_layer_norm"]),
                           op="UNIDIRECTIONAL_SEQUENCE_LSTM", seq=T, tensors_only=True)
    assert t["output_state"].type_name == "INT16"
    model = litert.lstm_model(t, {"time_major": True}, batch=B, time=T, output=t.output if with_output else None)
    info = litert.read_model(model)
    assert info.tensors[info.outputs[0]].type_name == "INT8"
    x = np.random.default_rng(3).integers(-128, 128, (T, B, I)).astype(np.int8)
    it = interpreter_class()(model_content=model)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_array_equal(litert.load(model)(x), it.get_tensor(it.get_output_details()[0]["index"]))


def test_sparse_metadata_round_trip_and_refusals():
    """block_csr / compress / densify round-trip a matrix; metadata that does not fit the tensor (an index past a
    dimension, segments past the indices, a value count that differs, a huge dense form) is a FileFormatError."""
    rng = np.random.default_rng(4)
    d = rng.integers(-5, 6, (6, 48)).astype(np.int8)
    d[:, 16:32] = 0
    d[3] = 0
    sp = block_csr(d, 16)
    v = sp.compress(d)
    assert v.size == 16 * sum(np.diff(sp.dim_metadata[1].segments))
    np.testing.assert_array_equal(sp.densify(v, d.shape), d)
    csr = sp.dim_metadata[1]
    bad_index = replace(sp, dim_metadata=(sp.dim_metadata[0], replace(csr, indices=(5,) + csr.indices[1:]),
                                          sp.dim_metadata[2]))
    bad_segments = replace(sp, dim_metadata=(sp.dim_metadata[0], replace(csr, segments=csr.segments[:-1] + (999,)),
                                             sp.dim_metadata[2]))
    for bad in (bad_index, bad_segments):
        with pytest.raises(FileFormatError):
            bad.densify(v, d.shape)
    with pytest.raises(FileFormatError):
        sp.densify(v[:-1], d.shape)
    with pytest.raises(FileFormatError):
        sp.positions((1 << 14, 1 << 14))
