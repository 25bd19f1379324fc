"""Kernel mode's table resolution: each op of a deployment's forward pass
(:func:`kvroof.cost.ops.forward_ops`) matched once to what times it (:class:`TimedOp`): its
measured kernel table, read along the op's size axis into a :class:`Curve` (a GEMM's, a fused
MoE's or an attention call's efficiency, an all-reduce's time: the tables' own interpolation,
:class:`kvroof.kernels.interpolate.LogCurve`), the element-wise memory rule, or its own roofline
with the reason there is no table. Timing the ops is
:mod:`kvroof.cost.kernel_op_time`; the rules are in :mod:`kvroof.cost.kernel_time`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from kvroof.cost.collectives import collective_bandwidth, collective_latency
from kvroof.cost.deployment import Deployment
from kvroof.cost.forward_op import Op
from kvroof.cost.kernel_prefix import PrefixRule, prefix_rule
from kvroof.kernels.interpolate import LogCurve as Curve
from kvroof.units import Kind, format_quantity

__all__ = ["DEFAULT_ALLREDUCE_BACKEND", "Curve", "TimedOp", "monotone_times", "resolve_op"]

DEFAULT_ALLREDUCE_BACKEND: Final = "vllm_graph"
"""The all-reduce backend without an engine profile: vLLM's, under CUDA graphs (the tables'
GEMM, attention and MoE rows are vLLM's too). aiconfigurator's collector calls vLLM's own
``tensor_model_parallel_all_reduce``, so the table holds vLLM's choice of kernel by size."""


@dataclass(frozen=True, eq=False)
class TimedOp:
    """An op with what times it: ``model`` ``kernels`` (a table: ``curve`` holds its
    efficiency, or an all-reduce's time, along the op's size axis, ``window`` an attention
    op's at the window coordinate; ``peak`` and ``hbm`` the table's roofline figures, which
    divide the op's own counts, :meth:`Op.work <kvroof.cost.forward_op.Op.work>`),
    ``roofline`` (no table, ``why`` in ``notes``) or ``memory rule`` (element-wise)."""

    op: Op
    model: str
    source: str
    notes: tuple[str, ...] = ()
    curve: Curve | None = None
    window: Curve | None = None
    peak: float = 0.0
    hbm: float = 0.0
    times: Curve | None = None
    """A GEMM's or a fused MoE's ``log`` seconds a call at the table's points along ``m``,
    made non-decreasing (:func:`monotone_times`), or an attention op's table call along ``S``;
    None for other ops."""
    prefix: PrefixRule | None = None
    """An attention op's rule for a cached prefix (the least scaled time at this ``K`` or any
    larger one, :mod:`kvroof.cost.kernel_prefix`); None for other ops and chunked layers."""


def monotone_times(op: Op, points: Any, efficiency: Any, peak: float, hbm: float) -> Curve:
    """The ``log`` seconds of one call of a per-token op at the table's ``points`` along ``m``
    (its roofline at the table's peaks over the measured efficiency, capped at 1), made
    non-decreasing by a running minimum from the largest size down: a kernel for fewer rows
    can always run padded to more rows, so no size takes longer than a larger one. Measured
    efficiencies at small ``m`` are noisy (a GEMM at 4 rows timed slower than at 6); between
    the points the time is interpolated linearly in ``log m`` and ``log`` seconds, which keeps
    it non-decreasing (:func:`kvroof.cost.kernel_op_time.gemm_seconds`)."""
    m = np.asarray(points, dtype=np.float64)
    flops, size = op.work(m)
    roof = np.maximum(np.asarray(flops, dtype=np.float64) / peak,
                      np.asarray(size, dtype=np.float64) / hbm)
    seconds = roof / np.minimum(np.asarray(efficiency, dtype=np.float64), 1.0)
    least = np.minimum.accumulate(seconds[::-1])[::-1]
    return Curve(m, np.log(least))


def _attention_times(op: Op, curve: Curve, windowed: Curve | None, window: float,
                     peak: float, hbm: float) -> Curve:
    """The ``log`` seconds of the table's own attention call (a prefill of ``S`` tokens, no
    prefix) at the table's points along ``S`` and at the window's edge, made non-decreasing
    as :func:`monotone_times` does (a call over fewer tokens can run padded to more, masked):
    the per-call floor of a request alone and the call a cached prefix is scaled from."""
    from kvroof.kernels.work import attention_work

    assert op.dtype is not None and op.kv_dtype is not None
    points = np.exp(curve.log_points)
    if windowed is not None and points[0] < window < points[-1]:
        points = np.unique(np.append(points, window))
    flops, size = attention_work(points, op.heads, op.kv_heads, op.head_dim, window, op.dtype,
                                 op.kv_dtype)
    eff = np.asarray(curve(points), dtype=np.float64)
    if windowed is not None:
        eff = np.where(points > window, windowed(points), eff)
    seconds = np.maximum(np.asarray(flops, dtype=np.float64) / peak,
                         np.asarray(size, dtype=np.float64) / hbm) / np.minimum(eff, 1.0)
    return Curve(points, np.log(_monotone(seconds)))


def _monotone(values: Any) -> Any:
    """An all-reduce's measured times along the message size, made non-decreasing by a running
    minimum from the largest message down (a message can always be padded to a larger one)."""
    v = np.asarray(values, dtype=np.float64)
    return np.minimum.accumulate(v[::-1])[::-1]


def _fallback(op: Op, dep: Deployment, why: str) -> TimedOp:
    if op.kind == "allreduce":
        source = (f"roofline: NCCL latency {format_quantity(collective_latency(dep), Kind.TIME)}"
                  f" + bus bandwidth {format_quantity(collective_bandwidth(dep), Kind.BANDWIDTH)}")
    else:
        eff = dep.compute_efficiency_source
        source = f"roofline at the achievable figures (compute: {eff}; HBM efficiency)"
    return TimedOp(op, "roofline", source, (why,) if why else ())


def _outside(result: Any, axes: Sequence[str]) -> list[str]:
    return [axis for axis in axes if bool(np.any(result.outside[axis]))]


def _variant(system: Any, op_name: str, key: Any) -> Any:
    table = system.tables[op_name]
    return next(v for v in table.variants if dict(v.key) == dict(key))


def resolve_op(op: Op, dep: Deployment, backend: str) -> TimedOp:
    """``op`` with its table curve, or its roofline fallback and the reason (``backend``: the
    all-reduce table's backend)."""
    import kvroof.kernels as kernels
    from kvroof.kernels.interpolate import interpolate

    if op.kind == "elementwise":
        return TimedOp(op, "memory rule", "bytes / (HBM x HBM efficiency) + 3 us "
                       "(aiconfigurator's memory-op rule)")
    if op.kind == "roofline" or (op.kind == "attention" and not op.table):
        return _fallback(op, dep, op.why)
    if op.kind in ("gemm", "moe") and op.dtype is None:
        return _fallback(op, dep, op.why)
    acc = dep.accelerator
    have = kernels.covered(acc)
    table_op = op.kind
    if table_op not in have:
        return _fallback(op, dep, f"no {table_op} table for {acc.name}")
    system = kernels.tables(acc)
    notes: list[str] = []
    try:
        if op.kind == "gemm":
            assert op.dtype is not None
            _, cov = kernels.gemm_efficiency(acc, 1.0, op.n, op.k, op.dtype)
            variant = _variant(system, "gemm", cov.key)
            points = variant.grid.points[variant.grid.axes.index("m")]
            result = interpolate(variant.grid, {"m": points, "n": op.n, "k": op.k})
            notes += [f"{axis} {getattr(op, axis):g} outside the measured grid (boundary held)"
                      for axis in _outside(result, ("n", "k"))]
            curve = Curve(points, result.values)
            peak, hbm = system.peak_flops[variant.peak], system.hbm_bandwidth
            return TimedOp(op, "kernels", cov.source, tuple(notes), curve, peak=peak, hbm=hbm,
                           times=monotone_times(op, points, result.values, peak, hbm))
        if op.kind == "moe":
            assert op.dtype is not None
            _, cov = kernels.moe_efficiency(acc, 1.0, int(op.hidden), op.inter_per_rank,
                                            op.experts, op.top_k, op.dtype, dep.moe_routing)
            variant = _variant(system, "moe", cov.key)
            points = variant.grid.points[variant.grid.axes.index("tokens")]
            result = interpolate(variant.grid, {"tokens": points,
                                                "inter_per_rank": op.inter_per_rank})
            notes += [f"{name} {asked:g} not measured, used {used:g}"
                      for name, (asked, used) in cov.substituted.items()]
            notes += [f"expert width per rank {op.inter_per_rank:g} outside the measured grid "
                      "(boundary held)" for _ in _outside(result, ("inter_per_rank",))]
            # the table's layer reads min(E, tokens top_k) experts (its derivation's count)
            bound = dataclasses.replace(op, experts_read="bound")
            peak, hbm = system.peak_flops[variant.peak], system.hbm_bandwidth
            return TimedOp(bound, "kernels", cov.source, tuple(notes),
                           Curve(points, result.values), peak=peak, hbm=hbm,
                           times=monotone_times(bound, points, result.values, peak, hbm))
        if op.kind == "attention":
            window = op.span if op.rule in ("window", "chunk") else 0.0
            assert op.kv_dtype is not None and op.dtype is not None
            _, cov = kernels.attention_efficiency(acc, 1.0, op.heads, op.kv_heads, op.head_dim,
                                                  window, op.dtype, op.kv_dtype)
            variant = _variant(system, "attention", cov.key)
            axes = variant.grid.axes
            points = variant.grid.points[axes.index("seq_len")]
            full = float(variant.grid.points[axes.index("window")][-1])
            coords = {"seq_len": points, "heads": op.heads, "kv_heads": op.kv_heads,
                      "window": full}
            result = interpolate(variant.grid, coords)
            notes += [f"{name} {asked:g} not measured, used {used:g}"
                      for name, (asked, used) in cov.substituted.items()]
            notes += [f"{axis} {getattr(op, axis):g} outside the measured grid (boundary held)"
                      for axis in _outside(result, ("heads", "kv_heads"))]
            windowed = None
            if 0 < window < full:
                coords["window"] = window
                windowed = Curve(points, interpolate(variant.grid, coords).values)
            if op.rule == "chunk":
                notes.append(f"chunked attention priced as a sliding window of {window:g}")
            notes.append("a cached prefix: the table at K + T scaled by the pairs the new "
                         "tokens score" + ("" if op.rule == "chunk" else
                                           ", least over this K and any larger"))
            curve = Curve(points, result.values)
            peak, hbm = system.peak_flops[variant.peak], system.hbm_bandwidth
            times = _attention_times(op, curve, windowed, window, peak, hbm)
            return TimedOp(op, "kernels", cov.source, tuple(notes), curve, windowed,
                           peak=peak, hbm=hbm, times=times,
                           prefix=prefix_rule(op, times, window, peak, hbm))
        # all-reduce: the time of one call along the message size, at TP GPUs
        _, cov = kernels.allreduce_time(acc, backend, dep.tp, 1.0)
        variant = _variant(system, "allreduce", cov.key)
        axes = variant.grid.axes
        points = variant.grid.points[axes.index("message_bytes")]
        result = interpolate(variant.grid, {"message_bytes": points, "num_gpus": float(dep.tp)})
        measured = ", ".join(f"{g:g}" for g in variant.grid.points[axes.index("num_gpus")])
        notes += [f"{dep.tp} GPUs outside the measured {measured} (boundary held)"
                  for _ in _outside(result, ("num_gpus",))]
        return TimedOp(op, "kernels", cov.source, tuple(notes),
                       Curve(points, _monotone(result.values)))
    except kernels.KernelTableError as error:
        return _fallback(op, dep, str(error))
