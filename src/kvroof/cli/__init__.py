"""The ``kvroof`` command line. Each command family lives in its own module of this package;
handlers only parse flags and print: every number comes from the library."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from kvroof import __version__
from kvroof.cli import calibrate as calibrate_commands
from kvroof.cli import cost as cost_commands
from kvroof.cli import measure as measure_commands
from kvroof.cli import plot as plot_commands
from kvroof.cli import report as report_commands
from kvroof.cli import simulate as simulate_commands
from kvroof.cli import specs as specs_commands
from kvroof.cli import workload as workload_commands
from kvroof.cli.common import CommandError
from kvroof.errors import KvroofError

__all__ = ["INTERRUPTED", "build_parser", "interrupted", "main"]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"kvroof: error: {self.prog.removeprefix('kvroof ')}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="kvroof",
        description="Is prefill with offloaded KV cache limited by GPU compute or by the link?",
    )
    parser.add_argument("--version", action="version", version=f"kvroof {__version__}")
    parser.add_argument(
        "--spec-path",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of your own spec files (repeatable; added after KVROOF_SPEC_PATH)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    specs_commands.register(commands)
    cost_commands.register(commands)
    plot_commands.register(commands)
    report_commands.register(commands)
    workload_commands.register(commands)
    simulate_commands.register(commands)
    measure_commands.register(commands)
    calibrate_commands.register(commands)
    return parser


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"kvroof: warning: {message}", file=sys.stderr)


INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, as a shell reports it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status: 2 for bad input, with one line on
    stderr; 130 after Ctrl-C, with the one line ``kvroof: interrupted`` (outputs are written
    so that an interrupted command leaves the previous ones intact)."""
    try:
        return _run(argv)
    except KeyboardInterrupt:
        interrupted()
        return INTERRUPTED


def interrupted() -> None:
    """Say ``kvroof: interrupted`` on stderr, on a line of its own (a progress bar drawn in
    place on a terminal is cleared first)."""
    clear = "\r\x1b[K" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    print(f"{clear}kvroof: interrupted", file=sys.stderr)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = warnings.showwarning
    warnings.showwarning = _one_line_warning
    try:
        handler: Any = args.handler
        handler(args)
    except (KvroofError, CommandError) as error:
        print(f"kvroof: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    finally:
        warnings.showwarning = previous
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
