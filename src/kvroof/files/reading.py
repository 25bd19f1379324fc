"""Reading files the user hands over (spec files, report configs, JSON headers, HF configs).

Every such file is untrusted: it may be huge, binary, deeply nested, or a YAML "alias bomb"
(a few lines whose aliases expand to billions of nodes). The readers here and in
:mod:`kvroof.files.yaml_reading` bound each of these and turn every problem into one
:class:`~kvroof.errors.SpecError` line naming the file (and the key, where there is one):

- size: at most ``max_bytes`` are read (the caller says how much a file of its kind may hold);
- encoding: UTF-8 (a leading byte-order mark is allowed);
- nesting: at most :data:`MAX_DEPTH` levels of lists and mappings;
- YAML aliases and duplicate keys: see :mod:`kvroof.files.yaml_reading`;
- JSON duplicate keys: a key written twice in one object is an error.

The YAML readers (``load_yaml_file``, ``load_yaml_text``, ``load_packaged_yaml``,
``YAML_LOADERS``) live in :mod:`kvroof.files.yaml_reading`, which imports PyYAML and builds
on this module (a command that reads no YAML does not import PyYAML).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TextIO

from kvroof.errors import KvroofError, SpecError, clip

__all__ = [
    "ALIAS_NODE_BUDGET",
    "MAX_DEPTH",
    "DuplicateKeyError",
    "capped_lines",
    "check_depth",
    "format_size",
    "load_json_file",
    "read_bytes_file",
    "read_text_file",
    "unique_keys",
]

MAX_DEPTH: Final = 32
"""Deepest nesting of lists and mappings accepted in a user's YAML or JSON file (the deepest
built-in spec has 3 levels)."""

ALIAS_NODE_BUDGET: Final = 1000
"""Nodes that the aliases of one YAML file may stand for, all together."""

def format_size(size: int) -> str:
    """``1048576`` -> ``'1 MiB'`` (binary prefixes; for limits in error messages)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"


def read_bytes_file(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` (``what`` names the kind of file in the
    size error); a :class:`~kvroof.errors.SpecError` naming the file otherwise."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise SpecError(f"cannot read: {error.strerror or error}", path) from None
    if len(data) > max_bytes:
        raise SpecError(f"larger than {format_size(max_bytes)}, the limit for {what}", path)
    return data


def capped_lines(handle: TextIO, path: str | Path, limit: int) -> Iterator[str]:
    """The lines of ``handle``, each at most ``limit`` characters (not counting its line
    break); a longer one is a :class:`~kvroof.errors.KvroofError` naming its line number, so
    that a file without line breaks is never read into memory whole."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith("\n"):
            raise KvroofError(f"{path}: line {number} is longer than {limit:,} characters, the "
                              "limit for one record")
        yield line


def read_text_file(path: str | Path, max_bytes: int, what: str) -> str:
    """The text of ``path``: at most ``max_bytes`` of UTF-8 (``what`` names the kind of file
    in the size error, e.g. "spec files")."""
    source = Path(path)
    data = read_bytes_file(source, max_bytes, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        hint = " (gzip-compressed?)" if data.startswith(b"\x1f\x8b") else ""
        raise SpecError(f"not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
                        f"{error.start}){hint}", source) from None


def check_depth(value: Any, limit: int = MAX_DEPTH) -> int | None:
    """The first nesting level above ``limit`` in ``value`` (lists, tuples and dicts), or
    None when it is not that deep; iterative, so any depth is safe to check."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return depth + 1
        stack.extend((child, depth + 1) for child in children)
    return None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members (``json.loads``'s ``object_pairs_hook``); a key written twice
    raises :class:`DuplicateKeyError` (``json`` alone keeps the last)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


class DuplicateKeyError(Exception):
    """A JSON object writes ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def load_json_file(path: str | Path, max_bytes: int, what: str) -> Any:
    """Read and parse the JSON file ``path``: at most ``max_bytes``, UTF-8, at most
    :data:`MAX_DEPTH` levels deep, no key written twice in one object."""
    source = Path(path)
    text = read_text_file(source, max_bytes, what)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise SpecError(f"not valid JSON ({error.msg} at line {error.lineno}, column "
                        f"{error.colno})", source) from None
    except DuplicateKeyError as error:
        raise SpecError("key written twice in one object", source, clip(error.key, 40)) from None
    except RecursionError:
        raise SpecError(f"nested deeper than {MAX_DEPTH} levels", source) from None
    except ValueError as error:  # e.g. an integer of 5000 digits
        raise SpecError(f"not valid JSON ({clip(str(error), 100)})", source) from None
    if check_depth(data) is not None:
        raise SpecError(f"nested deeper than {MAX_DEPTH} levels", source)
    return data
