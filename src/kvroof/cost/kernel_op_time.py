"""Kernel mode's time of one op: the seconds of one call of a resolved op
(:class:`~kvroof.cost.kernel_resolution.TimedOp`) at its size, by kind: a GEMM's or a fused
MoE's roofline at the table's peaks over the measured efficiency (capped at 1), an all-reduce's
measured time, an element-wise kernel's memory rule, and an attention call over a cached prefix
scaled from the table's prefill of ``K + T`` tokens (floats, or broadcasting arrays in few
passes); an op without a table takes its roofline at the deployment's achievable figures
(:class:`Rates`). The rules and their sources are in :mod:`kvroof.cost.kernel_time`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.checks import maximum, minimum, when_positive
from kvroof.cost.forward_op import positions_read, query_key_pairs
from kvroof.cost.kernel_resolution import TimedOp
from kvroof.cost.weight_bytes import touched_share

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


def gemm_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one GEMM call at ``m`` tokens."""
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


def moe_seconds(top: TimedOp, m: Any, rates: Rates) -> Any:
    """Seconds of one fused MoE call at ``m`` tokens."""
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


def attention_seconds(top: TimedOp, t: Any, k: Any, rates: Rates, floor: bool = True) -> Any:
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
