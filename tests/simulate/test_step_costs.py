"""Step and request costs (issue 21, cause 5): with an engine profile every iteration carries
the engine's fixed step cost (``iteration_overhead``) and every request its frontend cost
(``serving_overhead`` + ``serving_overhead_per_token`` x prompt tokens) on its first token and
its finish, unless ``engine_overhead`` is off; a decode iteration that carries a prefill chunk
takes that chunk's time, so a long prompt arriving during decodes raises their TPOT.

Expected values are derived by hand from the schedule the engine must follow (written in each
test) with every iteration's GPU time from :func:`kvroof.cost.iteration.iteration_cost`, the
cost model's own iteration (not the simulator's fast path), and the engine profile's figures
read from the registry.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.iteration import iteration_cost
from kvroof.errors import KvroofError
from kvroof.simulate import SimSettings, simulate
from kvroof.simulate.resources import check_simulated_settings

from .helpers import REG, mooncake, paper_testbed, table_trace
from .test_fast_forward import EXACT_REQUEST_COLUMNS, RTOL, _same_iterations

ENGINE = "vllm-0.12-offload"


def _dep(compute_model: str = "roofline", engine: str | None = ENGINE) -> Deployment:
    return deployment("llama-3.1-8b", accelerator="h100", registry=REG, engine=engine,
                      compute_model=compute_model)


@pytest.mark.parametrize("compute_model", ["roofline", "kernels"])
def test_every_iteration_and_request_pays_the_engine_profile(compute_model: str) -> None:
    # one request, 2,000 prompt tokens, 3 output tokens, alone: iteration 1 prefills it (first
    # token), iterations 2 and 3 decode on 2,000 and 2,001 cached tokens. Each iteration takes
    # its GPU time + iteration_overhead; the client sees the first token and the finish
    # serving_overhead + serving_overhead_per_token x 2,000 later (vllm-0.12-offload: 0.45 ms,
    # 31 ms, 1.045 us a token: engine_specs/vllm-0.12-offload.yaml)
    dep = _dep(compute_model)
    engine = REG.engine(ENGINE)
    assert engine.iteration_overhead and engine.serving_overhead \
        and engine.serving_overhead_per_token
    step = engine.iteration_overhead
    front = engine.serving_overhead + engine.serving_overhead_per_token * 2000
    trace = table_trace([2000], [0], 3, arrival=[0.0])
    result = simulate(trace, [dep], SimSettings(fast_forward=False))
    prefill = iteration_cost(dep, [2000], [0], []).time
    decodes = iteration_cost(dep, decode_context=[2000]).time + \
        iteration_cost(dep, decode_context=[2001]).time
    ttft = prefill + step + front
    assert result.requests["ttft"][0] == pytest.approx(ttft, rel=1e-12)
    assert result.requests["e2e"][0] == pytest.approx(ttft + decodes + 2 * step, rel=1e-12)
    # the TPOT holds the step cost, not the frontend's: (e2e - ttft) / 2
    assert result.requests["tpot"][0] == pytest.approx((decodes + 2 * step) / 2, rel=1e-12)
    # engine_overhead off: GPU time alone
    bare = simulate(trace, [dep], SimSettings(fast_forward=False, engine_overhead=False))
    assert bare.requests["ttft"][0] == pytest.approx(prefill, rel=1e-12)
    assert bare.requests["e2e"][0] == pytest.approx(prefill + decodes, rel=1e-12)
    # no engine profile: nothing added either
    plain = simulate(trace, [_dep(compute_model, engine=None)], SimSettings(fast_forward=False))
    assert plain.requests["ttft"][0] == pytest.approx(
        iteration_cost(_dep(compute_model, engine=None), [2000], [0], []).time, rel=1e-12)


def test_the_client_clock_needs_the_engine_costs() -> None:
    client = dataclasses.replace(_dep(), ttft_clock="client")
    check_simulated_settings(client, SimSettings())
    with pytest.raises(KvroofError, match=r"^ttft_clock: 'client'.*no-engine-overhead"):
        check_simulated_settings(client, SimSettings(engine_overhead=False))
    with pytest.raises(KvroofError, match=r"^ttft_clock: 'client' needs an engine profile"):
        check_simulated_settings(dataclasses.replace(_dep(engine=None), ttft_clock="client"))


@pytest.mark.parametrize("compute_model", ["roofline", "kernels"])
def test_fast_forward_is_exact_with_step_costs(compute_model: str) -> None:
    # the step cost enters a fast-forwarded run's every step (an affine line's intercept in
    # roofline mode, each entry of the arrays in kernel mode): the same as stepping
    dep = paper_testbed(engine=ENGINE, compute_model=compute_model)
    trace = mooncake(150)
    fast = simulate(trace, [dep] * 2, SimSettings(), check=True)
    slow = simulate(trace, [dep] * 2, SimSettings(fast_forward=False), check=True)
    r, s = fast.requests, slow.requests
    for key in EXACT_REQUEST_COLUMNS:
        assert (r[key] == s[key]).all(), key
    span = float(s["finish"].max())
    for key in ("first_token", "finish"):
        assert abs(r[key] - s[key]).max() <= RTOL * span, key
    _same_iterations(fast.iterations, slow.iterations, span)
    assert fast.summary["fast_forward_runs"] > 0
    # and every iteration row carries the step cost: each duration is at least
    # iterations x 0.45 ms
    rows = fast.iterations
    assert (rows["duration"] >= rows["iterations"] * 0.45e-3 * (1 - 1e-12)).all()


@pytest.mark.parametrize("compute_model", ["roofline", "kernels"])
def test_a_long_prompt_arriving_during_decodes_raises_their_tpot(compute_model: str) -> None:
    # A: 100 prompt tokens, 50 output tokens, at t = 0. B: 6,000 prompt tokens, 60 output
    # tokens, arriving during A's prefill iteration (at half its time), so it is scheduled in
    # the next iteration: A's first decode (context 100) with B's whole prompt as one chunk
    # (1 + 6,000 tokens fit vLLM's 8,192-token budget on an H100). Then both decode: A on
    # 100 + k cached tokens, B on 6,000 + k - 1, for A's decodes k = 1..48. A's TPOT is the sum
    # of its 49 decode iterations over 49; without B, each of them decodes A alone.
    dep = _dep(compute_model, engine=None)
    prefill = iteration_cost(dep, [100], [0], []).time
    mixed = iteration_cost(dep, [6000], [0], [100]).time
    rest = sum(iteration_cost(dep, decode_context=[100 + k, 6000 + k - 1]).time
               for k in range(1, 49))
    alone = sum(iteration_cost(dep, decode_context=[100 + k]).time for k in range(49))
    for fast in (True, False):
        settings = SimSettings(fast_forward=fast)
        with_b = simulate(table_trace([100, 6000], [0, 0], [50, 60],
                                      arrival=[0.0, prefill / 2]), [dep], settings)
        without = simulate(table_trace([100], [0], 50, arrival=[0.0]), [dep], settings)
        assert with_b.requests["ttft"][0] == pytest.approx(prefill, rel=1e-12)
        assert with_b.requests["tpot"][0] == pytest.approx((mixed + rest) / 49, rel=1e-9)
        assert without.requests["tpot"][0] == pytest.approx(alone / 49, rel=1e-9)
    # the chunk's time lands on A's token: one 6,000-token prefill inside A's decodes
    assert (mixed + rest) / 49 > 1.2 * alone / 49


def test_engine_overhead_takes_a_boolean() -> None:
    with pytest.raises(KvroofError, match=r"^engine_overhead: expected true or false, got 'no'$"):
        SimSettings(engine_overhead="no")  # type: ignore[arg-type]
