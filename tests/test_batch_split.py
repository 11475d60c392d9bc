"""fusedrnn.targets.batch_split: an SDK target's call split into two halves of its rows on two threads equals the
unsplit call bit for bit (MLI, LiteRT 8x8_16, Quark faithful and corrected; random batches, directions, sequence
lengths and initial states; an MLI build set in the caller's context applies to the worker's half too); split calls
from several threads at once leave BLAS's thread count as it was."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fusedrnn
import fusedrnn.mli as mli
from fusedrnn.cells import compiled
from fusedrnn.targets import batch_split

pytest.importorskip("threadpoolctl")


def _layer(rng, cell, direction, I, H):
    D = 2 if direction == "bidirectional" else 1
    G = {"lstm": 4, "gru": 3}[cell]
    k = 1 / np.sqrt(H)

    def u(*shape):
        return rng.uniform(-k, k, shape).astype(np.float32)

    cls = {"lstm": fusedrnn.LSTM, "gru": fusedrnn.GRU}[cell]
    return cls(u(D, G * H, I), u(D, G * H, H), u(D, G * H), u(D, G * H), direction=direction)


CASES = [  # (target, cells, directions, initial states allowed, sequence lengths allowed)
    ("mli2-sa8", ("lstm", "gru"), ("forward", "reverse", "bidirectional"), True, True),
    ("mli2-fx16", ("lstm",), ("forward", "bidirectional"), True, True),
    ("litert-int8x16", ("lstm",), ("forward", "reverse", "bidirectional"), True, False),
    ("quark", ("lstm",), ("bidirectional",), False, False),
    ("quark_corrected", ("lstm",), ("forward", "bidirectional"), True, False),
]


@pytest.fixture
def always_split(monkeypatch):
    calls = []
    real = batch_split._executor

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(batch_split, "SPLIT_MIN_MACS", 0)
    monkeypatch.setattr(batch_split, "_executor", counting)
    old = compiled.threads()
    compiled.set_threads(2)
    yield calls
    compiled.set_threads(old)


@pytest.mark.parametrize("target,cells,directions,states_ok,lens_ok", CASES, ids=[c[0] for c in CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # counts only
@given(seed=st.integers(0, 2**32 - 1))
def test_split_equals_unsplit(always_split, target, cells, directions, states_ok, lens_ok, seed):
    rng = np.random.default_rng(seed)
    cell = cells[rng.integers(len(cells))]
    direction = directions[rng.integers(len(directions))]
    T, B, I, H = int(rng.integers(1, 9)), int(rng.integers(2, 8)), int(rng.integers(1, 12)), int(rng.choice([8, 16]))
    layer = _layer(rng, cell, direction, I, H)
    x = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
    em = layer.to(target, calibration=x)
    run = em.prepared
    D = layer.num_directions
    states = tuple((rng.uniform(-0.5, 0.5, (D, B, H)) if states_ok else np.zeros((D, B, H))).astype(np.float32)
                   for _ in range(2 if cell == "lstm" else 1))
    lens = rng.integers(0, T + 1, size=B).astype(np.int64) if lens_ok and rng.random() < 0.5 else None
    n = len(always_split)
    Y, st_split = run(x, states, lens)
    assert len(always_split) == n + 1, "the call was not split"
    Y0, st0 = run.run(x, states, lens)
    np.testing.assert_array_equal(Y, Y0)
    for a, b in zip(st_split, st0, strict=True):
        np.testing.assert_array_equal(a, b)


def test_split_carries_the_callers_mli_build(always_split):
    """The MLI build (a context variable) set around the call applies to the half run on the worker thread."""
    rng = np.random.default_rng(3)
    layer = _layer(rng, "lstm", "forward", 6, 16)
    x = rng.uniform(-1, 1, (8, 16, 6)).astype(np.float32)
    em = layer.to("mli2-fx16", calibration=x)
    states = (np.zeros((1, 16, 16), np.float32),) * 2
    results = {}
    for mode in ("UP", "CONVERGENT"):
        with mli.build(round_mode=mode):
            Y, _ = em.prepared(x, states, None)
            Y0, _ = em.prepared.run(x, states, None)
        np.testing.assert_array_equal(Y, Y0)
        results[mode] = Y
    # rows [0, 8) run on the worker thread: the build must change them, or the test proves nothing
    assert not np.array_equal(results["UP"][:, :, :8], results["CONVERGENT"][:, :, :8]), "test is void"


def test_small_calls_and_one_thread_are_not_split(monkeypatch):
    calls = []
    monkeypatch.setattr(batch_split, "_executor", lambda: calls.append(1))
    rng = np.random.default_rng(4)
    layer = _layer(rng, "lstm", "forward", 6, 16)
    x = rng.uniform(-1, 1, (5, 4, 6)).astype(np.float32)
    em = layer.to("mli2-sa8", calibration=x)
    em(x)  # 5·4·(4·16·22) multiply-adds: far below SPLIT_MIN_MACS
    old = compiled.threads()
    compiled.set_threads(1)
    try:
        monkeypatch.setattr(batch_split, "SPLIT_MIN_MACS", 0)
        em(x)
    finally:
        compiled.set_threads(old)
    assert calls == []
    with compiled.thread_limit(1):  # a caller's limit (a partitioned model's one-thread mode) holds here too
        compiled.set_threads(max(2, old))
        try:
            em(x)
        finally:
            compiled.set_threads(old)
    assert calls == []


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def _set_blas_threads(n: int) -> None:
    """BLAS at n threads, set from a thread that then ends (threadpoolctl >= 3.8 gives control of OpenBLAS to the
    thread that set it while that thread lives)."""
    from threadpoolctl import ThreadpoolController

    t = threading.Thread(target=lambda: ThreadpoolController().limit(limits=n, user_api="blas"))
    t.start()
    t.join()


def test_concurrent_split_calls_restore_the_blas_threads(always_split):
    """Two split calls on two threads that end in the opposite order of their start: BLAS stays on one thread
    while either runs and is back to its setting after both (two threadpoolctl limits ending out of order used to
    leave it on one thread for good)."""
    original = _blas_threads()
    if not original:
        pytest.skip("no BLAS thread pool loaded")
    entered = [threading.Event(), threading.Event()]
    release = [threading.Event(), threading.Event()]
    seen = {}

    def run_for(i):
        def run(x, states, lens):
            if x[0, 0, 0] == 1:  # the block of row 0 (whichever thread claimed it): wait for the test
                seen[i] = _blas_threads()
                entered[i].set()
                assert release[i].wait(30)
            rows = x.shape[1]
            return np.zeros((1, 1, rows, 1)), (np.zeros((1, rows, 1)),)
        return run

    splitter = batch_split.RowSplitter(macs_per_row_step=1)
    x, states = np.zeros((1, 2, 1)), (np.zeros((1, 2, 1)),)
    x[0, 0, 0] = 1
    calls = [threading.Thread(target=splitter, args=(run_for(i), x, states, None), name=f"call{i}") for i in (0, 1)]
    _set_blas_threads(3)
    try:
        before = _blas_threads()
        for i in (0, 1):
            calls[i].start()
            assert entered[i].wait(30)
        release[0].set()
        calls[0].join(30)
        during = _blas_threads()  # the second call still runs
        release[1].set()
        calls[1].join(30)
        after = _blas_threads()
    finally:
        _set_blas_threads(original[0])
    assert len(always_split) == 2, "the calls were not split"
    assert seen[0] == seen[1] == during == [1] * len(before), (seen, during)
    assert after == before == [3] * len(before), (before, after)


def _rowwise(x, states, lens):
    """A stand-in target: per row, Y[t, 0, b] = cumulative sum over t of x[t, b] + state; state out = last Y."""
    Y = (np.cumsum(x, axis=0) + states[0][0][None])[:, None]
    return Y, (Y[-1],)


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_blocks_are_claimed_and_joined_in_row_order(monkeypatch, threads):
    """With 2-4 threads a call is cut into blocks of rows (about two per thread) whose joined result equals one
    call over all rows; when the workers never start (their cores taken), the caller runs every block itself."""
    monkeypatch.setattr(batch_split, "SPLIT_MIN_MACS", 2)
    rng = np.random.default_rng(threads)
    x = rng.uniform(-1, 1, (5, 23, 3))
    states = (rng.uniform(-1, 1, (1, 23, 3)),)
    want = _rowwise(x, states, None)
    splitter = batch_split.RowSplitter(macs_per_row_step=1)
    assert len(splitter.blocks(5, 23, threads)) == 2 * threads
    old = compiled.threads()
    compiled.set_threads(threads)
    try:
        got = splitter(_rowwise, x, states, None)

        class Stalled:  # an executor whose threads never get to run
            def submit(self, *a):
                return None

        monkeypatch.setattr(batch_split, "_executor", lambda: Stalled())
        alone = splitter(_rowwise, x, states, None)
    finally:
        compiled.set_threads(old)
    for out in (got, alone):
        assert np.array_equal(out[0], want[0]) and np.array_equal(out[1][0], want[1][0])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux affinity and two CPUs")
def test_a_helper_leaves_the_callers_cpu_and_keeps_its_own_cpu_set():
    """The splits' helpers call driver.leave_cpu(caller's CPU) first: a thread on that CPU moves to another one
    (counted in pool_stats' "moved") and keeps its own affinity set."""
    from fusedrnn.cells.compiled import driver

    if driver.current_cpu() < 0:
        pytest.skip("the compiled kernel (or sched_getcpu) is unavailable")
    seen = {}

    def helper():
        own = os.sched_getaffinity(0)
        cpu = driver.current_cpu()
        moved = driver.pool_stats()["moved"]
        driver.leave_cpu(cpu)
        seen["moved_away"] = driver.current_cpu() != cpu
        seen["counted"] = driver.pool_stats()["moved"] - moved
        seen["kept_set"] = os.sched_getaffinity(0) == own
        moved = driver.pool_stats()["moved"]
        driver.leave_cpu(-1)  # no caller CPU (the kernel could not say): nothing happens
        seen["no_op"] = driver.pool_stats()["moved"] == moved

    t = threading.Thread(target=helper)
    t.start()
    t.join()
    assert seen == {"moved_away": True, "counted": 1, "kept_set": True, "no_op": True}
