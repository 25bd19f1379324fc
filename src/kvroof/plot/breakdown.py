"""TTFT breakdown: stacked bars of compute and exposed transfer for each overlap mode, and for
several TP degrees."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from matplotlib.figure import Figure

from kvroof.cost.deployment import Deployment
from kvroof.cost.timing import OVERLAP_MODES, ttft
from kvroof.plot.fitting import split_by_fit
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    legend_below,
    new_figure,
    source_line,
    style,
)

__all__ = ["ttft_breakdown_figure"]


def ttft_breakdown_figure(
    dep: Deployment,
    new_tokens: float = 128.0,
    cached_tokens: float = 16384.0,
    tps: Sequence[int] = (1, 8),
) -> Figure:
    """For each TP degree (a group of bars) and overlap mode (a bar): compute time (``gid``
    ``"compute:<mode>:tp<N>"``) and the exposed transfer on top. A TP degree at which the
    deployment does not fit is left out and named (:mod:`kvroof.plot.fitting`)."""
    modes = list(OVERLAP_MODES)
    variants, not_drawn = split_by_fit([dataclasses.replace(dep, tp=tp) for tp in tps],
                                       [f"TP {tp}" for tp in tps])
    with style():
        fig, (ax,) = new_figure(width=6.8, height=4.8)
        x_labels = []
        for group, changed in enumerate(variants):
            tp = changed.tp
            for position, mode in enumerate(modes):
                result = ttft(changed, new_tokens, cached_tokens, mode)
                x = group * (len(modes) + 1) + position
                compute_ms = float(result.compute) * 1e3
                exposed_ms = float(result.exposed_transfer) * 1e3
                ax.bar(x, compute_ms, color=COMPUTE_SHADE, edgecolor="black", linewidth=0.4,
                       label="compute" if x == 0 else None, gid=f"compute:{mode}:tp{tp}")
                ax.bar(x, exposed_ms, bottom=compute_ms, color=TRANSFER_SHADE,
                       edgecolor="black", linewidth=0.4,
                       label="exposed transfer" if x == 0 else None,
                       gid=f"exposed:{mode}:tp{tp}")
                ax.text(x, compute_ms + exposed_ms, f"{compute_ms + exposed_ms:.3g}",
                        ha="center", va="bottom", fontsize=7)
                x_labels.append((x, f"{mode}\nTP {tp}"))
        ax.set_xticks([x for x, _ in x_labels], [label for _, label in x_labels], fontsize=8)
        ax.set_ylabel("time to first token (ms)")
        ax.set_ylim(top=ax.get_ylim()[1] * 1.1)
        ax.set_title(f"{dep.model.label}: TTFT at T = {new_tokens:g}, K = {cached_tokens:g}")
        legend_below(ax, ncol=2)
        ax.grid(axis="x", visible=False)
        source_line(fig, f"{dep.short_label.rsplit(', TP', 1)[0]}; prefill only"
                    + (f"; {not_drawn}" if not_drawn else ""))
    return fig
