"""Errors kvroof raises on bad input. Each prints as one line that says where and what."""

from __future__ import annotations

from pathlib import Path

__all__ = ["KvroofError", "SpecError", "UnknownNameError"]


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

    def __init__(self, kind: str, name: str, suggestions: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} {name!r}{hint} (`kvroof list {kind}s` lists them)")

    def __str__(self) -> str:
        return str(self.args[0])
