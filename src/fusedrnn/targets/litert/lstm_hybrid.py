"""Hybrid ("dynamic range") LSTM kernel (litert.md section 5): int8 per-tensor weights, float32 everything else.

Each step quantizes the input, the aux input, the previous output state and (for the projection) the hidden
vector per batch row — symmetric, or asymmetric with a zero-point correction through the cached weight row sums
when ``asymmetric_quantize_inputs`` — takes exact int32 dot products (float BLAS, :mod:`fusedrnn.numerics.int_matmul`)
and accumulates ``float32(dot) · float32(s_row · s_w)`` in float32 in the kernel's order (bias, input, aux,
recurrent, peephole). Peepholes are int8 dequantized on the fly; layer norm, activations, cell update and clipping
are the float kernel's. The input term of all time steps is computed before the recurrence.

Sparse weights (the LSTM op, CSR rows of 1 x 16 blocks) run LiteRT's sparse path: no zero-point correction (the
products ignore asymmetric inputs' zero points), and the recurrent term scaled by the input rows' factors
instead of the output state's (``CalculateLstmGateHybrid`` passes ``input_sf`` there).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedFeatureError
from ...numerics import core, eigen
from ...numerics.affine import tflite_quantize_rows_asymmetric, tflite_quantize_rows_symmetric
from ...numerics.int_matmul import IntMatrix
from .slots import (
    C_GATE,
    F_GATE,
    GATE,
    GATE_BIASES,
    GATES,
    I_GATE,
    INPUT_WEIGHTS,
    LAYER_NORM,
    O_GATE,
    PEEPHOLE_GATES,
    PEEPHOLES,
    RECURRENT_WEIGHTS,
    LstmOptions,
    LstmTensors,
    apply_fused_activation,
    dequantized,
    per_tensor,
)

_F32 = np.float32


def hybrid_codes(t) -> np.ndarray:
    """The int8 codes the hybrid kernels read from a weight tensor: INT8 data, or the bytes of UINT8 data read as
    int8 (``GetTensorData<int8_t>``: the kernels never look at the zero point, only at the scale)."""
    return np.ascontiguousarray(t.data).view(np.int8)


def hybrid_values(t) -> np.ndarray | None:
    """float32(code · scale) of a hybrid weight vector (peepholes, diagonal recurrence), codes as
    :func:`hybrid_codes`; float tensors as they are."""
    if t is None or t.data is None:
        return None
    if t.type_name in ("INT8", "UINT8"):
        return (hybrid_codes(t).astype(_F32) * _F32(per_tensor(t, t.name)[0])).astype(_F32)
    return np.asarray(t.data, _F32)


SPARSE_BLOCK = 16  # SparseMatrixBatchVectorMultiplyAccumulate's 1 x 16 blocks


def check_sparse_ledger(t, name: str) -> None:
    """A sparse hybrid weight the LSTM op can run: CSR rows of 1 x 16 column blocks whose per-row counts and
    block indices fit the kernel's uint8 ledger (``copy_ledger`` fails otherwise)."""
    sp = t.sparsity
    if len(t.shape) != 2 or not sp.is_block_csr(SPARSE_BLOCK) or t.shape[1] % SPARSE_BLOCK:
        raise UnsupportedFeatureError(f"{name}: the sparse hybrid LSTM reads CSR rows of 1 x {SPARSE_BLOCK} blocks "
                                      f"(traversal (0, 1, 2), block map (1,)); got traversal {sp.traversal_order}, "
                                      f"block map {sp.block_map} for shape {tuple(t.shape)}")
    seg = np.asarray(sp.dim_metadata[1].segments, np.int64)
    idx = np.asarray(sp.dim_metadata[1].indices, np.int64)
    if (np.diff(seg).max(initial=0) > 255) or (idx.max(initial=0) > 255):
        raise UnsupportedFeatureError(f"{name}: more than 255 blocks in a row or a block index above 255 do not fit "
                                      f"LiteRT's sparse ledger (the interpreter fails)")


class _QuantMatrix:
    """Per-gate int8 weight blocks [G*H, K] side by side as one exact GEMM operand, with per-column weight scales
    and row sums (the zero-point correction)."""

    def __init__(self, ts, name: str, *, sparse_ok: bool = False):
        blocks, scales, sums = [], [], []
        sparse = {t.sparsity is not None for t in ts}
        if len(sparse) > 1:
            raise UnsupportedFeatureError(f"{name}: some gates sparse and some dense is not implemented")
        self.sparse = sparse == {True}
        if self.sparse:
            if not sparse_ok:
                raise UnsupportedFeatureError(f"{name}: sparse weights: LiteRT's kernel for this op reads the "
                                              f"stored values as a dense matrix (past its buffer); only the LSTM op's "
                                              f"hybrid kernel runs sparse weights")
            for t in ts:
                check_sparse_ledger(t, name)
        for t in ts:
            if t.type_name not in ("INT8", "UINT8"):
                raise UnsupportedFeatureError(f"{name}: hybrid weights must be INT8 or UINT8, got {t.type_name}")
            s, _ = per_tensor(t, name)
            q = hybrid_codes(t)
            blocks.append(q.T)
            scales.append(np.full(q.shape[0], s, _F32))
            sums.append(q.astype(np.int64).sum(axis=1))
        self.M = IntMatrix(np.ascontiguousarray(np.concatenate(blocks, axis=1)), a_absmax=128)
        self.scale = np.concatenate(scales)
        self.row_sums = np.concatenate(sums)

    def term(self, q: np.ndarray, s: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
        """float32(Σ w·q − zp·rowsum) · float32(s_row · s_w) for q int8 [N, K]; returns float32 [N, cols]."""
        dot = self.M.matmul(q, check=False)
        if zp is not None:
            dot -= zp.astype(np.int64)[:, None] * self.row_sums
        scale = (s[:, None] * self.scale[None, :]).astype(_F32)
        return core.wrap(dot, 32).astype(_F32) * scale


class HybridLstmKernel:
    """A prepared hybrid LSTM direction: ``run(x float32 [T, B, I], (h, c))``."""

    kind = "hybrid"

    def __init__(self, t: LstmTensors, opts: LstmOptions, *, sparse_ok: bool = False):
        diag = opts.diagonal_recurrent_tensors
        t.validate(diag)
        self.opts, self.t = opts, t
        H, I, Hp = t.n_cell, t.n_input, t.n_output
        self.n_cell, self.n_input, self.n_output, self.n_aux = H, I, Hp, t.n_aux_input
        self.cifg, self.ln, self.diag = t.cifg, t.layer_norm, diag
        self.gates = [GATE[g] for g in GATES if not (self.cifg and g == "i")]  # CIFG: no input gate
        G = len(self.gates)
        self.G = G
        self.W = _QuantMatrix([t[INPUT_WEIGHTS[g]] for g in self.gates], "input weights", sparse_ok=sparse_ok)
        self.A = _QuantMatrix([t.aux[g] for g in self.gates], "aux weights") if self.n_aux else None
        if diag:
            self.Rdiag = np.concatenate([hybrid_values(t[RECURRENT_WEIGHTS[g]]) for g in self.gates]).astype(_F32)
            self.R = None
        else:
            self.R = _QuantMatrix([t[RECURRENT_WEIGHTS[g]] for g in self.gates], "recurrent weights",
                                  sparse_ok=sparse_ok)
        self.bias = np.concatenate([dequantized(t[GATE_BIASES[g]]) if t[GATE_BIASES[g]] is not None
                                    else np.zeros(H, _F32) for g in self.gates]).astype(_F32)
        self.P = {}
        for g, k in ((GATE[p], k) for p, k in zip(PEEPHOLE_GATES, PEEPHOLES, strict=True)):
            if g in self.gates and t[k] is not None:
                self.P[g] = hybrid_values(t[k])  # float32(w_q · s): VectorScalarMultiply
        self.L = {g: dequantized(t[LAYER_NORM[g]]) for g in self.gates} if self.ln else {}
        self.proj = None
        if t.projection:
            self.proj = _QuantMatrix([t["projection_weights"]], "projection_weights", sparse_ok=sparse_ok)
            self.proj_bias = dequantized(t["projection_bias"])
        self.act = opts.fused_activation_function
        self.asym = opts.asymmetric_quantize_inputs
        if self.asym and any(m is not None and m.sparse for m in (self.W, self.R, self.proj)):
            raise UnsupportedFeatureError("asymmetric_quantize_inputs: with sparse weights LiteRT computes the "
                                          "zero-point row sums of every weight as if it were dense, reading past the "
                                          "stored values (its outputs are undefined); not emulated")

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((B, self.n_output), _F32), np.zeros((B, self.n_cell), _F32)

    def _quantize(self, v: np.ndarray):
        if self.asym:
            return tflite_quantize_rows_asymmetric(v)
        q, s = tflite_quantize_rows_symmetric(v)
        return q, s, None

    def _ln(self, v: np.ndarray, g: int) -> np.ndarray:
        """PortableMeanStddevNormalization (float32, ε = 1e-8 inside the sqrt), · L, + bias. Its sums run left to
        right in float32 (``cumsum``; NumPy's ``sum`` adds pairwise and rounds differently)."""
        n = _F32(v.shape[-1])
        mean = (np.cumsum(v, axis=-1, dtype=_F32)[..., -1:] / n).astype(_F32)
        d = (v - mean).astype(_F32)
        var = (np.cumsum((d * d).astype(_F32), axis=-1, dtype=_F32)[..., -1:] / n).astype(_F32)
        inv = (_F32(1) / np.sqrt(var + _F32(1e-8))).astype(_F32)
        out = (d * inv).astype(_F32) * self.L[g]
        b = self.t[GATE_BIASES[g]]
        return out + dequantized(b) if b is not None else out

    def run(self, x: np.ndarray, state, *, reverse: bool = False, aux: np.ndarray | None = None):
        """x float32 [T, B, n_input]; returns (y float32 [T, B, n_output], (h, c))."""
        T, B, I = x.shape
        H, G = self.n_cell, self.G
        xf = np.ascontiguousarray(x, _F32).reshape(T * B, I)
        q, s, zp = self._quantize(xf)
        s_in = s.reshape(T, B)  # the input rows' scales (the sparse recurrent term reads them)
        base = np.zeros(G * H, _F32) if self.ln else self.bias
        acc_in = (base + self.W.term(q, s, None if self.W.sparse else zp)).reshape(T, B, G * H)
        if self.A is not None:
            af = np.ascontiguousarray(aux, _F32).reshape(T * B, -1)
            qa, sa, za = self._quantize(af)
            acc_in = acc_in + self.A.term(qa, sa, za).reshape(T, B, G * H)
        h = np.array(state[0], _F32)
        c = np.array(state[1], _F32)
        y = np.empty((T, B, self.n_output), _F32)
        gi = {g: j for j, g in enumerate(self.gates)}
        # where each gate's activation writes: LiteRT's scratch buffer holds the gates in the order (i,) c, f, o,
        # B x n_cell floats each; the batch-major kernel calls it once per batch row (Eigen's logistic depends on
        # the destination's alignment, see numerics.eigen)
        slot = {g: k for k, g in enumerate(([] if self.cifg else [I_GATE]) + [C_GATE, F_GATE, O_GATE])}
        at = {g: k * B * H for g, k in slot.items()}
        rows = not self.opts.time_major
        for step in (range(T - 1, -1, -1) if reverse else range(T)):
            acc = acc_in[step].copy()
            if self.diag:
                acc += np.tile(h, (1, G)) * self.Rdiag
            elif h.any():
                qh, sh, zh = self._quantize(h)
                if self.R.sparse:  # LiteRT's sparse path scales it by the input's factors and skips zero points
                    acc += self.R.term(qh, s_in[step], None)
                else:
                    acc += self.R.term(qh, sh, zh)
            acc = acc.reshape(B, G, H)
            gates = {}
            for g in self.gates:
                v = acc[:, gi[g]]
                if g == O_GATE:
                    continue
                if g in self.P:
                    v = v + self.P[g] * c
                if self.ln:
                    v = self._ln(v, g)
                gates[g] = (apply_fused_activation(v.astype(_F32), self.act, start=at[g], rows=rows) if g == C_GATE
                            else eigen.logistic(v, at[g], rows))
            f = gates[F_GATE]
            i = (_F32(1) - f) if self.cifg else gates[I_GATE]
            c = (f * c).astype(_F32)
            c = (c + (gates[C_GATE] * i).astype(_F32)).astype(_F32)
            if self.opts.cell_clip > 0:
                np.clip(c, -_F32(self.opts.cell_clip), _F32(self.opts.cell_clip), out=c)
            v = acc[:, gi[O_GATE]]
            if O_GATE in self.P:
                v = v + self.P[O_GATE] * c
            if self.ln:
                v = self._ln(v, O_GATE)
            o = eigen.logistic(v, at[O_GATE], rows)
            # the cell activation writes into the cell gate's scratch
            m = (apply_fused_activation(c.copy(), self.act, start=at[C_GATE], rows=rows) * o).astype(_F32)
            if self.proj is not None:
                h = np.zeros((B, self.n_output), _F32) if self.proj_bias is None else \
                    np.tile(self.proj_bias, (B, 1)).astype(_F32)
                if m.any():
                    qm, sm, zm = self._quantize(m)
                    h = (h + self.proj.term(qm, sm, None if self.proj.sparse else zm)).astype(_F32)
                if self.opts.proj_clip > 0:
                    np.clip(h, -_F32(self.opts.proj_clip), _F32(self.opts.proj_clip), out=h)
            else:
                h = m
            y[step] = h
        return y, (h, c)
