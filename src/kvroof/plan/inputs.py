"""What a plan is asked: hardware candidates, service-level objectives, prices and the search
settings, each checked once with a one-line error that names the argument (the command line
maps each to its flag).

- :class:`Candidate`: a system (or an accelerator on its host link) at a TP degree with a number
  of replicas, written ``SYSTEM[:TP][xREPLICAS]`` (``dgx-h100:8``, ``gh200x4``,
  ``hgx-h200:4x2``). Without a TP the smallest power of two at which the model's weights fit is
  taken; without replicas, as many as fill one system (its GPUs over TP; one for an
  accelerator).
- :class:`Objectives`: TTFT and TPOT at a percentile of the requests (SI seconds). Without any,
  MLPerf Inference's Llama-2-70B server-scenario latencies apply (TTFT 2 s, TPOT 200 ms), at the
  percentile given.
- :class:`Prices`: per GPU-hour and per GB-hour of host memory (any currency).
- :class:`SearchSettings`: the rate search's relative tolerance, its first guess, the host
  memory sizes of the curve and the share of the gain the smallest recommended size must keep.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kvroof.errors import KvroofError, short_repr

__all__ = [
    "DEFAULT_SLO_TPOT",
    "DEFAULT_SLO_TTFT",
    "Candidate",
    "Objectives",
    "Prices",
    "SearchSettings",
    "positive_number",
]

DEFAULT_SLO_TTFT = 2.0
"""Seconds: MLPerf Inference's Llama-2-70B server scenario TTFT limit (taken when no objective
is given)."""

DEFAULT_SLO_TPOT = 0.2
"""Seconds: MLPerf Inference's Llama-2-70B server scenario TPOT limit."""

_CANDIDATE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._/+-]*?)(?::(?P<tp>\d+))?"
                        r"(?:x(?P<replicas>\d+))?$")


def positive_number(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """``value`` as a float, finite and positive (or zero when allowed); else a one-line error
    starting with ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        kind = "a non-negative" if allow_zero else "a positive"
        raise KvroofError(f"{name}: expected {kind} number, got {short_repr(value)}")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KvroofError(f"{name}: expected a positive integer, got {short_repr(value)}")
    return value


@dataclass(frozen=True)
class Candidate:
    """One hardware candidate: ``name`` is a system or an accelerator (the registry says
    which); ``tp`` and ``replicas`` ``None`` until chosen (:mod:`kvroof.plan.candidates`)."""

    name: str
    tp: int | None = None
    replicas: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise KvroofError(f"candidate: expected a system or accelerator name, got "
                              f"{short_repr(self.name)}")
        if self.tp is not None:
            _count("candidate TP", self.tp)
        if self.replicas is not None:
            _count("candidate replicas", self.replicas)

    @classmethod
    def parse(cls, text: str) -> Candidate:
        """``SYSTEM[:TP][xREPLICAS]``."""
        match = _CANDIDATE.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise KvroofError(f"candidate: expected SYSTEM[:TP][xREPLICAS] (e.g. dgx-h100:8 or "
                              f"gh200x4), got {short_repr(text)}")
        tp = int(match["tp"]) if match["tp"] else None
        replicas = int(match["replicas"]) if match["replicas"] else None
        if tp == 0 or replicas == 0:
            raise KvroofError(f"candidate: TP and replicas must be positive, got "
                              f"{short_repr(text)}")
        return cls(match["name"], tp, replicas)

    @property
    def text(self) -> str:
        """The candidate as written: ``name[:tp][xreplicas]``."""
        tp = f":{self.tp}" if self.tp is not None else ""
        replicas = f"x{self.replicas}" if self.replicas is not None else ""
        return f"{self.name}{tp}{replicas}"


@dataclass(frozen=True)
class Objectives:
    """Service-level objectives: the ``percentile`` (0-100] of TTFT and of TPOT must be at most
    ``ttft`` and ``tpot`` seconds. ``defaulted``: neither was given, MLPerf's were taken."""

    ttft: float | None = None
    tpot: float | None = None
    percentile: float = 90.0
    defaulted: bool = False

    def __post_init__(self) -> None:
        if self.ttft is not None:
            positive_number("slo_ttft", self.ttft)
        if self.tpot is not None:
            positive_number("slo_tpot", self.tpot)
        p = positive_number("slo_percentile", self.percentile)
        if p > 100:
            raise KvroofError(f"slo_percentile: expected a percentile in (0, 100], got {p:g}")

    @classmethod
    def given(cls, ttft: float | None, tpot: float | None,
              percentile: float = 90.0) -> Objectives:
        """The objectives given, or MLPerf's defaults when neither is."""
        if ttft is None and tpot is None:
            return cls(DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT, percentile, defaulted=True)
        return cls(ttft, tpot, percentile)

    @property
    def text(self) -> str:
        """``TTFT p90 <= 2 s, TPOT p90 <= 50 ms``."""
        from kvroof.units import Kind, format_quantity

        p = f"p{self.percentile:g}"
        parts = []
        if self.ttft is not None:
            parts.append(f"TTFT {p} <= {format_quantity(self.ttft, Kind.TIME)}")
        if self.tpot is not None:
            parts.append(f"TPOT {p} <= {format_quantity(self.tpot, Kind.TIME)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Prices:
    """``gpu_hour``: price of one GPU for an hour; ``dram_gb_hour``: of one GB (1e9 bytes) of
    host memory for an hour (the same currency)."""

    gpu_hour: float | None = None
    dram_gb_hour: float | None = None

    def __post_init__(self) -> None:
        if self.gpu_hour is not None:
            positive_number("gpu_hour_price", self.gpu_hour, allow_zero=True)
        if self.dram_gb_hour is not None:
            positive_number("dram_gb_price", self.dram_gb_hour, allow_zero=True)
        if self.dram_gb_hour is not None and self.gpu_hour is None:
            raise KvroofError("dram_gb_price: give the GPU-hour price too (a cost per token "
                              "needs it)")


@dataclass(frozen=True)
class SearchSettings:
    """How the plan searches.

    - ``tolerance``: the rate search stops when the lowest failing rate is within this share of
      the highest meeting one (0.05: 5%).
    - ``first_rate``: requests/s of the first simulation (``None``: estimated from the cost
      model, :func:`kvroof.plan.rate_search.first_guess`).
    - ``dram_sizes``: host-memory bytes per replica for the curve (``None``: multiples of the
      HBM KV pool, :func:`kvroof.plan.memory_curve.curve_sizes`).
    - ``most``: the share of the largest gain that the recommended size must capture.
    - ``thresholds_up_to``: largest new-token count of the reload-threshold table.
    """

    tolerance: float = 0.05
    first_rate: float | None = None
    dram_sizes: tuple[float, ...] | None = None
    most: float = 0.9
    thresholds_up_to: int = 16384

    def __post_init__(self) -> None:
        tol = positive_number("tolerance", self.tolerance)
        if tol >= 1:
            raise KvroofError(f"tolerance: expected a share below 1 (0.05 is 5%), got {tol:g}")
        if self.first_rate is not None:
            positive_number("first_rate", self.first_rate)
        if self.dram_sizes is not None:
            if not self.dram_sizes:
                raise KvroofError("dram_sizes: give at least one size")
            for size in self.dram_sizes:
                positive_number("dram_sizes", size)
        most = positive_number("most", self.most)
        if most > 1:
            raise KvroofError(f"most: expected a share in (0, 1], got {most:g}")
        _count("thresholds_up_to", self.thresholds_up_to)
