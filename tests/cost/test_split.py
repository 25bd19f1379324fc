"""Load part of a cached prefix, recompute the rest: the bisection against a brute-force scan
over every whole number of loaded tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvroof.cost.deployment import deployment
from kvroof.cost.split import balanced_split, load_split
from kvroof.cost.timing import compute_time
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def _brute(dep, t: int, k: int) -> float:  # type: ignore[no-untyped-def]
    """min over L = 0..K of max(load(L), compute(T + K - L on L)), every L evaluated."""
    loaded = np.arange(k + 1)
    no_save = dataclasses.replace(dep, write_back=False)
    worst = np.maximum(transfer_time(no_save, loaded), compute_time(dep, t + k - loaded, loaded))
    return float(worst.min())


@pytest.mark.parametrize(("model", "system", "tp"), [
    ("llama-3.1-70b", "paper-testbed", 8),   # dense, GQA
    ("qwen3-235b-a22b", "dgx-h100", 8),      # MoE: HBM-bound at small T
    ("gpt-oss-20b", "gh200", 1),             # sliding-window layers (not affine in L)
])
def test_split_equals_brute_force(model: str, system: str, tp: int) -> None:
    dep = deployment(model, system=system, registry=REG, tp=tp, bandwidth_source="peak")
    no_save = dataclasses.replace(dep, write_back=False)
    cases = [(16, 3000), (128, 4000), (1024, 2500), (4, 200), (2000, 100)]
    t = np.array([c[0] for c in cases])
    k = np.array([c[1] for c in cases])
    split = load_split(dep, t, k)
    for (ti, ki), li in zip(cases, split, strict=True):
        ours = max(float(transfer_time(no_save, li)),
                   float(compute_time(dep, ti + ki - li, li)))
        assert ours == pytest.approx(_brute(dep, ti, ki), rel=1e-12)
        assert 0 <= li <= ki


def test_loading_everything_when_the_link_keeps_up() -> None:
    """GH200's NVLink-C2C loads 3,000 cached tokens of Llama-3.1-8B faster than a 2,048-token
    prefill on top of them computes: nothing is recomputed."""
    dep = deployment("llama-3.1-8b", system="gh200", registry=REG)
    no_save = dataclasses.replace(dep, write_back=False)
    assert float(transfer_time(no_save, 3000)) < float(compute_time(dep, 2048, 3000))
    assert load_split(dep, 2048, 3000).tolist() == [3000]


def test_affine_costs_meet_where_the_lines_cross() -> None:
    """Load 2 s per 1,000 tokens, compute 10 s minus 3 s per 1,000 tokens: the lines cross at
    L = 10 / 5 x 1000 = 2,000 tokens (by hand); the bisection finds it exactly."""
    def load(loaded: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        return 0.002 * loaded

    def compute(loaded: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        return 10.0 - 0.003 * loaded

    assert balanced_split(load, compute, [3000, 1000, 0]).tolist() == [2000, 1000, 0]


def test_bad_input() -> None:
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=REG)
    with pytest.raises(KvroofError, match="cached_tokens: must not be negative"):
        load_split(dep, 10, -1)
    with pytest.raises(KvroofError, match="whole tokens"):
        balanced_split(lambda x: x, lambda x: x, [1.5])
