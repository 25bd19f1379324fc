"""Plain descriptions of specs for people and for JSON: fields with units, and derived figures.

The fields alone are the specs' own business (:mod:`kvroof.specs.fields`, re-exported here);
the derived figures (parameters, KV bytes) come from the cost model, which is why this module
sits above both.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kvroof.cost.groups import layer_groups
from kvroof.cost.kv import (
    kv_breakdown,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    state_bytes,
)
from kvroof.cost.params import param_counts
from kvroof.display import number
from kvroof.specs.base import SourcedSpec
from kvroof.specs.fields import spec_file_data, spec_rows
from kvroof.specs.loader import Spec
from kvroof.specs.model import ModelSpec

__all__ = ["derived_figures", "layer_group_rows", "layer_mix", "spec_file_data", "spec_html",
           "spec_rows", "spec_summary"]


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
    bounded = sum(g.count * g.bytes_per_position * g.most_kept
                  for g in kv_breakdown(spec, "bf16") if g.holds in ("window", "chunk"))
    if bounded:
        figures["kv_bytes_bounded_per_sequence"] = bounded
    if spec.sliding_window is not None:
        figures["kv_bytes_sliding_per_sequence"] = (
            spec.num_sliding_layers * (spec.sliding_window.size - 1)
            * kv_bytes_per_token_per_layer(spec, "bf16")
        )
    state = state_bytes(spec)
    if state:
        figures["state_bytes_per_request"] = state
    return figures


def spec_html(spec: SourcedSpec) -> str:
    """A spec as an HTML table: its fields with units, the figures derived from it and its
    sources (what a spec shows in Jupyter)."""
    from kvroof.display import html_table

    derived = {name: number(value) for name, value in derived_figures(spec).items()}
    return html_table(spec.html_rows(derived), f"{spec.kind_name} {spec.name}: {spec.label}")


def layer_group_rows(spec: ModelSpec, kv_dtype: str = "bf16") -> list[dict[str, Any]]:
    """One row per layer group (:mod:`kvroof.cost.groups`): layers, kind, what each keeps
    (bytes per cached token and how many tokens, fixed state) and its FLOPs per new token and
    per (query, key) pair (MLA expanded, as vLLM and SGLang prefill)."""
    rows = []
    for group in layer_groups(spec):
        holds = {"all": "every token", "window": f"last {group.keep:g} tokens",
                 "chunk": f"current chunk of {group.span:g}", "none": "none"}[group.holds]
        pairs = {"full": "every earlier key", "window": f"at most {group.span:g} keys",
                 "chunk": f"its chunk of {group.span:g}", "none": "none"}[group.rule]
        if group.source is not None:
            source = next(getattr(kind, "source", None) for name, kind in spec.layer_kinds
                          if name == group.name)
            holds = f"none (reuses the KV of layer {source})"
        rows.append({
            "group": group.name, "kind": group.kind, "layers": group.count,
            "kv_bytes_per_token_per_layer": group.kv_bytes_per_position(kv_dtype),
            "holds": holds, "state_bytes_per_layer": group.state_bytes,
            "flops_per_token_per_layer": group.projections + group.absorbed
            + group.index_tokens, "flops_per_pair_per_layer": group.per_pair,
            "indexer_flops_per_pair_per_layer": group.index_pair, "keys_per_query": pairs,
        })
    return rows


def layer_mix(spec: ModelSpec) -> str:
    """The layer kinds and their counts, e.g. ``36 linear + 12 full``."""
    counts: dict[str, int] = {}
    for group in layer_groups(spec):
        counts[group.kind] = counts.get(group.kind, 0) + group.count
    return " + ".join(f"{count} {kind}" for kind, count in counts.items())


def spec_summary(spec: Spec) -> str:
    """A one-line summary used by ``kvroof list``."""
    if isinstance(spec, ModelSpec):
        counts = param_counts(spec)
        layers = f"{spec.num_layers} layers" if not spec.has_layer_kinds else \
            f"{spec.num_layers} layers ({layer_mix(spec)})"
        state = state_bytes(spec)
        return (
            f"{spec.attention.kind.upper()} {spec.ffn.kind}, {layers}, "
            f"{counts.total / 1e9:.1f}B total / {counts.active / 1e9:.1f}B active, "
            f"KV {kv_bytes_per_token(spec) / 1e3:.1f} kB/token (bf16)"
            + (f" + {state / 1e6:.1f} MB state" if state else "")
        )
    rows = dict(spec_rows(spec))
    keys = {
        "accelerator": ("peak_compute.bf16", "hbm_bandwidth", "host_link"),
        "link": ("kind", "peak_bandwidth", "sustained_bandwidth"),
        "system": ("num_accelerators", "accelerator", "host_link"),
        "engine": ("version", "copy_method", "block_tokens", "loading"),
    }[type(spec).kind_name]
    return ", ".join(f"{key.split('.')[-1]} {rows[key]}" for key in keys if rows.get(key))
