"""Overhead grid (the paper's Fig. 6): transfer share of TTFT, or P_OH, over K by T, with the
P_OH = 1 contour."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from matplotlib import patheffects
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, PercentFormatter

from kvroof.cost.deployment import Deployment
from kvroof.cost.timing import Overlap, ttft
from kvroof.plot.fitting import require_fit
from kvroof.plot.style import new_figure, source_line, style

__all__ = ["DEFAULT_CACHED", "DEFAULT_NEW", "overhead_figure"]

DEFAULT_CACHED = tuple(2**i for i in range(10, 17))  # 1K .. 64K (the paper's grid)
DEFAULT_NEW = tuple(2**i for i in range(6, 12))  # 64 .. 2048


def overhead_figure(
    dep: Deployment,
    cached_tokens: Sequence[float] = DEFAULT_CACHED,
    new_tokens: Sequence[float] = DEFAULT_NEW,
    metric: Literal["transfer_share", "p_oh"] = "transfer_share",
    overlap: Overlap | None = None,
) -> Figure:
    """Heatmap of ``metric`` with K on x and T on y (cells annotated), and the P_OH = 1 contour
    (``gid`` ``"contour:p_oh=1"``) drawn on the continuous grid."""
    require_fit(dep)
    k = np.unique(np.asarray(cached_tokens, dtype=float))  # sorted: axes and contour need it
    t = np.unique(np.asarray(new_tokens, dtype=float))
    grid = ttft(dep, t[:, None], k[None, :], overlap)
    overlap = grid.overlap
    values = np.asarray(grid.transfer_share if metric == "transfer_share" else grid.p_oh)
    with style():
        fig, (ax,) = new_figure(width=7.0, height=4.6)
        norm = Normalize(0, 1) if metric == "transfer_share" else LogNorm(
            max(values.min(), 1e-3), max(values.max(), 1e-2))
        image = ax.imshow(values, origin="lower", aspect="auto", cmap="cividis", norm=norm,
                          extent=(-0.5, k.size - 0.5, -0.5, t.size - 0.5))
        for i in range(t.size):
            for j in range(k.size):
                value = values[i, j]
                text = f"{100 * value:.0f}%" if metric == "transfer_share" else f"{value:.2g}"
                bright = norm(value) > 0.6
                # above the contour, edged in the cell's colour: the line never hides a value
                ax.text(j, i, text, ha="center", va="center", fontsize=7, zorder=5,
                        color="black" if bright else "white", gid=f"cell:{i},{j}",
                        path_effects=[patheffects.withStroke(
                            linewidth=3, foreground=image.cmap(norm(value)))])
        # P_OH = 1 on a fine grid in index coordinates (log-spaced K and T between cells).
        fine_k = np.geomspace(k[0], k[-1], 200)
        fine_t = np.geomspace(t[0], t[-1], 200)
        p_oh = np.asarray(ttft(dep, fine_t[:, None], fine_k[None, :], overlap).p_oh)
        xs = np.interp(np.log(fine_k), np.log(k), np.arange(k.size))
        ys = np.interp(np.log(fine_t), np.log(t), np.arange(t.size))
        # black with a white edge: visible on every cividis shade, and not vermillion (which
        # means transfer-bound elsewhere, a region here, not a line)
        contour = ax.contour(xs, ys, p_oh, levels=[1.0], colors="black", linewidths=1.8,
                             linestyles="--")
        contour.set_path_effects([patheffects.Stroke(linewidth=3.6, foreground="white"),
                                  patheffects.Normal()])
        contour.set_gid("contour:p_oh=1")
        ax.set_xticks(range(k.size), [f"{v / 1024:g}K" for v in k])
        ax.set_yticks(range(t.size), [f"{v:g}" for v in t])
        ax.set_xlabel("cached tokens K (tokens)")
        ax.set_ylabel("new tokens T (tokens)")
        ax.grid(False)
        bar = fig.colorbar(image, ax=ax)
        if metric == "transfer_share":
            bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            bar.set_label("transfer share of TTFT (%)")
            title = "transfer share of TTFT"
        else:
            bar.set_label("P_OH = transfer time / compute time (ratio)")
            bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2g}"))
            bar.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
            title = "P_OH"
        ax.set_title(f"{dep.model.label}: {title}; dashed line: P_OH = 1")
        source_line(fig, f"{dep.short_label}; overlap {overlap}")
    return fig
