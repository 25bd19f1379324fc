"""Results files of ``kvroof measure``: the writer and a strict reader.

Each benchmark writes two files into the output folder:

- ``<benchmark>.csv`` (``link.csv``, ``compute.csv``, ``prefill.csv``): one row per measured
  point, SI units (seconds, bytes, FLOP, FLOP/s, bytes/s), booleans as ``true``/``false``, an
  empty cell where a value was not measurable (overlap on the CPU, say);
- ``<benchmark>.json``: the header: the machine, the run's settings, a summary (fits, measured
  kappa_crit), what each column means, and a note that the files are never hand-edited.

:func:`read_results` reads a CSV back into typed rows (and its JSON header when present). A
bad or incomplete file gives one :class:`ResultsError` line naming the file and the row. The
files are read as untrusted input: at most :data:`MAX_ROWS` rows of at most
:data:`MAX_LINE_CHARS` characters, a header of at most :data:`MAX_HEADER_BYTES` (with the
limits of :func:`kvroof.files.reading.load_json_file`).

The typed rows (what each column holds) are defined in :mod:`kvroof.measure.rows` and imported
here too.
"""

from __future__ import annotations

import csv
import json
import math
import types
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import (
    Any,
    Final,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from kvroof._version import __version__
from kvroof.errors import KvroofError, SpecError, clip, short_repr
from kvroof.files.reading import capped_lines, load_json_file
from kvroof.jsonsafe import json_safe
from kvroof.measure.rows import (
    BENCHMARKS,
    ROW_TYPES,
    Benchmark,
    ComputeRow,
    CopyPattern,
    Direction,
    LinkRow,
    Measurement,
    PrefillRow,
    Row,
    row_columns,
)

__all__ = [
    "BENCHMARKS",
    "MAX_HEADER_BYTES",
    "MAX_LINE_CHARS",
    "MAX_ROWS",
    "NOTE",
    "SCHEMA_VERSION",
    "Benchmark",
    "ComputeRow",
    "CopyPattern",
    "Direction",
    "LinkRow",
    "Measurement",
    "PrefillRow",
    "Results",
    "ResultsError",
    "Row",
    "read_results",
    "read_results_dir",
    "write_results",
]

SCHEMA_VERSION: Final = 1
MAX_ROWS: Final = 1_000_000
"""Rows a results CSV may hold (a full GPU run writes a few hundred)."""
MAX_LINE_CHARS: Final = 1 << 16
"""Characters in one line of a results CSV."""
MAX_HEADER_BYTES: Final = 16 << 20
"""Size of a results JSON header (16 MiB)."""
NOTE: Final = (
    "Written by `kvroof measure`. Results are never hand-edited: rerun the benchmark instead "
    "(the reader rejects files whose columns or values do not match what kvroof writes)."
)


class ResultsError(KvroofError):
    """A results file is missing, malformed or incomplete; the message names the file and row."""


R = TypeVar("R", LinkRow, ComputeRow, PrefillRow)


@dataclass(frozen=True)
class Results:
    """A results file read back: its rows and its JSON header (``None`` when absent)."""

    benchmark: Benchmark
    path: Path
    header: dict[str, Any] | None
    rows: tuple[Row, ...]

    def typed(self, row_type: type[R]) -> list[R]:
        """The rows as ``row_type`` (a :class:`ResultsError` if the file holds another kind)."""
        if row_type.benchmark != self.benchmark:
            raise ResultsError(
                f"{self.path}: holds {self.benchmark} results, not {row_type.benchmark}"
            )
        return [row for row in self.rows if isinstance(row, row_type)]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_results(
    out_dir: str | Path, measurement: Measurement, machine: dict[str, Any]
) -> tuple[Path, Path]:
    """Write ``<benchmark>.csv`` and ``<benchmark>.json`` into ``out_dir``; returns both paths.

    Both are written to temporary files and renamed into place together when complete
    (:func:`kvroof.outputs.replacing`): an error or Ctrl-C leaves the previous pair as it was,
    never a new CSV beside an old header."""
    from kvroof.outputs import replacing

    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ResultsError(
            f"{folder}: cannot create the output folder ({error.strerror})"
        ) from None
    row_type = ROW_TYPES[measurement.benchmark]
    columns = row_columns(row_type)
    csv_path = folder / f"{measurement.benchmark}.csv"
    json_path = folder / f"{measurement.benchmark}.json"
    for row in measurement.rows:
        if not isinstance(row, row_type):
            raise ResultsError(
                f"{csv_path}: a {type(row).__name__} among {measurement.benchmark} rows"
            )
    header = {
        "benchmark": measurement.benchmark,
        "schema_version": SCHEMA_VERSION,
        "note": NOTE,
        "csv": csv_path.name,
        "rows": len(measurement.rows),
        "kvroof_version": __version__,
        "columns": dict(row_type.doc),
        "machine": machine,
        "settings": measurement.settings,
        "summary": measurement.summary,
    }
    with replacing(csv_path, json_path) as (csv_temp, json_temp):
        try:
            with csv_temp.open("x", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(columns)
                for row in measurement.rows:
                    values = asdict(row)
                    writer.writerow([_cell(values[name]) for name in columns])
            with json_temp.open("x", encoding="utf-8") as handle:
                handle.write(json.dumps(json_safe(header), indent=2) + "\n")
        except OSError as error:
            raise ResultsError(f"{folder}: cannot write ({error.strerror or error})") from None
    return csv_path, json_path


class _CellError(Exception):
    pass


def _parse_cell(text: str, hint: Any, positive: bool) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        if text == "":
            return None
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
        origin = get_origin(hint)
    if text == "":
        raise _CellError("is empty")
    if origin is Literal:
        choices = get_args(hint)
        if text not in choices:
            raise _CellError(f"{short_repr(text)} is not one of {', '.join(choices)}")
        return text
    if hint is bool:
        if text not in ("true", "false"):
            raise _CellError(f"expected true or false, got {short_repr(text)}")
        return text == "true"
    if hint is str:
        return text
    number: int | float
    try:
        number = int(text) if hint is int else float(text)
    except ValueError:
        kind = "an integer" if hint is int else "a number"
        raise _CellError(f"expected {kind}, got {short_repr(text)}") from None
    if not math.isfinite(number):
        raise _CellError(f"must be finite, got {short_repr(text)}")
    if number < 0 or (positive and number == 0):
        sign = "positive" if positive else "non-negative"
        raise _CellError(f"must be {sign}, got {short_repr(text)}")
    return number


def _benchmark_of(path: Path, columns: list[str]) -> Benchmark:
    for name, row_type in ROW_TYPES.items():
        if columns == row_columns(row_type):
            return name
    guess = path.stem if path.stem in ROW_TYPES else None
    if guess is None:
        raise ResultsError(
            f"{path}: header row matches no kvroof measure results ({', '.join(BENCHMARKS)})"
        )
    expected = row_columns(ROW_TYPES[guess])
    missing = [c for c in expected if c not in columns]
    unknown = [c for c in columns if c not in expected]
    detail = []
    if missing:
        detail.append(f"missing column(s) {', '.join(missing)}")
    if unknown:
        detail.append(f"unknown column(s) {clip(', '.join(short_repr(c, 30) for c in unknown))}")
    if not detail:
        detail.append(f"columns out of order (expected {', '.join(expected)})")
    raise ResultsError(f"{path}: header row: {'; '.join(detail)}")


def _read_header(json_path: Path, benchmark: Benchmark) -> dict[str, Any] | None:
    if not json_path.exists():
        return None
    try:
        header = load_json_file(json_path, MAX_HEADER_BYTES, "results headers")
    except SpecError as error:
        raise ResultsError(str(error)) from None
    if not isinstance(header, dict):
        raise ResultsError(f"{json_path}: expected a JSON object")
    if header.get("benchmark") != benchmark:
        raise ResultsError(
            f"{json_path}: describes {short_repr(header.get('benchmark'))} results, but the CSV "
            f"holds {benchmark} results"
        )
    if header.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{json_path}: schema_version {short_repr(header.get('schema_version'))}, this "
            f"kvroof reads {SCHEMA_VERSION}"
        )
    return header


def read_results(path: str | Path) -> Results:
    """Read a results CSV (and the JSON header next to it, when present) into typed rows."""
    csv_path = Path(path)
    if csv_path.is_dir():
        raise ResultsError(f"{csv_path}: is a folder; pass one CSV (or use read_results_dir)")
    try:
        handle = csv_path.open(newline="", encoding="utf-8")
    except OSError as error:
        raise ResultsError(f"{csv_path}: cannot read ({error.strerror})") from None
    with handle:
        try:
            rows, benchmark = _read_rows(csv_path, csv.reader(
                capped_lines(handle, csv_path, MAX_LINE_CHARS)))
        except UnicodeDecodeError as error:
            raise ResultsError(f"{csv_path}: not UTF-8 text ({error.reason})") from None
        except csv.Error as error:
            raise ResultsError(f"{csv_path}: not a CSV file ({error})") from None
        except KvroofError as error:
            raise ResultsError(str(error)) from None
    if not rows:
        raise ResultsError(f"{csv_path}: no data rows")
    header = _read_header(csv_path.with_suffix(".json"), benchmark)
    return Results(benchmark=benchmark, path=csv_path, header=header, rows=tuple(rows))


def _read_rows(csv_path: Path, reader: Any) -> tuple[list[Row], Benchmark]:
    columns = next(reader, None)
    if not columns:
        raise ResultsError(f"{csv_path}: empty file (no header row)")
    benchmark = _benchmark_of(csv_path, columns)
    row_type = ROW_TYPES[benchmark]
    hints = get_type_hints(row_type)
    rows: list[Row] = []
    for number, cells in enumerate(reader, start=1):
        if number > MAX_ROWS:
            raise ResultsError(f"{csv_path}: more than {MAX_ROWS:,} rows; kvroof measure "
                               "writes far fewer (is this a results file?)")
        where = f"{csv_path}: row {number} (line {reader.line_num})"
        if not cells:
            raise ResultsError(f"{where}: blank row")
        if len(cells) != len(columns):
            raise ResultsError(f"{where}: {len(cells)} cells, expected {len(columns)} "
                               f"({clip(', '.join(columns))})")
        values: dict[str, Any] = {}
        for name, text in zip(columns, cells, strict=True):
            try:
                values[name] = _parse_cell(
                    text.strip(), hints[name], name in row_type.positive
                )
            except _CellError as error:
                raise ResultsError(f"{where}: {name} {error}") from None
        rows.append(row_type(**values))
    return rows, benchmark


def read_results_dir(folder: str | Path) -> dict[Benchmark, Results]:
    """Every ``link.csv``, ``compute.csv`` and ``prefill.csv`` in ``folder`` (at least one)."""
    directory = Path(folder)
    found = {
        name: read_results(directory / f"{name}.csv")
        for name in BENCHMARKS
        if (directory / f"{name}.csv").exists()
    }
    if not found:
        raise ResultsError(
            f"{directory}: no results ({', '.join(f'{b}.csv' for b in BENCHMARKS)}) here"
        )
    return found
