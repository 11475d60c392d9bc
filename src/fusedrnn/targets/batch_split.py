"""Run a prepared target on two threads by splitting its batch rows in two halves.

The SDK targets' compiled time loops run one thread; a batch's rows are independent sequences for them (the same
arithmetic per row, no statistic over the batch), so the two halves of a large call can run at once: the C loops
and the BLAS products release the GIL. :func:`split_rows` wraps a target's ``run(x, states, lens)`` (see
:class:`fusedrnn.targets.registry.Target`) so that a call with enough work runs rows ``[0, B/2)`` on a persistent
worker thread and ``[B/2, B)`` on the caller, then joins the results; the threads are the compiled float loop's
setting (:func:`fusedrnn.cells.compiled.set_threads`, ``$FUSEDRNN_THREADS``); BLAS is limited to one thread
meanwhile (through threadpoolctl; without it calls are not split). Results are bit-identical to one call over all
rows (tests/test_batch_split.py).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..cells.compiled import driver

SPLIT_MIN_MACS = 1 << 23
"""Least multiply-adds (over all steps, rows and directions) for which a call is split: handing half of the rows
to the worker thread costs about 0.1 ms."""

_lock = threading.Lock()
_pool: dict = {"executor": None, "blas": None}


def _blas_controller():
    """threadpoolctl's controller of the loaded BLAS pools, or False where threadpoolctl is missing. While the two
    halves run, BLAS is limited to one thread: two callers each starting a two-thread pool on two cores ran
    slower than one unsplit call (measured: MLI sa8 S2 36 ms split vs 30 ms unsplit; 18 ms with the limit)."""
    if _pool["blas"] is None:
        try:
            from threadpoolctl import ThreadpoolController

            _pool["blas"] = ThreadpoolController()
        except ImportError:
            _pool["blas"] = False
    return _pool["blas"]


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if _pool["executor"] is None:
            _pool["executor"] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusedrnn-rows")
        return _pool["executor"]


def _forget_after_fork() -> None:
    _pool["executor"] = None  # its thread did not survive the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def macs_per_row_step(layer) -> int:
    """Multiply-adds of one row and step of a fusedrnn layer (its input and recurrent products, every direction)."""
    G = {"lstm": 4, "gru": 3}.get(layer.cell, 1)
    return layer.num_directions * G * layer.hidden_size * (layer.input_size + layer.hidden_size)


def split_rows(run: Callable, macs_per_row_step: int) -> Callable:
    """``run`` that splits calls of at least two rows and :data:`SPLIT_MIN_MACS` multiply-adds
    (``T · B · macs_per_row_step``) over two threads when the thread setting allows two."""

    def split(x, states, lens):
        T, B = x.shape[0], x.shape[1]
        if B < 2 or driver.threads() < 2 or T * B * macs_per_row_step < SPLIT_MIN_MACS:
            return run(x, states, lens)
        blas = _blas_controller()
        if not blas:
            return run(x, states, lens)
        half = B // 2

        def part(rows: slice):
            return run(np.ascontiguousarray(x[:, rows]), tuple(np.ascontiguousarray(s[:, rows]) for s in states),
                       None if lens is None else lens[rows])

        # the worker runs in a copy of the caller's context (settings held in context variables, e.g. MLI's build)
        with blas.limit(limits=1, user_api="blas"):
            later = _executor().submit(contextvars.copy_context().run, part, slice(0, half))
            Y2, st2 = part(slice(half, B))
            Y1, st1 = later.result()
        return (np.concatenate([Y1, Y2], axis=2),
                tuple(np.concatenate([a, b], axis=1) for a, b in zip(st1, st2, strict=True)))

    split.unsplit = run
    for name, value in vars(run).items():  # attributes the target put on its runner (e.g. LiteRT's kernels)
        setattr(split, name, value)
    return split
