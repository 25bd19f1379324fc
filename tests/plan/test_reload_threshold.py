"""The reload threshold equals the cost model's crossover found by brute force over every K."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kvroof
from kvroof.plan.reload_threshold import crossover, reload_threshold, threshold_grid

K_MAX = 131_071
CASES = [  # (model, hardware, settings): thresholds from 1 token to several thousand
    ("llama-3.1-8b", {"system": "paper-testbed", "tp": 1, "bandwidth_source": "sustained"}),
    ("llama-2-7b", {"system": "hgx-b200", "tp": 1}),
    ("qwen3-30b-a3b", {"system": "dgx-h100", "tp": 2, "engine": "vllm-0.12-offload"}),
    ("llama-3.1-70b", {"system": "dgx-h100", "tp": 8}),
]


def brute_force(dep: kvroof.Deployment, t: int, busy: int | None = None) -> int | None:
    """The smallest K from which loading beats recomputing for every larger K, scanning every K
    with kvroof.ttft itself."""
    dep = dataclasses.replace(dep, write_back=False)
    k = np.arange(1, K_MAX + 1, dtype=np.float64)
    tt = np.full_like(k, float(t))
    load_dep = again_dep = dep
    if busy is not None:
        block = dep.reuse_block_tokens or 1
        load_dep = dataclasses.replace(dep, iteration_tokens=np.maximum(busy, tt + k % block))
        again_dep = dataclasses.replace(dep, iteration_tokens=np.maximum(busy, tt + k))
    load = np.asarray(kvroof.ttft(load_dep, tt, k).ttft)
    again = np.asarray(kvroof.ttft(again_dep, tt + k, np.zeros_like(k)).ttft)
    losing = np.flatnonzero(again - load <= 0)
    if losing.size == 0:
        return 1
    if losing[-1] == k.size - 1:
        return None
    return int(k[losing[-1] + 1])


@pytest.mark.parametrize(("model", "where"), CASES, ids=[c[0] for c in CASES])
def test_threshold_is_the_cost_model_crossover(model: str, where: dict[str, object]) -> None:
    dep = kvroof.deployment(model, **where)  # type: ignore[arg-type]
    ts = [1, 8, 512, 4096]
    assert crossover(dep, ts, K_MAX) == [brute_force(dep, t) for t in ts]
    assert crossover(dep, ts, K_MAX, busy=8192) == [brute_force(dep, t, 8192) for t in ts]


def test_known_values() -> None:
    """Hand-checkable ends: a dense 70B model on a Gen5 link loads from the first token (its
    all-reduces make each recomputed token cost more than its load); Llama-2-7B's 512 kB of
    MHA KV a token on a B200 recomputes prefixes up to about 14K tokens. Both at the roofline,
    whose compute these hand figures use."""
    big = kvroof.deployment("llama-3.1-70b", system="dgx-h100", tp=8, compute_model="roofline")
    assert set(crossover(big, [1, 4096], K_MAX)) == {1}
    mha = kvroof.deployment("llama-2-7b", system="hgx-b200", tp=1, compute_model="roofline")
    assert 10_000 < crossover(mha, [4096], K_MAX)[0] < 20_000  # type: ignore[operator]


def test_table_and_setting() -> None:
    dep = kvroof.deployment("llama-3.1-8b", system="paper-testbed", tp=1,
                            bandwidth_source="sustained")
    table = reload_threshold(dep, max_cached=K_MAX, median_new=300, up_to=1024)
    assert table.new_tokens == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    assert table.setting == crossover(dep, [300], K_MAX)[0]
    assert table.alone == tuple(crossover(dep, list(table.new_tokens), K_MAX))
    assert table.overlap == "serial" and table.median_new == 300


def test_beyond_the_full_scan_the_grid_brackets_it() -> None:
    dep = kvroof.deployment("llama-2-7b", system="hgx-b200", tp=1)
    assert crossover(dep, [4096], 400_000) == crossover(dep, [4096], K_MAX)


def test_grid() -> None:
    grid = threshold_grid(K_MAX)
    assert grid[0] == 1 and grid[-1] == K_MAX and np.all(np.diff(grid) > 0)
    assert np.all(grid[:256] == np.arange(1, 257))
    assert threshold_grid(10).tolist() == list(range(1, 11))
