"""The serving replay builds the workload the case describes (prefix and question lengths,
groups, arrivals per stage) and the scoring is the ratio simulated / measured, summarized as the
other quantities are."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from kvroof.validation.serving import serving_stats, validate_serving
from kvroof.validation.serving_cases import METRICS, load_serving_file
from kvroof.validation.serving_replay import prompt_order, stage_arrivals, stage_trace
from tests.validation.serving_fixture import write_small_case


def _brute_force_count(rate: float, duration: float, seed: int) -> int:
    """Arrivals of a Poisson process before ``duration``, by adding exponential gaps one at a
    time from the same seeded generator kvroof.workload.arrivals draws from."""
    rng = np.random.default_rng(seed)
    time, count = 0.0, 0
    while True:
        time += float(rng.exponential(1.0 / rate))
        if time >= duration:
            return count
        count += 1


@pytest.mark.parametrize(("rate", "duration", "seed"), [(5.0, 60.0, 1), (40.0, 15.0, 8),
                                                        (0.5, 3.0, 2)])
def test_arrivals_per_stage_match_a_brute_force_count(rate: float, duration: float,
                                                      seed: int) -> None:
    times = stage_arrivals(rate, duration, seed)
    assert times.size == _brute_force_count(rate, duration, seed)
    assert np.all(np.diff(times) >= 0) and (times.size == 0 or times[-1] < duration)


def test_stage_trace_has_the_case_prefix_question_and_groups(tmp_path: Path) -> None:
    workload = load_serving_file(write_small_case(tmp_path)).replay.workload
    first = 5
    trace = stage_trace(workload, 64, 4.0, 30.0, first, seed=7)
    n = len(trace)
    assert n == _brute_force_count(4.0, 30.0, 7)
    # every prompt is the 1024-token prefix and the 64-token question of the case
    assert np.all(trace.input_tokens == 1024 + 64)
    assert np.all(trace.output_tokens == 16)
    # the prompt of request `first + i` is the shuffled prompt (first + i) mod 6, brute force:
    order = list(np.random.default_rng(workload.seed).permutation(6))
    assert list(prompt_order(workload)) == order
    prefix_ids: dict[int, tuple[int, ...]] = {}
    for i in range(n):
        ids, ends = trace.blocks(i)
        group = int(order[(first + i) % 6]) // 2
        # blocks of 64 tokens: the prefix ends at 1024 exactly (16 blocks), then the question
        assert list(ends[:16]) == list(range(64, 1025, 64))
        assert int(ends[-1]) == 1024 + 64
        shared = tuple(int(x) for x in ids[:16])
        assert prefix_ids.setdefault(group, shared) == shared  # same group, same prefix blocks
    distinct = set(prefix_ids.values())
    assert len(distinct) == len(prefix_ids)  # different groups share no prefix
    assert all(not set(a) & set(b) for a in distinct for b in distinct if a != b)


@pytest.fixture(scope="module")
def small_result(tmp_path_factory: pytest.TempPathFactory) -> object:
    folder = tmp_path_factory.mktemp("serving")
    write_small_case(folder)
    return validate_serving([folder])


def test_scores_are_simulated_over_measured(small_result: object) -> None:
    from kvroof.validation.serving import ServingResult

    assert isinstance(small_result, ServingResult)
    data = small_result.as_dict()
    assert [s["rate_rps"] for s in data["stages"]] == [2, 4, 3]
    measured = {  # the small case file's numbers (tests/validation/serving_fixture.py), SI
        (2, "mean_ttft"): 0.05, (2, "mean_e2e"): 0.2, (2, "throughput"): 2000,
        (4, "mean_ttft"): 0.04, (4, "mean_e2e"): 0.3, (4, "throughput"): 4000,
        (3, "mean_ttft"): 0.03, (3, "mean_tpot"): 0.005, (3, "mean_e2e"): 0.1,
    }
    for stage, score in zip(data["stages"], small_result.scores, strict=True):
        for metric in METRICS:
            entry = stage["metrics"][metric]
            expected = measured.get((stage["rate_rps"], metric))
            assert entry["measured"] == pytest.approx(expected) if expected else \
                entry["measured"] is None
            if expected is None:
                assert entry["ratio"] is None
            else:
                assert entry["ratio"] == pytest.approx(entry["simulated"] / expected)
        # the replay's requests are the stage's arrivals (brute force, seed = seed + 1 + index)
        assert stage["requests"] == _brute_force_count(stage["rate_rps"], 4.0,
                                                       3 + 1 + score.index)
    assert data["stages"][1]["measured_saturated"] is True


def test_statistics_equal_an_independent_summary(small_result: object) -> None:
    from kvroof.validation.serving import ServingResult

    assert isinstance(small_result, ServingResult)
    data = small_result.as_dict()
    for condition in ("small-hbm-only", "small-offload"):
        for included in (False, True):
            ratios = [entry["ratio"] for stage in data["stages"]
                      if stage["condition"] == condition
                      and (included or not stage["measured_saturated"])
                      for entry in stage["metrics"].values()
                      if entry["ratio"] is not None and not entry["excluded"]]
            stats = next(s for s in data["statistics"] if s["condition"] == condition
                         and s["saturated_included"] is included)
            assert stats["ratios"] == len(ratios)
            assert stats["median_ratio"] == pytest.approx(statistics.median(ratios))
            assert stats["mape"] == pytest.approx(sum(abs(r - 1) for r in ratios) / len(ratios))
            worst = max(ratios, key=lambda r: max(r, 1 / r))
            assert stats["worst_ratio"] == pytest.approx(worst)
    # the HBM-only case: 2 ratios (TTFT, E2E) below saturation, the throughput excluded,
    # 4 with the saturated stage
    hbm = [s for s in small_result.stats if s.condition == "small-hbm-only"]
    assert [s.ratios for s in hbm] == [2, 4]
    assert serving_stats([], "none", False).ratios == 0
    assert math.isnan(serving_stats([], "none", False).median_ratio)


def test_scale_shortens_the_stages(tmp_path: Path) -> None:
    write_small_case(tmp_path)
    result = validate_serving([tmp_path], scale=0.5)
    assert all(s.simulated.duration == pytest.approx(2.0) for s in result.scores)
    assert [s.simulated.requests for s in result.scores] == [
        _brute_force_count(rate, 2.0, 3 + 1 + index)
        for rate, index in ((2, 0), (4, 1), (3, 0))]
