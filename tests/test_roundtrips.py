"""Exact round trips between ONNX, fusedrnn's canonical form, PyTorch and Keras, and framework layers exported
through ``to_onnx_model()`` run in onnxruntime.

Round trips compare with ``np.array_equal`` (bit-identical): a conversion that reorders or transposes must not
change a single bit. Where a round trip cannot be exact by construction it says so and checks what can be:
PyTorch's double bias through Keras's single LSTM / SimpleRNN bias becomes ``bias_ih + bias_hh`` (float32 sum),
and ``bias=False`` through ONNX comes back as zero biases (ONNX's B is optional but fusedrnn writes it).

onnxruntime does not run ``layout=1``, so layers are exported with ``batch_first=False`` for the ORT checks and
Y [T, D, B, H] compared with the framework's [B, T, D*H] (or [T, B, D*H]) output.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")

from fusedrnn import GRU, LSTM, RNN  # noqa: E402
from fusedrnn.layers import RecurrentLayer  # noqa: E402

try:
    import ort_oracle
except ImportError:  # tests/ imported as a package
    from tests import ort_oracle

TOL = dict(rtol=1e-5, atol=1e-5)
pytestmark = [pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword"),
              pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")]


def with_options(layer, **options):
    """A shallow copy of ``layer`` with some options changed (the arrays are shared)."""
    new = copy.copy(layer)
    for k, v in options.items():
        setattr(new, k, v)
    return new


def onnx_roundtrip(layer):
    """layer -> to_onnx() arrays -> from_onnx(), and the same through a serialized single-node model."""
    spec = layer.to_onnx()
    a = type(layer).from_onnx(spec["W"], spec["R"], spec["B"], spec.get("P"), **spec["attributes"])
    import onnx

    b = RecurrentLayer.from_onnx(onnx.load_from_string(layer.to_onnx_model().SerializeToString()))
    return a, b


def same(a, b):
    return (a is None and b is None) or (a is not None and b is not None and a.dtype == b.dtype
                                         and np.array_equal(a, b))


# ------------------------------------------------------------------------------------------- canonical <-> ONNX

@pytest.mark.parametrize("seed", range(6))
def test_canonical_onnx_canonical_exact(seed):
    rng = np.random.default_rng(seed)
    cell = ("lstm", "gru", "rnn")[seed % 3]
    D = 1 + seed % 2
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    W, R = rng.standard_normal((D, G * 5, 3)).astype(np.float32), rng.standard_normal((D, G * 5, 5)).astype(
        np.float32)
    bx, bh = rng.standard_normal((2, D, G * 5)).astype(np.float32)
    kw = dict(direction="bidirectional" if D == 2 else "reverse", merge="stack", batch_first=bool(seed % 2))
    if cell == "lstm":
        layer = LSTM(W, R, bx, bh, P=rng.standard_normal((D, 3, 5)).astype(np.float32), **kw)
    elif cell == "gru":
        layer = GRU(W, R, bx, bh, linear_before_reset=bool(seed % 2), activations=["HardSigmoid", "Softsign"], **kw)
    else:
        layer = RNN(W, R, bx, bh, activations=["Relu"], clip=2.5, **kw)
    for back in onnx_roundtrip(layer):
        for name in ("W", "R", "b_x", "b_h") + (("P",) if cell == "lstm" else ()):
            assert same(getattr(layer, name), getattr(back, name)), name
        assert (back.direction, back.batch_first, back.merge, back.clip) == (layer.direction, layer.batch_first,
                                                                            "stack", layer.clip)
        assert [[(a.name, np.float32(a.alpha), np.float32(a.beta)) for a in p] for p in back.activations] == \
            [[(a.name, np.float32(a.alpha), np.float32(a.beta)) for a in p] for p in layer.activations]


# ------------------------------------------------------------------------------------------- PyTorch

def _torch_module(torch, kind, *, bidirectional, batch_first, bias, seed, num_layers=1):
    torch.manual_seed(seed)
    kw = dict(input_size=3, hidden_size=4, num_layers=num_layers, bias=bias, batch_first=batch_first,
              bidirectional=bidirectional)
    m = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}.get(kind)
    m = m(**kw) if m else torch.nn.RNN(nonlinearity=kind[4:], **kw)
    return m.eval()


def _params_equal(torch, m1, m2, *, zero_bias_ok=False):
    p1, p2 = dict(m1.named_parameters()), dict(m2.named_parameters())
    for name, p in p2.items():
        if name not in p1:
            assert zero_bias_ok and name.startswith("bias") and not torch.any(p), name
            continue
        assert p.dtype == p1[name].dtype and torch.equal(p, p1[name]), name
    assert set(p1) <= set(p2)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_torch_fused_onnx_fused_torch_bit_identical(kind, bidirectional, bias):
    torch = pytest.importorskip("torch")
    m = _torch_module(torch, kind, bidirectional=bidirectional, batch_first=bidirectional, bias=bias, seed=1)
    layer = RecurrentLayer.from_torch(m)
    for back in onnx_roundtrip(layer):
        # ONNX's importer keeps ONNX's conventions (merge "stack"); to_torch accepts it: the same values as
        # PyTorch's concatenated output in another layout
        assert back.merge == "stack"
        m2 = back.to_torch()
        assert m2.batch_first == m.batch_first and m2.bidirectional == m.bidirectional
        _params_equal(torch, m, m2, zero_bias_ok=not bias)


def test_torch_stack_roundtrip_bit_identical():
    torch = pytest.importorskip("torch")
    torch.manual_seed(4)
    m = torch.nn.LSTM(3, 6, num_layers=3, proj_size=2, bidirectional=True, batch_first=True)
    _params_equal(torch, m, RecurrentLayer.from_torch(m).to_torch())


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_torch_fused_keras_fused_torch(kind, bidirectional):
    torch = pytest.importorskip("torch")
    pytest.importorskip("keras")
    m = _torch_module(torch, kind, bidirectional=bidirectional, batch_first=True, bias=True, seed=2)
    layer = RecurrentLayer.from_torch(m)
    kl = layer.to_keras()
    back = type(layer).from_keras(kl)
    m2 = back.to_torch()
    p1, p2 = dict(m.named_parameters()), dict(m2.named_parameters())
    for name in p1:
        if kind == "gru" or name.startswith("weight"):  # reset-after GRU keeps the double bias: all exact
            assert torch.equal(p1[name], p2[name]), name
    if kind != "gru":  # Keras LSTM / SimpleRNN have one bias: b_ih + b_hh (a float32 sum), b_hh = 0
        for name in p1:
            if name.startswith("bias_ih"):
                hh = name.replace("bias_ih", "bias_hh")
                assert torch.equal(p2[name], p1[name] + p1[hh]) and not torch.any(p2[hh]), name
    x = np.random.default_rng(0).uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(m2(torch.from_numpy(x))[0].numpy(), m(torch.from_numpy(x))[0].numpy(), **TOL)


# ------------------------------------------------------------------------------------------- Keras

def _keras_layer(keras, kind, rng, *, bidirectional=False, merge_mode="concat", go_backwards=False, use_bias=True,
                 reset_after=True, activation="tanh"):
    cls = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "rnn": keras.layers.SimpleRNN}[kind]
    kw = dict(units=4, return_sequences=True, use_bias=use_bias, activation=activation)
    if kind == "gru":
        kw["reset_after"] = reset_after
    layer = keras.layers.Bidirectional(cls(**kw), merge_mode=merge_mode) if bidirectional else cls(
        go_backwards=go_backwards, **kw)
    layer.build((None, None, 3))
    layer.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in layer.get_weights()])
    return layer


KERAS_CASES = [
    ("lstm", {}), ("lstm", {"use_bias": False}), ("lstm", {"go_backwards": True}),
    ("lstm", {"activation": "hard_sigmoid"}),
    ("gru", {}), ("gru", {"reset_after": False}), ("gru", {"reset_after": False, "use_bias": False}),
    ("gru", {"go_backwards": True, "activation": "softsign"}),
    ("rnn", {}), ("rnn", {"activation": "relu"}), ("rnn", {"go_backwards": True, "use_bias": False}),
    ("rnn", {"activation": "leaky_relu"}), ("rnn", {"activation": "linear"}), ("gru", {"activation": "elu"}),
    ("lstm", {"activation": "softplus"}),
] + [(k, {"bidirectional": True, "merge_mode": mm}) for k in ("lstm", "gru", "rnn")
     for mm in ("concat", "sum", "mul", "ave", None)]


@pytest.mark.parametrize("kind, opts", KERAS_CASES)
def test_keras_fused_keras_identical_weights(kind, opts):
    keras = pytest.importorskip("keras")
    kl = _keras_layer(keras, kind, np.random.default_rng(3), **opts)
    layer = RecurrentLayer.from_keras(kl)
    kl2 = layer.to_keras()
    assert type(kl2) is type(kl)
    if opts.get("bidirectional"):
        assert kl2.merge_mode == kl.merge_mode
    else:
        assert kl2.go_backwards == kl.go_backwards
    w1, w2 = kl.get_weights(), kl2.get_weights()
    assert len(w1) == len(w2)
    for a, b in zip(w1, w2, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # and through ONNX (go_backwards output order has no ONNX form: export the time-ordered layer)
    if not opts.get("go_backwards"):
        for back in onnx_roundtrip(layer):
            back = with_options(back, merge=layer.merge, batch_first=True)
            w3 = back.to_keras().get_weights()
            if not opts.get("use_bias", True):  # ONNX's B comes back as zeros: Keras gets a zero bias
                assert all(not np.any(w) for w in w3[2::3]) and len(w3) == len(w1) * 3 // 2
                w3 = [w for k, w in enumerate(w3) if k % 3 != 2]
            for a, b in zip(w1, w3, strict=True):
                assert np.array_equal(a, b)


# ------------------------------------------------------------------------------------------- onnxruntime

def _ort(layer, x_tbi, h0=None, c0=None):
    """Run ``layer.to_onnx_model()`` (layer must be batch_first=False) in onnxruntime."""
    pytest.importorskip("onnxruntime")
    model = layer.to_onnx_model()
    T, B, _ = x_tbi.shape
    D, Hp, H = layer.num_directions, layer.output_size, layer.hidden_size
    feeds = {"X": x_tbi.astype(np.float32), "sequence_lens": np.full(B, T, np.int32),
             "initial_h": np.zeros((D, B, Hp), np.float32) if h0 is None else h0.astype(np.float32)}
    if layer.cell == "lstm":
        feeds["initial_c"] = np.zeros((D, B, H), np.float32) if c0 is None else c0.astype(np.float32)
    return ort_oracle.run_model(model, feeds)


def _concat(Y):
    """ONNX Y [T, D, B, H] -> [T, B, D*H]."""
    T, D, B, H = Y.shape
    return Y.transpose(0, 2, 1, 3).reshape(T, B, D * H)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_torch_module_through_onnx_runs_the_same_in_ort(kind, bidirectional):
    torch = pytest.importorskip("torch")
    m = _torch_module(torch, kind, bidirectional=bidirectional, batch_first=True, bias=kind != "rnn_relu", seed=5)
    rng = np.random.default_rng(5)
    D = 2 if bidirectional else 1
    x = rng.uniform(-1, 1, (3, 6, 3)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (D, 3, 4)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (D, 3, 4)).astype(np.float32)
    with torch.no_grad():
        hx = (torch.from_numpy(h0), torch.from_numpy(c0)) if kind == "lstm" else torch.from_numpy(h0)
        yt, st = m(torch.from_numpy(x), hx)
    layer = with_options(RecurrentLayer.from_torch(m), batch_first=False)
    out = _ort(layer, x.transpose(1, 0, 2), h0, c0 if kind == "lstm" else None)
    np.testing.assert_allclose(_concat(out[0]).transpose(1, 0, 2), yt.numpy(), **TOL)
    np.testing.assert_allclose(out[1], (st[0] if kind == "lstm" else st).numpy(), **TOL)
    if kind == "lstm":
        np.testing.assert_allclose(out[2], st[1].numpy(), **TOL)


@pytest.mark.parametrize("kind, opts", [c for c in KERAS_CASES if not c[1].get("go_backwards")]
                         + [("gru", {"go_backwards": True})])
def test_keras_layer_through_onnx_runs_the_same_in_ort(kind, opts):
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(6)
    kl = _keras_layer(keras, kind, rng, **opts)
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    yk = kl(keras.ops.convert_to_tensor(x))
    if opts.get("bidirectional") and opts["merge_mode"] is None:  # two outputs
        yk = np.stack([np.asarray(keras.ops.convert_to_numpy(y)) for y in yk], axis=2)
    else:
        yk = np.asarray(keras.ops.convert_to_numpy(yk))
    layer = RecurrentLayer.from_keras(kl)
    if opts.get("go_backwards"):
        assert layer.output_order == "processing"  # Keras returns processing order
        layer = with_options(layer, output_order="time")  # ONNX's time order
    Y = _ort(with_options(layer, batch_first=False), x.transpose(1, 0, 2))[0]  # [T, D, B, H]
    if opts.get("go_backwards"):
        Y = Y[::-1]
    merge = layer.merge
    y = {"concat": _concat, "stack": lambda a: a.transpose(0, 2, 1, 3), "sum": lambda a: a.sum(1),
         "mul": lambda a: a.prod(1), "ave": lambda a: a.mean(1)}[merge](Y)
    np.testing.assert_allclose(np.swapaxes(y, 0, 1), yk, **TOL)
