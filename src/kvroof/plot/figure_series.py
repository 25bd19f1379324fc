"""The data types of what a figure draws: a column (a quantity and the unit its axis shows,
with its conversion to SI units), a panel (one axes), a series (what one artist draws, as rows
in the units of its axes, with the positions to place them on the page), a legend entry and
the figure's data as a whole. :mod:`kvroof.plot.figure_reading` fills them from a figure;
:mod:`kvroof.plot.series_csv` and :mod:`kvroof.plot.hover_svg` write them out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from matplotlib.artist import Artist
from matplotlib.text import Text

__all__ = [
    "KINDS",
    "POINT_KINDS",
    "Column",
    "FigureData",
    "LegendEntry",
    "Panel",
    "Series",
    "Value",
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
