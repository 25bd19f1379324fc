"""Compute time, and time to first token (prefill only) with and without overlap.

- compute (per GPU) = prefill FLOPs / (TP x peak x compute efficiency at T), plus, when
  ``dep.allreduce``, two ring all-reduces per layer of the ``T x hidden`` activations over the
  scale-up link: ``2 x (TP-1)/TP x T x hidden x 2 B / scale-up bandwidth`` each.
- transfer: :func:`kvroof.cost.transfer.transfer_time`.
- overlap ``serial`` (the paper's Eq. 5): ``t_x + t_c``; ``ideal``: ``max(t_x, t_c)``;
  ``layerwise`` (load layer ``i+1`` while computing layer ``i``), with ``x = t_x/L`` and
  ``c = t_c/L``: ``x + (L-1) x max(x, c) + c``. Always ``serial >= layerwise >= ideal``.
  An overlap efficiency ``eta`` below 1 (a calibrated system's, or the deployment's
  ``overlap_efficiency``) hides only ``eta`` of the shorter side: each ``max(a, b)`` above
  becomes ``max(a, b) + (1 - eta) x min(a, b)``.

Result fields: ttft, compute, transfer, exposed transfer (``ttft - compute``: the transfer time
not hidden behind compute), ``p_oh = transfer / compute`` (inf when there is transfer but no
compute, 0 when there is neither), transfer share (``exposed / ttft``; for serial this is the
paper's ``P_OH / (1 + P_OH)``), bound (``"transfer"`` where transfer > compute, else
``"compute"``), achieved FLOP/s per GPU (``FLOPs / TP / ttft``) and compute utilization
(achieved / peak).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_count
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError

__all__ = [
    "OVERLAP_MODES",
    "Overlap",
    "TTFTResult",
    "allreduce_time",
    "combine_overlap",
    "compute_time",
    "ttft",
    "ttft_batch",
]

Overlap = Literal["serial", "layerwise", "ideal"]
OVERLAP_MODES: tuple[Overlap, ...] = ("serial", "layerwise", "ideal")
ACTIVATION_BYTES = 2.0  # bf16 activations in the all-reduce


def allreduce_time(dep: Deployment, new_tokens: ArrayLike) -> Any:
    """TP all-reduce seconds for a prefill of ``new_tokens`` (0 unless ``dep.allreduce``)."""
    t = token_count("new_tokens", new_tokens)
    if not dep.allreduce or dep.tp == 1:
        return scalar_or_array(np.zeros_like(t))
    assert dep.accelerator.scale_up_bandwidth is not None
    message = t * dep.model.hidden_size * ACTIVATION_BYTES
    ring = 2.0 * (dep.tp - 1) / dep.tp * message / dep.accelerator.scale_up_bandwidth
    return scalar_or_array(2.0 * dep.model.num_layers * ring)


def compute_time(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0) -> Any:
    """Seconds of prefill compute on one GPU (its TP share, plus all-reduce when enabled)."""
    flops = np.asarray(prefill_flops(dep.model, new_tokens, cached_tokens, dep.mla_mode).total)
    efficiency = np.asarray(dep.compute_efficiency_at(new_tokens), dtype=np.float64)
    rate = dep.tp * np.asarray(dep.peak_compute, dtype=np.float64) * efficiency
    return scalar_or_array(flops / rate + np.asarray(allreduce_time(dep, new_tokens)))


def combine_overlap(
    transfer: Any, compute: Any, layers: int, overlap: Overlap, efficiency: Any = 1.0
) -> Any:
    """TTFT from transfer and compute seconds under an overlap mode (broadcasts); ``efficiency``
    is the share of the shorter side that overlap hides."""
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    eta = np.asarray(efficiency, dtype=np.float64)
    overlapped = np.maximum(x, c) + (1.0 - eta) * np.minimum(x, c)
    if overlap == "serial":
        return scalar_or_array(x + c)
    if overlap == "ideal":
        return scalar_or_array(overlapped)
    if overlap == "layerwise":
        return scalar_or_array((x + c) / layers + (layers - 1) * overlapped / layers)
    raise KvroofError(f"overlap: expected one of {', '.join(OVERLAP_MODES)}, got {overlap!r}")


@dataclass(frozen=True)
class TTFTResult:
    """Time to first token and its parts (seconds, per GPU); arrays broadcast like the inputs."""

    ttft: Any
    compute: Any
    transfer: Any
    exposed_transfer: Any
    p_oh: Any
    transfer_share: Any
    bound: Any
    flops: Any
    achieved_flops: Any
    compute_utilization: Any
    overlap: Overlap

    def as_dict(self) -> dict[str, Any]:
        """Fields by name, with ``_s`` on the times (as the CLI's JSON prints them)."""
        return {
            "ttft_s": self.ttft,
            "compute_s": self.compute,
            "transfer_s": self.transfer,
            "exposed_transfer_s": self.exposed_transfer,
            "p_oh": self.p_oh,
            "transfer_share": self.transfer_share,
            "bound": self.bound,
            "flops": self.flops,
            "achieved_flops": self.achieved_flops,
            "compute_utilization": self.compute_utilization,
            "overlap": self.overlap,
        }


def _result(
    dep: Deployment, flops: Any, transfer: Any, compute: Any, overlap: Overlap
) -> TTFTResult:
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    total = np.asarray(combine_overlap(x, c, dep.model.num_layers, overlap,
                                       dep.resolved_overlap_efficiency))
    exposed = total - c
    with np.errstate(divide="ignore", invalid="ignore"):
        p_oh = np.where(c > 0, x / np.where(c > 0, c, 1.0), np.where(x > 0, np.inf, 0.0))
        share = np.where(total > 0, exposed / np.where(total > 0, total, 1.0), 0.0)
        achieved = np.where(total > 0, np.asarray(flops) / dep.tp / np.where(total > 0, total, 1.0),
                            0.0)
    utilization = achieved / np.asarray(dep.peak_compute, dtype=np.float64)
    bound = np.where(x > c, "transfer", "compute")
    return TTFTResult(
        ttft=scalar_or_array(total),
        compute=scalar_or_array(c),
        transfer=scalar_or_array(x),
        exposed_transfer=scalar_or_array(exposed),
        p_oh=scalar_or_array(p_oh),
        transfer_share=scalar_or_array(share),
        bound=str(bound) if bound.ndim == 0 else bound,
        flops=scalar_or_array(np.asarray(flops, dtype=np.float64)),
        achieved_flops=scalar_or_array(achieved),
        compute_utilization=scalar_or_array(utilization),
        overlap=overlap,
    )


def _check_overlap(overlap: str) -> Overlap:
    for mode in OVERLAP_MODES:
        if overlap == mode:
            return mode
    raise KvroofError(f"overlap: expected one of {', '.join(OVERLAP_MODES)}, got {overlap!r}")


def ttft(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap = "serial",
) -> TTFTResult:
    """TTFT of one request of ``new_tokens`` (T) on top of ``cached_tokens`` (K) loaded from
    host memory. T and K broadcast (a 1000 x 1000 grid is one call)."""
    mode = _check_overlap(overlap)
    flops = prefill_flops(dep.model, new_tokens, cached_tokens, dep.mla_mode).total
    return _result(
        dep, flops, transfer_time(dep, cached_tokens), compute_time(dep, new_tokens, cached_tokens),
        mode,
    )


def ttft_batch(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap = "serial",
) -> TTFTResult:
    """TTFT of a batch prefilled together: the requests' compute and transfer times add up
    (the last axis of the broadcast T and K is the batch), then the overlap mode applies."""
    mode = _check_overlap(overlap)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = np.broadcast_arrays(t, k)
    if t.ndim == 0:
        t, k = t[None], k[None]
    flops = np.asarray(prefill_flops(dep.model, t, k, dep.mla_mode).total).sum(axis=-1)
    transfer = np.asarray(transfer_time(dep, k)).sum(axis=-1)
    compute = np.asarray(compute_time(dep, t, k)).sum(axis=-1)
    return _result(dep, flops, transfer, compute, mode)
