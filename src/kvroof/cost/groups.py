"""A model reduced to layer groups: the layers of one kind, with the per-layer constants every
cost function reads (KV bytes, fixed state, FLOPs per token and per (query, key) pair, and the
rule that counts the pairs).

One group per kind name of the model's layer pattern (:mod:`kvroof.specs.layers`; a model
without ``layers`` has one ``full`` group, plus a ``sliding`` group with ``sliding_window``).
Conventions (a GEMM ``(m x k)(k x n)`` is ``2mnk``; norms, softmax, activations, gates applied
elementwise, RoPE and biases are not counted):

- **KV per cached position per layer**: GQA ``2 x kv_heads x head_dim`` elements, MLA
  ``kv_lora_rank + qk_rope_head_dim``, both in the KV dtype; a sparse (DSA) layer adds its
  indexer key, ``indexer.head_dim`` elements in ``indexer.key_dtype`` plus
  ``indexer.key_scale_bytes``; linear and shared layers hold none.
- **Positions a layer holds for ``K`` cached tokens**: full and sparse ``K``; sliding
  ``min(K, W - 1)`` (the next query, at position ``K``, sees ``K - W + 1 .. K``: its own key and
  ``W - 1`` earlier ones; vLLM's ``SlidingWindowManager`` frees the rest,
  ``get_num_skipped_tokens = K - W + 1``); chunked ``K mod C`` (the current chunk; every earlier
  chunk is out of reach, vLLM's ``ChunkedLocalAttentionManager`` skips ``floor(K/C) x C``);
  linear and shared none. A linear layer holds a **fixed state** per request instead:
  ``num_value_heads x key_head_dim x value_head_dim`` in ``state_dtype`` plus the convolution
  state, ``channels x (conv_kernel - 1)`` in ``conv_dtype``.
- **Pairs** (query, key) per layer for ``T`` new tokens after ``K`` cached ones: full
  ``T K + T (T+1) / 2``; sliding (and a sparse layer's main attention, capped at ``topk`` keys a
  query) ``sum over p = K .. K+T-1 of min(p + 1, W)``; chunked ``sum of (p mod C) + 1``; a
  shared layer counts as its source's kind; a sparse layer's indexer scores every causal pair.
- **FLOPs per pair**: GQA ``4 h dh``; MLA expanded ``2h(nope + rope) + 2h v``, absorbed
  ``2h(kv_lora + rope) + 2h kv_lora``; a sparse layer's main attention always absorbed (vLLM's
  and SGLang's sparse MLA kernels work on the latent, vLLM ``flashmla_sparse.py``); its indexer
  ``2 H_I (d_I + 1)`` (the per-head scores ``q k`` and their weighted sum over the heads).
- **FLOPs per new token per layer** (projections): GQA ``2d(h dh g + 2 h_kv dh) + 2 h dh d``
  (``g`` = 2 with an output gate, Qwen3-Next); MLA query, ``kv_a`` and output (and, absorbed,
  ``2h nope kv_lora + 2h kv_lora v``); a shared layer only its query and output; a sparse layer
  adds the indexer's ``wq_b`` ``2 q_lora H_I d_I``, ``wk`` ``2 d d_I`` and ``weights_proj``
  ``2 d H_I``. MLA expanded up-projects every position a full layer reads, ``(K + T) x 2
  kv_lora h (nope + v)``.
- **Linear layers** (per new token): projections (gated-deltanet ``in_proj_qkvz`` ``2d(2 n_k d_k
  + 2 n_v d_v)``, ``in_proj_ba`` ``2d x 2 n_v``, ``out_proj`` ``2 n_v d_v d``; kda
  ``q/k/v_proj`` ``2d(2 n d_k + n d_v)``, forget gate ``2d d_k + 2 d_k n d_k``, output gate
  ``2d d_k + 2 d_k n d_v``, ``b_proj`` ``2d n``, ``o_proj`` ``2 n d_v d``), the depthwise
  convolution ``2 x channels x kernel``, and the delta-rule core per value head: in a prefill
  the matmuls of the chunkwise algorithm as FLA's kernels run it (``chunk_gated_delta_rule_fwd``,
  ``chunk_kda``), over chunks of ``c`` (64) tokens, ``c (6 d_k + 4 d_v) + 6 d_k d_v`` per token:
  ``(beta k) k^T`` (``2 c d_k``), the WY factors ``w = A (beta k e^g)`` and ``u = A (beta v)``
  with the inverted ``c x c`` matrix ``A`` (``2 c d_k + 2 c d_v``), the intra-chunk ``q k^T``
  (``2 c d_k``) and output (``2 c d_v``), and the state's read by the corrections (``w h``) and
  the queries (``q h``) and its update (``k^T v``), ``2 d_k d_v`` each; in a decode the recurrent
  step's ``6 d_k d_v``. The inversion of ``A`` (``solve_tril``, about ``2 c^2 / 3`` FLOPs per
  token, 1.5% of the core at ``d_k = d_v = 128``), the elementwise decays and the padding of
  ``T`` to whole chunks are not counted; FLOPs do not depend on ``K``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from kvroof.cost.checks import dtype_bytes
from kvroof.specs.attention import Attention, GQAAttention, MLAAttention
from kvroof.specs.layers import (
    ChunkedLayer,
    LayerKind,
    LinearLayer,
    SharedLayer,
    SlidingLayer,
    SparseLayer,
)
from kvroof.specs.model import ModelSpec

__all__ = ["LayerGroup", "PairRule", "attention_pair_flops", "attention_projection_flops",
           "layer_groups", "linear_core_flops", "linear_projection_flops", "linear_state_bytes",
           "linear_state_elements", "tp_problem"]

PairRule = Literal["full", "window", "chunk", "none"]


@dataclass(frozen=True)
class LayerGroup:
    """``count`` layers of one kind; every figure is per layer.

    ``rule`` counts the pairs of the main attention (``window`` with ``span`` = W or a sparse
    layer's top-k, ``chunk`` with ``span`` = C, ``none`` for linear layers). ``holds`` says how
    many positions the layer keeps for ``K`` cached tokens: ``all`` (K), ``window``
    (``min(K, keep)``, ``keep`` = W - 1), ``chunk`` (``K mod keep``, ``keep`` = C) or
    ``none``."""

    name: str
    kind: str
    count: int
    kv_elements: int
    """Elements per cached position in the KV dtype."""
    extra_bytes: float
    """Bytes per cached position outside the KV dtype (a sparse layer's indexer key)."""
    state_bytes: float
    """Fixed bytes per request (a linear layer's recurrent and convolution state)."""
    holds: Literal["all", "window", "chunk", "none"]
    rule: PairRule
    span: float
    keep: float
    """What a window or chunk layer keeps of ``K`` cached tokens: ``min(K, keep)`` with ``keep`` =
    W - 1 for a window (the query at position ``K`` sees ``W - 1`` earlier keys besides its own),
    ``K mod keep`` with ``keep`` = C for a chunk; 0 for the other layers."""
    kv_heads: int | None
    """GQA KV heads (a TP rank holds ``max(1/TP, 1/kv_heads)``); ``None``: every rank holds it
    all (MLA latent, indexer keys); linear layers split their heads over the ranks."""
    mla: bool
    """The layer's cache is an MLA latent (replicated on every TP rank)."""
    projections: float
    """FLOPs per new token (projections; linear layers: also convolution and core)."""
    absorbed: float
    """MLA absorbed-mode FLOPs per new token (0 otherwise)."""
    decode_projections: float
    """The same for one decode token (linear layers: the recurrent step)."""
    per_pair: float
    index_pair: float
    """FLOPs per pair of a sparse layer's indexer (every causal pair)."""
    index_tokens: float
    """FLOPs per new token of a sparse layer's indexer projections."""
    up: float
    """MLA expanded up-projection FLOPs per position read (0 otherwise)."""
    source: str | None
    """A shared layer's source kind name (``None`` otherwise)."""
    tensors: int
    """Tensors per layer a per-layer-kv copy layout moves separately (K and V, or the linear
    state's convolution and recurrent parts)."""

    def kv_bytes_per_position(self, kv_dtype: str) -> float:
        """Bytes per cached position per layer in ``kv_dtype``."""
        return self.kv_elements * dtype_bytes(kv_dtype) + self.extra_bytes

    @property
    def most_kept(self) -> float:
        """The most positions a window or chunk layer keeps between passes (W - 1, C - 1); 0 for
        the others."""
        if self.holds == "window":
            return self.keep
        return self.keep - 1.0 if self.holds == "chunk" else 0.0


def kv_elements(attention: Attention) -> int:
    """Elements cached per position per layer (keys and values, or latent and RoPE key)."""
    if isinstance(attention, GQAAttention):
        return 2 * attention.num_kv_heads * attention.head_dim
    return attention.kv_lora_rank + attention.qk_rope_head_dim


def attention_projection_flops(attention: Attention, hidden: int, *,
                               with_kv: bool = True) -> float:
    """Projection FLOPs per new token of one attention layer (``with_kv=False``: only the
    query and output, as a layer reading another layer's KV)."""
    d = hidden
    if isinstance(attention, GQAAttention):
        h, hkv, dh = attention.num_heads, attention.num_kv_heads, attention.head_dim
        query = 2 * d * h * dh * (2 if attention.output_gate else 1)
        kv = 2 * d * 2 * hkv * dh if with_kv else 0
        return float(query + kv + 2 * h * dh * d)
    att = attention
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    if att.q_lora_rank is None:
        query = 2 * d * att.num_heads * qk
    else:
        query = 2 * d * att.q_lora_rank + 2 * att.q_lora_rank * att.num_heads * qk
    kv_a = 2 * d * (att.kv_lora_rank + att.qk_rope_head_dim) if with_kv else 0
    output = 2 * att.num_heads * att.v_head_dim * d
    return float(query + kv_a + output)


def mla_absorbed_flops(attention: MLAAttention) -> float:
    """Absorbed-mode FLOPs per new token: the query into latent space and the latent output
    back."""
    h, lora = attention.num_heads, attention.kv_lora_rank
    return float(2 * h * attention.qk_nope_head_dim * lora + 2 * h * lora * attention.v_head_dim)


def attention_pair_flops(attention: Attention, mla_mode: str) -> float:
    """FLOPs per (query, key) pair of one attention layer."""
    if isinstance(attention, GQAAttention):
        return float(4 * attention.num_heads * attention.head_dim)
    h = attention.num_heads
    if mla_mode == "expanded":
        return float(2 * h * (attention.qk_nope_head_dim + attention.qk_rope_head_dim)
                     + 2 * h * attention.v_head_dim)
    return float(2 * h * (attention.kv_lora_rank + attention.qk_rope_head_dim)
                 + 2 * h * attention.kv_lora_rank)


def mla_up_flops(attention: MLAAttention) -> float:
    """``kv_b`` FLOPs to expand one position's latent into keys and values (expanded mode)."""
    return float(2 * attention.kv_lora_rank * attention.num_heads
                 * (attention.qk_nope_head_dim + attention.v_head_dim))


def linear_projection_flops(layer: LinearLayer, hidden: int) -> float:
    """Projection and convolution FLOPs per new token of one linear-attention layer."""
    d = hidden
    nk, nv, dk, dv = layer.num_key_heads, layer.num_value_heads, layer.key_head_dim, \
        layer.value_head_dim
    if layer.variant == "gated-deltanet":
        projections = 2 * d * (2 * nk * dk + 2 * nv * dv) + 2 * d * 2 * nv + 2 * nv * dv * d
    else:  # kda: q/k/v, low-rank forget and output gates, beta, output
        projections = (2 * d * (2 * nk * dk + nv * dv) + (2 * d * dk + 2 * dk * nv * dk)
                       + (2 * d * dk + 2 * dk * nv * dv) + 2 * d * nv + 2 * nv * dv * d)
    return float(projections + 2 * layer.conv_channels * layer.conv_kernel)


def linear_core_flops(layer: LinearLayer, *, decode: bool = False) -> float:
    """Delta-rule core FLOPs per new token of one linear-attention layer (chunkwise in a
    prefill, ``c (6 d_k + 4 d_v) + 6 d_k d_v`` a value head; the recurrent step in a decode,
    ``6 d_k d_v``)."""
    dk, dv = layer.key_head_dim, layer.value_head_dim
    per_head = 6 * dk * dv + (0 if decode else layer.chunk * (6 * dk + 4 * dv))
    return float(layer.num_value_heads * per_head)


def linear_state_elements(layer: LinearLayer) -> tuple[int, int]:
    """Elements of one linear layer's state per request: (recurrent ``value heads x d_k x d_v``,
    convolution ``channels x (kernel - 1)``, the inputs the next token's convolution needs
    besides its own, as vLLM's ``MambaStateShapeCalculator.gated_delta_net_state_shape`` sizes
    it)."""
    recurrent = layer.num_value_heads * layer.key_head_dim * layer.value_head_dim
    return recurrent, layer.conv_channels * (layer.conv_kernel - 1)


def linear_state_bytes(layer: LinearLayer) -> float:
    """Bytes of one linear layer's state per request: recurrent plus convolution state."""
    recurrent, conv = linear_state_elements(layer)
    return recurrent * dtype_bytes(layer.state_dtype) + conv * dtype_bytes(layer.conv_dtype)


def _attention_group(model: ModelSpec, name: str, kind: LayerKind, count: int,
                     mla_mode: str) -> LayerGroup:
    attention = model.kind_attention(kind)
    d = model.hidden_size
    shared = isinstance(kind, SharedLayer)
    rule_kind = model.layer_kinds[kind.source][1] if isinstance(kind, SharedLayer) else kind
    rule: PairRule = "full"
    span = 0.0
    if isinstance(rule_kind, SlidingLayer):
        rule, span = "window", float(rule_kind.window)
    elif isinstance(rule_kind, ChunkedLayer):
        rule, span = "chunk", float(rule_kind.chunk)
    elif isinstance(rule_kind, SparseLayer):
        rule, span = "window", float(rule_kind.indexer.topk)
    sparse = isinstance(kind, SparseLayer)
    mode = "absorbed" if isinstance(rule_kind, SparseLayer) else mla_mode
    is_mla = isinstance(attention, MLAAttention)
    index_pair = index_tokens = extra = 0.0
    if isinstance(kind, SparseLayer):
        indexer = kind.indexer
        assert isinstance(attention, MLAAttention) and attention.q_lora_rank is not None
        index_pair = 2.0 * indexer.num_heads * (indexer.head_dim + 1)
        index_tokens = float(2 * attention.q_lora_rank * indexer.num_heads * indexer.head_dim
                             + 2 * d * indexer.head_dim + 2 * d * indexer.num_heads)
        extra = indexer.head_dim * dtype_bytes(indexer.key_dtype) + indexer.key_scale_bytes
    holds = "none" if shared else {"full": "all", "window": "window", "chunk": "chunk"}[rule]
    if sparse:
        holds = "all"
    keep = {"window": span - 1.0, "chunk": span}.get(holds, 0.0)
    projections = attention_projection_flops(attention, d, with_kv=not shared)
    absorbed = mla_absorbed_flops(attention) if (isinstance(attention, MLAAttention)
                                                 and mode == "absorbed") else 0.0
    up = mla_up_flops(attention) if (isinstance(attention, MLAAttention) and mode == "expanded"
                                     and not shared) else 0.0
    return LayerGroup(
        name=name, kind=kind.kind, count=count,
        kv_elements=0 if shared else kv_elements(attention), extra_bytes=0.0 if shared else extra,
        state_bytes=0.0, holds=holds, rule=rule, span=span, keep=keep,  # type: ignore[arg-type]
        kv_heads=attention.num_kv_heads if isinstance(attention, GQAAttention) else None,
        mla=is_mla, projections=projections, absorbed=absorbed, decode_projections=projections,
        per_pair=attention_pair_flops(attention, mode), index_pair=index_pair,
        index_tokens=index_tokens, up=up,
        source=model.layer_kinds[kind.source][0] if isinstance(kind, SharedLayer) else None,
        tensors=2 if isinstance(attention, GQAAttention) else 1,
    )


def _linear_group(model: ModelSpec, name: str, kind: LinearLayer, count: int) -> LayerGroup:
    projections = linear_projection_flops(kind, model.hidden_size)
    return LayerGroup(
        name=name, kind="linear", count=count, kv_elements=0, extra_bytes=0.0,
        state_bytes=linear_state_bytes(kind), holds="none", rule="none", span=0.0, keep=0.0,
        kv_heads=None, mla=False, projections=projections + linear_core_flops(kind), absorbed=0.0,
        decode_projections=projections + linear_core_flops(kind, decode=True),
        per_pair=0.0, index_pair=0.0, index_tokens=0.0, up=0.0, source=None, tensors=2,
    )


def layer_groups(model: ModelSpec, mla_mode: str = "expanded") -> tuple[LayerGroup, ...]:
    """The model's layer groups, one per kind name, in order of first appearance."""
    counts = Counter(name for name, _ in model.layer_kinds)
    kinds = dict(model.layer_kinds)
    groups = []
    for name, count in counts.items():
        kind = kinds[name]
        if isinstance(kind, LinearLayer):
            groups.append(_linear_group(model, name, kind, count))
        else:
            groups.append(_attention_group(model, name, kind, count, mla_mode))
    return tuple(groups)


def tp_problem(model: ModelSpec, tp: int) -> str:
    """Why ``tp`` ranks cannot split the model's layers ("" when they can): every kind's query
    heads must divide by ``tp``; GQA KV heads must divide or be divided by it; a linear layer's
    key and value heads must divide by it (vLLM shards them)."""
    seen: list[Attention] = []
    for _, kind in model.layer_kinds:
        if isinstance(kind, LinearLayer):
            for heads in (kind.num_key_heads, kind.num_value_heads):
                if heads % tp:
                    return (f"{tp} does not divide the {heads} linear-attention heads of "
                            f"{model.name}")
            continue
        attention = model.kind_attention(kind)
        if attention in seen:
            continue
        seen.append(attention)
        if attention.num_heads % tp:
            return f"{tp} does not divide the {attention.num_heads} attention heads of {model.name}"
        if isinstance(attention, GQAAttention):
            kv = attention.num_kv_heads
            if kv % tp and tp % kv:
                return (f"{tp} neither divides nor is a multiple of the {kv} KV heads of "
                        f"{model.name}")
    return ""
