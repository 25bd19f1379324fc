"""FLOPs of prefilling ``T`` new tokens on top of ``K`` cached tokens (one sequence), and of one
decode step. Every function broadcasts over numpy arrays of ``T`` and ``K``.

Counting conventions (pinned by the tests):

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
  absolute position ``p`` (0-based) sees ``min(p+1, W)`` keys. Per pair: GQA ``4*h*dh``
  (``QK^T`` and ``PV``); MLA expanded ``2*h*(nope+rope) + 2*h*v``; MLA absorbed
  ``2*h*(kv_lora+rope) + 2*h*kv_lora``.
- FFN per new token per layer: gated dense ``6*d*ff``; MoE router ``2*d*E``, routed experts
  ``k*6*d*ff_e``, shared experts ``n_shared*6*d*ff_shared``; the ``first_k_dense`` layers use a
  dense FFN.
- LM head: ``2*d*V`` once per request (logits of the last position only), when ``T > 0``.

Note the paper's ``F_pf = 2*N_active`` per token also counts the LM head and the embedding for
every token and leaves the attention core out; :func:`prefill_flops` counts what a prefill runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import minimum, scalar_or_array, token_count, when_positive
from kvroof.errors import KvroofError
from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec, MoEFFN

__all__ = [
    "FlopTerms",
    "MlaMode",
    "PrefillFlops",
    "attention_pairs",
    "decode_flops",
    "decode_flops_sum",
    "flop_terms",
    "prefill_flops",
    "prefill_flops_total",
    "projection_flops_per_token",
]

MlaMode = Literal["expanded", "absorbed"]
MLA_MODES: tuple[MlaMode, ...] = ("expanded", "absorbed")


def _check_mla_mode(mla_mode: str) -> None:
    if mla_mode not in MLA_MODES:
        raise KvroofError(f"mla_mode: expected one of {', '.join(MLA_MODES)}, got {mla_mode!r}")


def _window_prefix_sum(n: Any, window: float) -> Any:
    """sum_{q=1..n} min(q, W): keys seen by the first ``n`` positions of a window-W layer
    (floats or arrays)."""
    m = minimum(n, window)
    return m * (m + 1.0) / 2.0 + (n - m) * window


def attention_pairs(
    new_tokens: ArrayLike, cached_tokens: ArrayLike, window: float | None = None
) -> Any:
    """(query, key) pairs one layer scores when ``T`` new tokens follow ``K`` cached ones.

    Full attention: ``T*K + T*(T+1)/2``. Window ``W``: the query at absolute position ``p`` sees
    ``min(p+1, W)`` keys, summed over ``p = K .. K+T-1``.
    """
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    if window is None:
        return scalar_or_array(t * k + t * (t + 1.0) / 2.0)
    return scalar_or_array(_window_prefix_sum(k + t, window) - _window_prefix_sum(k, window))


def projection_flops_per_token(model: ModelSpec) -> float:
    """Attention projection FLOPs per new token per layer (MLA: query, ``kv_a`` and output;
    the up-projection is counted apart, see ``mla_up`` in :func:`prefill_flops`)."""
    d = model.hidden_size
    att = model.attention
    if isinstance(att, GQAAttention):
        h, hkv, dh = att.num_heads, att.num_kv_heads, att.head_dim
        return float(2 * d * (h * dh + 2 * hkv * dh) + 2 * h * dh * d)
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    if att.q_lora_rank is None:
        query = 2 * d * att.num_heads * qk
    else:
        query = 2 * d * att.q_lora_rank + 2 * att.q_lora_rank * att.num_heads * qk
    kv_a = 2 * d * (att.kv_lora_rank + att.qk_rope_head_dim)
    output = 2 * att.num_heads * att.v_head_dim * d
    return float(query + kv_a + output)


def _mla_up_per_position(att: MLAAttention) -> float:
    """``kv_b`` FLOPs to expand one position's latent into keys and values (expanded mode)."""
    return float(2 * att.kv_lora_rank * att.num_heads * (att.qk_nope_head_dim + att.v_head_dim))


def _mla_absorbed_per_token(att: MLAAttention) -> float:
    """Absorbed-mode FLOPs per new token: query into latent space and latent output back."""
    h, lora = att.num_heads, att.kv_lora_rank
    return float(2 * h * att.qk_nope_head_dim * lora + 2 * h * lora * att.v_head_dim)


def _flops_per_pair(model: ModelSpec, mla_mode: MlaMode) -> float:
    att = model.attention
    if isinstance(att, GQAAttention):
        return float(4 * att.num_heads * att.head_dim)
    h = att.num_heads
    if mla_mode == "expanded":
        return float(2 * h * (att.qk_nope_head_dim + att.qk_rope_head_dim) + 2 * h * att.v_head_dim)
    return float(2 * h * (att.kv_lora_rank + att.qk_rope_head_dim) + 2 * h * att.kv_lora_rank)


@dataclass(frozen=True)
class PrefillFlops:
    """FLOPs of one prefill by part (whole model, all TP ranks together). Arrays broadcast."""

    attention_projections: Any
    attention_core: Any
    mla_up: Any
    ffn_dense: Any
    ffn_routed: Any
    ffn_shared: Any
    router: Any
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


def _ffn_flops_per_token(model: ModelSpec) -> tuple[float, float, float, float]:
    """(dense, routed, shared, router) FLOPs per token summed over all layers."""
    d, layers = model.hidden_size, model.num_layers
    ffn = model.ffn
    if not isinstance(ffn, MoEFFN):
        return 6.0 * d * ffn.intermediate_size * layers, 0.0, 0.0, 0.0
    moe_layers = layers - ffn.first_k_dense
    dense = 6.0 * d * (ffn.dense_intermediate_size or 0) * ffn.first_k_dense
    routed = 6.0 * d * ffn.expert_intermediate_size * ffn.experts_per_token * moe_layers
    shared = 6.0 * d * ffn.shared_expert_intermediate_size * ffn.num_shared_experts * moe_layers
    router = 2.0 * d * ffn.num_experts * moe_layers
    return dense, routed, shared, router


@dataclass(frozen=True)
class FlopTerms:
    """The per-token, per-pair and per-position constants of a model's prefill FLOPs (whole
    model, all layers), from which :func:`prefill_flops` and :func:`prefill_flops_total` build
    every count. ``up`` is the MLA expanded up-projection per position (0 otherwise),
    ``absorbed`` the MLA absorbed-mode FLOPs per new token (0 otherwise)."""

    projections: float
    dense: float
    routed: float
    shared: float
    router: float
    absorbed: float
    up: float
    pair_full: float
    pair_window: float
    window: float | None
    lm_head: float

    @property
    def per_token(self) -> float:
        """FLOPs that every new token costs whatever the context."""
        return (self.projections + self.dense + self.routed + self.shared + self.router
                + self.absorbed)


def flop_terms(model: ModelSpec, mla_mode: MlaMode = "expanded") -> FlopTerms:
    """The constants of ``model``'s prefill FLOPs under ``mla_mode``."""
    _check_mla_mode(mla_mode)
    layers = model.num_layers
    per_pair = _flops_per_pair(model, mla_mode)
    att = model.attention
    up = absorbed = 0.0
    if isinstance(att, MLAAttention):
        if mla_mode == "expanded":
            up = layers * _mla_up_per_position(att)
        else:
            absorbed = layers * _mla_absorbed_per_token(att)
    dense, routed, shared, router = _ffn_flops_per_token(model)
    window = None if model.sliding_window is None else float(model.sliding_window.size)
    return FlopTerms(
        projections=layers * projection_flops_per_token(model), dense=dense, routed=routed,
        shared=shared, router=router, absorbed=absorbed, up=up,
        pair_full=model.num_full_layers * per_pair,
        pair_window=model.num_sliding_layers * per_pair, window=window,
        lm_head=2.0 * model.hidden_size * model.vocab_size,
    )


def _attention_core(terms: FlopTerms, t: Any, k: Any) -> Any:
    core = terms.pair_full * (t * k + t * (t + 1.0) / 2.0)
    if terms.window is not None:
        core = core + terms.pair_window * (_window_prefix_sum(k + t, terms.window)
                                           - _window_prefix_sum(k, terms.window))
    return core


def prefill_flops_total(terms: FlopTerms, t: Any, k: Any) -> Any:
    """Total prefill FLOPs for validated token counts (floats or broadcasting arrays); the same
    sum as :attr:`PrefillFlops.total`, without materializing each part."""
    total = terms.per_token * t + _attention_core(terms, t, k)
    if terms.up:
        total = total + terms.up * when_positive(t, k + t)  # nothing runs with nothing to do
    return total + when_positive(t, terms.lm_head)


def decode_flops_sum(terms: FlopTerms, count: Any, context_sum: Any,
                     windowed_sum: Any = 0.0) -> Any:
    """:func:`prefill_flops_total` summed over ``count`` decodes (``T = 1`` each, logits each)
    whose contexts sum to ``context_sum``: a decode on ``K`` cached tokens scores ``K + 1``
    full-attention pairs and ``min(K + 1, W)`` pairs per sliding-window layer, so the sum needs
    only ``windowed_sum`` = the sum of ``min(K + 1, W)`` (models with a window)."""
    flops = (count * (terms.per_token + terms.lm_head)
             + terms.pair_full * (context_sum + count) + terms.pair_window * windowed_sum)
    if terms.up:
        flops = flops + terms.up * (context_sum + count)
    return flops


def prefill_flops(
    model: ModelSpec,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike = 0,
    mla_mode: MlaMode = "expanded",
) -> PrefillFlops:
    """FLOPs of prefilling ``new_tokens`` (T) on top of ``cached_tokens`` (K), by part.

    The conventions are in the module docstring. Arrays of T and K broadcast.
    """
    terms = flop_terms(model, mla_mode)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = np.broadcast_arrays(t, k)
    mla_up = terms.up * np.where(t > 0, k + t, 0.0) if terms.up else terms.absorbed * t
    return PrefillFlops(
        attention_projections=scalar_or_array(terms.projections * t),
        attention_core=scalar_or_array(np.asarray(_attention_core(terms, t, k))),
        mla_up=scalar_or_array(np.asarray(mla_up, dtype=np.float64)),
        ffn_dense=scalar_or_array(terms.dense * t),
        ffn_routed=scalar_or_array(terms.routed * t),
        ffn_shared=scalar_or_array(terms.shared * t),
        router=scalar_or_array(terms.router * t),
        lm_head=scalar_or_array(np.where(t > 0, terms.lm_head, 0.0)),
    )


def decode_flops(
    model: ModelSpec, context_tokens: ArrayLike, mla_mode: MlaMode = "absorbed"
) -> Any:
    """FLOPs of one decode step (one new token) with ``context_tokens`` already in the cache.

    The same conventions as :func:`prefill_flops` with ``T = 1``; MLA defaults to the absorbed
    form, which is how decode runs in vLLM and SGLang.
    """
    return prefill_flops(model, 1.0, context_tokens, mla_mode).total
