"""Pick a loader: by the ``format`` given, or guessed from the file's extension and content.

Guessing reads the first 64 KiB (decompressed, for a gzip-compressed file), and the rest of
the first record when a JSON Lines file's is longer: a file starting with ``[`` is ShareGPT; a
``.csv`` file (``.csv.gz`` too), or one whose first line is a CSV header with T and K columns,
is a table; for JSON Lines the first record's fields decide (``conversations``: ShareGPT, one
conversation per line; ``hash_ids``/``input_length``: mooncake, ``doc_id``: docqa,
``new_tokens``/``T``/``cached_tokens``/``K``: table). The fields are read leniently (a key
written twice, an integer too long to convert), so that the loader reports such a first record
as it reports any other (naming the line and what is wrong; ``skip_bad`` skips it); a first
record that is not JSON at all is an error naming its line and what is wrong. Anything else is
an error that asks for the format.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TextIO, get_args

from kvroof.errors import KvroofError, clip, short_repr
from kvroof.workload import reading
from kvroof.workload.docqa import load_docqa
from kvroof.workload.mooncake import load_mooncake
from kvroof.workload.reading import (
    BadRecordError,
    json_record,
    open_text,
    plain_name,
    utf8_error,
)
from kvroof.workload.records import Workload
from kvroof.workload.sharegpt import load_sharegpt
from kvroof.workload.table import COLUMNS, load_table

__all__ = ["FORMATS", "LOADERS", "Format", "guess_format", "load_workload"]

Format = Literal["sharegpt", "docqa", "mooncake", "table"]
FORMATS: tuple[str, ...] = get_args(Format)

LOADERS: dict[str, Callable[..., Workload]] = {
    "sharegpt": load_sharegpt,
    "docqa": load_docqa,
    "mooncake": load_mooncake,
    "table": load_table,
}

_OPTIONS: dict[str, frozenset[str]] = {
    "sharegpt": frozenset({"tokenizer", "include_system", "system_prompt",
                           "previous_reply_cached", "skip_bad", "name"}),
    "docqa": frozenset({"tokenizer", "cache_documents", "preloaded", "skip_bad", "name"}),
    "mooncake": frozenset({"lru_tokens", "block_tokens", "skip_bad", "name"}),
    "table": frozenset({"skip_bad", "name"}),
}

_PROBE_CHARS = 1 << 16


def guess_format(path: str | Path) -> str:
    """The format of ``path`` (see the module docstring), or a KvroofError asking for it."""
    file = Path(path)
    with open_text(file) as handle:
        try:
            head = handle.read(_PROBE_CHARS)
            text = head.lstrip()
            lineno = head.count("\n", 0, len(head) - len(text)) + 1  # of the first record
            if text.startswith("{") and "\n" not in text and len(head) == _PROBE_CHARS:
                text += _rest_of_line(handle, file, lineno, len(text))
        except UnicodeDecodeError:
            raise utf8_error(file, 1) from None
    if not text:
        raise KvroofError(f"{file}: empty file")
    if text.startswith("["):
        return "sharegpt"
    if plain_name(file).suffix.lower() == ".csv":
        return "table"
    if text.startswith("{"):
        record = _first_record(text.split("\n", 1)[0], file, lineno)
        if isinstance(record, dict):
            keys = {str(k).lower() for k in record}
            if "conversations" in keys:
                return "sharegpt"
            if keys & {"hash_ids", "input_length"}:
                return "mooncake"
            if "doc_id" in keys:
                return "docqa"
            if keys & {"new_tokens", "t", "cached_tokens", "k"}:
                return "table"
            fields = clip(", ".join(k if k.isprintable() else short_repr(k, 30)
                                    for k in sorted(keys)) or "none")
            raise KvroofError(
                f"{file}: cannot tell the format from the first record's fields ({fields}); "
                f"give the format ({', '.join(FORMATS)})"
            )
    elif _csv_table_header(text):
        return "table"
    raise KvroofError(
        f"{file}: cannot tell the format; give it ({', '.join(FORMATS)})"
    )


def _rest_of_line(handle: TextIO, file: Path, lineno: int, read: int) -> str:
    """The rest of a first record longer than the probe (``read`` characters of it are read):
    at most :data:`~kvroof.workload.reading.MAX_RECORD_CHARS` in all, as the loaders allow."""
    limit = reading.MAX_RECORD_CHARS
    rest = handle.readline(max(limit - read, 0) + 1)
    if read + len(rest) > limit and not rest.endswith("\n"):
        raise KvroofError(f"{file}: line {lineno} is longer than {limit:,} characters, the "
                          "limit for one record")
    return rest


def _first_record(line: str, file: Path, lineno: int) -> Any:
    """The first JSON Lines record, read only for its field names: leniently, so that a key
    written twice or an integer too long to convert still tells the format (the loader then
    reports that line like any other). Text that is not JSON is an error naming the line and
    what is wrong."""
    try:
        return json.loads(line, parse_int=str)  # the last of two equal keys; digits as text
    except (ValueError, RecursionError):
        try:
            json_record(line)
            what = "not valid JSON"  # not reached: json_record fails where json.loads does
        except BadRecordError as error:
            what = str(error)
        raise KvroofError(f"{file}: line {lineno}: {what}, so the format cannot be told "
                          f"from it; give the format ({', '.join(FORMATS)})") from None


def _csv_table_header(text: str) -> bool:
    """True when the first line of ``text`` is a CSV header naming a T and a K column."""
    first_line = text.split("\n", 1)[0]
    try:
        header = next(csv.reader([first_line]), [])
    except csv.Error:
        return False
    names = {cell.strip().lower() for cell in header}
    return all(names & set(COLUMNS[column]) for column in ("new_tokens", "cached_tokens"))


def load_workload(path: str | Path, format: str | None = None, **options: Any) -> Workload:
    """Load a workload file with the loader of ``format`` (guessed when None). ``options``
    go to that loader; one that it does not take is an error, not silently ignored."""
    fmt = guess_format(path) if format is None else format
    if fmt not in LOADERS:
        raise KvroofError(f"unknown workload format {short_repr(fmt)} (expected one of "
                          f"{', '.join(FORMATS)})")
    unknown = sorted(set(options) - _OPTIONS[fmt])
    if unknown:
        raise KvroofError(
            f"option {unknown[0]!r} does not apply to the {fmt} format (it takes: "
            f"{', '.join(sorted(_OPTIONS[fmt]))})"
        )
    return LOADERS[fmt](path, **options)
