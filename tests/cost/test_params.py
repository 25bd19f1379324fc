"""Parameter counts against the publishers' figures (each model spec's sources.published names
the public page, e.g. github.com/deepseek-ai/DeepSeek-V3 README.md, github.com/openai/gpt-oss
README.md, github.com/MoonshotAI/Kimi-K2 README.md, the Qwen3 model cards, arXiv 2401.04088).

One convention for every model (see kvroof.cost.params). Where a publisher rounds or counts a
different set of weights, the case says how and checks exactly that, never a bent convention.
The computed values themselves were checked by an independent hand computation from the configs
(e.g. Qwen3-235B-A22B 235.09B / 22.19B, DeepSeek-V3 671.03B / 37.55B / 36.62B w/o embedding).
"""

from __future__ import annotations

import pytest

from kvroof.cost.params import ParamCounts, param_counts
from kvroof.specs.model import DenseFFN, GQAAttention, ModelSpec, MoEFFN
from kvroof.specs.registry import Registry


def rel(a: float, b: float) -> float:
    return abs(a - b) / b


# (model, published total, tolerance) -- the publisher counts every weight like we do.
TOTALS = [
    ("qwen3-235b-a22b", 235e9, 0.01),
    ("qwen3-30b-a3b", 30.5e9, 0.01),
    ("qwen3-32b", 32.8e9, 0.01),
    ("deepseek-v3", 671e9, 0.01),  # main model; the 14B MTP module is not counted by either side
    ("deepseek-v2-lite", 15.7e9, 0.01),  # DeepSeek-V2 paper; the README's "16B" is rounded
    ("llama-3.1-8b", 8e9, 0.01),
    ("llama-3.1-70b", 70e9, 0.01),
    ("llama-3.1-405b", 405e9, 0.01),
    ("mixtral-8x7b", 46.7e9, 0.01),
    ("gpt-oss-120b", 116.8e9, 0.01),
    # Moonshot prints "1T": one significant figure, so anything in [0.95T, 1.05T) prints as 1T.
    ("kimi-k2", 1e12, 0.05),
    # Small Qwen3 models tie the embedding to the LM head: both sides count the matrix once.
    ("qwen3-0.6b", 0.6e9, 0.01),  # ours 0.596B
    ("qwen3-4b", 4.0e9, 0.01),  # ours 4.022B
    ("qwen3-8b", 8.2e9, 0.01),  # ours 8.191B (untied)
    # Qwen2.5 counts its q/k/v biases, which kvroof leaves out: 28 x (1536 + 2 x 256) = 57,344
    # for 1.5B, 36 x (2048 + 2 x 256) = 92,160 for 3B, 28 x (3584 + 2 x 512) = 129,024 for 7B,
    # under 0.01% of the total, far inside the tolerance.
    ("qwen2.5-1.5b", 1.54e9, 0.01),  # ours 1.544B (tied)
    ("qwen2.5-3b", 3.09e9, 0.01),  # ours 3.086B (tied)
    ("qwen2.5-7b", 7.61e9, 0.01),  # ours 7.616B; Qwen truncates (with biases 7.6156B)
    ("llama-3.2-1b", 1.23e9, 0.01),  # ours 1.236B (tied); Meta truncates
    # Mistral's 7.3B is for Mistral 7B v0.1 (32,000 vocabulary); v0.3 has 768 more rows in the
    # embedding and head (+6.3M). Ours: 7.242B (v0.1 shape), 7.248B (v0.3).
    ("mistral-7b-v0.3", 7.3e9, 0.01),
    ("gpt-oss-20b", 20.9e9, 0.01),  # ours 20.908B; model card 20.91B
    # Models with layer kinds (issue 11). Vision-language checkpoints' counts include their
    # vision encoders, which kvroof leaves out; where that is over 1% it is said.
    ("qwen3-next-80b-a3b", 80e9, 0.01),  # ours 79.67B
    ("qwen3.5-27b", 27e9, 0.01),  # ours 26.90B (text model)
    ("qwen3.5-35b-a3b", 35e9, 0.01),  # ours 34.66B (text model)
    ("qwen3.5-122b-a10b", 122e9, 0.01),  # ours 122.11B
    ("qwen3.5-397b-a17b", 397e9, 0.01),  # ours 396.35B
    ("llama-4-maverick-17b-128e", 400e9, 0.01),  # ours 400.71B; Meta "~400B"
    # Meta's ~109B includes Scout's vision encoder (with the projector about 1B, not counted here):
    # ours 107.77B is 1.1% below.
    ("llama-4-scout-17b-16e", 109e9, 0.015),
    ("gemma-3-27b", 27e9, 0.01),  # ours 27.009B (the 0.4B SigLIP encoder left out)
    ("minimax-m2.5", 229.9e9, 0.01),  # ours 228.69B
    ("qwen3-coder-480b-a35b", 480e9, 0.01),  # ours 480.15B
    # Moonshot's "48B" is the name's figure: ours 49.12B (26 MoE layers x 256 experts x 3 x 2304
    # x 1024 = 47.1B of experts alone) is 2.3% above; the config admits no smaller count.
    ("kimi-linear-48b-a3b", 48e9, 0.025),
]

# (model, published total, unit of the last printed digit) -- publishers that print one or two
# significant figures: the check is that ours rounds to the printed figure (|ours - published| at
# most half a unit), which a 1% tolerance cannot express.
ROUNDED = [
    ("qwen3-1.7b", 1.7e9, 0.1e9),  # ours 1.721B prints as 1.7B (1.2% above)
    ("llama-2-7b", 7e9, 1e9),  # ours 6.738B prints as 7B (Llama 2 paper Table 1)
    ("llama-2-70b", 70e9, 10e9),  # ours 68.977B prints as 70B (one significant figure, Table 1)
    ("mistral-small-24b-2501", 24e9, 1e9),  # ours 23.572B prints as 24B
]


@pytest.mark.parametrize(("name", "published", "tolerance"), TOTALS)
def test_total_matches_published(
    registry: Registry, name: str, published: float, tolerance: float
) -> None:
    model = registry.model(name)
    assert rel(param_counts(model).total, published) < tolerance
    assert model.published is not None


@pytest.mark.parametrize(("name", "published", "unit"), ROUNDED)
def test_total_rounds_to_published(
    registry: Registry, name: str, published: float, unit: float
) -> None:
    model = registry.model(name)
    assert abs(param_counts(model).total - published) <= unit / 2
    assert model.published is not None and model.published.total == published


# Published totals that count weights kvroof leaves out, checked with those weights added.
def test_deepseek_v32_total_with_mtp(registry: Registry) -> None:
    """685B (transformers model_doc/deepseek_v32) is the checkpoint with its MTP module, 14B by
    DeepSeek-V3's README; the main model is V3's plus the indexers, whose parameters per layer are
    1536 x 64 x 128 (wq_b) + 7168 x 128 (wk) + 7168 x 64 (weights_proj) + 128 (k_norm) =
    13,959,296, 851,517,056 over 61 layers."""
    v32, v3 = param_counts(registry.model("deepseek-v3.2")), param_counts(registry.model(
        "deepseek-v3"))
    assert v32.total - v3.total == 61 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 128)
    assert rel(v32.total + 14e9, 685e9) < 0.01


def test_glm47_total_with_mtp(registry: Registry) -> None:
    """NVIDIA's 358B for GLM-4.7 is the checkpoint with its MTP layer (num_nextn_predict_layers
    1): one more MoE decoder layer and its 2 x hidden^2 input projection (eh_proj)."""
    model = registry.model("glm-4.7")
    with_mtp = param_counts(model.model_copy(update={"num_layers": 93})).total
    assert rel(with_mtp + 2 * model.hidden_size ** 2, 358e9) < 0.005


def test_gemma_4_e2b_effective_parameters(registry: Registry) -> None:
    """Google counts E2B as 2.3B "effective" parameters: all but the per-layer input table,
    which is looked up, not multiplied (5.1B "with embeddings" also counts the vision and audio
    encoders, which kvroof leaves out). Ours, 2.28B, prints as 2.3B."""
    counts = param_counts(registry.model("gemma-4-e2b"))
    assert counts.per_layer_embedding == 262_144 * 35 * 256  # vocab x layers x width
    assert abs(counts.without_per_layer_embedding - 2.3e9) <= 0.05e9
    assert counts.total < 5.1e9


def test_every_registry_model_total_is_checked(registry: Registry) -> None:
    checked = [name for name, *_ in TOTALS] + [name for name, *_ in ROUNDED] + [
        "deepseek-v3.2", "glm-4.7", "gemma-4-e2b"]
    assert len(checked) == len(set(checked))
    assert set(checked) == set(registry.names("model"))


def test_dense_models_are_fully_active(registry: Registry) -> None:
    """For a dense model the publisher's active count is its total, and so is ours."""
    for name in registry.names("model"):
        model = registry.model(name)
        if model.is_moe:
            continue
        counts = param_counts(model)
        assert counts.active == counts.total, name
        assert model.published is not None, name
        assert model.published.active == model.published.total, name


@pytest.mark.parametrize(
    ("name", "published"),
    [("qwen3-235b-a22b", 22e9), ("mixtral-8x7b", 12.9e9), ("llama-3.1-70b", 70e9)],
)
def test_active_matches_published_within_1_percent(
    registry: Registry, name: str, published: float
) -> None:
    assert rel(param_counts(registry.model(name)).active, published) < 0.01


@pytest.mark.parametrize(
    ("name", "published", "why"),
    [
        # DeepSeek's README_WEIGHTS: "36.6B activated incl. 0.9B output head" -- the embedding
        # is left out (the headline 37B rounds this up). We compute 36.63B without it.
        ("deepseek-v3", 36.6e9, "README_WEIGHTS leaves the embedding out"),
        # gpt-oss README: 5.1B active, embeddings not counted; we compute 5.13B without them.
        ("gpt-oss-120b", 5.1e9, "OpenAI leaves the embedding out"),
        # Kimi-K2 has DeepSeek-V3's shape and Moonshot counts like DeepSeek: 31.69B without the
        # embedding rounds to 32B; with it (32.86B) it would print as 33B.
        ("kimi-k2", 32e9, "Moonshot counts like DeepSeek (no embedding)"),
        # gpt-oss-20b: README "3.6B active", model card 3.61B, embedding left out as for 120b;
        # we compute 3.607B without it (4.186B with it).
        ("gpt-oss-20b", 3.6e9, "OpenAI leaves the embedding out"),
    ],
)
def test_active_without_embedding_matches_published(
    registry: Registry, name: str, published: float, why: str
) -> None:
    counts = param_counts(registry.model(name))
    assert rel(counts.active_without_embedding, published) < 0.01, why
    assert counts.active > counts.active_without_embedding


@pytest.mark.parametrize(
    ("name", "published", "without_embedding"),
    [
        # Qwen3-30B-A3B card: "3.3B activated"; we compute 3.353B, which the card truncates to
        # one decimal (rounding would give 3.4B). The check: 3.3B <= ours < 3.4B.
        ("qwen3-30b-a3b", 3.3e9, False),
        # DeepSeek-V2 paper: V2-Lite "2.4B activated", embedding left out as for V3; we compute
        # 2.451B without it, truncated to 2.4B. The check: 2.4B <= ours < 2.5B.
        ("deepseek-v2-lite", 2.4e9, True),
    ],
)
def test_active_truncated_by_publisher(
    registry: Registry, name: str, published: float, without_embedding: bool
) -> None:
    counts = param_counts(registry.model(name))
    ours = counts.active_without_embedding if without_embedding else counts.active
    assert published <= ours < published + 0.1e9


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("qwen3-235b-a22b", 234e9),
        ("qwen3-30b-a3b", 29.9e9),
        ("qwen3-32b", 31.2e9),
        # Tied models: the one shared matrix is the embedding (lm_head counts 0 here).
        ("qwen3-0.6b", 0.44e9),  # ours 0.4405B
        ("qwen3-1.7b", 1.4e9),  # ours 1.409B
        ("qwen3-4b", 3.6e9),  # ours 3.634B
        ("qwen3-8b", 6.95e9),  # ours 6.946B
        ("qwen2.5-1.5b", 1.31e9),  # ours 1.310B (q/k/v biases left out, as above)
        ("qwen2.5-3b", 2.77e9),  # ours 2.775B
        ("qwen2.5-7b", 6.53e9),  # ours 6.526B
    ],
)
def test_qwen_non_embedding_totals(registry: Registry, name: str, published: float) -> None:
    """Qwen cards also print non-embedding totals (no embedding, no LM head)."""
    counts = param_counts(registry.model(name))
    assert rel(counts.total - counts.embedding - counts.lm_head, published) < 0.01


def test_tied_embedding_counted_once(registry: Registry) -> None:
    """Tied models (small Qwen3/Qwen2.5, Llama-3.2-1B) count vocab x hidden once, untied twice."""
    for name in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen2.5-1.5b", "qwen2.5-3b",
                 "llama-3.2-1b"):
        model = registry.model(name)
        counts = param_counts(model)
        assert model.tie_word_embeddings, name
        assert counts.lm_head == 0
        assert counts.embedding == model.vocab_size * model.hidden_size
    assert param_counts(registry.model("qwen3-8b")).lm_head == 151_936 * 4096


def tiny(ffn: DenseFFN | MoEFFN, tie: bool = False) -> ModelSpec:
    return ModelSpec(
        name="tiny", num_layers=2, hidden_size=8, vocab_size=10, tie_word_embeddings=tie,
        attention=GQAAttention(num_heads=4, num_kv_heads=2, head_dim=2), ffn=ffn,
    )


def test_tiny_dense_by_hand() -> None:
    """d=8, 2 layers, vocab 10, 4 heads / 2 KV heads of dim 2, gated FFN of width 3.

    embedding 10*8 = 80; head 80 (untied); attention per layer q 8*8 + k,v 2*(8*4) + o 8*8
    = 192, x2 = 384; FFN 3*8*3 = 72 per layer, x2 = 144; norms (2*2+1)*8 = 40. Total 728.
    """
    counts = param_counts(tiny(DenseFFN(kind="dense", intermediate_size=3)))
    assert counts == ParamCounts(80, 80, 384, 40, 144, 0, 0, 0, 0)
    assert counts.total == counts.active == 728
    assert param_counts(tiny(DenseFFN(kind="dense", intermediate_size=3), tie=True)).total == 648


def test_tiny_moe_by_hand() -> None:
    """4 experts of width 3, top-2, one shared expert of width 5, first layer dense (width 6).

    MoE layer: router 8*4 = 32; routed 4 x 3*8*3 = 288 (active 2 x 72 = 144); shared 3*8*5 = 120.
    Dense layer 3*8*6 = 144. Total = 80+80+384+40 + 144 + 32 + 120 + 288 = 1168; active 1024.
    """
    ffn = MoEFFN(kind="moe", num_experts=4, experts_per_token=2, expert_intermediate_size=3,
                 num_shared_experts=1, shared_expert_intermediate_size=5, first_k_dense=1,
                 dense_intermediate_size=6)
    counts = param_counts(tiny(ffn))
    assert (counts.total, counts.active) == (1168, 1024)


@pytest.mark.parametrize(
    ("name", "published", "unit", "how"),
    [
        # One significant figure ("A3B", "A10B", "A17B", "A35B" in the names) where the
        # publishers leave the embedding out, as for Qwen3 (the check: ours rounds to it).
        ("qwen3.5-35b-a3b", 3e9, 1e9, "without embedding"),  # ours 2.95B
        ("qwen3.5-122b-a10b", 10e9, 1e9, "with embedding"),  # ours 9.77B
        ("qwen3.5-397b-a17b", 17e9, 1e9, "with embedding"),  # ours 17.35B
        ("qwen3-coder-480b-a35b", 35e9, 1e9, "with embedding"),  # ours 35.47B
        ("llama-4-scout-17b-16e", 17e9, 1e9, "with embedding"),  # ours 17.17B
        ("llama-4-maverick-17b-128e", 17e9, 1e9, "with embedding"),  # ours 17.18B
        ("kimi-linear-48b-a3b", 3e9, 1e9, "without embedding"),  # ours 3.11B (3.48B with it)
        # Qwen3-Next's "3B active" and MiniMax's 9.8B and GLM's 32B leave both the embedding and
        # the LM head out: ours 3.25B, 9.80B and 32.07B.
        ("qwen3-next-80b-a3b", 3e9, 1e9, "without embedding and head"),
        ("minimax-m2.5", 9.8e9, 0.1e9, "without embedding and head"),
        ("glm-4.7", 32e9, 1e9, "without embedding and head"),
    ],
)
def test_family_active_rounds_to_published(
    registry: Registry, name: str, published: float, unit: float, how: str
) -> None:
    counts = param_counts(registry.model(name))
    ours = {"with embedding": counts.active,
            "without embedding": counts.active_without_embedding,
            "without embedding and head": counts.active - counts.embedding - counts.lm_head}[how]
    assert abs(ours - published) <= unit / 2, how


def test_gemma_layers_have_four_norms(registry: Registry) -> None:
    """Gemma 3 and 4 decoder layers normalize before and after attention and before and after
    the FFN (transformers Gemma3DecoderLayer, Gemma4TextDecoderLayer: input_layernorm,
    post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm): Gemma-3-27B
    (4 x 62 + 1) x 5,376 = 1,338,624 norm weights, 62 x 2 x 5,376 = 666,624 more than two a
    layer; total 27,009,346,304 against the report's 27B. Gemma-4-E2B (4 x 35 + 1) x 1,536 =
    216,576 (its per-layer input norms are counted with the per-layer input)."""
    gemma3 = param_counts(registry.model("gemma-3-27b"))
    assert gemma3.norms == (4 * 62 + 1) * 5376 == 1_338_624
    assert gemma3.total == 27_009_346_304
    assert param_counts(registry.model("gemma-4-e2b")).norms == (4 * 35 + 1) * 1536
    assert registry.model("llama-3.1-8b").layer_norms == 2


def test_qwen_shared_expert_gate(registry: Registry) -> None:
    """Qwen3-Next and Qwen3.5 MoE gate their shared expert's output with a sigmoid of a
    hidden x 1 projection (transformers Qwen3NextSparseMoeBlock.shared_expert_gate): 2,048
    weights in each of Qwen3-Next's 48 MoE layers, 98,304 in all (total 79,674,391,296, what
    transformers' module tree holds with A_log and dt_bias), and 2 x 2,048 FLOPs per token per
    layer beside the shared expert's 6 x 2,048 x 512."""
    from kvroof.cost.flops import prefill_flops

    model = registry.model("qwen3-next-80b-a3b")
    assert isinstance(model.ffn, MoEFFN) and model.ffn.shared_expert_gate
    ungated = model.model_copy(update={"ffn": model.ffn.model_copy(
        update={"shared_expert_gate": False})})
    assert param_counts(model).shared_experts - param_counts(ungated).shared_experts == 98_304
    assert param_counts(model).total == 79_674_391_296
    assert prefill_flops(model, 1).ffn_shared == 48 * (6 * 2048 * 512 + 2 * 2048)


def test_minimax_qk_norms_span_all_heads(registry: Registry) -> None:
    """MiniMax-M2.5's q/k RMSNorms normalize the whole query and key projections
    (qk_norm_type per_layer; transformers modeling_minimax_m2.py: q_norm over 48 x 128, k_norm
    over 8 x 128 channels): (48 + 8) x 128 = 7,168 weights a layer, 62 x 7,168 = 444,416 in all,
    where a per-head norm would have 2 x 128 = 256 a layer (62 x 256 = 15,872): 428,544 more. At
    TP 8 the query norm splits with the heads (768 a rank) and the key norm with the KV heads
    (128 a rank), as vLLM's MiniMaxText01RMSNormTP shards them."""
    from kvroof.cost.params import layer_params

    model = registry.model("minimax-m2.5")
    per_head = model.model_copy(update={"attention": model.attention.model_copy(
        update={"qk_norm_scope": "per_head"})})
    assert param_counts(model).total - param_counts(per_head).total == 62 * (7168 - 256)
    att = layer_params(model, dict(model.layer_kinds)["full"])
    d = 3072
    assert att.per_head == 2 * d * 48 * 128 + 48 * 128  # q and o projections + q norm
    assert att.per_kv_head == 2 * d * 8 * 128 + 8 * 128  # k and v projections + k norm
    assert att.replicated == 0


def test_deepseek_v32_active_is_v3_plus_indexers(registry: Registry) -> None:
    """DeepSeek gives V3.2 no active count of its own; its 37B is V3's, and every token also
    passes through the 61 indexers (851,517,056 parameters, derived in
    test_deepseek_v32_total_with_mtp)."""
    v32, v3 = param_counts(registry.model("deepseek-v3.2")), param_counts(registry.model(
        "deepseek-v3"))
    assert v32.active - v3.active == 851_517_056
