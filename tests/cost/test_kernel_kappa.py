"""kappa_crit in kernel mode: a bracketed root of transfer(K) = compute(T, K), vectorized over T,
in both regimes; checked at the root and against a token-by-token scan; the paper and roofline
forms beside it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvroof.cost.compute import compute_time
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, kappa_forms, max_new_tokens_for_crossover
from kvroof.cost.kernel_kappa import METHOD
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

CASES = [
    ("qwen3-235b-a22b", {"system": "dgx-h100", "tp": 8}),
    ("qwen3-235b-a22b", {"system": "hgx-h200", "tp": 8}),
    ("llama-3.1-70b", {"system": "dgx-h100", "tp": 4}),
    ("deepseek-v3", {"system": "hgx-h200", "tp": 8}),
    ("gpt-oss-120b", {"accelerator": "h100"}),  # sliding-window layers
]


def _dep(registry: Registry, model: str, settings: dict[str, object],
         busy: int | None) -> Deployment:
    return deployment(model, registry=registry, compute_model="kernels",
                      iteration_tokens=busy, **settings)  # type: ignore[arg-type]


def _scan(dep: Deployment, t: float, top: float) -> float:
    """The smallest integer K from which transfer >= compute up to ``top`` (token by token)."""
    ks = np.arange(0.0, top + 1.0)
    diff = np.asarray(transfer_time(dep, ks, t)) - np.asarray(compute_time(dep, t, ks))
    below = np.flatnonzero(diff < 0)
    return 0.0 if below.size == 0 else float(below[-1] + 1)


@pytest.mark.parametrize(("model", "settings"), CASES)
@pytest.mark.parametrize("busy", [None, 8192])
def test_root_is_where_transfer_meets_compute_and_matches_a_scan(
        registry: Registry, model: str, settings: dict[str, object], busy: int | None) -> None:
    dep = _dep(registry, model, settings, busy)
    t = np.array([64.0, 512.0])
    result = kappa_crit(dep, t)
    assert result.method == METHOD
    for tt, k_star in zip(t, np.asarray(result.crossover_tokens), strict=True):
        if not np.isfinite(k_star):
            far = 1e7
            assert float(transfer_time(dep, far, tt)) < float(compute_time(dep, float(tt), far))
            continue
        x = float(transfer_time(dep, float(k_star), float(tt)))
        c = float(compute_time(dep, float(tt), float(k_star)))
        assert x == pytest.approx(c, rel=1e-7)
        found = _scan(dep, float(tt), 2 * k_star + 1000)
        assert found - 1 <= k_star <= found
        scalar = kappa_crit(dep, float(tt))
        assert scalar.crossover_tokens == pytest.approx(k_star, rel=1e-9)
        assert scalar.kappa_crit == pytest.approx(k_star / tt, rel=1e-9)


def test_a_grid_of_t_is_one_call(registry: Registry) -> None:
    dep = _dep(registry, "qwen3-235b-a22b", {"system": "dgx-h100", "tp": 8}, None)
    t = np.geomspace(16, 16384, 40)
    grid = kappa_crit(dep, t)
    assert grid.kappa_crit.shape == t.shape
    for i in (0, 13, 27, 39):
        one = kappa_crit(dep, float(t[i]))
        assert (one.kappa_crit == pytest.approx(grid.kappa_crit[i], rel=1e-9)
                if np.isfinite(one.kappa_crit) else np.isinf(grid.kappa_crit[i]))
    assert np.any(grid.never_transfer_bound) and not np.all(grid.never_transfer_bound)
    assert all(reason for reason, never in zip(grid.reason, grid.never_transfer_bound,
                                               strict=True) if never)


def test_array_settings_broadcast(registry: Registry) -> None:
    dep = deployment("llama-3.1-70b", system="dgx-h100", tp=4, compute_model="kernels",
                     bandwidth=np.array([15e9, 50e9])[:, None], registry=registry)
    grid = kappa_crit(dep, np.array([64.0, 512.0]))
    assert grid.kappa_crit.shape == (2, 2)
    slow = dataclasses.replace(dep, bandwidth=15e9)
    assert grid.kappa_crit[0, 1] == pytest.approx(float(kappa_crit(slow, 512.0).kappa_crit),
                                                  rel=1e-9)
    assert np.all(grid.kappa_crit[1] > grid.kappa_crit[0])  # a faster link needs more K


def test_three_forms_side_by_side(registry: Registry) -> None:
    dep = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=registry)
    forms = kappa_forms(dep, [64.0, 512.0])
    roofline = kappa_crit(dep, [64.0, 512.0]).kappa_crit
    assert np.array_equal(forms["roofline"], roofline)  # the default is the roofline form
    assert forms["paper"] == pytest.approx(14.55, rel=1e-3)
    assert np.all(forms["kernels"] >= forms["roofline"])  # measured kernels are slower
    with pytest.raises(KvroofError, match="not affine"):
        kappa_crit(dataclasses.replace(dep, compute_model="kernels"), 64.0, "closed-form")


def test_largest_t_with_a_crossover(registry: Registry) -> None:
    dep = _dep(registry, "qwen3-235b-a22b", {"system": "dgx-h100", "tp": 8}, None)
    top = float(max_new_tokens_for_crossover(dep))
    assert 100 < top < 1e5
    assert np.isfinite(kappa_crit(dep, 0.9 * top).kappa_crit)
    assert np.isinf(kappa_crit(dep, 1.1 * top).kappa_crit)
