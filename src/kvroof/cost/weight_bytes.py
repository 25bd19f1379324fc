"""Weight bytes of one tensor-parallel rank: what it stores, and the share of the routed experts
a forward pass touches (from the model alone; what a deployment reads per pass is
:func:`kvroof.cost.weights.weights_read_per_rank`).

Sharding (as vLLM and SGLang shard a model over ``TP`` ranks, no expert parallelism):

- attention: per-head weights split ``TP`` ways; GQA key/value projections split over the KV
  heads (a rank holds ``max(1/TP, 1/kv_heads)`` of them: heads are replicated once ``TP`` exceeds
  their count); MLA's ``q_a``/``kv_a`` down-projections, the QK/latent norms and a sparse layer's
  indexer on every rank (see :class:`kvroof.cost.params.AttentionParams`), each layer kind with
  its own shape; linear-attention layers split over their heads;
- dense FFN, shared experts and every routed expert: split ``TP`` ways (each expert's
  intermediate dimension is sharded); the router on every rank;
- embedding and LM head: split ``TP`` ways over the vocabulary; layer norms on every rank;
  per-layer input tables (Gemma 4 E-models) like the embedding, their projections ``TP`` ways.

Bytes per parameter follow the checkpoint's format (:class:`kvroof.specs.model.WeightFormat`):
linear layers in ``weights.dtype``, experts in ``weights.experts``, embedding and LM head in
``weights.embeddings``; a deployment's ``weight_dtype`` replaces the linear-layer and expert
dtypes (the embeddings keep theirs).

What a forward pass over ``N`` tokens reads from HBM: every non-expert weight once, the LM head
once, and of each MoE layer's routed experts only those the ``N`` tokens are routed to. With
top-``k`` routing over ``E`` experts, uniform and independent per token, one expert is missed by
one token with probability ``1 - k/E`` and by all ``N`` with ``(1 - k/E)^N``, so the expected
share of a layer's experts touched is ``1 - (1 - k/E)^N`` (:func:`touched_expert_share`; the
tests check it against a simulation of random top-k routing). Real routers are not uniform, so
this is an upper bound on the distinct experts touched for a given load balance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import dtype_bytes, scalar_or_array, token_count
from kvroof.cost.params import layer_params, param_counts
from kvroof.specs.model import ModelSpec

__all__ = [
    "WeightBytes",
    "touched_expert_share",
    "touched_share",
    "weight_bytes_per_rank",
]


def touched_share(miss: float, tokens: Any) -> Any:
    """``1 - miss^tokens`` for validated floats or arrays: the share of a layer's experts that
    ``tokens`` tokens touch when one token misses a given expert with probability ``miss``."""
    return 1.0 - miss ** tokens


def touched_expert_share(num_experts: int, experts_per_token: int, tokens: ArrayLike) -> Any:
    """Expected share of one MoE layer's routed experts that ``tokens`` tokens are routed to,
    ``1 - (1 - k/E)^tokens`` (uniform, independent top-k routing; 0 for no tokens)."""
    n = token_count("tokens", tokens)
    return scalar_or_array(np.asarray(touched_share(1.0 - experts_per_token / num_experts, n)))


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes one TP rank holds, by part (routed experts: all of them)."""

    attention: float
    norms: float
    dense_ffn: float
    router: float
    shared_experts: float
    routed_experts: float
    embedding: float
    lm_head: float
    tied_head: bool = False
    per_layer_embedding: float = 0.0
    per_layer_projection: float = 0.0

    @property
    def total(self) -> float:
        """Bytes stored on the rank."""
        return (self.attention + self.norms + self.dense_ffn + self.router
                + self.shared_experts + self.routed_experts + self.embedding + self.lm_head
                + self.per_layer_embedding + self.per_layer_projection)

    @property
    def always_read(self) -> float:
        """Bytes every forward pass reads whatever the routing: all but the routed experts and
        the input embedding and per-layer input table (a pass reads only its tokens' rows of
        those), except that a tied LM head is the embedding matrix and is read whole."""
        embedding = 0.0 if self.tied_head else self.embedding
        return self.total - self.routed_experts - embedding - self.per_layer_embedding


def weight_bytes_per_rank(
    model: ModelSpec, tp: int = 1, weight_dtype: str | None = None
) -> WeightBytes:
    """Weight bytes one of ``tp`` ranks stores (``weight_dtype`` overrides the checkpoint's
    linear-layer and expert dtypes)."""
    counts = param_counts(model)
    linear = dtype_bytes(weight_dtype or model.weights.dtype)
    expert = dtype_bytes(weight_dtype or model.weights.expert_dtype)
    embed = dtype_bytes(model.weights.embeddings)
    per_kind: dict[str, float] = {}
    for name, kind in dict(model.layer_kinds).items():
        att = layer_params(model, kind)
        kv_share = max(1.0 / tp, 1.0 / att.kv_heads) if att.per_kv_head else 1.0 / tp
        per_kind[name] = att.per_head / tp + att.per_kv_head * kv_share + att.replicated
    attention = sum(per_kind[name] for name, _ in model.layer_kinds)
    return WeightBytes(
        attention=attention * linear,
        norms=counts.norms * linear,
        dense_ffn=counts.dense_ffn / tp * linear,
        router=counts.router * linear,
        shared_experts=counts.shared_experts / tp * expert,
        routed_experts=counts.routed_experts_total / tp * expert,
        embedding=counts.embedding / tp * embed,
        lm_head=counts.lm_head / tp * embed,
        tied_head=model.tie_word_embeddings,
        per_layer_embedding=counts.per_layer_embedding / tp * embed,
        per_layer_projection=counts.per_layer_projection / tp * linear,
    )
