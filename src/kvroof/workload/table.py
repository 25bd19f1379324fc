"""Tables of requests with explicit T and K: CSV (with a header row) or JSON Lines.

Columns (CSV header names, or JSON keys; case-insensitive):

- ``new_tokens`` or ``T``, and ``cached_tokens`` or ``K``: required, integers >= 0.
- ``output_tokens``: optional; empty / null / -1 = unknown.
- ``arrival_time``: optional seconds; empty / null = unknown (NaN).
- ``group_id``: optional conversation or document id.
- ``synthetic``: optional; ``true`` (or 1 / yes) on a row marks generated data, and one such
  row makes the whole workload synthetic.
- ``workload``: optional name of the workload (the file name otherwise).

Other columns are ignored. :func:`write_table` writes this format (by file extension:
``.csv`` or ``.jsonl``); a synthetic workload gets ``synthetic`` and ``workload`` on every row,
so the label survives any tool that reads the file.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from kvroof.errors import KvroofError, clip, short_repr
from kvroof.outputs import replacing
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    count_field,
    iter_json_lines,
    lines,
    open_text,
    plain_name,
    utf8_error,
)
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload, WorkloadBuilder

__all__ = ["COLUMNS", "load_table", "table_kind", "write_table"]

COLUMNS: dict[str, tuple[str, ...]] = {
    "new_tokens": ("new_tokens", "t"),
    "cached_tokens": ("cached_tokens", "k"),
    "output_tokens": ("output_tokens",),
    "arrival_time": ("arrival_time",),
    "group_id": ("group_id",),
    "synthetic": ("synthetic",),
    "workload": ("workload",),
}
"""Each column and the names it may have (lower case)."""

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def table_kind(path: str | Path, *, writing: bool = False) -> str:
    """The table kind by extension: ``csv`` (.csv) or ``jsonl`` (.jsonl, .ndjson, .json). For
    reading, a trailing ``.gz`` is looked through (``t.csv.gz`` is a CSV table; the compression
    itself is known from the file's content); kvroof writes plain tables only."""
    if writing and Path(path).suffix.lower() == ".gz":
        raise KvroofError(f"{path}: kvroof writes uncompressed tables; name it .csv or .jsonl "
                          "(and compress it afterwards if you like: reading takes .gz)")
    suffix = plain_name(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    raise KvroofError(
        f"{path}: a table file must end in .csv or .jsonl (or .csv.gz, .jsonl.gz), not "
        f"{short_repr(suffix or 'nothing')}"
    )


def _resolve(names: list[str]) -> dict[str, str]:
    """Canonical column -> the name used in the file; BadRecordError if ambiguous or incomplete."""
    lowered: dict[str, str] = {}
    for name in names:
        key = name.strip().lower()
        if key in lowered and key:
            raise BadRecordError(f"column {short_repr(name.strip())} appears twice; keep one")
        lowered[key] = name
    found: dict[str, str] = {}
    for column, aliases in COLUMNS.items():
        present = [lowered[a] for a in aliases if a in lowered]
        if len(present) > 1:
            raise BadRecordError(
                f"{short_repr(present[0])} and {short_repr(present[1])} mean the same; keep one")
        if present:
            found[column] = present[0]
    for required in ("new_tokens", "cached_tokens"):
        if required not in found:
            alias = COLUMNS[required][1].upper()
            raise BadRecordError(
                f"missing {required!r} (or {alias!r}); found: "
                f"{clip(', '.join(names)) or 'nothing'}"
            )
    return found


class _Rows:
    """Turns one row's cells (text from CSV, JSON values from JSONL) into builder calls."""

    def __init__(self) -> None:
        self.builder = WorkloadBuilder(timed=True)
        self.synthetic = False
        self.names: set[str] = set()

    def add(self, row: dict[str, Any], columns: dict[str, str], text: bool = True) -> None:
        """``text``: the cells are CSV text (numbers written as text); JSON Lines values
        carry their own types, and a token count there must be a JSON number."""
        def cell(column: str) -> Any:
            key = columns.get(column)
            value = None if key is None else row.get(key)
            if not text and column.endswith("_tokens") and isinstance(value, str):
                raise BadRecordError(f"{column!r} must be a number, got string "
                                     f"{short_repr(value)}")
            return value

        new = _count("new_tokens", cell("new_tokens"), required=True)
        cached = _count("cached_tokens", cell("cached_tokens"), required=True)
        output = _count("output_tokens", cell("output_tokens"), required=False, minimum=-1)
        arrival = _seconds(cell("arrival_time"))
        group = cell("group_id")
        synthetic = _flag(cell("synthetic"))
        name = cell("workload")
        self.builder.add(
            new,
            cached,
            UNKNOWN_OUTPUT if output is None else output,
            "" if group is None else str(group),
            arrival,
        )
        self.synthetic = self.synthetic or synthetic
        if name not in (None, ""):
            self.names.add(str(name))


def _count(name: str, value: Any, required: bool, minimum: int = 0) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise BadRecordError(f"empty {name!r}")
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            raise BadRecordError(f"{name!r} must be an integer, got {short_repr(text)}") from None
        if not number.is_integer():
            raise BadRecordError(f"{name!r} must be an integer, got {short_repr(text)}")
        value = int(number)
    return count_field(name, value, minimum)


def _seconds(value: Any) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    if isinstance(value, bool):
        raise BadRecordError(f"'arrival_time' must be seconds, got {short_repr(value)}")
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadRecordError(f"'arrival_time' must be seconds, got {short_repr(value)}") from None
    if not math.isfinite(seconds):
        raise BadRecordError(f"'arrival_time' must be finite, got {short_repr(value)}")
    return seconds


def _flag(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadRecordError(f"'synthetic' must be true or false, got {short_repr(value)}")


Rows = Iterator[tuple[int, dict[str, Any]]]


def _csv_rows(path: Path, bad: BadRecords) -> tuple[dict[str, str], Rows]:
    handle = open_text(path)
    try:
        reader = csv.reader(lines(handle, path))
        try:
            header = next(reader, None)
            while header is not None and not any(cell.strip() for cell in header):
                header = next(reader, None)
        except (UnicodeDecodeError, csv.Error) as error:
            raise KvroofError(f"{path}: cannot read the CSV header ({error})") from None
        if header is None:
            raise KvroofError(f"{path}: empty file (no header row)")
        if header[0].lstrip().startswith(("{", "[")):
            raise KvroofError(
                f"{path}: looks like JSON, not CSV (a JSON Lines table ends in .jsonl)")
        try:
            columns = _resolve(header)
        except BadRecordError as error:
            raise KvroofError(f"{path}: header: {error}") from None
    except BaseException:
        handle.close()
        raise
    names = list(header)

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        with handle:
            try:
                for cells in reader:
                    if not any(cell.strip() for cell in cells):
                        continue
                    if len(cells) != len(names):
                        bad.reject(f"line {reader.line_num}",
                                   f"{len(cells)} fields, but the header has {len(names)}")
                        continue
                    yield reader.line_num, dict(zip(names, cells, strict=True))
            except csv.Error as error:
                raise KvroofError(f"{path}: line {reader.line_num}: {error}") from None
            except UnicodeDecodeError:
                raise utf8_error(path, reader.line_num) from None

    return columns, rows()


def load_table(
    path: str | Path, *, skip_bad: bool = False, name: str | None = None
) -> Workload:
    """Requests of a CSV or JSON Lines table (see the module docstring)."""
    file = Path(path)
    kind = table_kind(file)
    bad = BadRecords(file, skip_bad, unit="row")
    parsed = _Rows()
    if kind == "csv":
        columns, rows = _csv_rows(file, bad)
        for lineno, row in rows:
            try:
                parsed.add(row, columns)
            except BadRecordError as error:
                bad.reject(f"line {lineno}", str(error))
    else:
        for lineno, record in iter_json_lines(file, bad):
            try:
                parsed.add(record, _resolve(list(record)), text=False)
            except BadRecordError as error:
                bad.reject(f"line {lineno}", str(error))
    bad.finish(len(parsed.builder))
    workload_name = name or (next(iter(parsed.names)) if len(parsed.names) == 1
                             else plain_name(file).stem)
    source = f"table {file}" + (" (marked synthetic)" if parsed.synthetic else "")
    workload = parsed.builder.build(workload_name, source, parsed.synthetic, bad.skipped)
    if workload.arrival_time is not None and bool(np.all(np.isnan(workload.arrival_time))):
        workload = replace(workload, arrival_time=None)
    return workload


def _rows_for_output(workload: Workload) -> tuple[list[str], list[list[Any]]]:
    """Header and rows; only columns that carry information are written."""
    header = ["new_tokens", "cached_tokens"]
    columns: list[list[Any]] = [workload.new_tokens.tolist(), workload.cached_tokens.tolist()]
    if bool(np.any(workload.output_known)):
        header.append("output_tokens")
        known = workload.output_known.tolist()
        columns.append([v if k else None for v, k in zip(workload.output_tokens.tolist(), known,
                                                          strict=True)])
    if workload.arrival_time is not None:
        header.append("arrival_time")
        columns.append([None if math.isnan(v) else v for v in workload.arrival_time.tolist()])
    if any(workload.group_id.tolist()):
        header.append("group_id")
        columns.append(workload.group_id.tolist())
    if workload.synthetic:
        header += ["synthetic", "workload"]
        columns += [[True] * len(workload), [workload.name] * len(workload)]
    return header, [list(row) for row in zip(*columns, strict=True)]


def write_table(workload: Workload, path: str | Path) -> Path:
    """Write ``workload`` as a table file (CSV or JSON Lines by extension); returns the path.
    The file is written to a temporary file beside it and renamed into place when complete."""
    file = Path(path)
    kind = table_kind(file, writing=True)
    header, rows = _rows_for_output(workload)
    with replacing(file) as (temp,):  # an existing file is replaced only when complete
        _write_rows(temp, file, kind, header, rows)
    return file


def _write_rows(temp: Path, file: Path, kind: str, header: list[str],
                rows: list[list[Any]]) -> None:
    try:
        with open(temp, "x", encoding="utf-8", newline="") as handle:
            if kind == "csv":
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(header)
                writer.writerows(
                    ["" if v is None else ("true" if v is True else v) for v in row]
                    for row in rows
                )
            else:
                for row in rows:
                    handle.write(json.dumps(dict(zip(header, row, strict=True))) + "\n")
    except OSError as error:
        raise KvroofError(f"{file}: cannot write ({error.strerror})") from None
