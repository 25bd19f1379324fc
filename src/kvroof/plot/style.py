"""Shared look of kvroof figures: fonts, a source line wrapped to the figure, reference-line
labels in a strip above the axes, legends outside the data, saving; the colours
(:mod:`kvroof.plot.colors`) and log axes (:mod:`kvroof.plot.log_axes`) are re-exported here.

Colour meaning, the same in every figure:

- bluish green (:data:`COMPUTE_SHADE`) means compute-bound and vermillion
  (:data:`TRANSFER_SHADE`) transfer-bound; nothing else is drawn in them;
- each accelerator has one colour (:func:`accelerator_color`) and each model one colour
  (:func:`model_color`), from :data:`SERIES`; a figure that tells deployments apart colours
  them by the model where the models differ, else by the accelerator (:func:`deployment_colors`);
- reference lines (links, budgets, medians) are grey or black.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import matplotlib as mpl
from matplotlib.figure import Figure

from kvroof.errors import KvroofError
from kvroof.plot.colors import (
    ACCELERATOR_COLORS,
    COMPUTE_SHADE,
    MODEL_COLORS,
    OKABE_ITO,
    PALETTE,
    SERIES,
    TRANSFER_SHADE,
    accelerator_color,
    color,
    deployment_colors,
    model_color,
)
from kvroof.plot.log_axes import MinorTickMarks, log_axis, log_tick_label, tidy_log_axes

_tidy = tidy_log_axes  # the name earlier versions used

__all__ = [
    "ACCELERATOR_COLORS",
    "COMPUTE_SHADE",
    "FORMATS",
    "MODEL_COLORS",
    "OKABE_ITO",
    "PALETTE",
    "SERIES",
    "TRANSFER_SHADE",
    "KvroofFigure",
    "MinorTickMarks",
    "accelerator_color",
    "axes_notes",
    "color",
    "deployment_colors",
    "legend_below",
    "log_axis",
    "log_tick_label",
    "model_color",
    "new_figure",
    "reference_labels",
    "save_figure",
    "source_line",
    "style",
    "tidy_log_axes",
]

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
        tidy_log_axes(self)
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


def text_width(text: str, fontsize: float, weight: str = "normal") -> float:
    """The width of one line of ``text`` in points, in kvroof's font at ``fontsize`` and
    ``weight``: the widest of the Agg renderer's at the resolutions kvroof draws at (glyph
    hinting changes the width with the resolution by a few percent)."""
    from matplotlib.font_manager import FontProperties

    if not _MEASURE:
        from matplotlib.backends.backend_agg import RendererAgg

        _MEASURE.extend(RendererAgg(1, 1, dpi)  # type: ignore[no-untyped-call]
                        for dpi in _MEASURE_DPI)
    font = FontProperties(size=fontsize, weight=weight)
    return max(float(r.get_text_width_height_descent(text, font, ismath=False)[0]) * 72 / dpi
               for r, dpi in zip(_MEASURE, _MEASURE_DPI, strict=True))


def wrap_to_width(text: str, width_pt: float, fontsize: float,
                  weight: str = "normal") -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width_pt`` points at ``fontsize``
    and ``weight`` (a word wider than the line is broken at characters)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}" if line else word
        if text_width(trial, fontsize, weight) <= width_pt:
            line = trial
            continue
        if line:
            lines.append(line)
        while text_width(word, fontsize, weight) > width_pt and len(word) > 1:
            cut = max(1, int(len(word) * width_pt / text_width(word, fontsize, weight)) - 1)
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
        lines = wrap_to_width(text, width, fontsize, "bold" if bold else "normal")
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
    tidy_log_axes(fig)
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
