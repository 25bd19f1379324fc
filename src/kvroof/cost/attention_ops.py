"""The ops of a layer's token mixer on one tensor-parallel rank: GQA attention, MLA (expanded or
absorbed, with a sparse layer's DSA indexer) and linear attention, each with its per-rank shape
(:func:`attention_ops`, :func:`linear_ops`; :mod:`kvroof.cost.ops` assembles the whole pass).

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
  convolution and delta-rule core (``linear_core``).

Each layer also runs its ``input_norm`` and ``post_attention_norm`` and, with attention, its
``qk_norm``, ``rope`` and ``kv_write`` element-wise kernels (bytes in :mod:`kvroof.cost.ops`).
"""

from __future__ import annotations

from kvroof.cost.checks import dtype_bytes
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.forward_op import Op, elementwise_op, gemm_op
from kvroof.cost.groups import LayerGroup, linear_core_flops
from kvroof.cost.op_dtypes import ATTENTION_KV_DTYPES
from kvroof.specs.attention import GQAAttention, MLAAttention
from kvroof.specs.layers import LinearLayer, SparseLayer

__all__ = ["attention_ops", "linear_ops"]


def attention_ops(dep: DeploymentSettings, group: LayerGroup, gemm: str | None,
                  weight: float) -> list[Op]:
    """The ops of one attention layer group (GQA or MLA, sparse or not) on one rank, with its
    norms and element-wise kernels; ``gemm`` and ``weight``: the GEMMs' table data type and
    bytes per weight."""
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
    ops: list[Op] = [elementwise_op("input_norm", name, n, 8 * d)]
    if isinstance(attention, GQAAttention):
        h = attention.num_heads / tp
        kv = max(attention.num_kv_heads / tp, 1.0)
        dh = attention.head_dim
        gate = 2 if attention.output_gate else 1
        ops.append(gemm_op("qkv", name, n, h * dh * gate + (0 if shared else 2 * kv * dh), d,
                           gemm, weight))
        if attention.qk_norm:
            ops.append(elementwise_op("qk_norm", name, n, 4 * (h + (0 if shared else kv)) * dh))
        ops.append(elementwise_op("rope", name, n, 4 * (h + (0 if shared else kv)) * dh))
        if not shared:
            ops.append(elementwise_op("kv_write", name, n, 2 * kv * dh * (2 + kv_bytes)))
        covered = kv_type is not None
        ops.append(Op(
            name="attention", kind="attention", group=name, layers=n, scale="sequence",
            heads=h, kv_heads=kv, head_dim=dh, rule=rule, span=span, kv_dtype=kv_type,
            table=covered, flops_per_pair=4 * h * dh, bytes_per_position=2 * kv * dh * kv_bytes,
            bytes_per_token=4 * h * dh, dtype="bf16",
            why="" if covered else f"no attention tables for a {dep.kv_dtype} KV cache"))
        ops.append(gemm_op("o", name, n, d, h * dh, gemm, weight))
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
            ops.append(gemm_op("qkv_a", name, n, q_lora + (0 if shared else lora + rope), d,
                               gemm, weight, replicated=True))
            ops.append(elementwise_op("latent_norm", name, n, 4 * (q_lora + lora)))
            ops.append(gemm_op("q_b", name, n, h * qk, q_lora, gemm, weight))
        else:
            ops.append(gemm_op("q", name, n, h * qk, d, gemm, weight))
            if not shared:
                ops.append(gemm_op("kv_a", name, n, lora + rope, d, gemm, weight,
                                   replicated=True))
            ops.append(elementwise_op("latent_norm", name, n, 4 * lora))
        ops.append(elementwise_op("rope", name, n, 4 * (h + 1) * rope))
        if not shared:
            ops.append(elementwise_op("kv_write", name, n, (lora + rope) * (2 + kv_bytes)))
        if isinstance(kind, SparseLayer):
            indexer = kind.indexer
            assert attention.q_lora_rank is not None
            hi, di = indexer.num_heads, indexer.head_dim
            ops.append(gemm_op("indexer_wq_b", name, n, hi * di, attention.q_lora_rank, gemm,
                               weight, replicated=True))
            ops.append(gemm_op("indexer_wk", name, n, di, d, gemm, weight, replicated=True))
            ops.append(gemm_op("indexer_weights", name, n, hi, d, "bf16", 2.0, replicated=True))
            key = di * dtype_bytes(indexer.key_dtype) + indexer.key_scale_bytes
            ops.append(Op(
                name="indexer_scores", kind="attention", group=name, layers=n,
                scale="sequence", rule="full", table=False, replicated=True,
                flops_per_pair=group.index_pair, bytes_per_position=key,
                bytes_per_token=2 * hi * di, heads=hi, kv_heads=1, head_dim=di,
                why="DeepSeek Sparse Attention's indexer: no table"))
        if absorbed:
            ops.append(gemm_op("uk", name, n, h * lora, attention.qk_nope_head_dim, "bf16", 2.0))
            ops.append(Op(
                name="attention", kind="attention", group=name, layers=n, scale="sequence",
                rule=rule, span=span, table=False, heads=h, kv_heads=1, head_dim=lora + rope,
                flops_per_pair=group.per_pair / tp, bytes_per_position=(lora + rope) * kv_bytes,
                bytes_per_token=2 * h * (2 * lora + rope),
                why="MLA (absorbed) attention: no table"
                + (" (sparse: top-k keys a query)" if isinstance(kind, SparseLayer) else "")))
            ops.append(gemm_op("uv", name, n, h * v, lora, "bf16", 2.0))
        else:
            if group.up:
                ops.append(gemm_op("kv_b", name, n, h * (attention.qk_nope_head_dim + v), lora,
                                   "bf16", 2.0, scale="positions"))
            ops.append(Op(
                name="attention", kind="attention", group=name, layers=n, scale="sequence",
                rule=rule, span=span, table=False, heads=h, kv_heads=h, head_dim=qk,
                flops_per_pair=group.per_pair / tp, bytes_per_position=2 * h * (qk + v),
                bytes_per_token=2 * h * (qk + v),
                why="MLA (expanded) attention: no table"))
        ops.append(gemm_op("o", name, n, d, h * v, gemm, weight))
    ops.append(elementwise_op("post_attention_norm", name, n, 8 * d))
    return ops


def linear_ops(dep: DeploymentSettings, group: LayerGroup, layer: LinearLayer,
               gemm: str | None, weight: float) -> list[Op]:
    """The ops of one linear-attention layer group (gated DeltaNet or KDA) on one rank: its
    projections, norms and the convolution and delta-rule core (priced by its roofline)."""
    tp = dep.tp
    d = float(dep.model.hidden_size)
    n = group.count
    name = group.name
    nk, nv, dk, dv = (layer.num_key_heads, layer.num_value_heads, layer.key_head_dim,
                      layer.value_head_dim)
    ops = [elementwise_op("input_norm", name, n, 8 * d)]
    if layer.variant == "gated-deltanet":
        ops.append(gemm_op("in_proj", name, n, (2 * nk * dk + 2 * nv * dv + 2 * nv) / tp, d, gemm,
                           weight))
    else:  # kda: q, k, v and beta split; the low-rank gates' first factor on every rank
        ops.append(gemm_op("in_proj", name, n, (2 * nk * dk + nv * dv + nv) / tp, d, gemm, weight))
        ops.append(gemm_op("gates_a", name, n, 2 * dk, d, gemm, weight, replicated=True))
        ops.append(gemm_op("gates_b", name, n, (nv * dk + nv * dv) / tp, dk, gemm, weight))
    core = 2.0 * layer.conv_channels * layer.conv_kernel + linear_core_flops(layer)
    ops.append(Op(
        name="linear_core", kind="roofline", group=name, layers=n, scale="tokens", dtype=None,
        flops_per_token=core / tp, bytes_per_token=4.0 * (layer.conv_channels + nv * dv) / tp,
        fixed_bytes=2.0 * group.state_bytes / tp,
        why="linear attention (convolution and delta-rule core): no table"))
    ops.append(gemm_op("out_proj", name, n, d, nv * dv / tp, gemm, weight))
    ops.append(elementwise_op("post_attention_norm", name, n, 8 * d))
    return ops
