"""Replay one published serving condition with the simulator (:func:`kvroof.simulate.simulate`).

The workload is inference-perf's ``shared_prefix`` data (:class:`~.serving_cases.Workload`):
request ``i``, counted from the first request of the first stage, sends prompt
``order[i mod P]`` of a seeded shuffle of the ``P = groups x prompts_per_group`` prompts; a
prompt is its group's prefix followed by a question of its own.

A condition is one staged simulation, as inference-perf ran the published benchmark
(:mod:`kvroof.workload.stages`): stage ``k`` sends ``int(rate x duration)`` requests (duration
times ``scale``) by the workload's timer (``poisson`` or ``constant``, inference-perf's
``load.type``), the stage drains (every request finishes), and the next starts the workload's
``stage_interval`` later, with the caches (HBM and host DRAM) as the stage before left them.
With ``carry_caches=False`` each stage is instead its own simulation of the same requests and
offsets from empty caches (the replay as first written; for comparison).

Every setting of the case reaches the simulation: the deployment's compute model (default
``auto``: the measured kernel tables where they cover the accelerator), the engine profile (its
step and request costs on, its ``offload_store`` unless the condition overrides it), the router
and the condition's router weights, ``max_num_seqs``, ``max_num_batched_tokens``, the cache
policy and the host DRAM per replica.

A stage's simulated metrics are inference-perf's (``reportgen/base.py``, as
:func:`kvroof.simulate.metrics.stage_summaries`): means over its requests of TTFT, TPOT (requests
with more than one output token) and end-to-end latency; throughput as output (or input +
output) tokens over the span from its first arrival to its last finish. With them: its prompt
tokens' HBM and host hit shares, its preemptions, the largest replica's share of its requests,
and whether it saturated (:func:`stage_saturation`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.deployment import deployment
from kvroof.simulate.metrics import SimResult
from kvroof.simulate.runner import simulate
from kvroof.simulate.settings import SimSettings
from kvroof.simulate.steady_state import SATURATION_MIN_REQUESTS, Saturation, saturated
from kvroof.specs.registry import Registry
from kvroof.validation.serving_cases import Condition, Replay, Workload
from kvroof.workload.records import Workload as Requests
from kvroof.workload.requests import requests_from_workload
from kvroof.workload.stages import Stage, StagePlan, plan_from_rates
from kvroof.workload.trace import RequestTrace

__all__ = ["ConditionReplay", "StageReplay", "condition_plan", "condition_settings",
           "condition_trace", "prompt_order", "replay_condition", "stage_saturation"]


def prompt_order(workload: Workload) -> NDArray[np.int64]:
    """The shuffled prompt indices (``group * prompts_per_group + question``) that requests
    take in turn, seeded by the workload's seed."""
    total = workload.groups * workload.prompts_per_group
    order: NDArray[np.int64] = np.random.default_rng(workload.seed).permutation(total)
    return order


def condition_plan(workload: Workload, rates: tuple[float, ...], scale: float = 1.0
                   ) -> StagePlan:
    """The staged plan of a condition's stages: ``rates`` for ``stage_duration x scale``
    seconds each, the workload's timer, seed and interval, drained."""
    duration = workload.stage_duration * scale
    return plan_from_rates(tuple(Stage(rate, duration) for rate in rates),
                           arrival=workload.arrival, seed=workload.seed,
                           interval=workload.stage_interval, drain=True)


def condition_trace(workload: Workload, block_tokens: int, plan: StagePlan) -> RequestTrace:
    """The requests of every stage of ``plan``, request ``i`` sending prompt
    ``order[i mod P]``, in prefix blocks of ``block_tokens`` (the shared prefix keyed by
    group), arriving at the plan's undrained times (the simulation drains them)."""
    n = int(plan.stage.size)
    order = prompt_order(workload)
    groups = order[np.arange(n) % order.size] // workload.prompts_per_group
    requests = Requests.from_columns(
        np.full(n, workload.question_tokens), np.full(n, workload.prefix_tokens),
        output_tokens=np.full(n, workload.output_tokens), arrival_time=plan.concatenated(),
        group_id=np.array([f"group-{g}" for g in groups.tolist()], dtype=object),
        name="shared-prefix stages", synthetic=True,
        source=f"{workload.groups} groups x {workload.prompts_per_group} prompts, "
               f"{workload.prefix_tokens}-token prefixes, {workload.question_tokens}-token "
               f"questions, {workload.output_tokens} output tokens; {plan.describe()}; "
               f"{plan.note}")
    return requests_from_workload(requests, "docqa", block_tokens=block_tokens)


@dataclass(frozen=True)
class StageReplay:
    """What the simulator gave for one stage."""

    requests: int
    duration: float
    """The stage's nominal duration (s): the published one times the scale."""
    mean_ttft: float
    mean_tpot: float
    mean_e2e: float
    throughput: float
    hbm_hit: float
    """Share of the stage's prompt tokens found in HBM."""
    host_hit: float
    """Share found in the host tier."""
    preemptions: int
    replica_share_max: float
    """The largest share of the stage's requests one replica received."""
    saturated: str
    """Why the simulated stage is saturated ("" when it is not): :func:`stage_saturation`."""

    def value(self, metric: str) -> float:
        """The simulated value of ``metric`` (a name of :data:`~.serving_cases.METRICS`)."""
        result: float = getattr(self, metric)
        return result


@dataclass(frozen=True)
class ConditionReplay:
    """Every stage of one condition and what the simulation cost."""

    stages: tuple[StageReplay, ...]
    carry_caches: bool
    wall: float
    """Wall-clock seconds of the condition's simulations."""
    cpu: float
    """CPU seconds of this process during them."""
    semantics: tuple[tuple[str, str], ...]
    """(topic, rule): the engine semantics the simulator ran with (the first simulation's when
    stages are simulated apart)."""
    settings: dict[str, Any]
    """The simulator settings it ran with (``SimResult.settings``)."""
    result: SimResult | None
    """The staged simulation (None when stages are simulated apart)."""


def stage_saturation(requests: dict[str, NDArray[Any]]) -> Saturation | None:
    """:func:`kvroof.simulate.steady_state.saturation`'s rule applied to one stage's requests:
    it served less than 90% of its offered rate (requests over its arrival span against
    requests over first arrival to last finish) and its queue grew (the median TTFT of its last
    third of arrivals at least twice its first third's); None for fewer than 30 requests."""
    arrival = np.asarray(requests["arrival"], dtype=float)
    n = arrival.size
    if n < SATURATION_MIN_REQUESTS:
        return None
    ttft = np.asarray(requests["ttft"], dtype=float)
    send = float(arrival.max() - arrival.min())
    span = float(np.max(requests["finish"]) - arrival.min())
    if not (send > 0 and span > 0):
        return None
    return saturated(arrival, ttft, n / send, n / span)


def _stage_replay(requests: dict[str, NDArray[Any]], mask: NDArray[np.bool_],
                  workload: Workload, duration: float, replicas: int) -> StageReplay:
    req = {key: np.asarray(value)[mask] for key, value in requests.items()}
    n = int(mask.sum())
    tokens = req["output_tokens"].astype(np.float64)
    if workload.throughput == "total":
        tokens = tokens + req["input_tokens"]
    span = float(np.max(req["finish"]) - np.min(req["arrival"])) if n else 0.0
    prompt = float(np.sum(req["prompt_tokens"])) or 1.0
    tpot = req["tpot"][np.isfinite(req["tpot"])]
    counts = np.bincount(req["replica"].astype(np.int64), minlength=replicas)
    saturated = stage_saturation(req)
    return StageReplay(
        requests=n, duration=duration,
        mean_ttft=float(np.mean(req["ttft"])) if n else math.nan,
        mean_tpot=float(np.mean(tpot)) if tpot.size else math.nan,
        mean_e2e=float(np.mean(req["e2e"])) if n else math.nan,
        throughput=float(np.sum(tokens)) / span if span > 0 else math.nan,
        hbm_hit=float(np.sum(req["hbm_hit"])) / prompt,
        host_hit=float(np.sum(req["host_hit"])) / prompt,
        preemptions=int(np.sum(req["preemptions"])),
        replica_share_max=float(counts.max()) / n if n else math.nan,
        saturated="" if saturated is None else saturated.message())


def condition_settings(replay: Replay, condition: Condition) -> SimSettings:
    """The simulator settings of a condition (module docstring)."""
    weights: dict[str, Any] = {"router_weights": condition.weights()} \
        if replay.router == "scoring" else {}
    return SimSettings(
        max_num_seqs=replay.max_num_seqs, max_num_batched_tokens=replay.max_num_batched_tokens,
        cache_policy=condition.cache_policy, router=replay.router,
        dram_cache=condition.dram_cache, offload_store=condition.offload_store,
        label=condition.id, **weights)


def _run(trace: RequestTrace, replay: Replay, condition: Condition, registry: Registry | None,
         plan: StagePlan | None) -> SimResult:
    given: dict[str, Any] = {key: value for key, value in (
        ("memory_utilization", replay.memory_utilization), ("write_back", condition.write_back))
        if value is not None}
    dep = deployment(replay.model, system=replay.system, accelerator=replay.accelerator,
                     registry=registry, engine=replay.engine, tp=replay.tp,
                     compute_model=replay.compute_model,
                     granularity={"block_tokens": replay.block_tokens}, **given)
    return simulate(trace, [dep] * replay.replicas, condition_settings(replay, condition),
                    registry=registry, stages=plan)


def replay_condition(replay: Replay, condition: Condition, *, scale: float = 1.0,
                     registry: Registry | None = None, carry_caches: bool = True
                     ) -> ConditionReplay:
    """Simulate every stage of ``condition`` (module docstring); ``scale`` shortens (or
    lengthens) the stages' durations."""
    workload = replay.workload
    plan = condition_plan(workload, tuple(s.rate for s in condition.stages), scale)
    trace = condition_trace(workload, replay.block_tokens, plan)
    duration = workload.stage_duration * scale
    wall, cpu = time.perf_counter(), time.process_time()
    stages: list[StageReplay] = []
    results: list[SimResult] = []
    if carry_caches:
        result = _run(trace, replay, condition, registry, plan)
        of = plan.stage[result.requests["request"].astype(np.int64)]
        stages = [_stage_replay(result.requests, of == k, workload, duration, replay.replicas)
                  for k in range(len(plan))]
        results.append(result)
    else:
        for k in range(len(plan)):
            picked = np.flatnonzero(plan.stage == k)
            # sorted: kvroof.workload.stages.stage_offsets can return a stage's first offsets
            # out of order when its first seconds draw no request (reported in issue 21)
            alone = trace.take(picked).with_arrivals(
                np.sort(plan.offset[picked]), f"stage {plan.labels[k]} alone, from empty caches")
            result = _run(alone, replay, condition, registry, None)
            everything = np.ones(result.requests["request"].size, dtype=bool)
            stages.append(_stage_replay(result.requests, everything, workload, duration,
                                        replay.replicas))
            results.append(result)
    return ConditionReplay(tuple(stages), carry_caches, time.perf_counter() - wall,
                           time.process_time() - cpu, tuple(results[0].semantics),
                           dict(results[0].settings), results[0] if carry_caches else None)
