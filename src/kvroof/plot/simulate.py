"""Serving-simulation figures: TTFT distributions per policy, latency against request rate from a
sweep, and a timeline of tokens per iteration and power (one run, or the compared runs in one
figure).

Each figure says on itself when curves coincide (they are then drawn in stripes of decreasing
width, so that each stays visible) and warns when the offered rate exceeds the rate served
(:func:`kvroof.simulate.steady_state.saturation`, re-exported here: the queue grows while
requests arrive, so the run has no steady state; ``kvroof simulate`` prints the same warning)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kvroof.plot.style import (
    axes_notes,
    color,
    legend_below,
    log_axis,
    new_figure,
    source_line,
    style,
)
from kvroof.plot.timeline import idle_power, timeline_figure
from kvroof.simulate.steady_state import (
    SATURATION_GROWTH,
    SATURATION_MIN_REQUESTS,
    SATURATION_SHARE,
    Saturation,
    format_seconds,
    saturation,
    saturation_notes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kvroof.simulate.metrics import SimResult

__all__ = ["SATURATION_GROWTH", "SATURATION_MIN_REQUESTS", "SATURATION_SHARE", "Saturation",
           "coinciding", "idle_power", "latency_vs_rps_figure", "saturation", "timeline_figure",
           "ttft_cdf_figure"]

_POINTS = 2000
COINCIDE_TOLERANCE = 0.02
"""Curves whose values differ by less than 2% everywhere are said to coincide."""


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
                    label=f"{label} (p50 {format_seconds(stats['p50'])}, "
                          f"p99 {format_seconds(stats['p99'])})")
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
        notes = saturation_notes(results)
        coincide = _coincide_note(groups, "every percentile")
        if coincide:
            notes.insert(0, ("note:coincide", coincide))
        axes_notes(ax, notes)
        first = next(iter(results.values()), None)
        replicas = ", ".join(sorted(set(first.replicas))) if first else ""
        source_line(fig, f"serving simulation; {replicas}" + (f"; {note}" if note else ""))
    return fig


def latency_vs_rps_figure(rows: Sequence[Mapping[str, Any]], group: Sequence[str],
                          metrics: Sequence[str] = ("ttft_s_p50", "ttft_s_p99"),
                          note: str = "") -> Figure:
    """Latency against request rate from sweep rows (each a flattened summary with ``rps``):
    one curve per combination of the ``group`` columns and metric (``gid``
    ``"<metric>:<group values>"``), log y; colour: the group, line style: the metric (the
    legend, below the axes, lists each once). Groups whose curves agree within 2% at every rate
    are named in a note above the axes and drawn as stripes."""
    from matplotlib.lines import Line2D

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
