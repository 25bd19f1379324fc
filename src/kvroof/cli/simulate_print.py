"""What ``kvroof simulate`` prints: one run's summary as labelled lines (latency percentiles,
throughput, tokens per iteration, what limited the batches, where prompt tokens came from, link
use, power, energy, preemptions, routing: :func:`kvroof.simulate.result_frames.summary_lines`,
which the result's HTML repr shows too) and a table of the replicas' requests and hit rates, or
the runs of ``--compare`` side by side in one table.
Durations and counts are written for people (:func:`kvroof.display.duration`: "16.7 h";
:func:`kvroof.display.count`: "13,530")."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvroof.cli.common import print_table
from kvroof.display import count, duration

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult

__all__ = ["print_results", "print_stages"]


def _seconds(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else duration(value)


def _share(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f} %"


def _lines(result: SimResult) -> list[tuple[str, str]]:
    from kvroof.simulate.result_frames import summary_lines

    return summary_lines(result)


def _compact(result: SimResult) -> list[tuple[str, str]]:
    """Short cells for the side-by-side table of --compare."""
    s = result.summary
    return [
        ("requests", count(s["requests"])),
        ("TTFT p50", _seconds(s["ttft_s"]["p50"])),
        ("TTFT p99", _seconds(s["ttft_s"]["p99"])),
        ("TPOT p50", _seconds(s["tpot_s"]["p50"])),
        ("TPOT p99", _seconds(s["tpot_s"]["p99"])),
        ("end-to-end p50", _seconds(s["e2e_s"]["p50"])),
        ("end-to-end p99", _seconds(s["e2e_s"]["p99"])),
        ("throughput (requests/s)", f"{s['throughput_rps']:.3g}"),
        ("goodput (requests/s)", f"{s['goodput_rps']:.3g}"),
        ("tokens per iteration", count(round(s["tokens_per_iteration"]))),
        ("HBM hits", _share(s["hit_rate_hbm"])),
        ("host DRAM hits", _share(s["hit_rate_host"])),
        ("tier hits", _share(s["hit_rate_tier"])),
        ("recomputed by split", _share(s["split_recomputed_share"])),
        ("host link busy, to GPU", _share(s["link_h2d_utilization"])),
        ("power per GPU, mean", f"{s['power_mean_w']:.0f} W"),
        ("energy per output token", f"{s['energy_per_output_token_j']:.3g} J"),
        ("preemptions", count(s["preemptions"])),
        ("busiest replica's share", _share(s.get("replica_share_max", math.nan))),
    ]


REPLICA_TABLE_MAX = 32
"""The most replicas printed one row each; beyond, the ``routing`` line's busiest and idlest
replica stand for them (``--json`` and ``summary.json`` list every one)."""


def _print_replicas(result: SimResult) -> None:
    """Per-replica requests and hit rates, for two replicas up to :data:`REPLICA_TABLE_MAX`."""
    from kvroof.simulate.result_frames import REPLICA_HEADER, replica_rows

    rows = replica_rows(result)
    if 2 <= len(rows) <= REPLICA_TABLE_MAX:
        header = list(REPLICA_HEADER)
        if len(set(result.replicas)) == 1:  # one kind of replica: the head says which
            rows = [row[:1] + row[2:] for row in rows]
            header = header[:1] + header[2:]
        print()
        print_table(rows, header=header)


def print_results(trace: Any, results: list[SimResult]) -> None:
    """The trace and replicas, then one result's lines or several results' table."""
    first = results[0]
    counts: dict[str, int] = {}
    for label in first.replicas:
        counts[label] = counts.get(label, 0) + 1
    head = [("trace", f"{trace.name}" + (" (SYNTHETIC)" if trace.synthetic else "")),
            ("source", trace.source),
            ("replicas", "; ".join(f"{n} x {label}" for label, n in counts.items()))]
    if len(results) == 1:
        rows = head + _lines(first)
        width = max(len(k) for k, _ in rows) + 2
        for key, value in rows:
            print(f"{key.ljust(width)}{value}")
        _print_replicas(first)
    else:
        for key, value in head:
            print(f"{key}: {value}")
        print()
        columns = [_compact(r) for r in results]
        table = [[key] + [col[i][1] for col in columns] for i, (key, _) in
                 enumerate(columns[0])]
        header = ["", *(f"[{i}] {r.label}" for i, r in enumerate(results))]
        print_table(table, header=header)
    print_semantics(results)
    notes = sorted({note for r in results for note in r.notes})
    for note in notes:
        print(f"note: {note}")
    from kvroof.simulate.steady_state import saturation

    for index, result in enumerate(results):
        found = saturation(result)
        if found is not None:
            which = f" [{index}] {result.label}" if len(results) > 1 else ""
            print(f"warning: no steady state{which}: {found.message()}")


def print_semantics(results: list[SimResult]) -> None:
    """The engine semantics each run used (:mod:`kvroof.simulate.semantics`): once when the
    runs share them, else each run's rules that differ, under its label."""
    if not results or not results[0].semantics:
        return
    print("engine semantics (docs/simulate.md compares each with vLLM v1):")
    first = results[0].semantics
    width = max(len(topic) for r in results for topic, _ in r.semantics) + 2
    for topic, rule in first:
        print(f"  {topic.ljust(width)}{rule}")
    for index, result in enumerate(results[1:], start=1):
        differ = [(topic, rule) for topic, rule in result.semantics if (topic, rule) not in first]
        for topic, rule in differ:
            print(f"  [{index}] {topic.ljust(width - 4)}{rule}")


STAGE_HEADER = ["stage", "start", "end", "requests", "rate (req/s)", "TTFT mean", "TTFT p90",
                "TPOT mean", "E2E mean", "E2E p90", "throughput (req/s)", "output tok/s"]
"""Columns of the per-stage table (``rate``: the achieved rate, first to last arrival)."""


def print_stages(results: list[SimResult]) -> None:
    """Each staged run's per-stage table (``summary["stages"]``); nothing for other runs."""
    for index, result in enumerate(results):
        stages = result.summary.get("stages")
        if not stages:
            continue
        rows = [[str(s["stage"]), _seconds(s["start_s"]), _seconds(s["end_s"]),
                 count(s["requests"]), _rate(s["achieved_rate_rps"]),
                 _seconds(s["ttft_s"]["mean"]), _seconds(s["ttft_s"]["p90"]),
                 _seconds(s["tpot_s"]["mean"]), _seconds(s["e2e_s"]["mean"]),
                 _seconds(s["e2e_s"]["p90"]), _rate(s["throughput_rps"]),
                 _rate(s["output_tokens_per_s"])] for s in stages]
        print()
        print("per stage" + (f" [{index}] {result.label}" if len(results) > 1 else "") + ":")
        print_table(rows, header=STAGE_HEADER)


def _rate(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"
