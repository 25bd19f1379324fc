"""The report's table cells read back as numbers: for ``report.json`` (each table's columns
and rows, numbers in SI units with the unit in the column name) and for the page's summary
(:mod:`kvroof.report.findings`). A table keeps its cells as the text it prints; this module
only reads them."""

from __future__ import annotations

import math
import re
from typing import Any, Final

from kvroof.report.tables import Table

__all__ = ["cell_number", "cell_quantity", "numeric_columns", "table_json"]

# A number as the tables print it ("1,234", "7.31", "5.11e+03", "-4.1%"), then an optional unit.
_QUANTITY: Final = re.compile(
    r"\s*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+)"
    r"\s*(%|[a-zA-Zµ/]+(?:/s)?)?\s*")

# Units the tables print, to SI: factor and SI unit.
_SI: Final[dict[str, tuple[float, str]]] = {
    "": (1.0, ""), "%": (1e-2, "fraction"),
    "s": (1.0, "s"), "ms": (1e-3, "s"), "us": (1e-6, "s"), "µs": (1e-6, "s"), "h": (3600.0, "s"),
    "min": (60.0, "s"),
    "B": (1.0, "B"), "kB": (1e3, "B"), "MB": (1e6, "B"), "GB": (1e9, "B"), "TB": (1e12, "B"),
    "B/s": (1.0, "B/s"), "kB/s": (1e3, "B/s"), "MB/s": (1e6, "B/s"), "GB/s": (1e9, "B/s"),
    "TB/s": (1e12, "B/s"),
    "W": (1.0, "W"), "kW": (1e3, "W"),
    "FLOP/s": (1.0, "FLOP/s"), "TFLOP/s": (1e12, "FLOP/s"), "GFLOP": (1e9, "FLOP"),
}

_EMPTY: Final = ("", "-")


def cell_quantity(cell: str) -> tuple[float, str] | None:
    """A cell that is one number with an optional unit the tables use (``"27.4 ms"``,
    ``"65.0%"``, ``"1,234"``, ``"never"`` as infinity): the number and the unit as printed;
    None for any other text (``"13.7 (printed 14.3)"``, ``"does not fit"``)."""
    text = cell.strip()
    if text == "never":
        return math.inf, ""
    match = _QUANTITY.fullmatch(text)
    if match is None or (match.group(2) or "") not in _SI:
        return None
    return float(match.group(1).replace(",", "")), match.group(2) or ""


def cell_number(cell: str) -> float | None:
    """The number a cell starts with (``"7.31 (printed 7.8)"`` gives 7.31, ``"27.4 ms"`` 27.4,
    ``"never"`` infinity); None when it starts with none."""
    text = cell.strip()
    if text.startswith("never"):
        return math.inf
    match = _QUANTITY.match(text)
    if match is None:
        return None
    return float(match.group(1).replace(",", ""))


def _numeric_cell(cell: str) -> bool:
    """Numbers only: one or several (``"147 / 7.56"``, ``"8.9% / 0.2%"``) with their units,
    remarks in parentheses aside (``"13.7 (printed 14.3)"``, ``"83 W (196 W)"``)."""
    text = re.sub(r"\s*\([^()]*\)", "", cell).strip()
    return bool(text) and all(cell_quantity(part) is not None for part in text.split(" / "))


def numeric_columns(table: Table) -> list[bool]:
    """For each column but the first: whether its cells are numbers (with their units), as a
    page right-aligns them. Empty cells, "-", "never" and "does not fit ..." do not count
    against a column."""
    flags = []
    for index in range(len(table.header)):
        cells = [row[index].strip() for row in table.rows if index < len(row)]
        cells = [c for c in cells if c not in _EMPTY and c != "never"
                 and not c.startswith("does not fit")]
        flags.append(bool(cells) and index > 0 and all(_numeric_cell(c) for c in cells))
    return flags


def _column_unit(cells: list[str]) -> str | None:
    """The SI unit ("" for none) of a column whose cells are mostly numbers: at least half of
    its non-empty cells are one number each (or "never"), all of one SI dimension. None for
    any other column."""
    units = set()
    filled = numbers = 0
    for cell in cells:
        if cell.strip() in _EMPTY:
            continue
        filled += 1
        quantity = cell_quantity(cell)
        if quantity is None:
            continue
        numbers += 1
        if not math.isinf(quantity[0]):
            units.add(_SI[quantity[1]][1])
    if not numbers or 2 * numbers < filled or len(units) > 1:
        return None
    return units.pop() if units else ""


def table_json(table: Table) -> dict[str, Any]:
    """One table as JSON-ready data: ``key``, ``title``, ``columns``, ``rows``, ``notes`` (and
    ``links`` where it has some). In a column of numbers (at least half its non-empty cells
    are one number each, all in one SI dimension) those cells are numbers in SI units and the
    column's name ends in the unit when the cells had one (``"median TTFT layerwise (s)"``,
    percentages as ``(fraction)``); "never" stays the text "never" (JSON has no infinity), an
    empty or "-" cell is null, and any other cell ("does not fit ...", "13.7 (printed 14.3)")
    keeps its text. Other columns keep the text as printed."""
    columns: list[str] = []
    converters: list[bool] = []
    for index, header in enumerate(table.header):
        cells = [row[index] for row in table.rows if index < len(row)]
        unit = _column_unit(cells)
        numeric = unit is not None and any(c.strip() not in _EMPTY for c in cells)
        converters.append(numeric)
        name = header
        if numeric and unit and f"({unit})" not in header:
            name = f"{header} ({unit})"
        columns.append(name)
    rows: list[list[Any]] = []
    for row in table.rows:
        out: list[Any] = []
        for index, cell in enumerate(row):
            if index < len(converters) and converters[index]:
                quantity = cell_quantity(cell)
                if quantity is None:
                    out.append(None if cell.strip() in _EMPTY else cell)
                elif math.isinf(quantity[0]):
                    out.append("never")
                else:
                    factor = _SI[quantity[1]][0]
                    out.append(float(f"{quantity[0] * factor:.12g}"))
            else:
                out.append(cell)
        rows.append(out)
    data: dict[str, Any] = {"key": table.key, "title": table.title, "columns": columns,
                            "rows": rows, "notes": list(table.notes)}
    if table.links:
        data["links"] = [{"text": text, "url": url} for text, url in table.links]
    return data
