"""The sections and field types of `kvroof report`'s config (:mod:`kvroof.report.config`):
hardware pairs, a trace, the simulation and planning sections, the workload table's
deployments, and the validators their fields share (finite numbers, whole tokens, quantities
with units, paths relative to the config file)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from kvroof.cost.checks import MAX_TOKENS, whole_tokens
from kvroof.errors import KvroofError, short_repr

__all__ = ["HardwarePair", "PlanningReport", "SimulationReport", "WorkloadDeployment",
           "WorkloadTrace"]

MAX_SYNTHETIC_REQUESTS: Final = 1_000_000
"""Most synthetic requests per workload the report draws (it draws three workloads and
evaluates each on every deployment; the default is 20,000)."""


def _finite(value: object) -> float:
    """A finite number (a YAML 1.1 '1e3', which PyYAML reads as text, included)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number, got {short_repr(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"expected a number, got {short_repr(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {short_repr(value)}")
    return number


_Count = Annotated[int, Field(strict=True)]
"""An integer written as one (not 8.0, not true, not "8")."""
_Tokens = Annotated[float, BeforeValidator(_finite), Field(gt=0, le=MAX_TOKENS),
                    AfterValidator(whole_tokens)]
_CachedTokens = Annotated[float, BeforeValidator(_finite), Field(ge=0, le=MAX_TOKENS),
                          AfterValidator(whole_tokens)]
_Efficiency = Annotated[float, BeforeValidator(_finite), Field(gt=0, le=1)]


def _resolved(path: Path, info: ValidationInfo) -> Path:
    """``path`` resolved against the config file's folder (validation context ``base``)."""
    base = info.context.get("base") if isinstance(info.context, dict) else None
    if base is not None and not path.is_absolute():
        return (Path(base) / path).resolve()
    return path


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HardwarePair(_Strict):
    """An accelerator on a host link (the link may be one the accelerator never ships with)."""

    accelerator: str
    link: str


class WorkloadTrace(_Strict):
    """A request trace to analyse instead of the synthetic workloads."""

    path: Path
    format: Literal["sharegpt", "docqa", "mooncake", "table"] | None = None
    name: str | None = None

    @field_validator("path")
    @classmethod
    def _a_file(cls, path: Path, info: ValidationInfo) -> Path:
        path = _resolved(path, info)
        if not path.exists():
            raise ValueError(f"no such file: {path}")
        if not path.is_file():
            raise ValueError(f"not a file: {path}")
        return path


_Scheduler = Literal["fifo", "utilization-aware"]
_Policy = Literal["load", "recompute", "split"]


class SimulationReport(_Strict):
    """The serving-simulation section: a trace (default: the Mooncake slice shipped with
    kvroof) on replicas of a system, under each scheduler and cache policy."""

    trace: Path | None = None
    format: Literal["sharegpt", "docqa", "mooncake", "table"] | None = None
    requests: _Count | None = Field(None, ge=1)
    model: str = "llama-3.1-70b"
    system: str = "paper-testbed"
    tp: _Count = Field(8, ge=1)
    replicas: _Count = Field(4, ge=1, le=64)
    load_mode: Literal["sync", "async", "layerwise"] = "async"
    schedulers: list[_Scheduler] = Field(default_factory=lambda: list(get_args(_Scheduler)),
                                         min_length=1)
    cache_policies: list[_Policy] = Field(default_factory=lambda: list(get_args(_Policy)),
                                          min_length=1)
    paper_load_models: list[str] = Field(
        default_factory=lambda: ["qwen3-235b-a22b", "llama-3.1-70b"])
    """Models served with the paper's loads (ShareGPT and NarrativeQA at 70 requests/s on its
    testbed, :mod:`kvroof.simulate.paper`), beside its tokens per iteration and power; [] for
    none."""

    @field_validator("trace")
    @classmethod
    def _a_file(cls, path: Path | None, info: ValidationInfo) -> Path | None:
        if path is None:
            return None
        path = _resolved(path, info)
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        return path


def _quantity(kind: str) -> Any:
    """A validator reading a quantity written with its unit ("2 s", "500 GB") as SI."""
    def read(value: object) -> float:
        from kvroof.units import Kind, parse_quantity

        if isinstance(value, bool) or not isinstance(value, str):
            raise ValueError(f"expected a {kind} with its unit (like "
                             f"{Kind(kind).example!r}), got {short_repr(value)}")
        try:
            return parse_quantity(value, Kind(kind))
        except KvroofError as error:
            raise ValueError(str(error)) from None
    return BeforeValidator(read)


def _candidate(text: str) -> str:
    """``SYSTEM[:TP][xREPLICAS]``, as ``kvroof plan --candidate`` reads it."""
    from kvroof.plan.inputs import Candidate

    try:
        Candidate.parse(text)
    except KvroofError as error:
        raise ValueError(str(error).removeprefix("candidate: ")) from None
    return text


_Time = Annotated[float, _quantity("time"), Field(gt=0)]
_Bytes = Annotated[float, _quantity("capacity"), Field(gt=0)]
_Price = Annotated[float, BeforeValidator(_finite), Field(ge=0)]


class PlanningReport(_Strict):
    """The planning section (``kvroof plan``, docs/plan.md): will offloading KV to host memory
    pay for ``model`` on each of ``candidates`` (``SYSTEM[:TP][xREPLICAS]``) serving a workload
    preset (default ``chat``, the Mooncake trace shipped with kvroof). Kept small for the
    report's time: a coarse rate tolerance and one host-memory size beside each system's own
    (``dram_sizes: null``: the plan's whole curve, about three times the simulations)."""

    model: str = "deepseek-v3"
    """One of the report's default models whose context holds the shipped trace's longest
    prompt (Qwen3-235B-A22B's 32,768 tokens does not)."""
    candidates: list[Annotated[str, AfterValidator(_candidate)]] = Field(
        default_factory=lambda: ["hgx-h200:8", "hgx-b200:8"], min_length=1)
    workload: Literal["chat", "docqa", "agentic"] = "chat"
    slo_ttft: _Time | None = None
    """TTFT objective with its unit ("2 s"); with neither objective, MLPerf's 2 s and 200 ms."""
    slo_tpot: _Time | None = None
    slo_percentile: Annotated[float, BeforeValidator(_finite), Field(gt=0, le=100)] = 90.0
    tolerance: Annotated[float, BeforeValidator(_finite), Field(gt=0, lt=1)] = 0.25
    """The rate search stops when the failing rate is within this share of the meeting one."""
    dram_sizes: list[_Bytes] | None = Field(default_factory=lambda: [500e9], min_length=1)
    """Host memory per replica of the curve, with units ("500 GB"), beside each system's own."""
    target_rps: Annotated[float, BeforeValidator(_finite), Field(gt=0)] | None = None
    """GPUs for this rate; null: the trace's recorded arrival rate (requests over the span of
    its timestamps)."""
    gpu_hour_price: _Price | None = None
    dram_gb_price: _Price | None = None
    skip_bad: bool = False
    """Skip requests longer than the model's context (counted) instead of stopping."""

    @field_validator("candidates")
    @classmethod
    def _once(cls, candidates: list[str]) -> list[str]:
        twice = next((c for i, c in enumerate(candidates) if c in candidates[:i]), None)
        if twice is not None:
            raise ValueError(f"{twice} given twice")
        return candidates

    @field_validator("dram_gb_price")
    @classmethod
    def _with_gpu_price(cls, price: float | None, info: ValidationInfo) -> float | None:
        if price is not None and info.data.get("gpu_hour_price") is None:
            raise ValueError("give gpu_hour_price too (a cost per token needs it)")
        return price


class WorkloadDeployment(_Strict):
    """Hardware for the workload table: a system, or an accelerator on a link, and a TP degree."""

    system: str | None = None
    accelerator: str | None = None
    link: str | None = None
    tp: _Count = Field(1, ge=1)


def _default_workload_deployments() -> list[WorkloadDeployment]:
    return [
        WorkloadDeployment(system="dgx-h100", tp=8),
        WorkloadDeployment(system="hgx-h200", tp=8),
        WorkloadDeployment(system="gh200", tp=1),
    ]


_DEFAULT_HARDWARE = [
    HardwarePair(accelerator=a, link=link)
    for a in ("a100-sxm", "h100-sxm", "b200")
    for link in ("pcie-gen4-x16", "pcie-gen5-x16")
]


def _png_only() -> list[Literal["png", "svg", "pdf"]]:
    return ["png"]
