"""HuggingFace config import: every registry model round-trips, kinds come from fields, and bad
configs give one-line errors naming the file and field."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from kvroof.cost.kv import kv_bytes_per_token
from kvroof.errors import SpecError
from kvroof.specs.hf import model_from_hf_config
from kvroof.specs.registry import Registry, SpecWarning
from tests.conftest import HF_CONFIGS

CONFIGS = sorted(HF_CONFIGS.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_CONFIGS / f"{name}.json").read_text())
    return data


def test_one_config_per_registry_model(registry: Registry) -> None:
    assert {p.stem for p in CONFIGS} == set(registry.names("model"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_import_equals_registry_spec(registry: Registry, path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = model_from_hf_config(path, name=path.stem)
    assert imported.architecture() == registry.model(path.stem).architecture()
    config = json.loads(path.read_text())
    config = config.get("text_config", config)  # a vision-language wrapper's text model
    if "head_dim" not in config and "kv_lora_rank" not in config:
        # Llama-3.1/Llama-2, Mistral-7B, Mixtral and Qwen2.5 configs leave head_dim out; the
        # import says it used the default.
        assert any("head_dim missing" in str(w.message) for w in caught)
    else:
        assert not any("head_dim missing" in str(w.message) for w in caught)


def test_kinds_come_from_fields_not_names() -> None:
    """A Llama-class config that carries MoE fields is imported as MoE."""
    config = load("llama-3.1-8b") | {"num_local_experts": 4, "num_experts_per_tok": 2,
                                     "head_dim": 128}
    spec = model_from_hf_config(config)
    assert spec.ffn.kind == "moe"
    assert spec.attention.kind == "gqa"


def test_gpt_oss_sliding_layers() -> None:
    spec = model_from_hf_config(HF_CONFIGS / "gpt-oss-120b.json")
    assert spec.sliding_window is not None
    assert (spec.sliding_window.size, spec.sliding_window.period, spec.sliding_window.offset) == (
        128, 2, 0)
    assert spec.num_sliding_layers == 18


def test_gpt_oss_20b_sliding_layers() -> None:
    spec = model_from_hf_config(HF_CONFIGS / "gpt-oss-20b.json")
    assert spec.sliding_window is not None
    assert (spec.sliding_window.size, spec.sliding_window.period, spec.sliding_window.offset) == (
        128, 2, 0)
    assert (spec.num_sliding_layers, spec.num_full_layers) == (12, 12)
    assert spec.ffn.kind == "moe" and spec.ffn.num_experts == 32


@pytest.mark.filterwarnings("ignore:.*head_dim missing")
@pytest.mark.parametrize("name", ["qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"])
def test_qwen2_window_size_without_use_sliding_window_is_no_window(name: str) -> None:
    """Qwen2.5 configs write a sliding_window size (32768 or 131072) next to
    use_sliding_window: false; HuggingFace's Qwen2 class then uses no window, and neither do we."""
    config = load(name)
    assert config["sliding_window"] and config["use_sliding_window"] is False
    spec = model_from_hf_config(config)
    assert spec.sliding_window is None
    assert spec.num_full_layers == spec.num_layers
    # Qwen2.5-3B-Instruct writes max_window_layers 70 for its 36 layers; unused without a window.
    assert model_from_hf_config(config | {"max_window_layers": 70}).sliding_window is None


@pytest.mark.filterwarnings("ignore:.*head_dim missing")
def test_qwen2_bias_and_tie_fields() -> None:
    """Qwen2.5 small models tie embeddings; the q/k/v biases are not a config field and are
    left out of parameter counts (see tests/cost/test_params.py)."""
    spec = model_from_hf_config(load("qwen2.5-1.5b"))
    assert spec.tie_word_embeddings
    assert not model_from_hf_config(load("qwen2.5-7b")).tie_word_embeddings
    assert spec.attention.kind == "gqa" and spec.attention.head_dim == 128


def test_mistral_class_defaults() -> None:
    """MistralForCausalLM: head_dim defaults to hidden / heads; a config without a sliding_window
    key gets the class default, 4096 tokens on every layer (as Mistral-7B-v0.1), with a warning;
    "sliding_window": null means none. Other classes keep "absent means none"."""
    llama = load("llama-3.1-8b")
    assert "sliding_window" not in llama and "head_dim" not in llama
    mistral = llama | {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}
    with pytest.warns(SpecWarning) as caught:
        window = model_from_hf_config(mistral).sliding_window
    messages = [str(w.message) for w in caught]
    assert any("head_dim missing; using 128" in m for m in messages)
    assert any("sliding_window missing; using 4096 on every layer" in m for m in messages)
    assert window is not None and (window.size, window.period, window.offset) == (4096, 1, 0)
    with pytest.warns(SpecWarning, match="head_dim missing"):
        assert model_from_hf_config(mistral | {"sliding_window": None}).sliding_window is None
    with pytest.warns(SpecWarning, match="head_dim missing"):
        assert model_from_hf_config(llama).sliding_window is None


def test_sliding_window_only_where_the_class_reads_it() -> None:
    """transformers' LlamaForCausalLM code never reads config.sliding_window (its modeling_llama
    has no such name; MistralForCausalLM's passes it to attention): a Llama config that carries
    one attends to the whole context, with a warning; the same key makes Mistral slide. (Every
    layer became a 4,096-token window and the per-token KV bytes 0.)"""
    llama = load("llama-3.1-8b") | {"sliding_window": 4096}
    with pytest.warns(SpecWarning) as caught:
        model = model_from_hf_config(llama)
    assert any("sliding_window ignored: LlamaForCausalLM" in str(w.message) for w in caught)
    # 32 layers x (K and V) x 8 KV heads x 128 dims x 2 bytes
    assert model.sliding_window is None and kv_bytes_per_token(model) == 131_072
    mistral = llama | {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}
    with pytest.warns(SpecWarning, match="head_dim missing"):
        window = model_from_hf_config(mistral).sliding_window
    assert window is not None and window.size == 4096


def test_qwen_slides_only_with_use_sliding_window() -> None:
    """transformers' Qwen3Config (configuration_qwen3.py, 5.24): use_sliding_window defaults to
    False, and layer i slides only when i >= max_window_layers (default 28). So a window size
    alone slides nothing (it used to put a window on every layer), max_window_layers >= the
    36 layers of Qwen3-8B slides nothing, 0 slides every layer, and a split is refused."""
    base = load("qwen3-8b") | {"sliding_window": 4096}
    base.pop("use_sliding_window", None)
    assert model_from_hf_config(base).sliding_window is None
    on = base | {"use_sliding_window": True}
    assert model_from_hf_config(on | {"max_window_layers": 36}).sliding_window is None
    window = model_from_hf_config(on | {"max_window_layers": 0}).sliding_window
    assert window is not None and window.size == 4096
    with pytest.raises(SpecError, match="sliding window on only some layers"):
        model_from_hf_config(on | {"max_window_layers": 28})


def test_mistral_7b_v03_has_no_window_v01_had_4096() -> None:
    """Mistral-7B-v0.3 writes "sliding_window": null (no window, the registry's choice); v0.1
    wrote 4096, which slides on every layer."""
    config = load("mistral-7b-v0.3")
    assert config["architectures"] == ["MistralForCausalLM"] and config["sliding_window"] is None
    with pytest.warns(SpecWarning, match="head_dim missing"):
        assert model_from_hf_config(config).sliding_window is None
    v01 = config | {"sliding_window": 4096, "vocab_size": 32000, "rope_theta": 10000.0,
                    "head_dim": 128}
    window = model_from_hf_config(v01).sliding_window
    assert window is not None and (window.size, window.period, window.offset) == (4096, 1, 0)


def test_mistral_small_head_dim_is_not_hidden_over_heads() -> None:
    spec = model_from_hf_config(load("mistral-small-24b-2501"))
    assert spec.attention.kind == "gqa"
    assert (spec.attention.head_dim, spec.hidden_size // spec.attention.num_heads) == (128, 160)


def test_directory_path_reads_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(load("qwen3-32b")))
    assert model_from_hf_config(tmp_path).num_layers == 64


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"architectures": ["BertModel"]}, "architectures", "unsupported architecture 'BertModel'"),
        ({"architectures": None}, "architectures", "missing field"),
        ({"num_hidden_layers": None}, "num_hidden_layers", "missing field"),
        ({"hidden_size": "big"}, "hidden_size", "expected an integer"),
        ({"num_key_value_heads": 3}, "num_key_value_heads", "not divisible"),
        ({"mlp_only_layers": [3]}, "mlp_only_layers", "not supported"),
        # bool("no") is True: a string or list used to be taken for tied embeddings or not
        ({"tie_word_embeddings": "no"}, "tie_word_embeddings", "expected true or false, got 'no'"),
        ({"tie_word_embeddings": []}, "tie_word_embeddings", "expected true or false"),
        ({"text_config": "x"}, "text_config", "expected a mapping of the text model's fields"),
    ],
)
def test_bad_configs(tmp_path: Path, change: dict[str, Any], field: str, fragment: str) -> None:
    config = load("qwen3-30b-a3b") | change
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SpecError) as info:
        model_from_hf_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert info.value.field == field, message
    assert fragment in message


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        model_from_hf_config(path)


def test_head_dim_default_warns() -> None:
    config = load("mixtral-8x7b")
    with pytest.warns(SpecWarning, match="head_dim missing; using 128"):
        model_from_hf_config(config)


@pytest.mark.filterwarnings("ignore:.*head_dim missing")  # Llama-3.1 configs leave it out
def test_weight_format_from_quantization_config() -> None:
    """fp8 (DeepSeek-V3's quantization_config) -> FP8 linear layers, bf16 embeddings; mxfp4
    (gpt-oss) -> MXFP4 experts of a MoE; awq/gptq bits -> int4/int8; torch_dtype otherwise."""
    deepseek = model_from_hf_config(load("deepseek-v3"))
    assert (deepseek.weights.dtype, deepseek.weights.embeddings) == ("fp8", "bf16")
    oss = model_from_hf_config(load("gpt-oss-120b"))
    assert (oss.weights.dtype, oss.weights.experts) == ("bf16", "mxfp4")
    llama = load("llama-3.1-8b")
    assert model_from_hf_config(llama).weights.dtype == "bf16"
    for method, bits, dtype in (("awq", 4, "int4"), ("gptq", 8, "int8")):
        quant = {**llama, "quantization_config": {"quant_method": method, "bits": bits}}
        assert model_from_hf_config(quant).weights.dtype == dtype
    fp16 = {**llama, "torch_dtype": "float16"}
    assert model_from_hf_config(fp16).weights.embeddings == "fp16"


@pytest.mark.parametrize(("change", "field", "fragment"), [
    ({"quantization_config": {"quant_method": "bitsandbytes"}},
     "quantization_config.quant_method", "unsupported quantization 'bitsandbytes'"),
    ({"quantization_config": {"quant_method": "awq", "bits": 3}},
     "quantization_config.bits", "expected 4 or 8 bits"),
    ({"quantization_config": "fp8"}, "quantization_config", "expected a mapping"),
    ({"torch_dtype": "float64"}, "torch_dtype", "unsupported dtype 'float64'"),
])
@pytest.mark.filterwarnings("ignore:.*head_dim missing")
def test_bad_quantization_config(change: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        model_from_hf_config({**load("llama-3.1-8b"), **change})
    assert info.value.field == field and fragment in str(info.value)


@pytest.mark.parametrize(("name", "change", "field", "fragment"), [
    ("qwen3-next-80b-a3b", {"layer_types": ["full_attention"] * 47}, "layer_types",
     "expected a list of 48 layer types"),
    ("qwen3-next-80b-a3b", {"layer_types": ["linear_attention"] * 47 + ["mamba"]},
     "layer_types", "unknown layer type 'mamba'"),
    ("qwen3-next-80b-a3b", {"linear_num_value_heads": None}, "linear_num_value_heads",
     "missing field"),
    ("qwen3-next-80b-a3b", {"mamba_ssm_dtype": "float64"}, "mamba_ssm_dtype",
     "unsupported dtype"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": {"full_attn_layers": [1], "kda_layers": [2],
                                                    "num_heads": 32, "head_dim": 128,
                                                    "short_conv_kernel_size": 4}},
     "linear_attn_config", "must number the 27 layers from 1"),
    ("deepseek-v3.2", {"index_topk": None}, "index_topk", "missing field"),
])
def test_bad_layer_kind_configs(tmp_path: Path, name: str, change: dict[str, Any], field: str,
                                fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(load(name) | change))
    with pytest.raises(SpecError) as info:
        model_from_hf_config(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert info.value.field == field, str(info.value)
    assert fragment in str(info.value)


def test_wrapper_errors_name_the_text_config_field(tmp_path: Path) -> None:
    config = load("qwen3.5-27b")
    config["text_config"] = {k: v for k, v in config["text_config"].items()
                             if k != "linear_conv_kernel_dim"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SpecError) as info:
        model_from_hf_config(path)
    assert info.value.field == "text_config.linear_conv_kernel_dim"


def test_layer_kinds_from_class_layouts() -> None:
    """Where a config leaves the layout to its class: Qwen3-Next's full_attention_interval,
    Llama 4's NoPE layers, Gemma 3's sliding_window_pattern, Gemma 4's KV sharing."""
    next_ = model_from_hf_config(load("qwen3-next-80b-a3b"))
    assert [k.kind for _, k in next_.layer_kinds][:4] == ["linear", "linear", "linear", "full"]
    scout = model_from_hf_config(load("llama-4-scout-17b-16e"))
    assert scout.count_kind("chunked") == 36 and scout.count_kind("full") == 12
    with pytest.warns(SpecWarning, match="vocab_size missing; using 262208"):
        gemma3 = model_from_hf_config(load("gemma-3-27b"))
    assert gemma3.count_kind("sliding") == 52 and gemma3.tie_word_embeddings
    gemma4 = model_from_hf_config(load("gemma-4-e2b"))
    sources = {getattr(k, "source", None) for _, k in gemma4.layer_kinds[15:]}
    assert sources == {13, 14} and gemma4.count_kind("shared") == 20
