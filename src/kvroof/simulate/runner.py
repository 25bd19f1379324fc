"""The event loop over replicas, and :func:`simulate`.

Events are arrivals (open loop: the trace's times; closed loop: a user's next request after its
previous one finishes, plus a think time) and each replica's next decision (its next iteration,
the start of a fast-forwarded run's last iteration, a load landing). The loop always takes the
earliest; an arrival that ties a replica's decision goes first, so an iteration starting at the
arrival time sees it, and replicas' decisions that tie go by replica index (not by how many
events each has had, which fast-forwarding changes).
Idle time is skipped: a replica with nothing to do has no next decision until a request reaches
it.

Before anything runs, every request is checked against every replica: an input longer than the
model's context, or a request (input + output) whose KV does not fit a replica's KV space, is an
error naming its trace line, or is skipped and counted with ``skip_bad`` when no replica could
serve it. A request whose input + output exceeds the model's context has its output cut there
(vLLM stops it at ``max_model_len``); how many is reported.
"""

from __future__ import annotations

import gc
import heapq
import math
import time as wallclock
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.errors import KvroofError
from kvroof.simulate.arrival_setup import check_applies, prepare_trace
from kvroof.simulate.engine import Engine
from kvroof.simulate.metrics import REQUEST_COLUMNS, IterationLog, SimResult, summarize
from kvroof.simulate.request import Request
from kvroof.simulate.resources import ReplicaResources, replica_resources
from kvroof.simulate.router import Router
from kvroof.simulate.scheduler import LIMITS
from kvroof.simulate.semantics import engine_semantics
from kvroof.simulate.settings import MAX_REPLICAS, SimSettings
from kvroof.specs.registry import Registry
from kvroof.units import Kind, format_quantity
from kvroof.workload.requests import RequestTrace
from kvroof.workload.stage_clock import StageClock
from kvroof.workload.stages import StagePlan

__all__ = ["Progress", "check_applies", "prepare_trace", "simulate"]

Progress = Callable[[float, float], None]
"""Called now and then with (share of requests done, simulated seconds)."""


def _check_requests(trace: RequestTrace, resources: Sequence[ReplicaResources],
                    skip_bad: bool) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int]:
    """Requests to simulate (a mask), their output lengths (cut at the model's context), and
    how many outputs were cut."""
    unknown = np.flatnonzero(~trace.output_known)
    if unknown.size:
        raise KvroofError(f"{trace.where(int(unknown[0]))}: output length unknown "
                          f"({unknown.size:,} of {len(trace):,} requests); give output lengths: "
                          "prepare_trace(output_tokens=...) takes N, exp:MEAN or uniform:LO:HI")
    inputs = trace.input_tokens
    outputs = trace.output_tokens.copy()
    context = resources[0].max_context
    keep = np.ones(len(trace), dtype=bool)
    problems: list[tuple[int, str, str, int]] = []  # (first, what, why, how many)
    if context is not None:
        long = np.flatnonzero(inputs > context)
        problems += [(int(i), f"input of {int(inputs[i]):,} tokens is longer than the model's "
                      f"context ({context:,})", "longer than the context", long.size)
                     for i in long[:1]]
        keep[long] = False
    capacity = max(res.request_space for res in resources)
    need = inputs + np.minimum(outputs, (context or 2**62) - inputs)
    big = np.flatnonzero(keep & (need > capacity))
    problems += [(int(i), f"needs {int(need[i]):,} tokens of KV but the largest replica's KV "
                  f"space holds {capacity:,} per GPU", "larger than any replica's KV space",
                  big.size) for i in big[:1]]
    keep[big] = False
    if problems and not skip_bad:
        index, what, _, _ = min(problems)
        raise KvroofError(f"{trace.where(index)}: {what}; --skip-bad skips such requests")
    if not keep.any():  # say why nothing is left
        why = "; ".join(f"{count:,} skipped as {short} (first: {trace.record_unit} "
                        f"{int(trace.record[index])}: {what})"
                        for index, what, short, count in problems) or "the trace is empty"
        loaded = (f"; {trace.skipped:,} bad record{'s' * (trace.skipped != 1)} skipped on "
                  "loading" if trace.skipped else "")
        raise KvroofError(f"{trace.path or trace.name}: no request can be served: {why}{loaded}")
    cut = 0
    if context is not None:
        over = keep & (inputs + outputs > context)
        cut = int(over.sum())
        outputs[over] = context - inputs[over]
    return keep, outputs, cut


def simulate(
    trace: RequestTrace, deployments: Sequence[Deployment], settings: SimSettings | None = None,
    *, users: int | None = None, think_time: float = 0.0, skip_bad: bool = False,
    registry: Registry | None = None, progress: Progress | None = None, check: bool = False,
    stages: StagePlan | None = None,
) -> SimResult:
    """Serve ``trace`` on replicas of ``deployments`` (one engine each) under ``settings``.

    Open loop: the trace's arrival times (see :func:`prepare_trace`). Closed loop: ``users``
    users, each sending its next request ``think_time`` seconds after its previous one finishes
    (a conversation's turns go to one user, in order). ``stages``: a staged run
    (:mod:`kvroof.workload.stage_clock`). ``check`` asserts the token budget and KV space after
    every iteration (slower; for tests)."""
    settings = settings or SimSettings()
    if not deployments:
        raise KvroofError("no replicas to simulate")
    if len(deployments) > MAX_REPLICAS:
        raise KvroofError(f"replicas: at most {MAX_REPLICAS:,}, got {len(deployments):,}")
    models = {dep.model.name for dep in deployments}
    if len(models) > 1:
        raise KvroofError(f"replicas must serve one model, got {', '.join(sorted(models))}")
    if users is not None and (isinstance(users, bool) or not isinstance(users, int)
                              or users < 1):
        raise KvroofError(f"users: expected a positive integer, got {users!r}")
    if not (isinstance(think_time, int | float) and math.isfinite(think_time)
            and think_time >= 0):
        raise KvroofError(f"think_time: expected non-negative seconds, got {think_time!r}")
    if stages is not None and users is not None:
        raise KvroofError("stages: give stages or users, not both")
    if users is None and stages is None:
        if trace.arrival_time is None:
            raise KvroofError(f"{trace.path or trace.name}: no arrival times; give a request "
                              "rate or a closed loop of users")
        trace.check_times()
    resources = [replica_resources(dep, settings, registry) for dep in deployments]
    block = trace_block(trace)
    for res in resources:
        for name, given, tokens in (("dram_cache", settings.dram_cache, res.dram_tokens),
                                    ("tier_cache", settings.tier_cache, res.tier_tokens)):
            if given and settings.cache_policy != "recompute" and tokens < block:
                raise KvroofError(
                    f"{name}: {format_quantity(given, Kind.CAPACITY)} holds {tokens:,.0f} "
                    f"tokens of KV ({format_quantity(res.host_bytes_per_token, Kind.CAPACITY)} "
                    f"each on {res.label}), less than one {block}-token prefix block; give "
                    "more, or 0 for none")
    keep, outputs, cut = _check_requests(trace, resources, skip_bad)
    skipped = int((~keep).sum())
    if keep.sum() == 0:
        raise KvroofError(f"{trace.path or trace.name}: no request can be served")
    log = IterationLog()
    done: list[Request] = []
    arrivals: list[tuple[float, int, int, int]] = []  # (time, order, request, user)
    sessions: list[list[int]] = []
    next_session = 0
    order = 0

    def on_finish(request: Request, time: float) -> None:
        nonlocal order, next_session
        done.append(request)
        if clock is not None:
            for when, index in clock.finished(request.index, time):
                order += 1
                heapq.heappush(arrivals, (when, order, index, -1))
        if users is None:
            return
        user = request.user
        follow = _next_of_user(user)
        if follow is not None:
            order += 1
            heapq.heappush(arrivals, (time + think_time, order, follow, user))

    position: dict[int, tuple[int, int]] = {}  # user -> (session, index in it)

    def _next_of_user(user: int) -> int | None:
        nonlocal next_session
        session, index = position[user]
        if index + 1 < len(sessions[session]):
            position[user] = (session, index + 1)
            return sessions[session][index + 1]
        if next_session < len(sessions):
            position[user] = (next_session, 0)
            next_session += 1
            return sessions[next_session - 1][0]
        return None

    engines = [Engine(i, res, settings, log, on_finish, check)
               for i, res in enumerate(resources)]
    router = Router(settings.router, engines, settings.router_weights)
    indices = np.flatnonzero(keep)
    clock = None if stages is None else StageClock(stages, keep)
    if clock is not None:
        arrivals = [(t, k, i, -1) for k, (t, i) in enumerate(clock.start())]
        order = len(arrivals)
    elif users is None:
        assert trace.arrival_time is not None
        times = trace.arrival_time
        arrivals = [(float(times[i]), k, int(i), -1) for k, i in enumerate(indices)]
        order = len(arrivals)
    else:
        groups: dict[str, list[int]] = {}
        for i in indices.tolist():
            group = trace.group_id[i]
            if group:
                groups.setdefault(group, []).append(i)
            else:
                sessions.append([i])
                continue
            if len(groups[group]) == 1:
                sessions.append(groups[group])
        for user in range(min(users, len(sessions))):
            position[user] = (user, 0)
            order += 1
            arrivals.append((0.0, order, sessions[user][0], user))
        next_session = min(users, len(sessions))
    heapq.heapify(arrivals)
    capacity = [res.request_space for res in resources]
    need = (trace.input_tokens + outputs).tolist()
    smallest = min(capacity)
    everyone = list(range(len(engines)))
    heap: list[tuple[float, int, int]] = []  # (time, replica, version): ties go by replica
    version = [0] * len(engines)
    total = int(keep.sum())
    start_wall = wallclock.perf_counter()
    last_report = start_wall
    loops = 0
    first_arrival = arrivals[0][0] if arrivals else 0.0
    collecting = gc.isenabled()
    gc.disable()  # the loop makes no reference cycles: the cyclic collector only costs time
    try:
        while True:
            loops += 1
            if progress is not None and loops % 2048 == 0:
                now_wall = wallclock.perf_counter()
                if now_wall - last_report > 0.25:
                    last_report = now_wall
                    progress(len(done) / total, min(e.now for e in engines))
            t_arrival = arrivals[0][0] if arrivals else math.inf
            while heap and heap[0][2] != version[heap[0][1]]:
                heapq.heappop(heap)
            t_engine = heap[0][0] if heap else math.inf
            if t_arrival == math.inf and t_engine == math.inf:
                break
            if t_arrival <= t_engine:
                time, _, index, user = heapq.heappop(arrivals)
                ids, ends = trace.blocks(index)
                preload = int(trace.preload_blocks[index])
                request = Request(index, time, int(trace.input_tokens[index]), int(outputs[index]),
                                  ids.tolist(), ends.tolist(), user, preload)
                fit = everyone if need[index] <= smallest else [
                    i for i, c in enumerate(capacity) if c >= need[index]]
                target = router.choose(request, fit, time, int(ends[preload - 1]) if preload else 0)
                for moved in router.settled:  # replicas the router brought up to the arrival
                    if moved != target:
                        version[moved] += 1
                        heapq.heappush(heap, (engines[moved].next_time, moved, version[moved]))
                engines[target].accept(request, time)
                engine = engines[target]
            else:
                _, target, _ = heapq.heappop(heap)
                engine = engines[target]
                engine.advance()
            version[target] += 1
            if engine.next_time < math.inf:
                heapq.heappush(heap, (engine.next_time, target, version[target]))
    finally:
        if collecting:
            gc.enable()
    if progress is not None:
        progress(1.0, max(e.now for e in engines))
    wall = wallclock.perf_counter() - start_wall
    from kvroof.simulate.metrics import stage_summaries

    result = _result(trace, settings, resources, engines, log, done, skipped, cut, wall,
                     first_arrival)
    if clock is not None:  # per-stage summaries, as staged benchmarks score a run
        result.summary["stages"] = stage_summaries(result.requests, clock)
        result.notes.append(f"staged run: {clock.plan.describe()}")
    return result


def _limit_shares(engines: Sequence[Engine]) -> dict[str, float]:
    counts = [sum(e.limits[i] for e in engines) for i in range(len(LIMITS))]
    total = sum(counts) or 1
    return {name: count / total for name, count in zip(LIMITS, counts, strict=True)}


def trace_block(trace: RequestTrace) -> int:
    """Tokens of the trace's largest prefix block."""
    if not trace.block_ends.size:
        return 1
    sizes = np.diff(trace.block_ends)
    starts = trace.block_offsets[:-1]
    first = trace.block_ends[starts[trace.block_offsets[1:] > starts]]
    return int(max(sizes.max(initial=0), first.max(initial=0)))


def _result(trace: RequestTrace, settings: SimSettings, resources: Sequence[ReplicaResources],
            engines: Sequence[Engine], log: IterationLog, done: list[Request], skipped: int,
            cut: int, wall: float, first_arrival: float) -> SimResult:
    done.sort(key=lambda r: r.index)
    columns: dict[str, Any] = {name: [] for name in REQUEST_COLUMNS}
    for r in done:
        columns["request"].append(r.index)
        columns["replica"].append(r.replica)
        columns["arrival"].append(r.arrival)
        columns["first_token"].append(r.first_token_time)
        columns["finish"].append(r.finish_time)
        columns["input_tokens"].append(r.input)
        columns["output_tokens"].append(r.output)
        columns["prompt_tokens"].append(r.prompt)
        columns["hbm_hit"].append(r.hbm_hit)
        columns["host_hit"].append(r.host_hit)
        columns["tier_hit"].append(r.tier_hit)
        columns["split_recomputed"].append(r.split_recomputed)
        columns["computed"].append(r.computed)
        columns["preemptions"].append(r.preemptions)
    requests = {key: np.asarray(value) for key, value in columns.items()
                if key not in ("ttft", "tpot", "e2e")}
    requests["arrival"] = requests["arrival"].astype(np.float64)
    requests["ttft"] = requests["first_token"] - requests["arrival"]
    with np.errstate(divide="ignore", invalid="ignore"):
        requests["tpot"] = np.where(requests["output_tokens"] > 1,
                                    (requests["finish"] - requests["first_token"])
                                    / (requests["output_tokens"] - 1), np.nan)
    requests["e2e"] = requests["finish"] - requests["arrival"]
    requests = {key: requests[key] for key in REQUEST_COLUMNS}
    iterations = log.arrays()
    gpus = sum(res.gpus for res in resources)
    totals = {
        "start": first_arrival,
        "budget": resources[0].budget,
        "replicas": len(engines),
        "gpus": gpus,
        "h2d_busy": sum(e.h2d.busy for e in engines),
        "d2h_busy": sum(e.d2h.busy for e in engines),
        "peak_flops": sum(res.gpus * float(res.dep.peak_compute) for res in resources),
        "idle_watts": sum(res.gpus * res.idle_power for res in resources),
        "idle_power": resources[0].idle_power,
        "dynamic_joules": sum(e.dynamic_joules for e in engines),
        "power_max": max(e.peak_power for e in engines),
        "preemptions": sum(e.preemptions for e in engines),
        "limits": _limit_shares(engines),
        "output_cut": cut,
        "skipped": skipped + trace.skipped,
        "slo_ttft": settings.slo_ttft,
        "slo_tpot": settings.slo_tpot,
    }
    summary = summarize(requests, iterations, totals)
    summary["simulated_per_wall_second"] = summary["makespan_s"] / wall if wall > 0 else math.inf
    summary["wall_s"] = wall
    notes = sorted({note for res in resources for note in res.notes})
    return SimResult(
        label=settings.name, replicas=[res.label for res in resources], requests=requests,
        iterations=iterations, summary=summary, notes=notes,
        semantics=engine_semantics(settings, resources),
        settings={key: value for key, value in asdict(settings).items() if key != "label"},
    )
