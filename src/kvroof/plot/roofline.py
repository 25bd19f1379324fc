"""The offload roofline (the paper's Fig. 4, extended): attainable compute per GPU against
kappa_ratio = K / T, one curve per accelerator + link, one panel per model."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.memory_fit import fit_problem
from kvroof.cost.roofline import offload_roofline
from kvroof.plot.style import COMPUTE_SHADE, TRANSFER_SHADE, color, new_figure, source_line, style
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = [
    "DEFAULT_HARDWARE",
    "DEFAULT_MODELS",
    "WORKLOAD_MEDIANS",
    "Hardware",
    "offload_roofline_figure",
]

DEFAULT_MODELS = ("qwen3-235b-a22b", "deepseek-v3")
DEFAULT_HARDWARE: tuple[tuple[str, str], ...] = (
    ("a100-sxm", "pcie-gen4-x16"),
    ("a100-sxm", "pcie-gen5-x16"),
    ("h100-sxm", "pcie-gen4-x16"),
    ("h100-sxm", "pcie-gen5-x16"),
    ("b200", "pcie-gen4-x16"),
    ("b200", "pcie-gen5-x16"),
)
WORKLOAD_MEDIANS: dict[str, float] = {"ShareGPT": 100.0, "NarrativeQA": 5000.0,
                                      "DocFinQA": 10000.0}
"""Median kappa_ratio of the paper's workloads (Meng, Lee, Wang, arXiv 2601.19910: ShareGPT about
100, NarrativeQA 5,000, DocFinQA 10,000)."""


Hardware = tuple[str, str] | str
"""An (accelerator, link) pair, or the name of a system."""


def _line_styles(hardware: Sequence[Hardware]) -> dict[Hardware, tuple[str, str]]:
    def parts(item: Hardware) -> tuple[str, str]:
        return (item, "") if isinstance(item, str) else item

    accelerators = list(dict.fromkeys(parts(h)[0] for h in hardware))
    links = list(dict.fromkeys(parts(h)[1] for h in hardware))
    dashes = ["-", "--", ":", "-."]
    return {h: (color(accelerators.index(parts(h)[0])),
                dashes[links.index(parts(h)[1]) % len(dashes)]) for h in hardware}


def offload_roofline_figure(
    models: Sequence[str | ModelSpec] = DEFAULT_MODELS,
    hardware: Sequence[Hardware] = DEFAULT_HARDWARE,
    *,
    mode: Literal["paper", "full"] = "full",
    new_tokens: float = 128.0,
    y: Literal["flops", "tokens"] = "flops",
    workload_medians: Mapping[str, float] | None = WORKLOAD_MEDIANS,
    kappa_range: tuple[float, float] = (0.1, 1e5),
    registry: Registry | None = None,
    **settings: Any,
) -> Figure:
    """Attainable compute (or new tokens/s) per GPU against K/T for each (accelerator, link)
    pair or system name in ``hardware``.

    A vertical line marks each curve's kappa_crit (``gid`` ``"kappa-crit:<accelerator>+<link>"``,
    or ``"kappa-crit:<system>"``),
    the region left of every kappa_crit is shaded compute-bound and right of every one
    transfer-bound. ``settings`` go to :func:`kvroof.cost.deployment.deployment` (``tp``,
    ``compute_efficiency``, ``bandwidth_source`` ...).
    """
    reg = registry or default_registry()
    ratios = np.geomspace(kappa_range[0], kappa_range[1], 400)
    styles = _line_styles(hardware)
    with style():
        fig, axes = new_figure(ncols=len(models), width=5.6, height=5.0)
        for ax, model in zip(axes, models, strict=True):
            spec = reg.model(model) if isinstance(model, str) else model
            ax.set_xscale("log")
            ax.set_yscale("log")
            crits: list[float] = []
            y_low, y_high = math.inf, 0.0
            for item in hardware:
                if isinstance(item, str):
                    dep = deployment(spec, system=item, registry=reg, **settings)
                    key = dep.system.name if dep.system is not None else item
                else:
                    dep = deployment(spec, accelerator=item[0], link=item[1], registry=reg,
                                     **settings)
                    key = f"{dep.accelerator.name}+{dep.link.name}"
                line_color, dash = styles[item]
                label = key.replace("+", " + ")
                if mode == "full" and fit_problem(dep):  # a legend entry, no curve
                    ax.plot([], [], color=line_color, linestyle=dash, linewidth=1.6,
                            label=f"{label} (does not fit)", gid=f"does-not-fit:{key}")
                    continue
                points = offload_roofline(dep, ratios, new_tokens, mode)
                values = np.asarray(points.tokens_per_second if y == "tokens"
                                    else points.attainable_flops)
                scale = 1.0 if y == "tokens" else 1e12
                if mode == "paper":
                    crit = float(kappa_paper_for(dep).kappa_crit)
                else:
                    crit = float(kappa_crit(dep, new_tokens).kappa_crit)
                crits.append(crit)
                shown = "never" if math.isinf(crit) else f"{crit:.3g}"
                y_low = min(y_low, float(np.min(values)) / scale)
                y_high = max(y_high, float(np.max(values)) / scale)
                ax.plot(ratios, values / scale, color=line_color, linestyle=dash, linewidth=1.6,
                        label=f"{label} (κ_crit {shown})")
                if math.isfinite(crit) and kappa_range[0] < crit < kappa_range[1]:
                    ax.axvline(crit, color=line_color, linestyle=dash, linewidth=0.9, alpha=0.8,
                               gid=f"kappa-crit:{key}")
            ax.set_xlim(*kappa_range)
            if y_high > 0:
                ax.set_ylim(y_low / 1.6, y_high * 1.3)
            finite = [c for c in crits if math.isfinite(c)]
            low = min(min(finite), kappa_range[1]) if finite else kappa_range[1]
            ax.axvspan(kappa_range[0], max(low, kappa_range[0]), color=COMPUTE_SHADE,
                       alpha=0.08, linewidth=0, gid="region:compute-bound")
            if finite and len(finite) == len(crits):
                ax.axvspan(max(finite), kappa_range[1], color=TRANSFER_SHADE, alpha=0.08,
                           linewidth=0, gid="region:transfer-bound")
            ax.text(0.02, 0.03, "compute-bound", transform=ax.transAxes, fontsize=8,
                    color=COMPUTE_SHADE)
            ax.text(0.98, 0.03, "transfer-bound", transform=ax.transAxes, fontsize=8,
                    color=TRANSFER_SHADE, ha="right")
            for name, median in (workload_medians or {}).items():
                ax.axvline(median, color="0.3", linestyle=(0, (1, 2)), linewidth=0.8,
                           gid=f"workload:{name}")
                ax.text(median, 0.97, f" {name}", transform=ax.get_xaxis_transform(),
                        rotation=90, va="top", ha="left", fontsize=7, color="0.3")
            ax.set_xlabel("κ_ratio = K / T (cached tokens per new token)")
            ax.set_ylabel("attainable new tokens/s per GPU" if y == "tokens"
                          else "attainable compute per GPU (TFLOP/s)")
            where = f"T = {new_tokens:g}" if mode == "full" else "paper's Eq. 6"
            ax.set_title(f"{spec.label}: offload roofline ({mode} mode, {where})")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False,
                      title="accelerator + host link (κ_crit)", title_fontsize=8)
        tp = settings.get("tp", 1)
        bandwidth = settings.get("bandwidth_source") or "peak"
        note = ("; far right: curves flatten where attention over the cached tokens keeps pace "
                "with loading them" if mode == "full" else "; the paper's Eq. 6, no attention")
        source_line(fig, f"{mode} mode, TP {tp}, {bandwidth} link bandwidth, ideal overlap{note}")
    return fig
