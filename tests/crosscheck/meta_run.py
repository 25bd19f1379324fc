"""Run transformers' own modelling code on the meta device and read off what kvroof computes.

Imported only by ``test_transformers.py``, after ``pytest.importorskip("transformers")``.

Nothing here knows kvroof's formulas: every number comes from transformers' classes (the module
tree of a model built from its HF ``config.json``, the tensors its ``DynamicCache`` holds after a
forward pass) and from torch's ``FlopCounterMode`` counting that forward pass. Meta tensors have
shapes and no data, so a 1T-parameter model is built in a second and a forward pass over 65,536
tokens costs only Python time.

How the forward pass is observed:

- the model runs with an attention implementation registered here (``kvroof_crosscheck``) for
  both ``AttentionInterface`` and ``AttentionMaskInterface``. Its mask function is called by the
  model's own mask code (``create_causal_mask``, ``create_sliding_window_causal_mask``) with the
  model's own mask function, sizes and offsets, and builds that mask with transformers'
  ``sdpa_mask`` on the CPU with real booleans, so the attention pairs a layer scores can be
  counted from the mask it is handed;
- its attention function runs the model module's own ``eager_attention_forward`` (sinks
  included) with a meta copy of that mask, and notes the FLOPs that call adds to the counter (the
  attention core of one layer, which torch counts over the whole ``queries x keys`` rectangle);
- MoE experts run with ``experts_implementation="batched_mm"``: every token is multiplied by its
  top-k experts' weights (one batched GEMM per (token, expert) pair), which is what an engine
  computes and needs no routing decision that meta tensors could not take.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForCausalLM, DynamicCache
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

HF_CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf_configs"
ATTENTION = "kvroof_crosscheck"
DTYPE = torch.bfloat16

# Keys of config.json that are not handed to the config class: the class named by
# `architectures` decides the model (Kimi-K2 writes model_type "kimi_k2", which transformers does
# not register, for the DeepseekV3ForCausalLM architecture it names); `auto_map` points at remote
# code that is never run; `quantization_config` is dropped so that every weight is a plain tensor
# whose element count is the logical parameter count (kvroof's weight formats are not checked).
DROPPED_KEYS = ("model_type", "auto_map", "quantization_config")


def raw_config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_CONFIGS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def architecture(name: str) -> str:
    return str(raw_config(name)["architectures"][0])


def model_class(name: str) -> type[Any] | None:
    """transformers' class for the model's architecture, or None when this version lacks it."""
    cls = getattr(transformers, architecture(name), None)
    return cls if isinstance(cls, type) else None


def hf_config(name: str, num_layers: int | None = None) -> Any:
    """The HF config object for ``name`` (the first ``num_layers`` layers when given)."""
    cls = model_class(name)
    assert cls is not None, f"transformers {transformers.__version__} lacks {architecture(name)}"
    data = {k: v for k, v in raw_config(name).items() if k not in DROPPED_KEYS}
    if num_layers is not None:
        data["num_hidden_layers"] = num_layers
        if isinstance(data.get("layer_types"), list):
            data["layer_types"] = data["layer_types"][:num_layers]
    return cls.config_class.from_dict(data)


def build(name: str, num_layers: int | None = None) -> Any:
    """The model on the meta device, bf16, observed attention, batched experts."""
    config = hf_config(name, num_layers)
    with torch.device("meta"):  # experts_implementation is ignored by dense models
        model = AutoModelForCausalLM.from_config(
            config, dtype=DTYPE, attn_implementation=ATTENTION, experts_implementation="batched_mm")
    assert type(model).__name__ == architecture(name)
    return model.eval()


@cache
def full_model(name: str) -> Any:
    """Every layer, as the checkpoint has them (parameters, layer kinds)."""
    return build(name)


def layer_signature(model: Any, index: int) -> tuple[Any, ...]:
    """What makes layer ``index`` cost what it costs: its parameter shapes and its attention type
    (``config.layer_types``, e.g. sliding or full)."""
    layer = model.model.layers[index]
    shapes = tuple((n, tuple(p.shape)) for n, p in layer.named_parameters())
    layer_types = getattr(model.config, "layer_types", None)
    return (layer_types[index] if layer_types else None, shapes)


@cache
def layer_kinds(name: str) -> tuple[int, ...]:
    """For each layer of the full model, the first layer with the same signature (its
    representative). Layers with equal signatures run the same code on the same shapes, so the
    FLOPs and cache bytes of a representative stand for every layer of its kind."""
    model = full_model(name)
    first: dict[tuple[Any, ...], int] = {}
    return tuple(first.setdefault(layer_signature(model, i), i)
                 for i in range(len(model.model.layers)))


@cache
def prefix_model(name: str) -> Any:
    """The first layers of the model, up to the last representative: every kind of layer once
    (the forward passes run on this one; a full 126-layer pass would take seconds each)."""
    depth = max(layer_kinds(name)) + 1
    model = build(name, depth)
    full = full_model(name)
    for i in range(depth):  # the prefix layers are the full model's first layers
        assert layer_signature(model, i) == layer_signature(full, i)
    return model


# --- the observed attention --------------------------------------------------------------------


@dataclass
class Core:
    """One layer's attention core as the forward pass ran it."""

    flops: int
    """FLOPs that torch counted for the core (QK^T and PV over the whole rectangle)."""
    queries: int
    keys: int
    pairs: int
    """True entries of the boolean mask the model built for this layer: the (query, key) pairs
    that take part."""


@dataclass
class _Recorder:
    counter: FlopCounterMode
    cores: dict[int, Core] = field(default_factory=dict)
    _pairs: dict[int, tuple[torch.Tensor, int]] = field(default_factory=dict)

    def pairs(self, mask: torch.Tensor) -> int:
        # every layer of a kind gets the same mask object: count it once
        key = id(mask)
        if key not in self._pairs:
            self._pairs[key] = (mask, int(np.count_nonzero(mask.numpy())))
        return self._pairs[key][1]


_ACTIVE: list[_Recorder] = []


def _mask(**kwargs: Any) -> torch.Tensor:
    shape = (kwargs["batch_size"], 1, kwargs["q_length"], kwargs["kv_length"])
    if not _ACTIVE:  # filling the cache: nothing is counted, the mask needs no values
        return torch.empty(shape, dtype=torch.bool, device="meta")
    mask = sdpa_mask(**{**kwargs, "allow_is_causal_skip": False, "device": "cpu"})
    assert mask is not None and tuple(mask.shape) == shape and mask.dtype == torch.bool
    return mask


def _attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor | None, **kwargs: Any) -> Any:
    eager: Callable[..., Any] = sys.modules[type(module).__module__].eager_attention_forward
    assert attention_mask is not None, "the observed attention always builds a mask"
    meta_mask = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device)
    if not _ACTIVE:
        return eager(module, query, key, value, meta_mask, **kwargs)
    recorder = _ACTIVE[-1]
    queries, keys = attention_mask.shape[-2:]
    assert query.shape[-2] == queries and key.shape[-2] == keys, "mask and tensors disagree"
    before = recorder.counter.get_total_flops()
    output = eager(module, query, key, value, meta_mask, **kwargs)
    recorder.cores[module.layer_idx] = Core(
        flops=recorder.counter.get_total_flops() - before, queries=queries, keys=keys,
        pairs=recorder.pairs(attention_mask))
    return output


AttentionInterface.register(ATTENTION, _attention)
AttentionMaskInterface.register(ATTENTION, _mask)


@contextmanager
def _recording(recorder: _Recorder) -> Iterator[None]:
    _ACTIVE.append(recorder)
    try:
        with recorder.counter:
            yield
    finally:
        _ACTIVE.pop()


# --- one prefill -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheLayer:
    """What one layer of the DynamicCache holds after the forward pass."""

    kind: str
    """The cache layer class (``DynamicLayer``, ``DynamicSlidingWindowLayer``, ...)."""
    tokens: int
    nbytes: int


@dataclass(frozen=True)
class Prefill:
    """T new tokens after K cached ones, on the prefix model."""

    root: str
    flops: dict[str, dict[str, int]]
    """FlopCounterMode's counts by module path (``Global`` is the whole pass) and operator."""
    cores: dict[int, Core]
    cache: tuple[CacheLayer, ...]

    def module_flops(self, path: str) -> int:
        """FLOPs counted inside ``path`` (relative to the model, e.g. ``model.layers.3.mlp``)."""
        key = "Global" if path == "Global" else f"{self.root}.{path}" if path else self.root
        return sum(self.flops.get(key, {}).values())


def _cache_argument(model: Any) -> str:
    params = inspect.signature(type(model).forward).parameters
    return "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.2x


@cache
def prefill(name: str, new_tokens: int, cached_tokens: int) -> Prefill:
    """Fill a cache with K tokens (a forward pass, not counted), then count a forward pass of T
    tokens with ``logits_to_keep=1`` (the LM head for the last position only)."""
    model = prefix_model(name)
    past = DynamicCache(config=model.config)
    argument = _cache_argument(model)

    def forward(tokens: int) -> Any:
        ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
        return model(input_ids=ids, use_cache=True, logits_to_keep=1, **{argument: past})

    with torch.no_grad():
        if cached_tokens:
            forward(cached_tokens)
        recorder = _Recorder(FlopCounterMode(display=False))
        with _recording(recorder):
            out = forward(new_tokens)
    assert tuple(out.logits.shape[:2]) == (1, 1)
    layers = tuple(
        CacheLayer(kind=type(layer).__name__, tokens=int(layer.keys.shape[-2]),
                   nbytes=sum(t.numel() * t.element_size() for t in (layer.keys, layer.values)))
        for layer in past.layers)
    counts = {path: {str(op): int(n) for op, n in ops.items()}
              for path, ops in recorder.counter.get_flop_counts().items()}
    return Prefill(root=type(model).__name__, flops=counts, cores=dict(recorder.cores),
                   cache=layers)
