"""Model specs: the architecture fields that decide FLOPs, KV bytes and parameter counts.

Attention is a discriminated union on ``kind``: ``gqa``/``mha``/``mqa`` (query heads, KV heads and
``head_dim`` *as given by the model*, never hidden/heads) or ``mla`` (DeepSeek's multi-head latent
attention). The FFN is ``dense`` (gated, three matrices) or ``moe`` (routed experts, optional
shared experts and leading dense layers). Some layers may use a sliding window.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, model_validator

from kvroof.errors import short_repr
from kvroof.specs.base import MAX_COUNT, PositiveInt, SourcedSpec, SpecModel, WeightDtype

__all__ = [
    "FFN",
    "Attention",
    "DenseFFN",
    "GQAAttention",
    "MLAAttention",
    "MoEFFN",
    "ModelSpec",
    "PublishedParams",
    "SlidingWindow",
    "WeightFormat",
]

NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_COUNT, strict=True)]

# possessive quantifiers: linear-time matching on any text (see kvroof.units)
_COUNT_RE = re.compile(
    r"^\s*+([-+]?+\d[\d_]*+(?:\.\d*+)?+(?:[eE][-+]?+\d++)?+)\s*+([kKMBGT]?+)\s*+$")
_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _parse_count(value: object) -> float:
    """A parameter count: a number, ``"235e9"``, or ``"235B"`` / ``"1T"`` (B = billion here)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a count like '235B' or 235.0e+9, got {short_repr(value)}")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            number = math.inf
    elif isinstance(value, str) and (match := _COUNT_RE.match(value)):
        number = float(match.group(1).replace("_", "")) * _COUNT_SUFFIX[match.group(2)]
    else:
        raise ValueError(f"expected a count like '235B' or 235.0e+9, got {short_repr(value)}")
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"a parameter count must be positive and finite, got {short_repr(value)}")
    return number


Count = Annotated[float, BeforeValidator(_parse_count)]


class GQAAttention(SpecModel):
    """Grouped-query attention; ``mha`` (KV heads = heads) and ``mqa`` (one KV head) are special
    cases. ``qk_norm``: a per-head RMSNorm on queries and keys (Qwen3), counted in parameters."""

    kind_name: ClassVar[str] = "attention"

    kind: Literal["gqa", "mha", "mqa"] = "gqa"
    num_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
    qk_norm: bool = False

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
        return self


class MLAAttention(SpecModel):
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).

    The KV cache per layer per token is the compressed latent (``kv_lora_rank``) plus the
    decoupled RoPE key (``qk_rope_head_dim``), shared by all heads. ``q_lora_rank`` is ``None``
    when queries are projected directly (DeepSeek-V2-Lite).
    """

    kind_name: ClassVar[str] = "attention"

    kind: Literal["mla"]
    num_heads: PositiveInt
    q_lora_rank: PositiveInt | None
    kv_lora_rank: PositiveInt
    qk_nope_head_dim: PositiveInt
    qk_rope_head_dim: PositiveInt
    v_head_dim: PositiveInt


Attention = Annotated[GQAAttention | MLAAttention, Field(discriminator="kind")]


class SlidingWindow(SpecModel):
    """Layers with index ``i`` where ``i % period == offset`` attend to the last ``size`` tokens
    only (gpt-oss: size 128, period 2, offset 0 = every even layer)."""

    kind_name: ClassVar[str] = "sliding window"

    size: PositiveInt
    period: PositiveInt = 1
    offset: NonNegativeInt = 0

    @model_validator(mode="after")
    def _check(self) -> SlidingWindow:
        if self.offset >= self.period:
            raise ValueError(f"offset ({self.offset}) must be below period ({self.period})")
        return self

    def is_sliding(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) uses the window."""
        return layer % self.period == self.offset

    def count(self, num_layers: int) -> int:
        """Number of sliding-window layers among ``num_layers``."""
        return sum(1 for layer in range(num_layers) if self.is_sliding(layer))


class DenseFFN(SpecModel):
    """A gated (SwiGLU-style, three matrices) feed-forward block of width ``intermediate_size``."""

    kind_name: ClassVar[str] = "ffn"

    kind: Literal["dense"]
    intermediate_size: PositiveInt


class MoEFFN(SpecModel):
    """Mixture of experts: ``num_experts`` routed gated experts of width
    ``expert_intermediate_size``, ``experts_per_token`` chosen per token, ``num_shared_experts``
    always-on experts of width ``shared_expert_intermediate_size`` each, and ``first_k_dense``
    leading layers that use a dense FFN of width ``dense_intermediate_size`` instead."""

    kind_name: ClassVar[str] = "ffn"

    kind: Literal["moe"]
    num_experts: PositiveInt
    experts_per_token: PositiveInt
    expert_intermediate_size: PositiveInt
    num_shared_experts: NonNegativeInt = 0
    shared_expert_intermediate_size: NonNegativeInt = 0
    first_k_dense: NonNegativeInt = 0
    dense_intermediate_size: PositiveInt | None = None

    @model_validator(mode="after")
    def _check(self) -> MoEFFN:
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) exceeds num_experts "
                f"({self.num_experts})"
            )
        if (self.num_shared_experts > 0) != (self.shared_expert_intermediate_size > 0):
            raise ValueError(
                "num_shared_experts and shared_expert_intermediate_size must both be zero or "
                "both positive"
            )
        if self.first_k_dense > 0 and self.dense_intermediate_size is None:
            raise ValueError("first_k_dense > 0 needs dense_intermediate_size")
        return self


FFN = Annotated[DenseFFN | MoEFFN, Field(discriminator="kind")]


class WeightFormat(SpecModel):
    """The data types the published checkpoint stores its weights in.

    ``dtype`` covers every linear layer (attention, dense FFN, router); ``experts`` overrides it
    for the routed and shared experts of a MoE model (gpt-oss ships MXFP4 experts and bf16
    attention); ``embeddings`` covers the input embedding and the LM head, which quantized
    checkpoints usually keep in bf16 (DeepSeek-V3's FP8 release does).
    """

    kind_name: ClassVar[str] = "weights"

    dtype: WeightDtype = "bf16"
    experts: WeightDtype | None = None
    embeddings: WeightDtype = "bf16"

    @property
    def expert_dtype(self) -> str:
        """The dtype of expert weights (``dtype`` unless ``experts`` overrides it)."""
        return self.experts or self.dtype


class PublishedParams(SpecModel):
    """Parameter counts as the publisher states them (may be rounded or count differently)."""

    kind_name: ClassVar[str] = "published parameters"

    total: Count
    active: Count

    @model_validator(mode="after")
    def _check(self) -> PublishedParams:
        if self.active > self.total:
            raise ValueError(f"active ({self.active:g}) exceeds total ({self.total:g})")
        return self


class ModelSpec(SourcedSpec):
    """A decoder-only transformer as kvroof needs it."""

    kind_name: ClassVar[str] = "model"

    num_layers: PositiveInt
    hidden_size: PositiveInt
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    attention: Attention
    ffn: FFN
    sliding_window: SlidingWindow | None = None
    max_context: PositiveInt | None = None
    weights: WeightFormat = WeightFormat()
    published: PublishedParams | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if isinstance(self.ffn, MoEFFN) and self.ffn.first_k_dense > self.num_layers:
            raise ValueError(
                f"ffn.first_k_dense ({self.ffn.first_k_dense}) exceeds num_layers "
                f"({self.num_layers})"
            )
        return self

    @property
    def is_moe(self) -> bool:
        return isinstance(self.ffn, MoEFFN)

    @property
    def is_mla(self) -> bool:
        return isinstance(self.attention, MLAAttention)

    @property
    def num_sliding_layers(self) -> int:
        """Layers that attend through a sliding window (0 without one)."""
        return 0 if self.sliding_window is None else self.sliding_window.count(self.num_layers)

    @property
    def num_full_layers(self) -> int:
        """Layers that attend to the whole context."""
        return self.num_layers - self.num_sliding_layers

    def architecture(self) -> dict[str, Any]:
        """The fields that decide FLOPs, KV bytes and parameters (no names, sources, notes)."""
        return self.model_dump(include=set(ARCHITECTURE_FIELDS))


ARCHITECTURE_FIELDS = (
    "num_layers",
    "hidden_size",
    "vocab_size",
    "tie_word_embeddings",
    "attention",
    "ffn",
    "sliding_window",
    "weights",
)
