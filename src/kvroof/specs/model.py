"""Model specs: the architecture fields that decide FLOPs, KV bytes and parameter counts.

Attention is a discriminated union on ``kind`` (:mod:`kvroof.specs.attention`): ``gqa``/``mha``/
``mqa`` or ``mla``. The FFN is ``dense`` (gated, three matrices) or ``moe`` (routed experts,
optional shared experts, leading or interleaved dense layers). Layers that do not all attend the
same way are declared in ``layers`` (:mod:`kvroof.specs.layers`: sliding, chunked, linear,
sparse and shared layers); ``sliding_window`` is the short form for a periodic sliding window.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from kvroof.errors import short_repr
from kvroof.specs.attention import Attention, GQAAttention, MLAAttention
from kvroof.specs.base import (
    ExpertCount,
    LayerCount,
    LayerIndex,
    OptionalExpertCount,
    OptionalWidth,
    SourcedSpec,
    SpecModel,
    TokenCount,
    VocabSize,
    WeightDtype,
    Width,
)
from kvroof.specs.layers import (
    ATTENTION_KINDS,
    FullLayer,
    LayerKind,
    Layers,
    SharedLayer,
    SlidingLayer,
    SparseLayer,
)

__all__ = [
    "FFN",
    "Attention",
    "DenseFFN",
    "GQAAttention",
    "MLAAttention",
    "MoEFFN",
    "ModelSpec",
    "PerLayerInput",
    "PublishedParams",
    "SlidingWindow",
    "WeightFormat",
]

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


class SlidingWindow(SpecModel):
    """Layers with index ``i`` where ``i % period == offset`` attend to the last ``size`` tokens
    only (gpt-oss: size 128, period 2, offset 0 = every even layer)."""

    kind_name: ClassVar[str] = "sliding window"

    size: TokenCount
    period: LayerCount = 1
    offset: LayerIndex = 0

    @model_validator(mode="after")
    def _check(self) -> SlidingWindow:
        if self.offset >= self.period:
            raise ValueError(f"offset ({self.offset}) must be below period ({self.period})")
        return self

    def is_sliding(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) uses the window."""
        return layer % self.period == self.offset

    def count(self, num_layers: int) -> int:
        """Number of sliding-window layers among ``num_layers``: the indices ``offset``,
        ``offset + period``, ... below ``num_layers`` (counted, not listed)."""
        return max(0, -(-(num_layers - self.offset) // self.period))


class DenseFFN(SpecModel):
    """A gated (SwiGLU-style, three matrices) feed-forward block of width ``intermediate_size``."""

    kind_name: ClassVar[str] = "ffn"

    kind: Literal["dense"]
    intermediate_size: Width


class MoEFFN(SpecModel):
    """Mixture of experts: ``num_experts`` routed gated experts of width
    ``expert_intermediate_size``, ``experts_per_token`` chosen per token, ``num_shared_experts``
    always-on experts of width ``shared_expert_intermediate_size`` each. Layers that are not
    MoE use a dense FFN of width ``dense_intermediate_size``: the ``first_k_dense`` leading
    layers, and with ``moe_layer_step`` ``s > 1`` every layer ``i`` with ``(i + 1) % s != 0``
    (Llama 4 Maverick's ``interleave_moe_layer_step`` 2: MoE on the odd layers)."""

    kind_name: ClassVar[str] = "ffn"

    kind: Literal["moe"]
    num_experts: ExpertCount
    experts_per_token: ExpertCount
    expert_intermediate_size: Width
    num_shared_experts: OptionalExpertCount = 0
    shared_expert_intermediate_size: OptionalWidth = 0
    first_k_dense: LayerIndex = 0
    moe_layer_step: LayerCount = 1
    dense_intermediate_size: Width | None = None
    shared_expert_gate: bool = False
    """A sigmoid gate on the shared experts' output, computed from the hidden state by a
    ``hidden x 1`` projection (Qwen2-MoE, Qwen3-Next, Qwen3.5: ``shared_expert_gate``)."""

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
        if self.shared_expert_gate and not self.num_shared_experts:
            raise ValueError("shared_expert_gate needs shared experts")
        if (self.first_k_dense > 0 or self.moe_layer_step > 1) \
                and self.dense_intermediate_size is None:
            raise ValueError("dense layers (first_k_dense or moe_layer_step) need "
                             "dense_intermediate_size")
        return self

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) is a MoE layer."""
        return layer >= self.first_k_dense and (layer + 1) % self.moe_layer_step == 0

    def num_moe_layers(self, num_layers: int) -> int:
        """MoE layers among ``num_layers``: the ``i + 1`` in ``first_k_dense + 1 ..
        num_layers`` divisible by ``moe_layer_step`` (counted, not listed)."""
        last, first = num_layers, min(self.first_k_dense, num_layers)
        return last // self.moe_layer_step - first // self.moe_layer_step


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


class PerLayerInput(SpecModel):
    """Per-layer input embeddings (Gemma 3n and Gemma 4 E-models): a second embedding table of
    ``vocab_size`` rows and ``num_layers x hidden_size`` columns, projected from the hidden state
    too (``hidden x num_layers*hidden_size``), and in each layer a gate (``hidden x
    hidden_size``) and a projection back (``hidden_size x hidden``)."""

    kind_name: ClassVar[str] = "per-layer input"

    hidden_size: Width
    vocab_size: VocabSize


def _pattern_error(message: str, field: str, value: object) -> ValidationError:
    """A validation error located at ``layers.<field>`` (raised from the ``layers`` validator,
    pydantic prefixes ``layers``)."""
    loc = tuple(int(part) if part.isdigit() else part for part in field.split("."))
    return ValidationError.from_exception_data("layers", [InitErrorDetails(
        type=PydanticCustomError("value_error", message), loc=loc, input=value)])


class ModelSpec(SourcedSpec):
    """A decoder-only transformer as kvroof needs it."""

    kind_name: ClassVar[str] = "model"

    num_layers: LayerCount
    hidden_size: Width
    vocab_size: VocabSize
    tie_word_embeddings: bool = False
    attention: Attention
    ffn: FFN
    sliding_window: SlidingWindow | None = None
    layers: Layers | None = None
    per_layer_input: PerLayerInput | None = None
    norms_per_layer: Annotated[int, Field(gt=0, le=64, strict=True)] | None = None
    """RMSNorm weight vectors of ``hidden_size`` in each decoder layer (:attr:`layer_norms`):
    ``None`` for 2 (before attention and before the FFN, Llama-style), 4 for Gemma 2, 3 and 4
    (input, post-attention, pre-feedforward and post-feedforward norms, transformers
    ``Gemma3DecoderLayer``)."""
    max_context: TokenCount | None = None
    weights: WeightFormat = WeightFormat()
    published: PublishedParams | None = None

    @field_validator("layers")
    @classmethod
    def _check_layers(cls, layers: Layers | None, info: ValidationInfo) -> Layers | None:
        num_layers = info.data.get("num_layers")
        if layers is None or num_layers is None:
            return layers
        if info.data.get("sliding_window") is not None:
            raise ValueError("give sliding_window or layers, not both (a sliding kind in "
                             "layers replaces sliding_window)")
        names = layers.expanded()
        if len(names) != num_layers:
            raise _pattern_error(f"covers {len(names)} layers, but num_layers is {num_layers}",
                                 "pattern", list(layers.pattern))
        attention = info.data.get("attention")
        ffn = info.data.get("ffn")
        for name, kind in layers.kinds.items():
            if isinstance(kind, SparseLayer) and not isinstance(attention, MLAAttention):
                raise _pattern_error("a sparse layer attends through the model's MLA "
                                     "attention, but attention is not mla", f"kinds.{name}",
                                     name)
            if kind.ffn_intermediate_size is not None and isinstance(ffn, MoEFFN):
                raise _pattern_error("sets a dense FFN width, but the model's FFN is moe",
                                     f"kinds.{name}.ffn_intermediate_size",
                                     kind.ffn_intermediate_size)
            if not isinstance(kind, SharedLayer):
                continue
            if kind.source >= num_layers:
                raise _pattern_error(f"layer {kind.source} does not exist ({num_layers} layers)",
                                     f"kinds.{name}.source", kind.source)
            source = layers.kind(names[kind.source])
            if source.kind not in ATTENTION_KINDS:
                raise _pattern_error(
                    f"layer {kind.source} is a {source.kind} layer, which keeps no KV to share "
                    f"(a source must be one of {', '.join(ATTENTION_KINDS)})",
                    f"kinds.{name}.source", kind.source)
        return layers

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        ffn = self.ffn
        if isinstance(ffn, MoEFFN) and ffn.first_k_dense > self.num_layers:
            raise ValueError(
                f"ffn.first_k_dense ({ffn.first_k_dense}) exceeds num_layers "
                f"({self.num_layers})"
            )
        return self

    @property
    def layer_norms(self) -> int:
        """RMSNorm weight vectors of ``hidden_size`` per decoder layer (2 unless
        ``norms_per_layer`` says otherwise)."""
        return 2 if self.norms_per_layer is None else self.norms_per_layer

    @property
    def is_moe(self) -> bool:
        return isinstance(self.ffn, MoEFFN)

    @property
    def is_mla(self) -> bool:
        return isinstance(self.attention, MLAAttention)

    @property
    def layer_kinds(self) -> tuple[tuple[str, LayerKind], ...]:
        """``(kind name, kind)`` of every layer, in order (``full`` and ``sliding`` from
        ``sliding_window`` when no ``layers`` are given). Computed when read (a copy made with
        ``model_copy(update=...)`` is not validated again, so nothing is cached)."""
        return self._resolve_layer_kinds()

    def _resolve_layer_kinds(self) -> tuple[tuple[str, LayerKind], ...]:
        if self.layers is not None:
            layers = self.layers
            return tuple((name, layers.kind(name)) for name in layers.expanded())
        full: LayerKind = FullLayer()
        window = self.sliding_window
        if window is None:
            return tuple(("full", full) for _ in range(self.num_layers))
        sliding: LayerKind = SlidingLayer(kind="sliding", window=window.size)
        return tuple(("sliding", sliding) if window.is_sliding(i) else ("full", full)
                     for i in range(self.num_layers))

    @property
    def has_layer_kinds(self) -> bool:
        """Whether any layer attends other than through full attention."""
        return any(kind.kind != "full" or getattr(kind, "attention", None) is not None
                   for _, kind in self.layer_kinds)

    def kind_attention(self, kind: LayerKind) -> Attention:
        """The attention of a layer kind (its own, else the model's); a shared layer has its
        source's."""
        if isinstance(kind, SharedLayer):
            return self.kind_attention(self.layer_kinds[kind.source][1])
        own = getattr(kind, "attention", None)
        return own if own is not None else self.attention

    def count_kind(self, kind: str) -> int:
        """Layers of kind ``kind`` (``full``, ``sliding``, ``chunked``, ``linear``, ``sparse``,
        ``shared``)."""
        return sum(1 for _, layer in self.layer_kinds if layer.kind == kind)

    @property
    def num_sliding_layers(self) -> int:
        """Layers that attend through a sliding window (0 without one)."""
        return self.count_kind("sliding")

    @property
    def num_full_layers(self) -> int:
        """Layers of kind ``full`` (attention over the whole context with KV of their own)."""
        return self.count_kind("full")

    def architecture(self) -> dict[str, Any]:
        """The fields that decide FLOPs, KV bytes and parameters (no names, sources, notes).
        ``layers`` is given layer by layer (the kinds' definitions in order), so a compact
        pattern and the explicit list it stands for compare equal."""
        data = self.model_dump(include=set(ARCHITECTURE_FIELDS))
        if self.layers is not None:
            data["layers"] = [kind.model_dump() for _, kind in self.layer_kinds]
        return data


ARCHITECTURE_FIELDS = (
    "num_layers",
    "hidden_size",
    "vocab_size",
    "tie_word_embeddings",
    "attention",
    "ffn",
    "sliding_window",
    "layers",
    "per_layer_input",
    "norms_per_layer",
    "weights",
)
