"""A slow, straightforward reference implementation of the cost model's per-request timing,
kept as it was before the speed refactor (issue 12): the fast paths in ``kvroof.cost`` must give
the same numbers. Tests only; no formula here is used by the package."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvroof.cost.collectives import collective_bandwidth, collective_latency
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes, kv_bytes_per_token_per_layer
from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec, MoEFFN


def _window_prefix_sum(n: Any, window: float) -> Any:
    m = np.minimum(n, window)
    return m * (m + 1.0) / 2.0 + (n - m) * window

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


def _flops_per_pair(model: ModelSpec, mla_mode: str) -> float:
    att = model.attention
    if isinstance(att, GQAAttention):
        return float(4 * att.num_heads * att.head_dim)
    h = att.num_heads
    if mla_mode == "expanded":
        return float(2 * h * (att.qk_nope_head_dim + att.qk_rope_head_dim) + 2 * h * att.v_head_dim)
    return float(2 * h * (att.kv_lora_rank + att.qk_rope_head_dim) + 2 * h * att.kv_lora_rank)


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


def prefill_flops_total(
    model: ModelSpec, new_tokens: Any, cached_tokens: Any, mla_mode: str
) -> Any:
    """Total FLOPs of prefilling T new tokens on K cached ones (the conventions of
    kvroof.cost.flops)."""
    t = np.asarray(new_tokens, dtype=np.float64)
    k = np.asarray(cached_tokens, dtype=np.float64)
    t, k = np.broadcast_arrays(t, k)
    layers = model.num_layers
    per_pair = _flops_per_pair(model, mla_mode)
    full_pairs = t * k + t * (t + 1.0) / 2.0
    core = model.num_full_layers * per_pair * full_pairs
    if model.sliding_window is not None:
        window = float(model.sliding_window.size)
        sliding_pairs = _window_prefix_sum(k + t, window) - _window_prefix_sum(k, window)
        core = core + model.num_sliding_layers * per_pair * sliding_pairs
    att = model.attention
    if isinstance(att, MLAAttention):
        if mla_mode == "expanded":
            # nothing runs when there is nothing to prefill
            mla_up = layers * _mla_up_per_position(att) * np.where(t > 0, k + t, 0.0)
        else:
            mla_up = layers * _mla_absorbed_per_token(att) * t
    else:
        mla_up = np.zeros_like(t)
    dense, routed, shared, router = _ffn_flops_per_token(model)
    lm_head = np.where(t > 0, 2.0 * model.hidden_size * model.vocab_size, 0.0)
    return (layers * projection_flops_per_token(model) * t + core + mla_up + dense * t
            + routed * t + shared * t + router * t + lm_head)




def weights_read_per_rank(dep: Deployment, n: Any) -> Any:
    parts = dep.weight_bytes
    ffn = dep.model.ffn
    n = np.asarray(n, dtype=np.float64)
    if isinstance(ffn, MoEFFN):
        share = 1.0 - np.power(1.0 - ffn.experts_per_token / ffn.num_experts, n)
        read = parts.always_read + parts.routed_experts * share
    else:
        read = np.full(np.shape(n), parts.always_read)
    return np.where(n > 0, read, 0.0)


def rank_share(dep: Deployment) -> float:
    att = dep.model.attention
    if isinstance(att, GQAAttention):
        return max(1.0 / dep.tp, 1.0 / att.num_kv_heads)
    return 1.0


def load_share(dep: Deployment) -> float:
    if dep.model.is_mla and dep.tp > 1 and dep.mla_tp_load == "shard-allgather":
        return 1.0 / dep.tp
    return rank_share(dep)


def allreduce(dep: Deployment, t: Any, share: Any) -> Any:
    t = np.asarray(t, dtype=np.float64)
    if not dep.allreduce or dep.tp == 1:
        return np.zeros(np.broadcast_shapes(t.shape, np.shape(share)))
    n = dep.tp
    message = t * dep.model.hidden_size * 2.0
    each = (np.asarray(share) * collective_latency(dep)
            + 2.0 * (n - 1) / n * message / collective_bandwidth(dep))
    return np.where(t > 0, 2.0 * dep.model.num_layers * each, 0.0)


def kv_read(model: ModelSpec, k: Any, t: Any, kv_dtype: str) -> Any:
    """KV bytes a prefill reads: every layer its K + T positions, but a window-W layer only the
    W - 1 cached positions the first new query sees and the T new ones."""
    if model.sliding_window is None:
        return kv_bytes(model, k + t, kv_dtype)
    per_layer = kv_bytes_per_token_per_layer(model, kv_dtype)
    sliding = model.num_sliding_layers
    window = float(model.sliding_window.size)
    return per_layer * ((model.num_layers - sliding) * (k + t)
                        + sliding * (np.minimum(k, window - 1.0) + t))


def compute_parts(dep: Deployment, t: Any, k: Any) -> tuple[Any, Any, Any, Any]:
    """(flops, flop_time, hbm_time, comm_time) of a request alone or in its iteration."""
    t = np.asarray(t, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    flops = prefill_flops_total(dep.model, t, k, dep.mla_mode)
    efficiency = np.asarray(dep.compute_efficiency_at(t), dtype=np.float64)
    rate = dep.tp * np.asarray(dep.peak_compute, dtype=np.float64) * efficiency
    n = t if dep.iteration_tokens is None else np.asarray(dep.iteration_tokens, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(n > 0, t / np.where(n > 0, n, 1.0), 0.0)
    weights = share * weights_read_per_rank(dep, n)
    kv = np.where(t > 0, kv_read(dep.model, k, t, dep.kv_dtype) * rank_share(dep), 0.0)
    hbm_time = (weights + kv) / np.asarray(dep.effective_hbm_bandwidth)
    return flops, flops / rate, hbm_time, allreduce(dep, t, share)


def transfer_seconds(dep: Deployment, k: Any, t: Any) -> Any:
    """Load K, save T (no tiers), as before the refactor."""
    k = np.asarray(k, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    load = kv_bytes(dep.model, k, dep.kv_dtype) * load_share(dep)
    copies = np.asarray(dep.granularity.transfers(dep.model, k), dtype=np.float64)
    if dep.write_back:
        save = kv_bytes(dep.model, t, dep.kv_dtype) * load_share(dep)
        copies = copies + np.asarray(dep.granularity.transfers(dep.model, t))
    else:
        save = np.zeros_like(t)
    eff = np.asarray(dep.link_efficiency, dtype=np.float64)
    h2d = np.asarray(dep.link_bandwidth) * eff
    d2h = np.asarray(dep.link_d2h_bandwidth) * eff
    both = np.asarray(dep.link_duplex_bandwidth) * eff
    data = np.maximum(np.maximum(load / h2d, save / d2h),
                      np.maximum((load + save) / both, (load + save) / dep.host_dram_share))
    scale_up = np.zeros_like(load)
    if dep.model.is_mla and dep.tp > 1 and dep.mla_tp_load != "every-rank":
        latent = kv_bytes(dep.model, k, dep.kv_dtype)
        bw = collective_bandwidth(dep)
        lat = collective_latency(dep)
        if dep.mla_tp_load == "rank0-broadcast":
            scale_up = np.where(latent > 0, lat + latent / bw, 0.0)
        else:
            scale_up = np.where(latent > 0, lat + (dep.tp - 1) / dep.tp * latent / bw, 0.0)
    return data + scale_up + copies * np.asarray(dep.transfer_latency)


def ttft_fields(dep: Deployment, t: Any, k: Any, overlap: str) -> dict[str, Any]:
    flops, flop_time, hbm_time, comm = compute_parts(dep, t, k)
    c = np.maximum(flop_time, hbm_time) + comm
    x = transfer_seconds(dep, k, t)
    layers = dep.model.num_layers
    eta = np.asarray(dep.resolved_overlap_efficiency, dtype=np.float64)
    overlapped = np.maximum(x, c) + (1.0 - eta) * np.minimum(x, c)
    total = {"serial": x + c, "ideal": overlapped,
             "layerwise": (x + c) / layers + (layers - 1) * overlapped / layers}[overlap]
    exposed = total - c
    with np.errstate(divide="ignore", invalid="ignore"):
        p_oh = np.where(c > 0, x / np.where(c > 0, c, 1.0), np.where(x > 0, np.inf, 0.0))
        share = np.where(total > 0, exposed / np.where(total > 0, total, 1.0), 0.0)
        achieved = np.where(total > 0, flops / dep.tp / np.where(total > 0, total, 1.0), 0.0)
    return {"ttft": total, "compute": c, "transfer": x, "exposed_transfer": exposed,
            "p_oh": p_oh, "transfer_share": share, "bound": np.where(x > c, "transfer", "compute"),
            "flops": flops, "achieved_flops": achieved,
            "compute_utilization": achieved / np.asarray(dep.peak_compute, dtype=np.float64)}
