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

The names are re-exported here from the modules that hold them, bottom to top: the data types
(:mod:`kvroof.plot.figure_series`), reading one axes (:mod:`kvroof.plot.axes_reading`) and a
whole figure (:mod:`kvroof.plot.figure_reading`), the CSV (:mod:`kvroof.plot.series_csv`) and
the SVG with its hover data (:mod:`kvroof.plot.hover_svg`).
"""

from __future__ import annotations

from kvroof.plot.figure_reading import figure_data
from kvroof.plot.figure_series import KINDS as KINDS
from kvroof.plot.figure_series import POINT_KINDS as POINT_KINDS
from kvroof.plot.figure_series import Column, FigureData, LegendEntry, Panel, Series
from kvroof.plot.figure_series import Value as Value
from kvroof.plot.hover_svg import hover_data as hover_data
from kvroof.plot.hover_svg import interactive_svg
from kvroof.plot.series_csv import figure_csv

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
