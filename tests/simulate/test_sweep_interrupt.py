"""Ctrl-C and SIGTERM to ``kvroof sweep`` (issue 24, item 6): the queued points are cancelled
and the workers stopped at once, the finished rows are written, and the command ends with one
line, ``kvroof: interrupted`` (130) or ``kvroof: terminated`` (143), with no traceback from
the workers (a terminal sends Ctrl-C to the whole process group, workers included).

The sweep runs in a child process of its own process group, with SIGINT and SIGTERM reset to
their defaults (a test run in the background of a script inherits SIGINT ignored); the signal
goes to the whole group once the progress bar says that the first point has finished."""

from __future__ import annotations

import csv
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.signal_children import default_stop_signals

# eight points of about a second each (400 requests decoded one at a time, every iteration
# stepped): the whole sweep takes several seconds more than a prompt stop may
CONFIG = """
model: llama-3.1-70b
hardware: paper-testbed:8
arrivals: {requests: 400, rps: 50, output_tokens: "250", seed: 1}
simulation: {fast_forward: false, max_num_seqs: 1}
grid:
  seed: [1, 2, 3, 4, 5, 6, 7, 8]
"""

PROMPT = 2.0
"""Seconds within which the sweep must end after the signal (it used to wait for every queued
point: 108 s after a Ctrl-C at 8 s)."""


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a zombie of the group: gone as far as we care
        return False
    return True


@pytest.mark.parametrize(("jobs", "number", "status", "word"), [
    ("2", signal.SIGINT, 130, "interrupted"),
    ("2", signal.SIGTERM, 143, "terminated"),
    ("1", signal.SIGINT, 130, "interrupted"),
])
def test_a_stopped_sweep_stops_at_once_and_keeps_its_rows(
        tmp_path: Path, jobs: str, number: signal.Signals, status: int, word: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(CONFIG)
    folder = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-m", "kvroof", "sweep", str(config), "--jobs", jobs, "-o",
         str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_stop_signals,
        start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert child.stderr is not None
    seen = b""
    sent = None
    try:
        selector = selectors.DefaultSelector()
        selector.register(child.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 120
        while b"simulations" not in seen:  # a progress line: a point has finished
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no progress line in 120 s: {seen!r}"
            if selector.select(remaining):
                chunk = os.read(child.stderr.fileno(), 65536)
                assert chunk, f"the sweep ended before a point finished: {seen!r}"
                seen += chunk
        os.killpg(child.pid, number)  # as a terminal does: every process of the group
        sent = time.monotonic()
        out, rest = child.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
    err = (seen + rest).decode()
    print(f"jobs {jobs}, {number.name}: ended {took:.2f} s after the signal")
    assert child.returncode == status, err
    assert err.endswith(f"kvroof: {word}\n"), err
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert took < PROMPT, f"ended {took:.1f} s after the signal"
    deadline = time.monotonic() + 10
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(child.pid), "a worker outlived the sweep"
    with (folder / "sweep.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert 1 <= len(rows) < 8 and [int(r["point"]) for r in rows] == sorted(
        int(r["point"]) for r in rows)
    with (folder / "failed.csv").open(newline="") as handle:
        unfinished = list(csv.DictReader(handle))
    assert len(rows) + len(unfinished) == 8
    assert all(row["error"] == f"not finished: {word}" for row in unfinished)
    assert not [p for p in tmp_path.rglob("*") if "kvroof-tmp" in p.name]
    assert out == b""  # -o: the table is not printed when stopped
