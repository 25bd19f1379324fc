"""Workload distributions (the paper's Fig. 3): ECDFs of T, K and kappa_ratio per workload,
with kappa_crit lines for chosen deployments and the transfer-bound share printed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.workload.bound import transfer_bound_shares
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.plot.style import color, legend_below, new_figure, source_line, style
from kvroof.workload.records import Workload

__all__ = ["workload_figure"]

_FLOOR = 0.5  # zeros cannot sit on a log axis: they are drawn at this value (the left edge)


_ECDF_POINTS = 2000  # steps drawn per curve: enough to be exact to the eye, fast to draw


def _ecdf(values: np.ndarray[tuple[int], np.dtype[np.float64]]) -> tuple[
        np.ndarray[tuple[int], np.dtype[np.float64]], np.ndarray[tuple[int], np.dtype[np.float64]]]:
    """The empirical CDF at (at most) ``_ECDF_POINTS`` of its steps, each exact."""
    ordered = np.sort(values)
    index = np.unique(np.linspace(0, ordered.size - 1, min(ordered.size, _ECDF_POINTS))
                      .astype(np.int64))
    return np.maximum(ordered[index], _FLOOR), (index + 1.0) / ordered.size


def workload_figure(workloads: Sequence[Workload], deployments: Sequence[Deployment],
                    new_tokens: float = 128.0) -> Figure:
    """Three ECDF panels (T, K, kappa_ratio; ``gid`` ``"ecdf:<panel>:<workload>"``). On the
    kappa panel: each deployment's paper-mode kappa_crit (dashed, ``gid``
    ``"paper:<deployment>"``) and full-mode kappa_crit at ``new_tokens`` (the report's T; solid,
    ``gid`` ``"full:<deployment>"``), in greys. The legends sit under the panels (never over
    the curves): the workloads under the K panel, and under the kappa panel each deployment's
    lines with the share of each workload's requests that is transfer-bound in full mode
    (decided per request, at its own T)."""
    from matplotlib.lines import Line2D

    with style():
        fig, axes = new_figure(ncols=3, width=4.4, height=4.8)
        panels = (("new tokens T (tokens)", "new"), ("cached tokens K (tokens)", "cached"),
                  ("κ_ratio = K / T (cached per new token)", "kappa"))
        for index, workload in enumerate(workloads):
            columns = (workload.new_tokens.astype(float), workload.cached_tokens.astype(float),
                       np.minimum(workload.kappa_ratio(), 1e9))
            synthetic = workload.synthetic and "synthetic" not in workload.name.lower()
            label = workload.name + (" (synthetic)" if synthetic else "")
            for ax, values, (_, key) in zip(axes, columns, panels, strict=True):
                x, y = _ecdf(values)
                ax.step(x, y, where="post", color=color(index), linewidth=1.6, label=label,
                        gid=f"ecdf:{key}:{workload.name}")
        for ax, (title, _) in zip(axes, panels, strict=True):
            ax.set_xscale("log")
            ax.set_xlabel(title)
            ax.set_ylabel("share of requests (fraction)")
            ax.set_ylim(0, 1.02)
        kappa_ax = axes[2]
        handles: list[Any] = []
        texts: list[str] = []
        median_t = new_tokens
        for index, dep in enumerate(deployments):
            shade = ("0.1", "0.45", "0.65")[index % 3]
            paper = float(kappa_paper_for(dep).kappa_crit)
            full = float(kappa_crit(dep, median_t).kappa_crit)
            kappa_ax.axvline(paper, color=shade, linestyle="--", linewidth=1.1,
                             gid=f"paper:{dep.short_label}")
            if np.isfinite(full):
                kappa_ax.axvline(full, color=shade, linestyle="-", linewidth=1.4,
                                 gid=f"full:{dep.short_label}")
            shown = f"{full:.3g}" if np.isfinite(full) else "never"
            where = dep.system.name if dep.system is not None else dep.accelerator.name
            shares = ", ".join(
                f"{w.name.removeprefix('synthetic-')} "
                f"{100 * transfer_bound_shares(w, dep, 'full').requests_transfer_bound:.0f}%"
                for w in workloads)
            handles += [Line2D([], [], color=shade, linestyle="-", linewidth=1.4),
                        Line2D([], [], color=shade, linestyle="--", linewidth=1.1)]
            texts += [f"{dep.model.name}, {where}, TP {dep.tp}: κ_crit {shown} (full, "
                      f"T={median_t:g})\ntransfer-bound: {shares}",
                      f"κ_crit {paper:.3g} (paper mode)"]
        legend_below(axes[1], ncol=1, fontsize=7.5, title="workload", title_fontsize=7.5)
        if handles:
            legend_below(kappa_ax, handles, texts, ncol=1, fontsize=7)
        fig.suptitle("Workload distributions with κ_crit (dashed: paper mode, solid: full mode)",
                     fontsize=11)
        source_line(fig, f"zeros drawn at {_FLOOR} on the log axes; transfer-bound share from "
                         "the full model per request")
    return fig
