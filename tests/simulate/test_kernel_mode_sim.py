"""The simulator in kernel mode (``compute_model: kernels``): every iteration takes the kernel
iteration time of :func:`kvroof.cost.iteration.iteration_cost` (op by op from the kernel
tables), and fast-forwarded decode runs, whose step times are not affine there, come out as
stepping every iteration gives them.

Expected values come from an independent computation: :func:`iteration_cost` (the cost
model's own kernel iteration, :func:`kvroof.cost.kernel_iteration.kernel_iteration`, which
times every op from its op list with arrays), against the simulator's cached, per-iteration
sum (:class:`kvroof.simulate.kernel_steps.KernelSteps`); and the stepped simulation
(``fast_forward=False``) against the fast-forwarded one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.iteration import iteration_cost
from kvroof.simulate import SimResult, SimSettings, simulate
from kvroof.simulate.kernel_steps import KernelSteps
from kvroof.simulate.resources import check_simulated_settings

from .helpers import REG, mooncake, paper_testbed, table_trace
from .test_fast_forward import EXACT_REQUEST_COLUMNS, RTOL, _same_iterations


def _kernels(model: str, **settings: object) -> Deployment:
    return deployment(model, accelerator="h100", registry=REG, compute_model="kernels",
                      **settings)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b", "qwen3-30b-a3b"])
def test_an_iteration_takes_the_kernel_iteration_time(model: str) -> None:
    # a mixed iteration: two chunks (one ending its prompt) and five decodes on contexts that
    # cross gpt-oss's 128-token window
    dep = _kernels(model)
    steps = KernelSteps(dep)
    contexts = [3, 90, 127, 400, 5000]
    chunks = [(512, 1024, True), (256, 0, False)]
    busy, comm = steps.iteration(len(contexts), float(sum(contexts)), lambda: contexts, chunks)
    want = iteration_cost(dep, [512, 256], [1024, 0], contexts, [True, False]).time
    assert busy + comm == pytest.approx(want, rel=1e-12)
    # a lone prefill (the attention call's own floor applies) and a decode-only batch
    busy, comm = steps.iteration(0, 0.0, lambda: [], [(2048, 0, True)])
    assert busy + comm == pytest.approx(iteration_cost(dep, [2048], [0], []).time, rel=1e-12)
    busy, comm = steps.iteration(len(contexts), float(sum(contexts)), lambda: contexts, [])
    assert busy + comm == pytest.approx(iteration_cost(dep, decode_context=contexts).time,
                                        rel=1e-12)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b"])
def test_a_run_of_decode_steps_is_each_step_timed_alone(model: str) -> None:
    # KernelSteps.run's array over steps s against iteration_cost at contexts + s, step by step
    dep = _kernels(model)
    steps = KernelSteps(dep)
    contexts = [10, 120, 126, 700]
    busy, comm = steps.run(len(contexts), float(sum(contexts)), lambda: contexts, 12)
    for s in range(12):
        k = [c + s for c in contexts]
        assert busy[s] + comm == pytest.approx(iteration_cost(dep, decode_context=k).time,
                                               rel=1e-12)


def test_a_lone_request_is_timed_in_kernel_mode() -> None:
    # one request of 3,000 new tokens and 3 output tokens on one replica, alone: its first
    # iteration is its prefill, then two decodes on 3,000 and 3,001 cached tokens (hand
    # schedule: budget 8192 on an H100 holds the whole prompt); TTFT is the prefill's time
    dep = _kernels("llama-3.1-8b")
    result = simulate(table_trace([3000], [0], 3, arrival=[0.0]), [dep],
                      SimSettings(fast_forward=False))
    prefill = iteration_cost(dep, [3000], [0], []).time
    first = iteration_cost(dep, decode_context=[3000]).time
    second = iteration_cost(dep, decode_context=[3001]).time
    assert result.requests["ttft"][0] == pytest.approx(prefill, rel=1e-12)
    assert result.requests["e2e"][0] == pytest.approx(prefill + first + second, rel=1e-12)
    # the roofline gives another time: the mode is not ignored
    roof = simulate(table_trace([3000], [0], 3, arrival=[0.0]), [deployment(
        "llama-3.1-8b", accelerator="h100", registry=REG, compute_model="roofline")],
        SimSettings(fast_forward=False))
    assert not math.isclose(roof.requests["ttft"][0], prefill, rel_tol=1e-3)


def test_moe_routing_reaches_the_kernel_model() -> None:
    # a skewed routing prices the MoE layer from another table row: another TTFT, and the one
    # iteration_cost gives with that routing
    check_simulated_settings(_kernels("qwen3-30b-a3b", moe_routing="power_law_1.2"))
    ttft = {}
    for routing in ("balanced", "power_law_1.2"):
        dep = _kernels("qwen3-30b-a3b", moe_routing=routing)
        result = simulate(table_trace([4000], [0], 1, arrival=[0.0]), [dep])
        ttft[routing] = result.requests["ttft"][0]
        assert ttft[routing] == pytest.approx(iteration_cost(dep, [4000], [0], []).time,
                                              rel=1e-12)
    assert ttft["power_law_1.2"] != ttft["balanced"]


def _assert_same(fast: SimResult, slow: SimResult) -> None:
    """Per request, and per iteration (a run against the stepped rows it stands for:
    test_fast_forward's own comparison)."""
    r, s = fast.requests, slow.requests
    for key in EXACT_REQUEST_COLUMNS:
        assert np.array_equal(r[key], s[key]), key
    span = float(np.nanmax(s["finish"]))
    for key in ("first_token", "finish", "ttft", "e2e"):
        assert np.allclose(r[key], s[key], rtol=RTOL, atol=RTOL * span), key
    _same_iterations(fast.iterations, slow.iterations, span)
    assert fast.summary["fast_forward_runs"] > 0 and slow.summary["fast_forward_runs"] == 0


@pytest.mark.parametrize(("dep", "count"), [
    (paper_testbed(compute_model="kernels"), 200),  # full attention: HBM-bound decodes
    (_kernels("gpt-oss-20b"), 120),  # window layers: decodes one by one
])
def test_fast_forward_is_exact_in_kernel_mode(dep: Deployment, count: int) -> None:
    trace = mooncake(count)
    fast = simulate(trace, [dep] * 2, SimSettings(), check=True)
    slow = simulate(trace, [dep] * 2, SimSettings(fast_forward=False), check=True)
    _assert_same(fast, slow)


def test_fast_forward_is_exact_under_a_power_cap_in_kernel_mode() -> None:
    dep = paper_testbed(compute_model="kernels")
    trace = mooncake(150)
    fast = simulate(trace, [dep], SimSettings(power_cap=450.0))
    slow = simulate(trace, [dep], SimSettings(power_cap=450.0, fast_forward=False))
    _assert_same(fast, slow)
    assert fast.summary["power_max_w"] == pytest.approx(slow.summary["power_max_w"], rel=RTOL)
