"""Kernel-mode compute never falls as a request grows: a kernel for fewer rows can always run
padded to more rows, so an op's time is non-decreasing in its token count (checked by brute
force over a dense grid of sizes, for several models and accelerators), and so is a prefill's
compute in T at a fixed total of tokens (what load_split's exactness needs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvroof.cost.compute import compute_time
from kvroof.cost.deployment import deployment
from kvroof.cost.kernel_model import kernel_model
from kvroof.specs.registry import Registry

CASES = [
    ("llama-3.1-70b", {"system": "paper-testbed"}),
    ("qwen3-235b-a22b", {"accelerator": "h100"}),
    ("qwen3-235b-a22b", {"system": "dgx-h100", "tp": 8}),
    ("deepseek-v3", {"system": "hgx-h200", "tp": 8}),
    ("gpt-oss-120b", {"accelerator": "h100"}),
    ("llama-3.1-8b", {"accelerator": "a100-sxm"}),
]
M = np.unique(np.round(np.geomspace(1.0, 200_000.0, 4000)))  # every size to 16, then ~0.3%


@pytest.mark.parametrize(("model", "settings"), CASES)
def test_every_per_token_op_is_non_decreasing_in_its_tokens(
        registry: Registry, model: str, settings: dict[str, object]) -> None:
    """Brute force: each per-token op (GEMM, MoE layer, all-reduce, element-wise) at every
    size of a dense grid; its time at a larger size is never below its time at a smaller one."""
    dep = deployment(model, registry=registry, compute_model="kernels",
                     **settings)  # type: ignore[arg-type]
    km = kernel_model(dep)
    rates = km.rates(1.0)
    for top in km.token_ops:
        times = np.asarray(km.op_time(top, M, rates), dtype=np.float64)
        steps = np.diff(times)
        worst = int(np.argmin(steps))
        assert steps[worst] >= 0, (top.op.label, M[worst], M[worst + 1], times[worst],
                                   times[worst + 1])
        scalar = km.op_time(top, float(M[worst]), rates)  # the float path agrees
        assert scalar == pytest.approx(times[worst], rel=1e-12)


@pytest.mark.parametrize(("model", "settings"), CASES[:4])
def test_prefill_compute_is_non_decreasing_in_new_tokens(
        registry: Registry, model: str, settings: dict[str, object]) -> None:
    """More of a fixed total new (fewer cached): at least as much compute, token by token over
    T + K = 204 and T + K = 5000 (llama-3.1-70b on paper-testbed took 9.9 ms at T = 4, K = 200
    but less at T = 6, K = 198 before the fix), alone and inside an iteration."""
    dep = deployment(model, registry=registry, compute_model="kernels",
                     **settings)  # type: ignore[arg-type]
    for total in (204.0, 5000.0):
        t = np.arange(1.0, total + 1.0)
        for busy in (None, 8192.0):
            run = dataclasses.replace(dep, iteration_tokens=busy)
            times = np.asarray(compute_time(run, t, total - t), dtype=np.float64)
            assert np.all(np.diff(times) >= -1e-15 * times[1:]), (total, busy)
