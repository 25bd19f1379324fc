"""GPUs for a target rate and the cost per million tokens.

The highest rate meeting the objectives was found on the candidate's replicas; a replica
serves ``rate / replicas`` and a target rate needs ``ceil(target / that)`` replicas of ``TP``
GPUs each. This assumes replicas add up linearly: round-robin routing spreads requests evenly
and no replica waits on another, but a conversation's turns spread over more replicas find
fewer of their prefixes cached (the hit rates at the simulated replica count are kept).

Cost per hour: ``GPUs x gpu_hour`` plus, with offloading, ``host GB x replicas x dram_gb_hour``.
Cost per million tokens: that over the tokens served in an hour at the rate (prompt and output
tokens of the workload's mean request), x 1e6; also per million output tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvroof.plan.inputs import Prices

__all__ = ["Sizing", "size_for"]


@dataclass(frozen=True)
class Sizing:
    """For one arm: ``replicas`` and ``gpus`` for ``target_rps`` (``None`` without a target,
    or when no rate meets the objectives), and with prices the cost per hour of that fleet
    (``target_cost_per_hour``) and, at the simulated fleet's highest meeting rate, the cost per
    hour and per million tokens (prompt + output) and per million output tokens."""

    target_rps: float | None
    replicas: int | None
    gpus: int | None
    target_cost_per_hour: float | None
    cost_per_hour: float | None
    per_million_tokens: float | None
    per_million_output_tokens: float | None


def size_for(rate: float, replicas: int, tp: int, *, target_rps: float | None,
             prices: Prices, dram_bytes: float | None, mean_input: float,
             mean_output: float) -> Sizing:
    """The :class:`Sizing` of an arm whose ``replicas`` meet the objectives up to ``rate``
    requests/s (``dram_bytes`` of host memory per replica with offloading, else ``None``)."""
    need = None
    gpus = None
    if target_rps is not None and rate > 0:
        need = max(1, math.ceil(target_rps / (rate / replicas) - 1e-9))
        gpus = need * tp
    target_cost = cost = per_token = per_output = None
    if prices.gpu_hour is not None:
        dram_hour = 0.0
        if dram_bytes is not None and prices.dram_gb_hour is not None \
                and math.isfinite(dram_bytes):
            dram_hour = dram_bytes / 1e9 * prices.dram_gb_hour

        def hourly(count: int) -> float:
            assert prices.gpu_hour is not None
            return count * tp * prices.gpu_hour + count * dram_hour

        cost = hourly(replicas)
        if need is not None:
            target_cost = hourly(need)
        if rate > 0:
            per_hour_tokens = rate * 3600.0
            per_token = cost / (per_hour_tokens * (mean_input + mean_output)) * 1e6
            if mean_output > 0:
                per_output = cost / (per_hour_tokens * mean_output) * 1e6
    return Sizing(target_rps, need, gpus, target_cost, cost, per_token, per_output)
