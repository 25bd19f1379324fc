"""KV-cache bytes: per layer, per token, and for K cached tokens of one request.

- GQA/MHA/MQA: keys and values of every KV head, ``2 * kv_heads * head_dim * b`` per layer.
- MLA: the compressed latent plus the decoupled RoPE key, ``(kv_lora_rank + rope_dim) * b`` per
  layer, shared by all heads (no factor 2, no head count); a sparse (DSA) layer adds its
  indexer's key (``head_dim`` in its own dtype, plus scales).
- ``b`` is bytes per element of the KV dtype: bf16/fp16 2, fp8/int8 1, int4/fp4 0.5.
- How many positions a layer keeps for ``K`` cached tokens depends on its kind
  (:mod:`kvroof.cost.groups`): full and sparse ``K``, sliding ``min(K, W - 1)`` (a window-``W``
  query sees its own key and ``W - 1`` earlier ones), chunked ``K mod C``, linear and shared
  none. A linear layer keeps a fixed state per request instead.

So the bytes for ``K`` cached tokens are ``B_kv x K + sum_sliding b min(K, W - 1) + sum_chunked
b (K mod C) + S`` with ``B_kv`` (:func:`kv_bytes_per_token`) the bytes per token of the layers
that keep every position and ``S`` (:func:`state_bytes`) the fixed state, for ``K > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import dtype_bytes, scalar_or_array, token_count
from kvroof.cost.groups import kv_elements, layer_groups
from kvroof.specs.model import ModelSpec

__all__ = [
    "KvGroup",
    "kv_breakdown",
    "kv_bytes",
    "kv_bytes_by_kind",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "kv_elements_per_layer",
    "state_bytes",
]


def kv_elements_per_layer(model: ModelSpec) -> int:
    """Elements cached per token in one layer of the model's ``attention`` (keys and values,
    or latent and RoPE key)."""
    return kv_elements(model.attention)


def kv_bytes_per_token_per_layer(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """Bytes cached per token in one layer of the model's ``attention``."""
    return kv_elements_per_layer(model) * dtype_bytes(kv_dtype)


@dataclass(frozen=True)
class KvGroup:
    """One layer group's cache: ``count`` layers of ``kind``, ``bytes_per_position`` per layer,
    holding ``holds`` positions (``all``; ``window``: ``min(K, keep)``, ``keep`` = W - 1;
    ``chunk``: ``K mod keep``, ``keep`` = C; or ``none``), and ``state_bytes`` per layer per
    request. ``span`` is the window or chunk (W, C); ``most_kept`` the most positions a layer
    keeps between passes (W - 1, C - 1)."""

    name: str
    kind: str
    count: int
    bytes_per_position: float
    holds: str
    span: float
    state_bytes: float
    keep: float = 0.0
    most_kept: float = 0.0


def kv_breakdown(model: ModelSpec, kv_dtype: str = "bf16") -> tuple[KvGroup, ...]:
    """The cache of each layer group (per layer)."""
    return tuple(KvGroup(g.name, g.kind, g.count, g.kv_bytes_per_position(kv_dtype), g.holds,
                         g.span, g.state_bytes, g.keep, g.most_kept) for g in layer_groups(model))


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """Bytes cached per token over the layers that keep every position (B_kv in the paper).

    Sliding-window and chunked layers are left out (they hold a bounded number of tokens per
    request, which :func:`kv_bytes` adds), and so is a linear layer's fixed state
    (:func:`state_bytes`). For a model with full attention only this is layers x per-layer
    bytes."""
    return sum(g.count * g.bytes_per_position for g in kv_breakdown(model, kv_dtype)
               if g.holds == "all")


def state_bytes(model: ModelSpec) -> float:
    """Fixed bytes per request: the linear layers' recurrent and convolution states."""
    return sum(g.count * g.state_bytes for g in kv_breakdown(model))


def kv_bytes_by_kind(model: ModelSpec, cached_tokens: ArrayLike, kv_dtype: str = "bf16",
                     local_kv: str = "held", sparse_share: float = 1.0) -> dict[str, Any]:
    """Bytes a load of ``cached_tokens`` tokens moves, by layer kind (whole model; broadcasts):
    what each kind holds (module docstring), every token of the windowed and chunked layers
    with ``local_kv`` all, and a selected share of a sparse layer's latents (its indexer keys
    whole) with ``sparse_share`` below 1."""
    k = token_count("cached_tokens", cached_tokens)
    by_kind: dict[str, Any] = {}
    for g in layer_groups(model):
        per_layer = g.count * g.kv_bytes_per_position(kv_dtype)
        if g.kind == "sparse" and sparse_share < 1.0:
            per_layer = g.count * (g.extra_bytes + sparse_share * g.kv_elements
                                   * dtype_bytes(kv_dtype))
        holds = "all" if (g.holds in ("window", "chunk") and local_kv == "all") else g.holds
        value: Any = np.zeros_like(k)
        if holds == "all":
            value = per_layer * k
        elif holds == "window":
            value = per_layer * np.minimum(k, g.keep)
        elif holds == "chunk":
            value = per_layer * np.mod(k, g.keep)
        if g.state_bytes:
            value = value + np.where(k > 0, g.count * g.state_bytes, 0.0)
        by_kind[g.kind] = by_kind.get(g.kind, 0.0) + value
    return {kind: scalar_or_array(np.asarray(value, dtype=np.float64))
            for kind, value in by_kind.items()}


def kv_bytes(model: ModelSpec, cached_tokens: ArrayLike, kv_dtype: str = "bf16") -> Any:
    """Bytes of KV cache (and fixed state) for ``cached_tokens`` tokens of one request
    (broadcasts over arrays); layers keep what their kind holds (module docstring)."""
    parts = kv_bytes_by_kind(model, cached_tokens, kv_dtype)
    return scalar_or_array(np.asarray(sum(parts.values()), dtype=np.float64))
