"""Compute time (the GPU's own roofline), and time to first token (prefill only) with and
without overlap.

- compute (per GPU) = ``max(FLOP time, HBM time) + all-reduce time``:
  - FLOP time = prefill FLOPs / (TP x peak x compute efficiency at T);
  - HBM time = bytes one rank reads / (HBM bandwidth x HBM efficiency), the bytes being the
    request's share ``T / N`` of the weights an iteration of ``N`` tokens reads
    (:func:`kvroof.cost.weights.weights_read_per_rank`; ``N = iteration_tokens``, by default
    ``T``: the request alone) plus the KV of the ``K + T`` positions its attention reads
    (:func:`kvroof.cost.transfer.kv_bytes_per_rank`);
  - all-reduce: two per layer for TP > 1 (:func:`kvroof.cost.collectives.allreduce_time`), the
    per-collective latency shared ``T / N`` like the weights.
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

from kvroof.cost.checks import FloatArray, scalar_or_array, token_count
from kvroof.cost.collectives import allreduce_time
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
from kvroof.cost.weights import weights_read_per_rank
from kvroof.errors import KvroofError

__all__ = [
    "OVERLAP_MODES",
    "ComputeBreakdown",
    "Overlap",
    "TTFTResult",
    "allreduce_time",
    "combine_overlap",
    "compute_breakdown",
    "compute_time",
    "iteration_tokens_for",
    "roofline_breakdown",
    "ttft",
    "ttft_batch",
]

Overlap = Literal["serial", "layerwise", "ideal"]
OVERLAP_MODES: tuple[Overlap, ...] = ("serial", "layerwise", "ideal")


def iteration_tokens_for(dep: Deployment, new_tokens: FloatArray) -> FloatArray:
    """Tokens that share the weight read of the request's iteration: ``iteration_tokens`` (which
    must be at least ``T``), or ``T`` (the request alone)."""
    if dep.iteration_tokens is None:
        return new_tokens
    n = np.asarray(dep.iteration_tokens, dtype=np.float64)
    if np.any(n < new_tokens):
        raise KvroofError(
            f"iteration_tokens: {dep.iteration_tokens!r} is fewer than the request's new tokens "
            f"T (max {float(np.max(new_tokens)):g}); an iteration holds at least the request"
        )
    return n


@dataclass(frozen=True)
class ComputeBreakdown:
    """One GPU's compute time and its parts (seconds); arrays broadcast like the inputs."""

    flops: Any
    flop_time: Any
    hbm_bytes: Any
    weight_bytes: Any
    hbm_time: Any
    comm_time: Any

    @property
    def total(self) -> Any:
        """``max(FLOP time, HBM time) + all-reduce time``."""
        return scalar_or_array(np.maximum(self.flop_time, self.hbm_time) + self.comm_time)

    @property
    def limit(self) -> Any:
        """``"flops"`` where FLOPs set the time, ``"hbm"`` where the HBM reads do."""
        limit = np.where(np.asarray(self.hbm_time) > np.asarray(self.flop_time), "hbm", "flops")
        return str(limit) if limit.ndim == 0 else limit


def roofline_breakdown(
    dep: Deployment, flops: Any, tokens: Any, kv_read: Any, iteration_tokens: Any = None
) -> ComputeBreakdown:
    """The GPU roofline for work of ``flops`` FLOPs (whole TP group) over ``tokens`` tokens
    that reads ``kv_read`` KV bytes per rank, when ``iteration_tokens`` tokens (default:
    ``tokens``) share one read of the weights. The single place compute time is formed; the
    per-request, batch and iteration functions all call it."""
    t = np.asarray(tokens, dtype=np.float64)
    n = t if iteration_tokens is None else np.asarray(iteration_tokens, dtype=np.float64)
    efficiency = np.asarray(dep.compute_efficiency_at(t), dtype=np.float64)
    rate = dep.tp * np.asarray(dep.peak_compute, dtype=np.float64) * efficiency
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(n > 0, t / np.where(n > 0, n, 1.0), 0.0)
    weights = share * np.asarray(weights_read_per_rank(dep, n), dtype=np.float64)
    hbm = weights + np.asarray(kv_read, dtype=np.float64)
    flops_arr = np.asarray(flops, dtype=np.float64)
    return ComputeBreakdown(
        flops=scalar_or_array(flops_arr),
        flop_time=scalar_or_array(flops_arr / rate),
        hbm_bytes=scalar_or_array(hbm),
        weight_bytes=scalar_or_array(weights),
        hbm_time=scalar_or_array(hbm / np.asarray(dep.effective_hbm_bandwidth)),
        comm_time=scalar_or_array(np.asarray(allreduce_time(dep, t, share))),
    )


def compute_breakdown(
    dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0
) -> ComputeBreakdown:
    """FLOP time, HBM time and all-reduce time of a prefill of ``new_tokens`` on top of
    ``cached_tokens`` on one GPU (its TP share)."""
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    flops = prefill_flops(dep.model, t, k, dep.mla_mode).total
    kv = np.where(t > 0, np.asarray(kv_bytes_per_rank(dep, k + t), dtype=np.float64), 0.0)
    return roofline_breakdown(dep, flops, t, kv, iteration_tokens_for(dep, t))


def compute_time(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0) -> Any:
    """Seconds of prefill compute on one GPU: ``max(FLOP time, HBM time) + all-reduce``."""
    return compute_breakdown(dep, new_tokens, cached_tokens).total


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
    compute = compute_breakdown(dep, new_tokens, cached_tokens)
    return _result(dep, compute.flops, transfer_time(dep, cached_tokens, new_tokens),
                   compute.total, mode)


def ttft_batch(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap = "serial",
) -> TTFTResult:
    """TTFT of a batch prefilled together in one iteration (the last axis of the broadcast T
    and K is the batch): the FLOPs and KV reads add up, the weights are read once for the whole
    batch (``iteration_tokens``, when set, must cover the batch's tokens), the loads and saves
    share the link; then the overlap mode applies."""
    mode = _check_overlap(overlap)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = np.broadcast_arrays(t, k)
    if t.ndim == 0:
        t, k = t[None], k[None]
    total = t.sum(axis=-1)
    flops = np.asarray(prefill_flops(dep.model, t, k, dep.mla_mode).total).sum(axis=-1)
    kv = np.where(t > 0, np.asarray(kv_bytes_per_rank(dep, k + t), dtype=np.float64), 0.0)
    compute = roofline_breakdown(dep, flops, total, kv.sum(axis=-1),
                                 iteration_tokens_for(dep, total))
    parts = transfer_breakdown(dep, k, t)
    paths = [np.asarray(path, dtype=np.float64) for path in np.broadcast_arrays(*parts.paths)]
    data = np.maximum.reduce([path.sum(axis=-1) for path in paths])
    transfer = (data + np.asarray(parts.scale_up_time).sum(axis=-1)
                + np.asarray(parts.latency_time).sum(axis=-1))
    return _result(dep, flops, transfer, compute.total, mode)
