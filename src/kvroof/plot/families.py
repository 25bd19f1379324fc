"""kappa_crit by attention family: one model per family, against T and against K, and where its
cached tokens' bytes and FLOPs come from, layer kind by layer kind."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.families import Family, kind_shares
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.timing import compute_time
from kvroof.cost.transfer import transfer_time
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    axes_notes,
    log_axis,
    model_color,
    new_figure,
    source_line,
    style,
)

__all__ = ["families_figure"]

# Layer kinds in greys and hatches: the colours are the models' (top panels), and green and
# vermillion mean compute- and transfer-bound.
_KIND_STYLE: dict[str, tuple[str, str | None]] = {
    "full": ("0.3", None), "sparse": ("0.55", "xx"), "sliding": ("0.72", "//"),
    "chunked": ("0.85", "\\\\"), "linear": ("0.95", ".."), "shared": ("0.6", "--")}


def families_figure(
    families: Sequence[Family],
    deployments: Sequence[Deployment | None],
    others: Sequence[Deployment | None],
    new_tokens: float = 128.0,
    cached_tokens: float = 32_000.0,
    t_range: tuple[float, float] = (16.0, 16384.0),
    k_range: tuple[float, float] = (1e2, 1e7),
) -> Figure:
    """Four panels for ``families`` (one model each): kappa_crit against T on ``deployments``
    (solid; ``None`` where the model fits nowhere shown) and ``others`` (dashed, a second
    placement, ``None`` where it does not fit); transfer time over compute time against K at
    ``new_tokens`` (above 1: transfer-bound); and, per layer kind, the load bytes and attention
    FLOPs (at ``new_tokens``) per cached token of a ``cached_tokens`` prefix (whole model)."""
    t = np.geomspace(*t_range, 24)
    k = np.geomspace(*k_range, 120)
    with style():
        fig, axes = new_figure(ncols=2, nrows=2, width=6.2, height=4.3)
        tones = [model_color(f.model) for f in families]
        ax_t, ax_k, ax_b, ax_f = axes
        for index, (family, dep, other) in enumerate(zip(families, deployments, others,
                                                         strict=True)):
            for placed, dash in ((dep, "-"), (other, "--")):
                if placed is None:
                    continue
                label = f"{family.name}: {placed.short_label}"
                values = np.asarray(kappa_crit(placed, t).kappa_crit, dtype=float)
                finite = np.isfinite(values) & (values > 0)
                ax_t.plot(t[finite], values[finite], color=tones[index], linestyle=dash,
                          linewidth=1.6, label=label, gid=f"kappa:{label}")
                ratio = np.asarray(transfer_time(placed, k, new_tokens), dtype=float) / \
                    np.asarray(compute_time(placed, new_tokens, k), dtype=float)
                ax_k.plot(k, ratio, color=tones[index], linestyle=dash, linewidth=1.2,
                          gid=f"ratio:{label}")
        for ax in (ax_t, ax_k):
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax_t.set_xlabel("new tokens T per request (tokens)")
        ax_t.set_ylabel("κ_crit = K* / T (cached tokens per new token)")
        ax_t.set_title("κ_crit against T (request alone)")
        handles, labels = ax_t.get_legend_handles_labels()
        # one legend for both top panels (the same lines), above them: never over the data
        fig.legend(handles, labels, loc="outside upper center", ncol=3, frameon=False,
                   fontsize=7, title="solid: the first placement, dashed: the second (both "
                                     "top panels)", title_fontsize=7)
        ax_k.axhline(1.0, color="black", linewidth=0.8, gid="ratio:1")

        ax_k.set_xlabel("cached tokens K (tokens)")
        ax_k.set_ylabel("load time / compute time (ratio)")
        ax_k.set_title(f"Against K at T = {new_tokens:g}")
        axes_notes(ax_k, [("note:transfer-bound", "above 1: transfer-bound", TRANSFER_SHADE),
                          ("note:compute-bound", "below 1: compute-bound", COMPUTE_SHADE)],
                   fontsize=8)
        low, high = ax_t.get_ylim()
        log_axis(ax_t, "y", low, high)
        names = [f.name for f in families]
        rows = np.arange(len(families))
        seen: set[str] = set()
        for row, dep in zip(rows, deployments, strict=True):
            if dep is None:
                continue
            left_b = left_f = 0.0
            for share in kind_shares(dep.model, new_tokens, cached_tokens):
                shade, hatch = _KIND_STYLE.get(share.kind, ("0.5", None))
                legend = share.kind if share.kind not in seen else None
                seen.add(share.kind)
                ax_b.barh(row, share.bytes_per_cached_token / 1e3, left=left_b, color=shade,
                          hatch=hatch, edgecolor="black", linewidth=0.4, label=legend,
                          height=0.6, gid=f"bytes:{families[int(row)].name}:{share.kind}")
                ax_f.barh(row, share.flops_per_cached_token / 1e9, left=left_f, color=shade,
                          hatch=hatch, edgecolor="black", linewidth=0.4, height=0.6,
                          gid=f"flops:{families[int(row)].name}:{share.kind}")
                left_b += share.bytes_per_cached_token / 1e3
                left_f += share.flops_per_cached_token / 1e9
        for ax in (ax_b, ax_f):
            ax.set_yticks(rows, names, fontsize=7.5)
            ax.invert_yaxis()
        ax_b.set_xlabel(f"load bytes per cached token at K = {cached_tokens:,.0f}, bf16 (kB)")
        ax_b.set_title("Where a load's bytes come from")
        ax_f.legend(*ax_b.get_legend_handles_labels(), loc="upper left",
                    bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=7, title="layer kind",
                    title_fontsize=7)
        ax_f.set_xlabel(f"attention FLOPs per cached token, T = {new_tokens:g} (GFLOP)")
        ax_f.set_title("Where the cached tokens' compute comes from")
        source_line(fig, "one model per family (names in the panels); solid: the first "
                         "placement where the weights fit, dashed: the second; bars: whole "
                         "model, windows, the current chunk and fixed states included; MLA "
                         "expanded")
    return fig
