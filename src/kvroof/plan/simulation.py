"""One simulation of a plan, and batches of them on local processes.

A :class:`SimJob` is a candidate's replicas, the engine settings of one arm (with or without
offloading, a host-memory size) and an arrival rate; :func:`run_job` serves the plan's trace
at that rate (Poisson arrivals, one seed for every rate, so each rate's arrivals are the same
draw rescaled) with :func:`kvroof.simulate.runner.simulate` and returns the figures the plan
reads (:class:`RunPoint`): the objectives' percentiles, goodput, throughput, hit rates per
tier, link and compute use, what limited the batches.

:func:`run_jobs` runs a batch in this process, on ``jobs`` worker processes
(:func:`kvroof.simulate.sweep_pool.run_in_processes`, the pool of ``kvroof sweep --jobs``: it
stops at once on Ctrl-C) or on an existing Dask cluster
(:func:`kvroof.simulate.sweep_dask.run_on_dask`, as ``kvroof sweep --dask``: it cancels what it
submitted on the way out). Traces are registered by key (:func:`share_trace`) before the
workers start, so forked workers find them without copying; under another start method, and on
Dask, each job carries its trace. The registry of specs (the user's spec folders) travels the
same way. A job that fails, or that its worker or the cluster loses, returns its error as text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.errors import KvroofError
from kvroof.plan.inputs import Objectives
from kvroof.simulate.runner import prepare_trace, simulate
from kvroof.simulate.settings import SimSettings
from kvroof.specs.registry import Registry
from kvroof.workload.trace import RequestTrace

__all__ = ["RunPoint", "SimJob", "forget_trace", "percentile_of", "run_job", "run_jobs",
           "share_trace"]

_TRACES: dict[str, tuple[RequestTrace, Registry | None]] = {}


def share_trace(key: str, trace: RequestTrace, registry: Registry | None = None) -> None:
    """Register ``trace`` (and the ``registry`` of specs its jobs use) under ``key`` for the
    jobs (before any worker starts)."""
    _TRACES[key] = (trace, registry)


def forget_trace(key: str) -> None:
    """Drop the trace registered under ``key``."""
    _TRACES.pop(key, None)


@dataclass(frozen=True)
class SimJob:
    """One simulation: ``replicas`` copies of ``dep`` under ``settings`` at ``rps``."""

    trace_key: str
    dep: Deployment
    replicas: int
    settings: SimSettings
    rps: float
    objectives: Objectives
    seed: int = 0
    skip_bad: bool = False
    shared: tuple[RequestTrace, Registry | None] | None = None
    """The trace and registry, for workers that do not inherit them."""


@dataclass(frozen=True)
class RunPoint:
    """What one simulation found (SI: seconds, requests/s, tokens/s; shares in [0, 1]).

    ``ttft`` and ``tpot`` are the objectives' percentile; ``ttft_p50`` ... the usual ones;
    ``meets``: both objectives met; ``hits``: the share of prompt tokens found in HBM, loaded
    from host DRAM and from the further tier; ``computed``: computed (no hit);
    ``batch_limit``: shares of iterations by what limited their batch."""

    rps: float
    meets: bool
    ttft: float
    tpot: float
    ttft_p50: float
    ttft_p90: float
    ttft_p99: float
    tpot_p50: float
    tpot_p90: float
    tpot_p99: float
    goodput_rps: float
    throughput_rps: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    hit_hbm: float
    hit_host: float
    hit_tier: float
    computed: float
    link_h2d: float
    link_d2h: float
    compute_utilization: float
    preemptions: int
    requests: int
    skipped: int
    makespan_s: float
    wall_s: float
    batch_limit: dict[str, float] = field(default_factory=dict)


def percentile_of(values: Any, percentile: float) -> float:
    """The ``percentile`` of the finite ``values`` (NaN when there are none)."""
    data = np.asarray(values, dtype=np.float64)
    data = data[np.isfinite(data)]
    return float(np.percentile(data, percentile)) if data.size else math.nan


def _point(job: SimJob, trace: RequestTrace, registry: Registry | None = None) -> RunPoint:
    timed = prepare_trace(trace, rps=job.rps, seed=job.seed)
    result = simulate(timed, [job.dep] * job.replicas, job.settings, skip_bad=job.skip_bad,
                      registry=registry)
    q = result.requests
    s = result.summary
    p = job.objectives.percentile
    ttft = percentile_of(q["ttft"], p)
    tpot = percentile_of(q["tpot"], p)
    meets = True
    if job.objectives.ttft is not None:
        meets &= ttft <= job.objectives.ttft
    if job.objectives.tpot is not None:
        meets &= not tpot > job.objectives.tpot  # NaN (one-token outputs) meets any TPOT
    return RunPoint(
        rps=job.rps, meets=bool(meets), ttft=ttft, tpot=tpot,
        ttft_p50=s["ttft_s"]["p50"], ttft_p90=s["ttft_s"]["p90"], ttft_p99=s["ttft_s"]["p99"],
        tpot_p50=s["tpot_s"]["p50"], tpot_p90=s["tpot_s"]["p90"], tpot_p99=s["tpot_s"]["p99"],
        goodput_rps=s["goodput_rps"], throughput_rps=s["throughput_rps"],
        input_tokens_per_s=s["input_tokens_per_s"],
        output_tokens_per_s=s["output_tokens_per_s"],
        hit_hbm=s["hit_rate_hbm"], hit_host=s["hit_rate_host"], hit_tier=s["hit_rate_tier"],
        computed=s["computed_share"], link_h2d=s["link_h2d_utilization"],
        link_d2h=s["link_d2h_utilization"], compute_utilization=s["compute_utilization"],
        preemptions=int(s["preemptions"]), requests=int(s["requests"]),
        skipped=int(s["skipped"]), makespan_s=s["makespan_s"], wall_s=s["wall_s"],
        batch_limit=dict(s["batch_limit"]))


def run_job(job: SimJob) -> RunPoint | str:
    """:class:`RunPoint` of ``job``, or its error as one line (nothing raises: one failed
    simulation is that job's)."""
    try:
        shared = job.shared if job.shared is not None else _TRACES.get(job.trace_key)
        if shared is None:
            raise KvroofError(f"no trace registered as {job.trace_key!r}")
        return _point(job, *shared)
    except KvroofError as error:
        return " ".join(str(error).split())
    except Exception as error:  # a bug, or the machine: still one line
        return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _carrying(jobs: Sequence[SimJob]) -> list[SimJob]:
    """``jobs`` with their trace and registry aboard (for workers that do not inherit them)."""
    return [job if job.shared is not None else
            dataclasses.replace(job, shared=_TRACES[job.trace_key]) for job in jobs]


def run_jobs(jobs: Sequence[SimJob], workers: int = 1, *, dask: str | None = None,
             note: Callable[[str], None] | None = None) -> list[RunPoint | str]:
    """Each job's :func:`run_job`, in order: on the Dask cluster at ``dask`` when given (``note``
    is told when its workers leave), else on ``workers`` local processes when more than one
    (and more than one job), else here. A job its worker or the cluster lost gets the reason
    as its error; a cluster that cannot be reached is a :class:`~kvroof.errors.KvroofError`."""
    from kvroof.simulate.sweep_pool import Lost

    results: list[RunPoint | str] = ["not run"] * len(jobs)
    if dask is not None and jobs:
        from kvroof.simulate.sweep_dask import run_on_dask

        outcomes = run_on_dask(run_job, _carrying(jobs), dask, note=note)
    elif workers <= 1 or len(jobs) <= 1:
        return [run_job(job) for job in jobs]
    else:
        from kvroof.simulate.sweep_pool import run_in_processes

        if multiprocessing.get_start_method() != "fork":  # workers do not inherit the traces
            jobs = _carrying(jobs)
        outcomes = run_in_processes(run_job, jobs, min(workers, len(jobs)))
    with contextlib.closing(outcomes):
        for position, outcome in outcomes:
            results[position] = outcome.reason if isinstance(outcome, Lost) else outcome
    return results
