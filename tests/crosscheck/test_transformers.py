"""kvroof's parameter counts, KV and state bytes and prefill FLOPs against transformers' own
modelling code.

Expected values come from an independent computation: transformers builds each registry model
from its HF ``config.json`` (``tests/data/hf_configs``) on the meta device, and torch counts
what that model does (``FlopCounterMode``), what its cache holds and what its masks let each
query see. kvroof's formulas are never used to produce an expected value; where transformers
computes or keeps something that kvroof's conventions (``kvroof.cost.params``,
``kvroof.cost.groups`` and ``kvroof.cost.flops`` docstrings, docs/cost-model.md,
docs/attention-families.md) leave out, or that an engine would not, the adjustment is derived
here and named in the assertion that uses it.

A vision-language checkpoint (Gemma 3 and 4, Llama 4, Qwen3.5) is checked through transformers'
causal-LM class of its text model, built from the wrapper's own text config: kvroof models the
language model only (the vision and audio encoders are not counted, docs/attention-families.md).

Adjustments applied to every model:

- Parameters: biases of linear layers and norms and attention sinks are left out (kvroof's
  convention); every other parameter of the module tree counts once (a tied LM head is the
  embedding), the per-head decay parameters of linear-attention layers (``A_log``, ``dt_bias``)
  included, as kvroof counts them. Active = all parameters less the routed experts + ``top_k /
  num_experts`` of them (each routed expert has the same size).
- KV bytes: the bytes per position of the keys and values (and a DSA layer's indexer keys) of
  every cache layer after a real forward pass (bf16); what a continuation of ``K`` cached
  tokens needs is read from the pass's own masks (the cached key positions some new query
  sees), and what the cache holds after the pass from its tensors.
- FLOPs: the attention core is counted by torch over the whole ``queries x keys`` rectangle the
  kernel multiplies; the test scales it to the pairs that take part, counted from the boolean
  mask the model built for that layer. The embedding lookup, norms, RoPE, softmax, activations,
  gates and bias additions count nothing on either side (``FlopCounterMode`` counts matrix
  products and convolutions; ``addmm`` counts ``2mnk``). MLA: transformers expands the cached
  latents through ``kv_b_proj`` at every forward pass (all ``K + T`` positions), which is
  kvroof's ``mla_mode="expanded"``. MoE: experts run as ``batched_mm`` (each token through its
  top-k experts), kvroof's routed-expert FLOPs.
- The forward passes run on the model's first layers, up to one of each kind of layer (same
  parameter shapes, attention type and KV sharing); each layer of the full model is checked
  against the measured layer of its kind, and whole-model sums add the measured layers over the
  full model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

# Skipped without the 'crosscheck' extra, except where KVROOF_CROSSCHECK=required (.ci/run sets
# it, so that CI cannot pass by skipping). 5.24: the module paths, cache layers and mask
# interface read here (Gemma 4's shared KV, DeepSeek-V3.2's indexer indices, linear-attention
# cache layers); MLA layers cache the latent from 5.15 on.
if os.environ.get("KVROOF_CROSSCHECK") != "required":
    pytest.importorskip("torch")
    pytest.importorskip("transformers", minversion="5.24")

import transformers

from kvroof import get_model
from kvroof.cost.checks import dtype_bytes
from kvroof.cost.flops import layer_prefill_flops, prefill_flops
from kvroof.cost.groups import linear_state_elements
from kvroof.cost.kv import kv_breakdown, kv_bytes, kv_bytes_per_token, state_bytes
from kvroof.cost.params import param_counts
from kvroof.specs.layers import ChunkedLayer, LinearLayer, SharedLayer
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry
from tests.crosscheck import meta_run

assert tuple(int(part) for part in transformers.__version__.split(".")[:2]) >= (5, 24), (
    f"transformers {transformers.__version__}: the cross-check needs 5.24 or later")

# (T, K) pairs of the issue: a short prompt alone, and prompts on long cached prefixes.
CASES = [(64, 0), (128, 8192), (512, 65536)]
REL = 1e-3  # the 0.1%; the counts below agree exactly
PARTS = ("attention_projections", "attention_core", "mla_up", "linear_attention", "indexer",
         "ffn_dense", "ffn_routed", "ffn_shared", "router", "per_layer_input")
"""kvroof's parts of a layer (:class:`kvroof.cost.flops.PrefillFlops`, less the LM head)."""


@dataclass(frozen=True)
class Architecture:
    """How to read one transformers causal-LM class: which submodules hold the parts kvroof
    counts apart. Add an entry when a registry model brings a new class; a class that does
    something kvroof counts differently gets a field and a note.

    ``mlp``: the decoder layer's FFN submodule; ``router``: its submodule that scores experts;
    ``shared``: its submodules of the shared experts (with their output gate); ``mla_up``: the
    attention submodule that expands latents into keys and values (kvroof's ``mla_up``);
    ``linear``: the decoder layer's linear-attention submodule; ``per_layer_input``: the
    decoder layer's per-layer-input submodules (gate and projection back); ``all_experts``: the
    experts multiply every token by every expert (see :func:`_measured`); ``note``: anything else
    transformers does that kvroof counts differently, beyond the module docstring's adjustments.
    """

    mlp: str = "mlp"
    router: str | None = None
    shared: tuple[str, ...] = ()
    mla_up: str | None = None
    linear: str | None = None
    per_layer_input: tuple[str, ...] = ()
    all_experts: bool = False
    note: str = ""


_QWEN_LINEAR = "Gated DeltaNet layers (linear_attn): the conv and chunked-core adjustments of " \
    "_linear_adjustment; full layers gate their output (q_proj twice as wide)"
ARCHITECTURES: dict[str, Architecture] = {
    "LlamaForCausalLM": Architecture(),
    "MistralForCausalLM": Architecture(),
    "Qwen2ForCausalLM": Architecture(
        note="q/k/v biases (class-fixed) are parameters of transformers, not of kvroof"),
    "Qwen3ForCausalLM": Architecture(note="per-head q/k RMSNorm weights counted on both sides"),
    "Qwen3MoeForCausalLM": Architecture(router="gate"),
    "MixtralForCausalLM": Architecture(router="gate"),
    "DeepseekV2ForCausalLM": Architecture(router="gate", shared=("shared_experts",),
                                          mla_up="kv_b_proj"),
    "DeepseekV3ForCausalLM": Architecture(
        router="gate", shared=("shared_experts",), mla_up="kv_b_proj",
        note="Kimi-K2 names this class (model_type kimi_k2 is remote code on the Hub); the "
             "router's e_score_correction_bias is a buffer, not a parameter"),
    "DeepseekV32ForCausalLM": Architecture(
        router="gate", shared=("shared_experts",), mla_up="kv_b_proj",
        note="DSA: the indexer scores every causal pair; the main attention runs expanded in "
             "transformers and absorbed in kvroof (_dsa_absorbed); the indexer's k_norm is a "
             "LayerNorm whose bias is left out"),
    "Glm4MoeForCausalLM": Architecture(
        router="gate", shared=("shared_experts",),
        note="GLM-4.7: q/k/v biases left out; leading dense layers"),
    "MiniMaxM2ForCausalLM": Architecture(
        router="gate",
        note="qk_norm_type per_layer: one RMSNorm over all heads' queries (and keys), "
             "qk_norm_scope all_heads in kvroof's spec"),
    "GptOssForCausalLM": Architecture(
        router="router",
        note="biases on attention, router and experts and the per-head sinks are left out of "
             "the parameters; the sinks add a logit column to softmax (no matrix product); even "
             "layers use a 128-token window"),
    "Gemma3ForCausalLM": Architecture(
        note="Gemma3ForConditionalGeneration's text model; four RMSNorms a layer; five "
             "1024-token sliding layers per global one"),
    "Gemma4ForCausalLM": Architecture(
        per_layer_input=("per_layer_input_gate", "per_layer_projection"),
        note="Gemma4ForConditionalGeneration's text model; the last 20 layers reuse layers 13 "
             "and 14's KV (their cache layers hold nothing) and have twice as wide an MLP; "
             "per-layer inputs: a model-level projection and a gate and projection back per "
             "layer"),
    "Llama4ForCausalLM": Architecture(
        mlp="feed_forward", router="router", shared=("shared_expert",), all_experts=True,
        note="Llama4ForConditionalGeneration's text model; chunked layers (8,192-token chunks) "
             "and NoPE full layers every 4th; weightless L2 q/k norms"),
    "Qwen3NextForCausalLM": Architecture(
        router="gate", shared=("shared_expert", "shared_expert_gate"), linear="linear_attn",
        note=_QWEN_LINEAR),
    "Qwen3_5ForCausalLM": Architecture(
        linear="linear_attn",
        note="Qwen3_5ForConditionalGeneration's text model; " + _QWEN_LINEAR),
    "Qwen3_5MoeForCausalLM": Architecture(
        router="gate", shared=("shared_expert", "shared_expert_gate"), linear="linear_attn",
        note="Qwen3_5MoeForConditionalGeneration's text model; " + _QWEN_LINEAR),
    "KimiLinearForCausalLM": Architecture(
        router="gate", shared=("shared_experts",), mla_up="kv_b_proj", linear="self_attn",
        note="KDA layers (self_attn of the linear layers): the conv and chunked-core "
             "adjustments of _linear_adjustment; full layers are MLA without RoPE (the RoPE key "
             "is still cached); one leading dense layer"),
}

# Registry models the cross-check cannot run, with the reason (transformers lacks the class, or
# the harness cannot read what it does: docs/crosscheck.md, "Adding a model"). None at present.
NOT_COVERED: dict[str, str] = {}


def registry_models() -> list[str]:
    return Registry(use_env=False).names("model")


def _params(*cases: tuple[int, int]) -> list[Any]:
    """One parameter per registry model (and case), skipped with the reason NOT_COVERED gives."""
    params = []
    for model in registry_models():
        marks = [pytest.mark.skip(reason=NOT_COVERED[model])] if model in NOT_COVERED else []
        if not cases:
            params.append(pytest.param(model, marks=marks, id=model))
        for t, k in cases:
            params.append(pytest.param(model, t, k, marks=marks, id=f"{model}-T{t}-K{k}"))
    return params


MODELS = _params()
# Beyond the cases, passes where a chunked or sliding layer's need is not all-or-nothing:
# Llama 4's chunked layers (8,192-token chunks) continuing K = 10,000 need the current chunk's
# 10,000 mod 8,192 = 1,808 positions, and a pass of 300 from K = 8,000 crosses a chunk boundary;
# Gemma 3's sliding layers (1,024-token window) continuing K = 1,000 need all 1,000.
EDGE_CASES = [pytest.param(name, t, k, id=f"{name}-T{t}-K{k}") for name, t, k in (
    ("llama-4-scout-17b-16e", 64, 10_000), ("llama-4-scout-17b-16e", 300, 8000),
    ("gemma-3-27b", 64, 1000))]
MODEL_CASES = _params(*CASES) + EDGE_CASES


def test_every_registry_model_is_checked_or_listed() -> None:
    """A registry model is cross-checked, or NOT_COVERED says why not; the reason must hold."""
    for name in registry_models():
        assert (meta_run.HF_CONFIGS / f"{name}.json").is_file(), (
            f"{name}: no tests/data/hf_configs/{name}.json to build it from")
        arch = meta_run.architecture(name)
        if name in NOT_COVERED:
            assert meta_run.named_class(name) is None, (
                f"{name}: listed as not covered, but transformers {transformers.__version__} "
                f"has {arch}; check it and remove it from NOT_COVERED")
            continue
        assert meta_run.named_class(name) is not None, (
            f"{name}: transformers {transformers.__version__} lacks {arch}; list it in "
            "NOT_COVERED with the reason")
        built = meta_run.built_class(name)
        assert built in ARCHITECTURES, (
            f"{name}: no ARCHITECTURES entry for {built}; add one (and any adjustment it needs)")


# --- parameters --------------------------------------------------------------------------------


def _left_out(parameter: str) -> bool:
    """kvroof's convention: biases and attention sinks are not parameters. A bias is a linear
    layer's or a norm's (``bias``; gpt-oss's experts ``gate_up_proj_bias``, ``down_proj_bias``);
    a linear-attention layer's ``dt_bias`` is a per-head decay parameter kvroof counts."""
    leaf = parameter.rsplit(".", 1)[-1]
    return leaf in ("bias", "sinks") or leaf.endswith("_proj_bias")


def _top_k(config: Any) -> int:
    for key in ("num_experts_per_tok", "num_experts_per_token"):
        if getattr(config, key, None):
            return int(getattr(config, key))
    raise AssertionError("no top-k in the config")


@pytest.mark.parametrize("name", MODELS)
def test_parameters(name: str) -> None:
    model = meta_run.full_model(name)
    total = left_out = routed = active_routed = 0
    experts = {path: module for path, module in model.named_modules()
               if type(module).__name__.endswith("Experts")}
    for path, parameter in model.named_parameters():  # shared (tied) tensors appear once
        if _left_out(path):
            left_out += parameter.numel()
            continue
        total += parameter.numel()
        owner = path.rsplit(".", 1)[0]
        if owner in experts:
            num_experts = parameter.shape[0]  # one slice per routed expert
            assert parameter.numel() % num_experts == 0
            routed += parameter.numel()
            active_routed += parameter.numel() // num_experts * _top_k(model.config)
    spec = get_model(name)
    counts = param_counts(spec)
    assert (total, total - routed + active_routed) == (counts.total, counts.active), (
        f"{name}: transformers {total:,} total / {total - routed + active_routed:,} active "
        f"(biases and sinks left out: {left_out:,}); kvroof {counts.total:,} / {counts.active:,}")
    assert bool(experts) == spec.is_moe
    assert counts.routed_experts_total == routed
    assert bool(model.config.tie_word_embeddings) == spec.tie_word_embeddings


# --- KV and state bytes ------------------------------------------------------------------------


def _linear_state(name: str, spec: ModelSpec, layer: int, held: meta_run.CacheLayer) -> float:
    """One linear layer's state as transformers holds it, against kvroof's; returns the bytes an
    engine holds (kvroof's convention, from transformers' tensors).

    transformers' ``LinearAttentionLayer`` keeps ``conv_kernel_size`` inputs of every conv
    channel (``update_conv_state`` keeps the last ``kernel`` of the state and the new inputs);
    the next token's convolution needs ``kernel - 1`` besides its own, which is what engines
    keep (vLLM's ``MambaStateShapeCalculator.gated_delta_net_state_shape`` and
    ``kda_state_shape``: a conv state of ``conv_kernel_size - 1``). The test compares elements
    with that adjustment and the element sizes apart: transformers holds the recurrent state in
    fp32 (its torch implementations compute it in fp32) and the conv state in the model dtype,
    as kvroof's ``state_dtype`` fp32 (SGLang's default) and ``conv_dtype`` bf16 do."""
    kind = spec.layer_kinds[layer][1]
    assert isinstance(kind, LinearLayer)
    assert held.kind == "LinearAttentionLayer" and held.keys is None
    assert held.conv is not None and held.recurrent is not None
    batch, channels, kernel = held.conv.shape  # kernel: the inputs transformers keeps
    assert batch == 1
    recurrent, conv = linear_state_elements(kind)
    assert held.recurrent.numel == recurrent, f"{name} layer {layer}: recurrent state elements"
    assert channels * (kernel - 1) == conv, f"{name} layer {layer}: conv state elements"
    assert held.recurrent.itemsize == dtype_bytes(kind.state_dtype)
    assert held.conv.itemsize == dtype_bytes(kind.conv_dtype)
    return float(held.recurrent.nbytes + channels * (kernel - 1) * held.conv.itemsize)


def _per_position(kind: Any, held: meta_run.CacheLayer) -> float:
    """Bytes per cached position of a layer as transformers holds it, with a DSA layer's
    indexer keys as engines hold them: transformers keeps them in the model dtype (bf16, ``2 x
    index_head_dim`` bytes), vLLM in FP8 with a 4-byte scale per 128 values
    (``DeepseekV32IndexerCache``: ``head_dim + head_dim // 128 * 4`` bytes), as kvroof's spec
    says (``indexer.key_dtype`` fp8, ``key_scale_bytes`` 4); the elements are compared."""
    per_position = sum(t.nbytes for t in (held.keys, held.values) if t is not None) / held.tokens
    if held.indexer_keys is None:
        return per_position
    indexer = kind.indexer
    assert held.indexer_keys.shape == (1, held.tokens, indexer.head_dim)
    return per_position + indexer.head_dim * dtype_bytes(indexer.key_dtype) \
        + indexer.key_scale_bytes


@pytest.mark.parametrize(("name", "new_tokens", "cached_tokens"), MODEL_CASES)
def test_kv_bytes(name: str, new_tokens: int, cached_tokens: int) -> None:
    """Per layer: the bytes per cached position, and what the layer keeps. Whole model: what a
    continuation of the K cached tokens needs (read from the pass's masks: the cached positions
    some new query sees, and the states), and what the cache holds after the pass of T on K,
    against kvroof's ``kv_bytes``."""
    spec = get_model(name)
    run = meta_run.prefill(name, new_tokens, cached_tokens)
    kinds = meta_run.layer_kinds(name)
    groups = {g.name: g for g in kv_breakdown(spec, "bf16")}
    positions = cached_tokens + new_tokens
    needed = held_after = every_position = states = 0.0
    chunked = False
    for layer, kind in enumerate(kinds):
        group_name, spec_kind = spec.layer_kinds[layer]
        group = groups[group_name]
        held = run.cache[kind]
        if isinstance(spec_kind, LinearLayer):
            states += _linear_state(name, spec, layer, held)
            continue
        core = run.cores[kind]
        if isinstance(spec_kind, SharedLayer):  # Gemma 4: reads its source's KV, keeps none
            assert held.kind == "DummyLayer" and held.keys is None
            source = run.cores[kinds[spec_kind.source]]
            assert (core.keys, core.cached_needed) == (source.keys, source.cached_needed)
            continue
        per_position = _per_position(spec_kind, held)
        assert per_position == group.bytes_per_position, (
            f"{name} layer {layer} ({held.kind}): {per_position} bytes per position, kvroof "
            f"{group.bytes_per_position}")
        # what the pass read of the K cached positions: all of them, the W - 1 before the first
        # new query for a window, the current chunk's K mod C for a chunk
        needed += per_position * core.cached_needed
        if isinstance(spec_kind, ChunkedLayer):
            # transformers keeps a chunked layer in a DynamicSlidingWindowLayer of the chunk size
            # ("sliding and chunked are the same in how they should behave, only the mask
            # differs"): the last C - 1 positions, more than the current chunk the next query can
            # see (vLLM's ChunkedLocalAttentionManager skips floor(P / C) x C); the chunk's need
            # is checked above from the mask, not from what transformers keeps
            chunk = meta_run.full_model(name).config.attention_chunk_size
            assert held.kind == "DynamicSlidingWindowLayer"
            assert held.tokens == min(positions, chunk - 1)
            assert core.cached_needed == cached_tokens % chunk
            chunked = True
            continue
        held_after += per_position * held.tokens
        if held.tokens == positions and group.holds == "all":
            every_position += per_position
        else:
            assert group.holds == "window" and held.kind == "DynamicSlidingWindowLayer"
            assert held.tokens == min(positions, group.keep)  # W - 1
    assert needed + (states if cached_tokens else 0.0) == kv_bytes(spec, cached_tokens, "bf16")
    assert every_position == kv_bytes_per_token(spec, "bf16")
    assert states == state_bytes(spec)
    if not chunked:
        assert held_after + states == kv_bytes(spec, positions, "bf16")


# --- prefill FLOPs -----------------------------------------------------------------------------


def _scaled(flops: int, pairs: int, queries: int, keys: int) -> int:
    """FLOPs torch counted over a ``queries x keys`` rectangle, for the ``pairs`` that take part
    (every term of an attention core or an indexer's scores is linear in the pairs scored)."""
    assert flops * pairs % (queries * keys) == 0
    return flops * pairs // (queries * keys)


def _linear_adjustment(run: meta_run.Prefill, module: Any, path: str, new_tokens: int,
                       cached_tokens: int) -> int:
    """What to add to a linear-attention layer's FLOPs as torch counts transformers' torch
    fallbacks, to count what an engine's kernels compute (kvroof's convention,
    docs/attention-families.md).

    - Convolution: ``causal_conv1d_fn`` convolves with ``kernel - 1`` zero positions of padding
      on both sides and, continuing a cached sequence, after the ``kernel`` conv-state inputs it
      prepends; it keeps the last ``T`` outputs. torch counts every output (``2 x channels x
      kernel`` each); an engine's causal-conv kernel computes the ``T`` it keeps.
    - Chunked core (chunks of ``c`` = 64, ``T`` a multiple of it here, so no padding), per chunk
      per value head: the Gated DeltaNet fallback (``torch_chunk_gated_delta_rule``) solves for
      the WY factors ``u = A^-1 (beta v)`` and ``w = A^-1 (beta k e^g)`` with
      ``torch.linalg.solve_triangular``, which ``FlopCounterMode`` does not count; FLA's kernels
      invert ``A`` and multiply (``recompute_w_u_fwd``): ``2 c^2 (d_k + d_v)`` added. The KDA
      fallback (``chunk_kimi_delta_attention``) forms the decayed ``(beta k) k^T`` and ``q k^T``
      as elementwise products summed over ``d_k`` (per-channel decay), which torch does not
      count; FLA's ``chunk_kda`` multiplies: ``2 x 2 c^2 d_k`` added. Its inverse is applied by
      matmuls, counted.
    """
    conv_weight = module.conv1d.weight
    channels, _, kernel = conv_weight.shape
    per_output = 2 * channels * kernel
    conv = run.module_flops(path, "aten.convolution")
    assert conv % per_output == 0
    outputs = conv // per_output
    assert outputs == new_tokens + (kernel - 1) + (kernel if cached_tokens else 0), outputs
    chunk = 64
    assert new_tokens % chunk == 0
    chunks = new_tokens // chunk
    if hasattr(module, "head_k_dim"):  # Gated DeltaNet
        core = 2 * chunk**2 * (module.head_k_dim + module.head_v_dim) * module.num_v_heads
    else:  # KDA: as many key as value heads of head_dim
        core = 2 * 2 * chunk**2 * module.head_dim * module.num_heads
    return -(outputs - new_tokens) * per_output + chunks * core


def _dsa_absorbed(run: meta_run.Prefill, layer: int) -> tuple[int, int]:
    """(core, per-token MLA products) of a DSA layer's main attention in the absorbed form.

    transformers runs DeepSeek-V3.2's main attention expanded: ``kv_b_proj`` over every one of
    the ``K + T`` latents and ``2h(nope + rope) + 2h v`` per pair. vLLM's and SGLang's sparse MLA
    kernels work on the latent (vLLM ``flashmla_sparse.py``), as kvroof counts a sparse layer; so
    the test takes torch's count of the absorbed form on the module's own weights
    (:func:`meta_run.absorbed_mla`), its scores and weighted sum over the same top-k pairs, in
    place of transformers' expanded core and ``kv_b_proj``."""
    absorbed = run.absorbed[layer]
    core = run.cores[layer]
    assert (absorbed.queries, absorbed.keys) == (core.queries, core.keys)
    return (_scaled(absorbed.rectangle, core.pairs, core.queries, core.keys),
            absorbed.per_query)


def _measured(name: str, run: meta_run.Prefill, layer: int, new_tokens: int,
              cached_tokens: int) -> dict[str, int]:
    """One layer of the prefix model as torch counted it, split into kvroof's parts, with the
    adjustments each part's docstring states."""
    arch = ARCHITECTURES[meta_run.built_class(name)]
    model = meta_run.prefix_model(name)
    decoder = model.model.layers[layer]
    base = f"model.layers.{layer}"
    parts = dict.fromkeys(PARTS, 0)
    linear = arch.linear is not None and meta_run.layer_type(model, layer) == "linear_attention"
    attention_path = f"{base}.{arch.linear if linear else 'self_attn'}"
    attention = run.module_flops(attention_path)
    mlp = run.module_flops(f"{base}.{arch.mlp}")
    per_layer_input = sum(run.module_flops(f"{base}.{p}") for p in arch.per_layer_input)
    assert run.module_flops(base) == attention + mlp + per_layer_input, (
        "FLOPs outside attention, MLP and per-layer input")
    parts["per_layer_input"] = per_layer_input
    if linear:
        module = getattr(decoder, arch.linear or "")
        parts["linear_attention"] = attention + _linear_adjustment(
            run, module, attention_path, new_tokens, cached_tokens)
    else:
        core = run.cores[layer]
        parts["attention_core"] = _scaled(core.flops, core.pairs, core.queries, core.keys)
        mla_up = run.module_flops(f"{attention_path}.{arch.mla_up}") if arch.mla_up else 0
        parts["mla_up"] = mla_up
        indexer = 0
        if hasattr(decoder.self_attn, "indexer"):
            # the indexer's q/k/weight projections per new token, and its scores over the
            # whole queries x (K + T) rectangle, of which the causal pairs count
            indexer = run.module_flops(f"{attention_path}.indexer")
            projections = sum(run.module_flops(f"{attention_path}.indexer.{p}")
                              for p in ("wq_b", "wk", "weights_proj"))
            parts["indexer"] = projections + _scaled(
                indexer - projections, core.causal_pairs, core.queries, core.keys)
            parts["attention_core"], parts["mla_up"] = _dsa_absorbed(run, layer)
        parts["attention_projections"] = attention - core.flops - mla_up - indexer
    experts = run.module_flops(f"{base}.{arch.mlp}.experts")
    if experts == 0:  # a dense layer
        parts["ffn_dense"] = mlp
        return parts
    if arch.all_experts:
        # Llama 4's experts multiply every token by all E experts (bmm over the repeated
        # tokens, the inputs of unpicked experts scaled by sigmoid(-inf) = 0); an engine runs
        # each token's top-k: k / E of it
        top_k, num_experts = model.config.num_experts_per_tok, model.config.num_local_experts
        assert experts * top_k % num_experts == 0
        experts = experts * top_k // num_experts
    router = run.module_flops(f"{base}.{arch.mlp}.{arch.router}") if arch.router else 0
    shared = sum(run.module_flops(f"{base}.{arch.mlp}.{s}") for s in arch.shared)
    assert mlp == run.module_flops(f"{base}.{arch.mlp}.experts") + router + shared, (
        "MLP FLOPs outside experts, router and shared experts")
    parts.update(ffn_routed=experts, router=router, ffn_shared=shared)
    return parts


def _per_layer_projection(name: str, new_tokens: int) -> int:
    """The per-layer inputs' projection from the hidden state (Gemma 4), a model-level module
    whose width grows with the layers: the full model's own module, run on T tokens."""
    model = meta_run.full_model(name).model
    projection = getattr(model, "per_layer_model_projection", None)
    if projection is None:
        return 0
    return meta_run.run_module(projection, new_tokens, model.config.hidden_size)


@pytest.mark.parametrize(("name", "new_tokens", "cached_tokens"), MODEL_CASES)
def test_prefill_flops(name: str, new_tokens: int, cached_tokens: int) -> None:
    """Per layer, by part, then the whole model (layers by kind + LM head) within 0.1%."""
    spec = get_model(name)
    run = meta_run.prefill(name, new_tokens, cached_tokens)
    kinds = meta_run.layer_kinds(name)
    measured = {kind: _measured(name, run, kind, new_tokens, cached_tokens)
                for kind in set(kinds)}
    sums = dict.fromkeys(PARTS, 0)
    for layer, kind in enumerate(kinds):
        ours = layer_prefill_flops(spec, layer, new_tokens, cached_tokens, "expanded")
        for part, value in measured[kind].items():
            assert getattr(ours, part) == pytest.approx(value, rel=REL, abs=0), (
                f"{name} layer {layer} {part}: transformers {value:.6g}, "
                f"kvroof {getattr(ours, part):.6g}")
            sums[part] += value
    lm_head = run.module_flops("lm_head")
    # The pass is its layers, the LM head, the per-layer inputs' projection and the RoPE tables
    # (some versions build the angles as a (dim/2 x 1) @ (1 x T) product: left out, as kvroof
    # leaves RoPE out); the embedding lookups and the final norm count nothing.
    rope = run.module_flops("model.rotary_emb")
    assert rope <= 512 * new_tokens, "more than a RoPE angle table (dim <= 512) in rotary_emb"
    projection = run.module_flops("model.per_layer_model_projection")
    assert run.module_flops("Global") == sum(
        run.module_flops(f"model.layers.{i}") for i in range(len(run.cache))
    ) + lm_head + rope + projection
    sums["per_layer_input"] += _per_layer_projection(name, new_tokens)
    sums["lm_head"] = lm_head
    total = prefill_flops(spec, new_tokens, cached_tokens, "expanded").as_dict()
    expected = {**sums, "total": sum(sums.values())}
    for part, value in expected.items():
        assert total[part] == pytest.approx(value, rel=REL, abs=0), (
            f"{name} {part}: transformers {value:.6g}, kvroof {total[part]:.6g}")
