"""Per-layer attention kinds from a HuggingFace config: ``layer_types`` where a config writes
them, else the layout its class fixes.

- ``layer_types`` (Qwen3.5, Gemma 4, gpt-oss, newer Gemma 3 and Llama 4 saves):
  ``full_attention``, ``sliding_attention`` (window ``sliding_window``), ``chunked_attention``
  (chunk ``attention_chunk_size``), ``linear_attention`` (a Gated DeltaNet layer);
- Qwen3-Next without ``layer_types``: layer ``i`` is full attention when ``(i + 1) %
  full_attention_interval == 0`` (default 4), else Gated DeltaNet;
- Llama 4: layer ``i`` attends within chunks when ``no_rope_layers[i]`` is 1 (default: ``(i + 1)
  % no_rope_layer_interval != 0``, interval 4) and ``attention_chunk_size`` is set, else to
  everything (a NoPE layer);
- Gemma 3 without ``layer_types``: layer ``i`` slides when ``(i + 1) % sliding_window_pattern !=
  0`` (default 6);
- Kimi Linear: ``linear_attn_config.kda_layers`` and ``full_attn_layers`` (1-based);
- DeepSeek-V3.2: every layer is sparse (DSA) with the ``index_*`` indexer;
- Gemma 4 ``num_kv_shared_layers`` ``n``: the last ``n`` layers reuse the KV of the last earlier
  layer of their type (and, with ``use_double_wide_mlp``, have a twice as wide MLP); full layers
  use ``global_head_dim`` and, with ``attention_k_eq_v``, ``num_global_key_value_heads``.

A model with full and sliding layers only, one attention shape and a window on every
``period``-th layer is written with the short ``sliding_window`` field, as before.

Linear layers' recurrent state is fp32 unless ``mamba_ssm_dtype`` says otherwise (SGLang's
default; vLLM keeps Qwen3-Next's in the model dtype unless ``--mamba-ssm-cache-dtype float32``),
their convolution state in the model dtype.
"""

from __future__ import annotations

from typing import Any, Final

from kvroof.errors import short_repr
from kvroof.specs.hf_fields import HFConfig

__all__ = ["GEMMA3", "GEMMA4", "LLAMA4", "QWEN_LINEAR", "layer_fields"]

LLAMA4: Final = frozenset({"Llama4ForConditionalGeneration", "Llama4ForCausalLM"})
GEMMA3: Final = frozenset({"Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"})
GEMMA4: Final = frozenset({"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"})
QWEN_LINEAR: Final = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration",
                                "Qwen3_5MoeForConditionalGeneration"})
_TYPES: Final = {"full_attention": "full", "sliding_attention": "sliding",
                 "chunked_attention": "chunked", "linear_attention": "linear"}
_DTYPES: Final = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _explicit_types(cfg: HFConfig, num_layers: int) -> list[str] | None:
    raw = cfg.optional_list("layer_types")
    if raw is None:
        return None
    if len(raw) != num_layers:
        raise cfg.error("layer_types", f"expected a list of {num_layers} layer types, got "
                                       f"{len(raw)}")
    unknown = [t for t in raw if not (isinstance(t, str) and t in _TYPES)]
    if unknown:  # (a list: the values may be anything, unhashable too)
        raise cfg.error("layer_types", f"unknown layer type {short_repr(unknown[0])} (known: "
                                       f"{', '.join(_TYPES)})")
    return [_TYPES[t] for t in raw]


def _kimi_config(cfg: HFConfig) -> HFConfig:
    return cfg.section("linear_attn_config", "a mapping with kda_layers and full_attn_layers")


def _kimi_types(cfg: HFConfig, num_layers: int) -> list[str]:
    config = _kimi_config(cfg)
    full = config.optional_int_list("full_attn_layers", minimum=1, maximum=num_layers)
    kda = config.optional_int_list("kda_layers", minimum=1, maximum=num_layers)
    if full is None or kda is None:
        raise cfg.error("linear_attn_config", "expected lists full_attn_layers and kda_layers")
    if sorted([*full, *kda]) != list(range(1, num_layers + 1)):
        raise cfg.error("linear_attn_config", f"full_attn_layers and kda_layers must number "
                                              f"the {num_layers} layers from 1, once each")
    full_layers = set(full)
    return ["full" if i + 1 in full_layers else "linear" for i in range(num_layers)]


def _types(cfg: HFConfig, num_layers: int) -> list[str] | None:
    arch = cfg.architecture
    if arch == "DeepseekV32ForCausalLM":
        return ["sparse"] * num_layers
    if arch == "KimiLinearForCausalLM":
        return _kimi_types(cfg, num_layers)
    explicit = _explicit_types(cfg, num_layers)
    if explicit is not None:
        return explicit
    if arch == "Qwen3NextForCausalLM":
        interval = cfg.optional_int("full_attention_interval", 4)
        assert interval is not None
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(num_layers)]
    if arch in LLAMA4:
        chunked = cfg.has("attention_chunk_size")
        no_rope = cfg.optional_int_list("no_rope_layers", minimum=0, maximum=1)
        if no_rope is None:
            interval = cfg.optional_int("no_rope_layer_interval", 4)
            assert interval is not None
            no_rope = [int((i + 1) % interval != 0) for i in range(num_layers)]
        if len(no_rope) != num_layers:
            raise cfg.error("no_rope_layers", f"expected {num_layers} entries")
        return ["chunked" if flag and chunked else "full" for flag in no_rope]
    if arch in GEMMA3:
        pattern = cfg.optional_int("sliding_window_pattern", 6)
        assert pattern is not None
        return ["sliding" if (i + 1) % pattern else "full" for i in range(num_layers)]
    return None


def _linear_kind(cfg: HFConfig, model_dtype: str) -> dict[str, Any]:
    if cfg.architecture == "KimiLinearForCausalLM":
        config = _kimi_config(cfg)
        heads = config.integer("num_heads")
        head_dim = config.integer("head_dim")
        kernel = config.integer("short_conv_kernel_size")
        return {"kind": "linear", "variant": "kda", "num_key_heads": heads,
                "num_value_heads": heads, "key_head_dim": head_dim, "value_head_dim": head_dim,
                "conv_kernel": kernel, "state_dtype": "fp32", "conv_dtype": model_dtype}
    raw = cfg.data.get("mamba_ssm_dtype")
    state = "fp32" if raw is None else _DTYPES.get(raw) if isinstance(raw, str) else None
    if state is None:
        raise cfg.error("mamba_ssm_dtype", f"unsupported dtype {short_repr(raw)} (expected one "
                                           f"of {', '.join(_DTYPES)})")
    key_heads = cfg.integer("linear_num_key_heads")
    value_heads = cfg.integer("linear_num_value_heads")
    cfg.check_divides("linear_num_key_heads", key_heads, value_heads, "linear_num_value_heads")
    return {"kind": "linear", "variant": "gated-deltanet",
            "num_key_heads": key_heads,
            "num_value_heads": value_heads,
            "key_head_dim": cfg.integer("linear_key_head_dim"),
            "value_head_dim": cfg.integer("linear_value_head_dim"),
            "conv_kernel": cfg.integer("linear_conv_kernel_dim"),
            "state_dtype": state, "conv_dtype": model_dtype}


def _kind(cfg: HFConfig, name: str, attention: dict[str, Any], model_dtype: str) -> dict[str, Any]:
    if name == "full":
        kind: dict[str, Any] = {"kind": "full"}
        if cfg.architecture in GEMMA4:
            own = dict(attention, head_dim=cfg.optional_int("global_head_dim", 512))
            if cfg.flag("attention_k_eq_v", False) and cfg.has("num_global_key_value_heads"):
                kv = cfg.integer("num_global_key_value_heads")
                cfg.check_divides("num_global_key_value_heads", kv, own["num_heads"],
                                  "num_attention_heads")
                own["num_kv_heads"] = kv
                own["kind"] = "mqa" if kv == 1 else "mha" if kv == own["num_heads"] else "gqa"
            if own != attention:
                kind["attention"] = own
        return kind
    if name == "sliding":
        return {"kind": "sliding", "window": cfg.integer("sliding_window")}
    if name == "chunked":
        return {"kind": "chunked", "chunk": cfg.integer("attention_chunk_size")}
    if name == "linear":
        return _linear_kind(cfg, model_dtype)
    return {"kind": "sparse", "indexer": {"num_heads": cfg.integer("index_n_heads"),
                                          "head_dim": cfg.integer("index_head_dim"),
                                          "topk": cfg.integer("index_topk")}}


def _periodic_window(types: list[str]) -> tuple[int, int] | None:
    """(period, offset) when the sliding layers are exactly every ``period``-th from
    ``offset``."""
    sliding = {i for i, t in enumerate(types) if t == "sliding"}
    for period in range(1, len(types) + 1):
        offset = min(sliding) % period
        every = range(offset, len(types), period)
        if len(every) == len(sliding) and sliding.issuperset(every):  # O(layers) in all
            return period, offset
    return None


def layer_fields(cfg: HFConfig, num_layers: int, attention: dict[str, Any],
                 model_dtype: str) -> dict[str, Any] | None:
    """``{"layers": ...}`` or ``{"sliding_window": ...}`` for the config's layer kinds (None:
    the class has no layer kinds and the caller reads a plain ``sliding_window``)."""
    types = _types(cfg, num_layers)
    if types is None:
        return None
    kinds = {name: _kind(cfg, name, attention, model_dtype) for name in dict.fromkeys(types)}
    names = list(types)
    shared = 0
    if cfg.architecture in GEMMA4:
        shared = cfg.optional_int("num_kv_shared_layers", 0, minimum=0) or 0
    if shared:
        first = num_layers - shared
        if first < 1:
            raise cfg.error("num_kv_shared_layers", f"leaves no layer of the {num_layers} to "
                                                    "keep KV")
        wide = cfg.flag("use_double_wide_mlp", False)
        last_of_type = {t: j for j, t in enumerate(types[:first])}  # the last earlier layer
        for i in range(first, num_layers):
            if types[i] not in last_of_type:
                raise cfg.error("num_kv_shared_layers", f"layer {i} ({types[i]}) has no earlier "
                                                        "layer of its type to share KV with")
            name = f"shared_{types[i]}"
            kinds[name] = {"kind": "shared", "source": last_of_type[types[i]]}
            if wide:
                kinds[name]["ffn_intermediate_size"] = 2 * cfg.integer("intermediate_size")
            names[i] = name
    plain = set(names) <= {"full", "sliding"} and "attention" not in kinds.get("full", {})
    if plain and "sliding" not in names:
        return {}
    if plain:
        periodic = _periodic_window(types)
        if periodic is not None:
            return {"sliding_window": {"size": kinds["sliding"]["window"],
                                       "period": periodic[0], "offset": periodic[1]}}
    used = {name: kind for name, kind in kinds.items() if name in names}
    return {"layers": {"kinds": {k: v for k, v in used.items() if v != {"kind": "full"}},
                       "pattern": names}}
