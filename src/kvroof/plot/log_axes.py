"""Log axes as kvroof draws them: ticks labelled at 1, 2 and 5 x 10^n in plain text, and the
unlabelled minor ticks of a long axis drawn as one marker line per axis
(:class:`MinorTickMarks`), which :func:`tidy_log_axes` applies to a figure before it is shown
or saved."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

__all__ = ["MinorTickMarks", "log_axis", "log_tick_label", "tidy_log_axes"]


def log_axis(ax: Any, which: str, low: float, high: float,
             labelled_decades: float = 4) -> None:
    """The ``which`` ("x" or "y") axis of ``ax``: logarithmic over [low, high], labelled at 1,
    2 and 5 x 10^n where it spans at most ``labelled_decades`` decades (at each decade where
    it spans more), every label written the same way: plain numbers when they all lie between
    0.01 and 1,000,000, else m x 10^n."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    if which == "x":
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        axis = ax.xaxis
    else:
        ax.set_yscale("log")
        ax.set_ylim(low, high)
        axis = ax.yaxis
    decades = math.log10(high / low) if low > 0 and high > low else 0.0
    subs = (1.0, 2.0, 5.0) if decades <= labelled_decades else (1.0,)
    axis.set_major_locator(LogLocator(subs=subs))
    plain = low >= 0.01 * 0.999 and high < 1e6

    def label(value: float, _position: object = None) -> str:
        if not math.isfinite(value) or value <= 0:
            return ""
        if plain:
            return f"{value:,.10g}" if value >= 1 else f"{value:.2g}"
        exponent = math.floor(math.log10(value) + 1e-9)
        mantissa = round(value / 10.0**exponent, 6)
        power = "10" + str(exponent).translate(_SUPERSCRIPT)
        return power if mantissa == 1 else f"{mantissa:g}\u00d7{power}"

    axis.set_major_formatter(FuncFormatter(label))


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076"
                                              "\u2077\u2078\u2079")


def log_tick_label(value: float, _position: object = None) -> str:
    """A log axis's tick label as plain text: ``1``, ``10``, ``10³``, ``10⁻²`` at decades,
    ``50`` or ``2×10⁵`` between them (matplotlib's default writes the same through mathtext, whose
    parser is a large share of the time to save a figure)."""
    if not math.isfinite(value) or value <= 0:
        return ""
    exponent = math.floor(math.log10(value) + 1e-9)
    mantissa = value / 10.0**exponent
    power = {0: "1", 1: "10"}.get(exponent, "10" + str(exponent).translate(_SUPERSCRIPT))
    if abs(mantissa - 1.0) < 1e-6:
        return power
    if 1e-2 <= value < 1e4:
        return f"{value:.4g}"
    return f"{mantissa:.3g}\u00d7{power}"


def tidy_log_axes(fig: Figure) -> None:
    """Log axes: minor ticks at 2 and 5 of each decade, labelled only where fewer than two
    decades fall inside the axis (the decade labels say enough); unlabelled ones are drawn as
    one marker line per axis (:class:`MinorTickMarks`) rather than a matplotlib Tick object per
    mark, whose layout and drawing were a fifth of the time to save a figure; tick labels as
    plain text rather than mathtext (the default log formatter's, replaced only where a figure
    kept it). Running it again decides again from the axis as it is then (a figure saved,
    changed and saved again)."""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, NullLocator

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for old in [a for a in ax.lines if isinstance(a, MinorTickMarks) and a.axis is axis]:
                old.remove()
            if axis.get_scale() != "log":
                continue
            if isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                axis.set_major_formatter(FuncFormatter(log_tick_label))
            locator = LogLocator(subs=(2.0, 5.0))
            low, high = sorted(axis.get_view_interval())
            # fewer than two decades inside the axis: label the 2s and 5s as well
            short = low > 0 and math.floor(math.log10(high)) - math.ceil(math.log10(low)) < 1
            marks = None if short else MinorTickMarks.for_axis(axis, locator)
            if marks is None:
                axis.set_minor_locator(locator)
                axis.set_minor_formatter(FuncFormatter(log_tick_label))
                continue
            axis.set_minor_locator(NullLocator())
            ax.add_artist(marks)  # not add_line: the marks are not data


class MinorTickMarks(Line2D):
    """The unlabelled minor ticks of one axis as a single line of tick markers: the marker,
    size, width and colour of the axis's own minor tick mark, at the locations its minor
    locator gives at draw time (after layout, as matplotlib's ticks), less those on a major
    tick or outside the view, as :meth:`matplotlib.axis.Axis.get_minorticklocs` and the axis's
    drawing drop them. Not part of the data limits or the layout."""

    def __init__(self, axis: Any, locator: Any, **line: Any) -> None:
        super().__init__([], [], linestyle="none", clip_on=False, **line)
        self.axis = axis
        self.locator = locator
        locator.set_axis(axis)
        self.set_in_layout(False)

    @classmethod
    def for_axis(cls, axis: Any, locator: Any) -> MinorTickMarks | None:
        """The marks for ``axis``, or None where its minor ticks are not simple outward or
        inward marks on one side (those stay matplotlib's own)."""
        tick = axis.minorTicks[0]
        if tick.tick2line.get_visible() or not tick.tick1line.get_visible():
            return None
        mark = tick.tick1line
        which = "x" if axis.axis_name == "x" else "y"
        transform = (axis.axes.get_xaxis_transform(which="tick1") if which == "x"
                     else axis.axes.get_yaxis_transform(which="tick1"))
        return cls(axis, locator, marker=mark.get_marker(), markersize=mark.get_markersize(),
                   markeredgewidth=mark.get_markeredgewidth(), color=mark.get_color(),
                   zorder=tick.get_zorder(), transform=transform, gid=f"minor-ticks:{which}",
                   label="_minor ticks")

    def locations(self) -> Any:
        axis = self.axis
        locs = np.asarray(self.locator(), dtype=float)
        if not locs.size:
            return locs
        scale = axis.get_transform()
        lo, hi = sorted(scale.transform(axis.get_view_interval()))
        tol = (hi - lo) * 1e-5
        at = scale.transform(locs)
        majors = scale.transform(np.asarray(axis.get_majorticklocs(), dtype=float))
        on_major = (np.isclose(at[:, None], majors[None, :], atol=tol, rtol=0).any(axis=1)
                    if majors.size else np.zeros(locs.shape, dtype=bool))
        inside = (at >= lo - tol) & (at <= hi + tol)
        return locs[inside & ~on_major]

    def drawn(self) -> bool:
        """Whether the axis would draw its own minor tick marks now: still logarithmic (a
        scale change drops kvroof's marks at the next save), shown, with the axes' decorations
        on and its minor tick marks not switched off since."""
        axis = self.axis
        return bool(axis.get_scale() == "log" and axis.get_visible() and axis.axes.axison
                    and axis.minorTicks[0].tick1line.get_visible())

    def draw(self, renderer: Any) -> None:
        if not self.drawn():
            return
        locs = self.locations()
        edge = np.zeros_like(locs)
        if self.axis.axis_name == "x":
            self.set_data(locs, edge)
        else:
            self.set_data(edge, locs)
        super().draw(renderer)
