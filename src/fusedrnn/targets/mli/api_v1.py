"""``fusedrnn.mli.v1``: embARC MLI 1.x's API (``Release_1.1.1``) with 1.x names and signatures, so that a 1.x
program ports line by line: ``krn_fully_connected_fx16(in, weights, bias, out)``, ``krn_lstm_cell_fx16(in,
prev_out, weights, bias, cfg, cell, out)`` with ``RnnCellCfg`` {mode, act, ir_tsr}, ``krn_relu_fx16(in, cfg,
out)``, ``krn_tanh_fx16(in, out)`` (the 1.x tables are built in), ``hlp_point_to_subtensor``,
``hlp_convert_tensor(in, out)`` (the output takes the input's shape). Tensors are :class:`TensorV1`, the 2.0
:class:`Tensor` with 1.x's element-type numbers and the 1.x field names too: ``t.data`` takes the buffer,
``t.capacity`` its bytes, ``t.el_params.fx.frac_bits``, ``t.el_params.asym``; a ``mem_stride`` of all 0 means
dense as in 1.x. Checks follow 1.1.1's ``mli_check.cc`` (the LSTM needs
``cfg.ir_tsr``: BAD_FUNC_CFG without it in a debug mode).

1.x has no host build and no kernel test vectors: the arithmetic follows :mod:`.mli1` (FXAPI semantics inferred,
convergent rounding). Element types have 1.1.1's numbers (:class:`ElTypeV1`, here also ``ElType``:
``MLI_EL_FX_8`` = 0, ``MLI_EL_FX_16`` = 1, ``MLI_EL_ASYM_I8`` = 2, ``MLI_EL_ASYM_I32`` = 3): ``t.el_type`` of a
tensor made here reads and takes them (``t.el_type = MLI_EL_FX_16`` makes an fx16 tensor) and kernels see the
tensor as 2.0's, where asym i8 / i32 are sa8 / sa32; an fp32 tensor (no 1.x type) shows 2.0's
``MLI_EL_FP_32``. The element-wise kernels (``krn_eltwise_{add,sub,mul,max,min}_{fx8,fx16}(in1, in2,
out)``) follow 1.1.1's ``mli_krn_eltwise.h`` and ``mli_chk_eltwise``. Not provided: 1.x convolutions, pooling
and softmax kernels, and 1.1's ``krn_fully_connected_sa8_sa8_sa32``.
"""

from __future__ import annotations

import functools

from .config import (
    MLI_MAX_RANK,
    ElTypeV1,
    ReluCfg,
    ReluType,
    RnnAct,
    RnnMode,
    build,
    current_build,
    set_build,
)
from .config import RnnCellCfgDepr as RnnCellCfg
from .helpers import (
    PointToSubtsrCfg,
    SubTensorCfg,
    hlp_create_subtensor,
    hlp_point_to_subtensor,
    hlp_tensor_element_size,
    hlp_tensor_scale,
    hlp_tensor_scale_shift,
    hlp_tensor_zero_offset,
)
from .helpers import hlp_convert_tensor_v1 as hlp_convert_tensor
from .mli1 import (
    hlp_count_elem_num,
    krn_basic_rnn_cell_fx8,
    krn_basic_rnn_cell_fx8w16d,
    krn_basic_rnn_cell_fx16,
    krn_eltwise_add_fx8,
    krn_eltwise_add_fx16,
    krn_eltwise_max_fx8,
    krn_eltwise_max_fx16,
    krn_eltwise_min_fx8,
    krn_eltwise_min_fx16,
    krn_eltwise_mul_fx8,
    krn_eltwise_mul_fx16,
    krn_eltwise_sub_fx8,
    krn_eltwise_sub_fx16,
    krn_fully_connected_fx8,
    krn_fully_connected_fx8w16d,
    krn_fully_connected_fx16,
    krn_lstm_cell_fx8,
    krn_lstm_cell_fx8w16d,
    krn_lstm_cell_fx16,
    krn_relu_fx8,
    krn_relu_fx16,
    krn_sigm_fx8,
    krn_sigm_fx16,
    krn_tanh_fx8,
    krn_tanh_fx16,
)
from .status import Status
from .tensors import DataContainer, ElParams, FxParams, SaParams, as_v2
from .tensors import TensorV1 as Tensor
from .tensors import empty_tensor_v1 as empty_tensor
from .tensors import fx_tensor_v1 as fx_tensor

ElType = ElTypeV1
MLI_EL_FX_8 = ElTypeV1.MLI_EL_FX_8
MLI_EL_FX_16 = ElTypeV1.MLI_EL_FX_16
MLI_EL_ASYM_I8 = ElTypeV1.MLI_EL_ASYM_I8
MLI_EL_ASYM_I32 = ElTypeV1.MLI_EL_ASYM_I32


def _v1_boundary(fn):
    """A helper that is no :func:`~.status.mli_kernel`, taking 1.x tensors as their 2.0 views."""

    @functools.wraps(fn)
    def helper(*args, **kwargs):
        return fn(*map(as_v2, args), **{k: as_v2(v) for k, v in kwargs.items()})

    return helper


hlp_create_subtensor = _v1_boundary(hlp_create_subtensor)
_STATUSES = {s.name: s for s in Status if s <= Status.MLI_STATUS_TYPE_MISMATCH}  # 1.x's enum ends at 12
globals().update(_STATUSES)
_ENUMS = {m.name: m for e in (ReluType, RnnAct, RnnMode) for m in e}
globals().update(_ENUMS)

__all__ = [
    "Status", *_STATUSES, *_ENUMS, "MLI_MAX_RANK", "MLI_EL_FX_8", "MLI_EL_FX_16", "MLI_EL_ASYM_I8",
    "MLI_EL_ASYM_I32", "ElType", "ElTypeV1", "ReluType", "RnnAct", "RnnMode", "ReluCfg", "RnnCellCfg", "build",
    "current_build", "set_build", "Tensor", "DataContainer", "ElParams", "FxParams", "SaParams", "fx_tensor",
    "empty_tensor",
    "krn_fully_connected_fx8", "krn_fully_connected_fx16", "krn_fully_connected_fx8w16d",
    "krn_lstm_cell_fx8", "krn_lstm_cell_fx16", "krn_lstm_cell_fx8w16d",
    "krn_basic_rnn_cell_fx8", "krn_basic_rnn_cell_fx16", "krn_basic_rnn_cell_fx8w16d",
    "krn_relu_fx8", "krn_relu_fx16", "krn_tanh_fx8", "krn_tanh_fx16", "krn_sigm_fx8", "krn_sigm_fx16",
    "krn_eltwise_add_fx8", "krn_eltwise_add_fx16", "krn_eltwise_sub_fx8", "krn_eltwise_sub_fx16",
    "krn_eltwise_mul_fx8", "krn_eltwise_mul_fx16", "krn_eltwise_max_fx8", "krn_eltwise_max_fx16",
    "krn_eltwise_min_fx8", "krn_eltwise_min_fx16",
    "hlp_count_elem_num", "hlp_tensor_element_size", "hlp_convert_tensor", "hlp_point_to_subtensor",
    "PointToSubtsrCfg", "hlp_create_subtensor", "SubTensorCfg", "hlp_tensor_scale", "hlp_tensor_scale_shift",
    "hlp_tensor_zero_offset",
]
