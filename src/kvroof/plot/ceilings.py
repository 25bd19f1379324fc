"""Hierarchical roofline: attainable FLOP/s against arithmetic intensity with the compute roof,
the HBM roof and the host-link roof, each request placed at its intensity for each memory level
(FLOPs per HBM byte, FLOPs per host-link byte), so every point sits under the roof of its own
level."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from kvroof.cost.deployment import Deployment
from kvroof.cost.roofline import request_intensities
from kvroof.cost.timing import ttft
from kvroof.errors import KvroofError
from kvroof.plot.fitting import require_fit
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    legend_below,
    new_figure,
    reference_labels,
    source_line,
    style,
)

__all__ = ["DEFAULT_REQUESTS", "ceilings_figure"]

DEFAULT_REQUESTS: tuple[tuple[float, float], ...] = (
    (16, 3200), (128, 1024), (512, 512), (2048, 1024), (12, 57000), (1024, 0.0),
)
"""(T, K) points: ShareGPT- and NarrativeQA-like medians and a few others."""


def ceilings_figure(
    dep: Deployment,
    requests: Sequence[tuple[float, float]] = DEFAULT_REQUESTS,
    intensity_range: tuple[float, float] = (1e-1, 1e7),
) -> Figure:
    """Attainable FLOP/s per GPU against FLOPs per byte of each memory level.

    Roofs: compute (effective peak), HBM (``intensity x effective HBM bandwidth``) and the host
    link (``intensity x effective offload bandwidth``). Each request (T, K) appears twice at the
    same height, its attainable FLOP/s with ideal overlap: a circle at its HBM intensity (FLOPs
    per byte of weights and KV read from HBM) and a triangle at its link intensity (FLOPs per
    byte loaded or saved over the host link), joined by a thin line. The level whose roof the
    request touches bounds it. A request that moves nothing over the link has no triangle.
    Markers are green where the request is compute-bound and vermillion where it is
    transfer-bound (``ttft(..., "ideal").bound``); the roofs are black and grey, and the ridge
    labels sit above the axes.
    """
    require_fit(dep)
    from matplotlib.lines import Line2D

    x = np.geomspace(*intensity_range, 300)
    peak = float(dep.effective_compute)
    hbm = float(dep.effective_hbm_bandwidth)
    link = float(dep.effective_bandwidth)
    with style():
        fig, (ax,) = new_figure(width=6.6, height=5.4)
        ax.plot(x, np.full_like(x, peak) / 1e12, color="black", linewidth=1.8,
                label=f"compute roof {peak / 1e12:.0f} TFLOP/s", gid="roof:compute")
        ax.plot(x, np.minimum(x * hbm, peak) / 1e12, color="0.45", linewidth=1.6,
                linestyle="--", label=f"HBM roof {hbm / 1e12:.2f} TB/s (x: FLOP per HBM byte)",
                gid="roof:hbm")
        ax.plot(x, np.minimum(x * link, peak) / 1e12, color="0.2", linewidth=1.6,
                linestyle="-.",
                label=f"host-link roof {link / 1e9:.0f} GB/s (x: FLOP per link byte)",
                gid="roof:link")
        ridges = []
        for ridge, name, tone in ((peak / hbm, "HBM", "0.45"), (peak / link, "link", "0.2")):
            ax.axvline(ridge, color=tone, linewidth=0.8, linestyle=":", gid=f"ridge:{name}")
            shown = f"{ridge:,.0f}" if ridge >= 100 else f"{ridge:.3g}"
            ridges.append((ridge, f"{name} ridge {shown} FLOP/B"))
        lowest = peak
        bounds = set()
        for t, k in requests:
            if not t >= 1:  # a log axis: a request computes at least one token
                raise KvroofError(f"request {t:g}:{k:g}: T must be at least 1 token")
            point = request_intensities(dep, t, k)
            achieved = float(point.attainable_flops) / 1e12
            at_hbm = float(point.hbm_intensity)
            at_link = float(point.link_intensity)
            bound = str(ttft(dep, t, k, "ideal").bound)
            bounds.add(bound)
            tone = TRANSFER_SHADE if bound == "transfer" else COMPUTE_SHADE
            ax.scatter([at_hbm], [achieved], color=tone, s=30, zorder=3, marker="o",
                       edgecolor="black", linewidth=0.4, gid=f"request-hbm:{t:g},{k:g}")
            if np.isfinite(at_link):
                ax.scatter([at_link], [achieved], color=tone, s=34, zorder=3, marker="^",
                           edgecolor="black", linewidth=0.4, gid=f"request-link:{t:g},{k:g}")
                ax.plot([at_hbm, at_link], [achieved, achieved], color=tone, linewidth=0.6,
                        alpha=0.7, gid=f"request:{t:g},{k:g}")
            lowest = min(lowest, achieved * 1e12)
            right_end = at_link if np.isfinite(at_link) else at_hbm
            ax.annotate(f"T={t:g}, K={k:g}", (min(right_end, intensity_range[1]), achieved),
                        fontsize=7, xytext=(6, -3), textcoords="offset points", ha="left",
                        gid=f"request-label:{t:g},{k:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*intensity_range)
        ax.set_ylim(lowest / 1e12 / 10, peak / 1e12 * 2)
        ax.set_xlabel("arithmetic intensity (FLOP per byte of that memory level)")
        ax.set_ylabel("attainable compute per GPU (TFLOP/s)")
        ax.set_title(f"{dep.model.label}: hierarchical roofline")
        reference_labels(ax, ridges, gid="reference-label:ridge")
        handles, labels = ax.get_legend_handles_labels()
        for marker, text in (("o", "request at its FLOP per HBM byte"),
                             ("^", "request at its FLOP per link byte")):
            handles.append(Line2D([], [], marker=marker, color="0.6", markeredgecolor="black",
                                  markeredgewidth=0.4, linestyle="none"))
            labels.append(text)
        for bound, tone in (("compute", COMPUTE_SHADE), ("transfer", TRANSFER_SHADE)):
            if bound in bounds:
                handles.append(Line2D([], [], marker="s", color=tone, linestyle="none"))
                labels.append(f"{bound}-bound request")
        legend_below(ax, handles, labels, ncol=2, fontsize=7)
        source_line(fig, f"{dep.short_label}; each request twice at the FLOP/s it attains "
                         "with load and compute overlapped: at its FLOPs per HBM byte (weights "
                         "+ KV) and per host-link byte (loads + saves)")
    return fig
