"""The report's "what this report finds" box: five sentences read from its own tables (ranges,
ratios and extremes of the printed cells; no number is computed anew and none is written
here). Each sentence comes from one table and is left out when that table is not in the
report or has nothing to say; the first five that exist are kept, in the order of
:data:`ORDER`."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from typing import Final

from kvroof.report.cells import cell_number, cell_quantity
from kvroof.report.tables import Table

__all__ = ["ORDER", "findings"]

LINES: Final = 5


def _num(value: float) -> str:
    if math.isinf(value):
        return "never"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return _num(low) if _num(low) == _num(high) else f"{_num(low)} to {_num(high)}"


def _grid_cells(table: Table) -> list[tuple[str, str, str]]:
    """(model, platform, cell) of a model x platform grid."""
    return [(row[0], table.header[i], cell) for row in table.rows
            for i, cell in enumerate(row) if i > 0]


def _paper(tables: dict[str, Table]) -> str | None:
    grid = tables.get("paper_grid")
    if grid is None:
        return None
    values, gaps = [], []
    for _, _, cell in _grid_cells(grid):
        value = cell_number(cell)
        if value is None or math.isinf(value):
            continue
        values.append(value)
        printed = re.search(r"printed ([\d.]+)", cell)
        if printed:
            gaps.append(abs(value - float(printed.group(1))) / float(printed.group(1)))
    if not values:
        return None
    text = (f"Paper mode (the paper's own inputs): κ_crit {_range(values)} over "
            f"{len(values)} model and platform pairs")
    if gaps:
        text += (f"; the {len(gaps)} values the paper prints are matched within "
                 f"{100 * max(gaps):.0f}%")
    return text + "."


def _full(tables: dict[str, Table]) -> str | None:
    grid, paper = tables.get("full_grid"), tables.get("paper_grid")
    if grid is None:
        return None
    cells = _grid_cells(grid)
    numbers = [(m, p, cell_number(c)) for m, p, c in cells]
    shown = [(m, p, v) for m, p, v in numbers if v is not None and math.isfinite(v)]
    unfit = sum(c.startswith("does not fit") for _, _, c in cells)
    if not shown:
        return None
    low = min(shown, key=lambda item: item[2])
    high = max(shown, key=lambda item: item[2])
    where = re.search(r"T = (\d+(?:,\d{3})*)", grid.title)
    text = ("Full mode, a request alone" + (f" at T = {where.group(1)}" if where else "")
            + f": κ_crit {_num(low[2])} ({low[0]} on {low[1]}) to {_num(high[2])} ({high[0]} "
            f"on {high[1]})")
    if paper is not None and paper.header == grid.header:
        ratios = []
        for paper_row, full_row in zip(paper.rows, grid.rows, strict=False):
            for a, b in zip(paper_row[1:], full_row[1:], strict=False):
                pa, fu = cell_number(a), cell_number(b)
                if pa and fu and math.isfinite(pa) and math.isfinite(fu):
                    ratios.append(fu / pa)
        if ratios:
            text += f", a median {statistics.median(ratios):.2g}x the paper-mode value"
    if unfit:
        text += f"; {unfit} of {len(cells)} pairs do not fit in memory"
    return text + "."


def _finite_cells(table: Table, prefix: str) -> list[float]:
    """The finite numbers of every column whose header starts with ``prefix``."""
    return [v for row in table.rows for h, c in zip(table.header, row, strict=False)
            if h.startswith(prefix) and (v := cell_number(c)) is not None and math.isfinite(v)]


def _measured(tables: dict[str, Table]) -> str | None:
    table = tables.get("measured")
    if table is None or "measured" not in table.header:
        return None
    column = table.header.index("measured")
    measured = [v for row in table.rows if (v := cell_number(row[column])) is not None]
    alone = _finite_cells(table, "full alone")
    busy = _finite_cells(table, "full in")
    if not measured or not alone:
        return None
    text = (f"The paper measured κ_crit {_range(measured)} on its testbed; kvroof predicts "
            f"{_range(alone)} for a request alone" + (f" and {_range(busy)} inside a busy "
                                                      "iteration" if busy else ""))
    predictions = alone + busy
    if min(predictions) > max(measured):
        ratio = min(predictions) / max(measured)
        text += f": every prediction is above the measurement ({ratio:.2g}x or more)"
    return text + "."


def _workloads(tables: dict[str, Table]) -> str | None:
    table = tables.get("workloads")
    if table is None or "requests (full)" not in table.header:
        return None
    full = table.header.index("requests (full)")
    paper = table.header.index("requests (paper)") if "requests (paper)" in table.header else None
    rows = [(row, q) for row in table.rows if (q := cell_quantity(row[full])) is not None]
    if not rows:
        return None
    low = min(rows, key=lambda item: item[1][0])
    high = max(rows, key=lambda item: item[1][0])
    synthetic = all(row[0].endswith(" (SYNTHETIC)") for row, _ in rows)

    def name(row: list[str]) -> str:
        if synthetic:
            return row[0].removesuffix(" (SYNTHETIC)").removeprefix("synthetic-")
        return row[0]

    text = ("Workloads" + (" (synthetic)" if synthetic else "")
            + f": {_num(low[1][0])}% ({name(low[0])} on {low[0][1]}) to "
            f"{_num(high[1][0])}% ({name(high[0])} on {high[0][1]}) of requests are "
            "transfer-bound in full mode")
    if paper is not None:
        shares = [q[0] for row, _ in rows if (q := cell_quantity(row[paper])) is not None]
        if shares:
            text += f"; the paper's constant κ_crit gives {_range(shares)}%"
    return text + "."


def _what_if(tables: dict[str, Table]) -> str | None:
    table = tables.get("what_if")
    if table is None or "kappa_crit full" not in table.header or "scenario" not in table.header:
        return None
    value = table.header.index("kappa_crit full")
    scenario = table.header.index("scenario")
    if not table.rows:
        return None
    model = table.rows[0][0]
    rows = [row for row in table.rows if row[0] == model]
    base = cell_number(rows[0][value])
    changes = [(row[scenario], v) for row in rows[1:] if (v := cell_number(row[value])) is not None
               and math.isfinite(v) and v > 0]
    if base is None or not math.isfinite(base) or base <= 0 or not changes:
        return None
    most = max(changes, key=lambda item: abs(math.log(item[1] / base)))
    least = min(changes, key=lambda item: abs(math.log(item[1] / base)))
    return (f"What-ifs on {model} ({rows[0][1]}): {most[0]} moves full-mode κ_crit the most, "
            f"from {_num(base)} to {_num(most[1])}; {least[0]} the least (to {_num(least[1])}).")


def _validation(tables: dict[str, Table]) -> str | None:
    table = tables.get("validation")
    column = "with engine profiles"
    if table is None or column not in table.header or "cases" not in table.header:
        return None
    index = table.header.index(column)
    cases = table.header.index("cases")
    medians, errors, total = [], [], 0
    for row in table.rows:
        parts = row[index].split(" / ")
        if len(parts) != 3:
            continue
        median = cell_number(parts[0])
        error = cell_quantity(parts[2])
        if median is None or error is None:
            continue
        medians.append(median)
        errors.append(error[0])
        total += int(cell_number(row[cases]) or 0)
    if not medians:
        return None
    return (f"Against {total} published measurements ({len(medians)} quantities), with engine "
            f"profiles: median predicted / measured {_range(medians)} per quantity, mean "
            f"error {_range(errors)}%.")


def _simulation(tables: dict[str, Table]) -> str | None:
    table = tables.get("simulation")
    if table is None or "TTFT p50" not in table.header:
        return None
    column = table.header.index("TTFT p50")
    rows = [(row[0], q) for row in table.rows if (q := cell_quantity(row[column])) is not None]
    if not rows:
        return None
    low = min(rows, key=lambda item: item[1][0])
    high = max(rows, key=lambda item: item[1][0])
    if low[1] == high[1]:
        return f"Serving simulation: the same TTFT p50 ({table.rows[0][column]}) under every " \
               "scheduler and cache policy."
    return (f"Serving simulation: TTFT p50 from {_num(low[1][0])} {low[1][1]} ({low[0]}) to "
            f"{_num(high[1][0])} {high[1][1]} ({high[0]}).")


def _families(tables: dict[str, Table]) -> str | None:
    table = tables.get("families")
    if table is None or len(table.header) < 6:
        return None
    column = len(table.header) - 1
    for index, header in enumerate(table.header):
        if header.endswith("alone / busy"):
            column = index
            break
    rows = [(row[0], v) for row in table.rows if (v := cell_number(row[column])) is not None
            and math.isfinite(v)]
    if len(rows) < 2:
        return None
    low = min(rows, key=lambda item: item[1])
    high = max(rows, key=lambda item: item[1])
    where = table.header[column].removesuffix(" alone / busy")
    return (f"By attention family on {where}, alone: κ_crit from {_num(low[1])} ({low[0]}) to "
            f"{_num(high[1])} ({high[0]}).")


ORDER: Final[tuple[Callable[[dict[str, Table]], str | None], ...]] = (
    _paper, _full, _workloads, _what_if, _validation, _measured, _simulation, _families)
"""The sentences in order of preference: the paper's numbers, the full model's, how much of
real workloads is transfer-bound, what changes it most, how good the model is; then the
measured points, the simulation and the families where one of the first is missing."""


def findings(tables: list[Table], lines: int = LINES) -> list[str]:
    """Up to ``lines`` sentences on what the report's ``tables`` show."""
    by_key = {table.key: table for table in tables}
    out = []
    for sentence in ORDER:
        try:
            text = sentence(by_key)
        except (ValueError, IndexError, ZeroDivisionError):  # a table printed otherwise: skip
            text = None
        if text:
            out.append(text)
        if len(out) == lines:
            break
    return out
