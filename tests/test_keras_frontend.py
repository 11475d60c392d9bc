"""fusedrnn.frontends.keras: Keras 3 LSTM / GRU / SimpleRNN / Bidirectional <-> fusedrnn layers.

Keras runs on its torch backend. ``from_keras`` is checked against the Keras layer's own outputs and states
(float32, atol = rtol = 1e-5) over random configurations: LSTM, GRU reset_after True / False, SimpleRNN; every
Keras activation with a fusedrnn equivalent as ``activation`` and ``recurrent_activation``; ``use_bias``;
``go_backwards``; Bidirectional with each merge mode (None included); zero and given initial states; T = 1,
B = 1, units = 1 edges. Also: the activation table against Keras's own functions, ``from_keras_weights`` with
``get_config()``, ``to_keras`` from layers built directly in canonical form, go_backwards with
``sequence_lens``, and bad input.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

from fusedrnn import GRU, LSTM, RNN, ConversionError  # noqa: E402
from fusedrnn.cells.activations import Activation  # noqa: E402
from fusedrnn.frontends import keras as fk  # noqa: E402
from fusedrnn.layers import RecurrentLayer  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)
# Keras 3.15 on NumPy 2 (its own internals, not fusedrnn)
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")
ACT_NAMES = tuple(fk.KERAS_ACTIVATIONS)
REC_ACT_NAMES = ("sigmoid", "hard_sigmoid", "tanh", "softsign", "linear")
MERGES = ("concat", "sum", "mul", "ave", None)


def _np(t):
    return np.asarray(keras.ops.convert_to_numpy(t))


def call_keras(layer, x, initial_state=None):
    """Keras outputs as (y, [state arrays]) with y merged like fusedrnn (merge_mode None -> stacked axis 2)."""
    kw = {} if initial_state is None else {"initial_state": [keras.ops.convert_to_tensor(s) for s in initial_state]}
    out = [_np(o) for o in layer(keras.ops.convert_to_tensor(x), **kw)]
    if isinstance(layer, keras.layers.Bidirectional) and layer.merge_mode is None:
        return np.stack(out[:2], axis=2), out[2:]
    return out[0], out[1:]


def randomize(layer, rng, scale=0.6):
    layer.set_weights([rng.uniform(-scale, scale, w.shape).astype(np.float32) for w in layer.get_weights()])


def make_keras(kind, rng, *, units, activation, recurrent_activation, use_bias, reset_after, go_backwards,
               bidirectional, merge_mode, I):
    cls = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "rnn": keras.layers.SimpleRNN}[kind]
    kw = dict(units=units, activation=activation, use_bias=use_bias, return_sequences=True, return_state=True)
    if kind != "rnn":
        kw["recurrent_activation"] = recurrent_activation
    if kind == "gru":
        kw["reset_after"] = reset_after
    if bidirectional:
        layer = keras.layers.Bidirectional(cls(**kw), merge_mode=merge_mode)
    else:
        layer = cls(go_backwards=go_backwards, **kw)
    layer.build((None, None, I))
    randomize(layer, rng)
    return layer


def keras_states(kind, D, B, U, rng):
    n = 2 if kind == "lstm" else 1
    return [rng.uniform(-1, 1, (B, U)).astype(np.float32) for _ in range(n * D)]


def fused_state(kind, states, D):
    """Keras's state list ([h, c] forward then backward) -> fusedrnn's state."""
    if kind == "lstm":
        return np.stack(states[0::2][:D]), np.stack(states[1::2][:D])
    return np.stack(states)


def check_states(kind, fused, keras_out, D, msg):
    if kind == "lstm":
        h, c = fused
        for d in range(D):
            np.testing.assert_allclose(h[d], keras_out[2 * d], **TOL, err_msg=msg + f" h[{d}]")
            np.testing.assert_allclose(c[d], keras_out[2 * d + 1], **TOL, err_msg=msg + f" c[{d}]")
    else:
        for d in range(D):
            np.testing.assert_allclose(fused[d], keras_out[d], **TOL, err_msg=msg + f" h[{d}]")


def random_config(seed):
    rng = np.random.default_rng(2000 + seed)
    kind = ("lstm", "gru", "gru", "rnn")[seed % 4]
    bidirectional = seed % 3 == 0
    edge = seed % 9 == 4
    cfg = dict(
        units=1 if edge else int(rng.integers(2, 6)),
        activation=ACT_NAMES[seed % len(ACT_NAMES)] if seed % 2 else "tanh",
        recurrent_activation=REC_ACT_NAMES[seed % len(REC_ACT_NAMES)],
        use_bias=bool(rng.random() < 0.8),
        reset_after=bool(seed % 8 < 4),
        go_backwards=(not bidirectional) and bool(rng.random() < 0.4),
        bidirectional=bidirectional,
        merge_mode=MERGES[(seed // 3) % len(MERGES)],
        I=1 if edge else int(rng.integers(1, 5)),
    )
    T = 1 if (edge or seed % 10 == 7) else int(rng.integers(2, 7))
    B = 1 if (edge or seed % 6 == 5) else int(rng.integers(2, 4))
    return rng, kind, cfg, T, B, bool(rng.random() < 0.5)


# ------------------------------------------------------------------------------------------- from_keras

@pytest.mark.parametrize("seed", range(60))
def test_from_keras_matches_layer(seed):
    rng, kind, cfg, T, B, with_state = random_config(seed)
    layer = make_keras(kind, rng, **cfg)
    fused = fk.from_keras(layer)
    D = 2 if cfg["bidirectional"] else 1
    assert fused.batch_first and fused.num_directions == D
    if D == 2:
        assert fused.merge == fk.MERGE_MODES[cfg["merge_mode"]]
    if kind == "gru":
        assert fused.linear_before_reset == cfg["reset_after"]
    assert type(fused) in (LSTM, GRU, RNN)
    assert (fused.output_order == "processing") == cfg["go_backwards"]
    assert fused.direction == ("bidirectional" if D == 2 else ("reverse" if cfg["go_backwards"] else "forward"))
    x = rng.uniform(-1.5, 1.5, (B, T, cfg["I"])).astype(np.float32)
    st = keras_states(kind, D, B, cfg["units"], rng) if with_state else None
    yk, sk = call_keras(layer, x, st)
    y, sf = fused(x, None if st is None else fused_state(kind, st, D))
    msg = f"{kind} {cfg} T={T} B={B} state={with_state}"
    assert y.shape == yk.shape, msg
    np.testing.assert_allclose(y, yk, **TOL, err_msg=msg)
    check_states(kind, sf, sk, D, msg)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("name", ACT_NAMES)
def test_from_keras_float64_exact_semantics(kind, name):
    """float64 Keras against fusedrnn's fp64 target at 1e-12: a formula difference float32 noise would hide shows.

    Only LSTM and GRU(reset_after=True): in Keras 3.15 on the torch backend these run a dedicated loop in the
    layer's dtype, while SimpleRNN and GRU(reset_after=False) use keras.ops.matmul, whose JAX-like type promotion
    returns float32 for two float64 operands (result_type('float64', 'float64') == 'float32'), so a float64
    SimpleRNN is only float32-accurate there (a Keras property, not a conversion error)."""
    rng = np.random.default_rng(ACT_NAMES.index(name))
    cls = keras.layers.LSTM if kind == "lstm" else keras.layers.GRU
    rec = name if name in REC_ACT_NAMES else "sigmoid"
    layer = cls(3, activation=name, recurrent_activation=rec, return_sequences=True, return_state=True,
                dtype="float64")
    layer.build((None, None, 2))
    layer.set_weights([rng.uniform(-0.5, 0.5, w.shape) for w in layer.get_weights()])
    fused = fk.from_keras(layer)
    assert fused.W.dtype == np.float64
    x = rng.uniform(-1, 1, (2, 6, 2))
    out = [_np(o) for o in layer(keras.ops.convert_to_tensor(x, dtype="float64"))]
    assert out[0].dtype == np.float64
    y, st = fused.to("fp64")(x)
    np.testing.assert_allclose(y, out[0], rtol=1e-12, atol=1e-12)
    check = np.testing.assert_allclose
    check(st[0][0] if kind == "lstm" else st[0], out[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ACT_NAMES)
def test_activation_table_against_keras(name):
    x = np.linspace(-8, 8, 2001, dtype=np.float32)
    ref = _np(keras.activations.get(name)(keras.ops.convert_to_tensor(x)))
    np.testing.assert_allclose(fk.KERAS_ACTIVATIONS[name](x), ref, rtol=1e-6, atol=1e-6)


def test_keras_hard_sigmoid_is_onnx_hardsigmoid_alpha_one_sixth():
    act = fk.KERAS_ACTIVATIONS["hard_sigmoid"]
    assert (act.name, act.alpha, act.beta) == ("HardSigmoid", 1 / 6, 0.5)
    x = np.array([-3.5, -3, -1, 0, 1, 2.9, 3, 4], np.float32)
    np.testing.assert_allclose(act(x), _np(keras.activations.hard_sigmoid(keras.ops.convert_to_tensor(x))),
                               rtol=0, atol=1e-7)


def test_activation_given_as_function_and_rnn_of_cell():
    rng = np.random.default_rng(0)
    layer = keras.layers.RNN(keras.layers.GRUCell(3, activation=keras.activations.softsign, reset_after=False,
                                                  recurrent_activation=keras.ops.hard_sigmoid),
                             return_sequences=True, return_state=True)
    layer.build((None, None, 2))
    randomize(layer, rng)
    fused = GRU.from_keras(layer)
    assert [a.name for a in fused.activations[0]] == ["HardSigmoid", "Softsign"]
    x = rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32)
    yk, sk = call_keras(layer, x)
    y, h = fused(x)
    np.testing.assert_allclose(y, yk, **TOL)
    np.testing.assert_allclose(h[0], sk[0], **TOL)


def test_activation_none_is_linear():
    layer = keras.layers.SimpleRNN(2, activation=None)
    layer.build((None, None, 2))
    assert fk.from_keras(layer).activations[0][0] == Activation("Affine", 1.0, 0.0)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_from_keras_weights_with_config_equals_from_keras(kind, bidirectional):
    rng = np.random.default_rng(5)
    inner = getattr(keras.layers, kind)(3, activation="softsign", use_bias=kind != "SimpleRNN",
                                        **({"reset_after": False} if kind == "GRU" else {}))
    layer = keras.layers.Bidirectional(inner, merge_mode="ave") if bidirectional else inner
    layer.build((None, None, 2))
    randomize(layer, rng)
    a = fk.from_keras(layer)
    config = (layer.forward_layer if bidirectional else layer).get_config()
    extra = dict(bidirectional=True, merge_mode="ave") if bidirectional else {}
    b = fk.from_keras_weights(kind, layer.get_weights(), **config, **extra)
    assert type(a) is type(b) and a.merge == b.merge and a.direction == b.direction
    for name in ("W", "R", "b_x", "b_h"):
        va, vb = getattr(a, name), getattr(b, name)
        assert (va is None and vb is None) or np.array_equal(va, vb), name
    assert a.activations == b.activations


def test_from_keras_weights_infers_options():
    rng = np.random.default_rng(0)
    k, rk = rng.uniform(size=(2, 9)).astype(np.float32), rng.uniform(size=(3, 9)).astype(np.float32)
    g = fk.from_keras_weights("gru", [k, rk, np.zeros((2, 9), np.float32)])
    assert g.linear_before_reset and g.b_h is not None
    g = fk.from_keras_weights("GRU", [k, rk, np.zeros(9, np.float32)])
    assert not g.linear_before_reset and g.b_h is None
    g = fk.from_keras_weights("GRU", [k, rk])
    assert g.linear_before_reset and g.b_x is None  # the Keras 3 default
    with pytest.raises(ValueError, match="reset_after=True needs a bias of shape"):
        fk.from_keras_weights("GRU", [k, rk, np.zeros(9, np.float32)], reset_after=True)
    with pytest.raises(ValueError, match="unknown Keras GRU option"):
        fk.from_keras_weights("GRU", [k, rk], time_travel=True)
    with pytest.raises(ValueError, match="kind: expected"):
        fk.from_keras_weights("ConvLSTM", [k, rk])
    with pytest.raises(ValueError, match="units: config says 4"):
        fk.from_keras_weights("GRU", [k, rk], units=4)


# ------------------------------------------------------------------------------------------- go_backwards

def test_go_backwards_sequence_lens_processing_order():
    rng = np.random.default_rng(11)
    layer = keras.layers.LSTM(3, go_backwards=True, return_sequences=True)
    layer.build((None, None, 2))
    randomize(layer, rng)
    fused = fk.from_keras(layer)
    x = rng.uniform(-1, 1, (3, 5, 2)).astype(np.float32)
    lens = np.array([5, 2, 0], np.int32)
    y, (h, c) = fused(x, sequence_lens=lens)
    for b, n in enumerate(lens):
        if n:
            np.testing.assert_allclose(y[b, :n], call_keras_seq(layer, x[b:b + 1, :n])[0], **TOL)
        assert not np.any(y[b, n:])
    # time_ordered / processing_order are inverses; the time-ordered layer has ONNX's convention
    assert type(fused) is LSTM and (fused.direction, fused.output_order) == ("reverse", "processing")
    plain = fk.time_ordered(fused)
    assert type(plain) is LSTM and plain.output_order == "time" and fused.output_order == "processing"
    y2, _ = plain(x)
    np.testing.assert_array_equal(y2[:, ::-1], fused(x)[0])
    back = fk.processing_order(plain)
    assert type(back) is LSTM and back.output_order == "processing" and plain.output_order == "time"
    with pytest.raises(ConversionError, match="output_order"):
        fused.to_onnx()
    plain.to_onnx()  # the time-ordered copy exports
    with pytest.raises(ConversionError, match="output_order='processing' needs direction='reverse'"):
        fk.processing_order(LSTM(plain.W, plain.R, direction="forward"))
    with pytest.raises(ConversionError, match="expected a fusedrnn LSTM, GRU or RNN") as ei:
        fk.time_ordered(layer)
    assert isinstance(ei.value, TypeError)


def call_keras_seq(layer, x):
    return _np(layer(keras.ops.convert_to_tensor(x)))


# ------------------------------------------------------------------------------------------- to_keras

def canonical_layer(cell, rng, *, I, H, D, lbr=True, acts=None, bias="double", merge="concat"):
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    W = rng.uniform(-0.7, 0.7, (D, G * H, I)).astype(np.float32)
    R = rng.uniform(-0.7, 0.7, (D, G * H, H)).astype(np.float32)
    b_x = None if bias == "none" else rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32)
    b_h = rng.uniform(-0.5, 0.5, (D, G * H)).astype(np.float32) if bias == "double" else None
    common = dict(direction="bidirectional" if D == 2 else "forward", batch_first=True, merge=merge,
                  activations=acts)
    if cell == "lstm":
        return LSTM(W, R, b_x, b_h, **common)
    if cell == "gru":
        return GRU(W, R, b_x, b_h, linear_before_reset=lbr, **common)
    return RNN(W, R, b_x, b_h, **common)


@pytest.mark.parametrize("seed", range(12))
def test_to_keras_layer_matches(seed):
    rng = np.random.default_rng(700 + seed)
    cell = ("lstm", "gru", "rnn")[seed % 3]
    D = 1 + (seed // 3) % 2
    acts = None
    if seed % 4 == 1:
        acts = {"lstm": ["HardSigmoid", "Softsign", "Softsign"], "gru": ["Sigmoid", "Relu"], "rnn": ["Elu"]}[cell]
        acts = [fk.KERAS_ACTIVATIONS["hard_sigmoid"] if a == "HardSigmoid" else a for a in acts]
    if D == 2 and seed % 5 == 0:  # different activations per direction -> explicit backward_layer
        acts = [["Sigmoid", "Tanh", "Tanh"], ["Sigmoid", "Softsign", "Softsign"]] if cell == "lstm" else (
            [["Sigmoid", "Tanh"], ["Softsign", "Tanh"]] if cell == "gru" else [["Tanh"], ["Relu"]])
    layer = canonical_layer(cell, rng, I=3, H=4, D=D, lbr=seed % 2 == 0, acts=acts,
                            bias=("double", "single", "none")[seed % 3 if seed > 2 else 0],
                            merge=MERGES[seed % 4] if D == 2 else "concat")
    layer.merge = "stack" if (D == 2 and seed % 7 == 3) else layer.merge
    kl = fk.to_keras(layer, return_state=True)
    assert isinstance(kl, keras.layers.Bidirectional) == (D == 2)
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    yk, sk = call_keras(kl, x)
    y, sf = layer(x)
    msg = f"{cell} D={D} acts={acts} merge={layer.merge}"
    np.testing.assert_allclose(y, yk, **TOL, err_msg=msg)
    check_states(cell, sf, sk, D, msg)


def test_to_keras_go_backwards():
    rng = np.random.default_rng(3)
    plain = canonical_layer("gru", rng, I=2, H=3, D=1)
    plain.direction = "reverse"
    plain = GRU(plain.W, plain.R, plain.b_x, plain.b_h, direction="reverse", linear_before_reset=True,
                batch_first=True)
    with pytest.raises(ConversionError, match="direction='reverse' with outputs in time order"):
        fk.to_keras(plain)
    kl = fk.to_keras(fk.processing_order(plain))
    assert kl.go_backwards
    x = rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(fk.processing_order(plain)(x)[0], call_keras_seq(kl, x), **TOL)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_to_keras_output_order_processing_is_go_backwards(cell):
    """A reverse layer built with output_order="processing" (no helper) -> go_backwards=True, against Keras; and
    from_keras of that Keras layer gives back the same option and weights."""
    rng = np.random.default_rng(31)
    base = canonical_layer(cell, rng, I=2, H=3, D=1, bias="none" if cell == "rnn" else "double")
    cls = type(base)
    extra = {"linear_before_reset": True} if cell == "gru" else {}
    layer = cls(base.W, base.R, base.b_x, base.b_h, direction="reverse", output_order="processing",
                batch_first=True, **extra)
    kl = fk.to_keras(layer, return_state=True)
    assert kl.go_backwards
    x = rng.uniform(-1, 1, (3, 5, 2)).astype(np.float32)
    yk, sk = call_keras(kl, x)
    y, sf = layer(x)
    np.testing.assert_allclose(y, yk, **TOL)
    check_states(cell, sf, sk, 1, cell)
    back = fk.from_keras(kl)
    assert type(back) is cls and (back.direction, back.output_order) == ("reverse", "processing")
    np.testing.assert_array_equal(back.W, layer.W)
    np.testing.assert_array_equal(back.R, layer.R)


# ------------------------------------------------------------------------------------------- bad input

def test_from_keras_wrong_layer_type():
    dense = keras.layers.Dense(3)
    dense.build((None, 2))
    with pytest.raises(ConversionError, match="expected a Keras LSTM, GRU, SimpleRNN or Bidirectional.*Dense") \
            as ei:
        fk.from_keras(dense)
    assert isinstance(ei.value, TypeError)
    conv = keras.layers.ConvLSTM1D(2, 3)
    with pytest.raises(ConversionError, match="ConvLSTM"):
        fk.from_keras(conv)
    with pytest.raises(ConversionError, match="expected a Keras"):
        LSTM.from_keras(np.zeros(3))


def test_from_keras_unbuilt_and_expected_mismatch():
    with pytest.raises(ConversionError, match="not built"):
        fk.from_keras(keras.layers.LSTM(3))
    gru = keras.layers.GRU(3)
    gru.build((None, None, 2))
    with pytest.raises(ConversionError, match="LSTM.from_keras expected a Keras LSTM, got GRU"):
        LSTM.from_keras(gru)
    assert isinstance(RecurrentLayer.from_keras(gru), GRU)
    bi = keras.layers.Bidirectional(keras.layers.SimpleRNN(3))
    bi.build((None, None, 2))
    with pytest.raises(ConversionError, match="expected a Keras GRU, got SimpleRNN"):
        GRU.from_keras(bi)


@pytest.mark.parametrize("act", ["selu", "gelu", "relu6", "swish"])
def test_from_keras_unsupported_activation(act):
    layer = keras.layers.SimpleRNN(3, activation=act)
    layer.build((None, None, 2))
    with pytest.raises(ConversionError, match="activation"):
        fk.from_keras(layer)


def test_from_keras_bidirectional_with_backwards_forward_layer():
    bi = keras.layers.Bidirectional(keras.layers.LSTM(3, go_backwards=True),
                                    backward_layer=keras.layers.LSTM(3, go_backwards=False))
    bi.build((None, None, 2))
    with pytest.raises(ConversionError, match="go_backwards"):
        fk.from_keras(bi)


def _lstm(**kw):
    rng = np.random.default_rng(0)
    base = canonical_layer("lstm", rng, I=2, H=3, D=kw.pop("D", 1))
    opts = dict(direction=base.direction, batch_first=True, merge="concat")
    opts.update(kw)
    return LSTM(base.W, base.R, base.b_x, base.b_h, **opts)


@pytest.mark.parametrize("make, word", [
    (lambda: _lstm(P=np.zeros((1, 3, 3), np.float32)), "peepholes"),
    (lambda: LSTM(np.ones((1, 12, 2)), np.ones((1, 12, 2)), proj_W=np.ones((1, 2, 3))), "projection"),
    (lambda: _lstm(layer_norm=np.ones((1, 4, 3), np.float32)), "layer_norm"),
    (lambda: _lstm(clip=1.5), "clip=1.5"),
    (lambda: _lstm(cell_clip=4.0), "cell_clip=4.0"),
    (lambda: _lstm(coupling="input_forget"), "coupling='input_forget'"),
    (lambda: _lstm(coupling="cifg"), "coupling='cifg'"),
    (lambda: LSTM(np.ones((1, 12, 2)), np.ones((1, 12))), "diagonal"),
    (lambda: _lstm(activations=["Sigmoid", "Tanh", "Relu"]), "differs from the cell output activation"),
    (lambda: _lstm(activations=["HardSigmoid", "Tanh", "Tanh"]), "HardSigmoid(alpha=0.2"),
    (lambda: _lstm(activations=["Sigmoid", "ThresholdedRelu", "ThresholdedRelu"]), "ThresholdedRelu"),
    (lambda: _lstm(merge="stack"), "merge='stack'"),
    (lambda: _lstm(direction="reverse"), "direction='reverse'"),
])
def test_to_keras_unsupported_option_named(make, word):
    with pytest.raises(ConversionError, match="cannot express") as ei:
        fk.to_keras(make())
    assert word in str(ei.value)


def test_to_keras_names_every_problem_and_rejects_non_layers():
    with pytest.raises(ConversionError) as ei:
        _lstm(P=np.zeros((1, 3, 3), np.float32), clip=2.0, cell_clip=1.0).to_keras()
    for word in ("peepholes", "clip=2.0", "cell_clip=1.0"):
        assert word in str(ei.value)
    with pytest.raises(ConversionError, match="expected a fusedrnn LSTM, GRU or RNN"):
        fk.to_keras(keras.layers.LSTM(2))


def test_from_keras_bidirectional_mismatched_directions():
    bi = keras.layers.Bidirectional(keras.layers.GRU(3), backward_layer=keras.layers.GRU(4, go_backwards=True))
    bi.build((None, None, 2))
    with pytest.raises(ConversionError, match="differ in shape"):
        fk.from_keras(bi)
    bi = keras.layers.Bidirectional(keras.layers.GRU(3), backward_layer=keras.layers.GRU(3, go_backwards=True,
                                                                                         reset_after=False))
    bi.build((None, None, 2))
    with pytest.raises(ConversionError, match="reset_after"):
        fk.from_keras(bi)
    bi = keras.layers.Bidirectional(keras.layers.GRU(3), backward_layer=keras.layers.SimpleRNN(3, go_backwards=True))
    bi.build((None, None, 2))
    with pytest.raises(ConversionError, match="forward layer is a GRU and its backward layer a SimpleRNN"):
        fk.from_keras(bi)


def test_to_keras_rejects_overriding_converted_options():
    layer = canonical_layer("gru", np.random.default_rng(0), I=2, H=3, D=1)
    with pytest.raises(ValueError, match="units, use_bias come from the fusedrnn layer"):
        fk.to_keras(layer, units=5, use_bias=False)
    kl = fk.to_keras(layer, name="my_gru", return_sequences=False)
    assert kl.name == "my_gru" and not kl.return_sequences
