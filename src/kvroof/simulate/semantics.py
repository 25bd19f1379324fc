"""The engine semantics a simulation used, in words a user can match to a deployment.

``kvroof simulate`` prints these lines (and writes them to ``summary.json`` as ``semantics``) so
that a reader can check them against their engine's settings: how requests are routed, how a
batch is formed and what preemption does, when prompt blocks become reusable, how sliding-window
and chunked layers are held, what goes to host DRAM and how it comes back, what an iteration
costs beyond the GPU, and which compute model timed it. Each line is built from the settings and
resources the simulation ran with, not from defaults, so it changes when they do. What each rule
means against vLLM v1, point by point, is in docs/simulate.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvroof.simulate.resources import ReplicaResources
from kvroof.simulate.settings import SimSettings
from kvroof.units import Kind, format_quantity

__all__ = ["engine_semantics"]

_ROUTERS = {
    "round-robin": "round-robin over the replicas that can hold the request",
    "least-loaded": "fewest outstanding requests; ties to the replica chosen least recently",
    "prefix-affinity": "SGLang-style cache-aware: the longest HBM prefix match above half the "
                       "prompt, host-tier matches only break ties, least-loaded when unbalanced "
                       "or below the threshold; ties to the replica chosen least recently",
    "kappa": "by kappa_ratio against each replica's critical ratio (the seed paper's proposal)",
    "scoring": "llm-d-style weighted scorers",
}


def _router(settings: SimSettings) -> str:
    text = _ROUTERS.get(settings.router, settings.router)
    if settings.router == "scoring":
        text += f" ({settings.router_weights.text()})"
    return f"{settings.router}: {text}"


def _scheduler(settings: SimSettings) -> str:
    if settings.scheduler == "fifo":
        walk = "FIFO: waiting requests join in arrival order until one does not fit"
    else:
        walk = (f"utilization-aware: skips what does not fit, aging limit "
                f"{settings.aging_limit}, admission backlog "
                f"{format_quantity(settings.admission_backlog, Kind.TIME)}")
    return (f"{walk}; decodes first, then running prefill chunks, then waiting requests, within "
            "the token budget and max_num_seqs")


_PREEMPTION = ("recompute: the newest running request gives back its KV (its computed full "
               "blocks stay cached) and no waiting request is admitted in a step that preempted, "
               "as vLLM v1's scheduler")


def _prefix_cache(settings: SimSettings) -> str:
    if not settings.prefix_caching:
        return "off: no prompt block is reused from HBM"
    return ("on: each full block of the trace's hash blocks joins the HBM cache in the step that "
            "computes it, loaded blocks when they land; least recently used blocks are evicted "
            "first")


def _windows(resources: Sequence[ReplicaResources]) -> str | None:
    hybrid = [res for res in resources
              if res.dep.terms.hold.windows or res.dep.terms.hold.chunks]
    if not hybrid:
        return None
    return "; ".join(sorted({note for res in hybrid for note in res.notes
                             if "window" in note or "chunk" in note})) or \
        "window and chunk layers are held as the KV space notes say"


def _host(settings: SimSettings, resources: Sequence[ReplicaResources]) -> str:
    if settings.cache_policy == "recompute":
        return "none: only HBM hits (cache_policy recompute)"
    first = resources[0].dep.engine
    store = settings.offload_store or (first.offload_store if first is not None
                                       else "as-computed")
    stored = ("every computed block stored to host DRAM as it is computed (device to host, "
              "never delaying a step)" if store == "as-computed" else
              "nothing stored to host DRAM (only a trace's preloaded prefixes are there)")
    loads = {"async": "loads run outside the batch; the request waits for its KV",
             "sync": "the iteration that needs a load waits for it",
             "layerwise": "loads overlap the iteration layer by layer"}[settings.load_mode]
    policy = {"load": "every host hit is loaded",
              "split": "part of a host hit is loaded and the rest recomputed (balanced split)",
              }.get(settings.cache_policy, settings.cache_policy)
    return f"{stored}; {policy}; {loads}"


def _step_costs(settings: SimSettings, resources: Sequence[ReplicaResources]) -> str:
    parts = []
    for res in resources:
        if res.dep.engine is None:
            parts.append("none: no engine profile (GPU time only)")
            continue
        name = res.dep.engine.name
        if not settings.engine_overhead:
            parts.append(f"{name}: left out (engine_overhead off, --no-engine-overhead; GPU "
                         "time only)")
            continue
        parts.append(f"{name}: {format_quantity(res.step_overhead, Kind.TIME)} per iteration, "
                     f"{format_quantity(res.frontend[0], Kind.TIME)} + "
                     f"{format_quantity(res.frontend[1], Kind.TIME)} a prompt token per request")
    return "; ".join(sorted(set(parts)))


def _compute(resources: Sequence[ReplicaResources]) -> str:
    parts = set()
    for res in resources:
        dep = res.dep
        if res.kernel_steps is not None:
            parts.add(f"{dep.accelerator.name}: op by op from the measured kernel tables "
                      f"(compute_model {dep.compute_model}, MoE routing {dep.moe_routing})")
        else:
            parts.add(f"{dep.accelerator.name}: whole-model roofline (compute_model "
                      f"{dep.compute_model})")
    return "; ".join(sorted(parts))


def engine_semantics(settings: SimSettings,
                     resources: Sequence[ReplicaResources]) -> list[tuple[str, str]]:
    """(topic, rule) pairs: the rules this simulation ran with (see the module docstring)."""
    rows = [("router", _router(settings)), ("batching", _scheduler(settings)),
            ("preemption", _PREEMPTION), ("prefix cache", _prefix_cache(settings))]
    windows = _windows(resources)
    if windows is not None:
        rows.append(("window layers", windows))
    rows += [("host tier", _host(settings, resources)),
             ("step costs", _step_costs(settings, resources)), ("compute", _compute(resources))]
    return rows
