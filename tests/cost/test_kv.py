"""KV bytes per token (exact, bf16) against hand derivations from each model's config.json
(tests/data/hf_configs; public origins in tests/data/hf_configs/SOURCES.md). MLA caches the latent
and the decoupled RoPE key, kv_cache[..., kv_lora_rank] + pe_cache[..., qk_rope_head_dim], as in
github.com/deepseek-ai/DeepSeek-V3 inference/model.py. Public cross-checks: Mooncake FAST'25
(kvcache-ai/Mooncake FAST25-release/Mooncake-FAST25.pdf section 5.3.1: LLaMA3-70B 320 KB per
token) and "Insights into DeepSeek-V3" (arXiv 2505.09343, Table 1: 516.096 KB for
LLaMA-3.1-405B; not re-verified here). Also the scaling by KV dtype and sliding
windows (hand derivations written next to each case)."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_per_layer, state_bytes
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

# name: (bytes per token in bf16, derivation from config.json)
B3 = {
    "qwen3-235b-a22b": (192_512, "94 layers x 2 (K,V) x 4 kv heads x 128 x 2 B"),
    "qwen3-30b-a3b": (98_304, "48 x 2 x 4 x 128 x 2"),
    "qwen3-32b": (262_144, "64 x 2 x 8 x 128 x 2"),
    "deepseek-v3": (70_272, "61 layers x (512 latent + 64 rope) x 2 B, no factor 2"),
    "deepseek-v2-lite": (31_104, "27 x (512 + 64) x 2"),
    "kimi-k2": (70_272, "61 x (512 + 64) x 2; 64 heads do not change the latent"),
    "llama-3.1-8b": (131_072, "32 x 2 x 8 x 128 x 2"),
    "llama-3.1-70b": (327_680, "80 x 2 x 8 x 128 x 2 (Mooncake FAST'25: 320 KB)"),
    "llama-3.1-405b": (516_096, "126 x 2 x 8 x 128 x 2 (DeepSeek Insights Table 1: 516.096 KB)"),
    "mixtral-8x7b": (131_072, "32 x 2 x 8 x 128 x 2"),
    "gpt-oss-120b": (36_864, "18 full layers x 2 x 8 x 64 x 2; sliding layers bounded"),
}


# Further models, derived here by hand from each config.json:
# name: (layers holding every token, kv heads, head_dim, bytes per token in bf16)
# bytes = 2 (K,V) x kv_heads x head_dim x 2 B x layers.
HAND = {
    "qwen3-0.6b": (28, 8, 128, 114_688),  # 2 x 8 x 128 x 2 x 28
    "qwen3-1.7b": (28, 8, 128, 114_688),  # 2 x 8 x 128 x 2 x 28 (same attention as 0.6B)
    "qwen3-4b": (36, 8, 128, 147_456),  # 2 x 8 x 128 x 2 x 36
    "qwen3-8b": (36, 8, 128, 147_456),  # 2 x 8 x 128 x 2 x 36
    "qwen2.5-1.5b": (28, 2, 128, 28_672),  # 2 x 2 x 128 x 2 x 28
    "qwen2.5-3b": (36, 2, 128, 36_864),  # 2 x 2 x 128 x 2 x 36
    "qwen2.5-7b": (28, 4, 128, 57_344),  # 2 x 4 x 128 x 2 x 28
    "llama-3.2-1b": (16, 8, 64, 32_768),  # 2 x 8 x 64 x 2 x 16
    "llama-2-7b": (32, 32, 128, 524_288),  # 2 x 32 x 128 x 2 x 32 (MHA: 512 KiB per token)
    "llama-2-70b": (80, 8, 128, 327_680),  # 2 x 8 x 128 x 2 x 80 (GQA)
    "mistral-7b-v0.3": (32, 8, 128, 131_072),  # 2 x 8 x 128 x 2 x 32 (no window in v0.3)
    "mistral-small-24b-2501": (40, 8, 128, 163_840),  # 2 x 8 x 128 x 2 x 40 (head_dim 128, not 160)
    # gpt-oss-20b: only the 12 full-attention layers of 24 grow with K; the 12 sliding layers hold
    # at most 128 tokens (checked in test_gpt_oss_20b_sliding_bytes).
    "gpt-oss-20b": (12, 8, 64, 24_576),  # 2 x 8 x 64 x 2 x 12
}


# Models with layer kinds or without B3 figures (issue 11), derived by hand from config.json:
# name: (bytes per token of the layers that keep every token, fixed state bytes per request)
# GQA: layers x 2 (K,V) x kv heads x head_dim x 2 B; MLA: layers x (512 + 64) x 2 B; a Gated
# DeltaNet layer's state: value heads x 128 x 128 x 4 B (fp32) + conv channels (2 x 16 x 128 +
# value heads x 128) x (kernel 4 - 1) x 2 B (bf16).
FAMILIES = {
    # 12 full layers x 2 x 2 x 256 x 2; 36 x (32 x 128^2 x 4 + 8,192 x 3 x 2) = 36 x 2,146,304
    "qwen3-next-80b-a3b": (24_576, 77_266_944),
    # 16 full x 2 x 4 x 256 x 2; 48 x (48 x 128^2 x 4 + 10,240 x 6) = 48 x 3,207,168
    "qwen3.5-27b": (65_536, 153_944_064),
    # 10 full x 2 x 2 x 256 x 2; 30 x 2,146,304 (as Qwen3-Next's layers)
    "qwen3.5-35b-a3b": (20_480, 64_389_120),
    # 12 full x 2,048; 36 x (64 x 128^2 x 4 + 12,288 x 6) = 36 x 4,268,032
    "qwen3.5-122b-a10b": (24_576, 153_649_152),
    # 15 full x 2,048; 45 x 4,268,032
    "qwen3.5-397b-a17b": (30_720, 192_061_440),
    # 7 MLA layers x 576 x 2; 20 KDA x (32 x 128^2 x 4 + 3 x 4,096 channels x 3 x 2)
    # = 20 x 2,170,880
    "kimi-linear-48b-a3b": (8_064, 43_417_600),
    # 61 x (576 x 2 B latent + 128 FP8 indexer key + 4 B scale) = 61 x 1,284
    "deepseek-v3.2": (78_324, 0),
    # 12 NoPE full layers x 2 x 8 x 128 x 2 (36 chunked layers hold K mod 8192 more)
    "llama-4-scout-17b-16e": (49_152, 0),
    "llama-4-maverick-17b-128e": (49_152, 0),
    # 10 global layers x 2 x 16 x 128 x 2 (52 sliding layers hold at most 1024 tokens)
    "gemma-3-27b": (81_920, 0),
    # 3 full layers (0-14 keep KV) x 2 x 1 x 512 x 2 (12 sliding layers hold at most 512 tokens)
    "gemma-4-e2b": (6_144, 0),
    "minimax-m2.5": (253_952, 0),  # 62 x 2 x 8 x 128 x 2
    "glm-4.7": (376_832, 0),  # 92 x 2 x 8 x 128 x 2
    "qwen3-coder-480b-a35b": (253_952, 0),  # 62 x 2 x 8 x 128 x 2
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_bytes_and_state_match_hand_derivation(registry: Registry, name: str) -> None:
    per_token, state = FAMILIES[name]
    model = registry.model(name)
    assert kv_bytes_per_token(model, "bf16") == per_token
    assert state_bytes(model) == state


@pytest.mark.parametrize("name", sorted(B3))
def test_bf16_bytes_per_token_match_b3(registry: Registry, name: str) -> None:
    expected, _derivation = B3[name]
    assert kv_bytes_per_token(registry.model(name), "bf16") == expected


@pytest.mark.parametrize("name", sorted(HAND))
def test_bf16_bytes_per_token_match_hand_derivation(registry: Registry, name: str) -> None:
    layers, kv_heads, head_dim, expected = HAND[name]
    assert 2 * kv_heads * head_dim * 2 * layers == expected  # the derivation written above
    assert kv_bytes_per_token(registry.model(name), "bf16") == expected


def test_every_registry_model_is_checked(registry: Registry) -> None:
    assert not set(B3) & set(HAND) and not set(FAMILIES) & (set(B3) | set(HAND))
    assert set(registry.names("model")) == set(B3) | set(HAND) | set(FAMILIES)


@pytest.mark.parametrize(("dtype", "factor"), [("fp16", 1.0), ("fp8", 0.5), ("int8", 0.5),
                                                ("int4", 0.25), ("fp4", 0.25)])
def test_kv_dtype_scales_bytes(registry: Registry, dtype: str, factor: float) -> None:
    model = registry.model("llama-3.1-70b")
    assert kv_bytes_per_token(model, dtype) == 327_680 * factor


def test_unknown_kv_dtype(registry: Registry) -> None:
    with pytest.raises(KvroofError, match="unknown dtype 'fp7'"):
        kv_bytes_per_token(registry.model("llama-3.1-8b"), "fp7")


def test_sliding_window_bytes_are_bounded(registry: Registry) -> None:
    model = registry.model("gpt-oss-120b")
    per_layer = kv_bytes_per_token_per_layer(model)  # 2 x 8 x 64 x 2 = 2048 B
    assert per_layer == 2048
    # K <= 127: all 36 layers hold every token.
    assert kv_bytes(model, 100) == 36 * 2048 * 100
    assert kv_bytes(model, 127) == 36 * 2048 * 127
    # K >= 127: 18 full layers hold K tokens, 18 sliding layers hold 127 each.
    # sliding_window 128 on the 18 even layers (github.com/openai/gpt-oss gpt_oss/torch/model.py):
    # the next query, at position K, sees K - 127 .. K, so a sliding layer needs the 127 positions
    # before it (vLLM's SlidingWindowManager.get_num_skipped_tokens frees K - 128 + 1;
    # transformers' DynamicSlidingWindowLayer keeps 127): 18 x 127 x 2048 = 4,681,728 B per
    # sequence for the sliding layers.
    assert kv_bytes(model, 128) == 18 * 2048 * 128 + 4_681_728
    assert kv_bytes(model, 65_536) == 18 * 2048 * 65_536 + 4_681_728


def test_gpt_oss_20b_sliding_bytes(registry: Registry) -> None:
    model = registry.model("gpt-oss-20b")
    per_layer = kv_bytes_per_token_per_layer(model)  # 2 x 8 x 64 x 2 = 2048 B, as for 120b
    assert per_layer == 2048
    assert model.num_sliding_layers == 12
    # K <= 127: all 24 layers hold every token.
    assert kv_bytes(model, 100) == 24 * 2048 * 100
    # K >= 127: 12 full layers hold K tokens, 12 sliding layers the 127 positions a window-128
    # query sees besides its own (12 x 127 x 2048 = 3,121,152 B per sequence).
    assert kv_bytes(model, 65_536) == 12 * 2048 * 65_536 + 3_121_152


def test_sliding_layers_load_save_read_and_reserve(registry: Registry) -> None:
    """gpt-oss-120b on one H100 (TP 1), 18 full and 18 sliding layers of 2,048 B per position
    (test_sliding_window_bytes_are_bounded). A window-128 layer keeps the 127 positions the next
    query sees besides its own, so a load of K = 8,192 cached tokens moves 18 x 2,048 x (8,192 +
    127) = 306,671,616 B (36,864 B less than a window of 128 would) and the write-back of T = 512
    new tokens 18 x 2,048 x (512 + 127). A prefill of T = 512 on K = 8,192 reads from HBM what its
    queries see: the full layers every position, 18 x 2,048 x 8,704, the sliding layers the 127
    cached positions the first new query sees and the 512 new ones, 18 x 2,048 x 639. What must
    fit while a sequence of P positions runs counts a sliding layer at min(P, 128): the 127 kept
    and the running query's own key."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.terms import kv_read
    from kvroof.cost.transfer import kv_peak_bytes_per_rank, load_bytes_per_rank

    dep = deployment("gpt-oss-120b", accelerator="h100", registry=registry)
    assert load_bytes_per_rank(dep, 8192) == 306_671_616 == 18 * 2048 * (8192 + 127)
    assert dep.terms.save.per_token * 512 + sum(
        c * min(512, keep) for keep, c in dep.terms.save.windows) == 18 * 2048 * (512 + 127)
    assert kv_read(dep.terms, 8192.0, 512.0) == 18 * 2048 * 8704 + 18 * 2048 * 639
    assert kv_peak_bytes_per_rank(dep, 8192) == 18 * 2048 * 8192 + 18 * 2048 * 128
    assert kv_peak_bytes_per_rank(dep, 100) == 36 * 2048 * 100


def test_kv_bytes_broadcasts(registry: Registry) -> None:
    model = registry.model("gpt-oss-120b")
    ks = np.array([[0, 64], [128, 10_000]])
    expected = np.array([[kv_bytes(model, int(k)) for k in row] for row in ks])
    np.testing.assert_array_equal(kv_bytes(model, ks), expected)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "many"])
def test_bad_token_counts(registry: Registry, bad: object) -> None:
    with pytest.raises(KvroofError, match="cached_tokens"):
        kv_bytes(registry.model("llama-3.1-8b"), bad)  # type: ignore[arg-type]
