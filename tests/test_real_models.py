"""Third-party ONNX models with recurrent nodes, as shipped inside PyPI wheels, against onnxruntime.

* faster-whisper 1.2.1: ``silero_vad_v6.onnx`` (one LSTM among Conv/STFT-like nodes);
* silero-vad 6.2.3: LSTMs inside ``If`` branches (8 / 16 kHz), a whole-sequence model, an LSTM whose weights
  are computed by other nodes, and a half-precision model;
* ddddocr 1.6.1: ``common_old.onnx``, a CRNN whose bidirectional LSTM was quantized by onnxruntime into
  ``com.microsoft::DynamicQuantizeLSTM``.

The wheels are downloaded once per test session (``pip download``); the tests skip with the reason when pip
cannot reach a package index.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile

import numpy as np
import pytest

import fusedrnn

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
def wheels(tmp_path_factory):
    """A function (package, version, member) -> path of ``member`` extracted from the package's wheel."""
    root = tmp_path_factory.mktemp("wheels")
    cache: dict = {}

    def get(package: str, version: str, member: str):
        if (package, version) not in cache:
            res = subprocess.run([sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps",
                                  "--only-binary=:all:", "-q", "-d", str(root / package)],
                                 capture_output=True, text=True, timeout=300)
            found = list((root / package).glob("*.whl")) if res.returncode == 0 else []
            cache[(package, version)] = found[0] if found else res.stderr.strip().splitlines()[-1:]
        whl = cache[(package, version)]
        if isinstance(whl, list):
            pytest.skip(f"cannot download {package}=={version} with pip: {' '.join(whl) or 'no wheel'}")
        out = root / package / "extracted"
        with zipfile.ZipFile(whl) as z:
            z.extract(member, out)
        return out / member

    return get


def ort_session(model):
    """A single-threaded onnxruntime session on a path or serialized model bytes."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])


def audio(rng, n: int) -> np.ndarray:
    """Speech-like test audio at 16 kHz: a few harmonics with a syllable envelope plus noise, in [-1, 1]."""
    t = np.arange(n) / 16000
    f0 = 140 + 30 * np.sin(2 * np.pi * 3 * t)
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / 16000) / k for k in range(1, 6))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t), 0, None)
    return (0.3 * envelope * voiced + 0.01 * rng.normal(size=n)).astype(np.float32)


def assert_matches(got: dict, ref: list, session, rtol=1e-5):
    """Every output within rtol of the output's largest magnitude (and 1e-6 absolute)."""
    for info, r in zip(session.get_outputs(), ref, strict=True):
        g = got[info.name]
        assert g.shape == r.shape and g.dtype == r.dtype, info.name
        scale = max(1.0, float(np.max(np.abs(r.astype(np.float64)))))
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=0, atol=rtol * scale,
                                   err_msg=info.name)


def test_faster_whisper_silero_v6(wheels):
    path = wheels("faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx")
    rng = np.random.default_rng(0)
    frames = audio(rng, 64 * 512).reshape(64, 512)
    x = np.concatenate([np.zeros((64, 64), np.float32), frames], axis=1)  # 64 samples of context per frame
    feeds = {"input": x, "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}
    model = fusedrnn.onnx.load(path)
    assert model.recurrent_nodes == ["/decoder/rnn/LSTM"]
    sess = ort_session(path)
    assert_matches(model.run(feeds), sess.run(None, feeds), sess)
    # the same model on reduced-precision targets stays close to fp32
    probs = model.run(feeds)["speech_probs"]
    for target in ("fp16", "bf16"):
        assert np.max(np.abs(model.to(target).run(feeds)["speech_probs"] - probs)) < 0.05, target


@pytest.mark.parametrize("member, recurrent", [
    ("silero_vad.onnx", 4),               # 8 kHz and 16 kHz LSTMs inside If branches
    ("silero_vad_16k_op15.onnx", 2),
    ("silero_vad_openvino_16k.onnx", 1),  # LSTM weights produced by Unsqueeze nodes
    ("silero_vad_half.onnx", 2),
])
def test_silero_vad_streaming_models(wheels, member, recurrent):
    path = wheels("silero-vad", "6.2.3", f"silero_vad/data/{member}")
    model = fusedrnn.onnx.load(path)
    assert len(model.recurrent_nodes) == recurrent
    sess = ort_session(path)
    names = {i.name for i in sess.get_inputs()}
    rng = np.random.default_rng(1)
    chunk = 576 if member == "silero_vad_openvino_16k.onnx" else 512
    signal = audio(rng, 8 * chunk)
    for rate in ([16000, 8000] if "sr" in names else [16000]):
        state = np.zeros((2, 1, 128), np.float32)
        step = chunk if rate == 16000 else chunk // 2
        for k in range(4):  # stream a few chunks, feeding the state back
            feeds = {"input": signal[None, k * step:(k + 1) * step], "state": state}
            if "sr" in names:
                feeds["sr"] = np.array(rate, np.int64)
            ref = sess.run(None, feeds)
            got = model.run(feeds)
            assert_matches(got, ref, sess)
            state = ref[1]


def test_silero_vad_whole_sequence(wheels):
    path = wheels("silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx")
    rng = np.random.default_rng(2)
    frames = audio(rng, 200 * 512).reshape(200, 512)
    x = np.concatenate([np.zeros((200, 64), np.float32), frames], axis=1)
    feeds = {"input": x, "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}
    sess = ort_session(path)
    assert_matches(fusedrnn.onnx.load(path).run(feeds), sess.run(None, feeds), sess)


def test_ddddocr_dynamic_quantize_lstm(wheels):
    """The quantized CRNN: the DynamicQuantizeLSTM node on onnxruntime's own inputs agrees with onnxruntime's
    output to float32 rounding (fusedrnn computes h in float32 with MLAS's logistic/tanh before re-quantizing it
    to uint8 every step, as onnxruntime does, so no uint8 code lands on the other side of a rounding boundary),
    and the whole model decodes the same text."""
    import onnx
    from onnx import helper, numpy_helper

    from fusedrnn.ops import dynamic_quantize_lstm

    path = wheels("ddddocr", "1.6.1", "ddddocr/common_old.onnx")
    proto = onnx.load(str(path))
    node = next(n for n in proto.graph.node if n.op_type == "DynamicQuantizeLSTM")
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    for name in (node.input[0], node.input[5], node.input[6], node.output[0]):
        probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    sess = ort_session(probe.SerializeToString())
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    model = fusedrnn.onnx.load(proto)
    rng = np.random.default_rng(1)
    image = np.ones((1, 1, 64, 160), np.float32)
    image[..., 20:44, 10:150] = rng.uniform(0, 1, (24, 140)) > 0.6  # strokes on a white background
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input1": image}), strict=True))
    w = [inits[n] for n in node.input[1:4]]
    q = [inits[n] for n in node.input[8:12]]
    y = dynamic_quantize_lstm(outs[node.input[0]], *w, None, outs[node.input[5]], outs[node.input[6]], None, *q,
                              hidden_size=512, direction="bidirectional")[0]
    assert y.shape == outs[node.output[0]].shape
    assert np.max(np.abs(y - outs[node.output[0]])) < 1e-5
    logits = model.run({"input1": image})[proto.graph.output[0].name]
    ref = outs[proto.graph.output[0].name]
    np.testing.assert_array_equal(logits.argmax(-1), ref.argmax(-1))
