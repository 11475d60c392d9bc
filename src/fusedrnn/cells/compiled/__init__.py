"""Compiled time loop for the float LSTM / GRU / RNN engines.

A small C kernel (``_kernel.c``), compiled when the package is installed and loaded, in the variant for this CPU,
through :mod:`fusedrnn._native` (see ``_build``). Three paths: for float32 with the common LSTM / GRU options and H a
multiple of the vector width (``_batched.h``), a packed register-blocked GEMM of [x_t | h] with [W | R] per step,
the gate math done on each tile, split into row blocks and panel groups (at batch 1-5 the input part is computed
16 steps at a time and each step streams only R); the same options at batch 1-2 with H a multiple of 8 only
(``_rows.h``), a fused per-row loop that reads W and R where they lie and splits the hidden units into blocks;
every other call (any option, float64) runs per row, the recurrent GEMV and gate math per step
while NumPy/BLAS computes the hoisted input projection. Threads (``_pool.h``): persistent helpers *claim* the
chunks of each step with the caller, so a descheduled helper never holds a step up (``set_threads``,
``pool_stats``). Without the kernel (installed without a C compiler) everything still works, after a warning:
the ``run_*`` functions return None and the NumPy engines run the loop. The kernel covers every option of the
engines under the EXACT rounding policy (both directions, sequence lengths, peepholes, clip, cell_clip, couplings,
projection, diagonal R, layer norm, all ONNX activations with alpha/beta, both GRU linear_before_reset forms),
float32 and float64.
"""

from ._build import library_path, unavailable_reason
from .driver import (
    MAX_ROWS,
    available,
    disabled,
    is_enabled,
    pool_stats,
    run_gru,
    run_lstm,
    run_rnn,
    set_enabled,
    set_threads,
    thread_limit,
    threads,
)

__all__ = [
    "MAX_ROWS",
    "available",
    "disabled",
    "is_enabled",
    "library_path",
    "pool_stats",
    "run_gru",
    "run_lstm",
    "run_rnn",
    "set_enabled",
    "set_threads",
    "thread_limit",
    "threads",
    "unavailable_reason",
]
