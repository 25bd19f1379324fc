"""Time the host link is busy for one request: loading ``K`` cached tokens of KV to one GPU, and
saving the ``T`` new tokens' KV back (write-back).

``t_transfer = max(data paths) + scale-up collective + latency x copies``, per GPU, where

- bytes a rank *holds*: GQA ``B_kv x max(1/TP, 1/kv_heads)`` (heads are replicated once TP
  exceeds the KV head count); MLA ``B_kv`` (the latent is replicated on every rank).
  Sliding-window layers hold at most ``W`` tokens (see :func:`kvroof.cost.kv.kv_bytes`);
- bytes a rank *loads* (``L``): what it holds, except for MLA under TP, by ``mla_tp_load``:
  ``every-rank`` (vLLM, SGLang: each rank reads the whole latent), ``rank0-broadcast`` (the
  first rank reads it and broadcasts it over the scale-up link, as LMCache does for MLA; only
  one GPU per TP group then draws on host memory), ``shard-allgather`` (each rank reads
  ``1/TP`` and the ranks all-gather);
- bytes a rank *saves* (``S``, with ``write_back``): the new tokens' KV, by the same rule;
- data paths, run in parallel, the slowest one sets the time: host-to-device ``L / BW_h2d``,
  device-to-host ``S / BW_d2h``, both directions together ``(L + S) / BW_both``, and host DRAM
  ``(L + S) / DRAM share`` (the link bandwidths times ``link_efficiency``; see
  :class:`kvroof.cost.deployment.Deployment`);
- ``copies``: load and save copies (see :class:`kvroof.cost.deployment.Granularity`).

Tiers: with ``tier_fractions`` a share of the tokens comes from other tiers (CXL, NVMe, remote).
Each tier's path gives it ``count x link bandwidth x link_efficiency / GPUs loading``; tiers that
share the GPU's host link also count on the host-to-device path, with host DRAM. A used tier
adds its access latency once per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import FloatArray, scalar_or_array, token_count
from kvroof.cost.collectives import allgather_time, broadcast_time
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes
from kvroof.specs.model import GQAAttention

__all__ = ["TransferBreakdown", "kv_bytes_per_rank", "load_bytes_per_rank", "load_share",
           "rank_share", "transfer_breakdown", "transfer_time"]


def rank_share(dep: Deployment) -> float:
    """Fraction of a request's KV one TP rank holds: GQA ``max(1/TP, 1/kv_heads)``, MLA 1."""
    att = dep.model.attention
    if isinstance(att, GQAAttention):
        return max(1.0 / dep.tp, 1.0 / att.num_kv_heads)
    return 1.0


def load_share(dep: Deployment) -> float:
    """Fraction of a request's KV the loading rank reads from the host (and, with write-back,
    saves): what it holds, or ``1/TP`` of an MLA latent under ``shard-allgather``."""
    if dep.model.is_mla and dep.tp > 1 and dep.mla_tp_load == "shard-allgather":
        return 1.0 / dep.tp
    return rank_share(dep)


def kv_bytes_per_rank(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """KV bytes one TP rank holds for ``cached_tokens`` tokens (in ``dep.kv_dtype``)."""
    total = np.asarray(kv_bytes(dep.model, cached_tokens, dep.kv_dtype), dtype=np.float64)
    return scalar_or_array(total * rank_share(dep))


def load_bytes_per_rank(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """KV bytes the loading rank reads over the host link for ``cached_tokens`` tokens."""
    total = np.asarray(kv_bytes(dep.model, cached_tokens, dep.kv_dtype), dtype=np.float64)
    return scalar_or_array(total * load_share(dep))


@dataclass(frozen=True)
class TransferBreakdown:
    """Parts of the transfer time (seconds, per GPU) and what was moved.

    ``paths`` are the data paths' times (host-to-device, device-to-host, both directions,
    host DRAM, then one per used tier), named in ``path_names``; they run in parallel, so the
    data time is their maximum.
    """

    bytes_per_rank: Any
    save_bytes: Any
    copies: Any
    paths: tuple[Any, ...]
    path_names: tuple[str, ...]
    scale_up_time: Any
    latency_time: Any

    @property
    def data_time(self) -> Any:
        """Seconds of the slowest data path."""
        return scalar_or_array(np.maximum.reduce(np.broadcast_arrays(*self.paths)))

    @property
    def total(self) -> Any:
        """Seconds the link is busy for the request."""
        return self.data_time + self.scale_up_time + self.latency_time

    @property
    def limit(self) -> Any:
        """Name of the slowest data path (array of names for array inputs)."""
        index = np.argmax(np.stack(np.broadcast_arrays(*self.paths)), axis=0)
        names = np.asarray(self.path_names, dtype=object)[index]
        return str(names) if np.ndim(names) == 0 else names


def _divide(size: FloatArray, bandwidth: Any) -> FloatArray:
    result: FloatArray = size / np.asarray(bandwidth, dtype=np.float64)
    return result


def transfer_breakdown(
    dep: Deployment, cached_tokens: ArrayLike, new_tokens: ArrayLike = 0
) -> TransferBreakdown:
    """Bytes, copies and time to load ``cached_tokens`` tokens to one GPU and, with
    ``dep.write_back``, to save the KV of ``new_tokens`` new tokens."""
    k = token_count("cached_tokens", cached_tokens)
    t = token_count("new_tokens", new_tokens)
    load = np.asarray(load_bytes_per_rank(dep, k), dtype=np.float64)
    copies = np.asarray(dep.granularity.transfers(dep.model, k), dtype=np.float64)
    if dep.write_back:
        save = np.asarray(load_bytes_per_rank(dep, t), dtype=np.float64)
        copies = copies + np.asarray(dep.granularity.transfers(dep.model, t), dtype=np.float64)
    else:
        save = np.zeros_like(t)
    efficiency = np.asarray(dep.link_efficiency, dtype=np.float64)
    h2d = np.asarray(dep.link_bandwidth, dtype=np.float64) * efficiency
    d2h = np.asarray(dep.link_d2h_bandwidth, dtype=np.float64) * efficiency
    both = np.asarray(dep.link_duplex_bandwidth, dtype=np.float64) * efficiency
    latency_time = copies * np.asarray(dep.transfer_latency, dtype=np.float64)
    names = ["host-to-device", "device-to-host", "both directions", "host DRAM"]
    if not dep.tier_fractions:
        over_link = load
        paths = [_divide(load, h2d), _divide(save, d2h), _divide(load + save, both),
                 _divide(load + save, dep.host_dram_share)]
    else:
        over_link, from_dram, tier_paths, access = _tiers(dep, load, efficiency)
        paths = [_divide(over_link, h2d), _divide(save, d2h), _divide(over_link + save, both),
                 _divide(from_dram + save, dep.host_dram_share)]
        for name, time in tier_paths:
            paths.append(time)
            names.append(name)
        latency_time = latency_time + np.where(k > 0, access, 0.0)
    scale_up = np.zeros_like(load)
    if dep.model.is_mla and dep.tp > 1 and dep.mla_tp_load != "every-rank":
        latent = np.asarray(kv_bytes(dep.model, k, dep.kv_dtype), dtype=np.float64)
        if dep.mla_tp_load == "rank0-broadcast":
            scale_up = np.asarray(broadcast_time(dep, latent), dtype=np.float64)
        else:
            scale_up = np.asarray(allgather_time(dep, latent), dtype=np.float64)
    return TransferBreakdown(
        bytes_per_rank=scalar_or_array(load),
        save_bytes=scalar_or_array(np.asarray(save)),
        copies=scalar_or_array(copies),
        paths=tuple(scalar_or_array(np.asarray(p)) for p in paths),
        path_names=tuple(names),
        scale_up_time=scalar_or_array(scale_up),
        latency_time=scalar_or_array(np.asarray(latency_time)),
    )


def _tiers(
    dep: Deployment, size: FloatArray, efficiency: FloatArray
) -> tuple[FloatArray, FloatArray, list[tuple[str, FloatArray]], float]:
    """Bytes over the host link, bytes from host DRAM, each used tier's path time, and the
    largest access latency among the used tiers."""
    assert dep.system is not None
    tiers = {tier.name: tier for tier in dep.system.tiers}
    dram_fraction = 1.0 - sum(dep.tier_fractions.values())
    over_link = dram_fraction * size
    paths: list[tuple[str, FloatArray]] = []
    access = 0.0
    for name, fraction in dep.tier_fractions.items():
        if fraction == 0:
            continue
        tier, link = tiers[name], dep.tier_links[name]
        path = tier.count * link.peak_bandwidth * efficiency / dep.num_gpus_loading
        paths.append((f"tier {name}", fraction * size / path))
        if tier.shares_host_link:
            over_link = over_link + fraction * size
        access = max(access, link.latency)
    return over_link, dram_fraction * size, paths, access


def transfer_time(
    dep: Deployment, cached_tokens: ArrayLike, new_tokens: ArrayLike = 0
) -> Any:
    """Seconds the host link is busy for a request of ``new_tokens`` on top of
    ``cached_tokens`` cached tokens (broadcasts over arrays)."""
    return transfer_breakdown(dep, cached_tokens, new_tokens).total
