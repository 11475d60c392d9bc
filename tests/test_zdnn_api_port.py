"""zDNN 1.2.0's own tests and headers ported to fusedrnn.zdnn: every public name of zdnn.h with its value, libzdnn's
status messages and version string, the variadic NNPA queries, the lstm/gru tensor verifier's cases
(tests/testDriver_tensor_verify_zdnn_lstm_gru.c), libzdnn's check order (no state check in operations, buffers met
where the NNPA reads them), C-like buffers, init_ztensor, the work area and the places where libzdnn and the API
reference disagree.

The facts (names, values, strings, the driver's cases and expected statuses) come from IBM/zDNN's sources through
scripts/extract_zdnn_facts.py into tests/data/zdnn/; the test code is ours.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_zdnn_oracle import dlf16_round_ref, make_zt

import fusedrnn.zdnn as z
from fusedrnn.errors import AttributeValueError, BufferLayoutError, ShapeError
from fusedrnn.targets.zdnn.transform import read_values

S = z.Status
DATA = Path(__file__).parent / "data" / "zdnn"
ZDNN_H = json.loads((DATA / "zdnn_h.json").read_text())
MESSAGES = json.loads((DATA / "status_messages.json").read_text())
VERIFY = json.loads((DATA / "verify_lstm_gru.json").read_text())


@pytest.fixture(autouse=True)
def _precheck():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


# ---- zdnn.h ------------------------------------------------------------------------------------------------------
def test_every_zdnn_h_constant_and_enum_member_exists_with_its_value():
    names = {**ZDNN_H["constants"], **{k: v for e in ZDNN_H["enums"].values() for k, v in e.items()}}
    assert len(names) > 190
    wrong = {k: (v, getattr(z, k, None)) for k, v in names.items() if getattr(z, k, None) != v}
    assert wrong == {}
    assert all(k in z.__all__ for k in names)


def test_every_zdnn_h_function_and_macro_exists():
    missing = [f for f in ZDNN_H["functions"] if not callable(getattr(z, f.removeprefix("zdnn_"), None))]
    assert missing == [] and len(ZDNN_H["functions"]) > 60
    assert set(ZDNN_H["function_macros"]) <= set(z.__all__)
    info = z.RNN_TYPE_GRU | z.PREV_LAYER_BIDIR | z.USAGE_HIDDEN_BIASES | 0x5A
    assert (z.CONCAT_RNN_TYPE(info), z.CONCAT_PREV_LAYER(info), z.CONCAT_USAGE(info)) \
        == (z.RNN_TYPE_GRU, z.PREV_LAYER_BIDIR, z.USAGE_HIDDEN_BIASES)
    assert z.MSB_BITMASK(16, z.NNPA_8_BIT_BINARY_INT) == z.QUERY_DATATYPE_BINARY_INT8
    assert z.MSB_BITMASK(32, z.NNPA_LAYOUTFMT_4DGENERIC) == z.QUERY_LAYOUTFMT_4DGENERIC


def test_status_classes_partition_the_statuses():
    classes = (z.ZDNN_WARNING, z.ZDNN_PARAMETER_ERROR, z.ZDNN_DATA_ERROR, z.ZDNN_HW_ERROR)
    for s in S:
        if s != S.ZDNN_OK:
            assert (int(s) & 0xFFFF0000) in classes, s.name


# ---- messages and version --------------------------------------------------------------------------------------
def test_status_messages_are_libzdnns():
    assert set(MESSAGES["messages"]) == {s.name for s in S}
    for s in S:
        assert z.get_status_message(s) == MESSAGES["messages"][s.name]
        assert z.get_status_message(int(s)) == s.message
    for unknown in (0x00040013, 0x12345, -1, 0x000CF00A):
        assert z.get_status_message(unknown) == MESSAGES["unknown"]


def test_library_version_string_is_libzdnns():
    assert z.get_library_version_str() == MESSAGES["library_version_str"] == z.ZDNN_VERSION
    assert z.get_library_version() == z.ZDNN_VERNUM


# ---- variadic queries --------------------------------------------------------------------------------------------
def test_nnpa_queries_take_a_count_first_as_in_c():
    z.set_machine("telum1")
    assert z.is_nnpa_function_installed(0)
    assert z.is_nnpa_function_installed(1, z.NNPA_ADD)
    assert z.is_nnpa_function_installed(3, z.NNPA_ADD, z.NNPA_LSTMACT, z.NNPA_GRUACT)
    assert not z.is_nnpa_function_installed(2, z.NNPA_ADD, z.NNPA_MATMUL_OP_BCAST1)
    assert not z.is_nnpa_function_installed(1, 256)  # out of range: False, as libzdnn's guard
    assert z.is_nnpa_parmblk_fmt_installed(1, z.NNPA_PARMBLKFORMAT_0)
    assert not z.is_nnpa_parmblk_fmt_installed(2, z.NNPA_PARMBLKFORMAT_0, z.NNPA_PARMBLKFORMAT_1)
    z.set_machine("telum2")
    assert z.is_nnpa_function_installed(2, z.NNPA_MATMUL_OP_BCAST1, z.NNPA_TRANSFORM)
    assert z.is_nnpa_parmblk_fmt_installed(2, z.NNPA_PARMBLKFORMAT_0, z.NNPA_PARMBLKFORMAT_1)
    # a count that disagrees with the codes given (a port that dropped the count) is an error, not a silent False
    for call in (lambda: z.is_nnpa_function_installed(z.NNPA_ADD), lambda: z.is_nnpa_function_installed(2, 16),
                 lambda: z.is_nnpa_parmblk_fmt_installed(z.NNPA_PARMBLKFORMAT_1)):
        with pytest.raises(AttributeValueError, match="count"):
            call()


# ---- testDriver_tensor_verify_zdnn_lstm_gru.c ------------------------------------------------------------------
def _driver_tensors(act: str, direction: str, all_ts: bool) -> dict[str, z.ZTensor]:
    """The driver's create_ztensors: NHWC FP32 zero tensors of the lstm/gru shapes (layouts are not checked)."""
    d = VERIFY["defaults"]
    ts, b, f, h = d["num_timesteps"], d["num_batches"], d["num_features"], d["num_hidden"]
    D = 2 if direction == "BIDIR" else 1
    g = 4 if act == "LSTM" else 3
    ph = -(-h // 64) * 64
    out = h if D < 2 else D * ph
    shapes = {"INPUT": (ts, 1, b, f), "H0": (D, 1, b, h), "C0": (D, 1, b, h), "WEIGHTS": (D, 1, f, g * ph),
              "BIASES": (D, 1, 1, g * ph), "HIDDEN_WEIGHTS": (D, 1, h, g * ph), "HIDDEN_BIASES": (D, 1, 1, g * ph),
              "HN_OUTPUT": (ts if all_ts else 1, 1, b, out), "CF_OUTPUT": (1, 1, b, out)}
    return {k: make_zt(z.ZDNN_NHWC, "FP32", s, np.zeros(s, np.float32)) for k, s in shapes.items()}


def _run_driver(act: str, t: dict[str, z.ZTensor], direction: int) -> z.Status:
    if act == "LSTM":
        return z.lstm(t["INPUT"], t["H0"], t["C0"], t["WEIGHTS"], t["BIASES"], t["HIDDEN_WEIGHTS"],
                      t["HIDDEN_BIASES"], direction, None, t["HN_OUTPUT"], t["CF_OUTPUT"])
    return z.gru(t["INPUT"], t["H0"], t["WEIGHTS"], t["BIASES"], t["HIDDEN_WEIGHTS"], t["HIDDEN_BIASES"],
                 direction, None, t["HN_OUTPUT"])


_DRIVER_CASES = [(c, act, d) for c in VERIFY["cases"] for act in ("LSTM", "GRU") for d in ("FWD", "BWD", "BIDIR")
                 if not (c["lstm_only"] and act == "GRU")]


@pytest.mark.parametrize(("case", "act", "direction"), _DRIVER_CASES,
                         ids=[f"{c['test']}-{c['tensor']}-{a}-{d}" for c, a, d in _DRIVER_CASES])
def test_lstm_gru_tensor_verifier_cases(case, act, direction):
    assert len(VERIFY["cases"]) == 39
    for all_ts in (True, False):
        t = _driver_tensors(act, direction, all_ts)
        if case["tensor"] != "NONE":
            desc = t[case["tensor"]].transformed_desc
            if case["kind"] == "shape":
                setattr(desc, f"dim{case['dim']}", case["value"][f"{act}/{direction}"])
            else:
                setattr(desc, case["kind"], case["value"])
        assert _run_driver(act, t, getattr(z, direction)) == getattr(S, case["status"]), all_ts


# ---- check order: no state check in operations, buffers after every check ----------------------------------------
def _fresh(shape=(2, 3, 4)):
    return make_zt(z.ZDNN_3DS, "FP32", shape, transform=False)


def test_operations_do_not_check_the_state():
    x = make_zt(z.ZDNN_3DS, "FP32", (2, 3, 4), np.full((2, 3, 4), 2.0, np.float32))
    never = _fresh()  # never transformed: read as its zeroed buffer holds
    out = _fresh()
    assert z.add(never, x, out) == S.ZDNN_OK and out.is_transformed
    assert np.array_equal(read_values(out), read_values(x))
    out2 = _fresh()
    assert z.relu(never, None, out2) == S.ZDNN_OK and not read_values(out2).any()


def test_descriptor_checks_come_before_the_buffer():
    x = make_zt(z.ZDNN_3DS, "FP32", (2, 3, 4), np.ones((2, 3, 4), np.float32))
    nobuf = _fresh()
    nobuf.buffer, nobuf.buffer_size = None, 0
    assert z.relu(nobuf, -1.0, _fresh()) == S.ZDNN_INVALID_CLIPPING_VALUE
    assert z.relu(nobuf, 2.0, _fresh()) == S.ZDNN_INVALID_BUFFER
    assert z.add(x, nobuf, _fresh((2, 3, 5))) == S.ZDNN_INVALID_SHAPE
    assert z.add(x, nobuf, _fresh()) == S.ZDNN_INVALID_BUFFER
    with z.settings.override(precheck=False):  # the NNPA checks shapes first too (program exception here)
        with pytest.raises(z.NNPAProgramException):
            z.add(x, nobuf, _fresh((2, 3, 5)))


def test_lstm_statuses_in_libzdnns_order():
    t = _driver_tensors("LSTM", "FWD", True)
    t["INPUT"].buffer = None  # buffers are not looked at before the verifier's checks
    t["HN_OUTPUT"].transformed_desc.dim2 += 1
    assert _run_driver("LSTM", t, z.FWD) == S.ZDNN_INVALID_SHAPE
    t = _driver_tensors("LSTM", "FWD", True)
    t["INPUT"].buffer = None
    assert _run_driver("LSTM", t, z.FWD) == S.ZDNN_INVALID_BUFFER
    t = _driver_tensors("GRU", "FWD", True)
    assert _run_driver("GRU", t, 7) == S.ZDNN_INVALID_DIRECTION  # after the verifier, as libzdnn's aiu_lstm_gru
    t["WEIGHTS"].transformed_desc.dim1 += 64
    assert _run_driver("GRU", t, 7) == S.ZDNN_INVALID_SHAPE
    t = _driver_tensors("LSTM", "BIDIR", False)
    for k in ("H0", "C0", "INPUT"):
        t[k].is_transformed = False  # never checked
    assert _run_driver("LSTM", t, z.BIDIR) == S.ZDNN_OK


def _lstm_inputs(x, W, B, R, b, h):
    ts, _, f = x.shape
    rt = z.RNN_TYPE_LSTM
    return (make_zt(z.ZDNN_3DS, "FP32", (ts, b, f), x),
            make_zt(z.ZDNN_3DS, "FP32", (1, b, h), np.zeros((1, b, h), np.float32)),
            make_zt(z.ZDNN_3DS, "FP32", (1, b, h), np.zeros((1, b, h), np.float32)),
            make_zt(z.ZDNN_3DS, "FP32", (1, f, h), *W, concat=rt | z.USAGE_WEIGHTS),
            make_zt(z.ZDNN_2DS, "FP32", (1, h), *B, concat=rt | z.USAGE_BIASES),
            make_zt(z.ZDNN_3DS, "FP32", (1, h, h), *R, concat=rt | z.USAGE_HIDDEN_WEIGHTS),
            make_zt(z.ZDNN_2DS, "FP32", (1, h), *B, concat=rt | z.USAGE_HIDDEN_BIASES))


def _wa_part(wa, offset, dims):
    desc = z.TensorDesc(z.ZDNN_NHWC, z.ZDNN_FORMAT_4DFEATURE, z.ZDNN_DLFLOAT16, *dims)
    n = z.getsize_ztensor(desc)
    return read_values(z.ZTensor(transformed_desc=desc, buffer=wa[offset:offset + n], buffer_size=n)), n


@pytest.mark.parametrize("ts", [1, 2, 4])
def test_lstm_writes_the_callers_work_area_as_zdnn(ts):
    rng = np.random.default_rng(3)
    b, f, h = 2, 5, 4
    x = rng.normal(size=(ts, b, f)).astype(np.float32)
    W = [rng.normal(size=(1, f, h)).astype(np.float32) for _ in range(4)]
    B = [rng.normal(size=(1, h)).astype(np.float32) for _ in range(4)]
    R = [rng.normal(size=(1, h, h)).astype(np.float32) * 0.5 for _ in range(4)]
    size = z.work_area_size("lstm", ts, b, h)
    wa = z.malloc_aligned_4k(size)
    wa[:] = 0xA5
    hn = make_zt(z.ZDNN_4DS, "FP32", (ts, 1, b, h), transform=False)
    cf = make_zt(z.ZDNN_4DS, "FP32", (1, 1, b, h), transform=False)
    assert z.lstm(*_lstm_inputs(x, W, B, R, b, h), z.FWD, wa, hn, cf) == S.ZDNN_OK
    x16 = dlf16_round_ref(x).astype(np.float64)

    def mm(a, w, bias):  # one NNPA matmul: exact DLFLOAT16 operands, float64 sums, one rounding
        return dlf16_round_ref((a @ dlf16_round_ref(w).astype(np.float64)
                                + dlf16_round_ref(bias).astype(np.float64)).astype(np.float32))

    # FUSED (ts, 1, b, 4*64): x @ W + b per gate (f, i, c, o), padding cells zero
    fused, n_fused = _wa_part(wa, 0, (ts, 1, b, 256))
    for g in range(4):
        np.testing.assert_array_equal(fused[:, 0, :, g * 64:g * 64 + h], mm(x16, W[g][0], B[g][0]))
        assert not fused[..., g * 64 + h:(g + 1) * 64].any()
    # BIAS_ADD (1, 1, b, 4*64): h_prev @ R + bias of the last step (h_prev = h0 = 0 for one step)
    bias_add, n_bias = _wa_part(wa, n_fused, (1, 1, b, 256))
    h_prev = read_values(hn)[ts - 2, 0].astype(np.float64) if ts > 1 else np.zeros((b, h))
    for g in range(4):
        np.testing.assert_array_equal(bias_add[0, 0, :, g * 64:g * 64 + h], mm(h_prev, R[g][0], B[g][0]))
    # the alternating cell-state slots: step k's c in slot k % 2, k < ts - 1 (checked against a shorter run)
    slot_bytes = z.getsize_ztensor(z.TensorDesc(dim2=b, dim1=h))
    assert size == n_fused + n_bias + min(ts - 1, 2) * slot_bytes
    for k in range(ts - 1):
        cf_k = make_zt(z.ZDNN_4DS, "FP32", (1, 1, b, h), transform=False)
        assert z.lstm(*_lstm_inputs(x[:k + 1], W, B, R, b, h), z.FWD, None,
                      make_zt(z.ZDNN_4DS, "FP32", (1, 1, b, h), transform=False), cf_k) == S.ZDNN_OK
        if k >= ts - 3:
            slot, _ = _wa_part(wa, n_fused + n_bias + (k % 2) * slot_bytes, (1, 1, b, h))
            np.testing.assert_array_equal(slot, read_values(cf_k))


def test_gru_final_only_keeps_its_hidden_states_in_the_work_area():
    rng = np.random.default_rng(4)
    ts, b, f, h = 4, 2, 3, 5
    rt = z.RNN_TYPE_GRU
    x = rng.normal(size=(ts, b, f)).astype(np.float32)
    W = [rng.normal(size=(1, f, h)).astype(np.float32) for _ in range(3)]
    R = [rng.normal(size=(1, h, h)).astype(np.float32) * 0.5 for _ in range(3)]
    B = [rng.normal(size=(1, h)).astype(np.float32) for _ in range(3)]
    args = (make_zt(z.ZDNN_3DS, "FP32", (ts, b, f), x),
            make_zt(z.ZDNN_3DS, "FP32", (1, b, h), np.zeros((1, b, h), np.float32)),
            make_zt(z.ZDNN_3DS, "FP32", (1, f, h), *W, concat=rt | z.USAGE_WEIGHTS),
            make_zt(z.ZDNN_2DS, "FP32", (1, h), *B, concat=rt | z.USAGE_BIASES),
            make_zt(z.ZDNN_3DS, "FP32", (1, h, h), *R, concat=rt | z.USAGE_HIDDEN_WEIGHTS),
            make_zt(z.ZDNN_2DS, "FP32", (1, h), *B, concat=rt | z.USAGE_HIDDEN_BIASES))
    all_steps = make_zt(z.ZDNN_4DS, "FP32", (ts, 1, b, h), transform=False)
    assert z.gru(*args, z.BWD, None, all_steps) == S.ZDNN_OK
    wa = z.malloc_aligned_4k(z.work_area_size("gru", ts, b, h))
    assert z.gru(*args, z.BWD, wa, make_zt(z.ZDNN_4DS, "FP32", (1, 1, b, h), transform=False)) == S.ZDNN_OK
    fused_n = z.getsize_ztensor(z.TensorDesc(dim4=ts, dim2=b, dim1=192))
    bias_n = z.getsize_ztensor(z.TensorDesc(dim2=b, dim1=192))
    slot_n = z.getsize_ztensor(z.TensorDesc(dim2=b, dim1=h))
    hs = read_values(all_steps)[:, 0]
    for k in (ts - 3, ts - 2):  # BWD processes t = ts-1 ... 0: step k is timestep ts-1-k
        slot, _ = _wa_part(wa, fused_n + bias_n + (k % 2) * slot_n, (1, 1, b, h))
        np.testing.assert_array_equal(slot[0, 0], hs[ts - 1 - k])


# ---- C-like buffers ---------------------------------------------------------------------------------------------
def test_malloc_aligned_4k():
    for n in (1, 4096, 5000):
        a = z.malloc_aligned_4k(n)
        assert a.nbytes == n and a.ctypes.data % 4096 == 0 and not a.any() and a.flags.writeable
    assert z.malloc_aligned_4k(0) is None
    assert z.free_aligned_4k(z.malloc_aligned_4k(8)) is None


def test_init_ztensor_keeps_the_buffer():
    pre = z.init_pre_transformed_desc(z.ZDNN_2D, z.FP32, None, 3, 5)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    buf = z.malloc_aligned_4k(z.getsize_ztensor(tf))
    zt.buffer, zt.buffer_size = buf, buf.nbytes  # a C program may set them before zdnn_init_ztensor
    zt.is_transformed, zt.rec_scale = True, 2.0
    z.init_ztensor(pre, tf, zt)
    assert zt.buffer is buf and zt.buffer_size == buf.nbytes and not zt.is_transformed and zt.rec_scale == 0
    assert z.transform_ztensor(zt, np.ones((3, 5), np.float32)) == S.ZDNN_OK


@pytest.mark.parametrize("kind", ["float32", "uint16_2d", "memoryview", "bytearray_view"])
def test_any_c_contiguous_buffer_serves_as_ztensor_buffer(kind):
    pre = z.init_pre_transformed_desc(z.ZDNN_2D, z.FP32, None, 3, 5)
    tf = z.TensorDesc()
    z.generate_transformed_desc(pre, tf)
    n = z.getsize_ztensor(tf)
    raw = z.malloc_aligned_4k(n + 4096)
    buf = {"float32": raw.view(np.float32), "uint16_2d": raw[:n].view(np.uint16).reshape(64, -1),
           "memoryview": memoryview(raw), "bytearray_view": memoryview(raw).cast("B")}[kind]
    zt = z.ZTensor()
    z.init_ztensor(pre, tf, zt)
    zt.buffer, zt.buffer_size = buf, n
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    assert z.transform_ztensor(zt, x) == S.ZDNN_OK
    ref = make_zt(z.ZDNN_2D, "FP32", (3, 5), x)
    assert bytes(raw[:n]) == bytes(ref.buffer[:n])
    out = _fresh_2d()
    assert z.relu(zt, None, out) == S.ZDNN_OK
    zt.buffer = bytes(raw[:n])  # read-only bytes: fine where only read (and unaligned: MISALIGNED_TENSOR or OK)
    st = z.relu(zt, None, _fresh_2d())
    assert st == (S.ZDNN_OK if z.byte_view(zt.buffer).ctypes.data % 4096 == 0 else S.ZDNN_MISALIGNED_TENSOR)
    ro = _fresh_2d()
    ro.buffer = bytes(ro.buffer)
    assert z.relu(ref, None, ro) == S.ZDNN_INVALID_BUFFER  # read-only output: never written


def _fresh_2d():
    return make_zt(z.ZDNN_2D, "FP32", (3, 5), transform=False)


def test_data_and_out_buffers_are_c_buffers_at_least_as_large_as_needed():
    x = np.arange(15, dtype=np.float32)
    ref = make_zt(z.ZDNN_2D, "FP32", (3, 5), x.reshape(3, 5))
    for data in (bytearray(x.tobytes() + bytes(40)), memoryview(x.tobytes() + bytes(8)), x.tobytes(),
                 np.concatenate([x, np.full(9, np.nan, np.float32)]), np.frombuffer(x.tobytes(), np.uint8)):
        zt = _fresh_2d()
        assert z.transform_ztensor(zt, data) == S.ZDNN_OK
        assert bytes(zt.buffer) == bytes(ref.buffer)
    out = bytearray(15 * 4 + 12)
    assert z.transform_origtensor(ref, out) == S.ZDNN_OK
    assert np.array_equal(np.frombuffer(bytes(out[:60]), np.float32), x) and out[60:] == bytes(12)
    big = np.full(20, -1.0, np.float32)
    assert z.transform_origtensor(ref, big) == S.ZDNN_OK
    assert np.array_equal(big[:15], x) and np.all(big[15:] == -1)
    with pytest.raises(ShapeError, match="out_buf"):
        z.transform_origtensor(ref, bytearray(59))
    with pytest.raises(BufferLayoutError, match="out_buf"):
        z.transform_origtensor(ref, bytes(60))  # read-only
    fp16 = make_zt(z.ZDNN_2D, "FP16", (3, 5), x.reshape(3, 5))
    raw16 = bytearray(32)
    assert z.transform_origtensor(fp16, raw16) == S.ZDNN_OK
    assert np.array_equal(np.frombuffer(bytes(raw16[:30]), np.float16), x.astype(np.float16))


# ---- where libzdnn and the API reference disagree ---------------------------------------------------------------
def test_fico_weights_whose_pre_dim2_shrinks_after_descriptor_generation():
    pre = z.init_pre_transformed_desc(z.ZDNN_3DS, z.FP32, None, 1, 40, 3)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc_concatenated(pre, z.RNN_TYPE_LSTM | z.USAGE_WEIGHTS, tf) == S.ZDNN_OK
    assert tf.dims == (1, 1, 40, 256)
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == S.ZDNN_OK
    zt.buffer[:] = 0x5A
    pre.dim2 = 20  # the program shrinks the rows after generating the descriptor
    gates = [np.full((1, 20, 3), g + 1, np.float32) for g in range(4)]
    assert z.transform_ztensor(zt, *gates) == S.ZDNN_OK and zt.is_transformed
    # libzdnn writes each gate as its own (20, 3) image, back to back (4 KiB each), after zeroing that region
    gate_desc = z.TensorDesc(z.ZDNN_NHWC, z.ZDNN_FORMAT_4DFEATURE, z.ZDNN_DLFLOAT16, 1, 1, 20, 3)
    for g in range(4):
        part = z.ZTensor(transformed_desc=gate_desc, buffer=zt.buffer[g * 4096:(g + 1) * 4096], buffer_size=4096)
        assert np.all(read_values(part) == g + 1)
        stick_padding = zt.buffer[g * 4096:(g + 1) * 4096].reshape(-1, 128)
        assert not stick_padding[:20, 6:].any() and not stick_padding[20:].any()
    assert np.all(zt.buffer[4 * 4096:] == 0x5A)  # left as found
    # growing past the buffer would make libzdnn write outside it: refused
    zt2 = z.ZTensor()
    pre2 = z.init_pre_transformed_desc(z.ZDNN_3DS, z.FP32, None, 1, 40, 3)
    z.generate_transformed_desc_concatenated(pre2, z.RNN_TYPE_LSTM | z.USAGE_WEIGHTS, tf2 := z.TensorDesc())
    assert z.init_ztensor_with_malloc(pre2, tf2, zt2) == S.ZDNN_OK
    pre2.dim2 = 80
    big = [np.ones((1, 80, 3), np.float32)] * 4
    assert z.transform_ztensor(zt2, *big) == S.ZDNN_INVALID_SHAPE and not zt2.is_transformed
    pre2.dim3 = 2  # and a direction count that disagrees with dim4 is libzdnn's INVALID_SHAPE
    assert z.transform_ztensor(zt2, *[np.ones((2, 80, 3), np.float32)] * 4) == S.ZDNN_INVALID_SHAPE


def test_transform_checks_follow_libzdnns_order():
    zt = _fresh_2d()
    zt.transformed_desc.format = 7
    zt.pre_transformed_desc.type = z.INT8
    assert z.transform_ztensor(zt, np.zeros(15, np.int8)) == S.ZDNN_INVALID_FORMAT  # format before the pre type
    zt = _fresh_2d()
    zt.buffer = None
    zt.transformed_desc.dim1 = 0
    assert z.transform_ztensor(zt, np.zeros(15, np.float32)) == S.ZDNN_INVALID_SHAPE  # dims before the buffer
    zt = _fresh_2d()
    zt.is_transformed = True
    zt.buffer = None
    assert z.transform_ztensor(zt, np.zeros(15, np.float32)) == S.ZDNN_INVALID_BUFFER  # buffer before the state


# ---- samples/ ---------------------------------------------------------------------------------------------------
SAMPLES = json.loads((DATA / "samples.json").read_text())


class Program:
    """Runs a ported sample line by line: ``p.zdnn_X(...)`` calls ``fusedrnn.zdnn.X`` and records the status the C
    program asserts right after the call."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str):
        fn = getattr(z, name.removeprefix("zdnn_"))

        def call(*args):
            st = fn(*args)
            self.calls.append([name, S(st).name])
            return st
        return call


def c_malloc(nbytes: int, rng) -> bytearray:
    """malloc'd memory: what the samples transform is whatever it holds; here finite float32 values."""
    return bytearray(rng.uniform(-1, 1, size=nbytes // 4).astype(np.float32).tobytes())


def test_sample_simple_add():
    v = SAMPLES["simple_add.c"]["ints"]
    p = Program()
    num_elements = v["dim_n"] * v["dim_h"] * v["dim_w"] * v["dim_c"]
    element_size = 4
    data1, data2, data_out = (bytearray(num_elements * element_size) for _ in range(3))
    for i in range(num_elements):
        np.frombuffer(data1, np.float32)[i] = i & 0x7F
        np.frombuffer(data2, np.float32)[i] = i & 0x7F
    pre, tf = z.TensorDesc(), z.TensorDesc()
    z.init_pre_transformed_desc(z.ZDNN_NHWC, z.FP32, pre, v["dim_n"], v["dim_h"], v["dim_w"], v["dim_c"])
    p.zdnn_generate_transformed_desc(pre, tf)
    a, b, out = z.ZTensor(), z.ZTensor(), z.ZTensor()
    p.zdnn_init_ztensor_with_malloc(pre, tf, a)
    p.zdnn_init_ztensor_with_malloc(pre, tf, b)
    p.zdnn_init_ztensor_with_malloc(pre, tf, out)
    p.zdnn_transform_ztensor(a, data1)
    p.zdnn_transform_ztensor(b, data2)
    p.zdnn_add(a, b, out)
    p.zdnn_transform_origtensor(out, data_out)
    got = np.frombuffer(data_out, np.float32)
    p.zdnn_free_ztensor_buffer(a)
    p.zdnn_free_ztensor_buffer(b)
    p.zdnn_free_ztensor_buffer(out)
    assert p.calls == SAMPLES["simple_add.c"]["calls"]
    assert np.array_equal(got, 2 * (np.arange(num_elements) & 0x7F))


def test_sample_stickify_unstickify():
    v = SAMPLES["stickify_unstickify.c"]["ints"]
    p = Program()
    n = v["dim_n"] * v["dim_h"] * v["dim_w"] * v["dim_c"]
    rng = np.random.default_rng(1)
    data, data_out = c_malloc(n * 4, rng), bytearray(n * 4)
    pre, tf, zt = z.TensorDesc(), z.TensorDesc(), z.ZTensor()
    z.init_pre_transformed_desc(z.ZDNN_NHWC, z.FP32, pre, v["dim_n"], v["dim_h"], v["dim_w"], v["dim_c"])
    p.zdnn_generate_transformed_desc(pre, tf)
    p.zdnn_init_ztensor_with_malloc(pre, tf, zt)
    p.zdnn_transform_ztensor(zt, data)
    p.zdnn_transform_origtensor(zt, data_out)
    assert p.calls == SAMPLES["stickify_unstickify.c"]["calls"]
    assert np.array_equal(np.frombuffer(data_out, np.float32), dlf16_round_ref(np.frombuffer(data, np.float32)))


def _rnn_sample(name: str, *, fix_cf: bool = False) -> Program:
    """rnn_lstm_fwd.c, rnn_gru_fwd.c, rnn_lstm_bidir.c line by line (malloc'd inputs as random floats)."""
    v, sample = SAMPLES[name]["ints"], SAMPLES[name]
    lstm = "lstm" in name
    ts, b, f, h, dirs = v["num_timesteps"], v["num_batches"], v["num_features"], v["num_hidden"], v["num_dirs"]
    direction = getattr(z, sample["direction"])
    rt = z.RNN_TYPE_LSTM if lstm else z.RNN_TYPE_GRU
    G = 4 if lstm else 3
    p, rng = Program(), np.random.default_rng(2)

    def tensor(layout, dims, concat=None, n_data=1, elements=None):
        pre, tf, zt = z.TensorDesc(), z.TensorDesc(), z.ZTensor()
        z.init_pre_transformed_desc(layout, z.FP32, pre, *dims)
        if concat is None:
            p.zdnn_generate_transformed_desc(pre, tf)
        else:
            p.zdnn_generate_transformed_desc_concatenated(pre, concat | z.PREV_LAYER_NONE, tf)
        p.zdnn_init_ztensor_with_malloc(pre, tf, zt)
        if elements is not None:
            p.zdnn_transform_ztensor(zt, *(c_malloc(elements * 4, rng) for _ in range(n_data)))
        return zt

    x = tensor(z.ZDNN_3DS, (ts, b, f), elements=ts * b * f)
    if lstm:  # h0 and c0 share a descriptor pair; both are initialised, then both transformed
        pre, tf, h0, c0 = z.TensorDesc(), z.TensorDesc(), z.ZTensor(), z.ZTensor()
        z.init_pre_transformed_desc(z.ZDNN_3DS, z.FP32, pre, dirs, b, h)
        p.zdnn_generate_transformed_desc(pre, tf)
        p.zdnn_init_ztensor_with_malloc(pre, tf, h0)
        p.zdnn_init_ztensor_with_malloc(pre, tf, c0)
        p.zdnn_transform_ztensor(h0, c_malloc(dirs * b * h * 4, rng))  # the bidir sample mallocs one direction
        p.zdnn_transform_ztensor(c0, c_malloc(dirs * b * h * 4, rng))
    else:
        h0 = tensor(z.ZDNN_3DS, (dirs, b, h), elements=dirs * b * h)
    W = tensor(z.ZDNN_3DS, (dirs, f, h), rt | z.USAGE_WEIGHTS, G, dirs * f * h)
    Wb = tensor(z.ZDNN_2DS, (dirs, h), rt | z.USAGE_BIASES, G, dirs * h)
    R = tensor(z.ZDNN_3DS, (dirs, h, h), rt | z.USAGE_HIDDEN_WEIGHTS, G, dirs * h * h)
    Rb = tensor(z.ZDNN_2DS, (dirs, h), rt | z.USAGE_HIDDEN_BIASES, G, dirs * h)
    if dirs == 2:
        hn_pre, hn_tf, cf_pre, cf_tf = z.TensorDesc(), z.TensorDesc(), z.TensorDesc(), z.TensorDesc()
        z.init_pre_transformed_desc(z.ZDNN_4DS, z.FP32, hn_pre, ts, 2, b, h)
        p.zdnn_generate_transformed_desc(hn_pre, hn_tf)
        # the sample passes 4 dims to a 3DS layout: C reads (1, 2, b), a 4 KiB cf_output of the wrong shape
        z.init_pre_transformed_desc(z.ZDNN_4DS if fix_cf else z.ZDNN_3DS, z.FP32, cf_pre, 1, 2, b, h)
        p.zdnn_generate_transformed_desc(cf_pre, cf_tf)
        hn, cf = z.ZTensor(), z.ZTensor()
        p.zdnn_init_ztensor_with_malloc(hn_pre, hn_tf, hn)
        p.zdnn_init_ztensor_with_malloc(cf_pre, cf_tf, cf)
    else:
        pre, tf, hn, cf = z.TensorDesc(), z.TensorDesc(), z.ZTensor(), z.ZTensor()
        z.init_pre_transformed_desc(z.ZDNN_4DS, z.FP32, pre, 1, 1, b, h)
        p.zdnn_generate_transformed_desc(pre, tf)
        p.zdnn_init_ztensor_with_malloc(pre, tf, hn)
        if lstm:
            p.zdnn_init_ztensor_with_malloc(pre, tf, cf)
    work_area = None
    if lstm:
        p.zdnn_lstm(x, h0, c0, W, Wb, R, Rb, direction, work_area, hn, cf)
    else:
        p.zdnn_gru(x, h0, W, Wb, R, Rb, direction, work_area, hn)
    outs = (hn, cf) if lstm else (hn,)
    for out in outs:
        size = int(np.prod(out.pre_transformed_desc.shape())) * 4
        p.zdnn_transform_origtensor(out, bytearray(size))
    for t in (x, h0, c0, W, Wb, R, Rb, hn, cf) if lstm else (x, h0, W, Wb, R, Rb, hn):
        p.zdnn_free_ztensor_buffer(t)
    return p


@pytest.mark.parametrize("name", ["rnn_lstm_fwd.c", "rnn_gru_fwd.c"])
def test_sample_rnn(name):
    assert _rnn_sample(name).calls == SAMPLES[name]["calls"]


def test_sample_rnn_lstm_bidir():
    # libzdnn without precheck writes the (1, 1, b, 2*64) final cell state past the sample's 4 KiB cf_output; the
    # emulator refuses to (an NNPA program exception) and, with precheck, answers INVALID_SHAPE as libzdnn does
    with z.settings.override(precheck=False):
        with pytest.raises(z.NNPAProgramException) as e:
            _rnn_sample("rnn_lstm_bidir.c")
    assert e.value.status == S.ZDNN_INVALID_SHAPE
    calls = _rnn_sample("rnn_lstm_bidir.c").calls
    i = [c[0] for c in calls].index("zdnn_lstm")
    assert calls[:i] == SAMPLES["rnn_lstm_bidir.c"]["calls"][:i] and calls[i] == ["zdnn_lstm", "ZDNN_INVALID_SHAPE"]
    assert _rnn_sample("rnn_lstm_bidir.c", fix_cf=True).calls == SAMPLES["rnn_lstm_bidir.c"]["calls"]


def test_quantized_weights_int8_with_a_float_pre_type():
    pre = z.init_pre_transformed_desc(z.ZDNN_2D, z.FP32, None, 4, 8)
    tf = z.TensorDesc()
    # libzdnn's descriptor generation accepts it (the API reference allows INT8 only) ...
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_WEIGHTS_INT8, tf) == S.ZDNN_OK
    assert (tf.format, tf.type, tf.dims) == (z.ZDNN_FORMAT_4DWEIGHTS, z.ZDNN_BINARY_INT8, (1, 1, 4, 8))
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, 0.5, 0, zt) == S.ZDNN_OK
    # ... and its transform refuses the data type (after the buffer and state checks, libzdnn's order)
    assert z.transform_quantized_ztensor(zt, False, -128, 127, np.zeros((4, 8), np.float32)) == S.ZDNN_INVALID_TYPE
    zt.is_transformed = True
    assert z.transform_quantized_ztensor(zt, False, -128, 127, np.zeros((4, 8), np.float32)) == S.ZDNN_INVALID_STATE
    zt.buffer = None
    assert z.transform_quantized_ztensor(zt, False, -128, 127, np.zeros((4, 8), np.float32)) == S.ZDNN_INVALID_BUFFER
    pre.type = z.INT8
    zt2 = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, 0.5, 0, zt2) == S.ZDNN_OK
    assert z.transform_quantized_ztensor(zt2, False, -128, 127, np.ones((4, 8), np.int8)) == S.ZDNN_OK
    pre.type = z.INT32
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_WEIGHTS_INT8, z.TensorDesc()) \
        == S.ZDNN_INVALID_TYPE


def test_matmul_checks_in_libzdnns_order():
    a = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.ones((2, 3), np.float32))
    b = make_zt(z.ZDNN_2D, "FP32", (3, 4), np.ones((3, 4), np.float32))
    c = make_zt(z.ZDNN_1D, "FP32", (4,), np.ones(4, np.float32))

    def out(shape=(2, 4)):
        return make_zt(z.ZDNN_2D, "FP32", shape, transform=False)

    assert z.matmul_op(a, b, c, z.MATMUL_OP_ADDITION, out()) == S.ZDNN_OK
    assert z.matmul_op(a, b, c, 99, out((2, 5))) == S.ZDNN_INVALID_SHAPE  # the verifier before the NNPA's F000
    assert z.matmul_op(a, b, c, 99, out()) == S.ZDNN_FUNC_RC_F000
    never = make_zt(z.ZDNN_2D, "FP32", (2, 3), transform=False)
    never.buffer = None
    assert z.matmul_op(never, b, c, z.MATMUL_OP_ADDITION, out((3, 4))) == S.ZDNN_INVALID_SHAPE
    assert z.matmul_op(never, b, c, z.MATMUL_OP_ADDITION, out()) == S.ZDNN_INVALID_BUFFER
    i32 = make_zt(z.ZDNN_2D, z.INT32, (2, 4), np.zeros((2, 4), np.int32), transform=False)
    assert z.matmul_op(a, b, c, z.MATMUL_OP_ADDITION, i32) == S.ZDNN_INVALID_TYPE  # after the shapes
    z.set_machine("telum1")  # no parameter-block format 1: refused before the verifier
    assert z.matmul_transpose_op(a, b, c, False, False, 99, out((7, 7))) == S.ZDNN_UNAVAILABLE_FUNCTION
    assert z.matmul_bcast_op(a, b, c, z.MATMUL_BCAST_OP_GREATER, out()) == S.ZDNN_OK  # 1 x 1 stacks: MATMUL_OP


def test_readme_ported_sample_runs_alone_and_prints_what_it_quotes():
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "malloc(num_elements" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    quoted = [m.strip() for m in re.findall(r"#( \[.*\]|\s*ZDNN_\w+: .*)$", block, re.M)]
    assert out.getvalue().splitlines() == quoted


def test_invsqrt_and_reduce_verifiers_in_libzdnns_order():
    x = make_zt(z.ZDNN_3DS, "FP32", (2, 3, 4), np.ones((2, 3, 4), np.float32))
    i32_bad_shape = make_zt(z.ZDNN_3DS, z.INT32, (2, 3, 5), np.zeros((2, 3, 5), np.int32), transform=False)
    # verify_invsqrt_tensors compares the output's type and format with the input's before the shapes
    assert z.invsqrt(x, 0.0, i32_bad_shape) == S.ZDNN_INVALID_TYPE
    assert z.invsqrt(x, 0.0, _fresh((2, 3, 5))) == S.ZDNN_INVALID_SHAPE
    assert z.invsqrt(x, np.inf, _fresh()) == S.ZDNN_INVALID_EPSILON
    assert z.invsqrt(x, 0.0, _fresh()) == S.ZDNN_OK
    # verify_reduce_tensors: shapes, then the output's format, then the input's type
    i32_in = make_zt(z.ZDNN_3DS, z.INT32, (2, 3, 4), np.zeros((2, 3, 4), np.int32))
    kernel_out = make_zt(z.ZDNN_HWCK, "FP32", (2, 1, 3, 1), transform=False)
    assert z.reduce(i32_in, None, z.REDUCE_OP_MAXIMUM, kernel_out) == S.ZDNN_INVALID_FORMAT
    assert z.reduce(i32_in, None, z.REDUCE_OP_MAXIMUM, _fresh((2, 3, 1))) == S.ZDNN_INVALID_TYPE
    assert z.reduce(i32_in, None, z.REDUCE_OP_MAXIMUM, _fresh((2, 3, 2))) == S.ZDNN_INVALID_SHAPE
    assert z.reduce(x, None, z.REDUCE_OP_MAXIMUM, _fresh((2, 3, 1))) == S.ZDNN_OK


# ---- testDriver_tensor_desc.c: verify_*_transformed_layout ------------------------------------------------------
TENSOR_DESC = json.loads((DATA / "tensor_desc_layouts.json").read_text())
_LAYOUT_CASES = [(c, t) for c in TENSOR_DESC["cases"] for t in c["types"]]


@pytest.mark.parametrize(("case", "dtype"), _LAYOUT_CASES,
                         ids=[f"{c['test']}-{t}" for c, t in _LAYOUT_CASES])
def test_transformed_layout_cases(case, dtype):
    assert len(TENSOR_DESC["cases"]) == 21
    d4, d3, d2, d1 = case["dims"]
    layout = getattr(z, case["layout"])
    dims = {"ZDNN_2DS": (d2, d1), "ZDNN_3DS": (d3, d2, d1), "ZDNN_4DS": (d4, d2, d1, 1)}[case["layout"]]
    pre, tf = z.TensorDesc(), z.TensorDesc()
    z.init_pre_transformed_desc(layout, getattr(z, dtype), pre, *dims)
    if not case["concat"]:
        st = z.generate_transformed_desc(pre, tf)
    else:
        info = {"ZDNN_2DS": z.USAGE_BIASES | z.PREV_LAYER_NONE, "ZDNN_3DS": z.USAGE_WEIGHTS | z.PREV_LAYER_NONE}.get(
            case["layout"], z.USAGE_HIDDEN_WEIGHTS | z.PREV_LAYER_UNI)
        st = z.generate_transformed_desc_concatenated(pre, z.RNN_TYPE_LSTM | info, tf)
    assert st == getattr(S, case["status"])
    if st == S.ZDNN_OK:
        assert tf.layout == getattr(z, case["to_layout"])


# ---- testDriver_init_ztensor.c: buffer sizes ------------------------------------------------------------------
INIT_SIZES = json.loads((DATA / "init_ztensor_sizes.json").read_text())
_SIZE_CASES = [(c, t) for c in INIT_SIZES["cases"] for t in c["types"]]


def _info(expr: str) -> int:
    v = 0
    for name in expr.split("|"):
        v |= getattr(z, name.strip())
    return v


@pytest.mark.parametrize(("case", "dtype"), _SIZE_CASES,
                         ids=[f"{c['test']}-{c.get('info', '')}-{t}" for c, t in _SIZE_CASES])
def test_init_ztensor_with_malloc_sizes(case, dtype):
    assert len(INIT_SIZES["cases"]) == 156
    pre, tf, zt = z.TensorDesc(), z.TensorDesc(), z.ZTensor()
    if case["kind"] == "quantized":
        z.init_pre_transformed_desc(z.ZDNN_NHWC, getattr(z, dtype), pre, *case["dims"])
        assert z.generate_quantized_transformed_desc(pre, getattr(z, case["transform"]), tf) == S.ZDNN_OK
        assert z.init_quantized_ztensor_with_malloc(pre, tf, case["scale"], case["offset"], zt) == S.ZDNN_OK
    elif case["kind"] == "concat":
        z.init_pre_transformed_desc(getattr(z, case["layout"]), getattr(z, dtype), pre, *case["dims"])
        st = z.generate_transformed_desc_concatenated(pre, _info(case["info"]), tf)
        assert st == getattr(S, case["status_gen"])
        assert z.init_ztensor_with_malloc(pre, tf, zt) == getattr(S, case["status_alloc"])
    else:
        z.init_pre_transformed_desc(getattr(z, case["layout"]), getattr(z, dtype), pre, *case["dims"])
        assert z.generate_transformed_desc(pre, tf) == S.ZDNN_OK
        assert z.init_ztensor_with_malloc(pre, tf, zt) == S.ZDNN_OK
    assert zt.buffer_size == case["size"] == z.getsize_ztensor(tf)
    assert z.byte_view(zt.buffer).nbytes == case["size"] and z.byte_view(zt.buffer).ctypes.data % 4096 == 0


# ---- testDriver_reshape_ztensor.c --------------------------------------------------------------------------------
RESHAPE = json.loads((DATA / "reshape.json").read_text())["tests"]
_RESHAPE_CASES = [(name, call, t) for name, v in RESHAPE.items() for call in v["calls"] for t in v["types"]]


def _random_pre_data(dtype: str, n: int, rng) -> np.ndarray:
    x = rng.uniform(-2, 2, n).astype(np.float32)
    return {"FP32": x, "FP16": x.astype(np.float16), "BFLOAT": (x.view(np.uint32) >> 16).astype(np.uint16)}[dtype]


@pytest.mark.parametrize(("name", "call", "dtype"), _RESHAPE_CASES,
                         ids=[f"{n}-{t}" for n, _, t in _RESHAPE_CASES])
def test_reshape_driver(name, call, dtype):
    src_layout, src_dims, dest_layout, dest_dims, status = call
    typ = getattr(z, dtype)
    zs, zd = z.ZTensor(), z.ZTensor()
    sp, dp, st_, dt_ = z.TensorDesc(), z.TensorDesc(), z.TensorDesc(), z.TensorDesc()
    z.init_pre_transformed_desc(getattr(z, src_layout), typ, sp, *src_dims)
    z.init_pre_transformed_desc(getattr(z, dest_layout), typ, dp, *dest_dims)
    z.generate_transformed_desc(sp, st_)
    z.generate_transformed_desc(dp, dt_)
    assert z.init_ztensor_with_malloc(sp, st_, zs) == S.ZDNN_OK
    raw = _random_pre_data(dtype, int(np.prod(src_dims)), np.random.default_rng(5))
    assert z.init_ztensor_with_malloc(dp, dt_, zd) == S.ZDNN_OK
    assert z.transform_ztensor(zs, raw) == S.ZDNN_OK
    st = z.reshape_ztensor(zs, zd)
    assert st == getattr(S, status)
    assert zd.is_transformed == (st == S.ZDNN_OK)
    if st == S.ZDNN_OK:  # the driver's check: dest's cells in C order are the source data as DLFLOAT16
        want = make_zt(z.ZDNN_NHWC, dtype, tuple(dest_dims), raw.reshape(dest_dims), transform=False)
        assert z.transform_ztensor(want, raw) == S.ZDNN_OK
        assert np.array_equal(read_values(zd), read_values(want))


def test_reshape_driver_hand_written_cases():
    def pair():
        zs, zd = z.ZTensor(), z.ZTensor()
        descs = [z.TensorDesc() for _ in range(4)]
        for pre, tf, zt in ((descs[0], descs[1], zs), (descs[2], descs[3], zd)):
            z.init_pre_transformed_desc(z.ZDNN_NHWC, z.FP16, pre, 4, 4, 4, 4)
            z.generate_transformed_desc(pre, tf)
            z.init_ztensor(pre, tf, zt)  # no buffers: libzdnn's reshape never looks at them before these checks
        return zs, zd

    zs, zd = pair()
    zs.is_transformed = True
    zs.transformed_desc.layout = zd.transformed_desc.layout = z.ZDNN_NCHW
    assert z.reshape_ztensor(zs, zd) == getattr(S, RESHAPE["test_fail_not_nhwc_nor_hwck"]["exp_status"])
    zs, zd = pair()
    assert z.reshape_ztensor(zs, zd) == getattr(S, RESHAPE["test_fail_src_not_transformed"]["exp_status"])
    zs, zd = pair()
    zs.is_transformed = zd.is_transformed = True
    assert z.reshape_ztensor(zs, zd) == getattr(S, RESHAPE["test_fail_dest_already_transformed"]["exp_status"])
