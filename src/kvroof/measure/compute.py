"""Compute benchmark: achieved GEMM FLOP/s at prefill shapes, and the efficiency against a peak.

The shape is the FFN up-projection of a prefill: ``(T x hidden) @ (hidden x intermediate)``
for T = 16 ... 8192 new tokens (powers of 2), with ``hidden`` and ``intermediate`` from the
``--model`` (a MoE model's *active* width, :func:`ffn_width`). A GEMM costs ``2 x T x hidden x
intermediate`` FLOP; achieved FLOP/s is that over the median time. With ``--accelerator`` the
efficiency is achieved / the accelerator's dense peak for the data type (left empty without).

Data types: bf16 and fp16 through ``torch.mm``; fp8 (e4m3 inputs, bf16 output) through
``torch._scaled_mm``, only on a CUDA device of compute capability 8.9 or newer; elsewhere the
fp8 sweep is skipped and the reason recorded in the summary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from kvroof.errors import KvroofError
from kvroof.measure.device import DeviceKind, Timer, require_torch
from kvroof.measure.progress import Progress
from kvroof.measure.rows import ComputeRow, Measurement, Row
from kvroof.specs.hardware import Accelerator
from kvroof.specs.model import DenseFFN, ModelSpec, MoEFFN

__all__ = ["ComputeSettings", "GemmDtype", "ffn_width", "gemm_shape", "run_compute"]

GemmDtype = Literal["bf16", "fp16", "fp8"]


def ffn_width(model: ModelSpec) -> tuple[int, str | None]:
    """The gated FFN width one token passes through, and a note when it is not simply the model's.

    Dense: ``intermediate_size``. MoE: ``experts_per_token x expert_intermediate_size`` plus the
    shared experts' widths (the active width as one dense FFN: same FLOPs per token, but one
    large GEMM instead of many small grouped ones).
    """
    ffn = model.ffn
    if isinstance(ffn, DenseFFN):
        return ffn.intermediate_size, None
    assert isinstance(ffn, MoEFFN)
    width = (
        ffn.experts_per_token * ffn.expert_intermediate_size
        + ffn.num_shared_experts * ffn.shared_expert_intermediate_size
    )
    note = (
        f"MoE model: a dense FFN of the active width {width} = {ffn.experts_per_token} experts "
        f"x {ffn.expert_intermediate_size}"
        + (
            f" + {ffn.num_shared_experts} shared x {ffn.shared_expert_intermediate_size}"
            if ffn.num_shared_experts
            else ""
        )
        + " stands for the routed experts (same FLOPs per token, no routing, one large GEMM)"
    )
    return width, note


def gemm_shape(model: ModelSpec, scale: int = 1) -> tuple[int, int]:
    """``(hidden, intermediate)`` of the benchmark GEMM, both divided by ``scale`` (rounded down
    to a multiple of 16, at least 16, as fp8 GEMMs need)."""
    if scale < 1:
        raise KvroofError(f"compute: scale must be a positive integer, got {scale}")
    width, _ = ffn_width(model)

    def shrink(value: int) -> int:
        return max(16, value // scale // 16 * 16) if scale > 1 else value

    return shrink(model.hidden_size), shrink(width)


@dataclass(frozen=True)
class ComputeSettings:
    """T values, data types, shape scale (hidden and intermediate divided by it), timing, and
    ``max_point_s``: once one GEMM takes longer, larger T of that dtype are skipped."""

    tokens: tuple[int, ...]
    dtypes: tuple[GemmDtype, ...] = ("bf16", "fp16", "fp8")
    scale: int = 1
    warmup: int = 3
    repeats: int = 20
    max_seconds: float = 1.0
    max_point_s: float = 5.0

    @classmethod
    def default(cls, device: DeviceKind, quick: bool) -> ComputeSettings:
        """Full: T = 16 ... 8192 at the model's shape. Quick: T up to 512; on the CPU also the
        shape divided by 16 (Llama-3.1-8B: 256 x 896)."""
        top = 512 if quick else 8192
        tokens = tuple(2**i for i in range(4, 14) if 2**i <= top)
        if device == "cpu":
            if quick:
                return cls(tokens=tokens, scale=16, warmup=1, repeats=3, max_seconds=0.2,
                           max_point_s=1.0)
            return cls(tokens=tokens, warmup=1, repeats=3, max_seconds=2.0)
        if quick:
            return cls(tokens=tokens, warmup=2, repeats=5, max_seconds=0.5)
        return cls(tokens=tokens)


def _torch_dtype(torch: Any, dtype: GemmDtype) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}[dtype]


def _fp8_unsupported(torch: Any, device: DeviceKind) -> str | None:
    """Why fp8 cannot run here, or ``None`` when it may (the first GEMM still decides)."""
    if device != "cuda":
        return "fp8 GEMM needs a CUDA device (torch._scaled_mm); this run is on the cpu"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no torch._scaled_mm / float8_e4m3fn"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 9):
        return f"fp8 GEMM needs compute capability >= 8.9, this GPU has {major}.{minor}"
    return None


def _gemm(torch: Any, device: DeviceKind, dtype: GemmDtype, t: int, hidden: int,
          width: int) -> Any:
    """A zero-argument callable that runs one (t x hidden) @ (hidden x width) GEMM."""
    a = torch.randn(t, hidden, device=device, dtype=_torch_dtype(torch, dtype))
    if dtype != "fp8":
        b = torch.randn(hidden, width, device=device, dtype=_torch_dtype(torch, dtype))
        out = torch.empty(t, width, device=device, dtype=_torch_dtype(torch, dtype))
        return lambda: torch.mm(a, b, out=out)
    a8 = a.to(torch.float8_e4m3fn)
    # _scaled_mm wants the second operand column-major: a (width x hidden) row-major, transposed.
    b8 = torch.randn(width, hidden, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device, dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def run_compute(
    model: ModelSpec,
    device: DeviceKind,
    settings: ComputeSettings,
    accelerator: Accelerator | None = None,
    *,
    quiet: bool = True,
) -> Measurement:
    """Time the prefill-shaped GEMMs of ``model`` on ``device``; efficiency against
    ``accelerator``'s dense peak when one is given."""
    torch = require_torch()
    hidden, width = gemm_shape(model, settings.scale)
    _, moe_note = ffn_width(model)
    timer = Timer(device, warmup=settings.warmup, repeats=settings.repeats,
                  max_seconds=settings.max_seconds)
    per_dtype = sum(2.0 * t * hidden * width for t in settings.tokens)
    progress = Progress("compute", per_dtype * len(settings.dtypes), quiet=quiet)
    rows: list[Row] = []
    skipped: list[dict[str, Any]] = []
    for dtype in settings.dtypes:
        reason = _fp8_unsupported(torch, device) if dtype == "fp8" else None
        peak = accelerator.peak_compute.get(dtype) if accelerator is not None else None
        for index, t in enumerate(settings.tokens):
            flops = 2.0 * t * hidden * width
            if reason is None:
                try:
                    gemm = _gemm(torch, device, dtype, t, hidden, width)
                    gemm()
                except (RuntimeError, TypeError, NotImplementedError) as error:
                    lines = str(error).strip().splitlines() or [type(error).__name__]
                    reason = f"{dtype} GEMM failed at T={t}: {lines[0][:200]}"
            if reason is not None:
                skipped.append({"dtype": dtype, "T": list(settings.tokens[index:]),
                                "reason": reason})
                progress.advance(sum(2.0 * s * hidden * width for s in settings.tokens[index:]))
                break
            timing = timer.measure(gemm)
            achieved = flops / timing.median_s
            rows.append(ComputeRow(
                dtype=dtype, T=t, hidden=hidden, intermediate=width, flops=flops,
                repeats=timing.repeats, median_s=timing.median_s, min_s=timing.min_s,
                achieved_flops=achieved, peak_flops=peak,
                efficiency=None if peak is None else achieved / peak,
            ))
            progress.advance(flops, f"{dtype} T={t}")
            if timing.median_s > settings.max_point_s and index + 1 < len(settings.tokens):
                reason = (f"one {dtype} GEMM took {timing.median_s:.3g} s at T={t} "
                          f"(over max_point_s = {settings.max_point_s:g} s)")
    progress.done()
    best: dict[str, Any] = {}
    for dtype in settings.dtypes:
        mine = [r for r in rows if isinstance(r, ComputeRow) and r.dtype == dtype]
        if mine:
            top = max(mine, key=lambda r: r.achieved_flops)
            best[dtype] = {"T": top.T, "achieved_flops": top.achieved_flops,
                           "efficiency": top.efficiency}
    notes = [n for n in [moe_note] if n]
    if settings.scale > 1:
        notes.append(f"shape scaled down: hidden and FFN width divided by {settings.scale} "
                     f"(model: {model.hidden_size} x {ffn_width(model)[0]})")
    summary = {
        "model": model.name,
        "hidden": hidden,
        "intermediate": width,
        "accelerator": accelerator.name if accelerator is not None else None,
        "peak_flops": ({d: accelerator.peak_compute.get(d) for d in settings.dtypes}
                       if accelerator is not None else None),
        "best": best,
        "skipped": skipped,
        "notes": notes,
    }
    return Measurement("compute", rows, {**asdict(settings), "device": device}, summary)
