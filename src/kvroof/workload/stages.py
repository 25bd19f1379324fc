"""Staged benchmark runs: stages of requests at given rates, drained one after another.

Benchmark clients such as Kubernetes' inference-perf run a list of *stages*, each a request rate
and a duration, and finish one stage before starting the next (kubernetes-sigs/inference-perf,
``inference_perf/loadgen/load_generator.py`` at commit
d07852731ac9e8f13ec1f43f6f228294d0003ea9, ``LoadGenerator.run_stage``: it puts the stage's
``int(rate * duration)`` requests on the queue, waits until that many have finished, then
``request_queue.join()``; the caller sleeps ``load.interval`` seconds before the next stage).
A stage therefore *drains*: the next one starts when the last request of this one has finished,
plus the interval. Replaying a published staged run with open-loop arrivals would instead pile
a stage's backlog onto the next one.

This module holds what does not depend on the simulation:

- :func:`parse_stages`: ``"5x60,10x60"`` -> stages (rate 5 requests/s for 60 s, ...);
- :func:`stage_offsets`: a stage's arrival offsets after its start, drawn as inference-perf
  draws them (``inference_perf/loadgen/load_timer.py`` at commit
  0b639c532a9765001e9e92eae12795b25d6d1c56):

  * ``poisson`` (``PoissonLoadTimer``): for each second, a Poisson(rate) number of requests,
    spread over that second by exponential gaps scaled to sum to one second (so the second's
    last request lands on its end); a second with none is skipped;
  * ``constant`` (``ConstantLoadTimer``, inference-perf's default ``load.type``): the stage's
    requests spread over the whole stage by exponential gaps scaled to sum to its duration;

- :class:`StagePlan`: which request belongs to which stage, its offset in the stage, the
  stages' nominal lengths, the interval and whether stages drain; built from rates and
  durations (:func:`plan_from_rates`, taking the trace's requests in order, as inference-perf
  takes its data generator's) or from a stage label per request with the trace's own
  timestamps (:func:`plan_from_labels`);
- :func:`staged_trace`: the trace cut to the plan's requests, with the undrained arrival times.

The drained clock (each stage released when the one before has finished) is in
:mod:`kvroof.workload.stage_clock`; the simulation drives it (:mod:`kvroof.simulate.runner`).

Undrained (``drain=False``), stage ``k + 1`` starts at stage ``k``'s start plus its nominal
length plus the interval: the stages are concatenated as an open loop. A rate stage's nominal
length is its duration; a labelled stage's is the time from its first timestamp to the next
stage's first (the last stage: to its own last timestamp).

Defaults: stages drain (inference-perf always does: both its multi-worker ``run_stage`` and its
single-process loop wait for every request of a stage); the interval is 0 s. inference-perf's
``load.interval`` defaults to 1 s (``inference_perf/config/loadgen/config.py`` at commit
6ce71bfada98ca3ff49d3325dccb571c252fb51c) and its multi-worker path starts each stage's timer
one more second later (``start_time = time.perf_counter() + 1`` in ``run_stage``): a drained
replica is idle during both, so they change no latency, only the stages' start times; give
``interval=2`` to reproduce them exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError, short_repr

if TYPE_CHECKING:
    from kvroof.workload.trace import RequestTrace

__all__ = ["STAGE_ARRIVALS", "Stage", "StagePlan", "parse_stages", "plan_from_labels",
           "plan_from_rates", "stage_offsets", "staged_trace"]

STAGE_ARRIVALS = ("poisson", "constant")
"""Arrival processes within a stage, named after inference-perf's ``load.type``."""

_STAGE = re.compile(r"^\s*([^x\s]+)\s*x\s*([^x\s]+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Stage:
    """One stage: ``rate`` requests per second for ``duration`` seconds."""

    rate: float
    duration: float

    @property
    def count(self) -> int:
        """Requests in the stage: ``int(rate * duration)``, as inference-perf counts them (the
        float product rounded down)."""
        return int(self.rate * self.duration)

    def __str__(self) -> str:
        return f"{self.rate:g}x{self.duration:g}"


def _positive(what: str, text: str, stage: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise KvroofError(f"stages: {what} of stage {short_repr(stage)} must be a positive "
                          f"number, got {short_repr(text)}")
    return value


def parse_stages(text: str) -> tuple[Stage, ...]:
    """Stages from ``RATExSECONDS,...`` (``"5x60,10x60"``: 5 requests/s for 60 s, then 10
    requests/s for 60 s); each must hold at least one request."""
    if not isinstance(text, str) or not text.strip():
        raise KvroofError(f"stages: expected RATExSECONDS[,RATExSECONDS...] such as 5x60,10x60, "
                          f"got {short_repr(text)}")
    stages: list[Stage] = []
    for item in text.split(","):
        match = _STAGE.match(item)
        if match is None:
            raise KvroofError(f"stages: expected RATExSECONDS (e.g. 5x60: 5 requests/s for "
                              f"60 s), got {short_repr(item.strip())}")
        rate = _positive("the rate", match.group(1), item.strip())
        duration = _positive("the duration", match.group(2), item.strip())
        stages.append(checked_stage(Stage(rate, duration), len(stages)))
    return tuple(stages)


def checked_stage(stage: Stage, index: int) -> Stage:
    """``stage`` if its rate and duration are positive and it holds a request, else a one-line
    error naming it (``index`` from 0)."""
    for what, value in (("rate", stage.rate), ("duration", stage.duration)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value > 0):
            raise KvroofError(f"stages: stage {index + 1}'s {what} must be a positive number, "
                              f"got {short_repr(value)}")
    if stage.count < 1:
        raise KvroofError(f"stages: stage {index + 1} ({stage}) holds int({stage.rate:g} x "
                          f"{stage.duration:g}) = 0 requests; give a higher rate or a longer "
                          "duration")
    return stage


def stage_offsets(stage: Stage, arrival: str, rng: np.random.Generator) -> NDArray[np.float64]:
    """Arrival offsets (s, ascending) of ``stage.count`` requests after the stage starts, by
    inference-perf's ``poisson`` or ``constant`` timer (module docstring)."""
    n = stage.count
    if arrival == "constant":
        gaps = rng.exponential(1.0 / stage.rate, n)
        offsets: NDArray[np.float64] = np.cumsum(gaps) * (stage.duration / gaps.sum())
        return offsets
    if arrival != "poisson":
        raise KvroofError(f"stage_arrival: expected {' or '.join(STAGE_ARRIVALS)}, got "
                          f"{short_repr(arrival)}")
    counts = np.zeros(0, dtype=np.int64)
    while counts.sum() < n:  # whole seconds' counts until the stage's requests are drawn
        more = max(16, math.ceil(2 * (n - counts.sum()) / stage.rate))
        counts = np.concatenate([counts, rng.poisson(stage.rate, more)])
    used = int(np.searchsorted(np.cumsum(counts), n)) + 1  # seconds that hold the n requests
    counts = counts[:used]
    gaps = rng.exponential(1.0, int(counts.sum()))
    ends = np.cumsum(counts)
    second = np.repeat(np.arange(used), counts)
    running = np.cumsum(gaps)
    total = np.concatenate([[0.0], running])  # gap sum before request i is total[i]
    before = total[np.concatenate([[0], ends[:-1]])]  # gap sum before each second (0 if empty)
    within = (running - before[second]) / (total[ends] - before)[second]
    result: NDArray[np.float64] = (second + within)[:n]
    return result


@dataclass(frozen=True, eq=False)
class StagePlan:
    """Stages of a trace's requests: ``stage[i]`` (from 0) and ``offset[i]`` (s after its stage
    starts) for request ``i``; ``lengths`` the stages' nominal lengths (s), ``rates`` their
    requested rates (``None`` for labelled stages), ``labels`` their names, ``interval`` the
    pause between stages (s), ``drain`` whether a stage waits for the one before to finish."""

    stage: NDArray[np.int64]
    offset: NDArray[np.float64]
    lengths: tuple[float, ...]
    rates: tuple[float | None, ...]
    labels: tuple[str, ...]
    interval: float = 0.0
    drain: bool = True
    note: str = ""

    def __post_init__(self) -> None:
        check_interval(self.interval)
        if not isinstance(self.drain, bool):
            raise KvroofError(f"drain: expected true or false, got {short_repr(self.drain)}")
        stage = np.asarray(self.stage, dtype=np.int64)
        offset = np.asarray(self.offset, dtype=np.float64)
        count = len(self.lengths)
        if not (len(self.rates) == len(self.labels) == count) or stage.shape != offset.shape:
            raise KvroofError("stages: the plan's columns do not match")
        if stage.size and (stage.min() < 0 or stage.max() >= count):
            raise KvroofError(f"stages: stage numbers must be 0 to {count - 1}")
        if offset.size and not (np.all(np.isfinite(offset)) and offset.min() >= 0):
            raise KvroofError("stages: arrival offsets must be finite and non-negative")
        object.__setattr__(self, "stage", stage)
        object.__setattr__(self, "offset", offset)

    def __len__(self) -> int:
        return len(self.lengths)

    def nominal_starts(self) -> NDArray[np.float64]:
        """Each stage's start when stages do not drain (s): the one before's start + its
        length + the interval."""
        steps = np.asarray(self.lengths, dtype=np.float64) + self.interval
        return np.concatenate([[0.0], np.cumsum(steps)[:-1]])

    def concatenated(self) -> NDArray[np.float64]:
        """Arrival times of the requests when stages do not drain."""
        result: NDArray[np.float64] = self.nominal_starts()[self.stage] + self.offset
        return result

    def describe(self) -> str:
        """One line: the stages, the interval and whether they drain."""
        shown = ", ".join(self.labels[:6]) + (f" and {len(self) - 6} more" if len(self) > 6
                                              else "")
        mode = "drained" if self.drain else "not drained (concatenated)"
        return (f"{len(self)} stage{'s' * (len(self) != 1)} ({shown}), {mode}, "
                f"{self.interval:g} s between stages")


def check_interval(interval: Any) -> float:
    """The pause between stages (s): finite and non-negative."""
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not (
            math.isfinite(interval) and interval >= 0):
        raise KvroofError(f"stage_interval: expected non-negative seconds, got "
                          f"{short_repr(interval)}")
    return float(interval)


def plan_from_rates(stages: tuple[Stage, ...] | str, *, arrival: str = "poisson",
                    seed: int = 0, interval: float = 0.0, drain: bool = True) -> StagePlan:
    """A plan of ``stages`` (or their ``RATExSECONDS,...`` text): stage ``k`` takes the next
    ``int(rate * duration)`` requests, offsets drawn by ``arrival`` (``poisson`` or
    ``constant``, inference-perf's timers) from a generator seeded with ``seed``."""
    parsed = parse_stages(stages) if isinstance(stages, str) else tuple(
        checked_stage(s, i) for i, s in enumerate(stages))
    if not parsed:
        raise KvroofError("stages: give at least one stage")
    if arrival not in STAGE_ARRIVALS:
        raise KvroofError(f"stage_arrival: expected {' or '.join(STAGE_ARRIVALS)}, got "
                          f"{short_repr(arrival)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise KvroofError(f"seed: must be a non-negative integer, got {short_repr(seed)}")
    rng = np.random.default_rng(seed)
    offsets = [stage_offsets(s, arrival, rng) for s in parsed]
    counts = [s.count for s in parsed]
    return StagePlan(
        stage=np.repeat(np.arange(len(parsed)), counts), offset=np.concatenate(offsets),
        lengths=tuple(s.duration for s in parsed), rates=tuple(s.rate for s in parsed),
        labels=tuple(str(s) for s in parsed), interval=interval, drain=drain,
        note=f"{arrival} arrivals per stage as inference-perf draws them (seed {seed})")


def plan_from_labels(labels: ArrayLike, times: ArrayLike, *, interval: float = 0.0,
                     drain: bool = True) -> StagePlan:
    """A plan from a stage label per request (in trace order) and the trace's timestamps (s):
    a stage's requests are consecutive, stages run in the order they first appear, and a
    request arrives its timestamp minus its stage's first timestamp after the stage starts."""
    names = np.asarray(labels).astype(str)
    stamps = np.asarray(times, dtype=np.float64)
    if names.shape != stamps.shape or names.ndim != 1:
        raise KvroofError(f"stage: {names.size} labels for {stamps.size} timestamps")
    if not names.size:
        raise KvroofError("stage: no requests to put in stages")
    if not np.all(np.isfinite(stamps)) or np.any(np.diff(stamps) < 0):
        raise KvroofError("stage: labelled stages need the trace's timestamps, known and "
                          "never decreasing")
    change = np.flatnonzero(names[1:] != names[:-1]) + 1
    firsts = np.concatenate([[0], change])
    order = names[firsts]
    seen: dict[str, int] = {}
    for position, name in zip(firsts.tolist(), order.tolist(), strict=True):
        if name in seen:
            raise KvroofError(f"stage: request {position + 1} returns to stage {name!r} after "
                              "another stage began; a stage's requests must be consecutive")
        seen[name] = len(seen)
    stage = np.repeat(np.arange(len(firsts)), np.diff(np.concatenate([firsts, [names.size]])))
    starts = stamps[firsts]
    lasts = np.concatenate([stamps[change - 1], [stamps[-1]]])
    lengths = np.concatenate([np.diff(starts), [lasts[-1] - starts[-1]]])
    return StagePlan(stage=stage, offset=stamps - starts[stage],
                     lengths=tuple(float(x) for x in lengths), rates=(None,) * len(firsts),
                     labels=tuple(str(x) for x in order), interval=interval, drain=drain,
                     note="stages from the trace's stage labels, the trace's own timestamps")


def staged_trace(trace: RequestTrace, plan: StagePlan) -> RequestTrace:
    """``trace`` cut to the plan's requests (the first ones: a rate plan takes the trace's
    requests in order) with the undrained arrival times; an error if the trace is shorter."""
    need = int(plan.stage.size)
    if need > len(trace):
        raise KvroofError(f"stages: the stages hold {need:,} requests but the trace has "
                          f"{len(trace):,}; give fewer or shorter stages, or a longer trace")
    used = f" (the first {need:,} of {len(trace):,} requests)" if need < len(trace) else ""
    if need < len(trace):
        trace = trace.take(np.arange(need))
    return trace.with_arrivals(plan.concatenated(), f"{plan.describe()}{used}; {plan.note}")
