"""The serving validation as text rows (``kvroof validate --quantity serving`` prints them; the
report can show the same): one table per condition, measured against simulated per stage, and
the statistics. No number is computed here."""

from __future__ import annotations

import math

from kvroof.units import Kind, format_quantity
from kvroof.validation.serving import ServingResult, ServingStats, StageScore
from kvroof.validation.serving_cases import METRICS, Condition

__all__ = ["FLAGS_TEXT", "METRIC_TEXT", "condition_table", "stats_rows"]

METRIC_TEXT = {"mean_ttft": "TTFT", "mean_tpot": "TPOT", "mean_e2e": "E2E",
               "throughput": "tok/s"}
FLAGS_TEXT = ("flags: M = the measured system was saturated at this stage (out of the first "
              "statistics), S = the simulated one was (its queue grew); x = a metric left out "
              "of the statistics (reason in --json)")


def _value(metric: str, value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if metric == "throughput":
        return f"{value:,.0f}"
    return format_quantity(value, Kind.TIME)


def _share(value: float) -> str:
    return f"{100 * value:.0f}%" if math.isfinite(value) else "-"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def condition_table(result: ServingResult, condition: Condition
                    ) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of one condition: per stage, each published metric measured, simulated
    and their ratio, the simulated HBM and host hit shares, preemptions, the largest share of
    the stage's requests one replica received, and the flags."""
    scores: list[StageScore] = result.scores_of(condition.id)
    metrics = [m for m in METRICS if any(s.measured(m) is not None for s in scores)]
    header = ["rate"]
    for metric in metrics:
        name = METRIC_TEXT[metric]
        header += [f"{name} measured", f"{name} simulated", "ratio"]
    header += ["hits HBM/host", "preemptions", "top replica", "requests", "flags"]
    rows = []
    for s in scores:
        row = [f"{s.stage.rate:g}/s"]
        for metric in metrics:
            mark = " x" if s.excluded(metric) else ""
            row += [_value(metric, s.measured(metric)),
                    _value(metric, s.simulated.value(metric)), _ratio(s.ratio(metric)) + mark]
        row += [f"{100 * s.simulated.hbm_hit:.0f}% / {100 * s.simulated.host_hit:.0f}%",
                f"{s.simulated.preemptions:,}", _share(s.simulated.replica_share_max),
                f"{s.simulated.requests:,}", s.flags or "-"]
        rows.append(row)
    return header, rows


def _stats_cells(stats: ServingStats) -> list[str]:
    if not stats.ratios:
        return ["0", "-", "-", "-"]
    return [f"{stats.ratios}", f"{stats.median_ratio:.3g}",
            f"{stats.worst_ratio:.3g} ({stats.worst_where})", f"{100 * stats.mape:.0f} %"]


def stats_rows(result: ServingResult) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the statistics: per condition and over all, below saturation and with
    the saturated stages."""
    header = ["case (condition)", "stages", "ratios", "median", "worst (stage metric)", "MAPE"]
    rows = []
    for stats in result.stats:
        label = stats.condition if not stats.saturated_included else ""
        which = "saturated included" if stats.saturated_included else "below saturation"
        rows.append([label, which, *_stats_cells(stats)])
    return header, rows
