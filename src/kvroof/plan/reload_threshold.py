"""The reload threshold: for each new-token count ``T``, the smallest cached prefix ``K`` worth
loading from host memory rather than recomputing, from the cost model in the engine's
settings.

Loading ``K`` cached tokens for a request of ``T`` new ones takes ``ttft(dep, T, K)``
(:func:`kvroof.cost.timing.ttft`: the transfer and the prefill of ``T`` on top of ``K``, with
the engine's overlap, its whole-block reuse and its per-request overhead); recomputing them
takes ``ttft(dep, T + K, 0)`` (a prefill of ``T + K`` new tokens, nothing loaded). Both are
taken without the write-back of the new tokens (the same either way: the recomputed prefix is
already in host memory). The threshold ``K*(T)`` is the smallest ``K >= 1`` from which loading
is faster for every larger ``K`` up to ``max_cached`` (the model's context): the number an
engine's "skip loads shorter than N tokens" setting takes. ``None`` when recomputing stays as
fast up to ``max_cached`` (never load); 1 when loading wins from the first token.

Up to ``FULL_SCAN`` cached tokens (contexts up to 256K tokens) every ``K`` is evaluated, so
the answer is exact even where the gain is not monotone in ``K`` (whole-block reuse recomputes
``K mod B`` tokens, a sawtooth); a test checks it against a scan with
:func:`kvroof.cost.timing.ttft` itself. Beyond that (Llama 4's 10M-token context), a grid of
``K`` (every token up to 256, then steps of 2%) brackets the last sign change, which is then
scanned token by token: exact where the gain changes sign once between grid points.

Two regimes, as in :mod:`kvroof.cost.compute`: the request **alone** (it reads the weights
itself: at small ``T`` recomputing a short prefix is almost free) and **inside a busy
iteration** of ``iteration_tokens`` (the token budget: the weights are shared, so each
recomputed token costs its FLOPs; a prefill longer than the iteration is charged one read of
the weights, as if it ran in iterations of its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.deployment import Deployment
from kvroof.cost.timing import default_overlap, reused_tokens, ttft
from kvroof.errors import KvroofError

__all__ = ["FULL_SCAN", "ReloadThreshold", "crossover", "load_gain", "reload_threshold",
           "threshold_grid"]

FULL_SCAN = 262_144
"""Up to this many cached tokens, every K is evaluated."""

_DENSE = 256
_RATIO = 1.02


def load_gain(dep: Deployment, new_tokens: Any, cached_tokens: Any,
              overlap: str | None = None, busy: int | None = None) -> NDArray[np.float64]:
    """Seconds saved by loading ``cached_tokens`` instead of recomputing them (positive: load),
    for requests of ``new_tokens`` (broadcast); ``dep`` should have ``write_back=False``.
    ``busy``: inside an iteration of that many tokens (at least the request's own: a longer
    prefill is charged one read of the weights); ``None``: the request alone."""
    t = np.asarray(new_tokens, dtype=np.float64)
    k = np.asarray(cached_tokens, dtype=np.float64)
    t, k = np.broadcast_arrays(t, k)
    load_dep = again_dep = dataclasses.replace(dep, iteration_tokens=None)
    if busy is not None:
        run_t, _ = reused_tokens(dep, t, k)  # whole-block reuse recomputes K mod B too
        load_dep = dataclasses.replace(dep, iteration_tokens=np.maximum(float(busy), run_t))
        again_dep = dataclasses.replace(dep, iteration_tokens=np.maximum(float(busy), t + k))
    load = np.asarray(ttft(load_dep, t, k, overlap).ttft,  # type: ignore[arg-type]
                      dtype=np.float64)
    again = np.asarray(ttft(again_dep, t + k, np.zeros_like(k), overlap).ttft,  # type: ignore[arg-type]
                       dtype=np.float64)
    gain: NDArray[np.float64] = np.broadcast_to(again - load,
                                                np.broadcast_shapes(t.shape, k.shape)).copy()
    return gain


def threshold_grid(max_cached: int) -> NDArray[np.int64]:
    """The K grid of the search: every token up to 256, then steps of 2%, ending at
    ``max_cached``."""
    dense = np.arange(1, min(_DENSE, max_cached) + 1)
    points = [dense]
    if max_cached > _DENSE:
        count = int(np.ceil(np.log(max_cached / _DENSE) / np.log(_RATIO)))
        sparse = np.unique(np.rint(_DENSE * _RATIO ** np.arange(1, count + 1)).astype(np.int64))
        points.append(np.minimum(sparse, max_cached))
        points.append(np.array([max_cached]))
    grid: NDArray[np.int64] = np.unique(np.concatenate(points)).astype(np.int64)
    return grid


def crossover(dep: Deployment, new_tokens: Sequence[int], max_cached: int,
              overlap: str | None = None, busy: int | None = None) -> list[int | None]:
    """``K*(T)`` for each of ``new_tokens`` (module docstring), alone or inside an iteration of
    ``busy`` tokens (:func:`load_gain`); ``dep`` is taken without write-back."""
    if max_cached < 1:
        raise KvroofError(f"max_cached: expected at least 1 token, got {max_cached}")
    dep = dataclasses.replace(dep, write_back=False)
    if max_cached <= FULL_SCAN:
        every = np.arange(1, max_cached + 1)
        out: list[int | None] = []
        for t_value in new_tokens:
            losing = np.flatnonzero(load_gain(dep, int(t_value), every, overlap, busy) <= 0)
            out.append(1 if losing.size == 0 else None if losing[-1] == every.size - 1
                       else int(every[losing[-1] + 1]))
        return out
    grid = threshold_grid(max_cached)
    t = np.asarray(new_tokens, dtype=np.int64)[:, None]
    gains = load_gain(dep, t, grid[None, :], overlap, busy)
    out = []
    for row, t_value in zip(gains, t[:, 0].tolist(), strict=True):
        losing = np.flatnonzero(row <= 0)
        if losing.size == 0:
            out.append(1)
            continue
        last = int(losing[-1])
        if last == grid.size - 1:
            out.append(None)
            continue
        lo, hi = int(grid[last]), int(grid[last + 1])  # loses at lo, wins at hi
        between = np.arange(lo + 1, hi + 1)
        inner = load_gain(dep, t_value, between, overlap, busy)
        lose = np.flatnonzero(inner <= 0)
        out.append(int(between[lose[-1] + 1]) if lose.size else lo + 1)
    return out


@dataclass(frozen=True)
class ReloadThreshold:
    """``K*(T)`` for the ``new_tokens`` grid alone and inside a busy iteration of
    ``iteration_tokens``; ``setting``: ``K*`` alone at the workload's median ``T`` (of the
    requests with a cached prefix), ``setting_busy`` the same in the busy regime; ``overlap``:
    the overlap the loads were timed with; ``max_cached``: the largest ``K`` looked at."""

    new_tokens: tuple[int, ...]
    alone: tuple[int | None, ...]
    busy: tuple[int | None, ...]
    iteration_tokens: int
    median_new: int
    setting: int | None
    setting_busy: int | None
    overlap: str
    max_cached: int


def reload_threshold(dep: Deployment, *, max_cached: int, median_new: int, up_to: int = 16384,
                     iteration_tokens: int = 8192, overlap: str | None = None
                     ) -> ReloadThreshold:
    """The threshold table for ``T = 1, 2, 4 ... up_to`` and the workload's ``median_new``, in
    both regimes."""
    ts = sorted({*(2 ** i for i in range(int(np.log2(max(up_to, 1))) + 1)), max(1, median_new)})
    alone = crossover(dep, ts, max_cached, overlap)
    busy = crossover(dep, ts, max_cached, overlap, iteration_tokens)
    where = ts.index(max(1, median_new))
    grid = [t for t in ts if t & (t - 1) == 0]
    return ReloadThreshold(
        new_tokens=tuple(grid), alone=tuple(alone[ts.index(t)] for t in grid),
        busy=tuple(busy[ts.index(t)] for t in grid), iteration_tokens=iteration_tokens,
        median_new=max(1, median_new), setting=alone[where], setting_busy=busy[where],
        overlap=overlap or str(default_overlap(dep)), max_cached=max_cached)
