"""The ``serving`` quantity of ``kvroof validate``: published serving runs replayed by the
simulator as they were run (one staged simulation per condition, :mod:`.serving_replay`) and
scored per stage and metric.

A score is the ratio simulated / measured of one metric of one stage. Per condition (a published
configuration: a case), over its stages whose measured system was not saturated and its metrics
not excluded: the median ratio, the worst ratio (farthest from 1 by factor, either way) and the
mean absolute percentage error ``MAPE = mean(|ratio - 1|)``, as for the model-level quantities;
the same over every stage (saturated ones included) is given beside it. A stage is flagged when
the measured system was saturated (the case file says so and why) and when the simulated one was
(:func:`kvroof.simulate.steady_state.saturation`); nothing is dropped.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvroof.errors import KvroofError
from kvroof.simulate.router_weights import RouterWeights
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.serving_cases import (
    METRICS,
    Condition,
    ServingFile,
    Stage,
    check_serving_names,
    load_serving_cases,
)
from kvroof.validation.serving_replay import ConditionReplay, StageReplay, replay_condition

__all__ = ["SERVING_QUANTITY", "ServingResult", "ServingStats", "StageScore", "serving_stats",
           "validate_serving"]

SERVING_QUANTITY = "serving"
"""The quantity's name in ``kvroof validate`` (``--quantity serving``)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class StageScore:
    """One stage of one condition: what was measured, what the simulator gave, their ratios."""

    file: ServingFile
    condition: Condition
    index: int
    stage: Stage
    simulated: StageReplay

    def measured(self, metric: str) -> float | None:
        """The published value of ``metric`` (``None`` when not published)."""
        return self.stage.measured(metric)

    def ratio(self, metric: str) -> float | None:
        """Simulated over measured (``None`` when not published or not simulated)."""
        measured = self.measured(metric)
        value = self.simulated.value(metric)
        if measured is None or not math.isfinite(value):
            return None
        return value / measured

    def excluded(self, metric: str) -> str:
        """Why the statistics leave this metric of this stage out ("" when they count it;
        saturation is counted apart, not here)."""
        if self.condition.rating == "C":
            return "rated C (qualitative only)"
        return next((reason for name, reason in self.condition.excluded_metrics.items()
                     if name == metric), "")

    @property
    def flags(self) -> str:
        """``M`` measured saturated, ``S`` simulated saturated (either, both or "")."""
        return ("M" if self.stage.saturated else "") + ("S" if self.simulated.saturated else "")


@dataclass(frozen=True)
class ServingStats:
    """The error of one condition (or of every condition: ``condition`` "all")."""

    condition: str
    saturated_included: bool
    ratios: int
    median_ratio: float
    worst_ratio: float
    worst_where: str
    mape: float


def _factor(ratio: float) -> float:
    return max(ratio, 1.0 / ratio)


def serving_stats(scores: Sequence[StageScore], condition: str,
                  saturated_included: bool) -> ServingStats:
    """The statistics over ``scores`` (module docstring); ``condition`` names them."""
    ratios = [(f"{s.stage.rate:g}/s {metric}", ratio) for s in scores
              if saturated_included or not s.stage.saturated
              for metric in METRICS if not s.excluded(metric)
              and (ratio := s.ratio(metric)) is not None]
    if not ratios:
        return ServingStats(condition, saturated_included, 0, math.nan, math.nan, "", math.nan)
    where, worst = max(ratios, key=lambda item: _factor(item[1]))
    values = [ratio for _, ratio in ratios]
    return ServingStats(condition, saturated_included, len(values), statistics.median(values),
                        worst, where, statistics.fmean(abs(v - 1.0) for v in values))


@dataclass(frozen=True)
class ServingResult:
    """Every stage's score and the statistics per condition and over all."""

    files: tuple[ServingFile, ...]
    scores: tuple[StageScore, ...]
    stats: tuple[ServingStats, ...]
    scale: float
    replays: dict[str, ConditionReplay]
    """Per condition id: its simulation(s), their cost and the settings they ran with."""
    carry_caches: bool = True

    def conditions(self) -> list[tuple[ServingFile, Condition]]:
        """Every condition, in file order."""
        return [(f, c) for f in self.files for c in f.conditions]

    def scores_of(self, condition_id: str) -> list[StageScore]:
        """The stages of one condition."""
        return [s for s in self.scores if s.condition.id == condition_id]

    def _run_facts(self, condition_id: str) -> dict[str, Any]:
        replay = self.replays.get(condition_id)
        if replay is None:
            return {}
        settings = replay.settings
        weights = settings.get("router_weights")
        return {
            "wall_s": replay.wall, "cpu_s": replay.cpu,
            "router": settings.get("router"),
            "router_weights": RouterWeights(**weights).text() if isinstance(weights, dict)
            else None,
            "semantics": [{"topic": topic, "rule": rule} for topic, rule in replay.semantics],
        }

    def as_dict(self) -> dict[str, Any]:
        """The documented JSON form (SI units; see docs/validation.md)."""
        stages = []
        for s in self.scores:
            item: dict[str, Any] = {
                "source": s.file.name, "url": s.file.source.url, "condition": s.condition.id,
                "label": s.condition.label, "rating": s.condition.rating,
                "rate_rps": s.stage.rate, "where": s.stage.where,
                "measured_saturated": s.stage.saturated,
                "simulated_saturated": s.simulated.saturated,
                "requests": s.simulated.requests, "duration_s": s.simulated.duration,
                "hbm_hit": s.simulated.hbm_hit, "host_hit": s.simulated.host_hit,
                "preemptions": s.simulated.preemptions,
                "replica_share_max": s.simulated.replica_share_max, "metrics": {},
            }
            for metric in METRICS:
                measured = s.measured(metric)
                value = s.simulated.value(metric)
                item["metrics"][metric] = {
                    "measured": measured, "simulated": value if math.isfinite(value) else None,
                    "ratio": s.ratio(metric), "excluded": s.excluded(metric),
                }
            stages.append(item)
        return {
            "scale": self.scale,
            "carry_caches": self.carry_caches,
            "stages": stages,
            "statistics": [
                {"condition": st.condition, "saturated_included": st.saturated_included,
                 "ratios": st.ratios, "median_ratio": st.median_ratio,
                 "worst_ratio": st.worst_ratio, "worst_where": st.worst_where,
                 "mape": st.mape} for st in self.stats
            ],
            "conditions": [
                {"source": f.name, "url": f.source.url, "condition": c.id, "label": c.label,
                 "assumptions": list(c.assumptions), **self._run_facts(c.id)}
                for f, c in self.conditions()
            ],
            "left_out": [
                {"source": f.name, "what": item.what, "where": item.where, "value": item.value,
                 "reason": item.reason} for f in self.files for item in f.left_out
            ],
        }


def validate_serving(folders: Iterable[str | Path] | None = None,
                     registry: Registry | None = None, *, scale: float = 1.0,
                     carry_caches: bool = True,
                     progress: Progress | None = None) -> ServingResult:
    """Load the serving cases (default: the built-in ones), replay every condition (stage
    durations times ``scale``; ``carry_caches=False``: each stage alone from empty caches) and
    score its stages (module docstring)."""
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
            math.isfinite(scale) and scale > 0):
        raise KvroofError(f"scale: expected a positive number, got {scale!r}")
    reg = registry or default_registry()
    files = tuple(load_serving_cases(folders))
    check_serving_names(files, reg)
    scores = []
    replays: dict[str, ConditionReplay] = {}
    for loaded in files:
        for condition in loaded.conditions:
            if progress is not None:
                progress(f"{condition.id}: {len(condition.stages)} stages")
            replayed = replay_condition(loaded.replay, condition, scale=scale, registry=reg,
                                        carry_caches=carry_caches)
            replays[condition.id] = replayed
            scores += [StageScore(loaded, condition, index, stage, simulated)
                       for index, (stage, simulated) in enumerate(
                           zip(condition.stages, replayed.stages, strict=True))]
    stats = [serving_stats([s for s in scores if s.condition.id == c.id], c.id, included)
             for f in files for c in f.conditions for included in (False, True)]
    stats += [serving_stats(scores, "all", included) for included in (False, True)]
    return ServingResult(files, tuple(scores), tuple(stats), float(scale), replays,
                         carry_caches)
