"""Roofline views of prefill with offloaded KV: attainable compute against kappa_ratio, and
arithmetic intensity against the host link.

- Offload roofline (the paper's Fig. 4): for a request with ``K = kappa_ratio x T``, the FLOP/s a
  GPU attains when transfer and compute overlap perfectly. Paper mode: ``C x min(1,
  kappa_crit / kappa_ratio)`` (``T x 2 N`` FLOPs, ``K x B_kv`` bytes); full mode: the cost model's
  FLOPs over its ideal-overlap TTFT.
- Hierarchical roofline (:func:`request_intensities`): each memory level has its own intensity,
  FLOPs per byte *of that level*: FLOPs per HBM byte read (weights and KV) under the HBM roof
  ``intensity x HBM bandwidth``, and FLOPs per byte over the host link (loads and saves) under
  the link roof ``intensity x effective link bandwidth``. A request's attainable FLOP/s is the
  lowest roof at its intensities (with ideal overlap of load and compute).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import nonnegative, scalar_or_array, token_count
from kvroof.cost.compute import compute_breakdown
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.paper_kappa import kappa_paper_for
from kvroof.cost.timing import ttft
from kvroof.cost.transfer import transfer_breakdown

__all__ = ["RequestIntensities", "RooflinePoints", "link_intensity", "offload_roofline",
           "request_intensities"]

RooflineMode = Literal["paper", "full"]


@dataclass(frozen=True)
class RooflinePoints:
    """Attainable FLOP/s and new tokens/s per GPU at each kappa_ratio (arrays)."""

    kappa_ratio: Any
    attainable_flops: Any
    tokens_per_second: Any
    peak: float


def offload_roofline(
    dep: Deployment, kappa_ratio: ArrayLike, new_tokens: float = 128.0,
    mode: RooflineMode = "full",
) -> RooflinePoints:
    """Attainable compute per GPU against ``kappa_ratio`` (ideal overlap of load and compute)."""
    ratio = nonnegative("kappa_ratio", kappa_ratio)
    t = float(token_count("new_tokens", new_tokens, at_least_one=True))
    if mode == "paper":
        paper = kappa_paper_for(dep)
        compute = float(paper.compute)
        with np.errstate(divide="ignore"):
            attainable = compute * np.minimum(1.0, float(paper.kappa_crit) / ratio)
        tokens = attainable / (2.0 * float(paper.active_params))
        return RooflinePoints(scalar_or_array(ratio), scalar_or_array(attainable),
                              scalar_or_array(tokens), compute)
    result = ttft(dep, t, ratio * t, "ideal")
    tokens = t / np.asarray(result.ttft)
    return RooflinePoints(scalar_or_array(ratio), result.achieved_flops,
                          scalar_or_array(tokens), float(dep.effective_compute))


def _per_byte(flops: Any, size: Any) -> Any:
    flops_arr = np.asarray(flops, dtype=np.float64)
    size_arr = np.asarray(size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return scalar_or_array(np.where(size_arr > 0, flops_arr / np.where(size_arr > 0,
                                                                          size_arr, 1.0), np.inf))


def link_intensity(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike) -> Any:
    """FLOPs one GPU runs per byte it moves over the host link (loads of the cached KV and, with
    write-back, saves of the new KV; inf when nothing moves)."""
    flops = np.asarray(prefill_flops(dep.model, new_tokens, cached_tokens, dep.mla_mode).total)
    parts = transfer_breakdown(dep, cached_tokens, new_tokens)
    return _per_byte(flops / dep.tp, np.asarray(parts.bytes_per_rank) + parts.save_bytes)


@dataclass(frozen=True)
class RequestIntensities:
    """A request on the hierarchical roofline (per GPU; arrays broadcast like T and K)."""

    flops: Any
    hbm_bytes: Any
    link_bytes: Any
    hbm_intensity: Any
    link_intensity: Any
    attainable_flops: Any


def request_intensities(
    dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike
) -> RequestIntensities:
    """FLOPs per HBM byte and per host-link byte of one GPU's share of a request, and the FLOP/s
    it attains with load and compute overlapped (all-reduce included)."""
    compute = compute_breakdown(dep, new_tokens, cached_tokens)
    parts = transfer_breakdown(dep, cached_tokens, new_tokens)
    per_gpu = np.asarray(compute.flops) / dep.tp
    link_bytes = np.asarray(parts.bytes_per_rank) + parts.save_bytes
    return RequestIntensities(
        flops=scalar_or_array(per_gpu),
        hbm_bytes=compute.hbm_bytes,
        link_bytes=scalar_or_array(np.asarray(link_bytes)),
        hbm_intensity=_per_byte(per_gpu, compute.hbm_bytes),
        link_intensity=_per_byte(per_gpu, link_bytes),
        attainable_flops=ttft(dep, new_tokens, cached_tokens, "ideal").achieved_flops,
    )
