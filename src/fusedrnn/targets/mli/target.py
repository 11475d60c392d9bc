"""Registry targets ``mli2-fx16``, ``mli2-fx16_fx8_fx8`` and ``mli2-sa8``: a float LSTM / GRU / RNN layer runs on
the MLI 2.0 kernels, bit-exact with what an MLI user's program computes on the x86 reference build.

``prepare`` chooses the quantization an MLI user would (from calibration inputs):

* sa8: inputs per-tensor asymmetric int8 over the calibration range (widened to contain 0); weights symmetric,
  one scale per gate (per-axis, dim 0) with max|W_g| -> 127; bias sa32 at scale s_in·s_w[g] (what the kernels
  assume); output h at 1/128 (|h| < 1), cell symmetric over the calibration range of the float cell plus 25%
  headroom. Scales are int16 mantissas normalised to 15 bits (``mli_scale_from_float``), values quantized as the
  MLI test harness does (``mli_quantize``).
* fx16 / fx16_fx8_fx8: per-tensor frac bits with the most precision that holds the calibration (or weight)
  maximum; bias frac <= in + weights frac; h frac 15; the IR formats are the kernels' own.

Weights go to MLI's layout (gate order LSTM (i, g, f, o), GRU (z, r, n); [G, in, out]); b_x + b_h form the one
MLI bias. GRU must be ``linear_before_reset=False`` (MLI applies the reset gate before the recurrent matmul);
the RNN is ``rnn_dense`` + ``tanh``. Peepholes, projection, layer norm, CIFG, clipping and custom activations
are not expressible (``layer.to`` raises UnsupportedFeatureError). ``sequence_lens`` freezes each row's state
after its length (outputs there are 0); direction "reverse" runs MLI's RNN_DIR_BACKWARD over each row's valid
prefix. Rounding ``ROUND_MODE`` / ``FULL_ACCU`` follow :func:`fusedrnn.mli.build` at call time.
"""

from __future__ import annotations

import numpy as np

from ... import conventions
from ...cells.calibration import SDK, Calibration, choose_range, histogram_of, settings_of
from ...cells.observers import chosen_range, observer_for
from ...cells.recurrence import reverse_valid_prefix
from ...cells.spec import CellSpec, direction_spec, run_spec
from ...errors import UnsupportedFeatureError
from ...numerics.affine import mli_quantize, mli_scale_from_float
from ..batch_split import RowSplitter, macs_per_row_step
from ..registry import Prepared, Target
from . import _compiled
from .cells import CellQuant, RealOut, gru_sequence, lstm_sequence, rnn_sequence
from .config import current_build
from .luts import make_lut
from .mli1 import FLAVORS as FLAVORS_V1
from .mli1 import lstm1x_sequence, rnn1x_sequence

FEATURES = frozenset({"lstm", "gru", "rnn", "bidirectional", "sequence_lens"})
SA8_H = (16384, 0, 21)  # 2^-7: |h| < 1 in int8
SA8_TANH = (1, 0, 7)
HEADROOM = 1.25


def _calibration_rows(xs: list[np.ndarray]) -> np.ndarray:
    """Every calibration input vector, [N, I] (the input range to quantize)."""
    return np.concatenate([x.reshape(-1, x.shape[-1]) for x in xs])


def _calibration_sequences(xs: list[np.ndarray]) -> np.ndarray:
    """The first calibration array's first 256 sequences, [T, B, I] (for the float cell range)."""
    return xs[0][:, :256]


def _mli_gates(a: np.ndarray, cell: str, convention: str = "mli2") -> np.ndarray:
    """Canonical gate blocks a [G*H, ...] as float64 [G, H, ...] in MLI's gate order (LSTM i, g, f, o)."""
    perm = list(conventions.permutation(cell, convention))
    a = np.asarray(a, np.float64)
    return a.reshape((len(perm), -1) + a.shape[1:])[perm]


def _fx_frac(amax: float, bits: int, cap: int = 15) -> int:
    """Most fraction bits such that amax fits a signed ``bits`` container."""
    if amax <= 0:
        return cap
    f = bits - 1 - int(np.ceil(np.log2((amax * (1 + 2**-12)) / (2 ** (bits - 1) - 1) * 2 ** (bits - 1))))
    while amax * 2.0**f > 2 ** (bits - 1) - 1:
        f -= 1
    return int(min(f, cap))


def _sa_scale(s: np.ndarray):
    m, f = mli_scale_from_float(np.maximum(np.asarray(s, np.float64), 1e-30))
    return np.atleast_1d(m).astype(np.int64), np.atleast_1d(f).astype(np.int64)


def _real(m, f):
    return np.ldexp(np.asarray(m, np.float64), -np.asarray(f, np.int64))


def _float_cell_max(spec: CellSpec, d: int, x: np.ndarray, settings: Calibration = SDK,
                    bits: int = 16) -> float:
    """The |c_t| bound of the float LSTM's direction d over the calibration x [T, B, I] from zero states that the
    cell is quantized for: max |c_t| (the float engine in float64, observed at its ``cell`` point), or the bound
    ``settings``' calibration method chooses."""
    one = direction_spec(spec, d)
    observer = observer_for(settings, ("cell",))
    zeros = np.zeros((1, x.shape[1], spec.hidden_size))
    run_spec(one, np.ascontiguousarray(x, np.float64), (zeros, zeros), observer=observer)
    return chosen_range(settings, observer, "cell", bits=bits, symmetric=True)[1]


class _Direction:
    """Quantized weights and parameters of one direction."""

    def __init__(self, spec: CellSpec, d: int, flavor: str, x_rows: np.ndarray, x_seq: np.ndarray,
                 settings: Calibration = SDK):
        cell, G = spec.cell, spec.gate_count
        Wi = _mli_gates(spec.W[d], cell).transpose(0, 2, 1)  # [G, I, H]
        Wo = _mli_gates(spec.R[d], cell).transpose(0, 2, 1)  # [G, H, H]
        b = _mli_gates(spec.bias_sum(d), cell)  # [G, H]
        self.flavor = flavor
        self.cache: dict = {}  # prepared GEMM operands, reused by every call
        sdk = settings.method == "sdk"
        bits = 8 if flavor == "sa8" else 16
        cmax = _float_cell_max(spec, d, x_seq, settings, bits) * (HEADROOM if sdk else 1.0) if cell == "lstm" else 0.0
        self.ranges = {"cell": (-cmax, cmax)} if cell == "lstm" else {}  # what each tensor is quantized over
        x_hist = None if settings.method in ("sdk", "minmax") else histogram_of(x_rows, settings.bins)
        if flavor == "sa8":
            lo, hi = min(float(x_rows.min()), 0.0), max(float(x_rows.max()), 0.0)
            if x_hist is not None:
                lo, hi = choose_range(settings, x_hist, bits=8, symmetric=False)
            self.ranges["input"] = (lo, hi)
            if hi - lo <= 0:
                hi = lo + 1.0
            m_in, f_in = _sa_scale((hi - lo) / 255.0)
            s_in = float(_real(m_in, f_in)[0])
            zp = int(np.clip(np.round(-128 - lo / s_in), -128, 127))
            self.p_in = (int(m_in[0]), zp, int(f_in[0]))

            def wq(W):
                amax = np.abs(W).reshape(G, -1).max(axis=1)
                m, f = _sa_scale(np.where(amax > 0, amax / 127.0, 1.0))
                q = mli_quantize(W.astype(np.float32), bits=8, frac_bits=f, scale=m, axis=0).astype(np.int64)
                return q, (m, f)

            self.Wi, qwi = wq(Wi)
            self.Wo, qwo = wq(Wo)
            sb = s_in * _real(*qwi)  # the accumulator scale of input 0, per gate
            self.b = np.clip(np.round(b / sb[:, None]), -(2**31), 2**31 - 1).astype(np.int64)
            self.p_out = SA8_TANH if cell == "rnn" else SA8_H
            self.p_cell = None
            if cell == "lstm":
                m_c, f_c = _sa_scale(max(cmax, 2**-7) / 127.0)
                self.p_cell = (int(m_c[0]), 0, int(f_c[0]))
            self.q = CellQuant("sa8", self.p_in, self.p_out, self.p_out, qwi, qwo, cell=self.p_cell)
        else:
            wbits = 16 if flavor == "fx16" else 8
            x_amax = float(np.abs(x_rows).max())
            if x_hist is not None:
                x_amax = choose_range(settings, x_hist, bits=16, symmetric=True)[1]
            self.ranges["input"] = (-x_amax, x_amax)
            f_in = _fx_frac(x_amax, 16)
            f_wi = _fx_frac(float(np.abs(Wi).max()), wbits)
            f_wo = _fx_frac(float(np.abs(Wo).max()), wbits)
            f_b = min(_fx_frac(float(np.abs(b).max()), wbits), f_in + f_wi)
            f_c = _fx_frac(max(cmax, 2**-15), 16) if cell == "lstm" else None

            def fq(a, f, bits):
                return mli_quantize(a.astype(np.float32), bits=bits, frac_bits=f).astype(np.int64)

            self.Wi, self.Wo, self.b = fq(Wi, f_wi, wbits), fq(Wo, f_wo, wbits), fq(b, f_b, wbits)
            self.f_in, self.f_cell = f_in, f_c
            self.q = CellQuant(flavor, f_in, 15, 15, f_wi, f_wo, f_b, f_c)

    # ---- float <-> integer -----------------------------------------------------------------------------
    def quantize(self, a, p, bits=None):
        lib = _compiled.load() if _compiled.default_engine() != "numpy" else None
        if lib is not None:  # the same quantizer in C (tests/test_mli_compiled.py)
            if self.flavor == "sa8":
                return _compiled.quantize(lib, a, bits=8, frac_bits=p[2], scale=p[0], zero_point=p[1])
            return _compiled.quantize(lib, a, bits=16, frac_bits=p)
        if self.flavor == "sa8":
            s, z, f = p
            return mli_quantize(np.asarray(a, np.float32), bits=8, frac_bits=f, scale=s, zero_point=z).astype(
                np.int64)
        return mli_quantize(np.asarray(a, np.float32), bits=16, frac_bits=p).astype(np.int64)

    def real_out(self, y: np.ndarray, p) -> RealOut:
        """The compiled loops' direct form of ``dequantize(..., p, out=y)`` (the same bits)."""
        if self.flavor == "sa8":
            s, z, f = p
            return RealOut(y, int(z), float(_real(s, f)))
        return RealOut(y, 0, float(np.ldexp(1.0, -int(p))))

    def dequantize(self, q, p, out=None):
        """Real values of the integers ``q`` (float64), or written into ``out`` (float32: each value computed in
        float64 and rounded once, the bits of casting the float64 result)."""
        if self.flavor == "sa8":
            s, z, f = p
            return np.multiply(np.subtract(q, z, dtype=np.float64), _real(s, f), out=out, casting="unsafe")
        return np.ldexp(q.astype(np.float64), -p, out=out, casting="unsafe")


class MliPrepared(Prepared):
    """A cell on the MLI 2.0 kernels: ``directions`` holds each direction's quantized tensors and parameters
    (:class:`_Direction`), ``luts`` the tanh / sigm tables. LSTMs count saturation (``probe``)."""

    def __init__(self, spec: CellSpec, flavor: str, xs: list[np.ndarray]):
        super().__init__(spec)
        if spec.cell == "gru" and spec.linear_before_reset:
            raise UnsupportedFeatureError("layer: MLI's GRU applies the reset gate before the recurrent matmul; "
                                          "linear_before_reset=True cannot be expressed")
        rows, seq = _calibration_rows(xs), _calibration_sequences(xs)
        self.settings = settings_of(xs)
        self.counts_saturation = spec.cell == "lstm"
        self.directions = [_Direction(spec, d, flavor, rows, seq, self.settings) for d in range(spec.num_directions)]
        self.ranges = [q.ranges for q in self.directions]
        self.luts = {"tanh": make_lut("tanh"), "sigm": make_lut("sigm")}
        self.splitter = RowSplitter(macs_per_row_step(spec))

    def run(self, x, states, lens):
        cell, H, dirs, luts = self.spec.cell, self.spec.hidden_size, self.directions, self.luts
        bld = current_build()
        T, B, _ = x.shape
        Y = np.empty((T, len(dirs), B, H), x.dtype)  # every direction writes all of its part
        hs, cs = [], []
        valid = None if lens is None else np.arange(T)[:, None] < lens[None, :]
        for d, q in enumerate(dirs):
            rev = self.spec.reverse[d]
            xq = q.quantize(x, q.q.inp)
            h0 = q.quantize(states[0][d], q.q.h0)
            kw = dict(luts=luts, full_accu=bld.full_accu, mode=bld.mode, cache=q.cache)
            if cell != "rnn" and valid is None and self.trace is None:
                kw["out"] = q.real_out(Y[:, d], q.q.out)  # the compiled loops write Y's real values there
            traced = {"x": xq, "h0": h0}
            if valid is not None and rev:
                xq = reverse_valid_prefix(xq, lens)
            core_rev = rev and valid is None
            if cell == "lstm":
                c0 = traced["c0"] = q.quantize(states[1][d], q.q.cell)
                probe = None if self.probe is None else self.probe.probe(d)
                Yq, h, c = lstm_sequence(xq, h0, c0, q.Wi, q.Wo, q.b, q.q, act="tanh", reverse=core_rev,
                                         valid=valid, probe=probe, **kw)
                cs.append(q.dequantize(c, q.q.cell))
                traced["c"] = c
            elif cell == "gru":
                Yq, h = gru_sequence(xq, h0, q.Wi, q.Wo, q.b, q.q, reverse=core_rev, valid=valid, **kw)
            else:
                Yq, h = rnn_sequence(xq, h0, q.Wi, q.Wo, q.b, q.q, reverse=core_rev, valid=valid, **kw)
            if Yq is not None:  # else the compiled loop wrote Y[:, d] itself
                if rev:  # processing order -> time order
                    Yq = Yq[::-1] if valid is None else reverse_valid_prefix(Yq, lens)
                if valid is None:
                    q.dequantize(Yq, q.q.out, out=Y[:, d])
                else:
                    Y[:, d] = np.where(valid[..., None], q.dequantize(Yq, q.q.out), 0.0)
            hs.append(q.dequantize(h, q.q.out))
            if self.trace is not None:
                io = np.int8 if q.flavor == "sa8" else np.int16
                self.trace[d] = {k: np.asarray(v).astype(io) for k, v in {**traced, "y": Yq, "h": h}.items()}
        h = np.stack(hs).astype(x.dtype)
        if cell == "lstm":
            return Y, (h, np.stack(cs).astype(x.dtype))
        return Y, (h,)


    def quantization(self, d: int) -> dict[str, np.ndarray]:
        """Direction d's integer weights (MLI layout: ``weights_in`` [G, I, H], ``weights_out`` [G, H, H], ``bias``
        [G, H], gates in MLI's order) and every quantization parameter, as arrays: sa8 tensors as
        ``<t>_scale`` / ``<t>_zero_point`` / ``<t>_scale_frac_bits`` (weights per gate), fx tensors as
        ``<t>_frac_bits``; t in (in, out, cell, weights_in, weights_out, bias)."""
        q = self.directions[d]
        wt = np.int8 if q.flavor in ("sa8", "fx16_fx8_fx8") else np.int16
        bt = np.int32 if q.flavor == "sa8" else wt
        out = {"weights_in": q.Wi.astype(wt), "weights_out": q.Wo.astype(wt), "bias": q.b.astype(bt)}
        if q.flavor == "sa8":
            for name, p in (("in", q.q.inp), ("out", q.q.out), ("cell", q.q.cell)):
                if p is not None:
                    out[f"{name}_scale"], out[f"{name}_zero_point"], out[f"{name}_scale_frac_bits"] = (
                        np.array(v, np.int32) for v in p)
            for name, (m, f) in (("weights_in", q.q.wi), ("weights_out", q.q.wo)):
                out[f"{name}_scale"] = np.asarray(m, np.int32).reshape(-1)
                out[f"{name}_scale_frac_bits"] = np.asarray(f, np.int32).reshape(-1)
        else:
            for name, f in (("in", q.q.inp), ("out", q.q.out), ("cell", q.q.cell), ("weights_in", q.q.wi),
                            ("weights_out", q.q.wo), ("bias", q.q.bias_frac)):
                if f is not None:
                    out[f"{name}_frac_bits"] = np.array(f, np.int32)
        return out


    def qparams(self, d: int) -> dict:
        """Direction d's quantization parameters (no weights), as plain numbers and lists (for reports)."""
        return {k: v.tolist() for k, v in self.quantization(d).items() if not k.startswith(("weights_in",
                "weights_out", "bias")) or k.endswith(("scale", "frac_bits"))}


def _prepare(flavor: str):
    def prepare(spec: CellSpec, calibration) -> MliPrepared:
        return MliPrepared(spec, flavor, calibration)

    return prepare


TARGETS = [
    Target("mli2-sa8", "embARC MLI 2.0 sa8_sa8_sa32 kernels (int8 asymmetric data, per-gate int8 weights, int32 "
           "bias), bit-exact with the x86 reference build", family="mli", dtype=np.dtype(np.float32),
           features=FEATURES, bit_exact=True, prepare=_prepare("sa8"), needs_calibration=True),
    Target("mli2-fx16", "embARC MLI 2.0 fx16 kernels (Q-format int16 data and weights, 40-bit accumulator)",
           family="mli", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True, prepare=_prepare("fx16"),
           needs_calibration=True),
    Target("mli2-fx16_fx8_fx8", "embARC MLI 2.0 fx16_fx8_fx8 kernels (int16 data, int8 weights and bias, int32 "
           "accumulator)", family="mli", dtype=np.dtype(np.float32), features=FEATURES, bit_exact=True,
           prepare=_prepare("fx16_fx8_fx8"), needs_calibration=True),
]


# ---- MLI 1.x -------------------------------------------------------------------------------------------------
FEATURES_V1 = frozenset({"lstm", "rnn", "bidirectional", "sequence_lens"})


class _DirectionV1:
    """MLI 1.x quantization of one direction: per-tensor frac bits (unsigned in 1.x), one weights tensor
    [4, M, N+M] (LSTM) / [M, N+M] (RNN) with one frac, out/prev_out frac fixed at 15 (7 for fx8) by the kernel."""

    def __init__(self, spec: CellSpec, d: int, flavor: str, x_rows: np.ndarray, x_seq: np.ndarray):
        cell = spec.cell
        W = _mli_gates(spec.W[d], cell, "mli1")  # [G, M, N]
        R = _mli_gates(spec.R[d], cell, "mli1")
        b = _mli_gates(spec.bias_sum(d), cell, "mli1")
        _, _, bits = FLAVORS_V1[flavor]
        wbits = 8 if flavor in ("fx8", "fx8w16d") else 16
        self.flavor, self.bits = flavor, bits
        self.f_in = max(_fx_frac(float(np.abs(x_rows).max()), bits), 0)
        self.f_w = max(_fx_frac(max(float(np.abs(W).max()), float(np.abs(R).max())), wbits), 0)
        self.f_b = max(min(_fx_frac(float(np.abs(b).max()), wbits), self.f_in + self.f_w), 0)
        self.f_out = bits - 1
        self.f_cell = None
        if cell == "lstm":
            cmax = _float_cell_max(spec, d, x_seq) * HEADROOM
            self.f_cell = max(_fx_frac(max(cmax, 2.0 ** -(bits - 1)), bits), 0)

        def fq(a, f, nb):
            return mli_quantize(a.astype(np.float32), bits=nb, frac_bits=f).astype(np.int64)

        self.Wx, self.Wh, self.b = fq(W, self.f_w, wbits), fq(R, self.f_w, wbits), fq(b, self.f_b, wbits)
        if cell == "rnn":
            self.Wx, self.Wh, self.b = self.Wx[0], self.Wh[0], self.b[0]

    def quantize(self, a, f):
        return mli_quantize(np.asarray(a, np.float32), bits=self.bits, frac_bits=f).astype(np.int64)

    def dequantize(self, q, f):
        return np.ldexp(q.astype(np.float64), -f)


class MliV1Prepared(Prepared):
    """A cell on the MLI 1.x kernels: ``directions`` holds each direction's :class:`_DirectionV1`."""

    def __init__(self, spec: CellSpec, flavor: str, xs: list[np.ndarray]):
        super().__init__(spec)
        rows, seq = _calibration_rows(xs), _calibration_sequences(xs)
        self.directions = [_DirectionV1(spec, d, flavor, rows, seq) for d in range(spec.num_directions)]
        self.splitter = RowSplitter(macs_per_row_step(spec))

    def run(self, x, states, lens):
        H, dirs, cell = self.spec.hidden_size, self.directions, self.spec.cell
        T, B, _ = x.shape
        Y = np.zeros((T, len(dirs), B, H), x.dtype)
        valid = np.ones((T, B), bool) if lens is None else np.arange(T)[:, None] < lens[None, :]
        hs, cs = [], []
        for d, q in enumerate(dirs):
            rev = self.spec.reverse[d]  # 1.x has no backward mode: feed the reversed sequence
            xq = q.quantize(x, q.f_in)
            if rev:
                xq = reverse_valid_prefix(xq, lens)
            h0 = q.quantize(states[0][d], q.f_out)
            kw = dict(f_in=q.f_in, f_prev=q.f_out, f_w=q.f_w, f_b=q.f_b, f_out=q.f_out, act="tanh",
                      flavor=q.flavor, valid=None if lens is None else valid)
            if cell == "lstm":
                c0 = q.quantize(states[1][d], q.f_cell)
                Yq, h, c = lstm1x_sequence(xq, h0, c0, q.Wx, q.Wh, q.b, f_cell=q.f_cell, **kw)
                cs.append(q.dequantize(c, q.f_cell))
            else:
                Yq, h = rnn1x_sequence(xq, h0, q.Wx, q.Wh, q.b, **kw)
            if rev:
                Yq = reverse_valid_prefix(Yq, lens)
            Y[:, d] = np.where(valid[..., None], q.dequantize(Yq, q.f_out), 0.0)
            hs.append(q.dequantize(h, q.f_out))
        h = np.stack(hs).astype(x.dtype)
        return (Y, (h, np.stack(cs).astype(x.dtype))) if cell == "lstm" else (Y, (h,))


def _prepare_v1(flavor: str):
    def prepare(spec: CellSpec, calibration) -> MliV1Prepared:
        return MliV1Prepared(spec, flavor, calibration)

    return prepare


TARGETS += [
    Target(f"mli1-{fl}", f"embARC MLI 1.x {fl} kernels (FXAPI arithmetic, convergent rounding; inferred, see "
           "fusedrnn.targets.mli.mli1)", family="mli", dtype=np.dtype(np.float32), features=FEATURES_V1,
           bit_exact=False, prepare=_prepare_v1(fl), needs_calibration=True)
    for fl in ("fx16", "fx8", "fx8w16d")
]
