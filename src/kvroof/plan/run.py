"""``kvroof.plan(...)``: will offloading KV to host memory pay for this model, hardware, traffic
and latency targets; with how much memory, at what reload threshold, on how many GPUs.

For each candidate:

1. **Without offloading** (the simulator's ``recompute`` cache policy: the HBM prefix cache
   only), the highest arrival rate meeting the objectives (:mod:`kvroof.plan.rate_search`:
   bracketing and bisection to ``tolerance``, one simulation a step).
2. **With offloading** at the default host memory per replica (``dram_cache``, or the
   replica's share of the system's host memory) and at each size of the host-memory curve
   (:mod:`kvroof.plan.memory_curve`), the same search, started at the rate found without it.
3. The reload threshold (:mod:`kvroof.plan.reload_threshold`), kappa_crit at the workload's
   median T, the fleet for a target rate and its cost (:mod:`kvroof.plan.sizing`), the verdict
   (:mod:`kvroof.plan.verdict`) and what was validated (:mod:`kvroof.plan.validity`).

Searches of all candidates advance together: each round simulates the next rate of every
unfinished search (the round's grid of candidates, arms and rates), in this process, on
``jobs`` local processes or on the Dask cluster at ``dask`` (as ``kvroof sweep --dask``). A
candidate whose simulation fails, or that its worker or the cluster loses, keeps its error,
naming the arm and the rate (:attr:`~kvroof.plan.result.CandidatePlan.error`); its finished
points are kept in :attr:`~kvroof.plan.result.Arm.points` and the other candidates go on.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kvroof.cost.kappa import kappa_crit
from kvroof.errors import KvroofError, short_repr
from kvroof.plan.candidates import ResolvedCandidate, resolve_candidate
from kvroof.plan.inputs import Candidate, Objectives, Prices, SearchSettings, positive_number
from kvroof.plan.memory_curve import curve_sizes, read_curve
from kvroof.plan.rate_search import RateSearch, first_guess
from kvroof.plan.reload_threshold import reload_threshold
from kvroof.plan.result import Arm, CandidatePlan, Curve, Plan
from kvroof.plan.simulation import RunPoint, SimJob, forget_trace, run_jobs, share_trace
from kvroof.plan.sizing import size_for
from kvroof.plan.validity import validity_of
from kvroof.plan.verdict import decide, rate_text, size_text
from kvroof.plan.workloads import (
    BLOCK_TOKENS,
    PlanWorkload,
    WorkloadSummary,
    load_plan_workload,
)
from kvroof.simulate.resources import ReplicaResources, replica_resources
from kvroof.simulate.settings import SimSettings
from kvroof.specs.registry import Registry, default_registry
from kvroof.workload.trace import RequestTrace

__all__ = ["Progress", "plan"]

Progress = Callable[[str], None]
"""Told a line of progress now and then (a search finished, a phase started)."""


@dataclass
class _Search:
    """One rate search of one candidate's arm, as it runs."""

    index: int
    label: str
    settings: SimSettings
    dram_bytes: float | None
    ratio: float | None
    search: RateSearch
    hypothetical: bool = False
    points: list[RunPoint] = field(default_factory=list)
    error: str | None = None

    def arm(self) -> Arm:
        outcome = self.search.outcome()
        points = tuple(sorted(self.points, key=lambda p: p.rps))
        at_max = next((p for p in points if p.rps == outcome.rate and p.meets), None)
        return Arm(self.label, self.settings.cache_policy != "recompute", self.dram_bytes,
                   self.ratio, outcome.rate, outcome.failing, outcome.status,
                   outcome.simulations, outcome.crossed, points, at_max, self.hypothetical)


def _run_searches(searches: list[_Search], jobs_for: Callable[[_Search, float], SimJob],
                  workers: int, failed: dict[int, str], progress: Progress | None,
                  names: Sequence[str], dask: str | None = None) -> int:
    """Advance every search to its end, a round at a time; returns the simulations run."""
    count = 0
    while True:
        active = [s for s in searches if s.index not in failed and s.error is None
                  and s.search.next_rate() is not None]
        if not active:
            return count
        rates = [s.search.next_rate() or 0.0 for s in active]
        jobs = [jobs_for(s, rate) for s, rate in zip(active, rates, strict=True)]
        outcomes = run_jobs(jobs, workers, dask=dask, note=progress)
        count += len(jobs)
        for search, rate, outcome in zip(active, rates, outcomes, strict=True):
            if isinstance(outcome, str):
                point = f"{search.label} at {rate:.4g} requests/s"
                search.error = outcome
                failed.setdefault(search.index, f"{point}: {outcome}")
                if progress is not None:
                    progress(f"{names[search.index]} {point}: failed: {outcome}")
                continue
            search.points.append(outcome)
            search.search.record(outcome.rps, outcome.meets)
            if search.search.next_rate() is None and progress is not None:
                result = search.search.outcome()
                found = {"found": f"{rate_text(result.rate)} meets the objectives",
                         "none": "no rate meets the objectives",
                         "at_least": f"at least {rate_text(result.rate)} (the search's "
                                     "ceiling)"}[result.status]
                progress(f"{names[search.index]} {search.label}: {found} "
                         f"({result.simulations} simulations)")


def _check_jobs(jobs: Any, dask: Any) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise KvroofError(f"jobs: expected a positive integer, got {short_repr(jobs)}")
    if dask is not None:
        if not isinstance(dask, str) or not dask.strip():
            raise KvroofError(f"dask: expected a scheduler address (tcp://host:8786), got "
                              f"{short_repr(dask)}")
        if jobs != 1:  # as kvroof sweep: the cluster has its own workers
            raise KvroofError("dask: give jobs (local processes) or dask (a cluster), not both")
    return jobs


def plan(model: str, candidates: Sequence[str | Candidate],
         workload: str | Path | WorkloadSummary | RequestTrace = "chat", *,
         slo_ttft: float | None = None, slo_tpot: float | None = None,
         slo_percentile: float = 90.0, target_rps: float | None = None,
         gpu_hour_price: float | None = None, dram_gb_price: float | None = None,
         dram_cache: float | None = None, deployment: Mapping[str, Any] | None = None,
         simulation: SimSettings | None = None, search: SearchSettings | None = None,
         output_tokens: str | None = None, format: str | None = None, skip_bad: bool = False,
         seed: int = 0, jobs: int = 1, dask: str | None = None,
         registry: Registry | None = None, progress: Progress | None = None) -> Plan:
    """Plan offloading for ``model`` on each of ``candidates`` (``SYSTEM[:TP][xREPLICAS]`` or
    :class:`~kvroof.plan.inputs.Candidate`) serving ``workload`` (a trace file, a preset:
    ``chat``, ``docqa``, ``agentic``, a :class:`~kvroof.plan.workloads.WorkloadSummary` or a
    request trace) under the objectives ``slo_ttft`` / ``slo_tpot`` (seconds, at
    ``slo_percentile``; neither: MLPerf's 2 s and 200 ms).

    ``target_rps``: size the fleet for this rate (a summary's rate otherwise);
    ``gpu_hour_price`` / ``dram_gb_price`` (per GB-hour): costs; ``dram_cache``: host memory
    per replica with offloading (bytes; default the system's share); ``deployment``: cost-model
    settings of every candidate (as :func:`kvroof.cost.deployment.deployment` takes them:
    ``engine``, ``bandwidth_source`` ...); ``simulation``: the engine's settings (scheduler,
    load mode, router, budgets, the offloading arm's cache policy, a cache tier; SLOs and
    ``dram_cache`` are set here); ``search``: tolerance, first rate, curve sizes;
    ``output_tokens``: output lengths replacing the trace's; ``seed``: arrivals and synthetic
    workloads; ``jobs``: local worker processes; ``dask``: the address of an existing Dask
    cluster to run the simulations on instead (``tcp://host:8786``; needs the
    ``kvroof[distributed]`` extra; not with ``jobs``); ``progress``: told a line per finished
    search (and when Dask workers leave).
    """
    start = time.perf_counter()
    workers = _check_jobs(jobs, dask)
    objectives = Objectives.given(slo_ttft, slo_tpot, slo_percentile)
    prices = Prices(gpu_hour_price, dram_gb_price)
    search = search or SearchSettings()
    if target_rps is not None:
        positive_number("target_rps", target_rps)
    if dram_cache is not None:
        positive_number("dram_cache", dram_cache)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise KvroofError(f"seed: expected a non-negative integer, got {short_repr(seed)}")
    if isinstance(candidates, str | Candidate) or not candidates:
        raise KvroofError("candidates: give a list of one or more candidates")
    base = simulation or SimSettings()
    if base.cache_policy == "recompute":
        raise KvroofError("cache_policy: recompute is the arm without offloading; the "
                          "offloading arm takes load or split")
    base = dataclasses.replace(base, slo_ttft=objectives.ttft, slo_tpot=objectives.tpot)
    registry = registry or default_registry()
    settings = dict(deployment or {})
    if "tp" in settings:
        raise KvroofError("deployment: tp comes with each candidate (SYSTEM:TP)")
    parsed = [c if isinstance(c, Candidate) else Candidate.parse(c) for c in candidates]
    context = registry.model(model).max_context
    work = load_plan_workload(workload, context=context, output_tokens=output_tokens,
                              format=format, skip_bad=skip_bad, seed=seed)
    trace = work.trace
    inputs = trace.input_tokens
    fits = inputs <= context if context else np.ones(len(trace), dtype=bool)
    if not skip_bad and not fits.all():
        first = int(np.flatnonzero(~fits)[0])
        raise KvroofError(f"{trace.where(first)}: input of {int(inputs[first]):,} tokens is "
                          f"longer than the model's context ({context:,}); skip such requests "
                          "(skip_bad)")
    outputs = np.minimum(trace.output_tokens, (context or 2**62) - inputs)
    need = int((inputs + outputs)[fits].max()) if fits.any() else 0
    resolved = [resolve_candidate(model, c, settings, registry, simulation=base,
                                  kv_need=need, skip_bad=skip_bad) for c in parsed]
    labels = [r.label for r in resolved]
    if len(set(labels)) != len(labels):
        raise KvroofError(f"candidates: {next(x for x in labels if labels.count(x) > 1)} "
                          "given twice")
    target = target_rps if target_rps is not None else work.target_rps
    key = f"plan-{id(work.trace)}-{time.monotonic_ns()}"
    share_trace(key, work.trace, registry)
    try:
        return _plan(resolved, work, key, objectives, prices, search, target, base,
                     dram_cache, settings, seed, skip_bad, (workers, dask), context, registry,
                     progress, start)
    finally:
        forget_trace(key)


def _plan(resolved: list[ResolvedCandidate], work: PlanWorkload, key: str,
          objectives: Objectives, prices: Prices, search: SearchSettings, target: float | None,
          base: SimSettings, dram_cache: float | None, settings: dict[str, Any], seed: int,
          skip_bad: bool, where: tuple[int, str | None], context: int | None,
          registry: Registry, progress: Progress | None, start: float) -> Plan:
    """:func:`plan` once its inputs are checked and the trace is registered as ``key``
    (``where``: local worker processes and the Dask address or ``None``)."""
    workers, dask = where
    labels = [r.label for r in resolved]
    offloading = dataclasses.replace(base, dram_cache=dram_cache)
    without = dataclasses.replace(base, cache_policy="recompute", dram_cache=None, tier=None,
                                  tier_cache=None)
    failed: dict[int, str] = {}
    resources: list[ReplicaResources] = []
    installed: list[float] = []  # host memory per replica the system has (bytes; inf: unknown)
    for cand in resolved:
        try:
            res = replica_resources(cand.dep, offloading, registry)
            own = replica_resources(cand.dep, dataclasses.replace(offloading, dram_cache=None),
                                    registry)
        except KvroofError as error:
            if str(error).startswith("tier"):  # the cache tier's: names the system
                raise
            raise KvroofError(f"candidate {cand.candidate.text}: {error}") from None
        resources.append(res)
        installed.append(own.dram_tokens * own.host_bytes_per_token
                         if math.isfinite(own.dram_tokens) else math.inf)

    # The offloading arm stores each computed block to host DRAM as the engine profile says
    # (vLLM's offloading connector and SGLang's write-through store as computed); a profile that
    # stores nothing is planned as if it stored as computed (what offloading needs), and says so.
    def job(s: _Search, rate: float) -> SimJob:
        cand = resolved[s.index]
        settings = s.settings
        if settings.cache_policy != "recompute" and settings.offload_store is None \
                and cand.dep.engine is not None and cand.dep.engine.offload_store == "none":
            settings = dataclasses.replace(settings, offload_store="as-computed")
        return SimJob(key, cand.dep, cand.replicas, settings, rate, objectives, seed, skip_bad)

    def guess(index: int) -> float:
        if search.first_rate is not None:
            return search.first_rate
        cand = resolved[index]
        return first_guess(cand.dep, cand.replicas, work.reuse.mean_input,
                           work.reuse.cached_share)

    def say(text: str) -> None:
        if progress is not None:
            progress(text)

    say(f"{len(resolved)} candidate{'s' * (len(resolved) != 1)}, {len(work.trace):,} requests "
        f"({work.name}), {objectives.text}: searching without offloading")
    first = [_Search(i, "without offloading", without, None, None,
                     RateSearch(guess(i), search.tolerance))
             for i in range(len(resolved)) if i not in failed]
    simulations = _run_searches(first, job, workers, failed, progress, labels, dask)
    second: list[_Search] = []
    for s in first:
        if s.index in failed:
            continue
        res = resources[s.index]
        found = s.search.outcome()
        start_rate = found.rate if found.rate > 0 else guess(s.index)
        # from a found rate, x1.5 (a coarser tolerance than 25% needs a wider step: the
        # search stops within 1 + tolerance of its bracket)
        step = max(1.5, 1 + 2 * search.tolerance) if found.rate > 0 else 2.0
        per_token = res.host_bytes_per_token
        default_bytes = res.dram_tokens * per_token if math.isfinite(res.dram_tokens) \
            else math.inf
        default_ratio = res.dram_tokens / res.hbm_tokens
        second.append(_Search(s.index, f"with offloading ({size_text(default_bytes)} per "
                              "replica)", offloading, default_bytes, default_ratio,
                              RateSearch(start_rate, search.tolerance, step=step)))
        cover = work.reuse.lru_tokens[2] / resolved[s.index].replicas
        sizes = list(search.dram_sizes) if search.dram_sizes is not None else curve_sizes(
            res.hbm_tokens, per_token, cover, BLOCK_TOKENS)
        for size in sizes:
            if math.isfinite(default_bytes) and abs(size - default_bytes) <= 1e-9 * default_bytes:
                continue  # the default size is searched already
            second.append(_Search(
                s.index, f"with {size_text(size)} per replica",
                dataclasses.replace(offloading, dram_cache=size), size,
                math.floor(size / per_token) / res.hbm_tokens,
                RateSearch(start_rate, search.tolerance, step=step),
                hypothetical=size > installed[s.index] * (1 + 1e-9)))
    if second:
        sized = sum(1 for s in second if s.label.startswith("with ") and "offloading" not in
                    s.label)
        say(f"searching with offloading: the default host memory and {sized} sizes of the "
            "host-memory curve")
    simulations += _run_searches(second, job, workers, failed, progress, labels, dask)
    plans = []
    for index, cand in enumerate(resolved):
        if index in failed:
            plans.append(CandidatePlan(cand.label, cand.dep.short_label, cand.tp, cand.replicas,
                                       cand.gpus, cand.choices, error=failed[index]))
            continue
        res = resources[index]
        mine = [s for s in (*first, *second) if s.index == index]
        plans.append(_candidate_plan(cand, res, mine, work, objectives, prices, search, target,
                                     base, context, registry))
    simulated = sum(p.makespan_s for s in (*first, *second) for p in s.points)
    notes = tuple(sorted({note for res in resources for note in res.notes}))
    return Plan(
        model=resolved[0].dep.model.name, workload=work.name, workload_kind=work.kind,
        workload_description=work.description, assumptions=work.assumptions,
        synthetic=work.synthetic, reuse=work.reuse, objectives=objectives, prices=prices,
        search=search, target_rps=target,
        settings={"scheduler": base.scheduler, "load_mode": base.load_mode,
                  "router": base.router, "offload_cache_policy": base.cache_policy,
                  "tier": base.tier, "seed": seed, "arrivals": "Poisson, one draw rescaled "
                  "to each rate",
                  "deployment": {k: str(getattr(v, "name", v)) for k, v in settings.items()}},
        candidates=tuple(plans), simulations=simulations, simulated_s=simulated,
        wall_s=time.perf_counter() - start, notes=notes)


def _candidate_plan(cand: ResolvedCandidate, res: Any, searches: list[_Search],
                    work: PlanWorkload, objectives: Objectives, prices: Prices,
                    search: SearchSettings, target: float | None, base: SimSettings,
                    context: int | None, registry: Registry) -> CandidatePlan:
    without = searches[0].arm()
    with_offload = searches[1].arm()
    sized = tuple(s.arm() for s in searches[2:])
    curve_arms = tuple(sorted((*sized, with_offload), key=lambda a: a.dram_bytes or 0.0)) \
        if sized else ()
    if curve_arms:
        reading = read_curve([a.max_rps for a in curve_arms],
                             [a.capacity_ratio or 0.0 for a in curve_arms], without.max_rps,
                             without.failing_rps, search.most)
        curve = Curve(curve_arms, reading.gains, reading.pays, reading.best_gain, search.most,
                      None if reading.recommended is None else curve_arms[reading.recommended],
                      reading.pays_from_ratio)
    else:
        curve = Curve((), (), (), math.nan, search.most, None, None,
                      "no prefix is reused: more host memory cannot add a hit")
    reuse = work.reuse
    median_new = round(reuse.median_new) if reuse.median_new else round(reuse.mean_input)
    threshold = reload_threshold(
        cand.dep, max_cached=max(1, (context or 131_072) - 1), median_new=max(1, median_new),
        up_to=search.thresholds_up_to, iteration_tokens=res.budget,
        overlap="layerwise" if base.load_mode == "layerwise" else None)
    t = max(1, median_new)
    alone = kappa_crit(dataclasses.replace(cand.dep, iteration_tokens=None), t).kappa_crit
    busy = kappa_crit(dataclasses.replace(cand.dep, iteration_tokens=float(max(res.budget, t))),
                      t).kappa_crit
    kappa_alone = None if alone is None or not math.isfinite(float(alone)) else float(alone)
    kappa_busy = None if busy is None or not math.isfinite(float(busy)) else float(busy)
    chosen = curve.recommended or with_offload
    sizing_without = size_for(without.max_rps, cand.replicas, cand.tp, target_rps=target,
                              prices=prices, dram_bytes=None, mean_input=reuse.mean_input,
                              mean_output=reuse.mean_output)
    sizing_with = size_for(chosen.max_rps, cand.replicas, cand.tp, target_rps=target,
                           prices=prices, dram_bytes=chosen.dram_bytes,
                           mean_input=reuse.mean_input, mean_output=reuse.mean_output)
    verdict = decide(reuse=reuse, objectives=objectives, without=without,
                     with_offload=with_offload, curve=curve, threshold=threshold,
                     kappa_alone=kappa_alone, kappa_busy=kappa_busy, hbm_tokens=res.hbm_tokens,
                     host_tokens=res.dram_tokens, tolerance=search.tolerance)
    hypothetical = [size_text(a.dram_bytes) for a in sized if a.hypothetical]
    validity = validity_of(cand.dep, base, threshold_values=[
        k for k in (threshold.setting, threshold.setting_busy) if k is not None],
        hypothetical_sizes=hypothetical, registry=registry)
    return CandidatePlan(
        cand.label, cand.dep.short_label, cand.tp, cand.replicas, cand.gpus, cand.choices,
        hbm_tokens=res.hbm_tokens, host_tokens=res.dram_tokens,
        host_bytes_per_token=res.host_bytes_per_token, kappa_alone=kappa_alone,
        kappa_busy=kappa_busy, without=without, with_offload=with_offload, curve=curve,
        threshold=threshold, sizing_without=sizing_without, sizing_with=sizing_with,
        verdict=verdict, validity=validity)
