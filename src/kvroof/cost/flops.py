"""FLOPs of prefilling ``T`` new tokens on top of ``K`` cached tokens (one sequence), and of one
decode step. Every function broadcasts over numpy arrays of ``T`` and ``K``.

Counting conventions (pinned by the tests; the per-kind ones are in :mod:`kvroof.cost.groups`):

- A GEMM ``(m x k) @ (k x n)`` costs ``2*m*n*k`` FLOP. Norms, softmax, RoPE, activations, biases
  and embedding lookups are not counted.
- Attention projections per new token per layer: GQA ``2*d*(h*dh + 2*hkv*dh) + 2*h*dh*d``; MLA
  query ``2*d*q_lora + 2*q_lora*h*(nope+rope)`` (``2*d*h*(nope+rope)`` without ``q_lora``),
  ``kv_a`` ``2*d*(kv_lora+rope)`` and output ``2*h*v*d``.
- MLA up-projection (``mla_up``): ``expanded`` (how vLLM and SGLang prefill a cached prefix)
  applies ``kv_b`` (``2*kv_lora*h*(nope+v)``) to every one of the ``K+T`` positions, cached
  latents included; ``absorbed`` (decode style) folds ``kv_b`` into the query and output:
  ``2*h*nope*kv_lora + 2*h*kv_lora*v`` per new token, nothing per cached token.
- Attention core per layer = (query, key) pairs x FLOPs per pair. Full attention has
  ``T*K + T*(T+1)/2`` pairs (causal, diagonal included); in a sliding-window layer the query at
  absolute position ``p`` (0-based) sees ``min(p+1, W)`` keys, in a chunked layer
  ``(p mod C) + 1``. Per pair: GQA ``4*h*dh`` (``QK^T`` and ``PV``); MLA expanded
  ``2*h*(nope+rope) + 2*h*v``; MLA absorbed ``2*h*(kv_lora+rope) + 2*h*kv_lora``. Sparse (DSA)
  layers attend to at most top-k keys a query and their indexer scores every pair; linear layers
  cost a fixed amount per new token (see :mod:`kvroof.cost.groups`).
- FFN per new token per layer: gated dense ``6*d*ff``; MoE router ``2*d*E``, routed experts
  ``k*6*d*ff_e``, shared experts ``n_shared*6*d*ff_shared`` (plus ``2*d`` for their output gate,
  Qwen3-Next and Qwen3.5); the ``first_k_dense`` (and, with
  ``moe_layer_step``, the interleaved) layers use a dense FFN.
- Per-layer inputs (Gemma 4 E-models): ``2*d*L*h_ple`` for the projection from the hidden state
  and ``4*d*h_ple`` per layer for the gate and the projection back.
- LM head: ``2*d*V`` once per request (logits of the last position only), when ``T > 0``.

Note the paper's ``F_pf = 2*N_active`` per token also counts the LM head and the embedding for
every token and leaves the attention core out; :func:`prefill_flops` counts what a prefill runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_count
from kvroof.cost.flop_terms import (
    MLA_MODES,
    Cap,
    FlopTerms,
    MlaMode,
    capped_core,
    check_mla_mode,
    decode_flops_sum,
    ffn_layer_flops,
    flop_terms,
    per_layer_input_flops,
    per_layer_input_parts,
    prefill_flops_total,
    projection_flops_per_token,
)
from kvroof.cost.groups import layer_groups
from kvroof.cost.pairs import attention_pairs, capped_pairs, capped_positions
from kvroof.errors import KvroofError
from kvroof.specs.model import ModelSpec

__all__ = [
    "MLA_MODES",
    "Cap",
    "FlopTerms",
    "MlaMode",
    "PrefillFlops",
    "attention_flops_by_kind",
    "attention_pairs",
    "capped_pairs",
    "capped_positions",
    "decode_flops",
    "decode_flops_sum",
    "flop_terms",
    "layer_prefill_flops",
    "per_layer_input_flops",
    "prefill_flops",
    "prefill_flops_total",
    "projection_flops_per_token",
]


@dataclass(frozen=True)
class PrefillFlops:
    """FLOPs of one prefill by part (whole model, all TP ranks together). Arrays broadcast.

    ``linear_attention``: linear layers' projections, convolution and core; ``indexer``: a
    sparse layer's indexer projections and scores; ``per_layer_input``: Gemma 4's per-layer
    input projections."""

    attention_projections: Any
    attention_core: Any
    mla_up: Any
    linear_attention: Any
    indexer: Any
    ffn_dense: Any
    ffn_routed: Any
    ffn_shared: Any
    router: Any
    per_layer_input: Any
    lm_head: Any

    @property
    def total(self) -> Any:
        """Sum of every part."""
        return sum((getattr(self, f.name) for f in fields(self)), start=0.0)

    @property
    def ffn(self) -> Any:
        """FFN FLOPs: dense, routed and shared experts and the router."""
        return self.ffn_dense + self.ffn_routed + self.ffn_shared + self.router

    def as_dict(self) -> dict[str, Any]:
        """Parts by name, and the total."""
        parts = {f.name: getattr(self, f.name) for f in fields(self)}
        parts["total"] = self.total
        return parts


def attention_flops_by_kind(model: ModelSpec, new_tokens: ArrayLike,
                            cached_tokens: ArrayLike = 0,
                            mla_mode: MlaMode = "expanded") -> dict[str, Any]:
    """The FLOPs of a prefill that depend on the context, by layer kind (whole model;
    broadcasts): each kind's (query, key) pairs at its FLOPs per pair, a sparse layer's indexer
    scores and an MLA expanded layer's up-projection of the ``K + T`` positions. Per-token work
    (projections, FFN, linear layers' cores) is left out."""
    check_mla_mode(mla_mode)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    full = t * k + t * (t + 1.0) / 2.0
    by_kind: dict[str, Any] = {}
    for group in layer_groups(model, mla_mode):
        if group.kind == "linear":
            continue
        pairs = full if group.rule == "full" else capped_pairs(group.rule, group.span, t, k)
        value = group.count * (group.per_pair * pairs + group.index_pair * full
                               + group.up * np.where(t > 0, k + t, 0.0))
        by_kind[group.kind] = by_kind.get(group.kind, 0.0) + value
    return {kind: scalar_or_array(np.asarray(value, dtype=np.float64))
            for kind, value in by_kind.items()}


def prefill_flops(
    model: ModelSpec,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike = 0,
    mla_mode: MlaMode = "expanded",
    *,
    decode: bool = False,
) -> PrefillFlops:
    """FLOPs of prefilling ``new_tokens`` (T) on top of ``cached_tokens`` (K), by part.

    The conventions are in the module docstring. Arrays of T and K broadcast. ``decode``: linear
    layers take their recurrent (one-token) step instead of the chunkwise prefill algorithm."""
    terms = flop_terms(model, mla_mode, decode=decode)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = np.broadcast_arrays(t, k)
    pairs = t * k + t * (t + 1.0) / 2.0
    core = terms.pair_full * pairs
    if terms.caps:
        core = core + capped_core(terms, t, k)
    mla_up = terms.up * np.where(t > 0, k + t, 0.0) + terms.absorbed * t

    def part(value: Any) -> Any:
        return scalar_or_array(np.asarray(value, dtype=np.float64))

    return PrefillFlops(
        attention_projections=part(terms.projections * t),
        attention_core=part(core),
        mla_up=part(mla_up),
        linear_attention=part(terms.linear * t),
        indexer=part(terms.index_tokens * t + terms.index_pairs * pairs),
        ffn_dense=part(terms.dense * t),
        ffn_routed=part(terms.routed * t),
        ffn_shared=part(terms.shared * t),
        router=part(terms.router * t),
        per_layer_input=part(terms.per_layer_input * t),
        lm_head=part(np.where(t > 0, terms.lm_head, 0.0)),
    )


def layer_prefill_flops(
    model: ModelSpec,
    layer: int,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike = 0,
    mla_mode: MlaMode = "expanded",
) -> PrefillFlops:
    """The FLOPs of layer ``layer`` (0-based) in a prefill of ``new_tokens`` on
    ``cached_tokens``, by part: its share of :func:`prefill_flops`, from the same per-layer
    constants (:func:`~kvroof.cost.groups.layer_groups`). The LM head and the per-layer inputs'
    projection from the hidden state (``2 d L h_ple`` per token) belong to no layer;
    ``per_layer_input`` is the layer's own gate and projection back (``4 d h_ple``)."""
    check_mla_mode(mla_mode)
    kinds = model.layer_kinds
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(kinds):
        raise KvroofError(f"layer: expected 0 to {len(kinds) - 1} for {model.name}, got "
                          f"{layer!r}")
    name, kind = kinds[layer]
    group = next(g for g in layer_groups(model, mla_mode) if g.name == name)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = np.broadcast_arrays(t, k)
    zero = np.zeros_like(t)
    dense, routed, shared, router = ffn_layer_flops(model, layer, kind)

    def part(value: Any) -> Any:
        return scalar_or_array(np.asarray(value + zero, dtype=np.float64))

    if group.kind == "linear":
        projections = core = mla_up = indexer = zero
        linear = group.projections * t
    else:
        full = t * k + t * (t + 1.0) / 2.0
        pairs = full if group.rule == "full" else capped_pairs(group.rule, group.span, t, k)
        projections, linear = group.projections * t, zero
        core = group.per_pair * pairs
        mla_up = group.up * np.where(t > 0, k + t, 0.0) + group.absorbed * t
        indexer = group.index_tokens * t + group.index_pair * full
    return PrefillFlops(
        attention_projections=part(projections), attention_core=part(core),
        mla_up=part(mla_up), linear_attention=part(linear), indexer=part(indexer),
        ffn_dense=part(dense * t), ffn_routed=part(routed * t), ffn_shared=part(shared * t),
        router=part(router * t), per_layer_input=part(per_layer_input_parts(model)[1] * t),
        lm_head=part(zero),
    )


def decode_flops(
    model: ModelSpec, context_tokens: ArrayLike, mla_mode: MlaMode = "absorbed"
) -> Any:
    """FLOPs of one decode step (one new token) with ``context_tokens`` already in the cache.

    The same conventions as :func:`prefill_flops` with ``T = 1``; MLA defaults to the absorbed
    form, which is how decode runs in vLLM and SGLang, and linear layers take their recurrent
    step."""
    return prefill_flops(model, 1.0, context_tokens, mla_mode, decode=True).total
