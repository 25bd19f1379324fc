"""Run transformers' own modelling code on the meta device and read off what kvroof computes.

Imported only by ``test_transformers.py``, after ``pytest.importorskip("transformers")``.

Nothing here knows kvroof's formulas: every number comes from transformers' classes (the module
tree of a model built from its HF ``config.json``, the tensors its ``DynamicCache`` holds after a
forward pass, the masks its mask code builds) and from torch's ``FlopCounterMode`` counting that
forward pass. Meta tensors have shapes and no data, so a 1T-parameter model is built in a second
and a forward pass over 65,536 tokens costs only Python time.

What is built: the class the config names, or, for a vision-language wrapper
(``*ForConditionalGeneration`` with a ``text_config``), transformers' causal-LM class of its text
model (``AutoModelForCausalLM`` on the wrapper's own text config: Gemma3ForCausalLM,
Gemma4ForCausalLM, Llama4ForCausalLM, Qwen3_5(Moe)ForCausalLM), as kvroof models only the
language model.

How the forward pass is observed:

- the model runs with an attention implementation registered here (``kvroof_crosscheck``) for
  both ``AttentionInterface`` and ``AttentionMaskInterface``. Its mask function is called by the
  model's own mask code (``create_causal_mask``, ``create_sliding_window_causal_mask``,
  ``create_chunked_causal_mask``) with the model's own mask function, sizes and offsets, builds
  that mask with transformers' ``sdpa_mask`` on the CPU with real booleans, and hands the model
  a meta tensor of the same shape (so that a model that computes with its mask, as the DSA
  indexer does, runs on the meta device); the CPU mask is kept beside it, so the attention pairs
  a layer scores can be counted from the mask it is handed. A chunked mask function closes over
  the left-padding counts the mask code makes on the model's device (``torch.zeros(batch)``
  without an attention mask): meta tensors without values, remade here as zeros on the CPU;
- its attention function runs the model module's own ``eager_attention_forward`` (sinks
  included) and notes the FLOPs that call adds to the counter (the attention core of one layer,
  which torch counts over the whole ``queries x keys`` rectangle). A DeepSeek-V3.2 layer hands it
  its indexer's top-k key indices beside the mask (meta tensors: the selection needs scores that
  meta tensors do not have, but ``topk`` gives them their shape); the top-k of a row whose
  masked keys score ``-inf`` keeps ``min(unmasked, k)`` of its unmasked keys whatever the
  scores, which is what is counted;
- MoE experts run with ``experts_implementation="batched_mm"``: every token is multiplied by its
  top-k experts' weights (one batched GEMM per (token, expert) pair), which is what an engine
  computes and needs no routing decision that meta tensors could not take.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
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
    """The class the config names (a wrapper's, for a vision-language checkpoint)."""
    return str(raw_config(name)["architectures"][0])


def named_class(name: str) -> type[Any] | None:
    """transformers' class for the config's architecture, or None when this version lacks it."""
    cls = getattr(transformers, architecture(name), None)
    return cls if isinstance(cls, type) else None


def _truncate(data: dict[str, Any], num_layers: int) -> dict[str, Any]:
    """A (text) config's fields for its first ``num_layers`` layers: the layer count and the
    per-layer lists that go with it (``layer_types``; Kimi Linear's 1-based layer lists; Gemma
    4's ``num_kv_shared_layers``, the last layers, which keep their index from the end)."""
    data = dict(data)
    total = data["num_hidden_layers"]
    data["num_hidden_layers"] = num_layers
    if isinstance(data.get("layer_types"), list):
        data["layer_types"] = data["layer_types"][:num_layers]
    if isinstance(data.get("linear_attn_config"), dict):
        linear = dict(data["linear_attn_config"])
        for key in ("kda_layers", "full_attn_layers"):
            linear[key] = [i for i in linear[key] if i <= num_layers]
        data["linear_attn_config"] = linear
    if data.get("num_kv_shared_layers"):
        data["num_kv_shared_layers"] = max(0, num_layers - (total - data["num_kv_shared_layers"]))
    return data


def hf_config(name: str, num_layers: int | None = None) -> Any:
    """The HF config object of the model that is built (a wrapper's text config), with its first
    ``num_layers`` layers when given."""
    cls = named_class(name)
    assert cls is not None, f"transformers {transformers.__version__} lacks {architecture(name)}"
    data = {k: v for k, v in raw_config(name).items() if k not in DROPPED_KEYS}
    text = data.get("text_config")
    if isinstance(text, dict):
        if num_layers is not None:
            data["text_config"] = _truncate(text, num_layers)
        return cls.config_class.from_dict(data).get_text_config()
    if num_layers is not None:
        data = _truncate(data, num_layers)
    return cls.config_class.from_dict(data)


def built_class(name: str) -> str:
    """The class that is built: the named one, or a wrapper's text causal-LM class."""
    config = hf_config(name, 1)
    if "text_config" not in raw_config(name):
        return architecture(name)
    return str(transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(config)].__name__)


def build(name: str, num_layers: int | None = None) -> Any:
    """The model on the meta device, bf16, observed attention, batched experts."""
    config = hf_config(name, num_layers)
    with torch.device("meta"):  # experts_implementation is ignored by dense models
        model = AutoModelForCausalLM.from_config(
            config, dtype=DTYPE, attn_implementation=ATTENTION, experts_implementation="batched_mm")
    assert type(model).__name__ == built_class(name)
    return model.eval()


@cache
def full_model(name: str) -> Any:
    """Every layer, as the checkpoint has them (parameters, layer kinds)."""
    return build(name)


def layer_type(model: Any, index: int) -> str | None:
    layer_types = getattr(model.config, "layer_types", None)
    return str(layer_types[index]) if layer_types else None


def layer_signature(model: Any, index: int) -> tuple[Any, ...]:
    """What makes layer ``index`` cost what it costs: its parameter shapes, its attention type
    (``config.layer_types``, e.g. sliding or full) and whether it keeps KV or reuses another's
    (Gemma 4's ``kv_sharing_modes``)."""
    layer = model.model.layers[index]
    shapes = tuple((n, tuple(p.shape)) for n, p in layer.named_parameters())
    sharing = getattr(model.config, "kv_sharing_modes", None)
    return (layer_type(model, index), shapes, sharing[index] == "reuse" if sharing else False)


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
    """(query, key) pairs that take part: the True entries of the boolean mask the model built
    for this layer (with a top-k selection, each query's ``min(unmasked, k)``)."""
    causal_pairs: int
    """True entries of the mask the model built, before any top-k selection."""
    cached_needed: int
    """Cached key positions (the columns before the new tokens') that some query of the pass
    sees: what this layer needs of the cache to continue it."""


@dataclass(frozen=True)
class _Mask:
    cpu: np.ndarray
    """The boolean mask, one batch row: queries x keys."""
    pairs: int
    needed: int


@dataclass
class _Recorder:
    counter: FlopCounterMode
    cores: dict[int, Core] = field(default_factory=dict)
    masks: dict[int, tuple[torch.Tensor, _Mask]] = field(default_factory=dict)
    """The CPU mask behind each meta mask handed to the model (by id; the tensor is kept so that
    its id is not reused)."""

    def mask(self, attention_mask: torch.Tensor) -> _Mask | None:
        for tensor in (attention_mask, attention_mask._base):
            if tensor is not None and id(tensor) in self.masks:
                return self.masks[id(tensor)][1]
        return None


_ACTIVE: list[_Recorder] = []


def _left_padding_on_cpu(function: Any) -> Any:
    """``function`` with the meta tensors its closures hold remade on the CPU. The only ones the
    mask code makes are the left-padding counts of ``chunked_overlay`` (``left_padding``, created
    as ``torch.zeros(batch_size, device=...)`` when no attention mask is given), zeros."""
    if not isinstance(function, types.FunctionType) or not function.__closure__:
        return function
    cells = []
    changed = False
    for cell_name, cell in zip(function.__code__.co_freevars, function.__closure__, strict=True):
        value = cell.cell_contents
        new: Any = value
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            assert cell_name == "left_padding", f"a meta tensor {cell_name} in a mask function"
            new = torch.zeros(value.shape, dtype=value.dtype)
        elif isinstance(value, types.FunctionType):
            new = _left_padding_on_cpu(value)
        elif isinstance(value, tuple) and all(callable(v) for v in value):
            new = tuple(_left_padding_on_cpu(v) for v in value)
            new = value if all(a is b for a, b in zip(new, value, strict=True)) else new
        changed = changed or new is not value
        cells.append(types.CellType(new))
    if not changed:
        return function
    return types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, tuple(cells))


def _mask(**kwargs: Any) -> torch.Tensor:
    shape = (kwargs["batch_size"], 1, kwargs["q_length"], kwargs["kv_length"])
    meta = torch.empty(shape, dtype=torch.bool, device="meta")
    if not _ACTIVE:  # filling the cache: nothing is counted, the mask needs no values
        return meta
    mask = sdpa_mask(**{**kwargs, "allow_is_causal_skip": False, "device": "cpu",
                        "mask_function": _left_padding_on_cpu(kwargs["mask_function"])})
    assert mask is not None and tuple(mask.shape) == shape and mask.dtype == torch.bool
    rows = mask[0, 0].numpy()
    cached = kwargs["kv_length"] - kwargs["q_length"]
    needed = int(np.count_nonzero(rows[:, :cached].any(axis=0))) if cached else 0
    _ACTIVE[-1].masks[id(meta)] = (meta, _Mask(rows, int(np.count_nonzero(rows)), needed))
    return meta


def _attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor | None, **kwargs: Any) -> Any:
    eager: Callable[..., Any] = sys.modules[type(module).__module__].eager_attention_forward
    assert attention_mask is not None, "the observed attention always builds a mask"
    additive = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device)
    # DeepSeek-V3.2 hands an implementation other than eager and sdpa the indexer's top-k key
    # indices beside the layer's own mask (its eager path would fold them into the mask instead)
    indices = kwargs.pop("indices", None)
    if not _ACTIVE:
        return eager(module, query, key, value, additive, **kwargs)
    recorder = _ACTIVE[-1]
    queries, keys = attention_mask.shape[-2:]
    assert query.shape[-2] == queries and key.shape[-2] == keys, "mask and tensors disagree"
    mask = recorder.mask(attention_mask)
    assert mask is not None, "a layer's mask is not one the mask interface built"
    assert mask.cpu.shape == (queries, keys)
    pairs = mask.pairs
    if indices is not None:  # a query attends to its top-k keys: min(unmasked, k) of them
        assert tuple(indices.shape) == (1, queries, min(module.indexer.index_topk, keys))
        pairs = int(np.minimum(mask.cpu.sum(axis=1), indices.shape[-1]).sum())
    before = recorder.counter.get_total_flops()
    output = eager(module, query, key, value, additive, **kwargs)
    recorder.cores[module.layer_idx] = Core(
        flops=recorder.counter.get_total_flops() - before, queries=queries, keys=keys,
        pairs=pairs, causal_pairs=mask.pairs, cached_needed=mask.needed)
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
class Tensor:
    shape: tuple[int, ...]
    itemsize: int

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


def _tensor(value: Any) -> Tensor | None:
    if not isinstance(value, torch.Tensor):
        return None
    return Tensor(tuple(int(n) for n in value.shape), value.element_size())


@dataclass(frozen=True)
class CacheLayer:
    """What one layer of the DynamicCache holds after the forward pass."""

    kind: str
    """The cache layer class (``DynamicLayer``, ``DynamicSlidingWindowLayer``,
    ``LinearAttentionLayer``, ``DynamicIndexedLayer``, ...)."""
    keys: Tensor | None
    values: Tensor | None
    indexer_keys: Tensor | None
    conv: Tensor | None
    recurrent: Tensor | None

    @property
    def tokens(self) -> int:
        """Positions held (keys along the sequence axis, ``[batch, heads, seq, dim]``)."""
        return self.keys.shape[-2] if self.keys is not None else 0

    @property
    def kv_bytes(self) -> int:
        """Bytes of what it holds per position (keys, values and indexer keys), all positions."""
        return sum(t.nbytes for t in (self.keys, self.values, self.indexer_keys) if t is not None)


def _cache_layer(layer: Any) -> CacheLayer:
    def state(states: Any) -> Tensor | None:
        if not isinstance(states, dict):
            return None
        assert len(states) == 1, "one conv and one recurrent state per layer"
        return _tensor(states[0])

    return CacheLayer(kind=type(layer).__name__, keys=_tensor(getattr(layer, "keys", None)),
                      values=_tensor(getattr(layer, "values", None)),
                      indexer_keys=_tensor(getattr(layer, "indexer_keys", None)),
                      conv=state(getattr(layer, "conv_states", None)),
                      recurrent=state(getattr(layer, "recurrent_states", None)))


@dataclass(frozen=True)
class Absorbed:
    """An MLA layer's attention in the absorbed form, counted by torch on the module's own
    weight shapes: the query's nope part into the latent space and the latent output back through
    ``kv_b_proj``'s key and value halves (per query), and the scores on the latent and RoPE key
    and the weighted sum of latents (over the ``queries x keys`` rectangle)."""

    per_query: int
    rectangle: int
    queries: int
    keys: int


def absorbed_mla(module: Any, queries: int, keys: int) -> Absorbed:
    """Count the absorbed form of ``module``'s attention (vLLM's and SGLang's MLA kernels, the
    sparse FlashMLA kernel of DSA layers) for ``queries`` queries on ``keys`` keys."""
    heads, nope = module.num_heads, module.qk_nope_head_dim
    rope, v, lora = module.qk_rope_head_dim, module.v_head_dim, module.kv_lora_rank
    weight = module.kv_b_proj.weight.view(heads, nope + v, lora)
    w_uk, w_uv = weight[:, :nope], weight[:, nope:]

    def meta(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=weight.dtype, device="meta")

    q_nope, q_rope = meta(heads, queries, nope), meta(heads, queries, rope)
    latent, k_rope = meta(1, keys, lora), meta(1, keys, rope)
    with FlopCounterMode(display=False) as per_query:
        q_latent = q_nope @ w_uk  # (heads, queries, lora)
        o_latent = meta(heads, queries, lora)
        o_latent @ w_uv.transpose(1, 2)  # (heads, queries, v)
    with FlopCounterMode(display=False) as rectangle:
        scores = q_latent @ latent.transpose(1, 2) + q_rope @ k_rope.transpose(1, 2)
        scores @ latent  # (heads, queries, lora)
    return Absorbed(per_query.get_total_flops(), rectangle.get_total_flops(), queries, keys)


@dataclass(frozen=True)
class Prefill:
    """T new tokens after K cached ones, on the prefix model."""

    root: str
    flops: dict[str, dict[str, int]]
    """FlopCounterMode's counts by module path (``Global`` is the whole pass) and operator."""
    cores: dict[int, Core]
    cache: tuple[CacheLayer, ...]
    absorbed: dict[int, Absorbed]
    """Sparse (DSA) layers' attention in the absorbed form, by layer."""

    def module_flops(self, path: str, op: str | None = None) -> int:
        """FLOPs counted inside ``path`` (relative to the model, e.g. ``model.layers.3.mlp``),
        of operator ``op`` only when given (e.g. ``aten.convolution``)."""
        key = "Global" if path == "Global" else f"{self.root}.{path}" if path else self.root
        counts = self.flops.get(key, {})
        return sum(n for name, n in counts.items() if op is None or name == op)


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
        # output_hidden_states keeps every position through every layer: with logits_to_keep
        # alone, Gemma 4 drops all but the kept logits' positions before its KV-sharing layers
        # (_maybe_slice_kv_shared_inputs, what vLLM's kv_sharing_fast_prefill option does, off by
        # default); an engine's prefill runs every prompt token through them
        return model(input_ids=ids, use_cache=True, logits_to_keep=1, output_hidden_states=True,
                     **{argument: past})

    with torch.no_grad():
        if cached_tokens:
            forward(cached_tokens)
        recorder = _Recorder(FlopCounterMode(display=False))
        with _recording(recorder):
            out = forward(new_tokens)
    assert tuple(out.logits.shape[:2]) == (1, 1)
    absorbed = {
        index: absorbed_mla(layer.self_attn, new_tokens, recorder.cores[index].keys)
        for index, layer in enumerate(model.model.layers)
        if hasattr(getattr(layer, "self_attn", None), "indexer")}
    counts = {path: {str(op): int(n) for op, n in ops.items()}
              for path, ops in recorder.counter.get_flop_counts().items()}
    return Prefill(root=type(model).__name__, flops=counts, cores=dict(recorder.cores),
                   cache=tuple(_cache_layer(layer) for layer in past.layers), absorbed=absorbed)


def run_module(module: Any, tokens: int, width: int) -> int:
    """FLOPs torch counts for ``module`` (a full model's own submodule) on ``tokens`` tokens of
    ``width`` (a model-level projection the prefix model has at its own depth)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(torch.empty((1, tokens, width), dtype=DTYPE, device="meta"))
    return int(counter.get_total_flops())
