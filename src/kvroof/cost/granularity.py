"""How cached KV is cut into copies: :class:`Granularity` (block size and copy layout).

A deployment's ``granularity`` (:class:`kvroof.cost.deployment.Deployment`) sets it; an engine
profile gives its own (:mod:`kvroof.cost.copy_size`). The copies it makes are counted in
:mod:`kvroof.cost.kv_terms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_count
from kvroof.cost.groups import layer_groups
from kvroof.cost.kv_terms import KvTerms, copy_terms, evaluate
from kvroof.errors import KvroofError
from kvroof.specs.model import ModelSpec

__all__ = ["COPY_LAYOUTS", "CopyLayout", "Granularity"]

CopyLayout = Literal["per-layer", "per-layer-kv", "per-block"]
COPY_LAYOUTS: tuple[CopyLayout, ...] = ("per-layer", "per-layer-kv", "per-block")


@dataclass(frozen=True)
class Granularity:
    """How cached KV is cut into copies.

    ``block_tokens``: tokens per block (LMCache's default chunk is 256; vLLM's block is 16);
    ``None`` moves a request's cache as one block. ``layout``: ``per-layer`` makes one copy per
    layer per block (layer-wise loading), ``per-layer-kv`` one per layer and per K/V tensor per
    block (vLLM's CPU offload handler; MLA has a single tensor), ``per-block`` one copy per block
    for all layers.

    The number of copies for ``K`` tokens is ``copies_per_block x K / block_tokens``: the block
    count is amortized (fractional), which keeps transfer time affine in ``K``; an engine that
    rounds up pays at most one more block of copies per request.
    """

    block_tokens: int | None = 256
    layout: CopyLayout = "per-layer"

    def __post_init__(self) -> None:
        if self.block_tokens is not None and (
            isinstance(self.block_tokens, bool)
            or not isinstance(self.block_tokens, int)
            or self.block_tokens <= 0
        ):
            raise KvroofError(f"block_tokens: expected a positive integer or None, got "
                              f"{self.block_tokens!r}")
        if self.layout not in COPY_LAYOUTS:
            raise KvroofError(
                f"layout: expected one of {', '.join(COPY_LAYOUTS)}, got {self.layout!r}"
            )

    def copies_per_block(self, model: ModelSpec) -> int:
        """Copies needed to move one block of every layer that keeps KV (a layer reusing
        another's KV keeps none)."""
        if self.layout == "per-block":
            return 1
        return sum(g.count * (g.tensors if self.layout == "per-layer-kv" else 1)
                   for g in layer_groups(model) if g.holds != "none" or g.state_bytes)

    def copy_terms(self, model: ModelSpec, local_kv: str = "held",
                   sparse_share: float = 1.0) -> KvTerms:
        """The copies for ``K`` tokens as :class:`~kvroof.cost.kv_terms.KvTerms`: per token of
        the layers that keep every token, per token of each window and chunk, and per request
        (a linear layer's state, or a request moved as one block)."""
        return copy_terms(layer_groups(model), self.block_tokens, self.layout, local_kv,
                          sparse_share)

    def transfers(self, model: ModelSpec, cached_tokens: ArrayLike) -> Any:
        """Number of copies (amortized) to move ``cached_tokens`` tokens. A sliding-window
        layer holds at most ``W - 1`` tokens, so it needs only the blocks of those (a chunked layer
        those of its current chunk)."""
        k = token_count("cached_tokens", cached_tokens)
        return scalar_or_array(np.asarray(evaluate(self.copy_terms(model), k),
                                          dtype=np.float64))
