"""``python -m kvroof.cli``: the same command line as ``kvroof``."""

from __future__ import annotations

import sys

from kvroof.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
