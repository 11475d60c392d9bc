"""Argument validation of ``fusedrnn.ops.lstm / gru / rnn``, the layer constructors and calls, and ``Stack``.

Every misuse raises the documented ``fusedrnn.FusedRNNError`` subclass (ShapeError, DTypeError,
AttributeValueError, SequenceLengthError, UnknownTargetError) with a message naming the argument. Hypothesis fuzzes
shapes, dtypes, values and attributes: every call either runs (with outputs of the right shapes) or raises a
FusedRNNError. NaN / Inf inputs propagate like onnxruntime.

Unusual argument *types* (arrays for string options, scalars for lists, ragged sequences, huge integers) are
checked at the end of the module.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusedrnn
from fusedrnn import ops
from fusedrnn.cells.rounding import BF16, FP16
from fusedrnn.errors import (
    AttributeValueError,
    DTypeError,
    FusedRNNError,
    SequenceLengthError,
    ShapeError,
    UnknownTargetError,
)

G = {"lstm": 4, "gru": 3, "rnn": 1}
OPS = {"lstm": ops.lstm, "gru": ops.gru, "rnn": ops.rnn}
LAYERS = {"lstm": fusedrnn.LSTM, "gru": fusedrnn.GRU, "rnn": fusedrnn.RNN}
T0, B0, I0, H0 = 4, 2, 3, 2


def onnx_args(cell: str, D: int = 1, T=T0, B=B0, I=I0, H=H0, dtype=np.float32) -> dict:
    """A valid set of ONNX inputs (keyword form)."""
    rng = np.random.default_rng(0)
    g = G[cell]
    a = dict(X=rng.standard_normal((T, B, I)), W=rng.standard_normal((D, g * H, I)) * 0.5,
             R=rng.standard_normal((D, g * H, H)) * 0.5, B=rng.standard_normal((D, 2 * g * H)) * 0.1,
             sequence_lens=np.array([T, 1] + [T] * (B - 2), np.int32)[:B],
             initial_h=rng.standard_normal((D, B, H)))
    if cell == "lstm":
        a["initial_c"] = rng.standard_normal((D, B, H))
        a["P"] = rng.standard_normal((D, 3 * H)) * 0.1
    return {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in a.items()}


def call_op(cell, args, **attrs):
    return OPS[cell](**args, **attrs)


def expect(exc, name, fn):
    with pytest.raises(exc) as ei:
        fn()
    assert isinstance(ei.value, FusedRNNError)
    assert name in str(ei.value), f"{name!r} not named in: {ei.value}"
    return ei.value


def test_error_hierarchy():
    for cls, builtin in ((ShapeError, ValueError), (DTypeError, TypeError), (AttributeValueError, ValueError),
                         (SequenceLengthError, ValueError), (UnknownTargetError, KeyError)):
        assert issubclass(cls, FusedRNNError) and issubclass(cls, builtin)
    assert fusedrnn.FusedRNNError is FusedRNNError


def test_valid_arguments_run():
    for cell in G:
        for D, direction in ((1, "forward"), (1, "reverse"), (2, "bidirectional")):
            out = call_op(cell, onnx_args(cell, D), direction=direction)
            assert out[0].shape == (T0, D, B0, H0)
            assert all(o.shape == (D, B0, H0) for o in out[1:])


# ---------------------------------------------------------------------------------------- ops: table of misuses
def _set(key, value):
    def f(a):
        a = dict(a)
        a[key] = value
        return a

    return f


def _reshape(key, shape):
    def f(a):
        a = dict(a)
        a[key] = np.zeros(shape, np.float32)
        return a

    return f


# (id, cells, argument mutation, attributes, exception, name in the message)
OP_CASES = [
    ("X rank 2", "lgr", _reshape("X", (T0, B0)), {}, ShapeError, "X"),
    ("X rank 4", "lgr", _reshape("X", (T0, B0, I0, 1)), {}, ShapeError, "X"),
    ("X T=0", "lgr", _reshape("X", (0, B0, I0)), {}, ShapeError, "X"),
    ("X B=0", "lgr", _reshape("X", (T0, 0, I0)), {}, ShapeError, "X"),
    ("X I=0", "lgr", _reshape("X", (T0, B0, 0)), {}, ShapeError, "X"),
    ("X int", "lgr", _set("X", np.ones((T0, B0, I0), np.int32)), {}, DTypeError, "X"),
    ("X bool", "lgr", _set("X", np.ones((T0, B0, I0), bool)), {}, DTypeError, "X"),
    ("X complex", "lgr", _set("X", np.ones((T0, B0, I0), complex)), {}, DTypeError, "X"),
    ("X str", "lgr", _set("X", "abc"), {}, DTypeError, "X"),
    ("X None", "lgr", _set("X", None), {}, DTypeError, "X"),
    ("X I mismatch", "lgr", _reshape("X", (T0, B0, I0 + 1)), {}, ShapeError, "input_size"),
    ("W rank 2", "lgr", lambda a: _set("W", a["W"][0])(a), {}, ShapeError, "W"),
    ("W int", "lgr", lambda a: _set("W", a["W"].astype(np.int64))(a), {}, DTypeError, "W"),
    ("W two directions", "lgr", lambda a: _set("W", np.concatenate([a["W"]] * 2))(a), {}, ShapeError, "W"),
    ("W gates", "lgr", lambda a: _set("W", a["W"][:, :-1])(a), {}, ShapeError, "W"),
    ("R rank 2", "lgr", lambda a: _set("R", a["R"][0])(a), {}, ShapeError, "R"),
    ("R rows", "lgr", lambda a: _set("R", a["R"][:, :-1])(a), {}, ShapeError, "R"),
    ("R H=0", "lgr", lambda a: _set("R", a["R"][:, :, :0])(a), {}, ShapeError, "R"),
    ("R float str", "lgr", _set("R", [["a"]]), {}, DTypeError, "R"),
    ("B 1-D", "lgr", lambda a: _set("B", a["B"][0])(a), {}, ShapeError, "B"),
    ("B short", "lgr", lambda a: _set("B", a["B"][:, :-1])(a), {}, ShapeError, "B"),
    ("B int", "lgr", lambda a: _set("B", a["B"].astype(np.int8))(a), {}, DTypeError, "B"),
    ("P short", "l", lambda a: _set("P", a["P"][:, :-1])(a), {}, ShapeError, "P"),
    ("P 3-D", "l", lambda a: _set("P", a["P"].reshape(1, 3, H0))(a), {}, ShapeError, "P"),
    ("initial_h batch", "lgr", _reshape("initial_h", (1, B0 + 1, H0)), {}, ShapeError, "initial_h"),
    ("initial_h rank", "lgr", _reshape("initial_h", (B0, H0)), {}, ShapeError, "initial_h"),
    ("initial_h int", "lgr", _set("initial_h", np.zeros((1, B0, H0), np.int32)), {}, DTypeError, "initial_h"),
    ("initial_c hidden", "l", _reshape("initial_c", (1, B0, H0 + 1)), {}, ShapeError, "initial_c"),
    ("initial_h layout 1", "lgr", lambda a: a, {"layout": 1}, ShapeError, "initial_h"),
    ("sequence_lens float", "lgr", _set("sequence_lens", np.array([1.0, 2.0])), {}, DTypeError, "sequence_lens"),
    ("sequence_lens bool", "lgr", _set("sequence_lens", np.array([True, True])), {}, DTypeError,
     "sequence_lens"),
    ("sequence_lens shape", "lgr", _set("sequence_lens", np.array([1, 2, 3], np.int32)), {}, ShapeError,
     "sequence_lens"),
    ("sequence_lens 2-D", "lgr", _set("sequence_lens", np.array([[1, 2]], np.int32)), {}, ShapeError,
     "sequence_lens"),
    ("sequence_lens < 0", "lgr", _set("sequence_lens", np.array([-1, 2], np.int32)), {}, SequenceLengthError,
     "sequence_lens"),
    ("sequence_lens > T", "lgr", _set("sequence_lens", np.array([1, T0 + 1], np.int64)), {}, SequenceLengthError,
     "sequence_lens"),
    ("unknown attribute", "lgr", None, {"hidden_sizes": H0}, AttributeValueError, "hidden_sizes"),
    ("input_forget on GRU", "gr", None, {"input_forget": 1}, AttributeValueError, "input_forget"),
    ("linear_before_reset on LSTM", "lr", None, {"linear_before_reset": 1}, AttributeValueError,
     "linear_before_reset"),
    ("direction", "lgr", None, {"direction": "both"}, AttributeValueError, "direction"),
    ("direction case", "lgr", None, {"direction": "Forward"}, AttributeValueError, "direction"),
    ("bidirectional with D=1 weights", "lgr", None, {"direction": "bidirectional"}, ShapeError, "W"),
    ("activation name", "lgr", None, {"activations": ["Swish"] * 3}, AttributeValueError, "activations"),
    ("activation count", "lgr", None, {"activations": ["Sigmoid"] * 4}, AttributeValueError, "activations"),
    ("activation not a list", "lgr", None, {"activations": "Tanh"}, AttributeValueError, "activations"),
    ("activation non-str", "lgr", None, {"activations": [1] * 3}, AttributeValueError, "activations"),
    ("activation_alpha inf", "lgr", None, {"activation_alpha": [np.inf]}, AttributeValueError, "activation_alpha"),
    ("activation_beta nan", "lgr", None, {"activation_beta": [np.nan]}, AttributeValueError, "activation_beta"),
    ("activation_defaults", "lgr", None, {"activation_defaults": "tf"}, AttributeValueError,
     "activation_defaults"),
    ("clip 0", "lgr", None, {"clip": 0}, AttributeValueError, "clip"),
    ("clip < 0", "lgr", None, {"clip": -1.0}, AttributeValueError, "clip"),
    ("clip nan", "lgr", None, {"clip": float("nan")}, AttributeValueError, "clip"),
    ("clip inf", "lgr", None, {"clip": float("inf")}, AttributeValueError, "clip"),
    ("clip bool", "lgr", None, {"clip": True}, AttributeValueError, "clip"),
    ("clip str", "lgr", None, {"clip": "1"}, AttributeValueError, "clip"),
    ("layout 2", "lgr", None, {"layout": 2}, AttributeValueError, "layout"),
    ("layout -1", "lgr", None, {"layout": -1}, AttributeValueError, "layout"),
    ("layout bool", "lgr", None, {"layout": True}, AttributeValueError, "layout"),
    ("layout str", "lgr", None, {"layout": "1"}, AttributeValueError, "layout"),
    ("hidden_size mismatch", "lgr", None, {"hidden_size": H0 + 1}, ShapeError, "hidden_size"),
    ("hidden_size 0", "lgr", None, {"hidden_size": 0}, AttributeValueError, "hidden_size"),
    ("hidden_size < 0", "lgr", None, {"hidden_size": -2}, AttributeValueError, "hidden_size"),
    ("hidden_size float", "lgr", None, {"hidden_size": 2.0}, AttributeValueError, "hidden_size"),
    ("hidden_size bool", "lgr", None, {"hidden_size": True}, AttributeValueError, "hidden_size"),
    ("input_forget 2", "l", None, {"input_forget": 2}, AttributeValueError, "input_forget"),
    ("input_forget float", "l", None, {"input_forget": 0.5}, AttributeValueError, "input_forget"),
    ("linear_before_reset 2", "g", None, {"linear_before_reset": 2}, AttributeValueError, "linear_before_reset"),
    ("dtype int", "lgr", None, {"dtype": np.int32}, DTypeError, "dtype"),
    ("dtype float16", "lgr", None, {"dtype": np.float16}, DTypeError, "dtype"),
    ("rounding str", "lgr", None, {"rounding": "fp16"}, DTypeError, "rounding"),
]
_CELL_LETTER = {"l": "lstm", "g": "gru", "r": "rnn"}
OP_PARAMS = [pytest.param(cell, mut, attrs, exc, name, id=f"{cell}-{cid}")
             for cid, cells, mut, attrs, exc, name in OP_CASES for cell in (_CELL_LETTER[c] for c in cells)]


@pytest.mark.parametrize("cell,mutate,attrs,exc,name", OP_PARAMS)
def test_ops_misuse(cell, mutate, attrs, exc, name):
    args = onnx_args(cell)
    if mutate is not None:
        args = mutate(args)
    if cell != "lstm" and isinstance(attrs.get("activations"), list):
        n = {"gru": 2, "rnn": 1}[cell]
        acts = attrs["activations"]
        # a bad name keeps the right count; a bad count stays a bad count (RNN accepts 2 names for 1 direction)
        attrs = dict(attrs, activations=acts[:n] if len(acts) == 3 else [acts[0]] * (n + 2))
    expect(exc, name, lambda: call_op(cell, args, **attrs))


def test_ops_unknown_activation_name_is_named():
    args = onnx_args("gru")
    err = expect(AttributeValueError, "activations", lambda: call_op("gru", args, activations=["Sigmoid", "Swish"]))
    assert "Swish" in str(err)


def test_ops_layout1_shapes():
    args = onnx_args("lstm")
    # layout 1 wants X [B, T, I] and states [B, D, H]
    a = dict(args, X=args["X"].transpose(1, 0, 2), initial_h=args["initial_h"].transpose(1, 0, 2),
             initial_c=args["initial_c"].transpose(1, 0, 2))
    Y, Y_h, Y_c = ops.lstm(**a, layout=1)
    assert Y.shape == (B0, T0, 1, H0) and Y_h.shape == Y_c.shape == (B0, 1, H0)
    expect(ShapeError, "initial_c", lambda: ops.lstm(**dict(a, initial_c=args["initial_c"]), layout=1))


# ---------------------------------------------------------------------------------------- layers
def layer_args(cell, D=1, H=H0, I=I0, Hp=None):
    rng = np.random.default_rng(1)
    g = G[cell]
    return dict(W=rng.standard_normal((D, g * H, I)), R=rng.standard_normal((D, g * H, Hp or H)),
                b_x=rng.standard_normal((D, g * H)), b_h=rng.standard_normal((D, g * H)))


LAYER_CASES = [
    ("W rank", "lgr", dict(W=np.zeros((8, 3))), ShapeError, "W"),
    ("W int", "lgr", dict(W=np.zeros((1, 12, 3), np.int32)), DTypeError, "W"),
    ("W directions", "lgr", dict(direction="bidirectional"), ShapeError, "W"),
    ("W gates", "lg", dict(W=np.zeros((1, 7, 3))), ShapeError, "W"),
    ("W empty", "lgr", dict(W=np.zeros((1, 0, 3))), ShapeError, "W"),
    ("W no inputs", "lgr", dict(W=np.zeros((1, 12, 0))), ShapeError, "W"),
    ("R rank", "lgr", dict(R=np.zeros((4, 2, 2, 1))), ShapeError, "R"),
    ("R rows", "lgr", dict(R=np.zeros((1, 5, 2))), ShapeError, "R"),
    ("R cols", "lgr", dict(R=np.zeros((1, 12, 3))), ShapeError, "R"),
    ("R diagonal for GRU/RNN", "gr", dict(R=np.zeros((1, 6))), ShapeError, "R"),
    ("R diagonal size", "l", dict(R=np.zeros((1, 7))), ShapeError, "R"),
    ("b_x", "lgr", dict(b_x=np.zeros((1, 5))), ShapeError, "b_x"),
    ("b_h", "lgr", dict(b_h=np.zeros((2, 8))), ShapeError, "b_h"),
    ("b_h int", "lgr", dict(b_h=np.zeros((1, 8), np.int64)), DTypeError, "b_h"),
    ("direction", "lgr", dict(direction="backward"), AttributeValueError, "direction"),
    ("merge", "lgr", dict(merge="max"), AttributeValueError, "merge"),
    ("clip", "lgr", dict(clip=-1.0), AttributeValueError, "clip"),
    ("activations count", "lgr", dict(activations=["Tanh"] * 5), AttributeValueError, "activations"),
    ("activations name", "lgr", dict(activations=["Swish"] * 3), AttributeValueError, "activations"),
    ("activations per direction", "lgr", dict(activations=[["Tanh"] * 3] * 2), AttributeValueError, "activations"),
    ("target", "lgr", dict(target="fp8"), UnknownTargetError, "target"),
    ("P shape", "l", dict(P=np.zeros((1, 3 * H0))), ShapeError, "P"),
    ("coupling", "l", dict(coupling="cfg"), AttributeValueError, "coupling"),
    ("cell_clip", "l", dict(cell_clip=0.0), AttributeValueError, "cell_clip"),
    ("proj_W rank", "l", dict(proj_W=np.zeros((2, H0))), ShapeError, "proj_W"),
    ("proj_W hidden", "l", dict(proj_W=np.zeros((1, 2, H0 + 1))), ShapeError, "proj_W"),
    ("proj_W empty", "l", dict(proj_W=np.zeros((1, 0, H0))), ShapeError, "proj_W"),
    ("proj_b without proj_W", "l", dict(proj_b=np.zeros((1, H0))), AttributeValueError, "proj_b"),
    ("proj_b shape", "l", dict(proj_W=np.zeros((1, H0, H0)), proj_b=np.zeros((1, H0 + 1))), ShapeError, "proj_b"),
    ("proj_clip without proj_W", "l", dict(proj_clip=1.0), AttributeValueError, "proj_clip"),
    ("proj_clip <= 0", "l", dict(proj_W=np.zeros((1, H0, H0)), proj_clip=0), AttributeValueError, "proj_clip"),
    ("projection size vs R", "l", dict(proj_W=np.zeros((1, H0 + 1, H0))), ShapeError, "R"),
    ("diagonal with projection", "l", dict(R=np.zeros((1, 4 * H0))), AttributeValueError, "R"),
    ("layer_norm shape", "l", dict(layer_norm=np.zeros((1, 3, H0))), ShapeError, "layer_norm"),
]
LAYER_PARAMS = [pytest.param(cell, kw, exc, name, id=f"{cell}-{cid}")
                for cid, cells, kw, exc, name in LAYER_CASES for cell in (_CELL_LETTER[c] for c in cells)]


@pytest.mark.parametrize("cell,kw,exc,name", LAYER_PARAMS)
def test_layer_constructor_misuse(cell, kw, exc, name):
    args = layer_args(cell)
    kw = dict(kw)
    g = G[cell]
    for key in ("W", "R", "b_x", "b_h"):  # shapes written for the LSTM: rescale the gate axis for GRU / RNN
        if key in kw and cell != "lstm" and kw[key].ndim >= 2 and kw[key].shape[1] in (8, 12):
            shape = list(kw[key].shape)
            shape[1] = shape[1] // 4 * g if shape[1] % 4 == 0 else shape[1]
            kw[key] = np.zeros(shape, kw[key].dtype)
    if "activations" in kw and cell != "lstm":
        acts = kw["activations"]
        n = {"gru": 2, "rnn": 1}[cell]
        if isinstance(acts[0], list):
            kw["activations"] = [a[:n] for a in acts]
        elif acts[0] == "Swish":
            kw["activations"] = ["Swish"] * n
        else:
            kw["activations"] = ["Tanh"] * (n + 2)
    if cell == "lstm" and kw.get("R") is not None and kw["R"].shape == (1, 4 * H0):  # diagonal + projection
        kw["proj_W"] = np.zeros((1, H0, H0))
    args.update(kw)
    W, R, b_x, b_h = (args.pop(k) for k in ("W", "R", "b_x", "b_h"))
    expect(exc, name, lambda: LAYERS[cell](W, R, b_x, b_h, **args))


def test_layer_to_unknown_target():
    layer = fusedrnn.GRU(**layer_args("gru"))
    expect(UnknownTargetError, "target", lambda: layer.to("int4"))
    with pytest.raises(KeyError):
        layer.to("int4")


@pytest.mark.parametrize("cell", list(G))
@pytest.mark.parametrize("batch_first", [False, True])
def test_layer_call_misuse(cell, batch_first):
    a = layer_args(cell)
    layer = LAYERS[cell](a["W"], a["R"], a["b_x"], a["b_h"], batch_first=batch_first)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B0, T0, I0) if batch_first else (T0, B0, I0))
    expect(ShapeError, "x", lambda: layer(x[0]))
    expect(ShapeError, "x", lambda: layer(x[..., None]))
    expect(ShapeError, "x", lambda: layer(x[:0] if not batch_first else x[:, :0]))
    expect(ShapeError, "x", lambda: layer(x[..., :-1]))
    expect(DTypeError, "x", lambda: layer(x.astype(np.int32)))
    expect(DTypeError, "x", lambda: layer("x"))
    expect(DTypeError, "sequence_lens", lambda: layer(x, sequence_lens=np.array([1.0, 2.0])))
    expect(ShapeError, "sequence_lens", lambda: layer(x, sequence_lens=np.array([1, 2, 3])))
    expect(SequenceLengthError, "sequence_lens", lambda: layer(x, sequence_lens=np.array([-1, 2])))
    expect(SequenceLengthError, "sequence_lens", lambda: layer(x, sequence_lens=np.array([T0 + 1, 2])))
    h_bad = np.zeros((1, B0 + 1, H0))
    c_ok = np.zeros((1, B0, H0))
    if cell == "lstm":
        expect(ShapeError, "state", lambda: layer(x, state=np.zeros((1, B0, H0))))
        expect(ShapeError, "state", lambda: layer(x, state=(c_ok,)))
        expect(ShapeError, "h0", lambda: layer(x, state=(h_bad, c_ok)))
        expect(ShapeError, "c0", lambda: layer(x, state=(c_ok, np.zeros((1, B0, H0 + 1)))))
        expect(DTypeError, "h0", lambda: layer(x, state=(c_ok.astype(int), c_ok)))
    else:
        expect(ShapeError, "state", lambda: layer(x, state=h_bad))
        expect(ShapeError, "state", lambda: layer(x, state=np.zeros((B0, H0))))
        expect(DTypeError, "state", lambda: layer(x, state=np.zeros((1, B0, H0), bool)))


def test_stack_misuse():
    a = layer_args("gru", D=2)
    bi = fusedrnn.GRU(a["W"], a["R"], direction="bidirectional", merge="concat")
    nxt = fusedrnn.GRU(**layer_args("gru", I=2 * H0))
    expect(AttributeValueError, "layers", lambda: fusedrnn.Stack([]))
    expect(AttributeValueError, "layers", lambda: fusedrnn.Stack([bi, "gru"]))
    expect(ShapeError, "layers[1]", lambda: fusedrnn.Stack([bi, fusedrnn.GRU(**layer_args("gru", I=H0))]))
    nxt_bf = fusedrnn.GRU(**layer_args("gru", I=2 * H0), batch_first=True)
    expect(ShapeError, "layers[1]", lambda: fusedrnn.Stack([bi, nxt_bf]))
    st = fusedrnn.GRU(a["W"], a["R"], direction="bidirectional", merge="stack")
    expect(AttributeValueError, "layers[0]", lambda: fusedrnn.Stack([st, nxt]))
    stack = fusedrnn.Stack([bi, nxt])
    x = np.zeros((T0, B0, I0))
    expect(ShapeError, "state", lambda: stack(x, state=[None]))
    y, states = stack(x)
    assert y.shape == (T0, B0, H0) and len(states) == 2


# ---------------------------------------------------------------------------------------- hypothesis fuzzing
# Each example is a valid configuration (random sizes, directions, layouts, options, dtypes, NaN / Inf values)
# plus zero to three mutations, each of which may break it (a wrong shape, a non-float dtype, a bad option value,
# an unknown attribute, bad sequence lengths). Without mutations the call must run; with them it must run or
# raise a FusedRNNError, never anything else.
FLOAT_DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
VALID_ACTS = {"lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"], "rnn": ["Tanh"]}
CUSTOM_ACTS = {"lstm": ["HardSigmoid", "LeakyRelu", "Elu"], "gru": ["Affine", "ScaledTanh"], "rnn": ["Relu"]}
BAD_VALUES = [np.int32, np.int64, np.bool_, np.complex64, np.uint8, "str", None, "ragged"]


@st.composite
def float_array(draw, shape):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    a = rng.standard_normal(shape) * 0.7
    special = draw(st.sampled_from([None, None, None, None, np.nan, np.inf, -np.inf, 1e30, 0.0]))
    if special is not None and a.size:
        a.flat[rng.integers(a.size)] = special
    with np.errstate(all="ignore"):
        return a.astype(draw(st.sampled_from(FLOAT_DTYPES)))


@st.composite
def broken_shape(draw, shape):
    new = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    if new == tuple(shape):
        new = tuple(shape) + (1,)
    return np.zeros(new, np.float32)


@st.composite
def broken_dtype(draw, a):
    bad = draw(st.sampled_from(BAD_VALUES))
    if bad == "str":
        return np.full(np.shape(a), "x")
    if bad == "ragged":
        return [[1.0], [1.0, 2.0]]
    if bad is None:
        return None if draw(st.booleans()) else object()
    shape = a.shape if isinstance(a, np.ndarray) else (2,)
    return np.zeros(shape).astype(bad)


def _bad_lens(draw, T, B):
    kind = draw(st.sampled_from(["float", "long", "short", "2d", "neg", "big", "bool"]))
    lens = np.full(B, T, np.int64)
    return {"float": lens.astype(np.float32), "long": np.append(lens, 1), "short": lens[:-1],
            "2d": lens[None], "neg": np.where(np.arange(B) == 0, -1, lens), "big": lens + 1,
            "bool": lens > 0}[kind]


OP_BAD_ATTRS = {
    "hidden_size": ["H+1", 0, -1, 2.5, True, "3", None],
    "direction": ["Forward", "", None, 1, ["forward"], "both"],
    "activations": [["Swish"], ["Tanh"] * 7, "Tanh", [None], [1.0], []],
    "activation_alpha": [[np.nan], [np.inf], [None]],
    "activation_beta": [[-np.inf], [None]],
    "clip": [0, -1.0, float("nan"), float("inf"), True, "1", [1.0]],
    "layout": [2, -1, True, "0", None, 1.5],
    "activation_defaults": ["tf", None, 3],
    "dtype": [np.int32, np.float16, "float16", np.complex64],
    "rounding": ["fp16", 3, object()],
    "input_forget": [2, -1, 0.5, None, "1"],
    "linear_before_reset": [2, "1", None, 1.0],
}


@st.composite
def op_call(draw, cell):
    g = G[cell]
    T, B, I, H = (draw(st.integers(1, 3)) for _ in range(4))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    layout = draw(st.sampled_from([0, 1]))
    attrs = {}
    if direction != "forward" or draw(st.booleans()):
        attrs["direction"] = direction
    if layout == 1 or draw(st.booleans()):
        attrs["layout"] = layout
    if draw(st.booleans()):
        attrs["hidden_size"] = H
    if draw(st.booleans()):
        attrs["activations"] = draw(st.sampled_from([VALID_ACTS, CUSTOM_ACTS]))[cell] * D
        if draw(st.booleans()):
            attrs["activation_alpha"] = draw(st.lists(st.floats(-2, 2), max_size=4))
        if draw(st.booleans()):
            attrs["activation_beta"] = draw(st.lists(st.floats(-2, 2), max_size=4))
        if draw(st.booleans()):
            attrs["activation_defaults"] = draw(st.sampled_from(["ort", "onnx"]))
    if draw(st.booleans()):
        attrs["clip"] = draw(st.floats(0.01, 100))
    if cell == "lstm" and draw(st.booleans()):
        attrs["input_forget"] = draw(st.sampled_from([0, 1, True, False]))
    if cell == "gru" and draw(st.booleans()):
        attrs["linear_before_reset"] = draw(st.sampled_from([0, 1, True, False]))
    if draw(st.booleans()):
        attrs["dtype"] = draw(st.sampled_from([None, np.float32, np.float64, "float64"]))
    if draw(st.booleans()):
        attrs["rounding"] = draw(st.sampled_from([None, FP16, BF16]))
    st_shape = (B, D, H) if layout == 1 else (D, B, H)
    shapes = {"X": (B, T, I) if layout == 1 else (T, B, I), "W": (D, g * H, I), "R": (D, g * H, H),
              "B": (D, 2 * g * H), "initial_h": st_shape}
    if cell == "lstm":
        shapes.update(initial_c=st_shape, P=(D, 3 * H))
    args = {}
    for name, shape in shapes.items():
        if name in ("X", "W", "R") or draw(st.booleans()):
            args[name] = draw(float_array(shape))
    if draw(st.booleans()):
        args["sequence_lens"] = np.asarray(draw(st.lists(st.integers(0, T), min_size=B, max_size=B)),
                                           draw(st.sampled_from([np.int32, np.int64, np.uint8])))
    mutations = draw(st.lists(st.sampled_from(["shape", "dtype", "zero", "lens", "attr", "unknown"]), max_size=3))
    for m in mutations:
        if m == "shape":
            name = draw(st.sampled_from(sorted(shapes)))
            args[name] = draw(broken_shape(shapes[name]))
        elif m == "dtype":
            name = draw(st.sampled_from(sorted(shapes)))
            args[name] = draw(broken_dtype(args.get(name, np.zeros(shapes[name]))))
        elif m == "zero":
            X = args["X"]
            if isinstance(X, np.ndarray) and X.ndim:  # (an earlier mutation may have replaced it)
                ax = draw(st.integers(0, X.ndim - 1))
                args["X"] = np.take(X, np.arange(0), axis=ax)
        elif m == "lens":
            args["sequence_lens"] = _bad_lens(draw, T, B)
        elif m == "attr":
            key = draw(st.sampled_from(sorted(OP_BAD_ATTRS)))
            v = draw(st.sampled_from(OP_BAD_ATTRS[key]))
            attrs[key] = H + 1 if v == "H+1" else v
        else:
            attrs[draw(st.sampled_from(["hidden_sizes", "Direction", "input_forget", "linear_before_reset",
                                        "epsilon"]))] = 1
    return args, attrs, mutations


def _check_op_result(cell, args, attrs, out):
    X = np.asarray(args["X"])
    layout = attrs.get("layout", 0)
    T, B = (X.shape[1], X.shape[0]) if layout == 1 else X.shape[:2]
    D = 2 if attrs.get("direction") == "bidirectional" else 1
    H = np.asarray(args["R"]).shape[-1]
    assert len(out) == (3 if cell == "lstm" else 2)
    assert out[0].shape == ((B, T, D, H) if layout == 1 else (T, D, B, H))
    for s in out[1:]:
        assert s.shape == ((B, D, H) if layout == 1 else (D, B, H))
    out_dt = X.dtype if X.dtype in (np.float16, ml_dtypes.bfloat16) else None
    if out_dt is not None:
        assert all(o.dtype == out_dt for o in out)


# seeded (derandomize): the same 200 examples per test on every run
FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
RAN = {}


@pytest.mark.parametrize("cell", list(G))
@FUZZ
@given(data=st.data())
def test_fuzz_ops(cell, data):
    args, attrs, mutations = data.draw(op_call(cell))
    try:
        with np.errstate(all="ignore"):
            out = OPS[cell](**args, **attrs)
    except FusedRNNError:
        assert mutations, "a valid configuration was rejected"
        return
    RAN[f"ops-{cell}"] = RAN.get(f"ops-{cell}", 0) + 1
    _check_op_result(cell, args, attrs, out)


LAYER_BAD = {
    "direction": ["both", None, "Forward"],
    "merge": ["max", None, "Concat"],
    "clip": [0.0, -2.0, float("nan"), "1"],
    "target": ["fp8", None, "FP32"],
    "activations": [["Swish"], ["Tanh"] * 7, "Tanh", [[None]]],
    "coupling": ["cfg", 1],
    "cell_clip": [0.0, -1.0, float("inf")],
    "proj_clip": [0.0, "x"],
    "proj_b": ["alone"],
}


@st.composite
def layer_call(draw, cell):
    g = G[cell]
    H, I, T, B = (draw(st.integers(1, 3)) for _ in range(4))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    opts = {"direction": direction}
    if draw(st.booleans()):
        opts["merge"] = draw(st.sampled_from(["stack", "concat", "sum", "mul", "ave"]))
    batch_first = draw(st.booleans())
    opts["batch_first"] = batch_first
    if draw(st.booleans()):
        opts["clip"] = draw(st.floats(0.01, 50))
    if draw(st.booleans()):
        opts["target"] = draw(st.sampled_from(["fp32", "fp64", "fp16", "bf16"]))
    if draw(st.booleans()):
        opts["activations"] = draw(st.sampled_from([VALID_ACTS, CUSTOM_ACTS]))[cell] * D
    shapes = {"W": (D, g * H, I), "b_x": (D, g * H), "b_h": (D, g * H)}
    Hp = H
    if cell == "lstm":
        if draw(st.booleans()):
            opts["coupling"] = draw(st.sampled_from([None, "input_forget", "cifg"]))
        if draw(st.booleans()):
            opts["cell_clip"] = draw(st.floats(0.01, 10))
        proj = draw(st.booleans())
        if proj:
            Hp = draw(st.integers(1, 3))
            shapes["proj_W"] = (D, Hp, H)
            if draw(st.booleans()):
                shapes["proj_b"] = (D, Hp)
            if draw(st.booleans()):
                opts["proj_clip"] = draw(st.floats(0.01, 10))
        for name, shape in (("P", (D, 3, H)), ("layer_norm", (D, 4, H))):
            if draw(st.booleans()):
                shapes[name] = shape
        diagonal = not proj and draw(st.booleans())
    else:
        diagonal = False
    shapes["R"] = (D, g * H) if diagonal else (D, g * H, Hp)
    arrays_ = {name: draw(float_array(shape)) for name, shape in shapes.items()
               if name in ("W", "R") or name in ("proj_W", "proj_b") or draw(st.booleans())}
    call_shapes = {"x": (B, T, I) if batch_first else (T, B, I), "h0": (D, B, Hp), "c0": (D, B, H)}
    call = {"x": draw(float_array(call_shapes["x"]))}
    if draw(st.booleans()):
        h0 = draw(float_array(call_shapes["h0"]))
        call["state"] = (h0, draw(float_array(call_shapes["c0"]))) if cell == "lstm" else h0
    if draw(st.booleans()):
        call["sequence_lens"] = np.asarray(draw(st.lists(st.integers(0, T), min_size=B, max_size=B)))
    mutations = draw(st.lists(st.sampled_from(["shape", "dtype", "option", "call_shape", "lens"]), max_size=3))
    for m in mutations:
        if m in ("shape", "dtype"):
            name = draw(st.sampled_from(sorted(shapes)))
            arrays_[name] = (draw(broken_shape(shapes[name])) if m == "shape"
                             else draw(broken_dtype(arrays_.get(name, np.zeros(shapes[name])))))
        elif m == "option":
            keys = sorted(k for k in LAYER_BAD if cell == "lstm" or k in LAYER_OPTS_COMMON)
            key = draw(st.sampled_from(keys))
            v = draw(st.sampled_from(LAYER_BAD[key]))
            if key == "proj_b":  # a projection bias without projection weights
                arrays_.pop("proj_W", None)
                arrays_["proj_b"] = np.zeros((D, H))
            else:
                opts[key] = v
        elif m == "call_shape":
            name = draw(st.sampled_from(sorted(call_shapes)))
            bad = draw(broken_shape(call_shapes[name]))
            if name == "x":
                call["x"] = bad
            else:
                h0 = bad if name == "h0" else np.zeros(call_shapes["h0"])
                c0 = bad if name == "c0" else np.zeros(call_shapes["c0"])
                call["state"] = (h0, c0) if cell == "lstm" else h0
        else:
            call["sequence_lens"] = _bad_lens(draw, T, B)
    return arrays_, opts, call, mutations


LAYER_OPTS_COMMON = ("direction", "merge", "clip", "target", "activations")


@pytest.mark.parametrize("cell", list(G))
@FUZZ
@given(data=st.data())
def test_fuzz_layers(cell, data):
    arrays_, opts, call, mutations = data.draw(layer_call(cell))
    W, R = arrays_.pop("W"), arrays_.pop("R")
    b_x, b_h = arrays_.pop("b_x", None), arrays_.pop("b_h", None)
    try:
        with np.errstate(all="ignore"):
            layer = LAYERS[cell](W, R, b_x, b_h, **opts, **arrays_)
            y, state = layer(**call)
    except FusedRNNError:
        assert mutations, "a valid configuration was rejected"
        return
    RAN[f"layers-{cell}"] = RAN.get(f"layers-{cell}", 0) + 1
    x = np.asarray(call["x"])
    T, B = (x.shape[1], x.shape[0]) if layer.batch_first else x.shape[:2]
    D, Hp = layer.num_directions, layer.output_size
    tail = {"stack": (D, Hp), "concat": (D * Hp,)}.get(layer.merge, (Hp,))
    if layer.merge == "stack":
        assert y.shape == ((B, T) + tail if layer.batch_first else (T, D, B, Hp))
    else:
        assert y.shape == ((B, T) if layer.batch_first else (T, B)) + tail
    h = state[0] if cell == "lstm" else state
    assert h.shape == (D, B, Hp)


def test_fuzzers_mostly_run():
    """The fuzzers above reach the engines (they are not rejected at the first check)."""
    if len(RAN) < 6:
        pytest.skip("needs the fuzz tests of this module to have run first")
    assert all(n >= 40 for n in RAN.values()), RAN


# ---------------------------------------------------------------------------------------- NaN / Inf propagation
@pytest.mark.parametrize("cell", list(G))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_nan_propagates_from_its_timestep(cell, direction):
    D = 2 if direction == "bidirectional" else 1
    args = onnx_args(cell, D=D, T=6, B=3)
    args.pop("sequence_lens")
    X = args["X"].copy()
    t, b = 2, 1
    X[t, b, 0] = np.nan
    Y = OPS[cell](**dict(args, X=X), direction=direction)[0]
    for d in range(D):
        backwards = direction == "reverse" or d == 1
        nan_times = range(0, t + 1) if backwards else range(t, 6)
        for tt in range(6):
            row = Y[tt, d, b]
            if tt in nan_times:
                assert np.all(np.isnan(row)), (d, tt)
            else:
                assert np.all(np.isfinite(row)), (d, tt)
        assert np.all(np.isfinite(Y[:, d, [0, 2]]))  # other batch rows untouched
    assert np.all(np.isnan(OPS[cell](**dict(args, X=X), direction=direction)[1][:, b]))


NONFINITE_VS_ORT = [pytest.param(cell, v, id=f"{cell}-{v}") for cell in G for v in (np.inf, -np.inf, 1e30)]
# NaN only for the RNN: onnxruntime's LSTM and GRU kernels squash a NaN gate pre-activation into a finite value
# (fusedrnn propagates it, as IEEE arithmetic does; see the report), its RNN propagates it like fusedrnn.
NONFINITE_VS_ORT.append(pytest.param("rnn", np.nan, id="rnn-nan"))


@pytest.mark.parametrize("cell,special", NONFINITE_VS_ORT)
def test_nonfinite_inputs_like_onnxruntime(cell, special):
    pytest.importorskip("onnxruntime")
    from ort_oracle import ORT

    args = onnx_args(cell, D=2, T=5, B=3)
    X = args["X"].copy()
    X[1, 0, 1] = special
    X[3, 2, 0] = special
    args["X"] = X
    args["sequence_lens"] = np.array([5, 3, 4], np.int32)
    want = ORT[cell](**args, direction="bidirectional")
    with np.errstate(all="ignore"):
        got = OPS[cell](**args, direction="bidirectional")
    if special is np.nan:
        assert np.isnan(want[0]).any()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("where", ["initial_h", "initial_c", "W"])
def test_nan_state_and_weights_propagate(where):
    args = onnx_args("lstm", T=3, B=2)
    args.pop("sequence_lens")
    a = args[where].copy()
    if where == "W":
        a[0, 0, 0] = np.nan
    else:
        a[0, 1, 0] = np.nan
    Y, Y_h, Y_c = ops.lstm(**dict(args, **{where: a}))
    # one poisoned unit at the first step; through R every unit from the second step on
    if where == "W":
        assert np.isnan(Y[0, 0, :, 0]).all() and np.isnan(Y[1:]).all()
        assert np.isnan(Y_h).all() and np.isnan(Y_c).all()
    else:
        assert np.isfinite(Y[:, :, 0]).all() and np.isfinite(Y_c[:, 0]).all()  # batch row 0 untouched
        assert np.isnan(Y[0, 0, 1, 0]) and np.isnan(Y[1:, :, 1]).all() and np.isnan(Y_c[:, 1]).all()


# ------------------------------------------------------------------------------- unusual argument types
_X = np.zeros((3, 2, 2), np.float32)
_Wg = np.zeros((1, 6, 2), np.float32)
_Rg = np.zeros((1, 6, 2), np.float32)
UNUSUAL_TYPES = {
    "activation_alpha=['x']": lambda: ops.gru(_X, _Wg, _Rg, activations=["LeakyRelu", "Tanh"],
                                               activation_alpha=["x"]),
    "activation_alpha=0.5 (scalar)": lambda: ops.gru(_X, _Wg, _Rg, activations=["LeakyRelu", "Tanh"],
                                                      activation_alpha=0.5),
    "activation_beta=[[1.0], [2.0, 3.0]]": lambda: ops.gru(_X, _Wg, _Rg, activation_beta=[[1.0], [2.0, 3.0]]),
    "activations=5": lambda: ops.gru(_X, _Wg, _Rg, activations=5),
    "dtype='bogus'": lambda: ops.gru(_X, _Wg, _Rg, dtype="bogus"),
    "dtype=5": lambda: ops.gru(_X, _Wg, _Rg, dtype=5),
    "direction=np.array(...)": lambda: ops.gru(_X, _Wg, _Rg, direction=np.array(["forward", "reverse"])),
    "layout=np.array([0, 1])": lambda: ops.gru(_X, _Wg, _Rg, layout=np.array([0, 1])),
    "rounding=np.array([1, 2])": lambda: ops.gru(_X, _Wg, _Rg, rounding=np.array([1, 2])),
    "clip=10**400": lambda: ops.gru(_X, _Wg, _Rg, clip=10**400),
    "sequence_lens ragged": lambda: ops.gru(_X, _Wg, _Rg, sequence_lens=[[1], [1, 2]]),
    "layer activations=5": lambda: fusedrnn.GRU(_Wg, _Rg, activations=5),
    "layer merge=np.array(...)": lambda: fusedrnn.GRU(_Wg, _Rg, merge=np.array(["sum", "ave"])),
    "layer direction=np.array(...)": lambda: fusedrnn.GRU(_Wg, _Rg, direction=np.array(["a", "b"])),
    "layer batch_first=np.array([1, 2])": lambda: fusedrnn.GRU(_Wg, _Rg, batch_first=np.array([1, 2])),
    "layer linear_before_reset=np.array(...)": lambda: fusedrnn.GRU(_Wg, _Rg,
                                                                      linear_before_reset=np.array([1, 0])),
    "LSTM coupling=np.array(...)": lambda: fusedrnn.LSTM(np.zeros((1, 8, 2)), np.zeros((1, 8, 2)),
                                                         coupling=np.array([1, 2])),
    "layer call sequence_lens ragged": lambda: fusedrnn.GRU(_Wg, _Rg)(_X, sequence_lens=[[1], [1, 2]]),
    "Stack(5)": lambda: fusedrnn.Stack(5),
    "Stack call state=5": lambda: fusedrnn.Stack([fusedrnn.GRU(_Wg, _Rg)])(_X, state=5),
}


@pytest.mark.parametrize("case", list(UNUSUAL_TYPES))
def test_unusual_argument_types_raise_fusedrnn_error(case):
    try:
        UNUSUAL_TYPES[case]()
    except FusedRNNError:
        return
    except Exception as exc:  # noqa: BLE001 - any other exception type is a failure
        raise AssertionError(f"{case}: {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"{case}: ran without an error")
