"""Two regimes of kappa_crit: a request alone, and a request inside a busy iteration.

Alone (``iteration_tokens`` unset), a prefill of ``T`` tokens reads every weight its tokens use
from HBM: at small ``T`` that read, not the FLOPs, sets its compute time, and kappa_crit is high.
Inside an iteration of ``N`` tokens (running decodes and other prefill chunks) the weights are
read once for all of them, the request pays ``T / N`` of that read, and kappa_crit falls toward
the value its FLOPs and KV reads alone give. The two meet where the request's own FLOPs outlast
its weight reads: above that ``T`` the weights stop mattering.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.timing import compute_breakdown

__all__ = ["RegimeCurves", "regime_curves"]


@dataclass(frozen=True)
class RegimeCurves:
    """kappa_crit against T alone and in an iteration of ``iteration_tokens`` tokens.

    ``meet_tokens``: the smallest T from which the request alone is limited by its FLOPs, not
    its weight reads, at its crossover (``inf`` when the weight reads bind up to the largest T
    with a crossover): above it the weights stop mattering, and the regimes differ only by the
    all-reduce latency a busy iteration shares (``gap_above``: the largest relative difference
    there)."""

    new_tokens: np.ndarray
    alone: np.ndarray
    busy: np.ndarray
    iteration_tokens: float
    meet_tokens: float
    gap_above: float


def regime_curves(
    dep: Deployment,
    iteration_tokens: float = 8192.0,
    t_range: tuple[float, float] = (1.0, 16384.0),
    points: int = 200,
) -> RegimeCurves:
    """kappa_crit(T) in both regimes on a log grid of T (an iteration holds at least the
    request: ``N = max(iteration_tokens, T)``)."""
    t = np.geomspace(*t_range, points)
    lone = dataclasses.replace(dep, iteration_tokens=None)
    result = kappa_crit(lone, t)
    alone = np.asarray(result.kappa_crit, dtype=np.float64)
    busy = np.asarray(kappa_crit(dataclasses.replace(dep, iteration_tokens=np.maximum(
        iteration_tokens, t)), t).kappa_crit, dtype=np.float64)
    finite = np.isfinite(alone)
    k_star = np.where(finite, np.asarray(result.crossover_tokens, dtype=np.float64), 0.0)
    flop_bound = np.asarray(compute_breakdown(lone, t, k_star).limit) == "flops"
    weights_bind = finite & ~flop_bound
    if not weights_bind.any():
        meet = float(t[0])
    elif not (finite & flop_bound).any():
        meet = float("inf")
    else:
        meet = float(t[np.nonzero(weights_bind)[0][-1] + 1])
    above = (t >= meet) & finite & np.isfinite(busy)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = float(np.max(np.abs(alone[above] - busy[above]) / busy[above])) if above.any() \
            else float("nan")
    return RegimeCurves(t, alone, busy, float(iteration_tokens), meet, gap)
