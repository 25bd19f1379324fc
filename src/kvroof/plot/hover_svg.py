"""A figure as SVG text to place in an HTML page, with its hover data: every id made unique
with a prefix, each series' artists and each legend entry's text and handle given an id of
their own for the rendering, and beside the SVG each series' rows (thinned to what the page
can tell apart) with their positions in the SVG, and which SVG elements draw it and its
legend entry, as JSON-ready data that a small script in report.html turns into tooltips and
legend toggles.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from kvroof.plot.figure_reading import figure_data
from kvroof.plot.figure_series import POINT_KINDS, FigureData, Series, Value

__all__ = ["hover_data", "interactive_svg"]


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def _prefixed(svg: str, prefix: str) -> str:
    """Every id of ``svg`` and every reference to one, prefixed (so that several figures in
    one page have unique ids)."""
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)


def _rounded(value: Value) -> Value:
    if isinstance(value, str):
        return value
    number = float(value)
    return float(f"{number:.6g}") if math.isfinite(number) else 0.0


@contextmanager
def _gids(fig: Figure, data: FigureData) -> Iterator[tuple[dict[int, list[str]],
                                                           dict[int, list[str]]]]:
    """Give each series' artists and each legend entry's text and handle an id of their own
    for one rendering (the figure's own gids, which may repeat across panels, are restored
    after it)."""
    saved: list[tuple[Artist, str | None]] = []

    def give(artist: Artist, gid: str | None) -> None:
        old: str | None = artist.get_gid()
        saved.append((artist, old))
        artist.set_gid(gid)

    series_ids: dict[int, list[str]] = {}
    legend_ids: dict[int, list[str]] = {}
    try:
        for artist in fig.findobj(lambda a: a.get_gid() is not None):
            give(artist, None)
        for index, item in enumerate(data.series):
            ids = [f"s{index}" if len(item.artists) == 1 else f"s{index}-{n}"
                   for n in range(len(item.artists))]
            for artist, gid in zip(item.artists, ids, strict=True):
                give(artist, gid)
            series_ids[index] = ids
        for index, entry in enumerate(data.legend):
            ids = [f"l{index}-text"]
            give(entry.text, ids[0])
            if entry.handle is not None:
                ids.append(f"l{index}-mark")
                give(entry.handle, ids[1])
            legend_ids[index] = ids
        yield series_ids, legend_ids
    finally:
        for artist, previous in reversed(saved):
            artist.set_gid(previous)


def _page_points(fig: Figure, item: Series) -> list[np.ndarray[Any, Any]]:
    """The series' geometry in SVG user units (points, y down), for the layout of the last
    rendering."""
    scale = 72.0 / fig.dpi
    height = fig.bbox.height
    out = []
    for part in item.geometry:
        if not len(part):
            out.append(np.zeros((0, 2)))
            continue
        shown = np.asarray(item.transform.transform(part), dtype=float)
        out.append(np.column_stack([shown[:, 0] * scale, (height - shown[:, 1]) * scale]))
    return out


def _thinned(positions: np.ndarray[Any, Any], spacing: float = 1.5) -> list[int]:
    """Rows to keep for hover: consecutive positions closer than ``spacing`` (SVG units) to
    the last kept one are dropped (a 2,000-step curve on a 300-point-wide axes keeps a few
    hundred); the first and last are kept."""
    if len(positions) <= 2:
        return list(range(len(positions)))
    kept = [0]
    last = positions[0]
    for i in range(1, len(positions) - 1):
        if abs(positions[i, 0] - last[0]) >= spacing or abs(positions[i, 1] - last[1]) >= spacing:
            kept.append(i)
            last = positions[i]
    kept.append(len(positions) - 1)
    return kept


def hover_data(fig: Figure, data: FigureData, series_ids: dict[int, list[str]],
               legend_ids: dict[int, list[str]], prefix: str = "") -> dict[str, Any]:
    """The hover and legend data of a rendered figure (ids with ``prefix``)."""
    columns: list[list[str]] = []
    series_out = []
    for index, item in enumerate(data.series):
        column_ids = []
        for column in item.columns:
            pair = [column.name, column.unit]
            if pair not in columns:
                columns.append(pair)
            column_ids.append(columns.index(pair))
        parts = _page_points(fig, item)
        rows = []
        if item.kind in POINT_KINDS or item.kind == "polygon":
            keep = _thinned(parts[0]) if len(parts[0]) == len(item.rows) else []
            for i in keep:
                rows.append([round(float(parts[0][i, 0]), 1), round(float(parts[0][i, 1]), 1),
                             *map(_rounded, item.rows[i])])
        elif item.kind in ("vline", "hline", "bar", "barh", "cells", "band", "area"):
            first, second = parts
            keep = (_thinned(first) if item.kind == "area" else list(range(len(item.rows))))
            for i in keep:
                if i >= len(first) or i >= len(second):
                    continue
                geometry: list[float]
                if item.kind in ("area", "vline"):
                    geometry = [first[i, 0], first[i, 1], second[i, 1]]
                elif item.kind == "hline":
                    geometry = [first[i, 1], first[i, 0], second[i, 0]]
                else:
                    geometry = [first[i, 0], first[i, 1], second[i, 0], second[i, 1]]
                shown: list[Value] = [round(float(g), 1) for g in geometry]
                rows.append(shown + [_rounded(v) for v in item.rows[i]])
        series_out.append({
            "name": item.name, "kind": item.kind, "panel": item.panel, "cols": column_ids,
            "els": [prefix + gid for gid in series_ids.get(index, [])],
            "rows": rows,
        })
    legend_out = [{"els": [prefix + gid for gid in legend_ids.get(index, [])],
                   "series": entry.series, "label": entry.text.get_text()}
                  for index, entry in enumerate(data.legend)]
    return {"title": data.title, "columns": columns, "series": series_out,
            "legend": legend_out}


@contextmanager
def _layout_kept(fig: Figure, keep: bool) -> Iterator[None]:
    """With ``keep``, the figure's layout engine is off for the block: a figure drawn just
    before (saved as PNG, say) keeps that layout, which spares matplotlib a second pass over
    every text to lay it out again (positions are fractions of the figure, the same at any
    dpi)."""
    engine = fig.get_layout_engine()
    if not keep or engine is None:
        yield
        return
    import matplotlib as mpl

    with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)  # none at all: a placeholder would still cost a draw
    try:
        yield
    finally:
        fig.set_layout_engine(engine)


def interactive_svg(fig: Figure, data: FigureData | None = None, prefix: str = "", *,
                    keep_layout: bool = False) -> tuple[str, dict[str, Any]]:
    """``fig`` as SVG text to place inside an HTML page, and its hover data.

    Every id in the SVG gets ``prefix`` (several figures in one page keep unique ids); each
    series' elements have the ids ``<prefix>s<index>`` (or ``-<n>`` per bar), each legend
    entry ``<prefix>l<index>-text`` and ``-mark``. The hover data (JSON-ready) lists the
    columns (name and unit as drawn), and per series its name, kind, panel, column indices,
    element ids and rows: SVG positions (x, y for a point; x, y1, y2 for a vertical line or an
    area; the two corners of a bar, cell or band) followed by the values as drawn. Rows that
    would fall on the same SVG position as the one before are left out of the hover data (the
    CSV keeps every row). The XML prolog, doctype and metadata are dropped, and so are the
    root's width and height (the page sizes it from its viewBox). ``keep_layout``: the figure
    was drawn just before (saved with :func:`kvroof.plot.style.save_figure`) and keeps that
    layout instead of computing it again."""
    from kvroof.plot.style import style

    data = data if data is not None else figure_data(fig)
    buffer = io.StringIO()
    with _gids(fig, data) as (series_ids, legend_ids), style(), _layout_kept(fig, keep_layout):
        import matplotlib as mpl

        with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kvroof"}):
            fig.savefig(buffer, format="svg", metadata={"Date": None})
        hover = hover_data(fig, data, series_ids, legend_ids, prefix)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    root_end = svg.index(">")
    root = re.sub(r'\s(width|height)="[^"]*"', "", svg[:root_end])
    svg = _prefixed(root + svg[root_end:], prefix).strip()
    return svg, hover
