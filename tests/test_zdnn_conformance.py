"""The 166 zDNN conformance cases (conformance/zdnn/README.md) through fusedrnn.zdnn's C-style API, under the
upstream tolerance rules, for every pre-transformed type the upstream test runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_dir
from test_zdnn_oracle import dlf16_round_ref, make_zt, read_out, tolerance_failures

import fusedrnn.zdnn as z

INDEX_CASES = []
try:
    from conftest import SHARED

    _idx = json.loads((SHARED / "conformance" / "zdnn" / "INDEX.json").read_text())
    INDEX_CASES = [c["case"] for c in _idx["cases"]]
except (OSError, ValueError):
    INDEX_CASES = []


def load(case: str):
    d = shared_dir("conformance", "zdnn")
    meta = json.loads((d / f"{case}.json").read_text())
    arrays = dict(np.load(d / f"{case}.npz"))
    return meta, arrays


def cases(prefix: str) -> list[str]:
    return [c for c in INDEX_CASES if c.startswith(prefix)] or [pytest.param("none", marks=pytest.mark.skip)]


def test_index_has_166_cases():
    d = shared_dir("conformance", "zdnn")
    idx = json.loads((d / "INDEX.json").read_text())
    assert idx["total"] == 166 == len(idx["cases"])


# ---- RNN ------------------------------------------------------------------------------------------------------
DIRECTIONS = {"FWD": z.FWD, "BWD": z.BWD, "BIDIR": z.BIDIR}


def run_rnn_layer(kind, pretype, x_zt, p, direction, hn_all, prev_bidir):
    """One zdnn_lstm / zdnn_gru call; ``p`` holds h0 [c0] W Wb R Rb (gate-major); returns (hn, cf) ztensors."""
    dirs, G, f, h = p["W"].shape
    rtype = z.RNN_TYPE_LSTM if kind == "lstm" else z.RNN_TYPE_GRU
    prev = z.PREV_LAYER_BIDIR if prev_bidir else z.PREV_LAYER_NONE
    ts, b = x_zt.transformed_desc.dim4, x_zt.transformed_desc.dim2
    h0 = make_zt(z.ZDNN_3DS, pretype, p["h0"].shape, p["h0"])
    W = make_zt(z.ZDNN_3DS, pretype, (dirs, f, h), *p["W"].transpose(1, 0, 2, 3), concat=rtype | prev | z.USAGE_WEIGHTS)
    Wb = make_zt(z.ZDNN_2DS, pretype, (dirs, h), *p["Wb"].transpose(1, 0, 2), concat=rtype | prev | z.USAGE_BIASES)
    R = make_zt(z.ZDNN_3DS, pretype, (dirs, h, h), *p["R"].transpose(1, 0, 2, 3),
                concat=rtype | prev | z.USAGE_HIDDEN_WEIGHTS)
    Rb = make_zt(z.ZDNN_2DS, pretype, (dirs, h), *p["Rb"].transpose(1, 0, 2),
                 concat=rtype | prev | z.USAGE_HIDDEN_BIASES)
    hn = make_zt(z.ZDNN_4DS, pretype, (ts if hn_all else 1, dirs, b, h), transform=False)
    if kind == "lstm":
        c0 = make_zt(z.ZDNN_3DS, pretype, p["c0"].shape, p["c0"])
        cf = make_zt(z.ZDNN_4DS, pretype, (1, dirs, b, h), transform=False)
        st = z.lstm(x_zt, h0, c0, W, Wb, R, Rb, DIRECTIONS[direction], None, hn, cf)
    else:
        cf = None
        st = z.gru(x_zt, h0, W, Wb, R, Rb, DIRECTIONS[direction], None, hn)
    assert st == z.ZDNN_OK
    return hn, cf


def _tol(meta, pretype):
    t = meta["tolerance"]
    if "telum_I_or_no_parmblkformat_1" in t:
        t = t["telum_I_or_no_parmblkformat_1"]
    return t[pretype.lower()]


RNN_CASES = cases("testDriver_zdnn_lstm") + cases("testDriver_zdnn_gru")


@pytest.mark.parametrize("pretype", ["FP32", "FP16", "BFLOAT"])
@pytest.mark.parametrize("case", RNN_CASES)
def test_rnn_case(case, pretype):
    meta, a = load(case)
    kind = "lstm" if meta["op"] == "zdnn_lstm" else "gru"
    tol = _tol(meta, pretype)
    x = make_zt(z.ZDNN_3DS, pretype, a["x"].shape, a["x"])
    if "layers" not in meta:
        p = {k: a[k] for k in ("h0", "c0", "W", "Wb", "R", "Rb") if k in a}
        hn, cf = run_rnn_layer(kind, pretype, x, p, meta["direction"], meta["hn_output"] == "all_timesteps", False)
        checks = [(hn, a["expected_hn"])] + ([(cf, a["expected_cf"])] if cf is not None else [])
    else:
        checks = []
        for layer in meta["layers"]:
            k = layer["layer"]
            p = {n: a[f"layer{k}_{n}"] for n in ("h0", "c0", "W", "Wb", "R", "Rb") if f"layer{k}_{n}" in a}
            hn, cf = run_rnn_layer(kind, pretype, x, p, layer["direction"], True, layer["prev_layer_bidir"])
            checks.append((hn, a[f"layer{k}_expected_hn"]))
            if cf is not None:
                checks.append((cf, a[f"layer{k}_expected_cf"]))
            x = hn  # the next layer reads this layer's output ztensor as is
    for zt, expected in checks:
        got = read_out(zt, pretype)
        assert got.shape == expected.shape
        assert tolerance_failures(got, expected, pretype, tol) == 0


@pytest.mark.parametrize("case", RNN_CASES)
def test_rnn_case_op_boundary_error_band(case):
    """FP32: the op-boundary DLFLOAT16 model stays within the spec's measured error band (README, check 4)."""
    meta, a = load(case)
    kind = "lstm" if meta["op"] == "zdnn_lstm" else "gru"
    x = make_zt(z.ZDNN_3DS, "FP32", a["x"].shape, a["x"])
    if "layers" in meta:
        bound, worst = 1.95e-3, 0.0
        for layer in meta["layers"]:
            k = layer["layer"]
            p = {n: a[f"layer{k}_{n}"] for n in ("h0", "c0", "W", "Wb", "R", "Rb") if f"layer{k}_{n}" in a}
            hn, _ = run_rnn_layer(kind, "FP32", x, p, layer["direction"], True, layer["prev_layer_bidir"])
            worst = max(worst, np.abs(read_out(hn, "FP32").view(np.float32) - a[f"layer{k}_expected_hn"]).max())
            x = hn
    else:
        bound = 9.8e-4 if kind == "lstm" else 4.9e-4
        p = {k: a[k] for k in ("h0", "c0", "W", "Wb", "R", "Rb") if k in a}
        hn, _ = run_rnn_layer(kind, "FP32", x, p, meta["direction"], meta["hn_output"] == "all_timesteps", False)
        worst = np.abs(read_out(hn, "FP32").view(np.float32) - a["expected_hn"]).max()
    assert worst <= bound * 1.01


# ---- matmul, bcast, transpose -----------------------------------------------------------------------------------
LAYOUTS = {"ZDNN_1D": z.ZDNN_1D, "ZDNN_2D": z.ZDNN_2D, "ZDNN_2DS": z.ZDNN_2DS, "ZDNN_3DS": z.ZDNN_3DS}
MATMUL_CASES = cases("testDriver_zdnn_matmul")


@pytest.mark.parametrize("pretype", ["FP32", "FP16", "BFLOAT"])
@pytest.mark.parametrize("case", MATMUL_CASES)
def test_matmul_case(case, pretype):
    meta, a = load(case)
    lay = meta["layouts"]
    ins = [make_zt(LAYOUTS[lay[k]], pretype, a[k].shape, a[k]) for k in ("a", "b", "c")]
    out = make_zt(LAYOUTS[lay["out"]], pretype, a["expected"].shape, transform=False)
    op = z.MatmulOp(meta["op_type_code"])
    if meta["op"] == "zdnn_matmul_op":
        st = z.matmul_op(*ins, op, out)
    elif meta["op"] == "zdnn_matmul_bcast_op":
        st = z.matmul_bcast_op(*ins, z.MatmulBcastOp(int(op)), out)
    else:
        st = z.matmul_transpose_op(*ins, meta["transpose_a"], meta["transpose_b"], op, out)
    assert st == z.ZDNN_OK
    got = read_out(out, pretype)
    assert tolerance_failures(got, a["expected"], pretype, meta["tolerance"][pretype.lower()]) == 0
    if pretype == "FP32" and op != z.MATMUL_OP_ADDITION:  # compare ops: exactly the expected 0/1
        np.testing.assert_array_equal(got.view(np.float32), a["expected"])


# ---- quantized matmul -------------------------------------------------------------------------------------------
def _quantize_ref(r, s, o):
    """The README's QUANTIZE: min(max(roundf(r/s + o), -128), 127), float32, roundf = half away from zero."""
    v = (np.asarray(r, np.float32) / np.float32(s) + np.float32(o)).astype(np.float32)
    return np.clip(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)), -128, 127)


def _qzt(pre_layout, pretype, shape, qtype, scale, offset):
    pre = z.init_pre_transformed_desc(pre_layout, pretype, None, *shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, qtype, tf) == z.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, scale, offset, zt) == z.ZDNN_OK
    return zt


def _lay(arr, vector=False):
    if vector:
        return z.ZDNN_1D if arr.ndim == 1 else z.ZDNN_2DS
    return z.ZDNN_2D if arr.ndim == 2 else z.ZDNN_3DS


def run_quantized(meta, a, dequantize, work_area=None):
    q = meta["quant_params"]
    otf = meta["on_the_fly"]
    A = _qzt(_lay(a["a"]), z.FP32, a["a"].shape, z.QUANTIZED_DLFLOAT16 if otf else z.QUANTIZED_INT8,
             q["a"]["scale"], q["a"]["offset"])
    assert z.transform_quantized_ztensor(A, False, meta["clip_min"], meta["clip_max"], a["a"]) == z.ZDNN_OK
    B = _qzt(_lay(a["b"]), z.INT8, a["b"].shape, z.QUANTIZED_WEIGHTS_INT8, q["b"]["scale"], q["b"]["offset"])
    assert z.transform_quantized_ztensor(B, False, -128, 127, a["b_int8"]) == z.ZDNN_OK
    C = _qzt(_lay(a["c"], True), z.FP32, a["c"].shape, z.QUANTIZED_INT8, q["c"]["scale"], q["c"]["offset"])
    assert z.transform_quantized_ztensor(C, False, -128, 127, a["c"]) == z.ZDNN_OK
    Y = _qzt(_lay(a["expected"]), z.FP32, a["expected"].shape, z.QUANTIZED_DLFLOAT16, q["y"]["scale"],
             q["y"]["offset"])
    st = z.quantized_matmul_op(A, B, C, z.MatmulOp(meta["op_type_code"]), meta["clip_min"], meta["clip_max"],
                               meta["disable_clipping"], dequantize, False, work_area, Y)
    assert st == z.ZDNN_OK
    out = np.zeros(a["expected"].shape, np.float32)
    assert z.transform_origtensor(Y, out) == z.ZDNN_OK
    return out


QUANT_CASES = [c for c in cases("testDriver_zdnn_quantized_matmul_op__quantized")]


@pytest.mark.parametrize("dequantize", [False, True])
@pytest.mark.parametrize("case", QUANT_CASES)
def test_quantized_matmul_case(case, dequantize):
    meta, a = load(case)
    out = run_quantized(meta, a, dequantize)
    exp = a["expected"]
    if meta["op_type"] == "ADDITION":
        if dequantize:
            out = _quantize_ref(out, meta["quant_params"]["y"]["scale"], meta["quant_params"]["y"]["offset"])
        assert np.all(np.abs(np.abs(out) - np.abs(exp)) <= 1)
    else:
        assert np.mean(out != exp) < 0.01


def test_quantized_documented_decomposition():
    """The walk-through in the upstream test's comment block, through the op with hand-set ztensors."""
    meta, a = load("testDriver_zdnn_quantized_matmul_op__documented_decomposition")
    q = meta["quant_params"]
    A = _qzt(z.ZDNN_2D, z.INT8, (2, 4), z.QUANTIZED_INT8, q["a"]["scale"], q["a"]["offset"])
    B = _qzt(z.ZDNN_2D, z.INT8, (4, 3), z.QUANTIZED_WEIGHTS_INT8, q["b"]["scale"], q["b"]["offset"])
    C = _qzt(z.ZDNN_1D, z.INT8, (3,), z.QUANTIZED_INT8, q["c"]["scale"], q["c"]["offset"])
    Y = _qzt(z.ZDNN_2D, z.FP32, (2, 3), z.QUANTIZED_DLFLOAT16, q["y"]["scale"], q["y"]["offset"])
    for zt, v in ((A, a["a_q"]), (B, a["b_q"]), (C, a["c_q"])):
        assert z.transform_quantized_ztensor(zt, False, -128, 127, v.astype(np.int8)) == z.ZDNN_OK
    for dequantize in (False, True):
        Y.is_transformed = False
        assert z.quantized_matmul_op(A, B, C, z.MATMUL_OP_ADDITION, -128, 127, False, dequantize, False, None,
                                     Y) == z.ZDNN_OK
        out = np.zeros((2, 3), np.float32)
        assert z.transform_origtensor(Y, out) == z.ZDNN_OK
        qy = np.rint(a["qy"])  # [[8, 3, 0], [37, 43, 33]] (the comment's 44 is a typo, README)
        expect = qy * np.float32(q["y"]["scale"]) if dequantize else qy
        np.testing.assert_allclose(out, dlf16_round_ref(expect.astype(np.float32)), rtol=2**-9)
