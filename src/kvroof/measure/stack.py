"""The synthetic decoder stack the prefill benchmark times, in torch: its weights, its KV on
the device and in host memory, and the attention variant it runs.

:func:`pick_attention` chooses the first ``scaled_dot_product_attention`` variant (a lower-right
causal bias or a boolean mask, with ``enable_gqa`` or KV heads repeated) that runs on this torch
and device and matches a float32 reference; :class:`SyntheticStack` runs the layers. torch is
passed in by the caller (imported only when a benchmark runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import import_module
from typing import Any

from kvroof.errors import KvroofError
from kvroof.measure.device import DeviceKind
from kvroof.measure.layer import LayerShape

__all__ = ["SyntheticStack", "attention_name", "make_attention", "pick_attention"]


_ATTENTION_IMPLS: tuple[tuple[str, bool], ...] = (
    ("causal_lower_right", True),
    ("causal_lower_right", False),
    ("boolean mask", True),
    ("boolean mask", False),
)


def attention_name(mask: str, gqa: bool) -> str:
    """How the JSON summary names an attention variant."""
    heads = "enable_gqa" if gqa else "KV heads repeated to the query heads"
    return f"scaled_dot_product_attention, {mask}, {heads}"


def make_attention(torch: Any, mask_kind: str, gqa: bool, t: int, s: int, group: int,
                   device: DeviceKind) -> Callable[[Any, Any, Any], Any]:
    """Attention of ``t`` queries over ``s`` keys, query ``i`` seeing keys ``<= s - t + i``."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    mask: Any
    if mask_kind == "causal_lower_right":
        mask = import_module("torch.nn.attention.bias").causal_lower_right(t, s)
    else:
        mask = torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)

    def attend(q: Any, k: Any, v: Any) -> Any:
        if gqa:
            return sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
        return sdpa(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                    attn_mask=mask)

    return attend


def pick_attention(torch: Any, shape: LayerShape,
                   device: DeviceKind) -> tuple[str, bool, list[str]]:
    """The first attention variant that runs here and matches a float32 reference: its mask
    kind, whether it uses ``enable_gqa``, and why each variant before it was rejected."""
    t, k = 8, 24
    s, group = k + t, shape.num_heads // shape.num_kv_heads
    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*size: int) -> Any:
        return torch.randn(*size, generator=gen).to(device=device, dtype=torch.bfloat16)

    # Keys and values as the stack passes them: token-major cache rows, viewed head-major.
    q = rand(1, shape.num_heads, t, shape.head_dim)
    keys = rand(s, shape.num_kv_heads, shape.head_dim).transpose(0, 1).unsqueeze(0)
    values = rand(s, shape.num_kv_heads, shape.head_dim).transpose(0, 1).unsqueeze(0)
    k_rep = keys.float().repeat_interleave(group, dim=1)
    v_rep = values.float().repeat_interleave(group, dim=1)
    allowed = torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)
    scores = (q.float() @ k_rep.transpose(-1, -2)) / math.sqrt(shape.head_dim)
    reference = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v_rep
    rejected: list[str] = []
    for mask_kind, gqa in _ATTENTION_IMPLS:
        name = attention_name(mask_kind, gqa)
        try:
            out = make_attention(torch, mask_kind, gqa, t, s, group, device)(q, keys, values)
            error = float((out.float() - reference).abs().max())
        except (RuntimeError, TypeError, ValueError, ImportError) as problem:
            lines = str(problem).strip().splitlines() or [type(problem).__name__]
            rejected.append(f"{name}: {lines[0][:160]}")
            continue
        if error <= 5e-2:
            return mask_kind, gqa, rejected
        rejected.append(f"{name}: differs from the reference by {error:.3g}")
    raise KvroofError(f"prefill: no attention variant works here ({'; '.join(rejected)})")


class SyntheticStack:
    """Weights, the device KV cache and the host copy of the cached tokens' KV."""

    def __init__(self, torch: Any, shape: LayerShape, layers: int, device: DeviceKind,
                 k_max: int, t_max: int) -> None:
        self.torch, self.shape, self.layers, self.device = torch, shape, layers, device
        bf16 = torch.bfloat16
        d, q = shape.hidden, shape.num_heads * shape.head_dim
        kv = shape.num_kv_heads * shape.head_dim

        def weight(rows: int, cols: int) -> Any:
            return torch.randn(rows, cols, device=device, dtype=bf16).mul_(rows**-0.5)

        self.wqkv = [weight(d, q + 2 * kv) for _ in range(layers)]
        self.wo = [weight(q, d) for _ in range(layers)]
        self.wgu = [weight(d, 2 * shape.intermediate) for _ in range(layers)]
        self.wdown = [weight(shape.intermediate, d) for _ in range(layers)]
        self.norms = [torch.ones(d, device=device, dtype=bf16) for _ in range(2 * layers)]
        self.split = (q, kv, kv)
        cache_shape = (layers, 2, k_max + t_max, shape.num_kv_heads, shape.head_dim)
        self.cache = torch.randn(cache_shape, device=device, dtype=bf16)
        self.pinned = device == "cuda"
        self.host = torch.empty((layers, 2, k_max, shape.num_kv_heads, shape.head_dim),
                                dtype=bf16, pin_memory=self.pinned)
        for layer in range(layers):
            for kind in (0, 1):
                self.host[layer, kind].copy_(self.cache[layer, kind, :k_max])

    def load(self, layer: int, k: int) -> None:
        """Copy layer ``layer``'s keys, then values, of ``k`` cached tokens to the device."""
        for kind in (0, 1):
            self.cache[layer, kind, :k].copy_(self.host[layer, kind, :k],
                                              non_blocking=self.pinned)

    def load_all(self, k: int) -> None:
        for layer in range(self.layers):
            self.load(layer, k)

    def forward(self, x: Any, k: int, attend: Callable[[Any, Any, Any], Any],
                wait: Callable[[int], None] | None = None) -> Any:
        """Prefill ``x`` (T x hidden) on top of ``k`` cached tokens, every layer."""
        functional = self.torch.nn.functional
        shape, t = self.shape, x.shape[0]
        heads, dh = shape.num_heads, shape.head_dim
        for layer in range(self.layers):
            h = functional.rms_norm(x, (shape.hidden,), self.norms[2 * layer])
            q, new_k, new_v = (h @ self.wqkv[layer]).split(self.split, dim=-1)
            if wait is not None:
                wait(layer)
            keys, values = self.cache[layer, 0], self.cache[layer, 1]
            keys[k : k + t].copy_(new_k.view(t, shape.num_kv_heads, dh))
            values[k : k + t].copy_(new_v.view(t, shape.num_kv_heads, dh))
            out = attend(
                q.view(t, heads, dh).transpose(0, 1).unsqueeze(0),
                keys[: k + t].transpose(0, 1).unsqueeze(0),
                values[: k + t].transpose(0, 1).unsqueeze(0),
            )
            x = x + out.squeeze(0).transpose(0, 1).reshape(t, heads * dh) @ self.wo[layer]
            h = functional.rms_norm(x, (shape.hidden,), self.norms[2 * layer + 1])
            gate, up = (h @ self.wgu[layer]).chunk(2, dim=-1)
            x = x + (functional.silu(gate) * up) @ self.wdown[layer]
        return x
