"""The synthetic decoder layer of the prefill benchmark: its shapes, sized from a registry model.

:func:`layer_shape` copies a GQA model's layer (attention heads, hidden size, the active FFN
width of a MoE model), optionally scaled down for quick CPU runs, and says where it differs from
the real one; :class:`LayerShape` gives its weight and KV sizes and its FLOPs (from kvroof's
cost model). No torch here: the calibration uses these shapes too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvroof.cost.flops import prefill_flops
from kvroof.errors import KvroofError
from kvroof.measure.compute import ffn_width
from kvroof.specs.model import DenseFFN, GQAAttention, ModelSpec

__all__ = ["ELEMENT_BYTES", "LayerShape", "layer_shape"]

ELEMENT_BYTES = 2
"""Bytes of one element: the stack's weights, activations and KV are bf16."""


@dataclass(frozen=True)
class LayerShape:
    """The shapes of one synthetic decoder layer."""

    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int

    @property
    def kv_elements_per_token(self) -> int:
        """Keys and values of one token in one layer: ``2 x kv_heads x head_dim``."""
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def weight_elements(self) -> int:
        """QKV, output, gate+up and down projections, two RMSNorm weights."""
        d, q, kv = self.hidden, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return d * (q + 2 * kv) + q * d + 3 * d * self.intermediate + 2 * d

    def as_model(self, layers: int = 1) -> ModelSpec:
        """The synthetic stack as a model spec (dense gated FFN, no sliding window), so that
        its FLOPs and KV bytes come from kvroof's cost model like every other number."""
        return ModelSpec(
            name="synthetic-stack", num_layers=layers, hidden_size=self.hidden, vocab_size=1,
            attention=GQAAttention(num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
                                   head_dim=self.head_dim),
            ffn=DenseFFN(kind="dense", intermediate_size=self.intermediate),
        )

    def flops(self, t: int, k: int) -> float:
        """Prefill FLOP of one layer for ``t`` new tokens on ``k`` cached ones: kvroof's
        :func:`~kvroof.cost.flops.prefill_flops` without the LM head (the stack has none)."""
        parts = prefill_flops(self.as_model(), t, k)
        return float(parts.total - parts.lm_head)


def layer_shape(model: ModelSpec, scale: int = 1) -> tuple[LayerShape, list[str]]:
    """The synthetic layer for ``model`` and notes on where it differs from the real one.

    ``scale`` (1, 4, 16, ...: a square) shrinks the layer for quick CPU runs: hidden size and FFN
    width divided by ``scale``, KV heads and head_dim each by its square root (so KV bytes per
    token fall by ``scale`` too), query heads kept a whole multiple of the KV heads.
    """
    attention = model.attention
    if not isinstance(attention, GQAAttention):
        raise KvroofError(
            f"{model.name} uses MLA attention; only GQA models are supported by the prefill "
            "benchmark, for now"
        )
    root = math.isqrt(scale)
    if scale < 1 or root * root != scale:
        raise KvroofError(f"prefill: scale must be a square (1, 4, 16, ...), got {scale}")
    width, moe_note = ffn_width(model)
    notes = [n for n in [moe_note] if n]
    group = attention.num_heads // attention.num_kv_heads
    kv_heads = max(1, attention.num_kv_heads // root)
    shape = LayerShape(
        hidden=max(16, model.hidden_size // scale),
        num_heads=kv_heads * group,
        num_kv_heads=kv_heads,
        head_dim=max(8, attention.head_dim // root),
        intermediate=max(16, width // scale),
    )
    if scale > 1:
        notes.append(
            f"layer scaled down for a quick run: hidden {model.hidden_size} -> {shape.hidden}, "
            f"FFN {width} -> {shape.intermediate}, heads {attention.num_heads}/"
            f"{attention.num_kv_heads} -> {shape.num_heads}/{shape.num_kv_heads}, head_dim "
            f"{attention.head_dim} -> {shape.head_dim}"
        )
    if model.sliding_window is not None:
        notes.append("sliding-window layers attend to the whole context here (no window)")
    if attention.qk_norm:
        notes.append("QK-norm left out (not counted in FLOPs either)")
    return shape, notes
