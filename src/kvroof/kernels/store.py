"""Where the shipped kernel tables live and how they are loaded: lazily, on the first lookup
for an accelerator, once per process (cached).

``data/index.json`` lists the accelerators that have tables (with their ops, file and size)
and the common source; ``data/<accelerator>.json.gz`` holds one accelerator's tables
(:mod:`kvroof.kernels.tables`). ``data/NOTICE`` is the attribution of the measurements.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kvroof.errors import KvroofError
from kvroof.kernels.tables import KernelTableError, SystemTables, read_system

if TYPE_CHECKING:
    from kvroof.specs.hardware import Accelerator

__all__ = [
    "DATA_DIR",
    "INDEX_FILE",
    "index",
    "load",
    "resolve",
    "shipped",
    "system_tables",
]

DATA_DIR: Final = Path(__file__).resolve().parent / "data"
INDEX_FILE: Final = "index.json"


def _normalize(name: str) -> str:
    # the registry's rule (kvroof.specs.entry.normalize_name), without importing pydantic
    return name.strip().casefold().replace("_", "-").replace(" ", "-")


@lru_cache(maxsize=1)
def index() -> dict[str, Any]:
    """The parsed ``data/index.json`` (empty when no tables are shipped)."""
    path = DATA_DIR / INDEX_FILE
    if not path.is_file():
        return {"accelerators": {}, "source": {}}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise KernelTableError(f"{path}: unreadable kernel-table index ({error})") from error
    if not isinstance(doc, dict) or not isinstance(doc.get("accelerators"), dict):
        raise KernelTableError(f"{path}: not a kernel-table index")
    return doc


def shipped() -> tuple[str, ...]:
    """kvroof names of the accelerators with shipped tables, sorted."""
    return tuple(sorted(index()["accelerators"]))


def resolve(accelerator: str | Accelerator) -> str | None:
    """The shipped table name for ``accelerator`` (a kvroof name, an alias such as ``h100``,
    or an :class:`~kvroof.specs.hardware.Accelerator`), or None when none is shipped."""
    name = accelerator if isinstance(accelerator, str) else accelerator.name
    tables = index()["accelerators"]
    key = _normalize(name)
    if key in tables:
        return key
    if not isinstance(accelerator, str):
        return None
    try:  # an alias: ask the spec registry (loaded only on this path)
        from kvroof.specs.registry import default_registry

        spec = default_registry().accelerator(name)
    except (KvroofError, LookupError):
        return None
    canonical = _normalize(spec.name)
    return canonical if canonical in tables else None


@cache
def load(name: str) -> SystemTables:
    """The tables of the shipped accelerator ``name`` (a key of the index), read once."""
    entry = index()["accelerators"].get(name)
    if entry is None:
        raise KernelTableError(f"no kernel tables are shipped for accelerator {name!r}")
    return read_system(DATA_DIR / str(entry["file"]))


def system_tables(accelerator: str | Accelerator | SystemTables) -> SystemTables | None:
    """The tables for ``accelerator`` (given tables are returned as they are), or None."""
    if isinstance(accelerator, SystemTables):
        return accelerator
    name = resolve(accelerator)
    return None if name is None else load(name)
