"""(query, key) pairs of causal attention: how many keys the new tokens of a prefill (or one
decode) score in a layer that sees every earlier position, a sliding window of ``W`` positions
or a chunk of ``C`` positions.

Full attention has ``T*K + T*(T+1)/2`` pairs (causal, diagonal included); in a sliding-window
layer the query at absolute position ``p`` (0-based) sees ``min(p+1, W)`` keys, in a chunked
layer ``(p mod C) + 1``. Every function takes floats or broadcasting numpy arrays.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import minimum, scalar_or_array, token_count
from kvroof.errors import KvroofError

__all__ = ["attention_pairs", "capped_pairs", "capped_positions"]


def _window_prefix_sum(n: Any, window: float) -> Any:
    """sum_{q=1..n} min(q, W): keys seen by the first ``n`` positions of a window-W layer
    (floats or arrays)."""
    m = minimum(n, window)
    return m * (m + 1.0) / 2.0 + (n - m) * window


def _chunk_prefix_sum(n: Any, chunk: float) -> Any:
    """sum_{p=0..n-1} ((p mod C) + 1): keys seen by the first ``n`` positions of a layer that
    attends within chunks of ``C`` (floats or arrays)."""
    full = np.floor(n / chunk) if not isinstance(n, float) else float(math.floor(n / chunk))
    rest = n - full * chunk
    return full * (chunk * (chunk + 1.0) / 2.0) + rest * (rest + 1.0) / 2.0


def capped_pairs(rule: str, span: float, t: Any, k: Any) -> Any:
    """Pairs of ``t`` new tokens after ``k`` cached ones in one ``window`` or ``chunk`` layer."""
    if rule == "window":
        return _window_prefix_sum(k + t, span) - _window_prefix_sum(k, span)
    return _chunk_prefix_sum(k + t, span) - _chunk_prefix_sum(k, span)


def capped_positions(rule: str, span: float, positions: Any) -> Any:
    """Keys the query at ``positions`` (0-based; a decode on ``positions`` cached tokens) sees
    in one ``window`` or ``chunk`` layer: ``min(p + 1, W)`` or ``(p mod C) + 1``."""
    if rule == "window":
        return minimum(positions + 1.0, span)
    return positions - _floor(positions / span) * span + 1.0


def _floor(x: Any) -> Any:
    return float(math.floor(x)) if isinstance(x, float) else np.floor(x)


def attention_pairs(
    new_tokens: ArrayLike, cached_tokens: ArrayLike, window: float | None = None,
    chunk: float | None = None,
) -> Any:
    """(query, key) pairs one layer scores when ``T`` new tokens follow ``K`` cached ones.

    Full attention: ``T*K + T*(T+1)/2``. Window ``W``: the query at absolute position ``p`` sees
    ``min(p+1, W)`` keys, summed over ``p = K .. K+T-1``. Chunk ``C``: it sees ``(p mod C) + 1``.
    """
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    if window is not None and chunk is not None:
        raise KvroofError("attention_pairs: give a window or a chunk, not both")
    if window is not None:
        return scalar_or_array(capped_pairs("window", window, t, k))
    if chunk is not None:
        return scalar_or_array(capped_pairs("chunk", chunk, t, k))
    return scalar_or_array(t * k + t * (t + 1.0) / 2.0)
