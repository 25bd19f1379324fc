"""One panel of the offload roofline (:mod:`kvroof.plot.roofline`): the curves of a model on
each accelerator + link or system, drawn in full mode (the cost model's roofline per pair, a
marker at its kappa_crit) or in paper mode (a flat roof per accelerator, one sloped roof per
link), the y axis fitted to them and the compute-bound and transfer-bound regions shaded.
Colour is the accelerator, line style and marker the link."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.paper_kappa import PaperKappa
from kvroof.cost.roofline import offload_roofline
from kvroof.plot.roofline_paper import paper_inputs, printed_kappa_crit
from kvroof.plot.style import COMPUTE_SHADE, TRANSFER_SHADE, accelerator_color, log_axis
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry

__all__ = ["Hardware", "RooflineCurve", "draw_full", "draw_paper", "panel_curves",
           "shade_regions"]

Hardware = tuple[str, str] | str
"""An (accelerator, link) pair, or the name of a system."""

_LINK_DASHES = ("-", "--", ":", "-.")
_LINK_MARKERS = ("o", "s", "^", "D")


@dataclass
class RooflineCurve:
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


def panel_curves(spec: ModelSpec, hardware: Sequence[Hardware], reg: Registry, source: str,
                 settings: dict[str, Any]) -> list[RooflineCurve]:
    """A curve for each (accelerator, link) pair or system in ``hardware`` (the same hardware
    named twice once); with ``source`` (paper mode), its paper-mode factors: ``"paper"`` the
    paper's C and BW where it gives them (:func:`kvroof.plot.roofline_paper.paper_inputs`),
    else (and for ``"spec"``) the spec peaks."""
    curves: dict[str, RooflineCurve] = {}
    for item in hardware:
        if isinstance(item, str):
            dep = deployment(spec, system=item, registry=reg, **settings)
            key = dep.system.name if dep.system is not None else item
        else:
            dep = deployment(spec, accelerator=item[0], link=item[1], registry=reg, **settings)
            key = f"{dep.accelerator.name}+{dep.link.name}"
        if key in curves:  # the same hardware named twice
            continue
        curve = RooflineCurve(key, _label(key), dep, dep.accelerator.name, dep.link.name)
        if source:
            paper = paper_inputs(dep) if source == "paper" else None
            curve.paper, curve.source = (paper, "paper") if paper is not None else (
                kappa_paper_for(dep), "spec")
        curves[key] = curve
    return list(curves.values())


def _styles(curves: Sequence[RooflineCurve]) -> tuple[dict[str, str], dict[str, int]]:
    links = list(dict.fromkeys(c.link for c in curves))
    return ({c.key: accelerator_color(c.accelerator) for c in curves},
            {link: i for i, link in enumerate(links)})


def draw_full(ax: Any, curves: Sequence[RooflineCurve], ratios: np.ndarray[Any, Any],
              y_kind: str, new_tokens: float, kappa_range: tuple[float, float]) -> list[float]:
    """Full mode: each curve's roofline at ``new_tokens`` and a marker at its kappa_crit;
    the kappa_crit of each curve."""
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


def draw_paper(ax: Any, curves: Sequence[RooflineCurve], ratios: np.ndarray[Any, Any],
               y_kind: str, kappa_range: tuple[float, float]) -> list[float]:
    """Paper mode: a flat roof per accelerator, a sloped roof per link and a marker at each
    curve's kappa_crit (the one the paper prints beside it in the legend); the kappa_crit of
    each curve."""
    colors, link_index = _styles(curves)
    crits: list[float] = []
    per_token = y_kind == "tokens"

    def height(curve: RooflineCurve) -> float:  # the flat roof
        paper = curve.paper
        assert paper is not None
        compute = float(paper.compute)
        return compute / (2.0 * float(paper.active_params)) if per_token else compute / 1e12

    # flat roofs: one per accelerator (and compute), to its last ridge
    roofs: dict[tuple[str, float], list[RooflineCurve]] = {}
    for curve in curves:
        roofs.setdefault((curve.accelerator, height(curve)), []).append(curve)
    # sloped roofs: one per link (and model factor): kappa_M x BW / ratio, whatever the GPU
    slopes: dict[tuple[str, float], list[RooflineCurve]] = {}
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
        printed = printed_kappa_crit(curve.dep) if curve.source == "paper" else None
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


def shade_regions(ax: Any, crits: Sequence[float], kappa_range: tuple[float, float],
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
