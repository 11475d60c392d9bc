"""fusedrnn.ops float32 LSTM / GRU / RNN against outside oracles.

* onnxruntime (``ort_oracle.py``): random configurations over the whole ONNX option space (directions,
  sequence_lens with 0 / T / mixtures, initial states, B, clip, all 11 activations with alpha/beta lists that are
  full, too short or empty, input_forget, peepholes, linear_before_reset, opset 14 and 22), hand-picked edge
  cases and long sequences. layout=1 is exercised on the fusedrnn side by transposing the inputs and outputs of
  the same configuration (onnxruntime itself only runs layout 0).
* PyTorch: nn.LSTM / nn.GRU / nn.RNN (tanh, relu) with weights converted from ONNX gate order, forward and
  bidirectional, batch_first vs layout=1, bias on / off, packed variable-length batches vs sequence_lens, in
  float32 and float64.
* The ONNX backend node test cases (``onnx.backend.test.case.node``) for LSTM / GRU / RNN, including the
  batchwise (layout=1) cases onnxruntime cannot run.

The float64 reference in ``reference.py`` is checked against onnxruntime on the same configurations, so a
disagreement can be attributed: if the reference agrees with onnxruntime and fusedrnn does not, fusedrnn is wrong.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

try:
    import ort_oracle
    import reference as ref
except ImportError:  # tests/ imported as a package
    from tests import ort_oracle
    from tests import reference as ref

ATOL = 1e-5
RTOL = 1e-5
N_SEEDS = {"lstm": 200, "gru": 150, "rnn": 150}
SEED_BASE = {"lstm": 10_000, "gru": 20_000, "rnn": 30_000}
OUT_NAMES = {"lstm": ("Y", "Y_h", "Y_c"), "gru": ("Y", "Y_h"), "rnn": ("Y", "Y_h")}


@pytest.fixture(scope="module")
def ops():
    from fusedrnn import ops

    return ops


@pytest.fixture(scope="module")
def ort():
    return pytest.importorskip("onnxruntime")


def _seeds(counts):
    return [pytest.param(cell, seed, id=f"{cell}-{seed}") for cell, n in counts.items() for seed in range(n)]


def assert_outputs_close(actual, expected, cell, what, *, atol=ATOL, rtol=RTOL):
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for name, a, e in zip(OUT_NAMES[cell], actual, expected, strict=True):
        a = np.asarray(a)
        e = np.asarray(e)
        assert a.shape == e.shape, f"{name} shape {a.shape} != {e.shape}; {what}"
        err = np.max(np.abs(a.astype(np.float64) - e), initial=0.0)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol,
                                   err_msg=f"{name} (max abs err {err:.3g}); {what}")


def to_layout1(cell, args):
    """ONNX layout-0 inputs -> the same inputs in layout 1 (X [B, T, I], initial states [B, D, H])."""
    out = list(args)
    out[0] = np.ascontiguousarray(args[0].transpose(1, 0, 2))
    for k in (5, 6):
        if k < len(out) and out[k] is not None:
            out[k] = np.ascontiguousarray(out[k].transpose(1, 0, 2))
    return out


def from_layout1(outputs):
    Y, *states = outputs
    return (Y.transpose(1, 2, 0, 3), *[s.transpose(1, 0, 2) for s in states])


def run_ops(ops, cell, args, kw, layout):
    """fusedrnn.ops on a layout-0 configuration, run in ``layout``; outputs returned in layout 0."""
    fn = getattr(ops, cell)
    if layout == 0:
        return fn(*args, **kw)
    return from_layout1(fn(*to_layout1(cell, args), **{**kw, "layout": 1}))


def _mixed_case(names, rng):
    """Activation names in random letter case (LSTM and GRU names are case-insensitive in onnxruntime)."""
    out = []
    for n in names:
        k = rng.integers(3)
        out.append(n if k == 0 else n.lower() if k == 1 else n.upper())
    return out


# --------------------------------------------------------------------------------- random vs onnxruntime


def _ort_config(cell, seed):
    rng = np.random.default_rng(SEED_BASE[cell] + seed)
    args, kw, expected_ref = ref.stable_case(cell, rng)
    opset = int(rng.choice([14, 22]))
    layout = int(rng.random() < 0.3)
    ops_kw = dict(kw)
    if cell != "rnn" and "activations" in kw and rng.random() < 0.3:
        ops_kw["activations"] = _mixed_case(kw["activations"], rng)
    return args, kw, ops_kw, opset, layout, expected_ref


@pytest.mark.parametrize("cell,seed", _seeds(N_SEEDS))
def test_random_vs_ort(ops, ort, cell, seed):
    args, kw, ops_kw, opset, layout, _ = _ort_config(cell, seed)
    expected = ort_oracle.ORT[cell](*args, opset=opset, **kw)
    actual = run_ops(ops, cell, args, ops_kw, layout)
    for a in actual:
        assert a.dtype == np.float32
    what = f"seed={seed} opset={opset} ops layout={layout} ops attrs={ops_kw}; {ref.describe(cell, args, kw)}"
    assert_outputs_close(actual, expected, cell, what)


@pytest.mark.parametrize("cell,seed", _seeds({k: n // 2 for k, n in N_SEEDS.items()}))
def test_reference_agrees_with_ort(ort, cell, seed):
    """The oracle check: the float64 reference and onnxruntime agree on the random configurations."""
    args, kw, _, opset, _, expected_ref = _ort_config(cell, seed)
    got = ort_oracle.ORT[cell](*args, opset=opset, **kw)
    assert_outputs_close(got, expected_ref, cell, f"reference vs ORT, seed={seed}; {ref.describe(cell, args, kw)}")


# ------------------------------------------------------------------------------- hand-picked edge cases


def _arrays(cell, rng, T, Bn, I, H, D, *, b=True, h0=False, c0=False, P=False, scale=0.5):
    G = ref.GATES[cell]

    def u(lo, hi, *shape):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    args = [u(-1, 1, T, Bn, I), u(-scale, scale, D, G * H, I), u(-scale, scale, D, G * H, H),
            u(-0.5, 0.5, D, 2 * G * H) if b else None, None, u(-1, 1, D, Bn, H) if h0 else None]
    if cell == "lstm":
        args += [u(-2, 2, D, Bn, H) if c0 else None, u(-0.5, 0.5, D, 3 * H) if P else None]
    return args


def _edge_cases():
    cases = []

    def add(name, cell, shape, D=1, seq=None, arrays=None, **kw):
        cases.append(pytest.param(cell, shape, D, seq, arrays or {}, kw, id=f"{cell}-{name}"))

    for cell in ("lstm", "gru", "rnn"):
        add("tiny", cell, (1, 1, 1, 1))
        add("T1-B1-H1-bidir", cell, (1, 1, 3, 1), D=2, direction="bidirectional", arrays=dict(h0=True))
        add("H1-B4", cell, (5, 4, 2, 1), arrays=dict(h0=True))
        add("all-lengths-zero", cell, (4, 3, 2, 3), D=2, seq=[0, 0, 0], direction="bidirectional",
            arrays=dict(h0=True, c0=True))
        add("lengths-0-T-mixed-reverse", cell, (6, 5, 3, 4), seq=[6, 0, 3, 1, 6], direction="reverse",
            arrays=dict(h0=True, c0=True))
        add("lengths-full", cell, (4, 2, 3, 2), D=2, seq=[4, 4], direction="bidirectional")
        add("clip-small", cell, (5, 3, 3, 4), clip=0.1, arrays=dict(h0=True))
        add("thresholdedrelu-default-alpha", cell, (4, 3, 3, 4),
            activations={"lstm": ["Sigmoid", "ThresholdedRelu", "Tanh"], "gru": ["Sigmoid", "ThresholdedRelu"],
                         "rnn": ["ThresholdedRelu"]}[cell])
        add("affine-scaledtanh-defaults", cell, (4, 3, 3, 4), D=2, direction="bidirectional",
            activations={"lstm": ["Sigmoid", "Affine", "Tanh", "HardSigmoid", "ScaledTanh", "Softsign"],
                         "gru": ["Sigmoid", "Affine", "Sigmoid", "ScaledTanh"],
                         "rnn": ["Affine", "ScaledTanh"]}[cell],
            activation_alpha=[0.7])
        add("mixed-per-direction", cell, (5, 2, 3, 3), D=2, direction="bidirectional",
            activations={"lstm": ["HardSigmoid", "Elu", "LeakyRelu", "Sigmoid", "Softsign", "ScaledTanh"],
                         "gru": ["HardSigmoid", "LeakyRelu", "Sigmoid", "Elu"],
                         "rnn": ["LeakyRelu", "Elu"]}[cell],
            activation_alpha=[0.25, 0.5, 0.1], activation_beta=[0.45])
    add("H1-peepholes", "lstm", (3, 4, 2, 1), arrays=dict(P=True))
    add("H1-peepholes-bidir", "lstm", (3, 3, 2, 1), D=2, direction="bidirectional", arrays=dict(P=True))
    add("H1-sigmoid-candidate", "lstm", (3, 3, 2, 1), activations=["Sigmoid", "Sigmoid", "Tanh"])
    add("H2-peepholes", "lstm", (3, 4, 2, 2), arrays=dict(P=True))
    add("clip-does-not-clip-cell", "lstm", (4, 3, 2, 3), clip=1.0, arrays=dict(c0="big", P=True))
    add("input-forget-with-peepholes-and-bias", "lstm", (5, 3, 3, 4), D=2, direction="bidirectional",
        input_forget=1, arrays=dict(P=True, h0=True, c0=True))
    add("lowercase-names", "lstm", (3, 2, 2, 3), activations=["sigmoid", "TANH", "tanh"])
    add("lowercase-names", "gru", (3, 2, 2, 3), activations=["hardsigmoid", "TANH"])
    add("H1-sigmoid-candidate", "gru", (3, 3, 2, 1), activations=["Sigmoid", "Sigmoid"])
    add("lbr-reverse-lengths", "gru", (6, 4, 3, 5), seq=[6, 2, 0, 5], direction="reverse",
        linear_before_reset=1, arrays=dict(h0=True))
    add("schema-default-two-activations", "rnn", (4, 3, 2, 3), activations=["Relu", "Tanh"])
    return cases


@pytest.mark.parametrize("cell,shape,D,seq,arrays,kw", _edge_cases())
def test_edge_cases_vs_ort(ops, ort, cell, shape, D, seq, arrays, kw):
    T, Bn, I, H = shape
    rng = np.random.default_rng(7)
    big_c = arrays.get("c0") == "big"
    args = _arrays(cell, rng, T, Bn, I, H, D, b=True, h0=arrays.get("h0", False), c0=bool(arrays.get("c0")),
                   P=arrays.get("P", False))
    if big_c:
        args[6] = (np.sign(args[6]) * 10).astype(np.float32)
    if seq is not None:
        args[4] = np.array(seq, np.int32)
    expected = ort_oracle.ORT[cell](*args, **kw)
    what = f"{ref.describe(cell, args, kw)}"
    assert_outputs_close(ref.REFERENCE[cell](*args, **kw), expected, cell, "reference vs ORT; " + what)
    for layout in (0, 1):
        assert_outputs_close(run_ops(ops, cell, args, kw, layout), expected, cell, f"layout={layout}; {what}")


# ---------------------------------------------------------------------------------------- long sequences


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("T,direction", [(600, "bidirectional"), (512, "forward")])
def test_long_sequence_vs_ort(ops, ort, cell, T, direction):
    rng = np.random.default_rng({"lstm": 1, "gru": 2, "rnn": 3}[cell] * 1000 + T)
    D = 2 if direction == "bidirectional" else 1
    args = _arrays(cell, rng, T, 3, 3, 2, D, h0=True, c0=True, P=True, scale=0.8)
    args[4] = np.array([T, T // 2 + 17, 0 if D == 2 else 1], np.int32)
    kw = {"direction": direction, "hidden_size": 2}
    if cell == "lstm":
        kw.update(activations=["Sigmoid", "Tanh", "Softsign"] * D)
    elif cell == "gru":
        kw.update(linear_before_reset=int(D == 2), clip=2.0)
    else:
        kw.update(activations=["ScaledTanh"] * D, activation_alpha=[0.9, 1.1], activation_beta=[1.2])
    expected = ort_oracle.ORT[cell](*args, **kw)
    what = ref.describe(cell, args, kw)
    assert_outputs_close(run_ops(ops, cell, args, kw, 0), expected, cell, what)
    assert_outputs_close(run_ops(ops, cell, args, kw, 1), expected, cell, "layout=1; " + what)


# ------------------------------------------------------------------------------------------------ PyTorch

TORCH_SEEDS = {"lstm": 40, "gru": 40, "rnn": 40}
# ONNX gate blocks in PyTorch's order: LSTM ONNX (i, o, f, c) -> torch (i, f, g, o); GRU (z, r, h) -> (r, z, n)
TORCH_PERM = {"lstm": [0, 2, 3, 1], "gru": [1, 0, 2], "rnn": [0]}


def _to_torch_order(a, cell, H):
    blocks = [a[k * H : (k + 1) * H] for k in range(ref.GATES[cell])]
    return np.concatenate([blocks[k] for k in TORCH_PERM[cell]], axis=0)


def _torch_run(torch, cell, args, kw, dtype, nonlinearity):
    """PyTorch on a layout-0 ONNX configuration; returns ONNX-shaped layout-0 outputs."""
    X, W, R, B, seq, h0 = args[:6]
    c0 = args[6] if cell == "lstm" else None
    T, Bn, I = X.shape
    H = R.shape[-1]
    D = W.shape[0]
    layout = kw.get("layout", 0)
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[cell]
    extra = {"nonlinearity": nonlinearity} if cell == "rnn" else {}
    mod = cls(I, H, num_layers=1, bias=B is not None, batch_first=bool(layout), bidirectional=D == 2, **extra)
    mod = mod.to(tdt)
    G = ref.GATES[cell]
    with torch.no_grad():
        for d in range(D):
            sfx = "_reverse" if d == 1 else ""
            getattr(mod, f"weight_ih_l0{sfx}").copy_(torch.from_numpy(_to_torch_order(W[d], cell, H)))
            getattr(mod, f"weight_hh_l0{sfx}").copy_(torch.from_numpy(_to_torch_order(R[d], cell, H)))
            if B is not None:
                getattr(mod, f"bias_ih_l0{sfx}").copy_(torch.from_numpy(_to_torch_order(B[d, : G * H], cell, H)))
                getattr(mod, f"bias_hh_l0{sfx}").copy_(torch.from_numpy(_to_torch_order(B[d, G * H :], cell, H)))
    x = torch.from_numpy(np.ascontiguousarray(X.transpose(1, 0, 2)) if layout else X)
    zeros = np.zeros((D, Bn, H), dtype)
    hx = torch.from_numpy(h0 if h0 is not None else zeros)
    if cell == "lstm":
        hx = (hx, torch.from_numpy(c0 if c0 is not None else zeros))
    with torch.no_grad():
        if seq is not None:
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.from_numpy(seq.astype(np.int64)),
                                                             batch_first=bool(layout), enforce_sorted=False)
            out, hn = mod(packed, hx)
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=bool(layout), total_length=T)
        else:
            out, hn = mod(x, hx)
    out = out.numpy()
    if layout:
        out = out.transpose(1, 0, 2)
    Y = out.reshape(T, Bn, D, H).transpose(0, 2, 1, 3)
    if cell == "lstm":
        return Y, hn[0].numpy(), hn[1].numpy()
    return Y, hn.numpy()


def _torch_config(cell, seed, dtype):
    rng = np.random.default_rng(40_000 + 1000 * list(TORCH_SEEDS).index(cell) + seed)
    T = int(rng.choice([1, 2, 4, 7, 10]))
    Bn = int(rng.choice([1, 2, 3, 5]))
    I = int(rng.choice([1, 3, 6]))
    H = int(rng.choice([1, 2, 5, 8]))
    D = int(rng.choice([1, 2]))
    G = ref.GATES[cell]

    def u(lo, hi, *shape):
        return rng.uniform(lo, hi, shape).astype(dtype)

    args = [u(-1, 1, T, Bn, I), u(-0.6, 0.6, D, G * H, I), u(-0.6, 0.6, D, G * H, H),
            u(-0.5, 0.5, D, 2 * G * H) if rng.random() < 0.7 else None,
            rng.integers(1, T + 1, Bn).astype(np.int32) if rng.random() < 0.4 else None,
            u(-1, 1, D, Bn, H) if rng.random() < 0.6 else None]
    if cell == "lstm":
        args += [u(-1, 1, D, Bn, H) if rng.random() < 0.6 else None, None]
    kw = {"direction": "bidirectional" if D == 2 else "forward"}
    nonlinearity = "tanh"
    if cell == "gru":
        kw["linear_before_reset"] = 1
    if cell == "rnn" and rng.random() < 0.5:
        nonlinearity = "relu"
        kw["activations"] = ["Relu"] * D
    layout = int(rng.random() < 0.5)
    return args, kw, nonlinearity, layout


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("cell,seed", _seeds(TORCH_SEEDS))
def test_random_vs_torch(ops, cell, seed, dtype):
    torch = pytest.importorskip("torch")
    args, kw, nonlinearity, layout = _torch_config(cell, seed, dtype)
    kw_l = {**kw, "layout": layout}
    expected = _torch_run(torch, cell, args, kw_l, dtype, nonlinearity)
    actual = run_ops(ops, cell, args, kw, layout)
    for a in actual:
        assert a.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    what = f"torch seed={seed} {nonlinearity} batch_first={layout}; {ref.describe(cell, args, kw)}"
    assert_outputs_close(actual, expected, cell, what, atol=tol, rtol=tol)


# ------------------------------------------------------------------------------- ONNX backend node cases

_RNN_OPS = ("LSTM", "GRU", "RNN")
_INPUT_PARAMS = {
    "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
    "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
}
_OUTPUT_INDEX = {"Y": 0, "Y_h": 1, "Y_c": 2}


def _backend_node_cases():
    """The onnx backend node test cases of LSTM / GRU / RNN (regenerated in memory, as collect_testcases does).

    Importing just the lstm / gru / rnn generator modules runs their exports (~0.2 s instead of ~5 s for every
    operator); collect_testcases() is the fallback when the private case list is not available."""
    try:
        node = importlib.import_module("onnx.backend.test.case.node")
        for m in ("lstm", "gru", "rnn"):
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
        cases = getattr(node, "_NodeTestCases", None)
        if cases is None:
            cases = node.collect_testcases()
    except ImportError:
        return []
    seen = {}
    for c in cases:
        if c.model.graph.node[0].op_type in _RNN_OPS:
            seen.setdefault(c.name, c)
    return list(seen.values())


_NODE_CASES = _backend_node_cases()


def _node_call(case):
    import onnx

    nd = case.model.graph.node[0]
    inputs, outputs = case.data_sets[0]
    present = [n for n in nd.input if n]
    values = dict(zip(present, inputs, strict=True))
    args = [values.get(n) if n else None for n in nd.input]
    kwargs = {}
    for attr in nd.attribute:
        v = onnx.helper.get_attribute_value(attr)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        kwargs[attr.name] = v
    named_out = [(k, n) for k, n in enumerate(nd.output) if n]
    expected = {["Y", "Y_h", "Y_c"][k]: out for (k, _), out in zip(named_out, outputs, strict=True)}
    return nd.op_type.lower(), args, kwargs, expected


@pytest.mark.skipif(not _NODE_CASES, reason="onnx backend node test cases not available")
@pytest.mark.parametrize("case", _NODE_CASES, ids=[c.name for c in _NODE_CASES])
def test_onnx_backend_node_case(ops, case):
    cell, args, kwargs, expected = _node_call(case)
    assert expected
    got = getattr(ops, cell)(*args, **kwargs)
    got64 = getattr(ops, cell)(*[None if a is None else a.astype(np.float64) if a.dtype.kind == "f" else a
                                 for a in args], **kwargs)
    want_ref = ref.REFERENCE[cell](*args, **kwargs)
    for name, exp in expected.items():
        k = _OUTPUT_INDEX[name]
        assert got[k].dtype == np.float32
        np.testing.assert_allclose(got[k], exp, rtol=case.rtol, atol=case.atol, err_msg=f"{case.name} {name}")
        np.testing.assert_allclose(got64[k], exp, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name} {name} (float64)")
        np.testing.assert_allclose(want_ref[k], exp, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name} {name} (reference)")


def test_backend_node_cases_found():
    pytest.importorskip("onnx")
    names = {c.name for c in _NODE_CASES}
    # onnx >= 1.16 ships at least these (batchwise = layout 1, which onnxruntime cannot run)
    for n in ("test_lstm_defaults", "test_lstm_with_peepholes", "test_lstm_batchwise", "test_gru_defaults",
              "test_gru_seq_length", "test_gru_batchwise", "test_simple_rnn_defaults", "test_simple_rnn_batchwise"):
        assert n in names, sorted(names)
