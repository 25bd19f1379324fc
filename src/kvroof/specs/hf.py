"""Build a :class:`ModelSpec` from a HuggingFace ``config.json`` (a path or a dict).

Supported architectures: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
Qwen3MoeForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM (also Kimi-K2),
DeepseekV32ForCausalLM, MistralForCausalLM, MixtralForCausalLM, GptOssForCausalLM,
Qwen3NextForCausalLM, Qwen3_5(Moe)ForConditionalGeneration, KimiLinearForCausalLM,
Llama4ForConditionalGeneration, Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration,
MiniMaxM2ForCausalLM and Glm4MoeForCausalLM. A vision-language wrapper's text model is read from
its ``text_config`` (its encoders are not part of the spec). The architecture name only gates
support; the kind of attention and FFN is decided from the fields present (``kv_lora_rank`` ->
MLA; ``num_experts``, ``n_routed_experts`` or ``num_local_experts`` -> MoE; ``layer_types`` or
``sliding_window`` -> sliding-window layers), never from the model's name, except where a class
fixes a layout its config leaves implicit (which layers are linear, chunked, sparse or shared:
:func:`_layer_kinds`).

The weight format comes from ``quantization_config`` (``fp8`` -> FP8 linear layers; ``mxfp4``
-> MXFP4 expert weights of a MoE model, as gpt-oss ships them; ``awq``/``gptq`` -> int4 or int8),
else from ``torch_dtype``; the embedding and LM head keep ``torch_dtype``.

``head_dim`` is taken from the config. When a config leaves it out, kvroof applies the default
of the architecture's HuggingFace class (``hidden_size // num_attention_heads`` for Llama,
Mistral, Mixtral and Qwen2; 128 for Qwen3; 64 for gpt-oss) and warns that it did.

``sliding_window`` counts only where the class uses it (Mistral, Mixtral, Qwen2, Qwen3 and
Qwen3-MoE; elsewhere, Llama for one, it is ignored with a warning, as HuggingFace ignores it).
The Qwen classes slide only with ``use_sliding_window: true`` (their default is false), and then
only layers from ``max_window_layers`` (default 28) on: none when it is at least the layer
count, every layer when it is 0, and a split is refused. A ``null`` window means none. A
MistralForCausalLM config that leaves the key out gets the class default of 4096 tokens on every
layer (Mistral-7B-v0.1), with a warning; v0.2 and later write ``"sliding_window": null``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kvroof.errors import SpecError, short_repr
from kvroof.files.reading import load_json_file
from kvroof.specs.hf_fields import HFConfig as _Config
from kvroof.specs.hf_layers import GEMMA3, GEMMA4, LLAMA4, QWEN_LINEAR, layer_fields
from kvroof.specs.hf_weights import weight_format
from kvroof.specs.loader import validate_spec
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import SpecWarning

__all__ = ["MAX_CONFIG_BYTES", "SUPPORTED_ARCHITECTURES", "model_from_hf_config"]

MAX_CONFIG_BYTES: Final = 16 << 20
"""Largest HF ``config.json`` read (16 MiB; real ones are a few kB)."""

SUPPORTED_ARCHITECTURES: Final = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "GptOssForCausalLM",
    "DeepseekV32ForCausalLM",
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "KimiLinearForCausalLM",
    "Llama4ForConditionalGeneration",
    "Llama4ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Gemma3ForCausalLM",
    "Gemma4ForConditionalGeneration",
    "Gemma4ForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Glm4MoeForCausalLM",
)
# Architectures whose modelling code applies an RMSNorm to each query and key head (others that
# do say so with use_qk_norm; Llama 4's use_qk_norm is an L2 norm without weights).
_QK_NORM: Final = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", *QWEN_LINEAR, *GEMMA3,
                             *GEMMA4})
_WEIGHTLESS_QK_NORM: Final = LLAMA4
# ... and those whose q/k RMSNorm spans all heads (one norm over the whole query projection and
# one over the keys): MiniMax-M2 (config qk_norm_type "per_layer"; transformers'
# MiniMaxM2Attention builds q_norm over num_attention_heads x head_dim whatever it says).
_QK_NORM_ALL_HEADS: Final = frozenset({"MiniMaxM2ForCausalLM"})
# Defaults of the HuggingFace classes for fields their configs may leave out.
_VOCAB_DEFAULT: Final[dict[str, int]] = {arch: 262_208 for arch in GEMMA3}
_TIE_DEFAULT: Final = GEMMA3 | GEMMA4
# HuggingFace class defaults for head_dim when config.json omits it (None: hidden // heads).
_HEAD_DIM_DEFAULT: Final[dict[str, int | None]] = {
    "LlamaForCausalLM": None,
    "Qwen2ForCausalLM": None,
    "MistralForCausalLM": None,
    "MixtralForCausalLM": None,
    "Qwen3ForCausalLM": 128,
    "Qwen3MoeForCausalLM": 128,
    "GptOssForCausalLM": 64,
}
# HuggingFace class defaults for sliding_window when config.json leaves the key out (not when it
# writes null): MistralConfig(sliding_window=4096). Other supported classes default to no window.
_SLIDING_WINDOW_DEFAULT: Final[dict[str, int]] = {"MistralForCausalLM": 4096}
# The classes (of those without per-layer kinds) whose HuggingFace modelling code reads
# config.sliding_window (transformers 5.24 models/*/modeling_*.py: mistral, mixtral, qwen2,
# qwen3, qwen3_moe pass it to attention; llama, deepseek_v2/v3, glm4_moe and minimax_m2 never
# read it). Elsewhere a sliding_window key is ignored, as HuggingFace ignores it, with a warning.
_SLIDING_WINDOW_CLASSES: Final = frozenset({"MistralForCausalLM", "MixtralForCausalLM",
                                            "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                            "Qwen3MoeForCausalLM"})
# ... of which these slide only with use_sliding_window: true (Qwen2Config, Qwen3Config and
# Qwen3MoeConfig default it to False and then set sliding_window to None)
_USE_SLIDING_WINDOW: Final = frozenset({"Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                        "Qwen3MoeForCausalLM"})


def _read(config: Mapping[str, Any] | str | Path) -> tuple[Mapping[str, Any], Path | None]:
    if isinstance(config, Mapping):
        return config, None
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    data = load_json_file(path, MAX_CONFIG_BYTES, "HF config files")
    if not isinstance(data, dict):
        raise SpecError("expected a JSON object at the top level", path)
    return data, path


def _attention(cfg: _Config) -> dict[str, Any]:
    heads = cfg.integer("num_attention_heads")
    if cfg.has("kv_lora_rank"):
        q_lora = cfg.optional_int("q_lora_rank", minimum=0)
        return {
            "kind": "mla",
            "num_heads": heads,
            "q_lora_rank": q_lora or None,  # DeepSeek-V2-Lite writes null (older copies 0)
            "kv_lora_rank": cfg.integer("kv_lora_rank"),
            "qk_nope_head_dim": cfg.integer("qk_nope_head_dim"),
            "qk_rope_head_dim": cfg.integer("qk_rope_head_dim"),
            "v_head_dim": cfg.integer("v_head_dim"),
        }
    kv_heads = cfg.optional_int("num_key_value_heads", heads)  # HF: absent means MHA
    assert kv_heads is not None
    cfg.check_divides("num_key_value_heads", kv_heads, heads, "num_attention_heads")
    if cfg.has("head_dim"):
        head_dim = cfg.integer("head_dim")
    else:
        default = _HEAD_DIM_DEFAULT.get(cfg.architecture)
        if default is None:
            hidden = cfg.integer("hidden_size")
            if heads > hidden:
                raise cfg.error("num_attention_heads", f"{heads:,} heads exceed hidden_size "
                                                       f"({hidden:,}), so hidden_size // heads "
                                                       "is no head_dim")
            default = hidden // heads
        head_dim = default
        warnings.warn(
            f"{cfg.path or '<config dict>'}: head_dim missing; using {head_dim}, the "
            f"{cfg.architecture} default",
            SpecWarning,
            stacklevel=4,
        )
    kind = "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"
    qk_norm = cfg.architecture in _QK_NORM or (
        cfg.flag("use_qk_norm", False) and cfg.architecture not in _WEIGHTLESS_QK_NORM)
    attention: dict[str, Any] = {
        "kind": kind,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "qk_norm": qk_norm,
    }
    if qk_norm and cfg.architecture in _QK_NORM_ALL_HEADS:
        attention["qk_norm_scope"] = "all_heads"

    gated = cfg.flag("attn_output_gate", cfg.architecture == "Qwen3NextForCausalLM")
    if gated and cfg.architecture in QWEN_LINEAR:
        attention["output_gate"] = True
    return attention


def _llama4_ffn(cfg: _Config, num_layers: int) -> dict[str, Any]:
    """Llama 4: every MoE layer has one shared expert as wide as the routed ones; with
    interleave_moe_layer_step > 1 the other layers are dense (intermediate_size_mlp)."""
    step = cfg.optional_int("interleave_moe_layer_step", 1, maximum=num_layers) or 1
    moe_layers = cfg.optional_int_list("moe_layers", minimum=0, maximum=num_layers - 1)
    if moe_layers is not None and moe_layers != list(range(step - 1, num_layers, step)):
        raise cfg.error("moe_layers", "only MoE on every interleave_moe_layer_step-th layer is "
                                      "supported")
    width = cfg.integer("intermediate_size")
    experts = cfg.integer("num_local_experts")
    ffn: dict[str, Any] = {
        "kind": "moe", "num_experts": experts,
        "experts_per_token": cfg.integer("num_experts_per_tok", maximum=experts),
        "expert_intermediate_size": width, "num_shared_experts": 1,
        "shared_expert_intermediate_size": width, "first_k_dense": 0,
        "dense_intermediate_size": cfg.integer("intermediate_size_mlp") if step > 1 else None,
    }
    if step > 1:
        ffn["moe_layer_step"] = step
    return ffn


def _ffn(cfg: _Config, num_layers: int) -> dict[str, Any]:
    if cfg.architecture in LLAMA4:
        return _llama4_ffn(cfg, num_layers)
    if cfg.architecture in GEMMA4 and cfg.flag("enable_moe_block", False):
        width = cfg.integer("intermediate_size")  # the dense MLP beside the experts
        experts = cfg.integer("num_experts")
        return {"kind": "moe", "num_experts": experts,
                "experts_per_token": cfg.integer("top_k_experts", maximum=experts),
                "expert_intermediate_size": cfg.integer("moe_intermediate_size"),
                "num_shared_experts": 1, "shared_expert_intermediate_size": width,
                "first_k_dense": 0, "dense_intermediate_size": None}
    experts_key = next(
        (k for k in ("n_routed_experts", "num_experts", "num_local_experts") if cfg.has(k)), None
    )
    experts = 0 if experts_key is None else cfg.integer(experts_key, minimum=0)
    if experts == 0:  # no experts key, or 0 experts: a dense FFN
        if experts_key is not None and not cfg.has("intermediate_size"):
            raise cfg.error(experts_key, "0 experts means a dense FFN, but intermediate_size is "
                                         "missing")
        return {"kind": "dense", "intermediate_size": cfg.integer("intermediate_size")}
    if cfg.optional_int_list("mlp_only_layers", minimum=0,
                             maximum=num_layers - 1):
        raise cfg.error("mlp_only_layers", "dense layers between MoE layers are not supported")
    for key in ("decoder_sparse_step", "moe_layer_freq"):
        if cfg.has(key) and cfg.integer(key) != 1:
            raise cfg.error(key, "only every-layer MoE is supported, got "
                                 f"{short_repr(cfg.data[key])}")
    expert_size = cfg.integer("moe_intermediate_size", "intermediate_size")
    shared = cfg.optional_int("n_shared_experts", minimum=0)
    if shared is None:
        shared = cfg.optional_int("num_shared_experts", 0, minimum=0) or 0
    shared_size = expert_size if shared else 0
    qwen_shared = cfg.optional_int("shared_expert_intermediate_size", 0, minimum=0) or 0
    gate = False
    if qwen_shared and not shared:  # Qwen MoE: one shared expert of this width, gated
        shared, shared_size, gate = 1, qwen_shared, True
    first_dense = cfg.optional_int("first_k_dense_replace", 0, minimum=0,
                                   maximum=num_layers) or 0
    return {
        "kind": "moe",
        "num_experts": experts,
        "experts_per_token": cfg.integer("num_experts_per_tok", "experts_per_token",
                                         "num_experts_per_token", maximum=experts),
        "expert_intermediate_size": expert_size,
        "num_shared_experts": shared,
        "shared_expert_intermediate_size": shared_size,
        "first_k_dense": first_dense,
        "dense_intermediate_size": cfg.integer("intermediate_size") if first_dense else None,
        **({"shared_expert_gate": True} if gate else {}),
    }


def _sliding_window(cfg: _Config, num_layers: int) -> dict[str, int] | None:
    if "sliding_window" not in cfg.data and cfg.architecture in _SLIDING_WINDOW_DEFAULT:
        size = _SLIDING_WINDOW_DEFAULT[cfg.architecture]
        warnings.warn(
            f"{cfg.path or '<config dict>'}: sliding_window missing; using {size} on every "
            f"layer, the {cfg.architecture} default",
            SpecWarning,
            stacklevel=4,
        )
        return {"size": size, "period": 1, "offset": 0}
    if not cfg.has("sliding_window"):
        return None
    use = cfg.data.get("use_sliding_window")
    if use is not None and not cfg.flag("use_sliding_window", True):
        return None
    if cfg.architecture in _USE_SLIDING_WINDOW:
        if use is None:
            return None  # the class default, use_sliding_window False
        # layer i slides when i >= max_window_layers (default 28; Qwen2Config, Qwen3Config)
        first = cfg.optional_int("max_window_layers", 28, minimum=0)
        assert first is not None
        if first >= num_layers:
            return None
        if first > 0:
            raise cfg.error("max_window_layers", "sliding window on only some layers is not "
                                                 "supported")
        return {"size": cfg.integer("sliding_window"), "period": 1, "offset": 0}
    if cfg.architecture not in _SLIDING_WINDOW_CLASSES:
        warnings.warn(
            f"{cfg.path or '<config dict>'}: sliding_window ignored: {cfg.architecture}'s "
            "HuggingFace code does not use it (every layer attends to the whole context)",
            SpecWarning,
            stacklevel=4,
        )
        return None
    return {"size": cfg.integer("sliding_window"), "period": 1, "offset": 0}


def _vocab(cfg: _Config) -> int:
    """``vocab_size``, or the class default (with a warning) where the class has one."""
    if cfg.has("vocab_size") or cfg.architecture not in _VOCAB_DEFAULT:
        return cfg.integer("vocab_size")
    size = _VOCAB_DEFAULT[cfg.architecture]
    warnings.warn(f"{cfg.path or '<config dict>'}: vocab_size missing; using {size}, the "
                  f"{cfg.architecture} default", SpecWarning, stacklevel=4)
    return size


def _name(cfg: _Config, path: Path | None, name: str | None) -> str:
    candidate = name or cfg.optional_str("_name_or_path") or ""
    if not candidate and path is not None:
        candidate = path.parent.name if path.name == "config.json" else path.stem
    candidate = candidate.rstrip("/").split("/")[-1] or cfg.optional_str("model_type") or "model"
    return re.sub(r"[^A-Za-z0-9._+-]", "-", candidate).lower().lstrip(".-_+") or "model"


def model_from_hf_config(
    config: Mapping[str, Any] | str | Path,
    *,
    name: str | None = None,
    published_total: float | None = None,
    published_active: float | None = None,
) -> ModelSpec:
    """Build a model spec from a HuggingFace config (path to ``config.json``, its folder, or a
    dict). Raises :class:`SpecError` naming the file and field for unsupported or incomplete
    configs. Published parameter counts are not in config.json; pass them to record them."""
    data, path = _read(config)
    architectures = data.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        raise SpecError("missing field (a list with the model class name)", path or "<config dict>",
                        "architectures")
    architecture = str(architectures[0])
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise SpecError(
            f"unsupported architecture {short_repr(architecture)} (supported: "
            f"{', '.join(SUPPORTED_ARCHITECTURES)})",
            path or "<config dict>",
            "architectures",
        )
    text = data.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise SpecError(f"expected a mapping of the text model's fields, got {short_repr(text)}",
                        path or "<config dict>", "text_config")
    if isinstance(text, Mapping):  # a vision-language wrapper: its text model
        merged = {key: value for key, value in data.items() if key != "text_config"} | dict(text)
        cfg = _Config(merged, path, architecture, "text_config.")
    else:
        cfg = _Config(data, path, architecture)
    num_layers = cfg.integer("num_hidden_layers")
    # False is the default of every supported class but Gemma's
    tie = cfg.flag("tie_word_embeddings", architecture in _TIE_DEFAULT)
    ffn = _ffn(cfg, num_layers)
    attention = _attention(cfg)
    weights = weight_format(cfg, ffn["kind"] == "moe")
    fields: dict[str, Any] = {
        "name": _name(_Config(data, path, architecture), path, name),
        "display_name": name or "",
        "num_layers": num_layers,
        "hidden_size": cfg.integer("hidden_size"),
        "vocab_size": _vocab(cfg),
        "tie_word_embeddings": tie,
        "attention": attention,
        "ffn": ffn,
        "weights": weights,
        "max_context": cfg.optional_int("max_position_embeddings"),
        "sources": {"default": f"HuggingFace config.json ({path or 'dict'})"},
        "notes": f"imported from a HuggingFace config ({architecture})",
    }
    kinds = layer_fields(cfg, num_layers, attention, weights["embeddings"])
    if kinds is None:
        fields["sliding_window"] = _sliding_window(cfg, num_layers)
    else:
        fields.update(kinds)
    if architecture in GEMMA3 | GEMMA4:  # input, post-attention, pre- and post-feedforward
        fields["norms_per_layer"] = 4
    if architecture in GEMMA4 and cfg.optional_int("hidden_size_per_layer_input", 0, minimum=0):
        fields["per_layer_input"] = {
            "hidden_size": cfg.integer("hidden_size_per_layer_input"),
            "vocab_size": cfg.integer("vocab_size_per_layer_input", "vocab_size")}
    if (published_total is None) != (published_active is None):
        raise SpecError("give both published_total and published_active, or neither")
    if published_total is not None:
        fields["published"] = {"total": published_total, "active": published_active}
    spec = validate_spec("model", fields, path or "<config dict>")
    assert isinstance(spec, ModelSpec)
    return spec
