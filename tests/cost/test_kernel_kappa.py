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
    for form in ("roofline", "kernels"):  # each form is kappa_crit with that compute model
        alone = kappa_crit(dataclasses.replace(dep, compute_model=form), [64.0, 512.0])
        assert np.array_equal(forms[form], alone.kappa_crit), form
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


def test_a_fixed_cost_band_says_so_in_kernel_mode(registry: Registry) -> None:
    """deepseek-v3 with a 1 s copy latency and the whole request as one block: small K is
    transfer-bound (the fixed per-request cost), large K is not (expanded MLA adds more compute
    per cached token than it costs to load). The reason names the fixed cost, as the roofline's
    does (tests/cost/test_kappa.py::test_band_of_small_k_is_not_a_kappa_crit); the band is
    checked here by evaluating both sides at K = 1 and K = 1e8."""
    from kvroof.cost.granularity import Granularity

    dep = deployment("deepseek-v3", accelerator="h100", registry=registry, latency=1.0,
                     granularity=Granularity(None, "per-block"), compute_model="kernels")
    assert float(transfer_time(dep, 1.0, 1.0)) > float(compute_time(dep, 1.0, 1.0))
    assert float(transfer_time(dep, 1e8, 1.0)) < float(compute_time(dep, 1.0, 1e8))
    result = kappa_crit(dep, 1)
    assert result.kappa_crit == np.inf
    assert "fixed per-request transfer cost" in result.reason
    grid = kappa_crit(dep, np.array([1.0, 2.0]))
    assert all("fixed per-request transfer cost" in r for r in grid.reason)


def test_an_overflow_is_not_computable_in_kernel_mode(registry: Registry) -> None:
    """A latency of 1e300 s overflows the transfer at large K: the same one-line error as the
    roofline's (kappa.py), not numpy's overflow, also with numpy's warnings raised as errors
    (as the command line does)."""
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=registry, latency=1e300,
                     compute_model="kernels")
    with np.errstate(over="raise", invalid="raise"), \
            pytest.raises(KvroofError, match=r"kappa_crit: not computable for llama-3\.1-8b"):
        kappa_crit(dep, 512.0)


def _last_compute_bound(dep: Deployment, t: float, top: int) -> float:
    """The last integer K in [1, top) at which compute exceeds transfer, token by token (an
    independent brute force: one evaluation of each side at every K)."""
    ks = np.arange(1.0, float(top))
    below = np.flatnonzero(np.asarray(transfer_time(dep, ks, t))
                           < np.asarray(compute_time(dep, t, ks)))
    return float(ks[below[-1]]) if below.size else 0.0


@pytest.mark.parametrize(("model", "settings"), [
    # chunked attention (8,192-token chunks): both sides saw-tooth in K
    ("llama-4-scout-17b-16e", {"accelerator": "h100", "tp": 8}),
    ("llama-4-scout-17b-16e", {"system": "dgx-h100", "tp": 8}),
    ("llama-4-scout-17b-16e", {"accelerator": "h100", "tp": 8, "local_kv": "all"}),
    # sliding windows: a kink at the window's edge
    ("gemma-3-27b", {"accelerator": "h100"}),
    ("gpt-oss-120b", {"accelerator": "h100"}),
])
@pytest.mark.parametrize("busy", [None, 8192])
def test_chunked_and_window_kappa_is_exact_against_a_token_scan(
        registry: Registry, model: str, settings: dict[str, object], busy: int | None) -> None:
    """K* lies one token past the last compute-bound K of a brute-force scan of every K up to
    2 K* + 3 chunks (a log grid of 30 points a decade missed compute-bound teeth: llama-4-scout
    at TP 8 on h100, T = 64 gave 68,347 where the scan finds 74,516)."""
    dep = _dep(registry, model, settings, busy)
    t = np.array([64.0, 512.0])
    grid = kappa_crit(dep, t)
    for tt, k_star in zip(t, np.asarray(grid.crossover_tokens), strict=True):
        assert np.isfinite(k_star)
        last = _last_compute_bound(dep, float(tt), int(2 * k_star) + 3 * 8192)
        assert last < k_star <= last + 1, (float(tt), last, k_star)
        x = float(transfer_time(dep, float(k_star), float(tt)))
        assert x >= float(compute_time(dep, float(tt), float(k_star))) * (1 - 1e-12)
        assert kappa_crit(dep, float(tt)).crossover_tokens == pytest.approx(k_star, rel=1e-9)
