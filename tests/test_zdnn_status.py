"""Every status the zDNN API reference lists for the emulated functions, each provoked by a test; the
ZDNN_ENABLE_PRECHECK / ZDNN_STATUS_DIAG settings; support functions and limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zdnn_oracle import make_zt

import fusedrnn.zdnn as z
from fusedrnn.errors import DTypeError, ShapeError
from fusedrnn.targets.zdnn import ztensor as zmod
from fusedrnn.targets.zdnn.transform import read_cells

S = z.Status


@pytest.fixture(autouse=True)
def _precheck_on():
    with z.settings.override(precheck=True):
        yield
    z.set_machine("telum2")


def desc(layout, typ, *dims):
    return z.init_pre_transformed_desc(layout, typ, None, *dims)


def tdesc(pre):
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == S.ZDNN_OK
    return tf


def fresh(layout=z.ZDNN_2D, typ=z.FP32, *dims):
    pre = desc(layout, typ, *(dims or (3, 5)))
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tdesc(pre), zt) == S.ZDNN_OK
    return zt


# ---- codes and messages -----------------------------------------------------------------------------------------
def test_status_values_and_messages():
    assert S.ZDNN_OK == 0 and S.ZDNN_ELEMENT_RANGE_VIOLATION == 0x00020001
    assert S.ZDNN_INVALID_SHAPE == 0x00040001 and S.ZDNN_INVALID_OFFSET == 0x00040012
    assert S.ZDNN_ALLOCATION_FAILURE == 0x00100001 and S.ZDNN_UNSUPPORTED_AIU_EXCEPTION == 0x00100005
    assert S.ZDNN_UNSUPPORTED_PARMBLOCK == 0x000C0001 and S.ZDNN_UNSUPPORTED_FORMAT == 0x000C0010
    assert S.ZDNN_MISALIGNED_SAVEAREA == 0x000C0015 and S.ZDNN_FUNC_RC_F009 == 0x000CF009
    assert z.get_status_message(0x00100003) == "ZDNN_CONVERT_FAILURE: Floating point data conversion failure."
    assert z.get_status_message(S.ZDNN_FUNC_RC_F002) == "ZDNN_FUNC_RC_F002: Function specific response code (F002)."
    assert z.get_status_message(0x12345) == "(Status string is not defined.)"
    assert all(z.get_status_message(s) != "(Status string is not defined.)" for s in S)


def test_enum_values_match_zdnn_h():
    assert (z.ZDNN_1D, z.ZDNN_ZRH, z.ZDNN_4DS, z.ZDNN_FICO, z.ZDNN_BIDIR_FICO) == (0, 5, 7, 10, 13)
    assert (z.ZDNN_DLFLOAT16, z.ZDNN_BINARY_INT8, z.INT8, z.FP32) == (0, 8, 251, 255)
    assert (z.ZDNN_FORMAT_4DWEIGHTS, z.ZDNN_FORMAT_4DGENERIC) == (2, 31)
    assert (z.RNN_TYPE_GRU, z.PREV_LAYER_BIDIR, z.USAGE_HIDDEN_BIASES) == (1 << 24, 1 << 16, 3 << 8)
    assert (z.FWD, z.BWD, z.BIDIR, z.MATMUL_OP_LESSER, z.NNPA_MATMUL_OP_BCAST1) == (0, 1, 2, 6, 115)
    assert (z.QUERY_DATATYPE_INTERNAL1, z.QUERY_LAYOUTFMT_4DGENERIC) == (0x8000, 1)


# ---- descriptors -------------------------------------------------------------------------------------------------
def test_generate_transformed_desc_statuses():
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(desc(z.ZDNN_2D, z.INT8, 2, 2), tf) == S.ZDNN_INVALID_TYPE
    assert z.generate_transformed_desc(desc(z.ZDNN_FICO, z.FP32), tf) == S.ZDNN_INVALID_LAYOUT
    assert z.generate_transformed_desc(desc(z.ZDNN_2D, z.FP16, 2, 2), tf) == S.ZDNN_OK


def test_generate_quantized_desc_statuses():
    tf = z.TensorDesc()
    pre = desc(z.ZDNN_2D, z.FP32, 4, 4)
    assert z.generate_quantized_transformed_desc(pre, 7, tf) == S.ZDNN_INVALID_TRANSFORM_TYPE
    # libzdnn accepts any of FP32/FP16/BFLOAT/INT8 for every transform type (the API reference: INT8 only here)
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_WEIGHTS_INT8, tf) == S.ZDNN_OK
    assert (tf.layout, tf.format, tf.type) == (z.ZDNN_NHWC, z.ZDNN_FORMAT_4DWEIGHTS, z.ZDNN_BINARY_INT8)
    assert z.generate_quantized_transformed_desc(desc(z.ZDNN_2D, z.INT32, 4, 4), z.QUANTIZED_WEIGHTS_INT8, tf) \
        == S.ZDNN_INVALID_TYPE
    assert z.generate_quantized_transformed_desc(desc(z.ZDNN_4DS, z.FP32, 1, 1, 2, 2), z.QUANTIZED_INT8,
                                                 tf) == S.ZDNN_INVALID_LAYOUT
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_INT8, tf) == S.ZDNN_OK
    assert (tf.layout, tf.type, tf.dims) == (z.ZDNN_NHWC, z.ZDNN_BINARY_INT8, (1, 1, 4, 4))


def test_generate_concatenated_desc_statuses():
    tf = z.TensorDesc()
    w = desc(z.ZDNN_3DS, z.FP32, 1, 5, 3)
    assert z.generate_transformed_desc_concatenated(w, (5 << 24) | z.USAGE_WEIGHTS, tf) \
        == S.ZDNN_INVALID_CONCAT_INFO
    # libzdnn reads any PREV_LAYER other than BIDIR as UNI; an unknown usage is INVALID_CONCAT_INFO
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_LSTM | (2 << 16), tf) == S.ZDNN_OK
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_LSTM | (4 << 8), tf) \
        == S.ZDNN_INVALID_CONCAT_INFO
    # libzdnn's order: type before layout, layout before the RNN type
    assert z.generate_transformed_desc_concatenated(desc(z.ZDNN_2DS, z.INT8, 5, 3), z.RNN_TYPE_LSTM, tf) \
        == S.ZDNN_INVALID_TYPE
    assert z.generate_transformed_desc_concatenated(w, (5 << 24) | z.USAGE_BIASES, tf) == S.ZDNN_INVALID_LAYOUT
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_LSTM | z.USAGE_BIASES, tf) \
        == S.ZDNN_INVALID_LAYOUT
    assert z.generate_transformed_desc_concatenated(desc(z.ZDNN_3DS, z.INT8, 1, 5, 3), z.RNN_TYPE_LSTM, tf) \
        == S.ZDNN_INVALID_TYPE
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_GRU | z.PREV_LAYER_BIDIR | z.USAGE_WEIGHTS,
                                                    tf) == S.ZDNN_INVALID_SHAPE  # odd rows
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_GRU | z.USAGE_HIDDEN_WEIGHTS, tf) == S.ZDNN_OK


# ---- allocation and ztensor life cycle --------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["plain", "quantized", "alloc"])
def test_allocation_statuses(fn):
    def run(tf):
        pre = desc(z.ZDNN_2D, z.FP32, 3, 5)
        zt = z.ZTensor()
        if fn == "plain":
            return z.init_ztensor_with_malloc(pre, tf, zt)
        if fn == "quantized":
            return z.init_quantized_ztensor_with_malloc(pre, tf, 2.0, 1.0, zt)
        z.init_ztensor(pre, tf, zt)
        return z.allochelper_ztensor(zt)

    good = (z.ZDNN_NHWC, z.ZDNN_FORMAT_4DFEATURE, z.ZDNN_DLFLOAT16)
    assert run(z.TensorDesc(*good, 1, 1, 3, 5)) == S.ZDNN_OK
    assert run(z.TensorDesc(z.ZDNN_NHWC, 9, z.ZDNN_DLFLOAT16, 1, 1, 3, 5)) == S.ZDNN_INVALID_FORMAT
    assert run(z.TensorDesc(z.ZDNN_NHWC, z.ZDNN_FORMAT_4DFEATURE, z.FP32, 1, 1, 3, 5)) == S.ZDNN_INVALID_TYPE
    assert run(z.TensorDesc(z.ZDNN_3DS, z.ZDNN_FORMAT_4DFEATURE, z.ZDNN_DLFLOAT16, 1, 1, 3, 5)) \
        == S.ZDNN_INVALID_LAYOUT
    assert run(z.TensorDesc(*good, 1, 0, 3, 5)) == S.ZDNN_INVALID_SHAPE
    assert run(z.TensorDesc(*good, 1, 1, z.get_max_for_dim(2) + 1, 5)) == S.ZDNN_INVALID_SHAPE
    big = z.get_nnpa_max_dim_idx_size()
    assert run(z.TensorDesc(*good, big, big, 1, 64)) == S.ZDNN_INVALID_SHAPE  # > get_nnpa_max_tensor_size

    def fail(n):
        raise MemoryError

    zmod._allocator[0] = fail
    try:
        assert run(z.TensorDesc(*good, 1, 1, 3, 5)) == S.ZDNN_ALLOCATION_FAILURE
    finally:
        zmod._allocator[0] = zmod.aligned_buffer


def test_ztensor_life_cycle():
    zt = fresh()
    assert zt.buffer.ctypes.data % 4096 == 0 and zt.buffer_size == 4096
    assert not z.is_quantized_ztensor(zt)
    q = z.ZTensor()
    z.init_quantized_ztensor(zt.pre_transformed_desc, zt.transformed_desc, 4.0, -3.0, q)
    assert z.is_quantized_ztensor(q) and q.rec_scale == 0.25 and q.offset == -3.0
    z.init_quantized_ztensor(zt.pre_transformed_desc, zt.transformed_desc, 0.0, 0.0, q)
    assert q.rec_scale == 0.0 and not z.is_quantized_ztensor(q)
    assert z.transform_ztensor(zt, np.ones((3, 5), np.float32)) == S.ZDNN_OK
    buf = zt.buffer
    z.reset_ztensor(zt)
    assert not zt.is_transformed and zt.buffer is buf
    assert z.free_ztensor_buffer(zt) == S.ZDNN_OK and zt.buffer is None
    assert z.free_ztensor_buffer(zt) == S.ZDNN_INVALID_BUFFER


# ---- transforms -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("saturation", [False, True])
def test_transform_statuses(saturation):
    t = z.transform_ztensor_with_saturation if saturation else z.transform_ztensor
    x = np.ones((3, 5), np.float32)
    zt = fresh()
    zt.pre_transformed_desc.layout = z.ZDNN_FICO
    assert t(zt, x) == S.ZDNN_INVALID_LAYOUT
    zt = fresh()
    zt.pre_transformed_desc.type = z.INT8
    assert t(zt, x) == S.ZDNN_INVALID_TYPE
    zt = fresh()
    zt.transformed_desc.type = z.ZDNN_BINARY_INT8
    assert t(zt, x) == S.ZDNN_INVALID_TYPE
    zt = fresh()
    zt.transformed_desc.format = 9
    assert t(zt, x) == S.ZDNN_INVALID_FORMAT
    zt = fresh()
    zt.transformed_desc.layout = z.ZDNN_HWCK
    assert t(zt, x) == S.ZDNN_INVALID_LAYOUT
    zt = fresh()
    zt.transformed_desc.dim1 = 0
    assert t(zt, x) == S.ZDNN_INVALID_SHAPE
    zt = fresh()
    zt.buffer = None
    assert t(zt, x) == S.ZDNN_INVALID_BUFFER
    zt = fresh()
    zt.buffer = np.zeros(8192, np.uint8)[1:4097]  # misaligned
    assert t(zt, x) == S.ZDNN_INVALID_BUFFER
    zt = fresh()
    zt.buffer_size = 100
    assert t(zt, x) == S.ZDNN_INVALID_BUFFER
    zt = fresh()
    assert t(zt, x) == S.ZDNN_OK and zt.is_transformed
    assert t(zt, x) == S.ZDNN_INVALID_STATE


def test_convert_failure_vs_element_range_violation():
    for bad in (np.inf, np.nan, 1e10):
        x = np.ones((3, 5), np.float32)
        x[1, 2] = bad
        zt = fresh()
        assert z.transform_ztensor(zt, x) == S.ZDNN_CONVERT_FAILURE and not zt.is_transformed
        zt = fresh()
        st = z.transform_ztensor_with_saturation(zt, x)
        if bad == 1e10:  # finite: clamped to DLF16_MAX, no status
            assert st == S.ZDNN_OK
            out = np.zeros((3, 5), np.float32)
            assert z.transform_origtensor(zt, out) == S.ZDNN_OK and out[1, 2] == np.float32(8573157376.0)
        else:
            assert st == S.ZDNN_ELEMENT_RANGE_VIOLATION and zt.is_transformed
            out = np.zeros((3, 5), np.float32)
            assert z.transform_origtensor(zt, out) == S.ZDNN_CONVERT_FAILURE  # NINF, software unstick
            assert np.isnan(out[1, 2]) and out[0, 0] == 1
    # FP16 Inf is never clamped: CONVERT_FAILURE even with saturation
    zt = fresh(z.ZDNN_2D, z.FP16)
    h = np.ones((3, 5), np.float16)
    h[0, 0] = np.inf
    assert z.transform_ztensor_with_saturation(zt, h) == S.ZDNN_CONVERT_FAILURE
    # underflow only flushes to zero
    zt = fresh()
    assert z.transform_ztensor(zt, np.full((3, 5), 1e-12, np.float32)) == S.ZDNN_OK


def test_hardware_unstick_path_reports_range_violation():
    """Telum II unstickifies FP32 NHWC tensors above 2048 elements with NNPA-TRANSFORM: NINF -> RANGE_VIOLATION."""
    x = np.ones((64, 64), np.float32)
    x[3, 3] = np.inf
    zt = fresh(z.ZDNN_2D, z.FP32, 64, 64)
    assert z.transform_ztensor_with_saturation(zt, x) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert z.transform_origtensor(zt, np.zeros((64, 64), np.float32)) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    z.set_machine("telum1")
    assert z.transform_origtensor(zt, np.zeros((64, 64), np.float32)) == S.ZDNN_CONVERT_FAILURE


def test_saturation_restrictions():
    w = desc(z.ZDNN_3DS, z.FP32, 1, 4, 3)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc_concatenated(w, z.RNN_TYPE_GRU | z.USAGE_HIDDEN_WEIGHTS, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    z.init_ztensor_with_malloc(w, tf, zt)
    g = np.ones((1, 4, 3), np.float32)
    assert z.transform_ztensor_with_saturation(zt, g, g, g) == S.ZDNN_INVALID_LAYOUT
    # libzdnn saturates HWCK (4DKERNEL) tensors too (the API reference names 4DFEATURE only)
    k = fresh(z.ZDNN_HWCK, z.FP32, 1, 1, 2, 2)
    k.is_transformed = False
    assert z.transform_ztensor_with_saturation(k, np.array([1e38, -1e38, 1, 2], np.float32)) == S.ZDNN_OK
    assert k.is_transformed
    k2 = fresh(z.ZDNN_HWCK, z.FP32, 1, 1, 2, 2)
    k2.is_transformed = False
    assert z.transform_ztensor(k2, np.array([8573157376.0, -8573157376.0, 1, 2], np.float32)) == S.ZDNN_OK
    assert np.array_equal(k.buffer, k2.buffer) and k.buffer[:2].tobytes() == bytes([0x7F, 0xFE])
    k3 = fresh(z.ZDNN_HWCK, z.FP32, 1, 1, 2, 2)
    k3.is_transformed = False
    assert z.transform_ztensor(k3, np.array([1e38, 0, 1, 2], np.float32)) == S.ZDNN_CONVERT_FAILURE


def test_origtensor_statuses():
    zt = fresh()
    out = np.zeros((3, 5), np.float32)
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_STATE
    z.transform_ztensor(zt, np.ones((3, 5), np.float32))
    zt.buffer = np.zeros(8192, np.uint8)[5:4101]
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_BUFFER
    zt.buffer = None
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_BUFFER
    k = make_zt(z.ZDNN_HWCK, "FP32", (1, 1, 2, 2), np.ones(4, np.float32))
    assert z.transform_origtensor(k, np.zeros(4, np.float32)) == S.ZDNN_INVALID_FORMAT
    w = make_zt(z.ZDNN_3DS, "FP32", (1, 4, 3), *[np.ones((1, 4, 3), np.float32)] * 3,
                concat=z.RNN_TYPE_GRU | z.USAGE_HIDDEN_WEIGHTS)
    assert z.transform_origtensor(w, np.zeros(12, np.float32)) == S.ZDNN_INVALID_LAYOUT
    zt = make_zt(z.ZDNN_2D, "FP32", (3, 5), np.ones((3, 5), np.float32))
    zt.pre_transformed_desc.type = z.INT8
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_TYPE
    zt.pre_transformed_desc.type = z.FP32
    zt.transformed_desc.type = z.ZDNN_BINARY_INT32
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_TYPE
    zt.transformed_desc.type = z.ZDNN_DLFLOAT16
    zt.pre_transformed_desc.layout = z.ZDNN_ZRH
    assert z.transform_origtensor(zt, out) == S.ZDNN_INVALID_LAYOUT


def test_fp16_unstick_overflow_is_convert_failure():
    zt = fresh(z.ZDNN_2D, z.FP16)
    zt.pre_transformed_desc.type = z.FP32
    x = np.ones((3, 5), np.float32)
    x[0, 1] = 1e6  # fits DLF16, not FP16
    assert z.transform_ztensor(zt, x) == S.ZDNN_OK
    zt.pre_transformed_desc.type = z.FP16
    out = np.zeros((3, 5), np.float16)
    assert z.transform_origtensor(zt, out) == S.ZDNN_CONVERT_FAILURE and np.isinf(out[0, 1])


def _qzt(qtype, pretype, shape, scale=0.5, offset=1.0):
    pre = desc(z.ZDNN_2D, pretype, *shape)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, qtype, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, scale, offset, zt) == S.ZDNN_OK
    return zt


def test_transform_quantized_statuses():
    x = np.linspace(-40, 40, 12, dtype=np.float32).reshape(3, 4)
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    assert z.transform_quantized_ztensor(zt, False, 5, 5, x) == S.ZDNN_INVALID_CLIPPING_VALUE
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_OK
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_STATE
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4), scale=0.0)
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_FUNC_RC_F001
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4), offset=np.inf)
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_FUNC_RC_F001
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    zt.pre_transformed_desc.layout = z.ZDNN_4DS
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_LAYOUT
    zt = _qzt(z.QUANTIZED_WEIGHTS_INT8, z.INT8, (3, 4))
    zt.pre_transformed_desc.type = z.FP32
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_TYPE
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    zt.transformed_desc.format = 9
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_FORMAT
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    zt.buffer = None
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_BUFFER
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    zt.transformed_desc.dim2 = 0
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_INVALID_SHAPE
    # QUANTIZED_DLFLOAT16 with saturation_control: finite overflow clamped, Inf -> RANGE_VIOLATION
    zt = _qzt(z.QUANTIZED_DLFLOAT16, z.FP32, (3, 4))
    y = x.copy()
    y[0, 0] = np.inf
    assert z.transform_quantized_ztensor(zt, True, -128, 127, y) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    zt = _qzt(z.QUANTIZED_DLFLOAT16, z.FP32, (3, 4))
    assert z.transform_quantized_ztensor(zt, False, -128, 127, y) == S.ZDNN_CONVERT_FAILURE


def test_quantize_int8_values():
    """QUANTIZED_INT8 from FP32: q = clip(round_half_away(x*rs + off)) with rs, off in DLFLOAT16."""
    x = np.array([[-300.0, -2.25, -0.75, 0.0], [0.74, 1.25, 2.5, 900.0]], np.float32)
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (2, 4), scale=0.5, offset=1.0)
    assert z.transform_quantized_ztensor(zt, False, -100, 100, x) == S.ZDNN_OK

    got = read_cells(zt)[0, 0]
    want = [[-100, -4, -1, 1], [2, 4, 6, 100]]  # x*2 + 1 = -599,-3.5,-0.5,1,2.48,3.5,6,1801
    np.testing.assert_array_equal(got, want)


def test_quantize_int8_from_fp16_goes_through_dlfloat16():
    """FP16 input is widened via DLFLOAT16 first (zdnn.md 4.1): 1 + 3*2^-10 becomes 1 + 2^-8 before scaling."""
    x = np.array([[1 + 3 * 2**-10, 1.0]], np.float16)
    pre = desc(z.ZDNN_2D, z.FP16, 1, 2)
    tf = z.TensorDesc()
    assert z.generate_quantized_transformed_desc(pre, z.QUANTIZED_INT8, tf) == S.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_quantized_ztensor_with_malloc(pre, tf, 2.0**-10, -1000.0, zt) == S.ZDNN_OK
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_OK

    np.testing.assert_array_equal(read_cells(zt)[0, 0], [[28, 24]])  # exact widening would give 27


def test_reshape_statuses():
    src = make_zt(z.ZDNN_2D, "FP32", (4, 6), np.arange(24, dtype=np.float32).reshape(4, 6))
    dst = fresh(z.ZDNN_2D, z.FP32, 3, 8)
    assert z.reshape_ztensor(src, dst) == S.ZDNN_OK
    out = np.zeros((3, 8), np.float32)
    assert z.transform_origtensor(dst, out) == S.ZDNN_OK
    np.testing.assert_array_equal(out.reshape(-1), np.arange(24))
    assert z.reshape_ztensor(src, dst) == S.ZDNN_INVALID_STATE  # dest already transformed
    assert z.reshape_ztensor(fresh(z.ZDNN_2D, z.FP32, 4, 6), fresh(z.ZDNN_2D, z.FP32, 3, 8)) \
        == S.ZDNN_INVALID_STATE  # src not transformed
    assert z.reshape_ztensor(src, fresh(z.ZDNN_2D, z.FP32, 5, 5)) == S.ZDNN_INVALID_SHAPE
    d = fresh(z.ZDNN_2D, z.FP32, 3, 8)
    d.transformed_desc.layout = z.ZDNN_HWCK
    assert z.reshape_ztensor(src, d) == S.ZDNN_INVALID_LAYOUT
    d = fresh(z.ZDNN_2D, z.FP32, 3, 8)
    d.pre_transformed_desc.type = 99
    assert z.reshape_ztensor(src, d) == S.ZDNN_INVALID_TYPE
    d = fresh(z.ZDNN_2D, z.FP32, 3, 8)
    d.pre_transformed_desc.layout = 99
    assert z.reshape_ztensor(src, d) == S.ZDNN_INVALID_LAYOUT
    d = fresh(z.ZDNN_2D, z.FP32, 3, 8)
    d.buffer = np.zeros(8192, np.uint8)[3:4099]
    assert z.reshape_ztensor(src, d) == S.ZDNN_INVALID_BUFFER
    k1 = make_zt(z.ZDNN_HWCK, "FP32", (1, 1, 2, 3), np.ones(6, np.float32))
    k2 = fresh(z.ZDNN_HWCK, z.FP32, 1, 1, 3, 2)
    assert z.reshape_ztensor(k1, k2) == S.ZDNN_INVALID_FORMAT  # dim1 changes: libzdnn's untransform path refuses
    # libzdnn reshapes HWCK tensors whose dim1 stays (stick copies) and copies equal dims whole
    kv = np.arange(6, dtype=np.float32)
    k1 = make_zt(z.ZDNN_HWCK, "FP32", (1, 1, 2, 3), kv)
    k3 = fresh(z.ZDNN_HWCK, z.FP32, 2, 1, 1, 3)
    assert z.reshape_ztensor(k1, k3) == S.ZDNN_OK and k3.is_transformed
    k4 = make_zt(z.ZDNN_HWCK, "FP32", (2, 1, 1, 3), kv)
    assert np.array_equal(read_cells(k3), read_cells(k4))
    k1.buffer[-1] = 0x5A  # a byte outside the cells: the whole image is copied when the dims are equal
    k5 = fresh(z.ZDNN_HWCK, z.FP32, 1, 1, 2, 3)
    assert z.reshape_ztensor(k1, k5) == S.ZDNN_OK and np.array_equal(k5.buffer, k1.buffer)
    bad = fresh(z.ZDNN_2D, z.FP32, 4, 6)
    x = np.ones((4, 6), np.float32)
    x[0, 0] = np.inf
    assert z.transform_ztensor_with_saturation(bad, x) == S.ZDNN_ELEMENT_RANGE_VIOLATION
    assert z.reshape_ztensor(bad, fresh(z.ZDNN_2D, z.FP32, 3, 8)) == S.ZDNN_CONVERT_FAILURE


# ---- support functions ------------------------------------------------------------------------------------------
def test_versions_and_machines():
    assert z.get_library_version() == 0x00010200 and "1.2.0" in z.get_library_version_str()
    z.set_machine("telum1")
    assert z.get_max_runnable_version() == 0x000100FF
    assert z.is_version_runnable(0x00010000) and not z.is_version_runnable(0x00010100)
    assert not z.is_nnpa_parmblk_fmt_installed(1, z.NNPA_PARMBLKFORMAT_1)
    assert not z.is_nnpa_function_installed(1, z.NNPA_MATMUL_OP_BCAST1)
    assert not z.is_nnpa_datatype_installed(z.QUERY_DATATYPE_BINARY_INT8)
    assert not z.is_nnpa_layout_fmt_installed(z.QUERY_LAYOUTFMT_4DWEIGHTS)
    z.set_machine("telum2")
    assert z.get_max_runnable_version() == 0x000102FF and z.is_version_runnable(0x00010100)
    assert not z.is_version_runnable(0x00010300)
    assert z.is_nnpa_installed() and z.is_nnpa_function_installed(0) and z.is_nnpa_parmblk_fmt_installed(2, 0, 1)
    assert z.is_nnpa_function_installed(3, z.NNPA_LSTMACT, z.NNPA_GRUACT, z.NNPA_TRANSFORM)
    assert z.is_nnpa_datatype_installed(z.QUERY_DATATYPE_INTERNAL1 | z.QUERY_DATATYPE_BINARY_INT8)
    assert z.is_nnpa_conversion_installed(z.NNPA_DATATYPE_1, z.QUERY_BFPFMT_TINY | z.QUERY_BFPFMT_SHORT)
    assert z.refresh_nnpa_query_result() == S.ZDNN_OK
    assert z.get_nnpa_max_dim_idx_size() == 32768 == z.get_max_for_dim(1) and z.get_max_for_dim(5) == 0
    assert z.get_nnpa_max_tensor_size() == 4 * 1024**3
    with pytest.raises(ValueError, match="machine"):
        z.set_machine("telum9")
    z.set_machine("none")
    assert not z.is_nnpa_installed() and z.refresh_nnpa_query_result() == S.ZDNN_UNAVAILABLE_FUNCTION
    assert not z.is_version_runnable(0x00010000)


def test_no_nnpa_machine_ops_unavailable():
    a = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.ones((2, 3), np.float32))
    b = make_zt(z.ZDNN_2D, "FP32", (3, 4), np.ones((3, 4), np.float32))
    c = make_zt(z.ZDNN_1D, "FP32", (4,), np.ones(4, np.float32))
    out = make_zt(z.ZDNN_2D, "FP32", (2, 4), transform=False)
    x = make_zt(z.ZDNN_3DS, "FP32", (2, 1, 3), np.ones((2, 1, 3), np.float32))
    h0 = make_zt(z.ZDNN_3DS, "FP32", (1, 1, 2), np.zeros((1, 1, 2), np.float32))
    g = [np.ones((1, 3, 2), np.float32)] * 3
    W = make_zt(z.ZDNN_3DS, "FP32", (1, 3, 2), *g, concat=z.RNN_TYPE_GRU | z.USAGE_WEIGHTS)
    R = make_zt(z.ZDNN_3DS, "FP32", (1, 2, 2), *[v[:, :2] for v in g], concat=z.RNN_TYPE_GRU | z.USAGE_HIDDEN_WEIGHTS)
    bb = [np.ones((1, 2), np.float32)] * 3
    Wb = make_zt(z.ZDNN_2DS, "FP32", (1, 2), *bb, concat=z.RNN_TYPE_GRU | z.USAGE_BIASES)
    Rb = make_zt(z.ZDNN_2DS, "FP32", (1, 2), *bb, concat=z.RNN_TYPE_GRU | z.USAGE_HIDDEN_BIASES)
    hn = make_zt(z.ZDNN_4DS, "FP32", (2, 1, 1, 2), transform=False)
    assert z.gru(x, h0, W, Wb, R, Rb, z.FWD, None, hn) == S.ZDNN_OK
    z.set_machine("none")
    assert z.matmul_op(a, b, c, 0, out) == S.ZDNN_UNAVAILABLE_FUNCTION
    assert z.gru(x, h0, W, Wb, R, Rb, z.FWD, None, hn) == S.ZDNN_UNAVAILABLE_FUNCTION


def test_transpose_and_bcast_invalid_op_type():
    a = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.ones((2, 3), np.float32))
    b = make_zt(z.ZDNN_2D, "FP32", (3, 4), np.ones((3, 4), np.float32))
    c = make_zt(z.ZDNN_1D, "FP32", (4,), np.ones(4, np.float32))
    out = make_zt(z.ZDNN_2D, "FP32", (2, 4), transform=False)
    assert z.matmul_bcast_op(a, b, c, 7, out) == S.ZDNN_FUNC_RC_F000
    assert z.matmul_transpose_op(a, b, c, False, False, -1, out) == S.ZDNN_FUNC_RC_F000


def test_quantized_int8_transform_needs_telum2():
    x = np.ones((3, 4), np.float32)
    zt = _qzt(z.QUANTIZED_INT8, z.FP32, (3, 4))
    z.set_machine("telum1")
    assert z.transform_quantized_ztensor(zt, False, -128, 127, x) == S.ZDNN_UNAVAILABLE_FUNCTION


def test_limits():
    assert z.get_max_limit(z.ZDNN_DLFLOAT16, z.FP32) == (S.ZDNN_OK, np.float32(8573157376.0))
    st, v = z.get_max_limit(z.ZDNN_DLFLOAT16, z.FP16)
    assert st == S.ZDNN_OK and float(v) == 65504.0
    st, v = z.get_max_limit(z.ZDNN_DLFLOAT16, z.BFLOAT)
    assert np.asarray(v).view(np.uint16) == 0x4FFF
    assert z.get_min_limit(z.ZDNN_BINARY_INT8, z.INT8) == (S.ZDNN_OK, -128)
    assert float(z.get_min_limit(z.ZDNN_BINARY_INT8, z.FP16)[1]) == -128.0
    assert z.get_max_limit(z.ZDNN_BINARY_INT32, z.INT32)[1] == 2**31 - 1
    assert z.get_max_limit(z.ZDNN_DLFLOAT16, z.INT8)[0] == S.ZDNN_INVALID_TYPE
    assert z.get_min_limit(z.FP32, z.FP32)[0] == S.ZDNN_INVALID_TYPE


def test_getrange():
    zt = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    assert z.getrange_ztensor(zt) == (S.ZDNN_OK, -0.0, 6.0)
    zt = make_zt(z.ZDNN_2D, "FP32", (2, 3), -np.array([[1, 2, 3], [4, 5, 6.5]], np.float32))
    assert z.getrange_ztensor(zt) == (S.ZDNN_OK, -6.5, 0.0)
    assert np.signbit(z.getrange_ztensor(make_zt(z.ZDNN_1D, "FP32", (2,), np.ones(2, np.float32)))[1])


# ---- settings ---------------------------------------------------------------------------------------------------
def test_init_reads_environment(monkeypatch):
    monkeypatch.setenv("ZDNN_ENABLE_PRECHECK", "true")
    monkeypatch.setenv("ZDNN_STATUS_DIAG", "0x00040003")
    old = (z.settings.precheck, z.settings.status_diag)
    try:
        z.init()
        assert z.settings.precheck is True and z.settings.status_diag == 0x00040003
        monkeypatch.setenv("ZDNN_STATUS_DIAG", "262145")
        monkeypatch.setenv("ZDNN_ENABLE_PRECHECK", "false")
        z.init()
        assert z.settings.precheck is False and z.settings.status_diag == 0x00040001
    finally:
        z.settings.precheck, z.settings.status_diag = old


def test_status_diag_logs_matching_status(caplog):
    with z.settings.override(status_diag=int(S.ZDNN_INVALID_TYPE), diagnostics=[]):
        tf = z.TensorDesc()
        z.generate_transformed_desc(desc(z.ZDNN_2D, z.FP32, 2, 2), tf)
        assert z.settings.diagnostics == []
        with caplog.at_level("WARNING", logger="fusedrnn.zdnn"):
            z.generate_transformed_desc(desc(z.ZDNN_2D, z.INT8, 2, 2), tf)
        assert len(z.settings.diagnostics) == 1 and "ZDNN_INVALID_TYPE" in z.settings.diagnostics[0]
        assert "generate_transformed_desc" in caplog.text


def test_precheck_off_raises_for_invalid_op_tensors():
    a = make_zt(z.ZDNN_2D, "FP32", (2, 3), np.ones((2, 3), np.float32))
    b = make_zt(z.ZDNN_2D, "FP32", (4, 2), np.ones((4, 2), np.float32))  # inner dims disagree
    c = make_zt(z.ZDNN_1D, "FP32", (2,), np.ones(2, np.float32))
    out = make_zt(z.ZDNN_2D, "FP32", (2, 2), transform=False)
    assert z.matmul_op(a, b, c, z.MATMUL_OP_ADDITION, out) == S.ZDNN_INVALID_SHAPE
    with z.settings.override(precheck=False):
        with pytest.raises(z.NNPAProgramException) as ei:
            z.matmul_op(a, b, c, z.MATMUL_OP_ADDITION, out)
        assert ei.value.status == S.ZDNN_INVALID_SHAPE and "ZDNN_ENABLE_PRECHECK" in str(ei.value)


# ---- fuzz: the validators answer every descriptor with a status ------------------------------------------------
_LAYOUTS = st.integers(0, 15)
_TYPES = st.sampled_from([0, 6, 8, 10, 251, 252, 253, 254, 255, 3, 99])
_DIM = st.one_of(st.integers(1, 9), st.integers(0, 70), st.just(40000))
_OUTER = st.one_of(st.integers(0, 3), st.just(40000))


@settings(max_examples=150, deadline=None)
@given(layout=_LAYOUTS, typ=_TYPES, dims=st.tuples(_OUTER, _OUTER, _DIM, _DIM), qtype=st.integers(-1, 3),
       info=st.sampled_from([0, 1 << 8, 2 << 8, 3 << 8, 1 << 16, (1 << 24) | (1 << 16), 5 << 24, 7]),
       field=st.sampled_from(["layout", "format", "type", "dim1", "dim4", None]), junk=st.integers(-1, 300))
def test_fuzz_descriptor_validators(layout, typ, dims, qtype, info, field, junk):
    statuses = set(S)
    pre = z.TensorDesc(layout, 0, typ, *dims)
    for gen in (lambda tf: z.generate_transformed_desc(pre, tf),
                lambda tf: z.generate_quantized_transformed_desc(pre, qtype, tf),
                lambda tf: z.generate_transformed_desc_concatenated(pre, info, tf)):
        tf = z.TensorDesc()
        status = gen(tf)
        assert status in statuses
        if status != S.ZDNN_OK:
            continue
        if field is not None:
            setattr(tf, field, junk)
        zt = z.ZTensor()
        status = z.init_ztensor_with_malloc(pre, tf, zt)
        assert status in statuses
        if status != S.ZDNN_OK:
            continue
        n = max(1, int(np.prod(pre.shape())))
        data = np.ones(n, np.int8 if typ == z.INT8 else np.float32)
        try:
            status = z.transform_ztensor(zt, *([data] * max(1, {10: 4, 13: 4, 5: 3, 12: 3}.get(int(tf.layout), 1))))
        except ShapeError:
            continue  # the wrong number of data arrays for the layout is a Python-level misuse
        assert status in statuses
        out = np.zeros(n, np.float32)
        try:
            assert z.transform_origtensor(zt, out) in statuses
        except (ShapeError, DTypeError):
            pass  # out of another pre-type: a Python-level misuse
