"""The timeline of a simulated run (or of compared runs, in one figure): tokens per iteration and
power over time, in seconds, minutes or hours by the run's length, power from 0 W with the idle
baseline, and the no-steady-state warning on the figure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kvroof.plot.style import axes_notes, color, new_figure, source_line, style
from kvroof.simulate.steady_state import saturation_notes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kvroof.simulate.metrics import SimResult

__all__ = ["idle_power", "timeline_figure"]


def _time_unit(span: float) -> tuple[str, float]:
    """The time axis' unit for a run of ``span`` seconds: seconds up to 20 minutes, minutes up
    to 10 hours, hours beyond."""
    if span > 10 * 3600:
        return "h", 3600.0
    if span > 20 * 60:
        return "min", 60.0
    return "s", 1.0


def _overlaps(start: np.ndarray[Any, Any], end: np.ndarray[Any, Any],
              weight: np.ndarray[Any, Any], edges: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Sum over intervals [start, end) of ``weight`` x the time each spends in each bin."""
    bins = edges.size - 1
    first = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
    last = np.clip(np.searchsorted(edges, end, side="left") - 1, 0, bins - 1)
    inside = first >= last
    total = np.bincount(first[inside], (weight * (end - start))[inside], bins)
    for i in np.flatnonzero(~inside):  # few: at most one per replica crosses each bin edge
        for b in range(int(first[i]), int(last[i]) + 1):
            overlap = min(end[i], edges[b + 1]) - max(start[i], edges[b])
            total[b] += weight[i] * max(overlap, 0.0)
    return total


def _binned(result: SimResult, edges: np.ndarray[Any, Any],
            idle: float | None) -> dict[str, np.ndarray[Any, Any]]:
    """Per time bin: prefill and decode tokens per iteration (iteration-weighted means of the
    iterations that start in it) and power per GPU: the mean over the bin, idle time at
    ``idle`` watts, where ``idle`` is known, else the mean while iterating."""
    it = result.iterations
    bins = edges.size - 1
    start = it["start"]
    end = start + it["duration"]
    where = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
    count = np.bincount(where, it["iterations"], bins)
    busy = _overlaps(start, end, np.ones_like(start), edges)
    energy = _overlaps(start, end, it["power_w"], edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        prefill = np.bincount(where, it["prefill_tokens"] * it["iterations"], bins) / count
        decode = np.bincount(where, it["decode_tokens"] * it["iterations"], bins) / count
        if idle is None:
            power = energy / busy
        else:
            available = np.diff(edges) * len(result.replicas)
            power = (energy + idle * np.maximum(available - busy, 0.0)) / np.maximum(
                available, busy)
    return {"prefill": prefill, "decode": decode, "power": power}


def idle_power(result: SimResult) -> float | None:
    """The GPUs' idle power (W per GPU): the summary's ``idle_power_w`` where it has one, else
    worked out from the energy balance of identical replicas (mean power over the run, idle
    time included, against the power while iterating) where they idled at least 1% of the
    time; None where neither applies."""
    summary = result.summary
    if summary.get("idle_power_w") is not None:
        return float(summary["idle_power_w"])
    if len(set(result.replicas)) != 1:
        return None
    it = result.iterations
    span = float(summary.get("makespan_s", 0.0))
    replicas = len(result.replicas)
    busy = float(np.sum(it["duration"]))
    idle_time = replicas * span - busy
    if not (span > 0 and idle_time > 0.01 * replicas * span):
        return None
    energy = float(np.sum(it["power_w"] * it["duration"]))
    value = (float(summary["power_mean_w"]) * span * replicas - energy) / idle_time
    return value if math.isfinite(value) and value >= 0 else None


def timeline_figure(result: SimResult | Mapping[str, SimResult], bins: int = 200,
                    note: str = "", idle_power_w: float | None = None) -> Figure:
    """Two panels over simulated time (seconds, minutes or hours by the run's length).

    One result: tokens scheduled per iteration, prefill and decode stacked (iteration-weighted
    means per time bin; ``gid`` ``"tokens:prefill"`` / ``"tokens:decode"``; decode is left out
    of the legend where it never reaches 1% of the budget), with the token budget (``gid``
    ``"budget"``); power per GPU while iterating (``gid`` ``"power"``) with the mean over the
    whole run (``gid`` ``"power:mean"``, idle time included).

    Several labelled results (``--compare``): one line per run in each panel (``gid``
    ``"tokens:<label>"`` and ``"power:<label>"``), on the same time axis.

    The power axis starts at 0 W, with the GPUs' idle power as a baseline (``gid``
    ``"power:idle"``; ``idle_power_w``, else :func:`idle_power`). Legends sit to the right of
    the panels; a note above warns of a saturated run (:func:`saturation`)."""

    runs: dict[str, SimResult] = (dict(result) if isinstance(result, Mapping)
                                  else {"": result})
    several = len(runs) > 1 or isinstance(result, Mapping)
    starts = [r.iterations["start"] for r in runs.values() if r.iterations["start"].size]
    ends = [r.iterations["start"] + r.iterations["duration"] for r in runs.values()
            if r.iterations["start"].size]
    first = next(iter(runs.values()))
    with style():
        fig, axes = new_figure(nrows=2, width=7.6, height=2.9)
        tokens_ax, power_ax = axes
        unit, per = "s", 1.0
        budget = float(first.summary["token_budget"])
        idle = idle_power_w if idle_power_w is not None else idle_power(first)
        over = "per GPU, mean per time bin (idle included)" if idle is not None else \
            "per GPU while iterating"
        if starts:
            low = min(float(s.min()) for s in starts)
            high = max(float(e.max()) for e in ends)
            unit, per = _time_unit(high - low)
            edges = np.linspace(low, high, bins + 1)
            centers = (edges[:-1] + edges[1:]) / 2 / per
            for index, (label, run) in enumerate(runs.items()):
                if not run.iterations["start"].size:
                    continue
                binned = _binned(run, edges, idle if idle_power_w is not None
                                 else idle_power(run))
                prefill = np.nan_to_num(binned["prefill"])
                decode = np.nan_to_num(binned["decode"])
                if several:
                    tokens_ax.plot(centers, prefill + decode, color=color(index),
                                   linewidth=1.2, label=label, gid=f"tokens:{label}")
                    power_ax.plot(centers, binned["power"], color=color(index), linewidth=1.2,
                                  label=label, gid=f"power:{label}")
                    continue
                shown_decode = float(np.max(decode, initial=0.0)) >= 0.01 * budget
                stack = tokens_ax.stackplot(
                    centers, prefill, decode, colors=(color(0), color(1)),
                    labels=("prefill", "decode" if shown_decode else "_decode"))
                for area, kind in zip(stack, ("prefill", "decode"), strict=True):
                    area.set_gid(f"tokens:{kind}")
                power_ax.plot(centers, binned["power"], color=color(0), gid="power",
                              label=over)
                mean = float(run.summary.get("power_mean_w", 0.0))
                power_ax.axhline(mean, color="0.3", linestyle=":", linewidth=1,
                                 gid="power:mean",
                                 label=f"mean over the run, idle included ({mean:.0f} W)")
        tokens_ax.axhline(budget, color="0.3", linestyle="--", linewidth=1, gid="budget",
                          label=f"token budget ({budget:,.0f})")
        if idle is not None:
            power_ax.axhline(idle, color="black", linewidth=1.0, gid="power:idle",
                             label=f"idle ({idle:.0f} W)")
        power_ax.set_ylim(bottom=0, top=max(power_ax.get_ylim()[1], 1.0) * 1.05)
        tokens_ax.set_ylim(bottom=0, top=budget * 1.12)
        tokens_ax.set_ylabel("tokens per iteration (tokens)")
        power_ax.set_ylabel("power per GPU (W)")
        power_ax.set_xlabel(f"simulated time ({unit})")
        tokens_ax.set_title("Tokens per iteration and power over the run"
                            + (": compared runs" if several else ""))
        for ax in axes:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=7)
        axes_notes(tokens_ax, saturation_notes(runs))
        replicas = ", ".join(sorted(set(first.replicas)))
        source_line(fig, f"serving simulation; {replicas}" + (f"; {note}" if note else ""))
    return fig
