"""What a plan answers, as plain values: per candidate the two arms (without offloading, and
with it at the default host memory), the host-memory curve, the reload threshold, the fleet for
a target rate and its cost, the verdict and the validity notes; :meth:`Plan.to_json` gives all
of it in SI units (non-finite numbers as ``null``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kvroof.jsonsafe import json_safe
from kvroof.plan.inputs import Objectives, Prices, SearchSettings
from kvroof.plan.reload_threshold import ReloadThreshold
from kvroof.plan.simulation import RunPoint
from kvroof.plan.sizing import Sizing
from kvroof.plan.workloads import ReuseStats

__all__ = ["Arm", "CandidatePlan", "Curve", "Plan", "ServingQuote", "Validity", "Verdict"]


@dataclass(frozen=True)
class Arm:
    """One rate search: ``offload`` or not, host memory per replica (``dram_bytes``; ``None``
    without offloading, ``inf`` unlimited) and its capacity ratio (host pool over HBM pool),
    the highest rate meeting the objectives (``max_rps``; 0 when none did), the lowest that
    failed (``failing_rps``), how the search ended (``status``: found, none, at_least), its
    simulations and every point it simulated (by rate); ``at_max``: the point at ``max_rps``."""

    label: str
    offload: bool
    dram_bytes: float | None
    capacity_ratio: float | None
    max_rps: float
    failing_rps: float
    status: str
    simulations: int
    crossed: bool
    points: tuple[RunPoint, ...]
    at_max: RunPoint | None
    hypothetical: bool = False
    """More host memory than the system has (the curve goes past it)."""


@dataclass(frozen=True)
class Curve:
    """The host-memory curve (:mod:`kvroof.plan.memory_curve`): its arms by size, their gains
    over no offloading and whether each pays, the recommended arm (smallest keeping ``most`` of
    the gain), the capacity ratio from which offloading pays, and why there is no curve when
    there is none (``note``)."""

    arms: tuple[Arm, ...]
    gains: tuple[float, ...]
    pays: tuple[bool, ...]
    best_gain: float
    most: float
    recommended: Arm | None
    pays_from_ratio: float | None
    note: str = ""


@dataclass(frozen=True)
class Verdict:
    """``decision``: ``on`` (turn offloading on), ``off`` (leave it off: it adds nothing or
    loses), ``cannot`` (no rate meets the objectives either way); ``sentence``: the one-line
    verdict; ``why``: the reasons, in kvroof's terms."""

    decision: str
    sentence: str
    why: tuple[str, ...]


@dataclass(frozen=True)
class ServingQuote:
    """The serving validation's error for the published serving condition closest to one arm
    of a candidate (:mod:`kvroof.plan.validity`): the condition (``condition``, ``label``, its
    source ``url``, what it ran: ``model``, ``hardware``, ``engine``, ``tp``), its replay's
    median simulated-over-measured ratio and mean absolute error (``mape``) over its ``ratios``
    scores below saturation, at stage durations times ``scale``; ``matches``: the candidate has
    the condition's accelerator and model; ``match``: how it differs, in words; ``error``: why
    the replay gave no figures ("" when it did)."""

    arm: str
    condition: str
    label: str
    url: str
    model: str
    hardware: str
    engine: str
    tp: int
    scale: float
    matches: bool
    match: str
    median_ratio: float | None = None
    mape: float | None = None
    ratios: int = 0
    error: str = ""

    def text(self) -> str:
        """One line: the condition, its source, its error and how the candidate compares."""
        what = (f"{self.condition} ({self.label}; {self.model} on {self.hardware}, TP{self.tp}, "
                f"{self.engine}; {self.url})")
        if self.error:
            error = f"replay failed, no error to quote: {self.error}"
        elif self.median_ratio is None or self.mape is None:
            error = "no stage below saturation to score"
        else:
            error = (f"median simulated/measured {self.median_ratio:.2f}, mean absolute error "
                     f"{self.mape:.0%} over {self.ratios} scores below saturation (replayed "
                     f"at {self.scale:g}x the stage durations)")
        return f"{self.arm}: {what}: {error}; {self.match}"


@dataclass(frozen=True)
class Validity:
    """Which models produced the answers and how far they were validated: the compute model,
    the engine profile and the simulated engine's semantics; the closest published model-level
    validation case and the error of its quantity; ``serving``: per arm, the closest published
    serving condition and its error; ``outside``: answers that fall outside what was
    validated."""

    compute_model: str
    engine: str
    semantics: str
    closest_case: str
    closest_error: str
    outside: tuple[str, ...]
    serving: tuple[ServingQuote, ...] = ()
    """Per arm (without offloading, with it): the closest published serving condition and the
    serving validation's error there."""


@dataclass(frozen=True)
class CandidatePlan:
    """The plan of one candidate (``error``: why it has none, its other fields then empty)."""

    label: str
    deployment: str
    tp: int
    replicas: int
    gpus: int
    choices: tuple[str, ...]
    hbm_tokens: int = 0
    host_tokens: float = 0.0
    host_bytes_per_token: float = 0.0
    kappa_alone: float | None = None
    kappa_busy: float | None = None
    without: Arm | None = None
    with_offload: Arm | None = None
    curve: Curve | None = None
    threshold: ReloadThreshold | None = None
    sizing_without: Sizing | None = None
    sizing_with: Sizing | None = None
    verdict: Verdict | None = None
    validity: Validity | None = None
    error: str | None = None

    @property
    def gain(self) -> float:
        """Highest meeting rate with offloading (default host memory) over without it."""
        from kvroof.plan.memory_curve import gain_of

        if self.without is None or self.with_offload is None:
            return float("nan")
        return gain_of(self.with_offload.max_rps, self.without.max_rps)


@dataclass(frozen=True)
class Plan:
    """A finished plan: what was asked, the workload's reuse, one :class:`CandidatePlan` per
    candidate, the simulations run and how long it took."""

    model: str
    workload: str
    workload_kind: str
    workload_description: str
    assumptions: tuple[str, ...]
    synthetic: bool
    reuse: ReuseStats
    objectives: Objectives
    prices: Prices
    search: SearchSettings
    target_rps: float | None
    settings: dict[str, Any]
    candidates: tuple[CandidatePlan, ...]
    simulations: int
    simulated_s: float
    wall_s: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> list[CandidatePlan]:
        """Candidates without a plan (a simulation failed)."""
        return [c for c in self.candidates if c.error is not None]

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-ready (SI units; non-finite numbers as null)."""
        def plain(value: Any) -> Any:
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, dict):
                return {str(k): plain(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [plain(v) for v in value]
            return value

        data = plain(self)
        for cand, plan in zip(data["candidates"], self.candidates, strict=True):
            cand["gain"] = plan.gain
        data["kind"] = "plan"
        safe: dict[str, Any] = json_safe(data)
        return safe
