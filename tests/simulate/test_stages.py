"""Staged runs in the simulator: drained stage boundaries derived by hand from a lone request's
service time, per-stage metrics recomputed from the per-request records, and the undrained
replay equal to the plain concatenation of the stages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.simulate.metrics import SimResult
from kvroof.simulate.runner import simulate
from kvroof.workload.stages import plan_from_labels, plan_from_rates, staged_trace

from .helpers import mooncake, paper_testbed, table_trace


def _alone(new: list[int], arrival: list[float], output: int) -> SimResult:
    """Requests simulated on their own (no stages) on an idle replica."""
    return simulate(table_trace(new, [0] * len(new), output, arrival), [paper_testbed()])


def test_drained_start_by_hand() -> None:
    """Stage a: one request at 0. Stage b: requests 0 s and 0.5 s after its start. The prompts
    share no block (table rows without a group), so what stage a leaves in the caches does not
    touch stage b, and a drained replica is idle when b starts."""
    new, output, interval = [3000, 2000, 1000], 50, 2.0
    # The lone request's service time S, from a simulation of it alone: it finishes at S.
    service = float(_alone(new[:1], [0.0], output).requests["finish"][0])
    assert service > 0
    trace = table_trace(new, [0, 0, 0], output, [0.0, 100.0, 100.5])
    plan = plan_from_labels(["a", "b", "b"], [0.0, 100.0, 100.5], interval=interval)
    result = simulate(trace, [paper_testbed()], stages=plan)
    r = result.requests
    # Hand derivation: b starts at S + interval; its requests arrive at S + 2 and S + 2.5.
    assert r["arrival"].tolist() == pytest.approx([0.0, service + 2.0, service + 2.5],
                                                  rel=1e-12)
    stages = result.summary["stages"]
    assert [s["start_s"] for s in stages] == pytest.approx([0.0, service + 2.0], rel=1e-12)
    assert stages[0]["end_s"] == pytest.approx(service, rel=1e-12)
    # Stage b on a drained (idle) replica is stage b alone, shifted by its start.
    lone_b = _alone(new[1:], [0.0, 0.5], output).requests
    for key in ("ttft", "e2e"):
        assert r[key][1:] == pytest.approx(lone_b[key], rel=1e-9), key
    assert stages[1]["end_s"] == pytest.approx(service + 2.0 + lone_b["finish"].max(),
                                               rel=1e-12)


def _stats(values: np.ndarray[Any, Any]) -> dict[str, float]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(np.mean(values)), "p50": p50, "p90": p90, "p99": p99}


def test_per_stage_metrics_match_the_records() -> None:
    """Each stage's figures recomputed here from the per-request records and the plan (the
    definitions of inference-perf's reportgen: span = first arrival to last finish, achieved
    rate = requests over first to last arrival)."""
    plan = plan_from_rates("3x10,6x10,9x5", seed=4, interval=1.0)
    trace = staged_trace(mooncake(200), plan)
    result = simulate(trace, [paper_testbed()], stages=plan)
    r = result.requests
    stage_of = plan.stage[r["request"]]
    stages = result.summary["stages"]
    assert [s["stage"] for s in stages] == ["3x10", "6x10", "9x5"]
    assert [s["requests"] for s in stages] == [30, 60, 45]  # int(rate x duration)
    ends = []
    for k, summary in enumerate(stages):
        m = stage_of == k
        assert summary["requested_rate_rps"] == [3.0, 6.0, 9.0][k]
        for key in ("ttft", "e2e"):
            assert summary[f"{key}_s"] == pytest.approx(_stats(r[key][m]), rel=1e-12)
        tpot = r["tpot"][m]
        assert summary["tpot_s"] == pytest.approx(_stats(tpot[np.isfinite(tpot)]), rel=1e-12)
        span = r["finish"][m].max() - r["arrival"][m].min()
        assert summary["throughput_rps"] == pytest.approx(m.sum() / span, rel=1e-12)
        assert summary["output_tokens_per_s"] == pytest.approx(
            r["output_tokens"][m].sum() / span, rel=1e-12)
        send = r["arrival"][m].max() - r["arrival"][m].min()
        assert summary["achieved_rate_rps"] == pytest.approx(m.sum() / send, rel=1e-12)
        assert summary["end_s"] == pytest.approx(r["finish"][m].max(), rel=1e-12)
        ends.append(summary["end_s"])
        # drained: the stage's requests arrive at its start plus their offsets, and all
        # of them after the stage before has finished
        assert r["arrival"][m] == pytest.approx(
            summary["start_s"] + plan.offset[r["request"][m]], rel=1e-12)
        if k:
            assert summary["start_s"] == pytest.approx(ends[k - 1] + 1.0, rel=1e-12)
            assert r["arrival"][m].min() > ends[k - 1]


def test_undrained_replay_is_the_concatenation() -> None:
    plan = plan_from_rates("4x10,8x10", seed=2, interval=3.0, drain=False)
    trace = staged_trace(mooncake(200), plan)
    staged = simulate(trace, [paper_testbed()], stages=plan)
    # Plain concatenation: stage 2's offsets after 10 s + 3 s, simulated as an open loop.
    times = np.where(plan.stage == 0, plan.offset, 13.0 + plan.offset)
    plain = simulate(mooncake(120).with_arrivals(times), [paper_testbed()])
    for key in ("request", "arrival", "first_token", "finish", "ttft", "e2e"):
        assert np.array_equal(staged.requests[key], plain.requests[key]), key
    assert [s["start_s"] for s in staged.summary["stages"]] == [0.0, 13.0]
    assert "stages" not in plain.summary
    # Drained, the same stages start later whenever stage 1 ends after its nominal 13 s.
    drained = simulate(trace, [paper_testbed()], stages=replace(plan, drain=True))
    first_end = drained.summary["stages"][0]["end_s"]
    assert drained.summary["stages"][1]["start_s"] == pytest.approx(first_end + 3.0)


def test_stages_conflict_with_users() -> None:
    plan = plan_from_rates("1x3")
    trace = staged_trace(mooncake(10), plan)
    with pytest.raises(KvroofError, match=r"^stages: give stages or users, not both$"):
        simulate(trace, [paper_testbed()], stages=plan, users=2)
    with pytest.raises(KvroofError, match="3 staged requests but 10 in the trace"):
        simulate(mooncake(10), [paper_testbed()], stages=plan)


def test_staged_trace_needs_enough_requests() -> None:
    with pytest.raises(KvroofError, match="stages hold 30 requests but the trace has 10"):
        staged_trace(mooncake(10), plan_from_rates("3x10"))
    trace = staged_trace(mooncake(10), plan_from_rates("1x4"))
    assert len(trace) == 4 and "the first 4 of 10 requests" in trace.source
