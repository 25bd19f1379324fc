"""Sums of ``max_i(a_i + b_i s)`` over whole steps ``s``, for fast-forwarding decode runs.

Between events, a replica that only decodes runs the same batch step after step while every
context grows by one token. The cost model's iteration time is then ``max(FLOP time, HBM time)
+ all-reduce time`` with the FLOP and HBM times affine in the step number (both are affine in
the batch's summed context), so the time of step ``s`` is the upper envelope of a few lines, and
a run of ``n`` steps sums in closed form: split ``[0, n)`` where the top line changes (at most
``k - 1`` times for ``k`` lines, as the envelope is convex) and add an arithmetic series per
piece. :func:`steps_before` inverts the cumulative sum by bisection on the closed form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["Line", "envelope_sum", "steps_before"]

Line = tuple[float, float]
"""``(a, b)``: the value ``a + b s`` at step ``s``."""


def _top(lines: Sequence[Line], s: float) -> int:
    best = 0
    value = lines[0][0] + lines[0][1] * s
    for i in range(1, len(lines)):
        v = lines[i][0] + lines[i][1] * s
        if v > value:
            best, value = i, v
    return best


def envelope_sum(lines: Sequence[Line], n: int) -> float:
    """``sum_{s=0}^{n-1} max_i(a_i + b_i s)`` (0 for ``n <= 0``)."""
    if n <= 0:
        return 0.0
    if len(lines) == 1:
        a, b = lines[0]
        return a * n + b * n * (n - 1) / 2.0
    total = 0.0
    s = 0
    while s < n:
        i = _top(lines, s)
        a, b = lines[i]
        # the next step at which another line rises above line i (convex envelope: slopes
        # only increase, so only lines with a larger slope can take over)
        end = n
        for j, (aj, bj) in enumerate(lines):
            if j != i and bj > b:
                cross = (a - aj) / (bj - b)  # aj + bj x = a + b x
                first = max(s + 1, math.floor(cross) + 1)
                if aj + bj * (first - 1) > a + b * (first - 1):  # guard rounding
                    first = max(s + 1, first - 1)
                end = min(end, first)
        m = end - s
        total += a * m + b * (s * m + m * (m - 1) / 2.0)
        s = end
    return total


def steps_before(lines: Sequence[Line], horizon: float, limit: int) -> int:
    """How many of at most ``limit`` consecutive steps start before ``horizon`` (seconds after
    the first one starts; steps take ``max_i(a_i + b_i s)`` each): the smallest ``n`` with
    ``envelope_sum(lines, n) >= horizon``, capped at ``limit``."""
    if horizon <= 0:
        return 0
    if math.isinf(horizon) or envelope_sum(lines, limit - 1) < horizon:
        return limit
    lo, hi = 0, limit - 1  # envelope_sum(lo) < horizon <= envelope_sum(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if envelope_sum(lines, mid) < horizon:
            lo = mid
        else:
            hi = mid
    return hi
