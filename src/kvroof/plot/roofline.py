"""The offload roofline (the paper's Fig. 4, extended): new tokens/s (or attainable compute) per
GPU against kappa_ratio = K / T, one curve per accelerator + link, one panel per model.

Paper mode draws the paper's figure from the paper's own inputs: its compute C (624 / 2,000 /
5,000 TFLOP/s for A100 / H100 / B200) and link bandwidth BW (32 / 64 GB/s for PCIe 4 / 5), the
values of the report's paper-mode table, so Qwen3-235B-A22B on H100 + PCIe 5 has its ridge at
the paper's kappa_crit (7.3 computed, 7.8 printed). Above its ridge a curve is ``kappa_M x BW /
kappa_ratio``, the same for every accelerator on a link, so each link's sloped roof is drawn
once, in grey, and each accelerator's flat roof in its colour."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.paper import PAPER_COMPUTE, PAPER_KAPPA_CRIT, PAPER_LINK_BANDWIDTH
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.memory_fit import fit_problem
from kvroof.cost.paper_kappa import PaperKappa
from kvroof.cost.params import param_counts
from kvroof.cost.roofline import offload_roofline
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    accelerator_color,
    legend_below,
    log_axis,
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

PAPER_ACCELERATORS: dict[str, str] = {"a100-sxm": "a100", "h100-sxm": "h100", "b200": "b200"}
"""The paper's GPUs by registry name (keys of :data:`kvroof.analysis.paper.PAPER_COMPUTE`)."""
PAPER_LINKS: dict[str, str] = {"pcie-gen4-x16": "pcie4", "pcie-gen5-x16": "pcie5"}
"""The paper's links by registry name (keys of :data:`PAPER_LINK_BANDWIDTH`)."""

Hardware = tuple[str, str] | str
"""An (accelerator, link) pair, or the name of a system."""

_LINK_DASHES = ("-", "--", ":", "-.")
_LINK_MARKERS = ("o", "s", "^", "D")


def paper_inputs(dep: Deployment) -> PaperKappa | None:
    """Paper mode with the paper's own C and BW for a deployment on one of its GPUs and links
    (N_active as published, B_kv in the deployment's KV type), as the report's paper-mode table
    computes it; None for other hardware."""
    gpu = PAPER_ACCELERATORS.get(dep.accelerator.name)
    link = PAPER_LINKS.get(dep.link.name)
    if gpu is None or link is None:
        return None
    model = dep.model
    active = model.published.active if model.published else param_counts(model).active
    return kappa_paper(active, kv_bytes_per_token(model, dep.kv_dtype),
                       PAPER_LINK_BANDWIDTH[link], PAPER_COMPUTE[gpu])


def _printed(dep: Deployment) -> float | None:
    """The kappa_crit the paper prints for this model and hardware, if it prints one."""
    gpu = PAPER_ACCELERATORS.get(dep.accelerator.name)
    link = PAPER_LINKS.get(dep.link.name)
    if gpu is None or link is None:
        return None
    return PAPER_KAPPA_CRIT.get((dep.model.name, f"{gpu}-{link}"))


@dataclass
class _Curve:
    """One accelerator + link of a panel."""

    key: str
    label: str
    dep: Deployment
    accelerator: str
    link: str
    paper: PaperKappa | None = None  # paper mode: the factors drawn
    source: str = ""  # paper mode: "paper" or "spec"


def _label(key: str) -> str:
    return key.replace("+", " + ")


def _fmt(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.3g}"


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
    with style():
        fig, axes = new_figure(ncols=len(panels), width=5.6, height=5.6)
        for ax, (model, source) in zip(axes, panels, strict=True):
            spec = reg.model(model) if isinstance(model, str) else model
            curves = _curves(spec, hardware, reg, source, settings)
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
            links = [c.link for c in drawn]
            shared_link |= len(set(links)) < len(links)
            if mode == "paper":
                crits = _draw_paper(ax, drawn, ratios, y_kind, kappa_range)
            else:
                crits = _draw_full(ax, drawn, ratios, y_kind, new_tokens, kappa_range)
            marks: list[tuple[Any, ...]] = _regions(ax, crits, kappa_range)
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
    return fig


def _curves(spec: ModelSpec, hardware: Sequence[Hardware], reg: Registry, source: str,
            settings: dict[str, Any]) -> list[_Curve]:
    curves: dict[str, _Curve] = {}
    for item in hardware:
        if isinstance(item, str):
            dep = deployment(spec, system=item, registry=reg, **settings)
            key = dep.system.name if dep.system is not None else item
        else:
            dep = deployment(spec, accelerator=item[0], link=item[1], registry=reg, **settings)
            key = f"{dep.accelerator.name}+{dep.link.name}"
        if key in curves:  # the same hardware named twice
            continue
        curve = _Curve(key, _label(key), dep, dep.accelerator.name, dep.link.name)
        if source:
            paper = paper_inputs(dep) if source == "paper" else None
            curve.paper, curve.source = (paper, "paper") if paper is not None else (
                kappa_paper_for(dep), "spec")
        curves[key] = curve
    return list(curves.values())


def _styles(curves: Sequence[_Curve]) -> tuple[dict[str, str], dict[str, int]]:
    links = list(dict.fromkeys(c.link for c in curves))
    return ({c.key: accelerator_color(c.accelerator) for c in curves},
            {link: i for i, link in enumerate(links)})


def _draw_full(ax: Any, curves: Sequence[_Curve], ratios: np.ndarray[Any, Any],
               y_kind: str, new_tokens: float, kappa_range: tuple[float, float]) -> list[float]:
    colors, link_index = _styles(curves)
    scale = 1.0 if y_kind == "tokens" else 1e12
    crits: list[float] = []
    low, high = math.inf, 0.0
    # drawn widest first, so that curves that meet (the same link sets the rate) show as
    # stripes of each colour rather than only the last one drawn
    # (by accelerator among the curves of one link: those are the ones that meet)
    widths: dict[str, float] = {}
    for link in link_index:
        members = [c for c in curves if c.link == link]
        for rank, curve in enumerate(members):
            widths[curve.key] = 1.6 + 1.4 * (len(members) - 1 - rank) / max(1, len(members) - 1)
    for curve in curves:
        dep = curve.dep
        points = offload_roofline(dep, ratios, new_tokens, "full")
        values = np.asarray(points.tokens_per_second if y_kind == "tokens"
                            else points.attainable_flops, dtype=float) / scale
        crit = float(kappa_crit(dep, new_tokens).kappa_crit)
        crits.append(crit)
        low, high = min(low, float(np.min(values))), max(high, float(np.max(values)))
        dash = _LINK_DASHES[link_index[curve.link] % len(_LINK_DASHES)]
        ax.plot(ratios, values, color=colors[curve.key], linestyle=dash,
                linewidth=widths[curve.key], label=f"{curve.label} ({_fmt(crit)})",
                gid=f"curve:{curve.key}", solid_capstyle="butt")
        if math.isfinite(crit) and kappa_range[0] < crit < kappa_range[1]:
            at = offload_roofline(dep, np.array([crit]), new_tokens, "full")
            top = float(np.asarray(at.tokens_per_second if y_kind == "tokens"
                                   else at.attainable_flops, dtype=float)[0]) / scale
            curve_at = (crit, top)
            _ridge(ax, curve_at, colors[curve.key], curve.key,
                   _LINK_MARKERS[link_index[curve.link] % len(_LINK_MARKERS)])
    _y_limits(ax, low, high)
    return crits


def _draw_paper(ax: Any, curves: Sequence[_Curve], ratios: np.ndarray[Any, Any],
                y_kind: str, kappa_range: tuple[float, float]) -> list[float]:
    colors, link_index = _styles(curves)
    crits: list[float] = []
    per_token = y_kind == "tokens"

    def height(curve: _Curve) -> float:  # the flat roof
        paper = curve.paper
        assert paper is not None
        compute = float(paper.compute)
        return compute / (2.0 * float(paper.active_params)) if per_token else compute / 1e12

    # flat roofs: one per accelerator (and compute), to its last ridge
    roofs: dict[tuple[str, float], list[_Curve]] = {}
    for curve in curves:
        roofs.setdefault((curve.accelerator, height(curve)), []).append(curve)
    # sloped roofs: one per link (and model factor): kappa_M x BW / ratio, whatever the GPU
    slopes: dict[tuple[str, float], list[_Curve]] = {}
    for curve in curves:
        paper = curve.paper
        assert paper is not None
        slope = height(curve) * float(paper.kappa_crit)
        slopes.setdefault((curve.link, round(slope, 9)), []).append(curve)
    values = [height(c) for c in curves]
    for (accelerator, level), members in roofs.items():
        end = max(float(m.paper.kappa_crit) for m in members if m.paper is not None)
        end = min(max(end, kappa_range[0]), kappa_range[1])
        compute = float(members[0].paper.compute) if members[0].paper is not None else 0.0
        which = "" if members[0].source == "paper" else ", spec peak"
        ax.plot([kappa_range[0], end], [level, level], color=colors[members[0].key],
                linewidth=2.2, gid=f"roof:{accelerator}",
                label=f"{accelerator}: {compute / 1e12:,.0f} TFLOP/s{which}")
    for (link, slope), members in slopes.items():
        start = min(float(m.paper.kappa_crit) for m in members if m.paper is not None)
        x = ratios[ratios >= start]
        x = np.concatenate([[start], x])
        index = link_index[link]
        bandwidth = float(members[0].paper.bandwidth) if members[0].paper is not None else 0.0
        gray = ("0.25", "0.5", "0.4", "0.6")[index % 4]
        ax.plot(x, slope / x, color=gray, linestyle=_LINK_DASHES[index % len(_LINK_DASHES)],
                linewidth=1.8, gid=f"slope:{link}",
                label=f"{link}: {bandwidth / 1e9:.3g} GB/s (every GPU)")
        values.append(float(slope / x[-1]))
    for curve in curves:
        paper = curve.paper
        assert paper is not None
        crit = float(paper.kappa_crit)
        crits.append(crit)
        printed = _printed(curve.dep) if curve.source == "paper" else None
        shown = f"{curve.label}: {crit:.3g}" + (
            f" (paper: {printed:g})" if printed is not None else "")
        if kappa_range[0] < crit < kappa_range[1]:
            _ridge(ax, (crit, height(curve)), colors[curve.key], curve.key,
                   _LINK_MARKERS[link_index[curve.link] % len(_LINK_MARKERS)], label=shown)
        else:
            ax.plot([], [], color=colors[curve.key], marker="o", linestyle="none",
                    label=shown + " (off the axis)", gid=f"off-axis:{curve.key}")
    _y_limits(ax, min(values), max(values))
    return crits


def _ridge(ax: Any, at: tuple[float, float], tone: str, key: str, marker: str,
           label: str | None = None) -> None:
    """A marker where a curve turns (at kappa_crit) and a thin line down to the x axis (its
    foot is set with the y limits): one artist, ``gid`` ``"kappa-crit:<key>"``, whose first x
    is kappa_crit."""
    crit, top = at
    ax.plot([crit, crit], [top, top], color=tone, linestyle=":", linewidth=0.9,
            marker=marker, markevery=[0], markersize=6, markeredgecolor="black",
            markeredgewidth=0.5, gid=f"kappa-crit:{key}", label=label or f"_{key}",
            zorder=4)


def _y_limits(ax: Any, low: float, high: float) -> None:
    """The y axis from a little below ``low`` to a little above ``high`` (1-2-5 labels where it
    spans at most five decades), and the ridge lines down to its foot."""
    if not (high > 0 and math.isfinite(high)):
        return
    low = max(low, high * 1e-6)
    bottom = low / 1.6
    decades = math.log10(high / bottom)
    top = high * 10 ** (0.04 * decades + 0.02)
    log_axis(ax, "y", bottom, top, labelled_decades=5)
    for line in ax.get_lines():
        if str(line.get_gid()).startswith("kappa-crit:"):
            line.set_ydata([line.get_ydata()[0], bottom])


def _regions(ax: Any, crits: Sequence[float], kappa_range: tuple[float, float],
             ) -> list[tuple[Any, ...]]:
    """Shade left of every kappa_crit compute-bound and right of every one transfer-bound;
    the regions' names, as marks for the strip above the axes."""
    ax.set_xscale("log")
    ax.set_xlim(*kappa_range)
    finite = [c for c in crits if math.isfinite(c)]
    low = min(min(finite), kappa_range[1]) if finite else kappa_range[1]
    left = max(low, kappa_range[0])
    ax.axvspan(kappa_range[0], left, color=COMPUTE_SHADE, alpha=0.08, linewidth=0,
               gid="region:compute-bound")
    marks: list[tuple[Any, ...]] = [(math.sqrt(kappa_range[0] * left), "compute-bound",
                                     COMPUTE_SHADE, "region-label:compute-bound")]
    if finite and len(finite) == len(crits):
        right = min(max(finite), kappa_range[1])
        ax.axvspan(right, kappa_range[1], color=TRANSFER_SHADE, alpha=0.08, linewidth=0,
                   gid="region:transfer-bound")
        marks.append((math.sqrt(right * kappa_range[1]), "transfer-bound", TRANSFER_SHADE,
                      "region-label:transfer-bound"))
    return marks
