"""The host-memory curve: the highest rate meeting the objectives against host memory per
replica, as a gain over no offloading.

Sizes (:func:`curve_sizes`) are multiples of the replica's HBM KV pool, the *capacity ratio*
``r = host pool / HBM pool`` (both in tokens of KV): 1/4, 1/2, 1, 2 ... up to the first that
holds ``cover_tokens``, the LRU capacity that keeps every reused block until its reuse
(:class:`kvroof.plan.workloads.ReuseStats`, over the replicas: round-robin gives each a share of
the traffic; more memory cannot add hits), at least three and at most six sizes (beyond
``r = 8`` six sizes spread evenly on a log scale). Every size holds at least one prefix block.
The curve is read together with the default size (the system's host memory per replica).

Reading the curve (:func:`read_curve`):

- the **gain** at a size is its highest meeting rate over the one without offloading;
- offloading **pays** at a size when it meets the objectives at a rate that failed without it
  (its meeting rate is at least the lowest failing rate without offloading): a gain larger
  than both searches' tolerance, not a difference inside it;
- the **capacity ratio where it starts to pay** is the smallest ratio at which it pays;
- the **recommended size** is the smallest that pays and keeps ``most`` (90%) of the largest
  gain: ``gain >= 1 + most x (best - 1)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CurveReading", "curve_sizes", "gain_of", "read_curve"]


def curve_sizes(hbm_tokens: int, host_bytes_per_token: float, cover_tokens: float,
                block_tokens: int) -> list[float]:
    """Host-memory bytes per replica for the curve (module docstring); empty when nothing is
    reused (``cover_tokens`` 0)."""
    if cover_tokens <= 0 or hbm_tokens <= 0:
        return []
    cover = cover_tokens / hbm_tokens
    if cover <= 8:
        top = max(1.0, 2.0 ** math.ceil(math.log2(max(cover, 0.25))))
        ratios = [0.25 * 2**i for i in range(round(math.log2(top / 0.25)) + 1)]
    else:
        ratios = list(np.geomspace(0.25, cover * 1.05, 6))
    smallest = block_tokens * host_bytes_per_token
    sizes = sorted({max(smallest, r * hbm_tokens * host_bytes_per_token) for r in ratios})
    return sizes


def gain_of(rate: float, without: float) -> float:
    """``rate / without``; ``inf`` when only ``rate`` is positive, NaN when neither is."""
    if without > 0:
        return rate / without
    return math.inf if rate > 0 else math.nan


@dataclass(frozen=True)
class CurveReading:
    """What the curve says: per point (ascending size) its ``gains`` and whether it ``pays``;
    ``best_gain`` (NaN without points), the index of the ``recommended`` point (or ``None``:
    offloading pays at no size) and the capacity ratio from which it pays
    (``pays_from_ratio``)."""

    gains: tuple[float, ...]
    pays: tuple[bool, ...]
    best_gain: float
    recommended: int | None
    pays_from_ratio: float | None


def read_curve(rates: Sequence[float], ratios: Sequence[float], without_rate: float,
               without_failing: float, most: float = 0.9) -> CurveReading:
    """Read a curve of meeting ``rates`` at capacity ``ratios`` (ascending) against the search
    without offloading (its meeting and lowest failing rate)."""
    gains = tuple(gain_of(r, without_rate) for r in rates)
    pays = tuple(r > 0 and r >= without_failing for r in rates)
    finite = [g for g in gains if not math.isnan(g)]
    best = max(finite) if finite else math.nan
    recommended = None
    if any(pays):
        best_paying = max(g for g, p in zip(gains, pays, strict=True) if p)
        need = 1 + most * (best_paying - 1) if math.isfinite(best_paying) else math.inf
        for index, (gain, paying) in enumerate(zip(gains, pays, strict=True)):
            if paying and (gain >= need or (math.isinf(need) and math.isinf(gain))):
                recommended = index
                break
    first = next((i for i, p in enumerate(pays) if p), None)
    return CurveReading(gains, pays, best, recommended,
                        None if first is None else float(ratios[first]))
