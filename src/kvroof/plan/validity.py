"""What a plan can claim: the compute model and engine semantics its answers come from, the
published validation cases closest to the candidate and their errors, and the answers that fall
outside what was validated.

The closest model-level case is the validation case (prefill compute time, or TTFT with a
loaded prefix; :func:`kvroof.validation.run.validate`, with the engine profiles and the
deployment's compute model and TTFT clock) that shares most with the candidate: its accelerator
(2 points), its model (2), its engine profile (1), a loaded prefix (0.5). Its
predicted-over-measured ratio and its quantity's median ratio and mean absolute error are
quoted.

The closest serving condition, per arm, is the published serving run (``kvroof validate
--quantity serving``, :mod:`kvroof.validation.serving`; chosen from the case files alone) of the
arm's kind (without offloading: an HBM-only condition, cache policy ``recompute``; with
offloading: a CPU-offload condition, ``load``) that shares most with the candidate: its
accelerator (2 points), its model (2), its engine profile (1), its TP degree (0.5); ties go to
the nearer TP degree (by factor), then to file order. That condition is replayed
(:func:`kvroof.validation.serving_replay.replay_condition`) with its stages shortened to
:data:`SERVING_SCALE` of their published durations and scored as the serving validation scores
it (:class:`~kvroof.validation.serving.StageScore`,
:func:`~kvroof.validation.serving.serving_stats`): the median simulated-over-measured ratio and
the mean absolute error over its stages below saturation are quoted, with the case's source and
whether the candidate has its accelerator and model. A replay runs once per process (per
condition and scale); one that fails is said so in the quote, never raised.

Marked as outside what was validated: an accelerator or a model no model-level case measured;
the serving simulation (rates, latency percentiles, hit rates) of a candidate whose accelerator,
model and engine profile no serving condition has (it is the cost model through the simulated
engine, checked end to end only against the published conditions), and the percentile
objectives themselves (the serving runs publish means); reload thresholds beyond the largest
validated cached prefix; host-memory sizes beyond the system's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvroof.cost.deployment import Deployment
from kvroof.plan.result import ServingQuote, Validity
from kvroof.simulate.settings import SimSettings
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.run import ValidationResult, validate
from kvroof.validation.serving import ServingStats, StageScore, serving_stats
from kvroof.validation.serving_cases import Condition, ServingFile, load_serving_cases
from kvroof.validation.serving_replay import replay_condition

__all__ = ["SERVING_SCALE", "closest_serving_condition", "model_validation", "serving_cases",
           "serving_error", "serving_quotes", "validity_of"]

SERVING_SCALE = 0.25
"""The serving conditions' stage durations in the plan's replays, as a share of the published
ones (60 s stages become 15 s: about 1.5 s of simulation per condition on one core)."""

ARMS = {"without offloading": "recompute", "with offloading": "load"}
"""The plan's arms and the cache policy of the serving conditions that stand for them."""

_MODEL_QUANTITIES = ("prefill_compute_time", "ttft_with_prefix")
_NAMES = {"prefill_compute_time": "prefill compute time",
          "ttft_with_prefix": "TTFT with a loaded prefix"}


@lru_cache(maxsize=4)
def _validated(compute_model: str, ttft_clock: str) -> ValidationResult:
    return validate(compute_model=compute_model, ttft_clock=ttft_clock)


def model_validation(dep: Deployment) -> ValidationResult:
    """The built-in validation with ``dep``'s compute model and TTFT clock (computed once)."""
    return _validated(str(dep.compute_model), str(dep.ttft_clock))


@lru_cache(maxsize=8)
def _cases(folders: tuple[str, ...] | None) -> tuple[ServingFile, ...]:
    return tuple(load_serving_cases(folders))


def serving_cases(folders: Sequence[str | Path] | None = None) -> tuple[ServingFile, ...]:
    """The serving case files in ``folders`` (default: the built-in ones), read once per
    process."""
    return _cases(None if folders is None else tuple(str(f) for f in folders))


def _named(kind: str, name: str, registry: Registry) -> str:
    """``name``'s registry name (itself when the registry does not know it)."""
    try:
        return str(getattr(registry, kind)(name).name)
    except Exception:  # an unknown name stays as written: it matches nothing
        return name


def _replay_accelerator(file: ServingFile, registry: Registry) -> str:
    replay = file.replay
    if replay.accelerator is not None:
        return _named("accelerator", replay.accelerator, registry)
    try:
        return str(registry.accelerator(registry.system(str(replay.system)).accelerator).name)
    except Exception:  # a system the registry does not know: matches no accelerator
        return str(replay.system)


def _served(file: ServingFile, registry: Registry) -> tuple[str, str, str]:
    """A case file's accelerator, model and engine profile, as the registry names them."""
    return (_replay_accelerator(file, registry), _named("model", file.replay.model, registry),
            _named("engine", file.replay.engine, registry))


def closest_serving_condition(dep: Deployment, arm: str, files: Sequence[ServingFile],
                              registry: Registry | None = None
                              ) -> tuple[ServingFile, Condition] | None:
    """The published serving condition closest to ``dep`` for ``arm`` (a key of :data:`ARMS`;
    module docstring), ``None`` when no condition has the arm's cache policy."""
    registry = registry or default_registry()
    policy = ARMS[arm]
    engine = dep.engine.name if dep.engine is not None else None
    best: tuple[tuple[float, float], ServingFile, Condition] | None = None
    for file in files:
        accelerator, model, served_engine = _served(file, registry)
        tp = file.replay.tp
        score = (2 * (accelerator == dep.accelerator.name) + 2 * (model == dep.model.name)
                 + (served_engine == engine) + 0.5 * (tp == dep.tp))
        key = (float(score), -abs(math.log(tp / dep.tp)))
        for condition in file.conditions:
            if condition.cache_policy == policy and (best is None or key > best[0]):
                best = (key, file, condition)
    return None if best is None else (best[1], best[2])


@lru_cache(maxsize=16)
def _scored(folders: tuple[str, ...] | None, condition_id: str, scale: float,
            registry: Registry) -> ServingStats | str:
    file, condition = next((f, c) for f in _cases(folders) for c in f.conditions
                           if c.id == condition_id)
    try:
        replayed = replay_condition(file.replay, condition, scale=scale, registry=registry)
    except Exception as exc:  # the plan goes on; the quote says why it has no error
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    scores = [StageScore(file, condition, index, stage, simulated)
              for index, (stage, simulated) in enumerate(
                  zip(condition.stages, replayed.stages, strict=True))]
    return serving_stats(scores, condition.id, False)


def serving_error(condition_id: str, *, scale: float = SERVING_SCALE,
                  folders: Sequence[str | Path] | None = None,
                  registry: Registry | None = None) -> ServingStats | str:
    """The serving validation's statistics below saturation for one condition, replayed with
    its stages at ``scale`` of their durations (once per process per condition and scale), or
    why the replay failed."""
    return _scored(None if folders is None else tuple(str(f) for f in folders), condition_id,
                   float(scale), registry or default_registry())


def _match(dep: Deployment, served: tuple[str, str, str], tp: int) -> tuple[bool, str]:
    accelerator, model, engine = served
    own_engine = dep.engine.name if dep.engine is not None else "none"
    same: list[str] = []
    other: list[str] = []
    for what, mine, theirs in (("accelerator", dep.accelerator.name, accelerator),
                               ("model", dep.model.name, model),
                               ("engine profile", own_engine, engine),
                               ("TP degree", str(dep.tp), str(tp))):
        (same if mine == theirs else other).append(
            what if mine == theirs else f"{what} {mine}, not {theirs}")
    matches = accelerator == dep.accelerator.name and model == dep.model.name
    text = ("the candidate matches it (same " + ", ".join(same) if matches
            else "the candidate does not match it (" + "; ".join(other[:2]))
    if matches and other:
        text += "; " + "; ".join(other)
    elif not matches and len(other) > 2:
        text += "; " + "; ".join(other[2:])
    return matches, text + ")"


def serving_quotes(dep: Deployment, *, scale: float = SERVING_SCALE,
                   folders: Sequence[str | Path] | None = None,
                   registry: Registry | None = None) -> tuple[ServingQuote, ...]:
    """Per arm of :data:`ARMS`, the closest published serving condition and its error
    (module docstring)."""
    registry = registry or default_registry()
    files = serving_cases(folders)
    quotes = []
    for arm in ARMS:
        closest = closest_serving_condition(dep, arm, files, registry)
        if closest is None:
            continue
        file, condition = closest
        served = _served(file, registry)
        matches, match = _match(dep, served, file.replay.tp)
        scored = serving_error(condition.id, scale=scale, folders=folders, registry=registry)
        figures: dict[str, Any] = {"error": scored} if isinstance(scored, str) else {
            "median_ratio": None if math.isnan(scored.median_ratio) else scored.median_ratio,
            "mape": None if math.isnan(scored.mape) else scored.mape, "ratios": scored.ratios}
        quotes.append(ServingQuote(
            arm, condition.id, condition.label, file.source.url, served[1],
            f"{file.replay.replicas}x {served[0]}", served[2], file.replay.tp, float(scale),
            matches, match, **figures))
    return tuple(quotes)


def _serving_outside(dep: Deployment, folders: Sequence[str | Path] | None,
                     registry: Registry) -> list[str]:
    files = serving_cases(folders)
    served = {_served(f, registry) for f in files}
    engine = dep.engine.name if dep.engine is not None else "none"
    mine = (dep.accelerator.name, dep.model.name, engine)
    runs = "; ".join(f"{f.replay.model} on {f.replay.replicas}x {_served(f, registry)[0]} TP"
                     f"{f.replay.tp}, {f.replay.engine}" for f in files) or "none"
    outside = []
    if mine not in served:
        outside.append(f"the serving simulation (rates, TTFT and TPOT, hit rates) of "
                       f"{dep.model.name} on {dep.accelerator.name} with engine profile "
                       f"{engine}: the serving simulation is checked end to end only against "
                       f"the published serving runs ({runs}); for this candidate it is the cost "
                       "model through the simulated engine, unchecked end to end")
    outside.append("the latency percentiles the objectives are read at: the published serving "
                   "runs give means (TTFT, TPOT, end-to-end) and throughput, so only those are "
                   "checked")
    return outside


def _case_accelerator(case: Any, registry: Registry) -> str | None:
    if case.accelerator is not None:
        return str(registry.accelerator(case.accelerator).name)
    if case.system is not None:
        return str(registry.accelerator(registry.system(case.system).accelerator).name)
    return None


def validity_of(dep: Deployment, settings: SimSettings, *, threshold_values: Sequence[int],
                hypothetical_sizes: Sequence[str] = (),
                registry: Registry | None = None, serving_scale: float = SERVING_SCALE,
                serving_folders: Sequence[str | Path] | None = None) -> Validity:
    """The :class:`Validity` of a candidate's plan (module docstring); ``serving_scale`` and
    ``serving_folders``: the serving conditions' stage scale and case folders (default: the
    built-in ones)."""
    registry = registry or default_registry()
    result = model_validation(dep)
    engine = dep.engine.name if dep.engine is not None else None
    accelerator = dep.accelerator.name
    model = dep.model.name
    best: tuple[float, Any] | None = None
    accelerators: set[str] = set()
    models: set[str] = set()
    largest_k = 0.0
    for case_result in result.results:
        case = case_result.case
        if case.quantity not in _MODEL_QUANTITIES or not case_result.in_statistics:
            continue
        try:
            acc = _case_accelerator(case, registry)
        except Exception:  # a case the registry cannot place: not the closest
            continue
        if acc:
            accelerators.add(acc)
        if case.model:
            models.add(str(registry.model(case.model).name))
        if case.quantity == "ttft_with_prefix" and case.cached_tokens:
            largest_k = max(largest_k, float(case.cached_tokens))
        score = (2 * (acc == accelerator)
                 + 2 * (case.model is not None and registry.model(case.model).name == model)
                 + (engine is not None and case.engine == engine)
                 + 0.5 * (case.quantity == "ttft_with_prefix"))
        if best is None or score > best[0]:
            best = (score, case_result)
    closest = closest_error = "none"
    if best is not None:
        case_result = best[1]
        case = case_result.case
        ratio = case_result.ratio("after")
        stats = next(s for s in result.stats
                     if s.quantity == case.quantity and s.mode == "after")
        where = case.accelerator or case.system
        closest = (f"{case.id} ({_NAMES[case.quantity]}, {case.model} on {where}, "
                   f"{case.engine}, T = {case.new_tokens:,.0f}, K = "
                   f"{case.cached_tokens or 0:,.0f})")
        closest_error = (f"predicted/measured {ratio:.2f}; {_NAMES[case.quantity]} over "
                         f"{stats.cases} cases: median ratio {stats.median_ratio:.2f}, mean "
                         f"absolute error {stats.mape:.0%}") if ratio is not None else \
            "not predicted"
    outside = []
    if accelerator not in accelerators:
        outside.append(f"no validation case measured {accelerator}: its compute and link "
                       "figures are the specs', unchecked")
    if model not in models:
        outside.append(f"no validation case measured {model}")
    try:
        serving = serving_quotes(dep, scale=serving_scale, folders=serving_folders,
                                 registry=registry)
        outside += _serving_outside(dep, serving_folders, registry)
    except Exception as exc:  # unreadable case files: the plan goes on, and says so
        serving = ()
        outside.append("the serving simulation (rates, TTFT and TPOT, hit rates): the serving "
                       f"validation's cases could not be read ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''}), so it is unchecked "
                       "end to end here")
    if largest_k:
        beyond = sorted({k for k in threshold_values if k > largest_k})
        if beyond:
            outside.append(f"reload thresholds above {largest_k:,.0f} cached tokens (the largest "
                           "validated prefix): " + ", ".join(f"{k:,}" for k in beyond[:4]))
    outside += [f"host memory beyond the system's own: {size}" for size in hypothetical_sizes]
    compute = {"roofline": "roofline (one whole-model roofline at the achievable figures)",
               "kernels": "kernels (measured kernel tables, op by op)",
               "auto": "auto (kernel tables where they cover the accelerator, else roofline)"}
    profile_store = dep.engine.offload_store if dep.engine is not None else "as-computed"
    store = ("each computed block stored to host DRAM as it is computed, on its own link "
             "direction (vLLM's offloading connector, SGLang's write-through)")
    if profile_store == "none":
        store += ("; the engine profile stores nothing, so the offloading arm is planned as if "
                  "it stored as computed")
    semantics = (f"kvroof's vLLM-v1-style engine (kvroof simulate): {settings.scheduler} "
                 f"scheduler, {settings.load_mode} loads, {settings.router} routing, prefix "
                 "cache in HBM (LRU) and host DRAM keyed by the trace's prefix blocks, "
                 f"{store}; without offloading: HBM prefix cache only (cache policy "
                 "recompute)")
    return Validity(
        compute_model=compute.get(str(dep.compute_model), str(dep.compute_model)),
        engine=(f"{engine}: {dep.engine.label}" if dep.engine is not None
                else "none (kvroof's defaults)"),
        semantics=semantics, closest_case=closest, closest_error=closest_error,
        outside=tuple(outside), serving=serving)
