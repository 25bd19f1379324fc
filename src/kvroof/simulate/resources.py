"""What a replica's hardware gives the simulated engine, all from the cost model.

- KV space in HBM, per TP rank: ``HBM x memory_utilization - weights per rank - activation
  reserve`` (:mod:`kvroof.cost.memory_fit`, :mod:`kvroof.cost.weights`), in tokens of the
  bytes one rank holds per position (the deployment's ``terms.hold``, the quantity behind
  :func:`kvroof.cost.transfer.kv_bytes_per_rank`). A deployment whose weights do not fit is
  refused with :func:`kvroof.cost.memory_fit.check_fit`'s one-line error. A model with one
  full-attention and one sliding-window kind counts its KV space as vLLM's hybrid allocator does
  (:mod:`kvroof.simulate.kv_groups`: ``hbm_tokens`` is then in units of one token of one KV cache
  group, ``kv_bytes_per_token`` a unit's bytes); other window and chunk mixes are counted for every
  token (as vLLM before its hybrid allocator), which overstates their footprint; their compute is
  exact. A linear-attention layer's fixed state takes its bytes once per request.
- Host DRAM for cached KV, per replica: ``dram_cache`` bytes, or the replica's share (its GPUs
  over the system's) of the system's host memory (``capacity_per_socket x sockets``). Each
  token takes the bytes every loading rank stores (``terms.load`` per position, the quantity
  behind :func:`kvroof.cost.transfer.load_bytes_per_rank`, x the ranks that load).
- A further tier (a system tier by name: NVMe, CXL, a remote store): its capacity shared the same
  way, loads timed by the cost model with all of the tokens on that tier
  (``tier_fractions = {name: 1}``).
- Time: the deployment's compute model for iterations (``compute_model``: the roofline through
  :class:`kvroof.cost.iteration.IterationModel`, or the kernel tables op by op through
  :class:`kvroof.simulate.kernel_steps.KernelSteps`; ``moe_routing`` reaches the MoE table
  there), :class:`~kvroof.cost.iteration.IterationModel` for loads and saves.
- Engine costs (``engine_overhead``, on by default): with an engine profile, its
  ``iteration_overhead`` on every iteration (``step_overhead``) and its ``serving_overhead`` plus
  ``serving_overhead_per_token`` per prompt token on every request's first token and finish, as
  the client sees them (``frontend``); none without a profile or with ``engine_overhead`` off.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kvroof.cost.deployment import Deployment
from kvroof.cost.iteration import IterationModel
from kvroof.cost.memory_fit import check_fit
from kvroof.errors import KvroofError
from kvroof.simulate.kernel_steps import KernelSteps
from kvroof.simulate.kv_groups import KvGroups, kv_groups
from kvroof.simulate.settings import SimSettings, vllm_batch_defaults
from kvroof.specs.registry import Registry, default_registry
from kvroof.units import Kind, format_quantity

__all__ = ["ReplicaResources", "check_simulated_settings", "engine_costs", "replica_resources"]


@dataclass(frozen=True)
class ReplicaResources:
    """One replica's limits and cost functions (SI; tokens are whole tokens)."""

    dep: Deployment
    model: IterationModel
    tier_model: IterationModel | None
    hbm_tokens: int
    kv_bytes_per_token: float
    state_tokens: int
    """KV space a request's fixed state (linear-attention layers) takes, in tokens."""
    dram_tokens: float
    tier_tokens: float
    host_bytes_per_token: float
    budget: int
    max_seqs: int
    layers: int
    overlap_efficiency: float
    gpus: int
    tdp: float
    idle_power: float
    max_context: int | None
    notes: tuple[str, ...]
    kernel_steps: KernelSteps | None = None
    """Kernel mode's step times (None: iterations are timed by the roofline of ``model``)."""
    step_overhead: float = 0.0
    """Engine seconds every iteration adds (the engine profile's ``iteration_overhead``)."""
    frontend: tuple[float, float] = (0.0, 0.0)
    """(per request, per prompt token) seconds the client sees beyond the engine."""
    kv_groups: KvGroups | None = None
    """A hybrid model's KV cache groups (None: every layer for every token)."""

    @property
    def request_space(self) -> int:
        """The most tokens one request can hold: the KV space less its fixed state and, in a
        hybrid pool, its window layers' most (a token-budget chunk on ``need`` positions, and
        the decode token), in full-attention tokens."""
        space = self.hbm_tokens - self.state_tokens
        groups = self.kv_groups
        if groups is None:
            return space
        space -= (self.budget + groups.need + 1) * groups.window_units
        return space // groups.full

    @property
    def label(self) -> str:
        return self.dep.short_label


def _host_capacity(dep: Deployment) -> float | None:
    system = dep.system
    if system is None or system.host_memory is None:
        return None
    memory = system.host_memory
    if memory.capacity_per_socket is None:
        return None
    return memory.capacity_per_socket * memory.sockets * dep.tp / system.num_accelerators


def _size(value: float) -> str:
    return format_quantity(value, Kind.CAPACITY)


def engine_costs(dep: Deployment, settings: SimSettings | None = None
                 ) -> tuple[float, tuple[float, float]]:
    """(seconds every iteration adds, (per request, per prompt token) client-side seconds) of
    ``dep``'s engine profile under ``settings`` (zeros without a profile, with
    ``engine_overhead`` off, or where the profile publishes none)."""
    engine = dep.engine
    if engine is None or (settings is not None and not settings.engine_overhead):
        return 0.0, (0.0, 0.0)
    return (float(engine.iteration_overhead or 0.0),
            (float(engine.serving_overhead or 0.0),
             float(engine.serving_overhead_per_token or 0.0)))


def check_simulated_settings(dep: Deployment, settings: SimSettings | None = None) -> None:
    """Refuse the deployment settings the simulator does not model, rather than ignore them:
    ``moe_routing`` other than balanced where the deployment is timed by the roofline (it
    applies to kernel mode's MoE table), and ``ttft_clock: client`` where the simulator adds no
    client-side cost (no engine profile, or ``engine_overhead`` off). Kernel mode
    (``compute_model`` kernels, or auto with tables) is simulated."""
    if dep.moe_routing != "balanced" and not dep.uses_kernels:
        raise KvroofError(f"moe_routing: {dep.moe_routing!r} applies to kernel mode, and "
                          f"compute_model {dep.compute_model!r} times this deployment by the "
                          "roofline (no kernel tables for it)")
    if dep.ttft_clock == "client":
        if dep.engine is None:
            raise KvroofError("ttft_clock: 'client' needs an engine profile (its serving "
                              "overheads are the client-side cost); give an engine")
        if settings is not None and not settings.engine_overhead:
            raise KvroofError("ttft_clock: 'client' asks for the engine's client-side costs, "
                              "which engine_overhead off (--no-engine-overhead) leaves out")


def replica_resources(dep: Deployment, settings: SimSettings,
                      registry: Registry | None = None) -> ReplicaResources:
    """The resources of one replica of ``dep`` under ``settings`` (refuses a deployment whose
    weights do not fit, KV space that is not positive, and settings the simulator does not
    model: :func:`check_simulated_settings`)."""
    check_simulated_settings(dep, settings)
    check_fit(dep)
    notes: list[str] = []
    hold = dep.terms.hold  # KV bytes one rank holds, by term (kvroof.cost.kv_terms)
    per_token = (hold.per_token + sum(c for _, c in hold.windows)
                 + sum(c for _, c in hold.chunks))
    groups, groups_note = kv_groups(dep)
    if groups is not None:  # the pool counts units: a token of one KV cache group
        per_token = groups.unit_bytes
    state_tokens = math.ceil(hold.fixed / per_token) if hold.fixed else 0
    space = (dep.accelerator.hbm_capacity * dep.memory_utilization - dep.weight_bytes.total
             - settings.activation_reserve)
    if space < per_token:
        raise KvroofError(
            f"{dep.short_label}: no KV space left: {_size(dep.accelerator.hbm_capacity)} x "
            f"{dep.memory_utilization:g} - {_size(dep.weight_bytes.total)} of weights - "
            f"{_size(settings.activation_reserve)} activation reserve per GPU")
    hbm_tokens = int(space // per_token)
    if settings.kv_tokens is not None:
        hbm_tokens = settings.kv_tokens
        notes.append(f"KV space set to {hbm_tokens:,} tokens per GPU (the HBM leaves "
                     f"{int(space // per_token):,})")
    if groups_note:
        notes.append(groups_note)
    loading_ranks = 1 if dep.loads_on_first_rank_only else dep.tp
    load = dep.terms.load
    host_per_token = (load.per_token + sum(c for _, c in load.windows)
                      + sum(c for _, c in load.chunks)) * loading_ranks
    if settings.cache_policy == "recompute":
        dram_tokens = 0.0
    elif settings.dram_cache is not None:
        dram_tokens = math.floor(settings.dram_cache / host_per_token)
    else:
        capacity = _host_capacity(dep)
        if capacity is None:
            dram_tokens = math.inf
            notes.append("host DRAM cache unlimited (no system host memory known; set "
                         "dram_cache, --dram-cache on the command line)")
        else:
            dram_tokens = math.floor(capacity / host_per_token)
    tier_model = None
    tier_tokens = 0.0
    if settings.tier is not None and settings.cache_policy != "recompute":
        if dep.system is None:
            raise KvroofError("tier: a tier needs a system")
        tiers = {tier.name: tier for tier in dep.system.tiers}
        if settings.tier not in tiers:
            raise KvroofError(f"tier: {dep.system.name} has no tier {settings.tier!r} (it has "
                              f"{', '.join(sorted(tiers)) or 'none'})")
        tier = tiers[settings.tier]
        reg = registry or default_registry()
        tiered = dataclasses.replace(dep, tier_fractions={tier.name: 1.0},
                                     tier_links={tier.name: reg.link(tier.link)})
        tier_model = IterationModel(tiered)
        if settings.tier_cache is not None:
            tier_tokens = math.floor(settings.tier_cache / host_per_token)
        elif tier.capacity is not None:
            tier_tokens = math.floor(tier.capacity * dep.tp / dep.system.num_accelerators
                                     / host_per_token)
        else:
            tier_tokens = math.inf
            notes.append(f"tier {tier.name} unlimited (no capacity in its spec)")
    budget, seqs = vllm_batch_defaults(dep.accelerator.hbm_capacity, dep.accelerator.name)
    budget = settings.max_num_batched_tokens or budget
    seqs = settings.max_num_seqs or seqs
    if seqs > budget:  # name the setting that was given (the other is vLLM's default)
        given_budget = settings.max_num_batched_tokens is not None
        given_seqs = settings.max_num_seqs is not None
        first, second = (("max_num_batched_tokens", "max_num_seqs") if given_budget
                         and not given_seqs else ("max_num_seqs", "max_num_batched_tokens"))
        default = " (vLLM's default)" if given_budget != given_seqs else ""
        values = {"max_num_seqs": seqs, "max_num_batched_tokens": budget}
        relation = "exceeds" if first == "max_num_seqs" else "is below"
        raise KvroofError(f"{first}: {values[first]} {relation} the {second} {values[second]}"
                          f"{default} (every running sequence needs a token of the budget each "
                          "iteration)")
    idle = dep.accelerator.idle_power
    if idle is None:
        idle = 0.0
        notes.append(f"{dep.accelerator.name}: no idle power in its spec; 0 W taken")
    eta = dep.resolved_overlap_efficiency
    step_overhead, frontend = engine_costs(dep, settings)
    if dep.uses_kernels:
        notes.append(f"iterations timed op by op from the kernel tables (compute_model "
                     f"{dep.compute_model}, MoE routing {dep.moe_routing})")
    if dep.engine is not None:
        if step_overhead or frontend[0] or frontend[1]:
            notes.append(
                f"engine {dep.engine.name}: {format_quantity(step_overhead, Kind.TIME)} per "
                f"iteration, {format_quantity(frontend[0], Kind.TIME)} + "
                f"{format_quantity(frontend[1], Kind.TIME)} a prompt token per request: "
                "client-side TTFT and latency (--no-engine-overhead leaves them out)")
        elif settings.engine_overhead:
            notes.append(f"engine {dep.engine.name}: no step or request cost published; GPU "
                         "time only")
    return ReplicaResources(
        dep=dep, model=IterationModel(dep), tier_model=tier_model, hbm_tokens=hbm_tokens,
        kv_bytes_per_token=per_token, state_tokens=state_tokens, dram_tokens=dram_tokens,
        tier_tokens=tier_tokens,
        host_bytes_per_token=host_per_token, budget=budget, max_seqs=seqs,
        layers=dep.model.num_layers, overlap_efficiency=float(eta), gpus=dep.tp,
        tdp=dep.accelerator.tdp, idle_power=idle, max_context=dep.model.max_context,
        notes=tuple(notes), kernel_steps=KernelSteps(dep) if dep.uses_kernels else None,
        step_overhead=step_overhead, frontend=frontend, kv_groups=groups,
    )
