"""Compiled time loop of the float32 LSTM / GRU engines under a storage-rounding policy (fp16, bf16, zDNN's
DLFLOAT16 op boundaries) at small batch: the per-step rounding points in C, rounders re-implemented bit-exactly.

``run_lstm`` / ``run_gru`` have the signatures of :func:`fusedrnn.cells.lstm_sequence` /
:func:`~fusedrnn.cells.gru_sequence` and return None when they decline (the NumPy engine then runs). The result
equals the NumPy engine's up to the order of the recurrent GEMV's sums and libm's expf/tanhf vs NumPy's SIMD
versions (a float32 ulp before rounding, which a rounding point turns into one ulp of the storage format at most).
"""

from .driver import MAX_ROWS, available, disabled, round_with, run_gru, run_lstm, set_enabled, unavailable_reason

__all__ = ["MAX_ROWS", "available", "disabled", "round_with", "run_gru", "run_lstm", "set_enabled",
           "unavailable_reason"]
