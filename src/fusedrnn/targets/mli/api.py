"""``fusedrnn.mli``: embARC MLI's API in Python, bit-exact with the MLI 2.0 x86 reference build.

Function names are MLI's without the ``mli_`` prefix; kernels return :class:`Status` codes as MLI does. The
build flags are a context: ``with build(round_mode="CONVERGENT", full_accu=True): ...``.

MLI 1.x kernels whose names MLI 2.0 reuses with another signature (``fully_connected_fx8/fx16``,
``lstm_cell_fx16``) carry a ``_v1`` suffix here; the other 1.x kernels keep their names (``lstm_cell_fx8``,
``lstm_cell_fx8w16d``, ``basic_rnn_cell_*``, ``fully_connected_fx8w16d``). The 1.x configuration struct is
:class:`RnnCellCfgDepr` {mode, act, ir_tsr}.
"""

from __future__ import annotations

from . import config as _config
from .config import *  # noqa: F403 - build flags, structures and enums under their MLI names
from .eltwise_api import (
    krn_eltwise_add_fx16,
    krn_eltwise_add_sa8,
    krn_eltwise_mul_fx16,
    krn_eltwise_mul_sa8,
    krn_eltwise_sub_fx16,
    krn_eltwise_sub_sa8,
    krn_sigm_fx16,
    krn_sigm_sa8,
    krn_tanh_fx16,
    krn_tanh_sa8,
)
from .fully_connected import (
    krn_fully_connected_fx8,
    krn_fully_connected_fx16,
    krn_fully_connected_fx16_fx8_fx8,
    krn_fully_connected_sa8_sa8_sa32,
    krn_fully_connected_sa8_sa8_sa32_ext_bias,
)
from .helpers import (
    SubTensorCfg,
    hlp_convert_tensor,
    hlp_count_elem_num,
    hlp_create_subtensor,
    hlp_tensor_element_size,
    hlp_tensor_scale,
    hlp_tensor_scale_shift,
    hlp_tensor_zero_offset,
)
from .luts import Lut
from .luts_api import krn_sigm_create_lut, krn_sigm_get_lut_size, krn_tanh_create_lut, krn_tanh_get_lut_size
from .mli1 import (
    krn_basic_rnn_cell_fx8,
    krn_basic_rnn_cell_fx8w16d,
    krn_basic_rnn_cell_fx16,
    krn_fully_connected_fx8w16d,
    krn_lstm_cell_fx8,
    krn_lstm_cell_fx8w16d,
)
from .mli1 import krn_fully_connected_fx8 as krn_fully_connected_fx8_v1
from .mli1 import krn_fully_connected_fx16 as krn_fully_connected_fx16_v1
from .mli1 import krn_lstm_cell_fx16 as krn_lstm_cell_fx16_v1
from .rnn_cells_api import (
    krn_gru_cell_fx16,
    krn_gru_cell_fx16_fx8_fx8,
    krn_gru_cell_sa8_sa8_sa32,
    krn_lstm_cell_fx16,
    krn_lstm_cell_fx16_fx8_fx8,
    krn_lstm_cell_sa8_sa8_sa32,
)
from .rnn_dense import krn_rnn_dense_fx16, krn_rnn_dense_fx16_fx8_fx8, krn_rnn_dense_sa8_sa8_sa32
from .status import (
    MLI_STATUS_ARGUMENT_ERROR,
    MLI_STATUS_BAD_FUNC_CFG,
    MLI_STATUS_BAD_TENSOR,
    MLI_STATUS_INCOMPATEBLE_TENSORS,
    MLI_STATUS_LENGTH_ERROR,
    MLI_STATUS_MEM_BANK_MISMATCH,
    MLI_STATUS_MISALIGNMENT_ERROR,
    MLI_STATUS_NOT_ENGH_MEM,
    MLI_STATUS_NOT_SUPPORTED,
    MLI_STATUS_OK,
    MLI_STATUS_RANK_MISMATCH,
    MLI_STATUS_SHAPE_MISMATCH,
    MLI_STATUS_SIZE_MISMATCH,
    MLI_STATUS_SPEC_PARAM_MISMATCH,
    MLI_STATUS_TYPE_MISMATCH,
    Status,
)
from .tensors import Tensor, empty_tensor, fx_tensor, sa_tensor

__all__ = [
    # build flags, structures and enums (config.__all__), the lookup table
    *_config.__all__, "Lut",
    # status
    "Status", "MLI_STATUS_OK", "MLI_STATUS_BAD_TENSOR", "MLI_STATUS_SHAPE_MISMATCH",
    "MLI_STATUS_INCOMPATEBLE_TENSORS", "MLI_STATUS_BAD_FUNC_CFG", "MLI_STATUS_NOT_ENGH_MEM",
    "MLI_STATUS_NOT_SUPPORTED", "MLI_STATUS_SPEC_PARAM_MISMATCH", "MLI_STATUS_ARGUMENT_ERROR",
    "MLI_STATUS_LENGTH_ERROR", "MLI_STATUS_SIZE_MISMATCH", "MLI_STATUS_RANK_MISMATCH", "MLI_STATUS_TYPE_MISMATCH",
    "MLI_STATUS_MEM_BANK_MISMATCH", "MLI_STATUS_MISALIGNMENT_ERROR",
    # tensors and helpers
    "Tensor", "fx_tensor", "sa_tensor", "empty_tensor", "hlp_count_elem_num", "hlp_tensor_element_size",
    "hlp_tensor_scale", "hlp_tensor_scale_shift", "hlp_tensor_zero_offset", "hlp_convert_tensor",
    "hlp_create_subtensor", "SubTensorCfg",
    # MLI 2.0 kernels
    "krn_fully_connected_fx8", "krn_fully_connected_fx16", "krn_fully_connected_fx16_fx8_fx8",
    "krn_fully_connected_sa8_sa8_sa32", "krn_fully_connected_sa8_sa8_sa32_ext_bias",
    "krn_rnn_dense_fx16", "krn_rnn_dense_fx16_fx8_fx8", "krn_rnn_dense_sa8_sa8_sa32",
    "krn_lstm_cell_fx16", "krn_lstm_cell_fx16_fx8_fx8", "krn_lstm_cell_sa8_sa8_sa32",
    "krn_gru_cell_fx16", "krn_gru_cell_fx16_fx8_fx8", "krn_gru_cell_sa8_sa8_sa32",
    "krn_tanh_fx16", "krn_tanh_sa8", "krn_sigm_fx16", "krn_sigm_sa8",
    "krn_tanh_create_lut", "krn_sigm_create_lut", "krn_tanh_get_lut_size", "krn_sigm_get_lut_size",
    "krn_eltwise_add_fx16", "krn_eltwise_sub_fx16", "krn_eltwise_mul_fx16",
    "krn_eltwise_add_sa8", "krn_eltwise_sub_sa8", "krn_eltwise_mul_sa8",
    # MLI 1.x kernels (names that 2.0 reuses carry a _v1 suffix)
    "krn_fully_connected_fx8_v1", "krn_fully_connected_fx16_v1", "krn_fully_connected_fx8w16d",
    "krn_lstm_cell_fx8", "krn_lstm_cell_fx16_v1", "krn_lstm_cell_fx8w16d",
    "krn_basic_rnn_cell_fx8", "krn_basic_rnn_cell_fx16", "krn_basic_rnn_cell_fx8w16d",
]
