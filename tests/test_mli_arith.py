"""The MLI package's hot-loop integer primitives (mli_math.h names for the unchecked cores of
fusedrnn.numerics.core) equal the validated functions (fusedrnn.numerics.fixed_point, tested against a scalar
model), for scalar and array shifts including the edge shifts; and the LUT generator reproduces the table
properties the spec states."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusedrnn.numerics import fixed_point as F
from fusedrnn.targets.mli import _arith as A
from fusedrnn.targets.mli.luts import make_lut

WIDTHS = (8, 16, 32, 64)


@st.composite
def value_and_shift(draw):
    w = draw(st.sampled_from(WIDTHS))
    lo, hi = A.lim(w)
    xs = draw(st.lists(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1, lo + 1, hi - 1])),
                       min_size=1, max_size=8))
    n = draw(st.integers(-w - 2, w + 2))
    return w, np.array(xs, dtype=np.int64), n


@settings(max_examples=300, deadline=None)
@given(value_and_shift(), st.sampled_from(["up", "convergent"]))
def test_rnd_asl_asr_match_numerics(args, mode):
    w, x, n = args
    np.testing.assert_array_equal(A.rnd(x, n, w, mode), F.asr_rnd(x, n, width=w, mode=mode))
    np.testing.assert_array_equal(A.rnd(x, np.full(x.shape, n), w, mode), F.asr_rnd(x, n, width=w, mode=mode))
    np.testing.assert_array_equal(A.asl(x, n, w), F.asl_sat(x, n, width=w))
    np.testing.assert_array_equal(A.asl(x, np.full(x.shape, n), w), F.asl_sat(x, n, width=w))
    np.testing.assert_array_equal(A.asr(x, n, w), F.asr(x, n, width=w))
    np.testing.assert_array_equal(A.norm(x, w), F.norm(x, width=w))
    np.testing.assert_array_equal(A.add_sat(x, x[::-1], w), F.add_sat(x, x[::-1], width=w))
    if w < 64:
        np.testing.assert_array_equal(A.wrap(x * 3 + 7, w), F.wrap(x * 3 + 7, w))


def test_cdiv_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0])
    b = np.array([2, 2, -2, -2, 3])
    np.testing.assert_array_equal(A.cdiv(a, b), [3, -3, -3, 3, 0])


@pytest.mark.parametrize("version,kind,size,first,last", [
    ("2.0", "sigm", 320, (1, 2), (32766, 32766)),
    ("2.0", "tanh", 344, (-32767, -32767), (32766, 32767)),
    ("1.x", "sigm", 180, (0, 0), None),
    ("1.x", "tanh", 178, None, None),
])
def test_generated_tables_have_the_documented_ends(version, kind, size, first, last):
    lut = make_lut(kind, version)
    assert lut.length == size and lut.data.dtype == np.int16
    if first:
        assert tuple(lut.data[:2]) == first
    if last:
        assert tuple(lut.data[-2:]) == last
    if version == "1.x" and kind == "sigm":
        assert tuple(lut.data[:4]) == (0, 0, 1, 1)
    if version == "1.x" and kind == "tanh":
        assert lut.data[0] == -32767 and lut.data[-1] == 32767
    # monotone, and the table value at the offset is f(0)
    assert np.all(np.diff(lut.data.astype(int)) >= 0)
    assert lut.data[lut.input_offset] == (16384 if kind == "sigm" else 0)
