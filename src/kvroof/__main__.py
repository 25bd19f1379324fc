"""``python -m kvroof`` and the ``kvroof`` command: the command line of :mod:`kvroof.cli`."""

from __future__ import annotations

import sys
from types import ModuleType


def entry() -> int:
    """Run the command line. Ctrl-C or SIGTERM at any moment after start-up ends with one line
    and status 130 or 143 (:mod:`kvroof.cli.signals`): while the command line itself is
    imported (numpy and the cost model load first), while the command runs, and after it has
    finished, while the process exits."""
    signals: ModuleType | None = None
    status = 0
    try:
        try:
            from kvroof.cli import signals as loaded

            signals = loaded
            loaded.install()
            from kvroof.cli.main import main

            status = main()
        finally:
            if signals is not None:
                signals.quiet()  # from here on, signals are only recorded
    except KeyboardInterrupt as stop:  # one that main() did not catch (Terminated too)
        if signals is None:  # before the handlers were installed: Python's own Ctrl-C
            print("kvroof: interrupted", file=sys.stderr)
            return 130
        status = signals.say_stopped(stop)
    return status if signals is None else int(signals.finish(status))


if __name__ == "__main__":
    sys.exit(entry())
