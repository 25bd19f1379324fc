"""What a figure draws, as data: each data artist of a matplotlib figure (a line, a step curve,
a reference line, bars, points, a filled area or band, heatmap cells) as a named series of
rows in the units its axes show, read from the artists themselves (``Line2D.get_data()``, bar
rectangles, scatter offsets, image arrays). It is the one source of two outputs:

- :func:`figure_csv`: the figure's data as CSV, converted to SI units (the column names say
  which: ``attainable compute per GPU (FLOP/s)`` for an axis drawn in TFLOP/s);
- :func:`interactive_svg`: the figure as SVG text with unique element ids and, beside it, the
  hover data (each series' rows with their positions in the SVG, and which SVG elements draw it
  and its legend entry) that a small script in a page turns into tooltips and legend toggles.

Series are named by their legend label, else their ``gid``, else by the legend entry whose
style (colour, line style, marker or hatch) they share, else by kind and number. Nothing here
computes a number the figure does not draw.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import Collection, FillBetweenPolyCollection, PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter, PercentFormatter

__all__ = [
    "Column",
    "FigureData",
    "LegendEntry",
    "Panel",
    "Series",
    "figure_csv",
    "figure_data",
    "interactive_svg",
]

Value = float | str
"""A cell: a number in the axis's units, or a category (a tick label) as drawn."""

# The units kvroof's axes use, to SI: factor and SI unit.
_SI: Final[dict[str, tuple[float, str]]] = {
    "PFLOP/s": (1e15, "FLOP/s"), "TFLOP/s": (1e12, "FLOP/s"), "GFLOP/s": (1e9, "FLOP/s"),
    "PFLOP": (1e15, "FLOP"), "TFLOP": (1e12, "FLOP"), "GFLOP": (1e9, "FLOP"),
    "MFLOP": (1e6, "FLOP"),
    "TB/s": (1e12, "B/s"), "GB/s": (1e9, "B/s"), "MB/s": (1e6, "B/s"), "kB/s": (1e3, "B/s"),
    "TB": (1e12, "B"), "GB": (1e9, "B"), "MB": (1e6, "B"), "kB": (1e3, "B"),
    "h": (3600.0, "s"), "min": (60.0, "s"), "ms": (1e-3, "s"), "us": (1e-6, "s"),
    "µs": (1e-6, "s"), "ns": (1e-9, "s"),
    "kW": (1e3, "W"), "%": (1e-2, "fraction"),
}

# Kinds whose rows are points (one position each); the others span two positions.
POINT_KINDS: Final = ("line", "step", "points")
KINDS: Final = (*POINT_KINDS, "vline", "hline", "bar", "barh", "cells", "area", "band",
                "polygon")


@dataclass(frozen=True)
class Column:
    """One quantity of a series' rows: its name and the unit it is drawn in ("" for none)."""

    name: str
    unit: str = ""

    @classmethod
    def from_label(cls, label: str, fallback: str) -> Column:
        """From an axis label such as ``"attainable compute per GPU (TFLOP/s)"``."""
        text = " ".join(label.split())
        match = re.fullmatch(r"(.*?)\s*\(([^()]*)\)", text)
        if match and match.group(1):
            return cls(match.group(1), match.group(2))
        return cls(text or fallback)

    @property
    def label(self) -> str:
        """As drawn: ``name (unit)``."""
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def si(self) -> tuple[str, float]:
        """The CSV header in SI units and the factor that converts a drawn value to it."""
        factor, unit = _SI.get(self.unit, (1.0, self.unit))
        return (f"{self.name} ({unit})" if unit else self.name), factor


@dataclass(frozen=True)
class Panel:
    """One axes of the figure."""

    index: int
    title: str
    x: Column
    y: Column


@dataclass
class Series:
    """What one artist (or one bar container) draws.

    ``rows`` hold the values as drawn (axis units; categories as their tick labels).
    ``geometry`` holds the positions in the artist's own coordinates, transformed to the
    page by ``transform`` after the figure is laid out: one (n, 2) array for the point kinds,
    two for the others (the two ends of a reference line, the two corners of a bar, cell or
    band, the two edges of an area)."""

    name: str
    kind: str
    panel: int
    columns: tuple[Column, ...]
    rows: list[tuple[Value, ...]]
    artists: list[Artist]
    geometry: list[np.ndarray[Any, Any]]
    transform: Any
    gid: str | None = None
    label: str | None = None
    style: tuple[Any, ...] = ()


@dataclass
class LegendEntry:
    """A legend's entry: its text and handle, and the series it stands for."""

    text: Text
    handle: Artist | None
    series: list[int] = field(default_factory=list)


@dataclass
class FigureData:
    """Every data series of a figure, its panels and its legend entries."""

    title: str
    panels: list[Panel]
    series: list[Series]
    legend: list[LegendEntry]


def _style_of(artist: Artist) -> tuple[Any, ...]:
    """What makes a legend handle match the artists it stands for."""
    try:
        if isinstance(artist, Line2D):
            return ("line", to_hex(artist.get_color()), str(artist.get_linestyle()),
                    str(artist.get_marker()))
        if isinstance(artist, Patch):
            face: Any = artist.get_facecolor()
            return ("patch", to_hex(face, keep_alpha=False),
                    artist.get_hatch() or "")
        if isinstance(artist, Collection):
            faces: Any = artist.get_facecolor()
            shade = to_hex(faces[0], keep_alpha=False) if len(faces) else "none"
            return ("collection", shade, artist.get_hatch() or "")
    except (ValueError, TypeError):
        return ()
    return ()


def _finite_rows(points: np.ndarray[Any, Any], ax: Axes) -> np.ndarray[Any, Any]:
    """The points a figure draws: finite, and positive on a log axis."""
    keep = np.isfinite(points).all(axis=1)
    if ax.get_xscale() == "log":
        keep &= points[:, 0] > 0
    if ax.get_yscale() == "log":
        keep &= points[:, 1] > 0
    return np.asarray(points[keep], dtype=float)


class _Axis:
    """How one axis of a panel turns positions into drawn values."""

    def __init__(self, ax: Axes, which: str) -> None:
        axis = ax.xaxis if which == "x" else ax.yaxis
        label = axis.get_label().get_text()
        if not label.strip():  # an axis shared with a panel that carries its label
            shared = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
            for other in shared.get_siblings(ax):
                text = (other.xaxis if which == "x" else other.yaxis).get_label().get_text()
                if text.strip():
                    label = text
                    break
        self.categories: dict[float, str] = {}
        # ticks placed and labelled by hand (``set_xticks(positions, labels)``): categories
        if isinstance(axis.get_major_locator(), FixedLocator) and isinstance(
                axis.get_major_formatter(), FixedFormatter | FuncFormatter):
            ticks = axis.get_majorticklocs()
            labels = [" ".join(t.get_text().split()) for t in axis.get_majorticklabels()]
            if any(text != f"{tick:g}" for tick, text in zip(ticks, labels, strict=False)):
                self.categories = {float(t): text for t, text in zip(ticks, labels, strict=False)}
        self.column = Column.from_label(label, "category" if self.categories else which)
        if self.categories:
            self.position = Column(f"{self.column.label}, axis position" if label
                                   else f"{which} position")
        else:
            self.position = self.column

    def category(self, position: float) -> Value:
        """A bar's or cell's category: the label of the tick nearest its position (within half
        the spacing of the ticks: bars grouped around a tick belong to it), else the
        position."""
        if not self.categories:
            return float(position)
        ticks = sorted(self.categories)
        spacing = min((b - a for a, b in itertools.pairwise(ticks)), default=1.0)
        nearest = min(ticks, key=lambda tick: abs(tick - position))
        if abs(nearest - position) <= spacing / 2 + 1e-9:
            return self.categories[nearest]
        return float(position)


def _value_column(image: AxesImage) -> tuple[Column, float]:
    """An image's values as its colorbar shows them: the column and a factor (a percent
    formatter over fractions shows each value x 100 / xmax)."""
    bar = image.colorbar
    if bar is None:
        return Column("value"), 1.0
    axis = bar.ax.yaxis if bar.orientation == "vertical" else bar.ax.xaxis
    column = Column.from_label(axis.get_label().get_text(), "value")
    formatter = axis.get_major_formatter()
    if isinstance(formatter, PercentFormatter):
        return Column(column.name, "%"), 100.0 / float(formatter.xmax)
    return column, 1.0


class _Reader:
    """Reads one panel's artists into series."""

    def __init__(self, ax: Axes, index: int) -> None:
        self.ax = ax
        self.index = index
        self.x = _Axis(ax, "x")
        self.y = _Axis(ax, "y")
        self.series: list[Series] = []

    def add(self, artists: Sequence[Artist], kind: str, columns: Sequence[Column],
            rows: list[tuple[Value, ...]], geometry: list[np.ndarray[Any, Any]],
            transform: Any, label_from: Artist) -> None:
        label = str(label_from.get_label() or "")
        self.series.append(Series(
            name="", kind=kind, panel=self.index, columns=tuple(columns), rows=rows,
            artists=list(artists), geometry=geometry, transform=transform,
            gid=next((a.get_gid() for a in artists if a.get_gid()), None),
            label=label if label and not str(label).startswith("_") else None,
            style=_style_of(artists[0])))

    def frame(self, artist: Artist) -> str | None:
        """Which of x and y of the artist are data coordinates (a patch: of its box)."""
        transform = (artist.get_data_transform() if isinstance(artist, Patch)
                     else artist.get_transform())
        ax = self.ax
        if transform is ax.transData or transform == ax.transData:
            return "data"
        if transform == ax.get_xaxis_transform():
            return "x"
        if transform == ax.get_yaxis_transform():
            return "y"
        return None

    def line(self, line: Line2D) -> None:
        from kvroof.plot.style import MinorTickMarks

        if isinstance(line, MinorTickMarks):
            return
        frame = self.frame(line)
        xs, ys = line.get_data(orig=True)
        points = np.column_stack([np.asarray(xs, dtype=float).ravel(),
                                  np.asarray(ys, dtype=float).ravel()]) if np.size(xs) else \
            np.zeros((0, 2))
        transform = line.get_transform()
        if frame == "data":
            points = _finite_rows(points, self.ax)
            if str(line.get_drawstyle()).startswith("steps"):
                kind = "step"
            elif str(line.get_linestyle()) in ("None", "none", "") or len(points) == 1:
                kind = "points"
            else:
                kind = "line"
            self.add([line], kind, (self.x.position, self.y.position),
                     [tuple(map(float, p)) for p in points], [points], transform, line)
        elif frame in ("x", "y"):
            axis = 0 if frame == "x" else 1
            values = points[:, axis]
            if not values.size or not np.all(values == values[0]) or not np.isfinite(values[0]):
                return
            at = float(values[0])
            ends = np.array([[at, 0.0], [at, 1.0]]) if frame == "x" else \
                np.array([[0.0, at], [1.0, at]])
            column = self.x.position if frame == "x" else self.y.position
            self.add([line], "vline" if frame == "x" else "hline", (column,), [(at,)],
                     [ends[:1], ends[1:]], transform, line)

    def bars(self, container: Any) -> set[int]:
        patches = [p for p in container.patches if isinstance(p, Rectangle)]
        vertical = getattr(container, "orientation", "vertical") != "horizontal"
        rows: list[tuple[Value, ...]] = []
        low, high = [], []
        for patch in patches:
            x0, y0, w, h = (patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height())
            if not all(math.isfinite(v) for v in (x0, y0, w, h)):
                continue
            if vertical:
                rows.append((self.x.category(x0 + w / 2), h, y0))
            else:
                rows.append((self.y.category(y0 + h / 2), w, x0))
            low.append((x0, y0))
            high.append((x0 + w, y0 + h))
        if vertical:
            place, value = self.x, self.y.column
        else:
            place, value = self.y, self.x.column
        category = place.column if place.categories else place.position
        columns: tuple[Column, ...] = (category, value,
                                       Column(f"{value.name}, bar base", value.unit))
        if all(row[2] == 0 for row in rows):
            rows = [row[:2] for row in rows]
            columns = columns[:2]
        if patches:
            self.add(patches, "bar" if vertical else "barh", columns, rows,
                     [np.array(low, dtype=float).reshape(-1, 2),
                      np.array(high, dtype=float).reshape(-1, 2)],
                     patches[0].get_data_transform(), container)
        return {id(p) for p in patches}

    def patch(self, patch: Patch) -> None:
        if not isinstance(patch, Rectangle):
            return
        frame = self.frame(patch)
        x0, y0 = patch.get_x(), patch.get_y()
        x1, y1 = x0 + patch.get_width(), y0 + patch.get_height()
        transform = patch.get_data_transform()
        if frame == "x":
            self.add([patch], "band", (Column(f"{self.x.position.name}, from",
                                              self.x.position.unit),
                                       Column(f"{self.x.position.name}, to",
                                              self.x.position.unit)),
                     [(x0, x1)], [np.array([[x0, 0.0]]), np.array([[x1, 1.0]])], transform,
                     patch)
        elif frame == "y":
            self.add([patch], "band", (Column(f"{self.y.position.name}, from",
                                              self.y.position.unit),
                                       Column(f"{self.y.position.name}, to",
                                              self.y.position.unit)),
                     [(y0, y1)], [np.array([[0.0, y0]]), np.array([[1.0, y1]])], transform,
                     patch)
        elif frame == "data":
            self.add([patch], "bar", (self.x.position, self.y.position,
                                      Column(f"{self.y.position.name}, bar base",
                                             self.y.position.unit)),
                     [(x0 + (x1 - x0) / 2, y1 - y0, y0)],
                     [np.array([[x0, y0]]), np.array([[x1, y1]])], transform, patch)

    def collection(self, item: Collection) -> None:
        if isinstance(item, PathCollection):
            if item.get_offset_transform() != self.ax.transData:
                return
            points = _finite_rows(np.asarray(item.get_offsets(), dtype=float).reshape(-1, 2),
                                  self.ax)
            self.add([item], "points", (self.x.position, self.y.position),
                     [tuple(map(float, p)) for p in points], [points],
                     item.get_offset_transform(), item)
            return
        if self.frame(item) != "data":
            return
        if isinstance(item, FillBetweenPolyCollection) and getattr(item, "t_direction",
                                                                   None) == "x":
            edges = [self._fill_edges(np.asarray(path.vertices, dtype=float))
                     for path in item.get_paths()]
            if edges and all(e is not None for e in edges):
                t = np.concatenate([e[0] for e in edges if e is not None])
                f1 = np.concatenate([e[1] for e in edges if e is not None])
                f2 = np.concatenate([e[2] for e in edges if e is not None])
                low = np.column_stack([t, f1])
                high = np.column_stack([t, f2])
                keep = np.isfinite(low).all(axis=1) & np.isfinite(high).all(axis=1)
                y = self.y.position
                self.add([item], "area", (self.x.position, Column(f"{y.name}, from", y.unit),
                                          Column(f"{y.name}, to", y.unit)),
                         [(float(a), float(b), float(c))
                          for a, b, c in zip(t[keep], f1[keep], f2[keep], strict=True)],
                         [low[keep], high[keep]], item.get_transform(), item)
                return
        paths = item.get_paths()
        if not paths:
            return
        columns = (Column("part"), self.x.position, self.y.position)
        rows: list[tuple[Value, ...]] = []
        vertices_drawn: list[tuple[float, float]] = []
        for part, path in enumerate(paths):
            vertices = np.asarray(path.vertices, dtype=float)
            for x, y in vertices[np.isfinite(vertices).all(axis=1)]:
                rows.append((float(part), float(x), float(y)))
                vertices_drawn.append((float(x), float(y)))
        self.add([item], "polygon", columns, rows,
                 [np.array(vertices_drawn, dtype=float).reshape(-1, 2)], item.get_transform(),
                 item)

    @staticmethod
    def _fill_edges(vertices: np.ndarray[Any, Any]) -> tuple[
            np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
        """(t, f1, f2) of a fill_between polygon: start, n points along f1, end, n points
        back along f2 (and a closing vertex); None for any other shape."""
        count = len(vertices)
        if count >= 2 and np.array_equal(vertices[-1], vertices[0]):
            count -= 1
        n = (count - 2) // 2
        if n < 1 or 2 * n + 2 != count:
            return None
        t = vertices[1:n + 1, 0]
        back = vertices[n + 2:2 * n + 2][::-1]
        if not np.allclose(back[:, 0], t, equal_nan=True):
            return None
        return t, vertices[1:n + 1, 1], back[:, 1]

    def image(self, image: AxesImage) -> None:
        values = np.asarray(image.get_array(), dtype=float)
        if values.ndim != 2:
            return
        left, right, bottom, top = image.get_extent()
        rows_n, cols_n = values.shape
        dx = (right - left) / cols_n
        dy = (top - bottom) / rows_n
        column, factor = _value_column(image)
        upper = image.origin == "upper"
        rows: list[tuple[Value, ...]] = []
        low, high = [], []
        for i in range(rows_n):
            for j in range(cols_n):
                value = values[i, j]
                if not math.isfinite(value):
                    continue
                row_index = rows_n - 1 - i if upper else i
                x0, y0 = left + j * dx, bottom + row_index * dy
                rows.append((self.x.category(x0 + dx / 2), self.y.category(y0 + dy / 2),
                             float(value) * factor))
                low.append((x0, y0))
                high.append((x0 + dx, y0 + dy))
        x_column = self.x.column if self.x.categories else self.x.position
        y_column = self.y.column if self.y.categories else self.y.position
        self.add([image], "cells", (x_column, y_column, column), rows,
                 [np.array(low, dtype=float).reshape(-1, 2),
                  np.array(high, dtype=float).reshape(-1, 2)], self.ax.transData, image)

    def read(self) -> list[Series]:
        ax = self.ax
        in_bars: set[int] = set()
        from matplotlib.container import BarContainer

        for image in ax.images:
            if isinstance(image, AxesImage):
                self.image(image)
        for container in ax.containers:
            if isinstance(container, BarContainer):
                in_bars |= self.bars(container)
        for patch in ax.patches:
            if id(patch) not in in_bars:
                self.patch(patch)
        for item in ax.collections:
            self.collection(item)
        for line in ax.lines:
            self.line(line)
        return self.series


def _title(ax: Axes, index: int) -> str:
    for loc in ("center", "left", "right"):
        title = ax.get_title(loc=loc)
        if title:
            return " ".join(title.split())
    return f"panel {index + 1}"


def _legends(fig: Figure) -> Iterator[tuple[Legend, Axes | None]]:
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            yield legend, ax
    for legend in fig.legends:
        yield legend, None


def figure_data(fig: Figure) -> FigureData:
    """Every data series of ``fig``: one per line, bar container, scatter, image, filled area
    or band of each axes (colorbars left out), in drawing order within each kind."""
    panels: list[Panel] = []
    series: list[Series] = []
    axes_of: dict[int, int] = {}
    data_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    for index, ax in enumerate(data_axes):
        reader = _Reader(ax, index)
        panels.append(Panel(index, _title(ax, index), reader.x.column, reader.y.column))
        axes_of[id(ax)] = index
        series += reader.read()
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    title = " ".join((suptitle or (panels[0].title if len(panels) == 1 else "")).split())

    entries: list[LegendEntry] = []
    for legend, owner in _legends(fig):
        handles = list(getattr(legend, "legend_handles", []) or [])
        for position, text in enumerate(legend.get_texts()):
            handle = handles[position] if position < len(handles) else None
            entry = LegendEntry(text, handle)
            label = text.get_text()
            panel = axes_of.get(id(owner)) if owner is not None else None
            entry.series = [i for i, s in enumerate(series) if s.label == label
                            and (panel is None or s.panel == panel)]
            if not entry.series and handle is not None:  # a proxy handle: match by style
                style = _style_of(handle)
                entry.series = [i for i, s in enumerate(series) if s.style == style and style]
            entries.append(entry)
    _attach(series, entries)
    _name(series, entries, panels)
    return FigureData(title, panels, series, entries)


def _attach(series: list[Series], entries: list[LegendEntry]) -> None:
    """An unlabelled series whose style is that of one legend entry's series (in its own
    panel, else in the figure) is toggled with that entry."""
    owners: dict[int, LegendEntry] = {}
    for entry in entries:
        for index in entry.series:
            owners.setdefault(index, entry)
    for index, item in enumerate(series):
        if item.label is not None or index in owners or not item.style:
            continue
        same = [e for e in entries if any(series[i].style == item.style for i in e.series)]
        local = [e for e in same if any(series[i].panel == item.panel for i in e.series)]
        chosen = local if len(local) == 1 else same if len(same) == 1 else []
        if chosen:
            chosen[0].series.append(index)
            owners[index] = chosen[0]


def _name(series: list[Series], entries: list[LegendEntry], panels: list[Panel]) -> None:
    owner_label = {i: e.text.get_text() for e in entries for i in e.series}
    counts: dict[tuple[int, str], int] = {}
    for index, item in enumerate(series):
        name: str
        if item.label:
            name = item.label
        elif item.gid:
            name = item.gid
        elif index in owner_label:
            name = f"{owner_label[index]} ({item.kind})"
        elif item.kind == "cells":
            name = item.columns[-1].name
        else:
            key = (item.panel, item.kind)
            counts[key] = counts.get(key, 0) + 1
            where = f"{panels[item.panel].title}: " if len(panels) > 1 else ""
            name = f"{where}{item.kind} {counts[key]}"
        item.name = " ".join(str(name).split())


# ---------------------------------------------------------------------------------------------
# CSV


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


# ---------------------------------------------------------------------------------------------
# SVG with hover data


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
