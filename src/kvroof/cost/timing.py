"""Compute time (the GPU's own roofline), and time to first token (prefill only) with and
without overlap.

- compute (per GPU): :func:`kvroof.cost.compute.compute_time` (its module says the formula:
  ``max(FLOP time, HBM time) + all-reduce time``).
- transfer: :func:`kvroof.cost.transfer.transfer_time`.
- overlap ``serial`` (the paper's Eq. 5): ``t_x + t_c``; ``ideal``: ``max(t_x, t_c)``;
  ``layerwise`` (load layer ``i+1`` while computing layer ``i``), with ``x = t_x/L`` and
  ``c = t_c/L``: ``x + (L-1) x max(x, c) + c``. Always ``serial >= layerwise >= ideal``.
  An overlap efficiency ``eta`` below 1 (a calibrated system's, or the deployment's
  ``overlap_efficiency``) hides only ``eta`` of the shorter side: each ``max(a, b)`` above
  becomes ``max(a, b) + (1 - eta) x min(a, b)``.

Per request (:func:`ttft`, :func:`ttft_batch`), two engine behaviours: with
``reuse_block_tokens`` B the cached prefix is reused in whole blocks, so the ``K mod B`` cached
tokens after the last whole block are recomputed (``K -> K - K mod B``, ``T -> T + K mod B``), and
``request_overhead`` seconds (serving work outside the prefill: scheduling, the call into the
engine) are added to the TTFT. Neither enters :func:`compute_time`, :func:`transfer_time` or
kappa_crit, which take T and K as given. The default overlap is the deployment's engine's (its
layer-wise or whole-prefix loading), else ``serial``. With ``ttft_clock: client`` the engine's
serving overheads are added too (:mod:`kvroof.cost.serving`): the TTFT a client measures, not
the kernel time; the result says which (``clock``), and which compute model timed the compute
(``compute_model``: the roofline, or the kernel tables op by op, :mod:`kvroof.cost.kernel_time`).

Result fields: ttft, compute, transfer, exposed transfer (``ttft - compute - request
overhead``: the transfer time not hidden behind compute), ``p_oh = transfer / compute`` (inf
when there is transfer but no compute, 0 when there is neither), transfer share (``exposed /
ttft``; for serial this is the paper's ``P_OH / (1 + P_OH)``), bound (``"transfer"`` where
transfer > compute, else ``"compute"``), achieved FLOP/s per GPU (``FLOPs / TP / ttft``) and
compute utilization (achieved / peak).

Compute time is :mod:`kvroof.cost.compute`, the overlap modes are :mod:`kvroof.cost.overlap` and
the result is :mod:`kvroof.cost.ttft_result`; their names are re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.caller_warnings import warn_caller
from kvroof.cost.checks import scalar_or_array, token_count, token_value
from kvroof.cost.collectives import allreduce_time
from kvroof.cost.compute import (
    ComputeBreakdown,
    compute_breakdown,
    compute_time,
    iteration_tokens_for,
    roofline_breakdown,
)
from kvroof.cost.deployment import Deployment
from kvroof.cost.flop_terms import prefill_flops_total
from kvroof.cost.flops import prefill_flops
from kvroof.cost.overlap import (
    OVERLAP_MODES,
    Overlap,
    check_overlap,
    combine_overlap,
    default_overlap,
    overlapped_time,
)
from kvroof.cost.serving import serving_overhead
from kvroof.cost.terms import compute_parts, transfer_parts
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
from kvroof.cost.ttft_result import TTFTResult
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
    "default_overlap",
    "iteration_tokens_for",
    "reused_tokens",
    "roofline_breakdown",
    "ttft",
    "ttft_batch",
]

_OVERFLOW = ("ttft: not computable: a setting is so extreme that the times overflow a float "
             "(look for values such as a compute efficiency of 1e-300 or a latency of 1e300 s)")


def _result(
    dep: Deployment, flops: Any, transfer: Any, compute: Any, overlap: Overlap,
    new_tokens: Any = None, cached_tokens: Any = None, serving: Any = 0.0,
    compute_model: str = "roofline",
) -> TTFTResult:
    eta = dep.resolved_overlap_efficiency
    overhead: Any = dep.request_overhead
    clock = dep.ttft_clock
    if (type(transfer) is float and type(compute) is float and type(flops) is float
            and type(overhead) in (float, int) and type(serving) is float):
        total = overlapped_time(transfer, compute, dep.model.num_layers, overlap, eta)
        if not math.isfinite(total):
            raise KvroofError(_OVERFLOW)
        peak = dep.terms.peak_rate / dep.tp
        return TTFTResult(total + overhead + serving, compute, transfer, flops, overlap, dep.tp,
                          peak, new_tokens, cached_tokens, float(overhead), serving,
                          compute_model, clock)
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    o = np.asarray(overhead, dtype=np.float64)
    total = np.asarray(overlapped_time(x, c, dep.model.num_layers, overlap,
                                       eta if type(eta) is float else np.asarray(eta))) + o
    served = np.asarray(serving, dtype=np.float64)
    if served.ndim or float(served):
        total = total + served
    if not np.isfinite(total).all():
        raise KvroofError(_OVERFLOW)
    shape = np.broadcast_shapes(x.shape, c.shape, np.shape(flops), o.shape, served.shape)
    return TTFTResult(
        scalar_or_array(np.broadcast_to(total, shape).copy() if total.shape != shape else total),
        scalar_or_array(np.broadcast_to(c, shape)),
        scalar_or_array(np.broadcast_to(x, shape)),
        scalar_or_array(np.broadcast_to(np.asarray(flops, dtype=np.float64), shape)),
        overlap, dep.tp, np.asarray(dep.peak_compute, dtype=np.float64), new_tokens,
        cached_tokens, float(o) if o.ndim == 0 else scalar_or_array(np.broadcast_to(o, shape)),
        float(served) if served.ndim == 0 else scalar_or_array(np.broadcast_to(served, shape)),
        compute_model, clock,
    )


def reused_tokens(dep: Deployment, new_tokens: Any, cached_tokens: Any) -> tuple[Any, Any]:
    """``(T, K)`` as the engine runs them: with ``reuse_block_tokens`` B only whole blocks of
    the cached prefix are reused and the other ``K mod B`` cached tokens are recomputed
    (validated token counts in, the same kind out)."""
    block = dep.reuse_block_tokens
    if block is None or block == 1:
        return new_tokens, cached_tokens
    partial = cached_tokens % block
    return new_tokens + partial, cached_tokens - partial


def ttft(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap | None = None,
) -> TTFTResult:
    """TTFT of one request of ``new_tokens`` (T) on top of ``cached_tokens`` (K) loaded from
    host memory. T and K broadcast (a 1000 x 1000 grid is one call). ``overlap`` defaults to
    the engine's (:func:`default_overlap`); ``reuse_block_tokens`` and ``request_overhead``
    apply (module docstring). A deployment that does not fit the weights and the KV of
    ``T + K`` tokens is computed regardless, with a
    :class:`~kvroof.cost.memory_fit.DoesNotFitWarning`; a ``bandwidth`` override capped by the
    host DRAM gives a :class:`~kvroof.cost.caller_warnings.BandwidthCappedWarning` (once per
    call each; :mod:`kvroof.cost.caller_warnings`)."""
    mode = check_overlap(default_overlap(dep) if overlap is None else overlap)
    t = token_value("new_tokens", new_tokens)
    k = token_value("cached_tokens", cached_tokens)
    run_t, run_k = reused_tokens(dep, t, k)
    terms = dep.terms
    iteration = iteration_tokens_for(dep, run_t)
    model = "roofline"
    if dep.uses_kernels:  # compute op by op from the kernel tables
        from kvroof.cost.kernel_time import kernel_compute_time

        model = "kernels"
        flops: Any = prefill_flops_total(terms.flops, run_t, run_k)
        compute_total = kernel_compute_time(dep, run_t, run_k, iteration)
    else:
        compute = compute_parts(terms, run_t, run_k, iteration)
        flops, compute_total = compute.flops, compute.total
    transfer = (transfer_time(dep, run_k, run_t) if terms.tiers
                else transfer_parts(terms, run_k, run_t).total)
    serving = serving_overhead(dep, t + k)
    result = _result(dep, flops, transfer, compute_total, mode, t, k, serving, model)
    warn_caller(dep, "ttft", t + k)
    return result


def ttft_batch(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap | None = None,
) -> TTFTResult:
    """TTFT of a batch prefilled together in one iteration (the last axis of the broadcast T
    and K is the batch): the FLOPs and KV reads add up, the weights are read once for the whole
    batch (``iteration_tokens``, when set, must cover the batch's tokens), the loads and saves
    share the link; then the overlap mode applies (default: the engine's). Each request's
    prefix is reused in whole ``reuse_block_tokens`` blocks; ``request_overhead`` is added once."""
    mode = check_overlap(default_overlap(dep) if overlap is None else overlap)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = reused_tokens(dep, t, k)
    t, k = np.broadcast_arrays(t, k)
    if t.ndim == 0:
        t, k = t[None], k[None]
    total = t.sum(axis=-1)
    flops = np.asarray(prefill_flops(dep.model, t, k, dep.mla_mode).total).sum(axis=-1)
    kv = np.where(t > 0, np.asarray(kv_bytes_per_rank(dep, k + t), dtype=np.float64), 0.0)
    iteration = iteration_tokens_for(dep, total)
    model = "roofline"
    if dep.uses_kernels:
        from kvroof.cost.kernel_time import kernel_batch_time

        model = "kernels"
        compute_total = kernel_batch_time(dep, np.asarray(t, dtype=np.float64),
                                          np.asarray(k, dtype=np.float64), iteration)
    else:
        compute_total = roofline_breakdown(dep, flops, total, kv.sum(axis=-1), iteration).total
    parts = transfer_breakdown(dep, k, t)
    paths = [np.asarray(path, dtype=np.float64) for path in np.broadcast_arrays(*parts.paths)]
    data = np.maximum.reduce([path.sum(axis=-1) for path in paths])
    transfer = (data + np.asarray(parts.scale_up_time).sum(axis=-1)
                + np.asarray(parts.latency_time).sum(axis=-1))
    serving = serving_overhead(dep, (t + k).sum(axis=-1))
    result = _result(dep, flops, transfer, compute_total, mode, serving=serving,
                     compute_model=model)
    warn_caller(dep, "ttft_batch", (t + k).sum(axis=-1))
    return result
