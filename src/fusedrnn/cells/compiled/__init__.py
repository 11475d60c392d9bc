"""Compiled time loop for the float LSTM / GRU / RNN engines.

A small C kernel (``_kernel.c``) is compiled with the machine's C compiler at first use and cached (see
``_build``). Two paths: per row (small batches, every option), the recurrent GEMV and the fused gate math of
every step while NumPy/BLAS computes the hoisted input projection; and, for float32 with the common LSTM / GRU
options and B >= ``driver.BATCH_MIN`` (``_batched.h``), a packed register-blocked GEMM of [x_t | h] with
[W | R] per step, the gate math done on each tile, the panels split over two threads.
Without a compiler everything still works: the ``run_*`` functions return None and
the NumPy engines run the loop. The kernel covers every option of the engines under the EXACT rounding policy
(both directions, sequence lengths, peepholes, clip, cell_clip, couplings, projection, diagonal R, layer norm,
all ONNX activations with alpha/beta, both GRU linear_before_reset forms), float32 and float64.
"""

from ._build import library_path, unavailable_reason
from .driver import (
    MAX_ROWS,
    available,
    disabled,
    is_enabled,
    run_gru,
    run_lstm,
    run_rnn,
    set_enabled,
    set_threads,
    threads,
)

__all__ = [
    "MAX_ROWS",
    "available",
    "disabled",
    "is_enabled",
    "library_path",
    "run_gru",
    "run_lstm",
    "run_rnn",
    "set_enabled",
    "set_threads",
    "threads",
    "unavailable_reason",
]
