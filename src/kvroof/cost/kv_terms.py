"""What a request's cache amounts to as a function of its positions, summed over layer groups:
bytes held, loaded or saved per rank, and copies.

A quantity of ``P`` positions is ``per_token x P + sum_W b_W min(P, W - 1) + sum_C b_C (P mod C)
+ fixed [P > 0]``: the layers that keep every position, the sliding-window layers (the ``W - 1``
positions before the next query, which sees its own key besides them), the chunked layers
(only the current chunk), and what a request moves once whatever its length (a linear
layer's state, or a request moved as one block). Without windows and chunks it is affine in
``P``, which is what makes the closed-form kappa_crit possible.

What a sliding or chunked layer keeps is a setting (``local_kv``): ``held`` (the default:
the last ``W - 1`` tokens, or the current chunk's ``K mod C``, as an engine that frees what the
layer can no longer attend to keeps them; vLLM's hybrid KV cache manager, and with a KV
connector since vLLM PR 30166) or ``all`` (every cached token, as an engine that allocates every
layer like a full-attention layer keeps them; vLLM with ``--disable-hybrid-kv-cache-manager``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from kvroof.cost.checks import minimum, when_positive
from kvroof.cost.groups import LayerGroup

__all__ = ["LOCAL_KV", "KvTerms", "LocalKv", "copy_terms", "evaluate", "peak"]

LocalKv = Literal["held", "all"]
LOCAL_KV: tuple[LocalKv, ...] = ("held", "all")
CopyLayout = Literal["per-layer", "per-layer-kv", "per-block"]


@dataclass(frozen=True)
class KvTerms:
    """Coefficients of a quantity of ``P`` positions (module docstring)."""

    per_token: float = 0.0
    windows: tuple[tuple[float, float], ...] = ()
    """``(keep, coefficient)``: ``coefficient x min(P, keep)``, ``keep`` = W - 1."""
    chunks: tuple[tuple[float, float], ...] = ()
    """``(C, coefficient)``: ``coefficient x (P mod C)``."""
    fixed: float = 0.0
    plain: bool = field(init=False, repr=False, compare=False)
    """Only ``per_token`` (the common case: one multiplication)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", not (self.windows or self.chunks or self.fixed))

    @property
    def affine(self) -> bool:
        """No window or chunk terms: affine in ``P`` for ``P > 0``."""
        return not self.windows and not self.chunks


def evaluate(terms: KvTerms, positions: Any) -> Any:
    """The quantity for ``positions`` (a float or a broadcasting array)."""
    if terms.plain:
        return terms.per_token * positions
    total = terms.per_token * positions
    for window, coefficient in terms.windows:
        total = total + coefficient * minimum(positions, window)
    for chunk, coefficient in terms.chunks:
        total = total + coefficient * _remainder(positions, chunk)
    if terms.fixed:
        total = total + when_positive(positions, terms.fixed)
    return total


def peak(terms: KvTerms, positions: Any) -> Any:
    """The most the quantity reaches over a sequence of up to ``positions`` positions: what must
    fit in memory. While the query at position ``p`` runs, its own key is in the cache besides
    what the layer keeps: a window layer holds up to ``min(P, W)`` (``W - 1`` kept plus the
    query's), a chunked layer's current chunk fills up to ``min(P, C)``."""
    total = terms.per_token * positions
    for keep, coefficient in terms.windows:
        total = total + coefficient * minimum(positions, keep + 1.0)
    for chunk, coefficient in terms.chunks:
        total = total + coefficient * minimum(positions, chunk)
    if terms.fixed:
        total = total + when_positive(positions, terms.fixed)
    return total


def _remainder(positions: Any, chunk: float) -> Any:
    if type(positions) is float:
        return positions - math.floor(positions / chunk) * chunk
    return positions - np.floor(positions / chunk) * chunk


def combine(parts: Iterable[tuple[str, float, float]], fixed: float = 0.0) -> KvTerms:
    """KvTerms from ``(holds, keep, coefficient)`` parts (``holds``: ``all``, ``window`` or
    ``chunk``; ``keep``: a group's :attr:`~kvroof.cost.groups.LayerGroup.keep`), merging equal
    ones."""
    per_token = 0.0
    windows: dict[float, float] = {}
    chunks: dict[float, float] = {}
    for holds, span, coefficient in parts:
        if not coefficient:
            continue
        if holds == "all":
            per_token += coefficient
        elif holds == "window":
            windows[span] = windows.get(span, 0.0) + coefficient
        elif holds == "chunk":
            chunks[span] = chunks.get(span, 0.0) + coefficient
    return KvTerms(per_token, tuple(windows.items()), tuple(chunks.items()), fixed)


def holding(group: LayerGroup, local_kv: str) -> str:
    """What a group keeps under ``local_kv`` (``all`` turns windows and chunks into ``all``)."""
    if group.holds in ("window", "chunk") and local_kv == "all":
        return "all"
    return group.holds


def copy_terms(groups: Iterable[LayerGroup], block_tokens: int | None, layout: str,
               local_kv: str = "held", sparse_share: float = 1.0) -> KvTerms:
    """Copies to move ``P`` positions of a request: one per layer (per tensor with
    ``per-layer-kv``) per block of ``block_tokens`` positions that layer keeps (amortized,
    fractional), or one per block for all layers (``per-block``); a linear layer's state is
    one copy per layer (per tensor) per request; ``block_tokens`` None moves a request as one
    block. A sparse layer moving a selected share ``s`` of its latents copies the indexer keys
    of every block and the selected latent blocks apart: ``1 + s`` copies per block."""
    parts: list[tuple[str, float, float]] = []
    fixed = 0.0
    keeps = [g for g in groups if g.holds != "none" or g.state_bytes]
    if layout == "per-block":
        if block_tokens is None:
            return KvTerms(fixed=1.0 if keeps else 0.0)
        has_state = any(g.state_bytes for g in keeps)
        return KvTerms(per_token=1.0 / block_tokens if any(g.holds != "none" for g in keeps)
                       else 0.0, fixed=1.0 if has_state else 0.0)
    for g in keeps:
        tensors = g.tensors if layout == "per-layer-kv" else 1
        if block_tokens is None or g.holds == "none":
            fixed += g.count * tensors
            continue
        per_block = float(g.count * tensors)
        if g.kind == "sparse" and sparse_share < 1.0:
            per_block *= 1.0 + sparse_share
        parts.append((holding(g, local_kv), g.keep, per_block / block_tokens))
        if g.state_bytes:
            fixed += g.count * tensors
    return combine(parts, fixed)
