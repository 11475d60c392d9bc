"""BIDIRECTIONAL_SEQUENCE_LSTM (48 inputs, float and hybrid) against the LiteRT interpreter: random models with
merged or separate outputs, time-major or batch-major, aux input in stacking mode (aux weights) and in the mode
where the backward cell reads the aux input, run twice without reset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_litert_random import random_config, random_float_lstm

from fusedrnn.errors import UnsupportedFeatureError
from fusedrnn.targets.litert.graph import load
from fusedrnn.targets.litert.slots import const
from fusedrnn.targets.litert.writer import bidirectional_lstm_model

interp = pytest.importorskip("ai_edge_litert.interpreter")


def _run(model: bytes, feeds: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    it = interp.Interpreter(model_content=model,
                            experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.reset_all_variables()
    res = []
    for feed in feeds:
        for d, v in zip(it.get_input_details(), feed, strict=True):
            it.set_tensor(d["index"], v)
        it.invoke()
        res.append([it.get_tensor(d["index"]).copy() for d in it.get_output_details()])
    return res


@pytest.mark.parametrize("hybrid", [False, True], ids=["float", "hybrid"])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_bidirectional_lstm(hybrid, seed):
    rng = np.random.default_rng(seed)
    cfg = random_config(rng)
    cfg["layer_norm"] = False  # the bidirectional op has no layer norm inputs
    cfg["asymmetric"] = bool(rng.random() < 0.5)
    cfg["time_major"] = bool(rng.random() < 0.6)
    cfg["P"] = int(rng.integers(2, 12)) if cfg["projection"] else cfg["H"]
    fw, opts = random_float_lstm(rng, cfg, hybrid=hybrid)
    bw, _ = random_float_lstm(rng, cfg, hybrid=hybrid)
    aux_mode = rng.choice(["none", "stacking", "bw_reads_aux"])
    n_aux = 0
    if aux_mode == "stacking":
        n_aux = int(rng.integers(1, 6))
        for t in (fw, bw):
            for g in range(4):
                if g == 0 and t.cifg:
                    continue
                w = (rng.uniform(-1, 1, (cfg["H"], n_aux)) / np.sqrt(n_aux)).astype(np.float32)
                if hybrid:
                    s = float(np.abs(w).max() / 127)
                    t.aux[g] = const(f"aux{g}", np.round(w / s).astype(np.int8), s)
                else:
                    t.aux[g] = const(f"aux{g}", w)
    elif aux_mode == "bw_reads_aux":
        n_aux = cfg["I"]
    opts = {k: v for k, v in opts.items() if k != "diagonal_recurrent_tensors"}
    opts["merge_outputs"] = bool(rng.random() < 0.5)
    if cfg["B"] > 1 and not cfg["time_major"] and opts["merge_outputs"]:
        # litert.md section 8: the batch-major merged kernel addresses row b's state at b x (merged width), past
        # the buffer for the last rows (the interpreter reads memory it does not own): refused, not run
        model = bidirectional_lstm_model(fw, bw, opts, batch=cfg["B"], time=cfg["T"], aux_input_size=n_aux)
        x = rng.standard_normal((cfg["B"], cfg["T"], cfg["I"])).astype(np.float32)
        aux = [rng.standard_normal((cfg["B"], cfg["T"], n_aux)).astype(np.float32)] if n_aux else []
        with pytest.raises(UnsupportedFeatureError, match="merge_outputs"):
            load(model)(x, *aux)
        return
    model = bidirectional_lstm_model(fw, bw, opts, batch=cfg["B"], time=cfg["T"], aux_input_size=n_aux)
    shape = (cfg["T"], cfg["B"]) if cfg["time_major"] else (cfg["B"], cfg["T"])
    feeds = []
    for _ in range(2):
        feed = [rng.standard_normal(shape + (cfg["I"],)).astype(np.float32)]
        if n_aux:
            feed.append(rng.standard_normal(shape + (n_aux,)).astype(np.float32))
        feeds.append(feed)
    want = _run(model, feeds)
    ours = load(model)
    for k, feed in enumerate(feeds):
        got = ours(*feed)
        got = [got] if isinstance(got, np.ndarray) else list(got)
        assert len(got) == len(want[k])
        for g, w in zip(got, want[k], strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6, err_msg=f"invoke {k}, {aux_mode}, config {cfg}")
            if hybrid and not cfg["asymmetric"]:  # the interpreter's Eigen activations: bit-exact
                np.testing.assert_array_equal(g, w, err_msg=f"invoke {k}, {aux_mode}, config {cfg}")


def test_bidirectional_op_imports_as_a_bidirectional_layer():
    import fusedrnn
    from fusedrnn.frontends.tflite import layer_from_tflite

    rng = np.random.default_rng(11)
    cfg = random_config(rng)
    cfg.update(layer_norm=False, time_major=True, projection=True, proj_bias=True, P=5, peephole=True, B=2, T=4)
    fw, opts = random_float_lstm(rng, cfg, hybrid=False)
    bw, _ = random_float_lstm(rng, cfg, hybrid=False)
    opts = {k: v for k, v in opts.items() if k != "diagonal_recurrent_tensors"}
    opts["merge_outputs"] = True
    model = bidirectional_lstm_model(fw, bw, opts, batch=2, time=4)
    layer = layer_from_tflite(fusedrnn.LSTM, model, 0)
    assert layer.direction == "bidirectional" and not layer.batch_first and layer.output_size == 5
    x = rng.standard_normal((4, 2, cfg["I"])).astype(np.float32)
    np.testing.assert_allclose(layer(x)[0], load(model)(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(layer.to("litert-float")(x)[0], layer(x)[0], rtol=1e-6, atol=1e-6)
