"""Work on an existing Dask cluster (``kvroof sweep --dask ADDRESS``; the optional extra
``kvroof[distributed]``).

:func:`run_on_dask` submits every item and yields each result as it comes; an item that fails
outside ``call`` (its worker died too often, ``KilledWorker``; it was cancelled) gives a
:class:`~kvroof.simulate.sweep_pool.Lost` naming the error. The cluster is the user's: kvroof
only submits, and on the way out (done, Ctrl-C, SIGTERM, an error) cancels what it submitted
and closes its client. Workers that leave the cluster while items remain are reported (the
scheduler reruns their items elsewhere). With ``timeout``, a cluster on which no item has
finished for that many seconds (no workers, workers paused for memory, a stalled item) ends the
run: every unfinished item gets one :class:`Lost` with ``stall`` set, whose reason says what the
cluster looked like.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Sequence
from importlib import import_module
from typing import Any

from kvroof.errors import KvroofError, clip
from kvroof.simulate.sweep_pool import Lost
from kvroof.units import Kind, format_quantity

__all__ = ["run_on_dask"]

_POLL = 5.0
"""Seconds between looks at the cluster's workers while waiting."""
_CLOSE_WAIT = 5.0
"""Seconds the client gets to close."""


def _distributed() -> Any:
    try:
        return import_module("distributed")  # untyped: used through Any
    except ImportError:
        raise KvroofError("--dask needs the 'distributed' package (pip install "
                          "'kvroof[distributed]')") from None


def _workers(client: Any) -> dict[str, Any] | None:
    """The cluster's workers as the scheduler reports them (None: no answer)."""
    try:
        info = client.scheduler_info()
    except Exception:
        return None
    workers = info.get("workers") if isinstance(info, dict) else None
    return workers if isinstance(workers, dict) else None


def cluster_state(workers: dict[str, Any] | None) -> str:
    """A few words on the cluster: its workers, how many are paused, their memory."""
    if workers is None:
        return "the scheduler did not answer"
    if not workers:
        return "it has no workers"

    def number(value: Any) -> float:
        return float(value) if isinstance(value, int | float) else 0.0

    paused = sum(1 for info in workers.values() if info.get("status") == "paused")
    used = sum(number(info.get("metrics", {}).get("memory")) for info in workers.values())
    limit = sum(number(info.get("memory_limit")) for info in workers.values())
    memory = format_quantity(used, Kind.CAPACITY)
    if limit:
        memory += f" of {format_quantity(limit, Kind.CAPACITY)}"
    count = f"{len(workers)} worker{'s' if len(workers) != 1 else ''}"
    if paused:
        return f"{count}, {paused} paused for memory; {memory} in use"
    return f"{count}; {memory} in use"


def _error(error: BaseException) -> str:
    return clip(" ".join(f"{type(error).__name__}: {error}".split()), 500)


def run_on_dask(call: Callable[[Any], Any], items: Sequence[Any], address: str, *,
                timeout: float | None = None,
                note: Callable[[str], None] | None = None,
                ) -> Generator[tuple[int, Any], None, None]:
    """``(position, call(item))`` for each of ``items`` as they finish on the Dask cluster at
    ``address`` (see the module docstring); ``note`` is told when workers leave."""
    distributed = _distributed()
    try:
        client = distributed.Client(address, timeout=30)
    except (OSError, ValueError, TypeError) as error:
        raise KvroofError(f"--dask {address}: cannot connect ({_error(error)})") from None
    remaining: dict[Any, int] = {}
    try:
        futures = client.map(call, list(items), pure=False)
        remaining = {future: position for position, future in enumerate(futures)}
        del futures  # a result taken is let go (the cluster need not keep, nor recompute it)
        known = _workers(client) or {}
        last_done = last_look = time.monotonic()
        while remaining:
            wait_for = _POLL if timeout is None else min(
                _POLL, max(0.0, last_done + timeout - time.monotonic()))
            try:
                done = distributed.wait(list(remaining), timeout=wait_for,
                                        return_when="FIRST_COMPLETED").done
            except (TimeoutError, getattr(distributed, "TimeoutError", TimeoutError)):
                done = set()
            now = time.monotonic()
            if done:
                last_done = now
            for future in sorted(done, key=lambda f: remaining[f]):
                position = remaining.pop(future)
                try:
                    result = future.result()
                except Exception as error:  # KilledWorker, cancelled, ...
                    result = Lost(_error(error))
                yield position, result
            if remaining and now - last_look >= _POLL:
                last_look = now
                current = _workers(client)
                if current is not None:
                    gone = sorted(set(known) - set(current))
                    if gone and note is not None:
                        note(f"{len(gone)} Dask worker{'s' if len(gone) > 1 else ''} left "
                             f"the cluster ({', '.join(gone[:3])}"
                             f"{', ...' if len(gone) > 3 else ''}); the scheduler reruns "
                             "their unfinished points on the others")
                    known = current
            if remaining and timeout is not None and now - last_done >= timeout:
                state = cluster_state(_workers(client))
                reason = (f"no grid point finished within {timeout:g} s on the Dask cluster "
                          f"at {address} ({state})")
                for position in sorted(remaining.values()):
                    yield position, Lost(reason, stall=True)
                return
    finally:
        if remaining:
            with contextlib.suppress(Exception):
                client.cancel(list(remaining), force=True)
        with contextlib.suppress(Exception):
            client.close(timeout=_CLOSE_WAIT)
