"""Results that show themselves in notebooks, and pandas frames for the ones that hold arrays.

Every spec, deployment and result object has a ``_repr_html_`` that Jupyter calls: a small
table of its fields with units. Objects that hold arrays (a TTFT or kappa_crit grid, a
workload, its statistics) also have ``to_frame()``, which needs pandas (the optional extra
``pandas``: ``pip install 'kvroof[pandas]'``) and returns a DataFrame with SI column names.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kvroof.errors import KvroofError

__all__ = ["array_summary", "html_table", "number", "require_pandas"]


def number(value: Any, unit: str = "") -> str:
    """A number for people: 4 significant digits, ``inf`` as "never" only where callers say."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | np.floating | np.integer):
        text = "inf" if math.isinf(float(value)) else f"{float(value):.4g}"
        return f"{text} {unit}".rstrip()
    return str(value)


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
