"""What-if figures (the paper's Fig. 7 and model what-ifs): kappa_crit against host-link
bandwidth with real links marked and whole-host alternatives placed as points, and against KV
format."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.what_if import standard_what_ifs, with_mla
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.plot.fitting import split_by_fit
from kvroof.plot.style import color, new_figure, source_line, style
from kvroof.specs.registry import Registry, default_registry

__all__ = ["DEFAULT_MARKED_LINKS", "what_if_figure"]

DEFAULT_MARKED_LINKS = ("pcie-gen4-x16", "pcie-gen5-x16", "pcie-gen6-x16", "nvlink-c2c")
KV_FORMATS = ("bf16", "fp8", "int4")


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
    Right: kappa_crit by KV format (bf16, fp8, int4; as-is and with an MLA latent), full mode.
    Deployments that do not fit are left out and named (:mod:`kvroof.plot.fitting`)."""
    reg = registry or default_registry()
    deployments, not_drawn = split_by_fit(deployments)
    bandwidth = np.geomspace(*bandwidth_range, 200)
    hosts = [s for s in standard_what_ifs(reg) if s[0].startswith("C2C")]
    with style():
        fig, (left, right) = new_figure(ncols=2, width=5.8, height=4.4)
        left.set_xscale("log")
        left.set_yscale("log")
        for index, dep in enumerate(deployments):
            swept = dataclasses.replace(dep, bandwidth=bandwidth)
            full = np.asarray(kappa_crit(swept, new_tokens).kappa_crit, dtype=float)
            paper = np.asarray(kappa_paper_for(swept).kappa_crit, dtype=float)
            name = dep.short_label
            finite = np.isfinite(full)
            where = "this host" if dep.system is not None else "link"
            left.plot(bandwidth[finite] / 1e9, full[finite], color=color(index), linewidth=1.8,
                      label=f"{name} ({where}, T={new_tokens:g})", gid=f"full:{name}")
            if dep.system is not None:
                alone = dataclasses.replace(swept, system=None, gpus_loading=None,
                                            tier_fractions={})
                bare = np.asarray(kappa_crit(alone, new_tokens).kappa_crit, dtype=float)
                ok = np.isfinite(bare)
                left.plot(bandwidth[ok] / 1e9, bare[ok], color=color(index), linestyle=":",
                          linewidth=1.1, label=f"{name} (link alone)", gid=f"bare:{name}")
            left.plot(bandwidth / 1e9, paper, color=color(index), linestyle="--", linewidth=1.0,
                      label=f"{name} (paper)", gid=f"paper:{name}")
            for marker, (host_name, _, apply) in zip("Ds", hosts, strict=False):
                changed = apply(dep)
                value = float(kappa_crit(changed, new_tokens).kappa_crit)
                if math.isfinite(value):
                    left.plot([float(changed.effective_bandwidth) / 1e9], [value], marker=marker,
                              color=color(index), markersize=6, linestyle="none",
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
        previous, previous_low = -math.inf, False
        for label, value in marks:
            left.axvline(value / 1e9, color="0.35", linestyle=":", linewidth=0.9,
                         gid=f"link:{label}")
            # a label closer than 1.6x to the one before drops to mid-height (unless that one did)
            low = value / previous < 1.6 and not previous_low
            previous, previous_low = value, low
            left.text(value / 1e9, 0.55 if low else 0.98, f" {label}",
                      transform=left.get_xaxis_transform(), rotation=90, va="top", fontsize=7,
                      color="0.3")
        left.set_xlabel("host-link bandwidth per GPU (GB/s)")
        left.set_ylabel("κ_crit (cached tokens per new token)")
        left.set_title("κ_crit against host-link bandwidth")
        left.legend(loc="lower right", frameon=False, fontsize=6)

        width = 0.8 / max(1, 2 * len(deployments))
        all_values: list[float] = []
        for index, dep in enumerate(deployments):
            already_mla = dep.model.is_mla
            for variant, model in (("", dep.model),
                                   (" absorbed" if already_mla else " + MLA",
                                    with_mla(dep.model))):
                values = []
                for kv in KV_FORMATS:
                    changed = dataclasses.replace(dep, model=model, kv_dtype=kv,
                                                  mla_mode="absorbed" if variant else dep.mla_mode)
                    values.append(float(kappa_crit(changed, new_tokens).kappa_crit))
                all_values += values
                offset = (2 * index + (1 if variant else 0)) * width - 0.4 + width / 2
                shown = [v if math.isfinite(v) else math.nan for v in values]
                bars = right.bar(np.arange(len(KV_FORMATS)) + offset, shown, width,
                                 color=color(index), alpha=0.55 if variant else 0.95,
                                 hatch="//" if variant else None, edgecolor="black",
                                 linewidth=0.4, label=f"{dep.model.name}{variant}",
                                 gid=f"kv:{dep.model.name}{variant}")
                for rect, value in zip(bars, values, strict=True):
                    x_mid = rect.get_x() + rect.get_width() / 2
                    if math.isinf(value):  # no bar: label it at the foot of the axes
                        right.text(x_mid, 0.02, "never", ha="center", va="bottom", fontsize=7,
                                   rotation=90, transform=right.get_xaxis_transform())
                    else:
                        right.text(x_mid, value, f"{value:.3g}", ha="center", va="bottom",
                                   fontsize=7, rotation=90)
        right.set_xticks(range(len(KV_FORMATS)), [f"{kv} KV" for kv in KV_FORMATS])
        if any(math.isfinite(v) for v in all_values):
            right.set_yscale("log")
        else:  # nothing to draw on a log axis: every format is never transfer-bound
            right.set_ylim(0, 1)
            right.text(0.5, 0.5, "never transfer-bound at this T", ha="center",
                       transform=right.transAxes)
        right.set_ylabel("κ_crit (cached tokens per new token)")
        right.set_title(f"κ_crit by KV format (full mode, T = {new_tokens:g})")
        right.legend(loc="upper left", frameon=False)
        sources = sorted({d.resolved_bandwidth_source for d in deployments})
        source_line(fig, "; ".join(d.short_label for d in deployments) + "; MLA: latent 512 "
                         f"+ RoPE 64, absorbed prefill; right: {'/'.join(sources)} link "
                         "bandwidth; C2C hosts: whole host swapped (Grace LPDDR5X + C2C)"
                         + (f"; {not_drawn}" if not_drawn else ""))
    return fig
