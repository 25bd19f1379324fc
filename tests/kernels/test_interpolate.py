"""Multilinear interpolation in log space, checked against an independent brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from kvroof.kernels.interpolate import interpolate
from kvroof.kernels.tables import Grid, KernelTableError
from tests.kernels.conftest import grid

AXES = {"a": [1.0, 4.0, 16.0, 1024.0], "b": [2.0, 3.0], "c": [10.0, 100.0, 1000.0]}


def random_grid(seed: int, measured: np.ndarray | None = None) -> Grid:
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.01, 1.5, size=(4, 2, 3))
    return grid(AXES, lambda a, b, c: values, measured)


def brute_force(g: Grid, point: dict[str, float]) -> tuple[float, bool]:
    """Sum over all 2^d corners of the enclosing cell, weights from log-space fractions,
    each coordinate clamped into its axis: written without the module's code."""
    per_axis = []
    outside = False
    for name, points in zip(g.axes, g.points, strict=True):
        x = point[name]
        logs = [math.log(p) for p in points]
        lx = math.log(x)
        if lx < logs[0] - 1e-12 or lx > logs[-1] + 1e-12:
            outside = True
        lx = min(max(lx, logs[0]), logs[-1])
        if len(logs) == 1:
            per_axis.append([(0, 1.0)])
            continue
        j = max(i for i in range(len(logs) - 1) if logs[i] <= lx)
        t = (lx - logs[j]) / (logs[j + 1] - logs[j])
        per_axis.append([(j, 1.0 - t), (j + 1, t)])
    total = 0.0
    for combo in itertools.product(*per_axis):
        weight = math.prod(w for _, w in combo)
        total += weight * g.values[tuple(i for i, _ in combo)]
    return total, outside


def test_exact_at_every_grid_point() -> None:
    g = random_grid(1)
    mesh = np.meshgrid(*g.points, indexing="ij")
    result = interpolate(g, dict(zip(g.axes, mesh, strict=True)))
    np.testing.assert_array_equal(result.values, g.values)
    assert not result.extrapolated.any()
    assert not result.unmeasured.any()
    # one point at a time (the scalar path) too
    for index in itertools.product(*(range(len(p)) for p in g.points)):
        point = {a: float(g.points[k][i]) for k, (a, i) in enumerate(zip(g.axes, index,
                                                                        strict=True))}
        assert interpolate(g, point).values == g.values[index]


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force_inside_and_outside(seed: int) -> None:
    g = random_grid(seed)
    rng = np.random.default_rng(100 + seed)
    n = 400
    # log-uniform points from a decade below to a decade above each axis
    pts = {a: np.exp(rng.uniform(math.log(p[0] / 10), math.log(p[-1] * 10), n))
           for a, p in AXES.items()}
    result = interpolate(g, pts)
    for i in range(n):
        point = {a: float(v[i]) for a, v in pts.items()}
        want, outside = brute_force(g, point)
        assert result.values[i] == pytest.approx(want, rel=1e-12)
        assert bool(result.extrapolated[i]) == outside
        scalar = interpolate(g, point)
        assert float(scalar.values) == pytest.approx(want, rel=1e-12)
        assert bool(scalar.extrapolated) == outside


def test_linear_in_log_space_between_points() -> None:
    g = grid({"x": [1.0, 16.0, 256.0]}, lambda x: np.array([0.2, 0.6, 0.4]))
    x = 16.0 ** np.linspace(0, 2, 33)
    values = interpolate(g, {"x": x}).values
    expected = np.interp(np.log(x), np.log([1.0, 16.0, 256.0]), [0.2, 0.6, 0.4])
    np.testing.assert_allclose(values, expected, rtol=1e-12)
    # second differences vanish inside each segment: linear in log x
    first = values[:17]
    np.testing.assert_allclose(np.diff(first, 2), 0.0, atol=1e-12)


def test_monotone_grid_gives_monotone_values() -> None:
    g = grid({"m": [1, 8, 64, 512], "n": [128, 4096]},
             lambda m, n: np.log1p(m) / 10 + np.log(n) / 100)
    m = np.geomspace(0.5, 1000, 300)
    for n in (100.0, 300.0, 4096.0, 9000.0):
        values = interpolate(g, {"m": m, "n": n}).values
        assert np.all(np.diff(values) >= -1e-15)


def test_outside_holds_the_boundary_and_says_on_which_axis() -> None:
    g = random_grid(3)
    result = interpolate(g, {"a": [0.5, 2048.0, 4.0], "b": 2.5, "c": [10.0, 10.0, 5000.0]})
    at_low = interpolate(g, {"a": 1.0, "b": 2.5, "c": 10.0}).values
    at_high = interpolate(g, {"a": 1024.0, "b": 2.5, "c": 10.0}).values
    assert result.values[0] == pytest.approx(float(at_low))
    assert result.values[1] == pytest.approx(float(at_high))
    assert result.outside["a"].tolist() == [True, True, False]
    assert result.outside["c"].tolist() == [False, False, True]
    assert not result.outside["b"].any()
    assert result.extrapolated.tolist() == [True, True, True]


def test_unmeasured_cells_are_reported_only_when_they_carry_weight() -> None:
    measured = np.ones((4, 2, 3), dtype=bool)
    measured[1, 0, 1] = False  # a=4, b=2, c=100
    g = random_grid(4, measured)
    on_it = interpolate(g, {"a": 4.0, "b": 2.0, "c": 100.0})
    beside = interpolate(g, {"a": 4.0, "b": 3.0, "c": 100.0})
    between = interpolate(g, {"a": [2.0, 8.0, 300.0], "b": 2.0, "c": 50.0})
    assert bool(on_it.unmeasured) and not bool(beside.unmeasured)
    assert between.unmeasured.tolist() == [True, True, False]


def test_broadcasting_and_shapes() -> None:
    g = random_grid(5)
    result = interpolate(g, {"a": np.full((2, 3), 5.0), "b": [2.0, 2.5, 3.0], "c": 20.0})
    assert result.values.shape == (2, 3)
    assert result.outside["c"].shape == (2, 3)
    scalar = interpolate(g, {"a": 5.0, "b": 2.5, "c": 20.0})
    assert scalar.values.shape == ()
    np.testing.assert_allclose(result.values[1, 1], scalar.values)


def test_bad_coordinates() -> None:
    g = random_grid(6)
    with pytest.raises(KernelTableError, match="positive"):
        interpolate(g, {"a": [1.0, 0.0], "b": 2.0, "c": 10.0})
    with pytest.raises(KernelTableError, match="positive"):
        interpolate(g, {"a": float("nan"), "b": 2.0, "c": 10.0})
    with pytest.raises(KernelTableError, match="needs c"):
        interpolate(g, {"a": 1.0, "b": 2.0})
