"""Three-ceiling roofline: FLOP/s against arithmetic intensity with the compute roof, the HBM
roof and the host-link roof, and requests plotted as points."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from kvroof.cost.deployment import Deployment
from kvroof.cost.roofline import link_intensity
from kvroof.cost.timing import ttft
from kvroof.plot.style import color, new_figure, source_line, style

__all__ = ["DEFAULT_REQUESTS", "ceilings_figure"]

DEFAULT_REQUESTS: tuple[tuple[float, float], ...] = (
    (16, 3200), (64, 6400), (128, 1024), (512, 512), (2048, 1024), (12, 57000), (23, 167000),
    (1024, 0.0),
)
"""(T, K) points: ShareGPT-, NarrativeQA- and DocFinQA-like medians and a few others."""


def ceilings_figure(
    dep: Deployment,
    requests: Sequence[tuple[float, float]] = DEFAULT_REQUESTS,
    intensity_range: tuple[float, float] = (1e1, 1e7),
) -> Figure:
    """Attainable FLOP/s per GPU against FLOPs per byte moved.

    Roofs: compute (effective peak), HBM (``intensity x HBM bandwidth``) and the host link
    (``intensity x effective offload bandwidth``). Each request (T, K) is placed at its link
    intensity (FLOPs per byte loaded over the host link) and its achieved FLOP/s with ideal
    overlap; a request with K = 0 loads nothing and sits at the right edge.
    """
    x = np.geomspace(*intensity_range, 300)
    peak = float(dep.effective_compute)
    hbm = dep.accelerator.hbm_bandwidth
    link = float(dep.effective_bandwidth)
    with style():
        fig, (ax,) = new_figure(width=6.6, height=4.6)
        ax.plot(x, np.full_like(x, peak) / 1e12, color="black", linewidth=1.8,
                label=f"compute roof {peak / 1e12:.0f} TFLOP/s", gid="roof:compute")
        ax.plot(x, np.minimum(x * hbm, peak) / 1e12, color=color(0), linewidth=1.4,
                linestyle="--", label=f"HBM roof {hbm / 1e12:.2f} TB/s", gid="roof:hbm")
        ax.plot(x, np.minimum(x * link, peak) / 1e12, color=color(3), linewidth=1.8,
                label=f"host-link roof {link / 1e9:.0f} GB/s", gid="roof:link")
        ax.axvline(peak / link, color=color(3), linewidth=0.8, linestyle=":",
                   gid="ridge:link")
        ax.text(peak / link, 0.02, f" link ridge {peak / link:.3g} FLOP/B",
                transform=ax.get_xaxis_transform(), rotation=90, fontsize=7, color=color(3),
                va="bottom")
        for index, (t, k) in enumerate(requests):
            intensity = float(link_intensity(dep, t, k))
            achieved = float(ttft(dep, t, k, "ideal").achieved_flops)
            shown = min(intensity, intensity_range[1])  # K = 0 loads nothing: right edge
            ax.scatter([shown], [achieved / 1e12], color=color(index + 1), s=30, zorder=3,
                       edgecolor="black", linewidth=0.4, gid=f"request:{t:g},{k:g}")
            ax.annotate(f"T={t:g}, K={k:g}", (shown, achieved / 1e12), fontsize=7,
                        xytext=(4, -10 if index % 2 else 5), textcoords="offset points",
                        ha="right" if shown >= intensity_range[1] else "left")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*intensity_range)
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
        ax.set_ylabel("attainable compute per GPU (TFLOP/s)")
        ax.set_title(f"{dep.model.label}: three ceilings")
        ax.legend(loc="lower right", frameon=False)
        source_line(fig, f"{dep.short_label}; points: FLOPs per KV byte over the host link, ideal "
                         "overlap")
    return fig
