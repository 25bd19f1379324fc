"""Compute time of a prefill on one GPU: the GPU's own roofline.

compute (per GPU) = ``max(FLOP time, HBM time) + all-reduce time``:

- FLOP time = prefill FLOPs / (TP x peak x compute efficiency at T);
- HBM time = bytes one rank reads / (HBM bandwidth x HBM efficiency), the bytes being the
  request's share ``T / N`` of the weights an iteration of ``N`` tokens reads
  (:func:`kvroof.cost.weights.weights_read_per_rank`; ``N = iteration_tokens``, by default
  ``T``: the request alone) plus the KV of the ``K + T`` positions its attention reads
  (:func:`kvroof.cost.transfer.kv_bytes_per_rank`);
- all-reduce: two per layer for TP > 1 (:func:`kvroof.cost.collectives.allreduce_time`), the
  per-collective latency shared ``T / N`` like the weights.

The formula is evaluated once, in :func:`kvroof.cost.terms.roofline`; this module checks the
inputs and returns the parts as a :class:`ComputeBreakdown`. A deployment with ``compute_model``
``kernels`` (or ``auto`` on an accelerator with kernel tables) is timed op by op instead
(:mod:`kvroof.cost.kernel_time`): :func:`compute_breakdown` then returns a
:class:`~kvroof.cost.kernel_time.KernelBreakdown` (the same fields, and every op).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_value
from kvroof.cost.compute_result import ComputeBreakdown
from kvroof.cost.deployment import Deployment
from kvroof.cost.terms import ComputeParts, compute_parts, roofline
from kvroof.errors import KvroofError

__all__ = ["ComputeBreakdown", "compute_breakdown", "compute_time", "iteration_tokens_for",
           "roofline_breakdown"]


def iteration_tokens_for(dep: Deployment, new_tokens: Any) -> Any:
    """Tokens that share the weight read of the request's iteration: ``iteration_tokens`` (which
    must be at least ``T``), or ``None`` (the request alone)."""
    n = dep.terms.iteration_tokens
    if n is None:
        return None
    if np.any(np.asarray(n) < np.asarray(new_tokens)):
        raise KvroofError(
            f"iteration_tokens: {dep.iteration_tokens!r} is fewer than the request's new tokens "
            f"T (max {float(np.max(new_tokens)):g}); an iteration holds at least the request"
        )
    return n


def _breakdown(parts: ComputeParts) -> ComputeBreakdown:
    def out(value: Any) -> Any:
        return value if type(value) is float else scalar_or_array(
            np.asarray(value, dtype=np.float64))

    return ComputeBreakdown(flops=out(parts.flops), flop_time=out(parts.flop_time),
                            hbm_bytes=out(parts.hbm_bytes), weight_bytes=out(parts.weight_bytes),
                            hbm_time=out(parts.hbm_time), comm_time=out(parts.comm_time))


def roofline_breakdown(
    dep: Deployment, flops: Any, tokens: Any, kv_read: Any, iteration_tokens: Any = None
) -> ComputeBreakdown:
    """The GPU roofline for work of ``flops`` FLOPs (whole TP group) over ``tokens`` tokens
    that reads ``kv_read`` KV bytes per rank, when ``iteration_tokens`` tokens (default:
    ``tokens``) share one read of the weights (:func:`kvroof.cost.terms.roofline`)."""
    t = np.asarray(tokens, dtype=np.float64)
    n = None if iteration_tokens is None else np.asarray(iteration_tokens, dtype=np.float64)
    return _breakdown(roofline(dep.terms, np.asarray(flops, dtype=np.float64), t,
                               np.asarray(kv_read, dtype=np.float64), n))


def compute_breakdown(
    dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0
) -> ComputeBreakdown:
    """FLOP time, HBM time and all-reduce time of a prefill of ``new_tokens`` on top of
    ``cached_tokens`` on one GPU (its TP share)."""
    t = token_value("new_tokens", new_tokens)
    k = token_value("cached_tokens", cached_tokens)
    if dep.uses_kernels:  # compute_model kernels: op by op (kvroof.cost.kernel_time)
        from kvroof.cost.kernel_time import kernel_breakdown

        parts = kernel_breakdown(dep, t, k, iteration_tokens_for(dep, t))
        roof = _breakdown(compute_parts(dep.terms, t, k, iteration_tokens_for(dep, t)))
        return dataclasses.replace(parts, flops=roof.flops, hbm_bytes=roof.hbm_bytes,
                                   weight_bytes=roof.weight_bytes)
    return _breakdown(compute_parts(dep.terms, t, k, iteration_tokens_for(dep, t)))


def compute_time(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0) -> Any:
    """Seconds of prefill compute on one GPU: ``max(FLOP time, HBM time) + all-reduce`` (the
    roofline), or the sum of the ops' measured times (``compute_model`` kernels)."""
    if dep.uses_kernels:
        from kvroof.cost.kernel_time import kernel_compute_time

        t = token_value("new_tokens", new_tokens)
        k = token_value("cached_tokens", cached_tokens)
        value = kernel_compute_time(dep, t, k, iteration_tokens_for(dep, t))
        return value if type(value) is float else scalar_or_array(
            np.asarray(value, dtype=np.float64))
    return compute_breakdown(dep, new_tokens, cached_tokens).total
