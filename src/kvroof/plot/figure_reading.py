"""Reading a whole figure: one panel per axes (colorbars left out), the series of each
(:mod:`kvroof.plot.axes_reading`), the legend entries with the series each stands for (by
label, else by the style of a proxy handle; an unlabelled series of the same style joins its
entry), and a name for every series: its legend label, else its ``gid``, else its legend
entry's, else its kind and number.
"""

from __future__ import annotations

from collections.abc import Iterator

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend import Legend

from kvroof.plot.axes_reading import AxesReader, style_of
from kvroof.plot.figure_series import FigureData, LegendEntry, Panel, Series

__all__ = ["figure_data"]


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
        reader = AxesReader(ax, index)
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
                style = style_of(handle)
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
