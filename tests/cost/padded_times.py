"""The rule that makes kernel-mode op times non-decreasing in an op's size, written out
independently of kvroof (Python loops over the table's points) for the tests to compare with:
at every measured size the time is the least measured time at that size or any larger one (a
kernel for fewer rows can run padded to more rows); between sizes it is linear in ``log`` size
and ``log`` seconds; beyond either end the op's roofline grows with the end's efficiency held.
An attention call over a cached prefix is the table's call at ``K + T`` scaled by the new
tokens' share of its pairs, least over this ``K`` and every larger one
(:func:`least_over_larger_prefixes`, by dense sampling)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import kvroof.kernels as kernels
from kvroof.specs.hardware import Accelerator


def table_points(accelerator: Accelerator, op: str, axis: str) -> list[float]:
    """The measured sizes along ``axis`` of the ``op`` table of ``accelerator``."""
    variant = kernels.tables(accelerator).tables[op].variants[0]
    return [float(p) for p in variant.grid.points[variant.grid.axes.index(axis)]]


def padded_allreduce(seconds_at: Callable[[float], float], points: Sequence[float],
                     x: float) -> float:
    """An all-reduce's time at ``x`` bytes: the least measured time at that message size or a
    larger one, linear in ``log`` bytes between sizes (the tables' own interpolation), grown
    with the bytes beyond the largest."""
    raw = [seconds_at(p) for p in points]
    least = [min(raw[i:]) for i in range(len(raw))]
    if x >= points[-1]:
        return least[-1] * x / points[-1]
    if x <= points[0]:
        return least[0]
    i = bisect.bisect_right(points, x) - 1
    f = (math.log(x) - math.log(points[i])) / (math.log(points[i + 1]) - math.log(points[i]))
    return least[i] * (1 - f) + least[i + 1] * f


def padded(seconds_at: Callable[[float], float], roof_at: Callable[[float], float],
           points: Sequence[float], x: float) -> float:
    """The op's time at size ``x`` under the rule above (``seconds_at``: the table's time at a
    measured size; ``roof_at``: the op's roofline at the table's peaks)."""
    raw = [seconds_at(p) for p in points]
    least = [min(raw[i:]) for i in range(len(raw))]
    if x >= points[-1]:
        return roof_at(x) * least[-1] / roof_at(points[-1])
    if x <= points[0]:
        return roof_at(x) * least[0] / roof_at(points[0])
    i = bisect.bisect_right(points, x) - 1
    f = (math.log(x) - math.log(points[i])) / (math.log(points[i + 1]) - math.log(points[i]))
    return math.exp(math.log(least[i]) * (1 - f) + math.log(least[i + 1]) * f)


def padded_curve(seconds: Sequence[float], roof_at: Callable[[Any], Any],
                 points: Sequence[float]) -> Callable[[Any], Any]:
    """:func:`padded` on arrays of sizes: the least of ``seconds`` (the table's times at
    ``points``) at each point or any larger one (a Python loop over the points), linear in
    ``log`` size and ``log`` seconds between points, the roofline ``roof_at`` (on arrays) grown
    with the end's ratio beyond either end."""
    least = [min(seconds[i:]) for i in range(len(seconds))]
    log_points = np.log(np.asarray(points, dtype=np.float64))
    log_least = np.log(np.asarray(least, dtype=np.float64))
    low, high = float(points[0]), float(points[-1])
    low_ratio = least[0] / float(roof_at(np.float64(low)))
    high_ratio = least[-1] / float(roof_at(np.float64(high)))

    def at(x: Any) -> Any:
        x = np.asarray(x, dtype=np.float64)
        inside = np.exp(np.interp(np.log(x), log_points, log_least))
        roof = np.asarray(roof_at(x), dtype=np.float64)
        return np.where(x > high, roof * high_ratio, np.where(x < low, roof * low_ratio, inside))

    return at


def least_over_larger_prefixes(table_at: Callable[[Any], Any],
                               table_pairs: Callable[[Any], Any],
                               new_pairs: Callable[[float, Any], Any], t: float, k: float,
                               knots: Sequence[float], samples: int = 200_000,
                               largest: float = 1e13) -> float:
    """The prefix rule's least time (brute force, independent of kvroof's algorithm): the table's
    call at ``S' = K' + T`` scaled by the share of its (query, key) pairs the ``T`` new tokens
    score, ``table_at(S') new_pairs(T, K') / table_pairs(S')``, least over every ``K' >= K``:
    sampled at ``S = K + T``, at every one of ``knots`` above it and at ``samples`` sizes spaced
    evenly in ``log`` from ``S`` to ``largest`` (far past any table: a window's time per token
    there is its limit to within 1e-9). An upper bound on the least time, within about 1e-8 of
    it where the least lies between samples (a smooth minimum, the ``log`` spacing ~1.5e-4)."""
    s = t + k
    grid = np.concatenate([[s], [q for q in knots if q >= s],
                           np.geomspace(s, largest, samples)])
    scaled = table_at(grid) * new_pairs(t, grid - t) / table_pairs(grid)
    return float(np.min(scaled))
