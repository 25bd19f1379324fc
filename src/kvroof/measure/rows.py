"""The rows of ``kvroof measure`` results: one typed row per measured point of each benchmark.

:class:`LinkRow`, :class:`ComputeRow` and :class:`PrefillRow` are the columns of
``link.csv``, ``compute.csv`` and ``prefill.csv``, in order, with their types (which the reader
checks) and what each column means (written into the JSON header). :class:`Measurement` is what
one benchmark run produced, before :func:`kvroof.measure.results.write_results` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Literal

__all__ = [
    "BENCHMARKS",
    "ROW_TYPES",
    "Benchmark",
    "ComputeRow",
    "CopyPattern",
    "Direction",
    "LinkRow",
    "Measurement",
    "PrefillRow",
    "Row",
    "row_columns",
]

Benchmark = Literal["link", "compute", "prefill"]
Direction = Literal["h2d", "d2h"]
CopyPattern = Literal["single", "chunked", "all-gpus"]
BENCHMARKS: Final[tuple[Benchmark, ...]] = ("link", "compute", "prefill")


@dataclass(frozen=True)
class LinkRow:
    """One copy measurement: ``copies`` copy calls per GPU moving ``bytes_total`` in all."""

    benchmark: ClassVar[Benchmark] = "link"
    positive: ClassVar[frozenset[str]] = frozenset(
        {"copies", "bytes_per_copy", "bytes_total", "gpus", "repeats", "median_s", "min_s"}
    )
    doc: ClassVar[dict[str, str]] = {
        "direction": "h2d (host to device) or d2h (device to host); on the CPU a buffer-to-"
        "buffer copy",
        "pinned": "host buffer in page-locked (pinned) memory; always false on the CPU",
        "pattern": "single: one copy; chunked: one copy per layer per block of block_tokens "
        "tokens (an offloading engine's layout); all-gpus: one copy per GPU at once",
        "block_tokens": "tokens per copied block (chunked rows), 0 otherwise",
        "copies": "copy calls per GPU in one timed run",
        "bytes_per_copy": "bytes moved by one copy call",
        "bytes_total": "bytes moved by one timed run (all copies, all GPUs)",
        "gpus": "GPUs copying at the same time",
        "repeats": "timed runs",
        "median_s": "median seconds of one timed run",
        "min_s": "fastest timed run, seconds",
        "bandwidth": "bytes_total / median_s, bytes/s",
    }

    direction: Direction
    pinned: bool
    pattern: CopyPattern
    block_tokens: int
    copies: int
    bytes_per_copy: int
    bytes_total: int
    gpus: int
    repeats: int
    median_s: float
    min_s: float
    bandwidth: float


@dataclass(frozen=True)
class ComputeRow:
    """One GEMM shape: (T x hidden) @ (hidden x intermediate) in ``dtype``."""

    benchmark: ClassVar[Benchmark] = "compute"
    positive: ClassVar[frozenset[str]] = frozenset(
        {"T", "hidden", "intermediate", "flops", "repeats", "median_s", "min_s", "achieved_flops"}
    )
    doc: ClassVar[dict[str, str]] = {
        "dtype": "bf16, fp16 or fp8 (fp8 through torch._scaled_mm, bf16 output)",
        "T": "rows of the activation (new tokens)",
        "hidden": "inner dimension (the model's hidden size, scaled in --quick on the CPU)",
        "intermediate": "output columns (the FFN width)",
        "flops": "2 x T x hidden x intermediate, FLOP",
        "repeats": "timed runs",
        "median_s": "median seconds of one GEMM",
        "min_s": "fastest GEMM, seconds",
        "achieved_flops": "flops / median_s, FLOP/s",
        "peak_flops": "the --accelerator's dense peak for dtype, FLOP/s (empty when not given)",
        "efficiency": "achieved_flops / peak_flops (empty without a peak)",
    }

    dtype: Literal["bf16", "fp16", "fp8"]
    T: int
    hidden: int
    intermediate: int
    flops: float
    repeats: int
    median_s: float
    min_s: float
    achieved_flops: float
    peak_flops: float | None
    efficiency: float | None


@dataclass(frozen=True)
class PrefillRow:
    """One (T, K) point of the synthetic prefill with K cached tokens loaded from the host."""

    benchmark: ClassVar[Benchmark] = "prefill"
    positive: ClassVar[frozenset[str]] = frozenset(
        {"layers_run", "layers_model", "T", "compute_s", "transfer_s", "serial_s", "flops"}
    )
    doc: ClassVar[dict[str, str]] = {
        "model": "registry model whose layer shapes the synthetic stack copies",
        "layers_run": "decoder layers in the synthetic stack (fewer than the model when memory "
        "requires)",
        "layers_model": "decoder layers of the real model",
        "T": "new tokens prefilled",
        "K": "cached tokens whose KV is loaded from host memory",
        "kv_bytes": "KV bytes of K tokens in the layers run (keys and values), bytes",
        "flops": "prefill FLOP of the layers run, by kvroof.cost.flops.prefill_flops "
        "(projections, attention over K + T keys, gated FFN; no LM head)",
        "compute_s": "prefill seconds with the KV already on the device (median)",
        "transfer_s": "seconds to load the K tokens' KV from host memory, one copy per layer "
        "for keys and one for values (median)",
        "serial_s": "load then prefill, one after the other (median)",
        "overlap_s": "load and prefill overlapped layer by layer on two CUDA streams (median); "
        "empty where not measurable (the CPU)",
        "p_oh": "transfer_s / compute_s",
    }

    model: str
    layers_run: int
    layers_model: int
    T: int
    K: int
    kv_bytes: int
    flops: float
    compute_s: float
    transfer_s: float
    serial_s: float
    overlap_s: float | None
    p_oh: float



Row = LinkRow | ComputeRow | PrefillRow
ROW_TYPES: Final[dict[Benchmark, type[LinkRow] | type[ComputeRow] | type[PrefillRow]]] = {
    "link": LinkRow,
    "compute": ComputeRow,
    "prefill": PrefillRow,
}
"""The row type of each benchmark."""


def row_columns(row_type: type[Row]) -> list[str]:
    """The CSV columns of ``row_type``, in order."""
    return [f.name for f in fields(row_type)]


@dataclass
class Measurement:
    """What one benchmark run produced, before it is written."""

    benchmark: Benchmark
    rows: list[Row]
    settings: dict[str, Any]
    summary: dict[str, Any]

