"""Prefill benchmark: a synthetic decoder stack shaped like a registry model, with offloaded KV.

The stack has random bf16 weights in the shapes of the model's layers: RMSNorm, fused QKV
projection, grouped-query attention through ``torch.nn.functional.scaled_dot_product_attention``
(the T new queries attend causally to the K cached keys and to the new keys up to their own
position: a lower-right causal mask over K + T keys), output projection, RMSNorm and a gated
(SwiGLU) FFN. A MoE model gets one dense FFN of its *active* width
(:func:`kvroof.measure.compute.ffn_width`); MLA models are not supported yet. When the device
cannot hold every layer at the largest (T, K) of the grid, fewer layers run (``layers_run``,
with the reason in the JSON summary).

For every (T, K) of the grid it times, in seconds (median of the timed calls):

(a) ``compute_s``: prefill of T new tokens with the K cached tokens' KV already on the device;
(b) ``transfer_s``: loading the K tokens' KV from host memory (pinned on CUDA) in the model's
    per-layer layout: one copy per layer for the keys and one for the values;
(c) ``serial_s``: (b) then (a);
(d) ``overlap_s``: (b) and (a) overlapped layer by layer: the copies run on a second CUDA
    stream and layer ``l``'s attention waits only for layer ``l``'s KV (CUDA only: on the CPU
    there are no streams to overlap, and the cell is left empty).

``p_oh = transfer_s / compute_s`` (the paper's P_OH), and the measured kappa_crit per T is where
P_OH crosses 1 along K (:func:`measured_kappa_crit`).

The ``flops`` column uses a formula local to this benchmark, for reporting only (see
:meth:`LayerShape.flops`); comparing it and the timings with ``kvroof.cost`` is the
calibration's job, done separately on these results.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import import_module
from typing import Any, Literal

from kvroof.cost.flops import prefill_flops
from kvroof.errors import KvroofError
from kvroof.measure.compute import ffn_width
from kvroof.measure.device import (
    DeviceKind,
    Timer,
    free_device_memory,
    host_available_memory,
    require_torch,
)
from kvroof.measure.progress import Progress
from kvroof.measure.results import Measurement, PrefillRow, Row
from kvroof.specs.model import DenseFFN, GQAAttention, ModelSpec

__all__ = [
    "KappaCrit",
    "LayerShape",
    "PrefillSettings",
    "choose_layers",
    "layer_shape",
    "measured_kappa_crit",
    "run_prefill",
]

_ELEMENT_BYTES = 2  # bf16 weights, activations and KV
# Rough rates that weigh the grid points for the progress bar's estimate of the time left.
_RATE_GUESS = {"cuda": (4e14, 2e10), "cpu": (2e11, 5e9)}  # FLOP/s, bytes/s


@dataclass(frozen=True)
class LayerShape:
    """The shapes of one synthetic decoder layer."""

    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int

    @property
    def kv_elements_per_token(self) -> int:
        """Keys and values of one token in one layer: ``2 x kv_heads x head_dim``."""
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def weight_elements(self) -> int:
        """QKV, output, gate+up and down projections, two RMSNorm weights."""
        d, q, kv = self.hidden, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return d * (q + 2 * kv) + q * d + 3 * d * self.intermediate + 2 * d

    def as_model(self, layers: int = 1) -> ModelSpec:
        """The synthetic stack as a model spec (dense gated FFN, no sliding window), so that
        its FLOPs and KV bytes come from kvroof's cost model like every other number."""
        return ModelSpec(
            name="synthetic-stack", num_layers=layers, hidden_size=self.hidden, vocab_size=1,
            attention=GQAAttention(num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
                                   head_dim=self.head_dim),
            ffn=DenseFFN(kind="dense", intermediate_size=self.intermediate),
        )

    def flops(self, t: int, k: int) -> float:
        """Prefill FLOP of one layer for ``t`` new tokens on ``k`` cached ones: kvroof's
        :func:`~kvroof.cost.flops.prefill_flops` without the LM head (the stack has none)."""
        parts = prefill_flops(self.as_model(), t, k)
        return float(parts.total - parts.lm_head)


def layer_shape(model: ModelSpec, scale: int = 1) -> tuple[LayerShape, list[str]]:
    """The synthetic layer for ``model`` and notes on where it differs from the real one.

    ``scale`` (1, 4, 16, ...: a square) shrinks the layer for quick CPU runs: hidden size and FFN
    width divided by ``scale``, KV heads and head_dim each by its square root (so KV bytes per
    token fall by ``scale`` too), query heads kept a whole multiple of the KV heads.
    """
    attention = model.attention
    if not isinstance(attention, GQAAttention):
        raise KvroofError(
            f"{model.name} uses MLA attention; only GQA models are supported by the prefill "
            "benchmark, for now"
        )
    root = math.isqrt(scale)
    if scale < 1 or root * root != scale:
        raise KvroofError(f"prefill: scale must be a square (1, 4, 16, ...), got {scale}")
    width, moe_note = ffn_width(model)
    notes = [n for n in [moe_note] if n]
    group = attention.num_heads // attention.num_kv_heads
    kv_heads = max(1, attention.num_kv_heads // root)
    shape = LayerShape(
        hidden=max(16, model.hidden_size // scale),
        num_heads=kv_heads * group,
        num_kv_heads=kv_heads,
        head_dim=max(8, attention.head_dim // root),
        intermediate=max(16, width // scale),
    )
    if scale > 1:
        notes.append(
            f"layer scaled down for a quick run: hidden {model.hidden_size} -> {shape.hidden}, "
            f"FFN {width} -> {shape.intermediate}, heads {attention.num_heads}/"
            f"{attention.num_kv_heads} -> {shape.num_heads}/{shape.num_kv_heads}, head_dim "
            f"{attention.head_dim} -> {shape.head_dim}"
        )
    if model.sliding_window is not None:
        notes.append("sliding-window layers attend to the whole context here (no window)")
    if attention.qk_norm:
        notes.append("QK-norm left out (not counted in FLOPs either)")
    return shape, notes


@dataclass(frozen=True)
class PrefillSettings:
    """The (T, K) grid, layer scale, a cap on the layers run (``None``: as many as fit, up to
    the model's), timing, and the share of free device and host memory the stack may take."""

    tokens: tuple[int, ...]
    cached: tuple[int, ...]
    scale: int = 1
    max_layers: int | None = None
    warmup: int = 1
    repeats: int = 5
    max_seconds: float = 2.0
    device_memory_fraction: float = 0.8
    host_memory_fraction: float = 0.5

    @classmethod
    def default(cls, device: DeviceKind, quick: bool) -> PrefillSettings:
        """CUDA: the paper's grid, T = 64 ... 2048 by K = 1024 ... 65536 (powers of 2); quick:
        a 3 x 3 corner of it on 4 layers. CPU quick: 2 layers scaled by 16, T = 16, 64 and
        K = 64 ... 4096; CPU full: 2 full-size layers, T = 64, 256, K = 1024 ... 16384."""
        if device == "cuda":
            if quick:
                return cls(tokens=(64, 256, 1024), cached=(1024, 4096, 16384), max_layers=4,
                           repeats=3)
            return cls(tokens=tuple(2**i for i in range(6, 12)),
                       cached=tuple(2**i for i in range(10, 17)))
        if quick:
            return cls(tokens=(16, 64), cached=(64, 256, 1024, 4096), scale=16, max_layers=2,
                       repeats=3, max_seconds=0.5)
        return cls(tokens=(64, 256), cached=(1024, 4096, 16384), max_layers=2, repeats=3)


def choose_layers(
    shape: LayerShape,
    settings: PrefillSettings,
    model_layers: int,
    device_free: float,
    host_free: float,
    attention_workspace: float = 0.0,
) -> tuple[int, str]:
    """How many layers fit, and why that many (which limit binds).

    Device: per layer the weights and a KV cache for ``max K + max T`` tokens; once, the
    activations of the largest T (generously: twice the layer's widest tensors) and the
    attention workspace. Host: per layer the KV of ``max K`` tokens.
    """
    t_max, k_max = max(settings.tokens), max(settings.cached)
    per_layer = _ELEMENT_BYTES * (
        shape.weight_elements + (k_max + t_max) * shape.kv_elements_per_token
    )
    widest = 6 * shape.hidden + (shape.num_heads + 2 * shape.num_kv_heads) * shape.head_dim
    activations = 2 * _ELEMENT_BYTES * t_max * (widest + 3 * shape.intermediate)
    device_budget = device_free * settings.device_memory_fraction - activations
    host_budget = host_free * settings.host_memory_fraction
    limits = [(model_layers, f"all {model_layers} layers of the model")]
    if settings.max_layers is not None:
        limits.append((settings.max_layers, f"max_layers = {settings.max_layers} (settings)"))
    limits.append((
        int((device_budget - attention_workspace) // per_layer),
        f"device memory: {device_free / 1e9:.1f} GB free, {per_layer / 1e9:.3f} GB per layer",
    ))
    host_per_layer = _ELEMENT_BYTES * k_max * shape.kv_elements_per_token
    limits.append((
        int(host_budget // host_per_layer),
        f"host memory: {host_free / 1e9:.1f} GB available, {host_per_layer / 1e9:.3f} GB of "
        "KV per layer",
    ))
    layers, reason = min(limits, key=lambda item: item[0])
    if layers < 1:
        raise KvroofError(
            f"prefill: not even one layer fits at T = {t_max}, K = {k_max} ({reason}); use "
            "a smaller grid or --quick"
        )
    return layers, reason


@dataclass(frozen=True)
class KappaCrit:
    """Where P_OH crosses 1 along K for one T.

    ``status``: ``crossed`` (``k_star`` interpolated, ``kappa_crit = k_star / T``), ``never``
    (P_OH < 1 over the whole grid: ``kappa_crit`` is ``inf``, meaning above
    ``max K / T``), or ``below-grid`` (P_OH >= 1 already at the smallest K: ``kappa_crit`` is
    ``None``, at most ``min K / T``).
    """

    T: int
    status: Literal["crossed", "never", "below-grid"]
    k_star: float | None
    kappa_crit: float | None


def measured_kappa_crit(t: int, cached: Sequence[float], p_oh: Sequence[float]) -> KappaCrit:
    """Interpolate the K where P_OH first reaches 1, log-linearly between grid points.

    Between neighbours ``(K1, p1)`` with ``p1 < 1`` and ``(K2, p2)`` with ``p2 >= 1``:
    ``log K* = log K1 + (1 - p1) / (p2 - p1) * (log K2 - log K1)`` (linear in K when K1 = 0).
    """
    if len(cached) != len(p_oh) or not cached:
        raise KvroofError("kappa_crit: needs as many P_OH values as K values, at least one")
    points = sorted(zip(cached, p_oh, strict=True))
    if points[0][1] >= 1:
        return KappaCrit(T=t, status="below-grid", k_star=None, kappa_crit=None)
    for (k1, p1), (k2, p2) in itertools.pairwise(points):
        if p1 < 1 <= p2:
            share = (1 - p1) / (p2 - p1)
            if k1 <= 0:
                k_star = k1 + share * (k2 - k1)
            else:
                k_star = math.exp(math.log(k1) + share * (math.log(k2) - math.log(k1)))
            return KappaCrit(T=t, status="crossed", k_star=k_star, kappa_crit=k_star / t)
    return KappaCrit(T=t, status="never", k_star=None, kappa_crit=math.inf)


_ATTENTION_IMPLS: tuple[tuple[str, bool], ...] = (
    ("causal_lower_right", True),
    ("causal_lower_right", False),
    ("boolean mask", True),
    ("boolean mask", False),
)


def _impl_name(mask: str, gqa: bool) -> str:
    heads = "enable_gqa" if gqa else "KV heads repeated to the query heads"
    return f"scaled_dot_product_attention, {mask}, {heads}"


def _attention(torch: Any, mask_kind: str, gqa: bool, t: int, s: int, group: int,
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


def _pick_attention(torch: Any, shape: LayerShape, device: DeviceKind) -> tuple[str, bool,
                                                                                list[str]]:
    """The first attention variant that runs here and matches a float32 reference."""
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
        name = _impl_name(mask_kind, gqa)
        try:
            out = _attention(torch, mask_kind, gqa, t, s, group, device)(q, keys, values)
            error = float((out.float() - reference).abs().max())
        except (RuntimeError, TypeError, ValueError, ImportError) as problem:
            lines = str(problem).strip().splitlines() or [type(problem).__name__]
            rejected.append(f"{name}: {lines[0][:160]}")
            continue
        if error <= 5e-2:
            return mask_kind, gqa, rejected
        rejected.append(f"{name}: differs from the reference by {error:.3g}")
    raise KvroofError(f"prefill: no attention variant works here ({'; '.join(rejected)})")


class _Stack:
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


def run_prefill(
    model: ModelSpec,
    device: DeviceKind,
    settings: PrefillSettings,
    *,
    quiet: bool = True,
) -> Measurement:
    """Run the (T, K) grid on a synthetic stack shaped like ``model``'s layers."""
    torch = require_torch()
    shape, notes = layer_shape(model, settings.scale)
    if not settings.tokens or not settings.cached:
        raise KvroofError("prefill: the grid needs at least one T and one K")
    if min(settings.tokens) < 1 or min(settings.cached) < 0:
        raise KvroofError("prefill: the grid needs T >= 1 and K >= 0")
    cuda = device == "cuda"
    mask_kind, gqa, rejected = _pick_attention(torch, shape, device)
    t_max, k_max = max(settings.tokens), max(settings.cached)
    workspace = 0.0
    if mask_kind == "boolean mask":  # a materialised mask and, likely, score matrices
        workspace = t_max * (k_max + t_max) * (1 + 6 * shape.num_heads)
    if cuda:
        torch.cuda.empty_cache()  # what earlier benchmarks left cached counts as free
    layers, layers_reason = choose_layers(
        shape, settings, model.num_layers, free_device_memory(device), host_available_memory(),
        workspace,
    )
    stack = _Stack(torch, shape, layers, device, k_max, t_max)
    group = shape.num_heads // shape.num_kv_heads
    timer = Timer(device, warmup=settings.warmup, repeats=settings.repeats,
                  max_seconds=settings.max_seconds)
    kv_per_token = layers * shape.kv_elements_per_token * _ELEMENT_BYTES
    flop_rate, byte_rate = _RATE_GUESS[device]

    def guess(t: int, k: int) -> float:
        compute = layers * shape.flops(t, k) / flop_rate
        transfer = k * kv_per_token / byte_rate
        return 2 * (compute + transfer) + (max(compute, transfer) if cuda else 0.0)

    grid = [(t, k) for t in sorted(settings.tokens) for k in sorted(settings.cached)]
    progress = Progress("prefill", sum(guess(t, k) for t, k in grid), quiet=quiet)
    copy_stream: Any = torch.cuda.Stream() if cuda else None
    events = [torch.cuda.Event() for _ in range(layers)] if cuda else []
    rows: list[Row] = []
    for t, k in grid:
        x = torch.randn(t, shape.hidden, device=device, dtype=torch.bfloat16)
        attend = _attention(torch, mask_kind, gqa, t, k + t, group, device)

        def compute(x: Any = x, k: int = k, attend: Any = attend) -> None:
            stack.forward(x, k, attend)

        def transfer(k: int = k) -> None:
            stack.load_all(k)

        def serial(x: Any = x, k: int = k, attend: Any = attend) -> None:
            stack.load_all(k)
            stack.forward(x, k, attend)

        def overlap(x: Any = x, k: int = k, attend: Any = attend) -> None:
            current = torch.cuda.current_stream()
            copy_stream.wait_stream(current)
            with torch.cuda.stream(copy_stream):
                for layer in range(layers):
                    stack.load(layer, k)
                    events[layer].record(copy_stream)
            stack.forward(x, k, attend, wait=lambda layer: current.wait_event(events[layer]))
            current.wait_stream(copy_stream)

        compute_s = timer.measure(compute).median_s
        transfer_s = timer.measure(transfer).median_s
        serial_s = timer.measure(serial).median_s
        overlap_s = timer.measure(overlap).median_s if cuda else None
        rows.append(PrefillRow(
            model=model.name, layers_run=layers, layers_model=model.num_layers, T=t, K=k,
            kv_bytes=k * kv_per_token, flops=layers * shape.flops(t, k), compute_s=compute_s,
            transfer_s=transfer_s, serial_s=serial_s, overlap_s=overlap_s,
            p_oh=transfer_s / compute_s,
        ))
        progress.advance(guess(t, k), f"T={t} K={k}")
    progress.done()

    kappas = []
    for t in sorted(settings.tokens):
        mine = [r for r in rows if isinstance(r, PrefillRow) and t == r.T]
        kappa = measured_kappa_crit(t, [r.K for r in mine], [r.p_oh for r in mine])
        kappas.append(asdict(kappa))
    notes += [
        "flops: the benchmark's own reporting formula (projections, attention pairs T*K + "
        "T*(T+1)/2 at 4*heads*head_dim FLOP each, gated FFN; no LM head); comparing with "
        "kvroof.cost is done separately",
        "kappa_crit: K where p_oh crosses 1, log-linear between grid points, divided by T "
        "(status never: null here, meaning inf: no crossing up to the largest K)",
    ]
    if not cuda:
        notes.append("cpu: overlap not measurable (no CUDA streams); overlap_s left empty. "
                     "transfer is a copy between two host buffers (no pinned memory)")
    summary = {
        "model": model.name,
        "layers_run": layers,
        "layers_model": model.num_layers,
        "layers_reason": layers_reason,
        "shape": asdict(shape),
        "dtype": "bf16",
        "kv_bytes_per_token_per_layer": shape.kv_elements_per_token * _ELEMENT_BYTES,
        "host_memory": "pinned" if stack.pinned else "pageable",
        "attention": _impl_name(mask_kind, gqa),
        "attention_rejected": rejected,
        "kappa_crit": kappas,
        "notes": notes,
    }
    return Measurement("prefill", rows, {**asdict(settings), "device": device}, summary)
