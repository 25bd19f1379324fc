"""``python -m kvroof`` and the ``kvroof`` command: the command line of :mod:`kvroof.cli`."""

from __future__ import annotations

import sys


def entry() -> int:
    """Run the command line. Ctrl-C while the command line itself is imported (numpy and the
    cost model load first) ends like Ctrl-C anywhere else: one line, exit status 130."""
    try:
        from kvroof.cli.main import main
    except KeyboardInterrupt:
        print("kvroof: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(entry())
