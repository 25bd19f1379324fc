"""What-if figures (the paper's Fig. 7 and model what-ifs): kappa_crit against host-link
bandwidth with real links marked and whole-host alternatives placed as points, and against KV
format."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.what_if import standard_what_ifs, with_mla
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.plot.fitting import split_by_fit
from kvroof.plot.style import (
    deployment_colors,
    legend_below,
    new_figure,
    reference_labels,
    source_line,
    style,
)
from kvroof.specs.registry import Registry, default_registry

__all__ = ["DEFAULT_MARKED_LINKS", "what_if_figure"]

DEFAULT_MARKED_LINKS = ("pcie-gen4-x16", "pcie-gen5-x16", "pcie-gen6-x16", "nvlink-c2c")
KV_FORMATS = ("bf16", "fp8", "int4")
DOTS_ABOVE = 20.0
"""The KV-format panel draws dots on a log axis where its values span more than this factor,
bars on a linear axis from 0 otherwise."""


def what_if_figure(
    deployments: Sequence[Deployment],
    new_tokens: float = 128.0,
    bandwidth_range: tuple[float, float] = (5e9, 2e13),
    marked_links: Sequence[str] = DEFAULT_MARKED_LINKS,
    registry: Registry | None = None,
) -> Figure:
    """Left: kappa_crit (full mode at ``new_tokens``) against the per-GPU host-link bandwidth
    on the deployment's own host (solid: its DRAM, shared by NUMA node, bounds each load) and
    for the link alone (dotted: no host-memory bound; paper mode dashed), links and the GPU's
    HBM marked (``gid`` ``"link:<name>"``); the whole-host NVLink-C2C alternatives (a Grace per
    GPU, a Grace per two GPUs) are points at their own bandwidth (``gid`` ``"host:<name>"``).
    Right: kappa_crit by KV format (bf16, fp8, int4; as-is and with an MLA latent), full mode:
    bars on a linear axis, or dots on a log axis where the values span more than 20 times.
    Link names sit above the left panel, legends below the panels.
    Deployments that do not fit are left out and named (:mod:`kvroof.plot.fitting`)."""
    reg = registry or default_registry()
    deployments, not_drawn = split_by_fit(deployments)
    bandwidth = np.geomspace(*bandwidth_range, 200)
    hosts = [s for s in standard_what_ifs(reg) if s[0].startswith("C2C")]
    tones = deployment_colors(deployments)
    with style():
        fig, (left, right) = new_figure(ncols=2, width=5.8, height=5.6)
        left.set_xscale("log")
        left.set_yscale("log")
        for index, dep in enumerate(deployments):
            tone = tones[index]
            swept = dataclasses.replace(dep, bandwidth=bandwidth)
            full = np.asarray(kappa_crit(swept, new_tokens).kappa_crit, dtype=float)
            paper = np.asarray(kappa_paper_for(swept).kappa_crit, dtype=float)
            name = dep.short_label
            finite = np.isfinite(full)
            where = "this host" if dep.system is not None else "link"
            left.plot(bandwidth[finite] / 1e9, full[finite], color=tone, linewidth=1.8,
                      label=f"{name} ({where}, T={new_tokens:g})", gid=f"full:{name}")
            if dep.system is not None:
                alone = dataclasses.replace(swept, system=None, gpus_loading=None,
                                            tier_fractions={})
                bare = np.asarray(kappa_crit(alone, new_tokens).kappa_crit, dtype=float)
                ok = np.isfinite(bare)
                left.plot(bandwidth[ok] / 1e9, bare[ok], color=tone, linestyle=":",
                          linewidth=1.1, label=f"{name} (link alone)", gid=f"bare:{name}")
            left.plot(bandwidth / 1e9, paper, color=tone, linestyle="--", linewidth=1.0,
                      label=f"{name} (paper)", gid=f"paper:{name}")
            for marker, (host_name, _, apply) in zip("Ds", hosts, strict=False):
                changed = apply(dep)
                value = float(kappa_crit(changed, new_tokens).kappa_crit)
                if math.isfinite(value):
                    left.plot([float(changed.effective_bandwidth) / 1e9], [value], marker=marker,
                              color=tone, markersize=6, linestyle="none",
                              markeredgecolor="black", label=f"{name}: {host_name} host",
                              gid=f"host:{host_name}:{name}")
        marks = [(reg.link(n).label, reg.link(n).peak_bandwidth) for n in marked_links]
        if deployments:
            hbm = deployments[0].accelerator
            marks.append((f"{hbm.name} HBM", hbm.hbm_bandwidth))
            dram = deployments[0].host_dram_share
            if math.isfinite(dram):
                marks.append(("DRAM share per GPU", dram))
        marks.sort(key=lambda mark: mark[1])
        for label, value in marks:
            left.axvline(value / 1e9, color="0.35", linestyle=":", linewidth=0.9,
                         gid=f"link:{label}")
        left.set_xlabel("host-link bandwidth per GPU (GB/s)")
        left.set_ylabel("κ_crit (cached tokens per new token)")
        left.set_title("κ_crit against host-link bandwidth")
        left.set_xlim(bandwidth_range[0] / 1e9, bandwidth_range[1] / 1e9)
        reference_labels(left, [(value / 1e9, label) for label, value in marks],
                         gid="reference-label:link")
        legend_below(left, ncol=1, fontsize=7)

        _kv_panel(right, deployments, tones, new_tokens)
        sources = sorted({d.resolved_bandwidth_source for d in deployments})
        source_line(fig, "; ".join(d.short_label for d in deployments) + "; MLA: latent 512 "
                         f"+ RoPE 64, absorbed prefill; right: {'/'.join(sources)} link "
                         "bandwidth; C2C hosts: whole host swapped (Grace LPDDR5X + C2C)"
                         + (f"; {not_drawn}" if not_drawn else ""))
    return fig


def _kv_panel(ax: Any, deployments: Sequence[Deployment], tones: Sequence[str],
              new_tokens: float) -> None:
    """kappa_crit by KV format: bars on a linear axis from 0 (``gid``
    ``"kv:<model><variant>"`` on each bar), or, where the values span more than
    :data:`DOTS_ABOVE` times, dots on a log axis (a bar's length on a log axis says nothing)."""
    series: list[tuple[str, str, bool, list[float]]] = []
    for dep, tone in zip(deployments, tones, strict=True):
        already_mla = dep.model.is_mla
        for variant, model in (("", dep.model),
                               (" absorbed" if already_mla else " + MLA", with_mla(dep.model))):
            values = []
            for kv in KV_FORMATS:
                changed = dataclasses.replace(dep, model=model, kv_dtype=kv,
                                              mla_mode="absorbed" if variant else dep.mla_mode)
                values.append(float(kappa_crit(changed, new_tokens).kappa_crit))
            series.append((f"{dep.model.name}{variant}", tone, bool(variant), values))
    finite = [v for *_, values in series for v in values if math.isfinite(v) and v > 0]
    positions = np.arange(len(KV_FORMATS))
    width = 0.8 / max(1, len(series))
    dots = bool(finite) and max(finite) / min(finite) > DOTS_ABOVE
    for index, (name, tone, hatched, values) in enumerate(series):
        offset = index * width - 0.4 + width / 2
        shown = [v if math.isfinite(v) else math.nan for v in values]
        if dots:
            ax.plot(positions + offset, shown, linestyle="none", marker="D" if hatched else "o",
                    markersize=7, color=tone, markerfacecolor="white" if hatched else tone,
                    markeredgewidth=1.4, label=name, gid=f"kv:{name}")
        else:
            ax.bar(positions + offset, shown, width, color=tone, alpha=0.5 if hatched else 0.95,
                   hatch="//" if hatched else None, edgecolor="black", linewidth=0.4,
                   label=name, gid=f"kv:{name}")
        for x, value in zip(positions + offset, values, strict=True):
            if math.isinf(value):  # nothing drawn: say it at the foot of the axes
                ax.text(x, 0.02, "never", ha="center", va="bottom", fontsize=7, rotation=90,
                        transform=ax.get_xaxis_transform(), gid=f"kv-label:{name}")
            elif dots:
                ax.annotate(f"{value:.3g}", (x, value), xytext=(0, 6), fontsize=7,
                            textcoords="offset points", ha="center", va="bottom",
                            gid=f"kv-label:{name}")
            else:
                ax.text(x, value, f" {value:.3g}", ha="center", va="bottom", fontsize=7,
                        rotation=90, gid=f"kv-label:{name}")
    ax.set_xticks(positions, [f"{kv} KV" for kv in KV_FORMATS])
    ax.grid(axis="x", visible=False)
    if not finite:  # every format is never transfer-bound
        ax.set_ylim(0, 1)
        ax.text(0.5, 0.5, "never transfer-bound at this T", ha="center",
                transform=ax.transAxes)
    elif dots:
        ax.set_yscale("log")
        ax.set_ylim(min(finite) / 2, max(finite) * 3)
    else:
        ax.set_ylim(0, max(finite) * 1.22)  # room for the value labels
    ax.set_ylabel("κ_crit (cached tokens per new token)")
    ax.set_title(f"κ_crit by KV format (full mode, T = {new_tokens:g})")
    legend_below(ax, ncol=2, fontsize=7)
