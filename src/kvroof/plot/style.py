"""Shared look of kvroof figures: fonts, the one colour palette (colour-blind safe), fixed
colours per accelerator and per model, a source line wrapped to the figure, reference-line
labels in a strip above the axes, legends outside the data, log axes, saving.

Colour meaning, the same in every figure:

- bluish green (:data:`COMPUTE_SHADE`) means compute-bound and vermillion
  (:data:`TRANSFER_SHADE`) transfer-bound; nothing else is drawn in them;
- each accelerator has one colour (:func:`accelerator_color`) and each model one colour
  (:func:`model_color`), from :data:`SERIES`; a figure that tells deployments apart colours
  them by the model where the models differ, else by the accelerator (:func:`deployment_colors`);
- reference lines (links, budgets, medians) are grey or black.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from kvroof.errors import KvroofError

__all__ = ["ACCELERATOR_COLORS", "COMPUTE_SHADE", "FORMATS", "MODEL_COLORS", "PALETTE",
           "SERIES", "TRANSFER_SHADE", "KvroofFigure", "MinorTickMarks", "accelerator_color",
           "axes_notes",
           "color", "deployment_colors", "legend_below", "log_axis", "model_color",
           "new_figure", "reference_labels", "save_figure", "source_line", "style"]

OKABE_ITO: dict[str, str] = {
    "blue": "#0072B2", "orange": "#E69F00", "bluish green": "#009E73",
    "vermillion": "#D55E00", "reddish purple": "#CC79A7", "sky blue": "#56B4E9",
    "yellow": "#F0E442", "black": "#000000",
}
"""Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
deficiency."""

COMPUTE_SHADE = OKABE_ITO["bluish green"]
"""Compute-bound, and nothing else."""
TRANSFER_SHADE = OKABE_ITO["vermillion"]
"""Transfer-bound, and nothing else."""

SERIES: tuple[str, ...] = (
    OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["reddish purple"], OKABE_ITO["sky blue"],
    OKABE_ITO["black"], "#882255", "#999933", "#332288",
)
"""Colours for series (models, accelerators, workloads, policies): Okabe-Ito without the two
regime colours and without yellow (too faint on white), then Paul Tol's wine, olive and indigo
(his colour-blind-safe "muted" scheme)."""
PALETTE = SERIES  # the name earlier versions exported

ACCELERATOR_COLORS: dict[str, str] = {
    "a100": SERIES[0], "h100": SERIES[1], "b200": SERIES[2], "h200": SERIES[3],
    "gh200": SERIES[5], "gb200": SERIES[7], "b300": SERIES[4], "mi300x": SERIES[6],
    "mi325x": SERIES[6], "mi355x": SERIES[6], "gb300": SERIES[7], "h20": SERIES[3],
    "l40s": SERIES[4], "gaudi3": SERIES[5], "t4": SERIES[4], "rtx-4090": SERIES[5],
    "rtx-pro-6000-server": SERIES[5],
}
"""One colour per accelerator (its variants, such as ``h100-sxm`` and ``h100-pcie``, share
it). The six the report compares (A100, H100, B200, H200, GH200, GB200) differ from each
other."""

MODEL_COLORS: dict[str, str] = {
    "qwen3-235b-a22b": SERIES[0], "deepseek-v3": SERIES[1], "llama-3.1-70b": SERIES[2],
    "gemma-3-27b": SERIES[3], "qwen3-next-80b-a3b": SERIES[4],
    "llama-4-scout-17b-16e": SERIES[5], "deepseek-v3.2": SERIES[6], "gemma-4-e2b": SERIES[7],
    "llama-3.1-405b": SERIES[7], "qwen3-30b-a3b": SERIES[6], "llama-3.1-8b": SERIES[5],
    "qwen3-8b": SERIES[3], "qwen3-32b": SERIES[4],
}
"""One colour per model. The seed paper's five models differ from each other, and so do the
seven that stand for the attention families; other models get a colour from their name."""


def _named_color(name: str, table: dict[str, str]) -> str:
    key = name.lower()
    if key in table:
        return table[key]
    # a variant of a listed name ("h100-sxm", "a100-sxm-40gb"): the longest listed prefix
    prefixes = [k for k in table if key.startswith(k + "-")]
    if prefixes:
        return table[max(prefixes, key=len)]
    import zlib

    return SERIES[zlib.crc32(key.encode()) % len(SERIES)]


def accelerator_color(name: str) -> str:
    """The accelerator's colour in every figure (registry name, e.g. ``h100-sxm``)."""
    return _named_color(name, ACCELERATOR_COLORS)


def model_color(name: str) -> str:
    """The model's colour in every figure (registry name, e.g. ``qwen3-235b-a22b``)."""
    return _named_color(name, MODEL_COLORS)


def deployment_colors(deployments: Sequence[Any]) -> list[str]:
    """A colour for each deployment: its model's where the models differ, else its
    accelerator's where those differ, else the series colours in order (the deployments then
    differ in something else, such as TP, that the legend names)."""
    models = [d.model.name for d in deployments]
    if len(set(models)) == len(models):
        return [model_color(m) for m in models]
    accelerators = [d.accelerator.name for d in deployments]
    if len(set(accelerators)) == len(accelerators):
        return [accelerator_color(a) for a in accelerators]
    return [color(i) for i in range(len(deployments))]


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


_MEASURE: list[Any] = []
_MEASURE_DPI = (100, 110, 150)  # notebooks, the screen, saved PNGs: hinting differs by dpi


def text_width(text: str, fontsize: float) -> float:
    """The width of one line of ``text`` in points, in kvroof's font at ``fontsize``: the
    widest of the Agg renderer's at the resolutions kvroof draws at (glyph hinting changes the
    width with the resolution by a few percent)."""
    from matplotlib.font_manager import FontProperties

    if not _MEASURE:
        from matplotlib.backends.backend_agg import RendererAgg

        _MEASURE.extend(RendererAgg(1, 1, dpi)  # type: ignore[no-untyped-call]
                        for dpi in _MEASURE_DPI)
    font = FontProperties(size=fontsize)
    return max(float(r.get_text_width_height_descent(text, font, ismath=False)[0]) * 72 / dpi
               for r, dpi in zip(_MEASURE, _MEASURE_DPI, strict=True))


def wrap_to_width(text: str, width_pt: float, fontsize: float) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width_pt`` points (a word wider than
    the line is broken at characters)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}" if line else word
        if text_width(trial, fontsize) <= width_pt:
            line = trial
            continue
        if line:
            lines.append(line)
        while text_width(word, fontsize) > width_pt and len(word) > 1:
            cut = max(1, int(len(word) * width_pt / text_width(word, fontsize)) - 1)
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line:
        lines.append(line)
    return lines or [""]


FOOTER_SIZE = 7.0


def source_line(fig: Figure, text: str, width: int | None = None) -> None:
    """A small note at the foot of the figure saying what it shows (model, system, mode),
    wrapped to the figure's width (or to ``width`` characters a line) so that no word is cut
    at its edge; the figure's layout keeps the axes above it."""
    if width is not None:
        import textwrap

        lines = textwrap.wrap(f"kvroof · {text}", width) or [""]
    else:
        usable = fig.get_figwidth() * 72 * 0.99 - 6  # points, less the left and right margins
        lines = wrap_to_width(f"kvroof · {text}", usable, FOOTER_SIZE)
    fig.text(0.005, 0.004, "\n".join(lines), fontsize=FOOTER_SIZE, color="0.35", ha="left",
             va="bottom", gid="footer")
    height = fig.get_figheight()
    bottom = min(0.4, (FOOTER_SIZE * 1.25 * len(lines) / 72 + 0.08) / height)
    fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))  # type: ignore[union-attr, call-arg]


def reference_labels(ax: Any, marks: Sequence[tuple[Any, ...]], *, fontsize: float = 7.0,
                     color: str = "0.3", gid: str = "reference-label") -> int:
    """Labels for vertical reference lines (or regions), in a strip above the axes, never over
    the data: each mark is (x, text) or (x, text, colour, gid); its label is centred over x
    (data coordinates; moved inwards where it would pass an end of the axes), in the lowest row
    where it does not run into a label already placed. Returns the number of rows; the axes'
    title is raised above them. A label's ``gid`` is its mark's, else ``"<gid>:<text>"``."""
    from matplotlib.transforms import ScaledTranslation

    fig = ax.get_figure()
    spec = ax.get_subplotspec()
    columns = spec.get_gridspec().ncols if spec is not None else 1
    # the axes' width in points, estimated before layout (a little less than its share)
    axes_pt = fig.get_figwidth() * 72 / columns - 60
    scale = ax.xaxis.get_transform()
    x_low, x_high = sorted(ax.get_xlim())
    low, high = (float(scale.transform(v)) for v in (x_low, x_high))
    rows: list[list[tuple[float, float]]] = []
    row_height = fontsize * 1.3
    placed = 0
    for mark in sorted(marks, key=lambda m: float(m[0])):
        x, label = float(mark[0]), str(mark[1])
        tone = mark[2] if len(mark) > 2 else color
        name = mark[3] if len(mark) > 3 else f"{gid}:{label}"
        if not x_low <= x <= x_high:
            continue
        centre = (float(scale.transform(x)) - low) / (high - low) * axes_pt
        half = text_width(label, fontsize) / 2 + 3
        shift = max(0.0, half - centre) - max(0.0, centre + half - axes_pt)
        centre += shift
        row = next((i for i, taken in enumerate(rows)
                    if all(centre - half >= b or centre + half <= a for a, b in taken)), None)
        if row is None:
            rows.append([])
            row = len(rows) - 1
        rows[row].append((centre - half, centre + half))
        lift = ScaledTranslation(shift / 72, (3 + row * row_height) / 72, fig.dpi_scale_trans)
        ax.text(x, 1.0, label, transform=ax.get_xaxis_transform() + lift, ha="center",
                va="bottom", fontsize=fontsize, color=tone, clip_on=False, gid=name)
        placed += 1
    if rows:
        ax.set_title(ax.get_title(), pad=6 + 3 + len(rows) * row_height)
    return len(rows) if placed else 0


def axes_notes(ax: Any, notes: Sequence[tuple[str, ...]], *, fontsize: float = 7.5) -> None:
    """Sentences about what the axes show (curves that coincide, a run with no steady state,
    which side of a curve is which regime), wrapped to the axes' width in a block above them
    (never over the data), under the title. Each note is (``gid``, text) or (``gid``, text,
    colour); a note whose gid contains "saturated" is bold."""
    from matplotlib.transforms import ScaledTranslation

    if not notes:
        return
    fig = ax.get_figure()
    spec = ax.get_subplotspec()
    columns = spec.get_gridspec().ncols if spec is not None else 1
    width = fig.get_figwidth() * 72 / columns - 72  # points, the axes' width less its margins
    lift = 3.0
    for note in reversed(notes):
        gid, text = note[0], note[1]
        tone = note[2] if len(note) > 2 else "black"
        bold = "saturated" in gid
        lines = wrap_to_width(text, width, fontsize * (1.06 if bold else 1.0))
        ax.text(0.0, 1.0, "\n".join(lines), transform=ax.transAxes + ScaledTranslation(
                    0, lift / 72, fig.dpi_scale_trans), ha="left", va="bottom",
                fontsize=fontsize, color=tone, clip_on=False, gid=gid,
                fontweight="bold" if bold else "normal")
        lift += len(lines) * fontsize * 1.25 + 3
    ax.set_title(ax.get_title(), pad=lift + 3)


def legend_below(ax: Any, handles: Sequence[Any] | None = None,
                 labels: Sequence[str] | None = None, *, ncol: int = 2, **options: Any) -> Any:
    """A legend under the axes' x label (outside the data), centred on the axes."""
    from matplotlib.transforms import ScaledTranslation

    fig = ax.get_figure()
    tick_font = float(mpl.rcParams["xtick.labelsize"]) if not isinstance(
        mpl.rcParams["xtick.labelsize"], str) else 9.0
    label_font = ax.xaxis.label.get_fontsize() if ax.get_xlabel() else 0.0
    tick_lines = max([t.get_text().count("\n") + 1 for t in ax.get_xticklabels()] or [1])
    tick_font = max([tick_font, *(t.get_fontsize() for t in ax.get_xticklabels())])
    # tick mark, pad, the tick labels (superscripts included), the label pad, the x label
    drop = 3.5 + 3.5 + tick_font * (1.25 * tick_lines + 0.25) + 4 + label_font * 1.5 + 4
    anchor = ax.transAxes + ScaledTranslation(0, -drop / 72, fig.dpi_scale_trans)
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    options.setdefault("frameon", False)
    return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0),
                     bbox_transform=anchor, ncol=ncol, **options)


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
