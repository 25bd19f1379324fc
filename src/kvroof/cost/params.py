"""Parameter counts of a model spec, total and active per token, under one stated convention.

Convention (the same for every model; published figures that count differently are compared in
the tests with the difference stated, never by bending this):

- weight matrices of every linear layer, biases and attention sinks left out;
- the input embedding (``vocab x hidden``) and, when not tied, the LM head (``hidden x vocab``);
- attention: query, key, value and output projections (the query twice as wide with an output
  gate); for MLA the low-rank query path (``hidden x q_lora`` + ``q_lora x heads*(nope+rope)``,
  or ``hidden x heads*(nope+rope)`` without it), ``kv_a`` (``hidden x (kv_lora+rope)``),
  ``kv_b`` (``kv_lora x heads*(nope+v)``) and the output (``heads*v x hidden``), plus the
  RMSNorm weights of the two latents; a layer that reuses another's KV only its query and
  output (and query norm); a sparse layer adds its indexer (``wq_b`` ``q_lora x H_I*d_I``,
  ``wk`` ``hidden x d_I``, ``weights_proj`` ``hidden x H_I`` and the key norm's ``d_I``);
- linear-attention layers: their projections (:mod:`kvroof.cost.groups`), the depthwise
  convolution (``channels x kernel``), the per-head decay parameters (``A_log``, ``dt_bias``)
  and the output norm;
- FFN: gated (three matrices of ``hidden x width``) dense layers; MoE layers hold the router
  (``hidden x experts``), every routed expert (all for the total, the top-k for the active count)
  and the shared experts (with their ``hidden x 1`` output gate where the model has one, Qwen3-Next
  and Qwen3.5);
- per-layer inputs (Gemma 4 E-models): their embedding table (``vocab x layers*width``, looked
  up like the input embedding), the projection from the hidden state and each layer's gate,
  projection and norm;
- RMSNorm weights: ``layer_norms`` per layer of ``hidden`` (two; four for Gemma 2, 3 and
  4, which also normalize before and after the FFN), one final, and q/k norms where the model has
  QK-norm (``head_dim`` each per layer, or ``heads x head_dim`` and ``kv_heads x head_dim`` for
  norms over all heads, MiniMax-M2).

Multi-token-prediction layers, vision and audio encoders are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvroof.specs.layers import LayerKind, LinearLayer, SharedLayer, SparseLayer
from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec, MoEFFN

__all__ = ["AttentionParams", "ParamCounts", "attention_params", "attention_params_per_layer",
           "layer_params", "param_counts"]


@dataclass(frozen=True)
class AttentionParams:
    """The weights of one attention block, by how tensor parallelism splits them.

    ``per_head``: split over the query heads (GQA query and output projections; MLA's ``q_b``
    (or the direct query projection), ``kv_b`` and output; a linear layer's projections,
    convolution and decay parameters, split over its heads); ``per_kv_head``: GQA key and value
    projections, split over the ``kv_heads`` KV heads (a rank holds ``max(1/TP, 1/kv_heads)`` of
    them); ``replicated``: kept whole on every rank (MLA's ``q_a`` and ``kv_a``
    down-projections and their norms, QK-norm weights, a sparse layer's indexer, a KDA layer's
    low-rank gate down-projections), as vLLM and SGLang shard them.
    """

    per_head: int
    per_kv_head: int
    replicated: int
    kv_heads: int = 1

    @property
    def total(self) -> int:
        return self.per_head + self.per_kv_head + self.replicated


def _gqa_params(model: ModelSpec, att: GQAAttention, with_kv: bool) -> AttentionParams:
    d = model.hidden_size
    h, hkv, dh = att.num_heads, att.num_kv_heads, att.head_dim
    query = d * h * dh * (2 if att.output_gate else 1)
    # q/k norms: one head_dim vector each (replicated), or over all heads (split with the heads
    # they scale, as vLLM's MiniMaxText01RMSNormTP shards them)
    per_head_norms = att.qk_norm and att.qk_norm_scope == "per_head"
    q_norm = (dh if per_head_norms else h * dh) if att.qk_norm else 0
    k_norm = (dh if per_head_norms else hkv * dh) if (att.qk_norm and with_kv) else 0
    replicated = q_norm + k_norm if per_head_norms else 0
    split_q, split_k = (0, 0) if per_head_norms else (q_norm, k_norm)
    kv = 2 * d * hkv * dh if with_kv else 0
    return AttentionParams(per_head=query + h * dh * d + split_q, per_kv_head=kv + split_k,
                           replicated=replicated, kv_heads=hkv)


def _mla_params(model: ModelSpec, att: MLAAttention, with_kv: bool) -> AttentionParams:
    d = model.hidden_size
    h = att.num_heads
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    if att.q_lora_rank is None:
        query_heads, query_down = d * h * qk, 0
    else:
        query_heads = att.q_lora_rank * h * qk
        query_down = d * att.q_lora_rank + att.q_lora_rank
    output = h * att.v_head_dim * d
    if not with_kv:
        return AttentionParams(per_head=query_heads + output, per_kv_head=0,
                               replicated=query_down)
    kv_a = d * (att.kv_lora_rank + att.qk_rope_head_dim) + att.kv_lora_rank
    kv_b = att.kv_lora_rank * h * (att.qk_nope_head_dim + att.v_head_dim)
    return AttentionParams(per_head=query_heads + kv_b + output, per_kv_head=0,
                           replicated=query_down + kv_a)


def _linear_params(model: ModelSpec, layer: LinearLayer) -> AttentionParams:
    d = model.hidden_size
    nk, nv, dk, dv = layer.num_key_heads, layer.num_value_heads, layer.key_head_dim, \
        layer.value_head_dim
    conv = layer.conv_channels * layer.conv_kernel
    if layer.variant == "gated-deltanet":
        split = (d * (2 * nk * dk + 2 * nv * dv) + d * 2 * nv + nv * dv * d + conv
                 + 2 * nv)  # in_proj_qkvz, in_proj_ba, out_proj, conv, A_log and dt_bias
        return AttentionParams(per_head=split, per_kv_head=0, replicated=dv)  # gated norm
    # kda: q/k/v, conv, forget gate (f_a down, f_b up, dt_bias per channel, A_log per head),
    # b_proj, output gate (g_a down, g_b up), o_proj; the low-rank downs are replicated
    split = (d * (2 * nk * dk + nv * dv) + conv + dk * nv * dk + nv * dk + nv + d * nv
             + dk * nv * dv + nv * dv * d)
    return AttentionParams(per_head=split, per_kv_head=0, replicated=2 * d * dk + dv)


def layer_params(model: ModelSpec, kind: LayerKind) -> AttentionParams:
    """Weights of the attention (or linear-attention) block of one layer of ``kind``."""
    if isinstance(kind, LinearLayer):
        return _linear_params(model, kind)
    attention = model.kind_attention(kind)
    with_kv = not isinstance(kind, SharedLayer)
    if isinstance(attention, GQAAttention):
        params = _gqa_params(model, attention, with_kv)
    else:
        params = _mla_params(model, attention, with_kv)
    if isinstance(kind, SparseLayer):
        indexer = kind.indexer
        assert isinstance(attention, MLAAttention) and attention.q_lora_rank is not None
        d = model.hidden_size
        extra = (attention.q_lora_rank * indexer.num_heads * indexer.head_dim
                 + d * indexer.head_dim + d * indexer.num_heads + indexer.head_dim)
        params = AttentionParams(params.per_head, params.per_kv_head, params.replicated + extra,
                                 params.kv_heads)
    return params


def attention_params(model: ModelSpec) -> AttentionParams:
    """Weights of one attention block of the model's ``attention`` (projections and latent/QK
    norms), by TP split."""
    if isinstance(model.attention, GQAAttention):
        return _gqa_params(model, model.attention, True)
    return _mla_params(model, model.attention, True)


def attention_params_per_layer(model: ModelSpec) -> int:
    """Weights of one attention block of the model's ``attention``."""
    return attention_params(model).total


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by part (exact integers). ``total`` and ``active`` add them up.
    ``attention`` counts every layer's attention or linear-attention block;
    ``per_layer_embedding`` the per-layer input table (looked up, like the embedding) and
    ``per_layer_projection`` its projections."""

    embedding: int
    lm_head: int
    attention: int
    norms: int
    dense_ffn: int
    router: int
    shared_experts: int
    routed_experts_total: int
    routed_experts_active: int
    per_layer_embedding: int = 0
    per_layer_projection: int = 0

    @property
    def total(self) -> int:
        """Every parameter stored (all routed experts)."""
        return (
            self.embedding + self.lm_head + self.attention + self.norms + self.dense_ffn
            + self.router + self.shared_experts + self.routed_experts_total
            + self.per_layer_embedding + self.per_layer_projection
        )

    @property
    def active(self) -> int:
        """Parameters one token passes through (top-k routed experts only)."""
        return self.total - self.routed_experts_total + self.routed_experts_active

    @property
    def active_without_embedding(self) -> int:
        """Active parameters less the input embedding (how some publishers count)."""
        return self.active - self.embedding

    @property
    def without_per_layer_embedding(self) -> int:
        """Total less the per-layer input table (Google's "effective" count for Gemma 3n and
        Gemma 4 E-models)."""
        return self.total - self.per_layer_embedding


def param_counts(model: ModelSpec) -> ParamCounts:
    """Count the parameters of ``model`` under the module's convention."""
    d, n_layers, vocab = model.hidden_size, model.num_layers, model.vocab_size
    embedding = vocab * d
    lm_head = 0 if model.tie_word_embeddings else vocab * d
    per_kind = {name: layer_params(model, kind).total for name, kind in
                dict(model.layer_kinds).items()}
    attention = sum(per_kind[name] for name, _ in model.layer_kinds)
    norms = (model.layer_norms * n_layers + 1) * d
    ple_table = ple_projection = 0
    if model.per_layer_input is not None:
        ple = model.per_layer_input
        ple_table = ple.vocab_size * n_layers * ple.hidden_size
        ple_projection = (d * n_layers * ple.hidden_size + ple.hidden_size
                          + n_layers * (2 * d * ple.hidden_size + d))
    ffn = model.ffn
    if isinstance(ffn, MoEFFN):
        moe_layers = ffn.num_moe_layers(n_layers)
        dense_width = ffn.dense_intermediate_size or 0
        expert = 3 * d * ffn.expert_intermediate_size
        return ParamCounts(
            embedding=embedding,
            lm_head=lm_head,
            attention=attention,
            norms=norms,
            dense_ffn=(n_layers - moe_layers) * 3 * d * dense_width,
            router=moe_layers * d * ffn.num_experts,
            shared_experts=moe_layers * (ffn.num_shared_experts * 3 * d
                                         * ffn.shared_expert_intermediate_size
                                         + (d if ffn.shared_expert_gate else 0)),
            routed_experts_total=moe_layers * ffn.num_experts * expert,
            routed_experts_active=moe_layers * ffn.experts_per_token * expert,
            per_layer_embedding=ple_table,
            per_layer_projection=ple_projection,
        )
    widths = sum(kind.ffn_intermediate_size or ffn.intermediate_size
                 for _, kind in model.layer_kinds)
    return ParamCounts(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        norms=norms,
        dense_ffn=3 * d * widths,
        router=0,
        shared_experts=0,
        routed_experts_total=0,
        routed_experts_active=0,
        per_layer_embedding=ple_table,
        per_layer_projection=ple_projection,
    )
