"""A deployment's value: a model on hardware with the settings the cost model needs, checked,
and the per-GPU figures they resolve to (:class:`DeploymentSettings`).

:class:`kvroof.cost.deployment.Deployment` is this value with the cost model's constants added
(``terms``); the cost functions that need only the settings and figures take this type, so they
sit below it. Numeric settings (``compute``, ``compute_efficiency``, ``hbm_efficiency``,
``bandwidth``, ``link_efficiency``, ``latency``, ``iteration_tokens``) may be numpy arrays; they
broadcast with the token counts given to the cost functions.

Per-GPU quantities (everything is per GPU unless a name says otherwise):

- peak compute: ``compute`` if given, else the accelerator's dense peak for ``compute_dtype``;
- compute efficiency: ``compute_efficiency`` if given; else the system's calibrated curve
  ``max x T / (T + half)``; else the accelerator's published maximum achievable matmul
  throughput over its peak for ``compute_dtype`` (H100 SXM bf16: 794.5 / 989.4 = 0.80); else 1
  (no published figure: the output says so). With a ``compute`` override the default is 1;
- HBM efficiency: ``hbm_efficiency`` if given, else the accelerator's measured streaming
  bandwidth over its HBM peak, else 1;
- link bandwidth: ``bandwidth`` if given (both directions), else the host link's ``peak`` or
  ``sustained`` (``bandwidth_source``; a system's measured ``host_link_sustained_bandwidth``
  wins over the link's published one), divided among the loading GPUs that share one host
  uplink, or the system's ``calibrated`` per-GPU figure. The default source is ``calibrated``
  on a system with a calibration and ``peak`` otherwise. Device-to-host and both-directions
  figures follow the same rules (:attr:`DeploymentSettings.link_d2h_bandwidth`,
  :attr:`DeploymentSettings.link_duplex_bandwidth`; :mod:`kvroof.cost.host_link`);
- host DRAM share: what the system's sockets sustain, shared among the GPUs loading at once by
  NUMA node (:mod:`kvroof.cost.host_memory`; ``host_memory_locality``); no bound without a
  system. ``gpus_loading`` defaults to every GPU of the system (all load together);
- effective bandwidth: ``min(link bandwidth x link_efficiency, host DRAM share)``.

Engine-facing settings, each defaulting to what engines do (sources in docs/cost-model.md):
``allreduce`` (two all-reduces per layer for TP > 1, on), ``mla_tp_load`` (how MLA's replicated
latent reaches the TP ranks: every rank loads it, as vLLM and SGLang do), ``write_back`` (the
new tokens' KV is saved to host memory in the same step, as vLLM's connector waits for it),
``iteration_tokens`` (the tokens that share one weight read, default: the request alone),
``memory_utilization`` and ``kv_reserve_tokens`` (what must fit in HBM), ``reuse_block_tokens``
(prefix reuse in whole blocks: :func:`kvroof.cost.timing.ttft` recomputes the cached tokens after
the last whole block; default: every cached token is reused) and ``request_overhead`` (seconds
added to every request's TTFT; default 0).

How compute is timed (``compute_model``): ``roofline`` (one whole-model roofline,
``max(FLOP time, HBM time) + all-reduce``, :mod:`kvroof.cost.compute`; the seed paper's
formulas), ``kernels`` (the sum over layers and ops of each op's roofline time over its measured
efficiency, from the kernel tables of :mod:`kvroof.kernels`; an op without a table falls back
to its own roofline: :mod:`kvroof.cost.kernel_time`) or ``auto`` (the default: kernels where the
tables cover the accelerator, else roofline). A ``compute`` override, a ``compute_efficiency``
or a system calibration applies to the roofline only: ``auto`` then uses the roofline,
``kernels`` refuses them.
``moe_routing`` picks the MoE table's routing (``balanced``, or a power law) in kernel mode.
``ttft_clock`` says what a TTFT is: ``kernel`` (the GPU's work and the transfer, the default)
or ``client`` (plus the engine profile's serving overheads: the time a client measures).

An ``engine`` profile sets several of them (:mod:`kvroof.cost.deployment`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

import kvroof.cost.compute_figures as compute_figures
from kvroof.cost.checks import (
    dtype_bytes,
    efficiency,
    nonnegative,
    one_of,
    positive,
    scalar_or_array,
    token_count,
)
from kvroof.cost.compute_figures import COMPUTE_MODELS, ComputeModel
from kvroof.cost.flop_terms import MLA_MODES, MlaMode
from kvroof.cost.granularity import Granularity
from kvroof.cost.groups import tp_problem
from kvroof.cost.host_link import (
    BANDWIDTH_SOURCES,
    BandwidthSource,
    Direction,
    link_figure,
    loading_gpus,
    uplink_sharers,
)
from kvroof.cost.host_memory import LOCALITIES, Locality, dram_share_per_gpu
from kvroof.cost.kv_terms import LOCAL_KV, LocalKv
from kvroof.cost.tiers import check_tier_fractions
from kvroof.cost.weight_bytes import WeightBytes, weight_bytes_per_rank
from kvroof.errors import KvroofError, short_repr
from kvroof.specs.engine import Engine
from kvroof.specs.hardware import Accelerator, Calibration, Link, System
from kvroof.specs.model import ModelSpec

__all__ = [
    "BANDWIDTH_SOURCES",
    "COMPUTE_MODELS",
    "DEFAULT_KV_RESERVE_TOKENS",
    "DEFAULT_MEMORY_UTILIZATION",
    "MLA_TP_LOADS",
    "MOE_ROUTINGS",
    "TTFT_CLOCKS",
    "BandwidthSource",
    "ComputeModel",
    "DeploymentSettings",
    "MlaTpLoad",
    "MoeRouting",
    "SparseLoad",
    "TtftClock",
]

SparseLoad = Literal["all"] | float
MoeRouting = Literal["balanced", "power_law_1.01", "power_law_1.2"]
MOE_ROUTINGS: tuple[MoeRouting, ...] = ("balanced", "power_law_1.01", "power_law_1.2")
TtftClock = Literal["kernel", "client"]
TTFT_CLOCKS: tuple[TtftClock, ...] = ("kernel", "client")
MlaTpLoad = Literal["every-rank", "rank0-broadcast", "shard-allgather"]
MLA_TP_LOADS: tuple[MlaTpLoad, ...] = ("every-rank", "rank0-broadcast", "shard-allgather")
DEFAULT_MEMORY_UTILIZATION = 0.9
"""vLLM's default ``gpu_memory_utilization`` (vllm/engine/arg_utils.py, EngineArgs)."""
DEFAULT_KV_RESERVE_TOKENS = 8192.0
"""KV that must fit beside the weights: one 8,192-token sequence (vLLM refuses to start when its
KV space cannot hold one ``max_model_len`` sequence; 8,192 is a modest such length)."""


@dataclass(frozen=True)
class DeploymentSettings:
    """A model served on an accelerator (alone, or inside a system) with cost-model settings:
    the value part of :class:`kvroof.cost.deployment.Deployment` (build that one).

    See the module docstring for how per-GPU compute and bandwidth are resolved. ``tp`` is the
    tensor-parallel degree; ``tier_fractions`` puts a share of the cached tokens on the system's
    named tiers (the rest is in host DRAM); ``allreduce`` adds the TP all-reduces (latency plus
    bus bandwidth over the scale-up link) to compute.
    """

    model: ModelSpec
    accelerator: Accelerator
    link: Link
    system: System | None = None
    tp: int = 1
    compute_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    weight_dtype: str | None = None
    mla_mode: MlaMode = "expanded"
    compute: ArrayLike | None = None
    compute_efficiency: ArrayLike | None = None
    hbm_efficiency: ArrayLike | None = None
    bandwidth: ArrayLike | None = None
    bandwidth_source: BandwidthSource | None = None
    link_efficiency: ArrayLike = 1.0
    latency: ArrayLike | None = None
    overlap_efficiency: ArrayLike | None = None
    granularity: Granularity = field(default_factory=Granularity)
    gpus_loading: int | None = None
    host_memory_locality: Locality = "local"
    allreduce: bool = True
    mla_tp_load: MlaTpLoad = "every-rank"
    write_back: bool = True
    local_kv: LocalKv = "held"
    sparse_load: SparseLoad = "all"
    iteration_tokens: ArrayLike | None = None
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    kv_reserve_tokens: float = DEFAULT_KV_RESERVE_TOKENS
    tier_fractions: Mapping[str, float] = field(default_factory=dict)
    tier_links: Mapping[str, Link] = field(default_factory=dict)
    reuse_block_tokens: int | None = None
    request_overhead: ArrayLike = 0.0
    engine: Engine | None = None
    compute_model: ComputeModel = "auto"
    moe_routing: MoeRouting = "balanced"
    ttft_clock: TtftClock = "kernel"

    def __post_init__(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise KvroofError(f"tp: expected a positive integer, got {self.tp!r}")
        if self.system is not None and self.tp > self.system.num_accelerators:
            raise KvroofError(
                f"tp: {self.tp} exceeds the {self.system.num_accelerators} GPUs of "
                f"{self.system.name}"
            )
        self._check_tp_divides_heads()
        if self.weight_dtype is not None:
            dtype_bytes(self.weight_dtype, "weight_dtype")
        if self.hbm_efficiency is not None:
            efficiency("hbm_efficiency", self.hbm_efficiency)
        one_of("host_memory_locality", self.host_memory_locality, LOCALITIES)
        one_of("mla_tp_load", self.mla_tp_load, MLA_TP_LOADS)
        one_of("local_kv", self.local_kv, LOCAL_KV)
        one_of("compute_model", self.compute_model, COMPUTE_MODELS)
        one_of("moe_routing", self.moe_routing, MOE_ROUTINGS)
        one_of("ttft_clock", self.ttft_clock, TTFT_CLOCKS)
        self.sparse_share  # noqa: B018 -- fail early on a bad sparse_load
        if self.iteration_tokens is not None:
            token_count("iteration_tokens", self.iteration_tokens, at_least_one=True)
        if not (isinstance(self.memory_utilization, int | float)
                and 0 < self.memory_utilization <= 1):
            raise KvroofError(f"memory_utilization: must be in (0, 1], got "
                              f"{self.memory_utilization!r}")
        token_count("kv_reserve_tokens", self.kv_reserve_tokens)
        compute_figures.check_compute_dtype(self)
        compute_figures.check_compute_model(self)
        dtype_bytes(self.kv_dtype, "kv_dtype")
        one_of("mla_mode", self.mla_mode, MLA_MODES)
        if self.bandwidth_source is not None:
            one_of("bandwidth_source", self.bandwidth_source, BANDWIDTH_SOURCES)
        if self.bandwidth_source == "calibrated" and self.calibration is None:
            raise KvroofError("bandwidth_source: calibrated needs a system with a calibration "
                              "(kvroof calibrate writes one)")
        if self.compute is not None:
            positive("compute", self.compute)
        if self.bandwidth is not None:
            positive("bandwidth", self.bandwidth)
        if self.latency is not None:
            nonnegative("latency", self.latency)
        if self.compute_efficiency is not None:
            efficiency("compute_efficiency", self.compute_efficiency)
        efficiency("link_efficiency", self.link_efficiency)
        if self.overlap_efficiency is not None:
            value = nonnegative("overlap_efficiency", self.overlap_efficiency)
            if np.any(value > 1):
                raise KvroofError(f"overlap_efficiency: must be in [0, 1], got "
                                  f"{self.overlap_efficiency!r}")
        if self.gpus_loading is not None and (
            isinstance(self.gpus_loading, bool)
            or not isinstance(self.gpus_loading, int)
            or self.gpus_loading < 1
        ):
            raise KvroofError(f"gpus_loading: expected a positive integer, got "
                              f"{self.gpus_loading!r}")
        if (self.gpus_loading is not None and self.system is not None
                and self.gpus_loading > self.system.num_accelerators):
            raise KvroofError(
                f"gpus_loading: {self.gpus_loading} exceeds the {self.system.num_accelerators} "
                f"GPUs of {self.system.name}"
            )
        if (self.gpus_loading is not None and self.gpus_loading < self.tp
                and not self.loads_on_first_rank_only):
            raise KvroofError(
                f"gpus_loading: {self.gpus_loading} is fewer than the {self.tp} ranks of the "
                "TP group, which all load their share at once"
            )
        if self.reuse_block_tokens is not None and (
            isinstance(self.reuse_block_tokens, bool)
            or not isinstance(self.reuse_block_tokens, int)
            or self.reuse_block_tokens < 1
        ):
            raise KvroofError(f"reuse_block_tokens: expected a positive integer or None, got "
                              f"{short_repr(self.reuse_block_tokens)}")
        nonnegative("request_overhead", self.request_overhead)
        check_tier_fractions(self.system, self.tier_fractions, self.tier_links)
        self.link_bandwidth  # noqa: B018 -- fail early if no sustained figure is known
        self.host_dram_share  # noqa: B018 -- fail early on a NUMA setting the host cannot give

    def _check_tp_divides_heads(self) -> None:
        problem = tp_problem(self.model, self.tp)
        if problem:
            raise KvroofError(f"tp: {problem}")

    # -- calibration ----------------------------------------------------------------------------
    @property
    def calibration(self) -> Calibration | None:
        """The system's fitted parameters, if it has any."""
        return None if self.system is None else self.system.calibration

    @property
    def resolved_bandwidth_source(self) -> BandwidthSource:
        """``bandwidth_source``, or its default: calibrated on a calibrated system, else peak."""
        if self.bandwidth_source is not None:
            return self.bandwidth_source
        return "calibrated" if self.calibration is not None else "peak"

    @property
    def resolved_overlap_efficiency(self) -> Any:
        """Share of the shorter of load and compute that overlap hides (default 1, or the
        system's calibrated value)."""
        if self.overlap_efficiency is not None:
            return scalar_or_array(np.asarray(self.overlap_efficiency, dtype=np.float64))
        calibration = self.calibration
        if calibration is not None and calibration.overlap_efficiency is not None:
            return calibration.overlap_efficiency
        return 1.0

    # -- compute (resolved by kvroof.cost.compute_figures) -------------------------------------
    @property
    def uses_kernels(self) -> bool:
        """Whether compute is timed op by op from the kernel tables: ``compute_model`` kernels,
        or auto on an accelerator with tables (:mod:`kvroof.cost.kernel_time`)."""
        return compute_figures.uses_kernels(self)

    @property
    def default_compute_efficiency(self) -> float:
        """Efficiency without a setting or calibration: the accelerator's published maximum
        achievable matmul throughput over its peak for ``compute_dtype`` (1 with a ``compute``
        override, or when nothing is published)."""
        return compute_figures.default_compute_efficiency(self)

    @property
    def compute_efficiency_source(self) -> str:
        """Where the compute efficiency comes from, in words (shown in every output)."""
        return compute_figures.compute_efficiency_source(self)

    def compute_efficiency_at(self, new_tokens: ArrayLike) -> Any:
        """Compute efficiency for a prefill of ``new_tokens``: the ``compute_efficiency``
        setting, else the calibrated ``max x T / (T + half)``, else the default
        (:attr:`default_compute_efficiency`)."""
        return compute_figures.compute_efficiency_at(self, new_tokens)

    @property
    def peak_compute(self) -> Any:
        """Peak FLOP/s of one GPU for ``compute_dtype`` (or the ``compute`` override)."""
        return compute_figures.peak_compute(self)

    @property
    def effective_compute(self) -> Any:
        """FLOP/s one GPU sustains on large prefills: peak x compute efficiency (for a
        calibrated curve, its maximum; :meth:`compute_efficiency_at` gives it at a given T)."""
        return compute_figures.effective_compute(self)

    @property
    def paper_compute(self) -> Any:
        """Per-GPU compute as the paper's formula takes it: the peak, times a compute efficiency
        only where one is set or calibrated (never the achievable-matmul default)."""
        return compute_figures.paper_compute(self)

    # -- HBM and weights ------------------------------------------------------------------------
    @property
    def resolved_hbm_efficiency(self) -> Any:
        """Share of the HBM peak a streaming read reaches: the setting, else the calibrated
        value, else the accelerator's measured figure over its peak, else 1."""
        if self.hbm_efficiency is not None:
            return scalar_or_array(np.asarray(self.hbm_efficiency, dtype=np.float64))
        calibration = self.calibration
        if calibration is not None and calibration.hbm_efficiency is not None:
            return calibration.hbm_efficiency
        measured = self.accelerator.achievable_hbm_bandwidth
        return 1.0 if measured is None else measured / self.accelerator.hbm_bandwidth

    @property
    def effective_hbm_bandwidth(self) -> Any:
        """HBM bytes/s one GPU streams: peak x HBM efficiency."""
        return scalar_or_array(self.accelerator.hbm_bandwidth
                               * np.asarray(self.resolved_hbm_efficiency, dtype=np.float64))

    @cached_property
    def weight_bytes(self) -> WeightBytes:
        """Weight bytes one TP rank stores, by part (:mod:`kvroof.cost.weights`)."""
        return weight_bytes_per_rank(self.model, self.tp, self.weight_dtype)

    @property
    def sparse_share(self) -> float:
        """Share of a sparse (DSA) layer's cached latents a load brings back: 1 for
        ``sparse_load`` ``all`` (today's engines load every block), else the selected share
        (a what-if: only the blocks the indexer selects; its keys are loaded whole)."""
        value = self.sparse_load
        if value == "all":
            return 1.0
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.0 < float(value) <= 1.0:
            raise KvroofError(f"sparse_load: expected 'all' or a share in (0, 1], got "
                              f"{value!r}")
        return float(value)

    @property
    def loads_on_first_rank_only(self) -> bool:
        """Whether only the first rank of the TP group reads cached KV from the host (MLA with
        ``mla_tp_load`` rank0-broadcast)."""
        return self.model.is_mla and self.tp > 1 and self.mla_tp_load == "rank0-broadcast"

    # -- bandwidth ------------------------------------------------------------------------------
    @property
    def num_gpus_loading(self) -> int:
        """GPUs that load KV at the same time (default: every GPU of the system, else ``tp``).
        Under rank0-broadcast MLA loading only the first rank of each TP group reads from the
        host; :attr:`loading_gpus` lists them."""
        if self.gpus_loading is not None:
            return self.gpus_loading
        return self.system.num_accelerators if self.system is not None else self.tp

    @property
    def loading_gpus(self) -> list[int]:
        """Indices of the GPUs reading from host memory at once (GPUs ``0 .. n-1``, or the
        first rank of each TP group among them)."""
        return loading_gpus(self.num_gpus_loading, self.tp, self.loads_on_first_rank_only)

    @property
    def host_link_sharers(self) -> int:
        """Loading GPUs on the first GPU's host uplink (GPUs ``g`` with the same
        ``g // gpus_per_host_link``)."""
        return uplink_sharers(self.system, self.loading_gpus)

    def _per_gpu_link(self, direction: Direction) -> Any:
        if self.bandwidth is not None:
            value = np.asarray(self.bandwidth, dtype=np.float64)
            return scalar_or_array(2 * value if direction == "both" else value)
        sharers = self.host_link_sharers
        return link_figure(self.link, self.system, self.resolved_bandwidth_source, sharers,
                           direction) / sharers

    @property
    def link_bandwidth(self) -> Any:
        """Host-to-device link bandwidth available to one GPU (bytes/s), before
        ``link_efficiency``."""
        return self._per_gpu_link("h2d")

    @property
    def link_d2h_bandwidth(self) -> Any:
        """Device-to-host link bandwidth available to one GPU (bytes/s), before
        ``link_efficiency`` (a link without a published device-to-host figure is taken to be
        symmetric)."""
        return self._per_gpu_link("d2h")

    @property
    def link_duplex_bandwidth(self) -> Any:
        """Both directions together for one GPU (bytes/s), before ``link_efficiency``: the
        published bidirectional figure where there is one, else the sum of the two."""
        return self._per_gpu_link("both")

    @cached_property
    def host_dram_share(self) -> float:
        """Host DRAM bytes/s available to one GPU of the TP group (inf without a system); see
        :mod:`kvroof.cost.host_memory`."""
        if self.system is None:
            return math.inf
        return dram_share_per_gpu(self.system, self.loading_gpus, range(self.tp),
                                  self.host_memory_locality)

    @property
    def effective_bandwidth(self) -> Any:
        """Bytes/s one GPU receives from host DRAM: min(link x efficiency, DRAM share)."""
        link = np.asarray(self.link_bandwidth, dtype=np.float64) * np.asarray(
            self.link_efficiency, dtype=np.float64
        )
        return scalar_or_array(np.minimum(link, self.host_dram_share))

    @property
    def transfer_latency(self) -> Any:
        """Seconds per copy (the ``latency`` override, else a calibrated one when the bandwidth
        is calibrated, else the host link's)."""
        if self.latency is not None:
            value: Any = self.latency
        elif self.calibration is not None and self.resolved_bandwidth_source == "calibrated":
            value = self.calibration.link_latency
        else:
            value = self.link.latency
        return scalar_or_array(np.asarray(value, dtype=np.float64))

    @property
    def short_label(self) -> str:
        """Names only: model, system (or accelerator + link), TP."""
        if self.system is None:
            where = f"{self.accelerator.name} + {self.link.name}"
        elif self.link.name != self.system.host_link:
            where = f"{self.system.name} with {self.link.name}"
        else:
            where = self.system.name
        return f"{self.model.name}, {where}, TP {self.tp}"

    @property
    def label(self) -> str:
        """A short description: model, hardware, TP."""
        if self.system is None:
            where = f"{self.accelerator.label} + {self.link.label}"
        elif self.link.name != self.system.host_link:
            where = f"{self.system.label}, host link replaced by {self.link.label}"
        else:
            where = self.system.label
        return f"{self.model.label} on {where}, TP {self.tp}"
