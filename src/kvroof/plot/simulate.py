"""Serving-simulation figures: TTFT distributions per policy, latency against request rate from a
sweep, and a timeline of tokens per iteration and power (one run, or the compared runs in one
figure).

Each figure says on itself when curves coincide (they are then drawn in stripes of decreasing
width, so that each stays visible) and warns when the offered rate exceeds the rate served
(:func:`saturation`: the queue grows while requests arrive, so the run has no steady state).
:func:`saturation` and :func:`coinciding` need no matplotlib: ``kvroof simulate`` prints the
same warning."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kvroof.simulate.metrics import SimResult

__all__ = ["Saturation", "coinciding", "latency_vs_rps_figure", "saturation",
           "timeline_figure", "ttft_cdf_figure"]

_POINTS = 2000
SATURATION_SHARE = 0.9
"""A run is saturated when it serves less than this share of the offered rate ..."""
SATURATION_GROWTH = 2.0
"""... and the median TTFT of the last third of its arrivals is this many times the first's."""
SATURATION_MIN_REQUESTS = 30
COINCIDE_TOLERANCE = 0.02
"""Curves whose values differ by less than 2% everywhere are said to coincide."""


@dataclass(frozen=True)
class Saturation:
    """A run whose offered rate exceeds the rate it served: the queue grew while requests
    arrived (TTFT medians of the first and last third of the arrivals), so it has no steady
    state and its latencies grow with the trace's length."""

    offered_rps: float
    served_rps: float
    ttft_first_s: float
    ttft_last_s: float

    def message(self) -> str:
        return (f"offered {self.offered_rps:.3g} requests/s, served {self.served_rps:.3g}: the "
                f"queue grows while requests arrive (median TTFT {_seconds(self.ttft_first_s)} "
                f"for the first third of the arrivals, {_seconds(self.ttft_last_s)} for the "
                "last third), so the latencies depend on the trace's length")


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if value >= 7200:
        return f"{value / 3600:.3g} h"
    if value >= 120:
        return f"{value / 60:.3g} min"
    if value >= 1:
        return f"{value:.3g} s"
    return f"{value * 1e3:.3g} ms"


def saturation(result: SimResult) -> Saturation | None:
    """The run's :class:`Saturation` when it served less than 90% of the offered rate (requests
    over the span of their arrivals) and its queue grew (the last third of the arrivals waited
    at least twice as long for their first token as the first third); None otherwise, and for
    runs of fewer than 30 requests."""
    requests = result.requests
    arrival = np.asarray(requests["arrival"], dtype=float)
    ttft = np.asarray(requests["ttft"], dtype=float)
    n = arrival.size
    if n < SATURATION_MIN_REQUESTS:
        return None
    span = float(arrival.max() - arrival.min())
    served = float(result.summary.get("throughput_rps", math.nan))
    if not (span > 0 and math.isfinite(served)):
        return None
    offered = n / span
    order = np.argsort(arrival, kind="stable")
    third = n // 3
    first = float(np.nanmedian(ttft[order[:third]]))
    last = float(np.nanmedian(ttft[order[-third:]]))
    if served < SATURATION_SHARE * offered and last > SATURATION_GROWTH * first:
        return Saturation(offered, served, first, last)
    return None


def coinciding(curves: Mapping[str, Any], tolerance: float = COINCIDE_TOLERANCE,
               ) -> list[list[str]]:
    """Groups (two or more labels) of curves whose values agree within ``tolerance``
    (relative) at every point; each curve is an array of the same shape as the others in its
    group (quantiles, or a metric at the same x values). NaN agrees only with NaN."""
    groups: list[list[str]] = []
    arrays = {k: np.asarray(v, dtype=float) for k, v in curves.items()}
    for label, values in arrays.items():
        for group in groups:
            other = arrays[group[0]]
            if other.shape == values.shape and _close(other, values, tolerance):
                group.append(label)
                break
        else:
            groups.append([label])
    return [g for g in groups if len(g) > 1]


def _close(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], tolerance: float) -> bool:
    both_nan = np.isnan(a) & np.isnan(b)
    if np.any(np.isnan(a) != np.isnan(b)):
        return False
    x, y = a[~both_nan], b[~both_nan]
    scale = np.maximum(np.abs(x), np.abs(y))
    return bool(np.all(np.abs(x - y) <= tolerance * np.where(scale > 0, scale, 1.0)))


def _ecdf(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    ordered = np.sort(values[np.isfinite(values)])
    if ordered.size == 0:
        return np.zeros(0), np.zeros(0)
    index = np.unique(np.linspace(0, ordered.size - 1, min(ordered.size, _POINTS))
                      .astype(np.int64))
    return ordered[index], (index + 1.0) / ordered.size


def _striped(labels: Sequence[str], groups: Sequence[Sequence[str]]) -> dict[str, float]:
    """Line widths: within each group of coinciding curves the first drawn widest, so every
    colour shows as a stripe; others 1.6."""
    widths = dict.fromkeys(labels, 1.6)
    for group in groups:
        for rank, label in enumerate(group):
            widths[label] = 1.4 + 2.6 * (len(group) - 1 - rank) / (len(group) - 1)
    return widths


def _coincide_note(groups: Sequence[Sequence[str]], what: str) -> str:
    if not groups:
        return ""
    parts = "; ".join(", ".join(group) for group in groups)
    return (f"Curves that coincide ({what} within {100 * COINCIDE_TOLERANCE:.0f}%), drawn as "
            f"stripes: {parts}")


def ttft_cdf_figure(results: Mapping[str, SimResult], note: str = "") -> Figure:
    """The empirical CDF of TTFT for each labelled result (``gid`` ``"ttft:<label>"``), with
    p50 and p99 in the legend (below the axes). A note above the axes names the results whose
    TTFT distributions coincide (every percentile within 2%; ``gid``
    ``"note:coincide"``) and warns of each saturated run (``gid`` ``"note:saturated"``)."""
    from kvroof.plot.style import (
        axes_notes,
        color,
        legend_below,
        log_axis,
        new_figure,
        source_line,
        style,
    )

    percentiles = np.linspace(1, 99, 99)
    quantiles = {label: (np.percentile(r.requests["ttft"][np.isfinite(r.requests["ttft"])],
                                       percentiles)
                         if np.isfinite(r.requests["ttft"]).any() else np.full(99, np.nan))
                 for label, r in results.items()}
    groups = coinciding(quantiles)
    widths = _striped(list(results), groups)
    with style():
        fig, axes = new_figure(width=6.4, height=4.6)
        ax = axes[0]
        for index, (label, result) in enumerate(results.items()):
            x, y = _ecdf(result.requests["ttft"])
            stats = result.summary["ttft_s"]
            ax.step(x, y, where="post", color=color(index), linewidth=widths[label],
                    gid=f"ttft:{label}",
                    label=f"{label} (p50 {_seconds(stats['p50'])}, p99 {_seconds(stats['p99'])})")
        ax.set_xscale("log")
        if any(line.get_xdata().size for line in ax.get_lines()):
            low, high = ax.get_xlim()
            log_axis(ax, "x", low, high, labelled_decades=3)
        ax.set_xlabel("time to first token (s)")
        ax.set_ylabel("share of requests (fraction)")
        ax.set_ylim(0, 1.02)
        ax.set_title("TTFT distribution")
        legend_below(ax, ncol=1 if len(results) > 4 or max(map(len, results)) > 24 else 2,
                     fontsize=7)
        notes = _saturation_notes(results)
        coincide = _coincide_note(groups, "every percentile")
        if coincide:
            notes.insert(0, ("note:coincide", coincide))
        axes_notes(ax, notes)
        first = next(iter(results.values()), None)
        replicas = ", ".join(sorted(set(first.replicas))) if first else ""
        source_line(fig, f"serving simulation; {replicas}" + (f"; {note}" if note else ""))
    return fig


def _saturation_notes(results: Mapping[str, SimResult]) -> list[tuple[str, str]]:
    """One warning for the saturated runs among ``results`` (empty when none is)."""
    found = {label: s for label, r in results.items() if (s := saturation(r)) is not None}
    if not found:
        return []
    if len(results) == 1:
        return [("note:saturated", f"No steady state: {next(iter(found.values())).message()}")]
    runs = ", ".join(found)
    offered = sorted({f"{s.offered_rps:.3g}" for s in found.values()})
    served = ", ".join(f"{s.served_rps:.3g}" for s in found.values())
    first = min(s.ttft_first_s for s in found.values())
    last = max(s.ttft_last_s for s in found.values())
    return [("note:saturated",
             f"No steady state in {runs}: offered {'/'.join(offered)} requests/s, served "
             f"{served}; the queue grows while requests arrive (median TTFT up to "
             f"{_seconds(last)} for the last third of the arrivals, from {_seconds(first)} "
             "for the first), so the latencies depend on the trace's length")]


def latency_vs_rps_figure(rows: Sequence[Mapping[str, Any]], group: Sequence[str],
                          metrics: Sequence[str] = ("ttft_s_p50", "ttft_s_p99"),
                          note: str = "") -> Figure:
    """Latency against request rate from sweep rows (each a flattened summary with ``rps``):
    one curve per combination of the ``group`` columns and metric (``gid``
    ``"<metric>:<group values>"``), log y; colour: the group, line style: the metric (the
    legend, below the axes, lists each once). Groups whose curves agree within 2% at every rate
    are named in a note above the axes and drawn as stripes."""
    from matplotlib.lines import Line2D

    from kvroof.plot.style import (
        axes_notes,
        color,
        legend_below,
        log_axis,
        new_figure,
        source_line,
        style,
    )

    curves: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        curves.setdefault(tuple(row.get(key) for key in group), []).append(row)
    named: dict[str, tuple[list[float], dict[str, list[float]]]] = {}
    for key, members in curves.items():
        members = sorted(members, key=lambda r: float(r["rps"]))
        name = ", ".join(f"{k}={v}" for k, v in zip(group, key, strict=True)) or "all"
        named[name] = ([float(r["rps"]) for r in members], {
            metric: [float(r[metric]) if r.get(metric) not in (None, "") else np.nan
                     for r in members] for metric in metrics})
    groups = coinciding({name: np.array([rps, *values.values()], dtype=float)
                         for name, (rps, values) in named.items()})
    widths = _striped(list(named), groups)
    styles: tuple[Any, ...] = ("-", "--", ":", "-.")
    with style():
        fig, axes = new_figure(width=6.4, height=4.6)
        ax = axes[0]
        handles: list[Any] = []
        for index, (name, (rps, values)) in enumerate(named.items()):
            for m, metric in enumerate(metrics):
                ax.plot(rps, values[metric], linestyle=styles[m % len(styles)], marker="o",
                        markersize=4, color=color(index), linewidth=widths[name],
                        label=f"_{name}: {metric}", gid=f"{metric}:{name}")
            handles.append(Line2D([], [], color=color(index), marker="o", markersize=4,
                                  linewidth=1.6, label=name))
        for m, metric in enumerate(metrics):
            handles.append(Line2D([], [], color="black", linestyle=styles[m % len(styles)],
                                  linewidth=1.2, label=_metric_name(metric)))
        ax.set_yscale("log")
        shown = [v for _, values in named.values() for series in values.values()
                 for v in series if math.isfinite(v) and v > 0]
        if shown:
            log_axis(ax, "y", min(shown) / 1.3, max(shown) * 1.3)
        ax.set_xlabel("request rate (requests/s)")
        ax.set_ylabel(_latency_label(metrics))
        ax.set_title(f"{_latency_label(metrics).split(' (')[0]} against request rate")
        legend_below(ax, handles, [str(h.get_label()) for h in handles], ncol=2, fontsize=7)
        coincide = _coincide_note(groups, "every point")
        axes_notes(ax, [("note:coincide", coincide)] if coincide else [])
        source_line(fig, "serving-simulation sweep" + (f"; {note}" if note else ""))
    return fig


_QUANTITY = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end-to-end latency"}


def _metric_name(metric: str) -> str:
    """``ttft_s_p50`` -> ``TTFT p50``."""
    quantity, _, stat = metric.partition("_s_")
    return f"{_QUANTITY.get(quantity, quantity)} {stat}".strip() if stat else metric


def _latency_label(metrics: Sequence[str]) -> str:
    kinds = {m.partition("_s_")[0] for m in metrics}
    if len(kinds) == 1:
        kind = next(iter(kinds))
        return f"{_QUANTITY.get(kind, kind)} (s)"
    return "latency (s)"


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
    from kvroof.plot.style import axes_notes, color, new_figure, source_line, style

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
        axes_notes(tokens_ax, _saturation_notes(runs))
        replicas = ", ".join(sorted(set(first.replicas)))
        source_line(fig, f"serving simulation; {replicas}" + (f"; {note}" if note else ""))
    return fig
