"""The serving replay runs each condition as one staged simulation as inference-perf ran the
published benchmark (the case's stages, drained, caches carried), builds the workload the case
describes (prefix and question lengths, groups), hands the case's settings to the simulator, and
scores simulated / measured, summarized as the other quantities are."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from kvroof.validation.serving import serving_stats, validate_serving
from kvroof.validation.serving_cases import METRICS, load_serving_file
from kvroof.validation.serving_replay import (
    condition_plan,
    condition_trace,
    prompt_order,
    replay_condition,
)
from tests.validation.serving_fixture import SMALL_CASE, write_small_case

# int(rate x duration) requests per stage, as inference-perf counts them: the small case's 4 s
# stages at 2 and 4 requests/s (HBM only) and 3 and 5 requests/s (offload)
COUNTS = {"small-hbm-only": [8, 16], "small-offload": [12, 20]}


def _count_by_stage_windows(arrival: list[float], starts: list[float]) -> list[int]:
    """Requests per stage by walking the arrivals one at a time: a request belongs to the last
    stage that started at or before it arrived."""
    counts = [0] * len(starts)
    for time in arrival:
        stage = max(k for k, start in enumerate(starts) if start <= time + 1e-12)
        counts[stage] += 1
    return counts


def test_condition_trace_has_the_case_prefix_question_and_groups(tmp_path: Path) -> None:
    workload = load_serving_file(write_small_case(tmp_path)).replay.workload
    plan = condition_plan(workload, (4.0, 2.0), scale=2.0)
    trace = condition_trace(workload, 64, plan)
    n = len(trace)
    assert n == int(4.0 * 8.0) + int(2.0 * 8.0)  # 4 s stages x 2: 32 + 16 requests
    # every prompt is the 1024-token prefix and the 64-token question of the case
    assert np.all(trace.input_tokens == 1024 + 64)
    assert np.all(trace.output_tokens == 16)
    # the prompt of request i is the shuffled prompt i mod 6, brute force:
    order = list(np.random.default_rng(workload.seed).permutation(6))
    assert list(prompt_order(workload)) == order
    prefix_ids: dict[int, tuple[int, ...]] = {}
    for i in range(n):
        ids, ends = trace.blocks(i)
        group = int(order[i % 6]) // 2
        # blocks of 64 tokens: the prefix ends at 1024 exactly (16 blocks), then the question
        assert list(ends[:16]) == list(range(64, 1025, 64))
        assert int(ends[-1]) == 1024 + 64
        shared = tuple(int(x) for x in ids[:16])
        assert prefix_ids.setdefault(group, shared) == shared  # same group, same prefix blocks
    distinct = set(prefix_ids.values())
    assert len(distinct) == len(prefix_ids)  # different groups share no prefix
    assert all(not set(a) & set(b) for a in distinct for b in distinct if a != b)


def test_one_staged_run_per_condition_drained_between_stages(tmp_path: Path) -> None:
    loaded = load_serving_file(write_small_case(tmp_path))
    for condition in loaded.conditions:
        replayed = replay_condition(loaded.replay, condition)
        result = replayed.result
        assert result is not None  # one simulation of every stage
        starts = [s["start_s"] for s in result.summary["stages"]]
        arrival = result.requests["arrival"].tolist()
        assert _count_by_stage_windows(arrival, starts) == COUNTS[condition.id]
        assert [s.requests for s in replayed.stages] == COUNTS[condition.id]
        # drained: stage 2's first arrival comes after stage 1's last finish plus the case's
        # 1.5 s stage_interval
        first = np.asarray(arrival) < starts[1]
        assert min(np.asarray(arrival)[~first]) >= max(result.requests["finish"][first]) + 1.5
        # the stage's metrics are its own requests' means (inference-perf's per-stage report)
        second = replayed.stages[1]
        assert second.mean_ttft == pytest.approx(float(np.mean(result.requests["ttft"][~first])))
        assert second.mean_e2e == pytest.approx(float(np.mean(result.requests["e2e"][~first])))


def test_caches_carry_from_stage_to_stage(tmp_path: Path) -> None:
    loaded = load_serving_file(write_small_case(tmp_path))
    condition = loaded.conditions[0]  # HBM only: hits come from HBM alone
    carried = replay_condition(loaded.replay, condition)
    fresh = replay_condition(loaded.replay, condition, carry_caches=False)
    assert carried.result is not None and fresh.result is None
    req = carried.result.requests
    order = prompt_order(loaded.replay.workload)
    group = order[req["request"].astype(np.int64) % order.size] // 2
    stage = req["arrival"] >= carried.result.summary["stages"][1]["start_s"]
    seen_before = set(group[~stage].tolist())
    # the first request of each group in stage 2 whose group ran in stage 1 finds its 1024-token
    # prefix in HBM (two 0.6B replicas hold every prefix: nothing is evicted), so stage 2 hits
    # at least those; each stage alone from empty caches misses every group's first request
    for g in seen_before:
        picks = np.flatnonzero(stage & (group == g))
        if picks.size:
            first = picks[np.argmin(req["arrival"][picks])]
            assert req["hbm_hit"][first] >= 1024
    assert carried.stages[1].hbm_hit > fresh.stages[1].hbm_hit
    assert [s.requests for s in fresh.stages] == COUNTS[condition.id]


def test_case_settings_reach_the_simulation(tmp_path: Path) -> None:
    loaded = load_serving_file(write_small_case(tmp_path))
    hbm, offload = (replay_condition(loaded.replay, c) for c in loaded.conditions)
    assert hbm.settings["router"] == offload.settings["router"] == "scoring"
    # the case files' router_weights (tests/validation/serving_fixture.py)
    assert hbm.settings["router_weights"] == {"queue": 2, "kv_utilization": 2, "prefix": 3,
                                              "host_prefix": 0, "no_hit_lru": 0}
    assert offload.settings["router_weights"] == {"queue": 1, "kv_utilization": 1, "prefix": 1,
                                                  "host_prefix": 1, "no_hit_lru": 1}
    assert hbm.settings["cache_policy"] == "recompute"
    assert offload.settings["cache_policy"] == "load"
    assert offload.settings["dram_cache"] == 8 * 2**30
    semantics = dict(offload.semantics)
    assert "compute_model auto" in semantics["compute"]  # the case's default compute model
    assert "450 us per iteration" in semantics["step costs"]  # engine costs on
    assert "as it is computed" in semantics["host tier"]  # the profile's offload store
    # the case's compute_model and offload_store fields change what the simulator runs
    text = SMALL_CASE.replace("  router: scoring\n", "  compute_model: roofline\n"
                              "  router: scoring\n").replace(
        "    dram_cache: 8 GiB\n", "    dram_cache: 8 GiB\n    offload_store: none\n")
    other = load_serving_file(write_small_case(tmp_path / "other", text))
    changed = replay_condition(other.replay, other.conditions[1])
    assert "roofline" in dict(changed.semantics)["compute"]
    assert "as it is computed" not in dict(changed.semantics)["host tier"]
    assert changed.stages[0].host_hit == 0.0  # nothing stored: no host hits
    assert changed.stages[0].mean_ttft != offload.stages[0].mean_ttft


@pytest.fixture(scope="module")
def small_result(tmp_path_factory: pytest.TempPathFactory) -> object:
    folder = tmp_path_factory.mktemp("serving")
    write_small_case(folder)
    return validate_serving([folder])


def test_scores_are_simulated_over_measured(small_result: object) -> None:
    from kvroof.validation.serving import ServingResult

    assert isinstance(small_result, ServingResult)
    data = small_result.as_dict()
    assert [s["rate_rps"] for s in data["stages"]] == [2, 4, 3, 5]
    measured = {  # the small case file's numbers (tests/validation/serving_fixture.py), SI
        (2, "mean_ttft"): 0.05, (2, "mean_e2e"): 0.2, (2, "throughput"): 2000,
        (4, "mean_ttft"): 0.04, (4, "mean_e2e"): 0.3, (4, "throughput"): 4000,
        (3, "mean_ttft"): 0.03, (3, "mean_tpot"): 0.005, (3, "mean_e2e"): 0.1,
        (5, "mean_ttft"): 0.03, (5, "mean_e2e"): 0.1,
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
        # int(rate x 4 s) requests per stage
        assert stage["requests"] == COUNTS[stage["condition"]][score.index]
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
    # int(rate x 2 s) requests per stage
    assert [s.simulated.requests for s in result.scores] == [4, 8, 6, 10]
