"""Child processes for the interruption tests, with Ctrl-C and SIGTERM as a terminal gives them.

A process inherits what its parent ignores and blocks: a background job of a non-interactive
shell (``pytest &`` in a script, some CI runners) starts with SIGINT ignored (POSIX), and Python
then leaves it ignored, as kvroof does (:mod:`kvroof.cli.signals`). A child started from such a
test run would ignore the SIGINT a test sends it, and a test that checks what happens *if* an
interrupt arrives would pass without one ever arriving. Every interruption test starts its
children through :func:`default_stop_signals` (or :func:`run_child`), which puts SIGINT and
SIGTERM back to their defaults and unblocks them in the child before it runs Python;
``tests/test_signal_children.py`` checks that it does, from an ignored and a blocked SIGINT.

In-process tests that raise a real SIGINT use :func:`sigint_raises` for the same reason: the
test run's own SIGINT may be ignored.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["STOP_SIGNALS", "default_stop_signals", "run_child", "sigint_raises"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def default_stop_signals() -> None:
    """``preexec_fn`` for a child: SIGINT and SIGTERM unblocked and at their defaults (an
    ignored signal stays ignored across exec; a handled one is reset to the default)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


def run_child(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, **kwargs)`` with the stop
    signals at their defaults in the child."""
    return subprocess.run(args, capture_output=True, text=True, check=False,
                          preexec_fn=default_stop_signals, **kwargs)


@contextmanager
def sigint_raises() -> Iterator[None]:
    """In this process, for the block: SIGINT unblocked and raising KeyboardInterrupt
    (Python's own handler), whatever the test run inherited; restored afterwards."""
    previous = signal.getsignal(signal.SIGINT)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
