"""Bisection of a bracket, elementwise over arrays: the last step of every kappa_crit solver
that cannot use the closed form (chunked layers in roofline mode, every crossing in kernel
mode), after a scan has bracketed the crossing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kvroof.cost.checks import FloatArray

__all__ = ["bisect_rise"]


def bisect_rise(difference: Callable[[Any], Any], lo: Any, hi: Any, rel_tol: float,
                steps: int = 200) -> FloatArray:
    """The point (elementwise) where ``difference`` turns non-negative inside ``[lo, hi]``,
    to ``rel_tol`` of ``max(hi, 1)``: the bracket must have ``difference(lo) < 0 <=
    difference(hi)``. Returns the upper end, where the difference is non-negative."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        above = difference(mid) >= 0
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
        if np.all(hi - lo <= rel_tol * np.maximum(hi, 1.0)):
            break
    result: FloatArray = np.asarray(hi, dtype=np.float64)
    return result
