"""The rate search: bracketing and bisection to the tolerance, and how it ends."""

from __future__ import annotations

import math

import pytest

from kvroof.errors import KvroofError
from kvroof.plan.rate_search import RateSearch


def drive(search: RateSearch, meets: object) -> RateSearch:
    while (rate := search.next_rate()) is not None:
        search.record(rate, bool(meets(rate)))  # type: ignore[operator]
    return search


@pytest.mark.parametrize("threshold", [0.013, 0.9, 3.7, 250.0])
@pytest.mark.parametrize("guess", [0.5, 7.0])
def test_finds_the_threshold_within_the_tolerance(threshold: float, guess: float) -> None:
    search = drive(RateSearch(guess, 0.05), lambda r: r <= threshold)
    out = search.outcome()
    assert out.status == "found"
    assert out.rate <= threshold < out.failing <= out.rate * 1.05
    # bracketing: |log2(threshold / guess)| + 2 doublings or halvings at most, then bisection
    bracket = abs(math.log2(threshold / guess)) + 2
    bisect = math.ceil(math.log2(math.log(2) / math.log(1.05))) + 1
    assert out.simulations <= bracket + bisect
    assert not out.crossed


def test_nothing_meets_and_everything_meets() -> None:
    out = drive(RateSearch(1.0, 0.05), lambda r: False).outcome()
    assert (out.status, out.rate) == ("none", 0.0)
    assert out.simulations == 11  # the guess, then halving down to guess / 1024
    out = drive(RateSearch(1.0, 0.05), lambda r: True).outcome()
    assert out.status == "at_least" and out.rate == 1024.0 and math.isinf(out.failing)


def test_a_meeting_rate_above_a_failing_one_is_noted() -> None:
    # meets below 1 and between 3 and 5 only: the first guess (4) meets, 8 fails, 6 fails...
    out = drive(RateSearch(4.0, 0.05), lambda r: r <= 1 or 3 <= r <= 5).outcome()
    assert out.status == "found" and out.rate <= 5 < out.failing
    search = RateSearch(4.0, 0.05)
    search.record(4.0, False)
    search.record(8.0, True)  # non-monotone evidence
    assert search.crossed and search.meeting is None and search.failing == 4.0


def test_bad_settings() -> None:
    with pytest.raises(KvroofError, match="tolerance"):
        RateSearch(1.0, 0.0)
    with pytest.raises(KvroofError, match="first rate"):
        RateSearch(-1.0)
    with pytest.raises(KvroofError, match="step"):
        RateSearch(1.0, 0.5, step=1.2)


@pytest.mark.parametrize("tolerance", [0.25, 0.5, 0.9])
def test_a_plan_with_a_coarse_tolerance(tolerance: float) -> None:
    """A tolerance of 50% or more used to stop the plan: the search with offloading started
    from the rate found without it with a step of 1.5, which must exceed 1 + tolerance. Every
    arm that found a rate ends within the tolerance of its failing rate (the search's
    stopping rule, rate_search's docstring)."""
    from kvroof.plan.inputs import SearchSettings
    from kvroof.plan.workloads import WorkloadSummary
    from tests.plan.helpers import small_plan

    summary = WorkloadSummary(2000, 0.8, 10, requests=120, output_tokens="exp:32")
    result = small_plan(summary, search=SearchSettings(tolerance=tolerance))
    cand = result.candidates[0]
    assert cand.error is None and cand.curve is not None and cand.without is not None
    arms = [cand.without, *cand.curve.arms]
    assert all(a.status in ("found", "at_least") for a in arms)
    for arm in arms:
        if arm.status == "found":
            assert arm.max_rps < arm.failing_rps <= arm.max_rps * (1 + tolerance)
