"""Attention shapes: grouped-query (GQA, MQA, MHA) and multi-head latent attention (MLA).

A discriminated union on ``kind``: ``gqa``/``mha``/``mqa`` (query heads, KV heads and
``head_dim`` *as given by the model*, never hidden/heads) or ``mla`` (DeepSeek's multi-head latent
attention).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from kvroof.specs.base import HeadCount, SpecModel, Width

__all__ = ["Attention", "GQAAttention", "MLAAttention"]


class GQAAttention(SpecModel):
    """Grouped-query attention; ``mha`` (KV heads = heads) and ``mqa`` (one KV head) are special
    cases. ``qk_norm``: an RMSNorm on queries and keys, counted in parameters; its
    ``qk_norm_scope`` is ``per_head`` (one ``head_dim`` weight vector shared by the heads, Qwen3,
    Gemma 3) or ``all_heads`` (one RMSNorm over the whole query projection and one over the whole
    key projection, ``num_heads x head_dim`` and ``num_kv_heads x head_dim`` weights: MiniMax-M2's
    ``qk_norm_type: per_layer``, transformers ``modeling_minimax_m2.py``).
    ``output_gate``: a sigmoid gate on the attention output computed by the query projection,
    which then has twice the query width (Qwen3-Next and Qwen3.5 ``attn_output_gate``)."""

    kind_name: ClassVar[str] = "attention"

    kind: Literal["gqa", "mha", "mqa"] = "gqa"
    num_heads: HeadCount
    num_kv_heads: HeadCount
    head_dim: Width
    qk_norm: bool = False
    qk_norm_scope: Literal["per_head", "all_heads"] = "per_head"
    output_gate: bool = False

    @model_validator(mode="after")
    def _check(self) -> GQAAttention:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) is not divisible by num_kv_heads "
                f"({self.num_kv_heads})"
            )
        if self.kind == "mha" and self.num_kv_heads != self.num_heads:
            raise ValueError("kind 'mha' needs num_kv_heads == num_heads; use 'gqa'")
        if self.kind == "mqa" and self.num_kv_heads != 1:
            raise ValueError("kind 'mqa' needs num_kv_heads == 1; use 'gqa'")
        if self.qk_norm_scope != "per_head" and not self.qk_norm:
            raise ValueError(f"qk_norm_scope {self.qk_norm_scope} needs qk_norm: true")
        return self


class MLAAttention(SpecModel):
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).

    The KV cache per layer per token is the compressed latent (``kv_lora_rank``) plus the
    decoupled RoPE key (``qk_rope_head_dim``), shared by all heads. ``q_lora_rank`` is ``None``
    when queries are projected directly (DeepSeek-V2-Lite).
    """

    kind_name: ClassVar[str] = "attention"

    kind: Literal["mla"]
    num_heads: HeadCount
    q_lora_rank: Width | None
    kv_lora_rank: Width
    qk_nope_head_dim: Width
    qk_rope_head_dim: Width
    v_head_dim: Width


Attention = Annotated[GQAAttention | MLAAttention, Field(discriminator="kind")]
