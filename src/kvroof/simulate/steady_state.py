"""Whether a simulated run reached a steady state: a run whose offered rate exceeds the rate
it served, while its queue grew (:func:`saturation`), has latencies that depend on the trace's
length rather than on the serving setup. ``kvroof simulate`` prints it and the simulation
figures draw it (no matplotlib here)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult

__all__ = [
    "SATURATION_GROWTH",
    "SATURATION_MIN_REQUESTS",
    "SATURATION_SHARE",
    "Saturation",
    "format_seconds",
    "saturated",
    "saturation",
    "saturation_notes",
]

SATURATION_SHARE = 0.9
"""A run is saturated when it serves less than this share of the offered rate ..."""
SATURATION_GROWTH = 2.0
"""... and the median TTFT of the last third of its arrivals is this many times the first's."""
SATURATION_MIN_REQUESTS = 30


@dataclass(frozen=True)
class Saturation:
    """A run whose offered rate exceeds the rate it served: the queue grew while requests
    arrived (TTFT medians of the first and last third of the arrivals), so it has no steady
    state and its latencies grow with the trace's length."""

    offered_rps: float
    served_rps: float
    ttft_first_s: float
    ttft_last_s: float

    def message(self) -> str:
        return (f"offered {self.offered_rps:.3g} requests/s, served {self.served_rps:.3g}: the "
                "queue grows while requests arrive (median TTFT "
                f"{format_seconds(self.ttft_first_s)} for the first third of the arrivals, "
                f"{format_seconds(self.ttft_last_s)} for the last third), so the latencies "
                "depend on the trace's length")


def format_seconds(value: float) -> str:
    """A duration for a warning line: ms, s, min or h by its size."""
    if not math.isfinite(value):
        return "-"
    if value >= 7200:
        return f"{value / 3600:.3g} h"
    if value >= 120:
        return f"{value / 60:.3g} min"
    if value >= 1:
        return f"{value:.3g} s"
    return f"{value * 1e3:.3g} ms"


def saturation(result: SimResult) -> Saturation | None:
    """The run's :class:`Saturation` when it served less than 90% of the offered rate (requests
    over the span of their arrivals) and its queue grew (the last third of the arrivals waited
    at least twice as long for their first token as the first third); None otherwise, and for
    runs of fewer than 30 requests."""
    requests = result.requests
    arrival = np.asarray(requests["arrival"], dtype=float)
    ttft = np.asarray(requests["ttft"], dtype=float)
    n = arrival.size
    if n < SATURATION_MIN_REQUESTS:
        return None
    span = float(arrival.max() - arrival.min())
    served = float(result.summary.get("throughput_rps", math.nan))
    if not (span > 0 and math.isfinite(served)):
        return None
    return saturated(arrival, ttft, n / span, served)


def saturated(arrival: NDArray[np.float64], ttft: NDArray[np.float64], offered: float,
              served: float) -> Saturation | None:
    """The rule of :func:`saturation` on requests' ``arrival`` and ``ttft`` (seconds) at
    ``offered`` and ``served`` requests/s: served below 90% of offered and the median TTFT of
    the last third of the arrivals at least twice the first third's."""
    order = np.argsort(arrival, kind="stable")
    third = arrival.size // 3
    first = float(np.nanmedian(ttft[order[:third]]))
    last = float(np.nanmedian(ttft[order[-third:]]))
    if served < SATURATION_SHARE * offered and last > SATURATION_GROWTH * first:
        return Saturation(offered, served, first, last)
    return None


def saturation_notes(results: Mapping[str, SimResult]) -> list[tuple[str, str]]:
    """One warning for the saturated runs among ``results`` (empty when none is), as a
    ``(gid, text)`` note for a figure."""
    found = {label: s for label, r in results.items() if (s := saturation(r)) is not None}
    if not found:
        return []
    if len(results) == 1:
        return [("note:saturated", f"No steady state: {next(iter(found.values())).message()}")]
    runs = ", ".join(found)
    offered = sorted({f"{s.offered_rps:.3g}" for s in found.values()})
    served = ", ".join(f"{s.served_rps:.3g}" for s in found.values())
    first = min(s.ttft_first_s for s in found.values())
    last = max(s.ttft_last_s for s in found.values())
    return [("note:saturated",
             f"No steady state in {runs}: offered {'/'.join(offered)} requests/s, served "
             f"{served}; the queue grows while requests arrive (median TTFT up to "
             f"{format_seconds(last)} for the last third of the arrivals, from "
             f"{format_seconds(first)} for the first), so the latencies depend on the "
             "trace's length")]
