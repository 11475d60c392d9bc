"""Hostile and damaged .tflite files (issue 17, item 6): every malformed input (tensor, opcode or buffer indices
out of range, negative or huge shapes, zero / NaN scales, buffers shorter than their tensor, unknown types, missing
subgraphs, truncated flatbuffers, weights that are not constants, data-movement ops without their inputs) is
answered with a FusedRNNError naming what was expected and what the file holds, checked before anything is
allocated from the file's claims; the command line answers with one line and exit status 2. A seeded mutation fuzz
(bit flips and structural edits of the models the exporter writes) holds every outcome to a success or a
FusedRNNError (``FUSEDRNN_FUZZ_SEED`` / ``FUSEDRNN_FUZZ_SCALE`` run other and longer campaigns by hand)."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest
from click.testing import CliRunner
from mutation import mutate

import fusedrnn
from fusedrnn.cli import main
from fusedrnn.cli.common import MESSAGE_LIMIT
from fusedrnn.errors import FileFormatError, FusedRNNError, UnsupportedFeatureError

litert = pytest.importorskip("fusedrnn.litert")
flatbuffers = pytest.importorskip("flatbuffers")
from fusedrnn.targets.litert.schema import schema  # noqa: E402 - after the optional dependency's check


def _layer(cls, rng, D=1, I=3, H=4):
    G = {"lstm": 4, "rnn": 1}[cls.cell]
    arrays = [rng.normal(size=s).astype(np.float32) * 0.5 for s in ((D, G * H, I), (D, G * H, H), (D, G * H))]
    return cls(*arrays, direction="bidirectional" if D == 2 else "forward")


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    """The models the exporter writes: float, hybrid and int8x16 LSTMs (a bidirectional one through REVERSE_V2 and
    CONCATENATION), a BIDIRECTIONAL_SEQUENCE_LSTM, RNNs (float, hybrid bidirectional op), and ``to_tflite``'s."""
    rng = np.random.default_rng(17)
    cal = rng.normal(size=(5, 2, 3)).astype(np.float32)
    lstm, rnn = fusedrnn.LSTM, fusedrnn.RNN
    out = {
        "lstm_float": litert.export(_layer(lstm, rng), scheme="float", batch=2),
        "lstm_hybrid": litert.export(_layer(lstm, rng), scheme="hybrid", batch=2),
        "lstm_int8": litert.export(_layer(lstm, rng), scheme="int8x16", calibration=cal),
        "bilstm_int8": litert.export(_layer(lstm, rng, D=2), scheme="int8x16", calibration=cal),
        "bilstm_op": litert.export(_layer(lstm, rng, D=2), scheme="float", batch=2, bidirectional_op=True),
        "rnn_float": litert.export(_layer(rnn, rng), scheme="float", batch=2),
        "birnn_hybrid_op": litert.export(_layer(rnn, rng, D=2), scheme="hybrid", batch=2, bidirectional_op=True),
    }
    prepared = _layer(lstm, rng).to("litert-float", calibration=cal)
    out["to_tflite"] = litert.to_tflite(prepared, batch=2, time=5)
    return out


def run_model(blob: bytes) -> None:
    """Load, run the graph on zeros of its input details, and import every recurrent op as a layer."""
    model = litert.load(blob)
    ins = []
    for d in model.input_details():
        shape = tuple(int(s) if 0 < int(s) <= 64 else 1 for s in d["shape"])
        ins.append(np.zeros(shape, d["dtype"] if d["dtype"] is not None else np.float32))
    model(*ins)
    for k in range(len(model.ops)):
        fusedrnn.litert.layer_from_tflite(None, model, k)


# ---- structural edits through the schema's object API --------------------------------------------------------
def unpacked(blob: bytes):
    """The model as the schema's object tree, its arrays turned into lists (editable)."""
    s = schema()
    m = s.ModelT.InitFromObj(s.Model.GetRootAs(blob, 0))
    for g in m.subgraphs or []:
        for op in g.operators or []:
            for a in ("inputs", "outputs", "intermediates"):
                if getattr(op, a) is not None:
                    setattr(op, a, list(getattr(op, a)))
        for t in g.tensors or []:
            if t.shape is not None:
                t.shape = list(t.shape)
            q = t.quantization
            if q is not None:
                q.scale = None if q.scale is None else list(q.scale)
                q.zeroPoint = None if q.zeroPoint is None else list(q.zeroPoint)
        g.inputs, g.outputs = list(g.inputs), list(g.outputs)
    for b in m.buffers or []:
        if b.data is not None:
            b.data = list(b.data)
    return m


def packed(m) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _quantized(g):
    return [t for t in g.tensors if t.quantization is not None and t.quantization.scale]


def _weights(g):
    return [t for t in g.tensors if "weights" in (t.name.decode() if isinstance(t.name, bytes) else t.name)]


def edit(blob: bytes, what: str, rng: random.Random | None = None) -> bytes:
    """One structural damage ``what`` of ``blob`` (``rng`` picks where; None: the first place)."""
    rng = rng or random.Random(0)
    m = unpacked(blob)
    g = m.subgraphs[0]
    n = len(g.tensors)
    op = rng.choice(g.operators)
    if what == "tensor_index":
        op.inputs[rng.randrange(len(op.inputs))] = rng.choice([n, n + 7, 2**31 - 1, -2])
    elif what == "output_index":
        op.outputs[0] = rng.choice([n, -1])
    elif what == "opcode_index":
        op.opcodeIndex = rng.choice([len(m.operatorCodes), 999])
    elif what == "buffer_index":
        rng.choice(g.tensors).buffer = rng.choice([len(m.buffers), 10**6])
    elif what == "negative_shape":
        t = rng.choice([t for t in g.tensors if t.shape])
        t.shape[rng.randrange(len(t.shape))] = -3
    elif what == "huge_shape":  # the product would wrap an int64
        t = rng.choice(_weights(g))
        t.shape = [2**31 - 1, 2**31 - 1, 2**31 - 1, 4]
    elif what in ("zero_scale", "nan_scale", "negative_scale", "inf_scale"):
        t = rng.choice([t for t in _quantized(g) if t.type != 0])  # an integer tensor
        t.quantization.scale[0] = {"zero_scale": 0.0, "nan_scale": float("nan"), "negative_scale": -0.5,
                                   "inf_scale": float("inf")}[what]
    elif what == "zero_point_range":
        t = rng.choice([t for t in _quantized(g) if t.type != 0])
        t.quantization.zeroPoint = [100000] * len(t.quantization.scale)
    elif what == "short_buffer":
        b = rng.choice([b for b in m.buffers if b.data and len(b.data) > 1])
        b.data = b.data[: len(b.data) // 2]
    elif what == "unknown_type":
        rng.choice(g.tensors).type = 99
    elif what == "complex_weights":
        rng.choice(_weights(g)).type = 8  # COMPLEX64: its bytes would be read as raw uint8
    elif what == "no_subgraph":
        m.subgraphs = []
    elif what == "graph_input_index":
        g.inputs = [n + 3]
    elif what == "dropped_inputs":
        op.inputs = op.inputs[: rng.randrange(len(op.inputs))]
    elif what == "weights_without_data":
        rng.choice(_weights(g)).buffer = 0
    else:
        raise KeyError(what)
    return packed(m)


EDITS = ("tensor_index", "output_index", "opcode_index", "buffer_index", "negative_shape", "huge_shape",
         "zero_scale", "nan_scale", "negative_scale", "inf_scale", "zero_point_range", "short_buffer",
         "unknown_type", "complex_weights", "no_subgraph", "graph_input_index", "dropped_inputs",
         "weights_without_data")
NEEDLE = {"tensor_index": "tensor index", "output_index": "tensor index", "opcode_index": "opcode_index",
          "buffer_index": "buffer", "negative_shape": "dimensions >= 0", "huge_shape": "bytes",
          "zero_scale": "scale", "nan_scale": "scale", "negative_scale": "scale", "inf_scale": "scale",
          "zero_point_range": "zero_point", "short_buffer": "bytes", "unknown_type": "TensorType",
          "complex_weights": "COMPLEX64", "no_subgraph": "subgraph", "graph_input_index": "subgraph inputs"}


def test_the_exported_models_load_and_run(models):
    for blob in models.values():
        run_model(blob)


@pytest.mark.parametrize("what", EDITS)
def test_structural_damage_is_refused_with_what_was_expected(models, what):
    blob = models["lstm_int8" if "scale" in what or "zero_point" in what else "lstm_float"]
    bad = edit(blob, what)
    with pytest.raises(FusedRNNError) as ei:
        run_model(bad)
    msg = str(ei.value)
    assert "\n" not in msg and "Traceback" not in msg
    if what in NEEDLE:
        assert isinstance(ei.value, FileFormatError), (what, type(ei.value), msg)
        assert NEEDLE[what] in msg and "expected" in msg, (what, msg)
    if what == "weights_without_data":
        assert isinstance(ei.value, (UnsupportedFeatureError, FileFormatError)), msg


def test_huge_claims_are_refused_before_allocation(models):
    """A constant claiming 2^93 elements is compared with its buffer in Python integers (no wrap, no allocation)."""
    bad = edit(models["lstm_float"], "huge_shape")
    start = time.perf_counter()
    with pytest.raises(FileFormatError, match="bytes"):
        litert.read_model(bad)
    assert time.perf_counter() - start < 1.0


def test_truncated_and_foreign_bytes_are_file_format_errors(models):
    blob = models["lstm_float"]
    for cut in (0, 3, 8, 64, len(blob) // 2, len(blob) - 1):
        with pytest.raises(FusedRNNError):
            run_model(blob[:cut])
    with pytest.raises(FileFormatError, match="TFL3"):
        litert.read_model(b"\x00" * 4 + b"ONNX" + bytes(64))


def test_data_movement_ops_without_their_inputs_are_refused(models):
    m = unpacked(models["bilstm_int8"])
    g = m.subgraphs[0]
    names = [m.operatorCodes[op.opcodeIndex].builtinCode for op in g.operators]
    rev = next(op for op, c in zip(g.operators, names, strict=True) if c == schema().BuiltinOperator.REVERSE_V2)
    rev.inputs = rev.inputs[:1]
    with pytest.raises(FileFormatError, match="REVERSE_V2.*expected 2 input"):
        run_model(packed(m))


def test_underflowing_integer_multipliers_run(models):
    """An effective multiplier that underflows to 0 is outside the compiled loop's constants: the NumPy loop runs it."""
    m = unpacked(models["lstm_int8"])
    t = next(t for t in m.subgraphs[0].tensors if t.name in (b"layer0_fw_input_to_i_weights",))
    t.quantization.scale = [1e-30]
    run_model(packed(m))


# ---- the fuzz --------------------------------------------------------------------------------------------------
FUZZ_EDITS = EDITS
FLOAT_EDITS = tuple(e for e in EDITS if "scale" not in e and "zero_point" not in e)  # float models have no scales


def test_fuzzed_tflite_files_succeed_or_raise_fusedrnn_errors(models):
    seed = int(os.environ.get("FUSEDRNN_FUZZ_SEED", "17"))
    scale = float(os.environ.get("FUSEDRNN_FUZZ_SCALE", "1"))
    rng = random.Random(seed)
    blobs = [models[k] for k in sorted(models)]
    seen: dict[str, int] = {}
    stop = time.perf_counter() + 4.0 * scale
    for k in range(int(1500 * scale)):
        if time.perf_counter() > stop:
            break
        blob = rng.choice(blobs)
        if k % 2:
            mutated, kind = mutate(rng, blob), "flip"
        else:
            what = rng.choice(FUZZ_EDITS)
            try:
                mutated, kind = edit(blob, what, rng), "edit"
            except (IndexError, ValueError):  # nothing of that kind in this model
                continue
        try:
            with np.errstate(all="ignore"):
                run_model(mutated)
            outcome = "ok"
        except FusedRNNError:
            outcome = "refused"
        seen[f"{kind}-{outcome}"] = seen.get(f"{kind}-{outcome}", 0) + 1
    assert seen.get("flip-refused") and seen.get("edit-refused") and seen.get("flip-ok"), seen
    assert sum(seen.values()) >= 100, seen
    print(seen)


def _one_line(res) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.output.strip()
    assert err.startswith("Error:") and "\n" not in err and "Traceback" not in err, err
    assert len(err) <= MESSAGE_LIMIT + len("Error: "), len(err)
    return err


def test_cli_on_damaged_tflite_files_exits_0_or_2_with_one_line(models, tmp_path):
    rng = random.Random(int(os.environ.get("FUSEDRNN_FUZZ_SEED", "17")) + 1)
    runner = CliRunner()
    codes = {}
    for k in range(12):
        blob = models[("lstm_float", "rnn_float", "to_tflite")[k % 3]]
        bad = mutate(rng, blob) if k % 2 else edit(blob, rng.choice(FLOAT_EDITS), rng)
        src = tmp_path / f"m{k}.tflite"
        src.write_bytes(bad)
        res = runner.invoke(main, ["convert", str(src), "--to", "onnx", "--out", str(tmp_path / f"m{k}.onnx")])
        assert res.exit_code in (0, 2), (res.exit_code, res.output, res.exception)
        if res.exit_code == 2:
            _one_line(res)
        codes[res.exit_code] = codes.get(res.exit_code, 0) + 1
    assert codes.get(2), codes
    # ``run`` reads ONNX models: a .tflite (damaged or not) is refused with one line
    np.savez(tmp_path / "d.npz", x=np.zeros((5, 2, 3), np.float32))
    (tmp_path / "m.tflite").write_bytes(edit(models["lstm_float"], "tensor_index"))
    _one_line(runner.invoke(main, ["run", str(tmp_path / "m.tflite"), "--data", str(tmp_path / "d.npz"), "-t",
                                   "fp32", "--repeat", "1"]))
