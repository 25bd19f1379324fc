"""Staged runs without a simulation: parsing stages, inference-perf's per-stage arrival timers,
plans from rates and from labels, and the drained clock driven by hand-given finish times."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.stage_clock import StageClock
from kvroof.workload.stages import (
    Stage,
    StagePlan,
    parse_stages,
    plan_from_labels,
    plan_from_rates,
    stage_offsets,
)


def test_parse_stages_reads_rates_and_durations() -> None:
    stages = parse_stages("5x60, 10X30,0.25x8")
    assert stages == (Stage(5.0, 60.0), Stage(10.0, 30.0), Stage(0.25, 8.0))
    # int(rate x duration) as inference-perf's run_stage counts: 300, 300, int(2.0) = 2
    assert [s.count for s in stages] == [300, 300, 2]


def test_stage_count_rounds_down_as_inference_perf() -> None:
    # 0.29 x 100 is 28.999999999999996 in binary floating point; int() gives 28, as Python
    # does in inference-perf's `int(rate * duration)`
    assert Stage(0.29, 100).count == 28


@pytest.mark.parametrize(("text", "message"), [
    ("", "expected RATExSECONDS"),
    ("5", "expected RATExSECONDS"),
    ("5x", "expected RATExSECONDS"),
    ("5x60x2", "expected RATExSECONDS"),
    ("5x60,", "expected RATExSECONDS"),
    ("ax60", "the rate of stage 'ax60' must be a positive number"),
    ("0x60", "the rate of stage '0x60'"),
    ("-1x60", "the rate of stage '-1x60'"),
    ("nanx60", "the rate of stage 'nanx60'"),
    ("5x0", "the duration of stage '5x0'"),
    ("5xinf", "the duration of stage '5xinf'"),
    ("2x10,0.5x1", r"stage 2 \(0.5x1\) holds int\(0.5 x 1\) = 0 requests"),
])
def test_bad_stages_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(KvroofError, match=r"^stages: .*" + message) as error:
        parse_stages(text)
    assert "\n" not in str(error.value)


def test_poisson_offsets_follow_inference_perf_timer() -> None:
    """PoissonLoadTimer: Poisson(rate) requests per second, spread over the second by gaps
    scaled to sum to one second, so each second's last request lands on its end."""
    rate, duration = 10.0, 1000.0
    offsets = stage_offsets(Stage(rate, duration), "poisson", np.random.default_rng(3))
    assert offsets.size == 10_000  # int(10 x 1000)
    assert np.all(np.diff(offsets) >= 0) and offsets[0] > 0
    per_second = np.bincount(np.ceil(offsets).astype(int) - 1)
    full = per_second[:-1]  # the last second is cut at the stage's count
    # A Poisson count has variance = mean (index of dispersion 1); over ~1,000 seconds the
    # estimate's standard error is sqrt(2 / 1000) = 0.045, so 0.85-1.15 is > 3 sigma.
    assert abs(full.mean() - rate) < 0.3  # standard error sqrt(10 / 1000) = 0.1
    assert 0.85 < full.var() / full.mean() < 1.15
    # every second that holds a request ends with one exactly on its end (x / x == 1.0)
    ends = np.flatnonzero(full) + 1.0
    assert np.all(np.isin(ends, offsets))
    # 10,000 requests at 10/s take ~1,000 s: the sum of 1,000 Poisson(10) counts has standard
    # deviation 100 requests = 10 s
    assert abs(offsets[-1] - duration) < 40


def test_constant_offsets_span_the_stage() -> None:
    """ConstantLoadTimer: exponential gaps scaled to sum to the duration, so the last request
    lands on the stage's end."""
    offsets = stage_offsets(Stage(4, 25), "constant", np.random.default_rng(0))
    assert offsets.size == 100 and offsets[-1] == pytest.approx(25.0, rel=1e-12)
    assert np.all(np.diff(offsets) > 0)


def test_plan_from_rates_and_its_concatenation() -> None:
    plan = plan_from_rates("2x5,4x5", seed=1, interval=1.5)
    assert plan.stage.tolist() == [0] * 10 + [1] * 20
    assert plan.lengths == (5.0, 5.0) and plan.rates == (2.0, 4.0)
    # undrained: stage 2 starts at 0 + 5 s + 1.5 s
    assert plan.nominal_starts().tolist() == [0.0, 6.5]
    times = plan.concatenated()
    assert np.array_equal(times[:10], plan.offset[:10])
    assert np.array_equal(times[10:], 6.5 + plan.offset[10:])
    assert np.array_equal(plan_from_rates("2x5,4x5", seed=1).offset, plan.offset)  # seeded
    assert not np.array_equal(plan_from_rates("2x5,4x5", seed=2).offset, plan.offset)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"interval": -1.0}, "stage_interval: expected non-negative seconds"),
    ({"interval": float("inf")}, "stage_interval: expected non-negative seconds"),
    ({"arrival": "gamma"}, "stage_arrival: expected poisson or constant"),
    ({"seed": -1}, "seed: must be a non-negative integer"),
    ({"drain": "yes"}, "drain: expected true or false"),
])
def test_bad_plan_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(KvroofError, match=message):
        plan_from_rates("1x2", **kwargs)  # type: ignore[arg-type]


def test_plan_from_labels_by_hand() -> None:
    plan = plan_from_labels(["a", "a", "b", "b", "b"], [1.0, 2.0, 10.0, 10.5, 12.0],
                            interval=1.0)
    assert plan.labels == ("a", "b")
    assert plan.stage.tolist() == [0, 0, 1, 1, 1]
    # offsets after each stage's first timestamp: 1-1, 2-1; 10-10, 10.5-10, 12-10
    assert plan.offset.tolist() == [0.0, 1.0, 0.0, 0.5, 2.0]
    # lengths: a runs from 1 to b's first (10): 9 s; b from 10 to its last (12): 2 s
    assert plan.lengths == (9.0, 2.0)
    # undrained: b starts at 0 + 9 + 1 = 10
    assert plan.concatenated().tolist() == [0.0, 1.0, 10.0, 10.5, 12.0]


def test_bad_labels() -> None:
    with pytest.raises(KvroofError, match="request 3 returns to stage 'a'"):
        plan_from_labels(["a", "b", "a"], [0, 1, 2])
    with pytest.raises(KvroofError, match="never decreasing"):
        plan_from_labels(["a", "a"], [1, 0])
    with pytest.raises(KvroofError, match="2 labels for 3 timestamps"):
        plan_from_labels(["a", "a"], [0, 1, 2])


def _plan(drain: bool = True) -> StagePlan:
    # three stages of 2, 1 and 2 requests with hand-set offsets
    return StagePlan(stage=np.array([0, 0, 1, 2, 2]), offset=np.array([0.0, 1.0, 0.25, 0, 3]),
                     lengths=(2.0, 1.0, 4.0), rates=(None,) * 3, labels=("a", "b", "c"),
                     interval=0.5, drain=drain)


def test_drained_clock_by_hand() -> None:
    clock = StageClock(_plan(), np.ones(5, dtype=bool))
    assert clock.start() == [(0.0, 0), (1.0, 1)]
    assert clock.finished(1, 7.0) == []  # stage a still has request 0
    # stage a drains at 9 s: b starts at 9 + 0.5 = 9.5, its request at 9.5 + 0.25
    assert clock.finished(0, 9.0) == [(9.75, 2)]
    # b drains at 20 s: c starts at 20.5, requests at 20.5 + 0 and 20.5 + 3
    assert clock.finished(2, 20.0) == [(20.5, 3), (23.5, 4)]
    assert clock.finished(3, 30.0) == [] and clock.finished(4, 31.0) == []
    assert clock.starts == [0.0, 9.5, 20.5] and clock.ends == [9.0, 20.0, 31.0]


def test_clock_skips_a_stage_with_nothing_served() -> None:
    served = np.array([True, True, False, True, True])  # b's one request is skipped
    clock = StageClock(_plan(), served)
    clock.start()
    clock.finished(0, 4.0)
    # a drains at 5 s; b starts at 5.5 and, empty, ends there; c starts at 5.5 + 0.5 = 6
    assert clock.finished(1, 5.0) == [(6.0, 3), (9.0, 4)]
    assert clock.starts == [0.0, 5.5, 6.0] and clock.ends == [5.0, 5.5]


def test_undrained_clock_releases_everything_at_once() -> None:
    plan = _plan(drain=False)
    clock = StageClock(plan, np.ones(5, dtype=bool))
    # nominal starts: 0, 0 + 2 + 0.5 = 2.5, 2.5 + 1 + 0.5 = 4
    assert clock.start() == [(0.0, 0), (1.0, 1), (2.75, 2), (4.0, 3), (7.0, 4)]
    assert clock.finished(0, 100.0) == [] and clock.starts == [0.0, 2.5, 4.0]


def test_clock_refuses_a_plan_of_another_trace() -> None:
    with pytest.raises(KvroofError, match="5 staged requests but 4 in the trace"):
        StageClock(_plan(), np.ones(4, dtype=bool))


def test_plan_checks_its_columns() -> None:
    with pytest.raises(KvroofError, match="stage numbers must be 0 to 2"):
        replace(_plan(), stage=np.array([0, 0, 1, 3, 2]))
    with pytest.raises(KvroofError, match="offsets must be finite and non-negative"):
        replace(_plan(), offset=np.array([0.0, -1, 0, 0, 0]))


def test_poisson_offsets_ascend_when_the_first_seconds_are_empty() -> None:
    """A stage at 2 requests/s drawn with seed 3 has an empty first second; its offsets used to
    take the last request's gap sum as the one before it (index -1), so they did not ascend.
    Each offset is its second plus its share of that second's gaps, so they ascend."""
    plan = plan_from_rates((Stage(2.0, 4.0), Stage(4.0, 4.0)), seed=3)
    for k in (0, 1):
        offsets = plan.offset[plan.stage == k]
        assert np.all(np.diff(offsets) >= 0), offsets
        assert np.all((offsets > 0) & (offsets <= np.ceil(offsets[-1])))
