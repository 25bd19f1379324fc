"""The ``kvroof`` command line: the top-level parser, ``main`` and the one-line handling of
errors, warnings and Ctrl-C. Each command family lives in its own module of this package;
handlers only parse flags and print: every number comes from the library.

Only the module of the command being run is imported (:mod:`kvroof.cli.commands` names them), so
``kvroof --help`` loads neither numpy nor the cost model and ``kvroof kappa`` loads no plotting,
workload or measurement code.
"""

from __future__ import annotations

import argparse
import importlib
import re
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from kvroof._version import __version__
from kvroof.cli.commands import COMMANDS
from kvroof.cli.signals import INTERRUPTED, say_stopped, signalled
from kvroof.errors import CommandError, KvroofError

__all__ = ["INTERRUPTED", "NUMERIC_WARNINGS", "build_parser", "interrupted", "main"]


_GIVEN = "_kvroof_flags_given"
"""Namespace attribute recording, while one parser parses, which flag set which destination
(removed before the namespace is returned)."""


def _once(action: argparse.Action, namespace: argparse.Namespace,
          option_string: str | None) -> None:
    """Record that ``option_string`` set ``action.dest``; a second time is an input error."""
    if option_string is None:  # a positional argument: argparse counts those itself
        return
    given: dict[str, str] = namespace.__dict__.setdefault(_GIVEN, {})
    previous = given.get(action.dest)
    if previous is not None:
        what = "given twice" if previous == option_string else f"conflicts with {previous}"
        raise argparse.ArgumentError(action, what)
    given[action.dest] = option_string


class _StoreOnce(argparse._StoreAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class _StoreConstOnce(argparse._StoreConstAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class _StoreTrueOnce(argparse._StoreTrueAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class _StoreFalseOnce(argparse._StoreFalseAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class _BooleanOptionalOnce(argparse.BooleanOptionalAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2, which takes
    no abbreviated flags (``--mode`` is not ``--model`` where a command has no ``--mode``) and
    no flag twice (``--tp 1 --tp 2``, or ``--allreduce --no-allreduce``, is an error naming
    the flag; flags meant to repeat, such as ``--model`` of ``plot kappa-vs-t``, append). Its
    commands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        self.register("action", "store_const", _StoreConstOnce)
        self.register("action", "store_true", _StoreTrueOnce)
        self.register("action", "store_false", _StoreFalseOnce)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if kwargs.get("action") is argparse.BooleanOptionalAction:
            kwargs["action"] = _BooleanOptionalOnce
        return super().add_argument(*args, **kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> argparse._ArgumentGroup:
        group = super().add_argument_group(*args, **kwargs)
        add = group.add_argument

        def add_argument(*names: Any, **options: Any) -> argparse.Action:
            if options.get("action") is argparse.BooleanOptionalAction:
                options["action"] = _BooleanOptionalOnce
            return add(*names, **options)

        group.add_argument = add_argument  # type: ignore[method-assign]
        return group

    def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None,
            namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.__dict__.pop(_GIVEN, None)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("kvroof").strip()
        self.exit(2, f"kvroof: error: {where + ': ' if where else ''}{message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``kvroof``. ``command``: register that command's module in full and only a
    one-line entry for the others (their modules are not imported); ``None`` registers every
    command in full."""
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
    wanted = COMMANDS if command is None else {command: COMMANDS[command]} \
        if command in COMMANDS else {}
    for module in dict.fromkeys(module for module, _ in wanted.values()):
        importlib.import_module(module).register(commands)
    registered = commands.choices
    for name, (_, help_line) in COMMANDS.items():
        if name not in registered:
            commands.add_parser(name, help=help_line, add_help=False)
    # argparse lists commands in the order they were added; keep the table's order
    order = list(COMMANDS)
    commands._choices_actions.sort(key=lambda action: order.index(action.dest)
                                   if action.dest in order else len(order))
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first argument that is not a top-level option or
    the value of ``--spec-path``), or ``None``."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--spec-path":
            skip = True
        elif word == "--":
            continue
        elif not word.startswith("-"):
            return word
    return None


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"kvroof: warning: {message}", file=sys.stderr)


NUMERIC_WARNINGS = r"(overflow|divide by zero|invalid value|underflow) encountered"
"""numpy's floating-point warnings (``np.seterr``'s default ``warn``), which a command turns into
an error."""

def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status: 2 for bad input, with one line on
    stderr; 130 after Ctrl-C and 143 after SIGTERM, with the one line ``kvroof: interrupted``
    or ``kvroof: terminated`` (outputs are written so that an interrupted command leaves the
    previous ones intact; :mod:`kvroof.cli.signals`)."""
    try:
        return _run(argv)
    except KeyboardInterrupt as stop:  # Terminated too
        return say_stopped(stop)
    except Exception:
        received = signalled()
        if received is None:
            raise
        # a signal that surfaced as another exception (an extension module interrupted in
        # its import fails with "ImportError: initialization failed")
        return say_stopped(received)


def interrupted() -> None:
    """Say ``kvroof: interrupted`` on stderr, on a line of its own (a progress bar drawn in
    place on a terminal is cleared first)."""
    say_stopped(signal.SIGINT)


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(words) or "")
    args = parser.parse_args(words)
    previous = warnings.showwarning
    warnings.showwarning = _one_line_warning
    try:
        with warnings.catch_warnings():
            # numpy's floating-point warnings mean an input too large or too small to compute
            # with: an error, never a warning beside a wrong answer
            warnings.filterwarnings("error", message=NUMERIC_WARNINGS, category=RuntimeWarning)
            handler: Any = args.handler
            handler(args)
    except (KvroofError, CommandError) as error:
        print(f"kvroof: error: {error}", file=sys.stderr)
        return 2
    except RuntimeWarning as warning:
        if not re.match(NUMERIC_WARNINGS, str(warning)):
            raise
        print(f"kvroof: error: the values given are out of the range kvroof can compute with "
              f"({warning}); check the flags' magnitudes", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    finally:
        warnings.showwarning = previous
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
