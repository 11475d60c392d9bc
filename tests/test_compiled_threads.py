"""The compiled float loop's threads: work claimed in chunks by whichever thread runs (``_pool.h``) gives the same
bits as one thread, for any thread count (N > 2 helpers included, on any machine), on the per-row, batched (row
blocks and panel groups) and general paths, with concurrent callers; the default thread count follows the CPUs
the process may use."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import zlib

import numpy as np
import pytest
from test_compiled_recurrence import using_threads

from fusedrnn.cells import Activation, compiled, gru_sequence, lstm_sequence
from fusedrnn.cells.compiled import driver
from fusedrnn.errors import FusedRNNError

pytestmark = pytest.mark.skipif(not compiled.available(), reason="compiled kernel unavailable")


def u(rng, *shape, scale=1.0):
    return rng.uniform(-scale, scale, shape).astype(np.float32)


def random_call(rng, cell: str, T: int, B: int, I: int, H: int, D: int, general: bool = False):
    """(engine, args, kwargs) of a float32 call: random biases, lengths, initial states, GRU form; ``general``: an
    option outside the fused subset (LSTM peepholes, GRU clip), so the general per-row path runs it."""
    G = 4 if cell == "lstm" else 3
    k = 1 / np.sqrt(H)
    lens = rng.integers(0, T + 1, size=B).astype(np.int64) if rng.random() < 0.5 else None
    args = [u(rng, T, B, I), u(rng, D, G * H, I, scale=k), u(rng, D, G * H, H, scale=k),
            u(rng, D, G * H, scale=k) if rng.random() < 0.8 else None, u(rng, D, G * H, scale=k),
            u(rng, D, B, H, scale=0.5)]
    kw = dict(reverse=[False, True] if D == 2 else [bool(rng.integers(2))], lens=lens, max_rows=10**6)
    if cell == "lstm":
        args.append(u(rng, D, B, H, scale=0.5))
        kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]] * D
        if general:
            kw["P"] = u(rng, D, 3, H, scale=0.5)
        return compiled.run_lstm, lstm_sequence, args, kw
    kw["acts"] = [[Activation("Sigmoid"), Activation("Tanh")]] * D
    kw["linear_before_reset"] = bool(rng.integers(2))
    if general:
        kw["clip"] = 2.0
    return compiled.run_gru, gru_sequence, args, kw


# (T, B, I, H, path): calls large enough to be split over threads on each path
SPLIT_CASES = [
    (30, 1, 40, 64, "rows"),       # unit blocks of the per-row loop (taken with BATCH_MIN raised)
    (20, 2, 24, 128, "rows"),
    (40, 1, 24, 128, "batched"),   # panel groups at batch 1 (input part hoisted 16 steps ahead)
    (20, 2, 40, 96, "batched"),
    (4, 16, 64, 128, "batched"),   # panel groups (small batch)
    (3, 512, 32, 32, "batched"),   # row blocks (large batch)
    (3, 301, 20, 48, "batched"),   # row blocks, a ragged last block
    (2, 2600, 4, 16, "batched"),   # row blocks that fit L2, also bidirectional
    (3, 64, 96, 512, "batched"),   # panel groups sized to stay in L2 (a direction's panels are 4.8 MiB)
    (2, 700, 48, 256, "batched"),  # panel groups times row blocks (16 threads: 4 x 12)
    (12, 3, 16, 32, "per-row"),    # the general path (two directions as two chunks)
]


@pytest.mark.parametrize("T,B,I,H,path", SPLIT_CASES)
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_any_thread_count_gives_the_same_bits(cell, T, B, I, H, path, monkeypatch):  # noqa: E741
    """Threads 2-5, 8 and 16 (helpers beyond the machine's cores included) give outputs equal to one thread's, bit
    for bit, uni- and bidirectional, with and without sequence lengths; the pool took part in the split calls; and one
    thread agrees with the NumPy engine."""
    rng = np.random.default_rng(zlib.crc32(repr((cell, T, B, I, H)).encode()))  # the same cases every run
    if path == "rows":  # the batched path takes batch 1-2 by default where H is a multiple of its vector width
        monkeypatch.setattr(driver, "BATCH_MIN", 3)
    for D in (1, 2):
        fast, engine, args, kw = random_call(rng, cell, T, B, I, H, D, general=path == "per-row")
        if path == "per-row":
            if D == 1:
                continue
            kw["max_rows"] = 10**6
        with using_threads(1):
            want = fast(*args, **kw)
        assert want is not None and driver.last_path() == path
        with compiled.disabled():
            ref = engine(*args, **{k: v for k, v in kw.items() if k != "max_rows"})
        for w, r in zip(want, ref, strict=True):
            np.testing.assert_allclose(w, r, rtol=0, atol=2e-5)
        steps = T if kw["lens"] is None else int(kw["lens"].max())
        split = steps * B * args[1].shape[1] * H >= driver.THREAD_MIN_MACS
        for n in (2, 3, 4, 5, 8, 16):
            stats = compiled.pool_stats()
            before = stats["calls"] + stats["backoffs"]
            with using_threads(n):
                got = fast(*args, **kw)
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                assert np.array_equal(g, w), f"{cell} {path} D={D} threads={n}: output {k} differs"
            stats = compiled.pool_stats()  # the pool was asked (it may have refused: helpers late moments ago)
            asked = stats["calls"] + stats["backoffs"] > before
            assert asked or not split, f"{cell} {path} D={D} threads={n}: pool not asked"


def test_thread_limit_keeps_calls_on_the_callers_thread():
    """Inside ``thread_limit(1)`` a call that would split over the pool runs alone (the pool is not asked) and
    gives the same bits; the limit is per Python thread and ends with the block."""
    rng = np.random.default_rng(3)
    fast, _, args, kw = random_call(rng, "lstm", 40, 1, 24, 128, 1)
    with using_threads(2):
        want = fast(*args, **kw)
        before = compiled.pool_stats()
        with compiled.thread_limit(1):
            got = fast(*args, **kw)
        after = compiled.pool_stats()
        assert after["calls"] + after["backoffs"] == before["calls"] + before["backoffs"]
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)
        again = fast(*args, **kw)  # outside the block: the pool is asked again
        assert compiled.pool_stats()["calls"] + compiled.pool_stats()["backoffs"] > after["calls"] + after["backoffs"]
        for g, w in zip(again, want, strict=True):
            assert np.array_equal(g, w)
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(FusedRNNError, match="thread_limit: n: expected a positive integer"):
            with compiled.thread_limit(bad):
                pass


def test_concurrent_callers_get_their_own_results():
    """Four Python threads calling at once (one holds the pool, the others run alone) each get the bits of a
    one-thread call of their own arguments."""
    calls = []
    for s in range(4):
        rng = np.random.default_rng(100 + s)
        cell = "lstm" if s % 2 else "gru"
        B = (1, 64, 2, 300)[s]
        calls.append(random_call(rng, cell, 12, B, 24, 32 if B > 2 else 64, 1 + s % 2))
    with using_threads(1):
        want = [fast(*args, **kw) for fast, _, args, kw in calls]
    got = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def work(i):
        fast, _, args, kw = calls[i]
        barrier.wait()
        got[i] = [fast(*args, **kw) for _ in range(5)]

    with using_threads(4):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i, (g5, w) in enumerate(zip(got, want, strict=True)):
        for g in g5:
            for a, b in zip(g, w, strict=True):
                assert np.array_equal(a, b), f"caller {i}"


PINNED_CHILD = """
import os, numpy as np
from fusedrnn.cells import Activation, compiled
compiled.set_threads(2)
rng = np.random.default_rng(0)
T, B, I, H = 40, 1, 24, 128
x, W, R = (rng.uniform(-0.1, 0.1, s).astype(np.float32) for s in ((T, B, I), (1, 4 * H, I), (1, 4 * H, H)))
h0 = np.zeros((1, B, H), np.float32)
acts = [[Activation("Sigmoid"), Activation("Tanh"), Activation("Tanh")]]
def calls(n):
    for _ in range(n):
        compiled.run_lstm(x, W, R, None, None, h0, h0, reverse=[False], acts=acts, max_rows=10**6)
calls(50)  # the pool's helper is running
for tid in os.listdir("/proc/self/task"):  # what taskset -a -p does to a running process
    os.sched_setaffinity(int(tid), {0})
calls(200)
print(sorted({c for tid in os.listdir("/proc/self/task") for c in os.sched_getaffinity(int(tid))}))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2
                    or not os.path.isdir("/proc/self/task"), reason="needs Linux affinity and two CPUs")
def test_helpers_keep_an_affinity_narrowed_after_they_started():
    """A helper that moves off the caller's CPU narrows and restores its own affinity set: a process pinned to one
    CPU after its pool started stays pinned (an earlier version restored the set of the pool's start)."""
    out = subprocess.run([sys.executable, "-c", PINNED_CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[0]"]


def test_default_threads_follow_the_cpus(monkeypatch, tmp_path):
    """FUSEDRNN_THREADS wins (capped at MAX_THREADS); otherwise the CPUs of the affinity mask, fewer under a
    cgroup quota."""
    cgroup_cpus = driver._cgroup_cpus
    monkeypatch.setenv("FUSEDRNN_THREADS", "4")
    assert driver._default_threads() == 4
    monkeypatch.setenv("FUSEDRNN_THREADS", "1000")
    assert driver._default_threads() == driver.MAX_THREADS
    monkeypatch.delenv("FUSEDRNN_THREADS")
    monkeypatch.setattr(driver.os, "sched_getaffinity", lambda pid: set(range(12)))
    monkeypatch.setattr(driver, "_cgroup_cpus", lambda: None)
    assert driver._default_threads() == 12
    monkeypatch.setattr(driver, "_cgroup_cpus", lambda: 3)
    assert driver._default_threads() == 3
    quota = tmp_path / "cpu.max"
    for text, want in (("250000 100000\n", 3), ("max 100000\n", None), ("100000 100000", 1), ("garbage", None)):
        quota.write_text(text)
        assert cgroup_cpus(str(quota)) == want, text
    assert cgroup_cpus(str(tmp_path / "missing")) is None
