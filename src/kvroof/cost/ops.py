"""The ops of one forward pass on one tensor-parallel rank, layer kind by layer kind: every
GEMM, attention, fused MoE, all-reduce and element-wise kernel a prefill runs, with its per-rank
shape and the FLOPs and bytes it moves. :mod:`kvroof.cost.kernel_time` times them with the
measured kernel tables (:mod:`kvroof.kernels`); nothing here reads a table.

Shapes follow vLLM's tensor-parallel layers (``ColumnParallelLinear`` splits the output
features ``n``, ``RowParallelLinear`` the input features ``k``):

- GQA attention: ``qkv`` (``n = h/TP dh g + 2 kv_r dh``, ``k = d``; ``g`` = 2 with an output
  gate; ``kv_r = max(kv/TP, 1)``: KV heads are duplicated once TP exceeds their count, as
  ``QKVParallelLinear`` does), ``attention`` (``h/TP`` query and ``kv_r`` KV heads), ``o``
  (``n = d``, ``k = h/TP dh``); a KV-sharing layer projects only its query;
- MLA: ``qkv_a`` (the fused ``q_a`` and ``kv_a`` down-projections, ``n = q_lora + kv_lora +
  rope``, on every rank: vLLM's ``fused_qkv_a_proj`` is not split), ``q_b`` (``n = h/TP
  (nope + rope)``, ``k = q_lora``; ``q`` from ``d`` without ``q_lora``, and then ``kv_a`` alone
  on every rank), the up-projection ``kv_b`` over the ``K + T`` positions (expanded; ``n = h/TP
  (nope + v)``, ``k = kv_lora``) or the absorbed ``uk``/``uv`` products (``n = h/TP kv_lora``,
  ``k = nope``; ``n = h/TP v``, ``k = kv_lora``), ``attention`` and ``o``; a sparse (DSA)
  layer's indexer projections (``wq_b``, ``wk``, ``weights_proj``) on every rank and its scores
  over every causal pair;
- linear attention: ``in_proj`` (``n`` = the query, key, value, gate and beta widths over TP),
  KDA's low-rank gates (``gates_a`` on every rank, ``gates_b`` split), ``out_proj``, and the
  convolution and delta-rule core (``linear_core``);
- FFN: ``gate_up`` (``n = 2 ff/TP``) and ``down`` (``k = ff/TP``); a MoE layer's ``router`` on
  every rank (``n = E``, plus the shared experts' output gate), the fused ``moe`` (``E`` experts
  of ``d x ff_e/TP``, top-``k``) and its shared experts' ``shared_gate_up``/``shared_down``;
- per pass: the ``embedding_allreduce`` of vLLM's ``VocabParallelEmbedding`` (TP > 1),
  ``final_norm`` and the ``lm_head`` (``n = V/TP``, one logits row per request).

Two all-reduces per layer of ``m x d`` 16-bit activations follow the attention and the FFN
(``allreduce``). Element-wise kernels per layer (vLLM's fused kernels; bytes per token, 16-bit
activations read and written): ``input_norm`` and ``post_attention_norm`` (fused residual add
and RMSNorm, ``8 d``, aiconfigurator's ``add_norm`` count), ``qk_norm`` (``4 (h/TP + kv_r)
dh``), ``rope`` (``4 (h/TP + kv_r) dh``; MLA ``4 (h/TP + 1) rope``), ``kv_write`` (``K`` and
``V`` read in 16 bits and written in the KV type) and ``activation`` (SiLU-and-mul, ``6 ff/TP``;
a fused MoE's is inside its kernel); MLA adds the ``latent_norm`` of its ``q_a``/``kv_a``
outputs.

FLOPs: a GEMM ``2 m n k`` per rank; attention ``pairs x FLOPs per pair / TP``
(:mod:`kvroof.cost.groups`); a fused MoE ``6 m top_k d ff_e / TP``. Summed over the ranks (the
ops every rank repeats counted once) they are :func:`kvroof.cost.flops.prefill_flops`; the ops
every rank repeats are what the per-rank count adds (``replicated``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kvroof.cost.checks import dtype_bytes, minimum
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.groups import LayerGroup, layer_groups, linear_core_flops
from kvroof.cost.pairs import capped_pairs
from kvroof.cost.weight_bytes import touched_share
from kvroof.specs.attention import GQAAttention, MLAAttention
from kvroof.specs.layers import LinearLayer, SparseLayer
from kvroof.specs.model import ModelSpec, MoEFFN

__all__ = [
    "ATTENTION_KV_DTYPES",
    "Op",
    "OpKind",
    "Scale",
    "forward_ops",
    "gemm_dtype",
    "moe_dtype",
    "positions_read",
    "query_key_pairs",
]

OpKind = Literal["gemm", "attention", "moe", "allreduce", "elementwise", "roofline"]
Scale = Literal["tokens", "positions", "sequence", "logits", "pass"]
"""What sets an op's size: the tokens of the forward pass (``m = T``, or ``N`` in a busy
iteration), the request's positions (``m = K + T``), the request's sequence (``T`` new tokens
attending to ``K + T`` keys), one logits row per request, or nothing (once per pass)."""

ATTENTION_KV_DTYPES = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
"""KV cache types with attention tables (fp16 is priced as bf16: the same kernels)."""


@dataclass(frozen=True)
class Op:
    """One kernel of a forward pass on one rank, run ``layers`` times (once per layer that has
    it; 1 for a per-pass op). Sizes are element counts per rank.

    ``dtype`` is the kernel tables' data type of a GEMM or MoE (``None``: one the tables do not
    have, priced by the roofline; ``why`` says so). An attention op has ``heads``, ``kv_heads``,
    ``head_dim``, its pair ``rule`` (``full``, ``window`` or ``chunk`` with ``span``) and, for
    its roofline, ``flops_per_pair`` and the bytes it reads per position and per new token;
    ``table`` is False for attention the tables do not cover (MLA, sparse, other KV types)."""

    name: str
    kind: OpKind
    group: str
    layers: int
    scale: Scale
    n: float = 0.0
    k: float = 0.0
    dtype: str | None = "bf16"
    weight_bytes: float = 2.0
    replicated: bool = False
    heads: float = 0.0
    kv_heads: float = 0.0
    head_dim: int = 0
    rule: str = "full"
    span: float = 0.0
    kv_dtype: str | None = "bf16"
    table: bool = True
    flops_per_pair: float = 0.0
    bytes_per_position: float = 0.0
    flops_per_token: float = 0.0
    bytes_per_token: float = 0.0
    fixed_bytes: float = 0.0
    hidden: float = 0.0
    inter_per_rank: float = 0.0
    experts: int = 0
    top_k: int = 0
    why: str = ""

    @property
    def label(self) -> str:
        """``group: name`` (``full: qkv``, ``moe: moe``, ``model: lm_head``)."""
        return f"{self.group}: {self.name}"

    def size(self, t: Any, k: Any) -> Any:
        """The op's size for a request of ``t`` new tokens on ``k`` cached ones: ``m`` tokens of
        a per-token op (``t``), the positions of a per-position one (``k + t``), 1 logits row."""
        if self.scale == "positions":
            return k + t
        return 1.0 if self.scale == "logits" else t

    def work(self, m: Any, t: Any = 0.0, k: Any = 0.0) -> tuple[Any, Any]:
        """(FLOPs, bytes) of one call on one rank: a per-token op at ``m`` tokens, an attention
        op for ``t`` new tokens on ``k`` cached ones (module docstring; a GEMM's activations in
        8 bits for an FP8 data type, else 16; a MoE layer reads the experts its tokens touch,
        ``1 - (1 - top_k/E)^m`` of them)."""
        if self.kind == "gemm":
            act = 1.0 if self.dtype in ("fp8", "fp8_block") else 2.0
            return (2.0 * m * self.n * self.k,
                    m * self.k * act + self.k * self.n * self.weight_bytes + 2.0 * m * self.n)
        if self.kind == "moe":
            experts = float(self.experts)
            touched = experts * touched_share(1.0 - self.top_k / experts, m)
            return (6.0 * m * self.top_k * self.hidden * self.inter_per_rank,
                    touched * 3.0 * self.hidden * self.inter_per_rank * self.weight_bytes
                    + 4.0 * m * self.hidden)
        if self.kind == "attention":
            return (self.flops_per_pair * query_key_pairs(self.rule, self.span, t, k),
                    self.bytes_per_token * t
                    + self.bytes_per_position * positions_read(self.rule, self.span, t, k))
        if self.kind == "roofline":
            return self.flops_per_token * m, self.bytes_per_token * m + self.fixed_bytes
        return 0.0 * m, self.bytes_per_token * m


def query_key_pairs(rule: str, span: float, t: Any, k: Any) -> Any:
    """(query, key) pairs ``t`` new tokens after ``k`` cached ones score under ``rule``
    (``full``; ``window``, ``topk``: at most ``span`` keys a query; ``chunk``)."""
    if rule == "full":
        return t * k + t * (t + 1.0) / 2.0
    return capped_pairs("chunk" if rule == "chunk" else "window", span, t, k)


def positions_read(rule: str, span: float, t: Any, k: Any) -> Any:
    """Positions whose keys and values (or latents) one attention call reads: every one
    (``full``), the window's (``min(K, W - 1) + T``), the current chunk's (``K mod C + T``), or
    at most ``top-k`` a query (``topk``: ``min(K + T, top-k T)``)."""
    if rule == "full":
        return k + t
    if rule == "window":
        return minimum(k, span - 1.0) + t
    if rule == "topk":
        return minimum(k + t, span * t)
    floor = float(math.floor(k / span)) if type(k) is float else np.floor(k / span)
    return k - floor * span + t


def _float_dtype(dtype: str) -> bool:
    return dtype in ("bf16", "fp16", "fp32", "tf32")


def gemm_dtype(dep: DeploymentSettings) -> str | None:
    """The kernel tables' GEMM data type for the deployment's linear layers: ``bf16`` for 16-
    and 32-bit weights (fp16 as bf16), ``fp8_block`` for an FP8 checkpoint (DeepSeek-V3, Kimi-K2,
    MiniMax and GLM publish 128 x 128 block scales), ``fp8`` (per-tensor scales) for FP8 set by
    ``weight_dtype`` or ``compute_dtype`` (an engine quantizing on load), ``nvfp4`` for FP4;
    ``None`` for a type without tables (int8, int4)."""
    weights = dep.weight_dtype or dep.model.weights.dtype
    if weights == "fp8":
        return "fp8" if dep.weight_dtype is not None else "fp8_block"
    if weights in ("fp4", "nvfp4"):
        return "nvfp4"
    if _float_dtype(weights):
        return "fp8" if dep.compute_dtype == "fp8" else "bf16"
    return None


def moe_dtype(dep: DeploymentSettings) -> str | None:
    """The kernel tables' MoE data type for the deployment's experts: as :func:`gemm_dtype`,
    and ``w4a16_mxfp4`` for MXFP4 experts (gpt-oss: vLLM's Triton MXFP4 path), ``int4_wo`` for
    int4 weights."""
    experts = dep.weight_dtype or dep.model.weights.expert_dtype
    if experts == "fp8":
        return "fp8" if dep.weight_dtype is not None else "fp8_block"
    if experts == "mxfp4":
        return "w4a16_mxfp4"
    if experts in ("fp4", "nvfp4"):
        return "nvfp4"
    if experts == "int4":
        return "int4_wo"
    if _float_dtype(experts):
        return "fp8" if dep.compute_dtype == "fp8" else "bf16"
    return None


def _gemm(name: str, group: str, layers: int, n: float, k: float, dtype: str | None,
          weight_bytes: float, *, scale: Scale = "tokens", replicated: bool = False) -> Op:
    why = "" if dtype is not None else "weights in a data type without GEMM tables"
    return Op(name=name, kind="gemm", group=group, layers=layers, scale=scale, n=float(n),
              k=float(k), dtype=dtype, weight_bytes=weight_bytes, replicated=replicated, why=why)


def _elementwise(name: str, group: str, layers: int, bytes_per_token: float) -> Op:
    return Op(name=name, kind="elementwise", group=group, layers=layers, scale="tokens",
              dtype=None, bytes_per_token=float(bytes_per_token))


def _attention_ops(dep: DeploymentSettings, group: LayerGroup, gemm: str | None,
                   weight: float) -> list[Op]:
    model = dep.model
    tp = dep.tp
    d = float(model.hidden_size)
    kind = dict(model.layer_kinds)[group.name]
    attention = model.kind_attention(kind)
    n = group.count
    name = group.name
    shared = group.source is not None
    kv_type = ATTENTION_KV_DTYPES.get(dep.kv_dtype)
    kv_bytes = dtype_bytes(dep.kv_dtype)
    rule: str = group.rule
    span = group.span
    ops: list[Op] = [_elementwise("input_norm", name, n, 8 * d)]
    if isinstance(attention, GQAAttention):
        h = attention.num_heads / tp
        kv = max(attention.num_kv_heads / tp, 1.0)
        dh = attention.head_dim
        gate = 2 if attention.output_gate else 1
        ops.append(_gemm("qkv", name, n, h * dh * gate + (0 if shared else 2 * kv * dh), d,
                         gemm, weight))
        if attention.qk_norm:
            ops.append(_elementwise("qk_norm", name, n, 4 * (h + (0 if shared else kv)) * dh))
        ops.append(_elementwise("rope", name, n, 4 * (h + (0 if shared else kv)) * dh))
        if not shared:
            ops.append(_elementwise("kv_write", name, n, 2 * kv * dh * (2 + kv_bytes)))
        covered = kv_type is not None
        ops.append(Op(
            name="attention", kind="attention", group=name, layers=n, scale="sequence",
            heads=h, kv_heads=kv, head_dim=dh, rule=rule, span=span, kv_dtype=kv_type,
            table=covered, flops_per_pair=4 * h * dh, bytes_per_position=2 * kv * dh * kv_bytes,
            bytes_per_token=4 * h * dh, dtype="bf16",
            why="" if covered else f"no attention tables for a {dep.kv_dtype} KV cache"))
        ops.append(_gemm("o", name, n, d, h * dh, gemm, weight))
    else:
        assert isinstance(attention, MLAAttention)
        h = attention.num_heads / tp
        qk = attention.qk_nope_head_dim + attention.qk_rope_head_dim
        lora, rope, v = attention.kv_lora_rank, attention.qk_rope_head_dim, attention.v_head_dim
        absorbed = group.absorbed > 0 or isinstance(kind, SparseLayer)
        if isinstance(kind, SparseLayer):
            rule = "topk"  # at most top-k keys a query, read from the latents it selects
        if attention.q_lora_rank is not None:
            q_lora = attention.q_lora_rank
            ops.append(_gemm("qkv_a", name, n, q_lora + (0 if shared else lora + rope), d,
                             gemm, weight, replicated=True))
            ops.append(_elementwise("latent_norm", name, n, 4 * (q_lora + lora)))
            ops.append(_gemm("q_b", name, n, h * qk, q_lora, gemm, weight))
        else:
            ops.append(_gemm("q", name, n, h * qk, d, gemm, weight))
            if not shared:
                ops.append(_gemm("kv_a", name, n, lora + rope, d, gemm, weight,
                                 replicated=True))
            ops.append(_elementwise("latent_norm", name, n, 4 * lora))
        ops.append(_elementwise("rope", name, n, 4 * (h + 1) * rope))
        if not shared:
            ops.append(_elementwise("kv_write", name, n, (lora + rope) * (2 + kv_bytes)))
        if isinstance(kind, SparseLayer):
            indexer = kind.indexer
            assert attention.q_lora_rank is not None
            hi, di = indexer.num_heads, indexer.head_dim
            ops.append(_gemm("indexer_wq_b", name, n, hi * di, attention.q_lora_rank, gemm,
                             weight, replicated=True))
            ops.append(_gemm("indexer_wk", name, n, di, d, gemm, weight, replicated=True))
            ops.append(_gemm("indexer_weights", name, n, hi, d, "bf16", 2.0, replicated=True))
            key = di * dtype_bytes(indexer.key_dtype) + indexer.key_scale_bytes
            ops.append(Op(
                name="indexer_scores", kind="attention", group=name, layers=n,
                scale="sequence", rule="full", table=False, replicated=True,
                flops_per_pair=group.index_pair, bytes_per_position=key,
                bytes_per_token=2 * hi * di, heads=hi, kv_heads=1, head_dim=di,
                why="DeepSeek Sparse Attention's indexer: no table"))
        if absorbed:
            ops.append(_gemm("uk", name, n, h * lora, attention.qk_nope_head_dim, "bf16", 2.0))
            ops.append(Op(
                name="attention", kind="attention", group=name, layers=n, scale="sequence",
                rule=rule, span=span, table=False, heads=h, kv_heads=1, head_dim=lora + rope,
                flops_per_pair=group.per_pair / tp, bytes_per_position=(lora + rope) * kv_bytes,
                bytes_per_token=2 * h * (2 * lora + rope),
                why="MLA (absorbed) attention: no table"
                + (" (sparse: top-k keys a query)" if isinstance(kind, SparseLayer) else "")))
            ops.append(_gemm("uv", name, n, h * v, lora, "bf16", 2.0))
        else:
            if group.up:
                ops.append(_gemm("kv_b", name, n, h * (attention.qk_nope_head_dim + v), lora,
                                 "bf16", 2.0, scale="positions"))
            ops.append(Op(
                name="attention", kind="attention", group=name, layers=n, scale="sequence",
                rule=rule, span=span, table=False, heads=h, kv_heads=h, head_dim=qk,
                flops_per_pair=group.per_pair / tp, bytes_per_position=2 * h * (qk + v),
                bytes_per_token=2 * h * (qk + v),
                why="MLA (expanded) attention: no table"))
        ops.append(_gemm("o", name, n, d, h * v, gemm, weight))
    ops.append(_elementwise("post_attention_norm", name, n, 8 * d))
    return ops


def _linear_ops(dep: DeploymentSettings, group: LayerGroup, layer: LinearLayer,
                gemm: str | None, weight: float) -> list[Op]:
    tp = dep.tp
    d = float(dep.model.hidden_size)
    n = group.count
    name = group.name
    nk, nv, dk, dv = (layer.num_key_heads, layer.num_value_heads, layer.key_head_dim,
                      layer.value_head_dim)
    ops = [_elementwise("input_norm", name, n, 8 * d)]
    if layer.variant == "gated-deltanet":
        ops.append(_gemm("in_proj", name, n, (2 * nk * dk + 2 * nv * dv + 2 * nv) / tp, d, gemm,
                         weight))
    else:  # kda: q, k, v and beta split; the low-rank gates' first factor on every rank
        ops.append(_gemm("in_proj", name, n, (2 * nk * dk + nv * dv + nv) / tp, d, gemm, weight))
        ops.append(_gemm("gates_a", name, n, 2 * dk, d, gemm, weight, replicated=True))
        ops.append(_gemm("gates_b", name, n, (nv * dk + nv * dv) / tp, dk, gemm, weight))
    core = 2.0 * layer.conv_channels * layer.conv_kernel + linear_core_flops(layer)
    ops.append(Op(
        name="linear_core", kind="roofline", group=name, layers=n, scale="tokens", dtype=None,
        flops_per_token=core / tp, bytes_per_token=4.0 * (layer.conv_channels + nv * dv) / tp,
        fixed_bytes=2.0 * group.state_bytes / tp,
        why="linear attention (convolution and delta-rule core): no table"))
    ops.append(_gemm("out_proj", name, n, d, nv * dv / tp, gemm, weight))
    ops.append(_elementwise("post_attention_norm", name, n, 8 * d))
    return ops


def _ffn_signatures(model: ModelSpec) -> Counter[tuple[str, float]]:
    """How many layers have each FFN: ``("dense", width)`` or ``("moe", 0)``."""
    ffn = model.ffn
    found: Counter[tuple[str, float]] = Counter()
    for layer, (_, kind) in enumerate(model.layer_kinds):
        if not isinstance(ffn, MoEFFN):
            found[("dense", float(kind.ffn_intermediate_size or ffn.intermediate_size))] += 1
        elif ffn.is_moe_layer(layer):
            found[("moe", 0.0)] += 1
        else:
            found[("dense", float(ffn.dense_intermediate_size or 0))] += 1
    return found


def _ffn_ops(dep: DeploymentSettings, gemm: str | None, weight: float,
             expert_weight: float) -> list[Op]:
    model = dep.model
    tp = dep.tp
    d = float(model.hidden_size)
    ffn = model.ffn
    ops: list[Op] = []
    for (kind, width), n in _ffn_signatures(model).items():
        if kind == "dense":
            if not width:
                continue
            group = "dense" if width == getattr(ffn, "intermediate_size", width) else \
                f"dense {width:g}"
            ops += [_gemm("gate_up", group, n, 2 * width / tp, d, gemm, weight),
                    _elementwise("activation", group, n, 6 * width / tp),
                    _gemm("down", group, n, d, width / tp, gemm, weight)]
            continue
        assert isinstance(ffn, MoEFFN)
        experts = moe_dtype(dep)
        ops.append(_gemm("router", "moe", n, ffn.num_experts + (1 if ffn.shared_expert_gate
                                                                else 0), d, "bf16", 2.0,
                         replicated=True))
        ops.append(Op(
            name="moe", kind="moe", group="moe", layers=n, scale="tokens", dtype=experts,
            weight_bytes=expert_weight, hidden=d, inter_per_rank=ffn.expert_intermediate_size / tp,
            experts=ffn.num_experts, top_k=ffn.experts_per_token,
            why="" if experts is not None else "experts in a data type without MoE tables"))
        if ffn.num_shared_experts:
            width = float(ffn.shared_expert_intermediate_size * ffn.num_shared_experts)
            ops += [_gemm("shared_gate_up", "moe", n, 2 * width / tp, d, gemm, expert_weight),
                    _elementwise("shared_activation", "moe", n, 6 * width / tp),
                    _gemm("shared_down", "moe", n, d, width / tp, gemm, expert_weight)]
    return ops


def forward_ops(dep: DeploymentSettings) -> tuple[Op, ...]:
    """Every op of a forward pass on one rank of ``dep`` (module docstring), layer group by
    layer group, then the FFNs, the all-reduces and the per-pass ops."""
    model = dep.model
    tp = dep.tp
    d = float(model.hidden_size)
    gemm = gemm_dtype(dep)
    weight = dtype_bytes(dep.weight_dtype or model.weights.dtype)
    expert_weight = dtype_bytes(dep.weight_dtype or model.weights.expert_dtype)
    kinds = dict(model.layer_kinds)
    ops: list[Op] = []
    for group in layer_groups(model, dep.mla_mode):
        kind = kinds[group.name]
        if isinstance(kind, LinearLayer):
            ops += _linear_ops(dep, group, kind, gemm, weight)
        else:
            ops += _attention_ops(dep, group, gemm, weight)
    ops += _ffn_ops(dep, gemm, weight, expert_weight)
    ple = model.per_layer_input
    if ple is not None:
        layers = model.num_layers
        ops += [_gemm("per_layer_projection", "model", 1, layers * ple.hidden_size / tp, d, gemm,
                      weight),
                _gemm("per_layer_gate", "per-layer input", layers, ple.hidden_size / tp, d, gemm,
                      weight),
                _gemm("per_layer_back", "per-layer input", layers, d, ple.hidden_size / tp,
                      gemm, weight)]
    if dep.allreduce and tp > 1:
        ops.append(Op(name="allreduce", kind="allreduce", group="layers",
                      layers=2 * model.num_layers, scale="tokens", dtype=None,
                      bytes_per_token=2.0 * d))
        ops.append(Op(name="embedding_allreduce", kind="allreduce", group="model", layers=1,
                      scale="tokens", dtype=None, bytes_per_token=2.0 * d))
    embeddings = model.weights.embeddings
    head = "bf16" if _float_dtype(embeddings) else None
    ops.append(_elementwise("final_norm", "model", 1, 8 * d))
    ops.append(_gemm("lm_head", "model", 1, model.vocab_size / tp, d, head,
                     dtype_bytes(embeddings), scale="logits"))
    return tuple(ops)
