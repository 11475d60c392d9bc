"""Gate orders, weight orientation and bias conventions of every framework and SDK, as data.

fusedrnn's canonical form (the cell engines' input):

* gate order LSTM (i, f, g, o) with g the cell candidate; GRU (z, r, n) with n the candidate; RNN one block;
* matrices **out x in** (row-vector form ``x @ W.T``), per direction: W [D, G*H, I], R [D, G*H, H];
* **double bias**: an input-side ``b_x`` and a recurrent-side ``b_h``, each [D, G*H].

A framework block order is written as a string of canonical gate letters, e.g. ONNX LSTM ``"iofg"``: block 0 holds
i, block 1 o, block 2 f, block 3 g. ``permutation`` turns that into indices (``perm[k]`` = the canonical gate in
the framework's block k); ``to_canonical`` / ``from_canonical`` reorder gate blocks along an axis, and
``weights_to_canonical`` / ``weights_from_canonical`` also fix the orientation; ``peepholes_to_canonical`` /
``peepholes_from_canonical`` reorder LSTM peepholes (fusedrnn's order: i, f, o) the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import AttributeValueError, ConversionError, ShapeError

CELLS = ("lstm", "gru", "rnn")
CANONICAL_GATES = {"lstm": "ifgo", "gru": "zrn", "rnn": "h"}
CANONICAL_PEEPHOLES = "ifo"
"""fusedrnn's LSTM peephole order: P [D, 3H] holds the input, forget and output gates' peepholes."""
GATE_NAMES = {
    "i": "input gate",
    "f": "forget gate",
    "g": "cell candidate (c, c~)",
    "o": "output gate",
    "z": "update gate (u)",
    "r": "reset gate",
    "n": "candidate (h~, o)",
    "h": "hidden",
}


@dataclass(frozen=True)
class Convention:
    """How one framework or SDK stores recurrent weights.

    ``lstm`` / ``gru``: block order as canonical gate letters (None when the framework lacks the cell);
    ``orientation``: ``"out_in"`` (``x @ W.T``) or ``"in_out"`` (``x @ W``); ``bias``: ``"double"``
    (input-side + recurrent-side), ``"single"`` (one bias per gate) or ``"none"``; ``gru_bias``: how a
    reset-after GRU's bias is kept (``"double"``, ``"single"``, ``"four_block"``) where it differs from ``bias``.
    """

    name: str
    title: str
    lstm: str | None
    gru: str | None
    orientation: str
    bias: str
    gru_bias: str | None = None
    peephole_order: str | None = None
    notes: str = ""


_TABLE = (
    Convention("onnx", "ONNX / onnxruntime", "iofg", "zrn", "out_in", "double", peephole_order="iof",
               notes="W [D,4H,I], R [D,4H,H], B [D,8H] = [Wb | Rb]"),
    Convention("ort_dynamic_quantize", "ORT com.microsoft::DynamicQuantizeLSTM", "iofg", None, "in_out",
               "double", peephole_order="iof", notes="W [D,I,4H], R [D,H,4H] int8/uint8; B float [D,8H]"),
    Convention("quark", "AMD Quark ExtendedLSTM", "iofg", None, "out_in", "double",
               notes="always 2 directions; uint16 quantized, Wb and Rb quantized separately and summed"),
    Convention("torch", "PyTorch nn.LSTM / nn.GRU / nn.RNN", "ifgo", "rzn", "out_in", "double",
               notes="weight_ih_l{k}[_reverse], weight_hh, bias_ih, bias_hh; GRU is reset-after only"),
    Convention("keras", "Keras 2 / Keras 3 LSTM, GRU, SimpleRNN", "ifgo", "zrn", "in_out", "single",
               gru_bias="double",
               notes="kernel [I,GU], recurrent_kernel [U,GU]; GRU reset_after=True: bias [2,3U]"),
    Convention("tflite", "TFLite / LiteRT fused LSTM, custom GRU", "ifgo", "rzn", "out_in", "single",
               peephole_order="ifo",
               notes="one tensor per LSTM gate (slots 1-8, bias 12-15); GRU gate_weight rows r, u then "
                     "candidate_weight; reset-before GRU only"),
    Convention("onednn", "oneDNN RNN primitive", "ifgo", "zrn", "in_out", "single", gru_bias="four_block",
               peephole_order="ifo", notes="ldigo weights; lbr_gru bias [L,D,4,O] with u' last"),
    Convention("openvino", "OpenVINO LSTMSequence-5 / GRUSequence-5", "figo", "zrn", "out_in", "single",
               gru_bias="four_block", notes="B = Wb + Rb; GRU linear_before_reset=true: B [D,4H]"),
    Convention("cudnn", "NVIDIA cuDNN", "ifgo", "rzn", "out_in", "double",
               notes="linLayerID 0-3 input side, 4-7 recurrent side; GRU reset-after only"),
    Convention("mli1", "embARC MLI 1.x", "igfo", None, "out_in", "single",
               notes="one tensor [4, M, N+M]: input then recurrent weights per neuron"),
    Convention("mli2", "embARC MLI 2.0", "igfo", "zrn", "in_out", "single",
               notes="weights_in [G,N,M], weights_out [G,M,M], bias [G,M]; GRU reset-before"),
    Convention("zdnn", "IBM zDNN (FICO / ZRH)", "figo", "zrn", "in_out", "double",
               notes="per-gate tensors concatenated along C, each padded to 64 columns; GRU reset-after"),
    Convention("tf1_lstm_cell_simple", "TF1 LSTMCellSimple composite", "gifo", None, "in_out", "none",
               notes="one matrix [I+O, 4N]"),
)

CONVENTIONS: dict[str, Convention] = {c.name: c for c in _TABLE}
"""Every known convention by name."""


def get(name: str) -> Convention:
    """The :class:`Convention` called ``name`` (see ``CONVENTIONS``)."""
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise AttributeValueError(
            f"convention: unknown name {name!r}; expected one of {', '.join(CONVENTIONS)}"
        ) from None


def gate_order(cell: str, convention: str) -> str:
    """The block order of ``cell`` in ``convention`` as canonical gate letters (e.g. 'iofg')."""
    if cell not in CELLS:
        raise AttributeValueError(f"cell: expected one of {CELLS}, got {cell!r}")
    get(convention)  # validates the name, also for the one-block RNN
    if cell == "rnn":
        return "h"
    order = getattr(get(convention), cell)
    if order is None:
        raise AttributeValueError(f"convention: {convention!r} has no {cell.upper()} weights")
    return order


def permutation(cell: str, convention: str) -> tuple[int, ...]:
    """perm[k] = index of the canonical gate stored in block k of ``convention``."""
    canon = CANONICAL_GATES[cell] if cell in CANONICAL_GATES else gate_order(cell, convention)
    return tuple(canon.index(g) for g in gate_order(cell, convention))


def _reorder(a: np.ndarray, src: str, dst: str, axis: int, argument: str) -> np.ndarray:
    a = np.asarray(a)
    G = len(src)
    axis = axis % a.ndim if a.ndim else 0
    if a.ndim == 0 or a.shape[axis] % G:
        raise ShapeError(
            f"{argument}: expected axis {axis} to hold {G} equal gate blocks, got shape {a.shape}"
        )
    if src == dst:
        return a
    H = a.shape[axis] // G
    blocks = a.reshape(a.shape[:axis] + (G, H) + a.shape[axis + 1 :])
    out = np.take(blocks, [src.index(g) for g in dst], axis=axis)
    return out.reshape(a.shape)


def to_canonical(a: np.ndarray, cell: str, convention: str, axis: int = -1, *, argument: str = "a") -> np.ndarray:
    """Reorder the gate blocks of ``a`` along ``axis`` from ``convention``'s order to the canonical one."""
    return _reorder(a, gate_order(cell, convention), CANONICAL_GATES[cell], axis, argument)


def from_canonical(a: np.ndarray, cell: str, convention: str, axis: int = -1, *, argument: str = "a") -> np.ndarray:
    """Reorder the gate blocks of ``a`` along ``axis`` from the canonical order to ``convention``'s."""
    return _reorder(a, CANONICAL_GATES[cell], gate_order(cell, convention), axis, argument)


def convert(a: np.ndarray, cell: str, src: str, dst: str, axis: int = -1, *, argument: str = "a") -> np.ndarray:
    """Reorder gate blocks along ``axis`` from convention ``src`` to convention ``dst`` (no transposition)."""
    return _reorder(a, gate_order(cell, src), gate_order(cell, dst), axis, argument)


def weights_to_canonical(w: np.ndarray, cell: str, convention: str, *, argument: str = "W") -> np.ndarray:
    """A weight matrix (or a stack of them, [..., rows, cols]) in canonical form: out x in, canonical order.

    ``in_out`` conventions store [..., in, G*H]; ``out_in`` ones [..., G*H, in].
    """
    w = np.asarray(w)
    if w.ndim < 2:
        raise ShapeError(f"{argument}: expected a matrix [..., rows, cols], got shape {w.shape}")
    if get(convention).orientation == "in_out":
        w = np.swapaxes(w, -1, -2)
    return np.ascontiguousarray(to_canonical(w, cell, convention, axis=-2, argument=argument))


def weights_from_canonical(w: np.ndarray, cell: str, convention: str, *, argument: str = "W") -> np.ndarray:
    """Inverse of :func:`weights_to_canonical`."""
    w = from_canonical(np.asarray(w), cell, convention, axis=-2, argument=argument)
    if get(convention).orientation == "in_out":
        w = np.swapaxes(w, -1, -2)
    return np.ascontiguousarray(w)


def peephole_order(convention: str) -> str:
    """The peephole block order of ``convention`` as gate letters (ONNX 'iof', TFLite 'ifo')."""
    order = get(convention).peephole_order
    if order is None:
        raise AttributeValueError(f"convention: {convention!r} has no LSTM peepholes")
    return order


def peepholes_to_canonical(p: np.ndarray, convention: str, axis: int = -1, *, argument: str = "P") -> np.ndarray:
    """Reorder the three peephole blocks of ``p`` along ``axis`` from ``convention``'s order to fusedrnn's (i, f, o)."""
    return _reorder(p, peephole_order(convention), CANONICAL_PEEPHOLES, axis, argument)


def peepholes_from_canonical(p: np.ndarray, convention: str, axis: int = -1, *, argument: str = "P") -> np.ndarray:
    """Reorder the three peephole blocks of ``p`` along ``axis`` from fusedrnn's order (i, f, o) to ``convention``'s."""
    return _reorder(p, CANONICAL_PEEPHOLES, peephole_order(convention), axis, argument)


def single_bias(b_x: np.ndarray | None, b_h: np.ndarray | None, *, reset_after_gru: bool = False) -> np.ndarray:
    """Fold a double bias into a single one (b_x + b_h), canonical order, [..., G*H].

    A reset-after GRU's candidate recurrent bias sits inside r ⊙ (…) and cannot be folded: this raises
    unless that block is zero.
    """
    if b_x is None and b_h is None:
        raise ShapeError("b_x, b_h: expected at least one bias")
    if b_h is None:
        return np.array(b_x)
    if b_x is None:
        b_x = np.zeros_like(b_h)
    if reset_after_gru:
        H = b_h.shape[-1] // 3
        if np.any(b_h[..., 2 * H :] != 0):
            raise ConversionError(
                "b_h: a reset-after (linear_before_reset) GRU with a non-zero candidate recurrent bias has no "
                "single-bias form; keep the double bias"
            )
    return np.asarray(b_x) + np.asarray(b_h)


def onnx_inputs(cell: str, W: np.ndarray, R: np.ndarray, b_x: np.ndarray | None,
                b_h: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical W [D, G*H, I], R [D, G*H, H] and double bias (absent halves are zeros) as the ONNX operator's
    W, R (ONNX gate order) and B [D, 2*G*H] = [Wb | Rb]."""
    zeros = np.zeros_like(W[:, :, 0])
    halves = [from_canonical(zeros if b is None else b, cell, "onnx", axis=1) for b in (b_x, b_h)]
    return (from_canonical(W, cell, "onnx", axis=1), from_canonical(R, cell, "onnx", axis=1),
            np.concatenate(halves, axis=1))


def onnx_to_canonical(cell: str, W: np.ndarray, R: np.ndarray,
                      B: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """ONNX W, R, B (B [D, 2*G*H] or None) as canonical W, R, b_x, b_h (the inverse of :func:`onnx_inputs`)."""
    Wc, Rc = to_canonical(W, cell, "onnx", axis=1), to_canonical(R, cell, "onnx", axis=1)
    if B is None:
        return Wc, Rc, None, None
    GH = W.shape[1]
    return Wc, Rc, to_canonical(B[:, :GH], cell, "onnx", axis=1), to_canonical(B[:, GH:], cell, "onnx", axis=1)
