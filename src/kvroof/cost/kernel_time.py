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
  the tables' commit), and never less than the table's time for ``T`` tokens alone (the call's
  floor) or its own roofline at peak (reading the cached keys and values);
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
its own: alone, an attention call costs at least the table's call of its ``T`` tokens (the
per-call floor); inside an iteration the call is shared by the iteration's sequences and that
floor is not charged to the request. The LM head runs on one logits row a request.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.checks import maximum, minimum, scalar_or_array, when_positive
from kvroof.cost.collectives import collective_bandwidth, collective_latency
from kvroof.cost.compute_result import ComputeBreakdown
from kvroof.cost.deployment import Deployment
from kvroof.cost.ops import Op, forward_ops, positions_read, query_key_pairs
from kvroof.cost.weight_bytes import touched_share
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

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

ELEMENTWISE_FLOOR: Final = 3e-6
"""Seconds every element-wise kernel costs beyond its bytes (aiconfigurator's
``mem_empirical_constant_latency``, every NVIDIA system file at commit 095f58a)."""
DEFAULT_ALLREDUCE_BACKEND: Final = "vllm_graph"
"""The all-reduce backend without an engine profile: vLLM's, under CUDA graphs (the tables'
GEMM, attention and MoE rows are vLLM's too). aiconfigurator's collector calls vLLM's own
``tensor_model_parallel_all_reduce``, so the table holds vLLM's choice of kernel by size."""
_CACHE: Final = "_kvroof_kernel_model"

FloatArray = NDArray[np.float64]


def uses_kernels(dep: Deployment) -> bool:
    """Whether ``dep``'s compute is timed op by op (``kernels``, or ``auto`` on an accelerator
    with kernel tables): :attr:`DeploymentSettings.uses_kernels`."""
    return dep.uses_kernels


class Curve:
    """Values at increasing positive points, linear in the logarithm of the point between them
    and held beyond the ends (the kernel tables' rule along one axis)."""

    __slots__ = ("_lp", "_v", "high", "log_points", "low", "values")

    def __init__(self, points: Sequence[float] | FloatArray, values: Sequence[float] | FloatArray
                 ) -> None:
        p = np.asarray(points, dtype=np.float64)
        self.log_points = np.log(p)
        self.values = np.asarray(values, dtype=np.float64)
        self._lp: list[float] = self.log_points.tolist()
        self._v: list[float] = self.values.tolist()
        self.low = float(p[0])
        self.high = float(p[-1])

    def at(self, x: float) -> float:
        """The value at one point (pure Python)."""
        lp, v = self._lp, self._v
        if x <= 0.0:
            return v[0]
        lx = math.log(x)
        if lx <= lp[0]:
            return v[0]
        if lx >= lp[-1]:
            return v[-1]
        i = bisect.bisect_right(lp, lx) - 1
        return v[i] + (v[i + 1] - v[i]) * (lx - lp[i]) / (lp[i + 1] - lp[i])

    def __call__(self, x: Any) -> Any:
        if type(x) is float:
            return self.at(x)
        with np.errstate(divide="ignore"):
            return np.interp(np.log(x), self.log_points, self.values)


@dataclass(frozen=True, eq=False)
class TimedOp:
    """An op with what times it: ``model`` ``kernels`` (a table: ``curve`` holds its
    efficiency, or an all-reduce's time, along the op's size axis, ``window`` an attention
    op's at the window coordinate; ``peak`` and ``hbm`` the table's roofline figures, ``act``
    and ``wgt`` bytes per activation and per weight or KV element), ``roofline`` (no table,
    ``why`` in ``notes``) or ``memory rule`` (element-wise)."""

    op: Op
    model: str
    source: str
    notes: tuple[str, ...] = ()
    curve: Curve | None = None
    window: Curve | None = None
    peak: float = 0.0
    hbm: float = 0.0
    act: float = 2.0
    wgt: float = 2.0


@dataclass(frozen=True)
class _Rates:
    compute: Any
    hbm: Any
    latency: float
    bus: float
    ranks: int


# --- resolving ops against the tables ------------------------------------------------------

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


def _resolve(op: Op, dep: Deployment, backend: str) -> TimedOp:
    """``op`` with its table curve, or its roofline fallback and the reason."""
    import kvroof.kernels as kernels
    from kvroof.kernels.interpolate import interpolate
    from kvroof.kernels.work import GEMM_DTYPES, MOE_DTYPES

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
            info = GEMM_DTYPES[op.dtype]
            notes += [f"{axis} {getattr(op, axis):g} outside the measured grid (boundary held)"
                      for axis in _outside(result, ("n", "k"))]
            curve = Curve(points, result.values)
            return TimedOp(op, "kernels", cov.source, tuple(notes), curve,
                           peak=system.peak_flops[variant.peak], hbm=system.hbm_bandwidth,
                           act=info.activation_bytes, wgt=info.weight_bytes)
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
            info = MOE_DTYPES[op.dtype]
            return TimedOp(op, "kernels", cov.source, tuple(notes),
                           Curve(points, result.values), peak=system.peak_flops[variant.peak],
                           hbm=system.hbm_bandwidth, act=info.activation_bytes,
                           wgt=info.weight_bytes)
        if op.kind == "attention":
            window = op.span if op.rule in ("window", "chunk") else 0.0
            assert op.kv_dtype is not None
            _, cov = kernels.attention_efficiency(acc, 1.0, op.heads, op.kv_heads, op.head_dim,
                                                  window, "bf16", op.kv_dtype)
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
                         "tokens score")
            kv = 1.0 if op.kv_dtype == "fp8" else 2.0
            return TimedOp(op, "kernels", cov.source, tuple(notes),
                           Curve(points, result.values), windowed,
                           peak=system.peak_flops[variant.peak], hbm=system.hbm_bandwidth,
                           act=2.0, wgt=kv)
        # all-reduce: the time of one call along the message size, at TP GPUs
        _, cov = kernels.allreduce_time(acc, backend, dep.tp, 1.0)
        variant = _variant(system, "allreduce", cov.key)
        axes = variant.grid.axes
        points = variant.grid.points[axes.index("message_bytes")]
        result = interpolate(variant.grid, {"message_bytes": points, "num_gpus": float(dep.tp)})
        measured = ", ".join(f"{g:g}" for g in variant.grid.points[axes.index("num_gpus")])
        notes += [f"{dep.tp} GPUs outside the measured {measured} (boundary held)"
                  for _ in _outside(result, ("num_gpus",))]
        return TimedOp(op, "kernels", cov.source, tuple(notes), Curve(points, result.values))
    except kernels.KernelTableError as error:
        return _fallback(op, dep, str(error))


# --- timing one op ---------------------------------------------------------------------------

def _gemm(top: TimedOp, m: Any, rates: _Rates) -> Any:
    op = top.op
    n, k = op.n, op.k
    flops = 2.0 * m * n * k
    if top.curve is not None:
        size = m * k * top.act + k * n * top.wgt + 2.0 * m * n
        eff = top.curve(m)
        return maximum(flops / top.peak, size / top.hbm) / (
            (eff if eff < 1.0 else 1.0) if type(eff) is float else np.minimum(eff, 1.0))
    size = m * k * 2.0 + k * n * op.weight_bytes + 2.0 * m * n
    return maximum(flops / rates.compute, size / rates.hbm)


def _moe(top: TimedOp, m: Any, rates: _Rates) -> Any:
    op = top.op
    h, i, e, top_k = op.hidden, op.inter_per_rank, float(op.experts), float(op.top_k)
    flops = 6.0 * m * top_k * h * i
    if top.curve is not None:
        size = minimum(e, m * top_k) * 3.0 * h * i * top.wgt + 2.0 * top.act * m * h
        eff = top.curve(m)
        return maximum(flops / top.peak, size / top.hbm) / (
            (eff if eff < 1.0 else 1.0) if type(eff) is float else np.minimum(eff, 1.0))
    touched = e * touched_share(1.0 - top_k / e, m)
    size = touched * 3.0 * h * i * op.weight_bytes + 4.0 * m * h
    return maximum(flops / rates.compute, size / rates.hbm)


def _allreduce(top: TimedOp, m: Any, rates: _Rates) -> Any:
    size = m * top.op.bytes_per_token
    curve = top.curve
    if curve is not None:
        scale = maximum(size / curve.high, 1.0) if type(size) is float else np.maximum(
            size / curve.high, 1.0)
        return when_positive(size, curve(size) * scale)
    n = rates.ranks
    return when_positive(size, rates.latency + 2.0 * (n - 1) / n * size / rates.bus)


def _elementwise(top: TimedOp, m: Any, rates: _Rates) -> Any:
    return m * top.op.bytes_per_token / rates.hbm + ELEMENTWISE_FLOOR


def _roofline_op(top: TimedOp, m: Any, rates: _Rates) -> Any:
    op = top.op
    return maximum(op.flops_per_token * m / rates.compute,
                   (op.bytes_per_token * m + op.fixed_bytes) / rates.hbm)


_BY_KIND: Final[dict[str, Callable[[TimedOp, Any, _Rates], Any]]] = {
    "gemm": _gemm, "moe": _moe, "allreduce": _allreduce, "elementwise": _elementwise,
    "roofline": _roofline_op,
}


def _table_pairs(window: float, s: Any) -> Any:
    """Pairs of the table's own call: ``s`` tokens, no prefix, at most ``window`` keys a query
    (:func:`kvroof.kernels.work.attention_pairs`)."""
    full = s * (s + 1.0) / 2.0
    if not window:
        return full
    windowed = window * (window + 1.0) / 2.0 + (s - window) * window
    if type(s) is float:
        return windowed if window < s else full
    return np.where(window < s, windowed, full)


def _table_time(top: TimedOp, s: Any) -> Any:
    """The table's time of one attention call over ``s`` tokens without a prefix."""
    op = top.op
    window = op.span if op.rule in ("window", "chunk") else 0.0
    flops = op.flops_per_pair * _table_pairs(window, s)
    size = s * (op.bytes_per_token + op.bytes_per_position)
    assert top.curve is not None
    eff = top.curve(s)
    if top.window is not None:
        windowed = top.window(s)
        eff = (windowed if s > window else eff) if type(s) is float else np.where(
            s > window, windowed, eff)
    eff = (eff if eff < 1.0 else 1.0) if type(eff) is float else np.minimum(eff, 1.0)
    return maximum(flops / top.peak, size / top.hbm) / eff


def _attention(top: TimedOp, t: Any, k: Any, rates: _Rates, floor: bool = True) -> Any:
    """Seconds of one attention call of ``t`` new tokens over ``k`` cached ones; ``floor``: the
    call is the request's own (alone), so it costs at least the table's call of ``t`` tokens."""
    op = top.op
    if top.curve is None:
        flops, size = op.work(0.0, t, k)
        return maximum(flops / rates.compute, size / rates.hbm)
    if np.ndim(t) == 0 and np.ndim(k) == 0:
        return _attention_scalar(top, float(t), float(k), floor)
    return _attention_array(top, np.asarray(t, dtype=np.float64), np.asarray(k, dtype=np.float64),
                            floor)


def _attention_scalar(top: TimedOp, t: float, k: float, floor: bool = True) -> float:
    op = top.op
    s = t + k
    if s <= 0.0:
        return 0.0
    window = op.span if op.rule in ("window", "chunk") else 0.0
    pairs = query_key_pairs(op.rule, op.span, t, k)
    size = op.bytes_per_token * t + op.bytes_per_position * positions_read(op.rule, op.span, t, k)
    roof = max(op.flops_per_pair * pairs / top.peak, size / top.hbm)
    scaled = _table_time(top, s) * pairs / _table_pairs(window, s)
    least = _table_time(top, t) if (floor and t > 0.0) else 0.0
    return float(max(scaled, least, roof))


def _attention_array(top: TimedOp, t: FloatArray, k: FloatArray, floor: bool = True
                     ) -> FloatArray:
    """:func:`_attention_scalar` on broadcasting arrays, in few passes: with ``f`` FLOPs a pair,
    the table's time at ``S = K + T`` scaled by ``pairs / pairs(S)`` is ``pairs x max(f / P,
    S b / (pairs(S) H)) / eff(S)`` (``b`` bytes a token of the table's call)."""
    op = top.op
    assert top.curve is not None
    window = op.span if op.rule in ("window", "chunk") else 0.0
    s = t + k
    pairs = query_key_pairs(op.rule, op.span, t, k)
    eff = top.curve(s)
    if top.window is not None:
        eff = np.where(s > window, top.window(s), eff)
    np.minimum(eff, 1.0, out=eff)
    per_token = (op.bytes_per_token + op.bytes_per_position) / top.hbm
    with np.errstate(divide="ignore", invalid="ignore"):
        if op.rule == "full":
            memory = (2.0 * per_token) / (s + 1.0)
        else:
            memory = s * per_token / _table_pairs(window, s)
        scaled = np.maximum(memory, op.flops_per_pair / top.peak)
        scaled *= pairs
        scaled /= eff
    read = positions_read(op.rule, op.span, t, k)
    roof = (op.bytes_per_token / top.hbm) * t + (op.bytes_per_position / top.hbm) * read
    np.maximum(scaled, roof, out=scaled)
    if floor:
        np.maximum(scaled, np.where(t > 0, _table_time(top, t), 0.0), out=scaled)
    return np.where(s > 0, scaled, 0.0) if bool(np.any(s <= 0)) else scaled


# --- a deployment's kernel model ----------------------------------------------------------------

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
        self.ops: tuple[TimedOp, ...] = tuple(_resolve(op, dep, backend) for op in ops)
        self.nccl: TimedOp | None = None
        if self.nccl_above is not None:
            found = [top for top in self.ops if top.op.kind == "allreduce"]
            if found:
                self.nccl = _resolve(found[0].op, dep, "nccl")
        self.token_ops = tuple(top for top in self.ops if top.op.scale == "tokens")
        self.logit_ops = tuple(top for top in self.ops if top.op.scale == "logits")
        self.position_ops = tuple(top for top in self.ops if top.op.scale == "positions")
        self.sequence_ops = tuple(top for top in self.ops if top.op.scale == "sequence")
        calibrated = dep.compute_efficiency is None and dep.calibration is not None
        self._fixed_rates: _Rates | None = None if calibrated else self._rates(1.0)

    def _rates(self, t: Any) -> _Rates:
        dep = self.dep
        compute = np.asarray(dep.peak_compute, dtype=np.float64) * np.asarray(
            dep.compute_efficiency_at(t), dtype=np.float64)
        hbm = np.asarray(dep.effective_hbm_bandwidth, dtype=np.float64)
        return _Rates(scalar_or_array(compute), scalar_or_array(hbm), collective_latency(dep),
                      collective_bandwidth(dep), dep.tp)

    def rates(self, t: Any) -> _Rates:
        """The fallback figures (achievable compute at ``t`` tokens, HBM, collectives)."""
        return self._fixed_rates if self._fixed_rates is not None else self._rates(t)

    def op_time(self, top: TimedOp, m: Any, rates: _Rates) -> Any:
        """Seconds of one call of a per-token op at ``m`` tokens (an all-reduce above
        ``allreduce_nccl_above`` takes NCCL's time)."""
        value = _BY_KIND[top.op.kind](top, m, rates)
        if top.op.kind == "allreduce" and self.nccl is not None and self.nccl_above is not None:
            size = m * top.op.bytes_per_token
            other = _allreduce(self.nccl, m, rates)
            if type(size) is float:
                return other if size > self.nccl_above else value
            return np.where(size > self.nccl_above, other, value)
        return value

    def token_time(self, m: Any, rates: _Rates) -> Any:
        """Seconds of every per-token op (all layers) in a pass of ``m`` tokens."""
        total: Any = 0.0
        for top in self.token_ops:
            total = total + top.op.layers * self.op_time(top, m, rates)
        return total

    def logits_time(self, rows: Any, rates: _Rates) -> Any:
        total: Any = 0.0
        for top in self.logit_ops:
            total = total + top.op.layers * _gemm(top, rows, rates)
        return total

    def sequence_time(self, t: Any, k: Any, rates: _Rates, floor: bool = True) -> Any:
        """Seconds of the request's own ops: attention over its ``K + T`` keys (``floor``: its
        own call, see :func:`_attention`) and the MLA up-projection of its positions."""
        total: Any = 0.0
        for top in self.sequence_ops:
            total = total + top.op.layers * _attention(top, t, k, rates, floor)
        for top in self.position_ops:
            total = total + top.op.layers * _gemm(top, k + t, rates)
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
        return when_positive(t, shared + self.sequence_time(t, k, rates, iteration is None))

    def breakdown(self, t: Any, k: Any, iteration: Any = None) -> list[OpTime]:
        """Every op's seconds (all its layers) in that prefill, with the model that timed it."""
        rates = self.rates(t)
        rows = []
        for top in self.ops:
            scale = top.op.scale
            if scale == "sequence":
                seconds = _attention(top, t, k, rates, iteration is None)
                work = top.op.work(0.0, t, k)
            elif scale == "positions":
                seconds = _gemm(top, k + t, rates)
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
                               self._notes(top, t, k, iteration)))
        return rows

    def _notes(self, top: TimedOp, t: Any, k: Any, iteration: Any) -> tuple[str, ...]:
        """The op's notes and, for this request, where its size lay outside the table."""
        curve = top.curve
        if curve is None or top.model != "kernels":
            return top.notes
        op = top.op
        size: Any
        if op.scale == "sequence":
            size, axis = t + k, "sequence length"
        elif op.scale == "positions":
            size, axis = t + k, "positions"
        elif op.scale == "logits":
            size, axis = 1.0, "tokens"
        else:
            size = t if iteration is None else iteration
            axis = "tokens"
            if op.kind == "allreduce":
                size, axis = size * op.bytes_per_token, "message bytes"
        values = np.asarray(size, dtype=np.float64)
        above = int(np.count_nonzero(values > curve.high * (1 + 1e-9)))
        below = int(np.count_nonzero((values > 0) & (values < curve.low * (1 - 1e-9))))
        extra = []
        if above:
            held = "grown with the bytes" if op.kind == "allreduce" else "boundary held"
            extra.append(f"{axis} above the table's {curve.high:g} at {above} of {values.size} "
                         f"points ({held})")
        if below:
            extra.append(f"{axis} below the table's {curve.low:g} at {below} of {values.size} "
                         "points (boundary held)")
        return top.notes + tuple(extra)


def kernel_model(dep: Deployment) -> KernelModel:
    """``dep``'s :class:`KernelModel`, built on first use and kept with the deployment."""
    found = dep.__dict__.get(_CACHE)
    if found is None:
        found = KernelModel(dep)
        object.__setattr__(dep, _CACHE, found)
    return found


# --- results ---------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class OpTime:
    """One op's share of a prefill: ``seconds`` over all its layers (per rank), its ``flops``
    and ``bytes`` (per rank), the model that timed it and where that came from."""

    timed: TimedOp
    seconds: Any
    flops: Any
    bytes: Any
    notes: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.timed.op.label

    @property
    def kind(self) -> str:
        return self.timed.op.kind

    @property
    def model(self) -> str:
        return self.timed.model

    @property
    def source(self) -> str:
        return self.timed.source

    def as_dict(self) -> dict[str, Any]:
        """The op as plain data (SI units)."""
        op = self.timed.op
        return {"op": op.label, "kind": op.kind, "layers": op.layers, "seconds": self.seconds,
                "flops": self.flops, "bytes": self.bytes, "model": self.model,
                "source": self.source, "notes": list(self.notes)}


@dataclass(frozen=True)
class KernelBreakdown(ComputeBreakdown):
    """Kernel-mode compute: ``total`` is the sum of the ops' times (``ops``); ``flop_time`` the
    ops whose roofline is set by FLOPs, ``hbm_time`` those set by bytes (element-wise kernels
    included), ``comm_time`` the all-reduces; ``hbm_bytes`` and ``weight_bytes`` are the
    roofline's counts, for reference."""

    ops: tuple[OpTime, ...] = ()
    kernel_total: Any = 0.0

    @property
    def total(self) -> Any:
        """The sum of every op's time."""
        return self.kernel_total

    @property
    def limit(self) -> Any:
        """``"flops"`` where FLOP-bound ops take more of the time, else ``"hbm"``."""
        limit = np.where(np.asarray(self.hbm_time) > np.asarray(self.flop_time), "hbm", "flops")
        return str(limit) if limit.ndim == 0 else limit

    @property
    def compute_model(self) -> str:
        return "kernels"

    def by_model(self) -> dict[str, Any]:
        """Seconds timed by the tables (``kernels``), by the ``roofline`` fallback and by the
        element-wise ``memory rule``."""
        out: dict[str, Any] = {}
        for op in self.ops:
            out[op.model] = out.get(op.model, 0.0) + op.seconds
        return out

    def by_kind(self) -> dict[str, Any]:
        """Seconds by op kind (gemm, attention, moe, allreduce, elementwise, roofline)."""
        out: dict[str, Any] = {}
        for op in self.ops:
            out[op.kind] = out.get(op.kind, 0.0) + op.seconds
        return out

    def describe(self) -> list[str]:
        """One line an op: seconds, model, source and notes (scalar requests)."""
        lines = []
        for op in self.ops:
            value = float(np.max(np.asarray(op.seconds)))
            note = "; ".join(op.notes)
            lines.append(f"{op.label}: {format_quantity(value, Kind.TIME)} ({op.model}: "
                         f"{op.source}{'; ' + note if note else ''})")
        return lines


def _breakdown(dep: Deployment, rows: list[OpTime], total: Any) -> KernelBreakdown:
    flop_time: Any = 0.0
    hbm_time: Any = 0.0
    comm_time: Any = 0.0
    for row in rows:
        timed = row.timed
        if timed.op.kind == "allreduce":
            comm_time = comm_time + row.seconds
            continue
        peak = timed.peak or float(np.max(np.asarray(dep.peak_compute)))
        hbm = timed.hbm or dep.accelerator.hbm_bandwidth
        bound = np.asarray(row.flops, dtype=np.float64) / peak >= np.asarray(
            row.bytes, dtype=np.float64) / hbm
        flop_time = flop_time + np.where(bound, row.seconds, 0.0)
        hbm_time = hbm_time + np.where(bound, 0.0, row.seconds)

    def out(value: Any) -> Any:
        return scalar_or_array(np.asarray(value, dtype=np.float64))

    return KernelBreakdown(flops=0.0, flop_time=out(flop_time), hbm_bytes=0.0, weight_bytes=0.0,
                           hbm_time=out(hbm_time), comm_time=out(comm_time), ops=tuple(rows),
                           kernel_total=out(total))


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
    return _breakdown(dep, rows, total)


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
    expand = rates if np.ndim(rates.compute) == 0 else _Rates(
        np.asarray(rates.compute)[..., None], rates.hbm, rates.latency, rates.bus, rates.ranks)
    alone = iteration is None and t.shape[-1] == 1
    own = np.where(t > 0, model.sequence_time(t, k, expand, alone), 0.0).sum(axis=-1)
    return scalar_or_array(np.asarray(np.where(total_t > 0, shared + own, 0.0),
                                      dtype=np.float64))


def kernel_iteration(dep: Deployment, prefill_tokens: FloatArray, prefill_context: FloatArray,
                     decode_context: FloatArray, final: FloatArray | None = None
                     ) -> KernelBreakdown:
    """One serving iteration in kernel mode: per-token ops on all its tokens (prefill chunks
    and one token a decode), the LM head on one row per finishing chunk and per decode, each
    chunk's attention its own (table), each decode's attention at its roofline (the tables hold
    context attention only)."""
    model = kernel_model(dep)
    t, k, d = prefill_tokens, prefill_context, decode_context
    tokens = float(t.sum()) + float(d.size)
    if tokens == 0:
        raise KvroofError("iteration_cost: an iteration needs at least one token")
    logits = float(np.count_nonzero(final if final is not None else t > 0)) + float(d.size)
    rates = model.rates(tokens)
    alone = t.size + d.size == 1
    rows: list[OpTime] = []
    for top in model.ops:
        op = top.op
        if op.scale == "sequence":
            seconds = float(np.sum(_attention(top, t, k, rates, alone))) if t.size else 0.0
            flops, size = (np.sum(v) for v in top.op.work(0.0, t, k)) if t.size else (0.0, 0.0)
            if d.size:
                fallback = TimedOp(op, "roofline", top.source, top.notes)
                seconds += float(np.sum(_attention(fallback, np.ones_like(d), d, rates)))
                f2, b2 = top.op.work(0.0, np.ones_like(d), d)
                flops, size = flops + np.sum(f2), size + np.sum(b2)
        elif op.scale == "positions":
            seconds = float(np.sum(_gemm(top, k + t, rates))) if t.size else 0.0
            flops, size = (np.sum(v) for v in top.op.work(k + t, t, k)) if t.size else (0.0, 0.0)
        else:
            m = logits if op.scale == "logits" else tokens
            seconds = float(model.op_time(top, m, rates))
            flops, size = top.op.work(m, 0.0, 0.0)
        notes = top.notes + (("decodes' attention at its roofline (no decode table)",)
                             if op.scale == "sequence" and d.size else ())
        rows.append(OpTime(top, op.layers * seconds, op.layers * float(flops),
                           op.layers * float(size), notes))
    return _breakdown(dep, rows, sum(float(row.seconds) for row in rows))
