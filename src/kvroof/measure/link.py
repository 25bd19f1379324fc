"""Link benchmark: copy bandwidth between host memory and the device against transfer size.

What is measured (every point timed with :class:`~kvroof.measure.device.Timer`):

- single copies of 4 KiB ... 1 GiB (powers of 4; ``--quick``: up to 64 MiB), host to device
  and device to host, from pinned and from pageable host memory (on the CPU a "host-to-device
  copy" is ``tensor.copy_`` between two host buffers, and pinned memory does not apply: only
  ``pinned=false`` rows are written);
- the same bytes moved the way an offloading engine loads a request's KV cache: one copy per
  layer per block of 16 or 256 tokens, each of ``block x kv_bytes_per_token_per_layer`` bytes
  (:func:`kvroof.cost.kv.kv_bytes_per_token_per_layer` of the ``--model``), against one copy of
  the same total;
- all GPUs at once (one thread per GPU, one pinned copy each), when there are at least two.

The per-transfer latency and the bandwidth come from a least-squares fit of
``time = latency + bytes / bandwidth`` to the single copies (:func:`fit_latency_bandwidth`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.kv import kv_bytes_per_token_per_layer
from kvroof.errors import KvroofError
from kvroof.measure.device import DeviceKind, Timer, Timing, require_torch
from kvroof.measure.progress import Progress
from kvroof.measure.rows import CopyPattern, Direction, LinkRow, Measurement, Row
from kvroof.specs.model import ModelSpec
from kvroof.units import Kind, format_quantity

__all__ = ["LinkFit", "LinkSettings", "chunk_tokens", "fit_latency_bandwidth", "run_link"]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
_LATENCY_EQUIVALENT_BYTES = 1e5  # progress weight of one copy call (~5 us at 20 GB/s)
_DIRECTIONS: tuple[Direction, ...] = ("h2d", "d2h")


@dataclass(frozen=True)
class LinkSettings:
    """What the link benchmark measures. ``chunk_bytes``: about how many bytes the chunked
    (per layer, per block) copies move in all; ``all_gpus_bytes``: bytes per GPU at once."""

    sizes: tuple[int, ...]
    warmup: int = 2
    repeats: int = 10
    max_seconds: float = 1.0
    block_tokens: tuple[int, ...] = (16, 256)
    chunk_bytes: int = 256 * MIB
    all_gpus: bool = True
    all_gpus_bytes: int = 256 * MIB

    @classmethod
    def default(cls, device: DeviceKind, quick: bool) -> LinkSettings:
        """Full: 4 KiB ... 1 GiB in powers of 4; quick: up to 64 MiB, fewer repeats."""
        top = 64 * MIB if quick else GIB
        sizes = tuple(4 * KIB * 4**i for i in range(16) if 4 * KIB * 4**i <= top)
        if quick:
            return cls(sizes=sizes, warmup=1, repeats=3, max_seconds=0.3,
                       chunk_bytes=32 * MIB, all_gpus_bytes=64 * MIB)
        return cls(sizes=sizes)


@dataclass(frozen=True)
class LinkFit:
    """``time = latency_s + bytes / bandwidth`` fitted to ``points`` single copies.

    ``rel_rms`` and ``rel_max`` are the root-mean-square and largest relative residual
    ``|fit - measured| / measured``. ``bandwidth`` is ``inf`` when the fitted slope is not
    positive (the copies did not get slower with size: a sign of caching or noise).
    """

    latency_s: float
    bandwidth: float
    rel_rms: float
    rel_max: float
    points: int

    def predict(self, bytes_total: float, copies: int = 1) -> float:
        """Seconds for ``copies`` copy calls moving ``bytes_total`` bytes in all."""
        return copies * self.latency_s + bytes_total / self.bandwidth


def fit_latency_bandwidth(sizes: ArrayLike, seconds: ArrayLike) -> LinkFit:
    """Least squares (``numpy.linalg.lstsq``) of ``time = latency + bytes / bandwidth``.

    Each point is weighted by 1 / its measured time, so the fit minimises *relative* residuals:
    unweighted, the 1 GiB copy's absolute error would swamp the 4 KiB copy's few microseconds
    and leave the latency undetermined.
    """
    x = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if x.shape != t.shape or x.ndim != 1:
        raise KvroofError("link fit: sizes and seconds must be two lists of the same length")
    if len(np.unique(x)) < 2:
        raise KvroofError("link fit: needs at least two different transfer sizes")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(x > 0)):
        raise KvroofError("link fit: sizes and seconds must be positive and finite")
    design = np.column_stack([1.0 / t, x / t])
    (latency, slope), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    relative = (latency + slope * x - t) / t
    return LinkFit(
        latency_s=float(latency),
        bandwidth=float(1.0 / slope) if slope > 0 else math.inf,
        rel_rms=float(np.sqrt(np.mean(relative**2))),
        rel_max=float(np.max(np.abs(relative))),
        points=len(x),
    )


def chunk_tokens(model: ModelSpec, settings: LinkSettings) -> int:
    """Cached tokens for the chunked copies: about ``chunk_bytes`` of KV over the model's layers,
    a whole number of the largest block (at least one block)."""
    per_token = kv_bytes_per_token_per_layer(model) * model.num_full_layers
    block = max(settings.block_tokens)
    return max(block, int(settings.chunk_bytes / per_token) // block * block)


def _copy(dst: Any, src: Any, non_blocking: bool) -> Callable[[], None]:
    def run() -> None:
        dst.copy_(src, non_blocking=non_blocking)

    return run


def _copies(pairs: list[tuple[Any, Any]], non_blocking: bool) -> Callable[[], None]:
    def run() -> None:
        for dst, src in pairs:
            dst.copy_(src, non_blocking=non_blocking)

    return run


def _row(direction: Direction, pinned: bool, pattern: CopyPattern, block: int, copies: int,
         per_copy: int, gpus: int, timing: Timing) -> LinkRow:
    total = copies * per_copy * gpus
    return LinkRow(
        direction=direction,
        pinned=pinned,
        pattern=pattern,
        block_tokens=block,
        copies=copies,
        bytes_per_copy=per_copy,
        bytes_total=total,
        gpus=gpus,
        repeats=timing.repeats,
        median_s=timing.median_s,
        min_s=timing.min_s,
        bandwidth=total / timing.median_s,
    )


def run_link(
    model: ModelSpec,
    device: DeviceKind,
    settings: LinkSettings,
    *,
    quiet: bool = True,
) -> Measurement:
    """Run the link benchmark on ``device``; the KV layout of the chunked copies is ``model``'s."""
    torch = require_torch()
    timer = Timer(device, warmup=settings.warmup, repeats=settings.repeats,
                  max_seconds=settings.max_seconds)
    cuda = device == "cuda"
    pinned_kinds = (True, False) if cuda else (False,)
    per_token_layer = int(kv_bytes_per_token_per_layer(model))
    layers = model.num_full_layers
    tokens = chunk_tokens(model, settings)
    chunk_total = tokens * layers * per_token_layer
    gpu_count = int(torch.cuda.device_count()) if cuda else 0
    multi = cuda and settings.all_gpus and gpu_count >= 2

    sweep_weight = sum(s + _LATENCY_EQUIVALENT_BYTES for s in settings.sizes)
    chunk_weight = sum(
        chunk_total * 2 + _LATENCY_EQUIVALENT_BYTES * (1 + layers * tokens // b)
        for b in settings.block_tokens
    )
    total_weight = 2 * len(pinned_kinds) * sweep_weight + chunk_weight
    total_weight += settings.all_gpus_bytes * gpu_count if multi else 0
    progress = Progress("link", total_weight, quiet=quiet)

    biggest = max(max(settings.sizes), chunk_total)
    device_buffer = torch.zeros(biggest, dtype=torch.uint8, device=device)
    hosts = {False: torch.zeros(biggest, dtype=torch.uint8)}
    if cuda:
        hosts[True] = torch.zeros(biggest, dtype=torch.uint8, pin_memory=True)

    rows: list[Row] = []
    sweep: list[LinkRow] = []  # the single copies the latency + bandwidth line is fitted to
    for pinned in pinned_kinds:
        host = hosts[pinned]
        for direction in _DIRECTIONS:
            for size in settings.sizes:
                dst, src = (device_buffer, host) if direction == "h2d" else (host, device_buffer)
                timing = timer.measure(_copy(dst[:size], src[:size], pinned))
                sweep.append(_row(direction, pinned, "single", 0, 1, size, 1, timing))
                rows.append(sweep[-1])
                kind = "pinned" if pinned else "pageable"
                progress.advance(size + _LATENCY_EQUIVALENT_BYTES,
                                 f"{direction} {kind} {format_quantity(size, Kind.CAPACITY)}")

    # One copy per layer per block, as an offloading engine loads K cached tokens, against one
    # copy of the same bytes (host -> device from the memory an engine would load from).
    load_pinned = cuda
    chunked: list[dict[str, Any]] = []
    one = timer.measure(_copy(device_buffer[:chunk_total], hosts[load_pinned][:chunk_total],
                              load_pinned))
    rows.append(_row("h2d", load_pinned, "single", 0, 1, chunk_total, 1, one))
    for block in settings.block_tokens:
        per_copy = block * per_token_layer
        count = chunk_total // per_copy
        views = zip(
            device_buffer[: count * per_copy].view(count, per_copy).unbind(0),
            hosts[load_pinned][: count * per_copy].view(count, per_copy).unbind(0),
            strict=True,
        )
        timing = timer.measure(_copies(list(views), load_pinned))
        rows.append(_row("h2d", load_pinned, "chunked", block, count, per_copy, 1, timing))
        chunked.append({
            "block_tokens": block,
            "copies": count,
            "bytes_per_copy": per_copy,
            "bytes_total": chunk_total,
            "median_s": timing.median_s,
            "one_copy_median_s": one.median_s,
            "slowdown_vs_one_copy": timing.median_s / one.median_s,
        })
        progress.advance(chunk_total * 2 + _LATENCY_EQUIVALENT_BYTES * (1 + count),
                         f"chunked, {block}-token blocks")

    all_gpus: dict[str, Any]
    if multi:
        all_gpus = _all_gpus(torch, settings, gpu_count, rows)
        progress.advance(settings.all_gpus_bytes * gpu_count, "all GPUs at once")
    elif not cuda:
        all_gpus = {"skipped": "no GPUs: the CPU run copies between host buffers"}
    elif not settings.all_gpus:
        all_gpus = {"skipped": "turned off in the settings"}
    else:
        all_gpus = {"skipped": f"{gpu_count} GPU: all-GPU copies need at least two"}
    progress.done()

    fits = []
    for pinned in pinned_kinds:
        for direction in _DIRECTIONS:
            points = [r for r in sweep if r.direction == direction and r.pinned == pinned]
            fit = fit_latency_bandwidth([r.bytes_total for r in points],
                                        [r.median_s for r in points])
            fits.append({"direction": direction, "pinned": pinned, **asdict(fit)})
            if direction == "h2d" and pinned == load_pinned:
                for entry in chunked:
                    entry["fit_predicted_s"] = fit.predict(entry["bytes_total"], entry["copies"])
    notes = [
        "fit: weighted least squares of median_s = latency + bytes / bandwidth over the size "
        "sweep's single copies, weights 1 / median_s (relative residuals)",
    ]
    if not cuda:
        notes.append("cpu: h2d and d2h are copies between two host buffers; pinned memory "
                     "does not apply (pinned=false only)")
    summary = {
        "fits": fits,
        "chunked": chunked,
        "all_gpus": all_gpus,
        "model": model.name,
        "kv_bytes_per_token_per_layer": per_token_layer,
        "layers": layers,
        "chunk_tokens": tokens,
        "notes": notes,
    }
    return Measurement("link", rows, {**asdict(settings), "device": device}, summary)


def _all_gpus(torch: Any, settings: LinkSettings, count: int, rows: list[Row]) -> dict[str, Any]:
    """Pinned host-to-device copies on every GPU at once (one thread per GPU), wall clock."""
    size = settings.all_gpus_bytes
    pairs = []
    for index in range(count):
        host = torch.zeros(size, dtype=torch.uint8, pin_memory=True)
        pairs.append((torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}"), host))

    def one_gpu(index: int) -> None:
        dst, src = pairs[index]
        with torch.cuda.device(index):
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        def run() -> None:
            list(pool.map(one_gpu, range(count)))

        timer = Timer("cuda", warmup=settings.warmup, repeats=settings.repeats,
                      max_seconds=settings.max_seconds, clock="wall")
        timing = timer.measure(run)
    rows.append(_row("h2d", True, "all-gpus", 0, 1, size, count, timing))
    return {
        "gpus": count,
        "bytes_per_gpu": size,
        "median_s": timing.median_s,
        "aggregate_bandwidth": count * size / timing.median_s,
    }
