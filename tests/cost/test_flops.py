"""Prefill FLOPs, hand-derived for Qwen3-235B-A22B (GQA MoE), DeepSeek-V3 (MLA MoE, both MLA
modes) and Llama-3.1-70B (dense GQA) at T = 128 new tokens on K = 4096 cached tokens.

Every expected number below is written out from the architecture fields of each model's
config.json (tests/data/hf_configs; public origins in tests/data/hf_configs/SOURCES.md) and the
conventions in kvroof.cost.flops' docstring, independently of the code."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvroof.cost.flops import attention_pairs, decode_flops, prefill_flops
from kvroof.errors import KvroofError
from kvroof.specs.model import DenseFFN, GQAAttention, ModelSpec, MoEFFN
from kvroof.specs.registry import Registry

_DSV3 = Registry(use_env=False).model("deepseek-v3")
T, K = 128, 4096
PAIRS = T * K + T * (T + 1) // 2  # 524,288 + 8,256 = 532,544 (causal, diagonal included)


def test_qwen3_235b_by_hand(registry: Registry) -> None:
    # d 4096, 94 layers, 64 heads, 4 KV heads, head_dim 128; 128 experts top-8 of width 1536.
    proj = 2 * 4096 * (64 * 128 + 2 * 4 * 128) + 2 * 64 * 128 * 4096  # 142,606,336 / token
    per_pair = 4 * 64 * 128  # 32,768
    ffn = 2 * 4096 * 128 + 8 * 6 * 4096 * 1536  # router 1,048,576 + experts 301,989,888
    lm_head = 2 * 4096 * 151936
    flops = prefill_flops(registry.model("qwen3-235b-a22b"), T, K)
    assert flops.attention_projections == 94 * proj * T
    assert flops.attention_core == 94 * per_pair * PAIRS
    assert flops.ffn == 94 * ffn * T
    assert flops.router == 94 * 2 * 4096 * 128 * T
    assert flops.mla_up == 0
    assert flops.lm_head == lm_head
    assert flops.total == 94 * (proj + ffn) * T + 94 * per_pair * PAIRS + lm_head
    assert flops.total == pytest.approx(7.0042e12, rel=1e-4)  # the sum above, evaluated


def test_deepseek_v3_expanded_by_hand(registry: Registry) -> None:
    # d 7168, 61 layers, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128.
    query = 2 * 7168 * 1536 + 2 * 1536 * 128 * (128 + 64)
    kv_a = 2 * 7168 * (512 + 64)
    output = 2 * 128 * 128 * 7168
    kv_b = 2 * 512 * 128 * (128 + 128)  # 33,554,432 per position, cached ones included
    per_pair = 2 * 128 * (128 + 64) + 2 * 128 * 128  # 81,920
    dense = 6 * 7168 * 18432  # first 3 layers
    moe = 2 * 7168 * 256 + 8 * 6 * 7168 * 2048 + 1 * 6 * 7168 * 2048  # router, routed, shared
    lm_head = 2 * 7168 * 129280
    flops = prefill_flops(registry.model("deepseek-v3"), T, K, mla_mode="expanded")
    assert flops.attention_projections == 61 * (query + kv_a + output) * T
    assert flops.mla_up == 61 * kv_b * (K + T)
    assert flops.attention_core == 61 * per_pair * PAIRS
    assert flops.ffn == (3 * dense + 58 * moe) * T
    assert flops.ffn_shared == 58 * 6 * 7168 * 2048 * T
    assert flops.lm_head == lm_head


def test_deepseek_v3_absorbed_by_hand(registry: Registry) -> None:
    absorbed = 2 * 128 * 128 * 512 + 2 * 128 * 512 * 128  # W_UK into q, W_UV out: per new token
    per_pair = 2 * 128 * (512 + 64) + 2 * 128 * 512  # 278,528: scores and values in latent space
    flops = prefill_flops(registry.model("deepseek-v3"), T, K, mla_mode="absorbed")
    assert flops.mla_up == 61 * absorbed * T  # nothing per cached token
    assert flops.attention_core == 61 * per_pair * PAIRS
    expanded = prefill_flops(registry.model("deepseek-v3"), T, K, mla_mode="expanded")
    assert flops.attention_projections == expanded.attention_projections
    assert flops.ffn == expanded.ffn


def test_llama_70b_by_hand(registry: Registry) -> None:
    proj = 2 * 8192 * (64 * 128 + 2 * 8 * 128) + 2 * 64 * 128 * 8192  # 301,989,888
    ffn = 6 * 8192 * 28672  # 1,409,286,144
    flops = prefill_flops(registry.model("llama-3.1-70b"), T, K)
    expected = 80 * (proj + ffn) * T + 80 * 4 * 64 * 128 * PAIRS + 2 * 8192 * 128256
    assert flops.total == expected


def test_linear_flops_are_twice_the_matrix_parameters(registry: Registry) -> None:
    """Per token, projections + FFN of a dense model = 2 x (its non-embedding matrix weights):
    an independent check through kvroof.cost.params."""
    from kvroof.cost.params import param_counts

    model = registry.model("llama-3.1-8b")
    counts = param_counts(model)
    flops = prefill_flops(model, 1, 0)
    assert flops.attention_projections + flops.ffn == 2 * (
        counts.total - counts.embedding - counts.lm_head - counts.norms
    )


def test_sliding_window_pairs_by_brute_force() -> None:
    """Window W: the query at absolute position p sees min(p+1, W) keys."""
    for window in (1, 5, 128):
        for t in (0, 1, 3, 200):
            for k in (0, 2, 127, 128, 1000):
                brute = sum(min(p + 1, window) for p in range(k, k + t))
                assert attention_pairs(t, k, window) == brute, (window, t, k)


def test_gpt_oss_core_uses_windows(registry: Registry) -> None:
    model = registry.model("gpt-oss-120b")
    per_pair = 4 * 64 * 64
    full = 18 * per_pair * (T * K + T * (T + 1) / 2)
    sliding = 18 * per_pair * T * 128  # K >= 128: every new query sees 128 keys
    assert prefill_flops(model, T, K).attention_core == full + sliding


def tiny(ffn: DenseFFN | MoEFFN) -> ModelSpec:
    return ModelSpec(
        name="tiny", num_layers=3, hidden_size=16, vocab_size=50,
        attention=GQAAttention(num_heads=4, num_kv_heads=2, head_dim=4), ffn=ffn,
    )


def test_moe_with_all_experts_equals_dense() -> None:
    """top-k = experts (and the router taken out) is a dense FFN of experts x width."""
    moe = prefill_flops(tiny(MoEFFN(kind="moe", num_experts=4, experts_per_token=4,
                                    expert_intermediate_size=8)), 10, 20)
    dense = prefill_flops(tiny(DenseFFN(kind="dense", intermediate_size=32)), 10, 20)
    assert moe.total - moe.router == dense.total


def test_decode_step(registry: Registry) -> None:
    model = registry.model("llama-3.1-70b")
    # one new token attends to 1000 cached keys + itself
    assert decode_flops(model, 1000) == prefill_flops(model, 1, 1000).total
    assert prefill_flops(model, 1, 1000).attention_core == 80 * 32768 * 1001


@given(st.integers(0, 5000), st.integers(0, 100_000))
def test_arrays_equal_scalars(t: int, k: int) -> None:
    model = _DSV3
    ts = np.array([t, t + 1])
    ks = np.array([k, 2 * k])
    array = prefill_flops(model, ts, ks).total
    assert array[0] == prefill_flops(model, t, k).total
    assert array[1] == prefill_flops(model, t + 1, 2 * k).total


def test_zero_tokens() -> None:
    flops = prefill_flops(_DSV3, 0, 1000)
    assert flops.total == 0  # nothing to prefill: no LM head, no up-projection of the cache


@pytest.mark.parametrize(("t", "k"), [(-1, 0), (1, -5), (float("nan"), 1), (1, float("inf"))])
def test_bad_token_counts(t: float, k: float) -> None:
    with pytest.raises(KvroofError, match="must"):
        prefill_flops(_DSV3, t, k)


def test_bad_mla_mode() -> None:
    with pytest.raises(KvroofError, match="mla_mode"):
        prefill_flops(_DSV3, 1, 1, mla_mode="compressed")  # type: ignore[arg-type]


@pytest.mark.parametrize("mla_mode", ["expanded", "absorbed"])
def test_layers_add_up_to_the_model(registry: Registry, mla_mode: str) -> None:
    """layer_prefill_flops splits prefill_flops by layer: every part summed over the layers,
    plus the LM head and the per-layer inputs' projection from the hidden state (2 d L h_ple per
    token, Gemma-4-E2B: 2 x 1536 x 35 x 256), equals the whole model's, for every registry model
    (T and K on both sides of windows, chunks and top-k caps)."""
    from kvroof.cost.flops import layer_prefill_flops

    for name in registry.names("model"):
        model = registry.model(name)
        ple = model.per_layer_input
        projection = 0 if ple is None else 2 * model.hidden_size * model.num_layers \
            * ple.hidden_size
        for t, k in ((1, 0), (512, 3000), (128, 70_000)):
            whole = prefill_flops(model, t, k, mla_mode).as_dict()  # type: ignore[arg-type]
            layers = [layer_prefill_flops(model, i, t, k, mla_mode).as_dict()  # type: ignore[arg-type]
                      for i in range(model.num_layers)]
            outside = {"lm_head": whole["lm_head"], "per_layer_input": projection * t,
                       "total": whole["lm_head"] + projection * t}
            for part, value in whole.items():
                summed = sum(layer[part] for layer in layers) + outside.get(part, 0.0)
                assert summed == pytest.approx(value, rel=1e-12, abs=0), (name, part, t, k)
            assert all(layer["lm_head"] == 0 for layer in layers)


def test_layer_index_is_checked(registry: Registry) -> None:
    from kvroof.cost.flops import layer_prefill_flops

    with pytest.raises(KvroofError, match="layer: expected 0 to 31"):
        layer_prefill_flops(registry.model("llama-3.1-8b"), 32, 1)
