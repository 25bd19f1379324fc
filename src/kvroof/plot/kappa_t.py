"""kappa_crit against T (a phase diagram): full mode as a function of new tokens, the paper's
constant for comparison, and the T beyond which prefill is never transfer-bound; optionally both
regimes (the request alone, and inside a busy iteration that shares the weight reads)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.regimes import regime_curves
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for, max_new_tokens_for_crossover
from kvroof.plot.fitting import split_by_fit
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    axes_notes,
    deployment_colors,
    legend_below,
    log_axis,
    new_figure,
    source_line,
    style,
)

__all__ = ["kappa_vs_t_figure"]


def kappa_vs_t_figure(
    deployments: Sequence[Deployment],
    t_range: tuple[float, float] = (1.0, 16384.0),
    labels: Sequence[str] | None = None,
    iteration_tokens: float | None = None,
) -> Figure:
    """Full-mode kappa_crit(T) per deployment (solid), its paper-mode constant (dashed, ``gid``
    ``"paper:<label>"``) and a shaded band from the largest T with a crossover (``gid``
    ``"never:<label>"``). Above a curve prefill is transfer-bound; below, compute-bound.

    With ``iteration_tokens`` the solid curve is the request alone and a dash-dot one (``gid``
    ``"busy:<label>"``) the request inside an iteration of that many tokens (at least T), which
    shares the weight reads; a dot on the solid curve marks the T above which the request's
    FLOPs, not its weight reads, set its compute time (:mod:`kvroof.analysis.regimes`)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t = np.geomspace(*t_range, 300)
    names = list(labels) if labels is not None else [
        d.short_label for d in deployments
    ]
    kept, not_drawn = split_by_fit(deployments, names)
    kept_ids = {id(dep) for dep in kept}
    names = [name for dep, name in zip(deployments, names, strict=True) if id(dep) in kept_ids]
    deployments = kept
    tones = deployment_colors(deployments)
    with style():
        fig, (ax,) = new_figure(width=7.0, height=5.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        top = 1.0
        extra: list[tuple[Any, str]] = []
        for dep, name, tone in zip(deployments, names, tones, strict=True):
            if iteration_tokens is None:
                values = np.asarray(kappa_crit(dep, t).kappa_crit, dtype=float)
            else:
                curves = regime_curves(dep, iteration_tokens, t_range, t.size)
                values = curves.alone
                busy = curves.busy
                ok = np.isfinite(busy)
                ax.plot(t[ok], busy[ok], color=tone, linewidth=1.3, linestyle="-.",
                        label=f"_{name}, in a {iteration_tokens:g}-token iteration",
                        gid=f"busy:{name}")
                meet = curves.meet_tokens
                if math.isfinite(meet) and meet > t_range[0]:
                    at = float(np.interp(np.log(meet), np.log(t),
                                         np.where(np.isfinite(values), values, np.nan)))
                    ax.plot([meet], [at], marker="o", color=tone, markersize=5,
                            gid=f"meet:{name}", label=f"_{name}: weights stop mattering")
            finite = np.isfinite(values)
            if finite.any() and not (values[finite] > 0).any():
                shown = f"{name} (0: transfer-bound from the first cached token)"
            else:
                shown = name if finite.any() else f"{name} (never transfer-bound)"
            finite &= values > 0  # a log axis: kappa_crit 0 is said in the label
            ax.plot(t[finite], values[finite], color=tone, linewidth=1.8, label=shown,
                    gid=f"full:{name}")
            paper = float(kappa_paper_for(dep).kappa_crit)
            if paper > 0:
                ax.axhline(paper, color=tone, linestyle="--", linewidth=1.0,
                           gid=f"paper:{name}", label=f"_{name}: paper mode")
            t_max = float(max_new_tokens_for_crossover(dep))
            if t_max < t_range[1]:
                ax.axvspan(max(t_max, t_range[0]), t_range[1], facecolor=tone, alpha=0.08,
                           edgecolor=tone, hatch="//", linewidth=0, gid=f"never:{name}")
                extra.append((Patch(facecolor=tone, alpha=0.25, edgecolor=tone, hatch="//"),
                              f"{name}: T above {t_max:,.0f}, no K is transfer-bound"
                              if math.isfinite(t_max) and t_max > t_range[0] else
                              f"{name}: no K is transfer-bound"))
                if math.isfinite(t_max) and t_max > t_range[0]:
                    ax.axvline(t_max, color=tone, linestyle=":", linewidth=0.9,
                               gid=f"never-from:{name}")
            top = max(top, paper, float(np.nanmax(values[finite])) if finite.any() else 1.0)
        ax.set_xlim(*t_range)
        ax.set_ylim(top=top * 3)
        log_axis(ax, "y", *ax.get_ylim())
        ax.set_xlabel("new tokens T per request (tokens)")
        ax.set_ylabel("κ_crit = K* / T (cached tokens per new token)")
        ax.set_title("Where prefill turns transfer-bound: κ_crit against T")
        handles, texts = ax.get_legend_handles_labels()
        styles: list[tuple[Any, str | None, str]] = [
            ("-", None, "full mode (solid)"), ("--", None, "paper's Eq. 6, same hardware")]
        if iteration_tokens is not None:
            handles = list(handles)
            texts = [f"{text}, alone" for text in texts]
            styles += [("-.", None, f"in a {iteration_tokens:g}-token iteration (weights "
                                    "shared)"),
                       ("none", "o", "above this T the weights stop mattering")]
        for dash, marker, text in styles:
            handles.append(Line2D([], [], color="0.3", linestyle=dash, marker=marker,
                                  linewidth=1.4))
            texts.append(text)
        for handle, text in extra:
            handles.append(handle)
            texts.append(text)
        legend_below(ax, handles, texts, ncol=1 if len(deployments) > 2 else 2, fontsize=7)
        axes_notes(ax, [("note:transfer-bound", "above a curve: transfer-bound",
                         TRANSFER_SHADE),
                        ("note:compute-bound", "below it: compute-bound", COMPUTE_SHADE)],
                   fontsize=8)
        source_line(fig, "full mode: HBM roof, attention, TP, latency, granularity; paper "
                         "mode: 2 N_active / B_kv x BW / C for the same hardware"
                    + (f"; {not_drawn}" if not_drawn else ""))
    return fig
