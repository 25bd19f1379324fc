"""Per-layer attention kinds: which layers attend how, declared in a model spec's ``layers``.

A model whose layers do not all attend the same way names its kinds and lays them out::

    layers:
      kinds:
        linear: {kind: linear, variant: gated-deltanet, num_key_heads: 16, ...}
        full: {kind: full}                    # the model's ``attention``
      pattern: [{repeat: [linear, linear, linear, full], layers: 48}]

``pattern`` lists the layers in order: a kind name is one layer, ``{repeat: [...], layers: n}``
is ``n`` layers cycling through the names (HuggingFace's ``layer_types`` is the explicit list).
It must cover exactly ``num_layers`` layers. ``full`` needs no definition (it is the model's
``attention``); every other name must be defined under ``kinds``.

Kinds:

- ``full``: attention over every earlier position (GQA/MQA/MHA or MLA, the model's
  ``attention`` unless the kind gives its own);
- ``sliding``: the last ``window`` positions (the query at position ``p`` sees ``min(p+1, W)``);
- ``chunked``: the query's own chunk of ``chunk`` positions, chunk-aligned as Llama 4's local
  layers (position ``p`` sees ``floor(p/C) x C .. p``);
- ``linear``: a linear-attention / delta-rule layer (Qwen3-Next's Gated DeltaNet, Kimi
  Linear's KDA) with a fixed recurrent state of ``num_value_heads x key_head_dim x
  value_head_dim`` per request in ``state_dtype``, plus a short-convolution state;
- ``sparse``: DeepSeek Sparse Attention (DeepSeek-V3.2): the model's MLA attention over at
  most ``indexer.topk`` keys per query, picked by the lightning indexer, which scores every
  cached key from its own key cache;
- ``shared``: reuses the KV of layer ``source`` (Gemma 3n/4 KV sharing, cross-layer
  attention): no KV of its own, attention as its source's kind.

Any kind may set ``ffn_intermediate_size``: the dense FFN width of its layers (Gemma 4 E2B
doubles the MLP of its KV-sharing layers).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from kvroof.errors import short_repr
from kvroof.specs.attention import Attention
from kvroof.specs.base import (
    HeadCount,
    KvDtype,
    LayerCount,
    LayerIndex,
    SpecModel,
    TokenCount,
    Width,
)

__all__ = [
    "ATTENTION_KINDS",
    "ChunkedLayer",
    "FullLayer",
    "Indexer",
    "LayerKind",
    "Layers",
    "LinearLayer",
    "Repeat",
    "SharedLayer",
    "SlidingLayer",
    "SparseLayer",
]


class _Layer(SpecModel):
    kind_name: ClassVar[str] = "layer kind"

    ffn_intermediate_size: Width | None = None


class _AttentionLayer(_Layer):
    attention: Attention | None = None
    """The attention of this kind's layers; ``None``: the model's ``attention``."""


class FullLayer(_AttentionLayer):
    """Attention over every earlier position."""

    kind: Literal["full"] = "full"


class SlidingLayer(_AttentionLayer):
    """Attention over the last ``window`` positions."""

    kind: Literal["sliding"]
    window: TokenCount


class ChunkedLayer(_AttentionLayer):
    """Attention within the query's chunk of ``chunk`` positions (Llama 4 local layers)."""

    kind: Literal["chunked"]
    chunk: TokenCount


class LinearLayer(_Layer):
    """A linear-attention / delta-rule layer with a fixed per-request state.

    ``variant`` fixes the projections: ``gated-deltanet`` (Qwen3-Next, Qwen3.5:
    ``in_proj_qkvz``, ``in_proj_ba``, ``out_proj``; keys and queries on ``num_key_heads``,
    values on ``num_value_heads``) or ``kda`` (Kimi Delta Attention: ``q/k/v_proj``, low-rank
    forget and output gates of rank ``key_head_dim``, ``b_proj``, ``o_proj``; as many key as
    value heads). The recurrent state is ``num_value_heads x key_head_dim x value_head_dim``
    elements in ``state_dtype``; the convolution state is ``channels x (conv_kernel - 1)`` in
    ``conv_dtype``. ``chunk`` is the chunk length of the chunkwise prefill algorithm (64 in FLA
    and transformers), which sets its intra-chunk FLOPs."""

    kind: Literal["linear"]
    variant: Literal["gated-deltanet", "kda"]
    num_key_heads: HeadCount
    num_value_heads: HeadCount
    key_head_dim: Width
    value_head_dim: Width
    conv_kernel: TokenCount
    state_dtype: KvDtype = "fp32"
    conv_dtype: KvDtype = "bf16"
    chunk: TokenCount = 64

    @model_validator(mode="after")
    def _check(self) -> LinearLayer:
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(f"num_value_heads ({self.num_value_heads}) is not a multiple of "
                             f"num_key_heads ({self.num_key_heads})")
        if self.variant == "kda" and self.num_value_heads != self.num_key_heads:
            raise ValueError("variant kda has as many key as value heads")
        return self

    @property
    def conv_channels(self) -> int:
        """Channels of the short convolution (queries, keys and values)."""
        return (2 * self.num_key_heads * self.key_head_dim
                + self.num_value_heads * self.value_head_dim)


class Indexer(SpecModel):
    """DeepSeek Sparse Attention's lightning indexer: ``num_heads`` query heads of ``head_dim``
    score one ``head_dim`` key per cached position; each query attends to the ``topk`` best.
    Its key cache holds ``head_dim`` elements in ``key_dtype`` plus ``key_scale_bytes`` of
    scales per position per layer (vLLM: FP8 keys and one 4-byte scale per 128 elements)."""

    kind_name: ClassVar[str] = "indexer"

    num_heads: HeadCount
    head_dim: Width
    topk: TokenCount
    key_dtype: KvDtype = "fp8"
    key_scale_bytes: Annotated[int, Field(ge=0, le=64, strict=True)] = 4


class SparseLayer(_Layer):
    """MLA attention over at most ``indexer.topk`` keys per query (DeepSeek-V3.2's DSA)."""

    kind: Literal["sparse"]
    indexer: Indexer


class SharedLayer(_Layer):
    """Attention over the KV of layer ``source`` (0-based), which it does not store again."""

    kind: Literal["shared"]
    source: LayerIndex


LayerKind = Annotated[
    FullLayer | SlidingLayer | ChunkedLayer | LinearLayer | SparseLayer | SharedLayer,
    Field(discriminator="kind"),
]
ATTENTION_KINDS = ("full", "sliding", "chunked", "sparse")
"""Kinds that keep KV of their own (a shared layer's source must be one)."""


class Repeat(SpecModel):
    """``layers`` layers cycling through ``repeat``."""

    kind_name: ClassVar[str] = "pattern segment"

    repeat: Annotated[tuple[str, ...], Field(min_length=1)]
    layers: LayerCount


class Layers(SpecModel):
    """The layer kinds (``kinds``) and their order (``pattern``)."""

    kind_name: ClassVar[str] = "layers"

    kinds: dict[str, LayerKind] = Field(default_factory=dict)
    pattern: Annotated[tuple[str | Repeat, ...], Field(min_length=1)]

    @field_validator("pattern")
    @classmethod
    def _check_names(cls, pattern: tuple[str | Repeat, ...],
                     info: ValidationInfo) -> tuple[str | Repeat, ...]:
        if "kinds" not in info.data:
            return pattern  # the kinds failed validation: that error is the one to report
        known = set(info.data["kinds"]) | {"full"}
        for index, item in enumerate(pattern):
            names = item.repeat if isinstance(item, Repeat) else (item,)
            for name in names:
                if name not in known:
                    raise ValidationError.from_exception_data("pattern", [InitErrorDetails(
                        type=PydanticCustomError(
                            "value_error", "unknown layer kind {name} (defined: {known})",
                            {"name": short_repr(name), "known": ", ".join(sorted(known))}),
                        loc=(index,), input=name)])
        return pattern

    def expanded(self) -> tuple[str, ...]:
        """The kind name of every layer, in order."""
        names: list[str] = []
        for item in self.pattern:
            if isinstance(item, Repeat):
                names += [item.repeat[i % len(item.repeat)] for i in range(item.layers)]
            else:
                names.append(item)
        return tuple(names)

    def kind(self, name: str) -> LayerKind:
        """The definition of kind ``name`` (``full`` defaults to the model's attention)."""
        return self.kinds.get(name) or FullLayer()
