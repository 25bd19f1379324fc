"""The ``kvroof`` command line (:mod:`kvroof.cli.main`); each command family lives in its own
module of this package, imported only when its command runs (:mod:`kvroof.cli.commands`)."""

from kvroof.cli.main import INTERRUPTED, NUMERIC_WARNINGS, build_parser, interrupted, main

__all__ = ["INTERRUPTED", "NUMERIC_WARNINGS", "build_parser", "interrupted", "main"]
