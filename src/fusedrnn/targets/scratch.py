"""Per-thread scratch buffers of the SDK targets' compiled loops: a call's scratch (partial products, gate rows)
lives only while its loop runs, and fresh pages cost more than the loop itself on mid-size calls (page faults:
about 0.5 ms of a 7 ms MLI S2 call, a third of a CMSIS-NN s16 S2 call), so each thread keeps one buffer per use
(``tag``) for its next call. Calls of one layer on several threads each use their own thread's buffers.
"""

from __future__ import annotations

import threading

import numpy as np

REUSE_MAX_BYTES = 32 << 20
"""Largest buffer a thread keeps for its next call."""
_local = threading.local()


def thread_buffer(tag: str | None, nbytes: int) -> np.ndarray:
    """An uninitialised uint8 array of at least ``nbytes``: this thread's buffer for ``tag`` when large enough,
    else a new one (kept when at most :data:`REUSE_MAX_BYTES`; ``tag`` None: never kept). The caller uses it only
    until its call returns, and returns nothing that refers to it."""
    if tag is None or nbytes > REUSE_MAX_BYTES:
        return np.empty(nbytes, np.uint8)
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    buf = pool.get(tag)
    if buf is None or buf.size < nbytes:
        buf = pool[tag] = np.empty(nbytes, np.uint8)
    return buf


def areas(tag: str, sizes) -> tuple[np.ndarray, list[int]]:
    """This thread's buffer for ``tag`` holding areas of ``sizes`` bytes, each 64-byte aligned and uninitialised,
    and their addresses (hold the buffer until the C loop returned)."""
    starts, end = [], 0
    for n in sizes:
        starts.append(end)
        end += -(-n // 64) * 64
    buf = thread_buffer(tag, end + 64)
    base = buf.ctypes.data
    base += -base % 64
    return buf, [base + s for s in starts]
