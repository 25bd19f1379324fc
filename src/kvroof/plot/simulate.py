"""Serving-simulation figures: TTFT distributions per policy, latency against request rate from a
sweep, and a timeline of tokens per iteration and power."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from kvroof.plot.style import color, new_figure, source_line, style
from kvroof.simulate.metrics import SimResult

__all__ = ["latency_vs_rps_figure", "timeline_figure", "ttft_cdf_figure"]

_POINTS = 2000


def _ecdf(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    ordered = np.sort(values[np.isfinite(values)])
    if ordered.size == 0:
        return np.zeros(0), np.zeros(0)
    index = np.unique(np.linspace(0, ordered.size - 1, min(ordered.size, _POINTS))
                      .astype(np.int64))
    return ordered[index], (index + 1.0) / ordered.size


def ttft_cdf_figure(results: Mapping[str, SimResult], note: str = "") -> Figure:
    """The empirical CDF of TTFT for each labelled result (``gid`` ``"ttft:<label>"``), with
    p50 and p99 in the legend."""
    with style():
        fig, axes = new_figure(width=6.4, height=4.2)
        ax = axes[0]
        for index, (label, result) in enumerate(results.items()):
            ttft = result.requests["ttft"]
            x, y = _ecdf(ttft)
            stats = result.summary["ttft_s"]
            ax.step(x, y, where="post", color=color(index), linewidth=1.6, gid=f"ttft:{label}",
                    label=f"{label} (p50 {stats['p50']:.3g} s, p99 {stats['p99']:.3g} s)")
        ax.set_xscale("log")
        ax.set_xlabel("time to first token (s)")
        ax.set_ylabel("share of requests (fraction)")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="upper left", fontsize=7)
        first = next(iter(results.values()), None)
        replicas = ", ".join(sorted(set(first.replicas))) if first else ""
        source_line(fig, f"serving simulation; {replicas}" + (f"; {note}" if note else ""))
    return fig


def latency_vs_rps_figure(rows: Sequence[Mapping[str, Any]], group: Sequence[str],
                          metrics: Sequence[str] = ("ttft_s_p50", "ttft_s_p99"),
                          note: str = "") -> Figure:
    """Latency against request rate from sweep rows (each a flattened summary with ``rps``):
    one curve per combination of the ``group`` columns and metric (``gid``
    ``"<metric>:<group values>"``), log y."""
    with style():
        fig, axes = new_figure(width=6.4, height=4.2)
        ax = axes[0]
        curves: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
        for row in rows:
            curves.setdefault(tuple(row.get(key) for key in group), []).append(row)
        styles = ("-", "--", ":", "-.")
        for index, (key, members) in enumerate(curves.items()):
            members = sorted(members, key=lambda r: float(r["rps"]))
            rps = [float(r["rps"]) for r in members]
            name = ", ".join(f"{k}={v}" for k, v in zip(group, key, strict=True)) or "all"
            for m, metric in enumerate(metrics):
                values = [float(r[metric]) if r.get(metric) not in (None, "") else np.nan
                          for r in members]
                ax.plot(rps, values, styles[m % len(styles)], marker="o", color=color(index),
                        label=f"{name}: {metric}", gid=f"{metric}:{name}")
        ax.set_yscale("log")
        ax.set_xlabel("request rate (requests/s)")
        ax.set_ylabel("latency (s)")
        ax.legend(loc="upper left", fontsize=7)
        source_line(fig, "serving-simulation sweep" + (f"; {note}" if note else ""))
    return fig


def timeline_figure(result: SimResult, bins: int = 200, note: str = "") -> Figure:
    """Two panels over simulated time: tokens scheduled per iteration (prefill and decode,
    iteration-weighted means per time bin; ``gid`` ``"tokens:prefill"`` / ``"tokens:decode"``,
    with the token budget) and power per GPU while iterating (``gid`` ``"power"``), with the
    mean over the whole run (idle time included)."""
    it = result.iterations
    start = it["start"]
    end = start + it["duration"]
    with style():
        fig, axes = new_figure(nrows=2, width=7.2, height=2.8)
        if start.size:
            edges = np.linspace(float(start.min()), float(end.max()), bins + 1)
            centers = (edges[:-1] + edges[1:]) / 2
            where = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
            count = np.bincount(where, it["iterations"], bins)
            with np.errstate(invalid="ignore", divide="ignore"):
                prefill = np.bincount(where, it["prefill_tokens"] * it["iterations"], bins) / count
                decode = np.bincount(where, it["decode_tokens"] * it["iterations"], bins) / count
                energy = np.bincount(where, it["power_w"] * it["duration"], bins)
                busy_time = np.bincount(where, it["duration"], bins)
                power = energy / busy_time
            mean = float(result.summary.get("power_mean_w", 0.0))
            axes[0].stackplot(centers, np.nan_to_num(prefill), np.nan_to_num(decode),
                              colors=(color(0), color(1)), labels=("prefill", "decode"))
            axes[0].axhline(result.summary["token_budget"], color="0.3", linestyle="--",
                            linewidth=1, label="token budget")
            axes[1].plot(centers, power, color=color(3), gid="power",
                         label="per GPU while iterating")
            axes[1].axhline(mean, color="0.3", linestyle=":", linewidth=1,
                            label=f"mean over the run, idle time included ({mean:.0f} W)")
        axes[0].set_ylabel("tokens per iteration")
        axes[0].legend(loc="upper right", fontsize=7)
        axes[1].set_ylabel("power per GPU (W)")
        axes[1].set_xlabel("simulated time (s)")
        axes[1].legend(loc="upper right", fontsize=7)
        source_line(fig, f"serving simulation; {', '.join(sorted(set(result.replicas)))}"
                    + (f"; {note}" if note else ""))
    return fig
