"""Work on local worker processes that stop when told to: the pool of ``kvroof sweep --jobs``.

:func:`run_in_processes` gives each of ``jobs`` worker processes one item at a time and yields
each item's result as it comes. Unlike :class:`concurrent.futures.ProcessPoolExecutor`, it
stops at once when its caller stops (Ctrl-C, SIGTERM, an error, or closing the generator):
queued items are dropped and the workers are terminated, not waited for. A worker that runs
one item longer than ``timeout`` seconds is stopped and replaced, and one that dies (killed for
memory, say) is replaced too; either item's result is a :class:`Lost` that says why.

Workers ignore SIGINT (a terminal sends Ctrl-C to the whole process group: the parent decides
what stops) and die quietly on SIGTERM, which is how the parent stops them; both signals are
blocked from the moment a worker is started until it has set that up, so a Ctrl-C at any
moment never prints a worker's traceback. No thread runs in the parent, so nothing is left to
finalize when the interpreter exits.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["Lost", "run_in_processes"]

_STOP_WAIT = 2.0
"""Seconds a terminated worker gets to die before it is killed."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NOTHING: Any = object()


@dataclass(frozen=True)
class Lost:
    """An item without a result: why (its worker timed out, died, or failed outside it).
    ``stall``: the reason is the whole run's (a cluster on which nothing finished), given to
    every unfinished item."""

    reason: str
    stall: bool = False


def _worker_signals() -> None:
    """In a worker: ignore Ctrl-C, die quietly on SIGTERM, then let both through."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def _serve(conn: Connection, call: Callable[[Any], Any]) -> None:
    """A worker's loop: an item in, its result out, until told to stop (``None``)."""
    _worker_signals()
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if item is None:
            return
        try:
            result = call(item)
        except Exception as error:  # call catches its own; this is a last resort
            result = Lost(f"{type(error).__name__}: {error}")
        try:
            conn.send(result)
        except (EOFError, OSError):
            return
        except Exception as error:  # a result that does not pickle
            conn.send(Lost(f"its result could not be sent back ({type(error).__name__}: "
                           f"{error})"))


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this thread while a worker starts: it inherits them
    blocked (and unblocks them once it ignores Ctrl-C); here they arrive when the block ends."""
    if not hasattr(signal, "pthread_sigmask") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Worker:
    def __init__(self, context: Any, call: Callable[[Any], Any]) -> None:
        self.conn, self._there = context.Pipe()
        self.process = context.Process(target=_serve, args=(self._there, call), daemon=True)
        self.position: int | None = None  # the item it runs
        self.started = 0.0

    def start(self) -> None:
        with _signals_blocked():
            self.process.start()
        self._there.close()

    def give(self, position: int, item: Any) -> None:
        self.position = position
        self.started = time.monotonic()
        with contextlib.suppress(OSError, ValueError):  # gone: its sentinel will say so
            self.conn.send(item)

    def stop(self, *, now: bool) -> None:
        """Tell it to stop (``now``: terminate it), wait briefly, kill it if it is still
        there."""
        if self.process.is_alive():
            if now:
                self.process.terminate()
            else:
                with contextlib.suppress(OSError, ValueError):
                    self.conn.send(None)
            self.process.join(_STOP_WAIT)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(_STOP_WAIT)
        self.conn.close()
        self._there.close()
        with contextlib.suppress(ValueError):
            self.process.close()


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"its worker process was killed by {name}{hint}"
    return f"its worker process ended unexpectedly (exit status {exitcode})"


def run_in_processes(call: Callable[[Any], Any], items: Sequence[Any], jobs: int,
                     timeout: float | None = None) -> Generator[tuple[int, Any], None, None]:
    """``(position, call(item))`` for each of ``items``, in the order they finish, from
    ``jobs`` worker processes; a :class:`Lost` in place of a result when the worker ran past
    ``timeout`` seconds on the item or died. ``call`` must be picklable (a module's function)
    and should catch its own exceptions. Ending the iteration early stops every worker."""
    context = multiprocessing.get_context()
    pending = deque(enumerate(items))
    workers: list[_Worker] = []

    def fresh() -> _Worker:
        worker = _Worker(context, call)
        workers.append(worker)  # before it starts: whatever happens next, it is stopped
        worker.start()
        return worker

    try:
        for _ in range(min(jobs, len(pending))):
            fresh()
        for worker in workers:
            worker.give(*pending.popleft())
        while any(worker.position is not None for worker in workers):
            busy = [worker for worker in workers if worker.position is not None]
            wait_for = None
            if timeout is not None:
                deadline = min(worker.started for worker in busy) + timeout
                wait_for = max(0.0, deadline - time.monotonic())
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], wait_for)
            finished: list[tuple[int, Any]] = []
            for worker in busy:
                result: Any
                position = worker.position
                assert position is not None
                if worker.conn in ready or worker.process.sentinel in ready:
                    try:
                        result = worker.conn.recv() if worker.conn.poll() else _NOTHING
                    except (EOFError, OSError):
                        result = _NOTHING
                    if result is _NOTHING:
                        worker.process.join(_STOP_WAIT)
                        result = Lost(_death(worker.process.exitcode))
                elif timeout is not None and time.monotonic() - worker.started >= timeout:
                    result = Lost(f"timed out after {timeout:g} s (--timeout)")
                else:
                    continue
                worker.position = None
                finished.append((position, result))
                if isinstance(result, Lost):  # a worker stalled or gone: a fresh one
                    workers.remove(worker)
                    worker.stop(now=True)
                    if pending:
                        worker = fresh()
                if pending:
                    worker.give(*pending.popleft())
                elif worker in workers:
                    workers.remove(worker)
                    worker.stop(now=False)
            yield from finished
    finally:
        for worker in workers:
            worker.stop(now=True)
