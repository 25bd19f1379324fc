"""A figure's data as CSV: every row of every series, one column per quantity, converted to
SI units (the header says which: ``attainable compute per GPU (FLOP/s)`` for an axis drawn in
TFLOP/s), categories as drawn.
"""

from __future__ import annotations

import csv
import io

from kvroof.plot.figure_series import FigureData, Value

__all__ = ["figure_csv"]


def _csv_value(value: Value, factor: float) -> str:
    if isinstance(value, str):
        return value
    return repr(float(value) * factor)


def figure_csv(data: FigureData) -> str:
    """The figure's data as CSV: ``panel``, ``series``, ``kind``, then one column per quantity
    (SI units in the header; the union over the panels, empty where a row has none)."""
    headers: list[str] = []
    for item in data.series:
        for column in item.columns:
            header = column.si()[0]
            if header not in headers:
                headers.append(header)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["panel", "series", "kind", *headers])
    for item in data.series:
        panel = data.panels[item.panel].title
        converted = [column.si() for column in item.columns]
        for row in item.rows:
            cells = [""] * len(headers)
            for value, (header, factor) in zip(row, converted, strict=True):
                cells[headers.index(header)] = _csv_value(value, factor)
            writer.writerow([panel, item.name, item.kind, *cells])
    return buffer.getvalue()
