"""A deployment's cost-model constants (:class:`CostTerms`), computed once from its settings by
:func:`cost_terms` (``Deployment.terms`` caches them).

Every per-request cost function evaluates its formula from these constants
(:mod:`kvroof.cost.terms`). The constants themselves come from the modules that define them:
FLOPs from :mod:`kvroof.cost.flop_terms`, KV bytes and copies from :mod:`kvroof.cost.kv_terms`
over the layer groups (:mod:`kvroof.cost.groups`), weights from :mod:`kvroof.cost.weight_bytes`,
collectives from :mod:`kvroof.cost.collectives`, link, DRAM and copy figures from the
:class:`~kvroof.cost.deployment_settings.DeploymentSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvroof.cost.checks import dtype_bytes
from kvroof.cost.collectives import ACTIVATION_BYTES, collective_bandwidth, collective_latency
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.flop_terms import FlopTerms, flop_terms
from kvroof.cost.groups import LayerGroup, layer_groups
from kvroof.cost.kv_terms import KvTerms, combine, copy_terms, holding
from kvroof.specs.model import GQAAttention, MoEFFN

__all__ = ["CostTerms", "ReadTerms", "cost_terms", "kv_terms"]


@dataclass(frozen=True)
class ReadTerms:
    """KV bytes one rank reads from HBM for a prefill of ``T`` tokens on ``K`` cached ones:
    ``per_token (K + T) + sum_W b (min(K, W - 1) + T) + sum_C b ((K mod C) + T) + sum_k b min(K +
    T, k T) + fixed [T > 0]``: the layers that read every position, the sliding-window layers
    (the ``W - 1`` cached positions the first new query sees and the new tokens), the chunked
    layers (the current chunk and the new tokens), a sparse layer's latents (at most its top-k
    for each new token) and the linear layers' states. ``windows`` is keyed by the window ``W``,
    ``chunks`` by the chunk ``C``, ``caps`` by the top-k."""

    per_token: float
    windows: tuple[tuple[float, float], ...]
    chunks: tuple[tuple[float, float], ...]
    caps: tuple[tuple[float, float], ...]
    fixed: float
    plain: bool = field(init=False, repr=False, compare=False)
    """Only ``per_token`` (the common case)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", self.affine and not self.fixed)

    @property
    def affine(self) -> bool:
        return not (self.windows or self.chunks or self.caps)


@dataclass(frozen=True)
class CostTerms:
    """The constants of one deployment (per GPU unless said; settings that are arrays make the
    corresponding fields arrays). KV quantities are :class:`~kvroof.cost.kv_terms.KvTerms` of
    positions, summed over the layer groups with each group's TP share."""

    flops: FlopTerms
    hold: KvTerms
    """KV bytes one rank holds for ``P`` positions."""
    load: KvTerms
    """KV bytes the loading rank reads over the host link for ``K`` cached positions."""
    save: KvTerms
    """KV bytes it saves for ``T`` new positions (write-back)."""
    read: ReadTerms
    """KV bytes one rank reads from HBM during a prefill."""
    latent: KvTerms
    """MLA latent bytes loaded (whole, not per rank), moved again by a broadcast or all-gather
    under rank0-broadcast or shard-allgather."""
    copies: KvTerms
    save_copies: KvTerms
    affine: bool
    """Every KV term is affine in the positions (no windows, chunks or top-k caps)."""
    plain: bool
    """Loads, saves and copies are per-token terms only (no window, chunk or fixed part)."""
    rank_share: float
    """Share of the model ``attention``'s KV one rank holds (GQA ``max(1/TP, 1/kv_heads)``,
    MLA 1)."""
    load_share: float
    peak_rate: Any
    efficiency: Any
    """Constant compute efficiency, or ``None`` for a calibrated curve (``eff_max``,
    ``eff_half``)."""
    eff_max: float
    eff_half: float
    hbm_rate: Any
    weights_always: float
    weights_routed: float
    expert_miss: float
    iteration_tokens: Any
    comm_latency: float
    comm_per_token: float
    h2d: Any
    d2h: Any
    both: Any
    dram: float
    full_duplex: bool
    """The both-ways figure is the sum of the one-way ones, so it never binds alone."""
    latency: Any
    write_back: bool
    scale_up: str | None
    scale_up_latency: float
    scale_up_per_byte: float
    tiers: bool


def _shares(group: LayerGroup, tp: int, mla_tp_load: str) -> tuple[float, float]:
    """(share one rank holds, share the loading rank moves) of a group's cache: GQA heads
    ``max(1/TP, 1/kv_heads)``; MLA latents and indexer keys whole on every rank (1/TP loaded
    under shard-allgather); linear states split with their heads, 1/TP."""
    if group.kind == "linear":
        return 1.0 / tp, 1.0 / tp
    if group.kv_heads is not None:
        share = max(1.0 / tp, 1.0 / group.kv_heads)
        return share, share
    load = 1.0 / tp if (tp > 1 and mla_tp_load == "shard-allgather") else 1.0
    return 1.0, load


def kv_terms(dep: DeploymentSettings) -> dict[str, Any]:
    """The KV terms of ``dep`` (fields of :class:`CostTerms`)."""
    groups = layer_groups(dep.model, dep.mla_mode)
    kv_bytes = dtype_bytes(dep.kv_dtype)
    share = dep.sparse_share
    hold: list[tuple[str, float, float]] = []
    load: list[tuple[str, float, float]] = []
    save: list[tuple[str, float, float]] = []
    latent: list[tuple[str, float, float]] = []
    read_all = 0.0
    windows: dict[float, float] = {}
    chunks: dict[float, float] = {}
    caps: dict[float, float] = {}
    hold_fixed = load_fixed = 0.0
    by_name = {g.name: g for g in groups}
    for g in groups:
        held, moved = _shares(g, dep.tp, dep.mla_tp_load)
        n = g.count
        if g.state_bytes:
            hold_fixed += n * g.state_bytes * held
            load_fixed += n * g.state_bytes * moved
        holds = holding(g, dep.local_kv)
        own = n * g.kv_bytes_per_position(dep.kv_dtype)
        if own:
            hold.append((holds, g.keep, own * held))
            save.append((holds, g.keep, own * moved))
            loaded = own
            if g.kind == "sparse":
                loaded = n * (g.extra_bytes + share * g.kv_elements * kv_bytes)
            load.append((holds, g.keep, loaded * moved))
            if g.mla:
                latent.append((holds, g.keep, loaded))
        # HBM reads: what the layer's attention reads (a shared layer its source's KV again)
        read_group = g
        if g.source is not None:
            read_group = by_name[g.source]
        per_position = n * read_group.kv_bytes_per_position(dep.kv_dtype) * held
        if g.kind == "sparse":
            read_all += n * g.extra_bytes * held
            caps[g.span] = caps.get(g.span, 0.0) + n * g.kv_elements * kv_bytes * held
        elif read_group.holds == "window":
            windows[g.span] = windows.get(g.span, 0.0) + per_position
        elif read_group.holds == "chunk":
            chunks[g.span] = chunks.get(g.span, 0.0) + per_position
        elif read_group.holds == "all":
            read_all += per_position
    block = dep.granularity.block_tokens
    layout = dep.granularity.layout
    hold_terms = combine(hold, hold_fixed)
    load_terms = combine(load, load_fixed)
    read = ReadTerms(read_all, tuple(windows.items()), tuple(chunks.items()), tuple(caps.items()),
                     hold_fixed)
    save_terms = combine(save, load_fixed)
    copies = copy_terms(groups, block, layout, dep.local_kv, share)
    save_copies = copy_terms(groups, block, layout, dep.local_kv)
    return {
        "hold": hold_terms, "load": load_terms, "save": save_terms,
        "read": read, "latent": combine(latent),
        "copies": copies, "save_copies": save_copies,
        "affine": hold_terms.affine and load_terms.affine and read.affine,
        "plain": all(terms.plain for terms in (load_terms, save_terms, copies, save_copies)),
    }


def cost_terms(dep: DeploymentSettings) -> CostTerms:
    """The constants of ``dep`` (use :attr:`Deployment.terms`, which caches them)."""
    model = dep.model
    att = model.attention
    rank = max(1.0 / dep.tp, 1.0 / att.num_kv_heads) if isinstance(att, GQAAttention) else 1.0
    load = 1.0 / dep.tp if (model.is_mla and dep.tp > 1
                            and dep.mla_tp_load == "shard-allgather") else rank
    calibration = dep.calibration
    if dep.compute_efficiency is None and calibration is not None:
        efficiency: Any = None
        eff_max, eff_half = calibration.compute_efficiency_max, calibration.compute_half_tokens
    else:
        efficiency = dep.compute_efficiency_at(1.0)
        eff_max = eff_half = 0.0
    ffn = model.ffn
    weights = dep.weight_bytes
    miss = 1.0 - ffn.experts_per_token / ffn.num_experts if isinstance(ffn, MoEFFN) else 1.0
    comm_on = dep.allreduce and dep.tp > 1
    n = dep.tp
    layers = model.num_layers
    link_eff = np.asarray(dep.link_efficiency, dtype=np.float64)

    def linked(value: Any) -> Any:
        array = np.asarray(value, dtype=np.float64) * link_eff
        return float(array) if array.ndim == 0 else array

    h2d, d2h = linked(dep.link_bandwidth), linked(dep.link_d2h_bandwidth)
    both = linked(dep.link_duplex_bandwidth)
    scale_up = None
    if model.is_mla and dep.tp > 1 and dep.mla_tp_load != "every-rank":
        scale_up = "broadcast" if dep.mla_tp_load == "rank0-broadcast" else "allgather"
    bus = collective_bandwidth(dep)
    latency = np.asarray(dep.transfer_latency, dtype=np.float64)
    peak = np.asarray(dep.peak_compute, dtype=np.float64) * dep.tp
    hbm = np.asarray(dep.effective_hbm_bandwidth, dtype=np.float64)
    iteration = None if dep.iteration_tokens is None else np.asarray(dep.iteration_tokens,
                                                                      dtype=np.float64)
    return CostTerms(
        flops=flop_terms(model, dep.mla_mode, replicated=float(dep.tp)),
        **kv_terms(dep),
        rank_share=rank,
        load_share=load,
        peak_rate=float(peak) if peak.ndim == 0 else peak,
        efficiency=efficiency,
        eff_max=eff_max,
        eff_half=eff_half,
        hbm_rate=float(hbm) if hbm.ndim == 0 else hbm,
        weights_always=weights.always_read,
        weights_routed=weights.routed_experts,
        expert_miss=miss,
        iteration_tokens=None if iteration is None else (
            float(iteration) if iteration.ndim == 0 else iteration),
        comm_latency=2.0 * layers * collective_latency(dep) if comm_on else 0.0,
        comm_per_token=(2.0 * layers * 2.0 * (n - 1) / n * model.hidden_size * ACTIVATION_BYTES
                        / bus) if comm_on else 0.0,
        h2d=h2d,
        d2h=d2h,
        both=both,
        dram=dep.host_dram_share,
        full_duplex=bool(np.all(np.asarray(both) >= np.asarray(h2d) + np.asarray(d2h))),
        latency=float(latency) if latency.ndim == 0 else latency,
        write_back=dep.write_back,
        scale_up=scale_up,
        scale_up_latency=collective_latency(dep),
        scale_up_per_byte=(1.0 if scale_up == "broadcast" else (n - 1) / n) / bus,
        tiers=bool(dep.tier_fractions),
    )
