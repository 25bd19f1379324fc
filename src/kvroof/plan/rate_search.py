"""The search for the highest arrival rate that meets the objectives: bracketing, then
bisection, each step one simulation.

:class:`RateSearch` is a state machine: :meth:`RateSearch.next_rate` says which rate to simulate
next (``None`` when it is done) and :meth:`RateSearch.record` takes whether that rate met the
objectives, so that a driver can run the next simulations of many searches at once.

1. **Bracket.** The first rate is a guess. While every rate tried meets the objectives, the next
   is ``step`` times the highest; while every one fails, the lowest divided by ``step``. A
   search that meets them beyond ``ceiling`` stops there (the rate is at least that); one that
   fails below ``floor`` stops with no rate (the objectives cannot be met: a request alone
   takes longer than the TTFT target, say).
2. **Bisect.** Between the highest rate that met and the lowest that failed, the geometric
   mean, until the failing rate is within ``tolerance`` of the meeting one
   (``failing <= meeting x (1 + tolerance)``). The answer is the meeting rate: the true
   threshold lies in ``[meeting, failing)``.

The number of simulations is about ``log2(ln(step) / ln(1 + tolerance)) + 2`` once bracketed
(5 for a step of 2 and 5%). It assumes that meeting the objectives is monotone in the rate
(a slower arrival process never misses them where a faster one met them). The arrivals of every
rate are the same Poisson draw rescaled (one seed), which keeps that true up to the simulation's
own discreteness; a search that finds a meeting rate above a failing one says so
(:attr:`RateSearch.crossed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvroof.cost.deployment import Deployment
from kvroof.cost.timing import compute_time
from kvroof.errors import KvroofError

__all__ = ["RateSearch", "SearchOutcome", "first_guess"]


@dataclass(frozen=True)
class SearchOutcome:
    """How a search ended: ``rate`` (requests/s, the highest that met; 0 when none did),
    ``failing`` (the lowest that failed; ``inf`` when none did), ``status`` (``found``,
    ``none``: nothing met down to the floor, ``at_least``: everything met up to the ceiling),
    the simulations it ran and whether it saw a meeting rate above a failing one."""

    rate: float
    failing: float
    status: str
    simulations: int
    crossed: bool


class RateSearch:
    """Bracketing and bisection over the arrival rate (module docstring)."""

    def __init__(self, guess: float, tolerance: float = 0.05, *, step: float = 2.0,
                 floor: float | None = None, ceiling: float | None = None) -> None:
        if not (math.isfinite(guess) and guess > 0):
            raise KvroofError(f"rate search: the first rate must be positive, got {guess!r}")
        if not 0 < tolerance < 1:
            raise KvroofError(f"tolerance: expected a share in (0, 1), got {tolerance!r}")
        if step <= 1 + tolerance:
            raise KvroofError(f"rate search: step {step!r} must exceed 1 + tolerance")
        self.guess = guess
        self.tolerance = tolerance
        self.step = step
        self.floor = guess / 1024 if floor is None else floor
        self.ceiling = guess * 1024 if ceiling is None else ceiling
        self.meeting: float | None = None
        self.failing: float | None = None
        self.tried: list[tuple[float, bool]] = []
        self.crossed = False
        self._status = ""

    def next_rate(self) -> float | None:
        """The next rate to simulate, or ``None`` when the search is done."""
        if self._status:
            return None
        lo, hi = self.meeting, self.failing
        if lo is None and hi is None:
            return self.guess
        if lo is None:
            assert hi is not None
            rate = hi / self.step
            if rate < self.floor:
                self._status = "none"
                return None
            return rate
        if hi is None:
            rate = lo * self.step
            if rate > self.ceiling:
                self._status = "at_least"
                return None
            return rate
        if hi <= lo * (1 + self.tolerance):
            self._status = "found"
            return None
        return math.sqrt(lo * hi)

    def record(self, rate: float, meets: bool) -> None:
        """Whether ``rate`` met the objectives."""
        self.tried.append((rate, meets))
        if meets:
            if self.failing is not None and rate >= self.failing:
                self.crossed = True
            if self.meeting is None or rate > self.meeting:
                self.meeting = rate
        else:
            if self.meeting is not None and rate <= self.meeting:
                self.crossed = True
            if self.failing is None or rate < self.failing:
                self.failing = rate
        if self.meeting is not None and self.failing is not None \
                and self.failing <= self.meeting:
            # non-monotone evidence: keep the lower failing rate as the bound and bisect below
            # it from the highest meeting rate under it
            below = [r for r, ok in self.tried if ok and r < self.failing]
            self.meeting = max(below) if below else None

    @property
    def done(self) -> bool:
        """Whether :meth:`next_rate` has nothing more to try."""
        return self.next_rate() is None

    def outcome(self) -> SearchOutcome:
        """The result (call once :attr:`done`)."""
        if not self.done:
            raise KvroofError("rate search: not finished")
        return SearchOutcome(
            rate=self.meeting or 0.0,
            failing=math.inf if self.failing is None else self.failing,
            status=self._status, simulations=len(self.tried), crossed=self.crossed)


def first_guess(dep: Deployment, replicas: int, mean_input: float, cached_share: float) -> float:
    """A first rate to try (requests/s): half of what the replicas could prefill if every
    iteration were a full 8,192-token prefill (:func:`kvroof.cost.timing.compute_time` of one
    such prefill alone) and each request's uncached prompt were the workload's mean."""
    t = float(compute_time(dep, 8192, 0))
    uncached = max(1.0, mean_input * (1.0 - cached_share))
    guess = 0.5 * replicas * (8192 / t) / uncached if t > 0 else 1.0
    return guess if math.isfinite(guess) and guess > 0 else 1.0
