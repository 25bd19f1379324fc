"""The measured kappa_crit: where the measured P_OH (transfer time over compute time) crosses 1
along K for one T, interpolated between the grid points of a prefill benchmark's results.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kvroof.errors import KvroofError

__all__ = ["KappaCrit", "measured_kappa_crit"]


@dataclass(frozen=True)
class KappaCrit:
    """Where P_OH crosses 1 along K for one T.

    ``status``: ``crossed`` (``k_star`` interpolated, ``kappa_crit = k_star / T``), ``never``
    (P_OH < 1 over the whole grid: ``kappa_crit`` is ``inf``, meaning above
    ``max K / T``), or ``below-grid`` (P_OH >= 1 already at the smallest K: ``kappa_crit`` is
    ``None``, at most ``min K / T``).
    """

    T: int
    status: Literal["crossed", "never", "below-grid"]
    k_star: float | None
    kappa_crit: float | None


def measured_kappa_crit(t: int, cached: Sequence[float], p_oh: Sequence[float]) -> KappaCrit:
    """Interpolate the K where P_OH first reaches 1, log-linearly between grid points.

    Between neighbours ``(K1, p1)`` with ``p1 < 1`` and ``(K2, p2)`` with ``p2 >= 1``:
    ``log K* = log K1 + (1 - p1) / (p2 - p1) * (log K2 - log K1)`` (linear in K when K1 = 0).
    """
    if len(cached) != len(p_oh) or not cached:
        raise KvroofError("kappa_crit: needs as many P_OH values as K values, at least one")
    points = sorted(zip(cached, p_oh, strict=True))
    if points[0][1] >= 1:
        return KappaCrit(T=t, status="below-grid", k_star=None, kappa_crit=None)
    for (k1, p1), (k2, p2) in itertools.pairwise(points):
        if p1 < 1 <= p2:
            share = (1 - p1) / (p2 - p1)
            if k1 <= 0:
                k_star = k1 + share * (k2 - k1)
            else:
                k_star = math.exp(math.log(k1) + share * (math.log(k2) - math.log(k1)))
            return KappaCrit(T=t, status="crossed", k_star=k_star, kappa_crit=k_star / t)
    return KappaCrit(T=t, status="never", k_star=None, kappa_crit=math.inf)
