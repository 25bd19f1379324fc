"""``kvroof list`` and ``kvroof show``: what the registries hold."""

from __future__ import annotations

import argparse
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import print_json, print_table, registry_from_args
from kvroof.describe import derived_figures, layer_group_rows, spec_rows, spec_summary
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import KINDS, SpecKind
from kvroof.units import Kind, format_quantity

__all__ = ["register"]

_PLURAL = {f"{kind}s": kind for kind in KINDS}


def register(commands: Any) -> None:
    listing = commands.add_parser(
        "list", help=command_help("list")
    )
    listing.add_argument("kind", choices=sorted(_PLURAL), help="what to list")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(handler=run_list)

    show = commands.add_parser("show", help=command_help("show"))
    show.add_argument("kind", choices=list(KINDS), help="the kind of spec")
    show.add_argument("name", help="its name or an alias (case-insensitive)")
    show.add_argument("--json", action="store_true", help="print a JSON object (SI units)")
    show.set_defaults(handler=run_show)


def run_list(args: argparse.Namespace) -> None:
    kind: SpecKind = _PLURAL[args.kind]
    registry = registry_from_args(args)
    entries = registry.entries(kind)
    if args.json:
        items = []
        for entry in entries:
            item: dict[str, Any] = {
                "name": entry.spec.name,
                "display_name": entry.spec.label,
                "aliases": list(entry.spec.aliases),
                "builtin": entry.builtin,
                "file": str(entry.path),
            }
            item.update(derived_figures(entry.spec))
            items.append(item)
        print_json(items)
        return
    print_table(
        [[e.spec.name, e.spec.label, spec_summary(e.spec)] for e in entries],
        header=["name", "display name", "summary"],
    )


_DERIVED_UNITS: dict[str, Kind | None] = {
    "kv_bytes_per_token": Kind.CAPACITY,
    "kv_bytes_per_token_per_layer": Kind.CAPACITY,
    "kv_bytes_sliding_per_sequence": Kind.CAPACITY,
    "kv_bytes_bounded_per_sequence": Kind.CAPACITY,
    "state_bytes_per_request": Kind.CAPACITY,
}


def run_show(args: argparse.Namespace) -> None:
    registry = registry_from_args(args)
    entry = registry.entry(args.kind, args.name)
    spec = entry.spec
    derived = derived_figures(spec)
    groups = layer_group_rows(spec) if isinstance(spec, ModelSpec) else []
    if args.json:
        print_json({
            "kind": args.kind,
            **spec.model_dump(mode="json"),
            **derived,
            **({"layer_groups": groups} if groups else {}),
            "file": str(entry.path),
        })
        return
    rows = [[field, value] for field, value in spec_rows(spec)]
    for key, value in derived.items():
        unit = _DERIVED_UNITS.get(key)
        text = format_quantity(value, unit) if unit else f"{value / 1e9:.3f}B"
        rows.append([f"{key} (derived)", text])
    for group in groups:
        per_token = format_quantity(group["kv_bytes_per_token_per_layer"], Kind.CAPACITY)
        state = group["state_bytes_per_layer"]
        keeps = f"{per_token}/token, {group['holds']}" if group["kv_bytes_per_token_per_layer"] \
            else group["holds"]
        if state:
            keeps += f"; state {format_quantity(state, Kind.CAPACITY)}/request"
        flops = f"{group['flops_per_token_per_layer'] / 1e6:.1f} MFLOP/token"
        if group["flops_per_pair_per_layer"]:
            flops += (f", {group['flops_per_pair_per_layer'] / 1e3:.1f} kFLOP/pair over "
                      f"{group['keys_per_query']}")
        if group["indexer_flops_per_pair_per_layer"]:
            flops += (f", indexer {group['indexer_flops_per_pair_per_layer'] / 1e3:.1f} "
                      "kFLOP/pair over every earlier key")
        rows.append([f"layer group {group['group']} (derived)",
                     f"{group['layers']} x {group['kind']}: keeps {keeps}; {flops} (per layer)"])
    rows += [[f"source: {field}", source] for field, source in spec.sources.items()]
    rows.append(["file", str(entry.path)])
    print_table(rows)
