"""``fusedrnn.mli``: embARC MLI 2.0's API in Python, bit-exact with the MLI 2.0 x86 reference build.

Function names are MLI's without the ``mli_`` prefix, structures carry C's field names (``t.data.mem``,
``t.data.capacity``, ``t.el_params.fx.frac_bits``, ``t.el_params.sa.scale``, ``t.shape[MLI_MAX_RANK]``,
``lut.length`` ...), and kernels return :class:`Status` codes as MLI does. The build flags are a context:
``with build(round_mode="CONVERGENT", full_accu=True, debug_mode="DBG_MODE_RET_CODES"): ...``; the parameter
checks of MLI's ``mli_check.cc`` run in every debug mode and are skipped in ``DBG_MODE_RELEASE`` (except those
that keep the emulation memory-safe, which return their status where MLI's release build has undefined
behaviour).

MLI 1.x has its own namespace, :mod:`fusedrnn.mli.v1`, with 1.x names and signatures
(``fusedrnn.mli.v1.krn_fully_connected_fx16(in, weights, bias, out)``). The 1.x kernels also stay here under
their earlier names: those whose names 2.0 reuses with another signature carry a ``_v1`` suffix
(``krn_fully_connected_fx8_v1``, ``krn_fully_connected_fx16_v1``, ``krn_lstm_cell_fx16_v1``), the others keep
their names (``krn_lstm_cell_fx8``, ``krn_lstm_cell_fx8w16d``, ``krn_basic_rnn_cell_*``,
``krn_fully_connected_fx8w16d``) with the 1.x configuration :class:`RnnCellCfgDepr` {mode, act, ir_tsr}.

Where MLI's documentation and its code disagree, fusedrnn does what the code (``Release_2.0.2``) does:

- ``mli_hlp_convert_tensor``: the documentation lets the function fill the output's shape; ``mli_check.cc``
  requires the caller's output shape to equal the input's (SHAPE_MISMATCH otherwise).
- Output tensors of ``fully_connected`` and ``rnn_dense``: documented as filled by the kernel; the checker
  requires the caller to set rank 1 and the output length (SHAPE_MISMATCH) with positive ``mem_stride``.
- ``mem_stride``: the documentation allows 0 for "dense" (1.x wording); the 2.0 checker rejects any stride <= 0
  (BAD_TENSOR). A tensor's capacity short of its shape is NOT_ENGH_MEM (``check_tensor_private``), not
  BAD_TENSOR.
- ``mli_hlp_count_elem_num`` returns 0 when ``start_dim`` >= rank (rank > 0) in a debug build, 1 in a release
  build (the empty product), where the documentation only says start_dim must be smaller than the rank.
- Rank-0 tensors: the value sits in the container (``data.mem`` a number) and capacity is ignored
  (``mli_chk_scalar_tensor``), which the documentation's "scalar" paragraph leaves open.
- ``mli_krn_argmax``: ties go to the element met later in memory order (the heap replaces a root that is not
  larger), the documentation promises no order.
- ``mli_hlp_create_subtensor``: the documentation asks for leading size-1 dimensions; the code drops size-1
  dimensions wherever they are, front to back, until ``sub_tensor_rank`` remain (with too few, ``out.rank``
  counts the first of the remaining sizes), and the capacity shrinks by the offset's bytes.
- ``mli_mov_tensor_sync``: ``dst`` keeps its own non-zero ``mem_stride`` unless ``cfg.dst_mem_stride`` sets one
  (only all-zero strides give the dense layout); per-axis parameters are shared with ``src`` when ``dst``'s
  pointers are NULL or ``src``'s, moved into ``dst``'s own buffers otherwise.
- ``mli_hlp_convert_tensor_safx`` between fx/sa types requantizes in integer arithmetic (``define_requant_params``,
  ``calc_convert``), rounding with the build's mode; an fp32 side is TYPE_MISMATCH. The rounding constant of
  ``mli_math_asr_rnd_fx<int32_t>`` for a shift of 31 is +2^30 in 2.0.2's code (``unsigned_T one``).

Beyond MLI: an ``RnnCellCfg`` without ``scratch_data`` is BAD_FUNC_CFG in a debug mode as MLI's checker says; in
``DBG_MODE_RELEASE`` (C would write through NULL) the kernel allocates it. A ``FullyConnectedCfg`` of None is
BAD_FUNC_CFG in a debug mode and "no ReLU" without checks. Element types in the 1.x namespace have 1.1.1's
numbers (``fusedrnn.mli.v1.MLI_EL_FX_16`` = 1, its tensors' ``el_type`` reads and takes them); 1.x tensors
passed to the kernels here work too (kernels see them as 2.0 tensors).
"""

from __future__ import annotations

from . import config as _config
from .config import *  # noqa: F403 - build flags, structures and enums under their MLI names
from .diverse import ArgmaxCfg, MovCfg, krn_argmax_fx16, krn_argmax_sa8, mov_cfg_for_copy, mov_tensor_sync
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
    PointToSubtsrCfg,
    SubTensorCfg,
    hlp_convert_tensor,
    hlp_convert_tensor_safx,
    hlp_count_elem_num,
    hlp_create_subtensor,
    hlp_point_to_subtensor,
    hlp_tensor_data_ptr_cmp,
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
from .tensors import DataContainer, ElParams, FxParams, SaParams, Tensor, empty_tensor, fx_tensor, sa_tensor

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
    "hlp_create_subtensor", "SubTensorCfg", "DataContainer", "ElParams", "FxParams", "SaParams",
    "hlp_convert_tensor_safx", "hlp_tensor_data_ptr_cmp", "hlp_point_to_subtensor", "PointToSubtsrCfg",
    # data movement and argmax
    "MovCfg", "mov_cfg_for_copy", "mov_tensor_sync", "ArgmaxCfg", "krn_argmax_sa8", "krn_argmax_fx16",
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
