"""The plan's validity quotes the serving validation's error for the closest published serving
condition (kvroof.plan.validity): which condition is closest, that its numbers are the serving
validation's own, and that a failing replay is a note, not an exception."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import kvroof.plan.validity as validity
from kvroof.cost.deployment import Deployment, deployment
from kvroof.errors import KvroofError
from kvroof.plan.page import page_blocks, render_markdown
from kvroof.plan.validity import (
    ARMS,
    closest_serving_condition,
    serving_cases,
    validity_of,
)
from kvroof.plan.workloads import WorkloadSummary
from kvroof.simulate.settings import SimSettings
from kvroof.validation.serving import validate_serving
from tests.plan.helpers import small_plan

ENGINE = "vllm-0.12-offload"
TINY = 0.02
"""Stage durations for the tests' replays: 60 s stages become 1.2 s (a few requests each)."""


def _dep(model: str, accelerator: str, tp: int) -> Deployment:
    return deployment(model, accelerator=accelerator, engine=ENGINE, tp=tp)


def _closest(dep: Deployment) -> dict[str, str]:
    chosen = {arm: closest_serving_condition(dep, arm, serving_cases()) for arm in ARMS}
    return {arm: pick[1].id for arm, pick in chosen.items() if pick is not None}


def test_an_h100_candidate_picks_the_h100_conditions_of_its_model_and_tp() -> None:
    # By hand from the case files (validation/serving/*.yaml): gpt-oss-120b on h100-sxm, TP1,
    # vllm-0.12-offload; qwen3-32b on h100-sxm, TP2, vllm-0.12-offload. Scores: accelerator 2,
    # model 2, engine 1, TP 0.5.
    # gpt-oss-120b on H100 TP1: gpt-oss 2+2+1+0.5 = 5.5, qwen 2+0+1+0 = 3 -> gpt-oss.
    assert _closest(_dep("gpt-oss-120b", "h100-sxm", 1)) == {
        "without offloading": "llmd-gpt-oss-120b-hbm-only",
        "with offloading": "llmd-gpt-oss-120b-cpu-offload"}
    # llama-3.1-70b on H100 TP2: gpt-oss 2+0+1+0 = 3, qwen 2+0+1+0.5 = 3.5 -> qwen.
    assert _closest(_dep("llama-3.1-70b", "h100-sxm", 2)) == {
        "without offloading": "llmd-qwen3-32b-hbm-only",
        "with offloading": "llmd-qwen3-32b-cpu-offload"}
    # llama-3.1-70b on H100 TP8: both 3 points; the tie goes to the nearer TP (8/2 = 4 beats
    # 8/1 = 8) -> qwen.
    assert _closest(_dep("llama-3.1-70b", "h100-sxm", 8))["with offloading"] == \
        "llmd-qwen3-32b-cpu-offload"


def test_an_h100_candidate_of_a_published_model_matches_and_is_not_outside() -> None:
    v = validity_of(_dep("gpt-oss-120b", "h100-sxm", 1), SimSettings(), threshold_values=[],
                    serving_scale=TINY)
    assert [q.arm for q in v.serving] == list(ARMS)
    assert all(q.matches and q.hardware == "16x h100-sxm" and q.tp == 1 for q in v.serving)
    assert all("the candidate matches it" in q.text() for q in v.serving)
    # accelerator, model and engine profile are a published run's: not marked outside
    assert not any(o.startswith("the serving simulation") for o in v.outside)


def test_a_b200_candidate_is_marked_as_not_matching_and_outside() -> None:
    # qwen3-32b on B200 TP2: qwen 0+2+1+0.5 = 3.5, gpt-oss 0+0+1+0 = 1 -> the qwen conditions,
    # which ran on H100s: not a match.
    dep = _dep("qwen3-32b", "b200", 2)
    v = validity_of(dep, SimSettings(), threshold_values=[], serving_scale=TINY)
    assert [q.condition for q in v.serving] == ["llmd-qwen3-32b-hbm-only",
                                                "llmd-qwen3-32b-cpu-offload"]
    assert not any(q.matches for q in v.serving)
    assert all("does not match it (accelerator b200, not h100-sxm" in q.text()
               for q in v.serving)
    assert all(q.url.startswith("https://github.com/llm-d/llm-d/") for q in v.serving)
    assert any(o.startswith("the serving simulation") and "qwen3-32b on b200" in o
               for o in v.outside)


def test_the_quoted_error_is_the_serving_validations_own() -> None:
    # Independent: kvroof validate --quantity serving's own function on every built-in
    # condition at the same stage scale; its statistics below saturation are the quote's.
    v = validity_of(_dep("llama-3.1-70b", "h100-sxm", 8), SimSettings(), threshold_values=[],
                    serving_scale=TINY)
    independent = validate_serving(scale=TINY)
    stats = {s.condition: s for s in independent.stats if not s.saturated_included}
    assert len(v.serving) == 2
    for q in v.serving:
        expected = stats[q.condition]
        assert q.error == "" and q.scale == TINY and q.ratios == expected.ratios > 0
        assert q.median_ratio == (None if math.isnan(expected.median_ratio)
                                  else expected.median_ratio)
        assert q.mape == (None if math.isnan(expected.mape) else expected.mape)
        assert f"{expected.median_ratio:.2f}" in q.text()


def _counting(calls: list[str], fail: bool) -> Callable[..., Any]:
    real = validity.replay_condition

    def replay(replay: Any, condition: Any, **options: Any) -> Any:
        calls.append(condition.id)
        if fail:
            raise KvroofError("replay: simulated failure for the test")
        return real(replay, condition, **options)
    return replay


def test_a_failing_replay_is_a_note_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(validity, "replay_condition", _counting(calls, fail=True))
    scale = 0.0137  # a scale no other test replays at: nothing cached
    v = validity_of(_dep("qwen3-32b", "h100-sxm", 2), SimSettings(), threshold_values=[],
                    serving_scale=scale)
    assert calls == ["llmd-qwen3-32b-hbm-only", "llmd-qwen3-32b-cpu-offload"]
    assert len(v.serving) == 2
    for q in v.serving:
        assert q.median_ratio is None and q.mape is None
        assert "simulated failure for the test" in q.error
        assert "replay failed, no error to quote" in q.text()


def test_each_condition_is_replayed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(validity, "replay_condition", _counting(calls, fail=False))
    scale = 0.0171  # a scale no other test replays at
    first = validity_of(_dep("llama-3.1-70b", "h100-sxm", 8), SimSettings(),
                        threshold_values=[], serving_scale=scale)
    second = validity_of(_dep("llama-3.1-8b", "h100-sxm", 1), SimSettings(),
                         threshold_values=[], serving_scale=scale)
    # the TP1 candidate scores 3.5 on gpt-oss (its TP1) against 3 on qwen, so
    # the second candidate replays the gpt-oss conditions: four replays, one per condition
    assert [q.condition for q in first.serving] == ["llmd-qwen3-32b-hbm-only",
                                                    "llmd-qwen3-32b-cpu-offload"]
    assert [q.condition for q in second.serving] == ["llmd-gpt-oss-120b-hbm-only",
                                                     "llmd-gpt-oss-120b-cpu-offload"]
    third = validity_of(_dep("llama-3.1-70b", "h100-sxm", 4), SimSettings(),
                        threshold_values=[], serving_scale=scale)
    assert [q.condition for q in third.serving] == [q.condition for q in first.serving]
    assert third.serving[0].median_ratio == first.serving[0].median_ratio
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 4


def test_the_page_and_the_json_quote_the_serving_validation() -> None:
    result = small_plan(WorkloadSummary(prompt_tokens=2000, reused_share=0.8, reuse_distance=20,
                                        requests=120, output_tokens=16),
                        dram_cache=4e9, simulation=SimSettings(kv_tokens=40_000))
    cand = result.candidates[0]
    assert cand.validity is not None and len(cand.validity.serving) == 2
    markdown = render_markdown(page_blocks(result))
    for q in cand.validity.serving:
        assert f"closest serving validation, {q.text()}" in markdown
    data = result.to_json()["candidates"][0]["validity"]["serving"]
    assert [d["arm"] for d in data] == list(ARMS)
    assert all(d["scale"] == validity.SERVING_SCALE and d["url"] for d in data)
