"""Read one spec file (YAML) into a typed spec, with one-line errors naming file and field.

A spec file is a YAML mapping whose ``spec`` key says what it describes (``accelerator``,
``link``, ``system``, ``model`` or ``engine``); the other keys are the fields of that spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from kvroof.errors import SpecError, short_repr
from kvroof.specs.base import SourcedSpec
from kvroof.specs.engine import Engine
from kvroof.specs.hardware import Accelerator, Link, System
from kvroof.specs.model import ModelSpec

__all__ = [
    "MAX_SPEC_BYTES",
    "SPEC_TYPES",
    "Spec",
    "load_spec_file",
    "validate_spec",
    "validation_message",
]

MAX_SPEC_BYTES: Final = 1 << 20
"""Largest spec file read (1 MiB; the largest built-in one is under 5 kB)."""

Spec = Accelerator | Link | System | ModelSpec | Engine

SPEC_TYPES: Final[dict[str, type[Accelerator] | type[Link] | type[System] | type[ModelSpec]
                        | type[Engine]]] = {
    "accelerator": Accelerator,
    "link": Link,
    "system": System,
    "model": ModelSpec,
    "engine": Engine,
}

# Tags of discriminated unions appear in pydantic's error locations; they are not field names.
_UNION_TAGS: Final = frozenset({"gqa", "mha", "mqa", "mla", "dense", "moe"})
_LAYER_TAGS: Final = frozenset({"full", "sliding", "chunked", "linear", "sparse", "shared"})


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for index, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
            continue
        if item in _UNION_TAGS and index > 0 and loc[index - 1] in ("attention", "ffn"):
            continue
        if item in _LAYER_TAGS and index > 1 and loc[index - 2] == "kinds":
            continue  # layers.kinds.<name>.<kind tag>
        if item in ("str", "Repeat") and index > 1 and loc[index - 2] == "pattern":
            continue  # the members of a pattern item's union
        if "[" in item or item.startswith("function-"):
            continue  # pydantic's internal validator names
        parts.append(("." if parts else "") + item)
    return "".join(parts)


def validation_message(
    error: ValidationError, cls: type[SourcedSpec] | None = None
) -> tuple[str, str]:
    """Turn a pydantic error into (field, message) for the first problem, noting any others."""
    errors = error.errors(include_url=False)
    first = errors[0]
    field = _location(tuple(first["loc"]))
    kind = first["type"]
    if kind == "missing":
        message = "missing field"
    elif kind == "extra_forbidden":
        message = f"unknown key (value {short_repr(first['input'])})"
        if cls is not None and "." not in field:
            allowed = ", ".join(name for name in cls.model_fields)
            message += f"; allowed keys: {allowed}"
    elif kind == "union_tag_invalid":
        message = str(first["msg"])
    else:
        message = str(first["msg"]).removeprefix("Value error, ")
        if kind not in ("value_error", "assertion_error") and "input" in first:
            message += f" (got {short_repr(first['input'])})"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return field, message


def validate_spec(kind: str, data: dict[str, Any], path: str | Path | None = None) -> Spec:
    """Validate ``data`` (the fields of a spec, units as text) as a spec of ``kind``."""
    cls = SPEC_TYPES.get(kind)
    if cls is None:
        raise SpecError(
            f"unknown spec kind {short_repr(kind)} (expected one of {', '.join(SPEC_TYPES)})",
            path, "spec")
    try:
        return cls.model_validate(data, context={"from_file": True})
    except ValidationError as error:
        field, message = validation_message(error, cls)
        raise SpecError(message, path, field) from None


def load_spec_file(path: str | Path, *, packaged: bool = False) -> Spec:
    """Load and validate one spec file; raise :class:`SpecError` naming the file and field.

    The file is read with the limits of :mod:`kvroof.files.reading` (at most
    :data:`MAX_SPEC_BYTES`, UTF-8, bounded nesting and YAML aliases, no key written twice);
    ``packaged``: a built-in spec shipped with kvroof, parsed by libyaml alone (the tests hold
    every built-in to the same limits)."""
    from kvroof.files.yaml_reading import (  # PyYAML only when needed
        load_packaged_yaml,
        load_yaml_file,
    )

    path = Path(path)
    if packaged:
        data = load_packaged_yaml(path, MAX_SPEC_BYTES, "spec files")
    else:
        data = load_yaml_file(path, MAX_SPEC_BYTES, "spec files")
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of fields (key: value) at the top level", path)
    data = dict(data)
    kind = data.pop("spec", None)
    if kind is None:
        raise SpecError(
            f"missing field (say what the file describes: one of {', '.join(SPEC_TYPES)})",
            path,
            "spec",
        )
    return validate_spec(str(kind), data, path)
