"""Replay one published serving stage with the simulator (:func:`kvroof.simulate.simulate`).

The workload is inference-perf's ``shared_prefix`` data (:class:`~.serving_cases.Workload`):
request ``i``, counted from the first request of the first stage, sends prompt
``order[i mod P]`` of a seeded shuffle of the ``P = groups x prompts_per_group`` prompts; a
prompt is its group's prefix followed by a question of its own. Each stage is its own
simulation, from empty caches, of Poisson arrivals at the stage's rate for the stage's duration
(times ``scale``), run until every request finished: a benchmark that drains between stages, as
inference-perf does, but without the cache contents a stage inherits from the one before (the
staged arrival option of the workload package replaces this when it lands; only
:func:`stage_trace` changes then).

A stage's simulated metrics are means over its requests (TTFT, TPOT of requests with more than
one output token, end-to-end latency) and its throughput: output (or input + output) tokens of
its requests over the span from the stage's start to the later of its end and its last finish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.deployment import deployment
from kvroof.errors import KvroofError
from kvroof.simulate.runner import simulate
from kvroof.simulate.settings import SimSettings
from kvroof.simulate.steady_state import saturation
from kvroof.specs.registry import Registry
from kvroof.validation.serving_cases import Condition, Replay, Stage, Workload
from kvroof.workload.arrivals import poisson_times
from kvroof.workload.records import Workload as Requests
from kvroof.workload.requests import requests_from_workload
from kvroof.workload.trace import RequestTrace

__all__ = ["StageReplay", "prompt_order", "replay_stage", "stage_arrivals", "stage_trace"]


def stage_arrivals(rate: float, duration: float, seed: int) -> NDArray[np.float64]:
    """Poisson arrival times (s) in ``[0, duration)`` at ``rate`` requests per second: the
    first times of :func:`kvroof.workload.arrivals.poisson_times` below ``duration``."""
    if not (math.isfinite(duration) and duration > 0):
        raise KvroofError(f"stage duration: expected positive seconds, got {duration!r}")
    count = int(rate * duration + 10 * math.sqrt(rate * duration) + 10)
    while True:
        times = poisson_times(count, rate, seed)
        if times[-1] >= duration:
            return times[times < duration]
        count *= 2


def prompt_order(workload: Workload) -> NDArray[np.int64]:
    """The shuffled prompt indices (``group * prompts_per_group + question``) that requests
    take in turn, seeded by the workload's seed."""
    total = workload.groups * workload.prompts_per_group
    order: NDArray[np.int64] = np.random.default_rng(workload.seed).permutation(total)
    return order


def stage_trace(workload: Workload, block_tokens: int, rate: float, duration: float,
                first: int, seed: int) -> RequestTrace:
    """The requests of one stage: Poisson arrivals at ``rate`` for ``duration`` seconds, the
    first being request number ``first`` of the whole run (which prompt each sends), in prefix
    blocks of ``block_tokens`` (the shared prefix keyed by group)."""
    times = stage_arrivals(rate, duration, seed)
    order = prompt_order(workload)
    prompts = order[(first + np.arange(times.size)) % order.size]
    groups = prompts // workload.prompts_per_group
    n = times.size
    requests = Requests.from_columns(
        np.full(n, workload.question_tokens), np.full(n, workload.prefix_tokens),
        output_tokens=np.full(n, workload.output_tokens), arrival_time=times,
        group_id=np.array([f"group-{g}" for g in groups.tolist()], dtype=object),
        name=f"shared-prefix stage at {rate:g} requests/s", synthetic=True,
        source=f"{workload.groups} groups x {workload.prompts_per_group} prompts, "
               f"{workload.prefix_tokens}-token prefixes, {workload.question_tokens}-token "
               f"questions, {workload.output_tokens} output tokens")
    return requests_from_workload(requests, "docqa", block_tokens=block_tokens)


@dataclass(frozen=True)
class StageReplay:
    """What the simulator gave for one stage."""

    requests: int
    duration: float
    """The stage's simulated duration (s): the published one times the scale."""
    mean_ttft: float
    mean_tpot: float
    mean_e2e: float
    throughput: float
    hbm_hit: float
    """Share of the stage's prompt tokens found in HBM."""
    host_hit: float
    """Share found in the host tier."""
    saturated: str
    """Why the simulated stage is saturated ("" when it is not): steady_state.saturation."""
    wall: float

    def value(self, metric: str) -> float:
        """The simulated value of ``metric`` (a name of :data:`~.serving_cases.METRICS`)."""
        result: float = getattr(self, metric)
        return result


def _settings(replay: Replay, condition: Condition) -> SimSettings:
    return SimSettings(
        max_num_seqs=replay.max_num_seqs, max_num_batched_tokens=replay.max_num_batched_tokens,
        cache_policy=condition.cache_policy, router=replay.router,
        dram_cache=condition.dram_cache, label=condition.id)


def replay_stage(replay: Replay, condition: Condition, stage: Stage, index: int, first: int,
                 *, scale: float = 1.0, registry: Registry | None = None) -> StageReplay:
    """Simulate stage number ``index`` of ``condition`` (its first request is request number
    ``first`` of the run) with the replay's settings; ``scale`` shortens (or lengthens) the
    stage's duration."""
    workload = replay.workload
    duration = workload.stage_duration * scale
    trace = stage_trace(workload, replay.block_tokens, stage.rate, duration, first,
                        workload.seed + 1 + index)
    given: dict[str, Any] = {key: value for key, value in (
        ("memory_utilization", replay.memory_utilization), ("write_back", condition.write_back))
        if value is not None}
    dep = deployment(replay.model, system=replay.system, accelerator=replay.accelerator,
                     registry=registry, engine=replay.engine, tp=replay.tp,
                     granularity={"block_tokens": replay.block_tokens}, **given)
    result = simulate(trace, [dep] * replay.replicas, _settings(replay, condition),
                      registry=registry)
    req = result.requests
    tokens = req["output_tokens"].astype(np.float64)
    if workload.throughput == "total":
        tokens = tokens + req["input_tokens"]
    span = max(duration, float(np.max(req["finish"])))
    prompt = float(np.sum(req["prompt_tokens"])) or 1.0
    saturated = saturation(result)
    return StageReplay(
        requests=int(req["request"].size), duration=duration,
        mean_ttft=float(np.mean(req["ttft"])),
        mean_tpot=float(np.nanmean(req["tpot"])) if np.any(np.isfinite(req["tpot"])) else math.nan,
        mean_e2e=float(np.mean(req["e2e"])), throughput=float(np.sum(tokens)) / span,
        hbm_hit=float(np.sum(req["hbm_hit"])) / prompt,
        host_hit=float(np.sum(req["host_hit"])) / prompt,
        saturated="" if saturated is None else saturated.message(),
        wall=float(result.summary["wall_s"]))
