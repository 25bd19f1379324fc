"""Load part of a cached prefix and recompute the rest, so that both finish together.

A request has ``T`` new tokens and ``K`` cached tokens in host memory. Loading the first ``L``
of the ``K`` and recomputing the other ``K - L`` (as new tokens on top of the loaded ones) takes

- transfer ``x(L)``: the time to load ``L`` tokens (:func:`kvroof.cost.transfer.transfer_time`
  with nothing saved), which grows with ``L``;
- compute ``c(L)``: the prefill of ``T + K - L`` new tokens on top of ``L`` cached ones
  (:func:`kvroof.cost.timing.compute_time`), which shrinks as ``L`` grows (fewer tokens to
  compute, and the attention pairs ``n L + n (n + 1) / 2`` with ``n = T + K - L`` fall too).

When load and recompute overlap (layer by layer, or ideally), the time is ``max(x(L), c(L))``;
it is smallest where the two cross. :func:`balanced_split` finds, over whole tokens
``L = 0 .. K``, the ``L`` that minimizes ``max(x(L), c(L))`` by bisection on the sign of
``x(L) - c(L)``: exact (it equals a brute-force scan over every ``L``) for any ``x`` that grows
and ``c`` that shrinks with ``L``, affine or not. When even the whole prefix loads faster than
its own prefill (``x(K) <= c(K)``) the answer is ``K``: load everything.

:func:`load_split` applies it to a deployment; :func:`balanced_split` takes the two costs as
functions, so that a caller with its own fast evaluation of the same cost model (the serving
simulation) uses the same search.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.cost.checks import token_count
from kvroof.cost.compute import compute_time
from kvroof.cost.deployment import Deployment
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError

__all__ = ["balanced_split", "load_split"]

Cost = Callable[[NDArray[np.int64]], Any]


def balanced_split(load: Cost, compute: Cost, cached_tokens: ArrayLike) -> NDArray[np.int64]:
    """Tokens to load (the rest of each cached prefix is recomputed) minimizing
    ``max(load(L), compute(L))`` over whole ``L`` in ``0 .. K``; ``load`` must grow and
    ``compute`` shrink with ``L`` (both take and return arrays)."""
    k = np.atleast_1d(token_count("cached_tokens", cached_tokens)).astype(np.int64)
    if np.any(k != np.atleast_1d(np.asarray(cached_tokens, dtype=np.float64))):
        raise KvroofError("cached_tokens: whole tokens expected")
    everything = np.asarray(load(k), dtype=np.float64) <= np.asarray(compute(k),
                                                                       dtype=np.float64)
    # invariant: load(lo) <= compute(lo) (true at 0: nothing to load) and load(hi) > compute(hi)
    lo = np.zeros_like(k)
    hi = k.copy()
    active = ~everything & (hi - lo > 1)
    while np.any(active):
        mid = (lo + hi) // 2
        ok = np.asarray(load(mid), dtype=np.float64) <= np.asarray(compute(mid), dtype=np.float64)
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
        active = hi - lo > 1
    worst_lo = np.maximum(np.asarray(load(lo), dtype=np.float64),
                          np.asarray(compute(lo), dtype=np.float64))
    worst_hi = np.maximum(np.asarray(load(hi), dtype=np.float64),
                          np.asarray(compute(hi), dtype=np.float64))
    best = np.where(worst_hi < worst_lo, hi, lo)
    result: NDArray[np.int64] = np.where(everything, k, best).astype(np.int64)
    return result


def load_split(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike
               ) -> NDArray[np.int64]:
    """:func:`balanced_split` on a deployment: tokens of each request's ``K`` cached tokens to
    load (whole tokens; ``T`` and ``K`` broadcast to one axis), the request alone."""
    t, k = np.broadcast_arrays(np.atleast_1d(token_count("new_tokens", new_tokens)),
                               np.atleast_1d(token_count("cached_tokens", cached_tokens)))
    no_save = dataclasses.replace(dep, write_back=False)

    def load(loaded: NDArray[np.int64]) -> Any:
        return transfer_time(no_save, loaded)

    def compute(loaded: NDArray[np.int64]) -> Any:
        return compute_time(dep, t + k - loaded, loaded)

    return balanced_split(load, compute, k)
