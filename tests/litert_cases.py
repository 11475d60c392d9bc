"""Random LSTM options over TFLite's option space, shared by the LiteRT target and export tests."""

from __future__ import annotations

import numpy as np


def random_tflite_options(rng, D: int, H: int, Hp: int) -> dict:
    """Layer options TFLite's fused LSTM can carry: projection (bias, clip) when Hp != H, peepholes, layer norm,
    CIFG and cell clip, each drawn at random."""
    opts: dict = {}
    if Hp != H:
        opts["proj_W"] = rng.normal(size=(D, Hp, H)) / np.sqrt(H)
        if rng.random() < 0.5:
            opts["proj_b"] = rng.normal(size=(D, Hp)) * 0.2
        if rng.random() < 0.3:
            opts["proj_clip"] = 0.5
    if rng.random() < 0.3:
        opts["P"] = rng.normal(size=(D, 3, H)) * 0.3
    if rng.random() < 0.3:
        opts["layer_norm"] = rng.uniform(0.5, 1.5, size=(D, 4, H))
    if rng.random() < 0.3:
        opts["coupling"] = "cifg"
    if rng.random() < 0.3:
        opts["cell_clip"] = float(rng.choice([0.5, 2.0, 10.0]))
    return opts
