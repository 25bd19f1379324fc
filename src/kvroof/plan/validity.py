"""What a plan can claim: the compute model and engine semantics its answers come from, the
published validation case closest to the candidate and its error, and the answers that fall
outside what was validated.

The closest case is the model-level validation case (prefill compute time, or TTFT with a loaded
prefix; :func:`kvroof.validation.run.validate`, with the engine profiles and the deployment's
compute model and TTFT clock) that shares most with the candidate: its accelerator (2 points),
its model (2), its engine profile (1), a loaded prefix (0.5). Its predicted-over-measured ratio
and its quantity's median ratio and mean absolute error are quoted.

Marked as outside what was validated: an accelerator or a model no case measured; the serving
simulation's rates and latency percentiles (no published serving run is a validation case: they
follow from the cost model through the simulated engine, unchecked end to end); reload
thresholds beyond the largest validated cached prefix; host-memory sizes beyond the system's
own.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kvroof.cost.deployment import Deployment
from kvroof.plan.result import Validity
from kvroof.simulate.settings import SimSettings
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.run import ValidationResult, validate

__all__ = ["model_validation", "validity_of"]

_MODEL_QUANTITIES = ("prefill_compute_time", "ttft_with_prefix")
_NAMES = {"prefill_compute_time": "prefill compute time",
          "ttft_with_prefix": "TTFT with a loaded prefix"}


@lru_cache(maxsize=4)
def _validated(compute_model: str, ttft_clock: str) -> ValidationResult:
    return validate(compute_model=compute_model, ttft_clock=ttft_clock)


def model_validation(dep: Deployment) -> ValidationResult:
    """The built-in validation with ``dep``'s compute model and TTFT clock (computed once)."""
    return _validated(str(dep.compute_model), str(dep.ttft_clock))


def _case_accelerator(case: Any, registry: Registry) -> str | None:
    if case.accelerator is not None:
        return str(registry.accelerator(case.accelerator).name)
    if case.system is not None:
        return str(registry.accelerator(registry.system(case.system).accelerator).name)
    return None


def validity_of(dep: Deployment, settings: SimSettings, *, threshold_values: Sequence[int],
                hypothetical_sizes: Sequence[str] = (),
                registry: Registry | None = None) -> Validity:
    """The :class:`Validity` of a candidate's plan (module docstring)."""
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
    outside.append("the serving simulation (rates, TTFT and TPOT percentiles, hit rates) has no "
                   "published serving run among the validation cases: it is the cost model "
                   "through the simulated engine, unchecked end to end")
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
        outside=tuple(outside))
