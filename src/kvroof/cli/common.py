"""Helpers shared by the command modules: registry from flags, tables, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kvroof.errors import CommandError
from kvroof.jsonsafe import json_safe
from kvroof.specs.registry import Registry, default_registry

__all__ = ["CommandError", "flat_record", "print_csv", "print_json", "print_table",
           "registry_from_args", "token_flag"]


def registry_from_args(args: argparse.Namespace) -> Registry:
    """The default registry, or one with the ``--spec-path`` folders added."""
    paths: list[str] = list(getattr(args, "spec_path", []) or [])
    if any(not path.strip() for path in paths):
        raise CommandError("--spec-path: expected a folder, got an empty name")
    return Registry(paths) if paths else default_registry()


def token_flag(at_least: int) -> Callable[[str], float]:
    """An argparse ``type`` for a token-count flag: a whole number (``128``, ``1e4``,
    ``16384.0``) from ``at_least`` to :data:`kvroof.cost.checks.MAX_TOKENS`; anything else is a
    one-line error naming the flag (argparse adds ``argument --new-tokens:``)."""

    def tokens(text: str) -> float:
        from kvroof.cost.checks import MAX_TOKENS, is_whole_number
        from kvroof.errors import short_repr

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number of tokens, got {short_repr(text)}") from None
        if not is_whole_number(value):
            raise argparse.ArgumentTypeError(
                f"expected a whole number of tokens, got {short_repr(text)}")
        if value < at_least:
            raise argparse.ArgumentTypeError(f"must be at least {at_least}, got {text}")
        if value > MAX_TOKENS:
            raise argparse.ArgumentTypeError(f"at most {MAX_TOKENS:.0e} tokens, got {text}")
        return value + 0.0  # -0 is 0

    return tokens


def print_json(value: Any) -> None:
    """Print ``value`` as JSON (non-finite floats become null)."""
    json.dump(json_safe(value), sys.stdout, indent=2)
    sys.stdout.write("\n")


def flat_record(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts flattened with dotted keys (``other_regime.kappa_crit``), lists joined."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(flat_record(item, name + "."))
        elif isinstance(item, list | tuple):
            flat[name] = " ".join(str(v) for v in item)
        else:
            flat[name] = item
    return flat


def print_csv(rows: Sequence[dict[str, Any]]) -> None:
    """Print records as CSV (the first record's keys as the header; SI numbers at full
    precision, infinities as ``inf``, missing values empty)."""
    import csv

    if not rows:
        return
    header = list(rows[0])
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if row.get(key) is None else
                         (repr(row[key]) if isinstance(row[key], float) else row[key])
                         for key in header])


def print_table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> None:
    """Print rows as an aligned plain-text table."""
    all_rows = [list(header)] if header else []
    all_rows += [list(r) for r in rows]
    if not all_rows:
        return
    widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(len(all_rows[0]))]
    for index, row in enumerate(all_rows):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        print("  ".join(cells).rstrip())
        if header and index == 0:
            print("  ".join("-" * w for w in widths))
