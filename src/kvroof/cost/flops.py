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

import math
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import minimum, scalar_or_array, token_count, when_positive
from kvroof.cost.groups import attention_projection_flops, layer_groups
from kvroof.errors import KvroofError
from kvroof.specs.layers import LayerKind
from kvroof.specs.model import ModelSpec, MoEFFN

__all__ = [
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


def _chunk_prefix_sum(n: Any, chunk: float) -> Any:
    """sum_{p=0..n-1} ((p mod C) + 1): keys seen by the first ``n`` positions of a layer that
    attends within chunks of ``C`` (floats or arrays)."""
    full = np.floor(n / chunk) if not isinstance(n, float) else float(math.floor(n / chunk))
    rest = n - full * chunk
    return full * (chunk * (chunk + 1.0) / 2.0) + rest * (rest + 1.0) / 2.0


def capped_pairs(rule: str, span: float, t: Any, k: Any) -> Any:
    """Pairs of ``t`` new tokens after ``k`` cached ones in one ``window`` or ``chunk`` layer."""
    if rule == "window":
        return _window_prefix_sum(k + t, span) - _window_prefix_sum(k, span)
    return _chunk_prefix_sum(k + t, span) - _chunk_prefix_sum(k, span)


def capped_positions(rule: str, span: float, positions: Any) -> Any:
    """Keys the query at ``positions`` (0-based; a decode on ``positions`` cached tokens) sees
    in one ``window`` or ``chunk`` layer: ``min(p + 1, W)`` or ``(p mod C) + 1``."""
    if rule == "window":
        return minimum(positions + 1.0, span)
    return positions - _floor(positions / span) * span + 1.0


def _floor(x: Any) -> Any:
    return float(math.floor(x)) if isinstance(x, float) else np.floor(x)


def attention_pairs(
    new_tokens: ArrayLike, cached_tokens: ArrayLike, window: float | None = None,
    chunk: float | None = None,
) -> Any:
    """(query, key) pairs one layer scores when ``T`` new tokens follow ``K`` cached ones.

    Full attention: ``T*K + T*(T+1)/2``. Window ``W``: the query at absolute position ``p`` sees
    ``min(p+1, W)`` keys, summed over ``p = K .. K+T-1``. Chunk ``C``: it sees ``(p mod C) + 1``.
    """
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    if window is not None and chunk is not None:
        raise KvroofError("attention_pairs: give a window or a chunk, not both")
    if window is not None:
        return scalar_or_array(capped_pairs("window", window, t, k))
    if chunk is not None:
        return scalar_or_array(capped_pairs("chunk", chunk, t, k))
    return scalar_or_array(t * k + t * (t + 1.0) / 2.0)


def projection_flops_per_token(model: ModelSpec) -> float:
    """Projection FLOPs per new token of one layer of the model's ``attention`` (MLA: query,
    ``kv_a`` and output; the up-projection is counted apart, see ``mla_up`` in
    :func:`prefill_flops`)."""
    return attention_projection_flops(model.attention, model.hidden_size)


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


def _ffn_layer_flops(model: ModelSpec, layer: int, kind: LayerKind) -> tuple[float, float,
                                                                              float, float]:
    """(dense, routed, shared, router) FLOPs per token of the FFN of layer ``layer`` (of kind
    ``kind``)."""
    d = float(model.hidden_size)
    ffn = model.ffn
    if not isinstance(ffn, MoEFFN):
        return 6.0 * d * (kind.ffn_intermediate_size or ffn.intermediate_size), 0.0, 0.0, 0.0
    if not ffn.is_moe_layer(layer):
        return 6.0 * d * (ffn.dense_intermediate_size or 0), 0.0, 0.0, 0.0
    shared = (6.0 * d * ffn.shared_expert_intermediate_size * ffn.num_shared_experts
              + (2.0 * d if ffn.shared_expert_gate else 0.0))
    return (0.0, 6.0 * d * ffn.expert_intermediate_size * ffn.experts_per_token, shared,
            2.0 * d * ffn.num_experts)


def _ffn_flops_per_token(model: ModelSpec) -> tuple[float, float, float, float]:
    """(dense, routed, shared, router) FLOPs per token summed over all layers."""
    totals = [0.0, 0.0, 0.0, 0.0]
    for layer, (_, kind) in enumerate(model.layer_kinds):
        for part, value in enumerate(_ffn_layer_flops(model, layer, kind)):
            totals[part] += value
    return totals[0], totals[1], totals[2], totals[3]


def _per_layer_input_parts(model: ModelSpec) -> tuple[float, float]:
    """(model-level projection, each layer's gate and projection back) FLOPs per token of the
    per-layer inputs: ``2 d L h_ple`` and ``4 d h_ple`` (0 without per-layer inputs)."""
    ple = model.per_layer_input
    if ple is None:
        return 0.0, 0.0
    d = model.hidden_size
    return float(2 * d * model.num_layers * ple.hidden_size), float(4 * d * ple.hidden_size)


def per_layer_input_flops(model: ModelSpec) -> float:
    """Per-layer input FLOPs per token (0 without per-layer inputs)."""
    projection, per_layer = _per_layer_input_parts(model)
    return projection + model.num_layers * per_layer


Cap = tuple[str, float, float]
"""``(rule, span, FLOPs per pair summed over the layers)`` for ``window`` and ``chunk`` rules."""


@dataclass(frozen=True)
class FlopTerms:
    """The per-token, per-pair and per-position constants of a model's prefill FLOPs (whole
    model, all layers), from which :func:`prefill_flops` and :func:`prefill_flops_total` build
    every count. ``up`` is the MLA expanded up-projection per position (0 otherwise),
    ``absorbed`` the MLA absorbed-mode FLOPs per new token (0 otherwise); ``pair_full`` the
    FLOPs per pair of the layers that see every earlier position, ``index_pairs`` those of the
    sparse layers' indexers (which see every earlier position too), ``caps`` the window and
    chunk rules with their FLOPs per pair."""

    projections: float
    linear: float
    index_tokens: float
    per_layer_input: float
    dense: float
    routed: float
    shared: float
    router: float
    absorbed: float
    up: float
    pair_full: float
    index_pairs: float
    caps: tuple[Cap, ...]
    lm_head: float
    per_token: float = field(init=False)
    """FLOPs that every new token costs whatever the context."""
    full_pairs: float = field(init=False)
    """FLOPs per pair over every layer that sees every earlier position (indexers too)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_token", self.projections + self.linear
                           + self.index_tokens + self.per_layer_input + self.dense + self.routed
                           + self.shared + self.router + self.absorbed)
        object.__setattr__(self, "full_pairs", self.pair_full + self.index_pairs)


def flop_terms(model: ModelSpec, mla_mode: MlaMode = "expanded", *, decode: bool = False,
               replicated: float = 1.0) -> FlopTerms:
    """The constants of ``model``'s prefill FLOPs under ``mla_mode`` (``decode``: linear layers
    take their recurrent step; ``replicated``: a factor on the work every TP rank repeats, the
    sparse layers' indexers, whose weights and scores vLLM keeps unsharded)."""
    _check_mla_mode(mla_mode)
    projections = linear = index_tokens = absorbed = up = pair_full = index_pairs = 0.0
    caps: dict[tuple[str, float], float] = {}
    for group in layer_groups(model, mla_mode):
        n = group.count
        if group.kind == "linear":
            linear += n * (group.decode_projections if decode else group.projections)
            continue
        projections += n * group.projections
        absorbed += n * group.absorbed
        up += n * group.up
        index_tokens += n * group.index_tokens * replicated
        index_pairs += n * group.index_pair * replicated
        if group.rule == "full":
            pair_full += n * group.per_pair
        else:
            key = (group.rule, group.span)
            caps[key] = caps.get(key, 0.0) + n * group.per_pair
    dense, routed, shared, router = _ffn_flops_per_token(model)
    return FlopTerms(
        projections=projections, linear=linear, index_tokens=index_tokens,
        per_layer_input=per_layer_input_flops(model), dense=dense, routed=routed,
        shared=shared, router=router, absorbed=absorbed, up=up, pair_full=pair_full,
        index_pairs=index_pairs,
        caps=tuple((rule, span, flops) for (rule, span), flops in caps.items()),
        lm_head=2.0 * model.hidden_size * model.vocab_size,
    )


def _capped_core(terms: FlopTerms, t: Any, k: Any) -> Any:
    core: Any = 0.0
    for rule, span, flops in terms.caps:
        core = core + flops * capped_pairs(rule, span, t, k)
    return core


def _attention_core(terms: FlopTerms, t: Any, k: Any) -> Any:
    core = terms.pair_full * (t * k + t * (t + 1.0) / 2.0)
    if terms.caps:
        core = core + _capped_core(terms, t, k)
    return core


def prefill_flops_total(terms: FlopTerms, t: Any, k: Any) -> Any:
    """Total prefill FLOPs for validated token counts (floats or broadcasting arrays); the same
    sum as :attr:`PrefillFlops.total`, without materializing each part."""
    full = terms.full_pairs
    total = terms.per_token * t + full * (t * k + t * (t + 1.0) / 2.0)
    if terms.caps:
        total = total + _capped_core(terms, t, k)
    if terms.up:
        total = total + terms.up * when_positive(t, k + t)  # nothing runs with nothing to do
    return total + when_positive(t, terms.lm_head)


def decode_flops_sum(terms: FlopTerms, count: Any, context_sum: Any,
                     capped_sums: Any = 0.0) -> Any:
    """:func:`prefill_flops_total` summed over ``count`` decodes (``T = 1`` each, logits each)
    whose contexts sum to ``context_sum``: a decode on ``K`` cached tokens scores ``K + 1`` pairs
    in a layer that sees every position and :func:`capped_positions` in a window or chunk layer,
    so the sum needs ``capped_sums``, one sum of those per entry of ``terms.caps`` (a number
    when there is one)."""
    flops = (count * (terms.per_token + terms.lm_head)
             + terms.full_pairs * (context_sum + count))
    if terms.caps:
        sums = capped_sums if isinstance(capped_sums, tuple | list) else (capped_sums,)
        if len(sums) != len(terms.caps):
            raise KvroofError(f"capped_sums: expected {len(terms.caps)} sums (one per window "
                              f"or chunk rule), got {len(sums)}")
        for (_, _, per_pair), value in zip(terms.caps, sums, strict=True):
            flops = flops + per_pair * value
    if terms.up:
        flops = flops + terms.up * (context_sum + count)
    return flops


def attention_flops_by_kind(model: ModelSpec, new_tokens: ArrayLike,
                            cached_tokens: ArrayLike = 0,
                            mla_mode: MlaMode = "expanded") -> dict[str, Any]:
    """The FLOPs of a prefill that depend on the context, by layer kind (whole model;
    broadcasts): each kind's (query, key) pairs at its FLOPs per pair, a sparse layer's indexer
    scores and an MLA expanded layer's up-projection of the ``K + T`` positions. Per-token work
    (projections, FFN, linear layers' cores) is left out."""
    _check_mla_mode(mla_mode)
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
        core = core + _capped_core(terms, t, k)
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
    _check_mla_mode(mla_mode)
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
    dense, routed, shared, router = _ffn_layer_flops(model, layer, kind)

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
        router=part(router * t), per_layer_input=part(_per_layer_input_parts(model)[1] * t),
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
