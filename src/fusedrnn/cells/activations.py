"""The eleven ONNX recurrent activation functions, and onnxruntime's parsing of activation lists.

Each function is applied in place to a float array (``apply(x)`` overwrites ``x``), so the cell engines can run
them on slices of preallocated gate buffers without temporaries.

alpha/beta parsing follows onnxruntime (``rnn_helpers.cc``): the activation list is walked in order, each
function that uses alpha (beta) consumes the next element of ``activation_alpha`` (``activation_beta``), and a
function that does not use it consumes nothing. When a list runs out the defaults apply: onnxruntime's
(``defaults="ort"``: LeakyRelu alpha 0.01, HardSigmoid alpha 0.2 / beta 0.5, Elu alpha 1.0, everything else
0.0) or, as an option, those of the standalone ONNX operators (``defaults="onnx"``: additionally
ThresholdedRelu alpha 1.0, Affine and ScaledTanh alpha 1.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import AttributeValueError


def _relu(x, a, b):
    np.maximum(x, 0, out=x)


def _tanh(x, a, b):
    np.tanh(x, out=x)


def _sigmoid(x, a, b):
    # 1 / (1 + exp(-x)); exp overflows to inf for x < -88 (float32), giving the exact limit 0.
    with np.errstate(over="ignore"):
        np.multiply(x, -1, out=x)  # not np.negative: NumPy 2.4 miscomputes it in place at some strides
        np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)


def _affine(x, a, b):
    x *= a
    x += b


def _leaky_relu(x, a, b):
    np.multiply(x, a, out=x, where=x < 0)


def _thresholded_relu(x, a, b):
    # onnxruntime: x > alpha ? x : 0 (NaN stays NaN)
    x[x <= a] = 0


def _scaled_tanh(x, a, b):
    x *= b
    np.tanh(x, out=x)
    x *= a


def _hard_sigmoid(x, a, b):
    x *= a
    x += b
    np.clip(x, 0, 1, out=x)


def _elu(x, a, b):
    neg = x < 0
    np.expm1(x, out=x, where=neg)
    np.multiply(x, a, out=x, where=neg)


def _softsign(x, a, b):
    np.divide(x, 1 + np.abs(x), out=x)


def _softplus(x, a, b):
    np.logaddexp(0, x, out=x)


@dataclass(frozen=True)
class _Kind:
    name: str
    fn: object
    uses_alpha: bool
    uses_beta: bool
    ort_alpha: float = 0.0
    ort_beta: float = 0.0
    onnx_alpha: float = 0.0
    onnx_beta: float = 0.0


_KINDS = {
    k.name.lower(): k
    for k in (
        _Kind("Relu", _relu, False, False),
        _Kind("Tanh", _tanh, False, False),
        _Kind("Sigmoid", _sigmoid, False, False),
        _Kind("Affine", _affine, True, True, 0.0, 0.0, 1.0, 0.0),
        _Kind("LeakyRelu", _leaky_relu, True, False, 0.01, 0.0, 0.01, 0.0),
        _Kind("ThresholdedRelu", _thresholded_relu, True, False, 0.0, 0.0, 1.0, 0.0),
        _Kind("ScaledTanh", _scaled_tanh, True, True, 0.0, 0.0, 1.0, 1.0),
        _Kind("HardSigmoid", _hard_sigmoid, True, True, 0.2, 0.5, 0.2, 0.5),
        _Kind("Elu", _elu, True, False, 1.0, 0.0, 1.0, 0.0),
        _Kind("Softsign", _softsign, False, False),
        _Kind("Softplus", _softplus, False, False),
    )
}

ACTIVATION_NAMES: tuple[str, ...] = tuple(k.name for k in _KINDS.values())
"""The canonical spelling of every supported activation name."""


@dataclass(frozen=True)
class Activation:
    """One activation function with its resolved alpha and beta."""

    name: str
    alpha: float = 0.0
    beta: float = 0.0

    def apply(self, x: np.ndarray) -> None:
        """Overwrite ``x`` with the activation of ``x``."""
        _KINDS[self.name.lower()].fn(x, x.dtype.type(self.alpha), x.dtype.type(self.beta))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Return the activation of ``x`` as a new array."""
        y = np.array(x, dtype=np.result_type(x, np.float32), copy=True)
        self.apply(y)
        return y


def half_sigmoid(v: np.ndarray) -> None:
    """In place, σ(2v) = ½·tanh(v) + ½: the sigmoid of a pre-activation whose weights were pre-scaled by ½
    (the engines' fast path: one tanh call can then cover sigmoid and tanh gates alike)."""
    np.tanh(v, out=v)
    v *= 0.5
    v += 0.5


def canonical_name(name: str, argument: str = "activations") -> str:
    """Return the canonical spelling of an activation name (case-insensitive), or raise."""
    if not isinstance(name, str):
        raise AttributeValueError(f"{argument}: expected activation names (str), got {name!r}")
    kind = _KINDS.get(name.lower())
    if kind is None:
        raise AttributeValueError(
            f"{argument}: unknown activation {name!r}; expected one of {', '.join(ACTIVATION_NAMES)}"
        )
    return kind.name


def parse_activations(
    names: Sequence[str],
    alpha: Sequence[float] | None = None,
    beta: Sequence[float] | None = None,
    *,
    defaults: str = "ort",
) -> list[Activation]:
    """Resolve an ONNX activation list with its alpha/beta lists into :class:`Activation` objects.

    ``defaults`` is ``"ort"`` (onnxruntime's fill values, the default) or ``"onnx"`` (the ONNX operators').
    """
    if not isinstance(defaults, str) or defaults not in ("ort", "onnx"):
        raise AttributeValueError(f"activation_defaults: expected 'ort' or 'onnx', got {defaults!r}")
    alphas = [float(a) for a in (alpha or [])]
    betas = [float(b) for b in (beta or [])]
    out = []
    for name in names:
        kind = _KINDS[canonical_name(name).lower()]
        a = kind.ort_alpha if defaults == "ort" else kind.onnx_alpha
        b = kind.ort_beta if defaults == "ort" else kind.onnx_beta
        if kind.uses_alpha and alphas:
            a = alphas.pop(0)
        if kind.uses_beta and betas:
            b = betas.pop(0)
        out.append(Activation(kind.name, a, b))
    return out


def to_onnx_lists(acts: Sequence[Activation]) -> tuple[list[str], list[float], list[float]]:
    """Inverse of :func:`parse_activations`: the (activations, activation_alpha, activation_beta) lists."""
    names, alphas, betas = [], [], []
    for act in acts:
        kind = _KINDS[act.name.lower()]
        names.append(kind.name)
        if kind.uses_alpha:
            alphas.append(float(act.alpha))
        if kind.uses_beta:
            betas.append(float(act.beta))
    return names, alphas, betas
