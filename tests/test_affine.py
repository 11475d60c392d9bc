"""fusedrnn.numerics.affine against scalar references (np.float32 / Python float steps as each spec states them,
rounding decided exactly with fractions.Fraction) and against the SDKs' own data: the 536 harness-quantized
operands of the MLI conformance cases and the int8 weights of the TFLite hybrid conformance models."""

from __future__ import annotations

import glob
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import shared_dir
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fusedrnn.errors import AttributeValueError, DTypeError, ShapeError
from fusedrnn.numerics import affine as af

F32 = np.float32
FAST = settings(max_examples=120, deadline=None)
DTYPES = list(af.INT_RANGES)


def round_even(v: float) -> int:
    f = Fraction(v)
    fl = math.floor(f)
    d = f - fl
    return fl + (d > Fraction(1, 2) or (d == Fraction(1, 2) and fl % 2 == 1))


def round_away(v: float) -> int:
    f = Fraction(v)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def c_int32(v) -> int:
    """x86 static_cast<int32_t> of an integral float: NaN / out of range gives INT32_MIN."""
    f = float(v)
    return int(f) if math.isfinite(f) and -(2.0**31) <= f < 2.0**31 else -(2**31)


def clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


# ----------------------------------------------------------------------------------------------------------
# generic quantize / dequantize / choose_qparams
# ----------------------------------------------------------------------------------------------------------


def ref_quantize(x, s, zp, dt, rounding):
    lo, hi = af.INT_RANGES[np.dtype(dt)]
    v = x / s  # NumPy scalars: float32 / float32 stays float32, anything with float64 is float64
    r = round_even(float(v)) if rounding == "half_even" else round_away(float(v))
    return clamp(r + zp, lo, hi)


scales = st.one_of(st.floats(1e-6, 1e3), st.sampled_from([1.0, 0.5, 0.25, 2.0, 1 / 3, 0.1]))


@st.composite
def per_axis_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    dt = draw(st.sampled_from(DTYPES))
    lo, hi = af.INT_RANGES[dt]
    fdt = draw(st.sampled_from([np.float32, np.float64]))
    n = shape[axis]
    s = np.array(draw(st.lists(scales, min_size=n, max_size=n)), dtype=fdt)
    zp = np.array(draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dtype=np.int64)
    elems = st.one_of(st.floats(-1e6, 1e6, width=32), st.integers(-1000, 1000).map(lambda k: k / 2))
    x = draw(hnp.arrays(fdt, shape, elements=elems))
    return x, s, zp, dt, axis


@FAST
@given(per_axis_case(), st.sampled_from(["half_even", "half_away"]))
def test_quantize_per_axis_matches_reference(case, rounding):
    x, s, zp, dt, axis = case
    q = af.quantize(x, s, zp, dt, axis=axis, rounding=rounding)
    assert q.dtype == dt and q.shape == x.shape
    ax = axis % x.ndim
    for idx in np.ndindex(x.shape):
        k = idx[ax]
        assert int(q[idx]) == ref_quantize(x[idx], s[k], int(zp[k]), dt, rounding), (idx, x[idx], s[k], zp[k])
    # dequantize: (q - zp) in int64, then one conversion and one multiply in the requested float type
    for fdt in (np.float32, np.float64):
        d = af.dequantize(q, s, zp, axis=axis, dtype=fdt)
        assert d.dtype == fdt
        for idx in np.ndindex(x.shape):
            k = idx[ax]
            assert d[idx] == fdt(int(q[idx]) - int(zp[k])) * fdt(s[k])


@FAST
@given(st.lists(st.integers(-(2**20), 2**20), min_size=1, max_size=20), st.sampled_from(DTYPES),
       st.sampled_from([np.float32, np.float64]), st.sampled_from(["half_even", "half_away"]))
def test_quantize_ties_per_tensor(ks, dt, fdt, rounding):
    """x = (k + 1/2) · s with s a power of two: every quotient is an exact tie."""
    x = np.array([k + 0.5 for k in ks], dtype=fdt) * fdt(0.25)
    lo, hi = af.INT_RANGES[dt]
    q = af.quantize(x, fdt(0.25), 0, dt, rounding=rounding)
    rnd = round_even if rounding == "half_even" else round_away
    assert [int(v) for v in q] == [clamp(rnd(k + 0.5), lo, hi) for k in ks]


def ref_choose(rmin, rmax, dt, symmetric):
    lo, hi = af.INT_RANGES[np.dtype(dt)]
    a, b = min(rmin, 0.0), max(rmax, 0.0)
    if symmetric:
        m = max(-a, b)
        scale = 2.0 * m / float(hi - lo)
        zp = 0 if lo < 0 else (hi + 1) // 2
    else:
        scale = (b - a) / float(hi - lo)
        zp = clamp(round_even(lo - a / scale), lo, hi) if scale > 0 else 0
    return (scale if scale > 0 else 1.0), zp


@FAST
@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=1, max_size=10),
       st.sampled_from(DTYPES), st.booleans())
def test_choose_qparams_matches_reference_and_covers_range(pairs, dt, symmetric):
    rmin = np.array([min(p) for p in pairs])
    rmax = np.array([max(p) for p in pairs])
    scale, zp = af.choose_qparams(rmin, rmax, dt, symmetric=symmetric)
    assert scale.dtype == np.float64 and zp.dtype == np.int64
    lo, hi = af.INT_RANGES[dt]
    for i, (a, b) in enumerate(zip(rmin, rmax, strict=True)):
        s_ref, z_ref = ref_choose(float(a), float(b), dt, symmetric)
        assert scale[i] == s_ref and zp[i] == z_ref
        s1, z1 = af.choose_qparams(float(a), float(b), dt, symmetric=symmetric)
        assert isinstance(s1, float) and isinstance(z1, int) and (s1, z1) == (s_ref, z_ref)
        # zero is exact; the widened range maps into the integer range up to a step (clamping at the far end)
        assert af.quantize(0.0, s_ref, z_ref, dt) == z_ref
        if not symmetric and s_ref > 0 and a < b:
            for r in (min(a, 0.0), max(b, 0.0)):
                back = af.dequantize(af.quantize(r, s_ref, z_ref, dt), s_ref, z_ref, dtype=np.float64)
                assert abs(back - r) <= s_ref * 1.0000001


def test_choose_qparams_examples():
    assert af.choose_qparams(-1.0, 1.0, np.int8, symmetric=True) == (2.0 / 255, 0)
    assert af.choose_qparams(-1.0, 1.0, np.uint8, symmetric=True) == (2.0 / 255, 128)
    assert af.choose_qparams(0.0, 0.0, np.uint8) == (1.0, 0)
    assert af.choose_qparams(0.5, 2.0, np.uint8) == (2.0 / 255, 0)  # widened to [0, 2]
    s, z = af.choose_qparams(-2.0, 0.0, np.int8)
    assert (s, z) == (2.0 / 255, 127)


# ----------------------------------------------------------------------------------------------------------
# MLI
# ----------------------------------------------------------------------------------------------------------


def ref_mli_mantissa_raw(scale: float, fb: int) -> int:
    """trunc(ldexpf(1, sfb) · scale_f + 0.5f) with float32 scalar steps (test_tensor_quantizer.cc)."""
    p = F32(np.ldexp(F32(1.0), fb)) * F32(scale)
    return math.trunc(float(p + F32(0.5)))


def mli_cases():
    root = shared_dir("conformance", "mli")
    for path in sorted(glob.glob(str(root / "*.json"))):
        if path.endswith("index.json"):
            continue
        meta = json.load(open(path))
        data = np.load(path[:-5] + ".npz")
        for op in meta["operands"]:
            if op["role"] + "__q" in data.files:
                yield meta, op, data


BITS = {"MLI_EL_FX_8": 8, "MLI_EL_FX_16": 16, "MLI_EL_SA_8": 8, "MLI_EL_SA_32": 32}


def test_mli_harness_quantization_reproduces_conformance_operands():
    """Every quantized operand of the 86 MLI cases (their CRC proves them to be the harness's output)."""
    n_ops = n_auto = 0
    for _meta, op, data in mli_cases():
        role = op["role"]
        x, expect = data[role + "__float"], data[role + "__q"]
        bits = BITS[op["el_type"]]
        if "frac_bits" in op:
            got = af.mli_quantize(x, bits=bits, frac_bits=op["frac_bits"])
        else:
            sf = np.array(op["scale_float"], dtype=F32)
            m, fb = af.mli_scale_from_float(sf, frac_bits=np.array(op["scale_frac_bits"]))
            np.testing.assert_array_equal(m, np.array(op["scale_int16"], dtype=np.int16))
            assert m.dtype == np.int16 and fb.dtype == np.int8
            zp = af.mli_zero_point_from_float(np.array(op["zero_point_float_param"], dtype=F32), sf)
            np.testing.assert_array_equal(zp, np.array(op["zero_point_int16"], dtype=np.int16))
            if op["dim"] < 0 and bits == 8:  # the vectors normalise per-tensor sa8 scales to 15-bit mantissas
                m_auto, fb_auto = af.mli_scale_from_float(sf)
                assert list(fb_auto) == op["scale_frac_bits"] and list(m_auto) == op["scale_int16"]
                n_auto += 1
            got = af.mli_quantize(x, bits=bits, frac_bits=np.array(op["scale_frac_bits"]),
                                  scale=np.array(op["scale_int16"]), zero_point=np.array(op["zero_point_int16"]),
                                  axis=None if op["dim"] < 0 else op["dim"])
        assert got.dtype == expect.dtype
        np.testing.assert_array_equal(got, expect, err_msg=f"{op['quantizer']}")
        n_ops += 1
    assert n_ops == 536 and n_auto > 100


@FAST
@given(st.floats(2.0**-100, 2.0**100, width=32), st.integers(1, 15))
def test_mli_scale_from_float_normalised_round_trip(scale, mb):
    m, fb = af.mli_scale_from_float(scale, mantissa_bits=mb)
    m, fb = int(m), int(fb)
    assert 2 ** (mb - 1) <= m <= 2**mb - 1
    assert m == ref_mli_mantissa_raw(scale, fb)
    assert ref_mli_mantissa_raw(scale, fb + 1) > 2**mb - 1  # the largest frac_bits that fits
    # within half a mantissa LSB (plus the float32 rounding of the +0.5f add)
    err = abs(Fraction(af.mli_scale_to_float(m, fb)) - Fraction(float(F32(scale))))
    assert err <= Fraction(2) ** -fb * (Fraction(1, 2) + Fraction(1, 2**8))


@FAST
@given(st.integers(-80, 80), st.integers(1, 15), st.data())
def test_mli_scale_exact_values_round_trip(k, mb, data):
    s = 2.0**k
    m, fb = af.mli_scale_from_float(s, mantissa_bits=mb)
    assert (int(m), int(fb)) == (2 ** (mb - 1), mb - 1 - k)
    assert af.mli_scale_to_float(m, fb) == s
    m0 = data.draw(st.integers(2 ** (mb - 1), 2**mb - 1))
    s2 = math.ldexp(m0, k)
    m2, fb2 = af.mli_scale_from_float(s2, mantissa_bits=mb)
    assert (int(m2), int(fb2)) == (m0, -k) and af.mli_scale_to_float(m2, fb2) == s2


def test_mli_scale_vectorised_and_given_frac_bits():
    m, fb = af.mli_scale_from_float(np.array([0.0065576606430113316, 304.42352294921875, 275452512.0], F32))
    assert list(m) == [27505, 19483, 16812] and list(fb) == [22, 6, -14]  # values from the MLI vectors
    m, fb = af.mli_scale_from_float(np.array([0.5, 0.25]), frac_bits=20)
    assert list(m) == [32767, 32767] and list(fb) == [20, 20]  # saturates as the harness does


@FAST
@given(st.floats(-1e6, 1e6, width=32), st.floats(float(F32(1e-6)), 1e6, width=32))
def test_mli_zero_point_matches_reference(zf, sf):
    t = -F32(zf) / F32(sf) + F32(0.5)
    expect = clamp(c_int32(math.trunc(float(t))), -32768, 32767)
    assert int(af.mli_zero_point_from_float(zf, sf)) == expect


def ref_mli_quantize(x, bits, fb, m, zp):
    sv = F32(np.ldexp(F32(1.0) / F32(m), fb))
    v = sv * F32(x) + (F32(0.5) if x > 0 else F32(-0.5))
    fv = float(v)
    t = math.trunc(fv) if math.isfinite(fv) and -(2**31) <= math.trunc(fv) < 2**31 else -(2**31)
    s = (t + zp + 2**31) % 2**32 - 2**31
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return clamp(s, lo, hi)


@FAST
@given(st.lists(st.one_of(st.floats(allow_nan=False, width=32), st.integers(-400, 400).map(lambda k: k / 4)),
                min_size=1, max_size=20),
       st.sampled_from([8, 16, 32]), st.integers(-30, 40), st.integers(1, 32767), st.integers(-32768, 32767))
def test_mli_quantize_matches_reference(xs, bits, fb, m, zp):
    x = np.array(xs, dtype=F32)
    got = af.mli_quantize(x, bits=bits, frac_bits=fb, scale=m, zero_point=zp)
    assert [int(v) for v in got] == [ref_mli_quantize(v, bits, fb, m, zp) for v in x]
    d = af.mli_dequantize(got, frac_bits=fb, scale=m, zero_point=zp)
    assert d.dtype == F32
    sv = F32(np.ldexp(F32(m), -fb))
    assert [float(v) for v in d] == [float(F32(int(q) - zp) * sv) for q in got]


# ----------------------------------------------------------------------------------------------------------
# Quark
# ----------------------------------------------------------------------------------------------------------


def ref_quark(a, scale, zp):
    with np.errstate(over="ignore", invalid="ignore"):
        v = F32(a) / F32(scale)
    fv = float(v)
    r = round_even(fv) if math.isfinite(fv) else None
    if r is None or not -(2**63) <= r < 2**63:
        r = -(2**63)  # x86 cvttss2si "integer indefinite"
    return clamp(r + zp, 0, 65535)


quark_values = st.one_of(st.floats(width=32), st.integers(-(2**17), 2**17).map(lambda k: k / 2),
                         st.sampled_from([np.inf, -np.inf, np.nan, 3e38, -3e38, 2.0**63, 2.0**62]))


@settings(max_examples=150, deadline=None)
@given(st.lists(quark_values, min_size=1, max_size=20),
       st.one_of(st.floats(float(F32(1e-6)), 1e3, width=32), st.sampled_from([1.0, 0.5, 2.0**-10])),
       st.integers(0, 65535))
def test_quark_quantize_uint16_matches_reference(xs, scale, zp):
    a = np.array(xs, dtype=F32)
    got = af.quark_quantize_uint16(a, scale, zp)
    assert got.dtype == np.uint16
    assert [int(v) for v in got] == [ref_quark(v, scale, zp) for v in a]


def test_quark_ties_are_half_even():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5], dtype=F32)
    assert list(af.quark_quantize_uint16(a, 1.0, 32768)) == [32768, 32770, 32770, 32768, 32766, 32766]


# ----------------------------------------------------------------------------------------------------------
# TFLite
# ----------------------------------------------------------------------------------------------------------


def roundf(v) -> int:
    f = float(v)
    return c_int32(round_away(f) if math.isfinite(f) else f)


def ref_sym_row(row):
    rng = max(abs(F32(min(row))), abs(F32(max(row))))
    if rng == 0:
        return [0] * len(row), F32(1)
    scale = F32(rng) / F32(127)
    inv = F32(127) / F32(rng)
    return [clamp(roundf(F32(v) * inv), -127, 127) for v in row], scale


def ref_asym_row(row):
    rmin = float(min(F32(0), F32(min(row))))
    rmax = float(max(F32(0), F32(max(row))))
    if rmin == rmax:
        return [0] * len(row), F32(1), 0
    s = (rmax - rmin) / 255.0
    zmin, zmax = -128.0 - rmin / s, 127.0 - rmax / s
    z = zmin if 128.0 + abs(rmin / s) < 127.0 + abs(rmax / s) else zmax
    zp = -128 if z <= -128.0 else (127 if z >= 127.0 else round_away(z))
    scale = F32(s)
    inv = F32(1) / scale
    return [clamp(roundf(F32(zp) + F32(v) * inv), -128, 127) for v in row], scale, zp


row_values = st.one_of(st.floats(-1e4, 1e4, width=32), st.integers(-254, 255).map(lambda k: k / 2),
                       st.sampled_from([0.0, 127.0, -127.0, 127.5, -127.5, 1e-30]))


@FAST
@given(hnp.arrays(F32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=row_values))
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_tflite_rows_match_reference(v):
    qs, ss = af.tflite_quantize_rows_symmetric(v)
    qa, sa, za = af.tflite_quantize_rows_asymmetric(v)
    assert qs.dtype == np.int8 and ss.dtype == F32 and qa.dtype == np.int8 and sa.dtype == F32
    assert za.dtype == np.int32 and qs.shape == v.shape and ss.shape == v.shape[:-1] and za.shape == v.shape[:-1]
    for idx in np.ndindex(v.shape[:-1]):
        row = list(v[idx])
        q_ref, s_ref = ref_sym_row(row)
        assert [int(t) for t in qs[idx]] == q_ref and ss[idx] == s_ref
        q_ref, s_ref, z_ref = ref_asym_row(row)
        assert [int(t) for t in qa[idx]] == q_ref and sa[idx] == s_ref and za[idx] == z_ref


def test_tflite_row_ties_and_degenerate_rows():
    v = np.array([[127.0, 0.5, -0.5, 1.5, -2.5], [0.0, 0.0, 0.0, 0.0, 0.0]], dtype=F32)
    q, s = af.tflite_quantize_rows_symmetric(v)
    assert q.tolist() == [[127, 1, -1, 2, -3], [0, 0, 0, 0, 0]] and s.tolist() == [1.0, 1.0]
    q, s, z = af.tflite_quantize_rows_asymmetric(np.array([[-127.5, 127.5, 0.5, -0.5]], dtype=F32))
    assert s.tolist() == [1.0] and z.tolist() == [-1] and q.tolist() == [[-128, 127, -1, -2]]


def test_tflite_symmetric_quantize_matches_converter_weights():
    """The int8 weights and scales the TF converter stored in the hybrid models, from the float models' weights."""
    root = shared_dir("conformance", "tflite")
    n = 0
    for model, prefixes in (("k2_lstm", ["lstm"]), ("k2_bilstm", ["lstm_fw", "lstm_bw"])):
        fl = np.load(root / f"{model}_float.npz")
        dy = np.load(root / f"{model}_dynamic.npz")
        for p in prefixes:
            for slot in range(1, 9):
                key = f"{p}_in{slot:02d}"
                q, s = af.tflite_symmetric_quantize(fl[key])
                np.testing.assert_array_equal(q, dy[key])
                assert q.dtype == np.int8 and isinstance(s, F32) and s == dy[key + "_scale"][0]
                n += 1
    assert n == 24


# ----------------------------------------------------------------------------------------------------------
# argument validation (fuzzed)
# ----------------------------------------------------------------------------------------------------------

bad_scales = st.one_of(st.floats(max_value=0.0), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -1.0]))


@settings(max_examples=60, deadline=None)
@given(bad_scales)
def test_bad_scales_are_refused(s):
    for call in (lambda: af.quantize(np.ones(3), s, 0, np.int8), lambda: af.dequantize(np.ones(3, np.int8), s, 0),
                 lambda: af.mli_scale_from_float(s), lambda: af.quark_quantize_uint16(np.ones(3, F32), s, 0),
                 lambda: af.mli_zero_point_from_float(1.0, s)):
        with pytest.raises(AttributeValueError, match="scale"):
            call()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(-(2**40), 2**40))
def test_zero_point_out_of_range_is_refused(dt, zp):
    lo, hi = af.INT_RANGES[dt]
    assume(not lo <= zp <= hi)
    with pytest.raises(AttributeValueError, match="zero_point"):
        af.quantize(np.ones(2), 1.0, zp, dt)
    if not 0 <= zp <= 65535:
        with pytest.raises(AttributeValueError, match="zero_point"):
            af.quark_quantize_uint16(np.ones(2, F32), 1.0, zp)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.sampled_from([np.float32, np.int64, np.uint32, np.bool_, "int4", "float16"]), st.text(max_size=4)))
def test_bad_dtype_is_refused(dt):
    try:  # random text can spell a supported dtype ("H" is uint16)
        supported = np.dtype(dt) in af.INT_RANGES
    except Exception:  # not a dtype at all: NumPy raises assorted errors for odd strings
        supported = False
    assume(not supported)
    with pytest.raises(DTypeError, match="dtype"):
        af.quantize(np.ones(2), 1.0, 0, dt)
    with pytest.raises(DTypeError, match="dtype"):
        af.choose_qparams(-1.0, 1.0, dt)


@settings(max_examples=60, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), st.integers(-6, 6), st.integers(0, 6))
def test_per_axis_shapes_and_axes_are_checked(shape, axis, n):
    x = np.zeros(shape)
    if not -len(shape) <= axis < len(shape):
        with pytest.raises(AttributeValueError, match="axis"):
            af.quantize(x, np.ones(2), np.zeros(2, np.int64), np.int8, axis=axis)
        return
    if n in (0, 1, shape[axis]):
        return
    with pytest.raises(ShapeError, match="scale: expected shape"):
        af.quantize(x, np.ones(n), 0, np.int8, axis=axis)
    with pytest.raises(ShapeError, match="zero_point: expected shape"):
        af.dequantize(x.astype(np.int8), 1.0, np.zeros(n, np.int64), axis=axis)
    with pytest.raises(ShapeError, match="scale: expected a scalar"):
        af.quantize(x, np.ones(n), 0, np.int8)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([np.nan, np.inf, -np.inf]), st.integers(0, 3))
def test_tflite_refuses_non_finite_and_empty_rows(bad, pos):
    v = np.zeros((2, 4), F32)
    v[1, pos] = bad
    for call in (af.tflite_quantize_rows_symmetric, af.tflite_quantize_rows_asymmetric, af.tflite_symmetric_quantize):
        with pytest.raises(AttributeValueError, match="finite"):
            call(v)
    with pytest.raises(ShapeError):
        af.tflite_quantize_rows_symmetric(np.zeros((3, 0), F32))
    with pytest.raises(DTypeError):
        af.tflite_quantize_rows_asymmetric(np.zeros((3, 2), np.int32))


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(), st.sampled_from([None, 8.0, "8"])), st.integers(-1000, 1000))
def test_mli_argument_checks(bits, fb):
    if bits not in (8, 16, 32):
        with pytest.raises(AttributeValueError, match="bits"):
            af.mli_quantize(np.ones(2, F32), bits=bits, frac_bits=0)
    if not -128 <= fb <= 127:
        with pytest.raises(AttributeValueError, match="frac_bits"):
            af.mli_quantize(np.ones(2, F32), bits=8, frac_bits=fb)
        with pytest.raises(AttributeValueError, match="frac_bits"):
            af.mli_scale_from_float(0.5, frac_bits=fb)
    with pytest.raises(AttributeValueError, match="mantissa_bits"):
        af.mli_scale_from_float(0.5, mantissa_bits=16)
    with pytest.raises(AttributeValueError, match="frac_bits"):
        af.mli_scale_from_float(1e-38)  # needs frac_bits > 127


def test_nan_input_is_refused():
    with pytest.raises(AttributeValueError, match="NaN"):
        af.quantize(np.array([1.0, np.nan]), 1.0, 0, np.int8)
