"""How the command line stops on a signal. Ctrl-C (SIGINT) and SIGTERM raise in the main thread
(KeyboardInterrupt and :class:`~kvroof.errors.Terminated`), so every ``finally`` that removes
a temporary file or folder runs for both; the command then ends with one line,
``kvroof: interrupted`` (status 130) or ``kvroof: terminated`` (status 143).

A signal that arrives once the command has finished, while the process is exiting, is
recorded instead of raising (a traceback or a death by the signal there would break the
promise of one line): the process still says so and exits 130 or 143. A signal that
interrupts Python somewhere it turns into another exception (an extension module's import
fails with ``ImportError: initialization failed``) is recognised by :func:`signalled`.

A SIGINT that the process inherited as ignored (a background job of a script) stays ignored,
as Python itself leaves it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Final

from kvroof.errors import Terminated

__all__ = ["INTERRUPTED", "TERMINATED", "finish", "install", "quiet", "say_stopped", "signalled",
           "stopped_status"]

INTERRUPTED: Final = 130
"""Exit status after Ctrl-C (128 + SIGINT, as a shell reports it)."""
TERMINATED: Final = 143
"""Exit status after SIGTERM (128 + SIGTERM)."""

_received: list[int] = []
_late: list[int] = []


def _raise(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    if signum == signal.SIGTERM:
        raise Terminated
    raise KeyboardInterrupt


def _record(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _late.append(signum)


def _exit_if_stopped_late() -> None:
    """Last thing at exit: a signal recorded while the process was exiting ends it with the
    stop's line and status."""
    if _late:
        status = say_stopped(_late[-1])
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)


def install() -> None:
    """Raise KeyboardInterrupt on SIGINT and :class:`Terminated` on SIGTERM (main thread),
    unless the process inherited the signal as ignored."""
    for number in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, _raise)
    atexit.register(_exit_if_stopped_late)  # registered first, so it runs last


def signalled() -> int | None:
    """The last signal received since :func:`install`, or None."""
    return _received[-1] if _received else None


def stopped_status(stop: BaseException | int | None) -> int:
    """The exit status for a stop by ``stop`` (the exception or the signal number)."""
    terminated = isinstance(stop, Terminated) or stop == signal.SIGTERM
    return TERMINATED if terminated else INTERRUPTED


def say_stopped(stop: BaseException | int | None) -> int:
    """Say ``kvroof: interrupted`` (or ``terminated``) on stderr, on a line of its own (a
    progress line drawn in place on a terminal is cleared first); return the exit status."""
    status = stopped_status(stop)
    clear = "\r\x1b[K" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    word = "terminated" if status == TERMINATED else "interrupted"
    print(f"{clear}kvroof: {word}", file=sys.stderr)
    return status


def quiet() -> None:
    """The command has ended: from here on, signals are only recorded (see :func:`finish`)."""
    for number in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(number) is _raise:
            signal.signal(number, _record)


def finish(status: int) -> int:
    """The exit status of a command that ended with ``status``: the stop's (having said so)
    when a signal was recorded after :func:`quiet`; one recorded later still, while the
    process exits, ends it the same way (an exit handler registered by :func:`install`)."""
    quiet()
    if _late:
        late = _late[-1]
        _late.clear()
        return say_stopped(late)
    return status
