"""Results that show themselves in notebooks, and pandas frames for the ones that hold arrays.

Every spec, deployment and result object has a ``_repr_html_`` that Jupyter calls: a small
table of its fields with units. Objects that hold arrays (a TTFT or kappa_crit grid, a
workload, its statistics) also have ``to_frame()``, which needs pandas (the optional extra
``pandas``: ``pip install 'kvroof[pandas]'``) and returns a DataFrame with SI column names.

Text for people, in reprs and the command line's human output: :func:`duration` (seconds,
then minutes, hours or days on long runs: "16.7 h", not "6.001e+04 s") and :func:`count`
(whole numbers with thousands separators: "13,530 tokens").
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

__all__ = ["array_summary", "count", "duration", "html_table", "number", "require_pandas"]

_LONG = ((2 * 86400.0, 86400.0, "d"), (3600.0, 3600.0, "h"), (60.0, 60.0, "min"))
"""From this many seconds on, a duration is written in this unit (seconds below a minute)."""


def number(value: Any, unit: str = "") -> str:
    """A number for people: 4 significant digits, ``inf`` as "never" only where callers say."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | np.floating | np.integer):
        text = "inf" if math.isinf(float(value)) else f"{float(value):.4g}"
        return f"{text} {unit}".rstrip()
    return str(value)


def duration(seconds: float, digits: int = 4) -> str:
    """A duration for people: below a minute in s, ms, us or ns (``digits`` significant digits,
    as :func:`kvroof.units.format_quantity`), then in minutes, hours (from an hour) or days
    (from two days) with three: ``duration(60_010)`` is "16.7 h". Zero is "0 s"; not finite:
    "inf s" or "nan s"."""
    value = float(seconds)
    if value == 0:
        return "0 s"
    if math.isfinite(value):
        for start, unit_seconds, unit in _LONG:
            if abs(value) >= start * 0.9995:  # 3,599 s is "1 h", not "60 min"
                return f"{value / unit_seconds:.3g} {unit}"
    return format_quantity(value, Kind.TIME, digits)


def count(value: float, unit: str = "") -> str:
    """A whole number with thousands separators (``count(13530, "tokens")`` is "13,530
    tokens"); a fractional value keeps three significant digits below 100 ("11.5"); "inf" and
    "-" (NaN) as they are."""
    number_ = float(value)
    if math.isnan(number_):
        text = "-"
    elif math.isinf(number_):
        text = "inf" if number_ > 0 else "-inf"
    elif number_.is_integer() or abs(number_) >= 100:
        text = f"{number_:,.0f}"
    else:
        text = f"{number_:.3g}"
    return f"{text} {unit}".rstrip()


def html_table(rows: Iterable[Sequence[Any]], title: str = "",
               header: Sequence[str] | None = None) -> str:
    """An escaped HTML table (first column bold when there is no header)."""
    parts = ['<table class="kvroof">']
    if title:
        parts.append(f"<caption style=\"text-align:left\"><b>{html.escape(title)}</b></caption>")
    if header:
        parts.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
                     + "</tr>")
    for row in rows:
        cells = [html.escape(str(cell)) for cell in row]
        if not header and cells:
            cells[0] = f"<b>{cells[0]}</b>"
        parts.append("<tr>" + "".join(f"<td style=\"text-align:left\">{c}</td>" for c in cells)
                     + "</tr>")
    parts.append("</table>")
    return "".join(parts)


def array_summary(name: str, values: Any, unit: str = "") -> list[str]:
    """A row summarizing an array: shape, min, median, max (finite values; count of inf)."""
    array = np.asarray(values, dtype=np.float64)
    finite = array[np.isfinite(array)]
    infinite = int(array.size - finite.size)
    if finite.size:
        stats = (f"min {number(finite.min(), unit)}, median {number(np.median(finite), unit)}, "
                 f"max {number(finite.max(), unit)}")
    else:
        stats = "no finite value"
    if infinite:
        stats += f"; {infinite} infinite"
    return [name, f"{array.shape}: {stats}"]


def require_pandas() -> Any:
    """The pandas module, or a one-line error saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise KvroofError("to_frame needs pandas: pip install 'kvroof[pandas]'") from None
    return pandas
