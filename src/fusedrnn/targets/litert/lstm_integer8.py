"""Full-integer "8x8_8" LSTM kernel of the LSTM op (LiteRT's ``EvalInteger8x8_8``, selected by 12 intermediate
tensors), bit-exact with the interpreter's portable arithmetic.

Each gate is two int8 matrix products requantized to int8 at their intermediates' scales and zero points
(``MatrixBatchVectorMultiply``), added in int16 (``TwoGateSaturatingAdd``), layer-normalised in float32
(``ApplyLayerNormFloat``: sequential float32 sums, the int32 bias at ``2^-10`` of the coefficients' scale,
rounded to Q3.12) and activated in float32 (sigmoid, tanh: the product with 2^15 truncated). The kernel is what
LiteRT runs, quirks included:

* only the forget, cell and output gates are computed; the cell update is always the CIFG one
  (``i = 1 - f``), with or without input-gate tensors;
* the cell state scale must be 2^-15; tanh of the cell reads it with 2^-15;
* the output gate's recurrent term takes its multiplier from ``intermediate_scale_a[11]``, past the end of the
  eight-entry array: the ``intermediate_scale_b[3]`` that follows it in memory;
* the hidden state o·tanh(c) (Q0.15) goes through the projection with its int32 bias, requantized to the output
  state's scale and zero point; projection and its bias and layer norm are required (the kernel dereferences them).
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeValueError, UnsupportedFeatureError
from ...numerics import core, gemmlowp
from ...numerics.core import Requant
from ...numerics.int_matmul import IntMatrix
from .slots import (
    GATE,
    GATE_BIASES,
    INPUT_WEIGHTS,
    LAYER_NORM,
    RECURRENT_WEIGHTS,
    LstmOptions,
    LstmTensors,
    per_tensor,
)

_F32 = np.float32
N_INTERMEDIATES_8x8_8 = 12
# per gate: (input-term intermediate, recurrent-term intermediate, their sum's intermediate) of the 12
_INTER = {"i": (1, 2, 0), "f": (4, 5, 3), "g": (7, 8, 6), "o": (10, 11, 9)}


def _qm(m, rounding: str) -> tuple[int, int]:
    q, s = gemmlowp.quantize_multiplier(float(m), rounding=rounding)
    return int(q), int(s)


def initial_output_state(t: LstmTensors, zp: int, n: int, B: int) -> np.ndarray:
    """The int8 output-state codes after ``ResetVariableTensors``: the zero point for an INT8 state tensor, zero
    bytes otherwise (an INT16 state tensor is read by the kernels as int8 codes)."""
    st = t["output_state"]
    v = zp if st is None or st.type_name == "INT8" else 0
    return np.full((B, n), v, np.int8)


class Integer8x8_8LstmKernel:  # noqa: N801 - LiteRT's name for the kernel
    """A prepared 8x8_8 LSTM op: ``run(x int8 [T, B, I], (h int8 [B, n_output], c int16 [B, n_cell]))``."""

    kind = "integer"
    variant = "8x8_8"

    def __init__(self, t: LstmTensors, opts: LstmOptions, *, rounding: str = "double", output=None):
        t.validate()
        if t.n_aux_input or opts.diagonal_recurrent_tensors:
            raise UnsupportedFeatureError("the 8x8_8 LSTM kernel takes no aux input and no diagonal recurrence")
        inter = list(t.intermediates)
        if len(inter) != N_INTERMEDIATES_8x8_8 or any(v is None or not v.quantized for v in inter):
            raise AttributeValueError(f"intermediates: the 8x8_8 kernel needs {N_INTERMEDIATES_8x8_8} quantized "
                                      f"intermediate tensors, got {len(inter)}")
        if not t.layer_norm or not t.projection or t["projection_bias"] is None:
            raise UnsupportedFeatureError("the 8x8_8 LSTM kernel needs layer norm, projection weights and a "
                                          "projection bias (LiteRT dereferences them unconditionally)")
        for k in INPUT_WEIGHTS + RECURRENT_WEIGHTS + (16,):
            if t[k] is not None and t[k].type_name != "INT8":
                raise UnsupportedFeatureError(f"slot {k}: the 8x8_8 kernel needs INT8 weights, got {t[k].type_name}")
        self.rounding, self.opts, self.t = rounding, opts, t
        H, I, Hp = t.n_cell, t.n_input, t.n_output
        self.n_cell, self.n_input, self.n_output, self.n_aux = H, I, Hp, 0
        s_x, self.zp_x = per_tensor(t["input"], "input")
        s_h, self.zp_h = per_tensor(t["output_state"], "output_state")
        s_c, _ = per_tensor(t["cell_state"], "cell_state")
        if _F32(s_c) != _F32(2.0**-15):
            raise AttributeValueError(f"cell_state: the 8x8_8 kernel needs the scale 2^-15 (1/32768), got {s_c!r}")
        iscale = [_F32(per_tensor(v, f"intermediates[{k}]")[0]) for k, v in enumerate(inter)]
        izp = [int(per_tensor(v, f"intermediates[{k}]")[1]) for k, v in enumerate(inter)]
        # intermediate_scale_a/b[0..7]: the sum's scale over each term's scale, gates i, f, g, o in turn
        sa, sb = [], []
        for g in "ifgo":
            a_in, a_rec, a_sum = _INTER[g]
            for k in (a_in, a_rec):
                q, s = _qm(_F32(iscale[k] / iscale[a_sum]), rounding)
                sa.append(q)
                sb.append(s)
        scale_ab = sa + sb  # the two arrays as laid out in memory: a[8 + j] is b[j]
        self.gates = {}
        for g in "fgo":
            a_in, a_rec, _ = _INTER[g]
            W, R = t[INPUT_WEIGHTS[GATE[g]]], t[RECURRENT_WEIGHTS[GATE[g]]]
            sw, _ = per_tensor(W, f"input weights {g}")
            sr, _ = per_tensor(R, f"recurrent weights {g}")
            eff_in = Requant(*_qm(_F32(_F32(sw) * _F32(s_x)) / iscale[a_in], rounding), rounding)
            eff_rec = Requant(*_qm(_F32(_F32(sr) * _F32(s_h)) / iscale[a_rec], rounding), rounding)
            j = "ifgo".index(g)
            add_in = Requant(scale_ab[2 * j], scale_ab[8 + 2 * j], rounding)
            zp_in = int(np.int8(izp[a_in]))
            if g == "o":  # LstmStepInteger8x8_8 passes a[11], b[7] and zp[7] for the output gate's recurrent term
                add_rec = Requant(scale_ab[11], scale_ab[8 + 7], rounding)
                zp_rec = int(np.int8(izp[7]))
            else:
                add_rec = Requant(scale_ab[2 * j + 1], scale_ab[8 + 2 * j + 1], rounding)
                zp_rec = int(np.int8(izp[a_rec]))
            L = t[LAYER_NORM[GATE[g]]]
            sl, _ = per_tensor(L, f"layer_norm_coefficients {g}")
            qa, qb = _qm(_F32(sl), rounding)
            ln_scale = _F32(qa * np.float64(2.0) ** (qb - 31))
            b = t[GATE_BIASES[GATE[g]]]
            bias = np.zeros(H, np.int32) if b is None else np.asarray(b.data, np.int32)
            self.gates[g] = dict(
                W=IntMatrix(np.ascontiguousarray(W.data.T), a_absmax=256),
                R=IntMatrix(np.ascontiguousarray(R.data.T), a_absmax=256),
                eff_in=eff_in, eff_rec=eff_rec, add_in=add_in, add_rec=add_rec, zp_in=zp_in, zp_rec=zp_rec,
                L=np.asarray(L.data, _F32), ln_scale=ln_scale,
                bias=(bias.astype(_F32) * _F32(_F32(2.0**-10) * ln_scale)).astype(_F32))
        Wp = t["projection_weights"]
        sp, _ = per_tensor(Wp, "projection_weights")
        self.proj_req = Requant(*_qm(_F32(np.float64(_F32(sp)) * 2.0**-15 / np.float64(_F32(s_h))), rounding),
                                rounding)
        self.Wp = IntMatrix(np.ascontiguousarray(Wp.data.T), a_absmax=32768)
        self.proj_bias = np.asarray(t["projection_bias"].data, np.int64)
        self.qcell_clip = 0
        if 0.0 < opts.cell_clip < 1.0:
            self.qcell_clip = int(np.clip(_F32(opts.cell_clip) / _F32(s_c), -32768.0, 32767.0))
        self.qproj_clip = 0
        if opts.proj_clip > 0.0:
            if output is None or not output.quantized:
                raise AttributeValueError("output: proj_clip in the 8x8_8 kernel is quantized with the output "
                                          "tensor's scale; the op's output has none")
            self.qproj_clip = int(np.clip(_F32(opts.proj_clip) / _F32(output.scale[0]), -128.0, 127.0))

    def initial_state(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        return initial_output_state(self.t, self.zp_h, self.n_output, B), np.zeros((B, self.n_cell), np.int16)

    # ---- LiteRT's portable tensor_utils, vectorised over the batch --------------------------------------------
    @staticmethod
    def _matmul_requant(a: np.ndarray, zp: int, M: IntMatrix, req: Requant, out_zp: int) -> np.ndarray:
        """MatrixBatchVectorMultiply (int8 -> int8): clamp(MBQM(Σ (a - zp)·w) + out_zp, -128, 127)."""
        acc = M.matmul(a.astype(np.int64) - zp, check=False)
        return core.sat(req(core.wrap(acc, 32)) + out_zp, 8)

    @staticmethod
    def _layer_norm(v: np.ndarray, L: np.ndarray, ln_scale, bias: np.ndarray) -> np.ndarray:
        """ApplyLayerNormFloat over int16-valued v [B, n]: float32 sums in index order, Q3.12 output."""
        vf = v.astype(_F32)
        n = v.shape[1]
        s = np.zeros(v.shape[0], _F32)
        ssq = np.zeros(v.shape[0], _F32)
        for i in range(n):
            s = (s + vf[:, i]).astype(_F32)
            ssq = (ssq + (vf[:, i] * vf[:, i]).astype(_F32)).astype(_F32)
        mean = (s / _F32(n)).astype(_F32)
        var = ((ssq / _F32(n)).astype(_F32) - (mean * mean).astype(_F32)).astype(_F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(var == 0, _F32(1) / np.sqrt(_F32(1e-8)), _F32(1) / np.sqrt(var)).astype(_F32)
        norm = ((vf - mean[:, None]).astype(_F32) * inv[:, None]).astype(_F32)
        w = ((norm * L).astype(_F32) * ln_scale).astype(_F32)
        w = (w + bias).astype(_F32)
        return core.sat(_round_away((w * _F32(4096)).astype(_F32)), 16)

    @staticmethod
    def _sigmoid(v: np.ndarray) -> np.ndarray:
        x = (v.astype(_F32) * _F32(2.0**-12)).astype(_F32)
        e = np.exp(-x.astype(np.float64)).astype(_F32)
        y = (_F32(1) / (_F32(1) + e).astype(_F32)).astype(_F32)
        return core.sat(np.trunc((y * _F32(32768)).astype(_F32)).astype(np.int64), 16)

    @staticmethod
    def _tanh(v: np.ndarray, integer_bits: int) -> np.ndarray:
        x = (v.astype(np.float64) * 2.0**integer_bits).astype(_F32)
        y = np.tanh(x.astype(np.float64)).astype(_F32)
        return core.sat(np.trunc((y * _F32(32768)).astype(_F32)).astype(np.int64), 16)

    def _gate(self, g: str, x: np.ndarray, h: np.ndarray, act) -> np.ndarray:
        p = self.gates[g]
        s0 = self._matmul_requant(x, self.zp_x, p["W"], p["eff_in"], p["zp_in"])
        s1 = self._matmul_requant(h, self.zp_h, p["R"], p["eff_rec"], p["zp_rec"])
        y = core.sat(p["add_in"](s0 - p["zp_in"]) + p["add_rec"](s1 - p["zp_rec"]), 16)
        return act(self._layer_norm(y, p["L"], p["ln_scale"], p["bias"]))

    def run(self, x: np.ndarray, state, *, reverse: bool = False, aux=None):
        """x int8 [T, B, n_input]; returns (y int8 [T, B, n_output], (h int8, c int16))."""
        T = x.shape[0]
        h = np.asarray(state[0], np.int8)
        c = np.asarray(state[1], np.int64)
        y = np.empty((T, x.shape[1], self.n_output), np.int8)
        for s in (range(T - 1, -1, -1) if reverse else range(T)):
            f = self._gate("f", x[s], h, self._sigmoid)
            g = self._gate("g", x[s], h, lambda v: self._tanh(v, -12))
            c = core.wrap(core.rdpot(f * c, 15), 16)
            c = core.sat(c + core.wrap(core.rdpot((32767 - f) * g, 15), 16), 16)
            if self.qcell_clip > 0:
                c = core.clamp(c, -self.qcell_clip, self.qcell_clip)
            o = self._gate("o", x[s], h, self._sigmoid)
            m = core.wrap(core.rdpot(o * self._tanh(c, -15), 15), 16)
            acc = self.Wp.matmul(m, check=False) + self.proj_bias
            hv = core.sat(self.proj_req(core.wrap(acc, 32)) + self.zp_h, 8)
            if self.qproj_clip > 0:
                hv = core.clamp(hv, -self.qproj_clip, self.qproj_clip)
            h = hv.astype(np.int8)
            y[s] = h
        return y, (h, c.astype(np.int16))


def _round_away(v: np.ndarray) -> np.ndarray:
    """C's round(): half away from zero, as int64."""
    return (np.sign(v) * np.floor(np.abs(v.astype(np.float64)) + 0.5)).astype(np.int64)
