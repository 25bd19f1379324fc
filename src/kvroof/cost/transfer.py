"""Time to bring ``K`` cached tokens of KV to one GPU.

``t_transfer = bytes_per_rank(K) / BW_eff + latency x copies(K)``, per GPU, where

- ``bytes_per_rank``: under tensor parallelism each rank needs the KV of its own heads. GQA:
  ``B_kv x max(1/TP, 1/kv_heads)`` (heads are replicated once TP exceeds the KV head count);
  MLA: ``B_kv`` (the latent is replicated on every rank). Sliding-window layers hold at most
  ``W`` tokens (see :func:`kvroof.cost.kv.kv_bytes`).
- ``BW_eff``: see :class:`kvroof.cost.deployment.Deployment`.
- ``copies(K)``: see :class:`kvroof.cost.deployment.Granularity`.

Tiers: with ``tier_fractions`` a share of the tokens comes from other tiers (CXL, NVMe, remote).
Each tier's path gives it ``count x link bandwidth x link_efficiency / GPUs loading``; tiers that
share the GPU's host link are also bounded, together with host DRAM, by the host link. Paths
run in parallel, so the time is the max over the paths, plus each used tier's access latency
once per request and the per-copy latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_count
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes
from kvroof.specs.model import GQAAttention

__all__ = ["TransferBreakdown", "kv_bytes_per_rank", "rank_share", "transfer_breakdown",
           "transfer_time"]


def rank_share(dep: Deployment) -> float:
    """Fraction of a request's KV one TP rank loads: GQA ``max(1/TP, 1/kv_heads)``, MLA 1."""
    att = dep.model.attention
    if isinstance(att, GQAAttention):
        return max(1.0 / dep.tp, 1.0 / att.num_kv_heads)
    return 1.0


def kv_bytes_per_rank(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """KV bytes one TP rank loads for ``cached_tokens`` tokens (in ``dep.kv_dtype``)."""
    total = np.asarray(kv_bytes(dep.model, cached_tokens, dep.kv_dtype), dtype=np.float64)
    return scalar_or_array(total * rank_share(dep))


@dataclass(frozen=True)
class TransferBreakdown:
    """Parts of the transfer time (seconds, per GPU) and what was moved."""

    bytes_per_rank: Any
    copies: Any
    data_time: Any
    latency_time: Any

    @property
    def total(self) -> Any:
        return self.data_time + self.latency_time


def transfer_breakdown(dep: Deployment, cached_tokens: ArrayLike) -> TransferBreakdown:
    """Bytes, copies and time to load ``cached_tokens`` tokens to one GPU."""
    k = token_count("cached_tokens", cached_tokens)
    size = np.asarray(kv_bytes_per_rank(dep, k), dtype=np.float64)
    copies = np.asarray(dep.granularity.transfers(dep.model, k), dtype=np.float64)
    latency_time = copies * np.asarray(dep.transfer_latency, dtype=np.float64)
    bandwidth = np.asarray(dep.effective_bandwidth, dtype=np.float64)
    if not dep.tier_fractions:
        data_time = size / bandwidth
    else:
        data_time, access = _tiered_data_time(dep, size)
        latency_time = latency_time + np.where(k > 0, access, 0.0)
    return TransferBreakdown(
        bytes_per_rank=scalar_or_array(size),
        copies=scalar_or_array(copies),
        data_time=scalar_or_array(data_time),
        latency_time=scalar_or_array(latency_time),
    )


def _tiered_data_time(dep: Deployment, size: np.ndarray[Any, Any]) -> tuple[Any, float]:
    """Max over parallel paths of bytes / path bandwidth, and the tiers' access latency."""
    assert dep.system is not None
    tiers = {tier.name: tier for tier in dep.system.tiers}
    link_efficiency = np.asarray(dep.link_efficiency, dtype=np.float64)
    host_link = np.asarray(dep.link_bandwidth, dtype=np.float64) * link_efficiency
    dram_fraction = 1.0 - sum(dep.tier_fractions.values())
    over_host_link = dram_fraction * size
    slowest = dram_fraction * size / np.asarray(dep.effective_bandwidth, dtype=np.float64)
    access = 0.0
    for name, fraction in dep.tier_fractions.items():
        if fraction == 0:
            continue
        tier, link = tiers[name], dep.tier_links[name]
        path = tier.count * link.peak_bandwidth * link_efficiency / dep.num_gpus_loading
        slowest = np.maximum(slowest, fraction * size / path)
        if tier.shares_host_link:
            over_host_link = over_host_link + fraction * size
        access = max(access, link.latency)
    return np.maximum(slowest, over_host_link / host_link), access


def transfer_time(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """Seconds to load ``cached_tokens`` tokens of KV to one GPU (broadcasts over arrays)."""
    return transfer_breakdown(dep, cached_tokens).total
