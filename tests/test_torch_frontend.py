"""fusedrnn.frontends.torch: PyTorch nn.LSTM / nn.GRU / nn.RNN <-> fusedrnn layers.

* ``from_torch`` against the module's own outputs and final states (float32, atol = rtol = 1e-5) over random
  configurations: LSTM with and without ``proj_size``, GRU, RNN tanh / relu; forward and bidirectional;
  ``num_layers`` 1-3; ``batch_first``; ``bias=False``; zero and given initial states; T = 1, B = 1, H = 1 edges.
* float64 modules against fusedrnn's fp64 target (1e-12); nn.LSTMCell / GRUCell / RNNCell single steps.
* ``to_torch`` from layers built directly in canonical form (not via from_torch), against the built module.
* bad input: wrong module types, ``expected`` mismatches, every option PyTorch cannot express.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fusedrnn  # noqa: E402
from fusedrnn import GRU, LSTM, RNN, ConversionError, Stack  # noqa: E402
from fusedrnn.frontends.torch import from_torch, to_torch  # noqa: E402
from fusedrnn.layers import RecurrentLayer  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
KINDS = ("lstm", "lstm_proj", "gru", "rnn_tanh", "rnn_relu")


def _np(t):
    return t.detach().cpu().numpy()


def make_module(kind, rng, *, I, H, L, bidirectional, batch_first, bias, dtype=torch.float32):
    torch.manual_seed(int(rng.integers(2**31)))
    kw = dict(input_size=I, hidden_size=H, num_layers=L, bias=bias, batch_first=batch_first,
              bidirectional=bidirectional)
    if kind.startswith("lstm"):
        proj = int(rng.integers(1, H)) if kind == "lstm_proj" else 0  # torch needs 0 < proj_size < hidden_size
        m = torch.nn.LSTM(proj_size=proj, **kw)
    elif kind == "gru":
        m = torch.nn.GRU(**kw)
    else:
        m = torch.nn.RNN(nonlinearity=kind[4:], **kw)
    m = m.to(dtype)
    with torch.no_grad():  # spread the parameters a little wider than the default init, biases non-zero
        for p in m.parameters():
            p.uniform_(-0.7, 0.7)
    return m.eval()


def random_config(seed):
    rng = np.random.default_rng(1000 + seed)
    kind = KINDS[seed % len(KINDS)]
    edge = seed % 7 == 3
    cfg = dict(
        I=1 if edge else int(rng.integers(1, 6)),
        H=(2 if kind == "lstm_proj" else 1) if (edge or seed % 11 == 5) else int(rng.integers(2, 7)),
        L=int(rng.integers(1, 4)),
        bidirectional=bool(rng.random() < 0.5),
        batch_first=bool(rng.random() < 0.5),
        bias=bool(rng.random() < 0.75),
    )
    T = 1 if (edge or seed % 5 == 1) else int(rng.integers(2, 8))
    B = 1 if (edge or seed % 4 == 2) else int(rng.integers(2, 5))
    with_state = bool(rng.random() < 0.6)
    return rng, kind, cfg, T, B, with_state


def torch_states(module, rng, B, dtype=np.float32):
    D = 2 if module.bidirectional else 1
    Hp = module.proj_size if getattr(module, "proj_size", 0) else module.hidden_size
    h0 = rng.uniform(-1, 1, (module.num_layers * D, B, Hp)).astype(dtype)
    if isinstance(module, torch.nn.LSTM):
        c0 = rng.uniform(-1, 1, (module.num_layers * D, B, module.hidden_size)).astype(dtype)
        return h0, c0
    return h0, None


def fused_states(h0, c0, L, D):
    """Torch [L*D, B, H] states -> a fusedrnn layer's (or Stack's) state."""
    per = []
    for k in range(L):
        h = h0[k * D:(k + 1) * D]
        per.append(h if c0 is None else (h, c0[k * D:(k + 1) * D]))
    return per[0] if L == 1 else per


def fused_final(state, L, is_lstm):
    """A fusedrnn final state -> torch-style (h_n [L*D, B, Hp], c_n or None)."""
    per = [state] if L == 1 else state
    if is_lstm:
        return np.concatenate([s[0] for s in per]), np.concatenate([s[1] for s in per])
    return np.concatenate(per), None


def run_both(module, layer, x, h0, c0):
    xt = torch.from_numpy(x)
    if h0 is None:
        y_t, st_t = module(xt)
        st = None
    else:
        hx = (torch.from_numpy(h0), torch.from_numpy(c0)) if c0 is not None else torch.from_numpy(h0)
        y_t, st_t = module(xt, hx)
        D = 2 if module.bidirectional else 1
        st = fused_states(h0, c0, module.num_layers, D)
    y, st_f = layer(x, st)
    is_lstm = isinstance(module, torch.nn.LSTM)
    hn, cn = fused_final(st_f, module.num_layers, is_lstm)
    ht = _np(st_t[0]) if is_lstm else _np(st_t)
    ct = _np(st_t[1]) if is_lstm else None
    return (y, _np(y_t)), (hn, ht), (cn, ct)


# ------------------------------------------------------------------------------------------- from_torch

@pytest.mark.parametrize("seed", range(60))
def test_from_torch_matches_module(seed):
    rng, kind, cfg, T, B, with_state = random_config(seed)
    module = make_module(kind, rng, **cfg)
    layer = from_torch(module)
    if cfg["L"] > 1:
        assert isinstance(layer, Stack) and len(layer) == cfg["L"]
        layers = layer.layers
    else:
        assert isinstance(layer, RecurrentLayer)
        layers = [layer]
    for lay in layers:
        assert lay.merge == "concat" and lay.batch_first == cfg["batch_first"]
        assert lay.direction == ("bidirectional" if cfg["bidirectional"] else "forward")
        assert (lay.b_x is None) == (not cfg["bias"])
    shape = (B, T, cfg["I"]) if cfg["batch_first"] else (T, B, cfg["I"])
    x = rng.uniform(-1.5, 1.5, shape).astype(np.float32)
    h0, c0 = torch_states(module, rng, B) if with_state else (None, None)
    with torch.no_grad():
        (y, yt), (hn, ht), (cn, ct) = run_both(module, layer, x, h0, c0)
    msg = f"{kind} {cfg} T={T} B={B} state={with_state}"
    assert y.shape == yt.shape, msg
    np.testing.assert_allclose(y, yt, **TOL, err_msg=msg)
    np.testing.assert_allclose(hn, ht, **TOL, err_msg=msg)
    if ct is not None:
        np.testing.assert_allclose(cn, ct, **TOL, err_msg=msg)


@pytest.mark.parametrize("kind", KINDS)
def test_from_torch_float64_against_fp64_target(kind):
    rng = np.random.default_rng(7)
    module = make_module(kind, rng, I=3, H=4, L=2, bidirectional=True, batch_first=False, bias=True,
                         dtype=torch.float64)
    layer = from_torch(module)
    assert all(lay.W.dtype == np.float64 for lay in layer.layers)
    layer = layer.to("fp64")
    x = rng.uniform(-1, 1, (5, 2, 3))
    h0, c0 = torch_states(module, rng, 2, np.float64)
    with torch.no_grad():
        (y, yt), (hn, ht), (cn, ct) = run_both(module, layer, x, h0, c0)
    np.testing.assert_allclose(y, yt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hn, ht, rtol=1e-12, atol=1e-12)
    if ct is not None:
        np.testing.assert_allclose(cn, ct, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_cells_single_step(cell, bias):
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    if cell == "lstm":
        m = torch.nn.LSTMCell(3, 4, bias=bias)
    elif cell == "gru":
        m = torch.nn.GRUCell(3, 4, bias=bias)
    else:
        m = torch.nn.RNNCell(3, 4, bias=bias, nonlinearity=cell[4:])
    layer = from_torch(m)
    assert layer.direction == "forward" and layer.num_directions == 1
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    with torch.no_grad():
        if cell == "lstm":
            c0 = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
            h, c = m(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
            y, (hn, cn) = layer(x[None], (h0[None], c0[None]))
            np.testing.assert_allclose(cn[0], _np(c), **TOL)
        else:
            h = m(torch.from_numpy(x), torch.from_numpy(h0))
            y, hn = layer(x[None], h0[None])
    np.testing.assert_allclose(hn[0], _np(h), **TOL)
    np.testing.assert_allclose(y[0], _np(h), **TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_from_torch_half_precision_widens_exactly(dtype):
    torch.manual_seed(0)
    m = torch.nn.LSTM(2, 3, bidirectional=True).to(dtype)
    layer = from_torch(m)
    assert layer.W.dtype == np.float32
    np.testing.assert_array_equal(layer.W[1], _np(m.weight_ih_l0_reverse.float()))
    np.testing.assert_array_equal(layer.b_h[0], _np(m.bias_hh_l0.float()))


def test_from_torch_gate_order_and_options():
    torch.manual_seed(0)
    m = torch.nn.GRU(2, 3)
    layer = from_torch(m)
    assert layer.linear_before_reset is True
    W = _np(m.weight_ih_l0)
    np.testing.assert_array_equal(layer.W[0, 0:3], W[3:6])  # canonical z <- torch block 1
    np.testing.assert_array_equal(layer.W[0, 3:6], W[0:3])  # canonical r <- torch block 0
    np.testing.assert_array_equal(layer.W[0, 6:9], W[6:9])
    r = from_torch(torch.nn.RNN(2, 3, nonlinearity="relu"))
    assert [a.name for a in r.activations[0]] == ["Relu"]
    p = from_torch(torch.nn.LSTM(2, 4, proj_size=2, bias=False))
    assert p.proj_W.shape == (1, 2, 4) and p.proj_b is None and p.R.shape == (1, 16, 2)
    assert p.b_x is None and p.b_h is None


# ------------------------------------------------------------------------------------------- to_torch

def random_layer(cell, rng, *, I, H, D, proj=0, lbr=True, act="Tanh", bias="double", batch_first=False):
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    Hp = proj or H
    W = rng.uniform(-0.7, 0.7, (D, G * H, I)).astype(np.float32)
    R = rng.uniform(-0.7, 0.7, (D, G * H, Hp)).astype(np.float32)
    b_x = None if bias == "none" else rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32)
    b_h = rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32) if bias == "double" else None
    common = dict(direction="bidirectional" if D == 2 else "forward", batch_first=batch_first, merge="concat")
    if cell == "lstm":
        pw = rng.uniform(-0.7, 0.7, (D, proj, H)).astype(np.float32) if proj else None
        return LSTM(W, R, b_x, b_h, proj_W=pw, **common)
    if cell == "gru":
        return GRU(W, R, b_x, b_h, linear_before_reset=lbr, **common)
    return RNN(W, R, b_x, b_h, activations=[act], **common)


@pytest.mark.parametrize("seed", range(12))
def test_to_torch_module_matches_layer(seed):
    rng = np.random.default_rng(500 + seed)
    cell = ("lstm", "gru", "rnn")[seed % 3]
    D = 1 + seed % 2
    bias = ("double", "single", "none")[seed % 3 if seed < 9 else 0]
    layer = random_layer(cell, rng, I=3, H=4, D=D, proj=2 if (cell == "lstm" and seed % 4 == 0) else 0,
                         act="Relu" if seed % 5 == 2 else "Tanh", bias=bias, batch_first=bool(seed % 2))
    module = to_torch(layer)
    assert next(module.parameters()).dtype == torch.float32
    assert module.bias == (bias != "none")
    x = rng.uniform(-1, 1, (2, 5, 3) if layer.batch_first else (5, 2, 3)).astype(np.float32)
    with torch.no_grad():
        yt, st = module(torch.from_numpy(x))
    y, sf = layer(x)
    np.testing.assert_allclose(y, _np(yt), **TOL)
    if cell == "lstm":
        np.testing.assert_allclose(sf[0], _np(st[0]), **TOL)
        np.testing.assert_allclose(sf[1], _np(st[1]), **TOL)
    else:
        np.testing.assert_allclose(sf, _np(st), **TOL)


def test_to_torch_stack_and_float64_layer():
    rng = np.random.default_rng(9)
    torch.manual_seed(9)
    m = torch.nn.LSTM(3, 5, num_layers=3, bidirectional=True, proj_size=2, batch_first=True)
    stack = from_torch(m)
    m2 = stack.to_torch()
    assert m2.num_layers == 3 and m2.proj_size == 2 and m2.batch_first and m2.bidirectional
    for (n1, p1), (n2, p2) in zip(m.named_parameters(), m2.named_parameters(), strict=True):
        assert n1 == n2 and torch.equal(p1, p2), n1
    lay = random_layer("gru", rng, I=2, H=3, D=1)
    lay64 = GRU(lay.W.astype(np.float64), lay.R.astype(np.float64), lay.b_x.astype(np.float64),
                lay.b_h.astype(np.float64), linear_before_reset=True)
    assert all(p.dtype == torch.float32 for p in to_torch(lay64).parameters())


def test_to_torch_single_direction_merge_sum_is_fine():
    lay = random_layer("rnn", np.random.default_rng(1), I=2, H=3, D=1)
    lay.merge = "sum"  # identical output to concat for one direction
    assert isinstance(to_torch(lay), torch.nn.RNN)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("D", [1, 2])
@pytest.mark.parametrize("batch_first", [False, True])
def test_to_torch_accepts_merge_stack(cell, D, batch_first):
    """merge="stack" (from_onnx's) changes the output layout only: the module's concatenated output holds the same
    values, and the parameters are those of the merge="concat" layer."""
    rng = np.random.default_rng(40 + D + 2 * batch_first)
    concat = random_layer(cell, rng, I=3, H=4, D=D, batch_first=batch_first)
    stacked = copy.copy(concat)
    stacked.merge = "stack"
    module = to_torch(stacked)
    for (n1, p1), (n2, p2) in zip(to_torch(concat).named_parameters(), module.named_parameters(), strict=True):
        assert n1 == n2 and torch.equal(p1, p2), n1
    T, B = 5, 2
    x = rng.uniform(-1, 1, (B, T, 3) if batch_first else (T, B, 3)).astype(np.float32)
    with torch.no_grad():
        yt = _np(module(torch.from_numpy(x))[0])
    y, _ = stacked(x)
    assert y.shape == ((B, T, D, 4) if batch_first else (T, D, B, 4))
    as_concat = y.reshape(B, T, D * 4) if batch_first else y.transpose(0, 2, 1, 3).reshape(T, B, D * 4)
    np.testing.assert_allclose(as_concat, yt, **TOL)


def test_to_torch_from_onnx_layer():
    """A layer imported from ONNX (merge="stack") converts to PyTorch as it is."""
    rng = np.random.default_rng(8)
    m = torch.nn.GRU(3, 4, bidirectional=True).eval()
    spec = from_torch(m).to_onnx()
    layer = GRU.from_onnx(spec["W"], spec["R"], spec["B"], **spec["attributes"])
    assert layer.merge == "stack"
    m2 = to_torch(layer)
    x = rng.uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(_np(m2(torch.from_numpy(x))[0]), _np(m(torch.from_numpy(x))[0]), **TOL)


def test_converter_type_errors_are_framework_type_errors():
    from fusedrnn.errors import FrameworkTypeError

    for call in (lambda: from_torch(torch.nn.Linear(2, 3)), lambda: to_torch(torch.nn.LSTM(2, 3))):
        with pytest.raises(FrameworkTypeError) as ei:
            call()
        assert isinstance(ei.value, ConversionError) and isinstance(ei.value, TypeError)


# ------------------------------------------------------------------------------------------- bad input

def test_from_torch_wrong_module_type():
    with pytest.raises(ConversionError, match="nn.LSTM, nn.GRU or nn.RNN.*Linear") as ei:
        from_torch(torch.nn.Linear(2, 3))
    assert isinstance(ei.value, TypeError)
    with pytest.raises(ConversionError, match="Sequential"):
        LSTM.from_torch(torch.nn.Sequential(torch.nn.LSTM(2, 3)))
    with pytest.raises(ConversionError, match="ndarray"):
        from_torch(np.zeros(3))


@pytest.mark.parametrize("cls, module, words", [
    (GRU, lambda: torch.nn.LSTM(2, 3), "expected a PyTorch nn.GRU, got nn.LSTM"),
    (LSTM, lambda: torch.nn.RNN(2, 3), "expected a PyTorch nn.LSTM, got nn.RNN"),
    (RNN, lambda: torch.nn.GRUCell(2, 3), "expected a PyTorch nn.RNN, got nn.GRU"),
])
def test_from_torch_expected_kind_mismatch(cls, module, words):
    with pytest.raises(ConversionError, match=words):
        cls.from_torch(module())


def test_from_torch_any_kind_with_base_class():
    assert isinstance(RecurrentLayer.from_torch(torch.nn.GRU(2, 3)), GRU)
    assert isinstance(fusedrnn.LSTM.from_torch(torch.nn.LSTM(2, 3, num_layers=2)), Stack)


def _lstm(rng, **kw):
    base = random_layer("lstm", rng, I=2, H=3, D=kw.pop("D", 1))
    opts = dict(direction=base.direction, batch_first=False, merge="concat")
    opts.update(kw)
    return LSTM(base.W, base.R, base.b_x, base.b_h, **opts)


H3 = np.full((1, 3, 3), 0.1, np.float32)


@pytest.mark.parametrize("make, word", [
    (lambda r: _lstm(r, P=H3), "peepholes"),
    (lambda r: _lstm(r, layer_norm=np.ones((1, 4, 3), np.float32)), "layer_norm"),
    (lambda r: _lstm(r, coupling="input_forget"), "coupling='input_forget'"),
    (lambda r: _lstm(r, coupling="cifg"), "coupling='cifg'"),
    (lambda r: _lstm(r, cell_clip=3.0), "cell_clip=3.0"),
    (lambda r: _lstm(r, clip=2.0), "clip=2.0"),
    (lambda r: LSTM(r.uniform(size=(1, 12, 2)), r.uniform(size=(1, 12, 2)), proj_W=r.uniform(size=(1, 2, 3)),
                    proj_b=np.zeros((1, 2))), "projection bias"),
    (lambda r: LSTM(r.uniform(size=(1, 12, 2)), r.uniform(size=(1, 12, 2)), proj_W=r.uniform(size=(1, 2, 3)),
                    proj_clip=1.0), "proj_clip"),
    (lambda r: LSTM(r.uniform(size=(1, 12, 2)), r.uniform(size=(1, 12))), "diagonal"),
    (lambda r: _lstm(r, activations=["Sigmoid", "Tanh", "Relu"]), "activations"),
    (lambda r: _lstm(r, D=2, direction="bidirectional", merge="sum"), "merge='sum'"),
    (lambda r: _lstm(r, D=2, direction="bidirectional", merge="mul"), "merge='mul'"),
    (lambda r: _lstm(r, D=2, direction="bidirectional", merge="ave"), "merge='ave'"),
    (lambda r: _lstm(r, direction="reverse", output_order="processing"), "output_order='processing'"),
    (lambda r: _lstm(r, direction="reverse"), "direction='reverse'"),
    (lambda r: random_layer("gru", r, I=2, H=3, D=1, lbr=False), "linear_before_reset=False"),
    (lambda r: GRU(r.uniform(size=(1, 9, 2)), r.uniform(size=(1, 9, 3)), linear_before_reset=True,
                   activations=["HardSigmoid", "Tanh"]), "activations"),
    (lambda r: random_layer("rnn", r, I=2, H=3, D=1, act="Sigmoid"), "activations"),
    (lambda r: RNN(r.uniform(size=(2, 3, 2)), r.uniform(size=(2, 3, 3)), direction="bidirectional",
                   activations=[["Tanh"], ["Relu"]]), "activations"),
])
def test_to_torch_unsupported_option_named(make, word):
    layer = make(np.random.default_rng(0))
    with pytest.raises(ConversionError, match="cannot express") as ei:
        to_torch(layer)
    assert word in str(ei.value)


def test_to_torch_names_every_problem():
    r = np.random.default_rng(0)
    layer = _lstm(r, P=H3, cell_clip=1.0, clip=2.0)
    with pytest.raises(ConversionError) as ei:
        layer.to_torch()
    for word in ("peepholes", "cell_clip", "clip=2.0"):
        assert word in str(ei.value)


def test_to_torch_stack_mismatch():
    r = np.random.default_rng(0)
    a = random_layer("gru", r, I=2, H=3, D=1)
    b = GRU(r.uniform(size=(1, 6, 3)), r.uniform(size=(1, 6, 2)), linear_before_reset=True)
    with pytest.raises(ConversionError, match=r"layers\[1\]: hidden_size 2"):
        to_torch(Stack([a, b]))
    with pytest.raises(ConversionError, match="expected a fusedrnn LSTM, GRU, RNN or Stack"):
        to_torch(torch.nn.LSTM(2, 3))


def test_to_torch_does_not_alias_layer_arrays():
    r = np.random.default_rng(0)
    layer = random_layer("lstm", r, I=2, H=3, D=1)
    module = to_torch(layer)
    before = layer.W.copy()
    with torch.no_grad():
        module.weight_ih_l0.add_(1.0)
    np.testing.assert_array_equal(layer.W, before)
    assert copy.copy(layer).W is layer.W  # (sanity: copy.copy shares arrays; to_torch must not)
