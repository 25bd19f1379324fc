"""What a simulation is asked to do: engine limits, policies, cache sizes, power cap, SLOs.

Every name is checked here, once, with a one-line error naming the setting (the command line
maps each to its flag). Engine defaults follow vLLM v1 (``vllm/engine/arg_utils.py``,
``EngineArgs.get_batch_defaults``): on a GPU with at least 70 GiB that is not an A100, an
OpenAI-API server gets ``max_num_batched_tokens`` 8192 and ``max_num_seqs`` 1024; elsewhere 2048
and 256.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from kvroof.errors import KvroofError
from kvroof.simulate.router_weights import RouterWeights

__all__ = [
    "CACHE_POLICIES",
    "LOAD_MODES",
    "MAX_REPLICAS",
    "OFFLOAD_STORES",
    "ROUTERS",
    "SCHEDULERS",
    "ReplicaSpec",
    "SimSettings",
    "vllm_batch_defaults",
]

Scheduler = Literal["fifo", "utilization-aware"]
CachePolicy = Literal["load", "recompute", "split"]
LoadMode = Literal["sync", "async", "layerwise"]
OffloadStore = Literal["as-computed", "none"]
Router = Literal["round-robin", "least-loaded", "prefix-affinity", "kappa", "scoring"]
SCHEDULERS: tuple[Scheduler, ...] = ("fifo", "utilization-aware")
CACHE_POLICIES: tuple[CachePolicy, ...] = ("load", "recompute", "split")
LOAD_MODES: tuple[LoadMode, ...] = ("sync", "async", "layerwise")
OFFLOAD_STORES: tuple[OffloadStore, ...] = ("as-computed", "none")
ROUTERS: tuple[Router, ...] = ("round-robin", "least-loaded", "prefix-affinity", "kappa",
                               "scoring")

MAX_REPLICAS = 4096
"""The most replicas one simulation takes (32,768 GPUs at TP 8; each replica costs memory and
time however idle, so more is almost certainly a typo)."""

GIB = 2**30
_LARGE_GPU_BYTES = 70 * GIB
"""vLLM's threshold for its larger batch defaults (``device_memory >= 70 * GiB_bytes``)."""


def vllm_batch_defaults(hbm_capacity: float, accelerator_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM v1 picks for an OpenAI-API server on this
    GPU: 8192 and 1024 from 70 GiB up (A100 excepted, vLLM PR 17885), else 2048 and 256."""
    if hbm_capacity >= _LARGE_GPU_BYTES and "a100" not in accelerator_name.lower():
        return 8192, 1024
    return 2048, 256


def _choice(name: str, value: str, options: tuple[str, ...]) -> None:
    if value not in options:
        raise KvroofError(f"{name}: expected one of {', '.join(options)}, got {value!r}")


def _positive_int(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise KvroofError(f"{name}: expected a positive integer, got {value!r}")


def _nonnegative(name: str, value: float | None, *, positive: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        kind = "a positive" if positive else "a non-negative"
        raise KvroofError(f"{name}: expected {kind} number, got {value!r}")


@dataclass(frozen=True)
class ReplicaSpec:
    """Replicas of one kind: a system (or an accelerator on its host link) at a TP degree."""

    system: str | None = None
    accelerator: str | None = None
    tp: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if (self.system is None) == (self.accelerator is None):
            raise KvroofError("replica: give a system or an accelerator")
        _positive_int("tp", self.tp)
        _positive_int("replicas", self.count)
        if self.count > MAX_REPLICAS:
            raise KvroofError(f"replicas: at most {MAX_REPLICAS:,}, got {self.count:,}")

    @classmethod
    def parse(cls, text: str) -> ReplicaSpec:
        """``SYSTEM:TP`` (or ``SYSTEM``, TP 1)."""
        name, sep, tp_text = text.partition(":")
        try:
            tp = int(tp_text) if sep else 1
        except ValueError:
            tp = 0
        if not name or tp < 1:
            raise KvroofError(f"--replica: expected SYSTEM:TP, got {text!r}")
        return cls(system=name, tp=tp)


@dataclass(frozen=True)
class SimSettings:
    """Engine limits and policies of a simulation (SI units; ``None``: the default).

    - ``max_num_batched_tokens`` / ``max_num_seqs``: vLLM's token budget and sequence cap
      (defaults: :func:`vllm_batch_defaults` per replica).
    - ``scheduler``: ``fifo`` (vLLM) or ``utilization-aware`` (see docs/simulate.md).
    - ``cache_policy``: ``load`` every cached prefix from the host tiers, ``recompute`` (no host
      tier: only HBM hits), or ``split`` (load part, recompute the rest:
      :func:`kvroof.cost.split.balanced_split`).
    - ``load_mode``: ``sync`` (the iteration that needs a load waits for it), ``async`` (the
      request waits for its KV outside the batch), ``layerwise`` (its load overlaps the
      iteration layer by layer).
    - ``router``: how requests are spread over replicas (:mod:`kvroof.simulate.router`);
      ``router_weights``: the ``scoring`` router's weights
      (:class:`kvroof.simulate.router_weights.RouterWeights`, or its ``KEY=W,...`` text;
      llm-d's defaults).
    - ``prefix_caching``: keep finished prompts' blocks in HBM (vLLM's automatic prefix caching,
      on by default in v1).
    - ``dram_cache``: bytes of host DRAM for KV per replica (default: the replica's share of the
      system's host memory); ``offload_store``: what goes to host DRAM, ``as-computed`` (every
      full prompt block, device-to-host after the iteration that computed it) or ``none`` (only a
      trace's preloaded prefixes); default: the engine profile's ``offload_store``
      (``as-computed`` without a profile); ``tier`` and ``tier_cache``: a system tier (its spec
      name) below DRAM and its bytes per replica (default: its capacity shared like DRAM).
    - ``activation_reserve``: bytes per GPU kept out of the KV space for activations beyond the
      ``1 - memory_utilization`` margin (default 0: the margin holds them, as the cost model's
      memory check assumes); ``kv_tokens`` replaces the KV space by this many tokens per GPU
      (what-ifs, toy examples).
    - ``aging_limit``: the most times the utilization-aware scheduler lets later requests pass a
      waiting one; ``admission_backlog``: seconds of queued host-link work above which it holds
      back requests whose load outlasts their prefill (default: one second).
    - ``power_cap``: watts per GPU; ``slo_ttft`` / ``slo_tpot``: seconds, for goodput.
    - ``fast_forward``: step runs of identical decode iterations in closed form (off only to
      check it).
    - ``engine_overhead``: with an engine profile, add its ``iteration_overhead`` to every
      iteration and its serving overheads (per request, per prompt token) to every request's
      TTFT and end-to-end latency, as vLLM's client sees them (on by default; off: GPU time
      alone). See docs/simulate.md, "Step timing".
    """

    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    scheduler: Scheduler = "fifo"
    cache_policy: CachePolicy = "load"
    load_mode: LoadMode = "async"
    router: Router = "round-robin"
    router_weights: RouterWeights = field(default_factory=RouterWeights)
    prefix_caching: bool = True
    dram_cache: float | None = None
    offload_store: OffloadStore | None = None
    tier: str | None = None
    tier_cache: float | None = None
    activation_reserve: float = 0.0
    kv_tokens: int | None = None
    aging_limit: int = 16
    admission_backlog: float = 1.0
    power_cap: float | None = None
    slo_ttft: float | None = None
    slo_tpot: float | None = None
    fast_forward: bool = True
    engine_overhead: bool = True
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        _positive_int("max_num_seqs", self.max_num_seqs)
        _positive_int("kv_tokens", self.kv_tokens)
        _choice("scheduler", self.scheduler, SCHEDULERS)
        _choice("cache_policy", self.cache_policy, CACHE_POLICIES)
        _choice("load_mode", self.load_mode, LOAD_MODES)
        _choice("router", self.router, ROUTERS)
        if self.offload_store is not None:
            _choice("offload_store", self.offload_store, OFFLOAD_STORES)
        if isinstance(self.router_weights, str):  # KEY=W,... as --router-weights and sweeps give
            object.__setattr__(self, "router_weights", RouterWeights.parse(self.router_weights))
        if not isinstance(self.router_weights, RouterWeights):
            raise KvroofError(f"router_weights: expected RouterWeights or KEY=W,..., got "
                              f"{self.router_weights!r}")
        if self.router_weights != RouterWeights() and self.router != "scoring":
            raise KvroofError("router_weights: apply to the scoring router (router "
                              f"{self.router!r} has no weights)")
        _nonnegative("dram_cache", self.dram_cache)
        _nonnegative("tier_cache", self.tier_cache)
        _nonnegative("activation_reserve", self.activation_reserve)
        _nonnegative("admission_backlog", self.admission_backlog)
        _nonnegative("power_cap", self.power_cap, positive=True)
        _nonnegative("slo_ttft", self.slo_ttft, positive=True)
        _nonnegative("slo_tpot", self.slo_tpot, positive=True)
        if isinstance(self.aging_limit, bool) or not isinstance(self.aging_limit, int) \
                or self.aging_limit < 0:
            raise KvroofError(f"aging_limit: expected a non-negative integer, got "
                              f"{self.aging_limit!r}")
        if not isinstance(self.engine_overhead, bool):
            raise KvroofError(f"engine_overhead: expected true or false, got "
                              f"{self.engine_overhead!r}")
        if self.tier_cache is not None and self.tier is None:
            raise KvroofError("tier_cache: give the tier too")

    @property
    def name(self) -> str:
        """A short label: the settings that differ from the defaults, or ``label``."""
        if self.label:
            return self.label
        parts = [f"{self.scheduler}", f"{self.cache_policy}", f"{self.load_mode}"]
        return "/".join(parts)
