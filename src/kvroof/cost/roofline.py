"""Roofline views of prefill with offloaded KV: attainable compute against kappa_ratio, and
arithmetic intensity against the host link.

- Offload roofline (the paper's Fig. 4): for a request with ``K = kappa_ratio x T``, the FLOP/s a
  GPU attains when transfer and compute overlap perfectly. Paper mode: ``C x min(1,
  kappa_crit / kappa_ratio)`` (``T x 2 N`` FLOPs, ``K x B_kv`` bytes); full mode: the cost model's
  FLOPs over its ideal-overlap TTFT.
- Link intensity: FLOPs one GPU runs per byte it receives over the offload path; the host-link
  roof is ``intensity x effective bandwidth``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import nonnegative, scalar_or_array, token_count
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.kappa import kappa_paper_for
from kvroof.cost.timing import ttft
from kvroof.cost.transfer import kv_bytes_per_rank

__all__ = ["RooflinePoints", "link_intensity", "offload_roofline"]

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


def link_intensity(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike) -> Any:
    """FLOPs one GPU runs per byte of KV it loads (inf when nothing is loaded)."""
    flops = np.asarray(prefill_flops(dep.model, new_tokens, cached_tokens, dep.mla_mode).total)
    size = np.asarray(kv_bytes_per_rank(dep, cached_tokens), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_gpu = flops / dep.tp
        return scalar_or_array(np.where(size > 0, per_gpu / np.where(size > 0, size, 1.0),
                                        np.inf))
