"""A deliberately naive float64 reference of the ONNX LSTM / GRU / RNN operators.

Written straight from ``shared/specs/onnx.md`` sections 1.3-1.5 (onnxruntime semantics), independently of
``fusedrnn``: plain loops over directions, batch rows and timesteps, scalar activation functions from
:mod:`math`, one small matrix-vector product per gate and step. Clarity over speed.

* gate orders are ONNX's: LSTM W/R/B blocks i, o, f, c; peepholes P i, o, f; GRU z, r, h;
* ``sequence_lens``: a row of length L runs over its first L steps only (the backward direction over
  t = L-1 ... 0), Y is zero for t >= L, Y_h / Y_c are the state after the last processed step, and L = 0 gives
  Y_h = Y_c = 0 (not the initial state);
* ``clip`` clamps every gate pre-activation (after biases and peepholes, before the activation), never the
  LSTM cell state;
* activation alpha/beta lists are consumed in activation-list order by the functions that use them, with
  onnxruntime's defaults when a list runs out (``activation_defaults="onnx"``: the standalone ONNX operators'
  defaults instead);
* ``input_forget=1``: f = 1 - i (the forget gate's weights, biases and peephole are unused);
* the output-gate peephole multiplies the new cell state;
* ``layout=1``: X [B, T, I], Y [B, T, D, H], states [B, D, H].

All outputs are float64, whatever the input dtype.

The module also holds :func:`random_case`, the random-configuration generator the test modules share.
"""

from __future__ import annotations

import math

import numpy as np

# ------------------------------------------------------------------------------------------- activations

ACTIVATION_NAMES = (
    "Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu",
    "Softsign", "Softplus",
)

# name -> (uses alpha, uses beta)
_USES = {
    "relu": (False, False),
    "tanh": (False, False),
    "sigmoid": (False, False),
    "affine": (True, True),
    "leakyrelu": (True, False),
    "thresholdedrelu": (True, False),
    "scaledtanh": (True, True),
    "hardsigmoid": (True, True),
    "elu": (True, False),
    "softsign": (False, False),
    "softplus": (False, False),
}

# onnxruntime's fill values when the alpha/beta list runs out (onnx.md 1.4): 0 unless listed here.
_ORT_DEFAULTS = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}
# the standalone ONNX operators' defaults (ThresholdedRelu alpha 1, Affine 1*x + 0); ScaledTanh has no
# documented default in ONNX: 1*tanh(1*x) is assumed, the only choice that is not constant 0.
_ONNX_DEFAULTS = {
    "leakyrelu": (0.01, 0.0),
    "hardsigmoid": (0.2, 0.5),
    "elu": (1.0, 0.0),
    "thresholdedrelu": (1.0, 0.0),
    "affine": (1.0, 0.0),
    "scaledtanh": (1.0, 1.0),
}


def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def scalar_activation(name, alpha, beta, x):
    """One activation function applied to one Python float."""
    n = name.lower()
    if n == "relu":
        return x if x > 0 else 0.0
    if n == "tanh":
        return math.tanh(x)
    if n == "sigmoid":
        return _sigmoid(x)
    if n == "affine":
        return alpha * x + beta
    if n == "leakyrelu":
        return x if x >= 0 else alpha * x
    if n == "thresholdedrelu":
        return x if x > alpha else 0.0
    if n == "scaledtanh":
        return alpha * math.tanh(beta * x)
    if n == "hardsigmoid":
        return min(1.0, max(0.0, alpha * x + beta))
    if n == "elu":
        return x if x >= 0 else alpha * math.expm1(x)
    if n == "softsign":
        return x / (1.0 + abs(x))
    if n == "softplus":
        return max(x, 0.0) + math.log1p(math.exp(-abs(x)))
    raise ValueError(f"unknown activation {name!r}")


def resolve_activations(names, alpha=None, beta=None, defaults="ort"):
    """[(name, alpha, beta), ...]: walk ``names`` in order; an alpha (beta) user takes the next list element."""
    table = {"ort": _ORT_DEFAULTS, "onnx": _ONNX_DEFAULTS}[defaults]
    alphas = list(alpha or [])
    betas = list(beta or [])
    out = []
    for name in names:
        n = name.lower()
        if n not in _USES:
            raise ValueError(f"unknown activation {name!r}")
        uses_a, uses_b = _USES[n]
        a, b = table.get(n, (0.0, 0.0))
        if uses_a and alphas:
            a = float(alphas.pop(0))
        if uses_b and betas:
            b = float(betas.pop(0))
        out.append((n, a, b))
    return out


def _act(spec, v):
    name, a, b = spec
    return np.array([scalar_activation(name, a, b, float(x)) for x in v], dtype=np.float64)


def _clip(v, clip):
    if clip is None:
        return v
    return np.array([min(clip, max(-clip, float(x))) for x in v], dtype=np.float64)


# ------------------------------------------------------------------------------------------ shared plumbing

_N_ACTS = {"lstm": 3, "gru": 2, "rnn": 1}
_DEFAULT_ACTS = {"lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"], "rnn": ["Tanh"]}


def _num_directions(direction):
    return {"forward": 1, "reverse": 1, "bidirectional": 2}[direction]


def _walks_backwards(direction, d):
    return direction == "reverse" or (direction == "bidirectional" and d == 1)


def _acts_per_direction(cell, D, activations, alpha, beta, defaults):
    n = _N_ACTS[cell]
    names = list(activations) if activations is not None else _DEFAULT_ACTS[cell] * D
    if cell == "rnn" and D == 1 and len(names) == 2:
        names = names[:1]
    if len(names) != n * D:
        raise ValueError(f"{cell}: expected {n * D} activations, got {names!r}")
    specs = resolve_activations(names, alpha, beta, defaults)
    return [specs[d * n : (d + 1) * n] for d in range(D)]


def _setup(cell, X, W, R, B, sequence_lens, initial_h, initial_c, hidden_size, direction, layout):
    G = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    X = np.asarray(X, dtype=np.float64)
    if layout == 1:
        X = X.transpose(1, 0, 2)
    T, Bn, I = X.shape
    D = _num_directions(direction)
    W = np.asarray(W, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    H = R.shape[-1]
    if hidden_size is not None and hidden_size != H:
        raise ValueError(f"hidden_size {hidden_size} != R.shape[-1] {H}")
    assert W.shape == (D, G * H, I), W.shape
    assert R.shape == (D, G * H, H), R.shape
    B = np.zeros((D, 2 * G * H)) if B is None else np.asarray(B, dtype=np.float64)
    assert B.shape == (D, 2 * G * H), B.shape

    def state(a):
        if a is None:
            return np.zeros((D, Bn, H))
        a = np.asarray(a, dtype=np.float64)
        return a.transpose(1, 0, 2) if layout == 1 else a

    lens = [T] * Bn if sequence_lens is None else [int(v) for v in np.asarray(sequence_lens).reshape(-1)]
    assert len(lens) == Bn and all(0 <= v <= T for v in lens), lens
    return X, W, R, B, lens, state(initial_h), state(initial_c), T, Bn, H, D


def _blocks(a, G, H):
    return [a[k * H : (k + 1) * H] for k in range(G)]


def _finish(Y, states, layout):
    if layout == 1:
        return (Y.transpose(2, 0, 1, 3), *[s.transpose(1, 0, 2) for s in states])
    return (Y, *states)


def _steps(direction, d, length):
    return range(length - 1, -1, -1) if _walks_backwards(direction, d) else range(length)


# --------------------------------------------------------------------------------------------------- LSTM


def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *, hidden_size=None,
         direction="forward", activations=None, activation_alpha=None, activation_beta=None, clip=None,
         input_forget=0, layout=0, activation_defaults="ort"):
    """ONNX LSTM -> (Y, Y_h, Y_c), float64."""
    X, W, R, B, lens, h0, c0, T, Bn, H, D = _setup("lstm", X, W, R, B, sequence_lens, initial_h, initial_c,
                                                   hidden_size, direction, layout)
    P = np.zeros((D, 3 * H)) if P is None else np.asarray(P, dtype=np.float64)
    acts = _acts_per_direction("lstm", D, activations, activation_alpha, activation_beta, activation_defaults)
    Y = np.zeros((T, D, Bn, H))
    Y_h = np.zeros((D, Bn, H))
    Y_c = np.zeros((D, Bn, H))
    for d in range(D):
        f_act, g_act, h_act = acts[d]
        Wi, Wo, Wf, Wc = _blocks(W[d], 4, H)
        Ri, Ro, Rf, Rc = _blocks(R[d], 4, H)
        Wbi, Wbo, Wbf, Wbc, Rbi, Rbo, Rbf, Rbc = _blocks(B[d], 8, H)
        Pi, Po, Pf = _blocks(P[d], 3, H)
        for b in range(Bn):
            if lens[b] == 0:
                continue  # Y, Y_h, Y_c stay 0
            h = h0[d, b].copy()
            c = c0[d, b].copy()
            for t in _steps(direction, d, lens[b]):
                x = X[t, b]
                i = _act(f_act, _clip(Wi @ x + Ri @ h + Pi * c + Wbi + Rbi, clip))
                if input_forget:
                    f = 1.0 - i
                else:
                    f = _act(f_act, _clip(Wf @ x + Rf @ h + Pf * c + Wbf + Rbf, clip))
                g = _act(g_act, _clip(Wc @ x + Rc @ h + Wbc + Rbc, clip))
                c = f * c + i * g
                o = _act(f_act, _clip(Wo @ x + Ro @ h + Po * c + Wbo + Rbo, clip))
                h = o * _act(h_act, c)
                Y[t, d, b] = h
            Y_h[d, b] = h
            Y_c[d, b] = c
    return _finish(Y, [Y_h, Y_c], layout)


# ---------------------------------------------------------------------------------------------------- GRU


def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None, direction="forward",
        activations=None, activation_alpha=None, activation_beta=None, clip=None, linear_before_reset=0,
        layout=0, activation_defaults="ort"):
    """ONNX GRU -> (Y, Y_h), float64."""
    X, W, R, B, lens, h0, _, T, Bn, H, D = _setup("gru", X, W, R, B, sequence_lens, initial_h, None,
                                                  hidden_size, direction, layout)
    acts = _acts_per_direction("gru", D, activations, activation_alpha, activation_beta, activation_defaults)
    Y = np.zeros((T, D, Bn, H))
    Y_h = np.zeros((D, Bn, H))
    for d in range(D):
        f_act, g_act = acts[d]
        Wz, Wr, Wh = _blocks(W[d], 3, H)
        Rz, Rr, Rh = _blocks(R[d], 3, H)
        Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = _blocks(B[d], 6, H)
        for b in range(Bn):
            if lens[b] == 0:
                continue
            h = h0[d, b].copy()
            for t in _steps(direction, d, lens[b]):
                x = X[t, b]
                z = _act(f_act, _clip(Wz @ x + Rz @ h + Wbz + Rbz, clip))
                r = _act(f_act, _clip(Wr @ x + Rr @ h + Wbr + Rbr, clip))
                if linear_before_reset:
                    pre = Wh @ x + r * (Rh @ h + Rbh) + Wbh
                else:
                    pre = Wh @ x + Rh @ (r * h) + Rbh + Wbh
                n = _act(g_act, _clip(pre, clip))
                h = (1.0 - z) * n + z * h
                Y[t, d, b] = h
            Y_h[d, b] = h
    return _finish(Y, [Y_h], layout)


# ---------------------------------------------------------------------------------------------------- RNN


def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None, direction="forward",
        activations=None, activation_alpha=None, activation_beta=None, clip=None, layout=0,
        activation_defaults="ort"):
    """ONNX RNN -> (Y, Y_h), float64."""
    X, W, R, B, lens, h0, _, T, Bn, H, D = _setup("rnn", X, W, R, B, sequence_lens, initial_h, None,
                                                  hidden_size, direction, layout)
    acts = _acts_per_direction("rnn", D, activations, activation_alpha, activation_beta, activation_defaults)
    Y = np.zeros((T, D, Bn, H))
    Y_h = np.zeros((D, Bn, H))
    for d in range(D):
        (f_act,) = acts[d]
        Wb, Rb = _blocks(B[d], 2, H)
        for b in range(Bn):
            if lens[b] == 0:
                continue
            h = h0[d, b].copy()
            for t in _steps(direction, d, lens[b]):
                h = _act(f_act, _clip(W[d] @ X[t, b] + R[d] @ h + Wb + Rb, clip))
                Y[t, d, b] = h
            Y_h[d, b] = h
    return _finish(Y, [Y_h], layout)


REFERENCE = {"lstm": lstm, "gru": gru, "rnn": rnn}

# ----------------------------------------------------------------------------------- random configurations

GATES = {"lstm": 4, "gru": 3, "rnn": 1}

# sensible random alpha / beta for each user, so that every activation stays bounded with small weights
_ALPHA_RANGE = {
    "affine": (-1.2, 1.2),
    "leakyrelu": (0.0, 0.5),
    "thresholdedrelu": (-0.5, 0.8),
    "scaledtanh": (0.3, 1.5),
    "hardsigmoid": (0.1, 0.6),
    "elu": (0.2, 1.5),
}
_BETA_RANGE = {"affine": (-0.5, 0.5), "scaledtanh": (0.3, 1.5), "hardsigmoid": (0.2, 0.8)}

# activations that keep long recurrences bounded
TAME_ACTIVATIONS = ("Tanh", "Sigmoid", "Softsign", "HardSigmoid", "ScaledTanh")


def _random_activation_lists(rng, names):
    """alpha / beta lists for ``names``: full, truncated (too short) or empty, drawn independently."""
    alphas, betas = [], []
    for name in names:
        n = name.lower()
        if n in _ALPHA_RANGE:
            alphas.append(float(rng.uniform(*_ALPHA_RANGE[n])))
        if n in _BETA_RANGE:
            betas.append(float(rng.uniform(*_BETA_RANGE[n])))

    def cut(values):
        mode = rng.integers(4)
        if mode == 0 or not values:
            return None if rng.random() < 0.5 else []
        if mode == 1:
            return values[: rng.integers(0, len(values))]  # too short
        return values

    return cut(alphas), cut(betas)


def random_case(cell, rng, *, layout=0, dtype=np.float32, shape=None, tame=False, activation_pool=None):
    """One random configuration: ``(args, kwargs)`` for ``ops.<cell>(*args, **kwargs)``.

    ``args`` holds X, W, R, B, sequence_lens, initial_h (, initial_c, P) in ONNX order (absent -> None),
    already in ``layout``; ``kwargs`` the attributes (absent attributes left out, so defaults apply).
    """
    G = GATES[cell]
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    D = _num_directions(direction)
    if shape is None:
        T = int(rng.choice([1, 1, 2, 3, 4, 5, 7, 9, 12]))
        Bn = int(rng.choice([1, 1, 2, 3, 4, 5]))
        I = int(rng.choice([1, 2, 3, 5, 8]))
        H = int(rng.choice([1, 1, 2, 3, 4, 5, 8, 16]))
    else:
        T, Bn, I, H = shape

    def u(lo, hi, *shp):
        return rng.uniform(lo, hi, shp).astype(dtype)

    X = u(-1.0, 1.0, T, Bn, I)
    W = u(-0.5, 0.5, D, G * H, I)
    R = u(-0.5, 0.5, D, G * H, H)
    B = u(-0.5, 0.5, D, 2 * G * H) if rng.random() < 0.7 else None
    seq = None
    r = rng.random()
    if r < 0.5:
        seq = rng.integers(0, T + 1, Bn).astype(np.int32)
        if Bn >= 2 and rng.random() < 0.5:  # make sure 0 and T both occur
            seq[rng.permutation(Bn)[:2]] = [0, T]
    elif r < 0.6:
        seq = np.full(Bn, T, np.int32)
    h0 = u(-1.0, 1.0, D, Bn, H) if rng.random() < 0.5 else None
    c0 = u(-2.0, 2.0, D, Bn, H) if cell == "lstm" and rng.random() < 0.5 else None
    P = u(-0.5, 0.5, D, 3 * H) if cell == "lstm" and rng.random() < 0.5 else None

    kw = {}
    if rng.random() < 0.6:
        kw["hidden_size"] = H
    if direction != "forward" or rng.random() < 0.3:
        kw["direction"] = direction
    if rng.random() < 0.3:
        kw["clip"] = float(rng.uniform(0.05, 3.0))
    if rng.random() < 0.65:
        pool = activation_pool or (TAME_ACTIVATIONS if tame else ACTIVATION_NAMES)
        names = [str(rng.choice(pool)) for _ in range(_N_ACTS[cell] * D)]
        kw["activations"] = names
        alpha, beta = _random_activation_lists(rng, names)
        if alpha is not None:
            kw["activation_alpha"] = alpha
        if beta is not None:
            kw["activation_beta"] = beta
    if cell == "lstm" and rng.random() < 0.3:
        kw["input_forget"] = 1
    if cell == "gru" and rng.random() < 0.5:
        kw["linear_before_reset"] = 1
    if layout:
        kw["layout"] = 1
        X = np.ascontiguousarray(X.transpose(1, 0, 2))
        h0 = None if h0 is None else np.ascontiguousarray(h0.transpose(1, 0, 2))
        c0 = None if c0 is None else np.ascontiguousarray(c0.transpose(1, 0, 2))
    args = [X, W, R, B, seq, h0]
    if cell == "lstm":
        args += [c0, P]
    return args, kw


def describe(cell, args, kw):
    """A short, reproducible description of a configuration for assertion messages."""
    X = args[0]
    present = [name for name, a in zip(_INPUT_NAMES[cell], args, strict=True) if a is not None]
    seq = args[4]
    return (f"{cell} X{tuple(X.shape)} H={args[2].shape[-1]} inputs={present} "
            f"seq_lens={None if seq is None else seq.tolist()} attrs={kw}")


_INPUT_NAMES = {
    "lstm": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
    "gru": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "rnn": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
}
INPUT_NAMES = _INPUT_NAMES


def stable_case(cell, rng, *, max_abs=20.0, tries=100, **options):
    """:func:`random_case` redrawn (from the same ``rng``) until the reference outputs are finite and bounded
    by ``max_abs``: an exploding recurrence (Relu / Affine / Softplus feedback) only measures float32 round-off
    growth, not semantics. Returns ``(args, kwargs, reference_outputs)``."""
    for _ in range(tries):
        args, kw = random_case(cell, rng, **options)
        with np.errstate(all="ignore"):
            try:
                expected = REFERENCE[cell](*args, **kw)
            except OverflowError:
                continue
        if all(np.all(np.isfinite(e)) and np.max(np.abs(e), initial=0.0) <= max_abs for e in expected):
            return args, kw, expected
    raise RuntimeError(f"no bounded {cell} configuration in {tries} draws")
