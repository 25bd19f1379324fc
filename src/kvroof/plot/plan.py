"""Figures of a plan (``kvroof plan``): latency against arrival rate with and without
offloading, the gain against host memory per replica, and the reload threshold against new
tokens. Each takes a :class:`kvroof.plan.result.Plan` and draws what it holds; nothing here
computes a number the plan does not.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kvroof.plan.result import Arm, Plan

__all__ = ["plan_memory_figure", "plan_rate_figure", "plan_threshold_figure"]


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v) and v > 0]


def _arm_series(arm: Arm, metric: str) -> tuple[list[float], list[float], list[bool]]:
    points = sorted(arm.points, key=lambda p: p.rps)
    return ([p.rps for p in points], [float(getattr(p, metric)) for p in points],
            [p.meets for p in points])


def plan_rate_figure(plan: Plan) -> Figure:
    """TTFT and TPOT (the objectives' percentile) against the arrival rate, every rate each
    search simulated: one colour per candidate, solid without offloading and dashed with it
    (default host memory); filled markers met the objectives; the objectives are grey lines
    and each search's answer a vertical tick."""
    from matplotlib.lines import Line2D

    from kvroof.plot.style import color, legend_below, log_axis, new_figure, source_line, style

    p = plan.objectives.percentile
    panels = (("ttft", f"TTFT p{p:g} (s)", plan.objectives.ttft),
              ("tpot", f"TPOT p{p:g} (s)", plan.objectives.tpot))
    with style():
        fig, axes = new_figure(ncols=2, width=4.6, height=4.4)
        handles: list[Any] = []
        for col, (metric, label, limit) in enumerate(panels):
            ax = axes[col]
            shown: list[float] = []
            rates: list[float] = []
            for index, cand in enumerate(plan.candidates):
                if cand.without is None or cand.with_offload is None:
                    continue
                for arm, dash in ((cand.without, "-"), (cand.with_offload, "--")):
                    x, y, ok = _arm_series(arm, metric)
                    if not x:
                        continue
                    ax.plot(x, y, linestyle=dash, color=color(index), linewidth=1.4,
                            gid=f"{metric}:{cand.label}:{arm.label}")
                    for xi, yi, met in zip(x, y, ok, strict=True):
                        if math.isfinite(yi) and yi > 0:
                            ax.plot([xi], [yi], marker="o", markersize=4, color=color(index),
                                    markerfacecolor=color(index) if met else "white",
                                    linestyle="none")
                    if arm.max_rps > 0:
                        ax.axvline(arm.max_rps, color=color(index), linestyle=dash,
                                   linewidth=0.6, alpha=0.6)
                    shown += _finite(y)
                    rates += _finite(x)
                if col == 0:
                    handles.append(Line2D([], [], color=color(index), linewidth=1.6,
                                          label=cand.label))
            if limit is not None:
                ax.axhline(limit, color="0.4", linewidth=1.0, linestyle=":")
                shown.append(limit)
            ax.set_xscale("log")
            ax.set_yscale("log")
            if shown:
                log_axis(ax, "y", min(shown) / 1.5, max(shown) * 1.5)
            if rates:
                log_axis(ax, "x", min(rates) / 1.2, max(rates) * 1.2)
            ax.set_xlabel("arrival rate (requests/s)")
            ax.set_ylabel(label)
            ax.set_title(f"{label.split(' (')[0]} against arrival rate")
        handles += [Line2D([], [], color="black", linestyle="-", label="without offloading"),
                    Line2D([], [], color="black", linestyle="--",
                           label="with offloading (default host memory)"),
                    Line2D([], [], color="0.4", linestyle=":", label="objective"),
                    Line2D([], [], color="black", marker="o", linestyle="none",
                           markerfacecolor="white", label="missed (filled: met)")]
        legend_below(axes[0], handles, [str(h.get_label()) for h in handles], ncol=3,
                     fontsize=7)
        source_line(fig, f"plan: {plan.model}, {plan.workload} workload; vertical "
                         f"lines: the highest rate meeting {plan.objectives.text} "
                         f"(searched to {plan.search.tolerance:.0%})")
    return fig


def plan_memory_figure(plan: Plan) -> Figure:
    """The gain (highest meeting rate with offloading over without) against host memory per
    replica, one curve per candidate; filled markers: offloading pays there (it meets the
    objectives at a rate that failed without it); the grey band: within the search's
    tolerance of no gain; a ring: the recommended size."""
    from kvroof.plot.style import color, log_axis, new_figure, source_line, style

    with style():
        fig, axes = new_figure(width=6.4, height=4.4)
        ax = axes[0]
        sizes: list[float] = []
        gains: list[float] = []
        notes: list[str] = []
        for index, cand in enumerate(plan.candidates):
            curve = cand.curve
            if curve is None or not curve.arms:
                if curve is not None and curve.note:
                    notes.append(f"{cand.label}: {curve.note}")
                continue
            x = [a.dram_bytes / 1e9 for a in curve.arms if a.dram_bytes is not None]
            y = list(curve.gains)
            finite = [(xi, yi) for xi, yi in zip(x, y, strict=True)
                      if math.isfinite(xi) and math.isfinite(yi)]
            if not finite:
                notes.append(f"{cand.label}: no finite gain (no rate met without offloading)")
                continue
            ax.plot([f[0] for f in finite], [f[1] for f in finite], color=color(index),
                    linewidth=1.4, label=cand.label, gid=f"gain:{cand.label}")
            for arm, xi, yi, pays in zip(curve.arms, x, y, curve.pays, strict=True):
                if not (math.isfinite(xi) and math.isfinite(yi)):
                    continue
                ax.plot([xi], [yi], marker="o", markersize=5, color=color(index),
                        markerfacecolor=color(index) if pays else "white", linestyle="none")
                if curve.recommended is arm:
                    ax.plot([xi], [yi], marker="o", markersize=12, color=color(index),
                            markerfacecolor="none", linestyle="none")
            sizes += [f[0] for f in finite]
            gains += [f[1] for f in finite]
        tol = plan.search.tolerance
        ax.axhspan(1 - tol, 1 + tol, color="0.85", zorder=0)
        ax.axhline(1.0, color="0.4", linewidth=0.8)
        ax.set_xscale("log")
        if sizes:
            log_axis(ax, "x", min(sizes) / 1.5, max(sizes) * 1.5)
            ax.set_ylim(min(0.9, min(gains) - 0.05), max(1.1, max(gains) + 0.05))
        ax.set_xlabel("host memory per replica (GB)")
        ax.set_ylabel("gain: highest meeting rate, with / without offloading")
        ax.set_title("Gain against host memory")
        if sizes:
            ax.legend(loc="upper left", fontsize=8, frameon=False)
        extra = ("; " + "; ".join(notes)) if notes else ""
        source_line(fig, f"plan: {plan.model}, {plan.workload} workload, "
                         f"{plan.objectives.text}; filled: pays (meets a rate that failed "
                         f"without offloading); ring: recommended (smallest keeping "
                         f"{plan.search.most:.0%} of the gain){extra}")
    return fig


def plan_threshold_figure(plan: Plan) -> Figure:
    """The reload threshold against new tokens T: the smallest cached prefix K worth loading
    rather than recomputing, the request alone (solid) and inside a full iteration (dashed),
    one colour per candidate; T where recomputing stays as fast up to the context are left
    out and said in the footer."""
    from kvroof.plot.style import color, log_axis, new_figure, source_line, style

    with style():
        fig, axes = new_figure(width=6.4, height=4.4)
        ax = axes[0]
        values: list[float] = []
        ts: list[float] = []
        never: list[str] = []
        for index, cand in enumerate(plan.candidates):
            th = cand.threshold
            if th is None:
                continue
            for series, dash, regime in ((th.alone, "-", "alone"), (th.busy, "--", "busy")):
                pairs = [(t, k) for t, k in zip(th.new_tokens, series, strict=True)
                         if k is not None]
                missing = [t for t, k in zip(th.new_tokens, series, strict=True) if k is None]
                if missing:
                    never.append(f"{cand.label} {regime}: never at T = "
                                 f"{missing[0]:,}-{missing[-1]:,}")
                if not pairs:
                    continue
                where = "alone" if regime == "alone" else "in a full iteration"
                ax.plot([p[0] for p in pairs], [p[1] for p in pairs], linestyle=dash,
                        marker="o", markersize=3, color=color(index), linewidth=1.4,
                        label=f"{cand.label}, {where}", gid=f"threshold:{cand.label}:{regime}")
                values += [float(p[1]) for p in pairs]
                ts += [float(p[0]) for p in pairs]
            ax.axvline(th.median_new, color=color(index), linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        if values:
            log_axis(ax, "x", min(ts) / 1.5, max(ts) * 1.5)
            log_axis(ax, "y", max(0.5, min(values) / 1.5), max(10.0, max(values) * 1.5))
            ax.legend(loc="best", fontsize=7, frameon=False)
        ax.set_xlabel("new tokens T")
        ax.set_ylabel("reload threshold K* (cached tokens)")
        ax.set_title("Smallest cached prefix worth loading")
        extra = ("; " + "; ".join(never)) if never else ""
        source_line(fig, f"plan: {plan.model}; loading beats recomputing from K* on "
                         "(cost model: ttft(T, K) against ttft(T + K, 0)); dotted: the "
                         f"workload's median T{extra}")
    return fig
