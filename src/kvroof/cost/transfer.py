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
adds its access latency once per request (:mod:`kvroof.cost.tiers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_count, token_value
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv_terms import evaluate, peak
from kvroof.cost.terms import slowest_path_time, transfer_parts
from kvroof.cost.tiers import tier_paths

__all__ = ["TransferBreakdown", "kv_bytes_per_rank", "kv_peak_bytes_per_rank",
           "load_bytes_per_rank", "load_share", "rank_share", "transfer_breakdown",
           "transfer_time"]


def rank_share(dep: Deployment) -> float:
    """Fraction of the model ``attention``'s KV one TP rank holds: GQA ``max(1/TP,
    1/kv_heads)``, MLA 1 (layer kinds with other shapes have their own shares, see
    :func:`kvroof.cost.terms.kv_terms`)."""
    return dep.terms.rank_share


def load_share(dep: Deployment) -> float:
    """Fraction of a request's KV the loading rank reads from the host (and, with write-back,
    saves): what it holds, or ``1/TP`` of an MLA latent under ``shard-allgather``."""
    return dep.terms.load_share


def kv_bytes_per_rank(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """KV bytes (and fixed state) one TP rank holds for ``cached_tokens`` tokens (in
    ``dep.kv_dtype``; each layer group with its own TP share)."""
    k = token_value("cached_tokens", cached_tokens)
    value = evaluate(dep.terms.hold, k)
    return value if type(value) is float else scalar_or_array(np.asarray(value))


def kv_peak_bytes_per_rank(dep: Deployment, tokens: ArrayLike) -> Any:
    """The most KV bytes one TP rank holds over a sequence of up to ``tokens`` tokens (a
    chunked layer's current chunk fills up to ``min(tokens, C)``): what must fit in HBM."""
    k = token_value("tokens", tokens)
    value = peak(dep.terms.hold, k)
    return value if type(value) is float else scalar_or_array(np.asarray(value))


def load_bytes_per_rank(dep: Deployment, cached_tokens: ArrayLike) -> Any:
    """KV bytes the loading rank reads over the host link for ``cached_tokens`` tokens."""
    k = token_value("cached_tokens", cached_tokens)
    value = evaluate(dep.terms.load, k)
    return value if type(value) is float else scalar_or_array(np.asarray(value))


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
        return scalar_or_array(np.asarray(slowest_path_time(self.paths), dtype=np.float64))

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


def transfer_breakdown(
    dep: Deployment, cached_tokens: ArrayLike, new_tokens: ArrayLike = 0
) -> TransferBreakdown:
    """Bytes, copies and time to load ``cached_tokens`` tokens to one GPU and, with
    ``dep.write_back``, to save the KV of ``new_tokens`` new tokens (every path, named)."""
    k = token_count("cached_tokens", cached_tokens)
    t = token_count("new_tokens", new_tokens)
    terms = dep.terms
    parts = transfer_parts(terms, k, t, all_paths=True)
    paths = [np.asarray(p, dtype=np.float64) for p in parts.paths]
    names = list(parts.names)
    latency_time = np.asarray(parts.latency_time, dtype=np.float64)
    if terms.tiers:
        over_link, from_dram, tiers, access = tier_paths(
            dep.system, dep.tier_fractions, dep.tier_links, dep.num_gpus_loading,
            np.asarray(parts.load, dtype=np.float64),
            np.asarray(dep.link_efficiency, dtype=np.float64))
        save = np.asarray(parts.save, dtype=np.float64)
        paths = [over_link / terms.h2d, save / terms.d2h, (over_link + save) / terms.both,
                 (from_dram + save) / terms.dram]
        for name, time in tiers:
            paths.append(time)
            names.append(name)
        latency_time = latency_time + np.where(k > 0, access, 0.0)
    return TransferBreakdown(
        bytes_per_rank=scalar_or_array(np.asarray(parts.load, dtype=np.float64)),
        save_bytes=scalar_or_array(np.asarray(parts.save, dtype=np.float64)),
        copies=scalar_or_array(np.asarray(parts.copies, dtype=np.float64)),
        paths=tuple(scalar_or_array(p) for p in paths),
        path_names=tuple(names),
        scale_up_time=scalar_or_array(np.asarray(parts.scale_up, dtype=np.float64)),
        latency_time=scalar_or_array(latency_time),
    )


def transfer_time(
    dep: Deployment, cached_tokens: ArrayLike, new_tokens: ArrayLike = 0
) -> Any:
    """Seconds the host link is busy for a request of ``new_tokens`` on top of
    ``cached_tokens`` cached tokens (broadcasts over arrays)."""
    if dep.terms.tiers:
        return transfer_breakdown(dep, cached_tokens, new_tokens).total
    k = token_value("cached_tokens", cached_tokens)
    t = token_value("new_tokens", new_tokens)
    total = transfer_parts(dep.terms, k, t).total
    return total if type(total) is float else scalar_or_array(np.asarray(total))
