"""A spec's fields as text for people (with units) and as the data of a spec file (SI units at
full precision): the inverse of loading, knowing nothing but the fields and their units."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kvroof.units import Kind, UnitOf, format_quantity

__all__ = ["field_kind", "spec_file_data", "spec_rows"]


def _kind_in(annotation: Any) -> Kind | None:
    for item in getattr(annotation, "__metadata__", ()):
        if isinstance(item, UnitOf):
            return item.kind
    for arg in get_args(annotation):
        found = _kind_in(arg)
        if found is not None:
            return found
    return None


def field_kind(info: FieldInfo) -> Kind | None:
    """The unit kind of a field (its ``UnitOf`` mark), or None for a plain value."""
    for item in info.metadata:
        if isinstance(item, UnitOf):
            return item.kind
    return _kind_in(info.annotation)


def _format(value: Any, kind: Kind | None) -> str:
    if kind is not None and isinstance(value, float):
        return format_quantity(value, kind)
    if isinstance(value, float) and value >= 1e9:
        return f"{value / 1e9:.4g}B"  # parameter counts
    if isinstance(value, float) and value.is_integer():
        return f"{value:.4g}"
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value)
    return str(value)


def spec_rows(spec: BaseModel, prefix: str = "") -> list[tuple[str, str]]:
    """(field, text with units) for every set field of ``spec``, nested fields dotted."""
    rows: list[tuple[str, str]] = []
    for name, info in type(spec).model_fields.items():
        value = getattr(spec, name)
        if value is None or value == () or value == {} or name in ("sources", "notes"):
            continue
        label = f"{prefix}{name}"
        kind = field_kind(info)
        if isinstance(value, BaseModel):
            rows += spec_rows(value, label + ".")
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            for index, item in enumerate(value):
                rows += spec_rows(item, f"{label}[{index}].")
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    rows += spec_rows(item, f"{label}.{key}.")
                else:
                    rows.append((f"{label}.{key}", _format(item, kind)))
        else:
            rows.append((label, _format(value, kind)))
    return rows


_BASE_UNITS: dict[Kind, str] = {
    Kind.COMPUTE: "FLOPS",
    Kind.BANDWIDTH: "B/s",
    Kind.CAPACITY: "B",
    Kind.POWER: "W",
    Kind.TIME: "s",
}


def _file_value(value: Any, kind: Kind | None) -> Any:
    if isinstance(value, BaseModel):
        return _model_data(value)
    if isinstance(value, dict):
        return {k: _file_value(v, kind) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_file_value(v, kind) for v in value]
    if kind is not None and isinstance(value, float):
        return f"{value!r} {_BASE_UNITS[kind]}"  # full precision, SI base unit
    return value


def _model_data(spec: BaseModel) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, info in type(spec).model_fields.items():
        value = getattr(spec, name)
        if value is None or value == () or value == {} or value == "":
            continue
        data[name] = _file_value(value, field_kind(info))
    return data


def spec_file_data(spec: BaseModel) -> dict[str, Any]:
    """``spec`` as the data of a spec file (``spec:`` kind first, quantities as text with SI
    units at full precision), ready for ``yaml.safe_dump``; loading it gives ``spec`` back."""
    kind: str = getattr(spec, "kind_name")  # noqa: B009  (a ClassVar of every spec class)
    return {"spec": kind, **_model_data(spec)}
