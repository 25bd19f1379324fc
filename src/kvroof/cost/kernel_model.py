"""Kernel mode per deployment: its forward-pass ops, each resolved against the kernel tables
once (:class:`KernelModel`, cached with the deployment by :func:`kernel_model`), and their sum
for a request of ``T`` new tokens on ``K`` cached ones, alone or inside a busy iteration: the
per-token ops at the pass's size, the LM head on one logits row, the request's own attention
and MLA up-projection (:meth:`KernelModel.time`), op by op with the model that timed each
(:meth:`KernelModel.breakdown`). The rules are in :mod:`kvroof.cost.kernel_time`.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from kvroof.cost.checks import scalar_or_array, when_positive
from kvroof.cost.collectives import collective_bandwidth, collective_latency
from kvroof.cost.deployment import Deployment
from kvroof.cost.kernel_op_time import (
    SECONDS_BY_KIND,
    Rates,
    allreduce_seconds,
    attention_seconds,
    gemm_seconds,
)
from kvroof.cost.kernel_resolution import DEFAULT_ALLREDUCE_BACKEND, TimedOp, resolve_op
from kvroof.cost.kernel_result import OpTime, op_notes
from kvroof.cost.ops import forward_ops

__all__ = ["KernelModel", "alone", "kernel_model"]

_CACHE: Final = "_kvroof_kernel_model"


def alone(t: Any, iteration: Any) -> Any:
    """Whether a request of ``t`` new tokens runs alone: no ``iteration`` tokens given, or an
    iteration of just its own ``t`` tokens (``iteration_tokens == T`` is the request alone, as
    in the roofline, so its attention call keeps its per-call floor). A bool, or a mask where
    ``t`` or ``iteration`` is an array."""
    if iteration is None:
        return True
    mask = np.asarray(iteration) <= np.asarray(t)
    return bool(mask) if mask.ndim == 0 else mask


class KernelModel:
    """``dep``'s ops, each resolved against the kernel tables once (:func:`kernel_model` caches
    one per deployment); :meth:`time` adds them up for a request of ``T`` new tokens on ``K``
    cached ones (floats or broadcasting arrays)."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        engine = dep.engine
        backend = (engine.allreduce_backend if engine is not None
                   and engine.allreduce_backend is not None else DEFAULT_ALLREDUCE_BACKEND)
        self.backend: str = backend
        self.nccl_above: float | None = None if engine is None else engine.allreduce_nccl_above
        ops = [op for op in forward_ops(dep) if op.kind != "gemm" or (op.n > 0 and op.k > 0)]
        self.ops: tuple[TimedOp, ...] = tuple(resolve_op(op, dep, backend) for op in ops)
        self.nccl: TimedOp | None = None
        if self.nccl_above is not None:
            found = [top for top in self.ops if top.op.kind == "allreduce"]
            if found:
                self.nccl = resolve_op(found[0].op, dep, "nccl")
        self.token_ops = tuple(top for top in self.ops if top.op.scale == "tokens")
        self.logit_ops = tuple(top for top in self.ops if top.op.scale == "logits")
        self.position_ops = tuple(top for top in self.ops if top.op.scale == "positions")
        self.sequence_ops = tuple(top for top in self.ops if top.op.scale == "sequence")
        calibrated = dep.compute_efficiency is None and dep.calibration is not None
        self._fixed_rates: Rates | None = None if calibrated else self._rates(1.0)

    def _rates(self, t: Any) -> Rates:
        dep = self.dep
        compute = np.asarray(dep.peak_compute, dtype=np.float64) * np.asarray(
            dep.compute_efficiency_at(t), dtype=np.float64)
        hbm = np.asarray(dep.effective_hbm_bandwidth, dtype=np.float64)
        return Rates(scalar_or_array(compute), scalar_or_array(hbm), collective_latency(dep),
                      collective_bandwidth(dep), dep.tp)

    def rates(self, t: Any) -> Rates:
        """The fallback figures (achievable compute at ``t`` tokens, HBM, collectives)."""
        return self._fixed_rates if self._fixed_rates is not None else self._rates(t)

    def op_time(self, top: TimedOp, m: Any, rates: Rates) -> Any:
        """Seconds of one call of a per-token op at ``m`` tokens (an all-reduce above
        ``allreduce_nccl_above`` takes NCCL's time)."""
        value = SECONDS_BY_KIND[top.op.kind](top, m, rates)
        if top.op.kind == "allreduce" and self.nccl is not None and self.nccl_above is not None:
            size = m * top.op.bytes_per_token
            other = allreduce_seconds(self.nccl, m, rates)
            if type(size) is float:
                return other if size > self.nccl_above else value
            return np.where(size > self.nccl_above, other, value)
        return value

    def token_time(self, m: Any, rates: Rates) -> Any:
        """Seconds of every per-token op (all layers) in a pass of ``m`` tokens."""
        total: Any = 0.0
        for top in self.token_ops:
            total = total + top.op.layers * self.op_time(top, m, rates)
        return total

    def logits_time(self, rows: Any, rates: Rates) -> Any:
        total: Any = 0.0
        for top in self.logit_ops:
            total = total + top.op.layers * gemm_seconds(top, rows, rates)
        return total

    def sequence_time(self, t: Any, k: Any, rates: Rates, floor: Any = True) -> Any:
        """Seconds of the request's own ops: attention over its ``K + T`` keys (``floor``: its
        own call, a bool or a mask; see :func:`~kvroof.cost.kernel_op_time.attention_seconds`)
        and the MLA up-projection of its positions."""
        total: Any = 0.0
        for top in self.sequence_ops:
            total = total + top.op.layers * attention_seconds(top, t, k, rates, floor)
        for top in self.position_ops:
            total = total + top.op.layers * gemm_seconds(top, k + t, rates)
        return total

    def time(self, t: Any, k: Any, iteration: Any = None) -> Any:
        """Per-rank seconds of a prefill of ``t`` tokens on ``k`` cached ones, alone
        (``iteration`` None) or inside an iteration of ``iteration`` tokens."""
        rates = self.rates(t)
        if iteration is None:
            shared = self.token_time(t, rates) + self.logits_time(1.0, rates)
        else:
            shared = (t / iteration) * (self.token_time(iteration, rates)
                                        + self.logits_time(1.0, rates))
        return when_positive(t, shared + self.sequence_time(t, k, rates, alone(t, iteration)))

    def breakdown(self, t: Any, k: Any, iteration: Any = None) -> list[OpTime]:
        """Every op's seconds (all its layers) in that prefill, with the model that timed it."""
        rates = self.rates(t)
        rows = []
        for top in self.ops:
            scale = top.op.scale
            if scale == "sequence":
                seconds = attention_seconds(top, t, k, rates, alone(t, iteration))
                work = top.op.work(0.0, t, k)
            elif scale == "positions":
                seconds = gemm_seconds(top, k + t, rates)
                work = top.op.work(k + t, t, k)
            else:
                m = 1.0 if scale == "logits" else (t if iteration is None else iteration)
                seconds = self.op_time(top, m, rates)
                work = top.op.work(m, t, k)
                if iteration is not None:
                    seconds = (t / iteration) * seconds
                    work = ((t / iteration) * work[0], (t / iteration) * work[1])
            seconds = when_positive(t, top.op.layers * seconds)
            rows.append(OpTime(top, scalar_or_array(np.asarray(seconds, dtype=np.float64)),
                               top.op.layers * work[0], top.op.layers * work[1],
                               op_notes(top, t, k, iteration)))
        return rows


def kernel_model(dep: Deployment) -> KernelModel:
    """``dep``'s :class:`KernelModel`, built on first use and kept with the deployment."""
    found = dep.__dict__.get(_CACHE)
    if found is None:
        found = KernelModel(dep)
        object.__setattr__(dep, _CACHE, found)
    return found
