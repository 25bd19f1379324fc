"""Where one maximum of affine pieces overtakes another for good: the algebra of kappa_crit's
closed form.

Transfer is ``max_j(a_j + b_j K)`` (its data paths plus collectives and latency) and compute
``max_i(c_i + s_i K)`` (the FLOP and HBM roofs plus all-reduces). For one roof ``i``,
``transfer - roof_i`` is convex in ``K``, so the ``K`` where the transfer falls below that roof
form one interval; its right end ``K_i = min over paths with b_j > s_i of (c_i - a_j) / (b_j -
s_i)`` is where the transfer overtakes the roof for good, and ``K* = max_i K_i``
(:func:`crossover_of_pieces`). Pieces are sequences (or arrays with the pieces on axis 0); each
piece broadcasts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["crossover_of_pieces", "last_compute_bound", "max_of"]


def crossover_of_pieces(a: Any, b: Any, c: Any, s: Any) -> Any:
    """Smallest ``K >= 0`` from which ``max_j(a_j + b_j K) >= max_i(c_i + s_i K)`` holds for every
    larger ``K`` (``inf`` when it never does for large ``K``). Pieces are sequences (or arrays
    with the pieces on axis 0); each piece broadcasts."""
    result: Any = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for ci, si in zip(c, s, strict=True):
            top: Any = np.inf
            bottom: Any = -np.inf
            for aj, bj in zip(a, b, strict=True):
                gap = bj - si
                head = ci - aj
                ratio = head / np.where(gap != 0, gap, 1.0)
                top = np.minimum(top, np.where(gap > 0, ratio,
                                               np.where((gap == 0) & (head <= 0), -np.inf,
                                                        np.inf)))
                bottom = np.maximum(bottom, np.where(gap < 0, ratio, -np.inf))
            k_i = np.where(np.isposinf(top), np.inf,
                           np.where((top <= 0) | (bottom >= top), 0.0, top))
            result = np.maximum(result, k_i)
    return result


def max_of(values: list[Any]) -> Any:
    """The elementwise maximum of ``values`` (broadcasting)."""
    result = values[0]
    for value in values[1:]:
        result = np.maximum(result, value)
    return result


def last_compute_bound(a: Any, b: Any, c: Any, s: Any, k: Any, chunk: float) -> Any:
    """On the residue of ``k`` mod ``chunk``, with the sides affine there (pieces ``a, b, c,
    s``): the last integer ``K`` of that residue at which compute exceeds transfer, or -inf.
    Compute exceeds transfer where some roof does, and below each roof the transfer lies on one
    interval, whose right end :func:`crossover_of_pieces` gives."""
    residue = np.mod(k, chunk)
    result: Any = -np.inf
    for ci, si in zip(c, s, strict=True):
        end = crossover_of_pieces(a, b, [ci], [si])
        with np.errstate(invalid="ignore"):
            steps = np.ceil((end - residue) / chunk) - 1.0
            candidate = residue + chunk * np.maximum(steps, 0.0)
        x = max_of([aj + bj * candidate for aj, bj in zip(a, b, strict=True)])
        below = (x < ci + si * candidate) & np.isfinite(end) & (end > 0) & (candidate > 0) \
            & (steps >= 0)
        result = np.maximum(result, np.where(below, candidate, -np.inf))
    return result
