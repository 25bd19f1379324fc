"""Every field ``model_from_hf_config`` reads is validated: a zero, negative, non-integer,
boolean, string, list or absurdly large value gives one :class:`SpecError` line that names the
file and the field (``num_attention_heads: 0`` used to raise ZeroDivisionError, a
``num_hidden_layers`` of 10^13 ran out of memory, and many values were reported under the spec's
own field names, ``attention.num_heads`` or ``max_context``, that the config does not have)."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from kvroof.errors import SpecError
from kvroof.specs.base import MAX_LAYERS
from kvroof.specs.hf import model_from_hf_config
from kvroof.specs.hf_fields import CONFIG_MAXIMA, HFConfig
from kvroof.specs.hf_layers import layer_fields
from tests.conftest import HF_CONFIGS

pytestmark = pytest.mark.filterwarnings("ignore::kvroof.specs.registry.SpecWarning")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_CONFIGS / f"{name}.json").read_text())
    return data


def with_value(name: str, field: str, value: Any) -> tuple[dict[str, Any], str]:
    """Config ``name`` with ``field`` (``a.b`` for a nested one) set to ``value``, and the name
    an error must give it (``text_config.`` first where a wrapper's text model holds it)."""
    config = load(name)
    text = config.get("text_config")
    top, _, sub = field.partition(".")
    holder = text if isinstance(text, dict) and (top in text or top not in config) else config
    prefix = "text_config." if holder is text else ""
    if sub:
        holder[top] = {**holder[top], sub: value}
    else:
        holder[top] = value
    return config, prefix + field


# (config, field): every integer field the import reads, from a config whose class reads it.
POSITIVE = [
    ("llama-3.1-8b", "num_hidden_layers"),
    ("llama-3.1-8b", "num_attention_heads"),  # no head_dim: hidden_size // heads
    ("qwen3-8b", "num_attention_heads"),
    ("llama-3.1-8b", "num_key_value_heads"),
    ("llama-3.1-8b", "hidden_size"),
    ("llama-3.1-8b", "intermediate_size"),
    ("llama-3.1-8b", "vocab_size"),
    ("llama-3.1-8b", "max_position_embeddings"),
    ("qwen3-8b", "head_dim"),
    ("deepseek-v3", "kv_lora_rank"),
    ("deepseek-v3", "qk_nope_head_dim"),
    ("deepseek-v3", "qk_rope_head_dim"),
    ("deepseek-v3", "v_head_dim"),
    ("deepseek-v3", "moe_intermediate_size"),
    ("deepseek-v3", "num_experts_per_tok"),
    ("mixtral-8x7b", "num_experts_per_tok"),
    ("gpt-oss-120b", "sliding_window"),
    ("gpt-oss-120b", "num_experts_per_tok"),
    ("qwen3-next-80b-a3b", "linear_num_key_heads"),
    ("qwen3-next-80b-a3b", "linear_num_value_heads"),
    ("qwen3-next-80b-a3b", "linear_key_head_dim"),
    ("qwen3-next-80b-a3b", "linear_value_head_dim"),
    ("qwen3-next-80b-a3b", "linear_conv_kernel_dim"),
    ("qwen3-next-80b-a3b", "full_attention_interval"),
    ("qwen3.5-27b", "linear_num_key_heads"),
    ("deepseek-v3.2", "index_n_heads"),
    ("deepseek-v3.2", "index_head_dim"),
    ("deepseek-v3.2", "index_topk"),
    ("llama-4-scout-17b-16e", "attention_chunk_size"),
    ("llama-4-scout-17b-16e", "num_local_experts"),
    ("llama-4-maverick-17b-128e", "interleave_moe_layer_step"),
    ("llama-4-maverick-17b-128e", "intermediate_size_mlp"),
    ("gemma-3-27b", "sliding_window_pattern"),
    ("gemma-3-27b", "sliding_window"),
    ("gemma-4-e2b", "global_head_dim"),
    ("gemma-4-e2b", "vocab_size_per_layer_input"),
    ("kimi-linear-48b-a3b", "linear_attn_config.num_heads"),
    ("kimi-linear-48b-a3b", "linear_attn_config.head_dim"),
    ("kimi-linear-48b-a3b", "linear_attn_config.short_conv_kernel_size"),
]
# ... and those where 0 means something (none, or every layer), so only negatives are wrong
NON_NEGATIVE = [
    ("deepseek-v3", "q_lora_rank"),  # 0 or null: no query compression
    ("deepseek-v3", "n_routed_experts"),  # 0: a dense FFN
    ("deepseek-v3", "n_shared_experts"),
    ("deepseek-v3", "first_k_dense_replace"),
    ("qwen3-next-80b-a3b", "shared_expert_intermediate_size"),
    ("gemma-4-e2b", "num_kv_shared_layers"),
    ("gemma-4-e2b", "hidden_size_per_layer_input"),
]
NOT_INTEGERS = [1.5, 64.0, True, False, "64", [64], {"value": 64}]


def check(config: dict[str, Any], field: str, tmp_path: Path, *fragments: str) -> SpecError:
    """The import of ``config`` (written to a file) fails with one line naming file and field."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SpecError) as info:
        model_from_hf_config(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    assert message.startswith(f"{path}: {field}: "), message
    assert info.value.field == field, message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


@pytest.mark.parametrize(("name", "field"), POSITIVE, ids="-".join)
@pytest.mark.parametrize("value", [0, -1, -(10**30)])
def test_zero_and_negative(tmp_path: Path, name: str, field: str, value: int) -> None:
    config, named = with_value(name, field, value)
    check(config, named, tmp_path, "expected a positive integer", f"got {value}")


@pytest.mark.parametrize(("name", "field"), NON_NEGATIVE, ids="-".join)
def test_negative_where_zero_is_allowed(tmp_path: Path, name: str, field: str) -> None:
    config, named = with_value(name, field, -1)
    check(config, named, tmp_path, "expected an integer >= 0, got -1")
    zero, _ = with_value(name, field, 0)
    model_from_hf_config(zero)  # 0 is fine


@pytest.mark.parametrize(("name", "field"), POSITIVE + NON_NEGATIVE, ids="-".join)
@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_not_an_integer(tmp_path: Path, name: str, field: str, value: Any) -> None:
    config, named = with_value(name, field, value)
    check(config, named, tmp_path, "expected an integer")


@pytest.mark.parametrize(("name", "field"), POSITIVE + NON_NEGATIVE, ids="-".join)
def test_absurdly_large(tmp_path: Path, name: str, field: str) -> None:
    config, named = with_value(name, field, 10**13)
    start = time.perf_counter()
    check(config, named, tmp_path, "expected at most", "got 10000000000000")
    assert time.perf_counter() - start < 5


# bounded by another field instead (the layer or expert count; test_field_relations_...)
RELATIVE = ("first_k_dense_replace", "interleave_moe_layer_step", "num_experts_per_tok")


@pytest.mark.parametrize(("name", "field"), [(name, field) for name, field in
                                             POSITIVE + NON_NEGATIVE if field not in RELATIVE],
                         ids="-".join)
def test_just_over_the_bound_of_its_kind(tmp_path: Path, name: str, field: str) -> None:
    """The bounds are the model spec's (layers, widths, heads, experts, vocabulary, tokens),
    checked first, so that the error names the config's field, not the spec's."""
    bound = CONFIG_MAXIMA[field.rpartition(".")[2]]
    config, named = with_value(name, field, bound + 1)
    check(config, named, tmp_path, f"expected at most {bound:,}, got {bound + 1}")


def test_zero_heads_is_not_a_division_by_zero(tmp_path: Path) -> None:
    """The issue's reproducer: a Llama config without head_dim and num_attention_heads 0."""
    config, named = with_value("llama-3.1-8b", "num_attention_heads", 0)
    error = check(config, named, tmp_path)
    assert not isinstance(error.__context__, ZeroDivisionError)


@pytest.mark.parametrize("layers", [MAX_LAYERS + 1, 10**6, 10**12, 2**31])
@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3.2", "qwen3-next-80b-a3b",
                                  "gemma-3-27b", "llama-4-scout-17b-16e"])
def test_layer_count_is_bounded(tmp_path: Path, name: str, layers: int) -> None:
    """10^6 layers used to take minutes and 10^12 all memory, before any check ran."""
    config, named = with_value(name, "num_hidden_layers", layers)
    start = time.perf_counter()
    check(config, named, tmp_path, f"expected at most {MAX_LAYERS:,}")
    assert time.perf_counter() - start < 5


def test_layer_kinds_of_the_most_layers_are_read_in_linear_time() -> None:
    """Per-layer work stays linear up to the bound (finding whether the sliding layers are
    periodic used to build a set of all layers per candidate period)."""
    layers = MAX_LAYERS
    types = ["sliding_attention"] * layers
    types[1] = types[layers - 2] = "full_attention"  # not periodic: every period is tried
    config = HFConfig({"layer_types": types, "sliding_window": 128}, None, "GptOssForCausalLM")
    attention = {"kind": "gqa", "num_heads": 8, "num_kv_heads": 8, "head_dim": 64}
    start = time.perf_counter()
    fields = layer_fields(config, layers, attention, "bf16")
    assert time.perf_counter() - start < 2
    assert fields is not None and len(fields["layers"]["pattern"]) == layers


@pytest.mark.parametrize(("name", "change", "field", "fragment"), [
    ("llama-3.1-8b", {"num_attention_heads": 8192}, "num_attention_heads",
     "8,192 heads exceed hidden_size (4,096)"),
    ("llama-3.1-8b", {"num_key_value_heads": 64}, "num_key_value_heads",
     "num_attention_heads (32) is not divisible by 64"),
    ("deepseek-v3", {"num_experts_per_tok": 257}, "num_experts_per_tok",
     "expected at most 256, got 257"),
    ("deepseek-v3", {"first_k_dense_replace": 62}, "first_k_dense_replace",
     "expected at most 61, got 62"),
    ("qwen3-next-80b-a3b", {"linear_num_key_heads": 3}, "linear_num_key_heads",
     "linear_num_value_heads (32) is not divisible by 3"),
    ("llama-4-maverick-17b-128e", {"interleave_moe_layer_step": 49},
     "text_config.interleave_moe_layer_step", "expected at most 48"),
    ("llama-4-maverick-17b-128e", {"no_rope_layers": [2] * 48}, "text_config.no_rope_layers",
     "entry 0: expected at most 1, got 2"),
    ("llama-4-maverick-17b-128e", {"moe_layers": ["1"]}, "text_config.moe_layers",
     "entry 0: expected an integer, got '1'"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": []}, "linear_attn_config",
     "expected a mapping"),
    ("qwen3-30b-a3b", {"mlp_only_layers": 3}, "mlp_only_layers", "expected a list, got 3"),
    ("qwen3-30b-a3b", {"mlp_only_layers": [-1]}, "mlp_only_layers", "entry 0"),
    ("qwen3-30b-a3b", {"decoder_sparse_step": 0}, "decoder_sparse_step", "positive integer"),
    ("qwen3-30b-a3b", {"sliding_window": 4096, "use_sliding_window": "yes"}, "use_sliding_window",
     "expected true or false, got 'yes'"),
    ("qwen3-30b-a3b", {"sliding_window": 4096, "use_sliding_window": True,
                       "max_window_layers": -1},
     "max_window_layers", "expected an integer >= 0, got -1"),
    ("qwen3-30b-a3b", {"num_experts": 0, "intermediate_size": None}, "num_experts",
     "0 experts means a dense FFN"),
    ("llama-4-scout-17b-16e", {"use_qk_norm": "false"}, "text_config.use_qk_norm",
     "expected true or false"),
    ("qwen3-next-80b-a3b", {"attn_output_gate": 1}, "attn_output_gate", "expected true or false"),
    ("gemma-4-e2b", {"use_double_wide_mlp": "no"}, "text_config.use_double_wide_mlp",
     "expected true or false"),
    ("gemma-4-e2b", {"attention_k_eq_v": 0}, "text_config.attention_k_eq_v",
     "expected true or false"),
    ("qwen3-next-80b-a3b", {"mamba_ssm_dtype": ["float32"]}, "mamba_ssm_dtype",
     "unsupported dtype"),
    ("qwen3.5-27b", {"dtype": 16}, "text_config.dtype", "unsupported dtype 16"),
    ("llama-3.1-8b", {"torch_dtype": {"x": 1}}, "torch_dtype", "unsupported dtype"),
    ("llama-3.1-8b", {"quantization_config": {"quant_method": "awq", "bits": 4.0}},
     "quantization_config.bits", "expected 4 or 8 bits"),
    ("llama-3.1-8b", {"quantization_config": {"quant_method": "gptq", "w_bit": True}},
     "quantization_config.w_bit", "expected 4 or 8 bits"),
    ("llama-3.1-8b", {"quantization_config": {"quant_method": ["fp8"]}},
     "quantization_config.quant_method", "expected a string"),
    ("llama-3.1-8b", {"_name_or_path": ["x"]}, "_name_or_path", "expected a string"),
])
def test_field_relations_and_other_types(tmp_path: Path, name: str, change: dict[str, Any],
                                         field: str, fragment: str) -> None:
    config = load(name)
    holder = config.get("text_config", config) if field.startswith("text_config.") else config
    holder.update(change)
    check(config, field, tmp_path, fragment)


BAD_VALUES = [0, -1, 2.5, True, "7", [], 10**13]


@pytest.mark.parametrize("path", sorted(HF_CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_every_field_of_every_config_fails_cleanly(path: Path) -> None:
    """Any field of a real config set to a bad value: the import succeeds (a field kvroof does
    not read, or one where the value means something) or raises a SpecError naming that field
    (or, for a value that contradicts another field, one the message names); nothing else."""
    base = json.loads(path.read_text())
    text = base.get("text_config")
    fields = [(k, None) for k in (text if isinstance(text, dict) else base)]
    fields += [(k, s) for k, v in (text or base).items() if isinstance(v, dict) for s in v]
    for key, sub in fields:
        for value in BAD_VALUES:
            config = json.loads(path.read_text())
            holder = config.get("text_config", config)
            if sub is None:
                holder[key] = value
            else:
                holder[key] = {**holder[key], sub: value}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model_from_hf_config(config)
            except SpecError as error:
                message = str(error)
                assert "\n" not in message
                assert key in message or (sub is not None and sub in message), \
                    f"{key}{'.' + sub if sub else ''}={value!r}: {message}"
