"""The report's serving-simulation section (when the config has ``simulation:``): a trace served
on replicas of a deployment under each scheduler and cache policy, as a table, a TTFT CDF and a
timeline of tokens per iteration and power. Default: the Mooncake slice shipped with kvroof on
four replicas of the seed paper's testbed."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.figure import Figure

from kvroof.report.config import ReportConfig
from kvroof.report.tables import Table
from kvroof.simulate.metrics import SimResult
from kvroof.specs.registry import Registry

__all__ = ["SimulationSection", "simulation_section"]

FigureSpec = tuple[str, str, Callable[[], tuple[Figure, str]]]


@dataclass(frozen=True)
class SimulationSection:
    table: Table
    figures: list[FigureSpec]


def simulation_section(config: ReportConfig, registry: Registry) -> SimulationSection:
    """Run the section's simulations (one per scheduler x cache policy)."""
    from kvroof.cost.deployment import deployment
    from kvroof.simulate import SimSettings, simulate
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    section = config.simulation
    assert section is not None
    trace = load_requests(section.trace or MOONCAKE_SLICE, section.format)
    if section.requests is not None:
        trace = trace.take(range(min(section.requests, len(trace))))
    dep = deployment(section.model, system=section.system, registry=registry,
                     **config.settings(tp=section.tp))
    results: dict[str, SimResult] = {}
    for scheduler, policy in itertools.product(section.schedulers, section.cache_policies):
        settings = SimSettings(scheduler=scheduler, cache_policy=policy,
                               load_mode=section.load_mode)
        results[f"{scheduler} / {policy}"] = simulate(trace, [dep] * section.replicas, settings,
                                                      registry=registry)
    rows = []
    for label, result in results.items():
        s = result.summary
        rows.append([label, f"{s['ttft_s']['p50']:.3g} s", f"{s['ttft_s']['p99']:.3g} s",
                     f"{1e3 * s['tpot_s']['p50']:.3g} ms", f"{s['throughput_rps']:.3g}",
                     f"{s['tokens_per_iteration']:,.0f}",
                     f"{100 * s['hit_rate_hbm']:.1f}% / {100 * s['hit_rate_host']:.1f}%",
                     f"{100 * s['link_h2d_utilization']:.1f}%", f"{s['power_mean_w']:.0f} W"])
    where = (f"{trace.name} ({len(trace):,} requests) on {section.replicas} x {dep.short_label}"
             f", {config.bandwidth_source} link bandwidth, {section.load_mode} loads")
    notes = [f"Serving simulation (docs/simulate.md): {where}. Each iteration is timed by the cost "
             "model; TTFT counts queueing, loads and chunked prefill. Hits: prompt tokens found "
             "in HBM / loaded from host DRAM. Power: mean per GPU over the run, idle included."]
    table = Table("simulation", "Serving simulation: TTFT by scheduler and cache policy",
                  ["scheduler / cache", "TTFT p50", "TTFT p99", "TPOT p50", "requests/s",
                   "tokens per iteration", "hits HBM / host", "link busy", "power"],
                  rows, notes)

    def cdf() -> tuple[Figure, str]:
        from kvroof.plot.simulate import ttft_cdf_figure

        return ttft_cdf_figure(results, trace.name), (
            f"TTFT distribution per scheduler and cache policy: {where}.")

    def timeline() -> tuple[Figure, str]:
        from kvroof.plot.simulate import timeline_figure

        label, first = next(iter(results.items()))
        return timeline_figure(first, note=label), (
            f"Tokens scheduled per iteration (against the {first.summary['token_budget']:,}-token "
            f"budget) and power per GPU over simulated time, {label}: {where}.")

    return SimulationSection(table, [
        ("simulation-ttft", "Serving simulation: TTFT by policy", cdf),
        ("simulation-timeline", "Serving simulation: tokens per iteration and power",
         timeline)])
