"""zDNN's verifier tests ported: ``tests/testDriver_tensor_verify_conv2d.c`` and
``tests/testDriver_tensor_verify_pool_avg_max.c`` (cases extracted by ``scripts/extract_zdnn_facts.py`` into
``tests/data/zdnn/verify_conv2d.json`` / ``verify_pool.json``), run through ``zdnn_conv2d`` and the pooling ops,
whose first status is the verifier's; and libzdnn's refusal of INT32 data in ``transform_ztensor`` in both
directions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_zdnn_oracle import make_zt

import fusedrnn.zdnn as z

S = z.Status
DATA = Path(__file__).parent / "data" / "zdnn"
CONV = json.loads((DATA / "verify_conv2d.json").read_text())
POOL = json.loads((DATA / "verify_pool.json").read_text())
RANK = {"ZDNN_1D": 1, "ZDNN_2D": 2, "ZDNN_NHWC": 4, "ZDNN_HWCK": 4}


@pytest.fixture(autouse=True)
def _precheck():
    """The drivers call the verifiers; with ZDNN_ENABLE_PRECHECK the operations return their status."""
    with z.settings.override(precheck=True):
        yield


def _c(name):
    """A C enumerator of the driver by name (an int stays an int, e.g. the unknown padding -1)."""
    return name if isinstance(name, int) else getattr(z, name)


def alloc(info):
    """alloc_ztensor_with_values(dims, layout, dtype, NO_CONCAT, true, ZERO_ARRAY): a transformed zero ztensor."""
    dims = info["dims"][:RANK[info["layout"]]]
    return make_zt(_c(info["layout"]), info["dtype"], tuple(dims), np.zeros(dims, np.float32))


def _expected(case):
    """The verifier's status; where it passes, the op goes on to the NNPA, which answers an unknown padding type
    with response code F000 (zDNN's documented NNPA_* exception)."""
    status = _c(case["status"])
    if status == S.ZDNN_OK and case["padding"] not in ("VALID_PADDING", "SAME_PADDING"):
        return S.ZDNN_FUNC_RC_F000
    return status


@pytest.mark.parametrize("case", CONV["cases"], ids=lambda c: c["test"])
def test_conv2d_verifier_cases(case):
    x, k, b, out = (alloc(case[t]) for t in ("input", "kernel", "bias", "output"))
    if case["nonexistent_dtype"]:
        out.transformed_desc.type = CONV["broken_field_value"]
    if case["nonexistent_format"]:
        out.transformed_desc.format = CONV["broken_field_value"]
    st = z.conv2d(x, k, b, _c(case["padding"]), case["stride_height"], case["stride_width"], _c(case["act"]), 0.0,
                  out)
    assert st == _expected(case)


@pytest.mark.parametrize("kind", ["avgpool2d", "maxpool2d"])
@pytest.mark.parametrize("case", POOL["cases"], ids=lambda c: c["test"])
def test_pool_verifier_cases(case, kind):
    x, out = alloc(case["input"]), alloc(case["output"])
    if case["input_dtype_broken"]:
        x.transformed_desc.type = POOL["broken_field_value"]
    st = getattr(z, kind)(x, _c(case["padding"]), case["kernel_height"], case["kernel_width"],
                          case["stride_height"], case["stride_width"], out)
    assert st == _expected(case)


def _conv_base():
    case = next(c for c in CONV["cases"] if c["test"] == "same_padding_pass")
    return [alloc(case[t]) for t in ("input", "kernel", "bias", "output")], case


def test_conv2d_field_checks_come_after_the_strides_bias_before_output():
    """verify_conv2d_tensors: shapes and strides first, then VERIFY_FIELDS(bias, output) against the input's type
    and format, then the kernel's type (its format is never compared)."""
    (x, k, b, out), case = _conv_base()
    args = (z.SAME_PADDING, case["stride_height"], 0, z.CONV2D_ACT_NONE, 0.0)
    out.transformed_desc.type = -1
    assert z.conv2d(x, k, b, *args, out) == S.ZDNN_INVALID_STRIDES  # one stride 0: before the fields
    b.transformed_desc.format = -1
    ok_strides = (z.SAME_PADDING, case["stride_height"], case["stride_width"], z.CONV2D_ACT_NONE, 0.0)
    assert z.conv2d(x, k, b, *ok_strides, out) == S.ZDNN_INVALID_FORMAT  # the bias is checked before the output
    (x, k, b, out), _ = _conv_base()
    k.transformed_desc.type = -1
    assert z.conv2d(x, k, b, *ok_strides, out) == S.ZDNN_INVALID_TYPE
    (x, k, b, out), _ = _conv_base()
    relu_bad_clip = (z.SAME_PADDING, case["stride_height"], case["stride_width"], z.CONV2D_ACT_RELU, -1.0)
    k.transformed_desc.type = -1
    assert z.conv2d(x, k, b, *relu_bad_clip, out) == S.ZDNN_INVALID_TYPE  # the kernel before the clipping value
    (x, k, b, out), _ = _conv_base()
    assert z.conv2d(x, k, b, *relu_bad_clip, out) == S.ZDNN_INVALID_CLIPPING_VALUE
    assert z.conv2d(x, k, b, *ok_strides, out) == S.ZDNN_OK
    k.transformed_desc.format = z.ZDNN_FORMAT_4DFEATURE  # libzdnn never compares the kernel's format
    assert z.conv2d(x, k, b, *relu_bad_clip, out) == S.ZDNN_INVALID_CLIPPING_VALUE
    assert z.conv2d(x, k, b, *ok_strides, out) == S.ZDNN_INVALID_FORMAT  # the emulator's guard, after libzdnn's
    (x, k, b, out), _ = _conv_base()
    for t in (x, k, b, out):  # all of one (wrong) type: the fields agree, the strides are checked first
        t.transformed_desc.type = -1
    assert z.conv2d(x, k, b, *args, out) == S.ZDNN_INVALID_STRIDES
    assert z.conv2d(x, k, b, *relu_bad_clip, out) == S.ZDNN_INVALID_CLIPPING_VALUE
    assert z.conv2d(x, k, b, *ok_strides, out) == S.ZDNN_INVALID_TYPE


def test_pool_output_fields_compared_with_the_input_before_the_strides():
    x = alloc({"dims": [1, 8, 5, 1], "layout": "ZDNN_NHWC", "dtype": "FP32"})
    out = alloc({"dims": [1, 3, 3, 1], "layout": "ZDNN_NHWC", "dtype": "FP32"})
    out.transformed_desc.format = -1
    assert z.avgpool2d(x, z.SAME_PADDING, 3, 2, 0, 2, out) == S.ZDNN_INVALID_FORMAT  # before INVALID_STRIDES
    out.transformed_desc.format = x.transformed_desc.format
    assert z.avgpool2d(x, z.SAME_PADDING, 3, 2, 0, 2, out) == S.ZDNN_INVALID_STRIDES
    assert z.avgpool2d(x, z.SAME_PADDING, 3, 2, 3, 2, out) == S.ZDNN_OK
    x.transformed_desc.type = out.transformed_desc.type = -1  # input and output agree: libzdnn checks the strides
    assert z.maxpool2d(x, z.SAME_PADDING, 3, 2, 0, 2, out) == S.ZDNN_INVALID_STRIDES
    assert z.maxpool2d(x, z.SAME_PADDING, 3, 2, 3, 2, out) == S.ZDNN_INVALID_TYPE  # then the emulator's guard


@pytest.mark.parametrize("saturation", [False, True])
def test_transform_ztensor_refuses_int32_data_as_libzdnn(saturation):
    """verify_descriptors_transform_ztensor: a 4DFEATURE ztensor must be DLFLOAT16 and the data FP32, FP16 or
    BFLOAT; INT32 data (BINARY_INT32 descriptor from generate_transformed_desc) is INVALID_TYPE and the ztensor
    stays untransformed; FP32 data of the same shape transforms."""
    fn = z.transform_ztensor_with_saturation if saturation else z.transform_ztensor
    pre = z.init_pre_transformed_desc(z.ZDNN_2D, z.INT32, None, 3, 4)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == S.ZDNN_OK and tf.type == z.ZDNN_BINARY_INT32
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == S.ZDNN_OK
    assert fn(zt, np.ones((3, 4), np.int32)) == S.ZDNN_INVALID_TYPE and not zt.is_transformed
    tf.type = z.ZDNN_DLFLOAT16  # a DLFLOAT16 descriptor does not help: the pre-transformed type is refused
    assert fn(zt, np.ones((3, 4), np.int32)) == S.ZDNN_INVALID_TYPE
    fp = z.init_pre_transformed_desc(z.ZDNN_2D, z.FP32, None, 3, 4)
    tf2 = z.TensorDesc()
    assert z.generate_transformed_desc(fp, tf2) == S.ZDNN_OK
    ok = z.ZTensor()
    assert z.init_ztensor_with_malloc(fp, tf2, ok) == S.ZDNN_OK
    tf2.type = z.ZDNN_BINARY_INT32  # FP32 data into a BINARY_INT32 ztensor: the transformed type is refused
    assert fn(ok, np.ones((3, 4), np.float32)) == S.ZDNN_INVALID_TYPE
    tf2.type = z.ZDNN_DLFLOAT16
    assert fn(ok, np.ones((3, 4), np.float32)) == S.ZDNN_OK and ok.is_transformed
