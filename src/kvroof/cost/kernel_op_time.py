"""Kernel mode's time of one op: the seconds of one call of a resolved op
(:class:`~kvroof.cost.kernel_resolution.TimedOp`) at its size, by kind: a GEMM's or a fused
MoE's roofline at the table's peaks over the measured efficiency (capped at 1), an all-reduce's
measured time, an element-wise kernel's memory rule, and an attention call over a cached prefix
scaled from the table's prefill of ``K + T`` tokens, least over this ``K`` and any larger one
(:mod:`kvroof.cost.kernel_prefix`; floats, or broadcasting arrays in few passes); an op
without a table takes its roofline at the deployment's achievable figures (:class:`Rates`).
The rules and their sources are in :mod:`kvroof.cost.kernel_time`.

Every op is priced with its own counts, :meth:`Op.work <kvroof.cost.forward_op.Op.work>` (for a
GEMM or a MoE layer :mod:`kvroof.kernels.work`'s, the ones the tables' efficiencies are defined
with), and a table's attention call with :func:`kvroof.kernels.work.attention_work`, so a
table-timed op's time at a grid point is the measured latency and the breakdown's FLOPs and
bytes are the ones its time came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.checks import maximum, when_positive
from kvroof.cost.kernel_resolution import TimedOp
from kvroof.kernels.work import attention_work

__all__ = [
    "ELEMENTWISE_FLOOR",
    "SECONDS_BY_KIND",
    "Rates",
    "allreduce_seconds",
    "attention_seconds",
    "elementwise_seconds",
    "gemm_seconds",
    "moe_seconds",
    "roofline_seconds",
]

ELEMENTWISE_FLOOR: Final = 3e-6
"""Seconds every element-wise kernel costs beyond its bytes (aiconfigurator's
``mem_empirical_constant_latency``, every NVIDIA system file at commit 095f58a)."""

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Rates:
    """The fallback figures of one GPU: achievable FLOP/s (``compute``), HBM bytes/s, the
    collectives' latency and bus bandwidth, and the TP ranks an all-reduce spans."""

    compute: Any
    hbm: Any
    latency: float
    bus: float
    ranks: int


def _capped(eff: Any) -> Any:
    """An efficiency capped at 1 (no op beats its roofline at peak)."""
    return (eff if eff < 1.0 else 1.0) if type(eff) is float else np.minimum(eff, 1.0)


def _per_token_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """A GEMM's or a fused MoE's call at ``m`` tokens: its roofline at the table's peaks over
    the table's efficiency there, or at ``rates`` without a table (the op's counts either way)."""
    flops, size = top.op.work(m)
    times = top.times
    if times is not None:  # the table's non-decreasing times (kernel_resolution.monotone_times)
        roof = maximum(flops / top.peak, size / top.hbm)
        if type(m) is float:
            if m > times.high or m < times.low:  # beyond an end: that end's efficiency held
                end = times.high if m > times.high else times.low
                f, b = top.op.work(end)
                return roof * math.exp(times.at(end)) / max(f / top.peak, b / top.hbm)
            return math.exp(times.at(m))
        return _table_times(top, times, np.asarray(m, dtype=np.float64), roof)
    if top.curve is not None:
        return maximum(flops / top.peak, size / top.hbm) / _capped(top.curve(m))
    return maximum(flops / rates.compute, size / rates.hbm)


def _table_times(top: TimedOp, times: Any, m: FloatArray, roof: Any) -> FloatArray:
    """:func:`_per_token_seconds` from the table's times on an array of sizes: interpolated in
    ``log m`` inside the table, the end's efficiency held beyond it (the time grows with the
    op's own roofline there, so it stays non-decreasing)."""
    inside = np.exp(times(m))
    result = np.asarray(inside, dtype=np.float64)
    for end, outside in ((times.high, m > times.high), (times.low, m < times.low)):
        if np.any(outside):
            f, b = top.op.work(end)
            result = np.where(outside, np.asarray(roof) * math.exp(times.at(end))
                              / max(f / top.peak, b / top.hbm), result)
    return result


def gemm_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one GEMM call at ``m`` tokens."""
    return _per_token_seconds(top, m, rates)


def moe_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one fused MoE call at ``m`` tokens."""
    return _per_token_seconds(top, m, rates)


def allreduce_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one all-reduce of ``m`` tokens' activations (beyond the table's largest
    message, its time there grown with the bytes)."""
    size = m * top.op.bytes_per_token
    curve = top.curve
    if curve is not None:
        scale = maximum(size / curve.high, 1.0) if type(size) is float else np.maximum(
            size / curve.high, 1.0)
        return when_positive(size, curve(size) * scale)
    n = rates.ranks
    return when_positive(size, rates.latency + 2.0 * (n - 1) / n * size / rates.bus)


def elementwise_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one element-wise kernel at ``m`` tokens (the memory rule)."""
    return m * top.op.bytes_per_token / rates.hbm + ELEMENTWISE_FLOOR


def roofline_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one op without a table at ``m`` tokens: its roofline at ``rates``."""
    op = top.op
    return maximum(op.flops_per_token * m / rates.compute,
                   (op.bytes_per_token * m + op.fixed_bytes) / rates.hbm)


SECONDS_BY_KIND: Final[dict[str, Callable[[TimedOp, Any, Rates], Any]]] = {
    "gemm": gemm_seconds, "moe": moe_seconds, "allreduce": allreduce_seconds,
    "elementwise": elementwise_seconds, "roofline": roofline_seconds,
}
"""The time of one call of a per-token op, by the op's kind (attention is
:func:`attention_seconds`)."""


def _table_window(top: TimedOp) -> float:
    """The window of the table's call (0: full attention; a chunk is priced as a window)."""
    op = top.op
    return op.span if op.rule in ("window", "chunk") else 0.0


def _table_call(top: TimedOp, s: Any) -> tuple[Any, Any]:
    """The table's own attention call over ``s`` tokens without a prefix: its time (the
    derivation's counts, :func:`kvroof.kernels.work.attention_work`, over the efficiency) and
    its FLOPs."""
    op = top.op
    window = _table_window(top)
    assert top.curve is not None and op.kv_dtype is not None and op.dtype is not None
    flops, size = attention_work(s, op.heads, op.kv_heads, op.head_dim, window, op.dtype,
                                 op.kv_dtype)
    times = top.times
    if times is not None:  # the table's non-decreasing times (kernel_resolution)
        dtype, kv_dtype = op.dtype, op.kv_dtype

        def roof_at(x: float) -> float:
            f, b = attention_work(x, op.heads, op.kv_heads, op.head_dim, window, dtype,
                                  kv_dtype)
            return float(max(f / top.peak, b / top.hbm))

        if type(s) is float:
            if s > times.high or s < times.low:
                end = times.high if s > times.high else times.low
                return (max(flops / top.peak, size / top.hbm) * math.exp(times.at(end))
                        / roof_at(end), flops)
            return math.exp(times.at(s)), flops
        s_arr = np.asarray(s, dtype=np.float64)
        result = np.exp(times(s_arr))
        for end, outside in ((times.high, s_arr > times.high), (times.low, s_arr < times.low)):
            if np.any(outside):
                roof = np.maximum(flops / top.peak, size / top.hbm)
                result = np.where(outside, roof * (math.exp(times.at(end)) / roof_at(end)),
                                  result)
        return result, flops
    eff = top.curve(s)
    if top.window is not None:
        windowed = top.window(s)
        eff = (windowed if s > window else eff) if type(s) is float else np.where(
            s > window, windowed, eff)
    if type(s) is float:
        return maximum(flops / top.peak, size / top.hbm) / _capped(eff), flops
    seconds = np.asarray(flops / top.peak)  # the same, in place on arrays of a grid's size
    np.maximum(seconds, np.divide(size, top.hbm), out=seconds)
    seconds /= np.minimum(eff, 1.0)
    return seconds, flops


def attention_seconds(top: TimedOp, t: Any, k: Any, rates: Rates, floor: Any = True) -> Any:
    """Seconds of one attention call of ``t`` new tokens over ``k`` cached ones; ``floor``: the
    call is the request's own (alone), so it costs at least the table's call of ``t`` tokens
    (a bool, or a mask broadcasting with ``t`` and ``k``)."""
    op = top.op
    if top.curve is None:
        flops, size = op.work(0.0, t, k)
        return maximum(flops / rates.compute, size / rates.hbm)
    if np.ndim(t) == 0 and np.ndim(k) == 0:
        return _attention_scalar(top, float(t), float(k), bool(np.all(floor)))
    return _attention_array(top, np.asarray(t, dtype=np.float64), np.asarray(k, dtype=np.float64),
                            floor)


def _attention_scalar(top: TimedOp, t: float, k: float, floor: bool = True) -> float:
    """The table's time at ``S = K + T`` scaled by the share of that call's (query, key) pairs,
    so of its FLOPs, the new tokens score, least over this ``K`` and any larger one
    (``top.prefix``: :mod:`kvroof.cost.kernel_prefix`); at least the call's own roofline at peak
    and, with ``floor``, the table's time for ``T`` tokens."""
    s = t + k
    if s <= 0.0:
        return 0.0
    flops, size = top.op.work(0.0, t, k)
    roof = max(flops / top.peak, size / top.hbm)
    table, table_flops = _table_call(top, s)
    scaled = table * flops / table_flops
    if top.prefix is not None:  # the least at this K or any larger (kernel_prefix)
        scaled = top.prefix.least(t, s, scaled, lambda x: _table_call(top, x)[0])
    least = _table_call(top, t)[0] if (floor and t > 0.0) else 0.0
    return float(max(scaled, least, roof))


def _attention_array(top: TimedOp, t: FloatArray, k: FloatArray, floor: Any = True
                     ) -> FloatArray:
    """:func:`_attention_scalar` on broadcasting arrays, in few passes (the scaled time is at
    least the FLOPs' roofline already: an efficiency is at most 1)."""
    s = t + k
    flops, size = top.op.work(0.0, t, k)
    table, table_flops = _table_call(top, s)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = table * flops
        scaled /= table_flops
        if top.prefix is not None:  # the least at this K or any larger (kernel_prefix)
            scaled = top.prefix.least(t, s, scaled, lambda x: _table_call(top, x)[0])
    np.maximum(scaled, size / top.hbm, out=scaled)
    if np.any(floor):
        own = np.where((t > 0) & np.asarray(floor, dtype=bool), _table_call(top, t)[0], 0.0)
        scaled = np.maximum(scaled, own)
    return np.where(s > 0, scaled, 0.0) if bool(np.any(s <= 0)) else scaled
