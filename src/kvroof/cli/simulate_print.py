"""What ``kvroof simulate`` prints: one run's summary as labelled lines (latency percentiles,
throughput, tokens per iteration, what limited the batches, where prompt tokens came from, link
use, power, energy, preemptions), or the runs of ``--compare`` side by side in one table."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvroof.cli.common import print_table
from kvroof.units import Kind, format_quantity

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult

__all__ = ["print_results"]


def _seconds(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else format_quantity(value,
                                                                                 Kind.TIME)


def _share(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f} %"


def _stats(stats: dict[str, float]) -> str:
    return (f"mean {_seconds(stats['mean'])}, p50 {_seconds(stats['p50'])}, "
            f"p90 {_seconds(stats['p90'])}, p99 {_seconds(stats['p99'])}")


def _lines(result: SimResult) -> list[tuple[str, str]]:
    s = result.summary
    limits = ", ".join(f"{name} {100 * share:.0f}%" for name, share in
                       s["batch_limit"].items() if share > 0) or "-"
    energy = s["energy_j"]
    rows = [
        ("settings", result.label),
        ("requests", f"{s['requests']:,} completed in {_seconds(s['makespan_s'])} "
                     f"({s['skipped']} skipped, {s['output_cut']} outputs cut at the context)"),
        ("TTFT", _stats(s["ttft_s"])),
        ("TPOT", _stats(s["tpot_s"])),
        ("end-to-end", _stats(s["e2e_s"])),
        ("throughput", f"{s['throughput_rps']:.3g} requests/s, "
                       f"{s['input_tokens_per_s']:,.0f} input and "
                       f"{s['output_tokens_per_s']:,.0f} output tokens/s"),
    ]
    if result.settings.get("slo_ttft") is not None or result.settings.get("slo_tpot") is not None:
        rows.append(("goodput", f"{s['goodput_rps']:.3g} requests/s ({_share(s['slo_met'])} "
                                "meet the SLOs)"))
    rows += [
        ("tokens per iteration", f"{s['tokens_per_iteration']:,.0f} "
                                 f"({_share(s['budget_utilization'])} of the "
                                 f"{s['token_budget']:,}-token budget; prefill "
                                 f"{s['prefill_tokens_per_iteration']:,.0f}, decode "
                                 f"{s['decode_tokens_per_iteration']:,.0f})"),
        ("batch limited by", limits),
        ("prompt tokens from", f"HBM {_share(s['hit_rate_hbm'])}, host DRAM "
                               f"{_share(s['hit_rate_host'])}, tier {_share(s['hit_rate_tier'])}"
                               f", recomputed by split {_share(s['split_recomputed_share'])}, "
                               f"computed {_share(s['computed_share'])}"),
        ("host link busy", f"to GPU {_share(s['link_h2d_utilization'])}, to host "
                           f"{_share(s['link_d2h_utilization'])}"),
        ("compute utilization", _share(s["compute_utilization"])),
        ("power per GPU", f"mean {s['power_mean_w']:.0f} W, max {s['power_max_w']:.0f} W"),
        ("energy", f"{energy / 1e6:.4g} MJ ({energy / max(s['requests'], 1) / 1e3:.3g} kJ per "
                   f"request, {s['energy_per_output_token_j']:.3g} J per output token)"),
        ("preemptions", f"{s['preemptions']:,}"),
        ("simulated", f"{_seconds(s['makespan_s'])} in {_seconds(s['wall_s'])} "
                      f"({s['simulated_per_wall_second']:,.0f}x real time; "
                      f"{s['stepped_iterations']:,} iterations stepped, "
                      f"{s['fast_forwarded_iterations']:,} in {s['fast_forward_runs']:,} "
                      "fast-forwarded runs)"),
    ]
    return rows


def _compact(result: SimResult) -> list[tuple[str, str]]:
    """Short cells for the side-by-side table of --compare."""
    s = result.summary
    return [
        ("requests", f"{s['requests']:,}"),
        ("TTFT p50", _seconds(s["ttft_s"]["p50"])),
        ("TTFT p99", _seconds(s["ttft_s"]["p99"])),
        ("TPOT p50", _seconds(s["tpot_s"]["p50"])),
        ("TPOT p99", _seconds(s["tpot_s"]["p99"])),
        ("end-to-end p50", _seconds(s["e2e_s"]["p50"])),
        ("end-to-end p99", _seconds(s["e2e_s"]["p99"])),
        ("throughput (requests/s)", f"{s['throughput_rps']:.3g}"),
        ("goodput (requests/s)", f"{s['goodput_rps']:.3g}"),
        ("tokens per iteration", f"{s['tokens_per_iteration']:,.0f}"),
        ("HBM hits", _share(s["hit_rate_hbm"])),
        ("host DRAM hits", _share(s["hit_rate_host"])),
        ("tier hits", _share(s["hit_rate_tier"])),
        ("recomputed by split", _share(s["split_recomputed_share"])),
        ("host link busy, to GPU", _share(s["link_h2d_utilization"])),
        ("power per GPU, mean", f"{s['power_mean_w']:.0f} W"),
        ("energy per output token", f"{s['energy_per_output_token_j']:.3g} J"),
        ("preemptions", f"{s['preemptions']:,}"),
    ]


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
    else:
        for key, value in head:
            print(f"{key}: {value}")
        print()
        columns = [_compact(r) for r in results]
        table = [[key] + [col[i][1] for col in columns] for i, (key, _) in
                 enumerate(columns[0])]
        header = ["", *(f"[{i}] {r.label}" for i, r in enumerate(results))]
        print_table(table, header=header)
    notes = sorted({note for r in results for note in r.notes})
    for note in notes:
        print(f"note: {note}")
    from kvroof.plot.simulate import saturation  # no matplotlib: kvroof.plot loads lazily

    for index, result in enumerate(results):
        found = saturation(result)
        if found is not None:
            which = f" [{index}] {result.label}" if len(results) > 1 else ""
            print(f"warning: no steady state{which}: {found.message()}")
