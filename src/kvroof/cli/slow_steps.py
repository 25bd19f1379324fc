"""Progress lines for steps that can take long without a progress bar of their own: reading a
large trace, writing large CSVs, drawing figures (``kvroof workload stats``, ``kvroof
simulate``).

A step says what it does on stderr at once when its input is large (a file over
:data:`LARGE_FILE_BYTES`, or over :data:`LARGE_ROWS` rows to write), else once it has run
:data:`AFTER_SECONDS`; when it ends it says how long it took (``reading trace.jsonl (58.3 MB)
...``, then ``reading trace.jsonl done in 15.2 s: 183,600 requests``). A quick step on a small
input prints nothing, and ``quiet`` (``--quiet``, ``--json``) nothing at all.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvroof.display import duration
from kvroof.units import Kind, format_quantity

__all__ = ["AFTER_SECONDS", "LARGE_FILE_BYTES", "LARGE_ROWS", "Step", "file_label",
           "large_file", "many_rows", "slow_step"]

LARGE_FILE_BYTES = 20e6
"""A file this large is announced before it is read."""
LARGE_ROWS = 100_000
"""Writing this many rows is announced before it starts."""
AFTER_SECONDS = 1.0
"""Any other step is announced once it has taken this long."""


class Step:
    """What the body of :func:`slow_step` may add to its last line (``note``)."""

    def __init__(self) -> None:
        self.note = ""


def _size(path: str | Path) -> float:
    try:
        return float(os.stat(path).st_size)
    except OSError:
        return 0.0


def large_file(path: str | Path) -> bool:
    """Whether ``path`` is a file over :data:`LARGE_FILE_BYTES` (False when it is not there:
    the reader says why)."""
    return _size(path) > LARGE_FILE_BYTES


def many_rows(rows: int) -> bool:
    """Whether writing ``rows`` rows is large (over :data:`LARGE_ROWS`)."""
    return rows > LARGE_ROWS


def file_label(path: str | Path) -> str:
    """``NAME (SIZE)``: the file's name and size, for a step's line."""
    size = _size(path)
    name = Path(path).name
    return f"{name} ({format_quantity(size, Kind.CAPACITY, 3)})" if size else name


@contextmanager
def slow_step(label: str, *, large: bool = False, quiet: bool = False) -> Iterator[Step]:
    """Run the body as one step named ``label`` (module docstring): ``label ...`` on stderr at
    once when ``large``, else after :data:`AFTER_SECONDS`; ``label done in TIME`` (with the
    body's ``note``) when it ends, if it was announced."""
    step = Step()
    if quiet:
        yield step
        return
    lock = threading.Lock()
    said = False
    ended = False
    start = time.perf_counter()

    def announce() -> None:
        nonlocal said
        with lock:
            if ended:
                return
            said = True
            print(f"{label} ...", file=sys.stderr, flush=True)

    timer: threading.Timer | None = None
    if large:
        announce()
    else:
        timer = threading.Timer(AFTER_SECONDS, announce)
        timer.daemon = True
        timer.start()
    try:
        yield step
    finally:
        if timer is not None:
            timer.cancel()
        with lock:
            ended = True
            finished = said
    if finished:
        note = f": {step.note}" if step.note else ""
        print(f"{label} done in {duration(time.perf_counter() - start)}{note}",
              file=sys.stderr, flush=True)
