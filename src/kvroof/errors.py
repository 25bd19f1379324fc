"""Errors kvroof raises on bad input. Each prints as one line that says where and what."""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

__all__ = ["CommandError", "KvroofError", "SpecError", "UnknownNameError", "clip", "short_repr"]

SHORT: int = 80
"""Characters of a user's value an error message shows at most."""


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr (a few items per level, a few levels), safe on any input."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxdict = 5
        self.maxstring = SHORT
        self.maxother = SHORT

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # repr of a 5000-digit int raises (and is no use)
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()


class CommandError(Exception):
    """A command-line problem that is not a spec or value error (a bad path, say); the command
    line prints it as one line and exits with status 2."""


def clip(text: str, limit: int = SHORT) -> str:
    """``text`` cut to ``limit`` characters (``...`` marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(value: Any, limit: int = SHORT) -> str:
    """``repr(value)`` for an error message: bounded work, at most ``limit`` characters, so
    that no untrusted input is ever shown (or even formatted) whole."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__ must not hide the error being reported
        text = f"<{type(value).__name__}>"
    return clip(text, limit)


class KvroofError(ValueError):
    """Base of every error kvroof raises for bad input (the CLI turns it into exit status 2)."""


class SpecError(KvroofError):
    """A spec file or spec value is wrong; the message names the file and field."""

    def __init__(self, message: str, path: str | Path | None = None, field: str = "") -> None:
        self.path = None if path is None else Path(path)
        self.field = field
        self.reason = message
        parts = [str(self.path)] if self.path is not None else []
        if field:
            parts.append(field)
        parts.append(message)
        super().__init__(": ".join(parts))


class UnknownNameError(KvroofError, LookupError):
    """No spec of the requested kind has this name or alias; the message lists close names."""

    def __init__(self, kind: str, name: str, suggestions: list[str], skipped: int = 0) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        if skipped:  # the name may be in a file that could not be read
            hint += (f" ({skipped} of your spec files or folders could not be read: see the "
                     f"warning{'' if skipped == 1 else 's'} above)")
        super().__init__(
            f"unknown {kind} {short_repr(name)}{hint} (`kvroof list {kind}s` lists them)")

    def __str__(self) -> str:
        return str(self.args[0])


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the command line's handler: a KeyboardInterrupt,
    so every ``finally`` and ``except KeyboardInterrupt`` that cleans up after Ctrl-C cleans
    up after a SIGTERM too (the command then ends with ``kvroof: terminated``, status 143)."""
