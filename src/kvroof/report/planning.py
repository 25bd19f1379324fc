"""The report's planning section (when the config has ``planning:``): :func:`kvroof.plan.run.plan`
for one model on the configured hardware candidates serving the shipped Mooncake trace (the
``chat`` preset), as two tables (per candidate the verdict, the highest rate meeting the
objectives with and without offloading, the host memory chosen, hit rates per tier, the reload
threshold, GPUs for the target rate and the cost; and what the answers rest on: compute model,
engine semantics, validation error) and the plan's three figures
(:mod:`kvroof.plot.plan`).

Everything shown is read from the :class:`~kvroof.plan.result.Plan`; this module computes
nothing of its own but the default target rate (the trace's recorded arrival rate). The
defaults keep the section small (one model, a 25% rate tolerance, one host-memory size beside
each system's own: docs/report.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from kvroof.errors import KvroofError
from kvroof.plan.inputs import SearchSettings
from kvroof.plan.result import Arm, CandidatePlan, Plan
from kvroof.plan.run import plan
from kvroof.plan.verdict import size_text
from kvroof.report.config import PlanningReport, ReportConfig
from kvroof.report.tables import Table
from kvroof.specs.registry import Registry
from kvroof.workload.trace import RequestTrace

__all__ = ["PlanningSection", "planning_arguments", "planning_section", "recorded_rate"]

FigureSpec = tuple[str, str, Callable[[], tuple[Figure, str, str]]]
"""(key, title, make): make returns the figure, its caption and its finding (alt text)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PlanningSection:
    """The plan the section shows, its tables and its figures."""

    plan: Plan
    tables: list[Table]
    figures: list[FigureSpec]


def recorded_rate(trace: RequestTrace) -> float | None:
    """The trace's own arrival rate (requests/s): the requests after the first over the span
    of the timestamps, ``(n - 1) / (last - first)``; ``None`` without timestamps or a span."""
    times = trace.arrival_time
    if times is None or len(times) < 2:
        return None
    span = float(times[-1] - times[0])
    return (len(times) - 1) / span if span > 0 else None


def _target(section: PlanningReport) -> float | None:
    if section.target_rps is not None:
        return section.target_rps
    if section.workload != "chat":  # the synthetic presets have no recorded times
        return None
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    return recorded_rate(load_requests(MOONCAKE_SLICE))


def planning_arguments(config: ReportConfig) -> dict[str, Any]:
    """The arguments of :func:`kvroof.plan.run.plan` the section calls it with: the config's
    ``planning:`` and the report's cost-model settings (dtype, bandwidth source, efficiencies,
    MLA mode; TP comes with each candidate)."""
    section = config.planning
    if section is None:
        raise KvroofError("planning: the config leaves the planning section out")
    settings = {k: v for k, v in config.settings().items() if k != "tp" and v is not None}
    return {
        "model": section.model, "candidates": list(section.candidates),
        "workload": section.workload, "slo_ttft": section.slo_ttft,
        "slo_tpot": section.slo_tpot, "slo_percentile": section.slo_percentile,
        "target_rps": _target(section), "gpu_hour_price": section.gpu_hour_price,
        "dram_gb_price": section.dram_gb_price, "deployment": settings,
        "search": SearchSettings(tolerance=section.tolerance,
                                 dram_sizes=None if section.dram_sizes is None
                                 else tuple(section.dram_sizes)),
        "skip_bad": section.skip_bad, "seed": config.seed,
    }


def _rate(arm: Arm | None) -> str:
    if arm is None:
        return "-"
    if arm.status == "none":
        return "none meets"
    return (">= " if arm.status == "at_least" else "") + f"{arm.max_rps:.3g}"


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _count(value: int | None) -> str:
    return "never" if value is None else f"{value:,}"


def _chosen(cand: CandidatePlan) -> Arm | None:
    """The arm the fleet is sized with: the recommended size, else the system's own."""
    if cand.curve is not None and cand.curve.recommended is not None:
        return cand.curve.recommended
    return cand.with_offload


def _row(cand: CandidatePlan, tier: bool, result: Plan) -> list[str]:
    if cand.error is not None or cand.verdict is None:
        return [cand.label, f"no plan: {cand.error}", *["-"] * (12 + tier)]
    chosen = _chosen(cand)
    at = chosen.at_max if chosen is not None else None
    bare = cand.without.at_max if cand.without is not None else None
    th = cand.threshold
    sw, so = cand.sizing_without, cand.sizing_with

    def money(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    cells = [
        cand.label, cand.verdict.sentence, _rate(cand.without), _rate(chosen),
        size_text(chosen.dram_bytes) if chosen is not None else "-",
        _pct(bare.hit_hbm if bare else None), _pct(at.hit_hbm if at else None),
        _pct(at.hit_host if at else None),
        _count(th.setting if th else None), _count(th.setting_busy if th else None),
        "-" if sw is None or sw.gpus is None else f"{sw.gpus:,}",
        "-" if so is None or so.gpus is None else f"{so.gpus:,}",
        f"{money(sw.per_million_tokens if sw else None)} / "
        f"{money(so.per_million_tokens if so else None)}"
        if result.prices.gpu_hour is not None else "-"]
    if tier:
        cells.insert(8, _pct(at.hit_tier if at else None))
    return cells


def _tables(result: Plan, config: PlanningReport) -> list[Table]:
    tier = bool(result.settings.get("tier"))
    p = f"p{result.objectives.percentile:g}"
    header = ["candidate", "verdict", "requests/s without offloading",
              "requests/s with offloading", "host memory per replica (chosen)",
              "HBM hit without", "HBM hit with", "host hit with", "reload from (cached tokens)",
              "reload from, full iteration", "GPUs without", "GPUs with",
              "cost per million tokens without / with"]
    if tier:
        header.insert(8, "tier hit with")
    median = next((c.threshold.median_new for c in result.candidates
                   if c.threshold is not None), None)
    target = (f"{result.target_rps:.3g} requests/s"
              + (" (the trace's recorded arrival rate)" if config.target_rps is None else "")
              if result.target_rps is not None else "none (planning.target_rps)")
    reuse = result.reuse
    notes = [
        f"kvroof plan (docs/plan.md) for {result.model} serving {result.workload} "
        f"({result.workload_description}; {reuse.requests:,} requests"
        + (", SYNTHETIC" if result.synthetic else "") + f"; {100 * reuse.cached_share:.1f}% of "
        f"prompt tokens reusable, median K/T {reuse.median_kappa:.3g} at median T "
        f"{reuse.median_new:,.0f}) under {result.objectives.text}"
        + (" (none given: MLPerf's Llama-2-70B server latencies)"
           if result.objectives.defaulted else "") + ".",
        f"Rates: the highest Poisson arrival rate at which the {p} TTFT and TPOT of the whole "
        "trace meet the objectives, found by bracketing and bisection with the serving "
        f"simulator to {result.search.tolerance:.0%} (the report's coarse setting; "
        f"`kvroof plan` defaults to 5%): {result.simulations:,} simulations, "
        f"{result.simulated_s / 3600:.3g} h of serving simulated in {result.wall_s:.1f} s. "
        "'With offloading': host DRAM below the HBM prefix cache at the size chosen (the "
        "smallest keeping 90% of the largest gain, else the system's own share); the searched "
        "sizes: each system's own and "
        + (", ".join(size_text(s) for s in config.dram_sizes) + " per replica"
           if config.dram_sizes is not None else "the plan's whole curve") + ".",
        "Hit rates: shares of prompt tokens found in HBM and loaded from host DRAM at the "
        "highest meeting rate. Reload from: the smallest cached prefix worth loading rather "
        f"than recomputing at the workload's median T = {median:,} (the cost model's "
        "crossover), for a request alone and inside a full iteration; 'never': recomputing "
        f"is always faster. GPUs: for the target rate {target}, replicas assumed to add up "
        "linearly. Cost: per million prompt + output tokens at the highest meeting rate"
        + ("." if result.prices.gpu_hour is not None else
           "; no prices given (planning.gpu_hour_price, planning.dram_gb_price)."),
    ]
    main = Table("planning", "Planning: should KV offloading be on?", header,
                 [_row(c, tier, result) for c in result.candidates], notes)
    basis_rows = []
    for cand in result.candidates:
        v = cand.validity
        if v is None:
            basis_rows.append([cand.label, *["-"] * 7])
            continue
        basis_rows.append([cand.label, v.compute_model, v.engine, v.semantics, v.closest_case,
                           v.closest_error, "; ".join(q.text() for q in v.serving) or "none",
                           "; ".join(v.outside) or "none"])
    basis = Table("planning_basis", "Planning: what the answers rest on",
                  ["candidate", "compute model", "engine profile", "engine semantics",
                   "closest validation case", "its error", "closest serving validation",
                   "outside what was validated"],
                  basis_rows, ["The model-level validation's error for the closest published "
                               "case, the serving validation's error for the closest published "
                               "serving condition per arm (docs/validation.md), and the answers "
                               "that fall outside what "
                               "was validated, per candidate, as kvroof plan's page gives "
                               "them."])
    return [main, basis]


def planning_section(config: ReportConfig, registry: Registry,
                     progress: Progress | None = None) -> PlanningSection:
    """Run the section's plan (its simulations are the section's whole cost) and lay it out;
    a plan that cannot run is a one-line error starting ``planning:``."""
    section = config.planning
    assert section is not None
    try:
        result = plan(**planning_arguments(config), registry=registry, progress=progress)
    except KvroofError as error:
        raise KvroofError(f"planning: {error}") from None
    failed = result.failed
    if failed:
        raise KvroofError(f"planning: candidate {failed[0].label}: {failed[0].error}")
    where = (f"{result.model} on {', '.join(c.label for c in result.candidates)}, "
             f"{result.workload} workload, {result.objectives.text}")

    def rate() -> tuple[Figure, str, str]:
        from kvroof.plot.plan import plan_rate_figure

        gains = ", ".join(f"{c.label} {c.gain:.2f}x" for c in result.candidates)
        return plan_rate_figure(result), (
            f"TTFT and TPOT against the arrival rate, every rate the searches simulated ({where})"
            ": solid without offloading, dashed with it at each system's own host memory; "
            "filled markers meet the objectives (grey lines); each search's answer is a "
            "vertical line."), (
            f"Highest rate meeting the objectives with offloading over without it: {gains}.")

    def memory() -> tuple[Figure, str, str]:
        from kvroof.plot.plan import plan_memory_figure

        parts = []
        for c in result.candidates:
            curve = c.curve
            if curve is None:
                continue
            best = "-" if math.isnan(curve.best_gain) else f"{curve.best_gain:.2f}x"
            pays = ("pays at no size" if curve.pays_from_ratio is None else
                    f"pays from a host/HBM capacity ratio of {curve.pays_from_ratio:.2g}")
            parts.append(f"{c.label} best gain {best}, {pays}")
        return plan_memory_figure(result), (
            f"Gain (highest meeting rate over the one without offloading) against host memory "
            f"per replica ({where}); the searched sizes are few in the report (the plan's "
            "tolerance: gains within it are not told apart)."), (
            "Gain against host memory: " + "; ".join(parts) + ".")

    def threshold() -> tuple[Figure, str, str]:
        from kvroof.plot.plan import plan_threshold_figure

        parts = [f"{c.label} from {_count(c.threshold.setting)} alone, "
                 f"{_count(c.threshold.setting_busy)} in a full iteration"
                 for c in result.candidates if c.threshold is not None]
        median = next((c.threshold.median_new for c in result.candidates
                       if c.threshold is not None), 0)
        return plan_threshold_figure(result), (
            "The reload threshold: for each new-token count T, the smallest cached prefix "
            f"worth loading rather than recomputing, from the cost model ({result.model} on "
            f"{', '.join(c.label for c in result.candidates)}), a request alone and inside a "
            "full iteration; a value an engine's load threshold can take."), (
            f"Cached tokens worth loading at the workload's median T = {median:,}: "
            + "; ".join(parts) + ".")

    return PlanningSection(result, _tables(result, section), [
        ("planning-rate", "Planning: latency against arrival rate, with and without offloading",
         rate),
        ("planning-memory", "Planning: gain against host memory per replica", memory),
        ("planning-threshold", "Planning: reload threshold against new tokens", threshold),
    ])
