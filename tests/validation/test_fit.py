"""The copy-size fit: it recovers known parameters, reproduces each point it was fitted on within
the error it states, has the right limits, and the engine profiles carry its numbers."""

from __future__ import annotations

import pytest

from kvroof.cost.copy_size import delivered_bandwidth
from kvroof.specs.registry import Registry
from kvroof.validation.cases import load_cases
from kvroof.validation.fit import (
    DEFAULT_OVERHEAD,
    FitPoint,
    fit_copy_methods,
    fit_method,
    fit_points,
    leave_one_source_out,
)

# The fit's error as stated in docs/validation.md and in the engine profiles' notes: every
# point it was fitted on within this factor of its measurement, either way (kvroof validate
# prints the same figures).
STATED_MAX_ERROR = {"copy-engine": 0.41, "copy-kernel": 0.31}


@pytest.fixture(scope="module")
def points(registry: Registry) -> list[FitPoint]:
    return fit_points(load_cases(), registry)


def test_fit_recovers_known_parameters() -> None:
    """Points made from overhead 3 us and share 0.7 of a 63 GB/s link give those back."""
    sizes = [256.0, 4096.0, 65536.0, 2**20, 2**24, 2**29]
    made = [FitPoint(f"p{i}", "synthetic", "copy-engine", s, 63e9, 3e-6 + s / (0.7 * 63e9))
            for i, s in enumerate(sizes)]
    fit = fit_method("copy-engine", made)
    assert fit.overhead == pytest.approx(3e-6, rel=0.01)
    assert fit.share == pytest.approx(0.7, rel=0.005)
    assert fit.max_error < 0.01


def test_overhead_and_share_are_fitted_only_where_points_determine_them() -> None:
    large = [FitPoint("big", "s", "copy-kernel", 2**29, 63e9, 2**29 / 40e9)]
    fit = fit_method("copy-kernel", large)
    assert not fit.overhead_fitted and fit.overhead == DEFAULT_OVERHEAD
    assert fit.share_fitted and fit.share == pytest.approx(40 / 63, rel=0.005)
    none = fit_method("copy-engine", large)
    assert not none.share_fitted and none.share == 1.0 and none.points == ()


@pytest.mark.parametrize("method", sorted(STATED_MAX_ERROR))
def test_each_fitted_point_within_the_stated_error(points: list[FitPoint], method: str) -> None:
    fit = fit_copy_methods(points)[method]
    assert len(fit.points) >= 3
    for point, ratio in zip(fit.points, fit.ratios, strict=True):
        assert max(ratio, 1 / ratio) - 1 <= STATED_MAX_ERROR[method], point.case_id
    assert fit.max_error <= STATED_MAX_ERROR[method]


@pytest.mark.parametrize("method", sorted(STATED_MAX_ERROR))
def test_limits_of_the_fitted_model(points: list[FitPoint], method: str) -> None:
    """Large copies approach the share of the link, small ones are overhead-bound."""
    fit = fit_copy_methods(points)[method]
    link = 63e9
    assert delivered_bandwidth(1e13, fit.overhead, fit.share * link) == pytest.approx(
        fit.share * link, rel=1e-3)
    assert delivered_bandwidth(8.0, fit.overhead, fit.share * link) == pytest.approx(
        8.0 / fit.overhead, rel=1e-3)
    assert 0 < fit.share <= 1


def test_engine_profiles_carry_the_fitted_numbers(points: list[FitPoint],
                                                  registry: Registry) -> None:
    """Every field an engine lists as fitted equals the fit of its copy method (to the three
    significant digits the profile prints); the others are the default the fit would use."""
    fits = fit_copy_methods(points)
    seen = set()
    for engine in registry.all("engine"):
        fit = fits[engine.copy_method]  # type: ignore[union-attr]
        for field in engine.fitted:  # type: ignore[union-attr]
            value = getattr(engine, field)
            expected = fit.params()[field]
            assert value == pytest.approx(expected, rel=0.005), (engine.name, field)
            seen.add((engine.copy_method, field))  # type: ignore[union-attr]
        if "copy_overhead" not in engine.fitted:  # type: ignore[union-attr]
            assert engine.copy_overhead == DEFAULT_OVERHEAD  # type: ignore[union-attr]
    assert ("copy-engine", "link_share") in seen and ("copy-kernel", "link_share") in seen


def test_leave_one_source_out_drops_each_source(points: list[FitPoint]) -> None:
    held = leave_one_source_out(points)
    assert set(held) == {p.source for p in points}
    for source, fits in held.items():
        for fit in fits.values():
            assert source not in fit.sources
    # the only small copy-engine point is FlexKV's: without it the overhead is not fitted
    without = held["flexkv-pr193-h20"]["copy-engine"]
    assert not without.overhead_fitted and without.overhead == DEFAULT_OVERHEAD
