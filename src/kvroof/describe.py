"""Plain descriptions of specs for people and for JSON: fields with units, and derived figures."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kvroof.cost.kv import kv_bytes_per_token, kv_bytes_per_token_per_layer
from kvroof.cost.params import param_counts
from kvroof.specs.base import UnitOf
from kvroof.specs.loader import Spec
from kvroof.specs.model import ModelSpec
from kvroof.units import Kind, format_quantity

__all__ = ["derived_figures", "spec_file_data", "spec_rows", "spec_summary"]


def _kind_in(annotation: Any) -> Kind | None:
    for item in getattr(annotation, "__metadata__", ()):
        if isinstance(item, UnitOf):
            return item.kind
    for arg in get_args(annotation):
        found = _kind_in(arg)
        if found is not None:
            return found
    return None


def _field_kind(info: FieldInfo) -> Kind | None:
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
        kind = _field_kind(info)
        if isinstance(value, BaseModel):
            rows += spec_rows(value, label + ".")
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            for index, item in enumerate(value):
                rows += spec_rows(item, f"{label}[{index}].")
        elif isinstance(value, dict):
            rows += [(f"{label}.{key}", _format(item, kind)) for key, item in value.items()]
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
        data[name] = _file_value(value, _field_kind(info))
    return data


def spec_file_data(spec: Spec) -> dict[str, Any]:
    """``spec`` as the data of a spec file (``spec:`` kind first, quantities as text with SI
    units at full precision), ready for ``yaml.safe_dump``; loading it gives ``spec`` back."""
    return {"spec": type(spec).kind_name, **_model_data(spec)}


def derived_figures(spec: BaseModel) -> dict[str, float]:
    """Figures computed from the spec (SI): parameters and KV bytes for models."""
    if not isinstance(spec, ModelSpec):
        return {}
    counts = param_counts(spec)
    figures: dict[str, float] = {
        "params_total": float(counts.total),
        "params_active": float(counts.active),
        "params_active_without_embedding": float(counts.active_without_embedding),
        "kv_bytes_per_token": kv_bytes_per_token(spec, "bf16"),
        "kv_bytes_per_token_per_layer": kv_bytes_per_token_per_layer(spec, "bf16"),
    }
    if spec.sliding_window is not None:
        figures["kv_bytes_sliding_per_sequence"] = (
            spec.num_sliding_layers * spec.sliding_window.size
            * kv_bytes_per_token_per_layer(spec, "bf16")
        )
    return figures


def spec_summary(spec: Spec) -> str:
    """A one-line summary used by ``kvroof list``."""
    if isinstance(spec, ModelSpec):
        counts = param_counts(spec)
        return (
            f"{spec.attention.kind.upper()} {spec.ffn.kind}, {spec.num_layers} layers, "
            f"{counts.total / 1e9:.1f}B total / {counts.active / 1e9:.1f}B active, "
            f"KV {kv_bytes_per_token(spec) / 1e3:.1f} kB/token (bf16)"
        )
    rows = dict(spec_rows(spec))
    keys = {
        "accelerator": ("peak_compute.bf16", "hbm_bandwidth", "host_link"),
        "link": ("kind", "peak_bandwidth", "sustained_bandwidth"),
        "system": ("num_accelerators", "accelerator", "host_link"),
        "engine": ("version", "copy_method", "block_tokens", "loading"),
    }[type(spec).kind_name]
    return ", ".join(f"{key.split('.')[-1]} {rows[key]}" for key in keys if rows.get(key))
