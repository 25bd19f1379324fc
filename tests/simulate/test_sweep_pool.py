"""The worker pool of ``kvroof sweep --jobs``: results as they come, a stalled or dead worker
replaced (its item lost with the reason), and every worker stopped at once when the caller
stops (issue 24, item 6; issue 23, item 13)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kvroof.simulate.sweep_pool import Lost, run_in_processes


def work(item: float) -> float:
    """Sleep ``item`` seconds; a negative item kills its own process (as the OOM killer
    would)."""
    if item < 0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(item)
    return item * 2


def broken(item: int) -> int:
    raise ValueError(f"bad item {item}")


def test_results_and_lost_workers() -> None:
    results = dict(run_in_processes(work, [0.0, -1.0, 0.1, 0.2], jobs=2))
    assert results[0] == 0.0 and results[2] == 0.2 and results[3] == 0.4
    assert results[1] == Lost("its worker process was killed by SIGKILL (out of memory?)")


def test_a_call_that_raises_loses_only_its_item() -> None:
    results = dict(run_in_processes(broken, [1, 2], jobs=2))
    assert results == {0: Lost("ValueError: bad item 1"), 1: Lost("ValueError: bad item 2")}


def test_a_stalled_item_times_out_and_the_rest_run() -> None:
    start = time.monotonic()
    results = dict(run_in_processes(work, [60.0, 0.0, 0.1], jobs=1, timeout=2.0))
    assert time.monotonic() - start < 20
    assert results == {0: Lost("timed out after 2 s (--timeout)"), 1: 0.0, 2: 0.2}


def test_stopping_early_stops_every_worker() -> None:
    """Closing the iteration (what Ctrl-C does to it) terminates the busy workers: queued
    items are dropped, nothing is waited for."""
    source = run_in_processes(work, [0.0, 60.0, 60.0, 60.0], jobs=2)
    assert next(source) == (0, 0.0)
    import multiprocessing

    pids = [worker.pid for worker in multiprocessing.active_children()]
    assert len(pids) == 2
    start = time.monotonic()
    source.close()
    assert time.monotonic() - start < 5
    for pid in pids:  # ended and reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid or 0, 0)


def test_workers_ignore_ctrl_c() -> None:
    """A Ctrl-C sent to the process group reaches the workers too: they ignore it (the parent
    decides), and print no traceback."""
    import multiprocessing

    source = run_in_processes(work, [0.5, 0.5], jobs=2)
    try:
        time.sleep(0.3)
        for worker in multiprocessing.active_children():
            os.kill(worker.pid or 0, signal.SIGINT)
        assert sorted(source) == [(0, 1.0), (1, 1.0)]
    finally:
        source.close()


@pytest.mark.parametrize("jobs", [1, 3])
def test_more_workers_than_items(jobs: int) -> None:
    assert sorted(run_in_processes(work, [0.0, 0.0], jobs=jobs)) == [(0, 0.0), (1, 0.0)]
