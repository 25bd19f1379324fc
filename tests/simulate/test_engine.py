"""The engine against closed forms and independent checks: a lone request equals the cost
model's TTFT, M/D/1 queues, conservation of tokens and KV space, fast-forwarding equals stepping,
the prefix caches against the workload loader, determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvroof.cost.deployment import deployment
from kvroof.cost.timing import compute_time, ttft
from kvroof.simulate import SimSettings, prepare_trace, simulate
from kvroof.workload.mooncake import load_mooncake
from kvroof.workload.requests import MOONCAKE_SLICE

from .helpers import REG, mooncake, paper_testbed, table_trace

CASES = [(128, 0), (64, 65536), (2048, 16384), (5000, 3000)]


@pytest.mark.parametrize(("mode", "overlap"), [("sync", "serial"), ("async", "serial"),
                                               ("layerwise", "layerwise")])
@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-70b", 8), ("deepseek-v2-lite", 1)])
def test_one_request_alone_equals_ttft(mode: str, overlap: str, model: str, tp: int) -> None:
    """On an idle replica, a request of T new tokens on K cached ones (preloaded in host DRAM)
    has the TTFT kvroof.ttft gives the same deployment. The simulator writes new KV back after
    the prefill (not inside it), so the reference has write_back off."""
    dep = deployment(model, system="paper-testbed", registry=REG, tp=tp)
    reference = dataclasses.replace(dep, write_back=False)
    for t, k in CASES:
        if t + k + 1 > (dep.model.max_context or 0):
            continue
        trace = table_trace([t], [k], 1, [2.5])
        result = simulate(trace, [dep], SimSettings(load_mode=mode), check=True)  # type: ignore[arg-type]
        expected = float(ttft(reference, t, k, overlap).ttft)  # type: ignore[arg-type]
        assert result.requests["ttft"][0] == pytest.approx(expected, rel=1e-9)
        assert result.requests["host_hit"][0] == k


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_queue(rho: float) -> None:
    """Poisson arrivals of identical 512-token requests, one at a time (max_num_seqs 1, one
    output token, no cache): an M/D/1 queue with service S = compute_time(512, 0).

    - Every waiting time equals the Lindley recursion W' = max(0, W + S - gap) on the same
      arrivals (an independent brute force), to 1e-9 of S.
    - The mean wait over 20,000 requests is within 3% of Pollaczek-Khinchine,
      rho S / (2 (1 - rho)). Its standard error at this length (batch means, 20 batches) is
      2.6% of the mean at rho 0.5 and 5.4% at 0.8; seed 0 lands 0.6% and 1.5% away."""
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=REG)
    service = float(compute_time(dep, 512, 0))
    n = 20_000
    trace = prepare_trace(table_trace([512] * n, [0] * n), rps=rho / service, seed=0)
    result = simulate(trace, [dep], SimSettings(max_num_seqs=1, prefix_caching=False))
    wait = result.requests["ttft"] - service
    assert trace.arrival_time is not None
    gaps = np.diff(trace.arrival_time)
    lindley = np.zeros(n)
    for i in range(1, n):
        lindley[i] = max(0.0, lindley[i - 1] + service - gaps[i - 1])
    assert np.max(np.abs(wait - lindley)) < 1e-9 * service
    assert wait.mean() == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.03)


def _conserved(result: object) -> None:
    r = result.requests  # type: ignore[attr-defined]
    parts = r["hbm_hit"] + r["host_hit"] + r["tier_hit"] + r["split_recomputed"] + r["computed"]
    assert np.array_equal(parts, r["prompt_tokens"])
    fresh = r["preemptions"] == 0
    assert np.array_equal(r["prompt_tokens"][fresh], r["input_tokens"][fresh])
    assert np.all(r["computed"] >= 1)
    assert np.all(r["finish"] >= r["first_token"]) and np.all(r["first_token"] > r["arrival"])


@pytest.mark.parametrize("settings", [
    SimSettings(),
    SimSettings(scheduler="utilization-aware", cache_policy="split", load_mode="sync"),
    SimSettings(load_mode="layerwise", dram_cache=2e9, max_num_batched_tokens=2048),
    SimSettings(cache_policy="recompute", kv_tokens=130_000, max_num_seqs=32),
])
def test_conservation_and_limits(settings: SimSettings) -> None:
    """Every request's cached, loaded, recomputed and computed tokens add up to what it
    prefilled (its input, or more after a preemption); the token budget, the sequence cap and
    the KV space hold at every iteration (check=True asserts them); when everything is done no
    KV is in use but the prefix cache's evictable blocks."""
    from kvroof.simulate.engine import Engine

    engines: list[Engine] = []
    original = Engine.__init__

    def spy(self: Engine, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        engines.append(self)

    trace = prepare_trace(mooncake(300), time_scale=4.0)
    Engine.__init__ = spy  # type: ignore[method-assign]
    try:
        result = simulate(trace, [paper_testbed()] * 2, settings, check=True)
    finally:
        Engine.__init__ = original  # type: ignore[method-assign]
    assert result.summary["requests"] == 300
    _conserved(result)
    for engine in engines:
        assert engine.pool.in_use == 0 and not engine.running and not engine.waiting
    if settings.kv_tokens is not None:
        assert result.summary["preemptions"] > 0
    if settings.cache_policy == "recompute":
        assert result.summary["hit_rate_host"] == 0 and result.summary["link_h2d_utilization"] == 0


def test_fast_forward_equals_stepping() -> None:
    """Runs of decode iterations summed in closed form give the same times as stepping every
    iteration (1e-9), with a power cap in force and with preemptions."""
    trace = prepare_trace(mooncake(200), time_scale=3.0)
    for settings in (SimSettings(power_cap=450.0), SimSettings(kv_tokens=130_000)):
        fast = simulate(trace, [paper_testbed()], settings)
        slow = simulate(trace, [paper_testbed()], dataclasses.replace(settings, fast_forward=False))
        assert fast.summary["fast_forwarded_iterations"] > 0
        assert slow.summary["fast_forwarded_iterations"] == 0
        assert fast.summary["iterations"] == slow.summary["iterations"]
        for key in ("first_token", "finish"):
            assert np.allclose(fast.requests[key], slow.requests[key], rtol=1e-9, atol=0)
        assert fast.summary["energy_j"] == pytest.approx(slow.summary["energy_j"], rel=1e-9)


def test_prefix_hits_match_the_workload_loader() -> None:
    """Requests one at a time (10 minutes apart: every write-back has landed) with unlimited
    host DRAM find exactly the cached prefix that `kvroof workload` derives from the same hash
    ids with an unlimited cache (an independent implementation)."""
    count = 150
    trace = mooncake(count)
    spaced = trace.with_arrivals(np.arange(count) * 600.0)
    result = simulate(spaced, [paper_testbed()], SimSettings(dram_cache=1e15))
    expected = load_mooncake(MOONCAKE_SLICE).cached_tokens[:count]
    r = result.requests
    assert np.array_equal(r["hbm_hit"] + r["host_hit"], expected)
    assert r["host_hit"].sum() > 0 and r["hbm_hit"].sum() > 0


def test_same_seed_same_output() -> None:
    base = table_trace([100, 2000, 30] * 40, [5000, 0, 12000] * 40, [20, 5, 60] * 40)
    runs = [simulate(prepare_trace(base, rps=30.0, seed=7, output_tokens="exp:40"),
                     [paper_testbed()] * 2, SimSettings(router="least-loaded")) for _ in range(2)]
    for key, column in runs[0].requests.items():
        assert np.array_equal(column, runs[1].requests[key], equal_nan=True), key
    other = simulate(prepare_trace(base, rps=30.0, seed=8, output_tokens="exp:40"),
                     [paper_testbed()] * 2, SimSettings(router="least-loaded"))
    assert not np.array_equal(other.requests["ttft"], runs[0].requests["ttft"])


@pytest.mark.parametrize(("model", "system", "tp"), [
    ("gpt-oss-20b", "gh200", 1),               # sliding windows (fast-forwarded when saturated)
    ("llama-4-scout-17b-16e", "dgx-h100", 4),  # chunked layers (stepped: keys fall every chunk)
    ("qwen3-next-80b-a3b", "dgx-h100", 4),     # linear layers with a fixed state per request
    ("deepseek-v3.2", "hgx-h200", 8),          # sparse attention (top-k capped decodes)
])
def test_attention_families(model: str, system: str, tp: int) -> None:
    """Models whose decode cost is not linear in the context: each step's capped key counts
    come from the iteration model's own rule (capped_sums); fast-forwarding, where it applies,
    equals stepping; tokens and KV space are conserved."""
    dep = deployment(model, system=system, registry=REG, tp=tp)
    trace = prepare_trace(table_trace([200, 3000] * 10, [4000, 0] * 10, 40), rps=4.0, seed=2)
    fast = simulate(trace, [dep], SimSettings(), check=True)
    slow = simulate(trace, [dep], SimSettings(fast_forward=False), check=True)
    assert np.allclose(fast.requests["finish"], slow.requests["finish"], rtol=1e-9, atol=0)
    _conserved(fast)
