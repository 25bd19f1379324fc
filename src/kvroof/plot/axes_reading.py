"""Reading one axes: each data artist it holds (a line, a step curve, a reference line, bars,
points, a filled area or band, a polygon, heatmap cells) as a series of rows in the units its
axes show, read from the artists themselves (``Line2D.get_data()``, bar rectangles, scatter
offsets, image arrays), with a category for a bar or cell on an axis whose ticks are labelled
by hand, and the style (colour, line style, marker or hatch) that ties an artist to a legend
handle. Nothing here computes a number the figure does not draw.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import Collection, FillBetweenPolyCollection, PathCollection
from matplotlib.colors import to_hex
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter, PercentFormatter

from kvroof.plot.figure_series import Column, Series, Value

__all__ = ["AxesReader", "DrawnAxis", "style_of"]


def style_of(artist: Artist) -> tuple[Any, ...]:
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


class DrawnAxis:
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


class AxesReader:
    """Reads one panel's artists into series."""

    def __init__(self, ax: Axes, index: int) -> None:
        self.ax = ax
        self.index = index
        self.x = DrawnAxis(ax, "x")
        self.y = DrawnAxis(ax, "y")
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
            style=style_of(artists[0])))

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
