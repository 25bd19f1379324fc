"""Parameter counts of a model spec, total and active per token, under one stated convention.

Convention (the same for every model; published figures that count differently are compared in
the tests with the difference stated, never by bending this):

- weight matrices of every linear layer, biases and attention sinks left out;
- the input embedding (``vocab x hidden``) and, when not tied, the LM head (``hidden x vocab``);
- attention: query, key, value and output projections; for MLA the low-rank query path
  (``hidden x q_lora`` + ``q_lora x heads*(nope+rope)``, or ``hidden x heads*(nope+rope)`` without
  it), ``kv_a`` (``hidden x (kv_lora+rope)``), ``kv_b`` (``kv_lora x heads*(nope+v)``) and the
  output (``heads*v x hidden``), plus the RMSNorm weights of the two latents;
- FFN: gated (three matrices of ``hidden x width``) dense layers; MoE layers hold the router
  (``hidden x experts``), every routed expert (all for the total, the top-k for the active count)
  and the shared experts;
- RMSNorm weights: two per layer of ``hidden``, one final, and per-head q/k norms (``head_dim``
  each) where the model has QK-norm.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec, MoEFFN

__all__ = ["AttentionParams", "ParamCounts", "attention_params", "attention_params_per_layer",
           "param_counts"]


@dataclass(frozen=True)
class AttentionParams:
    """The weights of one attention block, by how tensor parallelism splits them.

    ``per_head``: split over the query heads (GQA query and output projections; MLA's ``q_b``
    (or the direct query projection), ``kv_b`` and output); ``per_kv_head``: GQA key and value
    projections, split over the KV heads (a rank holds ``max(1/TP, 1/kv_heads)`` of them);
    ``replicated``: kept whole on every rank (MLA's ``q_a`` and ``kv_a`` down-projections and
    their norms, QK-norm weights), as vLLM and SGLang shard them.
    """

    per_head: int
    per_kv_head: int
    replicated: int

    @property
    def total(self) -> int:
        return self.per_head + self.per_kv_head + self.replicated


def attention_params(model: ModelSpec) -> AttentionParams:
    """Weights of one attention block (projections and latent/QK norms), by TP split."""
    d = model.hidden_size
    att = model.attention
    if isinstance(att, GQAAttention):
        h, hkv, dh = att.num_heads, att.num_kv_heads, att.head_dim
        norms = 2 * dh if att.qk_norm else 0
        return AttentionParams(per_head=2 * d * h * dh, per_kv_head=2 * d * hkv * dh,
                               replicated=norms)
    assert isinstance(att, MLAAttention)
    h = att.num_heads
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    if att.q_lora_rank is None:
        query_heads, query_down = d * h * qk, 0
    else:
        query_heads = att.q_lora_rank * h * qk
        query_down = d * att.q_lora_rank + att.q_lora_rank
    kv_a = d * (att.kv_lora_rank + att.qk_rope_head_dim) + att.kv_lora_rank
    kv_b = att.kv_lora_rank * h * (att.qk_nope_head_dim + att.v_head_dim)
    output = h * att.v_head_dim * d
    return AttentionParams(per_head=query_heads + kv_b + output, per_kv_head=0,
                           replicated=query_down + kv_a)


def attention_params_per_layer(model: ModelSpec) -> int:
    """Weights of one attention block (projections and latent/QK norms)."""
    return attention_params(model).total


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by part (exact integers). ``total`` and ``active`` add them up."""

    embedding: int
    lm_head: int
    attention: int
    norms: int
    dense_ffn: int
    router: int
    shared_experts: int
    routed_experts_total: int
    routed_experts_active: int

    @property
    def total(self) -> int:
        """Every parameter stored (all routed experts)."""
        return (
            self.embedding + self.lm_head + self.attention + self.norms + self.dense_ffn
            + self.router + self.shared_experts + self.routed_experts_total
        )

    @property
    def active(self) -> int:
        """Parameters one token passes through (top-k routed experts only)."""
        return self.total - self.routed_experts_total + self.routed_experts_active

    @property
    def active_without_embedding(self) -> int:
        """Active parameters less the input embedding (how some publishers count)."""
        return self.active - self.embedding


def param_counts(model: ModelSpec) -> ParamCounts:
    """Count the parameters of ``model`` under the module's convention."""
    d, n_layers, vocab = model.hidden_size, model.num_layers, model.vocab_size
    embedding = vocab * d
    lm_head = 0 if model.tie_word_embeddings else vocab * d
    attention = n_layers * attention_params_per_layer(model)
    norms = (2 * n_layers + 1) * d
    ffn = model.ffn
    if isinstance(ffn, MoEFFN):
        moe_layers = n_layers - ffn.first_k_dense
        dense_width = ffn.dense_intermediate_size or 0
        expert = 3 * d * ffn.expert_intermediate_size
        return ParamCounts(
            embedding=embedding,
            lm_head=lm_head,
            attention=attention,
            norms=norms,
            dense_ffn=ffn.first_k_dense * 3 * d * dense_width,
            router=moe_layers * d * ffn.num_experts,
            shared_experts=moe_layers * ffn.num_shared_experts * 3 * d
            * ffn.shared_expert_intermediate_size,
            routed_experts_total=moe_layers * ffn.num_experts * expert,
            routed_experts_active=moe_layers * ffn.experts_per_token * expert,
        )
    return ParamCounts(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        norms=norms,
        dense_ffn=n_layers * 3 * d * ffn.intermediate_size,
        router=0,
        shared_experts=0,
        routed_experts_total=0,
        routed_experts_active=0,
    )
