"""Independent test oracles for the zDNN tests (written from zdnn.md, sharing no code with the library):
DLFLOAT16 encode/decode on integer bit fields (section 1.2), zDNN's test-input conversions (section 1.4), the
upstream tolerance rule (section 6) and ztensor builders. The oracle itself is checked against the spec's table.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusedrnn.zdnn as z


# ---- DLFLOAT16 (zdnn.md 1.2), scalar-by-formula but vectorised on int64 bit fields ----------------------------
def dlf16_encode_ref(x) -> np.ndarray:
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    sign = (u >> 16) & 0x8000
    e = ((u >> 23) & 0xFF) - 127 + 31
    f = (u & 0x7FFFFF) + (1 << 13)
    carry = f > 0x7FFFFF
    f = np.where(carry, 0, f)
    e = e + carry
    res = np.where(e < 0, 0, np.where((u & 0x7FFFFFFF) <= 0x4FFF9FFF, (e << 9) | (f >> 14), 0x7FFF))
    return (sign | res).astype(np.uint16)


def dlf16_decode_ref(codes) -> np.ndarray:
    c = np.asarray(codes, np.int64)
    e, f = (c >> 9) & 0x3F, c & 0x1FF
    v = np.ldexp(1.0 + f / 512.0, (e - 31).astype(np.int64))
    v = np.where((c & 0x7FFF) == 0, 0.0, v)
    v = np.where((c & 0x7FFF) == 0x7FFF, np.nan, v)
    return np.where(c & 0x8000, -v, v).astype(np.float32)


def dlf16_round_ref(x) -> np.ndarray:
    return dlf16_decode_ref(dlf16_encode_ref(x))


def to_pretype(x32: np.ndarray, pretype: str) -> np.ndarray:
    """zDNN's test-input conversion: FP32 as is, FP16 via DLF16 (cnvt_1_fp32_to_fp16), BFLOAT truncated."""
    x32 = np.asarray(x32, np.float32)
    if pretype == "FP32":
        return x32
    if pretype == "FP16":
        return dlf16_round_ref(x32).astype(np.float16)
    return (x32.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 codes


def expected_in_pretype(x32: np.ndarray, pretype: str) -> np.ndarray:
    """Expected values as the upstream checker sees them: FP32 -> DLF16 -> pre-type (bit patterns)."""
    d = dlf16_round_ref(x32)
    if pretype == "FP32":
        return d.view(np.uint32).view(np.int32)
    if pretype == "FP16":
        return d.astype(np.float16).view(np.int16)
    return (d.view(np.uint32) >> 16).astype(np.uint16).view(np.int16)


def as_float(bits: np.ndarray, pretype: str) -> np.ndarray:
    if pretype == "FP32":
        return bits.view(np.float32).astype(np.float64)
    if pretype == "FP16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def ulps_diff(a_bits: np.ndarray, b_bits: np.ndarray, pretype: str) -> np.ndarray:
    width = 32 if pretype == "FP32" else 16
    top = 1 << (width - 1)

    def ordered(v):  # sign-magnitude order: a negative pattern v maps to 0x80..0 - v (unsigned), i.e. -|v|
        v = v.astype(np.int64)
        return np.where(v < 0, top - (v & ((1 << width) - 1)), v)

    return np.abs(ordered(a_bits) - ordered(b_bits))


def tolerance_failures(actual_bits, expected_f32, pretype: str, tol: dict) -> int:
    """Elements failing 'ulps <= tol.ulps or |diff| <= tol.abs_tol' (README rule)."""
    exp_bits = expected_in_pretype(expected_f32, pretype)
    d_ulp = ulps_diff(actual_bits.reshape(-1), exp_bits.reshape(-1), pretype)
    d_abs = np.abs(as_float(actual_bits.reshape(-1), pretype) - as_float(exp_bits.reshape(-1), pretype))
    ok = (d_ulp <= tol["ulps"]) | (d_abs <= tol["abs_tol"])
    return int((~ok).sum())


# ---- ztensor builders --------------------------------------------------------------------------------------
PRETYPES = {"FP32": z.FP32, "FP16": z.FP16, "BFLOAT": z.BFLOAT}


def make_zt(layout, pretype: str, dims, *data, concat=None, transform=True):
    pre = z.init_pre_transformed_desc(layout, PRETYPES.get(pretype, pretype), None, *dims)
    tf = z.TensorDesc()
    st = (z.generate_transformed_desc(pre, tf) if concat is None
          else z.generate_transformed_desc_concatenated(pre, concat, tf))
    assert st == z.ZDNN_OK
    zt = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, zt) == z.ZDNN_OK
    if transform and pre.type == z.INT32:
        # libzdnn transforms only FP32/FP16/BFLOAT data: an INT32 ztensor stays untransformed (the ops never check
        # the state, so it still reaches their type checks as a C program's would)
        assert z.transform_ztensor(zt, *data) == z.ZDNN_INVALID_TYPE and not zt.is_transformed
    elif transform:
        assert z.transform_ztensor(zt, *[to_pretype(d, pretype) if pretype in PRETYPES else d for d in data]) \
            == z.ZDNN_OK
    return zt


def read_out(zt, pretype: str) -> np.ndarray:
    """transform_origtensor into the pre-type; returns the raw bit patterns (int32 / int16)."""
    shape = zt.pre_transformed_desc.shape()
    out = {"FP32": np.zeros(shape, np.float32), "FP16": np.zeros(shape, np.float16),
           "BFLOAT": np.zeros(shape, np.uint16)}[pretype]
    assert z.transform_origtensor(zt, out) == z.ZDNN_OK
    return out.view(np.int32) if pretype == "FP32" else out.view(np.int16)


# ---- the oracle against the spec's worked values -----------------------------------------------------------
SPEC_TABLE = [(1.0, 0x3E00), (0.5, 0x3C00), (3.0, 0x4100), (0.1, 0x3733), (1 + 2**-10, 0x3E01), (65504, 0x5E00),
              (8577350656, 0x7FFE), (8577351680, 0x7FFF), (np.inf, 0x7FFF), (np.nan, 0x7FFF), (-0.0, 0x8000),
              (2**-31, 0x0000)]


@pytest.mark.parametrize(("value", "code"), SPEC_TABLE)
def test_oracle_matches_spec_table(value, code):
    assert int(dlf16_encode_ref(np.float32(value))) == code


def test_oracle_ulps_rule():
    a = np.array([1.0, -1.0], np.float32).view(np.int32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), np.nextafter(np.float32(-1), np.float32(-2))],
                 np.float32).view(np.int32)
    np.testing.assert_array_equal(ulps_diff(a, b, "FP32"), [1, 1])
    zero = np.array([0.0, -0.0], np.float32).view(np.int32)
    np.testing.assert_array_equal(ulps_diff(zero[:1], zero[1:], "FP32"), [0])
