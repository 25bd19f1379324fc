"""The ops of one forward pass on one tensor-parallel rank, layer kind by layer kind: every
GEMM, attention, fused MoE, all-reduce and element-wise kernel a prefill runs, with its per-rank
shape and the FLOPs and bytes it moves (:func:`forward_ops`). :mod:`kvroof.cost.kernel_time`
times them with the measured kernel tables (:mod:`kvroof.kernels`); nothing here reads a table.

Shapes follow vLLM's tensor-parallel layers (``ColumnParallelLinear`` splits the output
features ``n``, ``RowParallelLinear`` the input features ``k``). The list is built from:

- the op type and its counts (:class:`Op`, :mod:`kvroof.cost.forward_op`) and the tables'
  data types (:func:`gemm_dtype`, :func:`moe_dtype`, :mod:`kvroof.cost.op_dtypes`);
- each layer group's token mixer: GQA, MLA with a sparse layer's DSA indexer, and linear
  attention (:mod:`kvroof.cost.attention_ops`, where their shapes are written out);
- the FFNs: dense, MoE with its router and shared experts (:mod:`kvroof.cost.ffn_ops`);
- per pass (here): the per-layer-input projections of a model that has them, the
  ``embedding_allreduce`` of vLLM's ``VocabParallelEmbedding`` (TP > 1), ``final_norm`` and the
  ``lm_head`` (``n = V/TP``, one logits row per request).

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

from kvroof.cost.attention_ops import attention_ops, linear_ops
from kvroof.cost.checks import dtype_bytes
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.ffn_ops import ffn_ops
from kvroof.cost.forward_op import (
    Op,
    OpKind,
    Scale,
    elementwise_op,
    gemm_op,
    positions_read,
    query_key_pairs,
)
from kvroof.cost.groups import layer_groups
from kvroof.cost.op_dtypes import ATTENTION_KV_DTYPES, float_dtype, gemm_dtype, moe_dtype
from kvroof.specs.layers import LinearLayer

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
            ops += linear_ops(dep, group, kind, gemm, weight)
        else:
            ops += attention_ops(dep, group, gemm, weight)
    ops += ffn_ops(dep, gemm, weight, expert_weight)
    ple = model.per_layer_input
    if ple is not None:
        layers = model.num_layers
        ops += [gemm_op("per_layer_projection", "model", 1, layers * ple.hidden_size / tp, d,
                        gemm, weight),
                gemm_op("per_layer_gate", "per-layer input", layers, ple.hidden_size / tp, d,
                        gemm, weight),
                gemm_op("per_layer_back", "per-layer input", layers, d, ple.hidden_size / tp,
                        gemm, weight)]
    if dep.allreduce and tp > 1:
        ops.append(Op(name="allreduce", kind="allreduce", group="layers",
                      layers=2 * model.num_layers, scale="tokens", dtype=None,
                      bytes_per_token=2.0 * d))
        ops.append(Op(name="embedding_allreduce", kind="allreduce", group="model", layers=1,
                      scale="tokens", dtype=None, bytes_per_token=2.0 * d))
    embeddings = model.weights.embeddings
    head = "bf16" if float_dtype(embeddings) else None
    ops.append(elementwise_op("final_norm", "model", 1, 8 * d))
    ops.append(gemm_op("lm_head", "model", 1, model.vocab_size / tp, d, head,
                       dtype_bytes(embeddings), scale="logits"))
    return tuple(ops)
