"""``fusedrnn.cells.dense`` (MLI ``rnn_dense``: y = b + Σᵢ xᵢ·Wᵢ, weights in x out) against a direct formula."""

from __future__ import annotations

import numpy as np
import pytest

from fusedrnn.cells import dense
from fusedrnn.errors import DTypeError, FusedRNNError, ShapeError


def direct(inputs, weights, bias):
    """Element by element: y[..., m] = b[m] + Σᵢ Σⱼ xᵢ[..., j] · Wᵢ[j, m], in float64."""
    lead = inputs[0].shape[:-1]
    M = weights[0].shape[1]
    y = np.zeros(lead + (M,))
    for idx in np.ndindex(*lead):
        for m in range(M):
            acc = 0.0 if bias is None else float(bias[m])
            for x, w in zip(inputs, weights, strict=True):
                for j in range(w.shape[0]):
                    acc += float(x[idx + (j,)]) * float(w[j, m])
            y[idx + (m,)] = acc
    return y


CASES = [(k, lead, dtype, with_bias) for k in (1, 2, 3, 4) for lead in ((), (3,), (2, 3))
         for dtype in (np.float32, np.float64) for with_bias in (True, False)]


@pytest.mark.parametrize("k,lead,dtype,with_bias", CASES)
def test_dense_matches_direct_formula(k, lead, dtype, with_bias):
    rng = np.random.default_rng([k, len(lead), np.dtype(dtype).itemsize, with_bias])
    M = int(rng.integers(1, 6))
    Ns = [int(rng.integers(1, 7)) for _ in range(k)]
    xs = [rng.standard_normal(lead + (n,)).astype(dtype) for n in Ns]
    ws = [rng.standard_normal((n, M)).astype(dtype) for n in Ns]
    b = rng.standard_normal(M).astype(dtype) if with_bias else None
    y = dense(xs, ws, b)
    assert y.shape == lead + (M,)
    assert y.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(y, direct(xs, ws, b), rtol=tol, atol=tol)


def test_dense_mixed_dtypes_promote_to_float64():
    rng = np.random.default_rng(1)
    x1 = rng.standard_normal((2, 3)).astype(np.float32)
    x2 = rng.standard_normal((2, 4))
    w1 = rng.standard_normal((3, 5)).astype(np.float32)
    w2 = rng.standard_normal((4, 5)).astype(np.float32)
    y = dense([x1, x2], [w1, w2], None)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, direct([x1, x2], [w1, w2], None), rtol=1e-12, atol=1e-12)


def test_dense_float16_inputs_computed_in_float32():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3)).astype(np.float16)
    w = rng.standard_normal((3, 2)).astype(np.float16)
    y = dense([x], [w])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, direct([x], [w], None), rtol=1e-6, atol=1e-6)


def test_dense_does_not_modify_arguments():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))]
    ws = [rng.standard_normal((3, 4)), rng.standard_normal((2, 4))]
    b = rng.standard_normal(4)
    copies = [a.copy() for a in xs + ws + [b]]
    dense(xs, ws, b)
    for a, c in zip(xs + ws + [b], copies, strict=True):
        np.testing.assert_array_equal(a, c)


def _ok():
    rng = np.random.default_rng(4)
    return [rng.standard_normal((2, 3)), rng.standard_normal((2, 4))], \
        [rng.standard_normal((3, 5)), rng.standard_normal((4, 5))], rng.standard_normal(5)


BAD_SHAPES = {
    "no inputs": lambda xs, ws, b: ([], [], None),
    "fewer weights": lambda xs, ws, b: (xs, ws[:1], b),
    "more weights": lambda xs, ws, b: (xs[:1], ws, b),
    "weight 1-D": lambda xs, ws, b: (xs, [ws[0][:, 0], ws[1]], b),
    "weight 3-D": lambda xs, ws, b: (xs, [ws[0][None], ws[1]], b),
    "weight M mismatch": lambda xs, ws, b: (xs, [ws[0], ws[1][:, :4]], b),
    "input N mismatch": lambda xs, ws, b: ([xs[0][:, :2], xs[1]], ws, b),
    "input leading mismatch": lambda xs, ws, b: ([xs[0], xs[1][:1]], ws, b),
    "input leading rank": lambda xs, ws, b: ([xs[0], xs[1][None]], ws, b),
    "input 0-D": lambda xs, ws, b: ([np.float64(1.0), xs[1]], ws, b),
    "bias too long": lambda xs, ws, b: (xs, ws, np.append(b, 1.0)),
    "bias 2-D": lambda xs, ws, b: (xs, ws, b[None]),
}


@pytest.mark.parametrize("case", list(BAD_SHAPES))
def test_dense_bad_shapes_raise_shape_error(case):
    xs, ws, b = BAD_SHAPES[case](*_ok())
    with pytest.raises(ShapeError) as ei:
        dense(xs, ws, b)
    assert isinstance(ei.value, FusedRNNError)
    msg = str(ei.value)
    assert any(name in msg for name in ("inputs", "weights", "bias")), msg


@pytest.mark.parametrize("which", ["inputs", "weights"])
def test_dense_integer_arrays_raise_dtype_error(which):
    xs, ws, b = _ok()
    if which == "inputs":
        xs = [np.ones((2, 3), np.int32), xs[1]]
    else:
        ws = [ws[0], np.ones((4, 5), np.int64)]
    with pytest.raises(DTypeError) as ei:
        dense(xs, ws, b)
    assert which in str(ei.value)


@pytest.mark.parametrize("bias", [np.ones(5, complex), np.array(["a"] * 5)])
def test_dense_bias_dtype_checked(bias):
    xs, ws, _ = _ok()
    with pytest.raises(DTypeError, match="bias"):
        dense(xs, ws, bias)
