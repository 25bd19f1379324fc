"""KV-cache bytes: per layer, per token, and for K cached tokens of one request.

- GQA/MHA/MQA: keys and values of every KV head, ``2 * kv_heads * head_dim * b`` per layer.
- MLA: the compressed latent plus the decoupled RoPE key, ``(kv_lora_rank + rope_dim) * b`` per
  layer, shared by all heads (no factor 2, no head count).
- ``b`` is bytes per element of the KV dtype: bf16/fp16 2, fp8/int8 1, int4/fp4 0.5.
- Sliding-window layers keep at most ``W`` tokens per request, so the bytes for ``K`` cached tokens
  are ``full_layers * K * per_layer + sliding_layers * min(K, W) * per_layer``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import dtype_bytes, scalar_or_array, token_count
from kvroof.specs.model import GQAAttention, ModelSpec

__all__ = [
    "kv_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "kv_elements_per_layer",
]


def kv_elements_per_layer(model: ModelSpec) -> int:
    """Elements cached per token in one layer (keys and values, or latent and RoPE key)."""
    att = model.attention
    if isinstance(att, GQAAttention):
        return 2 * att.num_kv_heads * att.head_dim
    return att.kv_lora_rank + att.qk_rope_head_dim


def kv_bytes_per_token_per_layer(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """Bytes cached per token in one layer."""
    return kv_elements_per_layer(model) * dtype_bytes(kv_dtype)


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """Bytes cached per token over all full-attention layers (B_kv in the paper).

    Sliding-window layers are left out: they hold a bounded ``W`` tokens per request, which
    :func:`kv_bytes` adds. For a model without a window this is simply layers x per-layer bytes.
    """
    return model.num_full_layers * kv_bytes_per_token_per_layer(model, kv_dtype)


def kv_bytes(model: ModelSpec, cached_tokens: ArrayLike, kv_dtype: str = "bf16") -> Any:
    """Bytes of KV cache for ``cached_tokens`` tokens of one request (broadcasts over arrays)."""
    k = token_count("cached_tokens", cached_tokens)
    per_layer = kv_bytes_per_token_per_layer(model, kv_dtype)
    total = model.num_full_layers * per_layer * k
    if model.sliding_window is not None:
        total = total + model.num_sliding_layers * per_layer * np.minimum(
            k, model.sliding_window.size
        )
    return scalar_or_array(total)
