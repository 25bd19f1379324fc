"""A registered spec and where it came from (a built-in file, validated on first use, or a
user's file), and the lookup key of a name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from kvroof.specs.loader import SPEC_TYPES, Spec, validate_spec

__all__ = ["KINDS", "Entry", "SpecKind", "kind_of", "normalize_name"]

SpecKind = Literal["accelerator", "link", "system", "model", "engine"]
KINDS: Final[tuple[SpecKind, ...]] = ("accelerator", "link", "system", "model", "engine")


def normalize_name(name: str) -> str:
    """The lookup key of a name: case-folded, with ``_`` and spaces read as ``-``."""
    return name.strip().casefold().replace("_", "-").replace(" ", "-")


def kind_of(spec: Spec) -> SpecKind:
    """The kind of ``spec`` (``model``, ``system``, ...)."""
    for kind, cls in SPEC_TYPES.items():
        if isinstance(spec, cls):
            return kind  # type: ignore[return-value]
    raise TypeError(f"not a spec: {type(spec).__name__}")


class Entry:
    """A registered spec and where it came from.

    A built-in spec is validated when it is first used (``spec``): the command line then builds
    only the spec classes it needs, and the test suite validates every built-in file up front.
    """

    __slots__ = ("_data", "_spec", "builtin", "kind", "path")

    def __init__(self, spec: Spec | None, path: Path | None, builtin: bool, *,
                 kind: str | None = None, data: dict[str, Any] | None = None) -> None:
        if spec is None and (kind is None or data is None):
            raise TypeError("an entry needs a spec, or the kind and data to validate later")
        self._spec = spec
        self._data = data
        self.kind: str = kind if kind is not None else kind_of(spec)  # type: ignore[arg-type]
        self.path = path
        self.builtin = builtin

    @property
    def spec(self) -> Spec:
        """The validated spec."""
        if self._spec is None:
            assert self._data is not None
            self._spec = validate_spec(self.kind, self._data, self.path)
            self._data = None
        return self._spec

    @property
    def name(self) -> str:
        """The spec's name (without validating a built-in)."""
        if self._spec is not None:
            return self._spec.name
        assert self._data is not None
        return str(self._data["name"])

    @property
    def aliases(self) -> tuple[str, ...]:
        """The spec's aliases (without validating a built-in)."""
        if self._spec is not None:
            return self._spec.aliases
        assert self._data is not None
        return tuple(str(alias) for alias in self._data.get("aliases") or ())

    def __repr__(self) -> str:
        return f"Entry({self.kind} {self.name!r}, path={self.path}, builtin={self.builtin})"
