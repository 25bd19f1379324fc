"""Kernel mode: a prefill's (or an iteration's) compute time as the sum of its ops' measured
times, from the kernel tables of :mod:`kvroof.kernels` (``compute_model: kernels``).

Every op of :func:`kvroof.cost.ops.forward_ops` is timed on its own, per rank, and the times
add up (no overlap between kernels):

- a GEMM, an attention call or a fused MoE layer with a table: its roofline time at the peaks
  stored with the table (``max(FLOPs / peak of its data type, bytes / HBM bandwidth)``, the
  counts of :mod:`kvroof.kernels.work`) over the measured efficiency there, interpolated in the
  logarithm of its size; an efficiency above 1 (a benchmark whose operands stayed in L2) is
  capped at 1, so no op runs faster than its roofline at peak;
- attention over a cached prefix: the tables time prefills without one, so the call over ``K``
  cached and ``T`` new tokens is the table's time at sequence length ``K + T`` scaled by the
  share of that sequence's (query, key) pairs the new tokens score (aiconfigurator's own rule,
  ``prefix_correction`` in ``aic-core/rust/aiconfigurator-core/src/operators/attention.rs`` at
  the tables' commit), taken as the least such time at this ``K`` or any larger one (a call
  over fewer cached tokens can run as one over more, masked, so the time never falls as the
  prefix grows: :mod:`kvroof.cost.kernel_prefix`; not for a chunked layer, whose work falls as
  the prefix crosses a chunk), and never less than the table's time for ``T`` tokens alone (the
  call's floor) or its own roofline at peak (reading the cached keys and values);
- an all-reduce of ``m x hidden`` 16-bit activations: the measured time of the engine's
  backend (``Engine.allreduce_backend``, vLLM's when no engine says: the tables' engine) among
  the TP ranks, NCCL's above ``Engine.allreduce_nccl_above``;
- an element-wise kernel: ``bytes / (HBM x HBM efficiency) + 3 us`` (aiconfigurator's memory-op
  rule: ``mem_bw_empirical_scaling_factor`` 0.8 and ``mem_empirical_constant_latency`` 3 us in
  its ``systems/*.yaml``, ``mem_op_latency_ms`` in ``operators/attention.rs``);
- an op the tables do not cover (MLA and sparse attention, linear attention, a data type or an
  accelerator without tables): its own roofline at the deployment's achievable figures (the
  peak times the compute efficiency, HBM times the HBM efficiency; the collectives' latency
  and bus bandwidth for an all-reduce), and the result says so, op by op
  (:class:`OpTime`).

A request alone runs the per-token ops at ``m = T``; inside a busy iteration of ``N`` tokens
(``iteration_tokens``) it pays ``T / N`` of their time at ``m = N`` (the weight reads, the
kernels' floors and the all-reduces are shared), while its attention and MLA up-projection are
its own: alone (``iteration_tokens`` unset, or equal to ``T``: an iteration of the request's own
tokens is the request alone, as in the roofline), an attention call costs at least the table's
call of its ``T`` tokens (the per-call floor); inside an iteration the call is shared by the
iteration's sequences and that floor is not charged to the request. The LM head runs on one
logits row a request.

The mode is built in modules, each one step: the op list (:mod:`kvroof.cost.ops`); each op
matched once to its table, or to its fallback and the reason
(:mod:`kvroof.cost.kernel_resolution`: :class:`Curve`, :class:`TimedOp`; an attention op's
rule for a cached prefix, :mod:`kvroof.cost.kernel_prefix`); one call of an op timed
(:mod:`kvroof.cost.kernel_op_time`); the per-op report (:mod:`kvroof.cost.kernel_result`:
:class:`OpTime`, :class:`KernelBreakdown`); a deployment's resolved ops and their sum for one
request (:mod:`kvroof.cost.kernel_model`: :class:`KernelModel`); a serving iteration
(:mod:`kvroof.cost.kernel_iteration`). This module holds the prefill's entry points
(:func:`kernel_compute_time`, :func:`kernel_breakdown`, :func:`kernel_batch_time`) and
re-exports the names of the others, so every name keeps its old path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.checks import scalar_or_array
from kvroof.cost.deployment import Deployment
from kvroof.cost.kernel_iteration import kernel_iteration
from kvroof.cost.kernel_model import KernelModel, alone, kernel_model
from kvroof.cost.kernel_op_time import ELEMENTWISE_FLOOR, Rates
from kvroof.cost.kernel_resolution import DEFAULT_ALLREDUCE_BACKEND, Curve, TimedOp
from kvroof.cost.kernel_result import KernelBreakdown, OpTime, breakdown_from_ops

__all__ = [
    "DEFAULT_ALLREDUCE_BACKEND",
    "ELEMENTWISE_FLOOR",
    "Curve",
    "KernelBreakdown",
    "KernelModel",
    "OpTime",
    "TimedOp",
    "kernel_batch_time",
    "kernel_breakdown",
    "kernel_compute_time",
    "kernel_iteration",
    "kernel_model",
    "uses_kernels",
]

FloatArray = NDArray[np.float64]


def uses_kernels(dep: Deployment) -> bool:
    """Whether ``dep``'s compute is timed op by op (``kernels``, or ``auto`` on an accelerator
    with kernel tables): :attr:`DeploymentSettings.uses_kernels`."""
    return dep.uses_kernels


def kernel_compute_time(dep: Deployment, t: Any, k: Any, iteration: Any = None) -> Any:
    """Per-rank compute seconds of a prefill of ``t`` tokens on ``k`` cached ones in kernel
    mode (validated token counts; ``iteration``: the tokens sharing the pass, or None)."""
    return kernel_model(dep).time(t, k, iteration)


def kernel_breakdown(dep: Deployment, t: Any, k: Any, iteration: Any = None
                     ) -> KernelBreakdown:
    """:func:`kernel_compute_time` with every op's time, model and source."""
    rows = kernel_model(dep).breakdown(t, k, iteration)
    total: Any = 0.0
    for row in rows:
        total = total + row.seconds
    return breakdown_from_ops(dep, rows, total)


def kernel_batch_time(dep: Deployment, t: FloatArray, k: FloatArray, iteration: Any = None
                      ) -> Any:
    """Per-rank seconds of a batch prefilled in one pass (the last axis of ``t`` and ``k`` is
    the batch): per-token ops on the batch's tokens (``T/N`` of a pass of ``N`` inside a busy
    iteration), one logits row a request, each request's attention its own."""
    model = kernel_model(dep)
    total_t = t.sum(axis=-1)
    rates = model.rates(total_t)
    rows = np.count_nonzero(t > 0, axis=-1).astype(np.float64)
    if iteration is None:
        shared = model.token_time(total_t, rates) + model.logits_time(rows, rates)
    else:
        shared = (total_t / iteration) * (model.token_time(iteration, rates)
                                          + model.logits_time(rows, rates))
    expand = rates if np.ndim(rates.compute) == 0 else Rates(
        np.asarray(rates.compute)[..., None], rates.hbm, rates.latency, rates.bus, rates.ranks)
    one = t.shape[-1] == 1
    floor = one and (True if iteration is None
                     else np.asarray(alone(total_t, iteration), dtype=bool)[..., None])
    own = np.where(t > 0, model.sequence_time(t, k, expand, floor), 0.0).sum(axis=-1)
    return scalar_or_array(np.asarray(np.where(total_t > 0, shared + own, 0.0),
                                      dtype=np.float64))

