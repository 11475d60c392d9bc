"""A naive, independent float64 reference of the extended (non-ONNX) LSTM options.

Written straight from ``shared/specs/litert.md`` section 4 (the TFLite float kernel, ``LstmStepFloat``), with
ONNX's double bias and ``sequence_lens`` semantics on top, and independently of ``fusedrnn``: plain loops over
directions, batch rows and timesteps, one gate at a time, scalar activation functions from :mod:`math`.

Canonical layout (the one ``fusedrnn.LSTM`` takes): gate order (i, f, g, o), matrices out x in.

* W [D, 4H, I]; R [D, 4H, Hp] (full) or [D, 4H] (diagonal: the recurrent term is R_gate ⊙ h);
* b_x, b_h [D, 4H] (double bias, summed); P [D, 3, H] peepholes in order (i, f, o);
* proj_W [D, Hp, H], proj_b [D, Hp]; layer_norm [D, 4, H] (coefficients, order i, f, g, o);
* x [T, B, I]; h0 [D, B, Hp]; c0 [D, B, H]; sequence_lens [B].

Per step, for one batch row (litert.md section 4)::

    for gate in (i unless CIFG, f unless input_forget, g):
        acc = W_gate·x + (R_gate ⊙ h | R_gate·h) [+ bias unless LN]
        peephole i, f: acc += P ⊙ c_prev
        LN: acc = (acc - mean) / sqrt(var + 1e-8) * L_gate + bias
        clip (ONNX): acc = clamp(acc, ±clip)
        gate = f_act(acc) for i, f; g_act(acc) for g
    CIFG: i = 1 - f;  input_forget (ONNX): f = 1 - i
    c = f*c + i*g ; cell_clip
    o likewise, with peephole P_o ⊙ c_new
    m = o * h_act(c)
    h = projection ? proj_clip(proj_W·m + proj_b) : m

``rounding``: an optional mapping point -> function(float64 array) -> array, applied at the points of
``fusedrnn.cells.rounding`` (weights, inputs, preact, gates, cell, hidden, outputs), so the same loop emulates
fp16 / bf16 storage when given e.g. ``lambda a: a.astype(np.float16).astype(np.float64)``. The bias
rounding point is applied to b_x and b_h separately (each is a stored weight tensor).
"""

from __future__ import annotations

import math

import numpy as np

LN_EPS = 1e-8
GATES = "ifgo"


# ----------------------------------------------------------------------------------- scalar activations
def _sigmoid(v: float) -> float:
    if v >= 0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)
    return e / (1.0 + e)


def _softplus(v: float) -> float:
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


SCALAR_ACTS = {
    "Sigmoid": _sigmoid,
    "Tanh": math.tanh,
    "Relu": lambda v: v if v > 0 else 0.0,
    "Softsign": lambda v: v / (1.0 + abs(v)),
    "HardSigmoid": lambda v: min(1.0, max(0.0, 0.2 * v + 0.5)),  # onnxruntime defaults alpha 0.2, beta 0.5
    "Softplus": _softplus,
    "LeakyRelu": lambda v: v if v >= 0 else 0.01 * v,
}


def act(name: str, v: np.ndarray) -> np.ndarray:
    f = SCALAR_ACTS[name]
    return np.array([f(float(e)) if not math.isnan(e) else math.nan for e in v], dtype=np.float64)


# ----------------------------------------------------------------------------------- the reference
def naive_lstm(x, W, R, b_x=None, b_h=None, h0=None, c0=None, *, direction="forward", P=None, coupling=None,
               cell_clip=None, proj_W=None, proj_b=None, proj_clip=None, layer_norm=None, clip=None,
               activations=("Sigmoid", "Tanh", "Tanh"), sequence_lens=None, rounding=None):
    """Returns (Y [T, D, B, Hp], Y_h [D, B, Hp], Y_c [D, B, H]), all float64.

    ``activations``: three names (f, g, h) for every direction, or one triple per direction.
    """
    rnd = dict(rounding or {})

    def r(point, a):
        if a is None or point not in rnd:
            return None if a is None else np.array(a, dtype=np.float64)
        return np.asarray(rnd[point](np.array(a, dtype=np.float64)), dtype=np.float64)

    f64 = lambda a: None if a is None else np.array(a, dtype=np.float64)  # noqa: E731
    W, R, b_x, b_h, P, proj_W, proj_b, layer_norm = (
        r("weights", f64(a)) for a in (W, R, b_x, b_h, P, proj_W, proj_b, layer_norm)
    )
    x = r("inputs", f64(x))
    T, B, _ = x.shape
    D = {"forward": 1, "reverse": 1, "bidirectional": 2}[direction]
    backwards = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
    H = W.shape[1] // 4
    Hp = H if proj_W is None else proj_W.shape[1]
    diagonal = R.ndim == 2
    h0 = np.zeros((D, B, Hp)) if h0 is None else r("inputs", f64(h0))
    c0 = np.zeros((D, B, H)) if c0 is None else r("inputs", f64(c0))
    if isinstance(activations[0], str):
        activations = [tuple(activations)] * D
    lens = [T] * B if sequence_lens is None else [int(v) for v in sequence_lens]

    Y = np.zeros((T, D, B, Hp))
    Y_h = np.zeros((D, B, Hp))
    Y_c = np.zeros((D, B, H))

    def blk(k):
        return slice(k * H, (k + 1) * H)

    def gate(d, k, xt, h_prev, cell_state, act_name):
        """Gate k (0 i, 1 f, 2 g, 3 o) of direction d for one batch row: litert.md section 4."""
        acc = W[d, blk(k)] @ xt
        acc = acc + (R[d, blk(k)] * h_prev if diagonal else R[d, blk(k)] @ h_prev)
        bias = np.zeros(H)
        for bb in (b_x, b_h):
            if bb is not None:
                bias = bias + bb[d, blk(k)]
        if layer_norm is None:
            acc = acc + bias
        if P is not None and k != 2:  # peepholes of i, f (old cell) and o (new cell)
            acc = acc + P[d, {0: 0, 1: 1, 3: 2}[k]] * cell_state
        if layer_norm is not None:
            mean = sum(acc) / H
            var = sum((a - mean) ** 2 for a in acc) / H
            acc = (acc - mean) / math.sqrt(var + LN_EPS) * layer_norm[d, k] + bias
        if clip is not None:
            acc = np.clip(acc, -clip, clip)
        acc = r("preact", acc)
        return act(act_name, acc)

    for d in range(D):
        fa, ga, ha = activations[d]
        for b in range(B):
            h = h0[d, b].copy()
            c = c0[d, b].copy()
            L = lens[b]
            times = range(L - 1, -1, -1) if backwards[d] else range(L)
            for t in times:
                xt = x[t, b]
                gi = gf = None
                if coupling != "cifg":
                    gi = gate(d, 0, xt, h, c, fa)
                if coupling != "input_forget":
                    gf = gate(d, 1, xt, h, c, fa)
                if coupling == "cifg":
                    gi = 1.0 - gf
                if coupling == "input_forget":
                    gf = 1.0 - gi
                gi, gf = r("gates", gi), r("gates", gf)
                gg = r("gates", gate(d, 2, xt, h, None, ga))
                c = gf * c + gi * gg
                if cell_clip is not None:
                    c = np.clip(c, -cell_clip, cell_clip)
                c = r("cell", c)
                go = r("gates", gate(d, 3, xt, h, c, fa))
                m = go * act(ha, c)
                if proj_W is None:
                    h = r("hidden", m)
                else:
                    m = r("hidden", m)
                    h = proj_W[d] @ m
                    if proj_b is not None:
                        h = h + proj_b[d]
                    if proj_clip is not None:
                        h = np.clip(h, -proj_clip, proj_clip)
                    h = r("hidden", h)
                Y[t, d, b] = h
            if L > 0:
                Y_h[d, b] = h
                Y_c[d, b] = c
    return r("outputs", Y), r("outputs", Y_h), r("outputs", Y_c)


# ----------------------------------------------------------------------------------- random configurations
ACTS_F = ("Sigmoid", "HardSigmoid")
ACTS_GH = ("Tanh", "Relu", "Softsign", "Sigmoid", "LeakyRelu")


def random_config(rng: np.random.Generator, *, T=None, B=None, H=None, I=None, direction=None,
                  allow_custom_acts=True, dtype=np.float64) -> dict:
    """A random extended-LSTM configuration: canonical arrays and options as ``naive_lstm`` keywords.

    Every option is drawn independently (projection and diagonal recurrence exclude each other)."""
    T = T or int(rng.choice([1, 2, 3, 5, 8]))
    B = B or int(rng.choice([1, 2, 3]))
    H = H or int(rng.choice([1, 2, 3, 5]))
    I = I or int(rng.choice([1, 2, 4]))
    direction = direction or str(rng.choice(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    proj = rng.random() < 0.4
    Hp = int(rng.choice([1, 2, 4])) if proj else H
    diagonal = (not proj) and rng.random() < 0.3
    s = 1.0 / math.sqrt(max(I, Hp))

    def rand(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dtype)

    cfg = dict(direction=direction)
    cfg["x"] = rand(T, B, I)
    cfg["W"] = rand(D, 4 * H, I, scale=s * 1.5)
    cfg["R"] = rand(D, 4 * H, scale=0.8) if diagonal else rand(D, 4 * H, Hp, scale=s * 1.5)
    cfg["b_x"] = rand(D, 4 * H, scale=0.5) if rng.random() < 0.7 else None
    cfg["b_h"] = rand(D, 4 * H, scale=0.5) if rng.random() < 0.5 else None
    if rng.random() < 0.5:
        cfg["h0"] = rand(D, B, Hp, scale=0.5)
        cfg["c0"] = rand(D, B, H, scale=0.5)
    cfg["P"] = rand(D, 3, H, scale=0.5) if rng.random() < 0.5 else None
    cfg["coupling"] = [None, "input_forget", "cifg"][int(rng.integers(3))]
    cfg["cell_clip"] = float(np.round(rng.uniform(0.2, 2.0), 3)) if rng.random() < 0.4 else None
    cfg["clip"] = float(np.round(rng.uniform(0.5, 3.0), 3)) if rng.random() < 0.25 else None
    cfg["layer_norm"] = rand(D, 4, H, scale=0.7) + 1.0 if rng.random() < 0.4 else None
    if proj:
        cfg["proj_W"] = rand(D, Hp, H, scale=1.0 / math.sqrt(H) * 1.2)
        cfg["proj_b"] = rand(D, Hp, scale=0.3) if rng.random() < 0.5 else None
        cfg["proj_clip"] = float(np.round(rng.uniform(0.1, 1.5), 3)) if rng.random() < 0.5 else None
    else:
        cfg["proj_W"] = cfg["proj_b"] = cfg["proj_clip"] = None
    if allow_custom_acts and rng.random() < 0.3:
        cfg["activations"] = [(str(rng.choice(ACTS_F)), str(rng.choice(ACTS_GH)), str(rng.choice(ACTS_GH)))
                              for _ in range(D)]
    if rng.random() < 0.4:
        cfg["sequence_lens"] = rng.integers(0, T + 1, size=B).astype(np.int32)
    return cfg


def describe(cfg: dict) -> str:
    """A one-line description of a configuration (for assertion messages)."""
    parts = [f"T,B,I={cfg['x'].shape}", f"H={cfg['W'].shape[1] // 4}", f"direction={cfg['direction']}"]
    for k in ("coupling", "cell_clip", "clip", "proj_clip", "activations"):
        if cfg.get(k) is not None:
            parts.append(f"{k}={cfg[k]}")
    for k in ("b_x", "b_h", "h0", "P", "layer_norm", "proj_W", "proj_b"):
        if cfg.get(k) is not None:
            parts.append(k)
    if cfg["R"].ndim == 2:
        parts.append("diagonal")
    if cfg.get("proj_W") is not None:
        parts.append(f"Hp={cfg['proj_W'].shape[1]}")
    if cfg.get("sequence_lens") is not None:
        parts.append(f"lens={cfg['sequence_lens'].tolist()}")
    return ", ".join(parts)


def layer_kwargs(cfg: dict) -> dict:
    """The ``fusedrnn.LSTM`` constructor arguments of a configuration."""
    kw = dict(direction=cfg["direction"], P=cfg.get("P"), coupling=cfg.get("coupling"), cell_clip=cfg.get("cell_clip"),
              proj_W=cfg.get("proj_W"), proj_b=cfg.get("proj_b"), proj_clip=cfg.get("proj_clip"),
              layer_norm=cfg.get("layer_norm"), clip=cfg.get("clip"), merge="stack")
    if cfg.get("activations") is not None:
        kw["activations"] = cfg["activations"]
    return kw


def naive_from_config(cfg: dict, rounding=None):
    keys = ("direction", "P", "coupling", "cell_clip", "proj_W", "proj_b", "proj_clip", "layer_norm", "clip",
            "sequence_lens")
    kw = {k: cfg.get(k) for k in keys}
    if cfg.get("activations") is not None:
        kw["activations"] = cfg["activations"]
    return naive_lstm(cfg["x"], cfg["W"], cfg["R"], cfg.get("b_x"), cfg.get("b_h"), cfg.get("h0"), cfg.get("c0"),
                      rounding=rounding, **kw)
