"""Shared look of kvroof figures: fonts, a colour-blind-safe palette, a source line, saving."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from kvroof.errors import KvroofError

__all__ = ["FORMATS", "PALETTE", "KvroofFigure", "MinorTickMarks", "color", "new_figure",
           "save_figure", "source_line", "style"]

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
# deficiency. Black is left out (used for reference lines).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
COMPUTE_SHADE = "#009E73"
TRANSFER_SHADE = "#D55E00"
FORMATS = ("png", "svg", "pdf")

_RC: dict[str, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": None,  # constrained layout already fits the figure: no second draw
    "svg.fonttype": "none",
}


def color(index: int) -> str:
    """The palette colour at ``index`` (cycling)."""
    return PALETTE[index % len(PALETTE)]


@contextmanager
def style() -> Iterator[None]:
    """kvroof's matplotlib settings, for the duration of a ``with`` block (figures are drawn
    inside it, so fonts and grids follow it)."""
    with mpl.rc_context(cast(Any, _RC)):
        yield


class KvroofFigure(Figure):
    """A matplotlib Figure that shows itself in Jupyter without pyplot (``_repr_png_``): kvroof
    never registers its figures with pyplot, so a notebook would otherwise print only the
    object's name."""

    def _repr_png_(self) -> bytes:
        import io

        buffer = io.BytesIO()
        _tidy(self)
        with style():
            self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.4,
               height: float = 4.2) -> tuple[Figure, Any]:
    """A figure with a grid of axes (a flat array). Not registered with pyplot, so it is freed
    when dropped; it displays itself in Jupyter. Call inside :func:`style`."""
    fig = KvroofFigure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes.ravel()


def source_line(fig: Figure, text: str, width: int = 130) -> None:
    """A small note at the foot of the figure saying what it shows (model, system, mode),
    wrapped to ``width`` characters a line so that it never widens the figure."""
    import textwrap

    lines = textwrap.wrap(f"kvroof · {text}", width) or [""]
    fig.text(0.005, 0.002, "\n".join(lines), fontsize=7, color="0.35", ha="left",
             va="bottom")
    height = fig.get_figheight()
    bottom = min(0.3, (0.14 * len(lines) + 0.05) / height)
    fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))  # type: ignore[union-attr, call-arg]


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


def _tidy(fig: Figure) -> None:
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


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as PNG, SVG or PDF (by the file's suffix); the folder must exist. The
    file is written to a temporary file beside it and renamed into place when complete."""
    target = Path(path)
    kind = target.suffix.lstrip(".").lower()
    if kind not in FORMATS:
        raise KvroofError(f"{target}: unsupported figure format {target.suffix or '(none)'!r} "
                          f"(use .png, .svg or .pdf)")
    if not target.parent.is_dir():
        raise KvroofError(f"{target}: folder {target.parent} does not exist")
    _tidy(fig)
    options: dict[str, Any] = {}
    if kind == "png":  # zlib level 3: half the encoding time of the default 6, 8% larger files
        options["pil_kwargs"] = {"compress_level": 3}
    from kvroof.outputs import replacing

    with replacing(target) as (temp,):  # an existing file is replaced only when complete
        try:
            with open(temp, "xb") as handle, style():
                fig.savefig(handle, format=kind, **options)
        except OSError as error:
            raise KvroofError(f"{target}: cannot write: {error.strerror or error}") from None
    return target
