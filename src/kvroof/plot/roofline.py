"""The offload roofline (the paper's Fig. 4, extended): new tokens/s (or attainable compute) per
GPU against kappa_ratio = K / T, one curve per accelerator + link, one panel per model.

Paper mode draws the paper's figure from the paper's own inputs: its compute C (624 / 2,000 /
5,000 TFLOP/s for A100 / H100 / B200) and link bandwidth BW (32 / 64 GB/s for PCIe 4 / 5), the
values of the report's paper-mode table, so Qwen3-235B-A22B on H100 + PCIe 5 has its ridge at
the paper's kappa_crit (7.3 computed, 7.8 printed). Above its ridge a curve is ``kappa_M x BW /
kappa_ratio``, the same for every accelerator on a link, so each link's sloped roof is drawn
once, in grey, and each accelerator's flat roof in its colour.

The curves of a panel and their drawing are :mod:`kvroof.plot.roofline_panel`'s, the paper's
own inputs :mod:`kvroof.plot.roofline_paper`'s (their public names re-exported here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from kvroof.cost.memory_fit import fit_problem
from kvroof.plot.fitting import require_fit
from kvroof.plot.roofline_panel import (
    Hardware,
    draw_full,
    draw_paper,
    panel_curves,
    shade_regions,
)
from kvroof.plot.roofline_paper import PAPER_ACCELERATORS, PAPER_LINKS, paper_inputs
from kvroof.plot.style import (
    accelerator_color,
    legend_below,
    new_figure,
    reference_labels,
    source_line,
    style,
)
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = [
    "DEFAULT_HARDWARE",
    "DEFAULT_MODELS",
    "PAPER_ACCELERATORS",
    "PAPER_LINKS",
    "WORKLOAD_MEDIANS",
    "Hardware",
    "offload_roofline_figure",
    "paper_inputs",
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


def offload_roofline_figure(
    models: Sequence[str | ModelSpec] = DEFAULT_MODELS,
    hardware: Sequence[Hardware] = DEFAULT_HARDWARE,
    *,
    mode: Literal["paper", "full"] = "full",
    new_tokens: float = 128.0,
    y: Literal["flops", "tokens"] | None = None,
    workload_medians: Mapping[str, float] | None = WORKLOAD_MEDIANS,
    kappa_range: tuple[float, float] = (0.1, 1e5),
    registry: Registry | None = None,
    peaks: Literal["paper", "spec", "both"] = "paper",
    mark_ratio: float | None = None,
    **settings: Any,
) -> Figure:
    """The offload roofline of each model (a panel each) on each (accelerator, link) pair or
    system name in ``hardware`` (duplicates drawn once).

    ``y``: ``"tokens"`` (new tokens/s per GPU) or ``"flops"`` (attainable TFLOP/s per GPU);
    default tokens in full mode and FLOP/s in paper mode (the paper's axis).

    Full mode: one curve per pair (colour: the accelerator, line style: the link), flat while
    compute-bound and falling as 1/kappa_ratio once transfer-bound; a marker where it turns,
    at kappa_crit (``gid`` ``"kappa-crit:<accelerator>+<link>"`` or ``"kappa-crit:<system>"``,
    its first x the value). A pair whose weights do not fit is not drawn: an empty line keeps
    its ``gid`` ``"does-not-fit:<key>"`` and the footer names it, in one line per panel.

    Paper mode: ``peaks="paper"`` uses the paper's C and BW for its GPUs and links
    (:func:`paper_inputs`; other hardware its spec peaks, and the legend says which), and the
    legend gives the kappa_crit the paper prints beside the computed one; ``"spec"`` the dense
    spec peaks and link peaks of :func:`kvroof.cost.kappa.kappa_paper_for`; ``"both"`` a panel
    of each per model, titled so. Flat roofs (``gid`` ``"roof:<accelerator>"``) in the
    accelerator's colour, one sloped roof per link (``gid`` ``"slope:<link>"``) in grey.

    Shading: left of every kappa_crit compute-bound (``gid`` ``"region:compute-bound"``),
    right of every one transfer-bound (``"region:transfer-bound"``); workload medians dotted
    (``gid`` ``"workload:<name>"``), labelled above the axes; ``mark_ratio``: a chosen K / T
    (``explore()``'s), a solid black line labelled "chosen K/T" (``gid`` ``"mark:chosen"``).
    ``settings`` go to
    :func:`kvroof.cost.deployment.deployment` (``tp``, ``compute_efficiency``,
    ``bandwidth_source`` ...).
    """
    reg = registry or default_registry()
    y_kind: Literal["flops", "tokens"] = y or ("tokens" if mode == "full" else "flops")
    ratios = np.geomspace(kappa_range[0], kappa_range[1], 400)
    panels: list[tuple[str | ModelSpec, str]] = []
    for model in models:
        if mode == "paper" and peaks == "both":
            panels += [(model, "paper"), (model, "spec")]
        else:
            panels.append((model, peaks if mode == "paper" else ""))
    footer_notes: list[str] = []
    shared_link = False
    drawn_any = False
    first_left_out: Any = None
    with style():
        fig, axes = new_figure(ncols=len(panels), width=5.6, height=5.6)
        for ax, (model, source) in zip(axes, panels, strict=True):
            spec = reg.model(model) if isinstance(model, str) else model
            curves = panel_curves(spec, hardware, reg, source, settings)
            left_out = [c for c in curves if mode == "full" and fit_problem(c.dep)]
            for curve in left_out:  # no curve and no legend entry: the footer names it
                ax.plot([], [], color=accelerator_color(curve.accelerator), linewidth=0,
                        label=f"_{curve.label} (does not fit)", gid=f"does-not-fit:{curve.key}")
            if left_out:
                tp = left_out[0].dep.tp
                footer_notes.append(
                    f"{spec.label}: not drawn, the weights do not fit at TP {tp}: "
                    + ", ".join(c.label for c in left_out))
            drawn = [c for c in curves if c not in left_out]
            drawn_any |= bool(drawn)
            if left_out and first_left_out is None:
                first_left_out = left_out[0].dep
            links = [c.link for c in drawn]
            shared_link |= len(set(links)) < len(links)
            if mode == "paper":
                crits = draw_paper(ax, drawn, ratios, y_kind, kappa_range)
            else:
                crits = draw_full(ax, drawn, ratios, y_kind, new_tokens, kappa_range)
            marks: list[tuple[Any, ...]] = shade_regions(ax, crits, kappa_range)
            medians = [(median, name) for name, median in (workload_medians or {}).items()]
            marks += medians
            if mark_ratio is not None and kappa_range[0] <= mark_ratio <= kappa_range[1]:
                ax.axvline(mark_ratio, color="black", linewidth=1.2, gid="mark:chosen")
                marks.append((mark_ratio, f"chosen K/T = {mark_ratio:.3g}", "black",
                              "reference-label:chosen"))
            for median, name in medians:
                ax.axvline(median, color="0.3", linestyle=(0, (1, 2)), linewidth=0.8,
                           gid=f"workload:{name}")
            ax.set_xlabel("κ_ratio = K / T (cached tokens per new token)")
            ax.set_ylabel("attainable prefill rate per GPU (new tokens/s)"
                          if y_kind == "tokens" else "attainable compute per GPU (TFLOP/s)")
            if mode == "full":
                where = f"full mode, T = {new_tokens:,.10g}"
            elif source == "spec":
                where = "paper mode, dense spec peaks"
            else:
                where = "paper mode, the paper's C and BW"
            ax.set_title(f"{spec.label} ({where})")
            reference_labels(ax, marks, gid="reference-label:workload", fontsize=7.5)
            title = ("accelerator + host link: κ_crit" if mode == "full" else
                     "markers: κ_crit; flat roofs: C; sloped roofs: BW")
            handles, labels = ax.get_legend_handles_labels()
            if handles:  # markers (kappa_crit) first, then the roofs
                order = sorted(range(len(handles)), key=lambda i: not str(
                    handles[i].get_gid()).startswith(("kappa-crit:", "off-axis:")))
                legend_below(ax, [handles[i] for i in order], [labels[i] for i in order],
                             ncol=2, title=title, title_fontsize=8)
        tp = settings.get("tp", 1)
        bandwidth = settings.get("bandwidth_source") or "peak"
        if mode == "full":
            note = (f"full mode, TP {tp}, {bandwidth} link bandwidth, load and compute "
                    "overlapped; line colour: the accelerator, line style: the host link")
            if shared_link:
                note += "; where curves of one link meet, the link sets the rate"
            if y_kind == "flops":
                note += ("; far right: curves flatten where attention over the cached tokens "
                         "keeps pace with loading them")
        else:
            note = ("paper mode (the paper's Eq. 6, no attention): κ_crit = 2 N_active / B_kv "
                    "× BW / C")
            if peaks != "spec":
                note += ("; the paper's C (A100 624, H100 2,000, B200 5,000 TFLOP/s) and BW "
                         "(PCIe 4: 32, PCIe 5: 64 GB/s)")
            if peaks != "paper":
                note += "; dense spec peaks: the GPU's dense compute and the link's peak"
        source_line(fig, "; ".join([note, *footer_notes]))
    if not drawn_any and first_left_out is not None:  # nothing fits: refuse, as kappa does
        require_fit(first_left_out)
    return fig

