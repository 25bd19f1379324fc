"""The rule that makes kernel-mode op times non-decreasing in an op's size, written out
independently of kvroof (Python loops over the table's points) for the tests to compare with:
at every measured size the time is the least measured time at that size or any larger one (a
kernel for fewer rows can run padded to more rows); between sizes it is linear in ``log`` size
and ``log`` seconds; beyond either end the op's roofline grows with the end's efficiency held."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

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
