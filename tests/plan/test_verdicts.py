"""Hand-checkable plans (Llama-3.2-1B on one H100, a few hundred synthetic requests each):

- no request reuses a prefix: leave offloading off;
- the reused prefixes fit in HBM: offloading adds nothing (no host hit at all);
- the reused prefixes exceed the HBM KV pool but fit host memory: offloading shows a gain;
- the plan's reload threshold is the cost model's crossover at the workload's median T.
"""

from __future__ import annotations

import math

import pytest

from kvroof.plan.reload_threshold import crossover
from kvroof.plan.result import Plan
from kvroof.plan.workloads import WorkloadSummary
from kvroof.simulate.settings import SimSettings
from tests.plan.helpers import small_plan

NO_REUSE = WorkloadSummary(2000, 0.0, requests=200, output_tokens="exp:32")
# 10 prefixes of about 1,600 tokens: 16K tokens, against an HBM KV pool of 2.1M tokens
FITS_HBM = WorkloadSummary(2000, 0.8, 10, requests=200, output_tokens="exp:32")
# 60 prefixes of about 1,600 tokens (96K tokens) on an HBM KV pool cut to 40K tokens, with
# 4 GB of host memory (122K tokens of 32 kB)
EXCEEDS_HBM = WorkloadSummary(2000, 0.8, 60, requests=300, output_tokens="exp:32")


@pytest.fixture(scope="module")
def exceeds() -> Plan:
    return small_plan(EXCEEDS_HBM, simulation=SimSettings(kv_tokens=40_000), dram_cache=4e9)


def test_no_reuse_leaves_it_off() -> None:
    result = small_plan(NO_REUSE)
    assert result.reuse.share_with_prefix == 0 and result.reuse.reused_tokens == 0
    (cand,) = result.candidates
    assert cand.verdict is not None and cand.verdict.decision == "off"
    assert cand.verdict.sentence.startswith("Leave it off: no request reuses a prefix")
    assert cand.curve is not None and cand.curve.arms == () and "no prefix" in cand.curve.note
    assert cand.with_offload is not None and cand.with_offload.at_max is not None
    assert cand.with_offload.at_max.hit_host == 0


def test_prefixes_that_fit_hbm_gain_nothing() -> None:
    result = small_plan(FITS_HBM)
    (cand,) = result.candidates
    assert result.reuse.lru_tokens[2] < cand.hbm_tokens  # every reuse fits the HBM pool
    assert cand.verdict is not None and cand.verdict.decision == "off"
    assert "adds nothing measurable" in cand.verdict.sentence
    assert "your prefixes fit in HBM" in cand.verdict.sentence
    assert cand.with_offload is not None and cand.without is not None
    for arm in (cand.with_offload, *(cand.curve.arms if cand.curve else ())):
        assert arm.at_max is not None and arm.at_max.hit_host == 0  # HBM never evicts
        assert arm.max_rps < cand.without.failing_rps  # never meets a rate that failed
    assert abs(cand.gain - 1) <= 0.05 + 1e-9


def test_prefixes_beyond_hbm_within_host_memory_gain(exceeds: Plan) -> None:
    (cand,) = exceeds.candidates
    reuse = exceeds.reuse
    assert cand.hbm_tokens == 40_000 < reuse.reused_tokens <= cand.host_tokens
    assert cand.verdict is not None and cand.verdict.decision == "on"
    assert cand.verdict.sentence.startswith("Turn it on with ")
    assert cand.with_offload is not None and cand.without is not None
    assert cand.with_offload.max_rps >= cand.without.failing_rps  # beyond both tolerances
    assert cand.gain > 1.05
    at = cand.with_offload.at_max
    assert at is not None and at.hit_host > 0.3
    curve = cand.curve
    assert curve is not None and curve.recommended is not None
    need = 1 + 0.9 * (max(g for g in curve.gains if math.isfinite(g)) - 1)
    chosen = curve.arms.index(curve.recommended)
    assert curve.pays[chosen] and curve.gains[chosen] >= need
    for gain, pays in zip(curve.gains[:chosen], curve.pays[:chosen], strict=True):
        assert gain < need or not pays  # no smaller size keeps 90% of the gain
    assert curve.pays_from_ratio is not None and curve.pays_from_ratio <= (
        curve.recommended.capacity_ratio or math.inf)


def test_the_plans_reload_threshold_is_the_crossover(exceeds: Plan) -> None:
    import kvroof

    (cand,) = exceeds.candidates
    th = cand.threshold
    assert th is not None
    dep = kvroof.deployment("llama-3.2-1b", accelerator="h100", tp=1)
    context = dep.model.max_context
    assert context is not None and th.max_cached == context - 1
    assert th.median_new == round(exceeds.reuse.median_new)
    assert th.setting == crossover(dep, [th.median_new], th.max_cached)[0]
    assert th.setting_busy == crossover(dep, [th.median_new], th.max_cached, busy=8192)[0]


def test_sizing_and_costs() -> None:
    from kvroof.plan.inputs import Prices
    from kvroof.plan.sizing import size_for

    sizing = size_for(2.0, 2, 4, target_rps=10.0, prices=Prices(2.0, 0.01), dram_bytes=100e9,
                      mean_input=1000, mean_output=100)
    assert (sizing.replicas, sizing.gpus) == (10, 40)
    assert sizing.cost_per_hour == pytest.approx(2 * 4 * 2.0 + 2 * 100 * 0.01)  # 18 an hour
    assert sizing.target_cost_per_hour == pytest.approx(10 * 4 * 2.0 + 10 * 100 * 0.01)
    assert sizing.per_million_tokens == pytest.approx(18 / (2 * 3600 * 1100) * 1e6)
    assert sizing.per_million_output_tokens == pytest.approx(18 / (2 * 3600 * 100) * 1e6)
    nothing = size_for(0.0, 1, 1, target_rps=5.0, prices=Prices(), dram_bytes=None,
                       mean_input=10, mean_output=1)
    assert nothing.gpus is None and nothing.per_million_tokens is None
