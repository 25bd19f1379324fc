"""Checks on a drawn figure's layout, read from the Agg renderer's window extents (display
pixels), not from pixels of the image: every text lies inside the figure, a legend outside its
axes does not overlap the axes' data area or the axes' labels, a legend inside does not cover
any point of a plotted line, and labels of reference lines placed above the axes stay out of
the data area."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from kvroof.plot.style import MinorTickMarks, _tidy, style

TOLERANCE = 1.0  # pixels


def draw(fig: Figure) -> Any:
    """Draw ``fig`` as ``save_figure`` writes a PNG (tidied, kvroof's style, at the saved
    resolution: a figure's layout can differ between resolutions) and return the renderer;
    extents are then in pixels of the saved PNG."""
    import matplotlib as mpl

    canvas = FigureCanvasAgg(fig)
    _tidy(fig)
    with style():
        fig.set_dpi(float(mpl.rcParams["savefig.dpi"]))
        canvas.draw()
    return canvas.get_renderer()


def _texts(fig: Figure) -> Iterator[Text]:
    """The texts matplotlib draws: the figure's, each legend's, and each axes' (its texts,
    titles, axis labels and the tick labels of the ticks inside the view)."""
    candidates: list[Text] = list(fig.texts)
    for legend in fig.legends:
        candidates += [*legend.get_texts(), legend.get_title()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        candidates += [*ax.texts, ax.title, ax._left_title, ax._right_title]
        legend = ax.get_legend()
        if legend is not None:
            candidates += [*legend.get_texts(), legend.get_title()]
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.get_visible():
                continue
            candidates += [axis.label, axis.get_offset_text()]
            for tick in axis._update_ticks():
                candidates += [tick.label1, tick.label2]
    for artist in candidates:
        if artist.get_visible() and artist.get_text().strip():
            yield artist


def _overlap(a: Bbox, b: Bbox) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE
            and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE)


def _line_points(line: Line2D, samples: int = 24) -> np.ndarray:
    """The display coordinates of a line's vertices, with points between them (a straight
    reference line has only its two ends)."""
    path = line.get_path()
    xy = line.get_transform().transform(path.vertices)
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if len(xy) < 2 or line.get_linestyle() in ("None", "none", "", " "):
        return xy
    steps = np.linspace(0.0, 1.0, samples)[:, None, None]
    dense = xy[:-1][None] + steps * (xy[1:] - xy[:-1])[None]
    return dense.reshape(-1, 2)


def data_lines(ax: Any) -> list[Line2D]:
    """The axes' visible lines that show data or reference values (not kvroof's tick marks)."""
    return [line for line in ax.get_lines()
            if line.get_visible() and not isinstance(line, MinorTickMarks)
            and len(line.get_xdata()) > 0]


def data_patches(ax: Any) -> list[Any]:
    """Bars (rectangles with a ``gid``), not shaded regions spanning the axes."""
    from matplotlib.patches import Rectangle

    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()
            and p.get_gid() and not str(p.get_gid()).startswith(("region:", "never:"))]


def problems(fig: Figure) -> list[str]:
    """Everything wrong with ``fig``'s layout, one line each (empty when it is clean)."""
    renderer = draw(fig)
    found: list[str] = []
    frame = fig.bbox
    for text in _texts(fig):
        box = text.get_window_extent(renderer)
        # strictly inside: a glyph on the edge is drawn cut
        if (box.x0 < frame.x0 + TOLERANCE or box.y0 < frame.y0 + TOLERANCE
                or box.x1 > frame.x1 - TOLERANCE or box.y1 > frame.y1 - TOLERANCE):
            found.append(f"text {text.get_text()[:50]!r} leaves the figure: {box.bounds}")
    legends: list[tuple[Legend, Any]] = [(ax.get_legend(), ax) for ax in fig.axes
                                         if ax.get_legend() is not None]
    legends += [(legend, None) for legend in fig.legends]
    for legend, owner in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if not ax.get_visible() or ax.get_label() == "<colorbar>":
                continue
            area = ax.bbox
            inside = _overlap(box, area)
            if inside and ax is not owner:
                found.append(f"a legend of another axes overlaps {ax.get_title()!r}")
            if inside:
                for line in data_lines(ax):
                    points = _line_points(line)
                    covered = ((points[:, 0] > box.x0 + TOLERANCE)
                               & (points[:, 0] < box.x1 - TOLERANCE)
                               & (points[:, 1] > box.y0 + TOLERANCE)
                               & (points[:, 1] < box.y1 - TOLERANCE)
                               & (points[:, 0] >= area.x0) & (points[:, 0] <= area.x1)
                               & (points[:, 1] >= area.y0) & (points[:, 1] <= area.y1))
                    if covered.any():
                        found.append(f"legend of {ax.get_title()!r} covers line "
                                     f"{line.get_gid() or line.get_label()!r}")
                for patch in data_patches(ax):
                    if _overlap(box, patch.get_window_extent(renderer)):
                        found.append(f"legend of {ax.get_title()!r} covers bar "
                                     f"{patch.get_gid()!r}")
            ticks = [tick.label1 for axis in (ax.xaxis, ax.yaxis)
                     for tick in axis._update_ticks() if tick.label1.get_visible()]
            for text in (ax.xaxis.label, ax.yaxis.label, ax.title, *ticks):
                if text.get_text() and _overlap(box, text.get_window_extent(renderer)):
                    found.append(f"a legend overlaps the label {text.get_text()!r}")
    for ax in fig.axes:
        for text in ax.texts:
            gid = str(text.get_gid() or "")
            if gid.startswith(("reference-label", "note:")) and _overlap(
                    text.get_window_extent(renderer), ax.bbox):
                found.append(f"label {text.get_text()[:40]!r} sits on the data area")
            if gid.startswith("region-label"):
                box = text.get_window_extent(renderer)
                for line in data_lines(ax):
                    points = _line_points(line)
                    if ((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                            & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)).any():
                        found.append(f"label {text.get_text()!r} covers line "
                                     f"{line.get_gid()!r}")
        labels = [t for t in ax.texts
                  if str(t.get_gid() or "").startswith(("reference-label", "note:"))]
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                if _overlap(a.get_window_extent(renderer), b.get_window_extent(renderer)):
                    found.append(f"labels {a.get_text()[:40]!r} and {b.get_text()[:40]!r} "
                                 "overlap")
        if ax.title.get_text():
            for text in labels:
                if _overlap(ax.title.get_window_extent(renderer),
                            text.get_window_extent(renderer)):
                    found.append(f"label {text.get_text()[:40]!r} on the title")
    return found
