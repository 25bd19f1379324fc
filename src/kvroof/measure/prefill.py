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

This module holds the benchmark's settings, how many layers fit and the run itself. Its parts
live below it and are imported here too: the layer shapes in :mod:`kvroof.measure.layer`, the
torch stack and its attention variants in :mod:`kvroof.measure.stack`, the measured kappa_crit
in :mod:`kvroof.measure.kappa`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kvroof.errors import KvroofError
from kvroof.measure.device import (
    DeviceKind,
    Timer,
    free_device_memory,
    host_available_memory,
    require_torch,
)
from kvroof.measure.kappa import KappaCrit, measured_kappa_crit
from kvroof.measure.layer import ELEMENT_BYTES, LayerShape, layer_shape
from kvroof.measure.progress import Progress
from kvroof.measure.rows import Measurement, PrefillRow, Row
from kvroof.measure.stack import SyntheticStack, attention_name, make_attention
from kvroof.measure.stack import pick_attention as _pick_attention  # its name before the split
from kvroof.specs.model import ModelSpec

__all__ = [
    "KappaCrit",
    "LayerShape",
    "PrefillSettings",
    "choose_layers",
    "layer_shape",
    "measured_kappa_crit",
    "run_prefill",
]

# Rough rates that weigh the grid points for the progress bar's estimate of the time left.
_RATE_GUESS = {"cuda": (4e14, 2e10), "cpu": (2e11, 5e9)}  # FLOP/s, bytes/s


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
    per_layer = ELEMENT_BYTES * (
        shape.weight_elements + (k_max + t_max) * shape.kv_elements_per_token
    )
    widest = 6 * shape.hidden + (shape.num_heads + 2 * shape.num_kv_heads) * shape.head_dim
    activations = 2 * ELEMENT_BYTES * t_max * (widest + 3 * shape.intermediate)
    device_budget = device_free * settings.device_memory_fraction - activations
    host_budget = host_free * settings.host_memory_fraction
    limits = [(model_layers, f"all {model_layers} layers of the model")]
    if settings.max_layers is not None:
        limits.append((settings.max_layers, f"max_layers = {settings.max_layers} (settings)"))
    limits.append((
        int((device_budget - attention_workspace) // per_layer),
        f"device memory: {device_free / 1e9:.1f} GB free, {per_layer / 1e9:.3f} GB per layer",
    ))
    host_per_layer = ELEMENT_BYTES * k_max * shape.kv_elements_per_token
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
    stack = SyntheticStack(torch, shape, layers, device, k_max, t_max)
    group = shape.num_heads // shape.num_kv_heads
    timer = Timer(device, warmup=settings.warmup, repeats=settings.repeats,
                  max_seconds=settings.max_seconds)
    kv_per_token = layers * shape.kv_elements_per_token * ELEMENT_BYTES
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
        attend = make_attention(torch, mask_kind, gqa, t, k + t, group, device)

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
        "kv_bytes_per_token_per_layer": shape.kv_elements_per_token * ELEMENT_BYTES,
        "host_memory": "pinned" if stack.pinned else "pageable",
        "attention": attention_name(mask_kind, gqa),
        "attention_rejected": rejected,
        "kappa_crit": kappas,
        "notes": notes,
    }
    return Measurement("prefill", rows, {**asdict(settings), "device": device}, summary)
