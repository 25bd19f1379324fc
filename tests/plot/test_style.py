"""kvroof's figure tidying: unlabelled log minor ticks drawn as one marker line per axis must
sit exactly where matplotlib's own minor ticks would (checked against matplotlib's Axis on
the same limits), look like them, and not change data limits or add a second line when a
figure is saved twice."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from kvroof.plot.style import MinorTickMarks, _tidy, new_figure, style


def draw(fig: Figure) -> None:
    FigureCanvasAgg(fig).draw()


def matplotlib_minor_ticks(low: float, high: float, axis_name: str) -> np.ndarray:
    """Where matplotlib itself draws the minor ticks of a log axis over [low, high] with
    LogLocator(subs=(2, 5)): the independent reference."""
    with style():
        fig, (ax,) = new_figure()
        getattr(ax, f"set_{axis_name}scale")("log")
        getattr(ax, f"set_{axis_name}lim")(low, high)
        axis = ax.xaxis if axis_name == "x" else ax.yaxis
        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        draw(fig)
        lo, hi = sorted(axis.get_view_interval())
        drawn = [t.get_loc() for t in axis.get_minor_ticks()
                 if t.tick1line.get_visible() and lo * (1 - 1e-9) <= t.get_loc()
                 <= hi * (1 + 1e-9)]
        shown = np.asarray(axis.get_minorticklocs())
        return np.sort(np.intersect1d(np.round(shown, 12), np.round(drawn, 12)))


@pytest.mark.parametrize("axis_name", ["x", "y"])
@pytest.mark.parametrize(("low", "high", "any_minor"), [
    (1.0, 1e3, True), (3e-7, 40.0, True), (17.0, 4e4, True),
    # wide enough that matplotlib labels every other decade and drops the 2s and 5s
    (0.9, 2e9, False), (1e-3, 1e12, False)])
def test_minor_marks_sit_where_matplotlib_draws_its_ticks(axis_name: str, low: float,
                                                          high: float, any_minor: bool) -> None:
    with style():
        fig, (ax,) = new_figure()
        getattr(ax, f"set_{axis_name}scale")("log")
        getattr(ax, f"set_{axis_name}lim")(low, high)
        _tidy(fig)
        (marks,) = [a for a in ax.lines if isinstance(a, MinorTickMarks)]
        draw(fig)
        data = marks.get_xdata() if axis_name == "x" else marks.get_ydata()
        edge = marks.get_ydata() if axis_name == "x" else marks.get_xdata()
    expected = matplotlib_minor_ticks(low, high, axis_name)
    assert np.sort(np.round(np.asarray(data, dtype=float), 12)).tolist() == expected.tolist()
    assert np.all(np.asarray(edge) == 0)   # on the axis line, in axes coordinates
    assert (len(expected) > 0) == any_minor


def test_minor_marks_look_like_matplotlibs_ticks_and_are_not_data() -> None:
    with style():
        fig, (ax,) = new_figure()
        ax.set_xscale("log")
        ax.plot([1.0, 1e4], [0.0, 1.0])
        before = ax.dataLim.frozen()
        tick = ax.xaxis.minorTicks[0].tick1line
        _tidy(fig)
        _tidy(fig)  # a figure saved as PNG and SVG is tidied twice
        fig.savefig(io.BytesIO(), format="png")
    marks = [a for a in ax.lines if isinstance(a, MinorTickMarks)]
    assert len(marks) == 1 and marks[0].get_gid() == "minor-ticks:x"
    line = marks[0]
    assert (line.get_marker(), line.get_markersize(), line.get_markeredgewidth(),
            line.get_color()) == (tick.get_marker(), tick.get_markersize(),
                                  tick.get_markeredgewidth(), tick.get_color())
    assert np.array_equal(ax.dataLim.get_points(), before.get_points())
    assert not ax.xaxis.get_minorticklocs().size   # matplotlib draws none of its own
    assert ax.get_legend_handles_labels() == ([], [])


def test_short_log_axes_keep_labelled_minor_ticks() -> None:
    """Fewer than two decades inside the axis: the 2s and 5s are labelled, so they stay
    matplotlib's ticks (their labels take part in the layout)."""
    with style():
        fig, (ax,) = new_figure()
        ax.set_yscale("log")
        ax.set_ylim(3.0, 80.0)
        _tidy(fig)
        draw(fig)
    assert not [a for a in ax.lines if isinstance(a, MinorTickMarks)]
    labels = [t.label1.get_text() for t in ax.yaxis.get_minor_ticks()
              if t.label1.get_visible() and 3.0 <= t.get_loc() <= 80.0]
    assert "5" in labels and "20" in labels


@pytest.mark.parametrize("hide", ["axis off", "axis hidden", "minor ticks off", "linear now"])
def test_minor_marks_follow_the_axis(hide: str) -> None:
    """Where matplotlib would draw no minor tick marks, neither do kvroof's."""
    with style():
        fig, (ax,) = new_figure()
        ax.set_xscale("log")
        ax.set_xlim(1.0, 1e4)
        _tidy(fig)
        if hide == "axis off":
            ax.set_axis_off()
        elif hide == "axis hidden":
            ax.xaxis.set_visible(False)
        elif hide == "minor ticks off":
            ax.tick_params(axis="x", which="minor", bottom=False)
        else:
            ax.set_xscale("linear")
        draw(fig)
    (marks,) = [a for a in ax.lines if isinstance(a, MinorTickMarks)]
    assert len(marks.get_xdata()) == 0


def test_a_twin_axes_draws_one_set_of_marks() -> None:
    with style():
        fig, (ax,) = new_figure()
        ax.set_xscale("log")
        ax.set_xlim(1.0, 1e4)
        twin = ax.twinx()
        _tidy(fig)
        draw(fig)
    drawn = [a for axes in (ax, twin) for a in axes.lines
             if isinstance(a, MinorTickMarks) and len(a.get_xdata())]
    assert len(drawn) == 1


def test_saving_again_decides_again() -> None:
    """A figure saved, narrowed to under two decades and saved again labels its 2s and 5s;
    one switched to a linear scale loses kvroof's marks."""
    with style():
        fig, (ax,) = new_figure()
        ax.set_yscale("log")
        ax.set_ylim(1.0, 1e5)
        _tidy(fig)
        assert [a for a in ax.lines if isinstance(a, MinorTickMarks)]
        ax.set_ylim(3.0, 80.0)
        _tidy(fig)
        assert not [a for a in ax.lines if isinstance(a, MinorTickMarks)]
        draw(fig)
        labels = [t.label1.get_text() for t in ax.yaxis.get_minor_ticks()
                  if t.label1.get_visible() and 3.0 <= t.get_loc() <= 80.0]
        assert "5" in labels
        ax.set_yscale("linear")
        _tidy(fig)
        assert not [a for a in ax.lines if isinstance(a, MinorTickMarks)]
