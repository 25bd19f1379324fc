"""LogCurve, the tables' interpolation along one axis (kernel mode's curves): the same values
as :func:`kvroof.kernels.interpolate.interpolate` on the grid it slices, on floats and arrays,
the end values held beyond the ends."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvroof.kernels.interpolate import LogCurve, interpolate
from kvroof.kernels.tables import KernelTableError

from .conftest import grid


def test_a_slice_matches_the_grid_interpolation() -> None:
    g = grid({"m": [1, 16, 256, 4096], "n": [1024, 4096], "k": [1024, 8192]},
             lambda m, n, k: 0.1 + 0.05 * np.log2(m) + 0.01 * np.log2(n / k) ** 2)
    points = g.points[0]
    for n, k in ((1024.0, 8192.0), (2000.0, 3000.0)):
        curve = LogCurve(points, interpolate(g, {"m": points, "n": n, "k": k}).values)
        x = np.array([1.0, 3.0, 16.0, 100.0, 1000.0, 4096.0, 2.5, 4000.0])
        expected = interpolate(g, {"m": x, "n": n, "k": k}).values
        np.testing.assert_allclose(curve(x), expected, rtol=1e-14)
        for value, want in zip(x, expected, strict=True):
            got = curve(float(value))
            assert type(got) is float and got == pytest.approx(want, rel=1e-14)
        assert curve(16.0) == interpolate(g, {"m": 16.0, "n": n, "k": k}).values


def test_ends_are_held_and_non_positive_points_take_the_first_value() -> None:
    curve = LogCurve([2.0, 8.0], [1.0, 3.0])
    assert (curve.low, curve.high) == (2.0, 8.0)
    assert curve(4.0) == pytest.approx(2.0)  # halfway in log space
    for x in (0.0, -1.0, 1.0, 2.0):
        assert curve(x) == 1.0
    assert curve(8.0) == 3.0 and curve(1e9) == 3.0
    np.testing.assert_array_equal(curve(np.array([0.0, 1.0, 2.0, 8.0, 16.0])),
                                  [1.0, 1.0, 1.0, 3.0, 3.0])
    assert math.isnan(curve(math.nan)) and np.isnan(curve(np.array([math.nan])))[0]
    single = LogCurve([4.0], [0.5])
    assert single(1.0) == 0.5 and single(100.0) == 0.5
    np.testing.assert_array_equal(single(np.array([1.0, 100.0])), [0.5, 0.5])
    with pytest.raises(KernelTableError, match="strictly increasing"):
        LogCurve([2.0, 2.0], [1.0, 3.0])
