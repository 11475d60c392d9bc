"""Run a prepared target on several threads by splitting its batch rows into blocks.

The SDK targets' compiled time loops run one thread; a batch's rows are independent sequences for them (the same
arithmetic per row, no statistic over the batch), so blocks of rows of a large call can run at once: the C loops
and the BLAS products release the GIL. A :class:`RowSplitter` set as a :class:`~fusedrnn.targets.registry.Prepared`
object's ``splitter`` cuts a call with enough work into blocks of rows that the caller and persistent worker
threads *claim* one at a time, then joins the results in row order: a worker that has not started (its core taken
by another process) holds nothing up, the caller takes the blocks left. The threads are the compiled float loop's
setting (:func:`fusedrnn.cells.compiled.set_threads`, ``$FUSEDRNN_THREADS``); BLAS is limited to one thread
meanwhile (through threadpoolctl; :func:`blas_single_thread` counts the split calls in flight, so that concurrent
calls from several threads restore the caller's BLAS setting once the last one ends). Results are bit-identical to
one call over all rows (tests/test_batch_split.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

from ..cells.compiled import driver
from ..cells.spec import CellSpec

SPLIT_MIN_MACS = 1 << 23
"""Least multiply-adds (over all steps, rows and directions) for which a call is split: handing half of the rows
to the worker thread costs about 0.1 ms."""

_lock = threading.Lock()
_pool: dict = {"executor": None, "blas": None, "governor": None}
_blas_lock = threading.Lock()
_blas: dict = {"users": 0, "limiter": None}


def _blas_controller() -> ThreadpoolController:
    """threadpoolctl's controller of the loaded BLAS pools (made once). While the two halves run, BLAS is limited to
    one thread: two callers each starting a two-thread pool on two cores ran slower than one unsplit call
    (measured: MLI sa8 S2 36 ms split vs 30 ms unsplit; 18 ms with the limit)."""
    if _pool["blas"] is None:
        _pool["blas"] = ThreadpoolController()
    return _pool["blas"]


def _governor() -> ThreadPoolExecutor:
    """The one thread that sets and restores the BLAS limit (made once)."""
    with _lock:
        if _pool["governor"] is None:
            _pool["governor"] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusedrnn-blas")
        return _pool["governor"]


def _limit_blas():
    limiter = _blas_controller().limit(limits=1, user_api="blas")
    limiter.__enter__()  # threadpoolctl >= 3.8 counts the limits a thread holds (released by __exit__)
    return limiter


@contextlib.contextmanager
def blas_single_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block, for the whole process. Blocks entered concurrently from several
    threads share one limit, counted under a lock: the first sets it, the last to leave restores what was there
    before the first (two threadpoolctl limits ending out of order would leave BLAS on one thread for good). The
    limit is set and restored by one thread of its own: threadpoolctl lets one thread at a time change OpenBLAS's
    process-wide pool and ignores the others, so a limit set on one caller's thread and restored on another's would
    not be restored."""
    with _blas_lock:
        if _blas["users"] == 0:
            _blas["limiter"] = _governor().submit(_limit_blas).result()
        _blas["users"] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas["users"] -= 1
            if _blas["users"] == 0:
                limiter, _blas["limiter"] = _blas["limiter"], None
                _governor().submit(limiter.__exit__, None, None, None).result()


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if _pool["executor"] is None:
            _pool["executor"] = ThreadPoolExecutor(max_workers=driver.MAX_THREADS - 1,
                                                   thread_name_prefix="fusedrnn-rows")
        return _pool["executor"]


def _forget_after_fork() -> None:
    _pool["executor"] = _pool["governor"] = None  # their threads did not survive the fork
    _blas.update(users=0, limiter=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def macs_per_row_step(spec: CellSpec) -> int:
    """Multiply-adds of one row and step of a cell (its input and recurrent products, every direction)."""
    return spec.num_directions * spec.gate_count * spec.hidden_size * (spec.input_size + spec.hidden_size)


class _Claims:
    """Blocks ``0 .. n-1`` handed out one at a time to whichever thread asks (:meth:`run_some`); each block's result
    or exception is kept, and an event set when it is done."""

    def __init__(self, n: int, work: Callable[[int], object]):
        self.n, self.work, self.next = n, work, 0
        self.lock = threading.Lock()
        self.done = [threading.Event() for _ in range(n)]
        self.results: list = [None] * n
        self.errors: list = [None] * n

    def claim(self) -> int | None:
        with self.lock:
            if self.next >= self.n:
                return None
            self.next += 1
            return self.next - 1

    def run_some(self) -> None:
        while (i := self.claim()) is not None:
            try:
                self.results[i] = self.work(i)
            except BaseException as e:  # noqa: BLE001 (re-raised on the caller's thread)
                self.errors[i] = e
            self.done[i].set()


class RowSplitter:
    """Runs calls of at least two rows and :data:`SPLIT_MIN_MACS` multiply-adds (``T · B · macs_per_row_step``)
    as blocks of rows claimed by up to ``threads`` threads (the thread setting; the caller is one of them), at
    least :data:`SPLIT_MIN_MACS` / 2 multiply-adds per block, about two blocks per thread; smaller calls run as
    they are. The blocks depend on the shapes and the thread setting only, and a row's result never depends on
    its block (the targets' rows are independent), so the output is the same bits as one call over all rows."""

    def __init__(self, macs_per_row_step: int):
        self.macs_per_row_step = macs_per_row_step

    def blocks(self, T: int, B: int, threads: int) -> list[slice]:
        """The row blocks of a call of T steps and B rows with ``threads`` threads (one block: no split)."""
        work = T * B * self.macs_per_row_step
        if B < 2 or threads < 2 or work < SPLIT_MIN_MACS:
            return [slice(0, B)]
        n = max(2, min(B, 2 * threads, work // max(1, SPLIT_MIN_MACS // 2)))
        edges = [B * i // n for i in range(n + 1)]
        return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]

    def __call__(self, run: Callable, x: np.ndarray, states: tuple, lens: np.ndarray | None):
        T, B = x.shape[0], x.shape[1]
        threads = driver.call_threads()
        blocks = self.blocks(T, B, threads)
        if len(blocks) == 1:
            return run(x, states, lens)

        def part(i: int):
            rows = blocks[i]
            return run(np.ascontiguousarray(x[:, rows]), tuple(np.ascontiguousarray(s[:, rows]) for s in states),
                       None if lens is None else lens[rows])

        claims = _Claims(len(blocks), part)
        cpu = driver.current_cpu()

        def worker() -> None:
            driver.leave_cpu(cpu)  # off the caller's CPU, where the scheduler tends to wake it
            claims.run_some()

        # workers run in a copy of the caller's context (settings held in context variables, e.g. MLI's build)
        with blas_single_thread():
            pool = _executor()
            for _ in range(min(threads, len(blocks)) - 1):
                pool.submit(contextvars.copy_context().run, worker)
            claims.run_some()  # the caller takes blocks too: every block is claimed once it returns
            for ev in claims.done:  # only blocks a running worker holds are waited for
                ev.wait()
        for e in claims.errors:
            if e is not None:
                raise e
        Ys = [r[0] for r in claims.results]
        sts = [r[1] for r in claims.results]
        return (np.concatenate(Ys, axis=2),
                tuple(np.concatenate([st[k] for st in sts], axis=1) for k in range(len(sts[0]))))
